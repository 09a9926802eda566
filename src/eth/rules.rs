//! A NIC receive flow table of rules (docs/ethernet-facts.md §1.9): [`FlowTable`] — CREATE_FLOW_TABLE
//! (`table_type` 0, a level, 2^`log_size` entries) carved into flow groups of
//! [`GROUP_ENTRIES`] entries, one group per set of matched fields (`match_criteria_enable`
//! outer headers, each matched field's criteria all ones), and rules as flow table entries
//! (SET_FLOW_TABLE_ENTRY) that forward to a TIR or to a flow table of a higher level, or drop.
//!
//! A [`FlowMatch`] names what a frame must carry: destination MAC, VLAN ID (a C-VLAN tag),
//! EtherType (after any VLAN tag), IP protocol, IPv4 source and destination, TCP/UDP source and
//! destination ports — the fields of `fte_match_set_lyr_2_4` Linux's flow steering matches on.
//! A frame matching no rule follows the table's miss (drop, for a root; Linux chains its tables
//! with rules instead). Rules in the same group never overlap; between groups the device takes
//! the first match in flow-index order, and groups are laid out in the order they were first
//! needed, so a rule whose fields are new goes after every existing group.
//!
//! Refused by name before any command: ports without `ip_protocol` 6 or 17, IPv4 addresses
//! without `ethertype` 0x0800, a VLAN ID over 4095, a full group, a table with no room for
//! another group.

use mlx5_ifc::consts::flow_table_type::NIC_RX;
use mlx5_ifc::consts::{flow_action, flow_dest_type, match_criteria, set_flow_table_root};
use mlx5_ifc::prm::flow::{
    CreateFlowGroupIn, CreateFlowGroupOut, CreateFlowTableIn, CreateFlowTableOut, DeleteFteIn,
    DeleteFteOut, DestFormatStruct as Dest, DestroyFlowGroupIn, DestroyFlowGroupOut,
    DestroyFlowTableIn, DestroyFlowTableOut, FlowContext, FlowTableContext as Ftc, FteMatchParam,
    FteMatchSetLyr24 as L24, SetFlowTableRootIn, SetFlowTableRootOut, SetFteIn, SetFteOut,
};
use mlx5_ifc::{LayoutError, Opcode, ViewMut};

use crate::error::{Error, Result};
use crate::fw::cmd::{run, run_create};
use crate::fw::queue::{PasList, QueueBuf};
use crate::io::platform::Platform;
use crate::Device;

/// Entries of each flow group.
pub(crate) const GROUP_ENTRIES: u32 = 16;
/// Groups of a table at most (a table of 2^10 entries).
const MAX_GROUPS: usize = 64;

/// What a frame must carry to match a rule (`None`: anything).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowMatch {
    /// The destination MAC.
    pub dmac: Option<[u8; 6]>,
    /// Multicast (and broadcast) frames alone: the group bit of the destination MAC set (bit
    /// 40, the first byte's lowest bit), the rest of it any. Ignored with `dmac`.
    pub multicast: bool,
    /// A C-VLAN tag with this VLAN ID.
    pub vlan_id: Option<u16>,
    /// The EtherType (after any VLAN tag).
    pub ethertype: Option<u16>,
    /// The IP protocol (6 TCP, 17 UDP, 1 ICMP, ...).
    pub ip_protocol: Option<u8>,
    /// The IPv4 source address (needs `ethertype` 0x0800).
    pub src_ipv4: Option<[u8; 4]>,
    /// The IPv4 destination address (needs `ethertype` 0x0800).
    pub dst_ipv4: Option<[u8; 4]>,
    /// The TCP or UDP source port (needs `ip_protocol` 6 or 17).
    pub src_port: Option<u16>,
    /// The TCP or UDP destination port (needs `ip_protocol` 6 or 17).
    pub dst_port: Option<u16>,
}

impl FlowMatch {
    /// Which fields are matched: the group a rule belongs to.
    fn fields(&self) -> u16 {
        [
            self.dmac.is_some(),
            self.multicast && self.dmac.is_none(),
            self.vlan_id.is_some(),
            self.ethertype.is_some(),
            self.ip_protocol.is_some(),
            self.src_ipv4.is_some(),
            self.dst_ipv4.is_some(),
            self.src_port.is_some(),
            self.dst_port.is_some(),
        ]
        .iter()
        .enumerate()
        .fold(0, |m, (i, &on)| m | (u16::from(on) << i))
    }

