//! [`DmaBuf`]: DMA memory the driver owns, reached only through raw-pointer atomics.

use core::fmt;
use core::marker::PhantomData;
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

use mlx5_ifc::{Be32, Be64};

use crate::io::platform::{DmaRegion, Platform, PlatformError};

/// An access outside a `DmaBuf` was refused (a driver bug caught, never a memory error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfBounds {
    /// Offset of the access.
    pub offset: usize,
    /// Its length.
    pub len: usize,
    /// Size of the buffer.
    pub size: usize,
}

impl fmt::Display for OutOfBounds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DMA access of {} bytes at offset {:#x} outside a {}-byte buffer",
            self.len, self.offset, self.size
        )
    }
}

/// DMA memory allocated from a [`Platform`]: bounds-checked byte and big-endian word access.
///
/// It is not freed on drop (it does not know its platform); give it back with
/// [`DmaBuf::free`]. All accesses are atomic on raw pointers, never references.
#[derive(Debug)]
pub struct DmaBuf {
    region: DmaRegion,
}

// SAFETY: a DmaBuf is a handle to memory the platform gave to the driver alone; every access
// goes through atomics, so sharing or moving the handle across threads cannot create a data race.
unsafe impl Send for DmaBuf {}
// SAFETY: as above; `&DmaBuf` only permits atomic accesses.
unsafe impl Sync for DmaBuf {}

impl DmaBuf {
    /// Allocates `len` zeroed bytes aligned to `align` from `platform`.
    pub fn alloc<P: Platform + ?Sized>(
        platform: &P,
        len: usize,
        align: usize,
    ) -> Result<Self, PlatformError> {
        let region = platform.dma_alloc(len, align)?;
        if region.len < len
            || region.iova % align.max(1) as u64 != 0
            || region.cpu.as_ptr() as usize % 8 != 0
        {
            log::error!("platform returned a DMA region that breaks its contract: {region:?} for {len}/{align}");
            let _ = platform.dma_free(region);
            return Err(PlatformError::OutOfDmaMemory { len, align });
        }
        // Zeroed by the platform's contract (every platform's tests check it, reuse included):
        // clearing it again here cost 40% of a bring-up's instructions, in firmware pages.
        Ok(Self {
            region: DmaRegion { len, ..region },
        })
    }

    /// Gives the memory back to `platform`. The device must no longer use it.
    pub fn free<P: Platform + ?Sized>(self, platform: &P) -> Result<(), PlatformError> {
        platform.dma_free(self.region)
    }

