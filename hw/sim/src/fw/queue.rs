//! What every queue object (EQ, CQ, SRQ, RMP, QP) shares: its buffer, its doorbell record, the
//! objects it references, the count limit of its kind, and how it is destroyed and queried.
//!
//! Buffer rules, checked in this order, each with its own syndrome:
//!
//! * `log_page_size` ≤ 31 (the 5-bit field): a buffer page is `4 KiB << log_page_size`
//!   (QUEUE_PAGE_SIZE); `page_offset` below 64, in 64ths of a page (QUEUE_PAGE_OFFSET);
//! * the queue needs `ceil(queue_bytes / page)` PAS entries (none for a queue of 0 bytes);
//!   `input_length` must cover them (BAD_INPUT_LEN, INLEN_QUEUE_PAS); entries beyond are ignored;
//! * each needed entry is nonzero (QUEUE_PAS_MISSING), aligned to the page size
//!   (QUEUE_PAS_UNALIGNED), and the part of its page the queue uses — the whole page except,
//!   for the last one, only up to the end of the queue — lies inside one live DMA mapping
//!   (QUEUE_PAS_UNMAPPED, and a [`DmaFaultKind::QueueNotMapped`] record).
//!
//! Doorbell records: `dbr_addr` 8-byte aligned (DBR_UNALIGNED) and the record (8 bytes for CQs
//! and QPs, 4 for SRQs and RMPs) mapped (DBR_UNMAPPED + a `QueueNotMapped` record).
//!
//! Count limits: a create is refused with EXCEED_LIM when the live objects of the kind would
//! reach `2^log_max_*` (CUR capability), i.e. at most `2^log_max_* - 1` live — the rule ALLOC_PD
//! follows.

use mlx5_ifc::prm::caps::CmdHcaCap;
use mlx5_ifc::{Be64, CmdStatus, Field, Layout, View};

use super::cmd::{bad_param, fail, CmdResult, Env, Failure};
use crate::fault::{DmaFault, DmaFaultKind};
use crate::model::objects::{Object, ObjectKind, Queue};
use crate::model::Model;
use crate::syndrome as syn;

/// The largest queue `log_page_size`: what the contexts' 5-bit fields hold. Linux takes the
/// largest page a user buffer's DMA addresses allow (`mlx5_umem_find_best_quantized_pgoff` over
/// the field's width): 4 MiB from two adjacent 2 MiB huge pages, for one (rdma-core's QPs in
/// huge pages, `MLX_QP_ALLOC_TYPE=HUGE`). The simulator capped it at 9 (2 MiB) once, and the
/// guest's XRC QPs failed whenever their huge pages happened to lie side by side.
pub(crate) const MAX_LOG_PAGE_SIZE: u64 = 31;
/// The device page size queue pages are counted in.
const BASE_PAGE: u64 = 4096;

/// Checks a queue buffer of `bytes` described by `log_page_size`, `page_offset` and the PAS tail
/// `pas` (the input from the first PAS entry to its end); returns the page addresses it needs.
pub(crate) fn buffer(
    env: &mut Env<'_>,
    what: &str,
    pas: &[u8],
    log_page_size: u64,
    page_offset: u64,
    bytes: u64,
) -> Result<Vec<u64>, Failure> {
    if log_page_size > MAX_LOG_PAGE_SIZE {
        return Err(bad_param(syn::QUEUE_PAGE_SIZE));
    }
    // `page_offset` counts 64ths of a page (the field is 5 or 6 bits wide): the queue starts
    // that far into its first page, and its pages cover the offset and the queue.
    if page_offset >= 64 {
        return Err(bad_param(syn::QUEUE_PAGE_OFFSET));
    }
    let page = BASE_PAGE << log_page_size;
    let start = crate::memory::queue::queue_start(page, page_offset);
    let bytes = bytes + start;
    let n = usize::try_from(bytes.div_ceil(page)).unwrap_or(usize::MAX);
    if n.checked_mul(8).is_none_or(|need| pas.len() < need) {
        log::info!(
            "mlx5-sim: {what}: {} bytes of PAS, the queue needs {n} entries",
            pas.len()
        );
        return Err(fail(CmdStatus::BadInputLen, syn::INLEN_QUEUE_PAS));
    }
    let mut pages = Vec::with_capacity(n);
    for (k, entry) in pas.chunks_exact(8).take(n).enumerate() {
        let mut b = [0u8; 8];
        b.copy_from_slice(entry);
        let addr = Be64::from_bytes(b).get();
        let used = page.min(bytes - k as u64 * page);
        page_entry(env, what, k, addr, (page, used))?;
        pages.push(addr);
    }
    Ok(pages)
}

