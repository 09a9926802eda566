//! `post_send` and `post_recv`: work requests checked against the QP, written into the rings
//! as the device reads them, and one doorbell per list.
//!
//! The data path allocates nothing and takes no lock: the rings, the doorbell record and the
//! work-request tables were allocated at `create_qp`; the CQ finds the work-request ids in the
//! tables it shares with the QP.

use mlx5_ifc::{regs, Be32, Be64};

use super::create::{Qp, QpRing};
use super::sizing::QpType;
use super::state::QpState;
use crate::error::{Error, Result};
use crate::io::barrier;
use crate::platform::Platform;
use crate::verbs::cq::{WcFlags, WcOpcode};
use crate::verbs::wqe::{self, flags, WqeBuilder, DS, INVALID_LKEY, MAX_DS, WQEBB};
use crate::verbs::wr_table::{self, rq_table, sq_desc, sq_desc_flags, sq_table};

pub use super::wr::{Payload, RecvWr, SendOp, SendWr, Sge};

/// Work requests of one list whose sizes the check pass keeps for the write pass.
const MEASURED: usize = 32;

/// A measured request in one word, its opcode decoded once for the check and the write: DS
/// (bits 0..8, ≤ 63), WQEBBs (8..16, ≤ 16), control-segment opcode (16..24), the table
/// descriptor's opcode code (24..32) and bytes (32..64).
#[inline(always)]
fn pack((ds, nbb, bytes): (u8, u32, u32), op: u8, wc_op: WcOpcode) -> u64 {
    let code = (sq_desc(0, wc_op, WcFlags::empty(), 0) >> 8) & 0xff;
    u64::from(ds) | u64::from(nbb) << 8 | u64::from(op) << 16 | code << 24 | u64::from(bytes) << 32
}

/// WQEBBs of a packed request.
#[inline(always)]
fn nbb_of(m: u64) -> u32 {
    (m >> 8) as u8 as u32
}

/// The work-request table descriptor of a packed request (the layout of [`sq_desc`]), its
/// completion flags those of its control-segment opcode ([`sq_desc_flags`]).
#[inline(always)]
fn desc_of(m: u64) -> u64 {
    let fl = u64::from(sq_desc_flags((m >> 16) as u8).bits());
    (m >> 8) & 0xff | (m >> 16) & 0xff00 | fl << 16 | m & !0xffff_ffff
}

/// Where the send queue lies in the QP's ring buffer (computed once per `post_send`).
#[derive(Clone, Copy)]
struct SqPlace {
    /// Byte offset of WQEBB 0 (after the RQ).
    base: usize,
    /// WQEBBs − 1.
    mask: usize,
}

/// Data segments (zero-length SGEs are skipped) and bytes of a gather list.
#[inline]
fn gather_size(sg: &[Sge]) -> (usize, u64) {
    sg.iter().fold((0, 0), |(n, b), s| {
        (n + usize::from(s.length > 0), b + u64::from(s.length))
    })
}

/// A post refused before anything was written.
fn refuse(
    op: &'static str,
    field: &'static str,
    requested: u64,
    max: u64,
    limit: &'static str,
) -> Error {
    Error::InvalidArgument {
        op,
        field,
        requested,
        max,
        limit,
    }
}

