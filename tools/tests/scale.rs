//! Issue #30: `mlx5ctl scale` holds more RC connections than BAR0 has UAR pages (8 192 pages of
//! 4 KiB in the simulated 32 MiB BAR), all of a NIC's QPs on one CQ, and moves verified bytes on
//! every one of them.

use std::process::Command;

#[test]
fn more_connections_than_uar_pages_carry_verified_bytes() {
    let out = Command::new(env!("CARGO_BIN_EXE_mlx5ctl"))
        .args(["scale", "--qps", "9000", "--rounds", "2", "--size", "100"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for want in [
        "9000 RC connections, one CQ a NIC",
        "setup: 18000 QPs created",
        "256 QPs on dedicated BlueFlame registers, 8744 on 16 shared registers",
        "doorbells of NIC A: 68 UAR pages",
        "traffic: 18000 SENDs of 100 bytes round robin over 9000 connections, both ways",
        "every byte verified",
        "every UAR page given back but a spare; 1800000 bytes moved",
    ] {
        assert!(text.contains(want), "{want:?} missing from:\n{text}");
    }
}
