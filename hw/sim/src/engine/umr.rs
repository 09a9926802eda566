//! UMR (user-mode memory registration) send WQEs: a QP of type REG_UMR (or RC, UC) changes a
//! memory key from its send queue — enables it with its translations, revokes it (free), or
//! changes its PD and access — without a command. Linux's mlx5_ib registers user memory this
//! way on the keys of its MR cache (created free, `umr_en`, by CREATE_MKEY); rdma-core binds
//! and invalidates memory windows this way (`set_bind_wr` in its mlx5 provider: a KLM entry
//! naming the MR inline, the window's new key byte, its access, and for a type 2 window the
//! QP it is bound to).
//!
//! The WQE (opcode 0x25): the control segment's `imm` holds the target key (found by its index,
//! `imm >> 8`: a fast registration names the key's *new* variant); a UMR control segment (48
//! bytes: `flags`, `xlt_octowords`, `xlt_offset`, `mkey_mask`, `xlt_offset_47_16`); an mkey
//! segment (the 64-byte `mkc` layout); then the translation entries — inline (`flags` bit 7)
//! right after the mkey segment, or behind a data segment (a gather through its lkey; the UMR
//! QP has no PD, so the lkey's own PD is taken).
//!
//! The device checks, each failure an error CQE and the QP in ERR (later WQEs flush):
//! * the target mkey exists and was created with `umr_en` (LOCAL_PROT_ERR);
//! * `flags` bits 6:5 — 1: the key must be free (`CHECK_NOT_FREE`, what an enable sends),
//!   2: it must not be (`CHECK_FREE`) (LOCAL_PROT_ERR: the syndrome firmware gives is not
//!   documented in any source this project has; Linux handles every non-flush syndrome alike);
//! * `flags` bit 3 (CHECK_QPN): the key must be bound to the QP executing the WQE, or to no
//!   QP (`qpn` 0xffffff: a memory key, which rdma-core's local invalidation checks this way)
//!   (LOCAL_PROT_ERR);
//! * translations only into an MTT key — entries of 8 bytes at byte offset `xlt_offset × 16`
//!   (with `flags` bit 4; else 0), within the key's table rounded up to 64 bytes: Linux writes
//!   whole 64-byte chunks, past a `translations_octword_size` that is not a multiple of 4 — or
//!   a KLM key (16-byte entries: byte count, key, address; they replace the list from the
//!   offset on), or a KSM key (the same 16 bytes, one entity each, within
//!   `translations_octword_size`; the null mkey's entries are absent) (LOCAL_LENGTH_ERR);
//! * a new `log_page_size` 12..=30, a new PD that exists (LOCAL_PROT_ERR);
//! * the simulator's own bound: the device's keys together hold at most
//!   [`TRANSLATION_BUDGET`] translation entries — a UMR that would make it hold more (a guest
//!   placing entries far into a huge table) fails (LOCAL_LENGTH_ERR) instead of exhausting the
//!   host.
//!
//! `mkey_mask` selects the fields the mkey segment changes: LEN (with `length64`), PAGE_SIZE,
//! START_ADDR, PD, EN_RINVAL, KEY (`mkey_7_0`), QPN (the QP a window is bound to), LR, LW,
//! RR, RW, A and FREE; the others
//! (fence, relaxed ordering, BSF) change nothing this model keeps. The key's context image
//! follows, so QUERY_MKEY shows the result. An MTT entry's bits 1:0 (read, write) say whether
//! its page is present (on-demand paging: a zapped or not yet faulted page has neither; Linux
//! sets both on every page of a pinned MR); its other low bits are ignored.

use mlx5_ifc::prm::mr::Mkc;
use mlx5_ifc::wqe::{CtrlSeg, DataSeg};
use mlx5_ifc::{Layout, View, ViewMut};

use super::dma;
use super::wqe::{LocalError, Piece};
use crate::model::mkey::{access, Klm, Mkey, MTT_FLAGS, MTT_PRESENT, NO_QPN, NULL_MKEY};
use crate::model::objects::{ObjectKind, TRANSLATION_BUDGET};
use crate::model::runtime::Sge;
use crate::model::Hw;

