//! The simulated ConnectX-5 served over **vfio-user**: a QEMU ≥ 10.1 guest started with
//! `-device vfio-user-pci,socket=…` sees PCI device 15b3:1017 and drives it with its own
//! drivers — Linux's mlx5_core and mlx5_ib, rdma-core's mlx5 provider above them, or vfio-pci
//! and this project's driver.
//!
//! What the client gets:
//! * **configuration space** ([`config`]): IDs, class, BAR0 (64-bit prefetchable), a PCI
//!   Express capability with function-level reset, MSI-X with its table and PBA in BAR0 pages 2
//!   and 3 (the client emulates those pages; the simulator's own registers never use them);
//! * **BAR0**: the simulator's registers — 4-byte reads and writes of the initialization
//!   segment and health buffer, 8-byte UAR doorbells and BlueFlame stores;
//! * **DMA** into the guest's memory: each DMA_MAP (a file descriptor of guest RAM, which must be
//!   a shared memfd that is or can be sealed against shrinking: `memory-backend-memfd,share=on`,
//!   whose default `seal=on` does it) is mapped here ([`GuestRegion`], never past the file's
//!   end) and lent to the simulator at the guest's IOVA
//!   ([`mlx5_sim::SimDevice::dma_map_external`]); a device access outside every map is the
//!   simulator's translation fault;
//! * **MSI-X** through the eventfds SET_IRQS gives: the simulator raises a vector when it writes an
//!   EQE to an armed EQ ([`mlx5_sim::SimDevice::set_interrupt_sink`]), and the eventfd is written;
//! * **reset** (DEVICE_RESET, and a function-level reset through the PCIe device control
//!   register): the simulator starts over as a freshly powered device.
//!
//! [`Cx5::serve`] serves one client on a UNIX socket, blocking; the simulator runs in
//! [`mlx5_sim::Mode::Threaded`] (the guest runs in real time).
//!
//! The client may be hostile (issue #26), and nothing it sends may end the process, which may
//! serve other NICs: every offset and range is checked arithmetic; region accesses are bounded
//! by the region and 1 MiB before anything is allocated (the patched `vfio_user`,
//! `vendor/vfio_user/PATCHES.md`); DMA maps are bounded in number ([`MAX_DMA_MAPS`]) and made
//! only of memory the client cannot take back; warnings it causes are rate-limited; and a panic
//! while serving it ends its connection only ([`contained_panics`]).

#![deny(unsafe_code)]
#![deny(unreachable_pub)]
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod config;
#[allow(unsafe_code)]
mod guest_mem;
mod ratelimit;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Write};
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use mlx5_ifc::{Be32, Be64};
use mlx5_sim::{InterruptSink, SimDevice};
use vfio_bindings::bindings::vfio::{
    vfio_region_info, VFIO_IRQ_INFO_EVENTFD, VFIO_IRQ_INFO_NORESIZE, VFIO_IRQ_SET_DATA_EVENTFD,
    VFIO_IRQ_SET_DATA_NONE, VFIO_PCI_BAR0_REGION_INDEX, VFIO_PCI_CONFIG_REGION_INDEX,
    VFIO_PCI_INTX_IRQ_INDEX, VFIO_PCI_MSIX_IRQ_INDEX, VFIO_PCI_NUM_IRQS, VFIO_PCI_NUM_REGIONS,
    VFIO_REGION_INFO_FLAG_READ, VFIO_REGION_INFO_FLAG_WRITE,
};
use vfio_user::{DmaMapFlags, DmaUnmapFlags, IrqInfo, Server, ServerBackend, ServerRegion};

pub use config::ConfigSpace;
pub use guest_mem::GuestRegion;
use ratelimit::{limited_warn, RateLimit};

/// The most DMA maps a client may hold at once: each is a mapping of this process, and their
/// number is limited for the whole process (`vm.max_map_count`, 65530 by default), which other
/// NICs and the allocator need too. QEMU maps guest RAM in a handful.
pub const MAX_DMA_MAPS: usize = 1024;

/// Panics caught while serving a client (in this process, since it started).
static CONTAINED_PANICS: AtomicU64 = AtomicU64::new(0);

