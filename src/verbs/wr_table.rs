//! The work-request tables: the driver's own record of what it posted, which the CQs read to
//! turn a CQE into a work completion. One module owns their layout and their protocol.
//!
//! Each table is a [`SharedTable`] in host memory the device cannot reach, shared by the queue
//! that posts (a QP's send or receive queue, an SRQ) and the CQs that complete it:
//! * a **send table** ([`sq_table`]): TAIL (WQEBBs retired, stored by the poller), HEAD (WQEBBs
//!   posted, stored by `post_send` with release after the pairs), and per WQEBB the wr_id and a
//!   descriptor ([`sq_desc`]);
//! * a **receive table** ([`rq_table`]): TAIL, HEAD and per slot the wr_id and the bytes its
//!   scatter list holds;
//! * an **SRQ table** ([`srq_table`]): per WQE the wr_id and a capacity word whose POSTED bit
//!   makes each posting complete exactly once ([`srq_complete`]), the ring of WQEs the pollers
//!   hand back, and the free list's links.
//!
//! A QP going to RESET starts its tables anew ([`reset_sq`], [`reset_rq`]) once its CQEs have
//! left its CQs.

use crate::io::SharedTable;
use crate::verbs::cq::{WcFlags, WcOpcode};
use crate::verbs::wqe::opcode;

/// Word layout of a send queue table: completed WQEBBs, posted WQEBBs, then per WQEBB a pair of
/// words side by side (one cache line for both): the wr_id and a descriptor
/// (`nbb | wr_opcode << 8 | wc_flags << 16 | byte_len << 32`).
pub(crate) mod sq_table {
    /// WQEBBs completed (running counter).
    pub(crate) const TAIL: usize = 0;
    /// WQEBBs posted (running counter).
    pub(crate) const HEAD: usize = 1;
    /// First wr_id word.
    pub(crate) const WRID: usize = 2;
    /// The wr_id word of WQEBB `idx` (its descriptor is the next word).
    #[inline]
    pub(crate) const fn wrid(idx: usize) -> usize {
        WRID + 2 * idx
    }
    /// Words of a table for `bbs` WQEBBs.
    pub(crate) const fn words(bbs: usize) -> usize {
        WRID + 2 * bbs
    }
}

/// Word layout of a receive queue table: completed, posted, then per slot a pair of words:
/// the wr_id and the bytes its scatter list holds.
pub(crate) mod rq_table {
    /// WQEs completed.
    pub(crate) const TAIL: usize = 0;
    /// WQEs posted.
    pub(crate) const HEAD: usize = 1;
    /// First wr_id word.
    pub(crate) const WRID: usize = 2;
    /// The wr_id word of slot `i` (its capacity in bytes is the next word).
    pub(crate) const fn wrid(i: usize) -> usize {
        WRID + 2 * i
    }
    /// Words of a table for `n` slots.
    pub(crate) const fn words(n: usize) -> usize {
        WRID + 2 * n
    }
    /// A striding RQ's table of `n` slots has one word more: the strides of the WQE at TAIL
    /// the device has used.
    pub(crate) const fn used(n: usize) -> usize {
        WRID + 2 * n
    }
}

/// Word layout of an SRQ table: the freed-WQE ring (consumer, producer, entries = index + 1),
/// per WQE a pair of words (the wr_id; [`POSTED`](srq_table::POSTED) and the bytes its scatter
/// list holds), then the freed ring's entries, then the free list's links (the driver's own copy
/// of each WQE's `next_wqe_index`: the device's copy in the ring is written, never read back).
pub(crate) mod srq_table {
    /// Freed ring: next entry post_recv takes.
    pub(crate) const FREED_HEAD: usize = 0;
    /// Freed ring: next entry a poller fills.
    pub(crate) const FREED_TAIL: usize = 1;
    /// First wr_id word.
    pub(crate) const WRID: usize = 2;
    /// Set in a WQE's capacity word while it is posted; the poller that completes it clears it.
    pub(crate) const POSTED: u64 = 1 << 63;
    /// The wr_id word of WQE `i` (its capacity word is the next).
    pub(crate) const fn wrid(i: usize) -> usize {
        WRID + 2 * i
    }
    /// First freed-ring word for an SRQ of `n` WQEs.
    pub(crate) const fn freed(n: usize) -> usize {
        WRID + 2 * n
    }
    /// The link word of WQE `i` in an SRQ of `n` WQEs: the WQE after it on the free list.
    pub(crate) const fn next(n: usize, i: usize) -> usize {
        WRID + 3 * n + i
    }
    /// Words of a table for `n` WQEs.
    pub(crate) const fn words(n: usize) -> usize {
        WRID + 4 * n
    }
}

