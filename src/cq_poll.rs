//! Polling a CQ (`ibv_poll_cq`), arming it (`ibv_req_notify_cq`), and the table that lets a CQ
//! find the work-request ids of the queues completing on it.
//!
//! A CQE at consumer index `ci` is the device's when its opcode is INVALID or its owner bit
//! differs from `(ci >> log_size) & 1`. Every field the device wrote is checked before use: the
//! QPN must be a queue attached to this CQ, the WQE counter must name an outstanding WQE, the
//! opcode must be one a CQE can have. Anything else is an error, never an out-of-bounds read.

use heapless::Vec;
use mlx5_ifc::{regs, Be32, Be64};

use crate::cq::{Cq, CQE_BYTES, CQE_OP_OWN};
use crate::error::{Error, Result};
use crate::io::{barrier, DmaBuf, DmaRing, PairRing, SharedDma};
use crate::platform::Platform;
use crate::queue::ceil_log2;

/// Queues one CQ can serve.
pub const MAX_QUEUES_PER_CQ: usize = 512;

/// Word layout of a send queue table: completed WQEBBs, posted WQEBBs, then per WQEBB a pair of
/// words side by side (one cache line for both): the wr_id and a descriptor
/// (`nbb | wr_opcode << 8 | byte_len << 32`).
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
    /// The descriptor word of WQEBB `idx`.
    #[inline]
    pub const fn desc(idx: usize) -> usize {
        WRID + 2 * idx + 1
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
/// list holds), then the freed ring's entries.
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
    /// Words of a table for `n` WQEs.
    pub const fn words(n: usize) -> usize {
        WRID + 3 * n
    }
}

/// The receive side of an attached QP.
#[derive(Debug)]
pub enum RecvTable {
    /// The QP's own RQ with `cnt` WQEs.
    Rq {
        /// Table.
        table: SharedDma,
        /// WQEs in the RQ.
        cnt: u32,
    },
    /// An SRQ with `cnt` WQEs.
    Srq {
        /// Table.
        table: SharedDma,
        /// WQEs in the SRQ.
        cnt: u32,
        /// SRQ number.
        srqn: u32,
    },
}

/// One QP attached to a CQ.
#[derive(Debug)]
pub struct Attached {
    /// QP number.
    pub qpn: u32,
    /// Send queue table and its WQEBBs, when this CQ is the QP's send CQ.
    pub sq: Option<(SharedDma, u32)>,
    /// Receive table, when this CQ is the QP's receive CQ.
    pub rq: Option<RecvTable>,
}

/// The CQ state polling changes.
#[derive(Debug, Default)]
pub struct CqShared {
    pub(crate) ci: u32,
    pub(crate) arm_sn: u32,
    /// Index in `queues` of the queue the last CQE named (a hint; checked before use).
    pub(crate) hint: usize,
    pub(crate) queues: Vec<Attached, MAX_QUEUES_PER_CQ>,
}

/// Completion status (`enum ibv_wc_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum WcStatus {
    /// Success.
    Success,
    /// Local length error (a message longer than the receive buffer).
    LocLenErr,
    /// Local QP operation error.
    LocQpOpErr,
    /// Local protection error (bad lkey, or no right).
    LocProtErr,
    /// Flushed: the QP went to the error state before the work request ran.
    WrFlushErr,
    /// Memory window bind error.
    MwBindErr,
    /// Bad response.
    BadRespErr,
    /// Local access error.
    LocAccessErr,
    /// Remote invalid request.
    RemInvReqErr,
    /// Remote access error (bad rkey, no right, out of bounds).
    RemAccessErr,
    /// Remote operation error.
    RemOpErr,
    /// Transport retries exhausted.
    RetryExcErr,
    /// RNR retries exhausted.
    RnrRetryExcErr,
    /// Remote aborted.
    RemAbortErr,
    /// Any other syndrome.
    GeneralErr(u8),
}

