//! Shared receive queues: CREATE/DESTROY/QUERY_SRQ (ISSI 0) and CREATE/DESTROY/QUERY_RMP
//! (ISSI ≥ 1). SRQs and RMPs share one 24-bit number space from 1 (a QP names either) and one
//! count limit (`2^log_max_srq`; RMPs also `2^log_max_rmp`, EXCEED_LIM SRQ_EXHAUSTED).
//!
//! CREATE_SRQ checks, in order: ISSI 0 (else BAD_OP CREATE_SRQ_AT_ISSI_1); `log_srq_size` ≤ CUR
//! `log_max_srq_sz` (BAD_PARAM SRQ_TOO_BIG); the stride `16 << log_rq_stride` ≤ `max_wqe_sz_rq`
//! (BAD_PARAM BAD_SRQ_STRIDE); `pd` allocated (BAD_RES UNKNOWN_PD); the 4-byte doorbell record;
//! the buffer of `2^log_srq_size` strides ([`super::queue`]); the count limit.
//!
//! CREATE_RMP checks, in order: ISSI ≥ 1 (else BAD_OP CREATE_RMP_AT_ISSI_0); `rmpc.state` RDY
//! (BAD_PARAM BAD_RMP_STATE); `wq.wq_type` linked list (BAD_PARAM BAD_WQ_TYPE); `log_wq_sz` ≤
//! `log_max_srq_sz` (SRQ_TOO_BIG); the stride `1 << log_wq_stride` in 16..=`max_wqe_sz_rq`
//! (BAD_SRQ_STRIDE); `wq.pd` allocated (UNKNOWN_PD); the doorbell record at `wq.dbr_addr`; the
//! buffer (`log_wq_pg_sz`, `wq.page_offset`, PAS at `wq.pas`); the count limits.
//!
//! Both hold their PD. QUERY_SRQ / QUERY_RMP return the context as programmed and the PAS list.
//!
//! The limit event: a nonzero `lwm` (`srqc.lwm`, `rmpc.wq.lwm`) arms it. When taking a receive
//! WQE leaves fewer than `lwm` posted, the device raises SRQ_RQ_LIMIT for the SRQ and disarms
//! (`lwm` back to 0) — whether `lwm` came with the create or later. ARM_RQ (op_mod 1, ISSI 0)
//! and MODIFY_RMP with the `lwm` field selected (ISSI ≥ 1; `rmp_state` must stay RDY,
//! BAD_PARAM BAD_RMP_STATE) set it; an `lwm` above the queue's size is BAD_PARAM SRQ_LIMIT.

use mlx5_ifc::consts::{arm_rq, rmp_state, wq_type};
use mlx5_ifc::prm::caps::CmdHcaCap;
use mlx5_ifc::prm::srq::{
    ArmRqIn, CreateRmpIn, CreateRmpOut, CreateSrqIn, CreateSrqOut, DestroyRmpIn, DestroySrqIn,
    ModifyRmpIn, QueryRmpIn, QueryRmpOut, QuerySrqIn, QuerySrqOut, RmpBitmask, Rmpc, Srqc, Wq,
};
use mlx5_ifc::CmdStatus;

use super::cmd::{bad_param, encoded, fail, input, output, CmdResult, Env, Failure, Req};
use super::queue;
use crate::model::objects::{ObjectKind, Queue};
use crate::model::srq::{limit, set_limit};
use crate::model::Model;
use crate::syndrome as syn;

/// Bytes of an SRQ / RMP doorbell record (the receive counter).
const SRQ_DBR_BYTES: usize = 4;

