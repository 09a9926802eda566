//! The run's verdict: each check printed as it is decided, the tally at the end, and QEMU's
//! exit status through isa-debug-exit — `(code << 1) | 1`, never 0 (a triple fault exits 0).

use core::fmt;
use core::sync::atomic::{AtomicU32, Ordering};

use crate::metal::x86;

/// Every check passed: QEMU exits 33.
pub const PASS: u32 = 0x10;
/// A check failed: QEMU exits 35.
pub const FAIL: u32 = 0x11;
/// A panic: QEMU exits 37.
pub const PANIC: u32 = 0x12;
/// A CPU exception: QEMU exits 39.
pub const EXCEPTION: u32 = 0x13;

static PASSED: AtomicU32 = AtomicU32::new(0);
static FAILED: AtomicU32 = AtomicU32::new(0);

/// Records a check that passed.
pub fn ok(name: &str, how: fmt::Arguments<'_>) {
    PASSED.fetch_add(1, Ordering::Relaxed);
    let t = super::console::uptime_us();
    crate::say!(
        "[{:>5}.{:06}] CHECK ok {name}: {how}",
        t / 1_000_000,
        t % 1_000_000
    );
}

/// Records a check that failed.
pub fn fail(name: &str, why: fmt::Arguments<'_>) {
    FAILED.fetch_add(1, Ordering::Relaxed);
    let t = super::console::uptime_us();
    crate::say!(
        "[{:>5}.{:06}] CHECK FAIL {name}: {why}",
        t / 1_000_000,
        t % 1_000_000
    );
}

/// Records `good` as a check: `how` when it passed, `why` when not.
pub fn check(name: &str, good: bool, how: fmt::Arguments<'_>) -> bool {
    if good {
        ok(name, how);
    } else {
        fail(name, how);
    }
    good
}

/// Prints the tally and leaves QEMU: [`PASS`] if at least one check ran and none failed.
pub fn finish() -> ! {
    let (p, f) = (
        PASSED.load(Ordering::Relaxed),
        FAILED.load(Ordering::Relaxed),
    );
    crate::say!("unikernel: {p} passed, {f} failed");
    x86::exit(if f == 0 && p > 0 { PASS } else { FAIL })
}

/// Leaves QEMU after a CPU exception.
pub fn exit_exception() -> ! {
    x86::exit(EXCEPTION)
}

/// Leaves QEMU after a panic (the message was printed).
pub fn exit_panic() -> ! {
    x86::exit(PANIC)
}
