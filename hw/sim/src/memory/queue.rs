//! Host memory as the device reaches it through the IOMMU: queue buffers through their PAS
//! (pages of a queue's page size), cyclic work queue rings, doorbell record words, and the
//! record of a data path DMA fault.

use mlx5_ifc::prm::srq::Wq;
use mlx5_ifc::View;

use crate::fault::{DmaFault, DmaFaultKind};
use crate::iommu::Iommu;

/// Records a DMA fault of the data path.
pub(crate) fn dma_fault(
    faults: &mut Vec<DmaFault>,
    iova: u64,
    len: usize,
    write: bool,
    what: String,
) {
    log::warn!("mlx5-sim: data path DMA fault at {iova:#x}: {what}");
    faults.push(DmaFault {
        iova,
        len,
        kind: if write {
            DmaFaultKind::Write
        } else {
            DmaFaultKind::Read
        },
        what,
    });
}

/// Where a queue starts in its first page: `page_offset` counts in units of a 64th of the page
/// (`qpc`, `cqc`, `eqc`, `srqc` and `wq` `page_offset`; Linux's mlx5_ib computes it with
/// `mlx5_umem_find_best_quantized_pgoff(…, scale 64)` for a user buffer that does not start on
/// the page size it chose).
pub(crate) fn queue_start(page: u64, page_offset: u64) -> u64 {
    page_offset * (page / 64)
}

/// The memory of a cyclic work queue (the `wq` layout of an SQ or RQ context) with the queue's
/// pages: where entry `k` is and how to read it.
pub(crate) struct WqRing {
    pub(crate) pas: std::sync::Arc<[u64]>,
    pub(crate) page: u64,
    /// Where the queue starts in its first page.
    pub(crate) start: u64,
    /// Entries (a power of two) and bytes per entry.
    pub(crate) entries: u32,
    pub(crate) stride: u64,
    pub(crate) pd: u32,
    pub(crate) dbr: u64,
}

impl WqRing {
    pub(crate) fn of(w: &View<'_, Wq>, pas: &std::sync::Arc<[u64]>) -> WqRing {
        let page = 4096u64 << w.get(Wq::LOG_WQ_PG_SZ).min(20);
        WqRing {
            pas: pas.clone(),
            page,
            start: queue_start(page, w.get(Wq::PAGE_OFFSET)),
            entries: 1 << w.get(Wq::LOG_WQ_SZ).min(16),
            stride: 1 << w.get(Wq::LOG_WQ_STRIDE).min(16),
            pd: w.get32(Wq::PD),
            dbr: w.get(Wq::DBR_ADDR),
        }
    }

    /// Reads entry `counter` (wrapped to the ring) and what follows it, `buf.len()` bytes; the
    /// IOVA of the first unmapped byte on failure.
    pub(crate) fn read(&self, iommu: &Iommu, counter: u64, buf: &mut [u8]) -> Result<(), u64> {
        let slot = counter & u64::from(self.entries - 1);
        read_queue(
            iommu,
            &self.pas,
            self.page,
            self.start + slot * self.stride,
            buf,
        )
    }
}

/// Reads `buf.len()` bytes at offset `off` of a queue buffer (`pas`, pages of `page` bytes);
/// `Err(iova)` on an unmapped address.
pub(crate) fn read_queue(
    iommu: &Iommu,
    pas: &[u64],
    page: u64,
    off: u64,
    buf: &mut [u8],
) -> Result<(), u64> {
    let mut done = 0usize;
    while done < buf.len() {
        let at = off + done as u64;
        let k = usize::try_from(at / page).map_err(|_| 0u64)?;
        let base = *pas.get(k).ok_or(0u64)?;
        let n = ((page - at % page) as usize).min(buf.len() - done);
        let iova = base + at % page;
        iommu
            .read(iova, &mut buf[done..done + n])
            .map_err(|_| iova)?;
        done += n;
    }
    Ok(())
}

/// Writes `data` at offset `off` of a queue buffer, the last byte with release ordering.
pub(crate) fn write_queue(
    iommu: &Iommu,
    pas: &[u64],
    page: u64,
    off: u64,
    data: &[u8],
) -> Result<(), u64> {
    let mut done = 0usize;
    while done < data.len() {
        let at = off + done as u64;
        let k = usize::try_from(at / page).map_err(|_| 0u64)?;
        let base = *pas.get(k).ok_or(0u64)?;
        let n = ((page - at % page) as usize).min(data.len() - done);
        let iova = base + at % page;
        let chunk = &data[done..done + n];
        let r = if done + n == data.len() {
            iommu.write_release(iova, chunk)
        } else {
            iommu.write(iova, chunk)
        };
        r.map_err(|_| iova)?;
        done += n;
    }
    Ok(())
}

/// The big-endian 32-bit word at `iova` (a doorbell record word).
pub(crate) fn read_be32(iommu: &Iommu, iova: u64) -> Option<u32> {
    let mut b = [0u8; 4];
    iommu.read(iova, &mut b).ok()?;
    Some(u32::from_be_bytes(b))
}
