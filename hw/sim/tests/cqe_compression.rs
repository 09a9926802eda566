//! CQE compression, byte by byte and independent of the driver (facts: docs/fields.md, "CQE
//! compression"; the layout Linux's mlx5e decompresses): the capabilities and CREATE_CQ's
//! refusals; a burst of receives written as one session — the title CQE (format 3, `byte_cnt`
//! the number of completions) and mini CQE arrays at slots title + 1 and title + 8 — read back
//! here as mlx5e reads them; a lone receive written plain; a striding RQ's session with stride
//! indices, broken by a filler CQE.

mod common;

use common::datapath::{Node, LOG_CQ};
use common::eth_node::*;
use common::ethernet::{made, ones};
use mlx5_ifc::consts::striding::{CQE_FILLER, CQE_STRIDES_SHIFT};
use mlx5_ifc::consts::wq_type;
use mlx5_ifc::prm::caps::CmdHcaCap;
use mlx5_ifc::prm::cq::{Cqc, CreateCqOut};
use mlx5_ifc::{CmdStatus, View};
use mlx5_sim::syndrome as syn;
use mlx5_sim::Mode;

/// `mini_cqe_res_format`.
const CSUM: u64 = 1;
const CSUM_STRIDX: u64 = 3;

/// A node whose CQ compresses with mini CQE format `format`.
fn node(format: u64) -> Node {
    Node::with_cq(Mode::Sync, 1, |c| {
        c.set(Cqc::CQE_COMP_EN, 1).unwrap();
        c.set(Cqc::MINI_CQE_RES_FORMAT, format).unwrap();
    })
}

