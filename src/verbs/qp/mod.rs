//! Queue pairs (PRM "QP"): sizing against the device's limits ([`sizing`]), creation with a
//! programmed context ([`create`]) and the state machine ([`modify`]).

mod check;
pub mod connect;
pub mod create;
pub mod modify;
pub mod post;
pub mod sizing;
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

pub use sizing::{
    max_qp_cap, size_qp, sq_overhead, CapField, Limit, QpCap, QpLayout, QpLimits, QpType, SendOps,
    SizeMode, SizedQp, SizingError,
};