/// How many times serving a client panicked — in the `vfio_user` crate or in the device — and
/// the panic ended that client's connection only ([`Cx5::serve`] returned an error).
pub fn contained_panics() -> u64 {
    CONTAINED_PANICS.load(Ordering::Relaxed)
}

fn invalid(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what)
}

/// The eventfds of the MSI-X vectors, by vector (`None`: not set, or masked by SET_IRQS).
type Vectors = Arc<Mutex<Vec<Option<File>>>>;

/// One life of the device as the server saw it — from power-on or a reset to the next reset or
/// to the client's departure — handed to [`Cx5::on_life_end`] before the simulator starts over,
/// so that what a driver left behind (objects, pages, DMA faults, the command trace) is seen
/// before a reset wipes it.
#[derive(Debug)]
pub struct Life<'a> {
    /// The device, still as this life left it.
    pub sim: &'a SimDevice,
    /// 0 for the first life, then one more per reset.
    pub index: u32,
    /// What ended it: `"function-level reset"`, `"device reset"` or `"client gone"`.
    pub end: &'static str,
    /// DMA_MAP messages with memory the client sent during this life.
    pub dma_maps: u64,
    /// DMA_UNMAP messages the client sent during this life.
    pub dma_unmaps: u64,
    /// The client's maps live when it ended.
    pub live_maps: usize,
}

/// What [`Cx5::on_life_end`] calls.
pub type LifeHook = Box<dyn FnMut(&Life<'_>) + Send>;

/// A simulated ConnectX-5 behind a vfio-user server ([`ServerBackend`]).
pub struct Cx5 {
    sim: SimDevice,
    config: ConfigSpace,
    vectors: Vectors,
    /// The client's DMA maps: IOVA → bytes.
    maps: BTreeMap<u64, u64>,
    /// This life's number and its DMA_MAP / DMA_UNMAP counts.
    life: (u32, u64, u64),
    on_life_end: Option<LifeHook>,
    /// Warnings about the client's accesses.
    warn_limit: RateLimit,
}

impl std::fmt::Debug for Cx5 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cx5")
            .field("sim", &self.sim)
            .field("maps", &self.maps.len())
            .field("life", &self.life)
            .finish_non_exhaustive()
    }
}

impl Cx5 {
    /// The device `sim` as a vfio-user device. Its interrupt sink becomes the MSI-X eventfds.
    pub fn new(sim: SimDevice) -> Self {
        let vectors: Vectors = Arc::new(Mutex::new(Vec::new()));
        let v = vectors.clone();
        let sink: InterruptSink = Arc::new(move |vector| signal(&v, vector));
        sim.set_interrupt_sink(Some(sink));
        let config =
            ConfigSpace::connectx5(sim.profile().pci_device_id(), sim.profile().msix_vectors());
        Cx5 {
            sim,
            config,
            vectors,
            maps: BTreeMap::new(),
            life: (0, 0, 0),
            on_life_end: None,
            warn_limit: RateLimit::new(),
        }
    }

    /// Calls `hook` at the end of each life of the device: before every reset, and when the
    /// client has gone.
    pub fn on_life_end(mut self, hook: LifeHook) -> Self {
        self.on_life_end = Some(hook);
        self
    }

    /// Ends the current life (`end` says how), telling the hook, and starts the next.
    fn end_life(&mut self, end: &'static str) {
        let (index, dma_maps, dma_unmaps) = self.life;
        if let Some(hook) = self.on_life_end.as_mut() {
            hook(&Life {
                sim: &self.sim,
                index,
                end,
                dma_maps,
                dma_unmaps,
                live_maps: self.maps.len(),
            });
        }
        self.life = (index.wrapping_add(1), 0, 0);
    }

    /// The simulated device.
    pub fn sim(&self) -> &SimDevice {
        &self.sim
    }

