//! The fuzz target `vfio_user_server`'s committed corpus (tests/fuzz/corpus/vfio_user_server),
//! replayed through the target's own body in every `cargo test`: each input is a hostile
//! client's byte stream (issue #26's VERSION, REGION_READ/WRITE, DMA_MAP and doorbell cases among
//! them) and the server must serve it without a panic or a fault.

#[path = "raw/messages.rs"]
mod messages;
mod raw;

#[test]
fn the_fuzz_corpus_is_served_without_a_panic() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fuzz/corpus/vfio_user_server");
    let mut inputs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    inputs.sort();
    assert!(inputs.len() >= 10, "a corpus in {}", dir.display());
    for p in &inputs {
        let data = std::fs::read(p).unwrap();
        eprintln!("{}: {} bytes", p.display(), data.len());
        messages::serve_messages(&data);
    }
}
