//! Queue pairs: CREATE_QP, DESTROY_QP, QUERY_QP (the state machine is in [`super::qp_modify`]).
//!
//! CREATE_QP checks, in order, each with its own syndrome:
//!
//! 1. `st` RC, UC, UD, XRC (initiator with a send queue, target with `no_sq`; a live `xrcd`,
//!    BAD_RES UNKNOWN_XRCD, which it holds), QP1 (the GSI QP, UD on the wire; one at a time: RES_BUSY
//!    GSI_QP_EXISTS), REG_UMR (a send-only UMR QP, which may have PD 0) or DCI (a DC initiator,
//!    its destination in each WQE: [`crate::engine::dc`]) (BAD_PARAM BAD_QP_ST) whose capability
//!    (`rc`, `uc`, `ud`, `xrc`, `dct`; `umr_extended_translation_offset` for UMR) is 1 (BAD_PARAM QP_ST_NOT_SUPPORTED), and `block_lb_mc` (the QP's multicast does
//!    not loop back to it, [`crate::engine::responder::multicast`]) only with that capability
//!    (QP_ST_NOT_SUPPORTED too); `pm_state` may be anything;
//! 2. `rq_type`: 0 regular — `log_rq_stride` ≤ 5 and `16 << log_rq_stride` ≤ `max_wqe_sz_rq`
//!    (BAD_RQ_STRIDE), `log_rq_size` ≤ `log_max_qp_sz` (RQ_TOO_BIG); 1 SRQ/RMP and 3 zero-length
//!    — `log_rq_size` 0 (RQ_SIZE_WITHOUT_RQ); anything else BAD_RQ_TYPE;
//! 3. `no_sq` = 1 — `log_sq_size` 0 (SQ_SIZE_WITH_NO_SQ); else `log_sq_size` ≤ `log_max_qp_sz`
//!    (SQ_TOO_BIG);
//! 4. `pd` allocated (BAD_RES UNKNOWN_PD); `cqn_snd` and `cqn_rcv` live CQs (UNKNOWN_CQ); with
//!    `rq_type` 1, `srqn_rmpn_xrqn` a live SRQ or RMP — for an XRC QP also an XRC SRQ
//!    (UNKNOWN_SRQ); `uar_page` allocated (UNKNOWN_UAR), or 0 on a QP with `no_sq` (it rings
//!    no doorbell);
//! 5. the 8-byte doorbell record at `dbr_addr`; the buffer — RQ (`2^log_rq_size` strides,
//!    regular RQ only) then SQ (`2^log_sq_size` 64-byte WQEBBs) — see [`super::queue`] (a QP
//!    with neither needs no PAS);
//! 6. fewer than `2^log_max_qp - 1` QPs live (EXCEED_LIM QP_EXHAUSTED).
//!
//! QP numbers are 24-bit, from 0x100, shared with the DCTs ([`super::dct`]) (0 and 1 are the special QPs). The QP starts in RST and
//! holds its PD, both CQs, its SRQ/RMP and its UAR. CREATE_QP keeps only the context fields a QP
//! in RST has (type, queues, PD, CQs, UAR, doorbell record, buffer, offload options); the rest
//! is programmed by the transitions. `srqn_rmpn_xrqn` and `xrcd` are kept as given with a
//! regular RQ (zeros are fine). DESTROY_QP works in any state. QUERY_QP returns the context as
//! the QP holds it now and the PAS list after it.

use mlx5_ifc::consts::{qp_st, qp_state, rq_type};
use mlx5_ifc::prm::caps::CmdHcaCap;
use mlx5_ifc::prm::qp::{CreateQpIn, CreateQpOut, DestroyQpIn, Qpc, QueryQpIn, QueryQpOut};
use mlx5_ifc::{CmdStatus, Field, Layout, View, ViewMut};

use super::cmd::{bad_param, encoded, fail, input, output, CmdResult, Env, Failure, Req};
use super::queue;
use crate::model::objects::ObjectKind;
use crate::model::qp::gsi_qp;
use crate::model::Model;
use crate::syndrome as syn;

/// The first QP number CREATE_QP hands out.
pub const FIRST_QPN: u32 = 0x100;
/// Bytes of a send WQE basic block.
const WQEBB_BYTES: u64 = 64;
/// Bytes of a QP doorbell record (receive counter, send counter).
const QP_DBR_BYTES: usize = 8;
/// The largest `log_rq_stride` (512-byte receive WQEs).
const MAX_LOG_RQ_STRIDE: u64 = 5;

