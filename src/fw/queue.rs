//! The memory every queue object has: a ring buffer described to the device by a PAS list, and a
//! doorbell record.
//!
//! The ring is one contiguous DMA allocation cut into equal pages; each page's device address
//! goes into the command's PAS list (`log_page_size` = log2(page) − 12). The page is 4 KiB for
//! small rings and grows (up to 2 MiB, allocation aligned to it) so that a ring never needs more
//! than [`MAX_PAS`] entries — which keeps every create command inside a fixed stack buffer.

use mlx5_ifc::consts::ADAPTER_PAGE_SIZE;
use mlx5_ifc::Be64;

use crate::error::{Error, Result};
use crate::fw::quarantine::Quarantine;
use crate::io::platform::Platform;
use crate::io::DmaBuf;

/// Most PAS entries one queue uses.
pub(crate) const MAX_PAS: usize = 512;
/// Largest page of a queue buffer.
pub(crate) const MAX_PAGE: usize = 2 << 20;
/// Bytes of a doorbell record allocation (one cache line).
pub(crate) const DBR_BYTES: usize = 64;

/// Memory a command describes with a PAS (or MTT) list of equal pages.
pub(crate) trait PasList {
    /// Number of entries.
    fn npages(&self) -> usize;
    /// Writes the entries (BE64 page addresses) into `dst` (`8 * npages` bytes).
    fn write_pas(&self, dst: &mut [u8]) -> Result<()>;
}

/// `n` pages of `page` bytes from device address `base`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pages {
    /// Address of the first page.
    pub base: u64,
    /// Page size in bytes.
    pub page: usize,
    /// Number of pages.
    pub n: usize,
}

impl PasList for Pages {
    fn npages(&self) -> usize {
        self.n
    }
    fn write_pas(&self, dst: &mut [u8]) -> Result<()> {
        let limit = dst.len() / 8;
        let dst = dst.get_mut(..self.n * 8).ok_or(Error::Capacity {
            what: "PAS list buffer",
            limit,
        })?;
        for (i, e) in dst.chunks_exact_mut(8).enumerate() {
            e.copy_from_slice(&Be64::new(self.base + (i * self.page) as u64).to_bytes());
        }
        Ok(())
    }
}

impl PasList for QueueBuf {
    fn npages(&self) -> usize {
        self.npages
    }
    fn write_pas(&self, dst: &mut [u8]) -> Result<()> {
        Pages {
            base: self.buf.iova(),
            page: self.page,
            n: self.npages,
        }
        .write_pas(dst)
    }
}

/// A ring buffer in DMA memory.
#[derive(Debug)]
pub(crate) struct QueueBuf {
    buf: DmaBuf,
    page: usize,
    npages: usize,
}

impl QueueBuf {
    /// Allocates a zeroed ring of at least `bytes` bytes (`bytes` > 0).
    pub(crate) fn alloc<P: Platform>(p: &P, bytes: usize, what: &'static str) -> Result<Self> {
        let mut page = ADAPTER_PAGE_SIZE;
        while bytes.div_ceil(page) > MAX_PAS && page < MAX_PAGE {
            page *= 2;
        }
        let npages = bytes.div_ceil(page).max(1);
        if npages > MAX_PAS {
            return Err(Error::InvalidArgument {
                op: what,
                field: "buffer bytes",
                requested: bytes as u64,
                max: (MAX_PAS * MAX_PAGE) as u64,
                limit: "512 pages of 2 MiB",
            });
        }
        let buf = DmaBuf::alloc(p, npages * page, page)
            .map_err(|source| Error::Platform { op: what, source })?;
        Ok(Self { buf, page, npages })
    }

    /// The memory.
    pub(crate) fn buf(&self) -> &DmaBuf {
        &self.buf
    }

    /// `log_page_size` for the context: log2(page) − 12.
    pub(crate) fn log_page_size(&self) -> u8 {
        (self.page.trailing_zeros() - 12) as u8
    }

    /// Frees the ring. The device must never have been told of it (or be done with it).
    pub(crate) fn free<P: Platform>(self, p: &P) {
        if let Err(e) = self.buf.free(p) {
            log::warn!("freeing a queue buffer: {e}");
        }
    }

    /// The memory, to hand to the quarantine.
    pub(crate) fn into_dma(self) -> DmaBuf {
        self.buf
    }

    /// Frees the ring if the device is known to be done with it (`done`), else quarantines it.
    pub(crate) fn retire<P: Platform>(self, q: &Quarantine, p: &P, done: bool, why: &'static str) {
        q.retire(p, self.buf, done, why);
    }
}

/// Allocates a zeroed doorbell record (its own cache line).
pub(crate) fn alloc_dbr<P: Platform>(p: &P, what: &'static str) -> Result<DmaBuf> {
    DmaBuf::alloc(p, DBR_BYTES, DBR_BYTES).map_err(|source| Error::Platform { op: what, source })
}

/// `ceil(log2(n))` for n ≥ 1 (0 for n ≤ 1).
pub(crate) const fn ceil_log2(n: u64) -> u8 {
    if n <= 1 {
        0
    } else {
        (64 - (n - 1).leading_zeros()) as u8
    }
}