/// Bytes of the UMR control segment and of the mkey segment.
const UMR_CTRL_BYTES: usize = 48;
const MKEY_SEG_BYTES: usize = 64;
/// `flags` bits.
const TRANSLATION_OFFSET_EN: u8 = 0x10;
const CHECK_MASK: u8 = 0x60;
const CHECK_NOT_FREE: u8 = 0x20;
const CHECK_FREE: u8 = 0x40;
/// The key must be bound to the QP executing the WQE (rdma-core's local invalidation of a
/// type 2 window).
const CHECK_QPN: u8 = 0x08;
const INLINE: u8 = 0x80;
/// `mkey_mask` bits.
mod mask {
    pub(super) const LEN: u64 = 1 << 0;
    pub(super) const PAGE_SIZE: u64 = 1 << 1;
    pub(super) const START_ADDR: u64 = 1 << 6;
    pub(super) const PD: u64 = 1 << 7;
    pub(super) const EN_RINVAL: u64 = 1 << 8;
    pub(super) const KEY: u64 = 1 << 13;
    pub(super) const QPN: u64 = 1 << 14;
    pub(super) const LR: u64 = 1 << 17;
    pub(super) const LW: u64 = 1 << 18;
    pub(super) const RR: u64 = 1 << 19;
    pub(super) const RW: u64 = 1 << 20;
    pub(super) const A: u64 = 1 << 21;
    pub(super) const FREE: u64 = 1 << 29;
}

fn be16(b: &[u8], at: usize) -> u64 {
    u64::from(u16::from_be_bytes([b[at], b[at + 1]]))
}