impl WcStatus {
    /// The status of a CQE syndrome (mlx5-datapath-sizing.md §4.3).
    pub fn from_syndrome(s: u8) -> Self {
        match s {
            0x01 => WcStatus::LocLenErr,
            0x02 => WcStatus::LocQpOpErr,
            0x04 => WcStatus::LocProtErr,
            0x05 => WcStatus::WrFlushErr,
            0x06 => WcStatus::MwBindErr,
            0x10 => WcStatus::BadRespErr,
            0x11 => WcStatus::LocAccessErr,
            0x12 => WcStatus::RemInvReqErr,
            0x13 => WcStatus::RemAccessErr,
            0x14 => WcStatus::RemOpErr,
            0x15 => WcStatus::RetryExcErr,
            0x16 => WcStatus::RnrRetryExcErr,
            0x22 => WcStatus::RemAbortErr,
            other => WcStatus::GeneralErr(other),
        }
    }
}

/// What completed (`enum ibv_wc_opcode`, with its values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum WcOpcode {
    /// A SEND (with or without immediate or invalidate).
    Send = 0,
    /// An RDMA WRITE.
    RdmaWrite = 1,
    /// An RDMA READ.
    RdmaRead = 2,
    /// An atomic compare-and-swap.
    CompSwap = 3,
    /// An atomic fetch-and-add.
    FetchAdd = 4,
    /// A receive.
    Recv = 128,
    /// A receive consumed by an RDMA WRITE with immediate.
    RecvRdmaWithImm = 129,
}

/// A work completion (`struct ibv_wc`).
///
/// `repr(C)` with the fields a successful send completion does not set side by side, so that
/// `poll` writes them with few stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct Wc {
    /// The work request's id.
    pub wr_id: u64,
    /// Bytes transferred (receives, READs, atomics).
    pub byte_len: u32,
    /// The local QP.
    pub qp_num: u32,
    /// What completed (for errors: what the work request was).
    pub opcode: WcOpcode,
    /// Success or what went wrong.
    pub status: WcStatus,
    /// Whether a GRH is in the first 40 bytes of the receive buffer (UD).
    pub grh: bool,
    /// The device's vendor syndrome (errors).
    pub vendor_err: u8,
    /// The source QP (UD receives).
    pub src_qp: u32,
    /// Immediate data, if any.
    pub imm_data: Option<u32>,
}

/// The descriptor word of a send queue slot.
pub(crate) fn sq_desc(nbb: u32, op: WcOpcode, byte_len: u32) -> u64 {
    // The code is the opcode's `ibv_wc_opcode` value.
    u64::from(nbb) | u64::from(op as u8) << 8 | u64::from(byte_len) << 32
}

/// The work completion opcode of each descriptor code ([`sq_desc`]: the code is the opcode's
/// value); codes no send queue writes read as SEND.
const DESC_OPS: [WcOpcode; 256] = {
    let mut t = [WcOpcode::Send; 256];
    t[1] = WcOpcode::RdmaWrite;
    t[2] = WcOpcode::RdmaRead;
    t[3] = WcOpcode::CompSwap;
    t[4] = WcOpcode::FetchAdd;
    t
};

/// The work completion opcode of a descriptor.
#[inline(always)]
fn desc_op(d: u64) -> WcOpcode {
    DESC_OPS[usize::from((d >> 8) as u8)]
}

fn bad(what: &'static str, value: u64, limit: u64) -> Error {
    Error::BadDeviceValue { what, value, limit }
}

