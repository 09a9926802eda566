//! Striding (multi-packet) Ethernet receive queues (issue #30 item 7): frames land one after
//! another in a posted buffer, each from a stride boundary; each completion names the buffer,
//! the frame's offset and length; the last completion of a buffer says it is done — a filler
//! with no bytes when the next frame does not fit the rest. On the simulated ConnectX-5
//! (`wq_type` 3, docs/fields.md "Striding RQ"), every byte checked.

mod common;

use common::*;
use mlx5::mr::MrAccess;
use mlx5::qp::{RecvWr, Sge};
use mlx5::raw::eth::{EthRq, EthSq, MacSteering, Strides, Tir, Tis, TransportDomain};
use mlx5::sim::{Fabric, Mode, Profile};
use mlx5::{Error, Wc, WcFlags, WcOpcode, WcStatus};

/// An Ethernet/IPv4/UDP frame of `len` bytes in all from `src` to `dst`, checksums zero.
fn frame(dst: [u8; 6], src: [u8; 6], len: usize, seed: u8) -> Vec<u8> {
    udp_frame(dst, src, len - 42, seed)
}

/// 64-byte strides, 16 to a buffer: 1 KiB buffers.
const STRIDES: Strides = Strides {
    log_stride_bytes: 6,
    log_num_strides: 4,
};

/// `(wr_id, offset, byte_len, done)` of each completion.
fn seen(wc: &[Wc]) -> Vec<(u64, u32, u32, bool)> {
    wc.iter()
        .map(|w| {
            assert_eq!((w.status, w.opcode), (WcStatus::Success, WcOpcode::Recv));
            let done = w.wc_flags.contains(WcFlags::RECV_BUFFER_DONE);
            (w.wr_id, w.offset, w.byte_len, done)
        })
        .collect()
}

#[test]
fn frames_fill_each_buffer_stride_by_stride_and_the_last_completion_gives_it_back() {
    let fabric = Fabric::new();
    let (_sa, a) = nic(&fabric, Mode::Sync);
    let (sb, b) = nic(&fabric, Mode::Sync);
    let (ma, mb) = (a.vport().mac, b.vport().mac);
    let td_a = TransportDomain::alloc(&a).unwrap();
    let tis = Tis::create(&a, &td_a).unwrap();
    let cq_a = a.create_cq(16).unwrap();
    let mut sq = EthSq::create(&a, &cq_a, &tis, 16).unwrap();
    let mr_a = a.alloc_mr(a.pd(), 1 << 15, MrAccess::default()).unwrap();

    let td_b = TransportDomain::alloc(&b).unwrap();
    let cq_b = b.create_cq(64).unwrap();
    let mut rq = EthRq::create_striding(&b, &cq_b, 4, STRIDES).unwrap();
    assert_eq!(rq.strides(), Some(STRIDES));
    let tir = Tir::direct(&b, &td_b, &rq).unwrap();
    let steer = MacSteering::create(&b, mb, &tir).unwrap();
    let bytes = STRIDES.buffer_bytes() as usize;
    assert_eq!(bytes, 1024);
    let write = MrAccess {
        local_write: true,
        ..MrAccess::default()
    };
    let mr_b = b.alloc_mr(b.pd(), 4 * bytes, write).unwrap();
    let sge = |k: usize| {
        [Sge {
            addr: mr_b.addr() + (k * bytes) as u64,
            length: bytes as u32,
            lkey: mr_b.lkey(),
        }]
    };
    let sges: Vec<[Sge; 1]> = (0..4).map(sge).collect();
    let recvs: Vec<RecvWr<'_>> = sges
        .iter()
        .enumerate()
        .map(|(k, s)| RecvWr {
            wr_id: 100 + k as u64,
            sg_list: s,
        })
        .collect();
    rq.post_recv(&recvs).unwrap();

    // 100, 200 and 600 bytes take 2, 4 and 10 strides: buffer 0 exactly. 300 takes 5 of
    // buffer 1; 800 needs 13 of the 11 left, so a filler gives those back and it goes to
    // buffer 2.
    let lens = [100, 200, 600, 300, 800];
    let frames: Vec<Vec<u8>> = lens
        .iter()
        .enumerate()
        .map(|(k, &n)| frame(mb, ma, n, k as u8))
        .collect();
    send_frames(&mut sq, &mr_a, &frames);
    wait(&cq_a, &a, 1);
    let wc = wait(&cq_b, &b, 6);
    assert_eq!(
        seen(&wc),
        [
            (100, 0, 100, false),
            (100, 128, 200, false),
            (100, 384, 600, true),
            (101, 0, 300, false),
            (101, 320, 0, true),
            (102, 0, 800, false),
        ]
    );
    // Every frame where its completion says, byte for byte.
    let landed = [(0, 0), (0, 128), (0, 384), (1, 0), (2, 0)];
    for (f, (k, off)) in frames.iter().zip(landed) {
        let mut got = vec![0u8; f.len()];
        mr_b.read(k * bytes + off, &mut got).unwrap();
        assert_eq!(&got, f, "buffer {k} at {off}");
    }
    let mut none = [Wc::default()];
    assert_eq!(cq_b.poll(&mut none).unwrap(), 0);

    // Buffers 0 and 1 are the user's again: posted once more, they take frames after buffer 3
    // (ring order). Each of 800, 900 and 1000 bytes (13, 15, 16 strides) meets a buffer with
    // too few strides left: a filler for the rest, the frame at stride 0 of the next; the
    // 1000 bytes fill buffer 0-again's successor (buffer 1) exactly.
    rq.post_recv(&recvs[..2]).unwrap();
    let more: Vec<Vec<u8>> = [800, 900, 1000]
        .iter()
        .enumerate()
        .map(|(k, &n)| frame(mb, ma, n, 10 + k as u8))
        .collect();
    send_frames(&mut sq, &mr_a, &more);
    let wc = wait(&cq_b, &b, 6);
    assert_eq!(
        seen(&wc),
        [
            (102, 832, 0, true),
            (103, 0, 800, false),
            (103, 832, 0, true),
            (100, 0, 900, false),
            (100, 960, 0, true),
            (101, 0, 1000, true),
        ]
    );
    for (f, k) in more.iter().zip([3, 0, 1]) {
        let mut got = vec![0u8; f.len()];
        mr_b.read(k * bytes, &mut got).unwrap();
        assert_eq!(&got, f, "buffer {k}");
    }
    assert_eq!(sb.datapath_counters().eth_rx_errors, 0);

    steer.destroy().unwrap();
    tir.destroy().unwrap();
    rq.destroy().unwrap();
    sq.destroy().unwrap();
    tis.destroy().unwrap();
}

