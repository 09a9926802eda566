//! The type-1 IOMMU container: which IOVAs exist ([`IommuInfo`], read from the kernel), an
//! allocator of our own that hands them out ([`RangeAllocator`]), and map/unmap of pinned host
//! memory ([`Iommu`]). The ioctls and the mappings themselves are in the crate's unsafe room
//! (`sys`: `iommu_info`, `DmaChunk`, `BorrowedMapping`).

use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

use vfio_ioctls::VfioContainer;

use crate::error::VfioError;
use crate::memory::{map_error, HostMemory};
use crate::sys::dma::{BorrowedMapping, IovaMapper, MapTarget};
use crate::sys::fd::iommu_info;

const INFO_FLAG_PGSIZES: u32 = 1;
const INFO_FLAG_CAPS: u32 = 2;
const CAP_IOVA_RANGE: u16 = 1;
const CAP_DMA_AVAIL: u16 = 3;

/// Smallest IOVA handed out: nothing is ever mapped at IOVA 0 (or in the first 2 MiB), so a
/// zeroed address field in a device structure can never reach live memory.
pub const MIN_IOVA: u64 = 2 << 20;

/// What the kernel says about the container's IOMMU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IommuInfo {
    /// Supported page sizes (bit n set: 2^n bytes), if reported.
    pub page_sizes: Option<u64>,
    /// Usable IOVA ranges, inclusive, ascending; `None` if the kernel does not report them.
    pub iova_ranges: Option<Vec<(u64, u64)>>,
    /// How many more DMA mappings the container accepts, if reported.
    pub dma_avail: Option<u32>,
}

fn ne_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn ne_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn ne_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

impl IommuInfo {
    /// Parses a `struct vfio_iommu_type1_info` (host byte order) with its capability chain (argsz, flags,
    /// iova_pgsizes, cap_offset; caps: id u16, version u16, next u32, then the payload).
    pub fn parse(buf: &[u8]) -> Option<Self> {
        let flags = ne_u32(buf, 4)?;
        let page_sizes = (flags & INFO_FLAG_PGSIZES != 0)
            .then(|| ne_u64(buf, 8))
            .flatten();
        let mut info = Self {
            page_sizes,
            iova_ranges: None,
            dma_avail: None,
        };
        if flags & INFO_FLAG_CAPS == 0 {
            return Some(info);
        }
        let mut off = ne_u32(buf, 16)? as usize;
        let mut hops = 0;
        while off != 0 && hops < 64 {
            hops += 1;
            let id = ne_u16(buf, off)?;
            let next = ne_u32(buf, off + 4)? as usize;
            match id {
                CAP_IOVA_RANGE => {
                    let n = ne_u32(buf, off + 8)? as usize;
                    let mut ranges = Vec::with_capacity(n.min(1024));
                    for i in 0..n {
                        let at = off + 16 + i * 16;
                        ranges.push((ne_u64(buf, at)?, ne_u64(buf, at + 8)?));
                    }
                    ranges.sort_unstable();
                    info.iova_ranges = Some(ranges);
                }
                CAP_DMA_AVAIL => info.dma_avail = Some(ne_u32(buf, off + 8)?),
                _ => {}
            }
            if next <= off {
                break; // the chain only goes forward
            }
            off = next;
        }
        Some(info)
    }
}

/// A first-fit allocator of aligned ranges out of a set of free ranges (inclusive bounds, so a
/// range may end at `u64::MAX`). Used for IOVAs and for carving DMA chunks.
#[derive(Debug, Clone, Default)]
pub struct RangeAllocator {
    /// Free ranges `(first, last)`, ascending, disjoint, never adjacent (coalesced).
    free: Vec<(u64, u64)>,
}

/// Why [`RangeAllocator::free`] refused a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DoubleFree {
    /// Start of the refused range.
    pub start: u64,
    /// Its length.
    pub len: u64,
}

impl RangeAllocator {
    /// An allocator over `ranges` (inclusive; may overlap or be unsorted).
    pub fn new(ranges: &[(u64, u64)]) -> Self {
        let mut a = Self::default();
        let mut r: Vec<(u64, u64)> = ranges.iter().copied().filter(|(s, e)| s <= e).collect();
        r.sort_unstable();
        for (s, e) in r {
            match a.free.last_mut() {
                Some(last) if s <= last.1.saturating_add(1) => last.1 = last.1.max(e),
                _ => a.free.push((s, e)),
            }
        }
        a
    }