impl<P: Platform> Cq<'_, P> {
    /// Attaches a QP's queues (done by `create_qp`).
    pub(crate) fn attach(&self, a: Attached) -> Result<()> {
        let mut s = self.shared.lock();
        if let Some(e) = s.queues.iter_mut().find(|e| e.qpn == a.qpn) {
            // Same CQ for both queues: merge.
            if a.sq.is_some() {
                e.sq = a.sq;
            }
            if a.rq.is_some() {
                e.rq = a.rq;
            }
            return Ok(());
        }
        s.queues.push(a).map_err(|_| Error::Capacity {
            what: "queues attached to one CQ",
            limit: MAX_QUEUES_PER_CQ,
        })
    }

    /// Detaches a QP, returning its table handles.
    pub(crate) fn detach(&self, qpn: u32) -> Option<Attached> {
        let mut s = self.shared.lock();
        let i = s.queues.iter().position(|e| e.qpn == qpn)?;
        Some(s.queues.swap_remove(i))
    }

    /// Polls up to `wc.len()` completions (`ibv_poll_cq`); returns how many were filled.
    pub fn poll(&self, wc: &mut [Wc]) -> Result<usize> {
        let Some((buf, dbr)) = self.mem.as_ref() else {
            return Ok(0);
        };
        let mut s = self.shared.lock();
        let (mut ci, mut hint) = (s.ci, s.hint);
        let (n, err) = poll_ring(buf.buf(), self.cqe + 1, &s, &mut ci, &mut hint, wc);
        (s.ci, s.hint) = (ci, hint);
        if n > 0 || err.is_some() {
            barrier::dma_wmb();
            dbr.write_be32(0, Be32::new(ci & 0xff_ffff))?;
        }
        match err {
            Some(e) if n == 0 => Err(e),
            Some(e) => {
                log::error!(
                    "CQ {:#x}: a CQE made no sense after {n} good ones: {e}",
                    self.cqn
                );
                Ok(n)
            }
            None => Ok(n),
        }
    }

    /// Arms the CQ (`ibv_req_notify_cq`): the next completion (or the next solicited one) makes
    /// the device post a completion event to the CQ's EQ.
    pub fn req_notify(&self, solicited_only: bool) -> Result<()> {
        let Some((_, dbr)) = self.mem.as_ref() else {
            return Ok(());
        };
        let Some(uar) = self.dev.uar() else {
            return Ok(());
        };
        let s = self.shared.lock();
        let cmd = if solicited_only { 1u32 << 24 } else { 0 };
        let word = (s.arm_sn & 3) << 28 | cmd | (s.ci & 0xff_ffff);
        dbr.write_be32(4, Be32::new(word))?;
        barrier::mmio_wmb();
        let db = u64::from(word) << 32 | u64::from(self.cqn);
        self.dev.platform().bar_write64(
            uar.bar_offset() + u64::from(regs::uar::CQ_DOORBELL),
            Be64::new(db),
        );
        Ok(())
    }

    /// Acknowledges a completion event of this CQ (advances the arm sequence number).
    pub fn ack_event(&self) {
        let mut s = self.shared.lock();
        s.arm_sn = s.arm_sn.wrapping_add(1);
    }
}

/// First CQE byte polling reads (`flags_rqpn`; the bytes before it are not used).
const CQE_LO: usize = 24;
/// `byte_cnt` in a CQE.
const CQE_BYTE_CNT: usize = 44;
/// The CQE's last 8-byte word (`sop_drop_qpn`, `wqe_counter`, `signature`, `op_own`).
const CQE_HI: usize = 56;

// `op_own` is the last byte of the `CQE_HI` word: its low byte once read big-endian.
const _: () = assert!(CQE_OP_OWN == CQE_HI + 7);

/// The CQE bytes polling uses: `CQE_LO..CQE_HI` and `CQE_HI..64`.
struct Cqe {
    lo: [u8; CQE_HI - CQE_LO],
    hi: [u8; CQE_BYTES - CQE_HI],
}

impl Cqe {
    /// The byte at CQE offset `at` (`CQE_LO..64`; 0 outside).
    #[inline]
    fn u8(&self, at: usize) -> u8 {
        match at.checked_sub(CQE_HI) {
            Some(i) => self.hi.get(i).copied().unwrap_or(0),
            None => self.lo.get(at.wrapping_sub(CQE_LO)).copied().unwrap_or(0),
        }
    }

    /// The big-endian word at CQE offset `at` (4-aligned, inside one half).
    #[inline]
    fn be32(&self, at: usize) -> u32 {
        u32::from_be_bytes([
            self.u8(at),
            self.u8(at + 1),
            self.u8(at + 2),
            self.u8(at + 3),
        ])
    }
}

