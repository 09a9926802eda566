//! Simple resources: UAR pages, protection domains, special contexts.
//!
//! * UAR indices come from `FIRST_UAR_INDEX` (8) up to the last 4 KiB page of BAR0 (pages 0–4
//!   hold the init segment, MSI-X table and PBA).
//! * PD numbers come from `1..2^log_max_pd` (CUR); 0 is never handed out.
//! * DEALLOC_UAR of a UAR an EQ, CQ or QP uses, DEALLOC_PD of a PD an SRQ, RMP or QP uses: RES_BUSY
//!   (UAR_IN_USE, PD_IN_USE).

use mlx5_ifc::prm::caps::CmdHcaCap;
use mlx5_ifc::prm::uar_pd::{
    AllocPdOut, AllocUarOut, DeallocPdIn, DeallocUarIn, QuerySpecialContextsOut,
};
use mlx5_ifc::{regs, CmdStatus};

use super::cmd::{encoded, fail, input, output, CmdResult, Env, Req};
use crate::bar::BAR_SIZE;
use crate::model::mkey::{NULL_MKEY, RESD_LKEY};
use crate::model::objects::{Object, ObjectKind};
use crate::model::Model;
use crate::syndrome as syn;

/// The first UAR index ALLOC_UAR hands out.
pub const FIRST_UAR_INDEX: u32 = 8;

/// UAR pages end where the MEMIC window (device memory, the top of BAR0) begins.
const UAR_END: u32 = ((BAR_SIZE - crate::profile::MEMIC_BYTES) / regs::UAR_PAGE_SIZE) as u32;

pub(crate) fn alloc_uar(
    model: &mut Model,
    _: &mut Env<'_>,
    _: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let uar = model
        .objects
        .alloc(ObjectKind::Uar, FIRST_UAR_INDEX, UAR_END, Object::Uar)
        .ok_or(fail(CmdStatus::ExceedLim, syn::UAR_EXHAUSTED))?;
    encoded(output::<AllocUarOut>(out)?.set(AllocUarOut::UAR, uar.into()))?;
    Ok(())
}

pub(crate) fn dealloc_uar(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let uar = input::<DeallocUarIn>(req)?.get(DeallocUarIn::UAR) as u32;
    if model.objects.refs(ObjectKind::Uar, uar) > 0 {
        return Err(fail(CmdStatus::ResBusy, syn::UAR_IN_USE));
    }
    if model.remove(ObjectKind::Uar, uar).is_none() {
        return Err(fail(CmdStatus::BadRes, syn::UNKNOWN_UAR));
    }
    Ok(())
}

pub(crate) fn alloc_pd(
    model: &mut Model,
    _: &mut Env<'_>,
    _: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let log_max = model.cur(CmdHcaCap::LOG_MAX_PD).min(24);
    let pd = model
        .objects
        .alloc(ObjectKind::Pd, 1, 1u32 << log_max, Object::Pd)
        .ok_or(fail(CmdStatus::ExceedLim, syn::PD_EXHAUSTED))?;
    encoded(output::<AllocPdOut>(out)?.set(AllocPdOut::PD, pd.into()))?;
    Ok(())
}

pub(crate) fn dealloc_pd(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let pd = input::<DeallocPdIn>(req)?.get(DeallocPdIn::PD) as u32;
    if model.objects.refs(ObjectKind::Pd, pd) > 0 {
        return Err(fail(CmdStatus::ResBusy, syn::PD_IN_USE));
    }
    if model.remove(ObjectKind::Pd, pd).is_none() {
        return Err(fail(CmdStatus::BadRes, syn::UNKNOWN_PD));
    }
    Ok(())
}

pub(crate) fn query_special_contexts(
    _: &mut Model,
    _: &mut Env<'_>,
    _: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let mut o = output::<QuerySpecialContextsOut>(out)?;
    encoded(o.set(QuerySpecialContextsOut::RESD_LKEY, RESD_LKEY.into()))?;
    encoded(o.set(QuerySpecialContextsOut::NULL_MKEY, NULL_MKEY.into()))?;
    Ok(())
}
