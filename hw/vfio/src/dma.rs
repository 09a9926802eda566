//! DMA memory for a VFIO device: [`HostMemory`] (anonymous, pre-faulted, hugepage-backed where
//! the system has hugepages reserved) and the pool behind [`Platform::dma_alloc`].
//!
//! The pool maps memory into the IOMMU in 2 MiB chunks (one IOVA mapping per chunk, 2 MiB
//! aligned, so one hugepage each) and carves the driver's allocations out of them with
//! [`RangeAllocator`]. That keeps the number of type-1 mappings small (the kernel limits them,
//! 65535 by default) however many 4 KiB firmware pages the device asks for.
//!
//! Pinning: the type-1 IOMMU pins every mapped page and charges it to RLIMIT_MEMLOCK. The pages
//! are not `mlock`ed on top: that would charge the same pages a second time (the kernel counts
//! `mlock` and VFIO pins separately) and halve the usable limit, and a pinned page can neither be
//! swapped nor migrated anyway. `MADV_DONTFORK` keeps a forked child from sharing them.
//!
//! Teardown order, for each chunk on every path (free, error, drop): IOMMU unmap first, then
//! give the IOVA range back, then unmap the host memory. If the IOMMU unmap fails the host memory
//! is leaked on purpose: the device might still write it.
//!
//! [`Platform::dma_alloc`]: mlx5::Platform::dma_alloc
#![allow(unsafe_code)] // mmap/munmap and raw accesses to device-visible memory.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use mlx5::io::OutOfBounds;
use mlx5::{DmaRegion, PlatformError};

use crate::error::{human_bytes, VfioError};
use crate::iommu::{Iommu, RangeAllocator};

/// Size (and IOVA alignment) of a pool chunk: one 2 MiB hugepage.
pub const CHUNK: usize = 2 << 20;
/// Granularity of pool allocations: a cache line, so two buffers never share one.
const GRANULE: u64 = 64;
const PAGE: usize = 4096;
const MAP_HUGE_2MB: libc::c_int = 21 << libc::MAP_HUGE_SHIFT;

/// Anonymous host memory meant for DMA: page aligned, zeroed, pre-faulted, `MADV_DONTFORK`.
/// It hands out only raw pointers and volatile accessors, never references, so it may be mapped
/// for device access while the CPU uses it.
#[derive(Debug)]
pub struct HostMemory {
    ptr: NonNull<u8>,
    len: usize,
    huge: bool,
}

// SAFETY: the mapping is owned by this value alone and is only reached through raw pointers with
// volatile accesses, so moving or sharing the handle between threads cannot create a data race
// the device does not already create.
unsafe impl Send for HostMemory {}
// SAFETY: as above.
unsafe impl Sync for HostMemory {}

impl HostMemory {
    /// Maps `len` bytes (rounded up to 4 KiB, or to 2 MiB for hugepages). With `huge`, tries a
    /// 2 MiB hugepage mapping first and falls back to normal pages.
    pub fn new(len: usize, huge: bool) -> io::Result<Self> {
        let len = len.max(1);
        if huge {
            let hlen = len.div_ceil(CHUNK) * CHUNK;
            if let Ok(mut m) = Self::map(hlen, libc::MAP_HUGETLB | MAP_HUGE_2MB) {
                m.huge = true;
                return Ok(m);
            }
        }
        Self::map(len.div_ceil(PAGE) * PAGE, 0)
    }

    fn map(len: usize, extra: libc::c_int) -> io::Result<Self> {
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE | extra;
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing touches no
        // existing memory; the result is checked before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave 0"))?;
        // SAFETY: `ptr..ptr+len` is the mapping just created; madvise only changes its flags.
        if unsafe { libc::madvise(p, len, libc::MADV_DONTFORK) } != 0 {
            log::debug!("MADV_DONTFORK: {}", io::Error::last_os_error());
        }
        Ok(Self {
            ptr,
            len,
            huge: false,
        })
    }

