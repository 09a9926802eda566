//! DevX: user contexts and user memory — CREATE_UCTX / DESTROY_UCTX, CREATE_UMEM /
//! DESTROY_UMEM (facts: docs/fields.md, "DevX").
//!
//! * A user context is a uid (1..`2^log_max_uctx`, never 0 or the shared 0xffff). Commands
//!   carry it in their header (bits 0x10–0x1f); a command whose uid is not 0, 0xffff or a live
//!   context is refused (BAD_PARAM BAD_UID). An object is owned by the uid that made it, and
//!   only that uid — or the kernel's 0 — may change, destroy or query it
//!   ([`super::queue::changeable`], [`super::queue::find_visible`]).
//!   Linux's mlx5_ib makes one context at probe (its DevX whitelist context) and one per user
//!   context that asks for DevX, which rdma-core does on every open.
//! * CREATE_UCTX: no uid in the header; `uctx.cap` only bits of `uctx_cap` (BAD_PARAM
//!   UCTX_CAP). DESTROY_UCTX names the uid at byte 10; a context that still owns objects is
//!   RES_BUSY (UCTX_IN_USE).
//! * CREATE_UMEM (a user context's uid): pages of `4 KiB << log_page_size`, the region starting
//!   `page_offset` into the first, `num_of_mtt` page addresses after the umem (each
//!   page-aligned and mapped); at most [`MAX_UMEM_PAGES`] of them. Objects that live in a umem
//!   hold it: DESTROY_UMEM of a umem in use is RES_BUSY (UMEM_IN_USE).

use mlx5_ifc::prm::caps::CmdHcaCap;
use mlx5_ifc::prm::devx::{
    CreateUctxIn, CreateUctxOut, CreateUmemIn, CreateUmemOut, DestroyUctxIn, DestroyUmemIn, Uctx,
    Umem as UmemLayout,
};
use mlx5_ifc::{CmdStatus, Layout};

use super::cmd::{bad_param, encoded, fail, input, output, CmdResult, Env, Failure, Req};
use crate::model::objects::{Object, ObjectKind, Umem, SHARED_UID};
use crate::model::Model;
use crate::syndrome as syn;

/// The most pages one umem may name (1 GiB of 4 KiB pages): a bound on what a guest makes the
/// simulator keep.
pub(crate) const MAX_UMEM_PAGES: u64 = 1 << 18;

/// Whether `uid` may stand in a command's header: the kernel's 0, the shared 0xffff, or a live
/// user context.
pub(crate) fn uid_ok(model: &Model, uid: u16) -> bool {
    uid == 0
        || (model.cur(CmdHcaCap::LOG_MAX_UCTX) > 0
            && (uid == SHARED_UID || model.objects.contains(ObjectKind::Uctx, uid.into())))
}

pub(crate) fn create_uctx(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let log = model.cur(CmdHcaCap::LOG_MAX_UCTX).min(16) as u32;
    if log == 0 {
        return Err(fail(CmdStatus::BadOp, syn::UNKNOWN_OPCODE));
    }
    let cap = input::<CreateUctxIn>(req)?
        .nested(CreateUctxIn::UCTX)
        .get(Uctx::CAP);
    if cap & !model.cur(CmdHcaCap::UCTX_CAP) != 0 {
        return Err(bad_param(syn::UCTX_CAP));
    }
    // Its own uid owns it: the context is destroyed by naming it.
    let end = (1u32 << log).min(u32::from(SHARED_UID));
    let uid = model
        .objects
        .alloc(ObjectKind::Uctx, 1, end, Object::Uctx)
        .ok_or(fail(CmdStatus::ExceedLim, syn::UCTX_EXHAUSTED))?;
    encoded(output::<CreateUctxOut>(out)?.set(CreateUctxOut::UID, uid.into()))?;
    Ok(())
}

