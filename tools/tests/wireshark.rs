//! Wireshark (tshark), an implementation nobody here wrote, decodes what the simulated wire
//! carried during an `mlx5ctl rping` between two simulated NICs (`--pcap`): every frame RoCE v2
//! with no malformed packet, the connection manager's REQ/REP/RTU/DREQ/DREP as such, and the
//! REQ's fields — ServiceID (rdma_cm's TCP port space, port 7174), QPN, CM timeouts and
//! retries, P_Key, MTU, the IPv4-mapped GIDs and rdma_cm's private-data header — as we meant
//! them.
//!
//! Without `tshark` on the machine the test says so and passes, unless
//! `MLX5_REQUIRE_TSHARK=1` (CI installs it and sets that).

mod common;

use std::process::Command;
use std::time::Duration;

use common::Spawned;

fn tshark(args: &[&str]) -> String {
    let o = Command::new("tshark").args(args).output().unwrap();
    assert!(
        o.status.success(),
        "tshark {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).to_string()
}

#[test]
fn wireshark_decodes_the_connection_manager_and_rping() {
    if Command::new("tshark").arg("--version").output().is_err() {
        assert!(
            std::env::var("MLX5_REQUIRE_TSHARK").as_deref() != Ok("1"),
            "tshark is required here (MLX5_REQUIRE_TSHARK=1)"
        );
        eprintln!("skipped: no tshark on this machine");
        return;
    }
    let dir = std::env::temp_dir().join(format!("mlx5ctl-ws-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b, pcap) = (dir.join("a"), dir.join("b"), dir.join("wire.pcap"));
    let exe = env!("CARGO_BIN_EXE_mlx5ctl");
    let link =
        |x: &std::path::Path, y: &std::path::Path| format!("{}:{}", x.display(), y.display());
    let mut server = Spawned::new(
        Command::new(exe)
            .args(["rping", "-s", "-C", "3", "-V"])
            .args([
                "--mac",
                "02:c5:5a:00:00:01",
                "--ip",
                "10.0.0.1",
                "--link",
                &link(&a, &b),
            ])
            .arg("--pcap")
            .arg(&pcap),
    );
    // The client starts once the server listens: a REQ sent before would go unanswered and
    // be sent again seconds later (a busy machine made that happen about 1 run in 10).
    server.wait_for("rping server: listening", Duration::from_secs(120));
    let client = Command::new(exe)
        .args(["rping", "-c", "-a", "10.0.0.1", "-C", "3", "-V"])
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
    assert!(
        client.status.success() && status.success(),
        "server: {s}\nclient: {}{}",
        String::from_utf8_lossy(&client.stdout),
        String::from_utf8_lossy(&client.stderr)
    );
    let p = pcap.to_str().unwrap();

    // What the wire may carry: RoCE v2 (UDP 4791), and ARP — the NICs resolve each other's
    // IPv4-mapped GIDs through the links (a busy machine can make a resolution repeat). Nothing
    // else, nothing malformed.
    let summary = tshark(&["-r", p]);
    let all: Vec<&str> = summary.lines().collect();
    for f in &all {
        assert!(
            f.contains("RRoCE") || f.contains(" ARP "),
            "neither RoCE v2 nor ARP: {f}"
        );
        assert!(!f.contains("Malformed"), "{f}");
    }
    let frames: Vec<&str> = all
        .iter()
        .copied()
        .filter(|f| f.contains("RRoCE"))
        .collect();
    assert!(frames.len() > 30, "{summary}");
    // The connection manager's messages, in order; a message sent again (its timer ran out
    // before the answer came) is the protocol at work, so repeats in a row count once.
    let mut cm: Vec<&str> = frames
        .iter()
        .filter_map(|f| f.split("CM: ").nth(1))
        .map(str::trim)
        .collect();
    cm.dedup();
    assert_eq!(
        cm,
        [
            "ConnectRequest",
            "ConnectReply",
            "ReadyToUse",
            "DisconnectRequest",
            "DisconnectReply"
        ],
        "{summary}"
    );
    // rping's traffic: per ping a SEND, a READ, a SEND, a WRITE, a SEND each way as it goes.
    assert_eq!(
        frames
            .iter()
            .filter(|f| f.contains("RDMA Read Request"))
            .count(),
        3
    );
    assert_eq!(
        frames
            .iter()
            .filter(|f| f.contains("RDMA Write Only"))
            .count(),
        3
    );
    // The REQ, field by field as Wireshark reads it.
    let fields = [
        "infiniband.mad.classversion",
        "infiniband.cm.req.serviceid.protocol",
        "infiniband.cm.req.serviceid.dport",
        "infiniband.cm.req.remoteresptout",
        "infiniband.cm.req.transpsvctype",
        "infiniband.cm.req.localresptout",
        "infiniband.cm.req.retrcount",
        "infiniband.cm.req.pkey",
        "infiniband.cm.req.pppmtu",
        "infiniband.cm.req.rnrretrcount",
        "infiniband.cm.req.maxcmretr",
        "infiniband.cm.req.prim_locallid",
        "infiniband.cm.req.prim_localgid_ipv4",
        "infiniband.cm.req.prim_remotegid_ipv4",
        "infiniband.cm.req.prim_hoplim",
        "infiniband.cm.req.prim_localacktout",
    ];
    let mut args = vec![
        "-r",
        p,
        "-Y",
        "infiniband.mad.attributeid == 0x0010",
        "-T",
        "fields",
    ];
    for f in &fields {
        args.extend(["-e", f]);
    }
    let req = tshark(&args);
    let got: Vec<&str> = req.lines().next().unwrap_or("").split('\t').collect();
    assert_eq!(
        got,
        [
            "0x02", "0x06", "0x1c06", "0x14", "0x00", "0x14", "0x07", "0xffff", "0x03", "0x07",
            "0x0f", "65535", "10.0.0.2", "10.0.0.1", "0x40", "0x12"
        ],
        "{req}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Wireshark checks the checksums the simulated NICs' offload filled in `mlx5ctl net`'s
/// traffic (smoltcp was told not to compute them): every IPv4 header, TCP and UDP checksum
/// good, ARP, ICMP, TCP and UDP all present, nothing malformed.
#[test]
fn wireshark_verifies_the_offloaded_checksums_of_mlx5ctl_net() {
    if Command::new("tshark").arg("--version").output().is_err() {
        assert!(
            std::env::var("MLX5_REQUIRE_TSHARK").as_deref() != Ok("1"),
            "tshark is required here (MLX5_REQUIRE_TSHARK=1)"
        );
        eprintln!("skipped: no tshark on this machine");
        return;
    }
    let pcap = std::env::temp_dir().join(format!("mlx5ctl-ws-net-{}.pcap", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_mlx5ctl"))
        .args(["net", "--pings", "2", "--mib", "1", "--udp", "64", "--pcap"])
        .arg(&pcap)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let p = pcap.to_str().unwrap();
    let rows = tshark(&[
        "-r",
        p,
        "-o",
        "ip.check_checksum:TRUE",
        "-o",
        "tcp.check_checksum:TRUE",
        "-o",
        "udp.check_checksum:TRUE",
        "-T",
        "fields",
        "-E",
        "separator=;",
        "-e",
        "frame.protocols",
        "-e",
        "ip.checksum.status",
        "-e",
        "tcp.checksum.status",
        "-e",
        "udp.checksum.status",
    ]);
    let _ = std::fs::remove_file(&pcap);
    let (mut arp, mut icmp, mut tcp, mut udp) = (0, 0, 0, 0);
    for line in rows.lines() {
        let f: Vec<&str> = line.split(';').collect();
        let protos = f[0];
        assert!(!protos.contains("malformed"), "{line}");
        arp += usize::from(protos.contains(":arp"));
        icmp += usize::from(protos.contains(":icmp"));
        for (name, at, n) in [
            ("ip", 1, None),
            ("tcp", 2, Some(&mut tcp)),
            ("udp", 3, Some(&mut udp)),
        ] {
            if protos.split(':').any(|p| p == name) {
                // Wireshark's checksum status: 1 good (0 bad, 2 unverified).
                assert_eq!(f.get(at).copied(), Some("1"), "{name} checksum of: {line}");
                if let Some(n) = n {
                    *n += 1;
                }
            }
        }
    }
    assert!(arp >= 2 && icmp >= 4, "ARP {arp}, ICMP {icmp}");
    assert!(tcp > 700 && udp >= 64, "TCP {tcp}, UDP {udp}");
}
