//! Completion queues: CREATE_CQ, DESTROY_CQ, QUERY_CQ, MODIFY_CQ.
//!
//! CREATE_CQ checks, in order: `log_cq_size` ≤ CUR `log_max_cq_sz` (BAD_PARAM CQ_TOO_BIG);
//! `cqe_sz` 0 (64 B) or 1 (128 B) (BAD_PARAM BAD_CQE_SIZE); CQE compression the device offers
//! ([`compression`]: BAD_PARAM CQE_COMPRESSION); `c_eqn_or_apu_element` a live EQ
//! (BAD_RES UNKNOWN_EQ); `uar_page` an allocated UAR (BAD_RES UNKNOWN_UAR); the 8-byte doorbell
//! record at `dbr_addr`; the buffer of `2^log_cq_size` CQEs ([`super::queue`]); fewer than
//! `2^log_max_cq - 1` CQs live (EXCEED_LIM CQ_EXHAUSTED). CQ numbers are 24-bit, from 1. The CQ
//! holds its EQ and its UAR; `cq_period` / `cq_max_count` are kept as given.
//!
//! The CQ starts unarmed (`st` FIRED, counters 0); the CQ arm doorbell ([`crate::engine::doorbell`]) sets
//! `consumer_counter` and arms it (`st` ARMED, or SOLICITED_ARMED). QUERY_CQ returns the context
//! as programmed with `st` and the counters current, and the PAS list.
//!
//! MODIFY_CQ op_mod 0 changes the moderation: `modify_field_select` bit 0 `cq_period`, bit 1
//! `cq_max_count` (needs CUR `cq_moderation`; other bits BAD_PARAM CQ_MODIFY_FIELD).
//!
//! MODIFY_CQ op_mod 1 resizes (needs CUR `cq_resize`): `resize_field_select` bit 0 `log_cq_size`
//! (required), bit 1 `page_offset`, bit 2 `log_page_size` (other bits: CQ_MODIFY_FIELD), the new
//! buffer's PAS after the context, checked as CREATE_CQ checks its buffer; the CQE size stays.
//! The new size must hold the unpolled CQEs and the resize CQE (CQ_RESIZE_TOO_SMALL). The device
//! then writes a RESIZE_CQ CQE to the old buffer and every later CQE to the new one
//! ([`crate::events::cqe::resize`]) — what rdma-core's `ibv_resize_cq` and mlx5_ib's resize of
//! kernel CQs expect (docs/fields.md).

use mlx5_ifc::consts::{arm_state, cqe_sz, modify_cq};
use mlx5_ifc::prm::caps::CmdHcaCap;
use mlx5_ifc::prm::cq::{
    Cqc, CreateCqIn, CreateCqOut, DestroyCqIn, ModifyCqIn, QueryCqIn, QueryCqOut,
};
use mlx5_ifc::{CmdStatus, View, ViewMut};

use super::cmd::{bad_param, encoded, fail, input, output, CmdResult, Env, Req};
use super::{devx, queue};
use crate::events::cqe;
use crate::model::objects::ObjectKind;
use crate::model::{Hw, Model};
use crate::syndrome as syn;

/// Bytes of a CQ doorbell record (consumer index, arm word).
const CQ_DBR_BYTES: usize = 8;