/// Checks the count limits and inserts an SRQ or RMP holding `pd`.
fn insert(model: &mut Model, kind: ObjectKind, mut q: Queue, pd: u32) -> Result<u32, Failure> {
    let log_srq = queue::log_max(model, CmdHcaCap::LOG_MAX_SRQ);
    let srqs = model.objects.count(ObjectKind::Srq)
        + model.objects.count(ObjectKind::Rmp)
        + model.objects.count(ObjectKind::XrcSrq);
    let mut fits = queue::below_limit(srqs, log_srq);
    if kind == ObjectKind::Rmp {
        let log_rmp = queue::log_max(model, CmdHcaCap::LOG_MAX_RMP);
        fits &= queue::below_limit(model.objects.count(ObjectKind::Rmp), log_rmp);
    }
    if !fits {
        return Err(fail(CmdStatus::ExceedLim, syn::SRQ_EXHAUSTED));
    }
    q.holds.push((ObjectKind::Pd, pd));
    // SRQs, RMPs and XRC SRQs share one number space.
    let other = if kind == ObjectKind::Srq {
        [ObjectKind::Rmp, ObjectKind::XrcSrq]
    } else {
        [ObjectKind::Srq, ObjectKind::XrcSrq]
    };
    let range = (1, queue::span(log_srq));
    queue::insert(model, kind, &other, range, q, syn::SRQ_EXHAUSTED)
}

pub(crate) fn create_srq(
    model: &mut Model,
    env: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    if model.issi != 0 {
        return Err(fail(CmdStatus::BadOp, syn::CREATE_SRQ_AT_ISSI_1));
    }
    let i = input::<CreateSrqIn>(req)?;
    let c = i.nested(CreateSrqIn::SRQ_CONTEXT_ENTRY);
    let log_size = c.get(Srqc::LOG_SRQ_SIZE);
    if log_size > model.cur(CmdHcaCap::LOG_MAX_SRQ_SZ) {
        return Err(bad_param(syn::SRQ_TOO_BIG));
    }
    let stride = 16u64 << c.get(Srqc::LOG_RQ_STRIDE);
    if stride > model.cur(CmdHcaCap::MAX_WQE_SZ_RQ) {
        return Err(bad_param(syn::BAD_SRQ_STRIDE));
    }
    let pd = c.get32(Srqc::PD);
    queue::require(model, ObjectKind::Pd, pd, syn::UNKNOWN_PD)?;
    queue::doorbell_record(env, "CREATE_SRQ", c.get(Srqc::DBR_ADDR), SRQ_DBR_BYTES)?;
    let pas = queue::buffer(
        env,
        "CREATE_SRQ",
        i.bytes(CreateSrqIn::PAS),
        c.get(Srqc::LOG_PAGE_SIZE),
        c.get(Srqc::PAGE_OFFSET),
        stride << log_size,
    )?;
    let q = queue::new_queue(queue::image(&c)?, pas, None);
    let srqn = insert(model, ObjectKind::Srq, q, pd)?;
    encoded(output::<CreateSrqOut>(out)?.set(CreateSrqOut::SRQN, srqn.into()))?;
    Ok(())
}

pub(crate) fn destroy_srq(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let srqn = input::<DestroySrqIn>(req)?.get32(DestroySrqIn::SRQN);
    queue::destroy(
        model,
        ObjectKind::Srq,
        srqn,
        syn::UNKNOWN_SRQ,
        syn::SRQ_IN_USE,
    )
}

pub(crate) fn query_srq(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let srqn = input::<QuerySrqIn>(req)?.get32(QuerySrqIn::SRQN);
    let q = queue::find_visible(model, ObjectKind::Srq, srqn, syn::UNKNOWN_SRQ)?;
    let mut o = output::<QuerySrqOut>(out)?;
    queue::put(
        o.nested_mut(QuerySrqOut::SRQ_CONTEXT_ENTRY).as_bytes(),
        &q.ctx,
    );
    queue::put_pas(o.bytes_mut(QuerySrqOut::PAS), &q.pas);
    Ok(())
}

