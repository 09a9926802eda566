//! A first-fit allocator of offsets, no heap: what hands out the DMA and host arenas.

/// Free ranges of the arena (offsets, end exclusive), first fit, coalescing.
const MAX_FREE_RANGES: usize = 256;

/// A first-fit allocator over `0..len` offsets with at most 256 free ranges.
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

pub(crate) struct Pool {
    arena: Arena,
    /// (offset, rounded length) of every live allocation, unordered.
    live: heapless::Vec<(usize, usize), MAX_ALLOCS>,
    usage: Usage,
}

/// How much of an arena is used, and the most it ever was: what a static arena must hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Bytes the arena holds.
    pub capacity: usize,
    /// Bytes handed out now.
    pub in_use: usize,
    /// The most bytes handed out at once.
    pub peak: usize,
    /// The highest end offset any allocation reached (the arena could have been this small).
    pub high_water: usize,
}

impl Pool {
    pub(crate) fn new(len: usize) -> Self {
        Self {
            arena: Arena::new(len),
            live: heapless::Vec::new(),
            usage: Usage {
                capacity: len,
                ..Usage::default()
            },
        }
    }

    /// `len` bytes (rounded up to 64) whose address `base + offset` is aligned to `align` (at
    /// least 64); returns the offset and the rounded length.
    pub(crate) fn alloc(&mut self, len: usize, align: usize, base: u64) -> Option<(usize, usize)> {
        let size = len.max(1).checked_next_multiple_of(64)?;
        let off = self.arena.alloc(size, align.max(64), base)?;
        if self.live.push((off, size)).is_err() {
            self.arena.free(off, size);
            return None;
        }
        let u = &mut self.usage;
        u.in_use += size;
        u.peak = u.peak.max(u.in_use);
        u.high_water = u.high_water.max(off + size);
        Some((off, size))
    }

    /// Frees the live allocation at `off`; its rounded length, or `None` if there is none.
    pub(crate) fn free(&mut self, off: usize) -> Option<usize> {
        let i = self.live.iter().position(|&(o, _)| o == off)?;
        let (_, size) = self.live.swap_remove(i);
        self.usage.in_use -= size;
        self.arena.free(off, size).then_some(size)
    }

    /// The pool's usage.
    pub(crate) fn usage(&self) -> Usage {
        self.usage
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
