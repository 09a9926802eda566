//! Queue pairs (PRM "QP"): sizing against the device's limits ([`sizing`]), creation with a
//! programmed context ([`create`]) and the state machine ([`modify`]).

pub mod connect;
pub mod create;
pub mod modify;
pub mod post;
pub mod sizing;
mod state;
mod wr;
mod write;

pub use connect::{ConnectOpts, QpEndpoint};
pub use create::{Qp, QpInitAttr};
pub use modify::{Access, AhAttr, AttrProblem, Mtu, QpAttr, QpAttrMask, QpQuery};
pub use post::{Payload, RecvWr, SendOp, SendWr, Sge};
pub use state::QpState;

pub use sizing::{
    max_qp_cap, size_qp, sq_overhead, CapField, Limit, QpCap, QpLayout, QpLimits, QpType, SendOps,
    SizeMode, SizedQp, SizingError,
};

use crate::fw::caps::Caps;

impl Caps {
    /// The limits QP sizing depends on.
    pub fn qp_limits(&self) -> QpLimits {
        QpLimits {
            max_wqe_sz_sq: self.max_wqe_sz_sq(),
            max_wqe_sz_rq: self.max_wqe_sz_rq(),
            log_max_qp_sz: self.log_max_qp_sz(),
        }
    }
}
