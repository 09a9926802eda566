//! How the device runs: [`Mode`].

/// How the simulated device runs its firmware.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Commands execute inside the doorbell write; device time is virtual and advances only
    /// through [`crate::SimDevice::relax`]. Deterministic.
    Sync,
    /// A device thread executes commands; device time is real monotonic time.
    Threaded,
}
