//! DMA memory for a VFIO device: the pool behind [`Platform::dma_alloc`], carved out of
//! [`HostMemory`] ([`crate::memory`]).
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
//! is leaked on purpose: the device might still write it. That order is kept by the chunk type
//! itself (`DmaChunk`, in the crate's unsafe room `sys`, which owns the memory and its IOMMU
//! mapping); this module is the policy: which chunk an allocation comes from, when a chunk goes.
//!
//! [`Platform::dma_alloc`]: mlx5::Platform::dma_alloc

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use mlx5::{DmaRegion, PlatformError};

use crate::error::human_bytes;
use crate::iommu::{Iommu, RangeAllocator};
use crate::memory::map_error;
pub use crate::memory::{check_memlock, memlock_limit, status_has_ipc_lock, HostMemory, CHUNK};
use crate::sys::dma::{DmaChunk, IovaMapper};

/// Granularity of pool allocations: a cache line, so two buffers never share one.
const GRANULE: u64 = 64;

struct Chunk<M: IovaMapper> {
    /// The memory and its IOMMU mapping (dropping it unmaps, then frees).
    dma: DmaChunk<M>,
    /// Free offsets inside the chunk.
    space: RangeAllocator,
    used: u64,
    /// A chunk made for one large allocation.
    dedicated: bool,
}

struct PoolState<M: IovaMapper> {
    /// By IOVA of the first byte.
    chunks: BTreeMap<u64, Chunk<M>>,
    /// Live allocations: IOVA → rounded length.
    allocs: HashMap<u64, u64>,
}

impl<M: IovaMapper> Default for PoolState<M> {
    fn default() -> Self {
        Self {
            chunks: BTreeMap::new(),
            allocs: HashMap::new(),
        }
    }
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
    state: Mutex<PoolState<M>>,
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

    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState<M>> {
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
            s.huge_chunks += usize::from(c.dma.is_huge());
            s.mapped_bytes += c.dma.len() as u64;
        }
        s
    }

    /// Maps a new chunk of at least `len` bytes.
    fn new_chunk(&self, len: usize, dedicated: bool) -> Result<Chunk<M>, PlatformError> {
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
        let dma = match DmaChunk::map(self.iommu.clone(), mem, iova) {
            Ok(d) => d,
            Err(code) => {
                self.iommu.free_iova(iova, len as u64);
                log::error!("{}", map_error(len, code));
                return Err(PlatformError::MapFailed { len, code });
            }
        };
        Ok(Chunk {
            space: RangeAllocator::new(&[(0, len as u64 - 1)]),
            dma,
            used: 0,
            dedicated,
        })
    }

    /// Unmaps a chunk from the IOMMU, returns its IOVAs, then frees its memory (or leaks it if
    /// the unmap failed): what dropping its `DmaChunk` does.
    fn release(&self, c: Chunk<M>) {
        drop(c);
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
                    found = Some((c.dma.iova(), off));
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
                let iova = c.dma.iova();
                st.chunks.insert(iova, c);
                (iova, off)
            }
        };
        let Some(c) = st.chunks.get(&chunk_iova) else {
            return Err(PlatformError::OutOfDmaMemory { len, align });
        };
        // The range was free (no one else uses it; the device was told to stop using it when it
        // was freed), and the sub-allocator only hands out offsets inside the chunk.
        let Ok(cpu) = c.dma.zeroed(off as usize, size as usize) else {
            return Err(PlatformError::OutOfDmaMemory { len, align });
        };
        let iova = chunk_iova + off;
        st.allocs.insert(iova, size);
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
        let cpu_ok = region.cpu.as_ptr() as usize == c.dma.as_ptr() as usize + off as usize;
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
    use crate::error::VfioError;
    use crate::sys::dma::{MapTarget, PretendIommu};
    use std::ptr::NonNull;

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
        fn target(&self) -> MapTarget<'_> {
            MapTarget::Pretend(self)
        }
    }

    impl PretendIommu for FakeIommu {
        fn map(&self, iova: u64, len: usize) -> Result<(), i32> {
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
                    std::io::Error::from_raw_os_error(libc::EINVAL),
                ));
            }
            self.log.lock().unwrap().push(("unmap", iova, len));
            Ok(())
        }
    }

    /// The chunk holding `r` and `r`'s offset in it.
    fn locate<'a, M: IovaMapper>(st: &'a PoolState<M>, r: &DmaRegion) -> (&'a Chunk<M>, usize) {
        let (&at, c) = st.chunks.range(..=r.iova).next_back().unwrap();
        (c, (r.iova - at) as usize)
    }

    /// Byte `off` of `r`, read through the chunk's bounds-checked accessors.
    fn read<M: IovaMapper>(pool: &DmaPool<M>, r: &DmaRegion, off: usize) -> u8 {
        assert!(off < r.len);
        let st = pool.lock();
        let (c, at) = locate(&st, r);
        let mut b = [0u8];
        c.dma.read(at + off, &mut b).unwrap();
        b[0]
    }

    fn write<M: IovaMapper>(pool: &DmaPool<M>, r: &DmaRegion, off: usize, v: u8) {
        assert!(off < r.len);
        let st = pool.lock();
        let (c, at) = locate(&st, r);
        c.dma.write(at + off, &[v]).unwrap();
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
            assert!((0..r.len).all(|i| read(&pool, r, i) == 0));
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
        write(&pool, &a, 7, 0xee);
        let (iova, len) = (a.iova, a.len);
        pool.free(a).unwrap();
        let b = pool.alloc(256, 64).unwrap();
        assert_eq!((b.iova, b.len), (iova, len));
        assert_eq!(read(&pool, &b, 7), 0);
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
