//! The TSC as the driver's clock: its rate from CPUID leaf 0x15 where the CPU gives it, else
//! measured against the PIT (channel 2, 1.193182 MHz, gated by port 0x61) over 20 ms.

use crate::metal::x86::{cpuid, inb, outb, rdtsc};

/// The PIT's input clock, Hz.
const PIT_HZ: u64 = 1_193_182;
/// The calibration window.
const WINDOW_MS: u64 = 20;

/// How the rate was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Source {
    /// CPUID leaf 0x15 (crystal clock × ratio).
    Cpuid15,
    /// Measured against the PIT.
    Pit,
}

/// Whether the CPU says its TSC runs at a constant rate in every power state
/// (CPUID 0x80000007 EDX bit 8). TCG does not say so, though its TSC is steady.
pub(super) fn tsc_invariant() -> bool {
    cpuid(0x8000_0000).0 >= 0x8000_0007 && cpuid(0x8000_0007).3 & (1 << 8) != 0
}

/// TSC ticks per second, and how that was found; `None` if neither way worked.
pub(super) fn tsc_hz() -> Option<(u64, Source)> {
    let (max_leaf, ..) = cpuid(0);
    if max_leaf >= 0x15 {
        let (den, num, crystal, _) = cpuid(0x15);
        if den != 0 && num != 0 && crystal != 0 {
            return Some((
                u64::from(crystal) * u64::from(num) / u64::from(den),
                Source::Cpuid15,
            ));
        }
    }
    pit_calibrate().map(|hz| (hz, Source::Pit))
}

/// Counts TSC ticks while PIT channel 2 counts down [`WINDOW_MS`] in mode 0 (OUT2 rises at
/// the end, read at port 0x61 bit 5). Bounded: gives up after 2^34 ticks (seconds).
fn pit_calibrate() -> Option<u64> {
    let count = PIT_HZ * WINDOW_MS / 1000;
    let gate = inb(0x61);
    outb(0x61, (gate & !0x02) | 0x01); // gate 2 on, speaker off
    outb(0x43, 0xb0); // channel 2, low then high byte, mode 0, binary
    outb(0x42, count as u8);
    outb(0x42, (count >> 8) as u8);
    let t0 = rdtsc();
    let mut t1 = t0;
    while inb(0x61) & 0x20 == 0 {
        t1 = rdtsc();
        if t1.wrapping_sub(t0) > 1 << 34 {
            outb(0x61, gate);
            return None;
        }
    }
    outb(0x61, gate);
    let ticks = t1.wrapping_sub(t0);
    (ticks > 0).then(|| ticks * 1000 / WINDOW_MS)
}
