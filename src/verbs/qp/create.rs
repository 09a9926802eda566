//! `create_qp`: a QP sized against the device's limits, its WQ buffer and doorbell record, and a
//! fully programmed QP context (PRM "CREATE_QP").

use core::marker::PhantomData;

use mlx5_ifc::consts::{qp_st, rq_type};
use mlx5_ifc::prm::qp::{CreateQpIn, CreateQpOut, DestroyQpIn, DestroyQpOut, Qpc};
use mlx5_ifc::Opcode;

use super::sizing::{size_qp, QpCap, QpLayout, QpLimits, QpType, SendOps, SizeMode};
use super::state::QpState;
use super::write::QpRing;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::fw::bfreg::Bfreg;
use crate::fw::caps::Caps;
use crate::fw::cmd::{run, run_create};
use crate::fw::queue::{alloc_dbr, ceil_log2, QueueBuf};
use crate::fw::uar::Uar;
use crate::io::platform::Platform;
use crate::io::SharedTable;
use crate::verbs::cq::state::{Attached, RecvTable};
use crate::verbs::cq::Cq;
use crate::verbs::pd::Pd;
use crate::verbs::srq::Srq;
use crate::verbs::wr_table::{rq_table, sq_table};

/// What a QP is asked to be (`struct ibv_qp_init_attr`, Rust-shaped).
#[derive(Debug)]
pub struct QpInitAttr<'a, 'd, P: Platform> {
    /// A value of the caller's that comes back with the QP ([`Qp::context`]).
    pub qp_context: u64,
    /// The CQ of send completions.
    pub send_cq: &'a Cq<'d, P>,
    /// The CQ of receive completions (may be the same CQ).
    pub recv_cq: &'a Cq<'d, P>,
    /// Receives come from this SRQ; the receive attributes of `cap` are then ignored.
    pub srq: Option<&'a Srq<'d, P>>,
    /// Queue sizes asked for.
    pub cap: QpCap,
    /// Transport service.
    pub qp_type: QpType,
    /// Every send work request completes with a CQE (else only signaled ones).
    pub sq_sig_all: bool,
    /// The send ops the QP will post (`None`: what `ibv_create_qp` assumes for the type).
    pub send_ops: Option<SendOps>,
    /// Refuse what does not fit ([`SizeMode::Exact`]) or lower it ([`SizeMode::Clamp`]).
    pub size_mode: SizeMode,
}

impl<'a, 'd, P: Platform> QpInitAttr<'a, 'd, P> {
    /// A QP of `qp_type` on `send_cq`/`recv_cq` with `cap`; no SRQ, default ops, exact sizing.
    pub fn new(
        qp_type: QpType,
        send_cq: &'a Cq<'d, P>,
        recv_cq: &'a Cq<'d, P>,
        cap: QpCap,
    ) -> Self {
        Self {
            qp_context: 0,
            send_cq,
            recv_cq,
            srq: None,
            cap,
            qp_type,
            sq_sig_all: false,
            send_ops: None,
            size_mode: SizeMode::Exact,
        }
    }
}

