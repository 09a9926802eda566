//! [`Bar`]: a PCI BAR of a VFIO device, mapped into the process where VFIO allows it.
//!
//! VFIO says per region whether it may be mmapped at all (`VFIO_REGION_INFO_FLAG_MMAP`) and, with
//! a sparse-mmap capability, which parts (older kernels, or platforms without interrupt
//! remapping, keep the MSI-X table page out of the mapping; newer ones report `MsixMappable`
//! and map it all). Mapped parts are reached through [`MmioRegion`] (volatile, bounds-checked);
//! the rest through `pread`/`pwrite` on the device file, which the kernel turns into the same
//! MMIO accesses (and filters, for the MSI-X table).
//!
//! The mapped parts are `MmioArea`s of the crate's unsafe room (`sys`), each owning its mapping
//! and the `MmioRegion` over it; this module only chooses the parts and routes the accesses.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use mlx5::ifc::{Be32, Be64};
use vfio_bindings::bindings::vfio::VFIO_REGION_INFO_FLAG_MMAP;
use vfio_ioctls::{VfioDevice, VfioRegionInfoCap};

use mlx5::io::MmioRegion;

use crate::error::VfioError;
use crate::pci::PciAddress;
use crate::sys::mmio::MmioArea;

/// A mapped BAR: 32-bit loads and stores, and the single 64-bit doorbell store.
#[derive(Debug)]
pub struct Bar {
    index: u32,
    size: u64,
    /// Where the BAR starts in the device file.
    file_offset: u64,
    file: Arc<File>,
    /// Mapped parts, ascending by offset (unmapped when dropped).
    areas: Vec<MmioArea>,
    msix_mappable: bool,
}

/// Which parts of a region may be mmapped, from its flags and capabilities.
pub(crate) fn mappable_areas(size: u64, flags: u32, caps: &[VfioRegionInfoCap]) -> Vec<(u64, u64)> {
    if flags & VFIO_REGION_INFO_FLAG_MMAP == 0 {
        return Vec::new();
    }
    for cap in caps {
        if let VfioRegionInfoCap::SparseMmap(s) = cap {
            let mut v: Vec<(u64, u64)> = s
                .areas
                .iter()
                .filter(|a| a.size > 0 && a.offset.checked_add(a.size).is_some_and(|e| e <= size))
                .map(|a| (a.offset, a.size))
                .collect();
            v.sort_unstable();
            return v;
        }
    }
    vec![(0, size)]
}

impl Bar {
    /// Maps region `index` of `dev` (a BAR). Parts VFIO does not let us map are reached with
    /// pread/pwrite; a part whose mmap fails is logged and reached the same way.
    pub(crate) fn map(
        addr: &PciAddress,
        dev: &VfioDevice,
        file: Arc<File>,
        index: u32,
    ) -> Result<Self, VfioError> {
        let size = dev.get_region_size(index);
        if size == 0 {
            return Err(VfioError::Bar {
                bdf: *addr,
                what: format!("region {index} is absent (size 0)"),
            });
        }
        let flags = dev.get_region_flags(index);
        let caps = dev.get_region_caps(index);
        let file_offset = dev.get_region_offset(index);
        let msix_mappable = caps
            .iter()
            .any(|c| matches!(c, VfioRegionInfoCap::MsixMappable));
        let mut bar = Self {
            index,
            size,
            file_offset,
            file,
            areas: Vec::new(),
            msix_mappable,
        };
        let wanted = mappable_areas(size, flags, &caps);
        if wanted.is_empty() {
            log::warn!(
                "{addr}: BAR{index} may not be mmapped (flags {flags:#x}); every access is a system call"
            );
        }
        for (offset, len) in wanted {
            match MmioArea::map(dev, file_offset, offset, len) {
                Ok(a) => bar.areas.push(a),
                Err(e) => log::warn!(
                    "{addr}: mmap of BAR{index} {offset:#x}+{len:#x}: {e}; using pread/pwrite there"
                ),
            }
        }
        log::debug!(
            "{addr}: BAR{index} {size:#x} bytes, mapped {:x?}, MSI-X mappable {msix_mappable}",
            bar.mapped()
        );
        Ok(bar)
    }

    /// Size of the BAR in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The mmapped parts as (offset, length).
    pub fn mapped(&self) -> Vec<(u64, u64)> {
        self.areas.iter().map(|a| (a.offset(), a.len())).collect()
    }

    /// Whether the whole BAR is mmapped.
    pub fn fully_mapped(&self) -> bool {
        self.areas.len() == 1 && self.areas[0].offset() == 0 && self.areas[0].len() == self.size
    }

