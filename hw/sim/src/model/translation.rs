//! Translation through memory keys ([`translate`]) and remote invalidation
//! ([`invalidate_remote`]), as the data path uses them; the rules are [`super::mkey`]'s.

use mlx5_ifc::prm::mr::Mkc;

use super::mkey::{access, IovaPieces, KeyError, Klm, Mkey, NO_QPN, RESD_LKEY};
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
        va.checked_add(len).ok_or(KeyError::Bounds)?;
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
    let end = va.checked_add(len).ok_or(KeyError::Bounds)?;
    if !m.whole && (va < m.start || end > m.start.saturating_add(m.len)) {
        return Err(KeyError::Bounds);
    }
    if let Some(klm) = &m.klm {
        return indirect(model, m, klm, va, len, need, pd);
    }
    direct(m, va, end, len)
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

/// A direct key's pieces of `[va, end)` (`len` bytes).
fn direct(m: &Mkey, va: u64, end: u64, len: u64) -> Result<IovaPieces, KeyError> {
    match &m.mtt {
        None => Ok(split(va, len, u64::MAX)),
        Some((shift, pages)) => {
            let page = 1u64 << shift;
            let base = m.start & !(page - 1);
            let mut out = IovaPieces::new();
            let mut at = va;
            while at < end {
                let k = usize::try_from((at - base) >> shift).map_err(|_| KeyError::Bounds)?;
                let addr = *pages.get(k).ok_or(KeyError::Bounds)?;
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
        for piece in direct(k, at, end, n)?.iter() {
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