/// Executes the UMR WQE `w` (its `DS × 16` bytes).
pub(crate) fn execute(hw: &mut Hw<'_>, w: &[u8]) -> Result<(), LocalError> {
    let c = View::<CtrlSeg>::new(w).map_err(|_| LocalError::Length)?;
    let index = c.get32(CtrlSeg::IMM) >> 8;
    let u = w
        .get(CtrlSeg::BYTES..CtrlSeg::BYTES + UMR_CTRL_BYTES)
        .ok_or(LocalError::Length)?;
    let flags = u[0];
    let octowords = be16(u, 4) as usize;
    let offset = if flags & TRANSLATION_OFFSET_EN != 0 {
        (be16(u, 6) | u64::from(u32::from_be_bytes([u[16], u[17], u[18], u[19]])) << 16) * 16
    } else {
        0
    };
    let mkey_mask = u64::from_be_bytes(u[8..16].try_into().map_err(|_| LocalError::Length)?);
    let seg_at = CtrlSeg::BYTES + UMR_CTRL_BYTES;
    let seg = w
        .get(seg_at..seg_at + MKEY_SEG_BYTES)
        .ok_or(LocalError::Length)?;
    let s = View::<Mkc>::new(seg).map_err(|_| LocalError::Length)?;

    // The target and its state checks.
    let m = hw.model.objects.mkey(index).ok_or(LocalError::Protection)?;
    let umr_en = View::<Mkc>::new(&m.ctx).is_ok_and(|v| v.get(Mkc::UMR_EN) == 1);
    let check = flags & CHECK_MASK;
    let own_qpn = c.get32(CtrlSeg::QPN);
    // CHECK_QPN passes for a key bound to this QP and for one bound to none (qpn 0xffffff):
    // rdma-core's local invalidation is a UMR with CHECK_QPN whatever the key (`set_bind_wr`
    // for a type 2 window of length 0), and its mkey tests invalidate mlx5dv mkeys, which are
    // bound to no QP, that way on real cards.
    let qpn_refused = flags & CHECK_QPN != 0 && m.qpn != own_qpn && m.qpn != NO_QPN;
    if !umr_en
        || (check == CHECK_NOT_FREE && !m.free)
        || (check == CHECK_FREE && m.free)
        || qpn_refused
    {
        log::info!(
            "mlx5-sim: UMR on mkey {index:#x}: umr_en {umr_en}, free {}, check {check:#x}, bound to QP {:#x} (the WQE's QP {own_qpn:#x})",
            m.free,
            m.qpn
        );
        return Err(LocalError::Protection);
    }

    // The translation entries: their bytes.
    let xlt = if octowords == 0 {
        Vec::new()
    } else {
        let bytes = octowords * 16;
        if flags & INLINE != 0 {
            let at = seg_at + MKEY_SEG_BYTES;
            w.get(at..at + bytes).ok_or(LocalError::Length)?.to_vec()
        } else {
            let at = seg_at + MKEY_SEG_BYTES;
            let d = View::<DataSeg>::new(w.get(at..at + DataSeg::BYTES).ok_or(LocalError::Length)?)
                .map_err(|_| LocalError::Length)?;
            let sge = Sge {
                len: d.get32(DataSeg::BYTE_COUNT).min(bytes as u32),
                lkey: d.get32(DataSeg::LKEY),
                addr: d.get(DataSeg::ADDR),
            };
            // The UMR QP has no PD: the lkey is taken in its own.
            let pd = hw.model.objects.mkey(sge.lkey >> 8).map_or(0, |k| k.pd);
            dma::gather(hw, pd, &[Piece::Data(sge)], bytes as u64)?
        }
    };

    // A KLM key's translations may be a repeat block (rdma-core's interleaved layout): the
    // table holds the block, the model the KLM entries it stands for.
    let written = xlt.len() / Klm::BYTES;
    let is_klm = hw
        .model
        .objects
        .mkey(index)
        .is_some_and(|m| m.klm.is_some());
    let xlt = match repeat_block(&xlt).filter(|_| is_klm) {
        Some(expanded) => expanded?,
        None => xlt,
    };

    // The new PD must exist.
    let new_pd = s.get32(Mkc::PD);
    if mkey_mask & mask::PD != 0 && !hw.model.objects.contains(ObjectKind::Pd, new_pd) {
        return Err(LocalError::Protection);
    }
    let new_shift = s.get(Mkc::LOG_PAGE_SIZE);
    if mkey_mask & mask::PAGE_SIZE != 0 && !(12..=30).contains(&new_shift) {
        return Err(LocalError::Protection);
    }

    // The simulator's own bound on the tables it keeps (a guest's UMR may not make it hold
    // more than TRANSLATION_BUDGET entries).
    let before = hw.model.objects.mkey(index).map_or(0, |m| m.translations());
    let growth = hw.model.objects.mkey(index).map_or(0, |m| {
        let (entry, held) = match (&m.mtt, &m.klm) {
            (Some((_, pages)), _) => (8, pages.len()),
            (None, Some(list)) => (Klm::BYTES as u64, list.len()),
            // KSM: at most one new entry an octword.
            _ => (Klm::BYTES as u64, 0),
        };
        let reach = if m.ksm.is_some() { 0 } else { offset / entry };
        (reach + xlt.len() as u64 / entry).saturating_sub(held as u64)
    });
    if hw.model.objects.translations().saturating_add(growth) > TRANSLATION_BUDGET {
        log::warn!(
            "mlx5-sim: UMR on mkey {index:#x}: {growth} more translation entries would pass the simulator's budget of {TRANSLATION_BUDGET}"
        );
        return Err(LocalError::Length);
    }
    let m = hw
        .model
        .objects
        .mkey_mut(index)
        .ok_or(LocalError::Protection)?;
    let octo_size = View::<Mkc>::new(&m.ctx).map_or(0, |v| v.get(Mkc::TRANSLATIONS_OCTWORD_SIZE));
    if !xlt.is_empty() {
        let written = write_translations(m, &xlt, offset, (octo_size as usize, written));
        hw.model.objects.translations_changed(index, before);
        written?;
    }
    let Some(m) = hw.model.objects.mkey_mut(index) else {
        return Err(LocalError::Protection);
    };
    let old_pd = m.pd;
    let bit = |f| s.get(f) == 1;
    let grant = [
        (mask::LR, Mkc::LR, access::LOCAL_READ),
        (mask::LW, Mkc::LW, access::LOCAL_WRITE),
        (mask::RR, Mkc::RR, access::REMOTE_READ),
        (mask::RW, Mkc::RW, access::REMOTE_WRITE),
        (mask::A, Mkc::A, access::ATOMIC),
    ];
    for (mb, f, a) in grant {
        if mkey_mask & mb != 0 {
            m.access = if bit(f) { m.access | a } else { m.access & !a };
        }
    }
    if mkey_mask & mask::LEN != 0 {
        m.len = s.get(Mkc::LEN);
        m.whole = bit(Mkc::LENGTH64);
    }
    if mkey_mask & mask::START_ADDR != 0 {
        m.start = s.get(Mkc::START_ADDR);
    }
    if mkey_mask & mask::PAGE_SIZE != 0 {
        if let Some((shift, _)) = m.mtt.as_mut() {
            *shift = new_shift as u32;
        }
        if let Some(t) = m.ksm.as_mut() {
            t.shift = new_shift as u32;
        }
    }
    if mkey_mask & mask::PD != 0 {
        m.pd = new_pd;
    }
    if mkey_mask & mask::EN_RINVAL != 0 {
        m.rinval = bit(Mkc::EN_RINVAL);
    }
    if mkey_mask & mask::KEY != 0 {
        m.variant = s.get(Mkc::MKEY_7_0) as u8;
    }
    if mkey_mask & mask::FREE != 0 {
        m.free = bit(Mkc::FREE);
    }
    if mkey_mask & mask::QPN != 0 {
        m.qpn = s.get32(Mkc::QPN);
    }
    // The context image follows every field the mask names.
    let fields = [
        (mask::LEN, &[Mkc::LEN, Mkc::LENGTH64][..]),
        (mask::PAGE_SIZE, &[Mkc::LOG_PAGE_SIZE]),
        (mask::START_ADDR, &[Mkc::START_ADDR]),
        (mask::PD, &[Mkc::PD]),
        (mask::EN_RINVAL, &[Mkc::EN_RINVAL]),
        (mask::KEY, &[Mkc::MKEY_7_0]),
        (mask::QPN, &[Mkc::QPN]),
        (mask::LR, &[Mkc::LR]),
        (mask::LW, &[Mkc::LW]),
        (mask::RR, &[Mkc::RR]),
        (mask::RW, &[Mkc::RW]),
        (mask::A, &[Mkc::A]),
        (mask::FREE, &[Mkc::FREE]),
    ];
    if let Ok(mut v) = ViewMut::<Mkc>::new(&mut m.ctx) {
        for (mb, fs) in fields {
            if mkey_mask & mb != 0 {
                for &f in fs {
                    let _ = v.set(f, s.get(f));
                }
            }
        }
    }
    if mkey_mask & mask::PD != 0 && new_pd != old_pd {
        hw.model.objects.release(&[(ObjectKind::Pd, old_pd)]);
        hw.model.objects.hold(&[(ObjectKind::Pd, new_pd)]);
    }
    Ok(())
}

