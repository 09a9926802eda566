//! `mlx5ctl net`: TCP/IP through the driver's Ethernet queues and smoltcp. Two simulated NICs
//! in one process (ARP, ping, a TCP stream each way and UDP, every byte checked by the tool,
//! the wire written as pcap), then two processes on a pair of unix datagram links — each a
//! simulated NIC on a "real" link — pinging each other. (Against a Linux guest's own stack:
//! tests/rxe-qemu.)

use std::process::{Command, Stdio};

fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_mlx5ctl")
}

#[test]
fn two_simulated_nics_move_tcp_and_udp_with_every_byte_checked() {
    let pcap = std::env::temp_dir().join(format!("mlx5ctl-net-{}.pcap", std::process::id()));
    let out = Command::new(exe())
        .args([
            "net", "--pings", "3", "--mib", "2", "--udp", "512", "--pcap",
        ])
        .arg(&pcap)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for want in [
        "ping 10.0.0.2: 3 echo replies, payload intact",
        "tcp 10.0.0.1 -> 10.0.0.2: 2 MiB, every byte checked",
        "tcp 10.0.0.2 -> 10.0.0.1: 2 MiB, every byte checked",
        "udp: 512 datagrams of 1024 bytes from 16 source ports, each checked",
        "0 checksum drops, 0 errors",
    ] {
        assert!(text.contains(want), "{want:?} not in:\n{text}");
    }
    // The UDP flows (16 source ports) spread over the receiver's four RSS queues.
    let queues: Vec<u64> = text
        .lines()
        .find_map(|l| l.split("per receive queue [").nth(1))
        .unwrap()
        .trim_end_matches(']')
        .split(", ")
        .map(|n| n.parse().unwrap())
        .collect();
    assert_eq!(queues.len(), 4, "{text}");
    assert_eq!(queues.iter().sum::<u64>(), 512);
    assert!(queues.iter().all(|&n| n > 0), "{queues:?}");
    // Every frame the ports sent is in the capture: 24-byte header, 16 + length per frame.
    let sent: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("ports: ")?.split(' ').next()?.parse().ok())
        .unwrap();
    let bytes = std::fs::read(&pcap).unwrap();
    let _ = std::fs::remove_file(&pcap);
    let (mut at, mut frames) = (24usize, 0u64);
    while at + 16 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        at += 16 + len;
        frames += 1;
    }
    assert_eq!(at, bytes.len(), "whole records");
    assert_eq!(frames, sent);
}

#[test]
fn two_processes_ping_each_other_and_echo_tcp_over_a_link() {
    let dir = std::env::temp_dir().join(format!("mlx5ctl-net-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = (dir.join("a"), dir.join("b"));
    let run = |ours: &std::path::Path,
               theirs: &std::path::Path,
               mac: &str,
               ip: &str,
               peer: &str,
               tcp: [&str; 2]| {
        Command::new(exe())
            .args(["net", "--pings", "4", "--wait-secs", "30", "--linger", "3"])
            .args(tcp)
            .args(["--echo-bytes", "262144"])
            .args(["--mac", mac, "--ip", ip])
            .args(["--peer", peer, "--link"])
            .arg(format!("{}:{}", ours.display(), theirs.display()))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // x serves TCP echo, y sends 256 KiB through it and checks every byte.
    let x = run(
        &a,
        &b,
        "02:c5:5a:00:00:01",
        "10.0.0.1",
        "10.0.0.2",
        ["--echo", "5000"],
    );
    let y = run(
        &b,
        &a,
        "02:c5:5a:00:00:02",
        "10.0.0.2",
        "10.0.0.1",
        ["--echo-to", "5000"],
    );
    // Each pings, then lingers a moment answering the other's pings.
    for (p, peer) in [(x, "10.0.0.2"), (y, "10.0.0.1")] {
        let out = p.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains(&format!("ping {peer}: 4 echo replies, payload intact")),
            "{text}"
        );
        let tcp = if peer == "10.0.0.2" {
            "tcp echo: 262144 bytes echoed and the connection closed"
        } else {
            "tcp echo to 10.0.0.1:5000: 262144 bytes sent and every one back"
        };
        assert!(text.contains(tcp), "{text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
