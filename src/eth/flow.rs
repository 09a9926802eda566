//! Receive steering by destination MAC (docs/ethernet-facts.md §1.9): a NIC receive flow table
//! (`table_type` 0, level 0, 64 entries) made the root of NIC receive, whose entries forward
//! (action FWD_DEST) to one TIR, or to a flow table of a higher level. Up to three flow groups
//! of 16 entries, as an [`RxFilter`] asks:
//!
//! * the listed addresses (and broadcast), each an entry of a group matching the outer
//!   destination MAC exactly (`match_criteria_enable` outer headers, all 48 bits);
//! * all multicast: one entry of a group matching the group bit alone (bit 40 of the
//!   destination MAC, the first byte's lowest bit), value set;
//! * promiscuous: one entry of a group with no match criteria at all (`match_criteria_enable`
//!   0), which every frame matches.
//!
//! Frames matching no entry miss the table and are dropped (the device counts them). Torn down
//! in reverse: the root disconnected, the entries, the groups, the table. The table and its
//! rules are a [`FlowTable`] (rules.rs), made the root.

use super::rules::{FlowAction, FlowMatch, FlowTable};
use super::tir::Tir;
use crate::error::{Error, Result};
use crate::io::platform::Platform;
use crate::Device;

/// log2 of the table's entries: room for three groups of 16 (exact, group bit, all).
const LOG_SIZE: u8 = 6;
/// Addresses an [`RxFilter`] may list (the exact group's 16 entries, less broadcast and
/// room to spare).
pub(crate) const MAX_MACS: usize = 13;
/// The broadcast address.
pub const BROADCAST: [u8; 6] = [0xff; 6];

/// Which frames NIC receive steers to the TIR.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RxFilter<'m> {
    /// Destination MACs matched exactly (unicast or multicast), at most `MAX_MACS` (13).
    pub macs: &'m [[u8; 6]],
    /// Frames to ff:ff:ff:ff:ff:ff (ARP requests).
    pub broadcast: bool,
    /// Every multicast (and broadcast) frame: the group bit of the destination MAC set.
    pub all_multicast: bool,
    /// Every frame, whatever its destination.
    pub promiscuous: bool,
}

/// A MAC (or [`RxFilter`]) steered to a TIR or a table, as the root of NIC receive.
#[derive(Debug)]
pub struct MacSteering<'d, P: Platform> {
    table: FlowTable<'d, P>,
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
    pub(crate) fn with_filter(
        dev: &'d Device<P>,
        filter: &RxFilter<'_>,
        tir: &Tir<'_, P>,
    ) -> Result<Self> {
        Self::build(dev, filter, FlowAction::Tir(tir.tirn()))
    }

    /// Frames `filter` accepts go on to `table` (a flow table of a higher level: a port's
    /// traffic-type table in front of its RSS TIRs); this table becomes NIC receive's root.
    pub(crate) fn with_filter_to_table(
        dev: &'d Device<P>,
        filter: &RxFilter<'_>,
        table: &FlowTable<'_, P>,
    ) -> Result<Self> {
        Self::build(dev, filter, FlowAction::Table(table.id()))
    }

    fn build(dev: &'d Device<P>, filter: &RxFilter<'_>, to: FlowAction) -> Result<Self> {
        if filter.macs.len() > MAX_MACS {
            return Err(refuse(
                "macs",
                filter.macs.len() as u64,
                MAX_MACS as u64,
                "addresses of the steering table's exact group",
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
        // The exact addresses (broadcast among them), then the group bit, then everything:
        // each kind a flow group of the table, in that order. (On an error the table's drop
        // tears down what was made.)
        let mut table = FlowTable::create(dev, 0, LOG_SIZE)?;
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
        for m in &exact {
            let rule = FlowMatch {
                dmac: Some(*m),
                ..FlowMatch::default()
            };
            table.add(&rule, to)?;
        }
        if filter.all_multicast {
            let rule = FlowMatch {
                multicast: true,
                ..FlowMatch::default()
            };
            table.add(&rule, to)?;
        }
        if filter.promiscuous {
            table.add(&FlowMatch::default(), to)?;
        }
        table.set_root()?;
        Ok(MacSteering { table })
    }

    /// The root disconnected, then the entries, the groups and the table destroyed.
    pub fn destroy(self) -> Result<()> {
        self.table.destroy()
    }
}
