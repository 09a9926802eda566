//! `unsafe impl Platform` for [`VfioPlatform`] and [`AnyPlatform`]: each method forwards to a
//! safe method; what makes the forwarding keep the contract is said once per impl.

use std::ptr::NonNull;

use mlx5::ifc::{Be32, Be64};
use mlx5::{DmaRegion, Platform, PlatformError};

#[cfg(feature = "sim")]
use crate::AnyPlatform;
use crate::VfioPlatform;

// SAFETY: `dma_alloc` returns memory from the pool: chunks of `HostMemory` (private anonymous
// mappings, zeroed, 64-byte (so 8-byte) aligned), IOVA aligned as asked, mapped in the IOMMU at
// `iova` by a `DmaChunk` that keeps its memory until the IOMMU mapping is gone; handed to one
// caller only (the pool's allocator never gives out a range twice) and kept mapped until
// `dma_free` or until the platform drops. Host memory is the process heap, which the IOMMU never
// maps (only the pool's chunks and `HostMemory` are mapped). BAR accessors perform exactly one
// access of the stated width on the mapped BAR (`MmioRegion`, owned with its mapping by
// `MmioArea`) or one pread/pwrite the kernel turns into that access, and never touch DMA memory.
unsafe impl Platform for VfioPlatform {
    #[inline]
    fn bar_read32(&self, offset: u64) -> Be32 {
        self.bar.read32(offset)
    }

    #[inline]
    fn bar_write32(&self, offset: u64, value: Be32) {
        self.bar.write32(offset, value)
    }

    #[inline]
    fn bar_write64(&self, offset: u64, value: Be64) {
        self.bar.write64(offset, value)
    }

    #[inline]
    fn bar_write_bf(&self, offset: u64, chunk: &[Be64]) {
        self.bar.write_bf(offset, chunk)
    }

    fn pci_device_id(&self) -> Option<u16> {
        Some(self.info().function.device)
    }

    /// VFIO maps BAR0 uncached (its region mmap offers no write-combining), so no BlueFlame.
    fn uar_write_combining(&self) -> bool {
        false
    }

    fn dma_alloc(&self, len: usize, align: usize) -> Result<DmaRegion, PlatformError> {
        self.pool.alloc(len, align)
    }

    fn dma_free(&self, region: DmaRegion) -> Result<(), PlatformError> {
        self.pool.free(region)
    }

    /// The process heap: never mapped in the IOMMU (only the pool's chunks are).
    fn host_alloc(&self, len: usize, align: usize) -> Result<NonNull<u8>, PlatformError> {
        mlx5::io::host::heap_alloc(len, align)
    }

    unsafe fn host_free(&self, ptr: NonNull<u8>, len: usize, align: usize) {
        // SAFETY: forwarded contract (`ptr` came from `host_alloc`, i.e. `heap_alloc`).
        unsafe { mlx5::io::host::heap_free(ptr, len, align) }
    }

    /// CLOCK_MONOTONIC, in nanoseconds since the platform was opened.
    fn now_ns(&self) -> u64 {
        self.elapsed_ns()
    }

    /// Spins for the first 20 µs of a wait, yields up to 2 ms, then sleeps 100 µs per call, so
    /// command completions are seen at once and a firmware that takes seconds to initialize
    /// does not burn a core. A wait is taken to begin when `relax` was not called for 1 ms.
    fn relax(&self) {
        self.relax_step()
    }
}

#[cfg(feature = "sim")]
macro_rules! either {
    ($self:ident, $p:ident => $e:expr) => {
        match $self {
            AnyPlatform::Sim($p) => $e,
            AnyPlatform::Vfio($p) => $e,
        }
    };
}

// SAFETY: every method forwards to the platform inside, which keeps the contract itself.
#[cfg(feature = "sim")]
unsafe impl Platform for AnyPlatform {
    fn bar_read32(&self, offset: u64) -> Be32 {
        either!(self, p => p.bar_read32(offset))
    }
    fn bar_write32(&self, offset: u64, value: Be32) {
        either!(self, p => p.bar_write32(offset, value))
    }
    fn bar_write64(&self, offset: u64, value: Be64) {
        either!(self, p => p.bar_write64(offset, value))
    }
    fn bar_write_bf(&self, offset: u64, chunk: &[Be64]) {
        either!(self, p => p.bar_write_bf(offset, chunk))
    }
    fn uar_write_combining(&self) -> bool {
        either!(self, p => p.uar_write_combining())
    }
    fn pci_device_id(&self) -> Option<u16> {
        either!(self, p => p.pci_device_id())
    }
    fn dma_alloc(&self, len: usize, align: usize) -> Result<DmaRegion, PlatformError> {
        either!(self, p => p.dma_alloc(len, align))
    }
    fn dma_free(&self, region: DmaRegion) -> Result<(), PlatformError> {
        either!(self, p => p.dma_free(region))
    }
    fn host_alloc(&self, len: usize, align: usize) -> Result<NonNull<u8>, PlatformError> {
        either!(self, p => p.host_alloc(len, align))
    }
    unsafe fn host_free(&self, ptr: NonNull<u8>, len: usize, align: usize) {
        // SAFETY: forwarded contract; a region always goes back to the variant it came from.
        either!(self, p => unsafe { p.host_free(ptr, len, align) })
    }
    fn now_ns(&self) -> u64 {
        either!(self, p => p.now_ns())
    }
    fn relax(&self) {
        either!(self, p => p.relax())
    }
}