    /// Device address of the first byte.
    #[inline]
    pub fn iova(&self) -> u64 {
        self.region.iova
    }

    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.region.len
    }

    /// Whether the buffer is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.region.len == 0
    }

    #[inline]
    fn check(&self, offset: usize, len: usize, align: usize) -> Result<*mut u8, OutOfBounds> {
        let oob = OutOfBounds {
            offset,
            len,
            size: self.region.len,
        };
        let end = offset.checked_add(len).ok_or(oob)?;
        if end > self.region.len || offset % align != 0 {
            return Err(oob);
        }
        // The base pointer is 8-aligned (checked at allocation), so `offset % align == 0` makes
        // the result aligned for an access of `align` bytes.
        Ok(self.region.cpu.as_ptr().wrapping_add(offset))
    }

    /// Sets every byte to zero.
    pub fn zero(&self) {
        let words = self.region.len / 8;
        for i in 0..words {
            let _ = self.write_u64_raw(i * 8, 0);
        }
        for off in words * 8..self.region.len {
            let _ = self.write_u8(off, 0);
        }
    }

    #[inline]
    fn write_u64_raw(&self, offset: usize, raw: u64) -> Result<(), OutOfBounds> {
        let p = self.check(offset, 8, 8)?;
        // SAFETY: `p` is in bounds and 8-aligned (checked); the platform guarantees the region
        // is valid memory for the buffer's lifetime; the access is atomic, so concurrent device
        // accesses are not data races.
        unsafe { AtomicU64::from_ptr(p.cast()) }.store(raw, Ordering::Relaxed);
        Ok(())
    }

    #[inline]
    fn read_u64_raw(&self, offset: usize) -> Result<u64, OutOfBounds> {
        let p = self.check(offset, 8, 8)?;
        // SAFETY: as in `write_u64_raw`.
        Ok(unsafe { AtomicU64::from_ptr(p.cast()) }.load(Ordering::Relaxed))
    }

    /// Stores one byte.
    #[inline]
    pub(crate) fn write_u8(&self, offset: usize, v: u8) -> Result<(), OutOfBounds> {
        let p = self.check(offset, 1, 1)?;
        // SAFETY: `p` is in bounds (checked); valid memory per the platform contract; atomic.
        unsafe { AtomicU8::from_ptr(p) }.store(v, Ordering::Relaxed);
        Ok(())
    }

    /// Loads one byte.
    #[inline]
    pub(crate) fn read_u8(&self, offset: usize) -> Result<u8, OutOfBounds> {
        let p = self.check(offset, 1, 1)?;
        // SAFETY: as in `write_u8`.
        Ok(unsafe { AtomicU8::from_ptr(p) }.load(Ordering::Relaxed))
    }

    #[cfg(test)] // the io tests (and Miri) exercise it; the driver does not use it
    /// Loads one byte with acquire ordering: later loads see what the device wrote before it
    /// (ownership bytes, owner bits).
    #[inline]
    pub(crate) fn read_u8_acquire(&self, offset: usize) -> Result<u8, OutOfBounds> {
        let p = self.check(offset, 1, 1)?;
        // SAFETY: as in `write_u8`.
        Ok(unsafe { AtomicU8::from_ptr(p) }.load(Ordering::Acquire))
    }

    #[cfg(test)] // the io tests (and Miri) exercise it; the driver does not use it
    /// Stores one byte with release ordering: the device sees every earlier store first.
    #[inline]
    pub(crate) fn write_u8_release(&self, offset: usize, v: u8) -> Result<(), OutOfBounds> {
        let p = self.check(offset, 1, 1)?;
        // SAFETY: as in `write_u8`.
        unsafe { AtomicU8::from_ptr(p) }.store(v, Ordering::Release);
        Ok(())
    }

    /// Stores a big-endian 32-bit word (4-aligned offset).
    #[inline]
    pub fn write_be32(&self, offset: usize, v: Be32) -> Result<(), OutOfBounds> {
        let p = self.check(offset, 4, 4)?;
        // SAFETY: in bounds and 4-aligned (checked); valid memory per the platform contract; atomic.
        unsafe { AtomicU32::from_ptr(p.cast()) }.store(v.to_ne_raw(), Ordering::Relaxed);
        Ok(())
    }

    #[cfg(test)] // the io tests (and Miri) exercise it; the driver does not use it
    /// Loads a big-endian 32-bit word (4-aligned offset).
    #[inline]
    pub(crate) fn read_be32(&self, offset: usize) -> Result<Be32, OutOfBounds> {
        let p = self.check(offset, 4, 4)?;
        // SAFETY: as in `write_be32`.
        Ok(Be32::from_ne_raw(
            unsafe { AtomicU32::from_ptr(p.cast()) }.load(Ordering::Relaxed),
        ))
    }

    #[cfg(test)] // the io tests (and Miri) exercise it; the driver does not use it
    /// Stores a big-endian 64-bit word (8-aligned offset).
    #[inline]
    pub(crate) fn write_be64(&self, offset: usize, v: Be64) -> Result<(), OutOfBounds> {
        self.write_u64_raw(offset, v.to_ne_raw())
    }

    #[cfg(test)] // the io tests (and Miri) exercise it; the driver does not use it
    /// Loads a big-endian 64-bit word (8-aligned offset).
    #[inline]
    pub(crate) fn read_be64(&self, offset: usize) -> Result<Be64, OutOfBounds> {
        self.read_u64_raw(offset).map(Be64::from_ne_raw)
    }

    /// Stores one 16-byte segment at an 8-aligned `offset` (the WQE fast path: one bounds check,
    /// two 64-bit stores).
    #[inline]
    pub(crate) fn write_seg16(&self, offset: usize, seg: &[u8; 16]) -> Result<(), OutOfBounds> {
        let p = self.check(offset, 16, 8)?;
        let (lo, hi) = seg.split_at(8);
        let mut a = [0u8; 8];
        let mut b = [0u8; 8];
        a.copy_from_slice(lo);
        b.copy_from_slice(hi);
        // SAFETY: 16 bytes at `p` are in bounds and 8-aligned (checked); valid memory per the
        // platform contract; atomic stores.
        unsafe {
            AtomicU64::from_ptr(p.cast()).store(u64::from_ne_bytes(a), Ordering::Relaxed);
            AtomicU64::from_ptr(p.wrapping_add(8).cast())
                .store(u64::from_ne_bytes(b), Ordering::Relaxed);
        }
        Ok(())
    }

    /// Stores one whole 64-byte WQEBB, given as eight native words, at an 8-aligned `offset`
    /// (the WQE fast path: one bounds check, eight 64-bit stores).
    #[inline]
    pub fn write_wqebb(&self, offset: usize, bb: &[u64; 8]) -> Result<(), OutOfBounds> {
        let p = self.check(offset, 64, 8)?;
        for (i, &w) in bb.iter().enumerate() {
            // SAFETY: the 64 bytes at `p` are in bounds and 8-aligned (checked), so word `i < 8`
            // is too; valid memory per the platform contract; atomic stores.
            unsafe { AtomicU64::from_ptr(p.wrapping_add(i * 8).cast()) }
                .store(w, Ordering::Relaxed);
        }
        Ok(())
    }

    #[cfg(test)] // the io tests (and Miri) exercise it; the driver does not use it
    /// Loads one whole 64-byte WQEBB at an 8-aligned `offset` as eight native words (one
    /// bounds check).
    #[inline]
    pub(crate) fn read_wqebb(&self, offset: usize) -> Result<[u64; 8], OutOfBounds> {
        let p = self.check(offset, 64, 8)?;
        let mut out = [0u64; 8];
        for (i, w) in out.iter_mut().enumerate() {
            // SAFETY: as in `write_wqebb`; atomic loads.
            *w = unsafe { AtomicU64::from_ptr(p.wrapping_add(i * 8).cast()) }
                .load(Ordering::Relaxed);
        }
        Ok(out)
    }

    /// Loads `N` bytes (a multiple of 8) at an 8-aligned `offset` with one bounds check, as
    /// relaxed 64-bit loads (e.g. the CQE dwords polling needs, after an acquire of the owner
    /// byte).
    #[inline]
    pub(crate) fn read_words<const N: usize>(&self, offset: usize) -> Result<[u8; N], OutOfBounds> {
        let p = self.check(offset, N, 8)?;
        let mut out = [0u8; N];
        for (i, c) in out.chunks_exact_mut(8).enumerate() {
            // SAFETY: the `N` bytes at `p` are in bounds and 8-aligned (checked), and word `i`
            // lies inside them (`chunks_exact` yields only whole words); valid memory per the
            // platform contract; atomic loads.
            let w = unsafe { AtomicU64::from_ptr(p.wrapping_add(i * 8).cast()) }
                .load(Ordering::Relaxed);
            c.copy_from_slice(&w.to_ne_bytes());
        }
        Ok(out)
    }

    /// Loads the 8 bytes at an 8-aligned `offset` with acquire ordering (a CQE's last word with
    /// its owner byte): later loads see what the device wrote before it.
    #[inline]
    pub(crate) fn read_u64_acquire(&self, offset: usize) -> Result<[u8; 8], OutOfBounds> {
        let p = self.check(offset, 8, 8)?;
        // SAFETY: as in `write_u64_raw`.
        Ok(unsafe { AtomicU64::from_ptr(p.cast()) }
            .load(Ordering::Acquire)
            .to_ne_bytes())
    }

    /// A view of the buffer's start as a ring of `entries` entries of `STRIDE` bytes (a CQ's
    /// CQEs), bounds-checked here once: `entries` must be a power of two whose entries fit.
    /// It is read through stretches that cannot leave it ([`DmaRing::segment`]).
    pub fn ring<const STRIDE: usize>(&self, entries: usize) -> Option<DmaRing<'_, STRIDE>> {
        self.ring_at(0, entries)
    }

    /// The same from byte `offset` (8-aligned) on: a QP's send queue, after its receive queue.
    pub(crate) fn ring_at<const STRIDE: usize>(
        &self,
        offset: usize,
        entries: usize,
    ) -> Option<DmaRing<'_, STRIDE>> {
        let fits = entries.is_power_of_two()
            && STRIDE % 8 == 0
            && offset % 8 == 0
            && entries.checked_mul(STRIDE)?.checked_add(offset)? <= self.region.len;
        // `then`, not `then_some`: the ring (and `entries - 1`) only once `entries` is known to
        // be a power of two — an empty queue (0 entries) is refused, not an overflow.
        fits.then(|| DmaRing {
            base: self.region.cpu.as_ptr().wrapping_add(offset),
            mask: entries - 1,
            _buf: PhantomData,
        })
    }

    /// Where a ring of `entries` entries of `STRIDE` bytes from byte `offset` on lies, checked
    /// here once (as [`DmaBuf::ring_at`]) so that [`DmaBuf::ring_of`] needs one compare.
    pub(crate) fn ring_geometry<const STRIDE: usize>(
        &self,
        offset: usize,
        entries: usize,
    ) -> Option<RingGeometry<STRIDE>> {
        self.ring_at::<STRIDE>(offset, entries)?;
        Some(RingGeometry {
            offset,
            mask: entries - 1,
            end: offset + entries * STRIDE,
        })
    }

    /// The ring `g` describes, if this buffer holds it (is at least `g`'s end long: the only
    /// thing `ring_geometry` checked that depends on the buffer).
    #[inline(always)]
    pub(crate) fn ring_of<const STRIDE: usize>(
        &self,
        g: &RingGeometry<STRIDE>,
    ) -> Option<DmaRing<'_, STRIDE>> {
        (g.end <= self.region.len).then(|| DmaRing {
            base: self.region.cpu.as_ptr().wrapping_add(g.offset),
            mask: g.mask,
            _buf: PhantomData,
        })
    }

    /// Copies `src` into the buffer at `offset`.
    pub fn write_bytes(&self, offset: usize, src: &[u8]) -> Result<(), OutOfBounds> {
        self.check(offset, src.len(), 1)?;
        let mut i = 0;
        while i < src.len() {
            let off = offset + i;
            if off % 8 == 0 && src.len() - i >= 8 {
                let mut w = [0u8; 8];
                w.copy_from_slice(&src[i..i + 8]);
                self.write_u64_raw(off, u64::from_ne_bytes(w))?;
                i += 8;
            } else {
                self.write_u8(off, src[i])?;
                i += 1;
            }
        }
        Ok(())
    }

    /// Copies from the buffer at `offset` into `dst`.
    pub fn read_bytes(&self, offset: usize, dst: &mut [u8]) -> Result<(), OutOfBounds> {
        self.check(offset, dst.len(), 1)?;
        let mut i = 0;
        while i < dst.len() {
            let off = offset + i;
            if off % 8 == 0 && dst.len() - i >= 8 {
                let w = self.read_u64_raw(off)?.to_ne_bytes();
                dst[i..i + 8].copy_from_slice(&w);
                i += 8;
            } else {
                dst[i] = self.read_u8(off)?;
                i += 1;
            }
        }
        Ok(())
    }

    #[cfg(test)] // the io tests (and Miri) exercise it; the driver does not use it
    /// Fills `len` bytes at `offset` with zeros.
    pub(crate) fn zero_range(&self, offset: usize, len: usize) -> Result<(), OutOfBounds> {
        self.check(offset, len, 1)?;
        for off in offset..offset + len {
            self.write_u8(off, 0)?;
        }
        Ok(())
    }
}

