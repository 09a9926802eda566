//! Memory ordering between the CPU, DMA memory and MMIO, in one place.
//!
//! The canonical sequences:
//! * **Hand a command to the firmware**: write entry and mailboxes → [`dma_wmb`] → 32-bit
//!   doorbell store.
//! * **Take a completed command back**: load the ownership byte with acquire (`DmaBuf` does) →
//!   [`dma_rmb`] → read the output.
//! * **Post a work request**: write the WQE → [`dma_wmb`] → doorbell record (BE32) →
//!   [`mmio_wmb`] → 64-bit UAR doorbell (or the BlueFlame copy) → [`mmio_wmb`].
//! * **Poll a CQ or an EQ**: load the owner byte with acquire → [`dma_rmb`] → read the entry →
//!   … → [`dma_wmb`] → consumer index to the doorbell record.
//!
//! Each barrier is at least as strong as the one rdma-core's `util/udma_barrier.h` uses at the
//! same point of the same sequence (facts in docs/architecture.md, "Barriers"):
//!
//! | ours | rdma-core | x86-64 | aarch64 |
//! |---|---|---|---|
//! | [`dma_wmb`] | `udma_to_device_barrier` | compiler barrier (stores are not reordered with stores) | `dmb oshst` |
//! | [`dma_rmb`] | `udma_from_device_barrier` | compiler barrier (loads are not reordered with loads) | `dmb oshld` |
//! | [`mmio_wmb`] | `mmio_flush_writes` / `mmio_wc_start` | `mfence` (≥ `sfence`: drains write-combining buffers) | `dsb st` |
//! | [`uar_wc_start`] | `mmio_wc_start` | `sfence` | `dsb st` |
//! | [`uar_wc_flush`] | `mmio_flush_writes` | `sfence` | `dsb st` |
//!
//! The send doorbell (`post_send`) uses the last two, exactly where rdma-core's `post_send_db`
//! uses theirs: between the doorbell record and the UAR stores, and after the UAR stores.
//! Both are stores-only barriers: nothing in that sequence orders a load.
//!
//! Every barrier also includes the Rust fence of the same strength, so that the ordering holds
//! in the Rust memory model too — against a simulated device on another thread, and under Miri.
//! On aarch64 a Rust fence alone is `dmb ish`/`dmb ishld` (inner shareable), which does not order
//! accesses observed by a device: hence the outer-shareable instructions. Other architectures
//! are refused at compile time rather than given barriers nobody checked.
//!

use core::sync::atomic::{fence, Ordering};

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("mlx5: DMA and MMIO barriers are defined for x86_64 and aarch64 only");

/// Orders earlier stores to DMA memory before later stores to DMA memory or to a doorbell.
#[inline(always)]
pub fn dma_wmb() {
    fence(Ordering::Release);
    #[cfg(target_arch = "aarch64")]
    // SAFETY: DMB OSHST only orders this CPU's stores against later stores for every observer
    // in the outer shareable domain (the device included); it touches no memory or register.
    unsafe {
        core::arch::asm!("dmb oshst", options(nostack, preserves_flags));
    }
}

/// Orders earlier loads from DMA memory (a valid owner bit) before later loads of the data.
#[inline(always)]
pub fn dma_rmb() {
    fence(Ordering::Acquire);
    #[cfg(target_arch = "aarch64")]
    // SAFETY: DMB OSHLD only orders this CPU's earlier loads before its later accesses, for the
    // outer shareable domain; it touches no memory or register.
    unsafe {
        core::arch::asm!("dmb oshld", options(nostack, preserves_flags));
    }
}

/// Before the UAR stores of a send doorbell or BlueFlame copy: orders every earlier store (the
/// WQE, the doorbell record) before them, write-combining stores included (rdma-core's
/// `mmio_wc_start`). On x86-64 stores are not reordered with stores except write-combining
/// ones, which `sfence` orders; `mfence` would also wait for earlier loads, which this sequence
/// does not need. On aarch64, `dsb st` as [`mmio_wmb`].
#[inline(always)]
pub fn uar_wc_start() {
    wmb_stores();
}

/// After the UAR stores of a send doorbell or BlueFlame copy: pushes a write-combining buffer
/// out to the device now, before any later doorbell (rdma-core's `mmio_flush_writes`): `sfence`
/// on x86-64, `dsb st` on aarch64.
#[inline(always)]
pub fn uar_wc_flush() {
    wmb_stores();
}

/// Earlier stores before later stores, for every observer: the Rust release fence, and
/// `sfence` (x86-64) or `dsb st` (aarch64).
#[inline(always)]
fn wmb_stores() {
    fence(Ordering::Release);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SFENCE only orders this CPU's earlier stores (write-combining ones included)
    // before its later stores; it touches no memory or register.
    unsafe {
        core::arch::asm!("sfence", options(nostack, preserves_flags));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: DSB ST waits until this CPU's earlier stores have completed; it touches no memory
    // or register.
    unsafe {
        core::arch::asm!("dsb st", options(nostack, preserves_flags));
    }
}

/// Orders all earlier memory accesses before a following MMIO store (full barrier), and on
/// aarch64 waits for earlier stores to complete (`dsb st`), as a doorbell or a BlueFlame copy
/// needs.
#[inline(always)]
pub fn mmio_wmb() {
    fence(Ordering::SeqCst);
    #[cfg(target_arch = "aarch64")]
    // SAFETY: DSB ST waits until this CPU's earlier stores have completed; it touches no memory
    // or register.
    unsafe {
        core::arch::asm!("dsb st", options(nostack, preserves_flags));
    }
}
