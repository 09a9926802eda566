//! Plumbing for diagnostics, benches, fuzz targets and the driver's own tests — **not** part
//! of the driver's API.
//!
//! Contract: nothing here is stable. Names, signatures, layouts and behaviour may change in
//! any release without notice, and items may disappear; code using this module pins the
//! driver's exact version. What is here bypasses the driver's bookkeeping or exposes its
//! internal geometry, so it can break the invariants the verbs API keeps (see each item's
//! own contract). Programs that send and receive use the crate root, [`crate::qp`],
//! [`crate::cq`], [`crate::eth`] and [`crate::cm`] instead.

use crate::device::Device;
use crate::error::Result;
use crate::platform::Platform;

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
#[allow(unsafe_code)] // A contract marker only: the body performs no unsafe operation.
pub unsafe fn raw_command<P: Platform>(
    dev: &Device<P>,
    input: &[u8],
    output: &mut [u8],
) -> Result<()> {
    dev.exec_raw(input, output)
}