/// A queue pair. It borrows the CQs and SRQ it was created on, so they cannot go away first.
#[derive(Debug)]
pub struct Qp<'a, P: Platform> {
    pub(super) dev: &'a Device<P>,
    pub(super) qpn: u32,
    pub(super) qp_type: QpType,
    pub(super) cap: QpCap,
    pub(super) layout: QpLayout,
    pub(super) ops: SendOps,
    pub(super) sq_sig_all: bool,
    pub(super) context: u64,
    pub(super) pdn: u32,
    pub(super) send_cq: &'a Cq<'a, P>,
    pub(super) recv_cq: &'a Cq<'a, P>,
    pub(super) srqn: Option<u32>,
    pub(super) state: QpState,
    pub(super) port: u8,
    pub(super) bfreg: Bfreg,
    pub(super) ring: Option<QpRing>,
    pub(super) cur_post: u64,
    pub(super) bf_offset: u32,
    pub(super) bf_half: u32,
    /// The most WQEBBs a BlueFlame copy takes: half the register, at most `BF_CHUNK`; 0 with
    /// no BlueFlame (computed once here, so a post compares one number).
    pub(super) bf_max_nbb: u32,
    /// One more than the longest inline payload a SEND ([0]) or WRITE ([1]) of this QP takes
    /// ([`super::write::inline_limit`]), so that a post compares once.
    pub(super) inline_lim: [u32; 2],
    /// The last BlueFlame WQE's WQEBBs, as written (the copy's source).
    pub(super) bf_stage: crate::verbs::wqe::BfStage,
    pub(super) max_msg: u64,
    /// `post_recv` takes `&self` (as an SRQ's and rdma-core's do) and posts without a lock: a
    /// QP may move to another thread (`Send`) but is not shared between threads (`!Sync`), so
    /// its receive queue has one poster at a time.
    _one_thread: PhantomData<core::cell::Cell<()>>,
    alive: bool,
    _borrows: PhantomData<&'a ()>,
}

pub(super) fn st_of(t: QpType) -> u64 {
    match t {
        QpType::Rc => qp_st::RC,
        QpType::Uc => qp_st::UC,
        QpType::Ud => qp_st::UD,
        QpType::Gsi => qp_st::QP1,
    }
}

