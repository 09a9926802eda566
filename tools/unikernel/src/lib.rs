//! How a unikernel (or any kernel without Linux's VFIO) gives the mlx5 driver what it needs:
//! an implementation of [`mlx5::Platform`] with no operating system underneath. CI builds this
//! crate for `x86_64-unknown-none`; docs/unikernel.md walks through it.
//!
//! The three things a platform provides:
//!
//! 1. **BAR0**, mapped uncached into the address space by the kernel's own page tables, reached
//!    through [`mlx5::io::MmioRegion`] (volatile, bounds-checked). The 64-bit UAR doorbell store
//!    is `MmioRegion::write64`.
//! 2. **DMA memory**: here a physically contiguous arena reserved at boot and carved by a
//!    first-fit allocator ([`Arena`]). The device address of a byte is its physical address
//!    without an IOMMU ([`DmaTranslation::Identity`]), or that plus a fixed offset when the kernel
//!    programmed the IOMMU with one linear mapping of the arena ([`DmaTranslation::Offset`]).
//!    x86 PCIe DMA is cache-coherent, so ordinary write-back memory is fine.
//! 3. **Host memory** for the driver's own bookkeeping (work-request tables, ring counters):
//!    a second arena, outside the DMA arena and never mapped for the device in the IOMMU, so
//!    nothing the device writes can reach it.
//! 4. **A clock** for the driver's deadlines ([`Clock`]), e.g. the TSC scaled by its frequency
//!    ([`TscClock`]), and a `relax` for polling loops (the `pause` instruction).
#![no_std]

use core::ptr::NonNull;

use mlx5::ifc::{Be32, Be64};
use mlx5::io::MmioRegion;
use mlx5::{Device, DeviceConfig, DmaRegion, Platform, PlatformError};

/// Monotonic time for the driver's deadlines.
pub trait Clock {
    /// Nanoseconds since an arbitrary start; never goes backwards.
    fn now_ns(&self) -> u64;
}

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

/// How the device addresses the arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DmaTranslation {
    /// No IOMMU (or one in pass-through): device address = physical address.
    Identity,
    /// The IOMMU maps the arena linearly: device address = physical address + this offset
    /// (wrapping), e.g. an arena at physical 0x1_2340_0000 mapped at IOVA 0x10_0000.
    Offset(u64),
}

/// Free ranges of the arena (offsets, end exclusive), first fit, coalescing.
const MAX_FREE_RANGES: usize = 256;

/// A first-fit allocator over `0..len` offsets with at most [`MAX_FREE_RANGES`] free ranges.
#[derive(Debug)]
pub struct Arena {
    free: heapless::Vec<(usize, usize), MAX_FREE_RANGES>,
}

impl Arena {
    /// An arena of `len` bytes, all free.
    pub fn new(len: usize) -> Self {
        let mut free = heapless::Vec::new();
        if len > 0 {
            let _ = free.push((0, len));
        }
        Self { free }
    }

    /// `len` bytes whose address `base + offset` is aligned to `align` (a power of two), lowest
    /// first; returns the offset.
    pub fn alloc(&mut self, len: usize, align: usize, base: u64) -> Option<usize> {
        if len == 0 || !align.is_power_of_two() {
            return None;
        }
        let a = align as u64;
        for i in 0..self.free.len() {
            let (s, e) = self.free[i];
            let addr = base.checked_add(s as u64)?;
            let aligned = addr.checked_add(a - 1)? & !(a - 1);
            let start = s.checked_add(usize::try_from(aligned - addr).ok()?)?;
            let end = start.checked_add(len)?;
            if end > e {
                continue;
            }
            match (start > s, end < e) {
                (true, true) => {
                    self.free[i] = (s, start);
                    self.free.insert(i + 1, (end, e)).ok()?;
                }
                (true, false) => self.free[i] = (s, start),
                (false, true) => self.free[i] = (end, e),
                (false, false) => {
                    self.free.remove(i);
                }
            }
            return Some(start);
        }
        None
    }

