//! A raw firmware command: the one way to send the device a command the driver did not build.
//! It is here, in the unsafe room, because its contract is a safety contract ([`raw_command`]);
//! the device (`crate::Device`, a [`RawTarget`]) carries it out. `mlx5::raw` re-exports it.

use crate::error::Result;

/// Proof that a raw command went through [`raw_command`] and its contract: only this module
/// makes one, so nobody can call [`RawTarget::run_raw`] around the contract.
#[derive(Debug)]
pub struct Accepted(());

/// What a raw command is sent to: the driver's `Device`.
pub trait RawTarget {
    /// Runs `input` (the whole command input, its header included) and writes the whole output
    /// into `output`, bypassing every object the driver tracks.
    fn run_raw(&self, accepted: Accepted, input: &[u8], output: &mut [u8]) -> Result<()>;
}

/// Sends one firmware command as given (`input` is the whole command input, its header
/// included; `output` receives the whole output) on `dev`'s command queue, bypassing every
/// object the driver tracks. For diagnostics and for tests of the firmware's own answers.
///
/// # Safety
///
/// A command can point the device at any memory its IOMMU domain reaches — the command queue,
/// a ring, a work-request buffer, a page the platform will reuse — and can destroy or change
/// objects the driver still uses (a QP, a CQ, a key). The caller promises that the command
/// names no memory and no object the driver owns or will free, or that the driver is not used
/// (and the device is reset) after it.
pub unsafe fn raw_command<T: RawTarget + ?Sized>(
    dev: &T,
    input: &[u8],
    output: &mut [u8],
) -> Result<()> {
    dev.run_raw(Accepted(()), input, output)
}