    /// The lowest `len`-byte range aligned to `align` (a power of two); `None` if none is free.
    pub fn alloc(&mut self, len: u64, align: u64) -> Option<u64> {
        if len == 0 || !align.is_power_of_two() {
            return None;
        }
        for i in 0..self.free.len() {
            let (s, e) = self.free[i];
            let Some(start) = s.checked_add(align - 1).map(|x| x & !(align - 1)) else {
                continue;
            };
            let Some(last) = start.checked_add(len - 1) else {
                continue;
            };
            if last > e {
                continue;
            }
            // Split (s..=e) into the head before `start` and the tail after `last`.
            let head = (start > s).then(|| (s, start - 1));
            let tail = (last < e).then(|| (last + 1, e));
            match (head, tail) {
                (Some(h), Some(t)) => {
                    self.free[i] = h;
                    self.free.insert(i + 1, t);
                }
                (Some(h), None) => self.free[i] = h,
                (None, Some(t)) => self.free[i] = t,
                (None, None) => {
                    self.free.remove(i);
                }
            }
            return Some(start);
        }
        None
    }

    /// Returns `len` bytes at `start`. Refuses (and changes nothing) if any byte is free already.
    pub fn free(&mut self, start: u64, len: u64) -> Result<(), DoubleFree> {
        let err = DoubleFree { start, len };
        if len == 0 {
            return Ok(());
        }
        let last = start.checked_add(len - 1).ok_or(err)?;
        let i = self.free.partition_point(|&(_, e)| e < start);
        if let Some(&(s, _)) = self.free.get(i) {
            if s <= last {
                return Err(err); // overlaps a free range
            }
        }
        let joins_prev = i > 0 && self.free[i - 1].1.checked_add(1) == Some(start);
        let joins_next = self
            .free
            .get(i)
            .is_some_and(|&(s, _)| last.checked_add(1) == Some(s));
        match (joins_prev, joins_next) {
            (true, true) => {
                self.free[i - 1].1 = self.free[i].1;
                self.free.remove(i);
            }
            (true, false) => self.free[i - 1].1 = last,
            (false, true) => self.free[i].0 = start,
            (false, false) => self.free.insert(i, (start, last)),
        }
        Ok(())
    }

    /// Free bytes in total (saturating).
    pub fn free_bytes(&self) -> u64 {
        self.free.iter().fold(0u64, |a, &(s, e)| {
            a.saturating_add((e - s).saturating_add(1))
        })
    }

    /// The free ranges (inclusive).
    pub fn free_ranges(&self) -> &[(u64, u64)] {
        &self.free
    }
}

/// The IOVA ranges to hand out: the kernel's (or, when it reports none, the low 39 bits that
/// every VT-d/AMD-Vi implementation translates), minus the first [`MIN_IOVA`] bytes, clipped to
/// the device's DMA mask.
pub fn usable_ranges(kernel: Option<&[(u64, u64)]>, dma_mask_bits: u8) -> Vec<(u64, u64)> {
    let mask_last = if dma_mask_bits >= 64 {
        u64::MAX
    } else {
        (1u64 << dma_mask_bits) - 1
    };
    let default = [(0, (1u64 << 39) - 1)];
    kernel
        .unwrap_or(&default)
        .iter()
        .filter_map(|&(s, e)| {
            let s = s.max(MIN_IOVA);
            let e = e.min(mask_last);
            (s <= e).then_some((s, e))
        })
        .collect()
}

/// A VFIO container with its IOMMU set up, and the allocator of its IOVAs.
pub struct Iommu {
    container: Arc<VfioContainer>,
    iova: Mutex<RangeAllocator>,
    info: IommuInfo,
}

impl std::fmt::Debug for Iommu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Iommu")
            .field("info", &self.info)
            .field("free", &self.lock().free_bytes())
            .finish()
    }
}

/// Reads the container's IOMMU info (after a group has set the IOMMU type).
fn query_info(container: &VfioContainer) -> io::Result<IommuInfo> {
    let mut buf = vec![0u64; 3]; // 24 bytes, u64 for alignment
    loop {
        let bytes = buf.len() * 8;
        // argsz: the size we offer (the buffer's); the kernel raises it in its answer if the
        // caps need more.
        let want = iommu_info(container, &mut buf)? as usize;
        let raw: Vec<u8> = buf.iter().flat_map(|w| w.to_ne_bytes()).collect();
        if want > bytes && want <= 1 << 20 {
            buf = vec![0u64; want.div_ceil(8)];
            continue;
        }
        return IommuInfo::parse(&raw).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "short VFIO_IOMMU_GET_INFO answer",
            )
        });
    }
}

