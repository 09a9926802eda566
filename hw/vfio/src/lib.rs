//! `mlx5-vfio`: the VFIO passthrough backend of the `mlx5` driver (Linux): a ConnectX function
//! bound to `vfio-pci`, driven from user space through the [`Platform`](mlx5::Platform) boundary.
//!
//! [`VfioPlatform::open`] takes a PCI address and
//! 1. checks in sysfs what people get wrong (not bound to vfio-pci, IOMMU off, group not viable,
//!    vfio not loaded, no permission, memlock too low) and says how to fix it ([`VfioError`]);
//! 2. opens the container, the group and the device (`vfio-ioctls`);
//! 3. resets the function if it supports reset (`VFIO_DEVICE_RESET`);
//! 4. enables memory space and bus mastering in config space ([`ConfigSpace`]);
//! 5. mmaps BAR0, honouring sparse-mmap areas ([`Bar`]);
//! 6. reads the IOMMU's IOVA ranges and sets up the DMA pool ([`iommu`], [`dma`]).
//!
//! Teardown (drop) runs backwards: interrupts off, bus mastering off, BAR unmapped, every DMA
//! chunk unmapped from the IOMMU and then freed, device closed, container closed.
//!
//! [`open_device`] does the above for an mlx5 function and then brings it up
//! ([`Device::open`]), turning a firmware that never leaves `initializing` into
//! [`VfioError::FirmwareInitializing`]. With the `sim` feature (default), [`AnyPlatform`] is the
//! simulator or a VFIO function, chosen at run time.
//!
//! Unsafe code is denied crate-wide and allowed in one module only, the private `sys` (its
//! docs list what it holds): the mmaps (DMA memory, BAR areas with their `MmioRegion`s), the
//! IOMMU mappings (a DMA chunk owns its memory and its mapping, and frees the memory only after
//! the unmap succeeded), the ioctls and system calls (each a specific safe wrapper), and the
//! `Platform` impls. Everything else is safe code on top of those safe interfaces; every unsafe
//! block says why it is sound.
#![deny(unsafe_code)]
#![deny(missing_docs)]
#![deny(unreachable_pub)]
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod address;
pub mod bar;
pub mod dma;
pub mod error;
pub mod iommu;
pub mod irq;
pub mod memory;
pub mod pci;
mod sys;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mlx5::{Device, DeviceConfig};
use vfio_bindings::bindings::vfio::{VFIO_PCI_BAR0_REGION_INDEX, VFIO_PCI_CONFIG_REGION_INDEX};
use vfio_ioctls::{VfioContainer, VfioDevice, VfioOps};

pub use bar::Bar;
pub use dma::{DmaStats, HostMemory};
pub use error::VfioError;
pub use iommu::{DmaMapping, Iommu};
pub use irq::{Interrupts, IrqKind};
pub use pci::{mlx5_model, ConfigSpace, GroupMember, PciAddress, PciFunction, Sysfs};

use dma::DmaPool;

const VFIO_DEVICE_FLAGS_RESET: u32 = 1;

/// How to open a function.
#[derive(Debug, Clone)]
pub struct VfioOptions {
    /// Reset the function on open if it supports a reset (FLR or another method VFIO knows).
    pub reset: bool,
    /// Refuse a function of another vendor ([`open_device`] sets 0x15b3).
    pub expect_vendor: Option<u16>,
    /// The device's DMA address width: IOVAs stay below `2^dma_mask_bits` (64 for mlx5).
    pub dma_mask_bits: u8,
    /// Back DMA memory with 2 MiB hugepages where the system has them reserved.
    pub hugepages: bool,
    /// Refuse to open unless this many bytes may be pinned (RLIMIT_MEMLOCK or CAP_IPC_LOCK).
    pub min_memlock: u64,
    /// Where sysfs and /dev/vfio are.
    pub sysfs: Sysfs,
}

impl Default for VfioOptions {
    fn default() -> Self {
        Self {
            reset: true,
            expect_vendor: None,
            dma_mask_bits: 64,
            hugepages: true,
            min_memlock: 64 << 20,
            sysfs: Sysfs::system(),
        }
    }
}

/// What opening found out.
#[derive(Debug, Clone)]
pub struct OpenInfo {
    /// The function as sysfs described it.
    pub function: PciFunction,
    /// Its IOMMU group.
    pub group: u32,
    /// Whether VFIO reported a reset method and the reset was done.
    pub reset: bool,
    /// The PCI command register before and after enabling memory space and bus mastering.
    pub command: (u16, u16),
}

