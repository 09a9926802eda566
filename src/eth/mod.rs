//! Raw Ethernet queues (issue #13), `no_std`: what a unikernel or dataplane needs to send plain
//! Ethernet frames through the NIC — the transport domain and TIS ([`tis`]) and Ethernet send
//! queues ([`sq`]: CREATE_SQ objects whose WQEs carry an Ethernet segment, completions on our
//! CQs), receive queues ([`rq`]), a direct TIR in front of an RQ ([`tir`]) and the NIC receive
//! flow table steering a destination MAC to it ([`flow`]). RSS, VLAN and TSO come next
//! (docs/ethernet-facts.md is the fact sheet all of it is written from).

mod csum;
pub mod flow;
pub mod port;
pub mod rq;
pub mod rqt;
pub mod rss;
pub mod rules;
#[cfg(feature = "smoltcp")]
pub mod smol;
pub mod sq;
pub mod tir;
pub mod tis;
mod wq;

pub use flow::{MacSteering, RxFilter, BROADCAST, MAX_MACS};
pub use port::{EthPort, EthPortConfig, EthStats, MAX_MTU};
pub use rq::EthRq;
pub use rqt::Rqt;
pub use rss::{toeplitz, MS_RSS_KEY};
pub use rules::{FlowAction, FlowMatch, FlowRule, FlowTable};
pub use sq::{Checksum, EthSq, EthWr, L2_INLINE};
pub use tir::{RssFields, Tir};
pub use tis::{Tis, TransportDomain};
