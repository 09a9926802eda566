//! Interrupts: the 8259 PICs masked, the local APIC on with a periodic timer (a bound on every
//! halt), each NIC's MSI-X vector 0 routed to a vector of its own, and counters per vector.
//!
//! The handler only counts and acknowledges (EOI). The driver's event path — completion
//! events, async events, page requests — runs in the main flow when a NIC's counter moved
//! (`wait_nic`), never inside the handler: the driver's locks are not interrupt-safe, and a
//! handler that took one the interrupted code held would deadlock.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::metal::x86::{self, mmio_read32, mmio_write32, outb};
use crate::pci::{self, Bdf, ConfigAccess, MsixInfo};

/// The local APIC timer's vector.
pub const TIMER: u8 = 0x40;
/// NIC `i`'s MSI-X vector 0 arrives here, + i.
pub const NIC_BASE: u8 = 0x50;
/// The local APIC's spurious vector.
pub const SPURIOUS: u8 = 0xff;

static COUNTS: [AtomicU64; 256] = [const { AtomicU64::new(0) }; 256];
static LAPIC: AtomicU64 = AtomicU64::new(0);
static EXCEPTIONS: AtomicU32 = AtomicU32::new(0);

const LAPIC_ID: u64 = 0x20;
const LAPIC_EOI: u64 = 0xb0;
const LAPIC_SVR: u64 = 0xf0;
const LAPIC_LVT_TIMER: u64 = 0x320;
const LAPIC_TIMER_INIT: u64 = 0x380;
const LAPIC_TIMER_CUR: u64 = 0x390;
const LAPIC_TIMER_DIV: u64 = 0x3e0;

/// Called by the interrupt entry for every vector.
pub fn on_interrupt(vector: u8, error: u64, rip: u64) {
    COUNTS[usize::from(vector)].fetch_add(1, Ordering::Relaxed);
    if vector < 32 {
        // An exception: the image has a bug. Say where and leave QEMU with the failure code.
        if EXCEPTIONS.fetch_add(1, Ordering::Relaxed) == 0 {
            crate::say!("EXCEPTION vector {vector} error {error:#x} at rip {rip:#x}");
        }
        super::verdict::exit_exception();
    }
    if vector != SPURIOUS {
        eoi();
    }
}

fn lapic(reg: u64) -> u64 {
    LAPIC.load(Ordering::Relaxed) + reg
}

fn eoi() {
    if LAPIC.load(Ordering::Relaxed) != 0 {
        mmio_write32(lapic(LAPIC_EOI), 0);
    }
}

/// Interrupts taken on `vector` so far.
pub fn count(vector: u8) -> u64 {
    COUNTS[usize::from(vector)].load(Ordering::Relaxed)
}

/// Masks both 8259 PICs (the local APIC takes over; a masked PIC raises nothing).
pub fn mask_pic() {
    outb(0x21, 0xff);
    outb(0xa1, 0xff);
}

/// The local APIC on (spurious vector 0xff), and its timer periodic at about `period_us`,
/// measured against the TSC (`tsc_per_us`). Returns the APIC's ID and the timer's rate in
/// ticks per µs (divide by 16).
pub fn init_lapic(tsc_per_us: u64, period_us: u32) -> (u8, u64) {
    LAPIC.store(x86::lapic_base(), Ordering::Relaxed);
    mmio_write32(lapic(LAPIC_SVR), 0x100 | u32::from(SPURIOUS));
    // Measure the timer: one-shot from the top, masked, over 1 ms of TSC.
    mmio_write32(lapic(LAPIC_TIMER_DIV), 0x3);
    mmio_write32(lapic(LAPIC_LVT_TIMER), 1 << 16 | u32::from(TIMER));
    mmio_write32(lapic(LAPIC_TIMER_INIT), u32::MAX);
    let t0 = x86::rdtsc();
    while x86::rdtsc().wrapping_sub(t0) < tsc_per_us * 1000 {}
    let elapsed = u32::MAX - mmio_read32(lapic(LAPIC_TIMER_CUR));
    let per_us = (u64::from(elapsed) / 1000).max(1);
    let init = (per_us * u64::from(period_us)).clamp(1, u64::from(u32::MAX)) as u32;
    mmio_write32(lapic(LAPIC_TIMER_INIT), 0);
    mmio_write32(lapic(LAPIC_LVT_TIMER), 1 << 17 | u32::from(TIMER)); // periodic, unmasked
    mmio_write32(lapic(LAPIC_TIMER_INIT), init);
    let id = (mmio_read32(lapic(LAPIC_ID)) >> 24) as u8;
    (id, per_us)
}

/// Routes the function's MSI-X entry 0 to `vector` on the APIC `apic_id` (fixed, edge),
/// masks every other entry, and turns MSI-X on. `table` is the table's physical address
/// (BAR0 + the table offset).
pub fn route_msix(
    cfg: &dyn ConfigAccess,
    bdf: Bdf,
    info: &MsixInfo,
    table: u64,
    apic_id: u8,
    vector: u8,
) {
    let (addr, data) = pci::msix_message(apic_id, vector);
    for i in 0..u64::from(info.table_size) {
        let e = table + 16 * i;
        if i == 0 {
            mmio_write32(e, addr as u32);
            mmio_write32(e + 4, (addr >> 32) as u32);
            mmio_write32(e + 8, data);
            mmio_write32(e + 12, 0);
        } else {
            mmio_write32(e + 12, 1);
        }
    }
    pci::enable_msix(cfg, bdf, info);
}

/// Halts until an interrupt (any: the timer bounds the wait).
pub fn halt() {
    x86::wait_for_interrupt();
}