/// Checks entry `k` of a page list, `addr`: not 0 (QUEUE_PAS_MISSING), aligned to `page`
/// (QUEUE_PAS_UNALIGNED), its first `used` bytes mapped (QUEUE_PAS_UNMAPPED, a DMA fault
/// recorded).
pub(crate) fn page_entry(
    env: &mut Env<'_>,
    what: &str,
    k: usize,
    addr: u64,
    (page, used): (u64, u64),
) -> CmdResult {
    if addr == 0 {
        return Err(bad_param(syn::QUEUE_PAS_MISSING));
    }
    if addr % page != 0 {
        return Err(bad_param(syn::QUEUE_PAS_UNALIGNED));
    }
    let len = usize::try_from(used).unwrap_or(usize::MAX);
    if !env.iommu.is_mapped(addr, len) {
        log::warn!("mlx5-sim: {what}: PAS entry {k} ({addr:#x}, {used} bytes) not mapped");
        env.dma_faults.push(DmaFault {
            iova: addr,
            len,
            kind: DmaFaultKind::QueueNotMapped,
            what: format!("{what}: PAS entry {k} is not a mapped {page}-byte queue page"),
        });
        return Err(bad_param(syn::QUEUE_PAS_UNMAPPED));
    }
    Ok(())
}

/// Checks a doorbell record of `len` bytes at `addr`.
pub(crate) fn doorbell_record(env: &mut Env<'_>, what: &str, addr: u64, len: usize) -> CmdResult {
    if addr % 8 != 0 {
        return Err(bad_param(syn::DBR_UNALIGNED));
    }
    if !env.iommu.is_mapped(addr, len) {
        log::warn!("mlx5-sim: {what}: doorbell record at {addr:#x} not mapped");
        env.dma_faults.push(DmaFault {
            iova: addr,
            len,
            kind: DmaFaultKind::QueueNotMapped,
            what: format!("{what}: the doorbell record is not mapped"),
        });
        return Err(bad_param(syn::DBR_UNMAPPED));
    }
    Ok(())
}

/// `1 << log`, for handle ranges (capped at 24 bits).
pub(crate) fn span(log: u64) -> u32 {
    1u32 << log.min(24)
}

/// A CUR capability `log_max_*` value, capped at 24.
pub(crate) fn log_max(model: &Model, f: Field<CmdHcaCap>) -> u64 {
    model.cur(f).min(24)
}

/// Whether one more object fits when `live` exist and the limit is `2^log_max` (exclusive).
pub(crate) fn below_limit(live: usize, log_max: u64) -> bool {
    (live as u64).saturating_add(1) < (1u64 << log_max.min(63))
}

/// BAD_RES with `syndrome` unless `id` is a live object of `kind`.
pub(crate) fn require(model: &Model, kind: ObjectKind, id: u32, syndrome: u32) -> CmdResult {
    if model.objects.contains(kind, id) {
        Ok(())
    } else {
        Err(fail(CmdStatus::BadRes, syndrome))
    }
}

/// The first `L::BYTES` bytes of a view: a context image.
pub(crate) fn image<L: Layout>(v: &View<'_, L>) -> Result<Vec<u8>, Failure> {
    v.as_bytes()
        .get(..L::BYTES)
        .map(<[u8]>::to_vec)
        .ok_or(fail(CmdStatus::BadInputLen, syn::INLEN_BELOW_LAYOUT))
}

/// A new queue object holding references on `holds`.
pub(crate) fn new_queue(ctx: Vec<u8>, pas: Vec<u64>, uar: Option<u32>) -> Queue {
    let mut holds = Vec::new();
    if let Some(uar) = uar {
        holds.push((ObjectKind::Uar, uar));
    }
    Queue {
        ctx,
        pas: pas.into(),
        uar,
        armed: false,
        event_bitmask: [0; 32],
        holds,
    }
}

/// Inserts `q` with a handle in `first..end` (not live in `shared` either) and takes its
/// references; EXCEED_LIM with `exhausted` when the range is full.
pub(crate) fn insert(
    model: &mut Model,
    kind: ObjectKind,
    shared: &[ObjectKind],
    range: (u32, u32),
    q: Queue,
    exhausted: u32,
) -> Result<u32, Failure> {
    let holds = q.holds.clone();
    let id = model
        .objects
        .alloc_shared(kind, shared, range.0, range.1, Object::Queue(Box::new(q)))
        .ok_or(fail(CmdStatus::ExceedLim, exhausted))?;
    model.objects.hold(&holds);
    Ok(id)
}

