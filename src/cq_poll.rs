//! Polling a CQ (`ibv_poll_cq`, or `ibv_start_poll` … `ibv_end_poll` with [`CqPoller`]),
//! arming it (`ibv_req_notify_cq`), work completions, and the tables that let a CQ find the
//! work-request ids of the queues completing on it.
//!
//! A CQE at consumer index `ci` is the device's when its opcode is INVALID or its owner bit
//! differs from `(ci >> log_size) & 1`. Every field the device wrote is checked before use (the
//! reading itself is in `cqe.rs`): the QPN must be a queue attached to this CQ, the WQE counter
//! must name an outstanding WQE or a posted SRQ WQE, the opcode must be one a CQE can have, the
//! length must fit what was posted. Anything else is an error, never an out-of-bounds read.

use heapless::Vec;
use mlx5_ifc::{regs, Be32, Be64};

use crate::cq::Cq;
use crate::error::{Error, Result, Wait};
use crate::io::{barrier, SharedTable};
use crate::platform::Platform;

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

/// The receive side of an attached QP.
#[derive(Debug)]
pub enum RecvTable {
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
    pub sq: Option<(SharedTable, u32)>,
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

impl Default for Wc {
    /// An empty completion (what a `wc` array is filled with before polling into it).
    fn default() -> Self {
        Wc {
            wr_id: 0,
            byte_len: 0,
            qp_num: 0,
            opcode: WcOpcode::Send,
            status: WcStatus::Success,
            grh: false,
            vendor_err: 0,
            src_qp: 0,
            imm_data: None,
        }
    }
}

/// The descriptor word of a send queue slot.
pub(crate) fn sq_desc(nbb: u32, op: WcOpcode, byte_len: u32) -> u64 {
    // The code is the opcode's `ibv_wc_opcode` value.
    u64::from(nbb) | u64::from(op as u8) << 8 | u64::from(byte_len) << 32
}

impl<'d, P: Platform> Cq<'d, P> {
    /// The CQ's polling state, waiting at most `cq_lock_timeout_ms` (device configuration) for
    /// another holder to let go.
    pub(crate) fn lock_state(&self) -> Result<spin::MutexGuard<'_, CqShared>> {
        if let Some(g) = self.shared.try_lock() {
            return Ok(g);
        }
        let p = self.dev.platform();
        let start = p.now_ns();
        let limit = self
            .dev
            .config()
            .cq_lock_timeout_ms
            .saturating_mul(1_000_000);
        loop {
            p.relax();
            if let Some(g) = self.shared.try_lock() {
                return Ok(g);
            }
            let waited = p.now_ns().saturating_sub(start);
            if waited >= limit {
                return Err(Error::Timeout {
                    waiting_for: Wait::CqLock { cqn: self.cqn },
                    waited_ms: waited / 1_000_000,
                });
            }
        }
    }

    /// Attaches a QP's queues (done by `create_qp`).
    pub(crate) fn attach(&self, a: Attached) -> Result<()> {
        let mut s = self.lock_state()?;
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
    pub(crate) fn detach(&self, qpn: u32) -> Result<Option<Attached>> {
        let mut s = self.lock_state()?;
        Ok(s.queues
            .iter()
            .position(|e| e.qpn == qpn)
            .map(|i| s.queues.swap_remove(i)))
    }

    /// Polls up to `wc.len()` completions (`ibv_poll_cq`); returns how many were filled.
    ///
    /// Takes the CQ's lock for the call; a thread that polls in a loop can take it once with
    /// [`Cq::start_poll`]. While another thread holds the CQ, waits up to the device's
    /// `cq_lock_timeout_ms`, then fails with [`Error::Timeout`].
    pub fn poll(&self, wc: &mut [Wc]) -> Result<usize> {
        self.start_poll()?.poll(wc)
    }

    /// Takes the CQ for a polling loop (`ibv_start_poll` … `ibv_end_poll`): the returned
    /// [`CqPoller`] holds the CQ's lock until dropped, so its polls skip taking it. Other
    /// calls that need the CQ's state — from other threads, and from this one: arm and
    /// acknowledge through the poller, and drop it before creating or destroying a QP on this
    /// CQ — wait meanwhile, up to the device's `cq_lock_timeout_ms`, then fail with
    /// [`Error::Timeout`] (as does this call, if another thread holds the CQ that long).
    pub fn start_poll(&self) -> Result<CqPoller<'_, 'd, P>> {
        Ok(CqPoller {
            cq: self,
            s: self.lock_state()?,
        })
    }

    /// As [`Cq::start_poll`], or `None` at once if another poller holds the CQ.
    pub fn try_start_poll(&self) -> Option<CqPoller<'_, 'd, P>> {
        Some(CqPoller {
            cq: self,
            s: self.shared.try_lock()?,
        })
    }

    /// Arms the CQ (`ibv_req_notify_cq`): the next completion (or the next solicited one) makes
    /// the device post a completion event to the CQ's EQ.
    pub fn req_notify(&self, solicited_only: bool) -> Result<()> {
        self.start_poll()?.req_notify(solicited_only)
    }

    /// Acknowledges a completion event of this CQ (advances the arm sequence number).
    pub fn ack_event(&self) -> Result<()> {
        self.start_poll()?.ack_event();
        Ok(())
    }
}

/// A CQ taken for polling ([`Cq::start_poll`]); dropping it ends the polling (`ibv_end_poll`).
pub struct CqPoller<'a, 'd, P: Platform> {
    cq: &'a Cq<'d, P>,
    s: spin::MutexGuard<'a, CqShared>,
}

impl<P: Platform> core::fmt::Debug for CqPoller<'_, '_, P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CqPoller")
            .field("cqn", &self.cq.cqn)
            .field("ci", &self.s.ci)
            .finish()
    }
}

impl<P: Platform> CqPoller<'_, '_, P> {
    /// Polls up to `wc.len()` completions, as [`Cq::poll`].
    pub fn poll(&mut self, wc: &mut [Wc]) -> Result<usize> {
        let Some((buf, dbr)) = self.cq.mem.as_ref() else {
            return Ok(0);
        };
        let s = &mut *self.s;
        let (mut ci, mut hint) = (s.ci, s.hint);
        let (n, err) = crate::cqe::poll_ring(buf.buf(), self.cq.cqe + 1, s, &mut ci, &mut hint, wc);
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
                    self.cq.cqn
                );
                Ok(n)
            }
            None => Ok(n),
        }
    }

    /// Arms the CQ, as [`Cq::req_notify`].
    pub fn req_notify(&self, solicited_only: bool) -> Result<()> {
        let cq = self.cq;
        let Some((_, dbr)) = cq.mem.as_ref() else {
            return Ok(());
        };
        let Some(uar) = cq.dev.uar() else {
            return Ok(());
        };
        let cmd = if solicited_only { 1u32 << 24 } else { 0 };
        let word = (self.s.arm_sn & 3) << 28 | cmd | (self.s.ci & 0xff_ffff);
        dbr.write_be32(4, Be32::new(word))?;
        barrier::mmio_wmb();
        let db = u64::from(word) << 32 | u64::from(cq.cqn);
        cq.dev.platform().bar_write64(
            uar.bar_offset() + u64::from(regs::uar::CQ_DOORBELL),
            Be64::new(db),
        );
        Ok(())
    }

    /// Acknowledges a completion event, as [`Cq::ack_event`].
    pub fn ack_event(&mut self) {
        self.s.arm_sn = self.s.arm_sn.wrapping_add(1);
    }
}