pub(crate) fn create_rmp(
    model: &mut Model,
    env: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    if model.issi == 0 {
        return Err(fail(CmdStatus::BadOp, syn::CREATE_RMP_AT_ISSI_0));
    }
    let i = input::<CreateRmpIn>(req)?;
    let c = i.nested(CreateRmpIn::CTX);
    let w = c.nested(Rmpc::WQ);
    if c.get(Rmpc::STATE) != rmp_state::RDY {
        return Err(bad_param(syn::BAD_RMP_STATE));
    }
    if w.get(Wq::WQ_TYPE) != wq_type::LINKED_LIST {
        return Err(bad_param(syn::BAD_WQ_TYPE));
    }
    let log_size = w.get(Wq::LOG_WQ_SZ);
    if log_size > model.cur(CmdHcaCap::LOG_MAX_SRQ_SZ) {
        return Err(bad_param(syn::SRQ_TOO_BIG));
    }
    let stride = 1u64 << w.get(Wq::LOG_WQ_STRIDE);
    if !(16..=model.cur(CmdHcaCap::MAX_WQE_SZ_RQ)).contains(&stride) {
        return Err(bad_param(syn::BAD_SRQ_STRIDE));
    }
    let pd = w.get32(Wq::PD);
    queue::require(model, ObjectKind::Pd, pd, syn::UNKNOWN_PD)?;
    queue::doorbell_record(env, "CREATE_RMP", w.get(Wq::DBR_ADDR), SRQ_DBR_BYTES)?;
    let pas = queue::buffer(
        env,
        "CREATE_RMP",
        w.bytes(Wq::PAS),
        w.get(Wq::LOG_WQ_PG_SZ),
        w.get(Wq::PAGE_OFFSET),
        stride << log_size,
    )?;
    let q = queue::new_queue(queue::image(&c)?, pas, None);
    let rmpn = insert(model, ObjectKind::Rmp, q, pd)?;
    encoded(output::<CreateRmpOut>(out)?.set(CreateRmpOut::RMPN, rmpn.into()))?;
    Ok(())
}

pub(crate) fn destroy_rmp(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let rmpn = input::<DestroyRmpIn>(req)?.get32(DestroyRmpIn::RMPN);
    queue::destroy(
        model,
        ObjectKind::Rmp,
        rmpn,
        syn::UNKNOWN_SRQ,
        syn::SRQ_IN_USE,
    )
}

pub(crate) fn query_rmp(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let rmpn = input::<QueryRmpIn>(req)?.get32(QueryRmpIn::RMPN);
    let q = queue::find_visible(model, ObjectKind::Rmp, rmpn, syn::UNKNOWN_SRQ)?;
    let mut o = output::<QueryRmpOut>(out)?;
    let mut c = o.nested_mut(QueryRmpOut::RMP_CONTEXT);
    queue::put(c.as_bytes(), &q.ctx);
    queue::put_pas(c.nested_mut(Rmpc::WQ).bytes_mut(Wq::PAS), &q.pas);
    Ok(())
}

/// Arms with `lwm` after checking it fits the queue.
fn arm(model: &mut Model, kind: ObjectKind, n: u32, lwm: u32) -> CmdResult {
    let (_, size) = limit(model, kind, n).ok_or(fail(CmdStatus::BadRes, syn::UNKNOWN_SRQ))?;
    if lwm > size {
        return Err(bad_param(syn::SRQ_LIMIT));
    }
    set_limit(model, kind, n, lwm)
}

/// ARM_RQ of an SRQ (op_mod 1): sets its limit.
pub(crate) fn arm_rq(model: &mut Model, _: &mut Env<'_>, req: &Req<'_>, _: &mut [u8]) -> CmdResult {
    let i = input::<ArmRqIn>(req)?;
    if req.op_mod != arm_rq::SRQ {
        return Err(bad_param(syn::BAD_OP_MOD));
    }
    let n = i.get32(ArmRqIn::SRQ_NUMBER);
    queue::changeable(model, ObjectKind::Srq, n, syn::UNKNOWN_SRQ)?;
    arm(model, ObjectKind::Srq, n, i.get32(ArmRqIn::LWM))
}

/// MODIFY_RMP: the `lwm` field when the bitmask selects it; the RMP stays RDY.
pub(crate) fn modify_rmp(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let i = input::<ModifyRmpIn>(req)?;
    let n = i.get32(ModifyRmpIn::RMPN);
    queue::changeable(model, ObjectKind::Rmp, n, syn::UNKNOWN_SRQ)?;
    let ctx = i.nested(ModifyRmpIn::CTX);
    if i.get(ModifyRmpIn::RMP_STATE) != rmp_state::RDY || ctx.get(Rmpc::STATE) != rmp_state::RDY {
        return Err(bad_param(syn::BAD_RMP_STATE));
    }
    if i.nested(ModifyRmpIn::BITMASK).get(RmpBitmask::LWM) == 1 {
        arm(
            model,
            ObjectKind::Rmp,
            n,
            ctx.nested(Rmpc::WQ).get32(Wq::LWM),
        )?;
    }
    Ok(())
}