/// CQEs ahead of the one being decoded whose line is prefetched (16 measured faster than 8
/// and 32 on the null-device bench).
const PREFETCH_CQES: usize = 16;
/// Work-request table words (one line holds four WQEBBs' pairs) prefetched ahead of the next
/// expected WQEBB.
const PREFETCH_BBS: u64 = 16;

/// Reads the CQEs from consumer index `*ci` on (a ring of `size` slots) into `wc`, advancing
/// `*ci` past each one consumed; returns how many were filled and the error that stopped it,
/// if any (the CQE that made no sense is consumed).
///
/// Requester successes of the send queue being retired take a short path
/// ([`SqRun::retire_many`]);
/// everything else, and anything that short path doubts, goes through [`decode`], which makes
/// every check and builds the error.
#[inline(always)]
fn poll_ring(
    buf: &DmaBuf,
    size: u32,
    s: &CqShared,
    ci: &mut u32,
    hint: &mut usize,
    wc: &mut [Wc],
) -> (usize, Option<Error>) {
    let mask = size.wrapping_sub(1);
    let log = ceil_log2(u64::from(size));
    let mut c = *ci;
    let mut n = 0;
    let mut err = None;
    // The send-queue run being retired (its TAIL is stored once per run, not per CQE).
    let mut run = SqRun::NONE;
    // The ring seen with masked indices, for the short path (the general path checks each
    // access itself).
    let ring = buf.ring::<CQE_BYTES>(size as usize);
    loop {
        if let (Some(ring), Some(wr)) = (ring, run.wr) {
            n += run.retire_many(&ring, wr, log, &mut c, wc.get_mut(n..).unwrap_or_default());
        }
        let Some(slot) = wc.get_mut(n) else {
            break;
        };
        let at = (c & mask) as usize * CQE_BYTES;
        // The last 8 bytes (QPN, WQE counter, op_own) with acquire: the rest after.
        let hi = match buf.read_u64_acquire(at + CQE_HI) {
            Ok(h) => u64::from_be_bytes(h),
            Err(e) => {
                err = Some(e.into());
                break;
            }
        };
        let op_own = hi as u8;
        if op_own >> 4 == 0xf || u32::from(op_own & 1) != (c >> log) & 1 {
            break;
        }
        barrier::dma_rmb();
        // A successful send completion of another queue: start that queue's run and let the
        // short path take it from the top of the loop (should it refuse the CQE, the run is
        // the CQE's by then and the general path below decides).
        let qpn = (hi >> 32) as u32 & 0xff_ffff;
        if op_own >> 4 == 0 && qpn != run.qpn && ring.is_some() {
            if let Some((t, bbs)) = find(s, qpn, hint).and_then(|q| q.sq.as_ref()) {
                run.start(qpn, t, *bbs);
                continue;
            }
        }
        c = c.wrapping_add(1);
        let cqe = match buf.read_words::<{ CQE_HI - CQE_LO }>(at + CQE_LO) {
            Ok(lo) => Cqe {
                lo,
                hi: hi.to_be_bytes(),
            },
            Err(e) => {
                err = Some(e.into());
                break;
            }
        };
        match decode(s, &cqe, hint, &mut run) {
            Ok(w) => {
                *slot = w;
                n += 1;
            }
            Err(e) => {
                err = Some(e);
                break;
            }
        }
    }
    // Retire the last run before anyone can look at the table again.
    run.flush();
    *ci = c;
    (n, err)
}

/// The send queue whose completions are being retired in this poll call: its table, TAIL as
/// retired so far and the HEAD last loaded. TAIL is stored when the run ends (another queue,
/// the end of the call or an error), so a poster sees every completion once `poll` returns;
/// until then it only sees less room, never more.
struct SqRun<'s> {
    /// The queue's table; `None` for no run.
    t: Option<&'s SharedDma>,
    /// Its wr_id/descriptor pairs; `None` for no run (or a table too small for its queue).
    wr: Option<PairRing<'s>>,
    /// Its QP number; `u32::MAX` (no 24-bit QPN) for no run.
    qpn: u32,
    /// WQEBBs − 1.
    mask: usize,
    tail: u64,
    head: u64,
    /// Whether `tail` moved since it was loaded.
    dirty: bool,
}