/// A PCI function opened through VFIO, as a [`Platform`](mlx5::Platform).
pub struct VfioPlatform {
    // Field order is drop order (after `Drop::drop` ran): interrupts, BAR mapping, config
    // space (the last holder of our duplicate of the device fd), DMA pool (IOMMU unmap, then
    // free), IOMMU, device (closing it detaches the group), container (with the last `Arc`).
    irqs: Interrupts,
    bar: Bar,
    config: ConfigSpace,
    pool: DmaPool,
    iommu: Arc<Iommu>,
    device: Arc<VfioDevice>,
    info: OpenInfo,
    epoch: Instant,
    relax_start: AtomicU64,
    relax_last: AtomicU64,
}

impl std::fmt::Debug for VfioPlatform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VfioPlatform")
            .field("addr", &self.info.function.addr)
            .field("bar", &self.bar)
            .field("pool", &self.pool)
            .finish()
    }
}

fn open_error<'s>(
    op: &'static str,
    group: u32,
    addr: &PciAddress,
    sysfs: &'s Sysfs,
) -> impl Fn(vfio_ioctls::VfioError) -> VfioError + 's {
    let addr = *addr;
    move |e| {
        use vfio_ioctls::VfioError as E;
        let os = |io: &std::io::Error, path: std::path::PathBuf| match io.raw_os_error() {
            Some(libc::EACCES) | Some(libc::EPERM) => Some(VfioError::Permission { path }),
            Some(libc::EBUSY) => Some(VfioError::GroupBusy { group }),
            Some(libc::ENOENT) => Some(VfioError::VfioNotLoaded),
            _ => None,
        };
        let special = match &e {
            E::OpenContainer(io) => os(io, "/dev/vfio/vfio".into()),
            E::OpenGroup(io, g) => os(io, sysfs.dev_vfio.join(g)),
            E::GroupViable => Some(VfioError::GroupNotViable {
                bdf: addr,
                group,
                others: sysfs.group_members(group, &addr),
            }),
            _ => None,
        };
        special.unwrap_or(VfioError::Vfio { op, source: e })
    }
}

impl VfioPlatform {
    /// Opens the function at `addr` (`0000:03:00.0` or `03:00.0`). See the crate docs.
    pub fn open(addr: &str, opts: &VfioOptions) -> Result<Self, VfioError> {
        let addr: PciAddress = addr.parse()?;
        let sysfs = &opts.sysfs;
        let function = sysfs.function(&addr)?;
        if let Some(v) = opts.expect_vendor {
            if function.vendor != v {
                return Err(VfioError::NotMlx5 {
                    bdf: addr,
                    vendor: function.vendor,
                    device: function.device,
                });
            }
        }
        let group = sysfs.check_ready(&function)?;
        dma::check_memlock(opts.min_memlock)?;

        let container = Arc::new(VfioContainer::new(None).map_err(open_error(
            "opening /dev/vfio/vfio",
            group,
            &addr,
            sysfs,
        ))?);
        let ops: Arc<dyn VfioOps> = container.clone();
        let device = Arc::new(
            VfioDevice::new(&sysfs.device_path(&addr), ops, false).map_err(open_error(
                "opening the VFIO device",
                group,
                &addr,
                sysfs,
            ))?,
        );
        let file = Arc::new(
            sys::fd::dup_device_fd(&device)
                .map_err(|e| VfioError::io("dup of the VFIO device fd", e))?,
        );

        let flags =
            sys::fd::device_flags(&device).map_err(|e| VfioError::io("VFIO_DEVICE_GET_INFO", e))?;
        let mut reset = false;
        if opts.reset && flags & VFIO_DEVICE_FLAGS_RESET != 0 {
            match sys::fd::device_reset(&device) {
                Ok(()) => reset = true,
                Err(e) => log::warn!("{addr}: VFIO_DEVICE_RESET failed: {e}"),
            }
        }

        let config = ConfigSpace::new(
            file.clone(),
            device.get_region_offset(VFIO_PCI_CONFIG_REGION_INDEX),
            device.get_region_size(VFIO_PCI_CONFIG_REGION_INDEX),
        );
        let command = config
            .update_command(pci::command::MEMORY | pci::command::BUS_MASTER, 0)
            .map_err(|e| VfioError::io("enabling memory space and bus mastering", e))?;
        let want = pci::command::MEMORY | pci::command::BUS_MASTER;
        if command.1 & want != want {
            return Err(VfioError::io(
                "enabling memory space and bus mastering",
                std::io::Error::other(format!("PCI_COMMAND reads {:#06x}", command.1)),
            ));
        }
        let bar = Bar::map(&addr, &device, file.clone(), VFIO_PCI_BAR0_REGION_INDEX)?;
        let iommu = Arc::new(Iommu::new(container, opts.dma_mask_bits)?);
        let pool = DmaPool::new(iommu.clone(), opts.hugepages);
        let irqs = Interrupts::new(device.clone());
        log::info!(
            "{addr}: opened through VFIO (group {group}, reset {reset}, BAR0 {:#x} bytes)",
            bar.size()
        );
        Ok(Self {
            irqs,
            bar,
            config,
            pool,
            iommu,
            device,
            info: OpenInfo {
                function,
                group,
                reset,
                command,
            },
            epoch: Instant::now(),
            relax_start: AtomicU64::new(0),
            relax_last: AtomicU64::new(0),
        })
    }

