//! Memory keys: CREATE_MKEY, DESTROY_MKEY, QUERY_MKEY, and the translation the data path uses.
//!
//! CREATE_MKEY checks, in order, each with its own syndrome:
//!
//! 1. `access_mode` (`access_mode_4_2 << 2 | access_mode_1_0`) is PA (0), MTT (1), KLMS (2,
//!    an indirect key: mlx5_ib's memory windows) or KSM (3, fixed-size entities of
//!    `2^log_page_size` bytes, 12 to 30: mlx5_ib's implicit ODP parents) or MEMIC (5, device
//!    memory: `start_addr` a BAR0 offset, the key zero-based; `[start_addr, + len)` inside one
//!    ALLOC_MEMIC allocation, MKEY_LENGTH) or SW_ICM (4, software steering's memory:
//!    `start_addr` an ICM address, the key zero-based; `[start_addr, + len)` inside one live SW
//!    ICM object, MKEY_LENGTH) (BAD_PARAM MKEY_ACCESS_MODE, MKEY_PAGE_SIZE);
//! 2. `pd` allocated (BAD_RES UNKNOWN_PD);
//! 3. the range: MTT with `length64` set, or `start_addr + len` past 2^64 (BAD_PARAM
//!    MKEY_LENGTH). PA with `length64` covers the whole IOVA space;
//! 4. MTT: `log_page_size` — the **absolute** log2 of the page size, unlike the queue contexts'
//!    sizes relative to 4 KiB (Linux's mlx5_ib MR cache and vfio/mlx5 write `PAGE_SHIFT`, 12
//!    for 4 KiB pages; rdma-core's mlx5_vfio writes the page shift) — is 12 (4 KiB) to 30
//!    (1 GiB) (BAD_PARAM MKEY_PAGE_SIZE); the entries the range needs —
//!    `ceil((start_addr % page + len) / page)` — fit `translations_octword_size` × 2 (BAD_PARAM
//!    MKEY_MTT_SIZE) and `input_length`, which must also hold the
//!    `translations_octword_actual_size` octwords announced — an odd page count padded to an
//!    even one (BAD_INPUT_LEN INLEN_MKEY_MTT) — except a `free`, `umr_en` key with
//!    `translations_octword_actual_size` 0, whose entries a UMR WQE will write (mlx5_ib's
//!    registration without its MR cache, as on a VF); each entry, its low 12
//!    bits (Linux's read/write flag bits) masked, is aligned to the page (MKEY_MTT_UNALIGNED)
//!    and the part of its page the range uses lies inside one DMA mapping (MKEY_MTT_UNMAPPED
//!    and a [`DmaFaultKind::MttNotMapped`] record);
//! 5. fewer than `2^log_max_mkey - 1` mkeys live, counting the reserved lkey and the null mkey
//!    (EXCEED_LIM MKEY_EXHAUSTED).
//!
//! Mkey indices come from 3 (index 1 is the reserved lkey 0x100, 2 the null mkey 0x200); the
//! key the data path uses is `mkey_index << 8 | mkey_7_0`. An mkey holds its PD. `free` = 1
//! creates the mkey unusable (every access through it fails) until a UMR WQE enables it
//! ([`crate::engine::umr`]). A KLM key's entries (`translations_octword_actual_size` of them,
//! 16 bytes each) follow the context, at most `translations_octword_size`. QUERY_MKEY returns the context as created (`free` set once a peer
//! invalidated the key) and the first four MTT entries (flag bits cleared).
//!
//! The keys themselves, their translation and remote invalidation are the model's
//! ([`crate::model::mkey`]).

use mlx5_ifc::consts::mkey_access_mode;
use mlx5_ifc::prm::caps::CmdHcaCap;
use mlx5_ifc::prm::mr::{
    CreateMkeyIn, CreateMkeyOut, DestroyMkeyIn, Mkc, QueryMkeyIn, QueryMkeyOut,
};
use mlx5_ifc::{Be64, CmdStatus, View};

use super::cmd::{bad_param, encoded, fail, input, output, CmdResult, Env, Failure, Req};
use super::queue;
use crate::fault::{DmaFault, DmaFaultKind};
use crate::model::mkey::{access, Klm, Ksm, Mkey, MTT_FLAGS, MTT_PRESENT, NULL_MKEY};
use crate::model::objects::{Object, ObjectKind};
use crate::model::Model;
use crate::syndrome as syn;

