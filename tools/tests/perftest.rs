//! `mlx5ctl perftest` against itself, two processes: each a simulated ConnectX-5 driven by this
//! driver, their ports joined by a pair of unix datagram links, perftest's exchange over TCP.
//! Every test of perftest's that the tool speaks, each side taking its own part (the server
//! passive in the bandwidth and read/atomic latency tests, counting receives in send_bw, both
//! ping-ponging in write_lat and send_lat), and the results each side prints. (The same tool
//! against Linux's rxe and Debian's perftest: tests/rxe-qemu.)

use std::process::{Command, Output, Stdio};

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Runs `test` with `extra` arguments on both sides; the outputs `(client, server)`.
fn pair(test: &str, extra: &[&str], port: u16) -> (String, String) {
    // One directory per pair: tests run in parallel, and two pairs of the same test binding
    // the same socket paths would take each other's frames.
    let dir = std::env::temp_dir().join(format!("mlx5ctl-pt-{}-{test}-{port}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = (dir.join("a"), dir.join("b"));
    let exe = env!("CARGO_BIN_EXE_mlx5ctl");
    let side = |mac: &str, ip: &str, ours: &std::path::Path, theirs: &std::path::Path| {
        let mut c = Command::new(exe);
        c.args(["perftest", test, "-x", "1", "-p", &port.to_string()])
            .args(["--mac", mac, "--ip", ip])
            .arg("--link")
            .arg(format!("{}:{}", ours.display(), theirs.display()))
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    };
    let server = side("02:c5:5a:00:00:01", "10.0.0.1", &a, &b)
        .spawn()
        .unwrap();
    // With -R the server is named by its simulated NIC's address (rdma_cm), else by TCP's.
    let server_addr = if extra.contains(&"-R") {
        "10.0.0.1"
    } else {
        "127.0.0.1"
    };
    let client = side("02:c5:5a:00:00:02", "10.0.0.2", &b, &a)
        .arg(server_addr)
        .output()
        .unwrap();
    let server = server.wait_with_output().unwrap();
    let (c, s) = (text(&client), text(&server));
    assert!(client.status.success(), "{test} client: {c}\nserver: {s}");
    assert!(server.status.success(), "{test} server: {s}\nclient: {c}");
    let _ = std::fs::remove_dir_all(&dir);
    (c, s)
}

fn port(k: u16) -> u16 {
    19000 + k * 50 + (std::process::id() % 50) as u16
}

#[test]
fn bandwidth_tests_report_the_clients_figures_on_both_sides() {
    for (k, (test, title)) in [
        ("write-bw", "RDMA_Write BW Test"),
        ("read-bw", "RDMA_Read BW Test"),
        ("atomic-bw", "Atomic FETCH_AND_ADD BW Test"),
    ]
    .into_iter()
    .enumerate()
    {
        let (c, s) = pair(
            test,
            &[
                "-s",
                if test == "atomic-bw" { "8" } else { "4096" },
                "-n",
                "300",
            ],
            port(k as u16),
        );
        for out in [&c, &s] {
            assert!(out.contains(title), "{out}");
            assert!(out.contains("remote address: LID 0000 QPN"), "{out}");
        }
        // The server prints what the client reported (the same line).
        let line = |o: &str| {
            o.lines()
                .skip_while(|l| !l.contains("#bytes"))
                .nth(1)
                .unwrap_or_default()
                .to_string()
        };
        assert_eq!(line(&c), line(&s), "{test}: client\n{c}\nserver\n{s}");
        assert!(line(&c).trim_start().starts_with(if test == "atomic-bw" {
            "8 "
        } else {
            "4096 "
        }));
    }
}

#[test]
fn send_bw_counts_every_receive_at_the_server() {
    let (c, s) = pair("send-bw", &["-s", "1024", "-n", "600"], port(3));
    for out in [&c, &s] {
        assert!(out.contains("Send BW Test"), "{out}");
        assert!(
            out.lines()
                .any(|l| l.trim_start().starts_with("1024 ") && l.contains(" 600 ")),
            "{out}"
        );
    }
}

#[test]
fn latency_tests_ping_pong_or_serve() {
    for (k, test) in ["write-lat", "send-lat", "read-lat", "atomic-lat"]
        .into_iter()
        .enumerate()
    {
        let (c, s) = pair(test, &["-n", "200"], port(4 + k as u16));
        assert!(c.contains("t_typical"), "{test}: {c}");
        if matches!(test, "write-lat" | "send-lat") {
            assert!(s.contains("t_typical"), "{test}: {s}");
        }
    }
}

#[test]
fn rdma_cm_mode_connects_both_qps_with_the_connection_manager() {
    // perftest -R: the exchange over an rdma_cm-connected control QP, the test QP connected by
    // rdma_cm too (over QP1 of each simulated NIC), a read test taking READ depth 16 through
    // the REQ/REP.
    for (k, (test, title)) in [
        ("write-bw", "RDMA_Write BW Test"),
        ("read-bw", "RDMA_Read BW Test"),
    ]
    .into_iter()
    .enumerate()
    {
        let (c, s) = pair(
            test,
            &["-R", "-s", "4096", "-n", "200"],
            port(40 + k as u16),
        );
        for out in [&c, &s] {
            assert!(out.contains(title), "{out}");
            assert!(out.contains(" 4096       200"), "{out}");
        }
    }
}

#[test]
fn rdma_cm_mode_survives_a_wire_that_loses_duplicates_and_reorders() {
    // The exchange's messages and their acknowledgements race on such a wire: the peer's next
    // message can arrive before the acknowledgement of ours (its ACK lost, or overtaken), so a
    // receive completion comes while a side waits for its send's. It must be kept for the
    // next step, not dropped (CI's rxe run once hung 120 s on a dropped one).
    let faults = [
        "-R",
        "-s",
        "4096",
        "-n",
        "200",
        "--drop-ppm",
        "10000",
        "--dup-ppm",
        "20000",
        "--reorder-ppm",
        "50000",
    ];
    let (c, s) = pair("write-bw", &faults, port(44));
    for out in [&c, &s] {
        assert!(out.contains("RDMA_Write BW Test"), "{out}");
        assert!(out.contains(" 4096       200"), "{out}");
    }
}
