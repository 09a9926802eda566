//! The driver's single unsafe boundary: DMA memory, MMIO and memory barriers.
//!
//! Nothing outside this module dereferences a raw pointer. Device-visible memory is never
//! borrowed as a Rust reference: [`DmaBuf`] reads and writes it through atomic accesses on raw
//! pointers (so a device — or a simulator thread — writing it concurrently is sound), and
//! [`MmioRegion`] reaches a mapped BAR through volatile pointers. The ordering rules the driver
//! relies on are named functions in [`barrier`].

pub mod barrier;
mod dma;
mod mmio;
mod shared;
#[cfg(feature = "sim")]
pub mod sim;

pub use dma::{DmaBuf, OutOfBounds};
pub use mmio::MmioRegion;
pub use shared::SharedDma;
