//! The handle the data path and the event writers work with: the model, host memory through the
//! IOMMU, the DMA fault record and the device time ([`Hw`]); the data path's reads and writes
//! of payload go through it, to host memory or to device memory.

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

impl Hw<'_> {
    /// Reads data-path bytes at `addr`: device memory for a [`DM_SPACE`] address (the MEMIC
    /// window), host memory through the IOMMU otherwise.
    pub(crate) fn dma_read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Unmapped> {
        if addr & DM_SPACE != 0 {
            return self
                .model
                .memic
                .read(addr & !DM_SPACE, buf)
                .map_err(|()| Unmapped);
        }
        self.iommu.read(addr, buf)
    }

    /// Writes data-path bytes at `addr` (device memory or host memory, as [`Hw::dma_read`]).
    pub(crate) fn dma_write(&mut self, addr: u64, data: &[u8]) -> Result<(), Unmapped> {
        if addr & DM_SPACE != 0 {
            return self
                .model
                .memic
                .write(addr & !DM_SPACE, data)
                .map_err(|()| Unmapped);
        }
        self.iommu.write(addr, data)
    }

    /// An atomic read-modify-write of the 8-byte word at `addr` (8-aligned; in the byte order
    /// `big_endian` says): its old value.
    pub(crate) fn dma_fetch_update_u64(
        &mut self,
        addr: u64,
        big_endian: bool,
        f: impl Fn(u64) -> u64,
    ) -> Result<u64, Unmapped> {
        if addr & DM_SPACE == 0 {
            return self.iommu.fetch_update_u64(addr, big_endian, f);
        }
        let off = addr & !DM_SPACE;
        let mut b = [0u8; 8];
        if off % 8 != 0 {
            return Err(Unmapped);
        }
        self.model.memic.read(off, &mut b).map_err(|()| Unmapped)?;
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
        self.model.memic.write(off, &nb).map_err(|()| Unmapped)?;
        Ok(old)
    }
}