impl Iommu {
    /// Wraps a container whose IOMMU is set (a group is attached) and reads its IOVA ranges.
    pub fn new(container: Arc<VfioContainer>, dma_mask_bits: u8) -> Result<Self, VfioError> {
        let info = match query_info(&container) {
            Ok(i) => i,
            Err(e) => {
                log::warn!("VFIO_IOMMU_GET_INFO failed ({e}); assuming a 39-bit IOVA space");
                IommuInfo {
                    page_sizes: None,
                    iova_ranges: None,
                    dma_avail: None,
                }
            }
        };
        let ranges = usable_ranges(info.iova_ranges.as_deref(), dma_mask_bits);
        if ranges.is_empty() {
            return Err(VfioError::io(
                "choosing IOVAs",
                io::Error::other(format!(
                    "no usable IOVA range below the {dma_mask_bits}-bit DMA mask in {:?}",
                    info.iova_ranges
                )),
            ));
        }
        log::debug!("IOMMU {info:?}; IOVAs from {ranges:x?}");
        Ok(Self {
            container,
            iova: Mutex::new(RangeAllocator::new(&ranges)),
            info,
        })
    }

    fn lock(&self) -> MutexGuard<'_, RangeAllocator> {
        self.iova.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What the kernel reported.
    pub fn info(&self) -> &IommuInfo {
        &self.info
    }

    /// The container.
    pub fn container(&self) -> &Arc<VfioContainer> {
        &self.container
    }

    /// Reserves `len` bytes of IOVA space aligned to `align`.
    pub(crate) fn alloc_iova(&self, len: u64, align: u64) -> Option<u64> {
        self.lock().alloc(len, align)
    }

    /// Gives IOVA space back.
    pub(crate) fn free_iova(&self, iova: u64, len: u64) {
        if let Err(e) = self.lock().free(iova, len) {
            log::error!("IOVA range {:#x}+{:#x} freed twice", e.start, e.len);
        }
    }

    /// Reserves `len` bytes (rounded up to 4 KiB) of IOVA space that nothing maps while the
    /// reservation is held: an address inside this container's IOVA ranges that the device
    /// cannot reach. For checking that the IOMMU confines the device (`mlx5ctl iommu-check`).
    pub fn reserve_unmapped(&self, len: u64) -> Option<UnmappedIova<'_>> {
        let len = len.max(1).checked_add(0xfff)? & !0xfff;
        let iova = self.alloc_iova(len, 0x1000)?;
        Some(UnmappedIova {
            iommu: self,
            iova,
            len,
        })
    }

    /// Maps host memory at a fresh IOVA. The mapping borrows the memory, so the memory cannot be
    /// freed while the device can reach it; dropping the mapping (or [`DmaMapping::unmap`])
    /// removes it.
    pub fn map_memory<'a>(&'a self, mem: &'a HostMemory) -> Result<DmaMapping<'a>, VfioError> {
        let len = mem.len();
        let iova = self.alloc_iova(len as u64, 2 << 20).ok_or_else(|| {
            VfioError::io(
                "allocating an IOVA",
                io::Error::other(format!("no free IOVA range of {len} bytes")),
            )
        })?;
        match BorrowedMapping::map(&self.container, mem, iova) {
            Ok(map) => Ok(DmaMapping {
                iommu: self,
                map,
                live: true,
            }),
            Err(code) => {
                self.free_iova(iova, len as u64);
                Err(map_error(len, code))
            }
        }
    }
}

impl IovaMapper for Iommu {
    fn alloc_iova(&self, len: u64, align: u64) -> Option<u64> {
        Iommu::alloc_iova(self, len, align)
    }
    fn free_iova(&self, iova: u64, len: u64) {
        Iommu::free_iova(self, iova, len)
    }
    fn target(&self) -> MapTarget<'_> {
        MapTarget::Container(&self.container)
    }
}

