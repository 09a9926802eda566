//! The driver's errors: each says what failed, on which operation, and why.

use core::fmt;

use mlx5_ifc::{opcode_name, CmdStatus, DeliveryStatus, HealthSyndrome, LayoutError};

use crate::io::platform::PlatformError;
use crate::io::OutOfBounds;

/// What a bounded wait was waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Wait {
    /// The `initializing` bit before the command queue is set up.
    FwPreInit,
    /// The `initializing` bit after the command queue address is written.
    FwInit,
    /// A command's completion (ownership handed back).
    Command {
        /// Its opcode.
        opcode: u16,
    },
    /// A free command queue entry (every one in use by other threads' commands).
    CommandSlot {
        /// The opcode of the command waiting for one.
        opcode: u16,
    },
    /// The firmware returning its pages after TEARDOWN_HCA.
    PageReclaim {
        /// Pages it still held.
        outstanding: usize,
    },
    /// A CQ another thread holds (its `CqPoller`, or a poll in progress).
    CqLock {
        /// The CQ.
        cqn: u32,
    },
}

impl fmt::Display for Wait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Wait::FwPreInit => f.write_str("firmware pre-initialization (initializing bit)"),
            Wait::FwInit => f.write_str("firmware initialization (initializing bit)"),
            Wait::Command { opcode } => {
                write!(f, "completion of {} ({opcode:#06x})", opcode_name(opcode))
            }
            Wait::CommandSlot { opcode } => write!(
                f,
                "a free command queue entry for {} ({opcode:#06x})",
                opcode_name(opcode)
            ),
            Wait::CqLock { cqn } => write!(
                f,
                "CQ {cqn:#x}, held by another thread (a CqPoller, or a poll in progress)"
            ),
            Wait::PageReclaim { outstanding } => {
                write!(
                    f,
                    "the firmware to return its pages ({outstanding} outstanding)"
                )
            }
        }
    }
}

/// A driver error.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The firmware executed the command and refused it.
    Cmd {
        /// Opcode.
        opcode: u16,
        /// Its op_mod.
        op_mod: u16,
        /// The status the firmware returned.
        status: CmdStatus,
        /// The firmware's syndrome.
        syndrome: u32,
    },
    /// The command interface could not deliver the command (entry-level status).
    Delivery {
        /// Opcode.
        opcode: u16,
        /// The delivery status in the entry.
        status: DeliveryStatus,
    },
    /// A bounded wait ran out.
    Timeout {
        /// What it waited for.
        waiting_for: Wait,
        /// How long it waited, in milliseconds.
        waited_ms: u64,
    },
    /// An earlier failure left the device unusable; no command is issued any more.
    Unusable {
        /// The command that was refused now.
        opcode: u16,
        /// Why the device is unusable.
        cause: DeadCause,
    },
    /// The firmware reports a fatal health condition.
    Health {
        /// The health syndrome.
        synd: HealthSyndrome,
        /// The extended syndrome.
        ext_synd: u16,
    },
    /// The device returned a value that makes no sense; it was not used.
    BadDeviceValue {
        /// Which value.
        what: &'static str,
        /// What the device returned.
        value: u64,
        /// The largest (or expected) acceptable value.
        limit: u64,
    },
    /// The device does not offer something the driver needs.
    Unsupported {
        /// What is missing.
        what: &'static str,
        /// What the device reported.
        found: u64,
    },
    /// The platform could not provide DMA memory or a mapping.
    Platform {
        /// What the driver was doing.
        op: &'static str,
        /// The platform's error.
        source: PlatformError,
    },
    /// A fixed-capacity table of the driver is full.
    Capacity {
        /// Which table.
        what: &'static str,
        /// Its capacity.
        limit: usize,
    },
    /// A caller's argument was refused before anything was sent to the device.
    InvalidArgument {
        /// The operation.
        op: &'static str,
        /// The argument or field.
        field: &'static str,
        /// What was asked.
        requested: u64,
        /// The largest value that would have worked.
        max: u64,
        /// The limit that decided it.
        limit: &'static str,
    },
    /// A QP sizing request does not fit the device.
    Sizing(crate::verbs::qp::SizingError),
    /// A QP state transition that does not exist for this QP type.
    QpTransition {
        /// The QP.
        qpn: u32,
        /// Its state.
        from: crate::verbs::qp::QpState,
        /// The state asked for.
        to: crate::verbs::qp::QpState,
    },
    /// A `modify_qp` attribute is missing or not allowed for the transition.
    QpAttr {
        /// The QP.
        qpn: u32,
        /// Its state.
        from: crate::verbs::qp::QpState,
        /// The state asked for.
        to: crate::verbs::qp::QpState,
        /// The attribute (verbs name).
        attr: &'static str,
        /// Missing or not allowed.
        problem: AttrProblem,
    },
    /// The QP's state does not allow the operation.
    QpState {
        /// The QP.
        qpn: u32,
        /// Its state.
        state: crate::verbs::qp::QpState,
        /// The operation.
        op: &'static str,
    },
    /// A work queue has no room for the work requests posted; nothing was posted.
    QueueFull {
        /// The QP (or SRQ).
        qpn: u32,
        /// Which queue.
        queue: &'static str,
        /// Entries outstanding now.
        outstanding: u64,
        /// Entries the queue holds.
        limit: u64,
    },
    /// A layout access was refused (a value too wide for its field, a short buffer).
    Layout(LayoutError),
    /// An internal DMA access went out of bounds (a driver bug caught safely).
    Internal(OutOfBounds),
}

