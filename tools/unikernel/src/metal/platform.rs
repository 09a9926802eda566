//! [`BareMetal`]: the `mlx5::Platform` of a kernel that maps BAR0 itself and owns its DMA and
//! host arenas; and [`TscClock`].

use core::ptr::NonNull;

use mlx5::ifc::{Be32, Be64};
use mlx5::io::MmioRegion;
use mlx5::{DmaRegion, Platform, PlatformError};

use crate::arena::Pool;
use crate::needs::{Clock, DmaTranslation};

/// The time-stamp counter at a known, invariant frequency (read it from CPUID leaf 0x15, or
/// calibrate it against the PIT/HPET at boot).
#[derive(Debug, Clone, Copy)]
pub struct TscClock {
    /// TSC ticks per second.
    pub hz: u64,
}

#[cfg(target_arch = "x86_64")]
impl Clock for TscClock {
    fn now_ns(&self) -> u64 {
        // SAFETY: RDTSC has no preconditions on x86_64; it only reads the counter.
        #[allow(unused_unsafe)]
        let t = unsafe { core::arch::x86_64::_rdtsc() };
        ((t as u128 * 1_000_000_000) / self.hz.max(1) as u128) as u64
    }
}

/// A [`Platform`] for a kernel that maps BAR0 itself and owns a DMA arena.
pub struct BareMetal<C: Clock> {
    bar: MmioRegion,
    /// BAR0 again, mapped write-combining: BlueFlame copies go through it.
    wc: Option<MmioRegion>,
    bar_len: u64,
    arena_virt: NonNull<u8>,
    arena_phys: u64,
    translation: DmaTranslation,
    dma: spin::Mutex<Pool>,
    host_virt: NonNull<u8>,
    host: spin::Mutex<Pool>,
    clock: C,
    /// The function's PCI device id, as enumeration found it (a VF's makes the driver bring it
    /// up as one).
    device_id: Option<u16>,
}

impl<C: Clock> core::fmt::Debug for BareMetal<C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("BareMetal")
            .field("bar_len", &self.bar_len)
            .field("arena_phys", &self.arena_phys)
            .field("translation", &self.translation)
            .finish()
    }
}

// SAFETY: the BAR is reached only through `MmioRegion` (Send + Sync), the arena only through raw
// pointers handed out under the `dma` mutex, the host arena likewise under `host`, and the clock is required to be Send + Sync.
unsafe impl<C: Clock + Send> Send for BareMetal<C> {}
// SAFETY: as above.
unsafe impl<C: Clock + Sync> Sync for BareMetal<C> {}

impl<C: Clock> BareMetal<C> {
    /// A platform over BAR0 mapped at `bar` (`bar_len` bytes), a DMA arena of `arena_len`
    /// bytes at virtual `arena_virt` / physical `arena_phys`, and a host arena of `host_len`
    /// bytes at `host_virt` for the driver's bookkeeping (a few KiB per queue).
    ///
    /// # Safety
    ///
    /// * `bar..bar+bar_len` maps the function's BAR0, uncached (UC or, for BlueFlame, WC), for
    ///   as long as the platform lives, and nothing holds a Rust reference into it;
    /// * `arena_virt..arena_virt+arena_len` is memory this platform alone uses from now on, mapped
    ///   for as long as it lives, physically contiguous at `arena_phys`, cache-coherent with the
    ///   device, and reachable by the device at the addresses `translation` gives; `arena_virt`,
    ///   `arena_phys` and the translation offset are 4 KiB aligned;
    /// * `host_virt..host_virt+host_len` is memory this platform alone uses from now on, mapped
    ///   for as long as it lives, 64-byte aligned, disjoint from the arena, and **not mapped for
    ///   the device** in the IOMMU (without an IOMMU a device can reach all of memory: nothing
    ///   then keeps a misbehaving device out of it);
    /// * bus mastering and memory space are enabled in the function's PCI command register.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn new(
        bar: NonNull<u8>,
        bar_len: usize,
        arena_virt: NonNull<u8>,
        arena_phys: u64,
        arena_len: usize,
        translation: DmaTranslation,
        host_virt: NonNull<u8>,
        host_len: usize,
        clock: C,
    ) -> Self {
        Self {
            // SAFETY: the caller guarantees the BAR mapping (first bullet above).
            bar: unsafe { MmioRegion::new(bar, bar_len) },
            wc: None,
            bar_len: bar_len as u64,
            arena_virt,
            arena_phys,
            translation,
            dma: spin::Mutex::new(Pool::new(arena_len)),
            host_virt,
            host: spin::Mutex::new(Pool::new(host_len)),
            clock,
            device_id: None,
        }
    }

    /// The same platform, telling the driver the function's PCI device id.
    pub fn with_pci_device_id(mut self, device: u16) -> Self {
        self.device_id = Some(device);
        self
    }

    fn device_address(&self, offset: usize) -> u64 {
        let phys = self.arena_phys + offset as u64;
        match self.translation {
            DmaTranslation::Identity => phys,
            DmaTranslation::Offset(o) => phys.wrapping_add(o),
        }
    }

    /// BlueFlame through a write-combining alias of BAR0 at `alias` (`len` bytes, the BAR's
    /// size at most): [`Platform::bar_write_bf`] stores through it and
    /// [`Platform::uar_write_combining`] says so, so the driver copies small WQEs to the UAR's
    /// BlueFlame registers instead of ringing the doorbell alone. Doorbells and every other
    /// register access keep the uncached mapping.
    ///
    /// # Safety
    ///
    /// `alias..alias+len` maps the same BAR0 as the platform's uncached mapping, from its first
    /// byte, write-combining, for as long as the platform lives, and nothing holds a Rust
    /// reference into it.
    pub unsafe fn with_write_combining(mut self, alias: NonNull<u8>, len: usize) -> Self {
        let len = len.min(self.bar_len as usize);
        // SAFETY: the caller guarantees the alias mapping (above).
        self.wc = Some(unsafe { MmioRegion::new(alias, len) });
        self
    }

    /// Usage of the DMA arena and of the host arena.
    pub fn usage(&self) -> (crate::arena::Usage, crate::arena::Usage) {
        (self.dma.lock().usage(), self.host.lock().usage())
    }

    /// Size of BAR0, for [`mlx5::DeviceConfig::bar_size`].
    pub fn bar_size(&self) -> u64 {
        self.bar_len
    }
}

