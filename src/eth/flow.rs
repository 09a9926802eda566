//! Receive steering by destination MAC (docs/ethernet-facts.md §1.9): a NIC receive flow table
//! (`table_type` 0, level 0, 16 entries) made the root of NIC receive, whose entries forward
//! (action FWD_DEST) to one TIR. Up to three flow groups, as an [`RxFilter`] asks:
//!
//! * the listed addresses (and broadcast), each an entry of a group matching the outer
//!   destination MAC exactly (`match_criteria_enable` outer headers, all 48 bits);
//! * all multicast: one entry of a group matching the group bit alone (bit 40 of the
//!   destination MAC, the first byte's lowest bit), value set;
//! * promiscuous: one entry of a group with no match criteria at all (`match_criteria_enable`
//!   0), which every frame matches.
//!
//! Frames matching no entry miss the table and are dropped (the device counts them). Torn down
//! in reverse: the root disconnected, the entries, the groups, the table.

use mlx5_ifc::prm::flow::{
    CreateFlowGroupIn, CreateFlowGroupOut, CreateFlowTableIn, CreateFlowTableOut, DeleteFteIn,
    DeleteFteOut, DestFormatStruct as Dest, DestroyFlowGroupIn, DestroyFlowGroupOut,
    DestroyFlowTableIn, DestroyFlowTableOut, FlowContext, FlowTableContext as Ftc, FteMatchParam,
    FteMatchSetLyr24 as L24, SetFlowTableRootIn, SetFlowTableRootOut, SetFteIn, SetFteOut,
};
use mlx5_ifc::{Opcode, ViewMut};

use super::rules::FlowTable;
use super::tir::Tir;
use crate::error::{Error, Result};
use crate::fw::cmd::{run, run_create};
use crate::fw::queue::{PasList, QueueBuf};
use crate::platform::Platform;
use crate::Device;

/// `table_type` NIC receive.
const NIC_RX: u64 = 0;
/// `action` FWD_DEST.
const FWD_DEST: u64 = 0x4;
/// `destination_type`: a flow table, a TIR.
const DEST_TABLE: u64 = 0x1;
const DEST_TIR: u64 = 0x2;
/// `match_criteria_enable` bit 0: outer headers.
const OUTER: u64 = 1;
/// SET_FLOW_TABLE_ROOT `op_mod` 1: disconnect the root.
const DISCONNECT: u16 = 1;
/// log2 of the table's entries.
const LOG_SIZE: u64 = 4;
/// Addresses an [`RxFilter`] may list (the table's 16 entries, less broadcast, all-multicast
/// and promiscuous).
pub const MAX_MACS: usize = 13;
/// The broadcast address.
pub const BROADCAST: [u8; 6] = [0xff; 6];

/// Which frames NIC receive steers to the TIR.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RxFilter<'m> {
    /// Destination MACs matched exactly (unicast or multicast), at most [`MAX_MACS`].
    pub macs: &'m [[u8; 6]],
    /// Frames to ff:ff:ff:ff:ff:ff (ARP requests).
    pub broadcast: bool,
    /// Every multicast (and broadcast) frame: the group bit of the destination MAC set.
    pub all_multicast: bool,
    /// Every frame, whatever its destination.
    pub promiscuous: bool,
}

/// The destination list after SET_FLOW_TABLE_ENTRY's fixed part: one TIR.
struct Dests([u8; 8]);

impl PasList for Dests {
    fn npages(&self) -> usize {
        1
    }
    fn write_pas(&self, dst: &mut [u8]) -> Result<()> {
        let limit = dst.len();
        dst.get_mut(..8)
            .ok_or(Error::Capacity {
                what: "flow destination list",
                limit,
            })?
            .copy_from_slice(&self.0);
        Ok(())
    }
}

/// What a group matches: the destination MAC's 48 bits, its group bit, or nothing.
#[derive(Clone, Copy)]
enum Criteria {
    Dmac,
    GroupBit,
    All,
}