/// The context fields CREATE_QP takes; the transitions program the others.
const CREATE_FIELDS: &[Field<Qpc>] = &[
    Qpc::LAG_TX_PORT_AFFINITY,
    Qpc::ST,
    Qpc::ISOLATE_VL_TC,
    Qpc::PM_STATE,
    Qpc::REQ_E2E_CREDIT_MODE,
    Qpc::OFFLOAD_TYPE,
    Qpc::END_PADDING_MODE,
    Qpc::WQ_SIGNATURE,
    Qpc::BLOCK_LB_MC,
    Qpc::ATOMIC_LIKE_WRITE_EN,
    Qpc::LATENCY_SENSITIVE,
    Qpc::DRAIN_SIGERR,
    Qpc::PD,
    Qpc::LOG_RQ_SIZE,
    Qpc::LOG_RQ_STRIDE,
    Qpc::NO_SQ,
    Qpc::LOG_SQ_SIZE,
    Qpc::RETRY_MODE,
    Qpc::TS_FORMAT,
    Qpc::RLKY,
    Qpc::ULP_STATELESS_OFFLOAD_MODE,
    Qpc::COUNTER_SET_ID,
    Qpc::UAR_PAGE,
    Qpc::USER_INDEX,
    Qpc::LOG_PAGE_SIZE,
    Qpc::PAGE_OFFSET,
    Qpc::LOG_ACK_REQ_FREQ,
    Qpc::FRE,
    Qpc::CQN_SND,
    Qpc::DETH_SQPN,
    Qpc::CD_SLAVE_RECEIVE,
    Qpc::CD_SLAVE_SEND,
    Qpc::CD_MASTER,
    Qpc::XRCD,
    Qpc::CQN_RCV,
    Qpc::DBR_ADDR,
    Qpc::RQ_TYPE,
    Qpc::SRQN_RMPN_XRQN,
    Qpc::CGS,
    Qpc::CS_REQ,
    Qpc::CS_RES,
    Qpc::DC_ACCESS_KEY,
];

/// Copies `fields` from `src` to `dst`.
pub(crate) fn copy(
    dst: &mut ViewMut<'_, Qpc>,
    src: &View<'_, Qpc>,
    fields: &[Field<Qpc>],
) -> CmdResult {
    for &f in fields {
        encoded(dst.set(f, src.get(f)))?;
    }
    Ok(())
}

/// Checks the RQ of a new QP: `(RQ buffer bytes, the SRQ/RMP it receives from)`.
fn receive_queue(model: &Model, c: &View<'_, Qpc>) -> Result<(u64, Option<u32>), Failure> {
    let log_size = c.get(Qpc::LOG_RQ_SIZE);
    match c.get(Qpc::RQ_TYPE) {
        rq_type::REGULAR => {
            let log_stride = c.get(Qpc::LOG_RQ_STRIDE);
            let stride = 16u64 << log_stride;
            if log_stride > MAX_LOG_RQ_STRIDE || stride > model.cur(CmdHcaCap::MAX_WQE_SZ_RQ) {
                return Err(bad_param(syn::BAD_RQ_STRIDE));
            }
            if log_size > model.cur(CmdHcaCap::LOG_MAX_QP_SZ) {
                return Err(bad_param(syn::RQ_TOO_BIG));
            }
            Ok((stride << log_size, None))
        }
        t @ (rq_type::SRQ | rq_type::ZERO_LEN) => {
            if log_size != 0 {
                return Err(bad_param(syn::RQ_SIZE_WITHOUT_RQ));
            }
            let srq = (t == rq_type::SRQ).then(|| c.get32(Qpc::SRQN_RMPN_XRQN));
            Ok((0, srq))
        }
        _ => Err(bad_param(syn::BAD_RQ_TYPE)),
    }
}

/// Checks the SQ of a new QP: its buffer bytes.
fn send_queue(model: &Model, c: &View<'_, Qpc>) -> Result<u64, Failure> {
    let log_size = c.get(Qpc::LOG_SQ_SIZE);
    if c.get(Qpc::NO_SQ) == 1 {
        if log_size != 0 {
            return Err(bad_param(syn::SQ_SIZE_WITH_NO_SQ));
        }
        return Ok(0);
    }
    if log_size > model.cur(CmdHcaCap::LOG_MAX_QP_SZ) {
        return Err(bad_param(syn::SQ_TOO_BIG));
    }
    Ok(WQEBB_BYTES << log_size)
}