    fn check(&self) -> Result<()> {
        let bad = |field, requested: u64, limit| Error::InvalidArgument {
            op: "add_flow_rule",
            field,
            requested,
            max: 0,
            limit,
        };
        if let Some(v) = self.vlan_id.filter(|&v| v > 0xfff) {
            return Err(bad("vlan_id", u64::from(v), "a 12-bit VLAN ID"));
        }
        let ports = self.src_port.is_some() || self.dst_port.is_some();
        if ports && !matches!(self.ip_protocol, Some(6 | 17)) {
            let p = self.ip_protocol.map_or(0, u64::from);
            return Err(bad(
                "ip_protocol",
                p,
                "ports match TCP (6) or UDP (17) only",
            ));
        }
        let ips = self.src_ipv4.is_some() || self.dst_ipv4.is_some();
        if ips && self.ethertype != Some(0x0800) {
            let t = self.ethertype.map_or(0, u64::from);
            return Err(bad("ethertype", t, "IPv4 addresses need ethertype 0x0800"));
        }
        Ok(())
    }

    /// Writes the match (`mask`: the criteria, each matched field all ones) into `v`.
    fn put(&self, v: &mut ViewMut<'_, L24>, mask: bool) -> core::result::Result<(), LayoutError> {
        let val = |x: u64, ones: u64| if mask { ones } else { x };
        if let Some(m) = self.dmac {
            let hi = u32::from_be_bytes([m[0], m[1], m[2], m[3]]);
            v.set(L24::DMAC_47_16, val(u64::from(hi), 0xffff_ffff))?;
            v.set(
                L24::DMAC_15_0,
                val(u64::from(u16::from_be_bytes([m[4], m[5]])), 0xffff),
            )?;
        } else if self.multicast {
            // The group bit: criteria and value alike (mlx5e's all-multicast rule).
            v.set(L24::DMAC_47_16, 0x0100_0000)?;
        }
        if let Some(id) = self.vlan_id {
            v.set(L24::CVLAN_TAG, 1)?;
            v.set(L24::FIRST_VID, val(u64::from(id), 0xfff))?;
        }
        if let Some(t) = self.ethertype {
            v.set(L24::ETHERTYPE, val(u64::from(t), 0xffff))?;
        }
        if let Some(p) = self.ip_protocol {
            v.set(L24::IP_PROTOCOL, val(u64::from(p), 0xff))?;
        }
        for (ip, f) in [
            (self.src_ipv4, L24::SRC_IPV4_SRC_IPV6),
            (self.dst_ipv4, L24::DST_IPV4_DST_IPV6),
        ] {
            if let Some(a) = ip {
                // IPv4 in the last four bytes of the 16 (`ipv4_layout`).
                v.bytes_mut(f)[12..16].copy_from_slice(if mask { &[0xff; 4] } else { &a });
            }
        }
        let tcp = self.ip_protocol == Some(6);
        let (sf, df) = if tcp {
            (L24::TCP_SPORT, L24::TCP_DPORT)
        } else {
            (L24::UDP_SPORT, L24::UDP_DPORT)
        };
        if let Some(p) = self.src_port {
            v.set(sf, val(u64::from(p), 0xffff))?;
        }
        if let Some(p) = self.dst_port {
            v.set(df, val(u64::from(p), 0xffff))?;
        }
        Ok(())
    }
}

/// What a matching frame does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowAction {
    /// Delivered through the TIR of this number.
    Tir(u32),
    /// Looked up in the flow table of this id (a higher level).
    Table(u32),
    /// Dropped.
    Drop,
}

/// A rule of a [`FlowTable`]: its flow index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowRule(u32);

impl FlowRule {
    /// The flow index of the entry.
    pub fn index(&self) -> u32 {
        self.0
    }
}

/// The destination list after SET_FLOW_TABLE_ENTRY's fixed part: one destination, or none.
struct Dests([u8; 8], usize);

impl PasList for Dests {
    fn npages(&self) -> usize {
        self.1
    }
    fn write_pas(&self, dst: &mut [u8]) -> Result<()> {
        let limit = dst.len();
        let n = 8 * self.1;
        dst.get_mut(..n)
            .ok_or(Error::Capacity {
                what: "flow destination list",
                limit,
            })?
            .copy_from_slice(&self.0[..n]);
        Ok(())
    }
}

#[derive(Debug, Clone, Copy)]
struct Group {
    id: u32,
    fields: u16,
    first: u32,
    /// Entries in use (bit i: flow index `first + i`).
    used: u16,
}

