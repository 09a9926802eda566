//! A vfio-user client's byte stream into the server (`mlx5-vfio-user`, issue #26): VERSION,
//! region reads and writes, DMA maps of a memfd the client may truncate or that cannot be sealed,
//! doorbells that send the device into that memory, headers that lie about their sizes. The
//! server must answer or refuse each and end when the client does — no panic, caught or not, no
//! fault (SIGBUS), no allocation past its limits. The body is shared with `cargo test`
//! (hw/vfio-user/tests/fuzz_corpus.rs replays this corpus through it); see raw/messages.rs for
//! the input's layout.
#![no_main]

#[path = "../../../hw/vfio-user/tests/raw/messages.rs"]
mod messages;
#[path = "../../../hw/vfio-user/tests/raw/mod.rs"]
mod raw;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    messages::serve_messages(data);
});
