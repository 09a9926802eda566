//! The project's own driver through the vfio-user protocol, in one process: a server thread
//! serves a simulated ConnectX-5 on a UNIX socket; the test's `Platform` is a vfio-user client
//! — every BAR access a protocol message, DMA memory a memfd it maps to the server (DMA_MAP) at
//! IOVAs of its choosing, as QEMU does with guest RAM. The driver brings the device up, creates
//! objects, answers the firmware's page requests, and tears it down; the simulator's accounts
//! and DMA fault record are checked after. This tests the adapter (config space, BAR, DMA into
//! client memory, reset) without a guest; the QEMU runs are in `tests/linux-on-sim`.

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd};
use std::path::PathBuf;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mlx5::ifc::{Be32, Be64};
use mlx5::{Device, DeviceConfig, DmaRegion, Platform, PlatformError};
use mlx5_sim::{Mode, Profile, SimDevice};
use mlx5_vfio_user::{config, Cx5, Life};
use vfio_bindings::bindings::vfio::{VFIO_PCI_BAR0_REGION_INDEX, VFIO_PCI_CONFIG_REGION_INDEX};
use vfio_user::Client;

/// IOVA of the client's DMA arena (as a guest's RAM would be mapped).
const ARENA_IOVA: u64 = 0x4000_0000;
const ARENA_BYTES: usize = 64 << 20;

/// A `Platform` that is a vfio-user client.
struct UserPlatform {
    client: Mutex<Client>,
    arena: NonNull<u8>,
    /// Next free byte of the arena (a bump allocator: freed memory is not reused).
    next: Mutex<usize>,
    start: Instant,
}

// SAFETY: the client is behind a mutex; the arena is shared memory accessed by the driver with
// atomics only.
unsafe impl Send for UserPlatform {}
// SAFETY: as above.
unsafe impl Sync for UserPlatform {}

impl UserPlatform {
    fn connect(socket: &std::path::Path) -> (Self, File) {
        let mut client = None;
        for _ in 0..200 {
            match Client::new(socket) {
                Ok(c) => {
                    client = Some(c);
                    break;
                }
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
        let mut client = client.expect("the server listens");
        // SAFETY: memfd_create with a valid C string; the result is checked. Sealable, as
        // QEMU's guest RAM is: the server seals it against shrinking before mapping it.
        let fd = unsafe { libc::memfd_create(c"mlx5-vfu-arena".as_ptr(), libc::MFD_ALLOW_SEALING) };
        assert!(fd >= 0, "memfd_create");
        // SAFETY: a fresh descriptor we own.
        let memfd = unsafe { File::from_raw_fd(fd) };
        memfd.set_len(ARENA_BYTES as u64).unwrap();
        // SAFETY: a new shared mapping of our memfd; checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                ARENA_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                memfd.as_raw_fd(),
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        client
            .dma_map(0, ARENA_IOVA, ARENA_BYTES as u64, memfd.as_raw_fd())
            .expect("DMA_MAP");
        (
            UserPlatform {
                client: Mutex::new(client),
                arena: NonNull::new(p.cast()).unwrap(),
                next: Mutex::new(0),
                start: Instant::now(),
            },
            memfd,
        )
    }

    fn bar(&self, off: u64, data: &mut [u8]) {
        self.client
            .lock()
            .unwrap()
            .region_read(VFIO_PCI_BAR0_REGION_INDEX, off, data)
            .expect("BAR read");
    }

    fn bar_w(&self, off: u64, data: &[u8]) {
        self.client
            .lock()
            .unwrap()
            .region_write(VFIO_PCI_BAR0_REGION_INDEX, off, data)
            .expect("BAR write");
    }
}

// SAFETY: `dma_alloc` hands out disjoint, zeroed (never reused) stretches of the arena, which
// the server maps for the device at ARENA_IOVA + offset, valid until the platform drops (the
// mapping is never removed while it lives); `host_alloc` is the process heap, which the device
// cannot reach (only the arena is mapped to it); BAR accesses are one protocol message of the
// stated width each.
unsafe impl Platform for UserPlatform {
    fn bar_read32(&self, offset: u64) -> Be32 {
        let mut b = [0; 4];
        self.bar(offset, &mut b);
        Be32::from_bytes(b)
    }
    fn bar_write32(&self, offset: u64, value: Be32) {
        self.bar_w(offset, &value.to_bytes());
    }
    fn bar_write64(&self, offset: u64, value: Be64) {
        self.bar_w(offset, &value.to_bytes());
    }
    fn dma_alloc(&self, len: usize, align: usize) -> Result<DmaRegion, PlatformError> {
        let mut next = self.next.lock().unwrap();
        let at = next.next_multiple_of(align.max(8));
        if at + len > ARENA_BYTES {
            return Err(PlatformError::OutOfDmaMemory { len, align });
        }
        *next = at + len;
        Ok(DmaRegion {
            cpu: NonNull::new(self.arena.as_ptr().wrapping_add(at)).unwrap(),
            iova: ARENA_IOVA + at as u64,
            len,
        })
    }
    fn dma_free(&self, _region: DmaRegion) -> Result<(), PlatformError> {
        Ok(())
    }
    fn host_alloc(&self, len: usize, align: usize) -> Result<NonNull<u8>, PlatformError> {
        let layout = std::alloc::Layout::from_size_align(len.max(1), align.max(8))
            .map_err(|_| PlatformError::OutOfHostMemory { len, align })?;
        // SAFETY: a non-zero-sized layout.
        NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })
            .ok_or(PlatformError::OutOfHostMemory { len, align })
    }
    unsafe fn host_free(&self, ptr: NonNull<u8>, len: usize, align: usize) {
        let layout = std::alloc::Layout::from_size_align(len.max(1), align.max(8)).unwrap();
        // SAFETY: the caller returns exactly one earlier `host_alloc`.
        unsafe { std::alloc::dealloc(ptr.as_ptr(), layout) }
    }
    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }
    fn relax(&self) {
        std::thread::yield_now();
    }
}

