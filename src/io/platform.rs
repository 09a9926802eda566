//! The one thing the driver needs from its environment: the [`Platform`] boundary.
//!
//! A platform gives the driver BAR0 (32-bit loads and stores, the 64-bit doorbell store),
//! coherent DMA memory (allocate → CPU pointer + device address, free) and a clock for
//! deadlines. A VFIO process, a unikernel and the simulator each provide one; the rest of the
//! driver never names any of them.

use mlx5_ifc::{Be32, Be64};

use core::fmt;
use core::ptr::NonNull;

/// A block of DMA-coherent memory: where the CPU sees it and where the device sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DmaRegion {
    /// CPU address of the first byte.
    pub cpu: NonNull<u8>,
    /// Device (bus / IO virtual) address of the first byte.
    pub iova: u64,
    /// Length in bytes.
    pub len: usize,
}

/// Why a platform could not do what the driver asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PlatformError {
    /// No DMA memory of that size and alignment is left.
    OutOfDmaMemory {
        /// Bytes asked for.
        len: usize,
        /// Alignment asked for.
        align: usize,
    },
    /// The IOMMU (or its stand-in) refused the mapping.
    MapFailed {
        /// Bytes asked for.
        len: usize,
        /// Platform-specific error code (errno for VFIO).
        code: i32,
    },
    /// No host memory (for the driver's bookkeeping) of that size and alignment is left.
    OutOfHostMemory {
        /// Bytes asked for.
        len: usize,
        /// Alignment asked for.
        align: usize,
    },
    /// The region was not allocated by this platform, or was freed already.
    UnknownRegion {
        /// Its device address.
        iova: u64,
    },
}

impl fmt::Display for PlatformError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::OutOfDmaMemory { len, align } => {
                write!(f, "no DMA memory left for {len} bytes aligned to {align}")
            }
            Self::MapFailed { len, code } => {
                write!(f, "IOMMU mapping of {len} bytes failed (code {code})")
            }
            Self::OutOfHostMemory { len, align } => {
                write!(f, "no host memory left for {len} bytes aligned to {align}")
            }
            Self::UnknownRegion { iova } => write!(f, "DMA region at iova {iova:#x} is not ours"),
        }
    }
}

/// The environment the driver runs in.
///
/// # Safety
///
/// Implementors promise that:
/// * [`Platform::dma_alloc`] returns zeroed memory that is valid for reads and writes of `len`
///   bytes at `cpu`, aligned as asked (and at least to 8 bytes), reachable by the device at
///   `iova`, not used by anything else, and that stays valid until it is given to
///   [`Platform::dma_free`] (or the platform is dropped) — zeroed also when it reuses memory
///   freed earlier (the driver does not clear it again);
/// * [`Platform::host_alloc`] returns zeroed memory valid for reads and writes of `len` bytes,
///   aligned as asked (and at least to 8 bytes), used by nothing else, that **the device cannot
///   reach**: it lies in no region `dma_alloc` hands out and in no page the IOMMU (or the
///   simulator's translation) maps for the device; it stays valid until it is given to
///   [`Platform::host_free`] (or the platform is dropped);
/// * the BAR accessors perform exactly one access of the stated width at BAR0 + `offset` (or
///   its faithful emulation) — [`Platform::bar_write_bf`] one 64-bit store per word of its
///   chunk, at consecutive offsets, in order — and never touch memory the driver was given by
///   `dma_alloc` or `host_alloc`.
///
/// The driver reads and writes DMA memory only through raw pointers with atomic accesses, so
/// concurrent device writes (or a simulator thread) are fine.
#[allow(unsafe_code)] // Declares the contract; implementing it is the unsafe part.
pub unsafe trait Platform {
    /// 32-bit load from BAR0 at `offset` (4-aligned).
    fn bar_read32(&self, offset: u64) -> Be32;
    /// 32-bit store to BAR0 at `offset` (4-aligned).
    fn bar_write32(&self, offset: u64, value: Be32);
    /// One 64-bit store to BAR0 at `offset` (8-aligned): UAR doorbells.
    fn bar_write64(&self, offset: u64, value: Be64);
    /// A BlueFlame copy: the words of `chunk` (a whole WQE, in ring order, at most one half of
    /// the BlueFlame register) stored to BAR0 from `offset` (8-aligned) on, one 64-bit store
    /// each, in order. The driver calls it only when [`Platform::uar_write_combining`] is true,
    /// between two `mmio_wmb` barriers (an `sfence` on x86-64). The default stores word by word
    /// with [`Platform::bar_write64`]; a platform with the BAR mapped overrides it with one
    /// bounds check and a loop of stores (never `memcpy`, whose instructions may store out of
    /// order).
    fn bar_write_bf(&self, offset: u64, chunk: &[Be64]) {
        for (i, &w) in chunk.iter().enumerate() {
            self.bar_write64(offset + 8 * i as u64, w);
        }
    }
    /// Whether the UAR pages are mapped write-combining. Only then does the driver use
    /// BlueFlame (it copies a small WQE through the UAR instead of ringing the 8-byte doorbell):
    /// the copy pays off as one write-combined burst, while through an uncached mapping it is
    /// one bus transaction per 8 bytes. rdma-core's mlx5 provider decides the same
    /// (`bf->buf_size` is 0 for a non-cached UAR). The default, `false`, is always safe.
    fn uar_write_combining(&self) -> bool {
        false
    }
    /// Allocates `len` bytes of zeroed DMA memory aligned to `align` (a power of two ≤ 2 MiB).
    fn dma_alloc(&self, len: usize, align: usize) -> Result<DmaRegion, PlatformError>;
    /// Returns a region from [`Platform::dma_alloc`]. The device must no longer use it.
    fn dma_free(&self, region: DmaRegion) -> Result<(), PlatformError>;
    /// Allocates `len` zeroed bytes of host memory aligned to `align` (a power of two ≤ 4 KiB)
    /// that the device cannot reach: the driver keeps its own bookkeeping there (work-request
    /// tables, ring counters, free lists), never in DMA memory. Called on the control path only
    /// (object creation), never on the data path.
    fn host_alloc(&self, len: usize, align: usize) -> Result<NonNull<u8>, PlatformError>;
    /// Returns memory from [`Platform::host_alloc`].
    ///
    /// # Safety
    ///
    /// `ptr`, `len` and `align` are exactly those of one earlier `host_alloc` of this platform
    /// that was not freed yet, and nothing uses the memory any more.
    unsafe fn host_free(&self, ptr: NonNull<u8>, len: usize, align: usize);
    /// Monotonic time in nanoseconds; deadlines are computed from it.
    fn now_ns(&self) -> u64;
    /// The function's PCI device id, if the platform knows it. A virtual function's
    /// ([`mlx5_ifc::consts::pci_id::is_vf`]) is brought up as Linux brings one up: no
    /// HOST_ENDIANNESS, no port register writes, a random MAC programmed into the vport when
    /// the hypervisor assigned none. The default, `None`, is a physical function.
    fn pci_device_id(&self) -> Option<u16> {
        None
    }
    /// Called once per iteration of every polling loop (a pause, a yield, or — in a simulator —
    /// letting device time pass).
    fn relax(&self) {
        core::hint::spin_loop();
    }
}
