//! Frames from a real link into the simulator's external port: neighbour learning, the ARP and
//! neighbour discovery responder, and RoCE v1/v2 on to a simulated NIC (issue #26). The body is
//! shared with `cargo test` (tests/fuzz_corpus_net.rs replays this target's corpus through it);
//! see net/external.rs for what must hold and net/frames.rs for the input's layout.
#![no_main]

#[path = "net/external.rs"]
mod external;
#[path = "net/frames.rs"]
mod frames;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    external::run(data);
});