pub(crate) fn create_cq(
    model: &mut Model,
    env: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let i = input::<CreateCqIn>(req)?;
    let c = i.nested(CreateCqIn::CQ_CONTEXT);
    let log_size = c.get(Cqc::LOG_CQ_SIZE);
    if log_size > model.cur(CmdHcaCap::LOG_MAX_CQ_SZ) {
        return Err(bad_param(syn::CQ_TOO_BIG));
    }
    let cqe_bytes: u64 = match c.get(Cqc::CQE_SZ) {
        cqe_sz::BYTES_64 => 64,
        cqe_sz::BYTES_128 => 128,
        _ => return Err(bad_param(syn::BAD_CQE_SIZE)),
    };
    compression(model, &c, cqe_bytes)?;
    let eqn = c.get32(Cqc::C_EQN_OR_APU_ELEMENT);
    queue::require(model, ObjectKind::Eq, eqn, syn::UNKNOWN_EQ)?;
    let uar = c.get32(Cqc::UAR_PAGE);
    queue::require(model, ObjectKind::Uar, uar, syn::UNKNOWN_UAR)?;
    // DevX: the doorbell record and the buffer may live in umems (`dbr_umem_valid`,
    // `cq_umem_valid`); the context then keeps their IOVA and page geometry.
    let mut umems = Vec::new();
    let dbr = devx::doorbell(
        model,
        &mut umems,
        (c.get(Cqc::DBR_UMEM_VALID), c.get32(Cqc::DBR_UMEM_ID)),
        c.get(Cqc::DBR_ADDR),
        CQ_DBR_BYTES,
    )?;
    queue::doorbell_record(env, "CREATE_CQ", dbr, CQ_DBR_BYTES)?;
    let buf = devx::buffer(
        model,
        env,
        &mut umems,
        (
            i.get(CreateCqIn::CQ_UMEM_VALID),
            i.get32(CreateCqIn::CQ_UMEM_ID),
            i.get(CreateCqIn::CQ_UMEM_OFFSET),
        ),
        ("CREATE_CQ", i.bytes(CreateCqIn::PAS)),
        (c.get(Cqc::LOG_PAGE_SIZE), c.get(Cqc::PAGE_OFFSET)),
        cqe_bytes << log_size,
    )?;

    let log_max = queue::log_max(model, CmdHcaCap::LOG_MAX_CQ);
    if !queue::below_limit(model.objects.count(ObjectKind::Cq), log_max) {
        return Err(fail(CmdStatus::ExceedLim, syn::CQ_EXHAUSTED));
    }
    let mut ctx = queue::image(&c)?;
    let mut v = encoded(ViewMut::<Cqc>::new(&mut ctx))?;
    encoded(v.set(Cqc::ST, arm_state::FIRED))?;
    encoded(v.set(Cqc::STATUS, 0))?;
    encoded(v.set(Cqc::DBR_ADDR, dbr))?;
    encoded(v.set(Cqc::LOG_PAGE_SIZE, buf.log_page_size))?;
    encoded(v.set(Cqc::PAGE_OFFSET, buf.page_offset))?;
    for f in [
        Cqc::CONSUMER_COUNTER,
        Cqc::PRODUCER_COUNTER,
        Cqc::LAST_NOTIFIED_INDEX,
        Cqc::LAST_SOLICIT_INDEX,
    ] {
        encoded(v.set(f, 0))?;
    }
    let mut q = queue::new_queue(ctx, buf.pas, Some(uar));
    q.holds.push((ObjectKind::Eq, eqn));
    q.holds.extend(umems);
    let cqn = queue::insert(
        model,
        ObjectKind::Cq,
        &[],
        (1, queue::span(log_max)),
        q,
        syn::CQ_EXHAUSTED,
    )?;
    encoded(output::<CreateCqOut>(out)?.set(CreateCqOut::CQN, cqn.into()))?;
    Ok(())
}

/// CQE compression as the CQ asks for it (`cqe_comp_en`), checked against what the device
/// offers (BAD_PARAM CQE_COMPRESSION): `cqe_compression`; the mini CQE format HASH (0) or CSUM
/// (1), or CSUM_STRIDX (3) with `mini_cqe_resp_stride_index`; 128-byte CQEs with
/// `cqe_compression_128`; the basic layout (`cqe_compression_layout` 0) only.
fn compression(model: &Model, c: &View<'_, Cqc>, cqe_bytes: u64) -> CmdResult {
    if c.get(Cqc::CQE_COMP_EN) == 0 {
        return Ok(());
    }
    let format_ok = match c.get(Cqc::MINI_CQE_RES_FORMAT) {
        0 | 1 => true,
        3 => model.cur(CmdHcaCap::MINI_CQE_RESP_STRIDE_INDEX) == 1,
        _ => false,
    };
    if model.cur(CmdHcaCap::CQE_COMPRESSION) == 0
        || !format_ok
        || (cqe_bytes == 128 && model.cur(CmdHcaCap::CQE_COMPRESSION_128) == 0)
        || c.get(Cqc::CQE_COMPRESSION_LAYOUT) != 0
    {
        return Err(bad_param(syn::CQE_COMPRESSION));
    }
    Ok(())
}

pub(crate) fn destroy_cq(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let cqn = input::<DestroyCqIn>(req)?.get32(DestroyCqIn::CQN);
    queue::destroy(model, ObjectKind::Cq, cqn, syn::UNKNOWN_CQ, syn::CQ_IN_USE)
}

pub(crate) fn query_cq(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let cqn = input::<QueryCqIn>(req)?.get32(QueryCqIn::CQN);
    let q = queue::find_visible(model, ObjectKind::Cq, cqn, syn::UNKNOWN_CQ)?;
    let mut o = output::<QueryCqOut>(out)?;
    queue::put(o.nested_mut(QueryCqOut::CQ_CONTEXT).as_bytes(), &q.ctx);
    queue::put_pas(o.bytes_mut(QueryCqOut::PAS), &q.pas);
    Ok(())
}

