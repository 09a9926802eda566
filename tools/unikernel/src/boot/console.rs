//! The serial console (COM1, 115200 8N1) behind `log`, and the verdict lines the test harness
//! reads: `CHECK ok NAME: how` / `CHECK FAIL NAME: why`, then `unikernel: N passed, N failed`.

use core::fmt::{self, Write};
use core::sync::atomic::{AtomicU64, Ordering};

use crate::metal::x86::{inb, outb, rdtsc};

const COM1: u16 = 0x3f8;

/// TSC ticks per microsecond once the clock is calibrated (0 before: timestamps show ticks).
static TICKS_PER_US: AtomicU64 = AtomicU64::new(0);

/// Programs COM1: 115200 baud, 8 data bits, no parity, one stop bit, FIFOs on, no interrupts.
pub fn init() {
    outb(COM1 + 1, 0x00);
    outb(COM1 + 3, 0x80); // DLAB: the next two registers are the divisor
    outb(COM1, 0x01); // 115200 / 1
    outb(COM1 + 1, 0x00);
    outb(COM1 + 3, 0x03); // 8N1, DLAB off
    outb(COM1 + 2, 0xc7); // FIFOs on and cleared
    outb(COM1 + 4, 0x03); // DTR, RTS
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(log::LevelFilter::Info);
}

/// Timestamps in microseconds from now on.
pub fn set_clock(ticks_per_us: u64) {
    TICKS_PER_US.store(ticks_per_us, Ordering::Relaxed);
}

fn put(b: u8) {
    // Transmit holding register empty (LSR bit 5); bounded so a missing UART cannot hang us.
    for _ in 0..100_000 {
        if inb(COM1 + 5) & 0x20 != 0 {
            break;
        }
    }
    outb(COM1, b);
}

/// Text straight to the UART (no lock: usable from an exception handler).
#[derive(Debug, Clone, Copy)]
pub struct Serial;

impl Write for Serial {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for b in s.bytes() {
            if b == b'\n' {
                put(b'\r');
            }
            put(b);
        }
        Ok(())
    }
}

/// Microseconds since reset (under QEMU the TSC starts at 0 at machine reset).
pub fn uptime_us() -> u64 {
    let t = TICKS_PER_US.load(Ordering::Relaxed);
    rdtsc() / t.max(1)
}

struct Logger;
static LOGGER: Logger = Logger;

impl log::Log for Logger {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::max_level()
    }
    fn log(&self, r: &log::Record<'_>) {
        if !self.enabled(r.metadata()) {
            return;
        }
        let us = uptime_us();
        let _ = writeln!(
            Serial,
            "[{:>5}.{:06}] {:<5} {}: {}",
            us / 1_000_000,
            us % 1_000_000,
            r.level(),
            r.target(),
            r.args()
        );
    }
    fn flush(&self) {}
}

/// Prints a line on the console (not through `log`: the harness's protocol lines).
#[macro_export]
macro_rules! say {
    ($($t:tt)*) => {{
        use core::fmt::Write as _;
        let _ = writeln!($crate::boot::console::Serial, $($t)*);
    }};
}
