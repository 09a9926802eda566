//! Compressed CQEs on the polling side (issue #30 item 7): a CQ made with `cqe_comp_en` takes an
//! Ethernet RQ's receive completions as the simulated ConnectX-5 writes them under a burst — a
//! title and arrays of mini CQEs (docs/fields.md "CQE compression") — and `poll` gives them as
//! completions like any other: polled a few at a time (a session across polls), round the ring
//! many times (a slot a session used must not pass for a completion the next time round), on a
//! regular and on a striding RQ, in the three mini CQE formats. The simulator's counters show
//! the sessions happened.

mod common;

use common::*;
use mlx5::cq::{Cq, MiniCqe};
use mlx5::mr::MrAccess;
use mlx5::qp::{RecvWr, Sge};
use mlx5::raw::eth::{EthRq, EthSq, MacSteering, Strides, Tir, Tis, TransportDomain};
use mlx5::sim::{Fabric, Mode, Profile, SimDevice};
use mlx5::{Error, SimPlatform, Wc, WcFlags, WcOpcode, WcStatus};

/// An Ethernet/IPv4/UDP frame of `len` bytes in all, checksums zero.
fn frame(dst: [u8; 6], src: [u8; 6], len: usize, seed: u8) -> Vec<u8> {
    udp_frame(dst, src, len - 42, seed)
}

/// Polls `want` completions `chunk` at a time.
fn poll_in(cq: &Cq<'_, SimPlatform>, want: usize, chunk: usize) -> Vec<Wc> {
    let mut out = Vec::new();
    let mut buf = vec![Wc::default(); chunk];
    for _ in 0..10_000 {
        if out.len() >= want {
            break;
        }
        let n = cq.poll(&mut buf[..chunk.min(want - out.len())]).unwrap();
        out.extend_from_slice(&buf[..n]);
    }
    assert_eq!(out.len(), want, "completions");
    out
}

/// The receive side: B's RQ (regular of 64 buffers, or striding) on a CQ compressing as `mini`
/// says, steered from B's MAC; A's sender.
struct Rig {
    sa: SimDevice,
    sb: SimDevice,
    a: Dev,
    b: Dev,
}

fn rig(fabric: &Fabric) -> Rig {
    let (sa, a) = nic(fabric, Mode::Sync);
    let (sb, b) = nic(fabric, Mode::Sync);
    Rig { sa, sb, a, b }
}

#[test]
fn bursts_of_receives_come_compressed_and_poll_as_plain_completions_round_the_ring() {
    let fabric = Fabric::new();
    let r = rig(&fabric);
    let (a, b) = (&r.a, &r.b);
    let (ma, mb) = (a.vport().mac, b.vport().mac);
    let td_a = TransportDomain::alloc(a).unwrap();
    let tis = Tis::create(a, &td_a).unwrap();
    let cq_a = a.create_cq(64).unwrap();
    let mut sq = EthSq::create(a, &cq_a, &tis, 64).unwrap();
    let mr_a = a.alloc_mr(a.pd(), 1 << 17, MrAccess::default()).unwrap();
    let td_b = TransportDomain::alloc(b).unwrap();
    // 64 slots: 24 frames a round go round the ring nine times in 25 rounds.
    let cq_b = b.create_cq_compressed(63, MiniCqe::Checksum).unwrap();
    let mut rq = EthRq::create(b, &cq_b, 64).unwrap();
    let tir = Tir::direct(b, &td_b, &rq).unwrap();
    let steer = MacSteering::create(b, mb, &tir).unwrap();
    let write = MrAccess {
        local_write: true,
        ..MrAccess::default()
    };
    let mr_b = b.alloc_mr(b.pd(), 64 * 2048, write).unwrap();
    let sges: Vec<[Sge; 1]> = (0..64)
        .map(|k| {
            [Sge {
                addr: mr_b.addr() + k * 2048,
                length: 2048,
                lkey: mr_b.lkey(),
            }]
        })
        .collect();
    let recv = |k: usize| RecvWr {
        wr_id: 1000 + k as u64,
        sg_list: &sges[k],
    };
    let all: Vec<RecvWr<'_>> = (0..64).map(recv).collect();
    rq.post_recv(&all).unwrap();
    let mut next = 0usize;
    for round in 0..25u8 {
        let frames: Vec<Vec<u8>> = (0..24)
            .map(|k| {
                frame(
                    mb,
                    ma,
                    60 + 37 * k,
                    round.wrapping_mul(24).wrapping_add(k as u8),
                )
            })
            .collect();
        send_frames(&mut sq, &mr_a, &frames);
        wait(&cq_a, a, 1);
        // A few at a time: a session is given out over several polls.
        let wc = poll_in(&cq_b, 24, 5);
        for (w, f) in wc.iter().zip(&frames) {
            assert_eq!(
                (w.status, w.opcode, w.wr_id, w.byte_len),
                (
                    WcStatus::Success,
                    WcOpcode::Recv,
                    1000 + next as u64,
                    f.len() as u32
                ),
                "round {round}"
            );
            let mut got = vec![0u8; f.len()];
            mr_b.read(next * 2048, &mut got).unwrap();
            assert_eq!(&got, f, "round {round}");
            rq.post_recv(&[recv(next)]).unwrap();
            next = (next + 1) % 64;
        }
        let mut none = [Wc::default()];
        assert_eq!(
            cq_b.poll(&mut none).unwrap(),
            0,
            "round {round}: nothing more"
        );
    }
    let c = r.sb.datapath_counters();
    assert!(
        c.cqe_sessions >= 25 && c.cqes_compressed >= 25 * 20,
        "the device compressed: {c:?}"
    );
    assert_eq!(r.sa.datapath_counters().eth_rx_errors, 0);
    steer.destroy().unwrap();
    tir.destroy().unwrap();
    rq.destroy().unwrap();
    sq.destroy().unwrap();
    tis.destroy().unwrap();
}

