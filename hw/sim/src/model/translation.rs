//! Translation through memory keys ([`translate`]) and remote invalidation
//! ([`invalidate_remote`]), as the data path uses them; the rules are [`super::mkey`]'s.

use mlx5_ifc::prm::mr::Mkc;

use mlx5_ifc::consts::odp;
use mlx5_ifc::prm::caps::CmdHcaCap;

use super::icm::ICM_SPACE;
use super::memic::DM_SPACE;
use super::mkey::{access, IovaPieces, KeyError, Klm, Ksm, Mkey, MTT_FLAGS, NO_QPN, RESD_LKEY};
use super::Model;

/// Translates `[va, va + len)` through `key` for `need` (bits of [`access`]) on behalf of a QP
/// of PD `pd`: the IOVA pieces, in order.
pub(crate) fn translate(
    model: &Model,
    key: u32,
    va: u64,
    len: u64,
    need: u8,
    pd: u32,
) -> Result<IovaPieces, KeyError> {
    if key == RESD_LKEY {
        if need & !(access::LOCAL_READ | access::LOCAL_WRITE) != 0 {
            return Err(KeyError::Access);
        }
        // Physical addresses are IOVAs: never the device's own spaces.
        if va.checked_add(len).is_none_or(|e| e > ICM_SPACE) {
            return Err(KeyError::Bounds);
        }
        return Ok(split(va, len, u64::MAX));
    }
    let m = model
        .objects
        .mkey(key >> 8)
        .filter(|m| m.variant == key as u8 && !m.free)
        .ok_or(KeyError::BadKey)?;
    if m.pd != pd {
        return Err(KeyError::Pd);
    }
    if m.access & need != need {
        return Err(KeyError::Access);
    }
    if m.memic {
        // Device memory, zero-based: the access's address is an offset into the key.
        if va.checked_add(len).is_none_or(|e| e > m.len) {
            return Err(KeyError::Bounds);
        }
        return Ok(split(DM_SPACE | (m.start + va), len, u64::MAX));
    }
    if m.icm {
        // SW ICM, zero-based likewise: ICM address `start_addr + va`.
        if va.checked_add(len).is_none_or(|e| e > m.len) {
            return Err(KeyError::Bounds);
        }
        return Ok(split(ICM_SPACE | (m.start + va), len, u64::MAX));
    }
    let end = va.checked_add(len).ok_or(KeyError::Bounds)?;
    if !m.whole && (va < m.start || end > m.start.saturating_add(m.len)) {
        return Err(KeyError::Bounds);
    }
    if let Some(klm) = &m.klm {
        return indirect(model, m, klm, va, len, need, pd);
    }
    if let Some(t) = &m.ksm {
        return entities(model, m, t, (va, end), need, pd);
    }
    direct(m, va, end, len, presence(model, need))
}

/// A KSM key's pieces of `[va, end)`: each entity's bytes through its entry's key — a direct
/// key of PD `pd` granting `need` — at the entry's address plus the offset in the entity. An
/// entity without an entry (the null mkey's) is an absent page while the device pages on
/// demand (an implicit ODP parent's fault names the parent, the key the access used), else a
/// bad key.
fn entities(
    model: &Model,
    m: &Mkey,
    t: &Ksm,
    (va, end): (u64, u64),
    need: u8,
    pd: u32,
) -> Result<IovaPieces, KeyError> {
    let size = 1u64.checked_shl(t.shift).ok_or(KeyError::Bounds)?;
    let present = presence(model, need);
    let mut out = IovaPieces::new();
    let mut at = va;
    while at < end {
        let rel = at.checked_sub(m.start).ok_or(KeyError::Bounds)?;
        let off = rel & (size - 1);
        let n = (size - off).min(end - at);
        let Some(&(key, addr)) = t.entries.get(&(rel >> t.shift)) else {
            return Err(if present.is_some() {
                KeyError::Absent
            } else {
                KeyError::BadKey
            });
        };
        let k = model
            .objects
            .mkey(key >> 8)
            .filter(|k| k.variant == key as u8 && !k.free && k.klm.is_none() && k.ksm.is_none())
            .ok_or(KeyError::BadKey)?;
        if k.pd != pd {
            return Err(KeyError::Pd);
        }
        if k.access & need != need {
            return Err(KeyError::Access);
        }
        let from = addr.checked_add(off).ok_or(KeyError::Bounds)?;
        let to = from.checked_add(n).ok_or(KeyError::Bounds)?;
        if !k.whole && (from < k.start || to > k.start.saturating_add(k.len)) {
            return Err(KeyError::Bounds);
        }
        for piece in direct(k, from, to, n, present)?.iter() {
            out.push(*piece);
        }
        at += n;
    }
    Ok(out)
}

/// The MTT entry bit that must be set for an access of `need` while the device pages on
/// demand (`pg`): write for writes and atomics, else read. `None`: the bits are not looked at.
fn presence(model: &Model, need: u8) -> Option<u64> {
    if model.cur(CmdHcaCap::PG) == 0 {
        return None;
    }
    let writes = access::LOCAL_WRITE | access::REMOTE_WRITE | access::ATOMIC;
    Some(if need & writes != 0 {
        odp::MTT_WRITE
    } else {
        odp::MTT_READ
    })
}