    /// Length in bytes (after rounding).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty (never: at least one page).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether it is backed by 2 MiB hugepages.
    pub fn is_huge(&self) -> bool {
        self.huge
    }

    /// The first byte.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    fn check(&self, off: usize, len: usize) -> Result<(), OutOfBounds> {
        match off.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(OutOfBounds {
                offset: off,
                len,
                size: self.len,
            }),
        }
    }

    /// Volatile byte reads (the device may write concurrently).
    pub fn read(&self, off: usize, dst: &mut [u8]) -> Result<(), OutOfBounds> {
        self.check(off, dst.len())?;
        for (i, d) in dst.iter_mut().enumerate() {
            // SAFETY: in bounds (checked); the mapping lives as long as `self`.
            *d = unsafe { self.ptr.as_ptr().add(off + i).read_volatile() };
        }
        Ok(())
    }

    /// Volatile byte writes.
    pub fn write(&self, off: usize, src: &[u8]) -> Result<(), OutOfBounds> {
        self.check(off, src.len())?;
        for (i, s) in src.iter().enumerate() {
            // SAFETY: in bounds (checked); the mapping lives as long as `self`.
            unsafe { self.ptr.as_ptr().add(off + i).write_volatile(*s) };
        }
        Ok(())
    }

    /// Fills `len` bytes at `off` with `byte` (volatile).
    pub fn fill(&self, off: usize, len: usize, byte: u8) -> Result<(), OutOfBounds> {
        self.check(off, len)?;
        for i in 0..len {
            // SAFETY: in bounds (checked); the mapping lives as long as `self`.
            unsafe { self.ptr.as_ptr().add(off + i).write_volatile(byte) };
        }
        Ok(())
    }
}

impl Drop for HostMemory {
    fn drop(&mut self) {
        // SAFETY: this value owns the mapping; nothing refers into it once it is dropped (the
        // IOMMU mapping, if any, was removed first: see the module docs).
        if unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) } != 0 {
            log::error!("munmap of DMA memory: {}", io::Error::last_os_error());
        }
    }
}

/// The soft RLIMIT_MEMLOCK in bytes (`u64::MAX` = unlimited).
pub fn memlock_limit() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid, writable rlimit for the duration of the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut r) } != 0 {
        return 0;
    }
    if r.rlim_cur == libc::RLIM_INFINITY {
        u64::MAX
    } else {
        r.rlim_cur
    }
}

/// Whether a `/proc/<pid>/status` text grants CAP_IPC_LOCK (no memlock limit) in `CapEff`.
pub fn status_has_ipc_lock(status: &str) -> bool {
    const CAP_IPC_LOCK: u32 = 14;
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << CAP_IPC_LOCK) != 0)
}

/// Whether this process may pin `needed` bytes: CAP_IPC_LOCK, or a high enough RLIMIT_MEMLOCK.
pub fn check_memlock(needed: u64) -> Result<(), VfioError> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let limit = memlock_limit();
    if status_has_ipc_lock(&status) || limit >= needed {
        return Ok(());
    }
    Err(VfioError::MemlockTooLow { limit, needed })
}

/// A failed VFIO_IOMMU_MAP_DMA explained: ENOMEM there nearly always means the memlock limit.
pub(crate) fn map_error(len: usize, code: i32) -> VfioError {
    let limit = memlock_limit();
    if code == libc::ENOMEM && limit != u64::MAX {
        return VfioError::MemlockTooLow {
            limit,
            needed: len as u64,
        };
    }
    let hint = match code {
        libc::ENOSPC => " (the container's DMA mapping limit, vfio_iommu_type1 dma_entry_limit)",
        libc::EEXIST => " (the IOVA is mapped already)",
        _ => "",
    };
    VfioError::io(
        format!("IOMMU mapping of {len} bytes{hint}"),
        io::Error::from_raw_os_error(code),
    )
}

