//! DMA memory shared with the driver, and the IOMMU-like translation the device goes through.
//!
//! Every allocation is an `Arc<[AtomicU64]>`: 8-byte aligned host memory that both sides access
//! with atomic operations only, so the simulator needs no `unsafe` code. Word `i` of an
//! allocation holds its bytes `8i..8i+8` in native memory order (the device's big-endian byte
//! image, exactly as a real DMA buffer would hold it).
//!
//! The host pointer handed out ([`DmaBlock::host`]) is `Arc::as_ptr` of the allocation: it
//! carries the provenance of the heap block itself, not of a reference, and an `Arc` moved into
//! the translation table (or anywhere else) is a pointer to that block, not the block: moving it
//! retags nothing. The pointer therefore stays valid for the driver's atomic accesses under the
//! Stacked and Tree Borrows models until the mapping is freed. (The allocation used to be a
//! `Box` moved into the table after the pointer was taken; a `Box` asserts uniqueness when it
//! moves, which invalidated the driver's pointer under both models.)
//!
//! Access widths. The storage is 64-bit atomics, and without `unsafe` the simulator cannot touch
//! it with a narrower atomic; so every device access is made of 64-bit atomic operations on the
//! naturally aligned words it covers, and each word is changed by exactly **one** operation: a
//! store when the device writes the whole word, a single compare-and-swap that replaces only the
//! device's bytes when it writes part of a word (never two read-modify-writes, so a narrower
//! driver load sees the old word or the new one, nothing in between, and bytes the driver writes
//! concurrently into the same word are never lost). The device's writes are laid out so that
//! the word the driver polls is written whole and last where the driver polls with 64 bits:
//! the last 8 bytes of a CQE (the driver's acquire load of the `op_own` word), the last 8 bytes
//! of an output mailbox block (block number, token, signatures; read by the driver as one word).
//! Two polled locations remain mixed-size, because the driver polls them with an 8-bit load the
//! simulator cannot mirror: the command entry's status/ownership byte (0x3f, written by the
//! device with one release CAS on the word 0x38..0x40) and the EQE owner byte (0x3f, written
//! with one release store of the EQE's last word). The driver's 32-bit doorbell-record stores
//! are read by the device with 64-bit loads. In [`crate::Mode::Sync`] everything runs on the
//! driver's thread, so none of these is a race; in [`crate::Mode::Threaded`] they are formally
//! mixed-size atomic races (which real hardware does not have: the device is outside the
//! program), harmless on x86-64.
//!
//! IOVAs are handed out by a bump allocator starting at [`IOVA_BASE`] (so IOVA 0 is never
//! valid), 4 KiB aligned (or more, up to [`MAX_DMA_ALIGN`]), with an unmapped 4 KiB guard page
//! after every allocation; freed ranges are never handed out again. A device access is valid
//! only if it lies entirely inside one live allocation (`[iova, iova + len)`, `len` as asked
//! for): anything else is a translation fault. Allocating and freeing does not wait for the
//! device's lock ([`staged::Staged`]).

use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::SimError;

pub(crate) mod staged;

/// The first IOVA the simulator hands out.
pub const IOVA_BASE: u64 = 0x1_0000_0000;
/// IOVA granule: every allocation starts on a 4 KiB boundary.
pub(crate) const IOVA_PAGE: u64 = 4096;
/// The largest alignment `dma_alloc` honours.
pub const MAX_DMA_ALIGN: usize = 2 << 20;
/// The most DMA memory one simulated device maps at once: 4 GiB, room for `max_qp` (2^18) QPs
/// with a page of work queue and a doorbell record each, their page of ICM, and their CQs.
/// (Only what an allocation asks for is host memory; the count is of whole IOVA pages.)
pub const MAX_DMA_BYTES: usize = 1 << 32;

/// A block of DMA memory: the device sees it at `iova`, the host at `host`.
///
/// The memory stays valid until `SimDevice::dma_free(iova)` or until the last clone of the
/// `SimDevice` that allocated it is dropped. Access it only with atomic loads and stores
/// (e.g. `AtomicU32::from_ptr`): the device reads and writes it concurrently in threaded mode.
#[derive(Debug, Clone, Copy)]
pub struct DmaBlock {
    /// The device address (IOVA) of the first byte.
    pub iova: u64,
    /// Length in bytes, as asked for.
    pub len: usize,
    /// The host address of the first byte, aligned as asked (at least to 8 bytes).
    pub host: NonNull<u8>,
}

