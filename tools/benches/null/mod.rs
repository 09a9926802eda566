//! The memory-backed null device the data-path benches share: the simulated ConnectX-5 brings
//! the device up and creates the queues, then the platform stops delivering 64-bit BAR stores
//! (doorbells), so they land in memory and nothing executes; the bench plays the device where
//! it must (writing CQEs into a CQ ring as the PRM lays them out).
#![allow(dead_code)]

use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use mlx5::ifc::{Be32, Be64};
use mlx5::sim::SimDevice;
use mlx5::{DmaRegion, Platform, PlatformError, SimPlatform};

/// The simulator as a platform whose doorbells can be switched off ("null device").
#[derive(Clone)]
pub struct Nullable {
    pub sim: SimPlatform,
    pub null: std::sync::Arc<AtomicBool>,
    /// Every DMA region handed out, in order (the poll bench finds its CQ ring here).
    pub allocs: std::sync::Arc<Allocs>,
}

impl Nullable {
    pub fn new(sim: SimDevice) -> Self {
        Nullable {
            sim: SimPlatform::new(sim),
            null: Default::default(),
            allocs: Default::default(),
        }
    }
}

thread_local! {
    /// Where the null device's doorbells land.
    static SINK: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The regions handed out: addresses only, never dereferenced here.
#[derive(Default)]
pub struct Allocs(std::sync::Mutex<Vec<DmaRegion>>);

impl std::ops::Deref for Allocs {
    type Target = std::sync::Mutex<Vec<DmaRegion>>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

// SAFETY: the list holds region descriptors (addresses and lengths) behind a mutex; nothing
// here dereferences them, so sharing the list between threads shares no memory access.
unsafe impl Sync for Allocs {}
// SAFETY: as above.
unsafe impl Send for Allocs {}

// SAFETY: every call forwards to `SimPlatform`, which upholds the contract; in null mode the
// 64-bit BAR stores go to an atomic in host memory instead, touching no DMA memory.
unsafe impl Platform for Nullable {
    fn bar_read32(&self, offset: u64) -> Be32 {
        self.sim.bar_read32(offset)
    }
    fn bar_write32(&self, offset: u64, value: Be32) {
        self.sim.bar_write32(offset, value)
    }
    fn bar_write64(&self, offset: u64, value: Be64) {
        if self.null.load(Ordering::Relaxed) {
            // A per-thread word: threads posting at once share no cache line through it.
            SINK.with(|w| w.set(value.to_ne_raw() ^ offset));
        } else {
            self.sim.bar_write64(offset, value)
        }
    }
    fn dma_alloc(&self, len: usize, align: usize) -> Result<DmaRegion, PlatformError> {
        let r = self.sim.dma_alloc(len, align)?;
        self.allocs.lock().unwrap().push(r);
        Ok(r)
    }
    fn dma_free(&self, region: DmaRegion) -> Result<(), PlatformError> {
        self.sim.dma_free(region)
    }
    fn host_alloc(&self, len: usize, align: usize) -> Result<NonNull<u8>, PlatformError> {
        self.sim.host_alloc(len, align)
    }
    unsafe fn host_free(&self, ptr: NonNull<u8>, len: usize, align: usize) {
        // SAFETY: forwarded contract.
        unsafe { self.sim.host_free(ptr, len, align) }
    }
    fn now_ns(&self) -> u64 {
        self.sim.now_ns()
    }
    fn relax(&self) {
        self.sim.relax()
    }
}

/// The null device's DMA write of a CQE at `offset` of the ring `r`: seven words, then the one
/// holding `op_own` with release, as a device makes the owner byte visible last.
pub fn write_cqe(r: DmaRegion, offset: usize, img: &[u8; 64]) {
    assert!(offset.is_multiple_of(64) && offset + 64 <= r.len);
    for (i, w) in img.chunks_exact(8).enumerate() {
        // SAFETY: the word is inside the region (asserted) and 8-aligned (regions are at least
        // 8-aligned, `offset` a multiple of 64); the region stays mapped while the device is
        // open, and the driver reaches it only through atomics.
        let a = unsafe { AtomicU64::from_ptr(r.cpu.as_ptr().add(offset + 8 * i).cast()) };
        let v = u64::from_ne_bytes(w.try_into().expect("8 bytes"));
        a.store(
            v,
            if i == 7 {
                Ordering::Release
            } else {
                Ordering::Relaxed
            },
        );
    }
}

/// Writes the cache line at `offset` of `r` back to memory and drops it from every cache.
pub fn evict(r: DmaRegion, offset: usize) {
    assert!(offset < r.len);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `offset < r.len`, so the address is inside the region, which stays mapped while
    // the device is open; CLFLUSH changes no memory.
    unsafe {
        core::arch::x86_64::_mm_clflush(r.cpu.as_ptr().add(offset));
        core::arch::x86_64::_mm_mfence();
    }
}

/// RESET to RTS, connected to itself (the driver's own sequence of transitions).
pub fn to_rts(qp: &mut mlx5::qp::Qp<'_, Nullable>, _gid: [u8; 16], _dest: u32) {
    let me = qp.endpoint();
    qp.connect(&me, &mlx5::qp::ConnectOpts::default()).unwrap();
}

/// An RC QP for SENDs of 1 SGE on `cq`, in RTS towards itself; and the GID it uses.
pub fn send_qp<'a>(
    dev: &'a mlx5::Device<Nullable>,
    pd: &mlx5::pd::Pd,
    cq: &'a mlx5::cq::Cq<'a, Nullable>,
    max_send_wr: u32,
    max_inline_data: u32,
) -> (mlx5::qp::Qp<'a, Nullable>, [u8; 16]) {
    let mut attr = mlx5::qp::QpInitAttr::new(
        mlx5::qp::QpType::Rc,
        cq,
        cq,
        mlx5::qp::QpCap {
            max_send_wr,
            max_recv_wr: 1,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data,
        },
    );
    attr.send_ops = Some(mlx5::qp::SendOps::SEND);
    let mut qp = dev.create_qp(pd, &attr).unwrap();
    let gid = dev.gid0().unwrap().gid;
    let dest = qp.qpn();
    to_rts(&mut qp, gid, dest);
    (qp, gid)
}

pub fn reset(qp: &mut mlx5::qp::Qp<'_, Nullable>, gid: [u8; 16], dest: u32) {
    qp.modify(
        &mlx5::qp::QpAttr {
            qp_state: Some(mlx5::qp::QpState::Reset),
            ..mlx5::qp::QpAttr::default()
        },
        mlx5::qp::QpAttrMask::STATE,
    )
    .unwrap();
    to_rts(qp, gid, dest);
}
