//! IOMMU mappings of [`HostMemory`]: [`DmaChunk`] (owns its memory and its mapping, the DMA
//! pool's unit) and [`BorrowedMapping`] (memory someone else owns, behind
//! `Iommu::map_memory`). Both map only memory that reaches the CPU through raw pointers and
//! atomic byte accesses, and count the mapping in the memory (`HostMemory` leaks itself rather than
//! free pages an IOMMU may still map), so no safe use can leave the device a path to memory the
//! process reuses.

use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::Arc;

use mlx5::io::OutOfBounds;
use vfio_ioctls::VfioContainer;

use super::mapping::HostMemory;
use crate::error::VfioError;

/// What the DMA pool needs from an IOMMU: IOVA space, and where chunks get mapped (a trait so
/// the pool's policy is testable without one). Safe: whatever an implementation answers, a
/// [`DmaChunk`] maps and unmaps itself, on the container it was given.
pub(crate) trait IovaMapper: Send + Sync {
    /// Reserves IOVA space.
    fn alloc_iova(&self, len: u64, align: u64) -> Option<u64>;
    /// Returns IOVA space.
    fn free_iova(&self, iova: u64, len: u64);
    /// Where chunks are mapped.
    fn target(&self) -> MapTarget<'_>;
}

/// Where a [`DmaChunk`] is mapped.
pub(crate) enum MapTarget<'a> {
    /// A VFIO container (type-1 IOMMU).
    Container(&'a VfioContainer),
    /// Nowhere: a stand-in for tests, which only decides whether "mapping" and "unmapping"
    /// succeed. Nothing is mapped, so any answer is sound.
    #[cfg(test)]
    Pretend(&'a dyn PretendIommu),
}

/// A stand-in IOMMU for tests (see [`MapTarget::Pretend`]).
#[cfg(test)]
pub(crate) trait PretendIommu: Sync {
    /// Whether mapping `len` bytes at `iova` "succeeds" (else the errno).
    fn map(&self, iova: u64, len: usize) -> Result<(), i32>;
    /// Whether unmapping "succeeds".
    fn unmap(&self, iova: u64, len: usize) -> Result<(), VfioError>;
}

/// Maps all of `mem` at `iova` in `container` for device reads and writes; errno on failure.
/// The mapping is counted in `mem` until [`container_unmap`] removes it.
fn container_map(container: &VfioContainer, iova: u64, mem: &HostMemory) -> Result<(), i32> {
    mem.iommu_mapped();
    // SAFETY: `mem` is a live private anonymous mapping of `mem.len()` bytes that hands out no
    // references (only raw pointers and atomic byte accesses), so none is live now or later; it
    // stays mapped while the IOMMU maps it because it counts the mapping (counted above, before
    // the device can reach it) and leaks itself instead of unmapping while the count is not
    // zero; the count drops only in `container_unmap`, after VFIO_IOMMU_UNMAP_DMA succeeded.
    let r = unsafe { container.vfio_dma_map(iova, mem.len(), mem.as_ptr()) };
    match r {
        Ok(()) => Ok(()),
        Err(e) => {
            mem.iommu_unmapped();
            Err(match e {
                vfio_ioctls::VfioError::IommuDmaMap(e) => e.errno(),
                e => {
                    log::error!("VFIO DMA map: {e}");
                    libc::EIO
                }
            })
        }
    }
}

/// Removes the mapping of `mem` at `iova` (exactly as mapped); after success the device can no
/// longer reach `mem`, and `mem` forgets the mapping.
fn container_unmap(
    container: &VfioContainer,
    iova: u64,
    mem: &HostMemory,
) -> Result<(), VfioError> {
    container
        .vfio_dma_unmap(iova, mem.len())
        .map_err(|source| VfioError::Vfio {
            op: "VFIO DMA unmap",
            source,
        })?;
    mem.iommu_unmapped();
    Ok(())
}

/// Host memory mapped in an IOMMU at an IOVA, owning both. Drop unmaps it from the IOMMU first,
/// then gives the IOVA back and frees the memory; if the unmap fails, the IOVA stays reserved and
/// the memory is leaked on purpose (the device might still write it).
pub(crate) struct DmaChunk<M: IovaMapper> {
    mem: ManuallyDrop<HostMemory>,
    iova: u64,
    mapper: Arc<M>,
    /// Whether `mapper` said "container" when the chunk was mapped (else nothing was mapped).
    in_container: bool,
}

impl<M: IovaMapper> DmaChunk<M> {
    /// Maps `mem` at `iova` (reserved from `mapper` by the caller, who gets it back on failure
    /// with the errno; `mem` is freed then).
    pub(crate) fn map(mapper: Arc<M>, mem: HostMemory, iova: u64) -> Result<Self, i32> {
        let in_container = match mapper.target() {
            MapTarget::Container(c) => {
                container_map(c, iova, &mem)?;
                true
            }
            #[cfg(test)]
            MapTarget::Pretend(p) => {
                p.map(iova, mem.len())?;
                false
            }
        };
        Ok(Self {
            mem: ManuallyDrop::new(mem),
            iova,
            mapper,
            in_container,
        })
    }

    /// The IOVA of the first byte.
    pub(crate) fn iova(&self) -> u64 {
        self.iova
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.mem.len()
    }

    /// Whether the memory is backed by 2 MiB hugepages.
    pub(crate) fn is_huge(&self) -> bool {
        self.mem.is_huge()
    }

    /// The CPU address of the first byte.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.mem.as_ptr()
    }

    /// Zeroes `len` bytes at `off` (atomic byte stores) and returns their CPU address.
    pub(crate) fn zeroed(&self, off: usize, len: usize) -> Result<NonNull<u8>, OutOfBounds> {
        self.mem.fill(off, len, 0)?;
        let p = self.mem.as_ptr().wrapping_add(off);
        NonNull::new(p).ok_or(OutOfBounds {
            offset: off,
            len,
            size: self.mem.len(),
        })
    }

    /// Byte reads (for tests: the driver reaches the memory through its own pointers).
    #[cfg(test)]
    pub(crate) fn read(&self, off: usize, dst: &mut [u8]) -> Result<(), OutOfBounds> {
        self.mem.read(off, dst)
    }

    /// Byte writes (for tests).
    #[cfg(test)]
    pub(crate) fn write(&self, off: usize, src: &[u8]) -> Result<(), OutOfBounds> {
        self.mem.write(off, src)
    }

    fn unmap(&self) -> Result<(), VfioError> {
        match (self.in_container, self.mapper.target()) {
            (true, MapTarget::Container(c)) => container_unmap(c, self.iova, &self.mem),
            // Mapped nowhere: nothing to remove.
            (false, MapTarget::Container(_)) => Ok(()),
            #[cfg(test)]
            (false, MapTarget::Pretend(p)) => p.unmap(self.iova, self.mem.len()),
            // Mapped in a container the mapper no longer names: it cannot be removed.
            #[cfg(test)]
            (true, MapTarget::Pretend(_)) => Err(VfioError::io(
                "VFIO DMA unmap",
                std::io::Error::other("the chunk's container is gone"),
            )),
        }
    }
}