/// A ring's place in a [`DmaBuf`] ([`DmaBuf::ring_geometry`]): power-of-two entries of
/// `STRIDE` bytes (a multiple of 8) from an 8-aligned offset, ending at `end` — facts that hold
/// for every buffer at least `end` bytes long, which is all [`DmaBuf::ring_of`] checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RingGeometry<const STRIDE: usize> {
    offset: usize,
    mask: usize,
    end: usize,
}

/// A [`DmaBuf`]'s start (or a part from an offset on) seen as a ring of fixed-size entries
/// ([`DmaBuf::ring`], `DmaBuf::ring_at`): a CQ read through stretches that do not wrap
/// ([`DmaRing::segment`]), a send queue written by whole WQEBBs (`DmaRing<64>::write_wqebb`).
#[derive(Debug, Clone, Copy)]
pub struct DmaRing<'a, const STRIDE: usize> {
    /// The buffer's first byte (copied so that a loop keeps it in a register).
    base: *mut u8,
    mask: usize,
    _buf: PhantomData<&'a DmaBuf>,
}

impl<const STRIDE: usize> DmaRing<'_, STRIDE> {
    /// Entries `i & mask` onwards up to the end of the ring, at most `max` of them: a stretch
    /// that does not wrap, walked with plain indices (a CQ's owner bit is the same along it).
    #[inline(always)]
    pub fn segment(&self, i: usize, max: usize) -> DmaSegment<'_, STRIDE> {
        let first = i & self.mask;
        DmaSegment {
            base: self.base.wrapping_add(first * STRIDE),
            len: (self.mask + 1 - first).min(max),
            _ring: PhantomData,
        }
    }
}