// SAFETY: `dma_alloc` hands out disjoint ranges of the arena (the allocator never returns a
// range twice until it is freed), zeroed, with the device address aligned as asked and the CPU
// address at least 64-byte aligned (both arena bases are 4 KiB aligned), reachable by the device
// per `new`'s contract, valid until `dma_free`; `host_alloc` likewise hands out disjoint zeroed
// 64-byte-aligned ranges of the host arena, which the device cannot reach (`new`'s contract); BAR accesses go through `MmioRegion`, one access
// of the stated width each, and never touch the arena.
unsafe impl<C: Clock> Platform for BareMetal<C> {
    fn bar_read32(&self, offset: u64) -> Be32 {
        self.bar.read32(offset)
    }

    fn bar_write32(&self, offset: u64, value: Be32) {
        self.bar.write32(offset, value)
    }

    fn bar_write64(&self, offset: u64, value: Be64) {
        self.bar.write64(offset, value)
    }

    fn bar_write_bf(&self, offset: u64, chunk: &[Be64]) {
        match &self.wc {
            Some(wc) => wc.write_bf(offset, chunk),
            None => self.bar.write_bf(offset, chunk),
        }
    }

    fn uar_write_combining(&self) -> bool {
        self.wc.is_some()
    }

    fn pci_device_id(&self) -> Option<u16> {
        self.device_id
    }

    fn dma_alloc(&self, len: usize, align: usize) -> Result<DmaRegion, PlatformError> {
        let oom = PlatformError::OutOfDmaMemory { len, align };
        // The device address is what must be aligned; the CPU address follows at least to 64
        // bytes because both arena bases are 4 KiB aligned (`new`'s contract).
        let mut st = self.dma.lock();
        let (off, size) = st.alloc(len, align, self.device_address(0)).ok_or(oom)?;
        let iova = self.device_address(off);
        if iova == 0 {
            st.free(off);
            return Err(oom);
        }
        let cpu = self.arena_virt.as_ptr().wrapping_add(off);
        // SAFETY: `off..off+size` lies inside the arena (the allocator only hands out such
        // ranges) and belongs to no one else; the arena is mapped per `new`'s contract.
        unsafe { core::ptr::write_bytes(cpu, 0, size) };
        Ok(DmaRegion {
            cpu: NonNull::new(cpu).ok_or(oom)?,
            iova,
            len: size,
        })
    }

    fn dma_free(&self, region: DmaRegion) -> Result<(), PlatformError> {
        let unknown = PlatformError::UnknownRegion { iova: region.iova };
        let off = (region.cpu.as_ptr() as usize)
            .checked_sub(self.arena_virt.as_ptr() as usize)
            .ok_or(unknown)?;
        if self.device_address(off) != region.iova {
            return Err(unknown);
        }
        self.dma.lock().free(off).map(drop).ok_or(unknown)
    }