/// The first mkey index CREATE_MKEY hands out: above 4, so that no key of variant 0 reads
/// 0x400 — the `op` of a UMR repeat block header, which stands where a KLM entry has its key
/// (`engine/umr.rs: repeat_block`).
const FIRST_MKEY_INDEX: u32 = 5;
/// The smallest MTT `log_page_size` (absolute: 4 KiB pages).
const MIN_LOG_MTT_PAGE: u64 = 12;
/// The largest MTT `log_page_size` (absolute: 1 GiB pages).
const MAX_LOG_MTT_PAGE: u64 = 30;

fn read_be64(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[..8]);
    Be64::from_bytes(w).get()
}

/// Checks the MTT list of a new mkey: `(page shift, page addresses)`.
fn mtt(
    env: &mut Env<'_>,
    req: &Req<'_>,
    c: &View<'_, Mkc>,
    start: u64,
    len: u64,
) -> Result<(u32, Vec<u64>), Failure> {
    let log_page = c.get(Mkc::LOG_PAGE_SIZE);
    if !(MIN_LOG_MTT_PAGE..=MAX_LOG_MTT_PAGE).contains(&log_page) {
        return Err(bad_param(syn::MKEY_PAGE_SIZE));
    }
    let shift = log_page as u32;
    let page = 1u64 << shift;
    let span = (start & (page - 1)) + len;
    let n = span.div_ceil(page);
    if c.get(Mkc::TRANSLATIONS_OCTWORD_SIZE).saturating_mul(2) < n {
        return Err(bad_param(syn::MKEY_MTT_SIZE));
    }
    // A free key UMR will enable may come without its list (`translations_octword_actual_size`
    // 0): mlx5_ib registers every user MR so when its MR cache is off (on a VF: `reg_create`
    // with no page list, then a UMR WQE with the translations). Its entries are absent until
    // then (the UMR grows the table, within the simulator's translation budget); the key is
    // unusable anyway while `free`.
    let actual = input::<CreateMkeyIn>(req)?.get(CreateMkeyIn::TRANSLATIONS_OCTWORD_ACTUAL_SIZE);
    if actual == 0 && c.get(Mkc::FREE) == 1 && c.get(Mkc::UMR_EN) == 1 {
        return Ok((shift, Vec::new()));
    }
    let off = CreateMkeyIn::KLM_PAS_MTT.offset();
    let need = usize::try_from(n)
        .ok()
        .and_then(|n| n.checked_mul(8))
        .and_then(|b| b.checked_add(off));
    let list = match need {
        Some(end) if req.input.len() >= end => &req.input[off..end],
        _ => return Err(fail(CmdStatus::BadInputLen, syn::INLEN_MKEY_MTT)),
    };
    // The input carries `translations_octword_actual_size` whole octwords of MTT (two entries
    // each: an odd page count is padded to an even one, as Linux and rdma-core do); an input
    // shorter than the octwords it announces is refused.
    let announced = usize::try_from(actual)
        .ok()
        .and_then(|o| o.checked_mul(16))
        .and_then(|b| b.checked_add(off));
    if announced.is_none_or(|end| req.input.len() < end) {
        return Err(fail(CmdStatus::BadInputLen, syn::INLEN_MKEY_MTT));
    }
    // `pg_access`: the list's read/write bits say which pages are present (on-demand paging);
    // without it every page of the list is present.
    let pg_access = input::<CreateMkeyIn>(req)?.get(CreateMkeyIn::PG_ACCESS) == 1;
    let mut pages = Vec::with_capacity(list.len() / 8);
    let first = start & !(page - 1);
    for (k, e) in list.chunks_exact(8).enumerate() {
        let raw = read_be64(e);
        let addr = raw & !MTT_FLAGS;
        if addr % page != 0 {
            return Err(bad_param(syn::MKEY_MTT_UNALIGNED));
        }
        let present = if pg_access {
            raw & MTT_PRESENT
        } else {
            MTT_PRESENT
        };
        if present == 0 {
            pages.push(addr);
            continue;
        }
        let vpage = first + (k as u64) * page;
        let lo = vpage.max(start) - vpage;
        let hi = (vpage + page).min(start + len) - vpage;
        let used = usize::try_from(hi - lo).unwrap_or(usize::MAX);
        if !env.iommu.is_mapped(addr + lo, used) {
            log::warn!("mlx5-sim: CREATE_MKEY: MTT entry {k} ({addr:#x}) not mapped");
            env.dma_faults.push(DmaFault {
                iova: addr + lo,
                len: used,
                kind: DmaFaultKind::MttNotMapped,
                what: format!("CREATE_MKEY: MTT entry {k} is not a mapped {page}-byte page"),
            });
            return Err(bad_param(syn::MKEY_MTT_UNMAPPED));
        }
        pages.push(addr | present);
    }
    Ok((shift, pages))
}

