//! Removing a QP's completions from a CQ when the QP goes to RESET or is destroyed (what the
//! verbs contract requires of `ibv_modify_qp(RESET)` and `ibv_destroy_qp`).
//!
//! A QP reset starts its rings from zero; a CQE of its earlier incarnation left in the CQ would
//! otherwise be read against the new rings — reported as the completion of a work request the
//! device has not run — and the genuine completion refused. So, under the CQ's lock, the CQEs
//! the device has written past the consumer index are walked from the newest back: the QP's own
//! are dropped (an SRQ WQE one names goes back to the SRQ's free list), every other QP's CQE
//! moves up over them in order (keeping the owner bit its new slot needs), and the consumer
//! index advances by the number dropped. The other QPs sharing the CQ see their completions
//! unchanged, in order.

use mlx5_ifc::Be32;

use crate::error::Result;
use crate::fw::queue::ceil_log2;
use crate::io::barrier;
use crate::io::platform::Platform;
use crate::verbs::cq::state::RecvTable;
use crate::verbs::cq::{Cq, CQE_BYTES, CQE_OP_OWN};
use crate::verbs::wr_table::srq_complete;

/// Responder CQE opcodes (a receive completed or failed): they may name an SRQ WQE.
fn responder(opcode: u8) -> bool {
    (0x1..=0x4).contains(&opcode) || opcode == 0xe
}

impl<P: Platform> Cq<'_, P> {
    /// Removes every CQE of QP `qpn` that the device has written and nobody has polled; returns
    /// how many. Call only once the device writes no more CQEs for `qpn` (after the RESET or
    /// DESTROY_QP command).
    pub(crate) fn clean(&self, qpn: u32) -> Result<usize> {
        let Some((buf, dbr)) = self.mem.as_ref() else {
            return Ok(0);
        };
        let mut s = self.lock_state()?;
        let ring = buf.buf();
        let size = self.cqe.wrapping_add(1);
        let (mask, log) = (size.wrapping_sub(1), ceil_log2(u64::from(size)));
        let slot = |i: u32| (i & mask) as usize * CQE_BYTES;
        // The CQEs the device has written from the consumer index on (at most a ring's worth).
        let ci = s.ci;
        let mut end = ci;
        while end.wrapping_sub(ci) < size {
            let op_own = ring.read_u64_acquire(slot(end) + CQE_OP_OWN - 7)?[7];
            if op_own >> 4 == 0xf || u32::from(op_own & 1) != (end >> log) & 1 {
                break;
            }
            end = end.wrapping_add(1);
        }
        barrier::dma_rmb();
        let srq = s.queues.get(qpn).and_then(|q| match q.rq.as_ref() {
            Some(RecvTable::Srq { table, cnt, .. }) => Some((table, *cnt)),
            _ => None,
        });
        let mut removed = 0u32;
        let mut i = end;
        while i != ci {
            i = i.wrapping_sub(1);
            let mut cqe = [0u8; CQE_BYTES];
            ring.read_bytes(slot(i), &mut cqe)?;
            let q = u32::from_be_bytes([0, cqe[57], cqe[58], cqe[59]]);
            if q == qpn {
                if let Some((table, cnt)) = srq.filter(|_| responder(cqe[CQE_OP_OWN] >> 4)) {
                    let idx = u32::from(u16::from_be_bytes([cqe[60], cqe[61]]));
                    if srq_complete(table, cnt, idx).is_none() {
                        log::warn!(
                            "CQ {:#x}: stale CQE names SRQ WQE {idx}, not posted",
                            self.cqn
                        );
                    }
                }
                removed += 1;
            } else if removed > 0 {
                // Moved up: it keeps the owner bit of the pass its new slot belongs to.
                let to = slot(i.wrapping_add(removed));
                let owner = ring.read_u8(to + CQE_OP_OWN)? & 1;
                cqe[CQE_OP_OWN] = (cqe[CQE_OP_OWN] & !1) | owner;
                ring.write_bytes(to, &cqe)?;
            }
        }
        if removed > 0 {
            s.ci = ci.wrapping_add(removed);
            barrier::dma_wmb();
            dbr.write_be32(0, Be32::new(s.ci & 0xff_ffff))?;
            log::debug!("CQ {:#x}: removed {removed} CQEs of QP {qpn:#x}", self.cqn);
        }
        Ok(removed as usize)
    }
}