    /// The regions a client is told of: configuration space and BAR0; the others absent.
    pub fn regions(&self) -> Vec<ServerRegion> {
        (0..VFIO_PCI_NUM_REGIONS)
            .map(|index| {
                let size = match index {
                    VFIO_PCI_CONFIG_REGION_INDEX => config::CONFIG_BYTES as u64,
                    VFIO_PCI_BAR0_REGION_INDEX => self.sim.bar_size(),
                    _ => 0,
                };
                ServerRegion {
                    region_info: vfio_region_info {
                        argsz: std::mem::size_of::<vfio_region_info>() as u32,
                        index,
                        size,
                        flags: if size > 0 {
                            VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE
                        } else {
                            0
                        },
                        ..Default::default()
                    },
                    sparse_areas: Vec::new(),
                    mmap_fd: None,
                }
            })
            .collect()
    }

    /// The interrupts a client is told of: INTx (one, never raised) and MSI-X (the
    /// simulator's vectors, eventfds, not resizable).
    pub fn irqs(vectors: u32) -> Vec<IrqInfo> {
        (0..VFIO_PCI_NUM_IRQS)
            .map(|index| match index {
                VFIO_PCI_INTX_IRQ_INDEX => IrqInfo {
                    index,
                    flags: VFIO_IRQ_INFO_EVENTFD,
                    count: 1,
                },
                VFIO_PCI_MSIX_IRQ_INDEX => IrqInfo {
                    index,
                    flags: VFIO_IRQ_INFO_EVENTFD | VFIO_IRQ_INFO_NORESIZE,
                    count: vectors,
                },
                _ => IrqInfo {
                    index,
                    flags: 0,
                    count: 0,
                },
            })
            .collect()
    }

    /// Serves one client on the UNIX socket `path` (which must not exist), until it
    /// disconnects. A panic while serving it (a bug the client's messages reach) ends this
    /// connection with an error, logged and counted ([`contained_panics`]); the process and any
    /// other device it serves go on.
    pub fn serve(mut self, path: &Path) -> Result<(), vfio_user::Error> {
        let vectors = u32::from(self.sim.profile().msix_vectors());
        let server = Server::new(path, true, Self::irqs(vectors), self.regions())?;
        log::info!("mlx5-vfio-user: serving a ConnectX-5 on {}", path.display());
        let r = contain(&path.display().to_string(), || server.run(&mut self));
        log::info!("mlx5-vfio-user: client gone ({r:?})");
        let suppressed = self.warn_limit.total_suppressed();
        if suppressed > 0 {
            log::warn!("mlx5-vfio-user: {suppressed} warnings about this client were not logged");
        }
        if std::panic::catch_unwind(AssertUnwindSafe(|| self.end_life("client gone"))).is_err() {
            CONTAINED_PANICS.fetch_add(1, Ordering::Relaxed);
            log::error!("mlx5-vfio-user: the end-of-life hook panicked");
        }
        r
    }

    /// A BAR0 read of `data.len()` bytes at `off`: refused past the BAR (or wrapping).
    fn bar_read(&mut self, off: u64, data: &mut [u8]) -> io::Result<()> {
        let size = self.sim.bar_size();
        let len = data.len() as u64;
        if off.checked_add(len).is_none_or(|end| end > size) {
            limited_warn!(
                self.warn_limit,
                "mlx5-vfio-user: BAR0 read of {len} bytes at {off:#x}: past the BAR's {size:#x} bytes; refused"
            );
            return Err(invalid(format!(
                "BAR0 read of {len} bytes at {off:#x}: past the BAR's {size:#x} bytes"
            )));
        }
        // Every `at` below is under `off + len` <= `size`: no overflow.
        for (i, chunk) in data.chunks_mut(4).enumerate() {
            let at = off + 4 * i as u64;
            let word = at & !3;
            let bytes = self.sim.bar_read32(word).to_bytes();
            let skip = (at - word) as usize;
            for (j, b) in chunk.iter_mut().enumerate() {
                *b = bytes.get(skip + j).copied().unwrap_or(0);
            }
        }
        Ok(())
    }

