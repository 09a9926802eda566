//! Polling a CQ (`ibv_poll_cq`, or `ibv_start_poll` … `ibv_end_poll` with [`CqPoller`]),
//! arming it (`ibv_req_notify_cq`), work completions, and the tables that let a CQ find the
//! work-request ids of the queues completing on it.
//!
//! A CQE at consumer index `ci` is the device's when its opcode is INVALID or its owner bit
//! differs from `(ci >> log_size) & 1`. Every field the device wrote is checked before use (the
//! reading itself is in `cqe.rs`): the QPN must be a queue attached to this CQ, the WQE counter
//! must name an outstanding WQE or a posted SRQ WQE, the opcode must be one a CQE can have, the
//! length must fit what was posted. Anything else is an error, never an out-of-bounds read.

use mlx5_ifc::{regs, Be32, Be64};

use super::create::Cq;
use super::state::{Attached, CqShared};
use super::wc::Wc;
use crate::error::{Error, Result, Wait};
use crate::io::barrier;
use crate::io::platform::Platform;

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
        // An Ethernet RQ's receive CQEs do not name it: it must be the CQ's only receive queue.
        let here = s.queues.get(a.qpn);
        let onto_flow_tag_rq = here.is_some_and(|e| e.flow_tag_rq);
        if (a.flow_tag_rq && (s.queues.any_rq() || here.is_some()))
            || (a.rq.is_some() && s.flow_tag_rq.is_some())
            || onto_flow_tag_rq
        {
            let n = u64::from(a.qpn);
            a.release(self.dev.platform());
            return Err(Error::InvalidArgument {
                op: "attach a queue to a CQ",
                field: "receive queue",
                requested: n,
                max: 0,
                limit: "an Ethernet RQ's CQ serves no other receive queue, nor a queue of its number (its CQEs carry the flow tag)",
            });
        }
        if let Some(e) = s.queues.get_mut(a.qpn) {
            // Same CQ for both queues of one QP: merge. Two queues of one kind under one
            // number (an Ethernet SQ numbered like a QP on this CQ) would make their CQEs
            // ambiguous: refused.
            if (a.sq.is_some() && e.sq.is_some()) || (a.rq.is_some() && e.rq.is_some()) {
                let n = u64::from(a.qpn);
                a.release(self.dev.platform());
                return Err(Error::InvalidArgument {
                    op: "attach a queue to a CQ",
                    field: "queue number",
                    requested: n,
                    max: 0,
                    limit: "a queue of that kind and number already completes on this CQ",
                });
            }
            if a.sq.is_some() {
                e.sq = a.sq;
            }
            if a.rq.is_some() {
                e.rq = a.rq;
                s.queues.rq_added();
            }
            return Ok(());
        }
        if a.flow_tag_rq {
            s.flow_tag_rq = Some(a.qpn);
        }
        let qpn = a.qpn;
        s.queues.insert(self.dev.platform(), a).inspect_err(|_| {
            if s.flow_tag_rq == Some(qpn) {
                s.flow_tag_rq = None;
            }
        })
    }

    /// Detaches a QP, returning its table handles.
    pub(crate) fn detach(&self, qpn: u32) -> Result<Option<Attached>> {
        let mut s = self.lock_state()?;
        let out = s.queues.remove(qpn);
        if s.flow_tag_rq == Some(qpn) {
            s.flow_tag_rq = None;
        }
        Ok(out)
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
        let (mut ci, mut hint, mut session) = (s.ci, s.hint, s.session.take());
        let (n, err) = crate::verbs::cq::cqe::poll_ring(
            buf.buf(),
            self.cq.cqe + 1,
            s,
            &mut ci,
            &mut hint,
            &mut session,
            wc,
        );
        (s.ci, s.hint, s.session) = (ci, hint, session);
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
