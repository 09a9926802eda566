//! The simulated ConnectX-5 ([`mlx5_sim::SimDevice`]) as a [`Platform`].

use core::ptr::NonNull;
use core::sync::atomic::{AtomicUsize, Ordering};

extern crate alloc;
use alloc::sync::Arc;

use mlx5_ifc::{Be32, Be64};
use mlx5_sim::SimDevice;

use crate::io::platform::{DmaRegion, Platform, PlatformError};

/// A [`Platform`] backed by a simulated ConnectX-5. Clone the [`SimDevice`] before handing it
/// over to keep a handle for inspecting the device (accounts, trace, faults).
#[derive(Clone)]
pub struct SimPlatform {
    dev: SimDevice,
    write_combining: bool,
    /// Host-memory bytes handed out and not yet freed (shared by clones).
    host_in_use: Arc<AtomicUsize>,
}

impl core::fmt::Debug for SimPlatform {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SimPlatform")
            .field("mode", &self.dev.mode())
            .field("write_combining", &self.write_combining)
            .field("host_in_use", &self.host_bytes_in_use())
            .finish()
    }
}

impl SimPlatform {
    /// Wraps a simulated device, its UAR pages taken as mapped write-combining (BlueFlame on).
    pub fn new(dev: SimDevice) -> Self {
        Self {
            dev,
            write_combining: true,
            host_in_use: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Bytes of host memory ([`Platform::host_alloc`]) the driver holds now, on this platform
    /// and its clones. The driver's own bookkeeping is host memory the device cannot reach, so
    /// it is always freed, quarantine or not: after [`Device::close`](crate::Device::close) this
    /// is 0, whatever the device did.
    pub fn host_bytes_in_use(&self) -> usize {
        self.host_in_use.load(Ordering::Relaxed)
    }

    /// The same device with its UAR pages taken as mapped write-combining (`true`, the default
    /// of [`SimPlatform::new`]) or uncached (`false`: the driver rings every send with the
    /// 8-byte doorbell, never BlueFlame), as [`Platform::uar_write_combining`] reports.
    pub fn with_write_combining(mut self, write_combining: bool) -> Self {
        self.write_combining = write_combining;
        self
    }

    /// The simulated device.
    pub fn device(&self) -> &SimDevice {
        &self.dev
    }
}

// SAFETY: the simulator backs every DMA block with its own heap allocation (8-aligned, zeroed)
// that lives until `dma_free` or until the last handle to the device drops — and this platform
// holds a handle. The simulator itself touches that memory only with atomic accesses, and its
// BAR accessors touch no host memory. Host memory comes from the process heap, which the
// simulated device cannot reach (it translates only its own DMA blocks).
unsafe impl Platform for SimPlatform {
    fn bar_read32(&self, offset: u64) -> Be32 {
        self.dev.bar_read32(offset)
    }

    fn bar_write32(&self, offset: u64, value: Be32) {
        self.dev.bar_write32(offset, value)
    }

    fn bar_write64(&self, offset: u64, value: Be64) {
        self.dev.bar_write64(offset, value)
    }

    fn bar_write_bf(&self, offset: u64, chunk: &[Be64]) {
        self.dev.bar_write_bf(offset, chunk)
    }

    fn uar_write_combining(&self) -> bool {
        self.write_combining
    }

    fn pci_device_id(&self) -> Option<u16> {
        Some(self.dev.profile().pci_device_id())
    }

    fn dma_alloc(&self, len: usize, align: usize) -> Result<DmaRegion, PlatformError> {
        match self.dev.dma_alloc(len, align) {
            Ok(b) => Ok(DmaRegion {
                cpu: b.host,
                iova: b.iova,
                len: b.len,
            }),
            Err(e) => {
                log::warn!("simulated DMA allocation of {len} bytes failed: {e}");
                Err(PlatformError::OutOfDmaMemory { len, align })
            }
        }
    }

    fn dma_free(&self, region: DmaRegion) -> Result<(), PlatformError> {
        self.dev
            .dma_free(region.iova)
            .map_err(|_| PlatformError::UnknownRegion { iova: region.iova })
    }

    fn host_alloc(&self, len: usize, align: usize) -> Result<NonNull<u8>, PlatformError> {
        // The process heap: the simulated device reaches only the blocks of `dma_alloc`.
        let p = super::host::heap_alloc(len, align)?;
        self.host_in_use.fetch_add(len, Ordering::Relaxed);
        Ok(p)
    }

    unsafe fn host_free(&self, ptr: NonNull<u8>, len: usize, align: usize) {
        self.host_in_use.fetch_sub(len, Ordering::Relaxed);
        // SAFETY: forwarded contract (`ptr` came from `host_alloc`, i.e. `heap_alloc`).
        unsafe { super::host::heap_free(ptr, len, align) }
    }

    fn now_ns(&self) -> u64 {
        self.dev.now_ns()
    }

    fn relax(&self) {
        self.dev.relax()
    }
}