impl<P: Platform> Qp<'_, P> {
    /// DS units, WQEBBs and bytes of a send work request; checks it against the QP.
    #[inline(always)]
    fn measure(&self, wr: &SendWr<'_>) -> Result<u64> {
        match self.fits(wr) {
            Some(m) => Ok(m),
            None => self.refusal(wr),
        }
    }

    /// The checks of [`Self::refusal`] without the error (returned in registers): the packed
    /// sizes of a request the QP takes, `None` for one it refuses.
    #[inline(always)]
    fn fits(&self, wr: &SendWr<'_>) -> Option<u64> {
        let (op, op_set, wc_op, _) = wr.op.parts();
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
        if self.qp_type == QpType::Ud {
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
            wc_op,
        ))
    }

    /// Why the QP refuses a send work request (the slow path of [`Self::measure`]; also the
    /// sizes, should it take it after all).
    #[cold]
    #[inline(never)]
    fn refusal(&self, wr: &SendWr<'_>) -> Result<u64> {
        let (op, op_set, wc_op, _) = wr.op.parts();
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
        if self.qp_type == QpType::Ud {
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
            wc_op,
        ))
    }

    /// Posts a list of send work requests (`ibv_post_send`) and rings one doorbell. Every
    /// request is checked first; if one is refused, none is posted.
    pub fn post_send(&mut self, wrs: &[SendWr<'_>]) -> Result<()> {
        if self.state != QpState::Rts {
            return Err(Error::QpState {
                qpn: self.qpn,
                state: self.state,
                op: "post_send",
            });
        }
        let bbs = self.layout.sq_wqebb_cnt;
        let Some(ring) = self.ring.as_ref().filter(|_| bbs > 0) else {
            return Err(refuse(
                "post_send",
                "max_send_wr",
                wrs.len() as u64,
                0,
                "the QP has no send queue",
            ));
        };
        // The send queue's place in the ring buffer, once per call.
        let sq = SqPlace {
            base: self.layout.rq_bytes() as usize,
            mask: bbs as usize - 1,
        };
        let tail = ring.sq.load(sq_table::TAIL);
        let used = self.cur_post.wrapping_sub(tail);
        let full = |need: u64| {
            (used.saturating_add(need) > u64::from(bbs)).then_some(Error::QueueFull {
                qpn: self.qpn,
                queue: "send queue",
                outstanding: used,
                limit: u64::from(bbs),
            })
        };
        // One request (the latency case): no table of sizes.
        if let [wr] = wrs {
            let m = self.measure(wr)?;
            let nbb = nbb_of(m);
            if let Some(e) = full(u64::from(nbb)) {
                return Err(e);
            }
            let first = self.write_wqe(ring, sq, self.cur_post, wr, m)?;
            self.cur_post += u64::from(nbb);
            ring.sq.store(sq_table::HEAD, self.cur_post);
            // BlueFlame for an inline WQE of more than its control segment: rdma-core's
            // `post_send_db` copies only when DS > 1, and a zero-length inline send is DS 1.
            let inline = matches!(wr.payload, Payload::Inline(_)) && m as u8 > 1;
            return self.ring_send_doorbell(first, inline, nbb);
        }
        // Check every request first (nothing is posted if one is refused); keep the sizes of the
        // first ones so the write pass does not measure them again.
        let mut sizes = [0u64; MEASURED];
        let mut need = 0u64;
        for (i, wr) in wrs.iter().enumerate() {
            let m = self.measure(wr)?;
            if let Some(s) = sizes.get_mut(i) {
                *s = m;
            }
            need += (m >> 8) & 0xff;
        }
        if let Some(e) = full(need) {
            return Err(e);
        }
        let mut first = 0u64;
        let mut last_nbb = 0;
        for (i, wr) in wrs.iter().enumerate() {
            let m = match sizes.get(i) {
                Some(&m) => m,
                None => self.measure(wr)?,
            };
            first = self.write_wqe(ring, sq, self.cur_post, wr, m)?;
            last_nbb = nbb_of(m);
            self.cur_post += u64::from(last_nbb);
        }
        if wrs.is_empty() {
            return Ok(());
        }
        ring.sq.store(sq_table::HEAD, self.cur_post);
        self.ring_send_doorbell(first, false, last_nbb)
    }

    /// Writes the WQE of a measured request at `cur_post` and its work-request table words;
    /// returns the first 8 bytes of its control segment (for the doorbell).
    #[inline(always)]
    fn write_wqe(
        &self,
        ring: &QpRing,
        sq: SqPlace,
        cur_post: u64,
        wr: &SendWr<'_>,
        m: u64,
    ) -> Result<u64> {
        let (ds, op) = (m as u8, (m >> 16) as u8);
        let imm = match wr.op {
            SendOp::SendImm(imm) | SendOp::WriteImm { imm, .. } | SendOp::SendInv(imm) => imm,
            _ => 0,
        };
        let idx = cur_post as usize & sq.mask;
        let mut fl = 0;
        if wr.signaled || self.sq_sig_all {
            fl |= flags::CQ_UPDATE;
        }
        if wr.fence {
            fl |= flags::FENCE;
        }
        if wr.solicited {
            fl |= flags::SOLICITED;
        }
        let c = wqe::ctrl_words(op, cur_post as u16, self.qpn, ds, fl, imm);
        let mut w = WqeBuilder::new(ring.buf.buf(), sq.base, sq.mask, idx);
        w.put(c)?;
        if let Some(ud) = &wr.ud {
            let dg = wqe::datagram(ud);
            w.put_bytes(&dg)?;
        }
        match wr.op {
            SendOp::Write { remote_addr, rkey }
            | SendOp::WriteImm {
                remote_addr, rkey, ..
            }
            | SendOp::Read { remote_addr, rkey } => {
                w.put(wqe::raddr_words(remote_addr, rkey))?;
            }
            SendOp::CmpSwap {
                remote_addr,
                rkey,
                compare,
                swap,
            } => {
                w.put(wqe::raddr_words(remote_addr, rkey))?;
                w.put(wqe::atomic_words(swap, compare))?;
            }
            SendOp::FetchAdd {
                remote_addr,
                rkey,
                add,
            } => {
                w.put(wqe::raddr_words(remote_addr, rkey))?;
                w.put(wqe::atomic_words(add, 0))?;
            }
            SendOp::Send | SendOp::SendImm(_) | SendOp::SendInv(_) => {}
        }
        match wr.payload {
            Payload::Sges(sg) => {
                for s in sg.iter().filter(|s| s.length > 0) {
                    w.put(wqe::data_words(s.length, s.lkey, s.addr))?;
                }
            }
            Payload::Inline(data) => w.put_inline(data)?,
        }
        w.finish()?;
        // Ordered before the CQ reads them by the caller's release store of HEAD.
        ring.sq
            .store_pair_relaxed(sq_table::wrid(idx), wr.wr_id, desc_of(m));
        Ok(c[0])
    }

    /// DBR word 1, then the UAR doorbell: BlueFlame for a single small inline WQE (the latency
    /// case: the device takes the WQE from the doorbell write instead of fetching it), else the
    /// 8-byte doorbell.
    #[inline]
    fn ring_send_doorbell(&mut self, first: u64, single_inline: bool, nbb: u32) -> Result<()> {
        let Some(ring) = self.ring.as_ref() else {
            return Ok(());
        };
        barrier::dma_wmb();
        ring.dbr
            .write_be32(4, Be32::new(self.cur_post as u32 & 0xffff))?;
        barrier::mmio_wmb();
        let p = self.dev.platform();
        let reg =
            self.uar.bar_offset() + u64::from(regs::uar::BF_OFFSET) + u64::from(self.bf_offset);
        let bf = self.bf_half > 0 && single_inline && nbb as usize * WQEBB <= self.bf_half as usize;
        if bf {
            // BlueFlame: the whole WQE through the register, 8 bytes at a time.
            let mask = self.layout.sq_wqebb_cnt as usize - 1;
            let start = (self.cur_post - u64::from(nbb)) as usize;
            let sq_base = self.layout.rq_bytes() as usize;
            for q in 0..nbb as usize {
                let at = sq_base + (start.wrapping_add(q) & mask) * WQEBB;
                let bb = ring.buf.buf().read_wqebb(at)?;
                for (k, &w) in bb.iter().enumerate() {
                    p.bar_write64(reg + (q * WQEBB + k * 8) as u64, Be64::from_ne_raw(w));
                }
            }
        } else {
            p.bar_write64(reg, Be64::from_ne_raw(first));
        }
        barrier::mmio_wmb();
        self.bf_offset ^= self.bf_half;
        Ok(())
    }

    /// Back to empty rings, as the device's work-queue counters after 2RST.
    pub(super) fn reset_rings(&mut self) {
        self.cur_post = 0;
        self.rq_head = 0;
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

    /// Posts receive work requests to the QP's own receive queue (`ibv_post_recv`).
    pub fn post_recv(&mut self, wrs: &[RecvWr<'_>]) -> Result<()> {
        if self.srqn.is_some() {
            return Err(refuse(
                "post_recv",
                "qp",
                u64::from(self.qpn),
                0,
                "receives of a QP with an SRQ go to the SRQ",
            ));
        }
        if self.state == QpState::Reset {
            return Err(Error::QpState {
                qpn: self.qpn,
                state: self.state,
                op: "post_recv",
            });
        }
        let Some(ring) = self.ring.as_ref() else {
            return Ok(());
        };
        let Some(rq) = ring.rq.as_ref() else {
            return Err(refuse(
                "post_recv",
                "max_recv_wr",
                wrs.len() as u64,
                0,
                "the QP has no receive queue",
            ));
        };
        let cnt = u64::from(self.layout.rq_wqe_cnt);
        let max_sge = u64::from(self.layout.rq_stride_bytes / 16);
        for wr in wrs {
            if wr.sg_list.len() as u64 > max_sge {
                return Err(refuse(
                    "post_recv",
                    "num_sge",
                    wr.sg_list.len() as u64,
                    max_sge,
                    "max_recv_sge of the QP",
                ));
            }
        }
        let used = self.rq_head.wrapping_sub(rq.load(rq_table::TAIL));
        if used.saturating_add(wrs.len() as u64) > cnt {
            return Err(Error::QueueFull {
                qpn: self.qpn,
                queue: "receive queue",
                outstanding: used,
                limit: cnt,
            });
        }
        let stride = self.layout.rq_stride_bytes as usize;
        for wr in wrs {
            let slot = (self.rq_head & (cnt - 1)) as usize;
            let mut at = slot * stride;
            let mut used_segs = 0;
            for s in wr.sg_list.iter().filter(|s| s.length > 0) {
                ring.buf
                    .buf()
                    .write_bytes(at, &wqe::data(s.length, s.lkey, s.addr))?;
                at += DS;
                used_segs += 1;
            }
            if (used_segs as u64) < max_sge {
                ring.buf
                    .buf()
                    .write_bytes(at, &wqe::data(0, INVALID_LKEY, 0))?;
            }
            let cap = wr.sg_list.iter().map(|s| u64::from(s.length)).sum();
            rq.store_pair_relaxed(rq_table::wrid(slot), wr.wr_id, cap);
            self.rq_head += 1;
        }
        rq.store(rq_table::HEAD, self.rq_head);
        barrier::dma_wmb();
        ring.dbr
            .write_be32(0, Be32::new(self.rq_head as u32 & 0xffff))?;
        Ok(())
    }
}
