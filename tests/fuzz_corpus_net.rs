//! The committed corpora of the network fuzz targets (tests/fuzz/corpus/eth_frames and
//! external_port), replayed through the targets' own bodies in every `cargo test`: Ethernet
//! frames into an `EthPort` under smoltcp, and frames into the simulator's external port. Each
//! input must run without a panic, and a few hand-written seeds must do what they were written
//! for (a SYN answered, a bad checksum refused, a jumbo frame counted as an error), so that a
//! change to the bodies cannot quietly make the seeds miss their paths.

#[path = "fuzz/fuzz_targets/net/eth.rs"]
mod eth;
#[path = "fuzz/fuzz_targets/net/external.rs"]
mod external;
#[path = "fuzz/fuzz_targets/net/frames.rs"]
mod frames;

use std::path::{Path, PathBuf};

fn corpus(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz/corpus")
        .join(target);
    let mut inputs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    inputs.sort();
    assert!(inputs.len() >= 10, "a corpus in {}", dir.display());
    inputs
}

/// Runs `f` on a thread with an 8 MiB stack (smoltcp's interface is a large value).
fn big_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn the_eth_frames_corpus_runs_and_its_seeds_reach_their_paths() {
    big_stack(|| {
        for p in corpus("eth_frames") {
            let data = std::fs::read(&p).unwrap();
            let s = eth::run(&data);
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            eprintln!("{name}: {s:?}");
            match name.as_str() {
                // ARP reply and SYN-ACK.
                "tcp-syn" => assert!(s.passed == 2 && s.answered >= 2, "{name}: {s:?}"),
                // ARP reply and echo reply.
                "icmp-echo" | "icmp-echo-vlan" => {
                    assert!(s.passed == 2 && s.answered == 2, "{name}: {s:?}")
                }
                "udp-echo" => assert!(s.passed == 2 && s.answered == 2, "{name}: {s:?}"),
                "tcp-bad-checksum" => assert_eq!(s.refused, 1, "{name}: {s:?}"),
                "jumbo" => assert_eq!((s.errors, s.passed), (1, 2), "{name}: {s:?}"),
                "steering" => assert_eq!((s.steering_drops, s.passed), (2, 1), "{name}: {s:?}"),
                _ => {}
            }
        }
        eth::finish();
    });
}

#[test]
fn the_external_port_corpus_runs_and_its_seeds_reach_their_paths() {
    for p in corpus("external_port") {
        let data = std::fs::read(&p).unwrap();
        let s = external::run(&data);
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        eprintln!("{name}: {s:?}");
        match name.as_str() {
            // The responder's answer, nothing to the NIC.
            "arp-request-for-the-nic" | "nd-solicitation" => {
                assert_eq!(
                    (s.answered, s.sent, s.nic_frames),
                    (1, 1, 0),
                    "{name}: {s:?}"
                )
            }
            // A receive completion (and an ACK for the RC ones).
            "roce-v2-send" | "roce-v2-ipv6" | "roce-v1-send" => {
                assert_eq!((s.completions, s.sent), (1, 1), "{name}: {s:?}")
            }
            "roce-v2-ud-send" => assert_eq!(s.completions, 1, "{name}: {s:?}"),
            // ACK, READ response, two atomic ACKs; nothing dropped.
            "roce-v2-write-read-atomic" => {
                assert_eq!((s.sent, s.nic_dropped), (4, 0), "{name}: {s:?}")
            }
            // 32 new neighbours (the table is bounded far above).
            "arp-flood" => assert!(s.taken == 32 && s.neighbours >= 32, "{name}: {s:?}"),
            // The 13-byte frame is not taken.
            "truncated" => assert_eq!(s.taken, 4, "{name}: {s:?}"),
            _ => {}
        }
    }
    external::finish();
}
