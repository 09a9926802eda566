//! `mlx5ctl size --batch` on arbitrary bytes: every line answered with one JSON object, never a
//! panic, whatever the bytes (invalid UTF-8, huge numbers, deep nesting, absurd caps).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let base = *mlx5_sim::Profile::connectx5().hca_cap_max();
    let mut out = Vec::new();
    let mut input = data;
    mlx5_tools::size::batch(&base, &mut input, &mut out).expect("writing to a Vec");
    let text = String::from_utf8(out).expect("answers are UTF-8");
    for line in text.lines() {
        assert!(line.starts_with('{') && line.ends_with('}'), "{line}");
    }
});