/// A MAC (or [`RxFilter`]) steered to a TIR, as the root of NIC receive.
#[derive(Debug)]
pub struct MacSteering<'d, P: Platform> {
    dev: &'d Device<P>,
    table: u32,
    /// The groups made.
    groups: heapless::Vec<u32, 3>,
    /// The flow indices of the entries set.
    entries: heapless::Vec<u32, 16>,
    /// Whether the table was made the root.
    rooted: bool,
    alive: bool,
}

fn refuse(field: &'static str, requested: u64, max: u64, limit: &'static str) -> Error {
    Error::InvalidArgument {
        op: "create_steering",
        field,
        requested,
        max,
        limit,
    }
}

fn mac_words(mac: [u8; 6]) -> (u64, u64) {
    (
        u64::from(u32::from_be_bytes([mac[0], mac[1], mac[2], mac[3]])),
        u64::from(u16::from_be_bytes([mac[4], mac[5]])),
    )
}

impl<'d, P: Platform> MacSteering<'d, P> {
    /// Frames to `mac` go to `tir`; the table becomes NIC receive's root.
    pub fn create(dev: &'d Device<P>, mac: [u8; 6], tir: &Tir<'_, P>) -> Result<Self> {
        Self::with_filter(
            dev,
            &RxFilter {
                macs: &[mac],
                ..RxFilter::default()
            },
            tir,
        )
    }

    /// Frames `filter` accepts go to `tir`; the table becomes NIC receive's root. Refused by
    /// name if the filter accepts nothing or lists more than [`MAX_MACS`] addresses.
    pub fn with_filter(
        dev: &'d Device<P>,
        filter: &RxFilter<'_>,
        tir: &Tir<'_, P>,
    ) -> Result<Self> {
        Self::build(dev, filter, DEST_TIR, tir.tirn())
    }

    /// Frames `filter` accepts go on to `table` (a flow table of a higher level: a port's
    /// traffic-type table in front of its RSS TIRs); this table becomes NIC receive's root.
    pub fn with_filter_to_table(
        dev: &'d Device<P>,
        filter: &RxFilter<'_>,
        table: &FlowTable<'_, P>,
    ) -> Result<Self> {
        Self::build(dev, filter, DEST_TABLE, table.id())
    }