impl<P: Platform> Device<P> {
    /// Creates a QP in `pd` (`ibv_create_qp`): sized against this device's limits by the rules of
    /// docs/sizing.md, its buffer (RQ then SQ) and doorbell record allocated, its context
    /// programmed. The QP
    /// starts in RESET; `cap()` holds the granted sizes, each ≥ the request.
    pub fn create_qp<'a>(&'a self, pd: &Pd, attr: &QpInitAttr<'a, '_, P>) -> Result<Qp<'a, P>> {
        let mine = |d: &Device<P>| core::ptr::eq(d, self);
        if !mine(attr.send_cq.device())
            || !mine(attr.recv_cq.device())
            || attr.srq.is_some_and(|s| !mine(s.device()))
        {
            return Err(Error::InvalidArgument {
                op: "create_qp",
                field: "send_cq/recv_cq/srq",
                requested: 0,
                max: 0,
                limit: "CQs and SRQ must belong to the device the QP is created on",
            });
        }
        let caps = self.caps();
        let supported = match attr.qp_type {
            QpType::Rc => caps.rc(),
            QpType::Uc => caps.uc(),
            QpType::Ud | QpType::Gsi => caps.ud(),
        };
        if supported == 0 {
            return Err(Error::Unsupported {
                what: "this QP type",
                found: st_of(attr.qp_type),
            });
        }
        let ops = attr.send_ops.unwrap_or(SendOps::default_for(attr.qp_type));
        let sized = size_qp(
            &caps.qp_limits(),
            attr.qp_type,
            ops,
            attr.srq.is_some(),
            &attr.cap,
            attr.size_mode,
        )?;
        let (cap, layout) = (sized.cap, sized.layout);
        // A register of its own (BlueFlame) for the first QPs, a shared one (doorbell only)
        // for the rest.
        let bfreg = self.take_bfreg()?;
        let made = self.create_qp_memory(&layout).and_then(|ring| {
            let srqn = attr.srq.map(|s| s.srqn());
            let (send_cqn, recv_cqn) = (attr.send_cq.cqn(), attr.recv_cq.cqn());
            let out = self.with_cmd(|cmd, p| {
                run_create::<CreateQpIn, CreateQpOut, _, _, _>(
                    cmd,
                    p,
                    Opcode::CreateQp,
                    ring.as_ref().map(|r| &r.buf),
                    |v| {
                        let mut c = v.nested_mut(CreateQpIn::QPC);
                        c.set(Qpc::ST, st_of(attr.qp_type))?;
                        c.set(Qpc::PM_STATE, mlx5_ifc::consts::pm_state::MIGRATED)?;
                        c.set(Qpc::PD, u64::from(pd.pdn()))?;
                        c.set(Qpc::UAR_PAGE, u64::from(bfreg.uar().index()))?;
                        c.set(Qpc::CQN_SND, u64::from(send_cqn))?;
                        c.set(Qpc::CQN_RCV, u64::from(recv_cqn))?;
                        if layout.sq_wqebb_cnt == 0 {
                            c.set(Qpc::NO_SQ, 1)?;
                        } else {
                            c.set(
                                Qpc::LOG_SQ_SIZE,
                                u64::from(ceil_log2(u64::from(layout.sq_wqebb_cnt))),
                            )?;
                        }
                        if let Some(n) = srqn {
                            c.set(Qpc::RQ_TYPE, rq_type::SRQ)?;
                            c.set(Qpc::SRQN_RMPN_XRQN, u64::from(n))?;
                        } else if layout.rq_wqe_cnt == 0 {
                            c.set(Qpc::RQ_TYPE, rq_type::ZERO_LEN)?;
                        } else {
                            c.set(Qpc::RQ_TYPE, rq_type::REGULAR)?;
                            c.set(
                                Qpc::LOG_RQ_SIZE,
                                u64::from(ceil_log2(u64::from(layout.rq_wqe_cnt))),
                            )?;
                            c.set(
                                Qpc::LOG_RQ_STRIDE,
                                u64::from(ceil_log2(u64::from(layout.rq_stride_bytes)) - 4),
                            )?;
                        }
                        if let Some(r) = ring.as_ref() {
                            c.set(Qpc::LOG_PAGE_SIZE, u64::from(r.buf.log_page_size()))?;
                            c.set(Qpc::DBR_ADDR, r.dbr.iova())?;
                        }
                        Ok(())
                    },
                )
            });
            match out {
                Ok(o) => Ok((o.get(CreateQpOut::QPN) as u32, ring, srqn)),
                Err(e) => {
                    // A CREATE_QP that may have taken effect leaves the rings to the device.
                    let done = !e.device_may_hold_memory();
                    retire_ring(
                        self,
                        ring,
                        done,
                        "CREATE_QP failed with its outcome unknown",
                    );
                    Err(e)
                }
            }
        });
        let (qpn, ring, srqn) = match made {
            Ok(x) => x,
            Err(e) => {
                let _ = self.give_bfreg(bfreg);
                return Err(e);
            }
        };
        log::debug!(
            "QP {qpn:#x} ({}) created: {cap:?}, {layout:?}",
            attr.qp_type.name()
        );
        let caps = self.caps();
        // BlueFlame only through a dedicated register mapped write-combining (as rdma-core:
        // no BlueFlame for a non-cached UAR); otherwise every send rings the 8-byte doorbell.
        let bf_half = bfreg.bf_half();
        let qp = Qp {
            dev: self,
            qpn,
            qp_type: attr.qp_type,
            cap,
            layout,
            ops,
            sq_sig_all: attr.sq_sig_all,
            context: attr.qp_context,
            pdn: pd.pdn(),
            send_cq: attr.send_cq,
            recv_cq: attr.recv_cq,
            srqn,
            state: QpState::Reset,
            port: 1,
            bfreg,
            ring,
            cur_post: 0,
            bf_offset: 0,
            bf_half,
            bf_max_nbb: (bf_half / crate::verbs::wqe::WQEBB as u32)
                .min(crate::verbs::wqe::BF_CHUNK as u32),
            bf_stage: Default::default(),
            inline_lim: [1, 2].map(|base| {
                super::write::inline_limit(base, &cap, &layout, 1u64 << caps.log_max_msg().min(31))
            }),
            max_msg: 1u64 << caps.log_max_msg().min(31),
            _one_thread: PhantomData,
            alive: true,
            _borrows: PhantomData,
        };
        // Let the CQs find this QP's work-request ids.
        if let Some(r) = qp.ring.as_ref() {
            let sq = (layout.sq_wqebb_cnt > 0).then(|| (r.sq.share(), layout.sq_wqebb_cnt));
            let rq = match (attr.srq, r.rq.as_ref()) {
                (Some(s), _) => s.table().map(|t| RecvTable::Srq {
                    table: t.share(),
                    cnt: s.sized().wqe_cnt,
                }),
                (None, Some(t)) => Some(RecvTable::Rq {
                    table: t.share(),
                    cnt: layout.rq_wqe_cnt,
                }),
                (None, None) => None,
            };
            attr.send_cq.attach(Attached {
                qpn,
                sq,
                rq: None,
                flow_tag_rq: false,
            })?;
            attr.recv_cq.attach(Attached {
                qpn,
                sq: None,
                rq,
                flow_tag_rq: false,
            })?;
        }
        Ok(qp)
    }

    fn create_qp_memory(&self, layout: &QpLayout) -> Result<Option<QpRing>> {
        let p = self.platform();
        let bytes = layout.rq_bytes() + layout.sq_bytes();
        if bytes == 0 {
            return Ok(None);
        }
        // The driver's bookkeeping first: host memory, nothing the device is told about.
        let sq = SharedTable::alloc(p, sq_table::words(layout.sq_wqebb_cnt as usize));
        let tables = sq.and_then(|sq| {
            if layout.rq_wqe_cnt == 0 {
                return Ok((sq, None));
            }
            match SharedTable::alloc(p, rq_table::words(layout.rq_wqe_cnt as usize)) {
                Ok(rq) => Ok((sq, Some(rq))),
                Err(e) => {
                    sq.release(p);
                    Err(e)
                }
            }
        });
        let (sq, rq) = tables.map_err(|source| Error::Platform {
            op: "allocate QP work-request tables",
            source,
        })?;
        let release = |sq: SharedTable, rq: Option<SharedTable>| {
            sq.release(p);
            if let Some(t) = rq {
                t.release(p);
            }
        };
        let buf = match QueueBuf::alloc(p, bytes as usize, "allocate a QP buffer") {
            Ok(b) => b,
            Err(e) => {
                release(sq, rq);
                return Err(e);
            }
        };
        match alloc_dbr(p, "allocate a QP doorbell record") {
            Ok(dbr) => {
                let geo = super::write::QpGeometry::new(buf.buf(), &sq, rq.as_ref(), layout);
                Ok(Some(QpRing {
                    buf,
                    dbr,
                    sq,
                    rq,
                    geo,
                }))
            }
            Err(e) => {
                buf.free(p);
                release(sq, rq);
                Err(e)
            }
        }
    }
}