/// Writes translation bytes `xlt` at byte `offset` of key `m`'s table of `octo_size` octwords:
/// MTT entries (8 bytes, flag bits masked; whole 64-byte chunks, as Linux writes them) into an
/// MTT key, KLM entries (16 bytes) into an indirect one; a PA key has no table.
fn write_translations(
    m: &mut Mkey,
    xlt: &[u8],
    offset: u64,
    (octo_size, written): (usize, usize),
) -> Result<(), LocalError> {
    if let Some(t) = m.ksm.as_mut() {
        // KSM entries (an implicit ODP parent's): one octword each; the null mkey's are absent.
        let first = offset / Klm::BYTES as u64;
        let n = (xlt.len() / Klm::BYTES) as u64;
        if first + n > octo_size as u64 {
            return Err(LocalError::Length);
        }
        for (k, e) in xlt
            .chunks_exact(Klm::BYTES)
            .filter_map(Klm::parse)
            .enumerate()
        {
            let at = first + k as u64;
            if e.key == NULL_MKEY {
                t.entries.remove(&at);
            } else {
                t.entries.insert(at, (e.key, e.addr));
            }
        }
        return Ok(());
    }
    if let Some(list) = m.klm.as_mut() {
        let entries: Vec<Klm> = xlt
            .chunks_exact(Klm::BYTES)
            .filter_map(Klm::parse)
            .collect();
        let first = (offset / Klm::BYTES as u64) as usize;
        // The table holds what the WQE wrote (a repeat block: its header and entries).
        if first + written.min(entries.len()) > octo_size.next_multiple_of(4) {
            return Err(LocalError::Length);
        }
        list.truncate(first);
        list.resize(
            first,
            Klm {
                bytes: 0,
                key: 0,
                addr: 0,
            },
        );
        list.extend(entries);
        return Ok(());
    }
    let Some((_, pages)) = m.mtt.as_mut() else {
        return Err(LocalError::Protection);
    };
    let entries: Vec<u64> = xlt
        .chunks_exact(8)
        .map(|e| {
            let raw = u64::from_be_bytes(e.try_into().unwrap_or([0; 8]));
            raw & (!MTT_FLAGS | MTT_PRESENT)
        })
        .collect();
    // Whole 64-byte chunks of the table (8 entries each).
    let cap = (octo_size * 2).next_multiple_of(8);
    let first = (offset / 8) as usize;
    if first + entries.len() > cap {
        return Err(LocalError::Length);
    }
    if pages.len() < first + entries.len() {
        pages.resize(first + entries.len(), 0);
    }
    pages[first..first + entries.len()].copy_from_slice(&entries);
    Ok(())
}