/// How a `modify_qp` call is wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttrProblem {
    /// The transition requires the attribute and the mask does not have it.
    Missing,
    /// The transition (for this QP type) does not take the attribute.
    NotAllowed,
}

/// Why the driver considers a device unusable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeadCause {
    /// A command never completed; its entry still belongs to the device.
    CommandTimeout {
        /// The command that timed out.
        opcode: u16,
    },
    /// The health buffer reported a fatal syndrome.
    Fatal {
        /// The syndrome.
        synd: HealthSyndrome,
    },
    /// The device fell off the bus (reads return all-ones).
    Gone,
    /// The device was closed.
    Closed,
}

impl fmt::Display for DeadCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DeadCause::CommandTimeout { opcode } => {
                write!(f, "{} ({opcode:#06x}) never completed", opcode_name(opcode))
            }
            DeadCause::Fatal { synd } => write!(f, "fatal health syndrome {synd}"),
            DeadCause::Gone => f.write_str("the device does not answer on the bus"),
            DeadCause::Closed => f.write_str("the device was closed"),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Cmd { opcode, op_mod, status, syndrome } => write!(
                f,
                "{}({opcode:#06x}) op_mod({op_mod:#x}) failed: status {status}, syndrome {syndrome:#010x}",
                opcode_name(*opcode)
            ),
            Error::Delivery { opcode, status } => {
                write!(f, "{}({opcode:#06x}) was not delivered: {status}", opcode_name(*opcode))
            }
            Error::Timeout { waiting_for, waited_ms } => {
                write!(f, "timed out after {waited_ms} ms waiting for {waiting_for}")
            }
            Error::Unusable { opcode, cause } => {
                write!(f, "{}({opcode:#06x}) refused: device unusable, {cause}", opcode_name(*opcode))
            }
            Error::Health { synd, ext_synd } => {
                write!(f, "firmware fatal error: health syndrome {synd}, ext_synd {ext_synd:#x}")
            }
            Error::BadDeviceValue { what, value, limit } => {
                write!(f, "device returned {what} = {value:#x}, outside what makes sense (limit {limit:#x})")
            }
            Error::Unsupported { what, found } => write!(f, "device does not support {what} (reported {found:#x})"),
            Error::Platform { op, source } => write!(f, "{op}: {source}"),
            Error::Capacity { what, limit } => write!(f, "{what} is full ({limit} entries)"),
            Error::InvalidArgument { op, field, requested, max, limit } => {
                write!(f, "{op}: {field} {requested} exceeds {max} ({limit})")
            }
            Error::Sizing(e) => write!(f, "create_qp: {e}"),
            Error::QpTransition { qpn, from, to } => {
                write!(f, "modify_qp: QP {qpn:#x} cannot go from {from} to {to}")
            }
            Error::QpAttr { qpn, from, to, attr, problem } => match problem {
                AttrProblem::Missing => {
                    write!(f, "modify_qp: QP {qpn:#x} {from}->{to} requires {attr}")
                }
                AttrProblem::NotAllowed => {
                    write!(f, "modify_qp: QP {qpn:#x} {from}->{to} does not take {attr}")
                }
            },
            Error::QpState { qpn, state, op } => write!(f, "{op}: QP {qpn:#x} is in {state}"),
            Error::QueueFull { qpn, queue, outstanding, limit } => {
                write!(f, "{queue} of {qpn:#x} is full: {outstanding} of {limit} entries outstanding")
            }
            Error::Layout(e) => write!(f, "layout: {e}"),
            Error::Internal(e) => write!(f, "internal: {e}"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for Error {}

impl From<LayoutError> for Error {
    fn from(e: LayoutError) -> Self {
        Error::Layout(e)
    }
}

impl From<crate::verbs::qp::SizingError> for Error {
    fn from(e: crate::verbs::qp::SizingError) -> Self {
        Error::Sizing(e)
    }
}

impl From<OutOfBounds> for Error {
    fn from(e: OutOfBounds) -> Self {
        Error::Internal(e)
    }
}

/// The driver's result type.
pub type Result<T> = core::result::Result<T, Error>;
