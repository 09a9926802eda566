//! [`MmioArea`]: a mapped part of a BAR together with the [`MmioRegion`] that points into it.

use std::io;

use mlx5::io::MmioRegion;
use vfio_ioctls::VfioDevice;

use super::mapping::Mapping;

/// One mmapped part of a VFIO device region (a BAR). It owns the mapping and the
/// [`MmioRegion`] over it and lends the region only while borrowed, so the region can never
/// outlive the mapping (`MmioRegion` is neither `Clone` nor `Copy`).
#[derive(Debug)]
pub(crate) struct MmioArea {
    /// Offset of the part inside the region.
    offset: u64,
    // Field order is drop order: the region (a plain pointer) goes before the mapping.
    mmio: MmioRegion,
    map: Mapping,
}

impl MmioArea {
    /// Maps `len` bytes at `offset` of the region that starts at `region_offset` in `dev`'s file.
    pub(crate) fn map(
        dev: &VfioDevice,
        region_offset: u64,
        offset: u64,
        len: u64,
    ) -> io::Result<Self> {
        let ulen = usize::try_from(len).map_err(|_| io::Error::other("area too large"))?;
        let file_offset = region_offset
            .checked_add(offset)
            .ok_or_else(|| io::Error::other("offset too large"))?;
        let map = Mapping::device(dev, file_offset, ulen)?;
        // SAFETY: `map` is a live shared mapping of the device's registers (a VFIO region mmap,
        // uncached), `ulen` bytes long; it is dropped only after the region (field order), the
        // region is lent out only as `&MmioRegion` tied to `&self`, and nothing makes a Rust
        // reference into the mapping (`Mapping` hands out none).
        let mmio = unsafe { MmioRegion::new(map.as_non_null(), ulen) };
        Ok(Self { offset, mmio, map })
    }

    /// Offset of the part inside the region.
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// Its length.
    pub(crate) fn len(&self) -> u64 {
        self.map.len() as u64
    }

    /// The registers, for as long as the area is borrowed.
    pub(crate) fn mmio(&self) -> &MmioRegion {
        &self.mmio
    }
}