/// [`insert`] under the count limit `2^log_max` (exclusive; capped at 24), handles in
/// `1..2^log_max`: EXCEED_LIM with `exhausted` when the kind is full.
pub(crate) fn insert_limited(
    model: &mut Model,
    kind: ObjectKind,
    log_max: u64,
    q: Queue,
    exhausted: u32,
) -> Result<u32, Failure> {
    insert_limited_shared(model, kind, &[], log_max, q, exhausted)
}

/// [`insert_limited`] with a handle not live in `shared` either (a number space shared with
/// other kinds).
pub(crate) fn insert_limited_shared(
    model: &mut Model,
    kind: ObjectKind,
    shared: &[ObjectKind],
    log_max: u64,
    q: Queue,
    exhausted: u32,
) -> Result<u32, Failure> {
    let log_max = log_max.min(24);
    if !below_limit(model.objects.count(kind), log_max) {
        return Err(fail(CmdStatus::ExceedLim, exhausted));
    }
    insert(model, kind, shared, (1, span(log_max)), q, exhausted)
}

/// Replaces what `id` of `kind` holds: the new references are taken, the old ones released.
pub(crate) fn rehold(model: &mut Model, kind: ObjectKind, id: u32, holds: Vec<(ObjectKind, u32)>) {
    if let Some(q) = model.objects.queue_mut(kind, id) {
        let old = std::mem::replace(&mut q.holds, holds.clone());
        model.objects.release(&old);
        model.objects.hold(&holds);
    }
}

/// A big-endian field of up to 8 bytes (a modify command's bitmask or field select) as an
/// integer.
pub(crate) fn be_uint(b: &[u8]) -> u64 {
    b.iter().fold(0, |m, &x| (m << 8) | u64::from(x))
}

/// Destroys `id` of `kind`: BAD_RES `unknown` if it is not live, RES_BUSY `busy` while another
/// object uses it; releases what it holds.
pub(crate) fn destroy(
    model: &mut Model,
    kind: ObjectKind,
    id: u32,
    unknown: u32,
    busy: u32,
) -> CmdResult {
    changeable(model, kind, id, unknown)?;
    if model.objects.refs(kind, id) > 0 {
        return Err(fail(CmdStatus::ResBusy, busy));
    }
    if let Some(Object::Queue(q)) = model.remove(kind, id) {
        model.objects.release(&q.holds);
    }
    Ok(())
}

/// Object `id` of `kind` is live and the command running may change or destroy it (its uid
/// owns it, or it is the kernel's command: [`crate::model::objects::ObjectTable::may_change`]);
/// else BAD_RES `unknown` — to a user context, another's object is not there.
pub(crate) fn changeable(model: &Model, kind: ObjectKind, id: u32, unknown: u32) -> CmdResult {
    require(model, kind, id, unknown)?;
    if !model.objects.may_change(kind, id) {
        return Err(fail(CmdStatus::BadRes, unknown));
    }
    Ok(())
}

/// The live queue `id` of `kind` as a query sees it: the kernel's command (uid 0) sees any, a
/// user context's only its own ([`changeable`]'s rule; Linux queries user objects with uid 0,
/// a DevX context its own objects with its uid); else BAD_RES `unknown`.
pub(crate) fn find_visible(
    model: &Model,
    kind: ObjectKind,
    id: u32,
    unknown: u32,
) -> Result<&Queue, Failure> {
    changeable(model, kind, id, unknown)?;
    find(model, kind, id, unknown)
}

/// The live queue `id` of `kind`, or BAD_RES `unknown`.
pub(crate) fn find(
    model: &Model,
    kind: ObjectKind,
    id: u32,
    unknown: u32,
) -> Result<&Queue, Failure> {
    model
        .objects
        .queue(kind, id)
        .ok_or(fail(CmdStatus::BadRes, unknown))
}

/// Copies `src` into the start of `dst` (as much as fits).
pub(crate) fn put(dst: &mut [u8], src: &[u8]) {
    let n = dst.len().min(src.len());
    dst[..n].copy_from_slice(&src[..n]);
}

/// Writes the PAS list into `dst` as 64-bit big-endian entries, as many as fit.
pub(crate) fn put_pas(dst: &mut [u8], pas: &[u64]) {
    for (slot, addr) in dst.chunks_exact_mut(8).zip(pas) {
        slot.copy_from_slice(&Be64::new(*addr).to_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_exclusive() {
        assert!(below_limit(0, 1));
        assert!(!below_limit(1, 1));
        assert!(below_limit(14, 4) && !below_limit(15, 4));
        assert_eq!(span(30), 1 << 24);
    }
}
