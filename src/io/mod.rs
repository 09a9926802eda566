//! The driver's single unsafe boundary: DMA memory, MMIO and memory barriers.
//!
//! Nothing outside this module dereferences a raw pointer. Device-visible memory is never
//! borrowed as a Rust reference: [`DmaBuf`] reads and writes it through atomic accesses on raw
//! pointers (so a device — or a simulator thread — writing it concurrently is sound), and
//! [`MmioRegion`] reaches a mapped BAR through volatile pointers. The ordering rules the driver
//! relies on are named functions in [`barrier`].
// The crate denies unsafe code (lib.rs); this module is its one room for it.
#![allow(unsafe_code)]

pub mod barrier;
mod bytes;
mod dma;
#[cfg(feature = "std")]
pub mod host;
mod mmio;
pub mod platform;
mod shared;
#[cfg(feature = "sim")]
pub mod sim;
#[cfg(all(test, feature = "std"))]
mod tests;

pub use bytes::HostBytes;
pub use dma::{DmaBuf, DmaRing, DmaSegment, OutOfBounds, RingGeometry};
pub use mmio::MmioRegion;
pub use shared::{PairGeometry, PairRing, SharedTable};

/// Sends one firmware command as given (`input` is the whole command input, its header
/// included; `output` receives the whole output) on `dev`'s command queue, bypassing every
/// object the driver tracks. For diagnostics and for tests of the firmware's own answers.
///
/// # Safety
///
/// A command can point the device at any memory its IOMMU domain reaches — the command queue,
/// a ring, a work-request buffer, a page the platform will reuse — and can destroy or change
/// objects the driver still uses (a QP, a CQ, a key). The caller promises that the command
/// names no memory and no object the driver owns or will free, or that the driver is not used
/// (and the device is reset) after it.
pub unsafe fn raw_command<P: crate::Platform>(
    dev: &crate::Device<P>,
    input: &[u8],
    output: &mut [u8],
) -> crate::Result<()> {
    dev.exec_raw(input, output)
}

/// `words` (8-byte groups, each a big-endian word's bytes as the device reads them) as
/// [`Be64`](mlx5_ifc::Be64) words, without a copy.
#[inline(always)]
pub fn be64_words(words: &[[u8; 8]]) -> &[mlx5_ifc::Be64] {
    // SAFETY: `Be64` is `#[repr(transparent)]` over `[u8; 8]`, so a slice of one is a valid
    // slice of the other with the same length, alignment (1) and lifetime; both are plain
    // bytes with no invalid values.
    unsafe { core::slice::from_raw_parts(words.as_ptr().cast(), words.len()) }
}

/// A prefetch hint for the cache line at `p`. A prefetch never faults (whatever the address),
/// reads nothing into Rust-visible memory and changes no memory; a no-op off x86_64. Callers
/// pass addresses in or near memory they own.
#[inline(always)]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 is an SSE instruction every x86_64 CPU has; it only hints the cache,
    // never faults (even on an invalid address) and neither reads into nor writes Rust-visible
    // memory, so it creates no reference and no data race.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