impl DmaRing<'_, 16> {
    /// Stores entry `j & mask` (a 16-byte segment: a receive queue's data pointer) as two
    /// native words, relaxed, no check (the index is masked into the ring `ring_at` checked).
    #[inline(always)]
    pub(crate) fn write_seg(&self, j: usize, seg: [u64; 2]) {
        let p = self.base.wrapping_add((j & self.mask) * 16);
        // SAFETY: entry `j & mask < entries` lies inside the buffer (`ring_at`, or
        // `ring_geometry` with `ring_of`, checked that `entries * 16` bytes from the ring's base
        // fit), which the ring borrows; the base is 8-aligned, so both words are; atomic stores.
        unsafe {
            AtomicU64::from_ptr(p.cast()).store(seg[0], Ordering::Relaxed);
            AtomicU64::from_ptr(p.wrapping_add(8).cast()).store(seg[1], Ordering::Relaxed);
        }
    }
}

impl DmaRing<'_, 64> {
    /// Stores entry `j & mask` (a send queue's WQEBB) as eight native words: eight relaxed
    /// 64-bit stores, no check (the index is masked into the ring `ring_at` checked).
    #[inline(always)]
    pub fn write_wqebb(&self, j: usize, bb: &[u64; 8]) {
        let p = self.base.wrapping_add((j & self.mask) * 64);
        for (i, &w) in bb.iter().enumerate() {
            // SAFETY: entry `j & mask < entries` lies inside the buffer (`ring_at`, or
            // `ring_geometry` with `ring_of` checking this buffer's length, checked that
            // `entries * 64` bytes from the ring's base fit), which the ring borrows; the base is
            // 8-aligned and word `i < 8` of the entry too; atomic stores.
            unsafe { AtomicU64::from_ptr(p.wrapping_add(i * 8).cast()) }
                .store(w, Ordering::Relaxed);
        }
    }

    /// Stores entry `j & mask` from up to eight big-endian words (their bytes as the device
    /// reads them); words past `bb`'s eighth are not stored.
    #[inline(always)]
    pub(crate) fn write_wqebb_be(&self, j: usize, bb: &[Be64]) {
        let p = self.base.wrapping_add((j & self.mask) * 64);
        for (i, w) in bb.iter().take(8).enumerate() {
            // SAFETY: as in `write_wqebb`: word `i < 8` of entry `j & mask`; atomic stores.
            unsafe { AtomicU64::from_ptr(p.wrapping_add(i * 8).cast()) }
                .store(w.to_ne_raw(), Ordering::Relaxed);
        }
    }
}

