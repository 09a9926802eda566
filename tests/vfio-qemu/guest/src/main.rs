//! Placeholder; the guest test is being written.
fn main() {}