pub(crate) fn modify_cq(
    model: &mut Model,
    env: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let i = input::<ModifyCqIn>(req)?;
    let select = queue::be_uint(i.bytes(ModifyCqIn::MODIFY_FIELD_SELECT_RESIZE_FIELD_SELECT));
    let cqn = i.get32(ModifyCqIn::CQN);
    queue::changeable(model, ObjectKind::Cq, cqn, syn::UNKNOWN_CQ)?;
    match req.op_mod {
        modify_cq::MODERATION => moderate(model, cqn, select, &i.nested(ModifyCqIn::CQ_CONTEXT)),
        modify_cq::RESIZE => resize(model, env, cqn, select, &i),
        _ => Err(bad_param(syn::CQ_MODIFY_FIELD)),
    }
}

/// MODIFY_CQ op_mod 0: `cq_period` and/or `cq_max_count`.
fn moderate(model: &mut Model, cqn: u32, select: u64, c: &View<'_, Cqc>) -> CmdResult {
    let known = modify_cq::PERIOD | modify_cq::MAX_COUNT;
    if select & !known != 0 || model.cur(CmdHcaCap::CQ_MODERATION) == 0 {
        return Err(bad_param(syn::CQ_MODIFY_FIELD));
    }
    let (period, count) = (c.get(Cqc::CQ_PERIOD), c.get(Cqc::CQ_MAX_COUNT));
    let q = model
        .objects
        .queue_mut(ObjectKind::Cq, cqn)
        .ok_or(fail(CmdStatus::BadRes, syn::UNKNOWN_CQ))?;
    let mut v = encoded(ViewMut::<Cqc>::new(&mut q.ctx))?;
    if select & modify_cq::PERIOD != 0 {
        encoded(v.set(Cqc::CQ_PERIOD, period))?;
    }
    if select & modify_cq::MAX_COUNT != 0 {
        encoded(v.set(Cqc::CQ_MAX_COUNT, count))?;
    }
    Ok(())
}

/// MODIFY_CQ op_mod 1: a new buffer of `2^log_cq_size` CQEs (of the CQ's CQE size) at the PAS
/// after the context; `page_offset` and `log_page_size` are taken when selected, else kept.
fn resize(
    model: &mut Model,
    env: &mut Env<'_>,
    cqn: u32,
    select: u64,
    i: &View<'_, ModifyCqIn>,
) -> CmdResult {
    let known = modify_cq::LOG_SIZE | modify_cq::PAGE_OFFSET | modify_cq::LOG_PAGE_SIZE;
    if select & !known != 0
        || select & modify_cq::LOG_SIZE == 0
        || model.cur(CmdHcaCap::CQ_RESIZE) == 0
    {
        return Err(bad_param(syn::CQ_MODIFY_FIELD));
    }
    let old = queue::find(model, ObjectKind::Cq, cqn, syn::UNKNOWN_CQ)?;
    let old =
        View::<Cqc>::new(&old.ctx).map_err(|_| fail(CmdStatus::InternalErr, syn::INTERNAL))?;
    let c = i.nested(ModifyCqIn::CQ_CONTEXT);
    let pick = |bit: u64, f| {
        if select & bit != 0 {
            c.get(f)
        } else {
            old.get(f)
        }
    };
    let log_size = c.get(Cqc::LOG_CQ_SIZE);
    let log_page_size = pick(modify_cq::LOG_PAGE_SIZE, Cqc::LOG_PAGE_SIZE);
    let page_offset = pick(modify_cq::PAGE_OFFSET, Cqc::PAGE_OFFSET);
    let cqe_bytes: u64 = if old.get(Cqc::CQE_SZ) == cqe_sz::BYTES_128 {
        128
    } else {
        64
    };
    if log_size > model.cur(CmdHcaCap::LOG_MAX_CQ_SZ) {
        return Err(bad_param(syn::CQ_TOO_BIG));
    }
    let pas = queue::buffer(
        env,
        "MODIFY_CQ resize",
        i.bytes(ModifyCqIn::PAS),
        log_page_size,
        page_offset,
        cqe_bytes << log_size,
    )?;
    let mut hw = Hw {
        model,
        iommu: env.iommu,
        faults: env.dma_faults,
        now: env.now,
    };
    let held = cqe::unpolled(&hw, cqn).unwrap_or(0);
    if u64::from(held) + 1 > 1u64 << log_size {
        return Err(bad_param(syn::CQ_RESIZE_TOO_SMALL));
    }
    let new = cqe::NewBuffer {
        log_size,
        log_page_size,
        page_offset,
        pas,
    };
    cqe::resize(&mut hw, cqn, new);
    Ok(())
}
