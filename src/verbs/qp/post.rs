//! `post_send` and `post_recv`: work requests checked against the QP, written into the rings
//! as the device reads them, and one doorbell per list.
//!
//! The data path allocates nothing and takes no lock: the rings, the doorbell record and the
//! work-request tables were allocated at `create_qp`; the CQ finds the work-request ids in the
//! tables it shares with the QP.

use mlx5_ifc::{regs, Be32, Be64};

use super::create::Qp;
use super::sizing::SendOps;
use super::write::{
    misplaced, nbb_of, pack, recv_place, recv_queue, refuse, send_queue, sq_place, write_recv,
    write_wqe, WqeHead,
};
use crate::error::{Error, Result};
use crate::io::barrier;
use crate::platform::Platform;
use crate::verbs::wqe::{self, opcode, BF_CHUNK, DS, MAX_DS, WQEBB};
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

/// Data segments (zero-length SGEs are skipped) and bytes of a gather list.
#[inline]
fn gather_size(sg: &[Sge]) -> (usize, u64) {
    sg.iter().fold((0, 0), |(n, b), s| {
        (n + usize::from(s.length > 0), b + u64::from(s.length))
    })
}

/// The control-segment opcode, send op, DS units before the data and `imm` word of an op that
/// is not an atomic (the shapes `fits` takes in a straight line); `None` for the atomics.
#[inline(always)]
fn plain_op(op: &SendOp) -> Option<(u8, SendOps, usize, u32)> {
    Some(match *op {
        SendOp::Send => (opcode::SEND, SendOps::SEND, 1, 0),
        SendOp::SendImm(imm) => (opcode::SEND_IMM, SendOps::SEND_IMM, 1, imm),
        SendOp::SendInv(rkey) => (opcode::SEND_INVAL, SendOps::SEND_INV, 1, rkey),
        SendOp::Write { .. } => (opcode::RDMA_WRITE, SendOps::WRITE, 2, 0),
        SendOp::WriteImm { imm, .. } => (opcode::RDMA_WRITE_IMM, SendOps::WRITE_IMM, 2, imm),
        SendOp::Read { .. } => (opcode::RDMA_READ, SendOps::READ, 2, 0),
        SendOp::CmpSwap { .. } | SendOp::FetchAdd { .. } => return None,
    })
}

