//! [`SharedTable`]: a table of the driver's own bookkeeping that several driver objects hold at
//! once, without a heap.
//!
//! It lives in **host memory the device cannot reach** ([`Platform::host_alloc`]): nothing the
//! device writes — by a bug, a corrupted CQE or a hostile firmware — can change a reference
//! count, a wr_id, a ring counter or a free list. The reference count lives in the table's
//! first eight bytes. Every handle keeps the memory valid; the last [`SharedTable::release`]
//! frees it. A handle dropped without `release` leaks the memory instead of freeing it — never
//! the other way round — so no handle can outlive it. The CQs use it to find the work-request
//! ids of the QPs and SRQs that complete on them.

use core::marker::PhantomData;
use core::sync::atomic::{AtomicU64, Ordering};

use core::ptr::NonNull;

use crate::io::platform::{Platform, PlatformError};

const HEADER: usize = 64;
const ALIGN: usize = 64;

/// A shared table of 64-bit words in host memory the device cannot reach.
#[derive(Debug)]
pub struct SharedTable {
    base: NonNull<u8>,
    /// Bytes allocated (header included).
    len: usize,
    words: usize,
}

// SAFETY: all accesses are atomic; the memory stays valid while any handle exists (the
// reference count in the header is only decremented by `release`, which frees at zero).
unsafe impl Send for SharedTable {}
// SAFETY: as above.
unsafe impl Sync for SharedTable {}

impl SharedTable {
    /// Allocates a zeroed table of `words` 64-bit words with one handle, in host memory.
    pub fn alloc<P: Platform + ?Sized>(p: &P, words: usize) -> Result<Self, PlatformError> {
        let len = words
            .checked_mul(8)
            .and_then(|b| b.checked_add(HEADER))
            .filter(|&l| l <= isize::MAX as usize)
            .ok_or(PlatformError::OutOfHostMemory {
                len: usize::MAX,
                align: ALIGN,
            })?;
        let base = p.host_alloc(len, ALIGN)?;
        if base.as_ptr() as usize % 8 != 0 {
            log::error!("platform returned misaligned host memory {base:?} for {len} bytes");
            // SAFETY: exactly what `host_alloc` returned, unused.
            unsafe { p.host_free(base, len, ALIGN) };
            return Err(PlatformError::OutOfHostMemory { len, align: ALIGN });
        }
        let t = Self { base, len, words };
        t.rc().store(1, Ordering::Relaxed);
        for i in 0..words {
            t.store(i, 0);
        }
        Ok(t)
    }

    fn rc(&self) -> &AtomicU64 {
        // SAFETY: the header is in bounds (len ≥ HEADER), 8-aligned (checked at allocation) and
        // valid while `self` exists (reference count ≥ 1); only atomics touch it.
        unsafe { AtomicU64::from_ptr(self.base.as_ptr().cast()) }
    }

    fn word(&self, i: usize) -> Option<&AtomicU64> {
        if i >= self.words {
            return None;
        }
        let p = self.base.as_ptr().wrapping_add(HEADER + i * 8);
        // SAFETY: `i < words` keeps the word inside the allocation; 8-aligned; valid while
        // `self` exists; only atomics touch it.
        Some(unsafe { AtomicU64::from_ptr(p.cast()) })
    }

    /// Another handle to the same table.
    pub fn share(&self) -> Self {
        self.rc().fetch_add(1, Ordering::Relaxed);
        Self {
            base: self.base,
            len: self.len,
            words: self.words,
        }
    }

    /// Gives this handle back; the last one frees the memory.
    pub fn release<P: Platform + ?Sized>(self, p: &P) {
        if self.rc().fetch_sub(1, Ordering::AcqRel) == 1 {
            // SAFETY: `base`/`len`/`ALIGN` are those of `host_alloc` in `alloc`; this was the
            // last handle (only `release` decrements the count, which no device can reach), so
            // nothing uses the memory any more.
            unsafe { p.host_free(self.base, self.len, ALIGN) };
        }
    }

    /// Whether two handles name the same table.
    pub fn same(&self, other: &Self) -> bool {
        self.base == other.base
    }

    /// Number of words.
    pub fn words(&self) -> usize {
        self.words
    }

    /// Loads word `i` (acquire); 0 when out of range.
    #[inline]
    pub fn load(&self, i: usize) -> u64 {
        self.word(i).map_or(0, |w| w.load(Ordering::Acquire))
    }

    /// Stores word `i` (release); ignored when out of range.
    #[inline]
    pub fn store(&self, i: usize, v: u64) {
        if let Some(w) = self.word(i) {
            w.store(v, Ordering::Release);
        }
    }

    /// Loads word `i` relaxed (a word an earlier acquire already orders); 0 when out of range.
    #[inline]
    pub(crate) fn load_relaxed(&self, i: usize) -> u64 {
        self.word(i).map_or(0, |w| w.load(Ordering::Relaxed))
    }

    /// Stores words `i` and `i + 1` relaxed, with one bounds check (a later release store or
    /// barrier orders them); ignored when out of range.
    #[inline]
    pub(crate) fn store_pair_relaxed(&self, i: usize, a: u64, b: u64) {
        if let (Some(x), Some(y)) = (self.word(i), self.word(i.wrapping_add(1))) {
            x.store(a, Ordering::Relaxed);
            y.store(b, Ordering::Relaxed);
        }
    }

