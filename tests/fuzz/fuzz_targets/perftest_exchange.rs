//! The perftest out-of-band exchange from a hostile peer (issue #26): the input is what a
//! client sends a `mlx5ctl perftest` server over TCP (version, cycle buffer, cache line, MTU,
//! keys, report), then closes; and the same bytes as a key message, text and binary (`-R`).
//! Every refusal is an error; nothing panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mlx5_tools::perftest::fuzz;

fuzz_target!(|data: &[u8]| {
    let _ = fuzz::keys(data);
    let _ = fuzz::tcp_server(data);
});