/// Memory the device reaches that the simulator did not allocate — a guest's RAM shared by a
/// vfio-user client (a DMA_MAP of a memfd) — seen as 64-bit words in native memory order (bytes
/// `8i..8i + 8` of the range are word `i`). Whoever provides it keeps the words valid while the
/// mapping lives ([`crate::SimDevice::dma_map_external`] holds the `Arc`); the device touches
/// them only with atomic operations, as it does its own.
pub trait ExternalMemory: Send + Sync {
    /// The words of the range.
    fn words(&self) -> &[AtomicU64];
}

/// What a mapping's words are.
enum Backing {
    /// Allocated by [`Zeroed::new`] (the simulator's own DMA memory).
    Owned(Arc<[AtomicU64]>),
    /// Given by [`Iommu::map_external`].
    External(Arc<dyn ExternalMemory>),
}

struct Mapping {
    len: usize,
    backing: Backing,
    /// Words of the backing before the allocation's first byte (so that the host address is
    /// aligned as asked).
    skip: usize,
}

impl Mapping {
    fn words(&self) -> &[AtomicU64] {
        match &self.backing {
            Backing::Owned(w) => w,
            Backing::External(m) => m.words(),
        }
    }
}

/// Zeroed memory for a DMA allocation, made before any lock is taken
/// ([`staged::Staged::alloc`] maps it): zeroing a large ring does not hold up another thread's
/// commands and doorbells.
pub(crate) struct Zeroed {
    words: Arc<[AtomicU64]>,
    host: NonNull<u8>,
    skip: usize,
    len: usize,
    align: usize,
}

impl Zeroed {
    /// `len` zeroed bytes at a host address aligned to `align` (a power of two up to
    /// [`MAX_DMA_ALIGN`]; `len` from 1 to [`MAX_DMA_BYTES`]).
    pub(crate) fn new(len: usize, align: usize) -> Result<Self, SimError> {
        if len == 0 {
            return Err(SimError::DmaZeroLength);
        }
        if !align.is_power_of_two() || align > MAX_DMA_ALIGN {
            return Err(SimError::DmaBadAlign { align });
        }
        if len > MAX_DMA_BYTES {
            return Err(SimError::DmaExhausted {
                len,
                mapped: 0,
                limit: MAX_DMA_BYTES,
            });
        }
        let host_align = align.max(8);
        // The host address is aligned as asked too (as a platform's DMA memory is): the block
        // has room for the words skipped to reach the alignment.
        let extra = host_align / 8 - 1;
        let words: Arc<[AtomicU64]> = (0..len.div_ceil(8) + extra)
            .map(|_| AtomicU64::new(0))
            .collect();
        // `Arc::as_ptr` goes through no reference: the pointer has the heap block's provenance.
        let first = Arc::as_ptr(&words).cast::<u8>().cast_mut();
        let skip = (first as usize)
            .next_multiple_of(host_align)
            .wrapping_sub(first as usize)
            / 8;
        // (Never null; the error only avoids a panic path.) `skip <= extra`, so the aligned
        // address and the `len` bytes after it lie in the block.
        let host = NonNull::new(first.wrapping_add(skip * 8)).ok_or(SimError::DmaZeroLength)?;
        Ok(Self {
            words,
            host,
            skip,
            len,
            align,
        })
    }
}

