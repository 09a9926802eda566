//! `post_send` and `post_recv`: work requests checked against the QP, written into the rings
//! as the device reads them, and one doorbell per list.
//!
//! The data path allocates nothing and takes no lock: the rings, the doorbell record and the
//! work-request tables were allocated at `create_qp`; the CQ finds the work-request ids in the
//! tables it shares with the QP.

use mlx5_ifc::{Be32, Be64};

use super::create::Qp;
use super::write::{
    misplaced, nbb_of, recv_place, recv_queue, refuse, send_queue, sq_place, write_recv, write_wqe,
    WqeHead,
};
use crate::error::{Error, Result};
use crate::io::barrier;
use crate::io::platform::Platform;
use crate::verbs::wqe::{BF_CHUNK, WQEBB};
use crate::verbs::wr_table::{self, rq_table, sq_table};

pub use super::wr::{Payload, RecvWr, SendOp, SendWr, Sge};

/// Why a receive queue of `max_sge` SGEs per WQE refuses `wr`, if it does.
#[inline(always)]
fn recv_refused(wr: &RecvWr<'_>, max_sge: u64) -> Option<Error> {
    (wr.sg_list.len() as u64 > max_sge).then(|| {
        refuse(
            "post_recv",
            "num_sge",
            wr.sg_list.len() as u64,
            max_sge,
            "max_recv_sge of the QP",
        )
    })
}