/// `op` of a repeat block header (`mlx5_wqe_umr_repeat_block_seg`, bytes 4–7: where a KLM
/// entry has its key).
const REPEAT_BLOCK_OP: u32 = 0x400;

/// The KLM entries a repeat block `xlt` stands for — rdma-core's interleaved layout
/// (`umr_strided_seg_create`): a header (total bytes of one round, `op` 0x400, `repeat_count`,
/// `num_ent`) and `num_ent` entries (`stride`, `byte_count`, `memkey`, `va`); round `r` takes
/// each entry's `byte_count` bytes through `memkey` at `va + r × stride`. `None` when `xlt` is
/// no repeat block; a block of no rounds or entries, or one whose expansion passes the
/// simulator's translation budget, is a LOCAL_LENGTH_ERR.
fn repeat_block(xlt: &[u8]) -> Option<Result<Vec<u8>, LocalError>> {
    let h = xlt.get(..Klm::BYTES)?;
    let be32 = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    if be32(&h[4..8]) != REPEAT_BLOCK_OP {
        return None;
    }
    let (repeat, n) = (u64::from(be32(&h[8..12])), be16(h, 14) as usize);
    let Some(ents) = xlt.get(Klm::BYTES..Klm::BYTES * (1 + n)) else {
        return Some(Err(LocalError::Length));
    };
    if repeat == 0 || n == 0 || repeat * n as u64 > TRANSLATION_BUDGET {
        return Some(Err(LocalError::Length));
    }
    let mut out = Vec::with_capacity(repeat as usize * n * Klm::BYTES);
    for r in 0..repeat {
        for e in ents.chunks_exact(Klm::BYTES) {
            let (stride, bytes) = (be16(e, 0), be16(e, 2) as u32);
            let va = u64::from_be_bytes(e[8..16].try_into().unwrap_or([0; 8]));
            out.extend_from_slice(&bytes.to_be_bytes());
            out.extend_from_slice(&e[4..8]);
            out.extend_from_slice(&va.wrapping_add(r * stride).to_be_bytes());
        }
    }
    Some(Ok(out))
}
