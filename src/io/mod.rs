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
mod prefetch;
mod shared;
#[cfg(feature = "sim")]
pub mod sim;
#[cfg(all(test, feature = "std"))]
mod tests;

pub use bytes::{be64_words, HostBytes};
pub use dma::{DmaBuf, DmaRing, DmaSegment, OutOfBounds, RingGeometry};
pub use mmio::MmioRegion;
pub use shared::{PairGeometry, PairRing, SharedTable};
