//! Tests of the unsafe room on plain heap memory (no simulator): every accessor, rings and
//! segments across wraps, the shared tables and their reference counts, and the refusals. They
//! are what `cargo miri test -p mlx5 --lib` checks for undefined behaviour.

extern crate std;

use core::cell::RefCell;
use core::ptr::NonNull;
use std::vec::Vec;

use mlx5_ifc::{Be32, Be64};

use super::{DmaBuf, HostVec, SharedTable, Slots};

/// What a test ends with: the first error a step met, instead of a panic.
type TestResult = Result<(), Failed>;

/// The errors the room's operations return, as a test reports them.
#[derive(Debug)]
#[allow(dead_code)] // read by the test harness through `Debug`
enum Failed {
    Platform(PlatformError),
    Bounds(super::dma::OutOfBounds),
    Absent(&'static str),
}

impl From<PlatformError> for Failed {
    fn from(e: PlatformError) -> Self {
        Failed::Platform(e)
    }
}

impl From<super::dma::OutOfBounds> for Failed {
    fn from(e: super::dma::OutOfBounds) -> Self {
        Failed::Bounds(e)
    }
}
use crate::io::platform::{DmaRegion, Platform, PlatformError};

/// DMA and host memory from the heap; no device. Counts what is live.
#[derive(Default)]
pub(crate) struct Heap {
    dma: RefCell<Vec<(NonNull<u8>, usize, usize)>>,
    host: RefCell<Vec<NonNull<u8>>>,
    /// Every 64-bit BAR store, in order.
    bar64: RefCell<Vec<(u64, Be64)>>,
}

/// The heap layout of a region (`None` for an alignment that is not a power of two).
fn layout(len: usize, align: usize) -> Option<std::alloc::Layout> {
    std::alloc::Layout::from_size_align(len.max(1), align.max(8)).ok()
}

// SAFETY: DMA memory is fresh zeroed heap memory of the asked size and alignment, valid until
// `dma_free`; host memory comes from `io::host`; the BAR accessors touch nothing.
unsafe impl Platform for Heap {
    fn bar_read32(&self, _: u64) -> Be32 {
        Be32::new(0)
    }
    fn bar_write32(&self, _: u64, _: Be32) {}
    fn bar_write64(&self, offset: u64, value: Be64) {
        self.bar64.borrow_mut().push((offset, value));
    }
    fn dma_alloc(&self, len: usize, align: usize) -> Result<DmaRegion, PlatformError> {
        let l = layout(len, align).ok_or(PlatformError::OutOfDmaMemory { len, align })?;
        // SAFETY: non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(l) };
        let cpu = NonNull::new(p).ok_or(PlatformError::OutOfDmaMemory { len, align })?;
        self.dma.borrow_mut().push((cpu, len, align));
        Ok(DmaRegion {
            cpu,
            iova: p as u64,
            len,
        })
    }
    fn dma_free(&self, r: DmaRegion) -> Result<(), PlatformError> {
        let mut live = self.dma.borrow_mut();
        let i = live
            .iter()
            .position(|&(p, ..)| p == r.cpu)
            .ok_or(PlatformError::UnknownRegion { iova: r.iova })?;
        let (p, len, align) = live.swap_remove(i);
        if let Some(l) = layout(len, align) {
            // SAFETY: allocated above with this layout, removed from the live list once.
            unsafe { std::alloc::dealloc(p.as_ptr(), l) };
        }
        Ok(())
    }
    fn host_alloc(&self, len: usize, align: usize) -> Result<NonNull<u8>, PlatformError> {
        let p = super::host::heap_alloc(len, align)?;
        self.host.borrow_mut().push(p);
        Ok(p)
    }
    unsafe fn host_free(&self, ptr: NonNull<u8>, len: usize, align: usize) {
        self.host.borrow_mut().retain(|&p| p != ptr);
        // SAFETY: forwarded contract.
        unsafe { super::host::heap_free(ptr, len, align) }
    }
    fn now_ns(&self) -> u64 {
        0
    }
}

#[test]
fn every_accessor_stays_in_bounds_and_round_trips() -> TestResult {
    let h = Heap::default();
    let b = DmaBuf::alloc(&h, 256, 64)?;
    b.write_u8(3, 0xab)?;
    assert_eq!(b.read_u8(3)?, 0xab);
    b.write_u8_release(4, 0xcd)?;
    assert_eq!(b.read_u8_acquire(4)?, 0xcd);
    b.write_be32(8, Be32::new(0x0102_0304))?;
    assert_eq!(b.read_be32(8)?.get(), 0x0102_0304);
    assert_eq!(b.read_u8(8)?, 1, "big-endian in memory");
    b.write_be64(16, Be64::new(0x1122_3344_5566_7788))?;
    assert_eq!(b.read_be64(16)?.get(), 0x1122_3344_5566_7788);
    b.write_seg16(32, &[7; 16])?;
    b.write_wqebb(64, &[9; 8])?;
    assert_eq!(b.read_wqebb(64)?, [9; 8]);
    assert_eq!(b.read_words::<16>(32)?, [7; 16]);
    assert_eq!(b.read_u64_acquire(64)?, 9u64.to_ne_bytes());
    b.write_bytes(130, &[1, 2, 3, 4, 5])?;
    let mut got = [0u8; 5];
    b.read_bytes(130, &mut got)?;
    assert_eq!(got, [1, 2, 3, 4, 5]);
    b.zero_range(128, 16)?;
    b.read_bytes(130, &mut got)?;
    assert_eq!(got, [0; 5]);
    // Out of bounds, misaligned, wrapping offsets: refused, never touched.
    assert!(b.write_u8(256, 1).is_err());
    assert!(b.write_be32(254, Be32::new(1)).is_err());
    assert!(b.write_be32(2, Be32::new(1)).is_err(), "misaligned");
    assert!(b.read_be64(usize::MAX - 3).is_err());
    assert!(b.write_bytes(usize::MAX, &[1]).is_err());
    assert!(b.read_bytes(250, &mut [0; 7]).is_err());
    assert!(b.read_words::<16>(248).is_err());
    b.free(&h)?;
    assert!(h.dma.borrow_mut().is_empty());
    Ok(())
}

#[test]
fn rings_and_segments_wrap_inside_the_buffer() -> TestResult {
    let h = Heap::default();
    let b = DmaBuf::alloc(&h, 8 * 64, 64)?;
    for i in 0..8u8 {
        b.write_u8(usize::from(i) * 64 + 63, i)?;
    }
    let ring = b
        .ring::<64>(8)
        .ok_or(Failed::Absent("a ring of 8 WQEBBs"))?;
    assert!(
        b.ring::<64>(16).is_none(),
        "more entries than the buffer holds"
    );
    assert!(b.ring::<64>(6).is_none(), "not a power of two");
    // A segment never wraps: from entry 6, at most 2.
    let seg = ring.segment(6, 5);
    assert_eq!(seg.len(), 2);
    assert_eq!(
        seg.load_u64_acquire::<56>(1)
            .ok_or(Failed::Absent("word 1 of the segment"))?[7],
        7
    );
    assert!(seg.load_u64_acquire::<56>(2).is_none());
    assert!(seg.load_be32::<60>(0).is_some());
    seg.prefetch_ahead::<16>(0);
    // Index 14 is entry 6 again.
    assert_eq!(
        ring.segment(14, 1)
            .load_u64_acquire::<56>(0)
            .ok_or(Failed::Absent("word 0 of the segment"))?[7],
        6
    );
    b.free(&h)?;
    Ok(())
}

#[test]
fn shared_tables_live_in_host_memory_until_the_last_handle() -> TestResult {
    let h = Heap::default();
    let t = SharedTable::alloc(&h, 16)?;
    assert!(
        h.dma.borrow_mut().is_empty(),
        "no DMA memory for bookkeeping"
    );
    assert_eq!(h.host.borrow_mut().len(), 1);
    t.store(3, 42);
    let u = t.share();
    assert!(t.same(&u));
    assert_eq!(u.load(3), 42);
    assert_eq!(u.load(16), 0, "out of range reads 0");
    u.store(16, 1);
    t.store_pair_relaxed(4, 5, 6);
    assert_eq!(t.load_pair_relaxed(4), Some((5, 6)));
    assert_eq!(
        t.load_pair_relaxed(15),
        None,
        "the pair's second word is out of range"
    );
    assert_eq!(t.swap(3, 7), Some(42));
    assert!(t.compare_exchange(3, 7, 8));
    assert!(!t.compare_exchange(3, 7, 9));
    let pairs = t
        .pairs(2, 4)
        .ok_or(Failed::Absent("pairs 2..4 of the table"))?;
    assert_eq!(pairs.load_relaxed(1 + 4 * 1000), (5, 6), "masked index");
    pairs.store_relaxed(3 + 4 * 7, 11, 12);
    assert_eq!(
        t.load_pair_relaxed(8),
        Some((11, 12)),
        "pair 3 is words 8 and 9"
    );
    assert_eq!(pairs.load_relaxed(3), (11, 12));
    assert!(
        t.pairs(2, 8).is_none(),
        "8 pairs from word 2 do not fit 16 words"
    );
    assert!(t.pairs(0, 3).is_none(), "not a power of two");
    t.prefetch(100);
    t.release(&h);
    assert_eq!(h.host.borrow_mut().len(), 1, "one handle left");
    assert_eq!(u.load(3), 8);
    u.release(&h);
    assert!(h.host.borrow_mut().is_empty(), "the last handle frees it");
    Ok(())
}

#[test]
fn absurd_table_and_buffer_sizes_are_refused() {
    let h = Heap::default();
    assert!(SharedTable::alloc(&h, usize::MAX / 8 + 5).is_err());
    assert!(SharedTable::alloc(&h, usize::MAX).is_err());
    assert!(SharedTable::alloc(&h, isize::MAX as usize / 8).is_err());
    assert!(h.host.borrow_mut().is_empty());
}

#[test]
fn a_ring_from_an_offset_takes_whole_wqebbs_at_masked_indices() -> TestResult {
    let h = Heap::default();
    let b = DmaBuf::alloc(&h, 320, 64)?;
    assert!(
        b.ring_at::<64>(64, 8).is_none(),
        "64 + 8 x 64 bytes leave 320"
    );
    assert!(b.ring_at::<64>(4, 4).is_none(), "not 8-aligned");
    assert!(b.ring_at::<64>(64, 3).is_none(), "not a power of two");
    let sq = b
        .ring_at::<64>(64, 4)
        .ok_or(Failed::Absent("the SQ ring"))?;
    sq.write_wqebb(5, &[7; 8]); // entry 5 & 3 = 1: bytes 128..192
    assert_eq!(b.read_wqebb(128)?, [7; 8]);
    let words: [Be64; 8] = core::array::from_fn(|i| Be64::new(i as u64 + 1));
    sq.write_wqebb_be(3, &words);
    assert_eq!(b.read_be64(256 + 8 * 7)?, Be64::new(8));
    sq.write_wqebb_be(0, &[Be64::new(9); 12]); // only 8 words are stored
    assert_eq!(b.read_wqebb(0)?, [0; 8], "the RQ before the ring untouched");
    assert_eq!(b.read_be64(64 + 56)?, Be64::new(9));
    assert_eq!(b.read_be64(128)?, Be64::from_ne_raw(7));
    let rq = b.ring_at::<16>(0, 4).ok_or(Failed::Absent("the RQ ring"))?;
    rq.write_seg(6, [3, 4]); // entry 6 & 3 = 2: bytes 32..48
    assert_eq!(b.read_wqebb(0)?[4..6], [3, 4]);
    b.free(&h)?;
    Ok(())
}

#[test]
fn the_default_blueflame_copy_is_one_store_per_word_in_order_and_no_write_combining() {
    let h = Heap::default();
    let words = [Be64::new(1), Be64::new(2), Be64::new(3)];
    h.bar_write_bf(0x1800, &words);
    assert_eq!(
        *h.bar64.borrow(),
        [(0x1800, words[0]), (0x1808, words[1]), (0x1810, words[2])]
    );
    assert!(
        !h.uar_write_combining(),
        "BlueFlame is off unless a platform says otherwise"
    );
}

#[test]
fn an_mmio_blueflame_copy_stores_every_word_inside_the_window_or_nothing() -> TestResult {
    let mut mem = [0u64; 8];
    let base =
        NonNull::new(mem.as_mut_ptr().cast::<u8>()).ok_or(Failed::Absent("a non-null window"))?;
    {
        // SAFETY: `mem` outlives the region, which is the only way it is reached meanwhile.
        let m = unsafe { super::MmioRegion::new(base, 64) };
        m.write_bf(16, &[Be64::new(0xa), Be64::new(0xb)]);
        m.write_bf(48, &[Be64::new(0xc), Be64::new(0xd), Be64::new(0xe)]); // past the end
        m.write_bf(4, &[Be64::new(0xf)]); // misaligned
    }
    assert_eq!(
        mem.map(|w| Be64::from_ne_raw(w).get()),
        [0, 0, 0xa, 0xb, 0, 0, 0, 0]
    );
    Ok(())
}

impl Heap {
    /// Host allocations not freed yet.
    pub(crate) fn host_live(&self) -> usize {
        self.host.borrow().len()
    }
}

#[test]
fn slots_hold_take_and_free_their_values() -> TestResult {
    let h = Heap::default();
    let mut s: Slots<(u32, SharedTable)> = Slots::alloc(&h, 8)?;
    assert_eq!(s.len(), 8);
    assert!(
        (0..8).all(|i| s.get(i).is_none()),
        "every slot starts empty"
    );
    let t = SharedTable::alloc(&h, 2)?;
    t.store(1, 77);
    assert!(s
        .put(3, (5, t))
        .map_err(|_| Failed::Absent("slot 3"))?
        .is_none());
    assert_eq!(s.get(3).map(|(n, t)| (*n, t.load(1))), Some((5, 77)));
    if let Some((n, _)) = s.get_mut(3) {
        *n = 6;
    }
    assert!(
        s.put(8, (9, SharedTable::alloc(&h, 1)?))
            .is_err_and(|(_, t)| {
                t.release(&h);
                true
            }),
        "out of range is refused and the value comes back"
    );
    assert!(s.get(8).is_none() && s.take(99).is_none());
    let (n, t) = s.take(3).ok_or(Failed::Absent("slot 3 taken"))?;
    assert_eq!(n, 6);
    t.release(&h);
    assert!(s.get(3).is_none());
    s.free(&h);
    assert_eq!(
        h.host_live(),
        0,
        "the slots and the tables they held are freed"
    );
    let e: Slots<u64> = Slots::alloc(&h, 0)?;
    assert_eq!(e.len(), 0);
    e.free(&h);
    Ok(())
}

#[test]
fn a_host_vec_grows_removes_and_frees() -> TestResult {
    let h = Heap::default();
    let mut v: HostVec<SharedTable> = HostVec::default();
    for i in 0..20u64 {
        let t = SharedTable::alloc(&h, 1)?;
        t.store(0, i);
        v.push(&h, t).map_err(|(e, _)| e)?;
    }
    assert_eq!(v.len(), 20);
    assert_eq!(v.get(7).map(|t| t.load(0)), Some(7));
    let t = v.swap_remove(3).ok_or(Failed::Absent("entry 3"))?;
    assert_eq!(t.load(0), 3);
    t.release(&h);
    assert_eq!(
        v.get(3).map(|t| t.load(0)),
        Some(19),
        "the last took its place"
    );
    assert!(v.get(19).is_none() && v.swap_remove(19).is_none());
    v.for_each_mut(|t| t.store(0, t.load(0) + 100));
    assert!(v.iter().all(|t| t.load(0) >= 100));
    let mut n = 0;
    v.drain_each(|t| {
        n += 1;
        t.release(&h);
    });
    assert_eq!((n, v.len()), (19, 0));
    v.free(&h);
    assert_eq!(h.host_live(), 0, "the list and every table freed");
    Ok(())
}
