//! How a unikernel (or any kernel without Linux's VFIO) gives the mlx5 driver what it needs:
//! an implementation of [`mlx5::Platform`] with no operating system underneath. CI builds this
//! crate for `x86_64-unknown-none`; docs/unikernel.md walks through it.
//!
//! The three things a platform provides:
//!
//! 1. **BAR0**, mapped uncached into the address space by the kernel's own page tables, reached
//!    through [`mlx5::io::MmioRegion`] (volatile, bounds-checked). The 64-bit UAR doorbell store
//!    is `MmioRegion::write64`.
//! 2. **DMA memory**: here a physically contiguous arena reserved at boot and carved by a
//!    first-fit allocator ([`Arena`]). The device address of a byte is its physical address
//!    without an IOMMU ([`DmaTranslation::Identity`]), or that plus a fixed offset when the kernel
//!    programmed the IOMMU with one linear mapping of the arena ([`DmaTranslation::Offset`]).
//!    x86 PCIe DMA is cache-coherent, so ordinary write-back memory is fine.
//! 3. **Host memory** for the driver's own bookkeeping (work-request tables, ring counters):
//!    a second arena, outside the DMA arena and never mapped for the device in the IOMMU, so
//!    nothing the device writes can reach it.
//! 4. **A clock** for the driver's deadlines ([`Clock`]), e.g. the TSC scaled by its frequency
//!    ([`TscClock`]), and a `relax` for polling loops (the `pause` instruction).
//!
//! Built for `x86_64-unknown-none`, the crate is also a **bootable image** (the binary
//! `mlx5-unikernel`, module `boot`): QEMU loads it with `-kernel` through its PVH note, and it
//! brings up every ConnectX-5 it finds on PCI with no operating system at all — its own page
//! tables and memory types, PCI enumeration, MSI-X to the local APIC, a TSC clock calibrated
//! against the PIT, a serial console, and no heap (docs/unikernel.md).
//!
//! All `unsafe` code of the crate is in one module, `metal` (machine access and the
//! [`BareMetal`] platform); everything else is safe.
#![no_std]
#![deny(unsafe_code)]
#![deny(unreachable_pub)]
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod acpi;
pub mod arena;
pub mod exchange;
#[allow(unsafe_code)]
mod metal;
mod needs;
pub mod paging;
pub mod pci;
pub mod pvh;

#[cfg(all(target_arch = "x86_64", target_os = "none"))]
pub mod boot;

pub use arena::Arena;
pub use metal::platform::BareMetal;
#[cfg(target_arch = "x86_64")]
pub use metal::platform::TscClock;
pub use needs::{Clock, DmaTranslation};

use mlx5::{Device, DeviceConfig};

/// Brings the function up on this platform: what a unikernel's NIC driver calls at boot.
pub fn bring_up<C: Clock>(platform: BareMetal<C>) -> Result<Device<BareMetal<C>>, mlx5::Error> {
    let config = DeviceConfig {
        bar_size: platform.bar_size(),
        ..DeviceConfig::default()
    };
    Device::open(platform, config)
}