impl<P: Platform> Qp<'_, P> {
    /// DS units, WQEBBs and bytes of a send work request; checks it against the QP.
    #[inline(always)]
    fn measure(&self, wr: &SendWr<'_>) -> Result<u128> {
        match self.fits(wr) {
            Some(m) => Ok(m),
            None => self.refusal(wr),
        }
    }

    /// The checks of [`Self::refusal`] without the error (returned in registers): the packed
    /// sizes of a request the QP takes, `None` for one it refuses.
    #[inline(always)]
    fn fits(&self, wr: &SendWr<'_>) -> Option<u128> {
        // The common shape — no atomic, at most one SGE, not UD — in a straight line: the same
        // checks as `fits_any`, with what this shape makes constant folded.
        if let (Payload::Sges(sg @ ([] | [_])), false) = (wr.payload, self.qp_type.is_datagram()) {
            let Some((op, op_set, ds, imm)) = plain_op(&wr.op) else {
                return self.fits_any(wr);
            };
            let (segs, bytes) = gather_size(sg);
            let ds = ds + segs;
            let ok = self.ops.contains(op_set)
                && sg.len() as u64 <= u64::from(self.cap.max_send_sge)
                && ds * DS <= self.layout.sq_wqe_bytes as usize
                && bytes <= self.max_msg;
            return ok.then(|| pack((ds as u8, 1, bytes as u32), op, imm));
        }
        // A SEND or WRITE of inline data on a QP that is not UD, likewise.
        if let (Payload::Inline(data), false) = (wr.payload, self.qp_type.is_datagram()) {
            let plain = plain_op(&wr.op).filter(|_| !matches!(wr.op, SendOp::Read { .. }));
            let Some((op, op_set, ds, imm)) = plain else {
                return self.fits_any(wr);
            };
            // `inline_lim` folds the inline, DS, WQE and message limits (`write::inline_limit`).
            let ok = self.ops.contains(op_set)
                && (data.len() as u64) < u64::from(self.inline_lim[ds - 1]);
            let ds = ds + wqe::inline_ds(data.len());
            let nbb = (ds * DS).div_ceil(WQEBB) as u32;
            return ok.then(|| pack((ds as u8, nbb, data.len() as u32), op, imm));
        }
        self.fits_any(wr)
    }

    /// [`Self::fits`] for any request.
    #[inline(always)]
    fn fits_any(&self, wr: &SendWr<'_>) -> Option<u128> {
        let (op, op_set, imm) = wr.op.parts();
        if !self.ops.contains(op_set) {
            return None;
        }
        let atomic = matches!(wr.op, SendOp::CmpSwap { .. } | SendOp::FetchAdd { .. });
        let mut ds = 1usize;
        match wr.op {
            SendOp::Write { .. } | SendOp::WriteImm { .. } | SendOp::Read { .. } => ds += 1,
            SendOp::CmpSwap { .. } | SendOp::FetchAdd { .. } => ds += 2,
            _ => {}
        }
        if self.qp_type.is_datagram() {
            wr.ud.as_ref()?;
            ds += 3;
        }
        let bytes: u64 = match wr.payload {
            Payload::Sges(sg) => {
                if sg.len() as u64 > u64::from(self.cap.max_send_sge)
                    || (atomic && (sg.len() != 1 || sg[0].length != 8))
                {
                    return None;
                }
                let (segs, bytes) = gather_size(sg);
                ds += segs;
                bytes
            }
            Payload::Inline(data) => {
                if data.len() as u64 > u64::from(self.cap.max_inline_data)
                    || atomic
                    || matches!(wr.op, SendOp::Read { .. })
                {
                    return None;
                }
                ds += wqe::inline_ds(data.len());
                data.len() as u64
            }
        };
        if let SendOp::CmpSwap { remote_addr, .. } | SendOp::FetchAdd { remote_addr, .. } = wr.op {
            if remote_addr % 8 != 0 {
                return None;
            }
        }
        if ds > MAX_DS || ds * DS > self.layout.sq_wqe_bytes as usize || bytes > self.max_msg {
            return None;
        }
        Some(pack(
            (ds as u8, (ds * DS).div_ceil(WQEBB) as u32, bytes as u32),
            op,
            imm,
        ))
    }

    /// Why the QP refuses a send work request (the slow path of [`Self::measure`]; also the
    /// sizes, should it take it after all).
    #[cold]
    #[inline(never)]
    fn refusal(&self, wr: &SendWr<'_>) -> Result<u128> {
        let (op, op_set, imm) = wr.op.parts();
        if !self.ops.contains(op_set) {
            return Err(refuse(
                "post_send",
                "opcode",
                u64::from(op_set.bits()),
                u64::from(self.ops.bits()),
                "the send ops the QP was created with",
            ));
        }
        let mut ds = 1usize;
        match wr.op {
            SendOp::Write { .. } | SendOp::WriteImm { .. } | SendOp::Read { .. } => ds += 1,
            SendOp::CmpSwap { .. } | SendOp::FetchAdd { .. } => ds += 2,
            _ => {}
        }
        if self.qp_type.is_datagram() {
            if wr.ud.is_none() {
                return Err(refuse(
                    "post_send",
                    "ud",
                    0,
                    0,
                    "a UD send needs a destination (SendWr::ud)",
                ));
            }
            ds += 3;
        }
        let bytes: u64 = match wr.payload {
            Payload::Sges(sg) => {
                if sg.len() as u64 > u64::from(self.cap.max_send_sge) {
                    return Err(refuse(
                        "post_send",
                        "num_sge",
                        sg.len() as u64,
                        u64::from(self.cap.max_send_sge),
                        "max_send_sge of the QP",
                    ));
                }
                if matches!(wr.op, SendOp::CmpSwap { .. } | SendOp::FetchAdd { .. })
                    && (sg.len() != 1 || sg[0].length != 8)
                {
                    return Err(refuse(
                        "post_send",
                        "sg_list",
                        sg.len() as u64,
                        1,
                        "atomics return 8 bytes into exactly one 8-byte SGE",
                    ));
                }
                let (segs, bytes) = gather_size(sg);
                ds += segs;
                bytes
            }
            Payload::Inline(data) => {
                if data.len() as u64 > u64::from(self.cap.max_inline_data) {
                    return Err(refuse(
                        "post_send",
                        "inline length",
                        data.len() as u64,
                        u64::from(self.cap.max_inline_data),
                        "max_inline_data of the QP",
                    ));
                }
                if matches!(
                    wr.op,
                    SendOp::Read { .. } | SendOp::CmpSwap { .. } | SendOp::FetchAdd { .. }
                ) {
                    return Err(refuse(
                        "post_send",
                        "payload",
                        0,
                        0,
                        "READ and atomics cannot be inline",
                    ));
                }
                ds += wqe::inline_ds(data.len());
                data.len() as u64
            }
        };
        if let SendOp::CmpSwap { remote_addr, .. } | SendOp::FetchAdd { remote_addr, .. } = wr.op {
            if remote_addr % 8 != 0 {
                return Err(refuse(
                    "post_send",
                    "remote_addr",
                    remote_addr,
                    0,
                    "atomics need an 8-byte aligned address",
                ));
            }
        }
        if ds > MAX_DS || ds * DS > self.layout.sq_wqe_bytes as usize {
            return Err(refuse(
                "post_send",
                "WQE size (DS)",
                ds as u64,
                (self.layout.sq_wqe_bytes as usize / DS).min(MAX_DS) as u64,
                "the QP's send WQE size",
            ));
        }
        let max_msg = self.max_msg;
        if bytes > max_msg {
            return Err(refuse(
                "post_send",
                "message length",
                bytes,
                max_msg,
                "log_max_msg",
            ));
        }
        Ok(pack(
            (ds as u8, (ds * DS).div_ceil(WQEBB) as u32, bytes as u32),
            op,
            imm,
        ))
    }

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
        let reg =
            self.uar.bar_offset() + u64::from(regs::uar::BF_OFFSET) + u64::from(self.bf_offset);
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
    /// `&self`, as [`Srq::post_recv`](crate::srq::Srq::post_recv) does: posters of one receive
    /// queue take turns (a lock held for the post).
    #[inline]
    pub fn post_recv(&self, wrs: &[RecvWr<'_>]) -> Result<()> {
        let _one_poster = self.recv_lock.lock();
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
        // The receive table's HEAD: this QP is its only writer (under `recv_lock`, which orders
        // the posters), so a relaxed load gives back the last store; the pollers only read it.
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