/// A striding RQ on a compressed CQ: the mini CQEs' stride index (CHECKSUM_STRIDX), or the
/// driver's count of the strides before each (CHECKSUM), place every frame.
#[test]
fn a_striding_rq_places_compressed_receives_by_stride() {
    for mini in [
        MiniCqe::ChecksumStrideIndex,
        MiniCqe::Checksum,
        MiniCqe::Hash,
    ] {
        let fabric = Fabric::new();
        let r = rig(&fabric);
        let (a, b) = (&r.a, &r.b);
        let (ma, mb) = (a.vport().mac, b.vport().mac);
        let td_a = TransportDomain::alloc(a).unwrap();
        let tis = Tis::create(a, &td_a).unwrap();
        let cq_a = a.create_cq(64).unwrap();
        let mut sq = EthSq::create(a, &cq_a, &tis, 64).unwrap();
        let mr_a = a.alloc_mr(a.pd(), 1 << 17, MrAccess::default()).unwrap();
        let td_b = TransportDomain::alloc(b).unwrap();
        let cq_b = b.create_cq_compressed(255, mini).unwrap();
        // 64-byte strides, 256 to a buffer: 16 KiB.
        let strides = Strides {
            log_stride_bytes: 6,
            log_num_strides: 8,
        };
        let mut rq = EthRq::create_striding(b, &cq_b, 4, strides).unwrap();
        let tir = Tir::direct(b, &td_b, &rq).unwrap();
        let steer = MacSteering::create(b, mb, &tir).unwrap();
        let bytes = strides.buffer_bytes() as usize;
        let write = MrAccess {
            local_write: true,
            ..MrAccess::default()
        };
        let mr_b = b.alloc_mr(b.pd(), 4 * bytes, write).unwrap();
        let sges: Vec<[Sge; 1]> = (0..4)
            .map(|k| {
                [Sge {
                    addr: mr_b.addr() + (k * bytes) as u64,
                    length: bytes as u32,
                    lkey: mr_b.lkey(),
                }]
            })
            .collect();
        let recvs: Vec<RecvWr<'_>> = sges
            .iter()
            .enumerate()
            .map(|(k, s)| RecvWr {
                wr_id: 7 + k as u64,
                sg_list: s,
            })
            .collect();
        rq.post_recv(&recvs).unwrap();
        // 40 frames of 100..490 bytes (2 to 8 strides): 190 strides, inside buffer 0.
        let frames: Vec<Vec<u8>> = (0..40)
            .map(|k| frame(mb, ma, 100 + 10 * k, k as u8))
            .collect();
        send_frames(&mut sq, &mr_a, &frames);
        wait(&cq_a, a, 1);
        let wc = poll_in(&cq_b, 40, 7);
        let mut off = 0u32;
        for (w, f) in wc.iter().zip(&frames) {
            assert_eq!(
                (w.status, w.wr_id, w.offset, w.byte_len),
                (WcStatus::Success, 7, off, f.len() as u32),
                "{mini:?}"
            );
            assert!(!w.wc_flags.contains(WcFlags::RECV_BUFFER_DONE));
            let mut got = vec![0u8; f.len()];
            mr_b.read(off as usize, &mut got).unwrap();
            assert_eq!(&got, f, "{mini:?} at {off}");
            off += (f.len() as u32).div_ceil(64) * 64;
        }
        let c = r.sb.datapath_counters();
        assert!(
            c.cqe_sessions >= 1 && c.cqes_compressed >= 30,
            "{mini:?}: {c:?}"
        );
        steer.destroy().unwrap();
        tir.destroy().unwrap();
        rq.destroy().unwrap();
        sq.destroy().unwrap();
        tis.destroy().unwrap();
    }
}

#[test]
fn compression_is_refused_where_the_device_does_not_offer_it() {
    let fabric = Fabric::new();
    let unsupported = |e: Error| matches!(e, Error::Unsupported { .. });
    for (json, mini) in [
        (r#"{"cqe_compression": 0}"#, MiniCqe::Checksum),
        (
            r#"{"mini_cqe_resp_stride_index": 0}"#,
            MiniCqe::ChecksumStrideIndex,
        ),
    ] {
        let (_s, d) = nic_with(&fabric, Mode::Sync, Profile::from_json_str(json).unwrap());
        let e = d.create_cq_compressed(63, mini).unwrap_err();
        assert!(unsupported(e), "{json}");
    }
    let (_s, d) = nic_with(
        &fabric,
        Mode::Sync,
        Profile::from_json_str(r#"{"mini_cqe_resp_stride_index": 0}"#).unwrap(),
    );
    d.create_cq_compressed(63, MiniCqe::Checksum)
        .unwrap()
        .destroy()
        .unwrap();
}