pub(crate) fn destroy_uctx(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let uid = input::<DestroyUctxIn>(req)?.get(DestroyUctxIn::UID) as u16;
    if uid == 0 || !model.objects.contains(ObjectKind::Uctx, uid.into()) {
        return Err(fail(CmdStatus::BadRes, syn::UNKNOWN_UCTX));
    }
    if model.objects.owned_by(uid) > 0 {
        return Err(fail(CmdStatus::ResBusy, syn::UCTX_IN_USE));
    }
    model.remove(ObjectKind::Uctx, uid.into());
    Ok(())
}

pub(crate) fn create_umem(
    model: &mut Model,
    env: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let i = input::<CreateUmemIn>(req)?;
    if i.get(CreateUmemIn::UID) == 0 {
        // A umem belongs to a user context (no `umem_uid_0`).
        return Err(bad_param(syn::BAD_UID));
    }
    let u = i.nested(CreateUmemIn::UMEM);
    let umem = checked_umem(env, &u, req.input)?;
    let log_max = model.cur(CmdHcaCap::LOG_MAX_UMEM).min(24) as u32;
    let id = model
        .objects
        .alloc(
            ObjectKind::Umem,
            1,
            1 << log_max,
            Object::Umem(Box::new(umem)),
        )
        .ok_or(fail(CmdStatus::ExceedLim, syn::UMEM_EXHAUSTED))?;
    encoded(output::<CreateUmemOut>(out)?.set(CreateUmemOut::UMEM_ID, id.into()))?;
    Ok(())
}

/// The umem `u` describes, its MTT list read from `input` after the layout: page size, offset
/// and count in range (BAD_PARAM UMEM_PARAM), the list within the input (BAD_INPUT_LEN), each
/// page aligned and mapped ([`super::queue::buffer`]'s checks).
fn checked_umem(
    env: &mut Env<'_>,
    u: &mlx5_ifc::View<'_, UmemLayout>,
    input: &[u8],
) -> Result<Umem, Failure> {
    let log_page = u.get(UmemLayout::LOG_PAGE_SIZE);
    let page = 4096u64 << log_page.min(18);
    let (offset, n) = (
        u.get(UmemLayout::PAGE_OFFSET),
        u.get(UmemLayout::NUM_OF_MTT),
    );
    if log_page > 18 || offset >= page || n == 0 || n > MAX_UMEM_PAGES {
        return Err(bad_param(syn::UMEM_PARAM));
    }
    let at = CreateUmemIn::BYTES;
    let list = input
        .get(at..at + n as usize * 8)
        .ok_or(fail(CmdStatus::BadInputLen, syn::INLEN_BELOW_LAYOUT))?;
    let mut pages = Vec::with_capacity(list.len() / 8);
    for (k, e) in list.chunks_exact(8).enumerate() {
        // Bits 1:0 of an entry are its read and write enables.
        let addr = u64::from_be_bytes(e.try_into().unwrap_or([0; 8])) & !0x3;
        super::queue::page_entry(env, "CREATE_UMEM", k, addr, (page, page))?;
        pages.push(addr);
    }
    Ok(Umem {
        pages: pages.into(),
        page,
        offset,
    })
}

pub(crate) fn destroy_umem(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let id = input::<DestroyUmemIn>(req)?.get32(DestroyUmemIn::UMEM_ID);
    super::queue::changeable(model, ObjectKind::Umem, id, syn::UNKNOWN_UMEM)?;
    if model.objects.refs(ObjectKind::Umem, id) > 0 {
        return Err(fail(CmdStatus::ResBusy, syn::UMEM_IN_USE));
    }
    model.remove(ObjectKind::Umem, id);
    Ok(())
}

/// Where a queue lives: its pages, their size and its offset into the first, as a context's
/// `log_page_size` and `page_offset` (64ths of a page) say them.
pub(crate) struct InUmem {
    pub(crate) pas: Vec<u64>,
    pub(crate) log_page_size: u64,
    pub(crate) page_offset: u64,
}