/// The KLM list of a new indirect mkey: `translations_octword_actual_size` entries of 16 bytes
/// (one octword each) after the context, at most `translations_octword_size`
/// (BAD_PARAM MKEY_MTT_SIZE); an input shorter than the list is refused (INLEN_MKEY_MTT). Their
/// keys are checked when the key is used (a window is typically created free, without any).
fn klms(req: &Req<'_>, c: &View<'_, Mkc>) -> Result<Vec<Klm>, Failure> {
    let actual = input::<CreateMkeyIn>(req)?.get(CreateMkeyIn::TRANSLATIONS_OCTWORD_ACTUAL_SIZE);
    if actual > c.get(Mkc::TRANSLATIONS_OCTWORD_SIZE) {
        return Err(bad_param(syn::MKEY_MTT_SIZE));
    }
    let off = CreateMkeyIn::KLM_PAS_MTT.offset();
    let end = usize::try_from(actual)
        .ok()
        .and_then(|n| n.checked_mul(Klm::BYTES))
        .and_then(|b| b.checked_add(off));
    let list = match end {
        Some(end) if req.input.len() >= end => &req.input[off..end],
        _ => return Err(fail(CmdStatus::BadInputLen, syn::INLEN_MKEY_MTT)),
    };
    Ok(list
        .chunks_exact(Klm::BYTES)
        .filter_map(Klm::parse)
        .collect())
}

/// The table of a new KSM key: entities of `2^log_page_size` bytes (12 to 30), entries as KLMs
/// are laid out (their byte count unused), those naming the null mkey absent.
fn ksm(req: &Req<'_>, c: &View<'_, Mkc>) -> Result<Ksm, Failure> {
    let log = c.get(Mkc::LOG_PAGE_SIZE);
    if !(MIN_LOG_MTT_PAGE..=MAX_LOG_MTT_PAGE).contains(&log) {
        return Err(bad_param(syn::MKEY_PAGE_SIZE));
    }
    let mut t = Ksm {
        shift: log as u32,
        ..Ksm::default()
    };
    for (n, e) in klms(req, c)?.into_iter().enumerate() {
        if e.key != NULL_MKEY {
            t.entries.insert(n as u64, (e.key, e.addr));
        }
    }
    Ok(t)
}