    /// The function's address.
    pub fn address(&self) -> PciAddress {
        self.info.function.addr
    }

    /// What opening found.
    pub fn info(&self) -> &OpenInfo {
        &self.info
    }

    /// BAR0.
    pub fn bar(&self) -> &Bar {
        &self.bar
    }

    /// Size of BAR0 (for [`DeviceConfig::bar_size`]).
    pub fn bar_size(&self) -> u64 {
        self.bar.size()
    }

    /// Configuration space.
    pub fn config(&self) -> &ConfigSpace {
        &self.config
    }

    /// MSI/MSI-X vectors to eventfds.
    pub fn interrupts(&self) -> &Interrupts {
        &self.irqs
    }

    /// The IOMMU (its ranges; mapping memory of your own with [`Iommu::map_memory`]).
    pub fn iommu(&self) -> &Iommu {
        &self.iommu
    }

    /// The DMA pool's counters.
    pub fn dma_stats(&self) -> DmaStats {
        self.pool.stats()
    }

    /// The `vfio-ioctls` device (region and IRQ info).
    pub fn vfio_device(&self) -> &VfioDevice {
        &self.device
    }
}

impl Drop for VfioPlatform {
    fn drop(&mut self) {
        if let Err(e) = self.irqs.disable() {
            log::warn!("{e}");
        }
        // Stop the function's DMA before its memory is unmapped (the IOMMU would block it
        // anyway, with a fault for every access).
        if let Err(e) = self.config.update_command(0, pci::command::BUS_MASTER) {
            log::warn!("{}: clearing bus mastering: {e}", self.address());
        }
    }
}

/// Spin this long at the start of a wait (commands complete in microseconds)…
const RELAX_SPIN_NS: u64 = 20_000;
/// …then yield the CPU until this much time has passed…
const RELAX_YIELD_NS: u64 = 2_000_000;
/// …then sleep this long per iteration (firmware initialization takes seconds).
const RELAX_SLEEP: Duration = Duration::from_micros(100);
/// A gap this long between two `relax` calls means a new wait began.
const RELAX_NEW_WAIT_NS: u64 = 1_000_000;

impl VfioPlatform {
    /// CLOCK_MONOTONIC, in nanoseconds since the platform was opened (`Platform::now_ns`).
    fn elapsed_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// One step of a wait (`Platform::relax`): spins for the first 20 µs of a wait, yields up to
    /// 2 ms, then sleeps 100 µs per call. A wait is taken to begin when `relax` was not called
    /// for 1 ms.
    fn relax_step(&self) {
        let now = self.elapsed_ns();
        let last = self.relax_last.swap(now, Ordering::Relaxed);
        if now.saturating_sub(last) > RELAX_NEW_WAIT_NS {
            self.relax_start.store(now, Ordering::Relaxed);
        }
        let waited = now.saturating_sub(self.relax_start.load(Ordering::Relaxed));
        if waited < RELAX_SPIN_NS {
            core::hint::spin_loop();
        } else if waited < RELAX_YIELD_NS {
            std::thread::yield_now();
        } else {
            std::thread::sleep(RELAX_SLEEP);
        }
    }
}

/// Opens the mlx5 function at `addr` through VFIO and brings it up. `config.bar_size` is taken
/// from the BAR.
pub fn open_device(
    addr: &str,
    opts: &VfioOptions,
    config: DeviceConfig,
) -> Result<Device<VfioPlatform>, VfioError> {
    let opts = VfioOptions {
        expect_vendor: Some(pci::MELLANOX_VENDOR),
        ..opts.clone()
    };
    let platform = VfioPlatform::open(addr, &opts)?;
    let bdf = platform.address();
    let config = DeviceConfig {
        bar_size: platform.bar_size(),
        ..config
    };
    Device::open(platform, config).map_err(|e| VfioError::from_bringup(bdf, e))
}

/// The simulator or a VFIO function, chosen at run time (`mlx5ctl --sim` / `--vfio`).
#[cfg(feature = "sim")]
#[derive(Debug)]
pub enum AnyPlatform {
    /// The simulated ConnectX-5.
    Sim(mlx5::SimPlatform),
    /// A real function through VFIO.
    Vfio(Box<VfioPlatform>),
}
