//! DC targets (the responder end of the Dynamically Connected transport): CREATE_DCT,
//! DESTROY_DCT, DRAIN_DCT, QUERY_DCT, ARM_DCT_FOR_KEY_VIOLATION. The initiators are QPs
//! (CREATE_QP with `st` DCI, [`super::qp`]); the data path of both ends is
//! [`crate::engine::dc`].
//!
//! * Every DCT command needs CUR `dct` (BAD_OP otherwise, as firmware without the feature).
//! * CREATE_DCT takes the whole DCT context at once (Linux's mlx5_ib sends it at the DCT's
//!   INIT→RTR): a live `pd` (BAD_RES UNKNOWN_PD), `cqn` (UNKNOWN_CQ) and `srqn_xrqn`, an SRQ or
//!   RMP (UNKNOWN_SRQ), each held; `port` 1 (BAD_QP_PORT); `pkey_index` inside the P_Key table
//!   (BAD_PKEY_INDEX); `mtu` 1..=5 (BAD_PATH_MTU); `my_addr_index` a set RoCE address
//!   (QP_GID_INDEX / QP_GID_NOT_SET, as a QP's path); with `rae`, `atomic_mode` at most 8
//!   (BAD_ATOMIC_MODE); `cs_res` 0 (disabled), 1 or 2 (BAD_CS_RES); fewer than `2^log_max_qp - 1` DCTs live
//!   (EXCEED_LIM QP_EXHAUSTED). Its number comes from the QP number space (a BTH names either);
//!   it starts ACTIVE, its key-violation counter 0. The output's `ece` is 0 (no ECE offered).
//! * DRAIN_DCT moves an ACTIVE DCT to DRAINING (else BAD_RES_STATE DCT_NOT_ACTIVE): it takes
//!   no new request and its connections close; after the command it is DRAINED and
//!   DCT_DRAINED (0x1c) names it to the EQs subscribed — mlx5_ib waits for that event, with no
//!   timeout, before DESTROY_DCT.
//! * DESTROY_DCT works in any state (its connections close); QUERY_DCT returns the context as
//!   it is now (state, `dc_access_key_violation_count`); ARM_DCT_FOR_KEY_VIOLATION arms one
//!   DCT_KEY_VIOLATION (0x1d) event for the next request with another key (an ACTIVE DCT).
//!   An unknown or another context's DCT: BAD_RES UNKNOWN_DCT.

use mlx5_ifc::consts::{atomic_mode, dct_state};
use mlx5_ifc::prm::caps::CmdHcaCap;
use mlx5_ifc::prm::dct::{
    ArmDctIn, CreateDctIn, CreateDctOut, Dctc, DestroyDctIn, DrainDctIn, QueryDctIn, QueryDctOut,
};
use mlx5_ifc::{CmdStatus, View, ViewMut};

use super::cmd::{bad_param, encoded, fail, input, output, CmdResult, Env, Failure, Req};
use super::qp::FIRST_QPN;
use super::queue;
use crate::events::eqe::dct_event;
use crate::model::objects::ObjectKind;
use crate::model::{Hw, Model};
use crate::syndrome as syn;

/// CUR `dct`, or BAD_OP.
fn offered(model: &Model) -> CmdResult {
    if model.cur(CmdHcaCap::DCT) == 1 {
        Ok(())
    } else {
        Err(fail(CmdStatus::BadOp, syn::UNKNOWN_OPCODE))
    }
}

/// The checks of a new DCT's context; the SRQ or RMP it receives from.
fn check(model: &Model, c: &View<'_, Dctc>) -> Result<(ObjectKind, u32), Failure> {
    queue::require(model, ObjectKind::Pd, c.get32(Dctc::PD), syn::UNKNOWN_PD)?;
    queue::require(model, ObjectKind::Cq, c.get32(Dctc::CQN), syn::UNKNOWN_CQ)?;
    let n = c.get32(Dctc::SRQN_XRQN);
    let srq = [ObjectKind::Srq, ObjectKind::Rmp]
        .into_iter()
        .find(|&k| model.objects.contains(k, n))
        .ok_or(fail(CmdStatus::BadRes, syn::UNKNOWN_SRQ))?;
    if c.get(Dctc::PORT) != 1 {
        return Err(bad_param(syn::BAD_QP_PORT));
    }
    let pkeys = 128u64 << model.cur(CmdHcaCap::PKEY_TABLE_SIZE).min(8);
    if c.get(Dctc::PKEY_INDEX) >= pkeys {
        return Err(bad_param(syn::BAD_PKEY_INDEX));
    }
    if !(1..=5).contains(&c.get(Dctc::MTU)) {
        return Err(bad_param(syn::BAD_PATH_MTU));
    }
    let gid = usize::try_from(c.get(Dctc::MY_ADDR_INDEX)).unwrap_or(usize::MAX);
    match model.vport.gid(gid) {
        None => return Err(bad_param(syn::QP_GID_INDEX)),
        Some(e) if e.iter().all(|&b| b == 0) => return Err(bad_param(syn::QP_GID_NOT_SET)),
        Some(_) => {}
    }
    if c.get(Dctc::RAE) == 1 && c.get(Dctc::ATOMIC_MODE) > atomic_mode::UP_TO_256B {
        return Err(bad_param(syn::BAD_ATOMIC_MODE));
    }
    if c.get(Dctc::CS_RES) > 2 {
        return Err(bad_param(syn::BAD_CS_RES));
    }
    Ok((srq, n))
}