#[test]
fn the_geometry_and_the_buffers_are_checked() {
    let fabric = Fabric::new();
    let (_s, d) = nic(&fabric, Mode::Sync);
    let cq = d.create_cq(16).unwrap();
    let field = |e: Error| match e {
        Error::InvalidArgument { field, .. } => field,
        other => panic!("{other:?}"),
    };
    for (bad, name) in [
        (
            Strides {
                log_stride_bytes: 6,
                log_num_strides: 2,
            },
            "log_num_strides",
        ),
        (
            Strides {
                log_stride_bytes: 6,
                log_num_strides: 17,
            },
            "log_num_strides",
        ),
        (
            Strides {
                log_stride_bytes: 5,
                log_num_strides: 9,
            },
            "log_stride_bytes",
        ),
        (
            Strides {
                log_stride_bytes: 14,
                log_num_strides: 9,
            },
            "log_stride_bytes",
        ),
    ] {
        let e = EthRq::create_striding(&d, &cq, 4, bad).unwrap_err();
        assert_eq!(field(e), name, "{bad:?}");
    }
    let mut rq = EthRq::create_striding(&d, &cq, 4, STRIDES).unwrap();
    let mr = d
        .alloc_mr(
            d.pd(),
            4096,
            MrAccess {
                local_write: true,
                ..MrAccess::default()
            },
        )
        .unwrap();
    let short = [Sge {
        addr: mr.addr(),
        length: 512,
        lkey: mr.lkey(),
    }];
    let e = rq
        .post_recv(&[RecvWr {
            wr_id: 1,
            sg_list: &short,
        }])
        .unwrap_err();
    assert_eq!(field(e), "length");
    rq.destroy().unwrap();

    // A device without striding RQs; one without the extended stride range (512 at least).
    for (json, strides, ok) in [
        (r#"{"striding_rq": 0}"#, STRIDES, false),
        (r#"{"ext_stride_num_range": 0}"#, STRIDES, false),
        (
            r#"{"ext_stride_num_range": 0}"#,
            Strides {
                log_stride_bytes: 6,
                log_num_strides: 9,
            },
            true,
        ),
    ] {
        let (_s, d) = nic_with(&fabric, Mode::Sync, Profile::from_json_str(json).unwrap());
        let cq = d.create_cq(16).unwrap();
        match EthRq::create_striding(&d, &cq, 4, strides) {
            Ok(rq) => {
                assert!(ok, "{json}");
                rq.destroy().unwrap();
            }
            Err(e) => assert!(!ok, "{json}: {e:?}"),
        };
    }
}