impl<'s> SqRun<'s> {
    const NONE: Self = Self {
        t: None,
        wr: None,
        qpn: u32::MAX,
        mask: 0,
        tail: 0,
        head: 0,
        dirty: false,
    };

    /// Starts the run of QP `qpn`'s send queue (`bbs` WQEBBs).
    #[inline(always)]
    fn start(&mut self, qpn: u32, t: &'s SharedDma, bbs: u32) {
        self.flush();
        *self = SqRun {
            t: Some(t),
            wr: t.pairs(sq_table::WRID, bbs as usize),
            qpn,
            mask: bbs.wrapping_sub(1) as usize,
            tail: t.load(sq_table::TAIL),
            head: t.load(sq_table::HEAD),
            dirty: false,
        };
    }

    /// Stores the run's TAIL (if it moved) and ends it.
    #[inline(always)]
    fn flush(&mut self) {
        if self.dirty {
            if let Some(t) = self.t {
                t.store(sq_table::TAIL, self.tail);
            }
        }
        *self = Self::NONE;
    }

    /// The short path: successful requester CQEs of this run's QP, from consumer index `*ci`
    /// into `wc`, in a loop that keeps the run in registers. Each CQE must be ready (owner bit),
    /// have opcode REQ and this QPN, and its WQE counter must name a WQE outstanding as of the
    /// HEAD already loaded whose table words exist. It stops at the first CQE that is anything
    /// else — not ready, another queue, an error, a post made since HEAD was loaded — without
    /// consuming it: the general path ([`decode`]) then decides. Returns how many it filled.
    #[inline(never)]
    fn retire_many(
        &mut self,
        ring: &DmaRing<'_, CQE_BYTES>,
        wr: PairRing<'_>,
        log: u8,
        ci: &mut u32,
        wc: &mut [Wc],
    ) -> usize {
        let qp_num = self.qpn;
        let qpn = u64::from(qp_num);
        let (mut tail, head) = (self.tail, self.head);
        let mut c = *ci;
        let mut k = 0;
        // Stretches of the ring that do not wrap: along one, the owner bit is the same.
        while k < wc.len() {
            let seg = ring.segment(c as usize, wc.len() - k);
            let Some(out) = wc.get_mut(k..k + seg.len()) else {
                break;
            };
            let want = qpn << 32 | u64::from((c >> log) & 1);
            let mut j = 0;
            for (i, slot) in (0..seg.len()).zip(out.iter_mut()) {
                let Some(hi) = seg.load_u64_acquire::<CQE_HI>(i) else {
                    break;
                };
                seg.prefetch_ahead::<PREFETCH_CQES>(i);
                let hi = u64::from_be_bytes(hi);
                // One compare: the QPN, opcode REQ (0) and the owner bit of this pass (the
                // solicited and format bits are not looked at).
                if hi & 0x00ff_ffff_0000_00f1 != want {
                    break;
                }
                // The running position of the WQE completed: at or after TAIL, before HEAD.
                let wqe_counter = (hi >> 16) as u16;
                let at = tail + u64::from(wqe_counter.wrapping_sub(tail as u16));
                if at >= head {
                    break;
                }
                // Written before HEAD (release), which was loaded with acquire.
                let (wr_id, desc) = wr.load_relaxed(usize::from(wqe_counter));
                let code = (desc >> 8) as u8;
                let posted = (desc >> 32) as u32;
                // SEND and WRITE: the bytes posted; READ and atomics: what the device says,
                // no more than the scatter list holds (or the general path refuses it).
                let (opcode, byte_len) = match code {
                    0 => (WcOpcode::Send, posted),
                    1 => (WcOpcode::RdmaWrite, posted),
                    _ => match seg.load_be32::<CQE_BYTE_CNT>(i) {
                        Some(b) if b.get() <= posted => (DESC_OPS[usize::from(code)], b.get()),
                        _ => break,
                    },
                };
                *slot = Wc {
                    wr_id,
                    byte_len,
                    qp_num,
                    opcode,
                    status: WcStatus::Success,
                    grh: false,
                    vendor_err: 0,
                    src_qp: 0,
                    imm_data: None,
                };
                tail = at + (desc & 0xff).max(1);
                j += 1;
            }
            c = c.wrapping_add(j as u32);
            k += j;
            if j < seg.len() || seg.is_empty() {
                break;
            }
        }
        if k > 0 {
            // Past HEAD only if a descriptor's WQEBB count was corrupt: never publish that.
            self.tail = tail.min(head);
            self.dirty = true;
            *ci = c;
        }
        k
    }
}

