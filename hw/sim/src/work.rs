//! The device thread's work items ([`Work`]), sent by the device handles and by the fabric a
//! device's port is on: their own module so that neither needs the device core to name them.

/// Work for the device thread ([`crate::Mode::Threaded`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Work {
    /// A command doorbell with these slot bits.
    Cmd(u32),
    /// A send doorbell (a QP's or an Ethernet SQ's): executed in the order the doorbells
    /// came, with the commands.
    Sq(Rung),
    /// Frames arrived for the device's port.
    Wire,
    /// The last handle is gone.
    Stop,
}

/// A send queue a doorbell rang: the device executes it next (`engine::ring`), after what was
/// rung before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rung {
    /// A QP's send queue.
    Qp(u32),
    /// An Ethernet SQ, through the WQE with this counter.
    EthSq { sqn: u32, wqe: u16 },
}