    fn build(dev: &'d Device<P>, filter: &RxFilter<'_>, dest_type: u64, dest: u32) -> Result<Self> {
        if filter.macs.len() > MAX_MACS {
            return Err(refuse(
                "macs",
                filter.macs.len() as u64,
                MAX_MACS as u64,
                "addresses of the steering table (16 entries)",
            ));
        }
        if filter.macs.is_empty()
            && !filter.broadcast
            && !filter.all_multicast
            && !filter.promiscuous
        {
            return Err(refuse(
                "filter",
                0,
                0,
                "an address, broadcast, all-multicast or promiscuous",
            ));
        }
        let table = dev
            .with_cmd(|cmd, p| {
                run::<CreateFlowTableIn, CreateFlowTableOut, _, _>(
                    cmd,
                    p,
                    Opcode::CreateFlowTable,
                    0,
                    |v| {
                        v.set(CreateFlowTableIn::TABLE_TYPE, NIC_RX)?;
                        v.nested_mut(CreateFlowTableIn::FLOW_TABLE_CONTEXT)
                            .set(Ftc::LEVEL, 0)?
                            .set(Ftc::LOG_SIZE, LOG_SIZE)?;
                        Ok(())
                    },
                )
            })?
            .get(CreateFlowTableOut::TABLE_ID) as u32;
        let mut s = MacSteering {
            dev,
            table,
            groups: heapless::Vec::new(),
            entries: heapless::Vec::new(),
            rooted: false,
            alive: true,
        };
        let mut d = [0u8; 8];
        ViewMut::<Dest>::new(&mut d)?
            .set(Dest::DESTINATION_TYPE, dest_type)?
            .set(Dest::DESTINATION_ID, u64::from(dest))?;
        let dests = Dests(d);
        // The exact addresses (broadcast among them), then the group bit, then everything.
        let mut exact: heapless::Vec<[u8; 6], 16> = heapless::Vec::new();
        for m in filter
            .macs
            .iter()
            .chain(filter.broadcast.then_some(&BROADCAST))
        {
            if !exact.contains(m) {
                let _ = exact.push(*m);
            }
        }
        let mut index = 0u32;
        if !exact.is_empty() {
            let g = s.group(Criteria::Dmac, index, index + exact.len() as u32 - 1)?;
            for m in &exact {
                s.entry(g, index, Some(*m), &dests)?;
                index += 1;
            }
        }
        if filter.all_multicast {
            let g = s.group(Criteria::GroupBit, index, index)?;
            s.entry(g, index, Some([1, 0, 0, 0, 0, 0]), &dests)?;
            index += 1;
        }
        if filter.promiscuous {
            let g = s.group(Criteria::All, index, index)?;
            s.entry(g, index, None, &dests)?;
        }
        dev.with_cmd(|cmd, p| {
            run::<SetFlowTableRootIn, SetFlowTableRootOut, _, _>(
                cmd,
                p,
                Opcode::SetFlowTableRoot,
                0,
                |v| {
                    v.set(SetFlowTableRootIn::TABLE_TYPE, NIC_RX)?
                        .set(SetFlowTableRootIn::TABLE_ID, u64::from(table))?;
                    Ok(())
                },
            )
        })?;
        s.rooted = true;
        Ok(s)
    }

    /// CREATE_FLOW_GROUP over entries `first..=last` matching `c`.
    fn group(&mut self, c: Criteria, first: u32, last: u32) -> Result<u32> {
        let table = self.table;
        let out = self.dev.with_cmd(|cmd, p| {
            run_create::<CreateFlowGroupIn, CreateFlowGroupOut, _, _, QueueBuf>(
                cmd,
                p,
                Opcode::CreateFlowGroup,
                None,
                |v| {
                    v.set(CreateFlowGroupIn::TABLE_TYPE, NIC_RX)?
                        .set(CreateFlowGroupIn::TABLE_ID, u64::from(table))?
                        .set(CreateFlowGroupIn::START_FLOW_INDEX, u64::from(first))?
                        .set(CreateFlowGroupIn::END_FLOW_INDEX, u64::from(last))?;
                    let (hi, lo) = match c {
                        Criteria::Dmac => (0xffff_ffff, 0xffff),
                        Criteria::GroupBit => (0x0100_0000, 0),
                        Criteria::All => return Ok(()),
                    };
                    v.set(CreateFlowGroupIn::MATCH_CRITERIA_ENABLE, OUTER)?;
                    v.nested_mut(CreateFlowGroupIn::MATCH_CRITERIA)
                        .nested_mut(FteMatchParam::OUTER_HEADERS)
                        .set(L24::DMAC_47_16, hi)?
                        .set(L24::DMAC_15_0, lo)?;
                    Ok(())
                },
            )
        })?;
        let g = out.get(CreateFlowGroupOut::GROUP_ID) as u32;
        let _ = self.groups.push(g);
        Ok(g)
    }

