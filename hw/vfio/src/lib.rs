//! `mlx5-vfio`: the VFIO passthrough backend of the `mlx5` driver (Linux): a ConnectX function
//! bound to `vfio-pci`, driven from user space through the [`Platform`] boundary.
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
//! Unsafe code is denied crate-wide and allowed where it is needed: in `bar`, `memory`, `dma`, `iommu`,
//! `irq`, in `pci`'s access(2) check and here (two ioctls, borrowing the device fd, the
//! `Platform` impls); each block says why it is sound.
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

use std::fs::File;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mlx5::ifc::{Be32, Be64};
use mlx5::{Device, DeviceConfig};
use mlx5::{DmaRegion, Platform, PlatformError};
use vfio_bindings::bindings::vfio::{VFIO_PCI_BAR0_REGION_INDEX, VFIO_PCI_CONFIG_REGION_INDEX};
use vfio_ioctls::{VfioContainer, VfioDevice, VfioOps};

pub use bar::Bar;
pub use dma::{DmaStats, HostMemory};
pub use error::VfioError;
pub use iommu::{DmaMapping, Iommu};
pub use irq::{Interrupts, IrqKind};
pub use pci::{mlx5_model, ConfigSpace, GroupMember, PciAddress, PciFunction, Sysfs};

use dma::DmaPool;
use iommu::vfio_ioctl;

const VFIO_DEVICE_GET_INFO: libc::Ioctl = vfio_ioctl(7);
const VFIO_DEVICE_RESET: libc::Ioctl = vfio_ioctl(11);
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

/// A PCI function opened through VFIO, as a [`Platform`].
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

