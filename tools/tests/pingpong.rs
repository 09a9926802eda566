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

/// Issue #26 row 8: the pingpong server accepted a connection and read from it with no timeout,
/// so a client that connects and says nothing held it for ever. With `--exchange-timeout` the
/// server gives up on the silent peer and says why.
#[test]
fn a_silent_client_does_not_hold_the_server() {
    let dir = std::env::temp_dir().join(format!("mlx5ctl-pp-{}-silent", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let port = 18400 + (std::process::id() % 200) as u16;
    let exe = env!("CARGO_BIN_EXE_mlx5ctl");
    let mut server = Command::new(exe)
        .args([
            "pingpong",
            "-p",
            &port.to_string(),
            "--exchange-timeout",
            "2",
        ])
        .args(["--mac", "02:c5:5a:00:00:01", "--ip", "10.0.0.1", "--link"])
        .arg(format!(
            "{}:{}",
            dir.join("a").display(),
            dir.join("b").display()
        ))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Connect once the server listens, then say nothing.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let _silent = loop {
        match std::net::TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => break s,
            Err(_) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(50))
            }
            Err(e) => panic!("the server never listened: {e}"),
        }
    };
    // The server ends by itself (the test's bound is generous: it is not a timing check).
    let end = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let status = loop {
        if let Some(s) = server.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > end {
            let _ = server.kill();
            panic!("the server still waits on a silent client after 120 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let out = server.wait_with_output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(!status.success(), "{text}");
    assert_ne!(status.code(), Some(101), "a panic: {text}");
    assert!(text.contains("reading the client's address"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}