    /// SET_FLOW_TABLE_ENTRY `index` in group `g`: destination MAC `mac` (none: the group
    /// matches everything), forwarded to the TIR.
    fn entry(&mut self, g: u32, index: u32, mac: Option<[u8; 6]>, dests: &Dests) -> Result<()> {
        let table = self.table;
        self.dev.with_cmd(|cmd, p| {
            run_create::<SetFteIn, SetFteOut, _, _, Dests>(
                cmd,
                p,
                Opcode::SetFlowTableEntry,
                Some(dests),
                |v| {
                    v.set(SetFteIn::TABLE_TYPE, NIC_RX)?
                        .set(SetFteIn::TABLE_ID, u64::from(table))?
                        .set(SetFteIn::FLOW_INDEX, u64::from(index))?;
                    let mut c = v.nested_mut(SetFteIn::FLOW_CONTEXT);
                    c.set(FlowContext::GROUP_ID, u64::from(g))?
                        .set(FlowContext::ACTION, FWD_DEST)?
                        .set(FlowContext::DESTINATION_LIST_SIZE, 1)?;
                    if let Some(mac) = mac {
                        let (hi, lo) = mac_words(mac);
                        c.nested_mut(FlowContext::MATCH_VALUE)
                            .nested_mut(FteMatchParam::OUTER_HEADERS)
                            .set(L24::DMAC_47_16, hi)?
                            .set(L24::DMAC_15_0, lo)?;
                    }
                    Ok(())
                },
            )
        })?;
        let _ = self.entries.push(index);
        Ok(())
    }

    /// The root disconnected, then the entries, the groups and the table destroyed.
    pub fn destroy(mut self) -> Result<()> {
        self.alive = false;
        self.teardown()
    }

    fn teardown(&self) -> Result<()> {
        let (dev, table) = (self.dev, self.table);
        let mut r: Result<()> = Ok(());
        let mut keep = |x: Result<()>| {
            if r.is_ok() {
                r = x;
            }
        };
        if self.rooted {
            keep(
                dev.with_cmd(|cmd, p| {
                    run::<SetFlowTableRootIn, SetFlowTableRootOut, _, _>(
                        cmd,
                        p,
                        Opcode::SetFlowTableRoot,
                        DISCONNECT,
                        |v| {
                            v.set(SetFlowTableRootIn::TABLE_TYPE, NIC_RX)?;
                            Ok(())
                        },
                    )
                })
                .map(drop),
            );
        }
        for &index in &self.entries {
            keep(
                dev.with_cmd(|cmd, p| {
                    run::<DeleteFteIn, DeleteFteOut, _, _>(
                        cmd,
                        p,
                        Opcode::DeleteFlowTableEntry,
                        0,
                        |v| {
                            v.set(DeleteFteIn::TABLE_TYPE, NIC_RX)?
                                .set(DeleteFteIn::TABLE_ID, u64::from(table))?
                                .set(DeleteFteIn::FLOW_INDEX, u64::from(index))?;
                            Ok(())
                        },
                    )
                })
                .map(drop),
            );
        }
        for &group in &self.groups {
            keep(
                dev.with_cmd(|cmd, p| {
                    run::<DestroyFlowGroupIn, DestroyFlowGroupOut, _, _>(
                        cmd,
                        p,
                        Opcode::DestroyFlowGroup,
                        0,
                        |v| {
                            v.set(DestroyFlowGroupIn::TABLE_TYPE, NIC_RX)?
                                .set(DestroyFlowGroupIn::TABLE_ID, u64::from(table))?
                                .set(DestroyFlowGroupIn::GROUP_ID, u64::from(group))?;
                            Ok(())
                        },
                    )
                })
                .map(drop),
            );
        }
        keep(
            dev.with_cmd(|cmd, p| {
                run::<DestroyFlowTableIn, DestroyFlowTableOut, _, _>(
                    cmd,
                    p,
                    Opcode::DestroyFlowTable,
                    0,
                    |v| {
                        v.set(DestroyFlowTableIn::TABLE_TYPE, NIC_RX)?
                            .set(DestroyFlowTableIn::TABLE_ID, u64::from(table))?;
                        Ok(())
                    },
                )
            })
            .map(drop),
        );
        r
    }
}

impl<P: Platform> Drop for MacSteering<'_, P> {
    fn drop(&mut self) {
        if self.alive {
            if let Err(e) = self.teardown() {
                log::warn!("flow table {:#x} teardown at drop: {e}", self.table);
            }
        }
    }
}