/// A stretch of a [`DmaRing`] that does not wrap ([`DmaRing::segment`]); entries are indexed
/// from 0 and checked against its length.
#[derive(Debug, Clone, Copy)]
pub struct DmaSegment<'a, const STRIDE: usize> {
    /// Its first entry.
    base: *mut u8,
    len: usize,
    _ring: PhantomData<&'a DmaBuf>,
}

impl<const STRIDE: usize> DmaSegment<'_, STRIDE> {
    /// Entries in the stretch.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the stretch is empty.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Hints the CPU to bring entry `j + AHEAD` closer. That entry may lie past the stretch,
    /// or past the buffer: a prefetch is a hint that never faults and reads nothing into
    /// Rust-visible memory, so the address needs no check (it may warm an unrelated line).
    #[inline(always)]
    pub fn prefetch_ahead<const AHEAD: usize>(&self, j: usize) {
        super::prefetch::prefetch(self.base.wrapping_add((j + AHEAD) * STRIDE));
    }

    /// Address of byte `OFF` of entry `j`, if `j < len`.
    #[inline(always)]
    fn at<const OFF: usize>(&self, j: usize) -> Option<*mut u8> {
        (j < self.len).then(|| self.base.wrapping_add(j * STRIDE + OFF))
    }

    /// Loads the 8 bytes at offset `OFF` (8-aligned, inside an entry; checked at compile time)
    /// of entry `j` with acquire ordering: later loads see what the device wrote before them (a
    /// CQE's owner word). `None` past the stretch's end.
    #[inline(always)]
    pub fn load_u64_acquire<const OFF: usize>(&self, j: usize) -> Option<[u8; 8]> {
        const { assert!(OFF % 8 == 0 && OFF + 8 <= STRIDE) };
        let p = self.at::<OFF>(j)?;
        // SAFETY: entry `j < len` of the stretch is entry `first + j` of the ring with
        // `first + len <= entries` (`segment`), and `entries * STRIDE <= len` of the buffer
        // (`ring`), which stays allocated while the stretch borrows it; `OFF + 8 <= STRIDE`; the
        // base is 8-aligned (checked at allocation) and STRIDE and OFF are multiples of 8;
        // valid memory per the platform contract; an atomic load.
        Some(
            unsafe { AtomicU64::from_ptr(p.cast()) }
                .load(Ordering::Acquire)
                .to_ne_bytes(),
        )
    }

    /// Loads the big-endian 32-bit word at offset `OFF` (4-aligned, inside an entry) of entry
    /// `j` (relaxed: after an acquire load of the same entry). `None` past the stretch's end.
    #[inline(always)]
    pub fn load_be32<const OFF: usize>(&self, j: usize) -> Option<Be32> {
        const { assert!(OFF % 4 == 0 && OFF + 4 <= STRIDE) };
        let p = self.at::<OFF>(j)?;
        // SAFETY: as in `load_u64_acquire`, for 4 bytes at a 4-aligned offset.
        let v = unsafe { AtomicU32::from_ptr(p.cast()) }.load(Ordering::Relaxed);
        Some(Be32::from_bytes(v.to_ne_bytes()))
    }
}