/// The raw 64-byte slot `k` of the node's CQ.
fn slot(n: &Node, k: u32) -> [u8; 64] {
    let mut b = [0u8; 64];
    let at = u64::from(k & ((1 << LOG_CQ) - 1)) * 64;
    n.dev().dma_read(n.cq.iova + at, &mut b).unwrap();
    b
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// One completion as a driver sees it after decompressing: `(byte_cnt, check_sum,
/// wqe_counter)`.
type Rx = (u32, u16, u16);

/// How a decompressor finds each completion's WQE counter.
#[derive(Clone, Copy, PartialEq)]
enum Counter {
    /// A cyclic RQ: the title's, counting on by one.
    Cyclic,
    /// A striding RQ with CSUM_STRIDX: the mini CQE's stride index.
    StrideIndex,
}

/// Reads the CQ from slot `ci` on as Linux's mlx5e does (`mlx5e_decompress_cqes_start` /
/// `_cont`), `count` slots: a plain CQE is itself; a title (format 3) stands for `byte_cnt`
/// completions, completion `i` taking its byte count and checksum from mini CQE `i` (arrays
/// at title + 1, then at title + 8, + 16 …) and its WQE counter as `how` says. Returns the
/// completions and how many of them came from sessions.
fn decompress(n: &Node, ci: u32, count: u32, how: Counter) -> (Vec<Rx>, usize) {
    let (mut out, mut zipped, mut k) = (Vec::new(), 0, ci);
    while k < ci + count {
        let t = slot(n, k);
        assert_eq!(t[63] & 1, ((k >> LOG_CQ) & 1) as u8, "slot {k}: owner");
        if (t[63] >> 2) & 3 != 3 {
            out.push((be32(&t[44..]), be16(&t[20..]), be16(&t[60..])));
            k += 1;
            continue;
        }
        let total = be32(&t[44..]);
        let mut counter = be16(&t[60..]);
        let mut arr = slot(n, k + 1);
        for i in 0..total {
            if i > 0 && i % 8 == 0 {
                arr = slot(n, k + i);
            }
            let m = &arr[(i as usize % 8) * 8..][..8];
            let bc = be32(&m[4..]);
            let wc = if how == Counter::StrideIndex {
                be16(&m[2..])
            } else {
                counter
            };
            out.push((bc, be16(m), wc));
            counter = counter.wrapping_add(1);
        }
        zipped += total as usize;
        k += total;
    }
    (out, zipped)
}

#[test]
fn the_device_offers_compression_and_refuses_what_it_does_not_offer() {
    let mut n = Node::new(Mode::Sync, 1);
    let caps = n.fx.p.query_cap(0, 1);
    let g = View::<CmdHcaCap>::new(&caps).unwrap();
    assert_eq!(g.get(CmdHcaCap::CQE_COMPRESSION), 1);
    assert_eq!(g.get(CmdHcaCap::CQE_COMPRESSION_128), 1);
    assert_eq!(g.get(CmdHcaCap::MINI_CQE_RESP_STRIDE_INDEX), 1);
    assert_eq!(g.get(CmdHcaCap::CQE_COMPRESSION_MAX_NUM), 64);
    let eqn = n.eqn;
    // Format 2 is no mini CQE format; the enhanced layout is not offered.
    for (field, value) in [
        (Cqc::MINI_CQE_RES_FORMAT, 2),
        (Cqc::CQE_COMPRESSION_LAYOUT, 1),
    ] {
        let input = n.fx.cq_in(eqn, 4, |c| {
            c.set(Cqc::CQE_COMP_EN, 1).unwrap();
            c.set(field, value).unwrap();
        });
        n.fx.expect(
            &input,
            0x10,
            (CmdStatus::BadParam.raw(), syn::CQE_COMPRESSION),
        );
    }
    // 128-byte CQEs compress too; and the stride index format.
    for (sz, format) in [(1, CSUM), (0, CSUM_STRIDX)] {
        let input = n.fx.cq_in(eqn, 4, |c| {
            c.set(Cqc::CQE_SZ, sz).unwrap();
            c.set(Cqc::CQE_COMP_EN, 1).unwrap();
            c.set(Cqc::MINI_CQE_RES_FORMAT, format).unwrap();
        });
        made::<CreateCqOut>(&mut n.fx, &input, CreateCqOut::CQN);
    }
}

#[test]
fn a_burst_of_receives_is_one_session_and_a_lone_one_is_plain() {
    let mut n = node(CSUM);
    let mr = n.reg_mr(64 * 1024, false, false, false);
    let (rqn, _, _) = posted_rq(&mut n, &mr, 0, 16);
    steer_own_mac_to(&mut n, rqn);
    let mut tx = sender(&mut n);
    let src = n.reg_mr(64 * 1024, false, false, false);
    let frames: Vec<Vec<u8>> = (0..10u8)
        .map(|k| own_frame(&n, 100 + 37 * usize::from(k), k))
        .collect();
    send_burst(&n, &mut tx, &src, &frames);
    // The send completions first (each a plain CQE), then the receives, in one pass.
    for _ in 0..10 {
        assert_eq!(n.poll().map(|c| c.opcode), Some(0));
    }
    let title = slot(&n, 10);
    assert_eq!(title[63] >> 4, 2, "a receive's opcode");
    assert_eq!((title[63] >> 2) & 3, 3, "format 3: compressed");
    assert_eq!(
        be32(&title[44..]),
        10,
        "byte_cnt: the completions it stands for"
    );
    assert_eq!(be16(&title[60..]), 0, "the first completion's WQE counter");
    let (got, zipped) = decompress(&n, 10, 10, Counter::Cyclic);
    assert_eq!(zipped, 10);
    for (k, (f, rx)) in frames.iter().zip(&got).enumerate() {
        let mut b = vec![0u8; f.len()];
        n.dev()
            .dma_read(mr.buf.iova + k as u64 * BUF, &mut b)
            .unwrap();
        assert_eq!(b[42..], f[42..], "frame {k}'s payload");
        assert_eq!(
            *rx,
            (f.len() as u32, ones(&b[14..], 0), k as u16),
            "frame {k}"
        );
    }
    let c = n.dev().datapath_counters();
    assert_eq!((c.cqes_compressed, c.cqe_sessions, c.cqes), (10, 1, 20));

    // One frame alone: a plain CQE right after the session's slots.
    send(&n, &mut tx, &src, &own_frame(&n, 300, 7), 14, None);
    let (got, zipped) = decompress(&n, 20, 2, Counter::Cyclic);
    assert_eq!(zipped, 0);
    assert_eq!((got[1].0, got[1].2), (300, 10));
    assert_eq!(n.dev().datapath_counters().cqe_sessions, 1);
}

/// A striding RQ's burst with mini CQE format CSUM_STRIDX: each mini CQE carries its stride
/// index; the filler CQE where a frame does not fit ends the session (it is written plain),
/// and the frames in the next WQE make a session of their own.
#[test]
fn a_striding_rq_burst_carries_stride_indices_and_a_filler_ends_its_session() {
    let mut n = node(CSUM_STRIDX);
    let mr = n.reg_mr(4 * WQE_BYTES as usize, false, false, false);
    let (rqn, rq, rq_dbr) = striding_rq(&mut n, wq_type::CYCLIC_STRIDING_RQ, |_| {});
    for k in 0..4u64 {
        write_striding_wqe(&n, &rq, k, 0, mr.key, mr.va(k * WQE_BYTES));
    }
    n.dev().dma_write(rq_dbr.iova, &4u32.to_be_bytes()).unwrap();
    steer_own_mac_to(&mut n, rqn);
    let mut tx = sender(&mut n);
    let src = n.reg_mr(64 * 1024, false, false, false);
    // Strides 2, 1, 3 of WQE 0 (6 of 8), then 3 strides: a filler for 2, then WQE 1.
    let sizes = [1500usize, 900, 2500, 3000, 1000, 1000];
    let frames: Vec<Vec<u8>> = sizes.iter().map(|&l| own_frame(&n, l, l as u8)).collect();
    send_burst(&n, &mut tx, &src, &frames);
    for _ in 0..6 {
        assert_eq!(n.poll().map(|c| c.opcode), Some(0));
    }
    // Session (3 slots), filler (1), session (3 slots).
    let (got, zipped) = decompress(&n, 6, 7, Counter::StrideIndex);
    assert_eq!(zipped, 6);
    let strides = |s: u32, len: usize| s << CQE_STRIDES_SHIFT | len as u32;
    let counts: Vec<(u32, u16)> = got.iter().map(|r| (r.0, r.2)).collect();
    assert_eq!(
        counts,
        vec![
            (strides(2, 1500), 0),
            (strides(1, 900), 2),
            (strides(3, 2500), 3),
            (CQE_FILLER | 2 << CQE_STRIDES_SHIFT, 6),
            (strides(3, 3000), 0),
            (strides(1, 1000), 3),
            (strides(1, 1000), 4),
        ]
    );
    let filler = slot(&n, 9);
    assert_eq!((filler[63] >> 2) & 3, 0, "the filler is a plain CQE");
    assert_eq!(be16(&filler[2..]), 0, "of WQE 0");
    assert_eq!(
        be16(&slot(&n, 10)[2..]),
        1,
        "the second session's title: WQE 1"
    );
    assert_eq!(n.dev().datapath_counters().cqe_sessions, 2);
}
