//! Queue pairs (PRM "QP"): sizing against the device's limits.

pub mod sizing;

pub use sizing::{
    max_qp_cap, size_qp, CapField, Limit, QpCap, QpLayout, QpLimits, QpType, SendOps, SizeMode,
    Sized, SizingError,
};

use crate::caps::Caps;

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
