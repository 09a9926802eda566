//! Queue pairs (PRM "QP"): sizing against the device's limits ([`QpCap`], [`SizingError`]),
//! creation with a programmed context ([`Qp`], [`QpInitAttr`]), the state machine
//! ([`Qp::modify`], [`QpAttr`]) and the data path ([`SendWr`], [`RecvWr`]).

mod check;
mod connect;
mod create;
mod modify;
mod post;
pub(crate) mod sizing;
mod state;
mod wr;
mod write;

pub use crate::error::AttrProblem;
pub use crate::verbs::wqe::UdAddr;
pub use connect::{ConnectOpts, QpEndpoint};
pub use create::{Qp, QpInitAttr};
pub use modify::{Access, AhAttr, Mtu, QpAttr, QpAttrMask, QpQuery};
pub use post::{Payload, RecvWr, SendOp, SendWr, Sge};
pub use state::QpState;
pub(crate) use write::refuse;

pub use sizing::{CapField, Limit, QpCap, QpLayout, QpType, SendOps, SizeMode, SizingError};
