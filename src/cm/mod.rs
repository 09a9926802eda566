//! Connection management over QP1 (IBTA vol. 1 ch. 12), `no_std`: the GSI QP as a device
//! service ([`gsi`]), the CM's MADs ([`mad`]) and a connection manager that sets RC
//! connections up and tears them down the way rdma_cm peers do ([`conn`]) — so that Linux's
//! `rping`, perftest's `-R` and any librdmacm application connect to us, and we to them.
//! What a hostile peer can make it hold, and for how long, is bounded as [`limits`] says.
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
