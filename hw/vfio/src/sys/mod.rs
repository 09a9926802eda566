//! The crate's one unsafe room: every `unsafe` of `mlx5-vfio` is in this folder, behind safe
//! interfaces that are sound for any safe caller (each says why in a `// SAFETY:` comment).
//!
//! - [`fd`]: the system calls on file descriptors and paths — VFIO_DEVICE_GET_INFO,
//!   VFIO_DEVICE_RESET, VFIO_IOMMU_GET_INFO (each on a `vfio-ioctls` object, so the fd is of the
//!   right kind), a duplicate of the device fd, poll(2), access(2), getrlimit(2).
//! - [`mapping`]: `Mapping` (an owned mmap, bounds-checked atomic byte accesses, munmap on drop) and
//!   [`HostMemory`] (anonymous DMA memory that counts its IOMMU mappings and is leaked, not
//!   freed, while one may be live).
//! - [`mmio`]: `MmioArea`, a mapped part of a BAR that owns both the mapping and the
//!   `MmioRegion` pointing into it, handing the region out only as long as it is borrowed.
//! - [`dma`]: IOMMU mappings of host memory — `DmaChunk` (owns its memory and its mapping;
//!   drop unmaps first and frees only if that worked), `BorrowedMapping` (behind
//!   `Iommu::map_memory`), and the `IovaMapper` trait the pool is generic over (safe: a
//!   stand-in IOMMU only ever pretends, nothing is mapped through it).
//! - [`platform`]: `unsafe impl Platform` for `VfioPlatform` and `AnyPlatform`.
//!
//! It sits low in the crate: it imports `error.rs` and nothing else of the crate, except
//! `platform`, which names `VfioPlatform`/`AnyPlatform` (lib.rs) and is imported by no one.
//! Nothing here makes a Rust reference to memory a device can see.
#![allow(unsafe_code)]

pub(crate) mod dma;
pub(crate) mod fd;
pub(crate) mod mapping;
pub(crate) mod mmio;
mod platform;

pub use mapping::HostMemory;

#[cfg(test)]
mod tests {
    fn send_sync<T: Send + Sync>() {}

    /// The handles that own mappings are still shareable between threads, as before the room.
    #[test]
    fn handles_stay_send_and_sync() {
        send_sync::<super::HostMemory>();
        send_sync::<super::mapping::Mapping>();
        send_sync::<super::mmio::MmioArea>();
        send_sync::<crate::Bar>();
        send_sync::<crate::DmaMapping<'static>>();
        send_sync::<crate::VfioPlatform>();
    }
}
