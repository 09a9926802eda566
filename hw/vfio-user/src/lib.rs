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
//!   shared: `memory-backend-memfd,share=on`) is mapped here ([`GuestRegion`]) and lent to the
//!   simulator at the guest's IOVA ([`mlx5_sim::SimDevice::dma_map_external`]); a device access
//!   outside every map is the simulator's translation fault;
//! * **MSI-X** through the eventfds SET_IRQS gives: the simulator raises a vector when it writes an
//!   EQE to an armed EQ ([`mlx5_sim::SimDevice::set_interrupt_sink`]), and the eventfd is written;
//! * **reset** (DEVICE_RESET, and a function-level reset through the PCIe device control
//!   register): the simulator starts over as a freshly powered device.
//!
//! [`Cx5::serve`] serves one client on a UNIX socket, blocking; the simulator runs in
//! [`mlx5_sim::Mode::Threaded`] (the guest runs in real time).

#![deny(unsafe_code)]

pub mod config;
#[allow(unsafe_code)]
mod guest_mem;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

use mlx5_ifc::{Be32, Be64};
use mlx5_sim::{InterruptSink, SimDevice, MSIX_VECTORS};
use vfio_bindings::bindings::vfio::{
    vfio_region_info, VFIO_IRQ_INFO_EVENTFD, VFIO_IRQ_INFO_NORESIZE, VFIO_IRQ_SET_DATA_EVENTFD,
    VFIO_IRQ_SET_DATA_NONE, VFIO_PCI_BAR0_REGION_INDEX, VFIO_PCI_CONFIG_REGION_INDEX,
    VFIO_PCI_INTX_IRQ_INDEX, VFIO_PCI_MSIX_IRQ_INDEX, VFIO_PCI_NUM_IRQS, VFIO_PCI_NUM_REGIONS,
    VFIO_REGION_INFO_FLAG_READ, VFIO_REGION_INFO_FLAG_WRITE,
};
use vfio_user::{DmaMapFlags, DmaUnmapFlags, IrqInfo, Server, ServerBackend, ServerRegion};

pub use config::ConfigSpace;
pub use guest_mem::GuestRegion;

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
        Cx5 {
            sim,
            config: ConfigSpace::connectx5(MSIX_VECTORS as u16),
            vectors,
            maps: BTreeMap::new(),
            life: (0, 0, 0),
            on_life_end: None,
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
        self.life = (index + 1, 0, 0);
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
    pub fn irqs() -> Vec<IrqInfo> {
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
                    count: MSIX_VECTORS as u32,
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
    /// disconnects.
    pub fn serve(mut self, path: &Path) -> Result<(), vfio_user::Error> {
        let server = Server::new(path, true, Self::irqs(), self.regions())?;
        log::info!("mlx5-vfio-user: serving a ConnectX-5 on {}", path.display());
        let r = server.run(&mut self);
        log::info!("mlx5-vfio-user: client gone ({r:?})");
        self.end_life("client gone");
        r
    }

    fn bar_read(&self, off: u64, data: &mut [u8]) {
        let size = self.sim.bar_size();
        for (i, chunk) in data.chunks_mut(4).enumerate() {
            let at = off + 4 * i as u64;
            let word = at & !3;
            let bytes = if word + 4 <= size {
                self.sim.bar_read32(word).to_bytes()
            } else {
                log::warn!("mlx5-vfio-user: BAR0 read at {at:#x} past the BAR");
                [0; 4]
            };
            let skip = (at - word) as usize;
            for (j, b) in chunk.iter_mut().enumerate() {
                *b = bytes.get(skip + j).copied().unwrap_or(0);
            }
        }
    }

    fn bar_write(&self, off: u64, data: &[u8]) {
        if off.saturating_add(data.len() as u64) > self.sim.bar_size() {
            log::warn!("mlx5-vfio-user: BAR0 write at {off:#x} past the BAR; dropped");
            return;
        }
        match data.len() {
            4 => self
                .sim
                .bar_write32(off, Be32::from_bytes([data[0], data[1], data[2], data[3]])),
            8 => {
                let mut b = [0; 8];
                b.copy_from_slice(data);
                self.sim.bar_write64(off, Be64::from_bytes(b));
            }
            n => log::warn!("mlx5-vfio-user: BAR0 write of {n} bytes at {off:#x}; dropped"),
        }
    }

    /// A function-level or device reset: the simulator starts over; DMA maps and eventfds are
    /// the client's and stay.
    fn reset_device(&mut self, end: &'static str) {
        log::info!("mlx5-vfio-user: {end}");
        self.end_life(end);
        self.sim.function_level_reset();
    }
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
            VFIO_PCI_BAR0_REGION_INDEX => self.bar_read(offset, data),
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
            VFIO_PCI_BAR0_REGION_INDEX => self.bar_write(offset, data),
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
        let region = GuestRegion::map(&fd, offset, size)?;
        let len = usize::try_from(size)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "DMA map too large"))?;
        self.sim
            .dma_map_external(address, len, Arc::new(region))
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        self.maps.insert(address, size);
        self.life.1 += 1;
        log::debug!("mlx5-vfio-user: DMA map {address:#x}+{size:#x} (fd offset {offset:#x})");
        Ok(())
    }

    fn dma_unmap(&mut self, _flags: DmaUnmapFlags, address: u64, size: u64) -> io::Result<()> {
        let n = self
            .sim
            .dma_unmap_external(address, usize::try_from(size).unwrap_or(usize::MAX));
        self.life.2 += 1;
        self.maps
            .retain(|&iova, &mut len| !(iova >= address && iova + len <= address + size));
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
        if end > MSIX_VECTORS as u32 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("SET_IRQS: vectors {start}..{end} of {MSIX_VECTORS}"),
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