/// Gives a QP's rings back: freed if the device is known to be done with them (`done`), else
/// quarantined; its work-request tables (host memory) are released either way.
fn retire_ring<P: Platform>(dev: &Device<P>, ring: Option<QpRing>, done: bool, why: &'static str) {
    if let Some(r) = ring {
        let (p, q) = (dev.platform(), dev.quarantine());
        r.buf.retire(q, p, done, why);
        q.retire(p, r.dbr, done, why);
        r.sq.release(p);
        if let Some(t) = r.rq {
            t.release(p);
        }
    }
}

impl<'a, P: Platform> Qp<'a, P> {
    /// The QP number.
    pub fn qpn(&self) -> u32 {
        self.qpn
    }

    /// The transport service.
    pub fn qp_type(&self) -> QpType {
        self.qp_type
    }

    /// The granted sizes (each ≥ what was asked, unless clamped).
    pub fn cap(&self) -> QpCap {
        self.cap
    }

    /// The work-queue layout.
    pub fn layout(&self) -> QpLayout {
        self.layout
    }

    /// The send ops the QP was sized for.
    pub fn send_ops(&self) -> SendOps {
        self.ops
    }

    /// Whether every send completes with a CQE.
    pub fn sq_sig_all(&self) -> bool {
        self.sq_sig_all
    }