impl<M: IovaMapper> Drop for DmaChunk<M> {
    fn drop(&mut self) {
        match self.unmap() {
            Ok(()) => {
                self.mapper.free_iova(self.iova, self.mem.len() as u64);
                // SAFETY: dropped once, here, and never used again.
                unsafe { ManuallyDrop::drop(&mut self.mem) }
            }
            // Leaked: `mem` is not dropped (and, still counting the mapping, would leak itself).
            Err(e) => log::error!("{e}; leaking its {} bytes of memory", self.mem.len()),
        }
    }
}

/// [`HostMemory`] someone else owns, mapped in a container while this value borrows it. The
/// mapping is counted in the memory, so if this value is forgotten (or its unmap fails) the
/// memory is leaked when dropped rather than freed while mapped.
pub(crate) struct BorrowedMapping<'a> {
    container: &'a VfioContainer,
    mem: &'a HostMemory,
    iova: u64,
    live: bool,
}

impl std::fmt::Debug for BorrowedMapping<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BorrowedMapping")
            .field("iova", &self.iova)
            .field("len", &self.mem.len())
            .field("live", &self.live)
            .finish()
    }
}

impl<'a> BorrowedMapping<'a> {
    /// Maps all of `mem` at `iova` (reserved by the caller); errno on failure.
    pub(crate) fn map(
        container: &'a VfioContainer,
        mem: &'a HostMemory,
        iova: u64,
    ) -> Result<Self, i32> {
        container_map(container, iova, mem)?;
        Ok(Self {
            container,
            mem,
            iova,
            live: true,
        })
    }

    /// The IOVA of the first byte.
    pub(crate) fn iova(&self) -> u64 {
        self.iova
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.mem.len()
    }

    /// Removes the mapping (once; later calls do nothing). Dropping without a successful unmap
    /// leaves the mapping in place and the memory to be leaked.
    pub(crate) fn unmap(&mut self) -> Result<(), VfioError> {
        if !self.live {
            return Ok(());
        }
        container_unmap(self.container, self.iova, self.mem)?;
        self.live = false;
        Ok(())
    }
}