/// A NIC receive flow table of rules.
#[derive(Debug)]
pub struct FlowTable<'d, P: Platform> {
    dev: &'d Device<P>,
    id: u32,
    entries: u32,
    groups: heapless::Vec<Group, MAX_GROUPS>,
    rooted: bool,
    alive: bool,
}

impl<'d, P: Platform> FlowTable<'d, P> {
    /// CREATE_FLOW_TABLE of NIC receive at `level` with 2^`log_size` entries (4..=10).
    pub fn create(dev: &'d Device<P>, level: u8, log_size: u8) -> Result<Self> {
        if !(4..=10).contains(&log_size) {
            return Err(Error::InvalidArgument {
                op: "create_flow_table",
                field: "log_size",
                requested: u64::from(log_size),
                max: 10,
                limit: "16..=1024 entries (groups of 16)",
            });
        }
        let id = dev
            .with_cmd(|cmd, p| {
                run::<CreateFlowTableIn, CreateFlowTableOut, _, _>(
                    cmd,
                    p,
                    Opcode::CreateFlowTable,
                    0,
                    |v| {
                        v.set(CreateFlowTableIn::TABLE_TYPE, NIC_RX)?;
                        v.nested_mut(CreateFlowTableIn::FLOW_TABLE_CONTEXT)
                            .set(Ftc::LEVEL, u64::from(level))?
                            .set(Ftc::LOG_SIZE, u64::from(log_size))?;
                        Ok(())
                    },
                )
            })?
            .get(CreateFlowTableOut::TABLE_ID) as u32;
        Ok(FlowTable {
            dev,
            id,
            entries: 1 << log_size,
            groups: heapless::Vec::new(),
            rooted: false,
            alive: true,
        })
    }

    /// The table's id (a [`FlowAction::Table`] of a lower-level table).
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Adds a rule: frames matching `m` do `action`.
    pub fn add(&mut self, m: &FlowMatch, action: FlowAction) -> Result<FlowRule> {
        m.check()?;
        let fields = m.fields();
        let g = match self.groups.iter().position(|g| g.fields == fields) {
            Some(g) => g,
            None => self.group(m, fields)?,
        };
        let grp = self.groups[g];
        let Some(slot) = (0..GROUP_ENTRIES).find(|i| grp.used & (1 << i) == 0) else {
            return Err(Error::InvalidArgument {
                op: "add_flow_rule",
                field: "rules",
                requested: u64::from(GROUP_ENTRIES) + 1,
                max: u64::from(GROUP_ENTRIES),
                limit: "rules matching the same fields (one flow group)",
            });
        };
        let index = grp.first + slot;
        let (table, gid) = (self.id, grp.id);
        let mut d = [0u8; 8];
        let (act, n) = match action {
            FlowAction::Drop => (flow_action::DROP, 0),
            FlowAction::Tir(t) | FlowAction::Table(t) => {
                let ty = if matches!(action, FlowAction::Tir(_)) {
                    flow_dest_type::TIR
                } else {
                    flow_dest_type::FLOW_TABLE
                };
                ViewMut::<Dest>::new(&mut d)?
                    .set(Dest::DESTINATION_TYPE, ty)?
                    .set(Dest::DESTINATION_ID, u64::from(t))?;
                (flow_action::FWD_DEST, 1)
            }
        };
        let dests = Dests(d, n);
        self.dev.with_cmd(|cmd, p| {
            run_create::<SetFteIn, SetFteOut, _, _, Dests>(
                cmd,
                p,
                Opcode::SetFlowTableEntry,
                Some(&dests),
                |v| {
                    v.set(SetFteIn::TABLE_TYPE, NIC_RX)?
                        .set(SetFteIn::TABLE_ID, u64::from(table))?
                        .set(SetFteIn::FLOW_INDEX, u64::from(index))?;
                    let mut c = v.nested_mut(SetFteIn::FLOW_CONTEXT);
                    c.set(FlowContext::GROUP_ID, u64::from(gid))?
                        .set(FlowContext::ACTION, act)?
                        .set(FlowContext::DESTINATION_LIST_SIZE, n as u64)?;
                    let mut mv = c.nested_mut(FlowContext::MATCH_VALUE);
                    m.put(&mut mv.nested_mut(FteMatchParam::OUTER_HEADERS), false)?;
                    Ok(())
                },
            )
        })?;
        self.groups[g].used |= 1 << slot;
        Ok(FlowRule(index))
    }

