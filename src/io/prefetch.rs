//! A cache prefetch hint, for the rings' and tables' look-ahead.

/// A prefetch hint for the cache line at `p`. A prefetch never faults (whatever the address),
/// reads nothing into Rust-visible memory and changes no memory; a no-op off x86_64. Callers
/// pass addresses in or near memory they own.
#[inline(always)]
pub(super) fn prefetch(p: *const u8) {
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
