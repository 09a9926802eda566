//! What a CQ knows of the queues completing on it, and the state polling changes (under the
//! CQ's lock).

use heapless::Vec;

use crate::io::platform::Platform;
use crate::io::SharedTable;

/// Queues one CQ can serve.
pub(crate) const MAX_QUEUES_PER_CQ: usize = 512;

/// The receive side of an attached QP.
#[derive(Debug)]
pub(crate) enum RecvTable {
    /// The QP's own RQ with `cnt` WQEs.
    Rq {
        /// Table.
        table: SharedTable,
        /// WQEs in the RQ.
        cnt: u32,
    },
    /// An SRQ with `cnt` WQEs.
    Srq {
        /// Table.
        table: SharedTable,
        /// WQEs in the SRQ.
        cnt: u32,
    },
}

/// One QP attached to a CQ.
#[derive(Debug)]
pub(crate) struct Attached {
    /// QP number.
    pub qpn: u32,
    /// Send queue table and its WQEBBs, when this CQ is the QP's send CQ.
    pub sq: Option<(SharedTable, u32)>,
    /// Receive table, when this CQ is the QP's receive CQ.
    pub rq: Option<RecvTable>,
    /// An Ethernet RQ: its receive CQEs carry the flow tag where a QP's carry the QPN, so the
    /// CQ serves no other receive queue and its receive CQEs are this queue's.
    pub flow_tag_rq: bool,
}

impl Attached {
    /// Gives back the handles to the QP's tables (host memory; the last handle frees it).
    pub(crate) fn release<P: Platform + ?Sized>(self, p: &P) {
        if let Some((t, _)) = self.sq {
            t.release(p);
        }
        if let Some(RecvTable::Rq { table, .. } | RecvTable::Srq { table, .. }) = self.rq {
            table.release(p);
        }
    }
}

/// The CQ state polling changes.
#[derive(Debug, Default)]
pub(crate) struct CqShared {
    pub(crate) ci: u32,
    pub(crate) arm_sn: u32,
    /// Index in `queues` of the queue the last CQE named (a hint; checked before use).
    pub(crate) hint: usize,
    /// Whether an Ethernet RQ (whose receive CQEs do not name it) is attached.
    pub(crate) flow_tag_rq: bool,
    pub(crate) queues: Vec<Attached, MAX_QUEUES_PER_CQ>,
}
