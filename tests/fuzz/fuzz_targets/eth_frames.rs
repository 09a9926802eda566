//! Ethernet frames from a peer into the driver's receive path: an `EthPort` under a smoltcp
//! interface with a TCP listener, a UDP echo and ICMP (issue #26). The body is shared with
//! `cargo test` (tests/fuzz_corpus_net.rs replays this target's corpus through it); see
//! net/eth.rs for what must hold and net/frames.rs for the input's layout.
#![no_main]

#[path = "net/eth.rs"]
mod eth;
#[path = "net/frames.rs"]
mod frames;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    eth::run(data);
});