/// What the pool needs from the IOMMU (a trait so the pool's policy is testable without one).
pub(crate) trait IovaMapper: Send + Sync {
    /// Reserves IOVA space.
    fn alloc_iova(&self, len: u64, align: u64) -> Option<u64>;
    /// Returns IOVA space.
    fn free_iova(&self, iova: u64, len: u64);
    /// Maps host memory at `iova`; errno on failure.
    ///
    /// # Safety
    ///
    /// As [`Iommu::map`].
    unsafe fn map(&self, iova: u64, cpu: *mut u8, len: usize) -> Result<(), i32>;
    /// Removes a mapping.
    fn unmap(&self, iova: u64, len: usize) -> Result<(), VfioError>;
}

impl IovaMapper for Iommu {
    fn alloc_iova(&self, len: u64, align: u64) -> Option<u64> {
        Iommu::alloc_iova(self, len, align)
    }
    fn free_iova(&self, iova: u64, len: u64) {
        Iommu::free_iova(self, iova, len)
    }
    unsafe fn map(&self, iova: u64, cpu: *mut u8, len: usize) -> Result<(), i32> {
        // SAFETY: the same contract, passed on.
        unsafe { Iommu::map(self, iova, cpu, len) }
    }
    fn unmap(&self, iova: u64, len: usize) -> Result<(), VfioError> {
        Iommu::unmap(self, iova, len)
    }
}

struct Chunk {
    mem: HostMemory,
    iova: u64,
    /// Free offsets inside the chunk.
    space: RangeAllocator,
    used: u64,
    /// A chunk made for one large allocation.
    dedicated: bool,
}

#[derive(Default)]
struct PoolState {
    /// By IOVA of the first byte.
    chunks: BTreeMap<u64, Chunk>,
    /// Live allocations: IOVA → rounded length.
    allocs: HashMap<u64, u64>,
}

/// Counters of the DMA pool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DmaStats {
    /// Chunks mapped in the IOMMU.
    pub chunks: usize,
    /// Of which backed by hugepages.
    pub huge_chunks: usize,
    /// Bytes mapped (pinned).
    pub mapped_bytes: u64,
    /// Live allocations.
    pub allocations: usize,
    /// Bytes allocated to them (rounded to 64).
    pub allocated_bytes: u64,
}

/// The pool behind `dma_alloc`/`dma_free`.
pub(crate) struct DmaPool<M: IovaMapper = Iommu> {
    iommu: Arc<M>,
    state: Mutex<PoolState>,
    hugepages: AtomicBool,
}

impl<M: IovaMapper> std::fmt::Debug for DmaPool<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DmaPool")
            .field("stats", &self.stats())
            .finish()
    }
}

