//! Receive steering by destination MAC (docs/ethernet-facts.md §1.9): a NIC receive flow table
//! (`table_type` 0, level 0, 16 entries), one flow group matching the outer destination MAC
//! exactly (`match_criteria_enable` outer headers), one entry for the MAC with action FWD_DEST
//! to a TIR, and the table made the root of NIC receive. Frames to other MACs miss the table
//! and are dropped (the device counts them). Torn down in reverse: the root disconnected, the
//! entry, the group, the table.

use mlx5_ifc::prm::flow::{
    CreateFlowGroupIn, CreateFlowGroupOut, CreateFlowTableIn, CreateFlowTableOut, DeleteFteIn,
    DeleteFteOut, DestFormatStruct as Dest, DestroyFlowGroupIn, DestroyFlowGroupOut,
    DestroyFlowTableIn, DestroyFlowTableOut, FlowContext, FlowTableContext as Ftc, FteMatchParam,
    FteMatchSetLyr24 as L24, SetFlowTableRootIn, SetFlowTableRootOut, SetFteIn, SetFteOut,
};
use mlx5_ifc::{Layout, Opcode, ViewMut};

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
/// `destination_type` TIR.
const DEST_TIR: u64 = 0x2;
/// `match_criteria_enable` bit 0: outer headers.
const OUTER: u64 = 1;
/// SET_FLOW_TABLE_ROOT `op_mod` 1: disconnect the root.
const DISCONNECT: u16 = 1;

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

/// A MAC steered to a TIR, as the root of NIC receive.
#[derive(Debug)]
pub struct MacSteering<'d, P: Platform> {
    dev: &'d Device<P>,
    table: u32,
    /// The group, once made.
    group: Option<u32>,
    /// Whether the entry was set, and the table made the root.
    entry: bool,
    rooted: bool,
    alive: bool,
}

impl<'d, P: Platform> MacSteering<'d, P> {
    /// Frames to `mac` go to `tir`; the table becomes NIC receive's root.
    pub fn create(dev: &'d Device<P>, mac: [u8; 6], tir: &Tir<'_, P>) -> Result<Self> {
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
                            .set(Ftc::LOG_SIZE, 4)?;
                        Ok(())
                    },
                )
            })?
            .get(CreateFlowTableOut::TABLE_ID) as u32;
        let mut s = MacSteering {
            dev,
            table,
            group: None,
            entry: false,
            rooted: false,
            alive: true,
        };
        let group = dev.with_cmd(|cmd, p| {
            run_create::<CreateFlowGroupIn, CreateFlowGroupOut, _, _, QueueBuf>(
                cmd,
                p,
                Opcode::CreateFlowGroup,
                None,
                |v| {
                    v.set(CreateFlowGroupIn::TABLE_TYPE, NIC_RX)?
                        .set(CreateFlowGroupIn::TABLE_ID, u64::from(table))?
                        .set(CreateFlowGroupIn::START_FLOW_INDEX, 0)?
                        .set(CreateFlowGroupIn::END_FLOW_INDEX, 0)?
                        .set(CreateFlowGroupIn::MATCH_CRITERIA_ENABLE, OUTER)?;
                    v.nested_mut(CreateFlowGroupIn::MATCH_CRITERIA)
                        .nested_mut(FteMatchParam::OUTER_HEADERS)
                        .set(L24::DMAC_47_16, 0xffff_ffff)?
                        .set(L24::DMAC_15_0, 0xffff)?;
                    Ok(())
                },
            )
        })?;
        let g = group.get(CreateFlowGroupOut::GROUP_ID) as u32;
        s.group = Some(g);
        let mut d = [0u8; 8];
        ViewMut::<Dest>::new(&mut d)?
            .set(Dest::DESTINATION_TYPE, DEST_TIR)?
            .set(Dest::DESTINATION_ID, u64::from(tir.tirn()))?;
        debug_assert_eq!(Dest::BYTES, 8);
        dev.with_cmd(|cmd, p| {
            run_create::<SetFteIn, SetFteOut, _, _, Dests>(
                cmd,
                p,
                Opcode::SetFlowTableEntry,
                Some(&Dests(d)),
                |v| {
                    v.set(SetFteIn::TABLE_TYPE, NIC_RX)?
                        .set(SetFteIn::TABLE_ID, u64::from(table))?
                        .set(SetFteIn::FLOW_INDEX, 0)?;
                    let mut c = v.nested_mut(SetFteIn::FLOW_CONTEXT);
                    c.set(FlowContext::GROUP_ID, u64::from(g))?
                        .set(FlowContext::ACTION, FWD_DEST)?
                        .set(FlowContext::DESTINATION_LIST_SIZE, 1)?;
                    c.nested_mut(FlowContext::MATCH_VALUE)
                        .nested_mut(FteMatchParam::OUTER_HEADERS)
                        .set(
                            L24::DMAC_47_16,
                            u64::from(u32::from_be_bytes([mac[0], mac[1], mac[2], mac[3]])),
                        )?
                        .set(
                            L24::DMAC_15_0,
                            u64::from(u16::from_be_bytes([mac[4], mac[5]])),
                        )?;
                    Ok(())
                },
            )
        })?;
        s.entry = true;
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
        Ok(s)
    }

    /// The root disconnected, then the entry, the group and the table destroyed.
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
        if self.entry {
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
                                .set(DeleteFteIn::FLOW_INDEX, 0)?;
                            Ok(())
                        },
                    )
                })
                .map(drop),
            );
        }
        if let Some(group) = self.group {
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
