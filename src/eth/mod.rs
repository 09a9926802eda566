//! Raw Ethernet queues (issue #13), `no_std`: what a unikernel or dataplane needs to send plain
//! Ethernet frames through the NIC — the transport domain and TIS ([`tis`]) and Ethernet send
//! queues ([`sq`]: CREATE_SQ objects whose WQEs carry an Ethernet segment, completions on our
//! CQs). Receive queues, steering and RSS come next (docs/ethernet-facts.md is the fact sheet
//! they are written from).

pub mod sq;
pub mod tis;

pub use sq::{EthSq, EthWr, L2_INLINE};
pub use tis::{Tis, TransportDomain};