pub(crate) fn create_dct(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    offered(model)?;
    let i = input::<CreateDctIn>(req)?;
    let c = i.nested(CreateDctIn::DCT_CONTEXT_ENTRY);
    let srq = check(model, &c)?;
    let log_max = queue::log_max(model, CmdHcaCap::LOG_MAX_QP);
    if !queue::below_limit(model.objects.count(ObjectKind::Dct), log_max) {
        return Err(fail(CmdStatus::ExceedLim, syn::QP_EXHAUSTED));
    }
    let mut ctx = queue::image(&c)?;
    let mut v = encoded(ViewMut::<Dctc>::new(&mut ctx))?;
    encoded(v.set(Dctc::STATE, dct_state::ACTIVE))?;
    encoded(v.set(Dctc::DC_ACCESS_KEY_VIOLATION_COUNT, 0))?;
    let mut q = queue::new_queue(ctx, Vec::new(), None);
    q.holds.extend([
        (ObjectKind::Pd, c.get32(Dctc::PD)),
        (ObjectKind::Cq, c.get32(Dctc::CQN)),
        srq,
    ]);
    let end = FIRST_QPN.saturating_add(queue::span(log_max)).min(1 << 24);
    let dctn = queue::insert(
        model,
        ObjectKind::Dct,
        &[ObjectKind::Qp, ObjectKind::Sq],
        (FIRST_QPN, end),
        q,
        syn::QP_EXHAUSTED,
    )?;
    encoded(output::<CreateDctOut>(out)?.set(CreateDctOut::DCTN, dctn.into()))?;
    Ok(())
}

pub(crate) fn destroy_dct(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    offered(model)?;
    let dctn = input::<DestroyDctIn>(req)?.get32(DestroyDctIn::DCTN);
    queue::destroy(
        model,
        ObjectKind::Dct,
        dctn,
        syn::UNKNOWN_DCT,
        syn::UNKNOWN_DCT,
    )
}

/// The state of DCT `dctn` (changeable by the command's uid), or BAD_RES UNKNOWN_DCT.
fn active(model: &Model, dctn: u32) -> CmdResult {
    let q = queue::find_visible(model, ObjectKind::Dct, dctn, syn::UNKNOWN_DCT)?;
    let state = View::<Dctc>::new(&q.ctx).map_or(dct_state::DRAINED, |v| v.get(Dctc::STATE));
    if state == dct_state::ACTIVE {
        Ok(())
    } else {
        Err(fail(CmdStatus::BadResState, syn::DCT_NOT_ACTIVE))
    }
}

/// Sets DCT `dctn`'s state in its context.
fn set_state(model: &mut Model, dctn: u32, state: u64) {
    if let Some(q) = model.objects.queue_mut(ObjectKind::Dct, dctn) {
        if let Err(e) =
            ViewMut::<Dctc>::new(&mut q.ctx).and_then(|mut v| v.set(Dctc::STATE, state).map(drop))
        {
            log::error!("mlx5-sim: DCT {dctn:#x}: {e}");
        }
    }
}

pub(crate) fn drain_dct(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    offered(model)?;
    let dctn = input::<DrainDctIn>(req)?.get32(DrainDctIn::DCTN);
    active(model, dctn)?;
    set_state(model, dctn, dct_state::DRAINING);
    let qps = &mut model.rt.qps;
    model.dc.close(dctn, &mut |key| {
        qps.remove(&key);
    });
    model.dc.draining.push(dctn);
    Ok(())
}

pub(crate) fn query_dct(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    offered(model)?;
    let dctn = input::<QueryDctIn>(req)?.get32(QueryDctIn::DCTN);
    let q = queue::find_visible(model, ObjectKind::Dct, dctn, syn::UNKNOWN_DCT)?;
    let mut o = output::<QueryDctOut>(out)?;
    queue::put(
        o.nested_mut(QueryDctOut::DCT_CONTEXT_ENTRY).as_bytes(),
        &q.ctx,
    );
    Ok(())
}

pub(crate) fn arm_dct(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    offered(model)?;
    let dctn = input::<ArmDctIn>(req)?.get32(ArmDctIn::DCT_NUMBER);
    active(model, dctn)?;
    model.dc.armed.insert(dctn);
    Ok(())
}

/// After a command: every DCT DRAIN_DCT moved to DRAINING has no connection left (they closed
/// with the command), so it is DRAINED now and DCT_DRAINED names it.
pub(crate) fn after_command(hw: &mut Hw<'_>) {
    for dctn in std::mem::take(&mut hw.model.dc.draining) {
        set_state(hw.model, dctn, dct_state::DRAINED);
        dct_event(hw, mlx5_ifc::event::DCT_DRAINED, dctn);
    }
}