pub(crate) fn create_mkey(
    model: &mut Model,
    env: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let i = input::<CreateMkeyIn>(req)?;
    let c = i.nested(CreateMkeyIn::MEMORY_KEY_MKEY_ENTRY);
    let mode = (c.get(Mkc::ACCESS_MODE_4_2) << 2) | c.get(Mkc::ACCESS_MODE_1_0);
    if mode > mkey_access_mode::MEMIC {
        return Err(bad_param(syn::MKEY_ACCESS_MODE));
    }
    let pd = c.get32(Mkc::PD);
    queue::require(model, ObjectKind::Pd, pd, syn::UNKNOWN_PD)?;
    let (start, len, whole) = (
        c.get(Mkc::START_ADDR),
        c.get(Mkc::LEN),
        c.get(Mkc::LENGTH64) == 1,
    );
    if (whole && mode == mkey_access_mode::MTT) || (!whole && start.checked_add(len).is_none()) {
        return Err(bad_param(syn::MKEY_LENGTH));
    }
    let mtt = if mode == mkey_access_mode::MTT {
        Some(mtt(env, req, &c, start, len)?)
    } else {
        None
    };
    let klm = if mode == mkey_access_mode::KLMS {
        Some(klms(req, &c)?)
    } else {
        None
    };
    let ksm = if mode == mkey_access_mode::KSM {
        Some(ksm(req, &c)?)
    } else {
        None
    };
    // Device memory: inside one allocation (a key of no bytes, at one), never the whole space.
    let memic = mode == mkey_access_mode::MEMIC;
    if memic && (whole || !model.memic.allocated(start, len.max(1))) {
        return Err(bad_param(syn::MKEY_LENGTH));
    }
    // SW ICM likewise: inside one live SW ICM object.
    let icm = mode == mkey_access_mode::SW_ICM;
    if icm && (whole || model.icm.object_at(start, len.max(1)).is_none()) {
        return Err(bad_param(syn::MKEY_LENGTH));
    }
    let log_max = queue::log_max(model, CmdHcaCap::LOG_MAX_MKEY);
    // The reserved lkey and the null mkey count against the limit.
    if !queue::below_limit(model.objects.count(ObjectKind::Mkey) + 2, log_max) {
        return Err(fail(CmdStatus::ExceedLim, syn::MKEY_EXHAUSTED));
    }
    let bit = |f, a| if c.get(f) == 1 { a } else { 0 };
    let key = Mkey {
        ctx: queue::image(&c)?,
        variant: c.get(Mkc::MKEY_7_0) as u8,
        pd,
        start,
        len,
        whole,
        access: bit(Mkc::LR, access::LOCAL_READ)
            | bit(Mkc::LW, access::LOCAL_WRITE)
            | bit(Mkc::RR, access::REMOTE_READ)
            | bit(Mkc::RW, access::REMOTE_WRITE)
            | bit(Mkc::A, access::ATOMIC),
        mtt,
        klm,
        ksm,
        memic,
        icm,
        qpn: c.get32(Mkc::QPN),
        free: c.get(Mkc::FREE) == 1,
        rinval: c.get(Mkc::EN_RINVAL) == 1,
    };
    // As many keys as from index 3 (the two below the first are never handed out), within
    // the 24 bits of an index.
    let end = (queue::span(log_max) + FIRST_MKEY_INDEX - 3).min(1 << 24);
    let index = model
        .objects
        .alloc(
            ObjectKind::Mkey,
            FIRST_MKEY_INDEX,
            end,
            Object::Mkey(Box::new(key)),
        )
        .ok_or(fail(CmdStatus::ExceedLim, syn::MKEY_EXHAUSTED))?;
    model.objects.hold(&[(ObjectKind::Pd, pd)]);
    encoded(output::<CreateMkeyOut>(out)?.set(CreateMkeyOut::MKEY_INDEX, index.into()))?;
    Ok(())
}

/// Whether a live SW_ICM key reaches ICM `[start, start + size)`.
pub(crate) fn sw_icm_in_use(model: &Model, start: u64, size: u64) -> bool {
    reached(model, |m| m.icm, start, size)
}

/// Whether a live MEMIC key reaches device memory `[start, start + size)`.
pub(crate) fn memic_in_use(model: &Model, start: u64, size: u64) -> bool {
    reached(model, |m| m.memic, start, size)
}

/// Whether a live key of the kind `of` picks reaches `[start, start + size)` of its memory.
fn reached(model: &Model, of: fn(&Mkey) -> bool, start: u64, size: u64) -> bool {
    model.objects.mkeys().any(|m| {
        of(m)
            && m.start < start.saturating_add(size)
            && start < m.start.saturating_add(m.len.max(1))
    })
}

pub(crate) fn destroy_mkey(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let index = input::<DestroyMkeyIn>(req)?.get32(DestroyMkeyIn::MKEY_INDEX);
    match model.remove(ObjectKind::Mkey, index) {
        Some(Object::Mkey(m)) => {
            model.objects.release(&[(ObjectKind::Pd, m.pd)]);
            Ok(())
        }
        _ => Err(fail(CmdStatus::BadRes, syn::UNKNOWN_MKEY)),
    }
}

pub(crate) fn query_mkey(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let index = input::<QueryMkeyIn>(req)?.get32(QueryMkeyIn::MKEY_INDEX);
    queue::changeable(model, ObjectKind::Mkey, index, syn::UNKNOWN_MKEY)?;
    let m = model
        .objects
        .mkey(index)
        .ok_or(fail(CmdStatus::BadRes, syn::UNKNOWN_MKEY))?;
    let mut o = output::<QueryMkeyOut>(out)?;
    queue::put(
        o.nested_mut(QueryMkeyOut::MEMORY_KEY_MKEY_ENTRY).as_bytes(),
        &m.ctx,
    );
    let mut pages = [0u64; 4];
    if let Some((_, p)) = &m.mtt {
        for (d, s) in pages.iter_mut().zip(p.iter()) {
            *d = s & !MTT_FLAGS;
        }
    }
    queue::put_pas(o.bytes_mut(QueryMkeyOut::BSF0_KLM0_PAS_MTT0_1), &pages);
    queue::put_pas(o.bytes_mut(QueryMkeyOut::BSF1_KLM1_PAS_MTT2_3), &pages[2..]);
    Ok(())
}