/// The umem `id` as the command running may use it: registered, and its own context's (or the
/// kernel's command); else BAD_RES UNKNOWN_UMEM.
fn umem(model: &Model, id: u32) -> Result<&Umem, Failure> {
    super::queue::changeable(model, ObjectKind::Umem, id, syn::UNKNOWN_UMEM)?;
    match model.objects.get(ObjectKind::Umem, id) {
        Some(Object::Umem(u)) => Ok(u),
        _ => Err(fail(CmdStatus::BadRes, syn::UNKNOWN_UMEM)),
    }
}

/// A queue's buffer of `bytes`: with `*_umem_valid` (`umem.0`), at byte `umem.2` of umem
/// `umem.1` ([`umem_buffer`]; the queue then holds it, pushed on `holds`); else the PAS list of
/// the command (`pas.1`, for command `pas.0`) with the context's page geometry `geometry`
/// ([`super::queue::buffer`]).
pub(crate) fn buffer(
    model: &Model,
    env: &mut Env<'_>,
    holds: &mut Vec<(ObjectKind, u32)>,
    umem: (u64, u32, u64),
    pas: (&str, &[u8]),
    geometry: (u64, u64),
    bytes: u64,
) -> Result<InUmem, Failure> {
    if umem.0 == 0 {
        return Ok(InUmem {
            pas: super::queue::buffer(env, pas.0, pas.1, geometry.0, geometry.1, bytes)?,
            log_page_size: geometry.0,
            page_offset: geometry.1,
        });
    }
    holds.push((ObjectKind::Umem, umem.1));
    umem_buffer(model, umem.1, umem.2, bytes)
}

/// The `bytes` of a queue at byte `offset` of umem `id` (DevX's `*_umem_valid`): inside the
/// umem, starting on a 64th of one of its pages of at most 2 MiB (what a context can say;
/// BAD_PARAM UMEM_RANGE otherwise).
pub(crate) fn umem_buffer(
    model: &Model,
    id: u32,
    offset: u64,
    bytes: u64,
) -> Result<InUmem, Failure> {
    let u = umem(model, id)?;
    let end = offset.checked_add(bytes);
    if bytes == 0 || end.is_none_or(|e| e > u.len()) {
        return Err(bad_param(syn::UMEM_RANGE));
    }
    let start = u.offset + offset;
    let (page, sixty_fourth) = (u.page, u.page / 64);
    let log_page_size = u64::from(page.trailing_zeros()) - 12;
    if log_page_size > super::queue::MAX_LOG_PAGE_SIZE || (start % page) % sixty_fourth != 0 {
        return Err(bad_param(syn::UMEM_RANGE));
    }
    let (first, last) = (start / page, (start + bytes - 1) / page);
    Ok(InUmem {
        pas: u.pages[first as usize..=last as usize].to_vec(),
        log_page_size,
        page_offset: (start % page) / sixty_fourth,
    })
}

/// The IOVA of a queue's doorbell record of `len` bytes: `addr` itself, or with `dbr_umem_valid`
/// (`umem.0`) byte `addr` of umem `umem.1` ([`umem_dbr`]), which the queue then holds (pushed
/// on `holds`).
pub(crate) fn doorbell(
    model: &Model,
    holds: &mut Vec<(ObjectKind, u32)>,
    umem: (u64, u32),
    addr: u64,
    len: usize,
) -> Result<u64, Failure> {
    if umem.0 == 0 {
        return Ok(addr);
    }
    holds.push((ObjectKind::Umem, umem.1));
    umem_dbr(model, umem.1, addr, len as u64)
}

/// The IOVA of a doorbell record of `len` bytes at byte `offset` of umem `id`: inside the
/// umem and inside one of its pages (BAD_PARAM UMEM_RANGE otherwise).
pub(crate) fn umem_dbr(model: &Model, id: u32, offset: u64, len: u64) -> Result<u64, Failure> {
    let u = umem(model, id)?;
    let first = u.iova(offset);
    let last = offset.checked_add(len - 1).and_then(|o| u.iova(o));
    match (first, last) {
        (Some(a), Some(b)) if b == a + len - 1 => Ok(a),
        _ => Err(bad_param(syn::UMEM_RANGE)),
    }
}
