//! Memory ordering between the CPU, DMA memory and MMIO, in one place.
//!
//! The canonical sequences:
//! * **Hand a command to the firmware**: write entry and mailboxes → [`dma_wmb`] → 32-bit
//!   doorbell store.
//! * **Take a completed command back**: load the ownership byte with acquire ([`DmaBuf`] does) →
//!   read the output.
//! * **Post a work request** (later): write the WQE → [`dma_wmb`] → doorbell record (BE32) →
//!   [`mmio_wmb`] → 64-bit UAR doorbell.
//!
//! On x86-64, stores are not reordered with other stores and uncached MMIO stores are ordered
//! after earlier stores, so these fences chiefly stop the compiler; on weaker architectures they
//! emit the hardware barrier the sequence needs.
//!
//! [`DmaBuf`]: super::DmaBuf

use core::sync::atomic::{fence, Ordering};

/// Orders earlier stores to DMA memory before later stores to DMA memory or to a doorbell.
#[inline(always)]
pub fn dma_wmb() {
    fence(Ordering::Release);
}

/// Orders earlier loads from DMA memory (a valid owner bit) before later loads of the data.
#[inline(always)]
pub fn dma_rmb() {
    fence(Ordering::Acquire);
}

/// Orders all earlier memory accesses before a following MMIO store (full barrier).
#[inline(always)]
pub fn mmio_wmb() {
    fence(Ordering::SeqCst);
}