pub(crate) fn create_qp(
    model: &mut Model,
    env: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let i = input::<CreateQpIn>(req)?;
    let c = i.nested(CreateQpIn::QPC);
    let st = c.get(Qpc::ST);
    let cap = match st {
        qp_st::RC => CmdHcaCap::RC,
        qp_st::UC => CmdHcaCap::UC,
        qp_st::XRC => CmdHcaCap::XRC,
        qp_st::UD | qp_st::QP1 => CmdHcaCap::UD,
        qp_st::REG_UMR => CmdHcaCap::UD,
        qp_st::DCI => CmdHcaCap::DCT,
        _ => return Err(bad_param(syn::BAD_QP_ST)),
    };
    if st == qp_st::QP1 && gsi_qp(model).is_some() {
        return Err(fail(CmdStatus::ResBusy, syn::GSI_QP_EXISTS));
    }
    if model.cur(cap) != 1 {
        return Err(bad_param(syn::QP_ST_NOT_SUPPORTED));
    }
    if c.get(Qpc::BLOCK_LB_MC) == 1 && model.cur(CmdHcaCap::BLOCK_LB_MC) != 1 {
        return Err(bad_param(syn::QP_ST_NOT_SUPPORTED));
    }
    let (rq_bytes, srq) = receive_queue(model, &c)?;
    let sq_bytes = send_queue(model, &c)?;
    // A UMR QP has no PD (its WQEs carry the keys they change).
    let pd = c.get32(Qpc::PD);
    let umr_without_pd = st == qp_st::REG_UMR && pd == 0;
    if !umr_without_pd {
        queue::require(model, ObjectKind::Pd, pd, syn::UNKNOWN_PD)?;
    }
    let (cqn_snd, cqn_rcv) = (c.get32(Qpc::CQN_SND), c.get32(Qpc::CQN_RCV));
    queue::require(model, ObjectKind::Cq, cqn_snd, syn::UNKNOWN_CQ)?;
    queue::require(model, ObjectKind::Cq, cqn_rcv, syn::UNKNOWN_CQ)?;
    let srq = match srq {
        Some(n) if model.objects.contains(ObjectKind::Srq, n) => Some((ObjectKind::Srq, n)),
        Some(n) if model.objects.contains(ObjectKind::Rmp, n) => Some((ObjectKind::Rmp, n)),
        // An XRC QP may sit on an XRC SRQ (mlx5_ib gives both ends its device SRQ `s0`, an XRC
        // SRQ); it receives nothing through it (a target takes each request's SRQ from the
        // XRCETH, an initiator receives nothing).
        Some(n) if st == qp_st::XRC && model.objects.contains(ObjectKind::XrcSrq, n) => {
            Some((ObjectKind::XrcSrq, n))
        }
        Some(_) => return Err(fail(CmdStatus::BadRes, syn::UNKNOWN_SRQ)),
        None => None,
    };
    // An XRC QP belongs to an XRC domain (the target's: the SRQs its requests may name).
    let xrcd = (st == qp_st::XRC).then(|| c.get32(Qpc::XRCD));
    if let Some(x) = xrcd {
        queue::require(model, ObjectKind::Xrcd, x, syn::UNKNOWN_XRCD)?;
    }
    // A QP without a send queue rings no doorbell: it may name no UAR (mlx5_ib's XRC target
    // sets none).
    let uar = Some(c.get32(Qpc::UAR_PAGE)).filter(|&u| u != 0 || c.get(Qpc::NO_SQ) == 0);
    if let Some(u) = uar {
        queue::require(model, ObjectKind::Uar, u, syn::UNKNOWN_UAR)?;
    }
    // DevX: the doorbell record and the work queues may live in umems (`dbr_umem_valid`,
    // `wq_umem_valid`); the context then keeps their IOVA and page geometry.
    let mut umems = Vec::new();
    let dbr = super::devx::doorbell(
        model,
        &mut umems,
        (c.get(Qpc::DBR_UMEM_VALID), c.get32(Qpc::DBR_UMEM_ID)),
        c.get(Qpc::DBR_ADDR),
        QP_DBR_BYTES,
    )?;
    queue::doorbell_record(env, "CREATE_QP", dbr, QP_DBR_BYTES)?;
    // (A QP with neither queue has no buffer, in a umem or not.)
    let valid = i.get(CreateQpIn::WQ_UMEM_VALID) * u64::from(rq_bytes + sq_bytes > 0);
    let buf = super::devx::buffer(
        model,
        env,
        &mut umems,
        (
            valid,
            i.get32(CreateQpIn::WQ_UMEM_ID),
            i.get(CreateQpIn::WQ_UMEM_OFFSET),
        ),
        ("CREATE_QP", i.bytes(CreateQpIn::PAS)),
        (c.get(Qpc::LOG_PAGE_SIZE), c.get(Qpc::PAGE_OFFSET)),
        rq_bytes + sq_bytes,
    )?;

    let log_max = queue::log_max(model, CmdHcaCap::LOG_MAX_QP);
    if !queue::below_limit(model.objects.count(ObjectKind::Qp), log_max) {
        return Err(fail(CmdStatus::ExceedLim, syn::QP_EXHAUSTED));
    }
    let mut ctx = vec![0u8; Qpc::BYTES];
    let mut v = encoded(ViewMut::<Qpc>::new(&mut ctx))?;
    copy(&mut v, &c, CREATE_FIELDS)?;
    encoded(v.set(Qpc::STATE, qp_state::RST))?;
    encoded(v.set(Qpc::DBR_ADDR, dbr))?;
    encoded(v.set(Qpc::LOG_PAGE_SIZE, buf.log_page_size))?;
    encoded(v.set(Qpc::PAGE_OFFSET, buf.page_offset))?;
    let mut q = queue::new_queue(ctx, buf.pas, uar);
    q.holds.extend(umems);
    q.holds
        .extend((!umr_without_pd).then_some((ObjectKind::Pd, pd)));
    q.holds
        .extend([(ObjectKind::Cq, cqn_snd), (ObjectKind::Cq, cqn_rcv)]);
    q.holds.extend(srq);
    q.holds.extend(xrcd.map(|x| (ObjectKind::Xrcd, x)));
    let end = FIRST_QPN.saturating_add(queue::span(log_max)).min(1 << 24);
    let qpn = queue::insert(
        model,
        ObjectKind::Qp,
        &[ObjectKind::Dct, ObjectKind::Sq],
        (FIRST_QPN, end),
        q,
        syn::QP_EXHAUSTED,
    )?;
    encoded(output::<CreateQpOut>(out)?.set(CreateQpOut::QPN, qpn.into()))?;
    Ok(())
}