fn socket(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("mlx5-vfu-{}-{name}.sock", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

#[test]
fn the_driver_brings_the_device_up_through_vfio_user() {
    let path = socket("bringup");
    let sim = SimDevice::new(Profile::connectx5(), Mode::Threaded);
    let server_sim = sim.clone();
    let p = path.clone();
    // Each life of the device as the server tells it: how it ended, the HCA state, pages and
    // objects held, the commands traced.
    type Seen = (u32, &'static str, String, usize, usize, usize, u64);
    let lives: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let record = lives.clone();
    let hook = Box::new(move |l: &Life<'_>| {
        let mut trace = Vec::new();
        l.sim.write_trace_jsonl(&mut trace).unwrap();
        record.lock().unwrap().push((
            l.index,
            l.end,
            format!("{:?}", l.sim.hca_state()),
            l.sim.pages_held(),
            l.sim.live_objects().len(),
            trace
                .split(|&b| b == b'\n')
                .filter(|r| !r.is_empty())
                .count(),
            l.dma_maps,
        ));
    });
    let server = std::thread::spawn(move || Cx5::new(server_sim).on_life_end(hook).serve(&p));
    let (plat, _memfd) = UserPlatform::connect(&path);

    // Configuration space through the protocol.
    let mut id = [0u8; 4];
    plat.client
        .lock()
        .unwrap()
        .region_read(VFIO_PCI_CONFIG_REGION_INDEX, 0, &mut id)
        .unwrap();
    assert_eq!(id, [0xb3, 0x15, 0x17, 0x10]);
    let mut cap = [0u8; 1];
    plat.client
        .lock()
        .unwrap()
        .region_read(
            VFIO_PCI_CONFIG_REGION_INDEX,
            config::MSIX_CAP as u64,
            &mut cap,
        )
        .unwrap();
    assert_eq!(cap, [0x11], "MSI-X capability");

    // A device reset through the protocol: the device initializes again (the driver below
    // waits for it).
    plat.client.lock().unwrap().reset().unwrap();
    assert_ne!(
        plat.bar_read32(0x1fc).get() & 0x8000_0000,
        0,
        "initializing again after reset"
    );

    // The whole bring-up, objects, page requests and teardown, every command's mailboxes and
    // every queue in the client's memory.
    let dev = Device::open(plat, DeviceConfig::default()).expect("bring-up through vfio-user");
    assert!(dev.device_attr().max_qp > 0);
    let cq = dev.create_cq(64).expect("a CQ in client memory");
    drop(cq);
    dev.close().expect("teardown");
    assert_eq!(
        sim.pages_held(),
        0,
        "every page the firmware took came back"
    );
    assert!(sim.dma_faults().is_empty(), "{:?}", sim.dma_faults());
    assert!(sim.live_objects().is_empty(), "{:?}", sim.live_objects());
    assert_eq!(sim.dma_external_bytes(), ARENA_BYTES);
    let n = sim.commands_executed();
    assert!(
        n > 20,
        "the bring-up and teardown ran {n} commands through the socket"
    );
    let _ = server.join();
    let _ = std::fs::remove_file(&path);
    let lives = lives.lock().unwrap().clone();
    assert_eq!(lives.len(), 2, "{lives:?}");
    let (first, second) = (&lives[0], &lives[1]);
    assert_eq!(
        (first.0, first.1, first.5),
        (0, "device reset", 0),
        "the first life ended at the reset, with no command"
    );
    assert!(
        first.6 >= 1,
        "the client's memory was mapped in it: {first:?}"
    );
    assert_eq!(
        (second.0, second.1, second.2.as_str(), second.3, second.4),
        (1, "client gone", "Disabled", 0, 0),
        "the driver's life ended with the client, nothing held"
    );
    assert_eq!(
        second.5 as u64, n,
        "its trace has every command: {second:?}"
    );
}
