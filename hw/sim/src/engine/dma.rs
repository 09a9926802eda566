//! Gather and scatter through memory keys: the local side of every transfer.

use super::wqe::{LocalError, Piece};
use crate::memory::queue::dma_fault;
use crate::model::mkey::{access, IovaPieces, KeyError};
use crate::model::runtime::Sge;
use crate::model::runtime::WriteCtx;
use crate::model::translation;
use crate::model::Hw;

/// Translates `len` bytes at `addr` through `lkey`, reporting a local error.
fn local(
    hw: &Hw<'_>,
    pd: u32,
    lkey: u32,
    addr: u64,
    len: u64,
    need: u8,
) -> Result<IovaPieces, LocalError> {
    translation::translate(hw.model, lkey, addr, len, need, pd).map_err(|e| {
        log::info!("mlx5-sim: lkey {lkey:#x} at {addr:#x}+{len}: {e:?}");
        match e {
            KeyError::Absent => LocalError::PageFault,
            _ => LocalError::Protection,
        }
    })
}

/// Reads the payload `pieces` name (data segments through their lkeys with local read access)
/// into a pooled buffer (give it back with [`crate::fabric::pool::give_spare`] when done).
pub(crate) fn gather(
    hw: &mut Hw<'_>,
    pd: u32,
    pieces: &[Piece],
    max: u64,
) -> Result<Vec<u8>, LocalError> {
    let total: u64 = pieces
        .iter()
        .map(|p| match p {
            Piece::Inline(b) => b.len() as u64,
            Piece::Data(s) => u64::from(s.len),
        })
        .sum();
    if total > max {
        return Err(LocalError::Length);
    }
    // Every byte of it is written below (the pieces add up to `total`): its earlier bytes
    // need no zeroing.
    let mut out = crate::fabric::pool::take_len(total as usize);
    let mut at = 0;
    for p in pieces {
        match p {
            Piece::Inline(b) => {
                out[at..at + b.len()].copy_from_slice(b);
                at += b.len();
            }
            Piece::Data(s) => {
                let parts = local(hw, pd, s.lkey, s.addr, u64::from(s.len), access::LOCAL_READ)?;
                for &(iova, n) in parts.iter() {
                    let start = at;
                    at += n;
                    let read = match out.get_mut(start..at) {
                        Some(dst) => hw.dma_read(iova, dst).is_ok(),
                        None => false,
                    };
                    if !read {
                        dma_fault(
                            hw.faults,
                            iova,
                            n,
                            false,
                            format!("gather through lkey {:#x}", s.lkey),
                        );
                        return Err(LocalError::Dma);
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Checks that `sges` grant local write access for their whole length.
pub(crate) fn check_writable(hw: &Hw<'_>, pd: u32, sges: &[Sge]) -> Result<(), LocalError> {
    for s in sges {
        local(
            hw,
            pd,
            s.lkey,
            s.addr,
            u64::from(s.len),
            access::LOCAL_WRITE,
        )?;
    }
    Ok(())
}

/// Total bytes of a scatter list.
pub(crate) fn capacity(sges: &[Sge]) -> u64 {
    sges.iter().map(|s| u64::from(s.len)).sum()
}

/// Writes `data` at byte `offset` of the scatter list `sges` (local write access).
pub(crate) fn scatter(
    hw: &mut Hw<'_>,
    pd: u32,
    sges: &[Sge],
    offset: u64,
    data: &[u8],
) -> Result<(), LocalError> {
    if offset + data.len() as u64 > capacity(sges) {
        return Err(LocalError::Length);
    }
    let (mut skip, mut done) = (offset, 0usize);
    for s in sges {
        if done == data.len() {
            break;
        }
        let len = u64::from(s.len);
        if skip >= len {
            skip -= len;
            continue;
        }
        let n = ((len - skip) as usize).min(data.len() - done);
        let parts = local(hw, pd, s.lkey, s.addr + skip, n as u64, access::LOCAL_WRITE)?;
        for &(iova, m) in parts.iter() {
            if hw.dma_write(iova, &data[done..done + m]).is_err() {
                dma_fault(
                    hw.faults,
                    iova,
                    m,
                    true,
                    format!("scatter through lkey {:#x}", s.lkey),
                );
                return Err(LocalError::Dma);
            }
            done += m;
        }
        skip = 0;
    }
    Ok(())
}

/// Writes `data` into the next bytes of a WRITE's IOVA pieces (already translated); `Err` on a
/// DMA fault or past their end.
pub(crate) fn write_pieces(
    hw: &mut Hw<'_>,
    w: &mut WriteCtx,
    data: &[u8],
) -> Result<(), LocalError> {
    let mut done = 0;
    while done < data.len() {
        let Some(&(base, len)) = w.pieces.get(w.at) else {
            return Err(LocalError::Length);
        };
        let (iova, n) = (base + w.used as u64, len - w.used);
        let m = n.min(data.len() - done);
        if hw.dma_write(iova, &data[done..done + m]).is_err() {
            dma_fault(
                hw.faults,
                iova,
                m,
                true,
                "RDMA WRITE to host memory".to_string(),
            );
            return Err(LocalError::Dma);
        }
        if m < n {
            w.used += m;
        } else {
            (w.at, w.used) = (w.at + 1, 0);
        }
        done += m;
    }
    Ok(())
}
