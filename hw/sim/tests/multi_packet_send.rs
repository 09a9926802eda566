//! Enhanced multi-packet send WQEs (opcode 0x29), byte by byte and independent of the driver, as
//! Linux's mlx5e (`mlx5e_sq_xmit_mpwqe`, `mlx5e_xdp_mpwqe_add_dseg`) and DPDK write them: the
//! capability; one WQE — a control segment, one Ethernet segment with checksum flags, then a
//! packet per data segment (pointers and inline data) — puts each packet on the wire as a
//! frame with its checksums filled in, and completes once; a packet that cannot be gathered
//! fails the WQE and sends nothing of it.

mod common;

use common::datapath::{Mr, Node};
use common::eth_node::*;
use common::ethernet::ones;
use mlx5_ifc::prm::caps::PerProtocolNetworkingOffloadCaps as EthCaps;
use mlx5_ifc::View;
use mlx5_sim::Mode;

/// ENHANCED_MPSW.
const OPCODE: u32 = 0x29;

/// One packet of a multi-packet WQE: from `mr` at an offset, or inline.
enum Pkt<'a> {
    At(&'a Mr, u64, usize),
    Inline(&'a [u8]),
}

/// Posts one enhanced MPW WQE on `e` carrying `pkts` (checksum offloads on) and rings.
fn post_mpw(n: &Node, e: &mut Eth, pkts: &[Pkt<'_>]) -> u16 {
    let mut w = vec![0u8; 32];
    w[16 + 4] = 0xc0; // L3 and L4 checksums, for every packet
    for p in pkts {
        match p {
            Pkt::At(mr, off, len) => {
                w.extend_from_slice(&(*len as u32).to_be_bytes());
                w.extend_from_slice(&mr.key.to_be_bytes());
                w.extend_from_slice(&mr.va(*off).to_be_bytes());
            }
            Pkt::Inline(b) => {
                w.extend_from_slice(&(b.len() as u32 | 0x8000_0000).to_be_bytes());
                w.extend_from_slice(b);
                w.resize(w.len().next_multiple_of(16), 0);
            }
        }
    }
    post_wqe(n, e, OPCODE, w)
}

/// The IPv4 header and UDP checksums of `f` are right.
fn checksums_ok(f: &[u8]) -> bool {
    let ip = &f[14..34];
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let seg = &f[34..14 + total];
    let pseudo = ones(&ip[12..20], 17 + seg.len() as u64);
    ones(ip, 0) == 0xffff && ones(seg, u64::from(pseudo)) == 0xffff
}

#[test]
fn one_enhanced_mpw_wqe_sends_a_frame_per_data_segment() {
    let mut n = Node::new(Mode::Sync, 1);
    let caps = n.fx.p.query_cap(1, 1);
    let c = View::<EthCaps>::new(&caps).unwrap();
    assert_eq!(c.get(EthCaps::ENHANCED_MULTI_PKT_SEND_WQE), 1);
    assert_eq!(c.get(EthCaps::MULTI_PKT_SEND_WQE), 0, "no legacy MPW");

    let rx = n.reg_mr(64 * 1024, false, false, false);
    let (rqn, _, _) = posted_rq(&mut n, &rx, 0, 16);
    steer_own_mac_to(&mut n, rqn);
    let mut tx = sender(&mut n);
    let src = n.reg_mr(16 * 1024, false, false, false);
    let frames: Vec<Vec<u8>> = [300usize, 1400, 90]
        .iter()
        .enumerate()
        .map(|(k, &len)| own_frame(&n, len, k as u8 * 50))
        .collect();
    n.dev().dma_write(src.buf.iova, &frames[0]).unwrap();
    n.dev().dma_write(src.buf.iova + 4096, &frames[1]).unwrap();
    let idx = post_mpw(
        &n,
        &mut tx,
        &[
            Pkt::At(&src, 0, frames[0].len()),
            Pkt::At(&src, 4096, frames[1].len()),
            Pkt::Inline(&frames[2]),
        ],
    );
    let cqes = n.drain();
    let sends: Vec<_> = cqes.iter().filter(|c| c.opcode == 0).collect();
    assert_eq!(sends.len(), 1, "one completion for the WQE");
    assert_eq!((sends[0].wqe_opcode, sends[0].wqe_counter), (0x29, idx));
    let recvs: Vec<_> = cqes.iter().filter(|c| c.opcode == 2).collect();
    assert_eq!(recvs.len(), 3, "a frame per data segment");
    for (k, (f, c)) in frames.iter().zip(recvs).enumerate() {
        assert_eq!(c.byte_cnt as usize, f.len(), "frame {k}");
        let mut b = vec![0u8; f.len()];
        n.dev()
            .dma_read(rx.buf.iova + k as u64 * BUF, &mut b)
            .unwrap();
        assert_eq!(b[42..], f[42..], "frame {k}'s payload");
        assert!(checksums_ok(&b), "frame {k}: checksums computed");
    }
    assert_eq!(n.dev().datapath_counters().eth_tx_frames, 3);

    // A bad lkey on the second packet: the WQE fails (LOCAL_PROT_ERR), no frame leaves.
    let bad = Mr {
        key: 0x00ff_ff42,
        ..src
    };
    post_mpw(
        &n,
        &mut tx,
        &[Pkt::At(&src, 0, frames[0].len()), Pkt::At(&bad, 0, 100)],
    );
    let c = n.poll().expect("the error completion");
    assert_eq!((c.opcode, c.syndrome, c.wqe_opcode), (13, 0x04, 0x29));
    assert_eq!(n.dev().datapath_counters().eth_tx_frames, 3);
}
