//! Raw Ethernet queues (issue #13), `no_std`: what a unikernel or dataplane needs to send plain
//! Ethernet frames through the NIC — the transport domain and TIS ([`tis`]) and Ethernet send
//! queues ([`sq`]: CREATE_SQ objects whose WQEs carry an Ethernet segment, completions on our
//! CQs), receive queues ([`rq`]), a direct TIR in front of an RQ ([`tir`]) and the NIC receive
//! flow table steering a destination MAC to it ([`flow`]). RSS, VLAN and TSO come next
//! (docs/ethernet-facts.md is the fact sheet all of it is written from).

mod csum;
pub(crate) mod flow;
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
#[cfg(feature = "smoltcp")]
pub use smol::{RxToken, TxToken};
