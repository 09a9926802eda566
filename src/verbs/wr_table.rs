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
pub mod sq_table {
    /// WQEBBs completed (running counter).
    pub const TAIL: usize = 0;
    /// WQEBBs posted (running counter).
    pub const HEAD: usize = 1;
    /// First wr_id word.
    pub const WRID: usize = 2;
    /// The wr_id word of WQEBB `idx` (its descriptor is the next word).
    #[inline]
    pub const fn wrid(idx: usize) -> usize {
        WRID + 2 * idx
    }
    /// Words of a table for `bbs` WQEBBs.
    pub const fn words(bbs: usize) -> usize {
        WRID + 2 * bbs
    }
}

/// Word layout of a receive queue table: completed, posted, then per slot a pair of words:
/// the wr_id and the bytes its scatter list holds.
pub mod rq_table {
    /// WQEs completed.
    pub const TAIL: usize = 0;
    /// WQEs posted.
    pub const HEAD: usize = 1;
    /// First wr_id word.
    pub const WRID: usize = 2;
    /// The wr_id word of slot `i` (its capacity in bytes is the next word).
    pub const fn wrid(i: usize) -> usize {
        WRID + 2 * i
    }
    /// Words of a table for `n` slots.
    pub const fn words(n: usize) -> usize {
        WRID + 2 * n
    }
}

/// Word layout of an SRQ table: the freed-WQE ring (consumer, producer, entries = index + 1),
/// per WQE a pair of words (the wr_id; [`POSTED`](srq_table::POSTED) and the bytes its scatter
/// list holds), then the freed ring's entries, then the free list's links (the driver's own copy
/// of each WQE's `next_wqe_index`: the device's copy in the ring is written, never read back).
pub mod srq_table {
    /// Freed ring: next entry post_recv takes.
    pub const FREED_HEAD: usize = 0;
    /// Freed ring: next entry a poller fills.
    pub const FREED_TAIL: usize = 1;
    /// First wr_id word.
    pub const WRID: usize = 2;
    /// Set in a WQE's capacity word while it is posted; the poller that completes it clears it.
    pub const POSTED: u64 = 1 << 63;
    /// The wr_id word of WQE `i` (its capacity word is the next).
    pub const fn wrid(i: usize) -> usize {
        WRID + 2 * i
    }
    /// First freed-ring word for an SRQ of `n` WQEs.
    pub const fn freed(n: usize) -> usize {
        WRID + 2 * n
    }
    /// The link word of WQE `i` in an SRQ of `n` WQEs: the WQE after it on the free list.
    pub const fn next(n: usize, i: usize) -> usize {
        WRID + 3 * n + i
    }
    /// Words of a table for `n` WQEs.
    pub const fn words(n: usize) -> usize {
        WRID + 4 * n
    }
}

/// The descriptor word of a send queue slot: the WQEBBs it spans, the completion's opcode and
/// flags, the bytes posted.
pub(crate) fn sq_desc(nbb: u32, op: WcOpcode, flags: WcFlags, byte_len: u32) -> u64 {
    // The code is the opcode's `ibv_wc_opcode` value, the flags their `ibv_wc_flags` bits.
    u64::from(nbb)
        | u64::from(op as u8) << 8
        | u64::from(flags.bits()) << 16
        | u64::from(byte_len) << 32
}

/// The flags of a successful send completion of a WQE with control-segment opcode `op`:
/// WITH_IMM for SEND_IMM and RDMA_WRITE_IMM, none for the others (SEND_INVAL included), as
/// rdma-core's `handle_good_req` (cq.c) sets them from the WQE opcode of a requester CQE.
#[inline(always)]
pub(crate) const fn sq_desc_flags(op: u8) -> WcFlags {
    match op {
        opcode::SEND_IMM | opcode::RDMA_WRITE_IMM => WcFlags::WITH_IMM,
        _ => WcFlags::empty(),
    }
}

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