pub(crate) fn destroy_qp(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let qpn = input::<DestroyQpIn>(req)?.get32(DestroyQpIn::QPN);
    // Nothing holds a QP, so it is never busy.
    queue::destroy(model, ObjectKind::Qp, qpn, syn::UNKNOWN_QP, syn::UNKNOWN_QP)
}

pub(crate) fn query_qp(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let qpn = input::<QueryQpIn>(req)?.get32(QueryQpIn::QPN);
    let q = queue::find_visible(model, ObjectKind::Qp, qpn, syn::UNKNOWN_QP)?;
    // The output must reach the end of the QP context (and the reserved words after it, 0x110
    // bytes: what Linux 6.1 asks for); the PAS list (or the QPC extension and PAS) follows
    // only as far as the output has room.
    let off = QueryQpOut::QP_PAS_OR_QPC_EXT_AND_PAS.offset();
    if out.len() < off {
        return Err(fail(CmdStatus::BadOutputLen, syn::OUTLEN_BELOW_LAYOUT));
    }
    let mut full = vec![0u8; out.len().max(QueryQpOut::BYTES)];
    let mut o = output::<QueryQpOut>(&mut full)?;
    queue::put(o.nested_mut(QueryQpOut::QPC).as_bytes(), &q.ctx);
    if let Some(tail) = o.as_bytes().get_mut(off..) {
        queue::put_pas(tail, &q.pas);
    }
    let n = out.len();
    out.copy_from_slice(&full[..n]);
    Ok(())
}

/// The state of QP `qpn`, if it is live.
pub(crate) fn state(model: &Model, qpn: u32) -> Option<u8> {
    let q = model.objects.queue(ObjectKind::Qp, qpn)?;
    View::<Qpc>::new(&q.ctx)
        .ok()
        .map(|v| v.get(Qpc::STATE) as u8)
}