    fn host_alloc(&self, len: usize, align: usize) -> Result<NonNull<u8>, PlatformError> {
        let oom = PlatformError::OutOfHostMemory { len, align };
        let (off, size) = self.host.lock().alloc(len, align, 0).ok_or(oom)?;
        let p = self.host_virt.as_ptr().wrapping_add(off);
        // SAFETY: `off..off+size` lies inside the host arena and belongs to no one else; the
        // arena is mapped per `new`'s contract.
        unsafe { core::ptr::write_bytes(p, 0, size) };
        NonNull::new(p).ok_or(oom)
    }

    unsafe fn host_free(&self, ptr: NonNull<u8>, _len: usize, _align: usize) {
        let off = (ptr.as_ptr() as usize).wrapping_sub(self.host_virt.as_ptr() as usize);
        // Not a live host allocation: the contract was broken; refusing it keeps the arena
        // consistent.
        let _ = self.host.lock().free(off);
    }

    fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    fn relax(&self) {
        core::hint::spin_loop(); // PAUSE: polite to the sibling hyperthread
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec;

    struct FakeClock(core::sync::atomic::AtomicU64);

    impl Clock for FakeClock {
        fn now_ns(&self) -> u64 {
            self.0
                .fetch_add(1000, core::sync::atomic::Ordering::Relaxed)
        }
    }

    #[test]
    fn platform_hands_out_zeroed_aligned_translated_memory() {
        // Heap memory stands in for the BAR and the arena on the host.
        let mut bar = vec![0u64; 512];
        let mut arena = vec![0u64; 0x4000 / 8 + 512];
        let base = (arena.as_mut_ptr() as usize).next_multiple_of(4096);
        let mut host = vec![0u64; 0x1000 / 8 + 8];
        let host_base = (host.as_mut_ptr() as usize).next_multiple_of(64);
        let p = unsafe {
            // SAFETY: test-only: both buffers outlive `p` and nothing else uses them.
            BareMetal::new(
                NonNull::new(bar.as_mut_ptr().cast()).unwrap(),
                4096,
                NonNull::new(base as *mut u8).unwrap(),
                0x8000_0000,
                0x4000,
                DmaTranslation::Offset(0x1_0000_0000 - 0x8000_0000),
                NonNull::new(host_base as *mut u8).unwrap(),
                0x1000,
                FakeClock(0.into()),
            )
        };
        p.bar_write32(0x10, Be32::new(0xdead_beef));
        assert_eq!(p.bar_read32(0x10).get(), 0xdead_beef);
        let a = p.dma_alloc(100, 8).unwrap();
        let b = p.dma_alloc(4096, 4096).unwrap();
        assert_eq!(a.iova, 0x1_0000_0000);
        assert_eq!(b.iova, 0x1_0000_1000);
        assert_eq!(b.cpu.as_ptr() as usize, base + 0x1000);
        assert_eq!(a.len, 128);
        // SAFETY: `a` is live and at least one byte long.
        unsafe { a.cpu.as_ptr().write(7) };
        p.dma_free(a).unwrap();
        assert!(p.dma_free(a).is_err(), "double free");
        let c = p.dma_alloc(64, 64).unwrap();
        // SAFETY: `c` is live and at least one byte long.
        let first = unsafe { c.cpu.as_ptr().read() };
        assert_eq!(first, 0, "reused memory is zeroed");
        let d = p.dma_alloc(64, 0x2000).unwrap();
        assert_eq!(
            d.iova % 0x2000,
            0,
            "device address aligned, not just the offset"
        );
        assert!(p.dma_alloc(0x4000, 8).is_err(), "arena exhausted");
        assert!(p.now_ns() < p.now_ns());
        let h = p.host_alloc(100, 8).unwrap();
        assert_eq!(
            h.as_ptr() as usize,
            host_base,
            "host memory from the host arena"
        );
        let h2 = p.host_alloc(0x1000 - 128, 64).unwrap();
        assert!(p.host_alloc(64, 8).is_err(), "host arena exhausted");
        // SAFETY: both are live host allocations of `p`, unused.
        unsafe {
            p.host_free(h, 100, 8);
            p.host_free(h2, 0x1000 - 128, 64);
        }
        assert!(
            p.host_alloc(0x1000, 64).is_ok(),
            "freed host memory is reusable"
        );
    }
}
