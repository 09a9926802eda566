//! The device thread's work items ([`Work`]), sent by the device handles and by the fabric a
//! device's port is on: their own module so that neither needs the device core to name them.

/// Work for the device thread ([`crate::Mode::Threaded`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Work {
    /// A command doorbell with these slot bits.
    Cmd(u32),
    /// A send doorbell for this QP.
    Sq(u32),
    /// Frames arrived for the device's port.
    Wire,
    /// The last handle is gone.
    Stop,
}
