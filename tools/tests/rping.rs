//! `mlx5ctl rping` against itself, two processes: each a simulated ConnectX-5 driven by this
//! driver, their ports joined by a pair of unix datagram links; the connection made by the
//! driver's connection manager over QP1 (REQ/REP/RTU, DREQ/DREP), then rping's protocol with
//! every ping's data verified (`-V`). (The same tool against Linux's rdma_cm and rping:
//! tests/rxe-qemu.)

mod common;

use std::process::Command;
use std::time::Duration;

use common::Spawned;

#[test]
fn rping_client_and_server_verify_every_ping() {
    let dir = std::env::temp_dir().join(format!("mlx5ctl-rping-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = (dir.join("a"), dir.join("b"));
    let exe = env!("CARGO_BIN_EXE_mlx5ctl");
    let link =
        |x: &std::path::Path, y: &std::path::Path| format!("{}:{}", x.display(), y.display());
    let mut server = Spawned::new(
        Command::new(exe)
            .args(["rping", "-s", "-C", "20", "-V", "-S", "100"])
            .args([
                "--mac",
                "02:c5:5a:00:00:01",
                "--ip",
                "10.0.0.1",
                "--link",
                &link(&a, &b),
            ]),
    );
    // The client starts once the server listens (a REQ before that would wait seconds for its
    // retransmission).
    server.wait_for("rping server: listening", Duration::from_secs(120));
    let client = Command::new(exe)
        .args([
            "rping", "-c", "-a", "10.0.0.1", "-C", "20", "-V", "-v", "-S", "100",
        ])
        .args([
            "--mac",
            "02:c5:5a:00:00:02",
            "--ip",
            "10.0.0.2",
            "--link",
            &link(&b, &a),
        ])
        .output()
        .unwrap();
    let (status, s) = server.finish();
    let c = format!(
        "{}{}",
        String::from_utf8_lossy(&client.stdout),
        String::from_utf8_lossy(&client.stderr)
    );
    assert!(client.status.success(), "client: {c}\nserver: {s}");
    assert!(status.success(), "server: {s}\nclient: {c}");
    assert!(
        c.contains("rping client: 20 pings, all data verified"),
        "{c}"
    );
    assert!(
        s.contains("rping server: 20 pings, client disconnected"),
        "{s}"
    );
    // rping's buffer: "rdma-ping-N: " then letters from 'A' + N, cycling.
    assert!(c.contains("ping data: rdma-ping-0: ABCDEFGHIJ"), "{c}");
    assert!(c.contains("ping data: rdma-ping-19: TUVWXYZ"), "{c}");
    let _ = std::fs::remove_dir_all(&dir);
}