/// The memory of an allocation [`Iommu::apply`] unmapped: dropped by its holder, after the
/// device's lock is let go.
pub(crate) struct Freed(#[allow(dead_code)] Backing);

/// A device access hit no live mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unmapped;

/// The translation table and the memory behind it.
pub(crate) struct Iommu {
    maps: BTreeMap<u64, Mapping>,
    /// Bytes of external mappings (the simulator's own are counted in [`staged::Staged`]).
    external: usize,
}

impl Iommu {
    pub(crate) fn new() -> Self {
        Self {
            maps: BTreeMap::new(),
            external: 0,
        }
    }

    /// Maps `len` bytes of `mem` at `iova` (chosen by whoever maps it: a guest's IOVA): the
    /// device reaches them from now on. Refused: no bytes, fewer words than `len`, an IOVA
    /// range that wraps, or one that overlaps a live mapping.
    pub(crate) fn map_external(
        &mut self,
        iova: u64,
        len: usize,
        mem: Arc<dyn ExternalMemory>,
    ) -> Result<(), SimError> {
        if len == 0 {
            return Err(SimError::DmaZeroLength);
        }
        let end = iova.checked_add(len as u64);
        let overlaps = |end: u64| {
            self.maps
                .range(..end)
                .next_back()
                .is_some_and(|(&start, m)| start + m.len as u64 > iova)
        };
        match end {
            Some(end) if mem.words().len().saturating_mul(8) >= len && !overlaps(end) => {}
            _ => return Err(SimError::DmaMapRefused { iova, len }),
        }
        self.maps.insert(
            iova,
            Mapping {
                len,
                backing: Backing::External(mem),
                skip: 0,
            },
        );
        self.external += len;
        Ok(())
    }

    /// Unmaps every external mapping lying inside `[iova, iova + len)` (a vfio-user DMA_UNMAP
    /// names a range); returns how many. The memory stays its owner's.
    pub(crate) fn unmap_external(&mut self, iova: u64, len: usize) -> usize {
        let end = iova.saturating_add(len as u64);
        let gone: Vec<u64> = self
            .maps
            .range(iova..end)
            .filter(|(&start, m)| {
                matches!(m.backing, Backing::External(_)) && start + m.len as u64 <= end
            })
            .map(|(&start, _)| start)
            .collect();
        for start in &gone {
            if let Some(m) = self.maps.remove(start) {
                self.external -= m.len;
            }
        }
        gone.len()
    }

    /// Bytes of external memory mapped.
    pub(crate) fn external_bytes(&self) -> usize {
        self.external
    }

    /// Every live allocation of the simulator's own, `(iova, len)`, by IOVA.
    pub(crate) fn allocations(&self) -> Vec<(u64, usize)> {
        self.maps
            .iter()
            .filter(|(_, m)| matches!(m.backing, Backing::Owned(_)))
            .map(|(&iova, m)| (iova, m.len))
            .collect()
    }

    fn locate(&self, iova: u64, len: usize) -> Option<(&Mapping, usize)> {
        let (&start, m) = self.maps.range(..=iova).next_back()?;
        let off = usize::try_from(iova - start).ok()?;
        // The offset into `words` (past the skipped words) of a range inside the allocation.
        (off.checked_add(len)? <= m.len).then_some((m, off + m.skip * 8))
    }

    /// Whether `[iova, iova + len)` lies inside one live allocation.
    pub(crate) fn is_mapped(&self, iova: u64, len: usize) -> bool {
        self.locate(iova, len).is_some()
    }

    /// Reads `buf.len()` bytes at `iova` (acquire loads): the partial words at either end
    /// byte by byte, the whole words between as words.
    pub(crate) fn read(&self, iova: u64, buf: &mut [u8]) -> Result<(), Unmapped> {
        let (m, off) = self.locate(iova, buf.len()).ok_or(Unmapped)?;
        let words = m.words();
        let len = buf.len();
        let head = ((8 - off % 8) % 8).min(len);
        let load = |w: usize| -> Result<[u8; 8], Unmapped> {
            Ok(words
                .get(w)
                .ok_or(Unmapped)?
                .load(Ordering::Acquire)
                .to_ne_bytes())
        };
        if head > 0 {
            let b = off % 8;
            buf[..head].copy_from_slice(&load(off / 8)?[b..b + head]);
        }
        let first = (off + head) / 8;
        let whole = (len - head) / 8;
        let src = words.get(first..first + whole).ok_or(Unmapped)?;
        let (body, tail) = buf[head..].split_at_mut(whole * 8);
        for (dst, w) in body.chunks_exact_mut(8).zip(src) {
            dst.copy_from_slice(&w.load(Ordering::Acquire).to_ne_bytes());
        }
        if !tail.is_empty() {
            let n = tail.len();
            tail.copy_from_slice(&load(first + whole)?[..n]);
        }
        Ok(())
    }

    /// Writes `data` at `iova` with relaxed stores.
    pub(crate) fn write(&self, iova: u64, data: &[u8]) -> Result<(), Unmapped> {
        self.store(iova, data, Ordering::Relaxed)
    }

    /// Writes `data` at `iova`; the last store has release ordering, so every earlier write of
    /// this thread is visible to whoever observes it with an acquire load.
    pub(crate) fn write_release(&self, iova: u64, data: &[u8]) -> Result<(), Unmapped> {
        self.store(iova, data, Ordering::Release)
    }

    /// Atomically replaces the `old.len()` bytes at `iova` — inside one 8-byte-aligned word —
    /// by `f` of them; `old` gets what they were.
    pub(crate) fn fetch_update_in_word(
        &self,
        iova: u64,
        old: &mut [u8],
        f: impl Fn(&mut [u8]),
    ) -> Result<(), Unmapped> {
        let len = old.len();
        let (m, off) = self.locate(iova, len).ok_or(Unmapped)?;
        let at = off % 8;
        if at + len > 8 {
            return Err(Unmapped);
        }
        let word = m.words().get(off / 8).ok_or(Unmapped)?;
        let prev = word
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                let mut b = w.to_ne_bytes();
                f(&mut b[at..at + len]);
                Some(u64::from_ne_bytes(b))
            })
            .unwrap_or_else(|w| w);
        old.copy_from_slice(&prev.to_ne_bytes()[at..at + len]);
        Ok(())
    }

    /// Atomically replaces the 64-bit value at `iova` (8-byte aligned), stored big-endian or
    /// little-endian as `big_endian` says, by `f(old)`; returns the old value.
    pub(crate) fn fetch_update_u64(
        &self,
        iova: u64,
        big_endian: bool,
        f: impl Fn(u64) -> u64,
    ) -> Result<u64, Unmapped> {
        let (m, off) = self.locate(iova, 8).ok_or(Unmapped)?;
        if off % 8 != 0 {
            return Err(Unmapped);
        }
        let word = m.words().get(off / 8).ok_or(Unmapped)?;
        let value = |w: u64| {
            let b = w.to_ne_bytes();
            if big_endian {
                u64::from_be_bytes(b)
            } else {
                u64::from_le_bytes(b)
            }
        };
        let image = |v: u64| {
            u64::from_ne_bytes(if big_endian {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            })
        };
        let old = word
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                Some(image(f(value(w))))
            })
            .unwrap_or_else(|w| w);
        Ok(value(old))
    }

    /// The stores of `data` at `iova`: partial words at either end by compare-and-swap, whole
    /// words between by plain (relaxed) stores, the last store of all with `last` ordering.
    fn store(&self, iova: u64, data: &[u8], last: Ordering) -> Result<(), Unmapped> {
        let (m, off) = self.locate(iova, data.len()).ok_or(Unmapped)?;
        let words = m.words();
        let len = data.len();
        let head = ((8 - off % 8) % 8).min(len);
        let order = |end: usize| if end == len { last } else { Ordering::Relaxed };
        if head > 0 {
            let word = words.get(off / 8).ok_or(Unmapped)?;
            partial(word, off % 8, &data[..head], order(head));
        }
        let first = (off + head) / 8;
        let whole = (len - head) / 8;
        let dst = words.get(first..first + whole).ok_or(Unmapped)?;
        let body = &data[head..head + whole * 8];
        let tail = &data[head + whole * 8..];
        if let Some((end, rest)) = dst.split_last() {
            for (w, b) in rest.iter().zip(body.chunks_exact(8)) {
                w.store(word_of(b), Ordering::Relaxed);
            }
            end.store(word_of(&body[body.len() - 8..]), order(head + whole * 8));
        }
        if !tail.is_empty() {
            let word = words.get(first + whole).ok_or(Unmapped)?;
            partial(word, 0, tail, last);
        }
        Ok(())
    }
}