    /// CREATE_FLOW_GROUP for rules matching `fields` (those `m` matches), after the others.
    fn group(&mut self, m: &FlowMatch, fields: u16) -> Result<usize> {
        let first = self.groups.len() as u32 * GROUP_ENTRIES;
        if first + GROUP_ENTRIES > self.entries || self.groups.is_full() {
            return Err(Error::InvalidArgument {
                op: "add_flow_rule",
                field: "groups",
                requested: u64::from(first / GROUP_ENTRIES) + 1,
                max: u64::from(self.entries / GROUP_ENTRIES),
                limit: "flow groups of the table (each a set of matched fields)",
            });
        }
        let table = self.id;
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
                        .set(
                            CreateFlowGroupIn::END_FLOW_INDEX,
                            u64::from(first + GROUP_ENTRIES - 1),
                        )?;
                    if fields != 0 {
                        v.set(
                            CreateFlowGroupIn::MATCH_CRITERIA_ENABLE,
                            match_criteria::OUTER_HEADERS,
                        )?;
                        let mut c = v.nested_mut(CreateFlowGroupIn::MATCH_CRITERIA);
                        m.put(&mut c.nested_mut(FteMatchParam::OUTER_HEADERS), true)?;
                    }
                    Ok(())
                },
            )
        })?;
        let id = out.get(CreateFlowGroupOut::GROUP_ID) as u32;
        let g = Group {
            id,
            fields,
            first,
            used: 0,
        };
        self.groups.push(g).map_err(|_| Error::Capacity {
            what: "flow groups",
            limit: MAX_GROUPS,
        })?;
        Ok(self.groups.len() - 1)
    }

    /// DELETE_FLOW_TABLE_ENTRY of `rule`.
    pub fn remove(&mut self, rule: FlowRule) -> Result<()> {
        let i = rule.0;
        let Some(g) = self
            .groups
            .iter_mut()
            .find(|g| (g.first..g.first + GROUP_ENTRIES).contains(&i))
            .filter(|g| g.used & (1 << (i - g.first)) != 0)
        else {
            return Err(Error::InvalidArgument {
                op: "remove_flow_rule",
                field: "rule",
                requested: u64::from(i),
                max: u64::from(self.entries),
                limit: "a rule of this table",
            });
        };
        g.used &= !(1 << (i - g.first));
        let table = self.id;
        delete_fte(self.dev, table, i)
    }

    /// Makes the table the root of NIC receive (SET_FLOW_TABLE_ROOT).
    pub fn set_root(&mut self) -> Result<()> {
        let table = self.id;
        self.dev.with_cmd(|cmd, p| {
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
        self.rooted = true;
        Ok(())
    }

    /// The root disconnected (if it is), every rule, group and the table destroyed.
    pub fn destroy(mut self) -> Result<()> {
        self.alive = false;
        self.teardown()
    }

    fn teardown(&mut self) -> Result<()> {
        let (dev, table) = (self.dev, self.id);
        let mut r: Result<()> = Ok(());
        let mut keep = |x: Result<()>| {
            if r.is_ok() {
                r = x;
            }
        };
        if core::mem::take(&mut self.rooted) {
            keep(
                dev.with_cmd(|cmd, p| {
                    run::<SetFlowTableRootIn, SetFlowTableRootOut, _, _>(
                        cmd,
                        p,
                        Opcode::SetFlowTableRoot,
                        set_flow_table_root::DISCONNECT,
                        |v| {
                            v.set(SetFlowTableRootIn::TABLE_TYPE, NIC_RX)?;
                            Ok(())
                        },
                    )
                })
                .map(drop),
            );
        }
        for g in core::mem::take(&mut self.groups) {
            for i in (0..GROUP_ENTRIES).filter(|i| g.used & (1 << i) != 0) {
                keep(delete_fte(dev, table, g.first + i));
            }
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
                                .set(DestroyFlowGroupIn::GROUP_ID, u64::from(g.id))?;
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

fn delete_fte<P: Platform>(dev: &Device<P>, table: u32, index: u32) -> Result<()> {
    dev.with_cmd(|cmd, p| {
        run::<DeleteFteIn, DeleteFteOut, _, _>(cmd, p, Opcode::DeleteFlowTableEntry, 0, |v| {
            v.set(DeleteFteIn::TABLE_TYPE, NIC_RX)?
                .set(DeleteFteIn::TABLE_ID, u64::from(table))?
                .set(DeleteFteIn::FLOW_INDEX, u64::from(index))?;
            Ok(())
        })
    })
    .map(drop)
}

impl<P: Platform> Drop for FlowTable<'_, P> {
    fn drop(&mut self) {
        if self.alive {
            if let Err(e) = self.teardown() {
                log::warn!("flow table {:#x} teardown at drop: {e}", self.id);
            }
        }
    }
}