    /// Returns `len` bytes at `start`; `false` if they overlap free space (a double free) or the
    /// free list is full.
    pub fn free(&mut self, start: usize, len: usize) -> bool {
        let Some(end) = start.checked_add(len) else {
            return false;
        };
        let i = self.free.partition_point(|&(_, e)| e <= start);
        if self.free.get(i).is_some_and(|&(s, _)| s < end) {
            return false;
        }
        let prev = i > 0 && self.free[i - 1].1 == start;
        let next = self.free.get(i).is_some_and(|&(s, _)| s == end);
        match (prev, next) {
            (true, true) => {
                self.free[i - 1].1 = self.free[i].1;
                self.free.remove(i);
            }
            (true, false) => self.free[i - 1].1 = end,
            (false, true) => self.free[i].0 = start,
            (false, false) => return self.free.insert(i, (start, end)).is_ok(),
        }
        true
    }
}

/// Live allocations the platform remembers, to check frees.
const MAX_ALLOCS: usize = 4096;

struct Pool {
    arena: Arena,
    /// (offset, rounded length) of every live allocation, unordered.
    live: heapless::Vec<(usize, usize), MAX_ALLOCS>,
}

impl Pool {
    fn new(len: usize) -> Self {
        Self {
            arena: Arena::new(len),
            live: heapless::Vec::new(),
        }
    }

    /// `len` bytes (rounded up to 64) whose address `base + offset` is aligned to `align` (at
    /// least 64); returns the offset and the rounded length.
    fn alloc(&mut self, len: usize, align: usize, base: u64) -> Option<(usize, usize)> {
        let size = len.max(1).checked_next_multiple_of(64)?;
        let off = self.arena.alloc(size, align.max(64), base)?;
        if self.live.push((off, size)).is_err() {
            self.arena.free(off, size);
            return None;
        }
        Some((off, size))
    }

    /// Frees the live allocation at `off`; its rounded length, or `None` if there is none.
    fn free(&mut self, off: usize) -> Option<usize> {
        let i = self.live.iter().position(|&(o, _)| o == off)?;
        let (_, size) = self.live.swap_remove(i);
        self.arena.free(off, size).then_some(size)
    }
}

/// A [`Platform`] for a kernel that maps BAR0 itself and owns a DMA arena.
pub struct BareMetal<C: Clock> {
    bar: MmioRegion,
    bar_len: u64,
    arena_virt: NonNull<u8>,
    arena_phys: u64,
    translation: DmaTranslation,
    dma: spin::Mutex<Pool>,
    host_virt: NonNull<u8>,
    host: spin::Mutex<Pool>,
    clock: C,
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
            bar_len: bar_len as u64,
            arena_virt,
            arena_phys,
            translation,
            dma: spin::Mutex::new(Pool::new(arena_len)),
            host_virt,
            host: spin::Mutex::new(Pool::new(host_len)),
            clock,
        }
    }

    fn device_address(&self, offset: usize) -> u64 {
        let phys = self.arena_phys + offset as u64;
        match self.translation {
            DmaTranslation::Identity => phys,
            DmaTranslation::Offset(o) => phys.wrapping_add(o),
        }
    }

    /// Size of BAR0, for [`DeviceConfig::bar_size`].
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
        self.bar.write_bf(offset, chunk)
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

/// Brings the function up on this platform: what a unikernel's NIC driver calls at boot.
pub fn bring_up<C: Clock>(platform: BareMetal<C>) -> Result<Device<BareMetal<C>>, mlx5::Error> {
    let config = DeviceConfig {
        bar_size: platform.bar_size(),
        ..DeviceConfig::default()
    };
    Device::open(platform, config)
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
    fn arena_first_fit_and_coalescing() {
        let mut a = Arena::new(0x10000);
        assert_eq!(a.alloc(0x100, 0x1000, 0), Some(0));
        assert_eq!(a.alloc(0x40, 0x40, 0), Some(0x100));
        assert_eq!(a.alloc(0x1000, 0x1000, 0), Some(0x1000));
        assert!(a.free(0x100, 0x40));
        assert!(!a.free(0x100, 0x40), "double free");
        assert!(a.free(0, 0x100));
        assert!(a.free(0x1000, 0x1000));
        assert_eq!(a.free.as_slice(), &[(0, 0x10000)]);
        assert_eq!(a.alloc(0x10001, 1, 0), None);
        // Alignment is of `base + offset`: an arena whose device address is 0x1000 past a
        // 64 KiB boundary gives a 64 KiB-aligned block at offset 0xf000.
        assert_eq!(a.alloc(0x100, 0x10000, 0x7_1000), Some(0xf000));
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
