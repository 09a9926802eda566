//! Raw Ethernet (issue #13), `no_std`: an Ethernet port ([`EthPort`]) that sends and receives
//! plain frames through the NIC (with `smoltcp`, a `smoltcp::phy::Device`). It is made of the
//! transport domain and TIS, Ethernet send queues (CREATE_SQ objects whose WQEs carry an
//! Ethernet segment, completions on our CQs), receive queues, a direct TIR in front of an RQ
//! (or an RQ table and an RSS TIR) and the NIC receive flow table steering a destination MAC to
//! it — those objects one by one are `mlx5::raw::eth` (unstable). RSS, VLAN and TSO come next
//! (docs/ethernet-facts.md is the fact sheet all of it is written from).

mod csum;
pub(crate) mod flow;
pub(crate) mod mpw;
pub(crate) mod port;
pub(crate) mod rq;
pub(crate) mod rqt;
pub(crate) mod rss;
pub(crate) mod rules;
#[cfg(feature = "smoltcp")]
mod smol;
pub(crate) mod sq;
pub(crate) mod tir;
pub(crate) mod tis;
mod wq;

pub use port::{EthPort, EthPortConfig, EthStats, MAX_MTU};
pub use rq::Strides;
#[cfg(feature = "smoltcp")]
pub use smol::{RxToken, TxToken};
