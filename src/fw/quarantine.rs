//! Who may free DMA memory, and when.
//!
//! Every DMA buffer the driver describes to the device (a ring, a doorbell record, a mailbox, a
//! page given with MANAGE_PAGES, a registered region) is owned by the driver object that
//! described it, and that owner gives it back in one of two ways:
//!
//! * **freed** to the platform, once the device is known to be done with it: the object's
//!   DESTROY command succeeded, or the CREATE command is known not to have taken effect (the
//!   firmware refused it with a status, the command was never delivered or never sent);
//! * **quarantined** when that is not known — a CREATE or DESTROY that timed out, a device whose
//!   health failed, an output that made no sense, a DESTROY the firmware refused (the object
//!   still exists and still points at the memory). Quarantined memory is kept mapped and never
//!   handed out again, and it is counted ([`Device::quarantined`](crate::Device::quarantined)).
//!
//! No safe function frees memory a live object points the device at: the owners hold their
//! buffers privately, [`MemoryRegion`](crate::MemoryRegion) takes the caller's buffer for as
//! long as its key exists, and raw command access (which could name any memory) is behind the
//! `raw-cmd` feature.

use core::sync::atomic::{AtomicU64, Ordering};

use crate::error::Error;
use crate::io::platform::Platform;
use crate::io::DmaBuf;

/// DMA memory kept from the platform because the device may still use it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quarantined {
    /// Bytes kept.
    pub bytes: u64,
    /// Buffers kept.
    pub buffers: u64,
}

/// The device's account of quarantined memory.
#[derive(Debug, Default)]
pub(crate) struct Quarantine {
    bytes: AtomicU64,
    buffers: AtomicU64,
}

impl Quarantine {
    /// Keeps `buf` from the platform for good (mapped, never reused) and counts it.
    pub(crate) fn keep(&self, buf: DmaBuf, why: &'static str) {
        // Taken by value and never given back to the platform (a `DmaBuf` has no destructor):
        // the memory stays mapped and is never handed out again.
        self.count(buf.len() as u64, 1, why);
    }

    /// Counts memory left to the device elsewhere (firmware pages, the command queue).
    pub(crate) fn count(&self, bytes: u64, buffers: u64, why: &'static str) {
        log::warn!("quarantined {bytes} bytes of DMA memory ({buffers} buffers): {why}");
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.buffers.fetch_add(buffers, Ordering::Relaxed);
    }

    /// What is quarantined now.
    pub(crate) fn get(&self) -> Quarantined {
        Quarantined {
            bytes: self.bytes.load(Ordering::Relaxed),
            buffers: self.buffers.load(Ordering::Relaxed),
        }
    }

    /// Frees `buf` if the device is known to be done with it (`done`), else keeps it.
    pub(crate) fn retire<P: Platform + ?Sized>(
        &self,
        p: &P,
        buf: DmaBuf,
        done: bool,
        why: &'static str,
    ) {
        if done {
            if let Err(e) = buf.free(p) {
                log::warn!("freeing DMA memory ({why}): {e}");
            }
        } else {
            self.keep(buf, why);
        }
    }
}

impl Error {
    /// Whether, after a command failed with this error, the device may have acted on it and may
    /// still use the memory the command described: a wait that ran out, a fatal health state,
    /// an output that made no sense. A firmware refusal (status), an undelivered command, a
    /// command never sent (device unusable, argument or allocation refused) leave the device
    /// without any knowledge of that memory.
    pub(crate) fn device_may_hold_memory(&self) -> bool {
        !matches!(
            self,
            Error::Cmd { .. }
                | Error::Delivery { .. }
                | Error::Unusable { .. }
                | Error::Unsupported { .. }
                | Error::Platform { .. }
                | Error::Capacity { .. }
                | Error::InvalidArgument { .. }
                | Error::Sizing(_)
                | Error::QpTransition { .. }
                | Error::QpAttr { .. }
                | Error::QpState { .. }
                | Error::QueueFull { .. }
        )
    }
}
