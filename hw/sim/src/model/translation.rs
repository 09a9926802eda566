//! Translation through memory keys ([`translate`]) and remote invalidation
//! ([`invalidate_remote`]), as the data path uses them; the rules are [`super::mkey`]'s.

use mlx5_ifc::prm::mr::Mkc;

use super::mkey::{access, IovaPieces, KeyError, RESD_LKEY};
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

/// Invalidates `key` for a SEND with invalidate received by a QP of PD `pd` (see the module
/// documentation): the mkey becomes free.
pub(crate) fn invalidate_remote(model: &mut Model, key: u32, pd: u32) -> Result<(), KeyError> {
    let m = model
        .objects
        .mkey_mut(key >> 8)
        .filter(|m| key != RESD_LKEY && m.variant == key as u8 && !m.free)
        .ok_or(KeyError::BadKey)?;
    if m.pd != pd {
        return Err(KeyError::Pd);
    }
    if !m.rinval {
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
