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

/// A third simulated NIC at 10.0.0.3 whose port sends into `target` (the server's socket): it
/// waits for `go`, then sends REQs for `port` at 10.0.0.1 — a burst, then one a millisecond —
/// until `stop`. The number sent.
fn stranger(
    dir: &std::path::Path,
    target: &std::path::Path,
    port: u16,
    go: &std::sync::atomic::AtomicBool,
    stop: &std::sync::atomic::AtomicBool,
) -> u64 {
    use mlx5::cm::{mapped, Gsi, GsiBufs, MadAddr};
    use mlx5::raw::mad::{attr, req, service_id, Mad};
    use std::sync::atomic::Ordering::Relaxed;
    let sim = mlx5::sim::SimDevice::new(
        mlx5::sim::Profile::connectx5().with_mac([2, 0xc5, 0x5a, 0, 0, 3]),
        mlx5::sim::Mode::Threaded,
    );
    let fabric = mlx5::sim::Fabric::new();
    fabric.attach(&sim).unwrap();
    let _port = fabric
        .attach_unix_dgram(&dir.join("stranger"), target, true)
        .unwrap();
    let dev = mlx5::Device::open(
        mlx5::SimPlatform::new(sim.clone()),
        mlx5::DeviceConfig::default(),
    )
    .unwrap();
    let mac = dev.vport().mac;
    dev.set_gid(1, Some(mlx5::GidEntry::ipv4([10, 0, 0, 3], mac)))
        .unwrap();
    let bufs = GsiBufs::new(&dev).unwrap();
    let mut g = Gsi::open(&dev, &bufs, 1).unwrap();
    let to = MadAddr {
        gid: mapped([10, 0, 0, 1]),
        mac: [2, 0xc5, 0x5a, 0, 0, 1],
        sgid_index: 1,
        hop_limit: 64,
        traffic_class: 0,
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !go.load(Relaxed) && !stop.load(Relaxed) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let mut sent = 0u64;
    while !stop.load(Relaxed) && std::time::Instant::now() < deadline {
        let id = 0x5eed_0000 + sent;
        let mut m = Mad::cm(attr::REQ, id);
        m.set(req::LOCAL_COMM_ID, id);
        m.set(req::SERVICE_ID, service_id(port));
        m.set(req::LOCAL_CA_GUID, 0x0200_00ff_fe00_0003 ^ (id << 32));
        m.set(req::LOCAL_QPN, 0x100 + (sent & 0xfff));
        m.set(req::REMOTE_CM_RESPONSE_TIMEOUT, 31);
        m.set(req::LOCAL_CM_RESPONSE_TIMEOUT, 31);
        m.set(req::MAX_CM_RETRIES, 15);
        m.set(req::PATH_MTU, 3);
        m.set(req::LOCAL_ACK_TIMEOUT, 18);
        m.0[req::PRIMARY_LOCAL_GID..][..16].copy_from_slice(&mapped([10, 0, 0, 3]));
        while g.recv().unwrap().is_some() {}
        if g.send(&to, &m).is_ok() {
            sent += 1;
        }
        if sent > 20 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    drop(g.close());
    drop(bufs.destroy());
    drop(dev.close());
    sent
}

/// Reads a child's pipe to the end on a thread, flagging `seen` when a line has `mark`.
fn collect(
    r: impl std::io::Read + Send + 'static,
    mark: &'static str,
    seen: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        use std::io::BufRead;
        let mut all = String::new();
        for line in std::io::BufReader::new(r).lines().map_while(Result::ok) {
            if line.contains(mark) {
                seen.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    })
}

#[test]
fn rdma_cm_mode_refuses_a_stream_of_strangers_reqs_and_keeps_its_own() {
    // Issue #26 row 10: while a -R run goes on, a third node streams REQs for the server's
    // port (with the longest timers the fields can say). The server must still take the
    // client's test connection (not a stranger's REQ met earlier), finish, and report what it
    // refused — events set aside are bounded, and each stranger's REQ is refused at once.
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    use std::sync::Arc;
    let port = port(46);
    let dir = std::env::temp_dir().join(format!("mlx5ctl-pt-{}-stranger", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = (dir.join("a"), dir.join("b"));
    let exe = env!("CARGO_BIN_EXE_mlx5ctl");
    let side = |mac: &str, ip: &str, ours: &std::path::Path, theirs: &std::path::Path| {
        let mut c = Command::new(exe);
        c.args(["perftest", "write-bw", "-x", "1", "-p", &port.to_string()])
            .args(["--mac", mac, "--ip", ip])
            .arg("--link")
            .arg(format!("{}:{}", ours.display(), theirs.display()))
            .args(["-R", "-s", "4096", "-n", "2000"])
            .env("RUST_LOG", "warn,mlx5_tools=info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    };
    let go = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let mut server = side("02:c5:5a:00:00:01", "10.0.0.1", &a, &b)
        .spawn()
        .unwrap();
    let s_err = collect(
        server.stderr.take().unwrap(),
        "control connection from",
        go.clone(),
    );
    let s_out = collect(server.stdout.take().unwrap(), "\0", Arc::default());
    let attacker = {
        let (dir, a, go, stop) = (dir.clone(), a.clone(), go.clone(), stop.clone());
        std::thread::spawn(move || stranger(&dir, &a, port, &go, &stop))
    };
    let mut client = side("02:c5:5a:00:00:02", "10.0.0.2", &b, &a)
        .arg("10.0.0.1")
        .spawn()
        .unwrap();
    let c_err = collect(client.stderr.take().unwrap(), "\0", Arc::default());
    let c_out = collect(client.stdout.take().unwrap(), "\0", Arc::default());
    // Bounded: a side stuck on a stranger's REQ is a failure, not a hang.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(150);
    let mut status = [None, None];
    while status.iter().any(Option::is_none) && std::time::Instant::now() < deadline {
        for (k, ch) in [&mut client, &mut server].into_iter().enumerate() {
            if status[k].is_none() {
                status[k] = ch.try_wait().unwrap();
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    for ch in [&mut client, &mut server] {
        let _ = ch.kill();
        let _ = ch.wait();
    }
    stop.store(true, Relaxed);
    let sent = attacker.join().unwrap();
    let (c, s) = (
        format!("{}{}", c_out.join().unwrap(), c_err.join().unwrap()),
        format!("{}{}", s_out.join().unwrap(), s_err.join().unwrap()),
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert!(sent > 0, "the stranger sent nothing\nserver: {s}");
    assert!(
        status[0].is_some_and(|x| x.success()),
        "client {:?}: {c}\nserver: {s}",
        status[0]
    );
    assert!(
        status[1].is_some_and(|x| x.success()),
        "server {:?}: {s}\nclient: {c}",
        status[1]
    );
    for out in [&c, &s] {
        assert!(out.contains("RDMA_Write BW Test"), "{out}");
        assert!(out.contains(" 4096       2000"), "{out}");
    }
    let refused = s
        .lines()
        .filter(|l| l.contains(" REQs refused"))
        .find_map(|l| {
            l.split("perftest -R: ")
                .nth(1)?
                .split(' ')
                .next()?
                .parse::<u64>()
                .ok()
        });
    assert!(
        refused.is_some_and(|n| n > 0),
        "the server reported no refused REQ ({sent} sent): {s}"
    );
}
