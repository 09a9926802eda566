//! Device memory (MEMIC): the window of BAR0 the device backs with memory of its own
//! (`device_mem_cap.memic_bar_start_addr`, `memic_bar_size`), handed out by ALLOC_MEMIC
//! ([`crate::fw`]'s `memic`), read and written by the host through the BAR (rdma-core maps the
//! pages of an allocation write-combining and copies with 4-byte stores) and by the data path
//! through MEMIC keys ([`super::translation`]).
//!
//! The data path names device memory with addresses of their own space: [`DM_SPACE`] | the
//! BAR0 offset — never an IOVA, which a DMA through the IOMMU would be
//! ([`super::hw::Hw::dma_read`]).

use std::collections::BTreeMap;

use mlx5_ifc::prm::memic::DeviceMemCap as D;

use crate::Profile;

/// The tag of a device memory address in the data path's address space (bit 63): the rest is
/// the BAR0 offset. A key of another mode never yields such an address (PA keys refuse it).
pub(crate) const DM_SPACE: u64 = 1 << 63;

/// Why ALLOC_MEMIC found no room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AllocError {
    /// The range, the size or the alignment is not one the device takes.
    Param,
    /// No free, aligned place of that size in the range (Linux tries its next page).
    NoRoom,
}

/// The device memory and its allocations.
#[derive(Debug, Default)]
pub(crate) struct Memic {
    /// BAR0 offset of the window.
    base: u64,
    bytes: Vec<u8>,
    /// The largest allocation (`max_memic_size`).
    max: u64,
    /// The largest `log_memic_addr_alignment`.
    max_align: u64,
    /// Live allocations: BAR0 offset → size.
    allocs: BTreeMap<u64, u64>,
}

impl Memic {
    /// The window the profile describes (none without `device_memory` / `memic`).
    pub(crate) fn new(profile: &Profile) -> Memic {
        if profile.dev_mem_field(D::MEMIC) == 0 {
            return Memic::default();
        }
        let size = profile.dev_mem_field(D::MEMIC_BAR_SIZE);
        Memic {
            base: profile.dev_mem_field(D::MEMIC_BAR_START_ADDR),
            bytes: vec![0; usize::try_from(size).unwrap_or(0)],
            max: profile.dev_mem_field(D::MAX_MEMIC_SIZE),
            max_align: profile.dev_mem_field(D::LOG_MAX_MEMIC_ADDR_ALIGNMENT),
            allocs: BTreeMap::new(),
        }
    }

    /// The bytes `[off, off + len)` of BAR0 as window bytes, if they lie in the window.
    fn span(&self, off: u64, len: usize) -> Option<std::ops::Range<usize>> {
        let at = usize::try_from(off.checked_sub(self.base)?).ok()?;
        let end = at.checked_add(len)?;
        (end <= self.bytes.len()).then_some(at..end)
    }

    /// Whether `[off, off + len)` of BAR0 lies in the window.
    pub(crate) fn contains(&self, off: u64, len: usize) -> bool {
        self.span(off, len).is_some()
    }

    /// Reads window bytes at BAR0 offset `off`.
    pub(crate) fn read(&self, off: u64, buf: &mut [u8]) -> Result<(), ()> {
        let r = self.span(off, buf.len()).ok_or(())?;
        buf.copy_from_slice(&self.bytes[r]);
        Ok(())
    }

    /// Writes window bytes at BAR0 offset `off`.
    pub(crate) fn write(&mut self, off: u64, data: &[u8]) -> Result<(), ()> {
        let r = self.span(off, data.len()).ok_or(())?;
        self.bytes[r].copy_from_slice(data);
        Ok(())
    }

    /// Whether `[off, off + len)` lies inside one live allocation.
    pub(crate) fn allocated(&self, off: u64, len: u64) -> bool {
        self.allocs
            .range(..=off)
            .next_back()
            .is_some_and(|(&a, &n)| off.checked_add(len).is_some_and(|e| e <= a + n))
    }

    /// ALLOC_MEMIC: `size` bytes aligned to `64 << align`, inside `[start, start + range)` of
    /// the window, on none of the live allocations: the lowest such place. The bytes are zeroed
    /// (nothing of a freed allocation reaches the next owner).
    pub(crate) fn alloc(
        &mut self,
        (start, range): (u64, u64),
        size: u64,
        align: u64,
    ) -> Result<u64, AllocError> {
        let range_ok = usize::try_from(range)
            .ok()
            .is_some_and(|n| self.contains(start, n));
        if size == 0 || size > self.max || align > self.max_align || !range_ok {
            return Err(AllocError::Param);
        }
        let step = 64u64 << align;
        let end = start + range;
        let mut at = start.next_multiple_of(step);
        while at.checked_add(size).is_some_and(|e| e <= end) {
            match self.allocs.range(..at + size).next_back() {
                Some((&a, &n)) if a + n > at => at = (a + n).next_multiple_of(step),
                _ => {
                    self.allocs.insert(at, size);
                    if let Some(r) = self.span(at, size as usize) {
                        self.bytes[r].fill(0);
                    }
                    return Ok(at);
                }
            }
        }
        Err(AllocError::NoRoom)
    }

    /// DEALLOC_MEMIC of exactly an allocation handed out; `false` for any other pair.
    pub(crate) fn dealloc(&mut self, start: u64, size: u64) -> bool {
        if self.allocs.get(&start) == Some(&size) {
            self.allocs.remove(&start);
            true
        } else {
            false
        }
    }

    /// Live allocations (for accounts).
    pub(crate) fn live(&self) -> usize {
        self.allocs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window() -> Memic {
        Memic {
            base: 0x10000,
            bytes: vec![0; 0x4000],
            max: 0x4000,
            max_align: 6,
            allocs: BTreeMap::new(),
        }
    }

    #[test]
    fn allocations_take_the_lowest_free_aligned_place_in_their_range() {
        let mut m = window();
        assert_eq!(m.alloc((0x10000, 0x4000), 100, 0), Ok(0x10000));
        assert_eq!(m.alloc((0x10000, 0x4000), 64, 0), Ok(0x10080));
        // Page alignment (64 << 6).
        assert_eq!(m.alloc((0x10000, 0x4000), 64, 6), Ok(0x11000));
        // A page already partly taken has no room for a page.
        assert_eq!(
            m.alloc((0x10000, 0x1000), 0x1000, 0),
            Err(AllocError::NoRoom)
        );
        assert!(m.allocated(0x10080, 64) && !m.allocated(0x10080, 65));
        assert!(!m.dealloc(0x10080, 63) && m.dealloc(0x10080, 64));
        assert_eq!(m.live(), 2);
        // Outside the window, too big, too aligned, empty.
        for (range, size, align) in [
            ((0xf000, 0x2000), 64, 0),
            ((0x10000, 0x4000), 0x4001, 0),
            ((0x10000, 0x4000), 64, 7),
            ((0x10000, 0x4000), 0, 0),
        ] {
            assert_eq!(m.alloc(range, size, align), Err(AllocError::Param));
        }
    }
}