/// `VFIO_DEVICE_GET_INFO`'s flags.
#[allow(unsafe_code)] // The ioctl writes a buffer we pass by pointer.
fn device_flags(file: &File) -> std::io::Result<u32> {
    // struct vfio_device_info { argsz, flags, num_regions, num_irqs, cap_offset, pad }: u32 each.
    let mut info = [0u32; 6];
    info[0] = std::mem::size_of_val(&info) as u32;
    // SAFETY: `info` is a live, writable, 4-aligned buffer of argsz bytes, as the ioctl expects.
    let r = unsafe { libc::ioctl(file.as_raw_fd(), VFIO_DEVICE_GET_INFO, info.as_mut_ptr()) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(info[1])
}

impl VfioPlatform {
    /// Opens the function at `addr` (`0000:03:00.0` or `03:00.0`). See the crate docs.
    #[allow(unsafe_code)] // Borrowing the device fd; VFIO_DEVICE_RESET.
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
        // SAFETY: the device fd is open for as long as `device` lives, which outlasts this
        // borrow; it is duplicated at once into a descriptor of our own.
        let owned = unsafe { BorrowedFd::borrow_raw(device.as_raw_fd()) }
            .try_clone_to_owned()
            .map_err(|e| VfioError::io("dup of the VFIO device fd", e))?;
        let file = Arc::new(File::from(owned));

        let flags = device_flags(&file).map_err(|e| VfioError::io("VFIO_DEVICE_GET_INFO", e))?;
        let mut reset = false;
        if opts.reset && flags & VFIO_DEVICE_FLAGS_RESET != 0 {
            // SAFETY: VFIO_DEVICE_RESET takes no argument; the fd is a VFIO device.
            if unsafe { libc::ioctl(file.as_raw_fd(), VFIO_DEVICE_RESET) } == 0 {
                reset = true;
            } else {
                log::warn!(
                    "{addr}: VFIO_DEVICE_RESET failed: {}",
                    std::io::Error::last_os_error()
                );
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

// SAFETY: `dma_alloc` returns memory from the pool: private anonymous mappings, zeroed, 64-byte
// (so 8-byte) aligned, IOVA aligned as asked, mapped in the IOMMU at `iova`, handed to one caller
// only (the pool's allocator never gives out a range twice) and kept mapped until `dma_free` or
// until the platform drops. Host memory is the process heap, which the IOMMU never maps (only
// the pool's chunks are mapped). BAR accessors perform exactly one access of the stated width on the
// mapped BAR (or one pread/pwrite the kernel turns into that access) and never touch DMA memory.
#[allow(unsafe_code)]
unsafe impl Platform for VfioPlatform {
    #[inline]
    fn bar_read32(&self, offset: u64) -> Be32 {
        self.bar.read32(offset)
    }

    #[inline]
    fn bar_write32(&self, offset: u64, value: Be32) {
        self.bar.write32(offset, value)
    }

    #[inline]
    fn bar_write64(&self, offset: u64, value: Be64) {
        self.bar.write64(offset, value)
    }

    #[inline]
    fn bar_write_bf(&self, offset: u64, chunk: &[Be64]) {
        self.bar.write_bf(offset, chunk)
    }

    /// VFIO maps BAR0 uncached (its region mmap offers no write-combining), so no BlueFlame.
    fn uar_write_combining(&self) -> bool {
        false
    }

    fn dma_alloc(&self, len: usize, align: usize) -> Result<DmaRegion, PlatformError> {
        self.pool.alloc(len, align)
    }

    fn dma_free(&self, region: DmaRegion) -> Result<(), PlatformError> {
        self.pool.free(region)
    }

    /// The process heap: never mapped in the IOMMU (only the pool's chunks are).
    fn host_alloc(&self, len: usize, align: usize) -> Result<NonNull<u8>, PlatformError> {
        mlx5::io::host::heap_alloc(len, align)
    }

    unsafe fn host_free(&self, ptr: NonNull<u8>, len: usize, align: usize) {
        // SAFETY: forwarded contract (`ptr` came from `host_alloc`, i.e. `heap_alloc`).
        unsafe { mlx5::io::host::heap_free(ptr, len, align) }
    }

    /// CLOCK_MONOTONIC, in nanoseconds since the platform was opened.
    fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Spins for the first 20 µs of a wait, yields up to 2 ms, then sleeps 100 µs per call, so
    /// command completions are seen at once and a firmware that takes seconds to initialize
    /// does not burn a core. A wait is taken to begin when `relax` was not called for 1 ms.
    fn relax(&self) {
        let now = self.now_ns();
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

#[cfg(feature = "sim")]
macro_rules! either {
    ($self:ident, $p:ident => $e:expr) => {
        match $self {
            AnyPlatform::Sim($p) => $e,
            AnyPlatform::Vfio($p) => $e,
        }
    };
}

// SAFETY: every method forwards to the platform inside, which keeps the contract itself.
#[cfg(feature = "sim")]
#[allow(unsafe_code)]
unsafe impl Platform for AnyPlatform {
    fn bar_read32(&self, offset: u64) -> Be32 {
        either!(self, p => p.bar_read32(offset))
    }
    fn bar_write32(&self, offset: u64, value: Be32) {
        either!(self, p => p.bar_write32(offset, value))
    }
    fn bar_write64(&self, offset: u64, value: Be64) {
        either!(self, p => p.bar_write64(offset, value))
    }
    fn bar_write_bf(&self, offset: u64, chunk: &[Be64]) {
        either!(self, p => p.bar_write_bf(offset, chunk))
    }
    fn uar_write_combining(&self) -> bool {
        either!(self, p => p.uar_write_combining())
    }
    fn dma_alloc(&self, len: usize, align: usize) -> Result<DmaRegion, PlatformError> {
        either!(self, p => p.dma_alloc(len, align))
    }
    fn dma_free(&self, region: DmaRegion) -> Result<(), PlatformError> {
        either!(self, p => p.dma_free(region))
    }
    fn host_alloc(&self, len: usize, align: usize) -> Result<NonNull<u8>, PlatformError> {
        either!(self, p => p.host_alloc(len, align))
    }
    unsafe fn host_free(&self, ptr: NonNull<u8>, len: usize, align: usize) {
        // SAFETY: forwarded contract; a region always goes back to the variant it came from.
        either!(self, p => unsafe { p.host_free(ptr, len, align) })
    }
    fn now_ns(&self) -> u64 {
        either!(self, p => p.now_ns())
    }
    fn relax(&self) {
        either!(self, p => p.relax())
    }
}