    /// The caller's value given at creation (`qp_context`).
    pub fn context(&self) -> u64 {
        self.context
    }

    /// The state the driver last moved the QP to.
    pub fn state(&self) -> QpState {
        self.state
    }

    /// PD, send CQ, receive CQ and SRQ numbers.
    pub fn handles(&self) -> (u32, u32, u32, Option<u32>) {
        (self.pdn, self.send_cq.cqn(), self.recv_cq.cqn(), self.srqn)
    }

    /// Device address of the WQ buffer and of the doorbell record.
    pub fn buffer_iovas(&self) -> (Option<u64>, Option<u64>) {
        match &self.ring {
            Some(r) => (Some(r.buf.buf().iova()), Some(r.dbr.iova())),
            None => (None, None),
        }
    }

    /// The UAR page of the QP's doorbells.
    pub(crate) fn uar(&self) -> Uar {
        self.bfreg.uar()
    }

    /// The device.
    pub fn device(&self) -> &'a Device<P> {
        self.dev
    }

    /// DESTROY_QP and free its memory (`ibv_destroy_qp`).
    pub fn destroy(mut self) -> Result<()> {
        self.destroy_inner()
    }

    fn destroy_inner(&mut self) -> Result<()> {
        if !self.alive {
            return Ok(());
        }
        self.alive = false;
        let qpn = u64::from(self.qpn);
        let r = self.dev.with_cmd(|cmd, p| {
            run::<DestroyQpIn, DestroyQpOut, _, _>(cmd, p, Opcode::DestroyQp, 0, |v| {
                v.set(DestroyQpIn::QPN, qpn)?;
                Ok(())
            })
        });
        if let Err(e) = r {
            // The QP may still exist and use its rings and UAR page: keep them. The CQs keep
            // their handles to its tables too (host memory), so its CQEs still decode.
            retire_ring(self.dev, self.ring.take(), false, "DESTROY_QP failed");
            return Err(e);
        }
        let p = self.dev.platform();
        // The QP is gone: none of its CQEs may be read any more (nor keep SRQ WQEs posted).
        let mut stuck = self.clean_cqs().err();
        for cq in [self.send_cq, self.recv_cq] {
            match cq.detach(self.qpn) {
                Ok(Some(a)) => a.release(p),
                Ok(None) => {}
                // The CQ keeps its handles to the QP's tables; it gives them back when it goes.
                Err(e) => stuck = Some(e),
            }
        }
        retire_ring(self.dev, self.ring.take(), true, "DESTROY_QP");
        self.dev.give_bfreg(self.bfreg)?;
        stuck.map_or(Ok(()), Err)
    }
}

impl<P: Platform> Qp<'_, P> {
    /// Removes this QP's unpolled CQEs from its CQs (one, or both when they differ).
    pub(super) fn clean_cqs(&self) -> Result<()> {
        if self.ring.is_none() {
            return Ok(());
        }
        self.send_cq.clean(self.qpn)?;
        if !core::ptr::eq(self.send_cq, self.recv_cq) {
            self.recv_cq.clean(self.qpn)?;
        }
        Ok(())
    }
}

impl<P: Platform> Drop for Qp<'_, P> {
    fn drop(&mut self) {
        if let Err(e) = self.destroy_inner() {
            log::error!("destroying QP {:#x} on drop: {e}", self.qpn);
        }
    }
}

impl Caps {
    /// The limits QP sizing depends on.
    pub fn qp_limits(&self) -> QpLimits {
        QpLimits {
            max_wqe_sz_sq: self.max_wqe_sz_sq(),
            max_wqe_sz_rq: self.max_wqe_sz_rq(),
            log_max_qp_sz: self.log_max_qp_sz(),
        }
    }
}
