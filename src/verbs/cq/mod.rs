//! Completion queues (PRM "Completion Queue").
//!
//! A CQ is a ring of 64-byte CQEs the device writes, a doorbell record (consumer index, arm
//! word) and a completion EQ. Sized like mlx5 verbs: `cqe` entries asked → `roundup_pow2(cqe + 1)`
//! slots, `cqe` granted = slots − 1, limited by `log_max_cq_sz`. Every CQE starts with the invalid
//! opcode (0xf) and owner 0, so the driver never mistakes an unwritten slot for a completion.

mod clean;
pub(crate) mod cqe;
mod create;
mod eth_rx;
mod poll;
pub(crate) mod state;
mod wc;
pub(crate) mod zip;

pub(crate) use cqe::{CQE_BYTES, CQE_OP_OWN};
pub use create::{Cq, CqInfo};
pub use poll::CqPoller;
pub use wc::{Wc, WcFlags, WcOpcode, WcStatus};
pub use zip::MiniCqe;