impl<P: Platform> Qp<'_, P> {
    /// Posts a list of send work requests (`ibv_post_send`) and rings one doorbell. Every
    /// request is checked first; if one is refused, none is posted.
    #[inline]
    pub fn post_send(&mut self, wrs: &[SendWr<'_>]) -> Result<()> {
        match wrs {
            [wr] => self.post_one(wr),
            _ => self.post_list(wrs),
        }
    }

    /// The send queue refuses `need` more WQEBBs with `used` of `bbs` outstanding.
    #[cold]
    fn queue_full(&self, used: u64, bbs: u32) -> Error {
        Error::QueueFull {
            qpn: self.qpn,
            queue: "send queue",
            outstanding: used,
            limit: u64::from(bbs),
        }
    }

    /// One request (the latency case): no table of sizes.
    #[inline(never)]
    fn post_one(&mut self, wr: &SendWr<'_>) -> Result<()> {
        let (ring, bbs) = send_queue(self.state, self.qpn, &self.ring, &self.layout, 1)?;
        let sq = sq_place(ring, bbs)?;
        let m = self.measure(wr)?;
        let nbb = nbb_of(m);
        let used = self.cur_post.wrapping_sub(ring.sq.load(sq_table::TAIL));
        if used.saturating_add(u64::from(nbb)) > u64::from(bbs) {
            return Err(self.queue_full(used, bbs));
        }
        let head = WqeHead {
            qpn: self.qpn,
            sig_all: self.sq_sig_all,
            ud: self.qp_type.is_datagram(),
        };
        // BlueFlame for a small inline WQE of more than its control segment (rdma-core's
        // `post_send_db` copies only when DS > 1, and a zero-length inline send is DS 1).
        let bf = nbb <= self.bf_max_nbb && m as u8 > 1 && matches!(wr.payload, Payload::Inline(_));
        let stage = bf.then_some(&mut self.bf_stage);
        let first = write_wqe(sq, head, self.cur_post, wr, m, stage)?;
        self.cur_post += u64::from(nbb);
        ring.sq.store(sq_table::HEAD, self.cur_post);
        self.ring_send_doorbell(first, bf, nbb)
    }

    /// A list, in one pass: each request is checked, then written after the ones before it;
    /// nothing is posted (no counter, no doorbell) until all are written, so if one is refused
    /// none is — the WQEs written before it lie in free slots past the posted counter, which
    /// the device never reads. The error is the one a check-everything-first pass would give:
    /// the first refused request, else a full queue.
    #[inline(never)]
    fn post_list(&mut self, wrs: &[SendWr<'_>]) -> Result<()> {
        let (ring, bbs) = send_queue(self.state, self.qpn, &self.ring, &self.layout, wrs.len())?;
        let sq = sq_place(ring, bbs)?;
        let used = self.cur_post.wrapping_sub(ring.sq.load(sq_table::TAIL));
        let room = u64::from(bbs).saturating_sub(used);
        let head = WqeHead {
            qpn: self.qpn,
            sig_all: self.sq_sig_all,
            ud: self.qp_type.is_datagram(),
        };
        let start = self.cur_post;
        let mut cur = start;
        let mut first = 0u64;
        let mut last_nbb = 0;
        for (i, wr) in wrs.iter().enumerate() {
            let m = self.measure(wr)?;
            let nbb = nbb_of(m);
            if cur - start + u64::from(nbb) > room {
                return Err(self.list_refused(&wrs[i + 1..], used, bbs));
            }
            first = write_wqe(sq, head, cur, wr, m, None)?;
            last_nbb = nbb;
            cur += u64::from(nbb);
        }
        if wrs.is_empty() {
            return Ok(());
        }
        self.cur_post = cur;
        ring.sq.store(sq_table::HEAD, cur);
        self.ring_send_doorbell(first, false, last_nbb)
    }

    /// A list the send queue has no room for: the first of the remaining requests the QP
    /// refuses, else the full queue (`used` of `bbs` WQEBBs outstanding).
    #[cold]
    #[inline(never)]
    fn list_refused(&self, rest: &[SendWr<'_>], used: u64, bbs: u32) -> Error {
        rest.iter()
            .find_map(|wr| self.measure(wr).err())
            .unwrap_or_else(|| self.queue_full(used, bbs))
    }

    /// DBR word 1, then the UAR doorbell: BlueFlame (`bf`) for a single small inline WQE (the
    /// latency case: the device takes the WQE from the doorbell write instead of fetching it;
    /// only when the UAR is mapped write-combining: `bf_half` is 0 otherwise), else the 8-byte
    /// doorbell. The barriers are rdma-core's at the same places (`uar_wc_start`,
    /// `uar_wc_flush`).
    #[inline(always)]
    fn ring_send_doorbell(&mut self, first: u64, bf: bool, nbb: u32) -> Result<()> {
        let Some(ring) = self.ring.as_ref() else {
            return Ok(());
        };
        barrier::dma_wmb();
        ring.dbr
            .write_be32(4, Be32::new(self.cur_post as u32 & 0xffff))?;
        barrier::uar_wc_start();
        let p = self.dev.platform();
        let reg = self.bfreg.bar_offset() + u64::from(self.bf_offset);
        if bf {
            // BlueFlame: the whole WQE through the register, in one call, from the WQEBBs kept
            // as they were written (`write_wqe`'s stage).
            let n = (nbb as usize).min(BF_CHUNK) * (WQEBB / 8);
            p.bar_write_bf(reg, crate::io::be64_words(&self.bf_stage.0[..n]));
        } else {
            p.bar_write64(reg, Be64::from_ne_raw(first));
        }
        barrier::uar_wc_flush();
        self.bf_offset ^= self.bf_half;
        Ok(())
    }

    /// Back to empty rings, as the device's work-queue counters after 2RST.
    pub(super) fn reset_rings(&mut self) {
        self.cur_post = 0;
        self.bf_offset = 0;
        if let Some(r) = self.ring.as_ref() {
            wr_table::reset_sq(&r.sq);
            if let Some(rq) = r.rq.as_ref() {
                wr_table::reset_rq(rq);
            }
            let _ = r.dbr.write_be32(0, Be32::new(0));
            let _ = r.dbr.write_be32(4, Be32::new(0));
        }
    }

    /// Posts receive work requests to the QP's own receive queue (`ibv_post_recv`). Takes
    /// `&self`, as [`Srq::post_recv`](crate::srq::Srq::post_recv) does; a QP is not `Sync`, so
    /// the queue has one poster at a time without a lock (an SRQ, shared by QPs, takes one).
    #[inline]
    pub fn post_recv(&self, wrs: &[RecvWr<'_>]) -> Result<()> {
        match wrs {
            [wr] => self.recv_one(wr),
            _ => self.recv_list(wrs),
        }
    }

    /// One receive request (the common case): checked, written, posted.
    #[inline(never)]
    fn recv_one(&self, wr: &RecvWr<'_>) -> Result<()> {
        let (ring, rq, cnt, per) =
            recv_queue(self.srqn, self.state, self.qpn, &self.ring, &self.layout, 1)?;
        // The receive table's HEAD: this QP is its only writer (one thread: a QP is not `Sync`),
        // so a relaxed load gives back its own last store; the pollers only read it.
        let head = rq.load_relaxed(rq_table::HEAD);
        let used = head.wrapping_sub(rq.load(rq_table::TAIL));
        if used >= cnt || wr.sg_list.len() > per {
            return Err(self.recv_refusal(core::slice::from_ref(wr), used, cnt, per));
        }
        let Some((segs, pairs)) = recv_place(ring, rq) else {
            return Err(misplaced(cnt as usize));
        };
        write_recv(segs, pairs, (head & (cnt - 1)) as usize, per, wr);
        rq.store(rq_table::HEAD, head + 1);
        barrier::dma_wmb();
        ring.dbr
            .write_be32(0, Be32::new((head + 1) as u32 & 0xffff))?;
        Ok(())
    }

    /// Why receive requests that do not all fit are refused: a request with too many SGEs first
    /// (the error a check-first pass reports first), else a full queue.
    #[cold]
    #[inline(never)]
    fn recv_refusal(&self, wrs: &[RecvWr<'_>], used: u64, cnt: u64, per: usize) -> Error {
        wrs.iter()
            .find_map(|wr| recv_refused(wr, per as u64))
            .unwrap_or(Error::QueueFull {
                qpn: self.qpn,
                queue: "receive queue",
                outstanding: used,
                limit: cnt,
            })
    }

    /// A list of receive requests, in one pass: each is checked, then written; nothing is
    /// posted (no counter, no doorbell record) until all are, so a refused one leaves none
    /// posted.
    #[inline(never)]
    fn recv_list(&self, wrs: &[RecvWr<'_>]) -> Result<()> {
        let (ring, rq, cnt, per) = recv_queue(
            self.srqn,
            self.state,
            self.qpn,
            &self.ring,
            &self.layout,
            wrs.len(),
        )?;
        let start = rq.load_relaxed(rq_table::HEAD);
        let used = start.wrapping_sub(rq.load(rq_table::TAIL));
        if used.saturating_add(wrs.len() as u64) > cnt {
            return Err(self.recv_refusal(wrs, used, cnt, per));
        }
        let Some((segs, pairs)) = recv_place(ring, rq) else {
            return Err(misplaced(cnt as usize));
        };
        let mut head = start;
        for wr in wrs {
            if let Some(e) = recv_refused(wr, per as u64) {
                return Err(e);
            }
            write_recv(segs, pairs, (head & (cnt - 1)) as usize, per, wr);
            head += 1;
        }
        if head == start {
            return Ok(());
        }
        rq.store(rq_table::HEAD, head);
        barrier::dma_wmb();
        ring.dbr.write_be32(0, Be32::new(head as u32 & 0xffff))?;
        Ok(())
    }
}