/// The native-order word of 8 bytes.
fn word_of(b: &[u8]) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(b);
    u64::from_ne_bytes(v)
}

/// Replaces bytes `at..at + data.len()` of `word` with one compare-and-swap — never a plain
/// load-modify-store, which could lose bytes the driver writes concurrently, and never two
/// operations, whose intermediate word a reader could see.
fn partial(word: &AtomicU64, at: usize, data: &[u8], order: Ordering) {
    let (mut v, mut mask) = ([0u8; 8], [0u8; 8]);
    v[at..at + data.len()].copy_from_slice(data);
    mask[at..at + data.len()].fill(0xff);
    let (v, mask) = (u64::from_ne_bytes(v), u64::from_ne_bytes(mask));
    let fail = if order == Ordering::Relaxed {
        Ordering::Relaxed
    } else {
        Ordering::Acquire
    };
    let _ = word.fetch_update(order, fail, |w| Some((w & !mask) | v));
}

/// For tests: the allocator and the table together, the changes applied at once.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    /// The allocator and the table together, the changes applied at once.
    pub(crate) struct Io {
        staged: staged::Staged,
        io: Iommu,
    }

    impl Io {
        pub(crate) fn new() -> Self {
            Io {
                staged: staged::Staged::new(),
                io: Iommu::new(),
            }
        }
        pub(crate) fn alloc(&mut self, len: usize, align: usize) -> Result<DmaBlock, SimError> {
            let b = self.staged.alloc(Zeroed::new(len, align)?)?;
            let _ = self.io.apply(self.staged.take());
            Ok(b)
        }
        pub(crate) fn free(&mut self, iova: u64) -> Result<usize, SimError> {
            let len = self.staged.free(iova)?;
            let _ = self.io.apply(self.staged.take());
            Ok(len)
        }
        pub(crate) fn mapped_bytes(&self) -> usize {
            self.staged.mapped_bytes()
        }
    }

    impl std::ops::Deref for Io {
        type Target = Iommu;
        fn deref(&self) -> &Iommu {
            &self.io
        }
    }

    impl std::ops::DerefMut for Io {
        fn deref_mut(&mut self) -> &mut Iommu {
            &mut self.io
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::Io;
    use super::*;

    #[test]
    fn iovas_are_aligned_guarded_and_never_reused() {
        let mut io = Io::new();
        let a = io.alloc(100, 1).unwrap();
        assert_eq!(a.iova, IOVA_BASE);
        let b = io.alloc(4096, 64 * 1024).unwrap();
        assert_eq!(b.iova % (64 * 1024), 0);
        assert!(b.iova >= a.iova + 2 * IOVA_PAGE);
        io.free(a.iova).unwrap();
        let c = io.alloc(100, 1).unwrap();
        assert!(c.iova > b.iova);
        assert_eq!(
            io.free(a.iova),
            Err(SimError::DmaUnknownIova { iova: a.iova })
        );
        assert_eq!(io.mapped_bytes(), 4096 + 100);
    }

    #[test]
    fn host_addresses_are_aligned_as_asked_and_reach_the_same_bytes() {
        let mut io = Io::new();
        for align in [1, 8, 64, 4096, 64 * 1024] {
            let a = io.alloc(200, align).unwrap();
            assert_eq!(a.host.as_ptr() as usize % align.max(8), 0, "align {align}");
            // The device's view (by IOVA) and the host's (the pointer) are the same words.
            io.write(a.iova + 8, &7u64.to_ne_bytes()).unwrap();
            let m = &io.maps[&a.iova];
            let word = &m.words()[m.skip + 1];
            assert_eq!(word.load(Ordering::Relaxed), 7);
            assert_eq!(
                std::ptr::from_ref(word).cast::<u8>(),
                a.host.as_ptr().wrapping_add(8).cast_const()
            );
        }
    }

    #[test]
    fn partial_words_keep_their_neighbours() {
        let mut io = Io::new();
        let a = io.alloc(24, 8).unwrap();
        io.write(a.iova, &[0xaa; 24]).unwrap();
        io.write(a.iova + 3, &[1, 2, 3, 4, 5, 6, 7]).unwrap();
        io.write_release(a.iova + 23, &[0x00]).unwrap();
        let mut buf = [0u8; 24];
        io.read(a.iova, &mut buf).unwrap();
        assert_eq!(
            &buf[..12],
            &[0xaa, 0xaa, 0xaa, 1, 2, 3, 4, 5, 6, 7, 0xaa, 0xaa]
        );
        assert_eq!(buf[23], 0);
        assert_eq!(io.read(a.iova + 20, &mut [0u8; 5]), Err(Unmapped));
        assert_eq!(io.read(a.iova - 1, &mut [0u8; 1]), Err(Unmapped));
        assert!(io.is_mapped(a.iova + 8, 16) && !io.is_mapped(a.iova + 8, 17));
    }

    /// Every offset and length within three words, against a byte array: a write changes
    /// exactly its bytes, a read returns exactly them.
    #[test]
    fn every_offset_and_length_reads_and_writes_exactly_its_bytes() {
        let mut io = Io::new();
        let a = io.alloc(40, 8).unwrap();
        let mut model = [0u8; 40];
        let mut n = 0u8;
        for off in 0..20usize {
            for len in 1..=20usize {
                n = n.wrapping_add(1);
                let data: Vec<u8> = (0..len).map(|i| n.wrapping_mul(7) ^ i as u8).collect();
                io.write(a.iova + off as u64, &data).unwrap();
                model[off..off + len].copy_from_slice(&data);
                let mut all = [0u8; 40];
                io.read(a.iova, &mut all).unwrap();
                assert_eq!(all, model, "write of {len} at {off}");
                let mut part = vec![0u8; len];
                io.read(a.iova + off as u64, &mut part).unwrap();
                assert_eq!(part, data, "read of {len} at {off}");
            }
        }
    }

    #[test]
    fn bad_requests_are_refused() {
        let mut io = Io::new();
        assert_eq!(io.alloc(0, 8).unwrap_err(), SimError::DmaZeroLength);
        assert_eq!(
            io.alloc(8, 3).unwrap_err(),
            SimError::DmaBadAlign { align: 3 }
        );
        assert_eq!(
            io.alloc(8, 4 << 20).unwrap_err(),
            SimError::DmaBadAlign { align: 4 << 20 }
        );
        assert_eq!(io.alloc(8, 2 << 20).unwrap().iova % (2 << 20), 0);
        assert!(matches!(
            io.alloc(MAX_DMA_BYTES + 1, 8),
            Err(SimError::DmaExhausted { .. })
        ));
    }

    struct Guest(Vec<AtomicU64>);
    impl ExternalMemory for Guest {
        fn words(&self) -> &[AtomicU64] {
            &self.0
        }
    }

    fn guest(words: usize) -> Arc<Guest> {
        Arc::new(Guest((0..words).map(|_| AtomicU64::new(0)).collect()))
    }

    #[test]
    fn external_memory_is_reached_at_the_iova_it_was_mapped_at() {
        let mut io = Io::new();
        let g = guest(512);
        io.map_external(0x20_0000, 4096, g.clone()).unwrap();
        assert_eq!(io.external_bytes(), 4096);
        assert_eq!(io.mapped_bytes(), 0, "not the simulator's own memory");
        io.write(0x20_0010, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        assert_eq!(
            g.0[2].load(Ordering::Relaxed),
            u64::from_ne_bytes([1, 2, 3, 4, 5, 6, 7, 8])
        );
        g.0[3].store(u64::from_ne_bytes([9; 8]), Ordering::Relaxed);
        let mut b = [0u8; 4];
        io.read(0x20_0018, &mut b).unwrap();
        assert_eq!(b, [9; 4]);
        // Past the mapping, and before it: a translation fault.
        assert_eq!(io.read(0x20_0ffc, &mut [0u8; 8]), Err(Unmapped));
        assert_eq!(io.read(0x1f_fff8, &mut [0u8; 8]), Err(Unmapped));
        // Overlaps, memory shorter than the range, wrapping, empty: refused.
        for (iova, len, words) in [
            (0x20_0800, 4096, 512),
            (0x1f_f800, 4096, 512),
            (0x30_0000, 4096, 8),
            (u64::MAX - 8, 4096, 512),
            (0x40_0000, 0, 512),
        ] {
            assert!(
                io.map_external(iova, len, guest(words)).is_err(),
                "{iova:#x}+{len}"
            );
        }
        // The simulator does not free it; an unmap of a covering range removes it.
        assert_eq!(
            io.free(0x20_0000),
            Err(SimError::DmaUnknownIova { iova: 0x20_0000 })
        );
        io.map_external(0x20_1000, 4096, guest(512)).unwrap();
        assert_eq!(io.unmap_external(0x20_0000, 0x1000), 1);
        assert_eq!(io.read(0x20_0010, &mut b), Err(Unmapped));
        assert!(io.read(0x20_1010, &mut b).is_ok());
        assert_eq!(io.unmap_external(0, usize::MAX), 1);
        assert_eq!(io.external_bytes(), 0);
    }
}