/// [`HostMemory`] mapped into the device's address space (see [`Iommu::map_memory`]). If the
/// mapping cannot be removed (or this value is forgotten), the memory is leaked when dropped
/// instead of freed while the device may reach it.
#[derive(Debug)]
pub struct DmaMapping<'a> {
    iommu: &'a Iommu,
    map: BorrowedMapping<'a>,
    live: bool,
}

impl DmaMapping<'_> {
    /// The device address of the first byte.
    pub fn iova(&self) -> u64 {
        self.map.iova()
    }

    /// Removes the mapping now and reports failure (drop does it silently).
    pub fn unmap(mut self) -> Result<(), VfioError> {
        self.live = false;
        let r = self.map.unmap();
        if r.is_ok() {
            self.iommu.free_iova(self.map.iova(), self.map.len() as u64);
        }
        r
    }
}

impl Drop for DmaMapping<'_> {
    fn drop(&mut self) {
        if !self.live {
            return;
        }
        match self.map.unmap() {
            Ok(()) => self.iommu.free_iova(self.map.iova(), self.map.len() as u64),
            // The IOVA stays reserved: something may still be mapped there.
            Err(e) => log::error!("{e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_fit_with_alignment_and_coalescing() {
        let mut a = RangeAllocator::new(&[(0x1000, 0x8fff)]);
        assert_eq!(a.alloc(0x100, 0x1000), Some(0x1000));
        assert_eq!(a.alloc(0x1000, 0x4000), Some(0x4000));
        // The gap 0x1100..0x3fff is used first-fit for small aligned blocks.
        assert_eq!(a.alloc(0x100, 0x100), Some(0x1100));
        assert_eq!(a.free_ranges(), &[(0x1200, 0x3fff), (0x5000, 0x8fff)]);
        assert_eq!(a.alloc(0x8000, 1), None);
        a.free(0x4000, 0x1000).unwrap();
        a.free(0x1000, 0x100).unwrap();
        a.free(0x1100, 0x100).unwrap();
        assert_eq!(a.free_ranges(), &[(0x1000, 0x8fff)]);
        assert_eq!(a.free_bytes(), 0x8000);
    }

    #[test]
    fn double_and_overlapping_frees_are_refused() {
        let mut a = RangeAllocator::new(&[(0, 0xffff)]);
        let x = a.alloc(0x1000, 0x1000).unwrap();
        a.free(x, 0x1000).unwrap();
        assert_eq!(
            a.free(x, 0x1000),
            Err(DoubleFree {
                start: x,
                len: 0x1000
            })
        );
        let y = a.alloc(0x2000, 0x1000).unwrap();
        assert_eq!(y, 0);
        assert!(a.free(0x1000, 0x2000).is_err()); // half of it is free
        assert_eq!(a.free_ranges(), &[(0x2000, 0xffff)]);
    }

    #[test]
    fn top_of_the_address_space_is_fine() {
        let mut a = RangeAllocator::new(&[(u64::MAX - 0xfff, u64::MAX)]);
        assert_eq!(a.alloc(0x1000, 0x1000), Some(u64::MAX - 0xfff));
        assert_eq!(a.alloc(1, 1), None);
        a.free(u64::MAX - 0xfff, 0x1000).unwrap();
        assert_eq!(a.free_bytes(), 0x1000);
        assert_eq!(a.alloc(2, 1 << 63), None);
    }

    #[test]
    fn unsorted_overlapping_ranges_merge() {
        let a =
            RangeAllocator::new(&[(0x5000, 0x5fff), (0x1000, 0x2fff), (0x2000, 0x4fff), (9, 1)]);
        assert_eq!(a.free_ranges(), &[(0x1000, 0x5fff)]);
    }

    #[test]
    fn many_allocations_never_overlap() {
        let mut a = RangeAllocator::new(&[(MIN_IOVA, MIN_IOVA + (64 << 20) - 1)]);
        let mut live: Vec<(u64, u64)> = Vec::new();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for round in 0..2000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            if round % 3 == 2 && !live.is_empty() {
                let (s, l) = live.swap_remove((seed as usize) % live.len());
                a.free(s, l).unwrap();
                continue;
            }
            let len = 64 * (1 + seed % 512);
            let align = 1u64 << (6 + (seed >> 20) % 16);
            if let Some(s) = a.alloc(len, align) {
                assert_eq!(s % align, 0);
                assert!(s >= MIN_IOVA);
                for &(o, ol) in &live {
                    assert!(s + len <= o || o + ol <= s, "overlap");
                }
                live.push((s, len));
            }
        }
        for (s, l) in live {
            a.free(s, l).unwrap();
        }
        assert_eq!(a.free_ranges(), &[(MIN_IOVA, MIN_IOVA + (64 << 20) - 1)]);
    }

    #[test]
    fn usable_ranges_skip_zero_and_honour_the_mask() {
        // x86 with VT-d: everything but the MSI window, 48 bits.
        let kernel = [(0, 0xfedf_ffff), (0xfef0_0000, 0xffff_ffff_ffff)];
        assert_eq!(
            usable_ranges(Some(&kernel), 64),
            vec![(MIN_IOVA, 0xfedf_ffff), (0xfef0_0000, 0xffff_ffff_ffff)]
        );
        assert_eq!(
            usable_ranges(Some(&kernel), 28),
            vec![(MIN_IOVA, 0x0fff_ffff)]
        );
        assert_eq!(usable_ranges(None, 64), vec![(MIN_IOVA, (1 << 39) - 1)]);
        assert!(usable_ranges(Some(&[(0, 0xfff)]), 64).is_empty());
    }

    fn info_bytes(flags: u32, pgsizes: u64, caps: &[(u16, Vec<u8>)]) -> Vec<u8> {
        let mut b = vec![0u8; 24];
        b[4..8].copy_from_slice(&flags.to_ne_bytes());
        b[8..16].copy_from_slice(&pgsizes.to_ne_bytes());
        if !caps.is_empty() {
            b[16..20].copy_from_slice(&24u32.to_ne_bytes());
        }
        for (i, (id, payload)) in caps.iter().enumerate() {
            let at = b.len();
            let next = if i + 1 < caps.len() {
                at + 8 + payload.len()
            } else {
                0
            };
            b.extend_from_slice(&id.to_ne_bytes());
            b.extend_from_slice(&1u16.to_ne_bytes());
            b.extend_from_slice(&(next as u32).to_ne_bytes());
            b.extend_from_slice(payload);
        }
        let len = b.len() as u32;
        b[0..4].copy_from_slice(&len.to_ne_bytes());
        b
    }

    #[test]
    fn parses_the_info_and_its_capability_chain() {
        let mut ranges = Vec::new();
        ranges.extend_from_slice(&2u32.to_ne_bytes());
        ranges.extend_from_slice(&0u32.to_ne_bytes());
        for (s, e) in [(0xfef0_0000u64, 0xffff_ffff_ffffu64), (0, 0xfedf_ffff)] {
            ranges.extend_from_slice(&s.to_ne_bytes());
            ranges.extend_from_slice(&e.to_ne_bytes());
        }
        let avail = 65_000u32.to_ne_bytes().to_vec();
        let b = info_bytes(3, 0x4020_1000, &[(2, vec![0; 24]), (1, ranges), (3, avail)]);
        let info = IommuInfo::parse(&b).unwrap();
        assert_eq!(info.page_sizes, Some(0x4020_1000));
        assert_eq!(
            info.iova_ranges,
            Some(vec![(0, 0xfedf_ffff), (0xfef0_0000, 0xffff_ffff_ffff)])
        );
        assert_eq!(info.dma_avail, Some(65_000));

        let bare = IommuInfo::parse(&info_bytes(1, 0x1000, &[])).unwrap();
        assert_eq!(bare.iova_ranges, None);
        assert_eq!(bare.page_sizes, Some(0x1000));
        // A truncated chain is rejected, not read past the end.
        let mut cut = info_bytes(3, 0x1000, &[(1, vec![1, 0, 0, 0, 0, 0, 0, 0])]);
        cut.truncate(cut.len() - 2);
        assert_eq!(IommuInfo::parse(&cut), None);
    }
}

/// IOVA space reserved and never mapped ([`Iommu::reserve_unmapped`]); given back on drop.
#[derive(Debug)]
pub struct UnmappedIova<'a> {
    iommu: &'a Iommu,
    iova: u64,
    len: u64,
}

impl UnmappedIova<'_> {
    /// The first IOVA of the reservation.
    pub fn iova(&self) -> u64 {
        self.iova
    }

    /// Its length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Never: a reservation is at least 4 KiB.
    pub fn is_empty(&self) -> bool {
        false
    }
}

impl Drop for UnmappedIova<'_> {
    fn drop(&mut self) {
        self.iommu.free_iova(self.iova, self.len);
    }
}
