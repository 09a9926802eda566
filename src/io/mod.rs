//! The driver's single unsafe boundary: DMA memory, MMIO and memory barriers.
//!
//! Nothing outside this module dereferences a raw pointer. Device-visible memory is never
//! borrowed as a Rust reference: `DmaBuf` reads and writes it through atomic accesses on raw
//! pointers (so a device — or a simulator thread — writing it concurrently is sound), and
//! [`MmioRegion`] reaches a mapped BAR through volatile pointers. The ordering rules the driver
//! relies on are named functions in `io/barrier.rs`.
// The crate denies unsafe code (lib.rs); this module is its one room for it.
#![allow(unsafe_code)]

pub(crate) mod barrier;
mod bytes;
pub(crate) mod dma;
#[cfg(feature = "std")]
pub mod host;
mod mmio;
pub(crate) mod platform;
mod prefetch;
pub(crate) mod raw;
pub(crate) mod shared;
#[cfg(feature = "sim")]
pub(crate) mod sim;
mod slots;
#[cfg(all(test, feature = "std"))]
pub(crate) mod tests;

pub(crate) use bytes::{be64_words, HostBytes};
pub use dma::OutOfBounds;
pub(crate) use dma::{DmaBuf, DmaRing, RingGeometry};
pub use mmio::MmioRegion;
pub(crate) use shared::{PairGeometry, PairRing, SharedTable};
pub(crate) use slots::{HostVec, Slots};
