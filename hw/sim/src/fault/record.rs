//! What the device records: the DMA violations it committed or suffered ([`DmaFault`]) and the
//! injected faults as they take effect ([`FaultEvent`]).

use std::collections::VecDeque;

use crate::trace::TRACE_CAPACITY;

/// What kind of DMA violation a [`DmaFault`] records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DmaFaultKind {
    /// The device read memory that is not mapped.
    Read,
    /// The device wrote memory that is not mapped (an injected `Fault::DmaScribble` outside
    /// every live allocation included).
    Write,
    /// A read failed because `Fault::DmaFault` or `Fault::SqReadFault` was injected (for the
    /// latter, the address is the WQE's).
    Injected,
    /// MANAGE_PAGES gave the device a page that is not (entirely) mapped.
    PageNotMapped,
    /// The host freed DMA memory holding a page the device still owns (given by MANAGE_PAGES,
    /// not taken back).
    HostFreedDevicePage,
    /// A queue's buffer page (PAS entry) or doorbell record given to CREATE_EQ/CQ/SRQ/RMP/QP is
    /// not (entirely) mapped.
    QueueNotMapped,
    /// A doorbell write to a UAR page that names no object using that page (unknown EQ/CQ
    /// number, or the object's doorbells go to another UAR), or with the wrong access width.
    /// `iova` is the BAR0 offset written.
    BadDoorbell,
    /// An MTT page given to CREATE_MKEY is not (entirely, for the part the key uses) mapped.
    MttNotMapped,
    /// A BlueFlame write (a 64-bit word after the doorbell word in the same half of a BlueFlame
    /// register) differs from the WQE in the send queue at that offset. `iova` is the BAR0
    /// offset written.
    BlueFlameMismatch,
    /// A send doorbell whose WQE the device could not use: the QP's send queue names another
    /// QP in its control segment, or the doorbell names a QP without a send queue.
    BadWqe,
}

/// One DMA violation: a translation fault of the device, or the host freeing device memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DmaFault {
    /// The IOVA accessed.
    pub iova: u64,
    /// Length of the access in bytes.
    pub len: usize,
    /// What kind of violation.
    pub kind: DmaFaultKind,
    /// What the device was doing, e.g. `"read input mailbox block 1 of QUERY_HCA_CAP"`.
    pub what: String,
}

/// An injected fault taking effect (see [`crate::SimDevice::fault_events`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultEvent {
    /// Device time when it happened.
    pub now_ns: u64,
    /// The `Fault` variant, e.g. `"CorruptEqe"`.
    pub fault: &'static str,
    /// What the device did, e.g. `"EQE 3 of EQ 0x1: Cqn := 0x7 (was 0x400)"`.
    pub what: String,
}

/// The bounded record of [`FaultEvent`]s (the last [`TRACE_CAPACITY`]).
#[derive(Debug, Default)]
pub(crate) struct FaultLog {
    events: VecDeque<FaultEvent>,
}

impl FaultLog {
    /// Records (and logs) that `fault` did `what` at device time `now`.
    pub(crate) fn push(&mut self, now: u64, fault: &'static str, what: String) {
        log::warn!("mlx5-sim: injected {fault}: {what}");
        if self.events.len() == TRACE_CAPACITY {
            self.events.pop_front();
        }
        self.events.push_back(FaultEvent {
            now_ns: now,
            fault,
            what,
        });
    }

    pub(crate) fn events(&self) -> Vec<FaultEvent> {
        self.events.iter().cloned().collect()
    }
}
