//! [`MmioRegion`]: a mapped BAR reached through volatile pointers, for platforms that map BAR0
//! into the address space (VFIO, unikernels).

use core::ptr::NonNull;

use mlx5_ifc::{Be32, Be64};
use volatile::VolatilePtr;

/// A mapped device register window (BAR0 or part of it).
#[derive(Debug)]
pub struct MmioRegion {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the region is device memory accessed only with volatile loads and stores of whole
// words; the device serializes them, so handing the mapping to another thread is sound.
unsafe impl Send for MmioRegion {}
// SAFETY: as above; `&MmioRegion` only permits volatile word accesses.
unsafe impl Sync for MmioRegion {}

impl MmioRegion {
    /// Wraps a mapping of `len` bytes at `base`.
    ///
    /// # Safety
    ///
    /// `base..base + len` must be a live mapping of device registers (uncached, or write-combined
    /// for BlueFlame areas) that stays mapped as long as the returned value lives, and nothing
    /// may hold a Rust reference into it.
    pub unsafe fn new(base: NonNull<u8>, len: usize) -> Self {
        Self { base, len }
    }

    /// Size of the window.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the window is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn ptr<T>(&self, offset: u64) -> Option<NonNull<T>> {
        let size = core::mem::size_of::<T>() as u64;
        let end = offset.checked_add(size)?;
        if end > self.len as u64 || offset % size != 0 {
            return None;
        }
        // `offset` is within the mapping (checked), so the pointer stays inside it.
        NonNull::new(self.base.as_ptr().wrapping_add(offset as usize).cast())
    }

    /// One 32-bit volatile load; an offset outside the window reads all-ones (like a PCI master
    /// abort) and is logged.
    pub fn read32(&self, offset: u64) -> Be32 {
        match self.ptr::<u32>(offset) {
            // SAFETY: in bounds and aligned (checked by `ptr`); the mapping is live per `new`.
            Some(p) => Be32::from_ne_raw(unsafe { VolatilePtr::new_read_only(p) }.read()),
            None => {
                log::error!("MMIO read32 outside the BAR window at {offset:#x}");
                Be32::new(u32::MAX)
            }
        }
    }

    /// One 32-bit volatile store; an offset outside the window is dropped and logged.
    pub fn write32(&self, offset: u64, v: Be32) {
        match self.ptr::<u32>(offset) {
            // SAFETY: in bounds and aligned (checked by `ptr`); the mapping is live per `new`.
            Some(p) => unsafe { VolatilePtr::new(p) }.write(v.to_ne_raw()),
            None => log::error!("MMIO write32 outside the BAR window at {offset:#x}"),
        }
    }

    /// A BlueFlame copy: one 64-bit volatile store per word of `chunk`, from `offset` on, in
    /// order, after one bounds check of the whole range; a range outside the window is dropped
    /// and logged.
    #[inline]
    pub fn write_bf(&self, offset: u64, chunk: &[Be64]) {
        let bytes = chunk.len() as u64 * 8;
        let Some(first) = self.ptr::<u64>(offset).filter(|_| {
            offset
                .checked_add(bytes)
                .is_some_and(|e| e <= self.len as u64)
        }) else {
            log::error!(
                "MMIO BlueFlame copy of {bytes} bytes outside the BAR window at {offset:#x}"
            );
            return;
        };
        for (i, w) in chunk.iter().enumerate() {
            // SAFETY: `first` is in bounds and 8-aligned (checked by `ptr`), and the whole range
            // `offset..offset + 8·len` lies inside the window (checked above), so word `i` does
            // too; the mapping is live per `new`.
            unsafe { VolatilePtr::new(first.add(i)) }.write(w.to_ne_raw());
        }
    }

    /// One 64-bit volatile store (doorbells); an offset outside the window is dropped and logged.
    pub fn write64(&self, offset: u64, v: Be64) {
        match self.ptr::<u64>(offset) {
            // SAFETY: in bounds and aligned (checked by `ptr`); the mapping is live per `new`.
            Some(p) => unsafe { VolatilePtr::new(p) }.write(v.to_ne_raw()),
            None => log::error!("MMIO write64 outside the BAR window at {offset:#x}"),
        }
    }
}