    /// Loads words `i` and `i + 1` relaxed, with one bounds check (words an earlier acquire
    /// already orders); `None` when out of range.
    #[inline(always)]
    pub(crate) fn load_pair_relaxed(&self, i: usize) -> Option<(u64, u64)> {
        if i.checked_add(1)? >= self.words {
            return None;
        }
        let p = self.base.as_ptr().wrapping_add(HEADER + i * 8);
        // SAFETY: `i + 1 < words` keeps both words inside the allocation; 8-aligned; valid
        // while `self` exists; only atomics touch them.
        let (a, b) = unsafe {
            (
                AtomicU64::from_ptr(p.cast()),
                AtomicU64::from_ptr(p.wrapping_add(8).cast()),
            )
        };
        Some((a.load(Ordering::Relaxed), b.load(Ordering::Relaxed)))
    }

    /// A view of words `first..first + 2 * entries` as `entries` pairs of words (a send
    /// queue's wr_id and descriptor per WQEBB), bounds-checked here once: `entries` must be a
    /// power of two whose pairs fit. Its accessor masks the index.
    pub fn pairs(&self, first: usize, entries: usize) -> Option<PairRing<'_>> {
        let end = entries.checked_mul(2)?.checked_add(first)?;
        // `then`: `entries - 1` only for a power of two (0 entries is refused, not an overflow).
        (entries.is_power_of_two() && end <= self.words).then(|| PairRing {
            base: self.base.as_ptr().wrapping_add(HEADER + first * 8),
            mask: entries - 1,
            _table: PhantomData,
        })
    }

    /// Where `entries` pairs from word `first` on lie, checked here once (as
    /// [`SharedTable::pairs`]) so that [`SharedTable::pairs_of`] needs one compare.
    pub(crate) fn pair_geometry(&self, first: usize, entries: usize) -> Option<PairGeometry> {
        self.pairs(first, entries)?;
        Some(PairGeometry {
            first,
            mask: entries - 1,
            end: first + 2 * entries,
        })
    }

    /// The pairs `g` describes, if this table holds them (has at least `g`'s end words: the
    /// only thing `pair_geometry` checked that depends on the table).
    #[inline(always)]
    pub(crate) fn pairs_of(&self, g: &PairGeometry) -> Option<PairRing<'_>> {
        (g.end <= self.words).then(|| PairRing {
            base: self.base.as_ptr().wrapping_add(HEADER + g.first * 8),
            mask: g.mask,
            _table: PhantomData,
        })
    }

    /// Hints the CPU to bring the cache line of word `i` closer; nothing when out of range.
    #[inline(always)]
    pub(crate) fn prefetch(&self, i: usize) {
        if i < self.words {
            super::prefetch::prefetch(self.base.as_ptr().wrapping_add(HEADER + i * 8));
        }
    }

    /// Replaces word `i` with `v` (acquire-release), returning what it held; `None` when out
    /// of range.
    #[inline]
    pub fn swap(&self, i: usize, v: u64) -> Option<u64> {
        self.word(i).map(|w| w.swap(v, Ordering::AcqRel))
    }

    /// Compare-and-swap of word `i`; `false` when out of range or when it held something else.
    #[inline]
    pub(crate) fn compare_exchange(&self, i: usize, current: u64, new: u64) -> bool {
        self.word(i).is_some_and(|w| {
            w.compare_exchange(current, new, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        })
    }
}

/// The place of a power-of-two number of word pairs in a [`SharedTable`]
/// ([`SharedTable::pair_geometry`]), ending at word `end`: it holds for every table at least
/// `end` words long, which is all [`SharedTable::pairs_of`] checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PairGeometry {
    first: usize,
    mask: usize,
    end: usize,
}

/// Pairs of words of a [`SharedTable`] ([`SharedTable::pairs`]), indexed with a mask so that no
/// access needs a run-time bounds check.
#[derive(Debug, Clone, Copy)]
pub struct PairRing<'a> {
    /// Word `first` of the table (copied so that a loop keeps it in a register).
    base: *mut u8,
    mask: usize,
    _table: PhantomData<&'a SharedTable>,
}

impl PairRing<'_> {
    /// Loads pair `i & mask` relaxed (words an earlier acquire already orders).
    #[inline(always)]
    pub fn load_relaxed(&self, i: usize) -> (u64, u64) {
        let p = self.base.wrapping_add(16 * (i & self.mask));
        // SAFETY: pair `i & mask` is words `first + 2 * (i & mask)` and the next, both below
        // `first + 2 * entries <= words` (checked by `pairs`, or by `pair_geometry` with
        // `pairs_of` checking this table's words), so inside the allocation;
        // 8-aligned; valid while the table exists (borrowed); only atomics touch them.
        let (a, b) = unsafe {
            (
                AtomicU64::from_ptr(p.cast()),
                AtomicU64::from_ptr(p.wrapping_add(8).cast()),
            )
        };
        (a.load(Ordering::Relaxed), b.load(Ordering::Relaxed))
    }

    /// Stores pair `i & mask` relaxed (a later release store orders them for the reader).
    #[inline(always)]
    pub fn store_relaxed(&self, i: usize, a: u64, b: u64) {
        let p = self.base.wrapping_add(16 * (i & self.mask));
        // SAFETY: as in `load_relaxed`: both words are inside the table, 8-aligned, valid while
        // it is borrowed, and only atomics touch them.
        unsafe {
            AtomicU64::from_ptr(p.cast()).store(a, Ordering::Relaxed);
            AtomicU64::from_ptr(p.wrapping_add(8).cast()).store(b, Ordering::Relaxed);
        }
    }
}