    /// A BAR0 write: 4 or 8 bytes within the BAR, any size in the MEMIC window (device memory);
    /// anything else refused.
    fn bar_write(&mut self, off: u64, data: &[u8]) -> io::Result<()> {
        let size = self.sim.bar_size();
        let len = data.len();
        if off.checked_add(len as u64).is_none_or(|end| end > size) {
            limited_warn!(
                self.warn_limit,
                "mlx5-vfio-user: BAR0 write of {len} bytes at {off:#x}: past the BAR's {size:#x} bytes; dropped"
            );
            return Err(invalid(format!(
                "BAR0 write of {len} bytes at {off:#x}: past the BAR's {size:#x} bytes"
            )));
        }
        // Device memory (the MEMIC window) takes any size, as memory does.
        if self.sim.bar_write_bytes(off, data) {
            return Ok(());
        }
        match *data {
            [a, b, c, d] => self.sim.bar_write32(off, Be32::from_bytes([a, b, c, d])),
            [a, b, c, d, e, f, g, h] => self
                .sim
                .bar_write64(off, Be64::from_bytes([a, b, c, d, e, f, g, h])),
            _ => {
                limited_warn!(
                    self.warn_limit,
                    "mlx5-vfio-user: BAR0 write of {len} bytes at {off:#x}: not 4 or 8; dropped"
                );
                return Err(invalid(format!(
                    "BAR0 write of {len} bytes at {off:#x}: only 4 and 8 bytes are served"
                )));
            }
        }
        Ok(())
    }

    /// A function-level or device reset: the simulator starts over; DMA maps and eventfds are
    /// the client's and stay.
    fn reset_device(&mut self, end: &'static str) {
        log::info!("mlx5-vfio-user: {end}");
        self.end_life(end);
        self.sim.function_level_reset();
    }
}

/// Runs `serve`, turning a panic into an error (logged and counted) for the client at `path`.
fn contain(
    path: &str,
    serve: impl FnOnce() -> Result<(), vfio_user::Error>,
) -> Result<(), vfio_user::Error> {
    std::panic::catch_unwind(AssertUnwindSafe(serve)).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_string());
        let n = CONTAINED_PANICS.fetch_add(1, Ordering::Relaxed) + 1;
        log::error!(
            "mlx5-vfio-user: serving the client on {path} panicked ({what}); its connection \
             ends, the process goes on ({n} such panics so far)"
        );
        Err(vfio_user::Error::Backend(io::Error::other(format!(
            "serving the client on {path} panicked: {what}"
        ))))
    })
}

/// Writes vector `vector`'s eventfd (an 8-byte count of 1), if it has one.
fn signal(vectors: &Vectors, vector: u16) {
    let table = vectors.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(Some(fd)) = table.get(usize::from(vector)) {
        let mut f: &File = fd;
        if let Err(e) = f.write_all(&1u64.to_ne_bytes()) {
            log::warn!("mlx5-vfio-user: MSI-X vector {vector}: {e}");
        }
    } else {
        log::debug!("mlx5-vfio-user: MSI-X vector {vector} raised with no eventfd");
    }
}

impl ServerBackend for Cx5 {
    fn region_read(&mut self, region: u32, offset: u64, data: &mut [u8]) -> io::Result<()> {
        match region {
            VFIO_PCI_CONFIG_REGION_INDEX => self.config.read(offset, data),
            VFIO_PCI_BAR0_REGION_INDEX => return self.bar_read(offset, data),
            _ => data.fill(0),
        }
        Ok(())
    }

    fn region_write(&mut self, region: u32, offset: u64, data: &[u8]) -> io::Result<()> {
        match region {
            VFIO_PCI_CONFIG_REGION_INDEX if self.config.write(offset, data) => {
                // Function-level reset asked through the PCIe device control register.
                self.reset_device("function-level reset");
            }
            VFIO_PCI_CONFIG_REGION_INDEX => {}
            VFIO_PCI_BAR0_REGION_INDEX => return self.bar_write(offset, data),
            _ => {}
        }
        Ok(())
    }