impl<M: IovaMapper> DmaPool<M> {
    pub(crate) fn new(iommu: Arc<M>, hugepages: bool) -> Self {
        Self {
            iommu,
            state: Mutex::new(PoolState::default()),
            hugepages: AtomicBool::new(hugepages),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn stats(&self) -> DmaStats {
        let st = self.lock();
        let mut s = DmaStats {
            allocations: st.allocs.len(),
            allocated_bytes: st.allocs.values().sum(),
            ..DmaStats::default()
        };
        for c in st.chunks.values() {
            s.chunks += 1;
            s.huge_chunks += usize::from(c.mem.is_huge());
            s.mapped_bytes += c.mem.len() as u64;
        }
        s
    }

    /// Maps a new chunk of at least `len` bytes.
    fn new_chunk(&self, len: usize, dedicated: bool) -> Result<Chunk, PlatformError> {
        let len = len.div_ceil(CHUNK) * CHUNK;
        let huge = self.hugepages.load(Ordering::Relaxed);
        let mem = HostMemory::new(len, huge).map_err(|e| {
            log::error!("DMA memory of {}: {e}", human_bytes(len as u64));
            PlatformError::OutOfDmaMemory { len, align: CHUNK }
        })?;
        if huge && !mem.is_huge() {
            log::info!("no free 2 MiB hugepages; DMA memory uses 4 KiB pages (docs/vfio.md)");
            self.hugepages.store(false, Ordering::Relaxed);
        }
        let Some(iova) = self.iommu.alloc_iova(len as u64, CHUNK as u64) else {
            log::error!("no IOVA range of {} left", human_bytes(len as u64));
            return Err(PlatformError::OutOfDmaMemory { len, align: CHUNK });
        };
        // SAFETY: `mem` is a private anonymous mapping that the chunk owns and that is only
        // reached through raw pointers from now on (the driver's `DmaBuf` uses atomics); the
        // chunk is unmapped from the IOMMU before `mem` is dropped (`release`).
        if let Err(code) = unsafe { self.iommu.map(iova, mem.as_ptr(), mem.len()) } {
            self.iommu.free_iova(iova, len as u64);
            log::error!("{}", map_error(len, code));
            return Err(PlatformError::MapFailed { len, code });
        }
        Ok(Chunk {
            space: RangeAllocator::new(&[(0, len as u64 - 1)]),
            mem,
            iova,
            used: 0,
            dedicated,
        })
    }

    /// Unmaps a chunk from the IOMMU, returns its IOVAs, then frees its memory.
    fn release(&self, c: Chunk) {
        match self.iommu.unmap(c.iova, c.mem.len()) {
            Ok(()) => self.iommu.free_iova(c.iova, c.mem.len() as u64),
            Err(e) => {
                log::error!("{e}; leaking its {} bytes of memory", c.mem.len());
                std::mem::forget(c.mem);
            }
        }
    }

    pub(crate) fn alloc(&self, len: usize, align: usize) -> Result<DmaRegion, PlatformError> {
        let align = align.max(1);
        if !align.is_power_of_two() || align > CHUNK {
            return Err(PlatformError::OutOfDmaMemory { len, align });
        }
        let size = (len.max(1) as u64).div_ceil(GRANULE) * GRANULE;
        let a = (align as u64).max(GRANULE);
        let mut st = self.lock();
        let mut found = None;
        if size <= CHUNK as u64 {
            for c in st.chunks.values_mut().filter(|c| !c.dedicated) {
                if let Some(off) = c.space.alloc(size, a) {
                    c.used += size;
                    found = Some((c.iova, off));
                    break;
                }
            }
        }
        let (chunk_iova, off) = match found {
            Some(f) => f,
            None => {
                let dedicated = size > CHUNK as u64;
                let mut c = self.new_chunk(size as usize, dedicated)?;
                // A fresh chunk is at least `size` long and aligned to its own size, so this
                // only fails if the sub-allocator is broken; say so instead of panicking.
                let Some(off) = c.space.alloc(size, a) else {
                    self.release(c);
                    return Err(PlatformError::OutOfDmaMemory { len, align });
                };
                c.used += size;
                let iova = c.iova;
                st.chunks.insert(iova, c);
                (iova, off)
            }
        };
        let Some(c) = st.chunks.get(&chunk_iova) else {
            return Err(PlatformError::OutOfDmaMemory { len, align });
        };
        // SAFETY: `off + size <= chunk length` (the sub-allocator only hands out offsets inside
        // the chunk), so the pointer stays inside the mapping.
        let cpu = unsafe { c.mem.as_ptr().add(off as usize) };
        // SAFETY: the range was free (no one else uses it; the device was told to stop using it
        // when it was freed), and it lies inside the chunk's live mapping.
        unsafe { std::ptr::write_bytes(cpu, 0, size as usize) };
        let iova = chunk_iova + off;
        st.allocs.insert(iova, size);
        let Some(cpu) = NonNull::new(cpu) else {
            return Err(PlatformError::OutOfDmaMemory { len, align });
        };
        Ok(DmaRegion {
            cpu,
            iova,
            len: size as usize,
        })
    }

    pub(crate) fn free(&self, region: DmaRegion) -> Result<(), PlatformError> {
        let unknown = PlatformError::UnknownRegion { iova: region.iova };
        let mut st = self.lock();
        let size = *st.allocs.get(&region.iova).ok_or(unknown)?;
        let (&chunk_iova, c) = st
            .chunks
            .range_mut(..=region.iova)
            .next_back()
            .ok_or(unknown)?;
        let off = region.iova - chunk_iova;
        let cpu_ok = region.cpu.as_ptr() as usize == c.mem.as_ptr() as usize + off as usize;
        if !cpu_ok || c.space.free(off, size).is_err() {
            return Err(unknown);
        }
        c.used -= size;
        st.allocs.remove(&region.iova);
        let Some(c) = st.chunks.get(&chunk_iova) else {
            return Err(unknown);
        };
        // Keep one empty regular chunk for the next allocation; release the rest.
        let release = c.used == 0
            && (c.dedicated
                || st
                    .chunks
                    .iter()
                    .any(|(&k, o)| k != chunk_iova && o.used == 0 && !o.dedicated));
        if release {
            if let Some(c) = st.chunks.remove(&chunk_iova) {
                self.release(c);
            }
        }
        Ok(())
    }
}

impl<M: IovaMapper> Drop for DmaPool<M> {
    fn drop(&mut self) {
        let st = std::mem::take(&mut *self.lock());
        if !st.allocs.is_empty() {
            log::debug!(
                "{} DMA allocations still live at teardown; unmapping them",
                st.allocs.len()
            );
        }
        for (_, c) in st.chunks {
            self.release(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_memory_is_zeroed_aligned_and_bounds_checked() {
        let m = HostMemory::new(5000, false).unwrap();
        assert_eq!(m.len(), 8192);
        assert_eq!(m.as_ptr() as usize % PAGE, 0);
        let mut b = [0xffu8; 16];
        m.read(8192 - 16, &mut b).unwrap();
        assert_eq!(b, [0; 16]);
        m.write(100, b"hello").unwrap();
        let mut h = [0u8; 5];
        m.read(100, &mut h).unwrap();
        assert_eq!(&h, b"hello");
        m.fill(0, 8192, 0xa5).unwrap();
        m.read(8190, &mut h[..2]).unwrap();
        assert_eq!(&h[..2], &[0xa5, 0xa5]);
        assert!(m.read(8190, &mut h).is_err());
        assert!(m.write(usize::MAX, b"x").is_err());
    }

    #[test]
    fn hugepage_request_falls_back_to_normal_pages() {
        // Whether or not this machine has hugepages reserved, the memory is usable and 2 MiB.
        let m = HostMemory::new(1, true).unwrap();
        if m.is_huge() {
            assert_eq!(m.len(), CHUNK);
            assert_eq!(m.as_ptr() as usize % CHUNK, 0);
        } else {
            assert_eq!(m.len(), PAGE);
        }
        // The mapping is still there once `new` returned (a hugepage mapping once got unmapped
        // on its way out; the QEMU test caught it as EFAULT from the IOMMU map).
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let start = format!("{:x}-", m.as_ptr() as usize);
        assert!(
            maps.lines().any(|l| l.starts_with(&start)),
            "{start} not in maps"
        );
        m.write(0, &[1]).unwrap();
    }

    #[test]
    fn capability_parsing() {
        let root = "Name:\tx\nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\n";
        assert!(status_has_ipc_lock(root));
        let user = "CapEff:\t0000000000000000\n";
        assert!(!status_has_ipc_lock(user));
        assert!(!status_has_ipc_lock("garbage"));
        assert!(status_has_ipc_lock("CapEff:\t0000000000004000"));
    }

    #[test]
    fn map_errors_explain_memlock() {
        let e = map_error(CHUNK, libc::ENOSPC).to_string();
        assert!(e.contains("dma_entry_limit"), "{e}");
        if memlock_limit() != u64::MAX {
            assert!(matches!(
                map_error(CHUNK, libc::ENOMEM),
                VfioError::MemlockTooLow { .. }
            ));
        }
    }

    /// An IOMMU stand-in: hands out IOVAs, records map/unmap calls, fails on request.
    #[derive(Default)]
    struct FakeIommu {
        iova: Mutex<RangeAllocator>,
        log: Mutex<Vec<(&'static str, u64, usize)>>,
        fail_map: std::sync::atomic::AtomicI32,
        fail_unmap: AtomicBool,
    }

    impl FakeIommu {
        fn new() -> Arc<Self> {
            Arc::new(Self {
                iova: Mutex::new(RangeAllocator::new(&[(
                    crate::iommu::MIN_IOVA,
                    (1 << 39) - 1,
                )])),
                ..Self::default()
            })
        }
        fn events(&self) -> Vec<(&'static str, u64, usize)> {
            self.log.lock().unwrap().clone()
        }
        fn free_bytes(&self) -> u64 {
            self.iova.lock().unwrap().free_bytes()
        }
    }

    impl IovaMapper for FakeIommu {
        fn alloc_iova(&self, len: u64, align: u64) -> Option<u64> {
            self.iova.lock().unwrap().alloc(len, align)
        }
        fn free_iova(&self, iova: u64, len: u64) {
            self.iova.lock().unwrap().free(iova, len).unwrap();
        }
        unsafe fn map(&self, iova: u64, _cpu: *mut u8, len: usize) -> Result<(), i32> {
            match self.fail_map.load(Ordering::Relaxed) {
                0 => {
                    self.log.lock().unwrap().push(("map", iova, len));
                    Ok(())
                }
                code => Err(code),
            }
        }
        fn unmap(&self, iova: u64, len: usize) -> Result<(), VfioError> {
            if self.fail_unmap.load(Ordering::Relaxed) {
                return Err(VfioError::io(
                    "unmap",
                    io::Error::from_raw_os_error(libc::EINVAL),
                ));
            }
            self.log.lock().unwrap().push(("unmap", iova, len));
            Ok(())
        }
    }

    fn read(r: &DmaRegion, off: usize) -> u8 {
        // SAFETY: test-only; `off < r.len` and the region is live.
        unsafe { r.cpu.as_ptr().add(off).read_volatile() }
    }

    fn write(r: &DmaRegion, off: usize, v: u8) {
        // SAFETY: test-only; `off < r.len` and the region is live.
        unsafe { r.cpu.as_ptr().add(off).write_volatile(v) }
    }

    #[test]
    fn small_allocations_share_a_chunk() {
        let io = FakeIommu::new();
        let pool = DmaPool::new(io.clone(), false);
        let a = pool.alloc(4096, 4096).unwrap();
        let b = pool.alloc(100, 8).unwrap();
        let c = pool.alloc(576, 1024).unwrap();
        assert_eq!(io.events().len(), 1, "one IOMMU mapping for all three");
        assert_eq!(a.iova % 4096, 0);
        assert_eq!(c.iova % 1024, 0);
        assert!(a.iova >= crate::iommu::MIN_IOVA);
        for r in [&a, &b, &c] {
            assert_eq!(r.cpu.as_ptr() as usize % 8, 0);
            assert!((0..r.len).all(|i| read(r, i) == 0));
        }
        assert_eq!(b.len, 128, "rounded to the 64-byte granule");
        let s = pool.stats();
        assert_eq!(
            (s.chunks, s.allocations, s.mapped_bytes),
            (1, 3, CHUNK as u64)
        );
        // CPU and device offsets agree inside the chunk.
        let off = |r: &DmaRegion| (r.iova - a.iova) as isize;
        let coff = |r: &DmaRegion| r.cpu.as_ptr() as isize - a.cpu.as_ptr() as isize;
        assert_eq!(off(&c), coff(&c));
        for r in [a, b, c] {
            pool.free(r).unwrap();
        }
        // The last empty chunk is kept for the next allocation.
        assert_eq!(pool.stats().chunks, 1);
        assert_eq!(io.events().len(), 1);
    }

    #[test]
    fn freed_memory_comes_back_zeroed() {
        let pool = DmaPool::new(FakeIommu::new(), false);
        let a = pool.alloc(256, 64).unwrap();
        write(&a, 7, 0xee);
        let (iova, len) = (a.iova, a.len);
        pool.free(a).unwrap();
        let b = pool.alloc(256, 64).unwrap();
        assert_eq!((b.iova, b.len), (iova, len));
        assert_eq!(read(&b, 7), 0);
    }

    #[test]
    fn large_allocations_get_their_own_chunk_released_on_free() {
        let io = FakeIommu::new();
        let before = io.free_bytes();
        let pool = DmaPool::new(io.clone(), false);
        let big = pool.alloc(3 << 20, 2 << 20).unwrap();
        assert_eq!(big.iova % (2 << 20), 0);
        assert_eq!(io.events(), vec![("map", big.iova, 4 << 20)]);
        let small = pool.alloc(64, 64).unwrap();
        assert_ne!(
            small.iova >> 21,
            big.iova >> 21,
            "never carved from a dedicated chunk"
        );
        pool.free(big).unwrap();
        assert_eq!(io.events().len(), 3);
        assert_eq!(io.events()[2].0, "unmap");
        pool.free(small).unwrap();
        drop(pool);
        assert_eq!(io.free_bytes(), before, "every IOVA came back");
        let ev = io.events();
        assert_eq!(ev.iter().filter(|e| e.0 == "map").count(), 2);
        assert_eq!(ev.iter().filter(|e| e.0 == "unmap").count(), 2);
    }

    #[test]
    fn bad_frees_and_alignments_are_refused() {
        let pool = DmaPool::new(FakeIommu::new(), false);
        let a = pool.alloc(64, 64).unwrap();
        let bogus = DmaRegion {
            iova: a.iova + 64,
            ..a
        };
        assert_eq!(
            pool.free(bogus),
            Err(PlatformError::UnknownRegion { iova: a.iova + 64 })
        );
        let wrong_cpu = DmaRegion {
            cpu: NonNull::new(a.cpu.as_ptr().wrapping_add(64)).unwrap(),
            ..a
        };
        assert!(pool.free(wrong_cpu).is_err());
        pool.free(a).unwrap();
        assert!(pool.free(a).is_err(), "double free");
        assert!(pool.alloc(64, 4 << 20).is_err());
        assert!(pool.alloc(64, 3).is_err());
        assert_eq!(pool.stats().allocations, 0);
    }

    #[test]
    fn a_refused_mapping_gives_everything_back() {
        let io = FakeIommu::new();
        let before = io.free_bytes();
        let pool = DmaPool::new(io.clone(), false);
        io.fail_map.store(libc::ENOMEM, Ordering::Relaxed);
        assert_eq!(
            pool.alloc(4096, 4096),
            Err(PlatformError::MapFailed {
                len: CHUNK,
                code: libc::ENOMEM
            })
        );
        assert_eq!(io.free_bytes(), before);
        assert_eq!(pool.stats(), DmaStats::default());
        io.fail_map.store(0, Ordering::Relaxed);
        assert!(pool.alloc(4096, 4096).is_ok());
    }

    #[test]
    fn drop_unmaps_every_chunk_and_a_failed_unmap_keeps_the_iova() {
        let io = FakeIommu::new();
        let before = io.free_bytes();
        let pool = DmaPool::new(io.clone(), false);
        let _a = pool.alloc(CHUNK, 4096).unwrap();
        let _b = pool.alloc(CHUNK, 4096).unwrap();
        assert_eq!(pool.stats().chunks, 2);
        io.fail_unmap.store(true, Ordering::Relaxed);
        drop(pool);
        // Still mapped as far as the IOMMU knows: the IOVAs stay reserved (memory leaked).
        assert_eq!(io.free_bytes(), before - 2 * CHUNK as u64);
    }
}