    /// Whether VFIO reported the MSI-X table area as mappable.
    pub fn msix_mappable(&self) -> bool {
        self.msix_mappable
    }

    /// The mapped area holding `offset..offset+width`, with the offset inside it.
    #[inline]
    fn area(&self, offset: u64, width: u64) -> Option<(&MmioRegion, u64)> {
        self.areas.iter().find_map(|a| {
            let rel = offset.checked_sub(a.offset())?;
            (rel.checked_add(width)? <= a.len()).then_some((a.mmio(), rel))
        })
    }

    fn pread(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        if offset
            .checked_add(buf.len() as u64)
            .is_none_or(|e| e > self.size)
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "outside the BAR",
            ));
        }
        self.file.read_exact_at(buf, self.file_offset + offset)
    }

    fn pwrite(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        if offset
            .checked_add(buf.len() as u64)
            .is_none_or(|e| e > self.size)
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "outside the BAR",
            ));
        }
        self.file.write_all_at(buf, self.file_offset + offset)
    }

    /// One 32-bit load; an unreachable offset reads all-ones (like a master abort) and is logged.
    #[inline]
    pub fn read32(&self, offset: u64) -> Be32 {
        if let Some((m, rel)) = self.area(offset, 4) {
            return m.read32(rel);
        }
        let mut b = [0xffu8; 4];
        if let Err(e) = self.pread(offset, &mut b) {
            log::error!("BAR{} read32 at {offset:#x}: {e}", self.index);
            return Be32::new(u32::MAX);
        }
        Be32::from_bytes(b)
    }

    /// One 32-bit store; a failure is logged.
    #[inline]
    pub fn write32(&self, offset: u64, v: Be32) {
        if let Some((m, rel)) = self.area(offset, 4) {
            return m.write32(rel, v);
        }
        if let Err(e) = self.pwrite(offset, &v.to_bytes()) {
            log::error!("BAR{} write32 at {offset:#x}: {e}", self.index);
        }
    }

    /// One 64-bit store (doorbells). Outside the mapped parts the kernel may split it in two.
    #[inline]
    pub fn write64(&self, offset: u64, v: Be64) {
        if let Some((m, rel)) = self.area(offset, 8) {
            return m.write64(rel, v);
        }
        if let Err(e) = self.pwrite(offset, &v.to_bytes()) {
            log::error!("BAR{} write64 at {offset:#x}: {e}", self.index);
        }
    }
}

impl Bar {
    /// A BlueFlame copy: the words of `chunk` from `offset` on, in order (one bounds check on
    /// the mapped part, then one 64-bit store each); outside the mapped parts, one pwrite.
    #[inline]
    pub fn write_bf(&self, offset: u64, chunk: &[Be64]) {
        let bytes = chunk.len() as u64 * 8;
        if let Some((m, rel)) = self.area(offset, bytes) {
            return m.write_bf(rel, chunk);
        }
        let data: Vec<u8> = chunk.iter().flat_map(|w| w.to_bytes()).collect();
        if let Err(e) = self.pwrite(offset, &data) {
            log::error!("BAR{} BlueFlame copy at {offset:#x}: {e}", self.index);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vfio_ioctls::{VfioRegionInfoCapSparseMmap, VfioRegionSparseMmapArea};

    #[test]
    fn mappable_areas_follow_flags_and_sparse_caps() {
        let mmap = VFIO_REGION_INFO_FLAG_MMAP | 3;
        assert_eq!(mappable_areas(0x200_0000, 3, &[]), vec![]);
        assert_eq!(mappable_areas(0x200_0000, mmap, &[]), vec![(0, 0x200_0000)]);
        assert_eq!(
            mappable_areas(0x200_0000, mmap, &[VfioRegionInfoCap::MsixMappable]),
            vec![(0, 0x200_0000)]
        );
        // A CX-5 BAR0 with the MSI-X table page (0x2000) cut out, areas unsorted, one bogus.
        let sparse = VfioRegionInfoCap::SparseMmap(VfioRegionInfoCapSparseMmap {
            areas: vec![
                VfioRegionSparseMmapArea {
                    offset: 0x3000,
                    size: 0x200_0000 - 0x3000,
                },
                VfioRegionSparseMmapArea {
                    offset: 0,
                    size: 0x2000,
                },
                VfioRegionSparseMmapArea {
                    offset: 0x100_0000,
                    size: 0x200_0000,
                },
                VfioRegionSparseMmapArea {
                    offset: 0x4000,
                    size: 0,
                },
            ],
        });
        assert_eq!(
            mappable_areas(0x200_0000, mmap, &[sparse]),
            vec![(0, 0x2000), (0x3000, 0x200_0000 - 0x3000)]
        );
    }
}
