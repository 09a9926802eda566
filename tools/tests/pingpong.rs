//! `mlx5ctl pingpong` against itself, two processes: each a simulated ConnectX-5 driven by this
//! driver, their ports joined by a pair of unix datagram links (as QEMU's `-netdev dgram` joins a
//! guest), the out-of-band exchange rdma-core's over TCP. RC on IPv4-mapped GIDs (the peer's MAC
//! resolved by ARP through the links, answered by the other side's address responder) and UD on
//! link-local GIDs, with the received bytes checked (`-c`).

use std::process::{Command, Stdio};

fn pair(kind: &str, extra: &[&str], port: u16) {
    let dir = std::env::temp_dir().join(format!("mlx5ctl-pp-{}-{kind}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = (dir.join("a"), dir.join("b"));
    let exe = env!("CARGO_BIN_EXE_mlx5ctl");
    let common = |mac: &str, ours: &std::path::Path, theirs: &std::path::Path| {
        let mut c = Command::new(exe);
        c.args([
            "pingpong",
            "--type",
            kind,
            "-n",
            "100",
            "-c",
            "-p",
            &port.to_string(),
        ])
        .args(["--mac", mac])
        .arg("--link")
        .arg(format!("{}:{}", ours.display(), theirs.display()))
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        c
    };
    let mut server = common("02:c5:5a:00:00:01", &a, &b);
    if kind == "rc" {
        server.args(["--ip", "10.0.0.1"]);
    }
    let server = server.spawn().unwrap();
    let mut client = common("02:c5:5a:00:00:02", &b, &a);
    if kind == "rc" {
        client.args(["--ip", "10.0.0.2"]);
    }
    let client = client.arg("127.0.0.1").output().unwrap();
    let server = server.wait_with_output().unwrap();
    let text = |o: &std::process::Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    let (c, s) = (text(&client), text(&server));
    assert!(client.status.success(), "client: {c}\nserver: {s}");
    assert!(server.status.success(), "server: {s}\nclient: {c}");
    for out in [&c, &s] {
        assert!(out.contains("100 iters in"), "{out}");
        assert!(out.contains("remote address: LID 0x0000, QPN 0x"), "{out}");
    }
    if kind == "rc" {
        assert!(c.contains("GID ::ffff:10.0.0.1") && s.contains("GID ::ffff:10.0.0.2"));
    } else {
        assert!(c.contains("GID fe80::c5:5aff:fe00:1"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn rc_pingpong_between_two_processes_over_datagram_links() {
    pair("rc", &[], 18600 + (std::process::id() % 200) as u16);
}

#[test]
fn ud_pingpong_between_two_processes_over_datagram_links() {
    pair(
        "ud",
        &["-s", "512"],
        18800 + (std::process::id() % 200) as u16,
    );
}