/// Like [`translate`], for a remote access arriving on QP `qpn`: a type 2 memory window bound
/// to another QP refuses it.
pub(crate) fn translate_remote(
    model: &Model,
    key: u32,
    va: u64,
    len: u64,
    need: u8,
    (pd, qpn): (u32, u32),
) -> Result<IovaPieces, KeyError> {
    let bound = model
        .objects
        .mkey(key >> 8)
        .filter(|m| m.klm.is_some())
        .map_or(NO_QPN, |m| m.qpn);
    if bound != NO_QPN && bound != qpn & 0xff_ffff {
        return Err(KeyError::Access);
    }
    translate(model, key, va, len, need, pd)
}

/// A direct key's pieces of `[va, end)` (`len` bytes); an MTT entry without the `present` bit
/// is an absent page.
fn direct(
    m: &Mkey,
    va: u64,
    end: u64,
    len: u64,
    present: Option<u64>,
) -> Result<IovaPieces, KeyError> {
    match &m.mtt {
        // A PA key: IOVAs, never the device's own spaces.
        None if end > ICM_SPACE => Err(KeyError::Bounds),
        None => Ok(split(va, len, u64::MAX)),
        Some((shift, pages)) => {
            let page = 1u64 << shift;
            let base = m.start & !(page - 1);
            let mut out = IovaPieces::new();
            let mut at = va;
            while at < end {
                let rel = at.checked_sub(base).ok_or(KeyError::Bounds)?;
                let k = usize::try_from(rel >> shift).map_err(|_| KeyError::Bounds)?;
                // An entry never written is zero: absent while paging.
                let entry = match (pages.get(k), present) {
                    (Some(&e), _) => e,
                    (None, Some(_)) => 0,
                    (None, None) => return Err(KeyError::Bounds),
                };
                if present.is_some_and(|bit| entry & bit == 0) {
                    return Err(KeyError::Absent);
                }
                let addr = entry & !MTT_FLAGS;
                if addr >= ICM_SPACE {
                    return Err(KeyError::Bounds);
                }
                let off = at & (page - 1);
                let n = (page - off).min(end - at);
                out.push((addr + off, n as usize));
                at += n;
            }
            Ok(out)
        }
    }
}

/// An indirect key's pieces: its range (from `start_addr`) walks the KLM entries in order; each
/// piece goes through the entry's key, which must be direct, of PD `pd`, and grant the local
/// side of `need`.
fn indirect(
    model: &Model,
    m: &Mkey,
    klm: &[Klm],
    va: u64,
    len: u64,
    need: u8,
    pd: u32,
) -> Result<IovaPieces, KeyError> {
    let mut local = need & (access::LOCAL_READ | access::LOCAL_WRITE);
    if need & access::REMOTE_READ != 0 {
        local |= access::LOCAL_READ;
    }
    if need & (access::REMOTE_WRITE | access::ATOMIC) != 0 {
        local |= access::LOCAL_WRITE;
    }
    let mut out = IovaPieces::new();
    let (mut off, mut left, mut base) = (va - m.start, len, 0u64);
    for e in klm {
        if left == 0 {
            break;
        }
        let size = u64::from(e.bytes);
        if off >= base + size {
            base += size;
            continue;
        }
        let inner = off - base;
        let n = (size - inner).min(left);
        let k = model
            .objects
            .mkey(e.key >> 8)
            .filter(|k| k.variant == e.key as u8 && !k.free && k.klm.is_none())
            .ok_or(KeyError::BadKey)?;
        if k.pd != pd {
            return Err(KeyError::Pd);
        }
        if k.access & local != local {
            return Err(KeyError::Access);
        }
        let at = e.addr.checked_add(inner).ok_or(KeyError::Bounds)?;
        let end = at.checked_add(n).ok_or(KeyError::Bounds)?;
        if !k.whole && (at < k.start || end > k.start.saturating_add(k.len)) {
            return Err(KeyError::Bounds);
        }
        for piece in direct(k, at, end, n, presence(model, local))?.iter() {
            out.push(*piece);
        }
        off += n;
        left -= n;
        base += size;
    }
    if left == 0 {
        Ok(out)
    } else {
        Err(KeyError::Bounds)
    }
}

/// Invalidates `key` for a SEND with invalidate received by QP `qpn` of PD `pd` (see the module
/// documentation; a type 2 window bound to another QP is refused): the mkey becomes free.
pub(crate) fn invalidate_remote(
    model: &mut Model,
    key: u32,
    (pd, qpn): (u32, u32),
) -> Result<(), KeyError> {
    let m = model
        .objects
        .mkey_mut(key >> 8)
        .filter(|m| key != RESD_LKEY && m.variant == key as u8 && !m.free)
        .ok_or(KeyError::BadKey)?;
    if m.pd != pd {
        return Err(KeyError::Pd);
    }
    if !m.rinval || (m.klm.is_some() && m.qpn != NO_QPN && m.qpn != qpn & 0xff_ffff) {
        return Err(KeyError::Access);
    }
    m.free = true;
    if let Ok(mut c) = mlx5_ifc::ViewMut::<Mkc>::new(&mut m.ctx) {
        let _ = c.set(Mkc::FREE, 1);
    }
    Ok(())
}

/// `[va, va + len)` as pieces of at most `max` bytes that fit `usize`.
fn split(va: u64, len: u64, max: u64) -> IovaPieces {
    let chunk = max.min(usize::MAX as u64).min(1 << 30);
    let mut out = IovaPieces::new();
    let mut at = 0;
    while at < len {
        let n = chunk.min(len - at);
        out.push((va + at, n as usize));
        at += n;
    }
    out
}
