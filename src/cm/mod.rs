//! Connection management over QP1 (IBTA vol. 1 ch. 12), `no_std`: the GSI QP as a device
//! service ([`Gsi`]), the CM's MADs (their layouts: `mlx5::raw::mad`) and a connection manager
//! ([`Cm`]) that sets RC connections up and tears them down the way rdma_cm peers do — so that
//! Linux's `rping`, perftest's `-R` and any librdmacm application connect to us, and we to
//! them. What a hostile peer can make it hold, and for how long, is bounded (`cm/limits.rs`
//! says how; [`CmConfig`] sets the bounds).
//!
//! The facts it is written from, with their sources: docs/rdma-cm-facts.md.

mod conn;
mod gsi;
pub(crate) mod limits;
pub(crate) mod mad;
mod qp;
mod receive;

pub use conn::{
    guid_of_mac, Cm, CmConfig, CmEvent, CmId, ConnParam, ConnRequest, Route, MAX_CONNS, MAX_LISTENS,
};
pub use gsi::{Gsi, GsiBufs, MadAddr, Received, QP1_QKEY};
pub use qp::{ack_timeout, init_qp, mapped};
