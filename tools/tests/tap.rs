//! The external port on Linux TAP devices (issue #12 item 1): two `mlx5ctl rping` processes,
//! each a simulated ConnectX-5 whose port is a TAP device, the two TAPs joined by a Linux
//! bridge — the host kernel forwards every frame, CM MADs and RC traffic alike — and the host's
//! own network stack, holding an address on the bridge, resolving a simulated NIC's address by
//! ARP through the TAP (the port's address responder answers; the kernel's neighbour table
//! then holds the NIC's MAC).
//!
//! Creating TAP devices and a bridge needs CAP_NET_ADMIN: without it the test says so and
//! passes, unless `MLX5_REQUIRE_TAP=1` (CI sets it), which makes that a failure.

use std::process::{Command, Output, Stdio};

fn ip(args: &[&str]) -> Result<(), String> {
    let o = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        ))
    }
}

/// Two TAPs on a bridge, all up, the bridge at 10.77.0.254/24 (removed when dropped).
struct Lan {
    taps: [String; 2],
    bridge: String,
}

impl Lan {
    fn new() -> Result<Lan, String> {
        let n = std::process::id() % 100_000;
        let lan = Lan {
            taps: [format!("m5a{n}"), format!("m5b{n}")],
            bridge: format!("m5br{n}"),
        };
        for t in &lan.taps {
            ip(&["tuntap", "add", "dev", t, "mode", "tap"])?;
        }
        ip(&["link", "add", &lan.bridge, "type", "bridge"])?;
        for t in &lan.taps {
            ip(&["link", "set", t, "master", &lan.bridge])?;
        }
        for d in lan.taps.iter().chain([&lan.bridge]) {
            // No IPv6 chatter (router solicitations, MLD) on the test's wire.
            let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{d}/disable_ipv6"), "1");
            ip(&["link", "set", d, "up"])?;
        }
        ip(&["addr", "add", "10.77.0.254/24", "dev", &lan.bridge])?;
        Ok(lan)
    }
}

impl Drop for Lan {
    fn drop(&mut self) {
        let _ = ip(&["link", "del", &self.bridge]);
        for t in &self.taps {
            let _ = ip(&["tuntap", "del", "dev", t, "mode", "tap"]);
        }
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn rping_across_a_linux_bridge_and_the_host_resolves_the_nic() {
    let lan = match Lan::new() {
        Ok(l) => l,
        Err(why) => {
            assert!(
                std::env::var("MLX5_REQUIRE_TAP").as_deref() != Ok("1"),
                "TAP devices and a bridge are required here (MLX5_REQUIRE_TAP=1): {why}"
            );
            eprintln!("skipped: cannot make TAP devices and a bridge here: {why}");
            return;
        }
    };
    let exe = env!("CARGO_BIN_EXE_mlx5ctl");
    let server = Command::new(exe)
        .args(["rping", "-s", "-C", "20", "-V"])
        .args(["--mac", "02:c5:5a:00:07:01", "--ip", "10.77.0.1"])
        .args(["--tap", &lan.taps[0]])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The host's stack asks for the server's address (a datagram to it needs its MAC first):
    // the TAP port's responder answers with the simulated NIC's MAC.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let sock = std::net::UdpSocket::bind("10.77.0.254:0").unwrap();
    let mut resolved = String::new();
    for _ in 0..50 {
        let _ = sock.send_to(b"who", "10.77.0.1:4791");
        let o = Command::new("ip")
            .args(["neigh", "show", "10.77.0.1", "dev", &lan.bridge])
            .output()
            .unwrap();
        resolved = String::from_utf8_lossy(&o.stdout).to_string();
        if resolved.contains("02:c5:5a:00:07:01") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let client = Command::new(exe)
        .args(["rping", "-c", "-a", "10.77.0.1", "-C", "20", "-V"])
        .args(["--mac", "02:c5:5a:00:07:02", "--ip", "10.77.0.2"])
        .args(["--tap", &lan.taps[1]])
        .output()
        .unwrap();
    let server = server.wait_with_output().unwrap();
    let (c, s) = (text(&client), text(&server));
    assert!(
        resolved.contains("02:c5:5a:00:07:01"),
        "the host did not resolve 10.77.0.1: {resolved:?}"
    );
    assert!(client.status.success(), "client: {c}\nserver: {s}");
    assert!(server.status.success(), "server: {s}\nclient: {c}");
    assert!(
        c.contains("rping client: 20 pings, all data verified"),
        "{c}"
    );
    assert!(
        s.contains("rping server: 20 pings, client disconnected"),
        "{s}"
    );
}