    fn dma_map(
        &mut self,
        _flags: DmaMapFlags,
        offset: u64,
        address: u64,
        size: u64,
        fd: Option<File>,
    ) -> io::Result<()> {
        // A map with no file (QEMU's ROM, for one) cannot be reached by the device: ignored,
        // so any DMA there is a translation fault.
        let Some(fd) = fd else {
            log::debug!("mlx5-vfio-user: DMA map of {size:#x} at {address:#x} without memory");
            return Ok(());
        };
        if address.checked_add(size).is_none() {
            return Err(invalid(format!(
                "DMA map: IOVA {address:#x} + size {size:#x} does not fit below 2^64"
            )));
        }
        if self.maps.len() >= MAX_DMA_MAPS {
            return Err(io::Error::new(
                io::ErrorKind::OutOfMemory,
                format!(
                    "DMA map of {size:#x} at {address:#x}: {} maps live, the limit \
                     (MAX_DMA_MAPS)",
                    self.maps.len()
                ),
            ));
        }
        let region = GuestRegion::map(&fd, offset, size)?;
        let len = region.len();
        self.sim
            .dma_map_external(address, len, Arc::new(region))
            .map_err(|e| invalid(format!("DMA map of {size:#x} at {address:#x}: {e}")))?;
        self.maps.insert(address, size);
        self.life.1 += 1;
        log::debug!("mlx5-vfio-user: DMA map {address:#x}+{size:#x} (fd offset {offset:#x})");
        Ok(())
    }

    fn dma_unmap(&mut self, flags: DmaUnmapFlags, address: u64, size: u64) -> io::Result<()> {
        self.life.2 += 1;
        if flags.contains(DmaUnmapFlags::UNMAP_ALL) {
            let n = std::mem::take(&mut self.maps)
                .into_iter()
                .map(|(iova, len)| {
                    self.sim
                        .dma_unmap_external(iova, usize::try_from(len).unwrap_or(usize::MAX))
                })
                .sum::<usize>();
            log::debug!("mlx5-vfio-user: DMA unmap of everything: {n} mapping(s)");
            return Ok(());
        }
        let (Some(end), Ok(len)) = (address.checked_add(size), usize::try_from(size)) else {
            return Err(invalid(format!(
                "DMA unmap: IOVA {address:#x} + size {size:#x} does not fit below 2^64"
            )));
        };
        let n = self.sim.dma_unmap_external(address, len);
        // Maps are only made when they end below 2^64 (`dma_map`).
        self.maps.retain(|&iova, &mut len| {
            !(iova >= address && iova.checked_add(len).is_some_and(|e| e <= end))
        });
        log::debug!("mlx5-vfio-user: DMA unmap {address:#x}+{size:#x}: {n} mapping(s)");
        Ok(())
    }

    fn reset(&mut self) -> io::Result<()> {
        self.reset_device("device reset");
        Ok(())
    }

    fn set_irqs(
        &mut self,
        index: u32,
        flags: u32,
        start: u32,
        count: u32,
        fds: Vec<File>,
    ) -> io::Result<()> {
        if index != VFIO_PCI_MSIX_IRQ_INDEX {
            // INTx is never raised; MSI is not offered.
            return Ok(());
        }
        let end = start.saturating_add(count);
        let vectors = u32::from(self.sim.profile().msix_vectors());
        if end > vectors {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("SET_IRQS: vectors {start}..{end} of {vectors}"),
            ));
        }
        let mut table = self.vectors.lock().unwrap_or_else(|e| e.into_inner());
        if table.len() < end as usize {
            table.resize_with(end as usize, || None);
        }
        if flags & VFIO_IRQ_SET_DATA_NONE != 0 && count == 0 {
            // Disable every vector.
            table.iter_mut().for_each(|v| *v = None);
            return Ok(());
        }
        let mut fds = fds.into_iter();
        for v in start..end {
            table[v as usize] = if flags & VFIO_IRQ_SET_DATA_EVENTFD != 0 {
                fds.next()
            } else {
                None
            };
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_while_serving_ends_that_client_only_and_is_counted() {
        let before = contained_panics();
        let r = contain("/test/socket", || panic!("a bug a client reached"));
        let Err(vfio_user::Error::Backend(e)) = r else {
            panic!("not turned into an error: {r:?}");
        };
        assert!(e.to_string().contains("a bug a client reached"), "{e}");
        assert!(contained_panics() > before);
        assert!(contain("/test/socket", || Ok(())).is_ok());
    }
}