/// The descriptor word of a send queue slot: the WQEBBs it spans (bits 0..8), the WQE's
/// control-segment opcode (8..16; its completion's opcode and flags are [`SQ_COMPLETION`] of
/// it), the bytes posted (32..64).
#[inline(always)]
pub(crate) const fn sq_desc(nbb: u8, wqe_opcode: u8, byte_len: u32) -> u64 {
    nbb as u64 | (wqe_opcode as u64) << 8 | (byte_len as u64) << 32
}

/// What a successful send completion of a WQE reports, by its control-segment opcode: the
/// completion's opcode, its flags, and whether its byte count is the bytes posted (SEND and
/// WRITE kinds) rather than the device's (READ and atomics). WITH_IMM for SEND_IMM and
/// RDMA_WRITE_IMM and for no other (SEND_INVAL included), as rdma-core's `handle_good_req`
/// (cq.c) sets them from the WQE opcode of a requester CQE. Opcodes no send queue writes read
/// as a SEND of the bytes posted.
pub(crate) const SQ_COMPLETION: [(WcOpcode, WcFlags, bool); 256] = {
    let mut t = [(WcOpcode::Send, WcFlags::empty(), true); 256];
    t[opcode::SEND_IMM as usize] = (WcOpcode::Send, WcFlags::WITH_IMM, true);
    t[opcode::RDMA_WRITE as usize] = (WcOpcode::RdmaWrite, WcFlags::empty(), true);
    t[opcode::RDMA_WRITE_IMM as usize] = (WcOpcode::RdmaWrite, WcFlags::WITH_IMM, true);
    t[opcode::RDMA_READ as usize] = (WcOpcode::RdmaRead, WcFlags::empty(), false);
    t[opcode::ATOMIC_CS as usize] = (WcOpcode::CompSwap, WcFlags::empty(), false);
    t[opcode::ATOMIC_FA as usize] = (WcOpcode::FetchAdd, WcFlags::empty(), false);
    t[opcode::TSO as usize] = (WcOpcode::Tso, WcFlags::empty(), true);
    t
};

/// Completes SRQ WQE `idx` (of `cnt`): exactly once per posting — whoever clears its POSTED mark
/// owns it — and hands it back to the SRQ's free list (its `post_recv` relinks it). Returns its
/// wr_id and the bytes its scatter list holds, or `None` if it is not posted.
pub(crate) fn srq_complete(table: &SharedTable, cnt: u32, idx: u32) -> Option<(u64, u64)> {
    if idx >= cnt {
        return None;
    }
    let cap = table
        .swap(srq_table::wrid(idx as usize) + 1, 0)
        .filter(|c| c & srq_table::POSTED != 0)?;
    let wr_id = table.load(srq_table::wrid(idx as usize));
    let n = cnt as usize;
    let mut t = table.load(srq_table::FREED_TAIL);
    while !table.compare_exchange(srq_table::FREED_TAIL, t, t.wrapping_add(1)) {
        t = table.load(srq_table::FREED_TAIL);
    }
    table.store(srq_table::freed(n) + (t as usize % n), u64::from(idx) + 1);
    Some((wr_id, cap & !srq_table::POSTED))
}

/// Starts a send table anew (the QP went to RESET): nothing posted, nothing retired.
pub(crate) fn reset_sq(t: &SharedTable) {
    t.store(sq_table::TAIL, 0);
    t.store(sq_table::HEAD, 0);
}

/// Starts a receive table anew (the QP went to RESET).
pub(crate) fn reset_rq(t: &SharedTable) {
    t.store(rq_table::TAIL, 0);
    t.store(rq_table::HEAD, 0);
}
