//! Event queues: CREATE_EQ, DESTROY_EQ, QUERY_EQ.
//!
//! CREATE_EQ checks, in order: `log_eq_size` ≤ CUR `log_max_eq_sz` (BAD_PARAM EQ_TOO_BIG);
//! `intr` < 64, the MSI-X vectors (BAD_PARAM BAD_EQ_INTR); `uar_page` an allocated UAR (BAD_RES
//! UNKNOWN_UAR); the buffer of `2^log_eq_size` 64-byte EQEs ([`super::queue`]); fewer than
//! `2^log_max_eq - 1` EQs live (EXCEED_LIM EQ_EXHAUSTED). EQ numbers are 8-bit, from 0, below
//! `2^log_max_eq`. The EQ holds its UAR.
//!
//! The EQ starts unarmed (`st` FIRED, counters 0); the EQ doorbell ([`crate::engine::doorbell`]) moves
//! `consumer_counter` and arms it (`st` ARMED). QUERY_EQ returns the context as programmed with
//! `st` and the counters current, the first 64 bits of `event_bitmask`, and the PAS list.

use mlx5_ifc::consts::arm_state;
use mlx5_ifc::prm::caps::CmdHcaCap;
use mlx5_ifc::prm::eq::{CreateEqIn, CreateEqOut, DestroyEqIn, Eqc, QueryEqIn, QueryEqOut};
use mlx5_ifc::prm::eqe::Eqe;
use mlx5_ifc::{CmdStatus, Layout, ViewMut};

use super::cmd::{bad_param, encoded, fail, input, output, CmdResult, Env, Req};
use super::queue;
use crate::model::objects::ObjectKind;
use crate::model::Model;
use crate::syndrome as syn;

/// Bytes of one EQE.
pub const EQE_BYTES: u64 = Eqe::BYTES as u64;

pub(crate) fn create_eq(
    model: &mut Model,
    env: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let i = input::<CreateEqIn>(req)?;
    let c = i.nested(CreateEqIn::EQ_CONTEXT_ENTRY);
    let log_size = c.get(Eqc::LOG_EQ_SIZE);
    if log_size > model.cur(CmdHcaCap::LOG_MAX_EQ_SZ) {
        return Err(bad_param(syn::EQ_TOO_BIG));
    }
    if c.get(Eqc::INTR) >= u64::from(env.profile.msix_vectors()) {
        return Err(bad_param(syn::BAD_EQ_INTR));
    }
    let uar = c.get32(Eqc::UAR_PAGE);
    queue::require(model, ObjectKind::Uar, uar, syn::UNKNOWN_UAR)?;
    let pas = queue::buffer(
        env,
        "CREATE_EQ",
        i.bytes(CreateEqIn::PAS),
        c.get(Eqc::LOG_PAGE_SIZE),
        c.get(Eqc::PAGE_OFFSET),
        EQE_BYTES << log_size,
    )?;
    let log_max = model.cur(CmdHcaCap::LOG_MAX_EQ).min(8);
    if !queue::below_limit(model.objects.count(ObjectKind::Eq), log_max) {
        return Err(fail(CmdStatus::ExceedLim, syn::EQ_EXHAUSTED));
    }
    let mut ctx = queue::image(&c)?;
    let mut v = encoded(ViewMut::<Eqc>::new(&mut ctx))?;
    encoded(v.set(Eqc::ST, arm_state::FIRED))?;
    encoded(v.set(Eqc::STATUS, 0))?;
    encoded(v.set(Eqc::CONSUMER_COUNTER, 0))?;
    encoded(v.set(Eqc::PRODUCER_COUNTER, 0))?;
    let mut q = queue::new_queue(ctx, pas, Some(uar));
    queue::put(&mut q.event_bitmask, i.bytes(CreateEqIn::EVENT_BITMASK));
    let eqn = queue::insert(
        model,
        ObjectKind::Eq,
        &[],
        (0, queue::span(log_max)),
        q,
        syn::EQ_EXHAUSTED,
    )?;
    encoded(output::<CreateEqOut>(out)?.set(CreateEqOut::EQ_NUMBER, eqn.into()))?;
    Ok(())
}

pub(crate) fn destroy_eq(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let eqn = input::<DestroyEqIn>(req)?.get32(DestroyEqIn::EQ_NUMBER);
    queue::destroy(model, ObjectKind::Eq, eqn, syn::UNKNOWN_EQ, syn::EQ_IN_USE)
}

pub(crate) fn query_eq(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let eqn = input::<QueryEqIn>(req)?.get32(QueryEqIn::EQ_NUMBER);
    let q = queue::find(model, ObjectKind::Eq, eqn, syn::UNKNOWN_EQ)?;
    let mut o = output::<QueryEqOut>(out)?;
    queue::put(
        o.nested_mut(QueryEqOut::EQ_CONTEXT_ENTRY).as_bytes(),
        &q.ctx,
    );
    let mut first = [0u8; 8];
    first.copy_from_slice(&q.event_bitmask[..8]);
    encoded(o.set(QueryEqOut::EVENT_BITMASK, u64::from_be_bytes(first)))?;
    queue::put_pas(o.bytes_mut(QueryEqOut::PAS), &q.pas);
    Ok(())
}
