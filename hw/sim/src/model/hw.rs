//! The handle the data path and the event writers work with: the model, host memory through the
//! IOMMU, the DMA fault record and the device time ([`Hw`]); the data path's reads and writes
//! of payload go through it, to host memory, to device memory (MEMIC) or to SW ICM.

use super::icm::ICM_SPACE;
use super::memic::DM_SPACE;
use super::Model;
use crate::fault::DmaFault;
use crate::iommu::{Iommu, Unmapped};

/// What the data path and the events work with: the model, DMA memory, the fault record, the time.
pub(crate) struct Hw<'a> {
    pub(crate) model: &'a mut Model,
    pub(crate) iommu: &'a Iommu,
    pub(crate) faults: &'a mut Vec<DmaFault>,
    pub(crate) now: u64,
}

/// Where a data-path address lies.
enum Space {
    Host(u64),
    /// A BAR0 offset in the MEMIC window.
    DeviceMemory(u64),
    /// An ICM address of a SW ICM object.
    Icm(u64),
}

fn space(addr: u64) -> Space {
    if addr & DM_SPACE != 0 {
        Space::DeviceMemory(addr & !DM_SPACE)
    } else if addr & ICM_SPACE != 0 {
        Space::Icm(addr & !ICM_SPACE)
    } else {
        Space::Host(addr)
    }
}

impl Hw<'_> {
    /// Reads data-path bytes at `addr`: device memory for a [`DM_SPACE`] address (the MEMIC
    /// window), SW ICM for an [`ICM_SPACE`] one, host memory through the IOMMU otherwise.
    pub(crate) fn dma_read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Unmapped> {
        match space(addr) {
            Space::Host(a) => self.iommu.read(a, buf),
            Space::DeviceMemory(off) => self.model.memic.read(off, buf).map_err(|()| Unmapped),
            Space::Icm(a) => self.model.icm.read(a, buf).map_err(|()| Unmapped),
        }
    }

    /// Writes data-path bytes at `addr` (device memory, SW ICM or host memory, as
    /// [`Hw::dma_read`]).
    pub(crate) fn dma_write(&mut self, addr: u64, data: &[u8]) -> Result<(), Unmapped> {
        match space(addr) {
            Space::Host(a) => self.iommu.write(a, data),
            Space::DeviceMemory(off) => self.model.memic.write(off, data).map_err(|()| Unmapped),
            Space::Icm(a) => {
                log::trace!(
                    "mlx5-sim: SW ICM write of {} bytes at {a:#x} at {} ns",
                    data.len(),
                    self.now
                );
                self.model.icm.write(a, data).map_err(|()| Unmapped)
            }
        }
    }

    /// A read-modify-write of the `old.len()` bytes at `addr` by `f` (a masked atomic's);
    /// `old` gets what they were. Inside one 8-byte word of host memory it is atomic to the
    /// host as well; wider (16 and 32 bytes), as on the card, only to the device's own
    /// operations, which the device runs one at a time.
    pub(crate) fn dma_fetch_update_bytes(
        &mut self,
        addr: u64,
        old: &mut [u8],
        f: impl Fn(&mut [u8]),
    ) -> Result<(), Unmapped> {
        if let Space::Host(a) = space(addr) {
            if a % 8 + old.len() as u64 <= 8 {
                return self.iommu.fetch_update_in_word(a, old, f);
            }
        }
        self.dma_read(addr, old)?;
        let mut new = old.to_vec();
        f(&mut new);
        self.dma_write(addr, &new)
    }

    /// An atomic read-modify-write of the 8-byte word at `addr` (8-aligned; in the byte order
    /// `big_endian` says): its old value.
    pub(crate) fn dma_fetch_update_u64(
        &mut self,
        addr: u64,
        big_endian: bool,
        f: impl Fn(u64) -> u64,
    ) -> Result<u64, Unmapped> {
        if let Space::Host(a) = space(addr) {
            return self.iommu.fetch_update_u64(a, big_endian, f);
        }
        // Device memory and SW ICM: the device's own, nothing else writes it meanwhile.
        let mut b = [0u8; 8];
        if addr % 8 != 0 {
            return Err(Unmapped);
        }
        self.dma_read(addr, &mut b)?;
        let old = if big_endian {
            u64::from_be_bytes(b)
        } else {
            u64::from_le_bytes(b)
        };
        let new = f(old);
        let nb = if big_endian {
            new.to_be_bytes()
        } else {
            new.to_le_bytes()
        };
        self.dma_write(addr, &nb)?;
        Ok(old)
    }
}