/// The queue of QP `qpn` on this CQ; `hint` (an index in the list, checked) is tried first and
/// updated.
#[inline(always)]
fn find<'s>(s: &'s CqShared, qpn: u32, hint: &mut usize) -> Option<&'s Attached> {
    if let Some(q) = s.queues.get(*hint).filter(|e| e.qpn == qpn) {
        return Some(q);
    }
    let i = s.queues.iter().position(|e| e.qpn == qpn)?;
    *hint = i;
    s.queues.get(i)
}

/// A receive completion's length against its receive buffer: a SEND (opcodes 0x2..0x4) must
/// fit in the scatter list (`cap` bytes, the GRH of a UD receive included); an RDMA WRITE with
/// immediate (0x1) wrote remote memory, not the buffer. Error CQEs carry no length.
fn recv_fits(opcode: u8, byte_cnt: u32, cap: u64) -> Result<()> {
    if (0x2..=0x4).contains(&opcode) && u64::from(byte_cnt) > cap {
        return Err(bad(
            "CQE byte_cnt (more than the receive buffer holds)",
            u64::from(byte_cnt),
            cap,
        ));
    }
    Ok(())
}

/// Turns one CQE into a work completion, retiring the work requests it completes. `hint` is
/// the index in the CQ's queue list of the last queue found; updated. `run` is the send queue
/// being retired ([`SqRun`]); updated.
#[inline(always)]
fn decode<'s>(s: &'s CqShared, c: &Cqe, hint: &mut usize, run: &mut SqRun<'s>) -> Result<Wc> {
    let opcode = c.u8(63) >> 4;
    let qpn = c.be32(56) & 0xff_ffff;
    let wqe_counter = u16::from_be_bytes([c.u8(60), c.u8(61)]);
    let byte_cnt = c.be32(44);
    let imm = c.be32(36);
    let q = find(s, qpn, hint)
        .ok_or_else(|| bad("CQE QPN (no such queue on this CQ)", u64::from(qpn), 0))?;
    let (status, vendor_err) = match opcode {
        0xd | 0xe => (WcStatus::from_syndrome(c.u8(55)), c.u8(54)),
        0x0..=0x4 => (WcStatus::Success, 0),
        other => return Err(bad("CQE opcode", u64::from(other), 0x4)),
    };
    let mut wc = Wc {
        wr_id: 0,
        status,
        opcode: WcOpcode::Recv,
        byte_len: byte_cnt,
        imm_data: None,
        qp_num: qpn,
        src_qp: c.be32(24) & 0xff_ffff,
        grh: (c.u8(24) >> 4) & 3 != 0,
        vendor_err,
    };
    let requester = opcode == 0x0 || opcode == 0xd;
    if requester {
        let (t, bbs) = q.sq.as_ref().ok_or_else(|| {
            bad(
                "requester CQE for a QP whose send CQ is another",
                u64::from(qpn),
                0,
            )
        })?;
        if run.qpn != qpn {
            run.start(qpn, t, *bbs);
        }
        let tail = run.tail;
        let delta = u64::from(wqe_counter.wrapping_sub(tail as u16));
        if delta >= run.head.wrapping_sub(tail) {
            // Posted since HEAD was loaded? Load it again before calling the CQE bad.
            run.head = t.load(sq_table::HEAD);
            if delta >= run.head.wrapping_sub(tail) {
                return Err(bad(
                    "CQE wqe_counter (not an outstanding send WQE)",
                    u64::from(wqe_counter),
                    run.head & 0xffff,
                ));
            }
        }
        let idx = usize::from(wqe_counter) & run.mask;
        // Written before HEAD (release), which was loaded with acquire above.
        let (wr_id, desc) = t.load_pair_relaxed(sq_table::wrid(idx)).ok_or_else(|| {
            bad(
                "CQE wqe_counter (outside the work-request table)",
                u64::from(wqe_counter),
                u64::from(*bbs),
            )
        })?;
        wc.wr_id = wr_id;
        wc.opcode = desc_op(desc);
        let posted = (desc >> 32) as u32;
        // Fields a requester CQE does not carry.
        wc.src_qp = 0;
        wc.grh = false;
        run.tail = tail.wrapping_add(delta + (desc & 0xff).max(1));
        run.dirty = true;
        // The table line of the WQEBBs a few completions on.
        t.prefetch(sq_table::wrid(
            (run.tail.wrapping_add(PREFETCH_BBS) as usize) & run.mask,
        ));
        if wc.opcode == WcOpcode::Send || wc.opcode == WcOpcode::RdmaWrite {
            wc.byte_len = posted;
        } else if opcode == 0x0 && byte_cnt > posted {
            // A READ or an atomic cannot bring more than its scatter list holds (the WQEs
            // are retired above: the device is done with them).
            return Err(bad(
                "CQE byte_cnt (more than the READ/atomic's scatter list holds)",
                u64::from(byte_cnt),
                u64::from(posted),
            ));
        }
        return Ok(wc);
    }
    wc.opcode = if opcode == 0x1 {
        WcOpcode::RecvRdmaWithImm
    } else {
        WcOpcode::Recv
    };
    if opcode == 0x1 || opcode == 0x3 {
        wc.imm_data = Some(imm);
    }
    match q.rq.as_ref().ok_or_else(|| {
        bad(
            "responder CQE for a QP whose receive CQ is another",
            u64::from(qpn),
            0,
        )
    })? {
        RecvTable::Rq { table, cnt } => {
            let tail = table.load(rq_table::TAIL);
            if tail >= table.load(rq_table::HEAD) {
                return Err(bad(
                    "responder CQE with no receive posted",
                    u64::from(qpn),
                    0,
                ));
            }
            let slot = (tail as u32 & (cnt - 1)) as usize;
            // Written before HEAD (release), which was loaded with acquire above.
            let (wr_id, cap) = table
                .load_pair_relaxed(rq_table::wrid(slot))
                .ok_or_else(|| bad("receive table slot", slot as u64, u64::from(*cnt)))?;
            wc.wr_id = wr_id;
            table.store(rq_table::TAIL, tail + 1);
            recv_fits(opcode, byte_cnt, cap)?;
        }
        RecvTable::Srq { table, cnt, .. } => {
            let idx = u32::from(wqe_counter);
            if idx >= *cnt {
                return Err(bad("CQE SRQ WQE index", u64::from(idx), u64::from(cnt - 1)));
            }
            // Exactly one completion per posted WQE: whoever clears POSTED owns it.
            let cap = table
                .swap(srq_table::wrid(idx as usize) + 1, 0)
                .filter(|c| c & srq_table::POSTED != 0)
                .ok_or_else(|| {
                    bad(
                        "CQE SRQ WQE index (not a posted receive)",
                        u64::from(idx),
                        u64::from(cnt - 1),
                    )
                })?;
            wc.wr_id = table.load(srq_table::wrid(idx as usize));
            // Hand the WQE back to the SRQ's free list (its post_recv relinks it).
            let n = *cnt as usize;
            let at = table.load(srq_table::FREED_TAIL);
            let mut t = at;
            while !table.compare_exchange(srq_table::FREED_TAIL, t, t + 1) {
                t = table.load(srq_table::FREED_TAIL);
            }
            table.store(srq_table::freed(n) + (t as usize % n), u64::from(idx) + 1);
            recv_fits(opcode, byte_cnt, cap & !srq_table::POSTED)?;
        }
    }
    Ok(wc)
}
