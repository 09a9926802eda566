//! Ethernet through two simulated NICs on one fabric, byte by byte (independent of the driver):
//! NIC A sends from an SQ (SEND with the L2 header inline and checksum offloads, a VLAN-tagged
//! frame, a TSO WQE), NIC B steers by destination MAC (a root flow table, a group, an entry to
//! an indirect TIR over two RQs with Toeplitz RSS) into its RQs. The checks: the frames'
//! bytes as B's buffers hold them, every receive CQE field Linux's mlx5e reads (byte count,
//! WQE counter, checksum flags and sum, header types, VLAN, RSS hash and type), the RQ the
//! hash picked, and the drops a switch and the flow tables make (broadcast to a table without
//! a broadcast entry, a unicast MAC nobody has, an RQ without buffers).

mod common;

use common::cmd;
use common::datapath::{pair, Mr, Node};
use common::eth_node::*;
use common::ethernet::*;
use mlx5_ifc::prm::sq_rq::{ModifySqIn, Rqc, Sqc};
use mlx5_ifc::prm::tir::{CreateRqtOut, CreateTirIn, CreateTirOut, RxHashFieldSelect as Sel, Tirc};
use mlx5_ifc::{Opcode, View, ViewMut};
use mlx5_sim::Mode;

/// Microsoft's RSS verification key.
const KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];
/// Its hashes (addresses and ports, addresses only).
const HASH_4_TUPLE: u32 = 0x51cc_c178;
const HASH_2_TUPLE: u32 = 0x323e_8fc2;

/// The checks a receiver makes: IPv4 header checksum, then TCP/UDP over the pseudo-header.
fn checksums_ok(f: &[u8]) -> bool {
    let ip = &f[14..];
    let ihl = usize::from(ip[0] & 0xf) * 4;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let seg = &ip[ihl..total];
    let pseudo = ones(&ip[12..20], u64::from(ip[9]) + seg.len() as u64);
    ones(&ip[..ihl], 0) == 0xffff && ones(seg, u64::from(pseudo)) == 0xffff
}

/// B: two RQs of 16 WQEs (one 2 KiB buffer each, `posted` of them posted), an RQT, a Toeplitz
/// TIR over IPv4/UDP 4-tuples, and a root table whose one entry matches B's MAC.
fn receiver(n: &mut Node, mr: &Mr, posted: u16) -> Eth {
    receiver_with(n, mr, posted, |_| {})
}

/// Like `receiver`, with `edit` applied to both RQ contexts at creation.
fn receiver_with(n: &mut Node, mr: &Mr, posted: u16, edit: impl Fn(&mut ViewMut<'_, Rqc>)) -> Eth {
    let td = transport_domain(n);
    let mut rqs = Vec::new();
    for q in 0..2u64 {
        let (rqn, buf, dbr) = posted_rq_with(n, mr, q, posted, &edit);
        rqs.push((rqn, buf, dbr));
    }
    let rqns: Vec<u32> = rqs.iter().map(|r| r.0).collect();
    let rqt = made::<CreateRqtOut>(&mut n.fx, &rqt_in(&rqns, 2), CreateRqtOut::RQTN);
    let tir_in = cmd::<CreateTirIn>(Opcode::CreateTir, 0, |v| {
        let mut c = v.nested_mut(CreateTirIn::CTX);
        c.set(Tirc::DISP_TYPE, 1).unwrap();
        c.set(Tirc::TRANSPORT_DOMAIN, td.into()).unwrap();
        c.set(Tirc::INDIRECT_TABLE, rqt.into()).unwrap();
        c.set(Tirc::RX_HASH_FN, 2).unwrap();
        c.bytes_mut(Tirc::RX_HASH_TOEPLITZ_KEY)
            .copy_from_slice(&KEY);
        let mut s = c.nested_mut(Tirc::RX_HASH_FIELD_SELECTOR_OUTER);
        s.set(Sel::L3_PROT_TYPE, 0).unwrap(); // IPv4
        s.set(Sel::L4_PROT_TYPE, 1).unwrap(); // UDP
        s.set(Sel::SELECTED_FIELDS, 0xf).unwrap();
    });
    let tir = made::<CreateTirOut>(&mut n.fx, &tir_in, CreateTirOut::TIRN);
    let mac = n.mac();
    steer_mac_to(n, mac, &[tir]);
    Eth {
        td: 0,
        sqn: 0,
        sq: rqs[0].1,
        sq_dbr: rqs[0].2,
        sq_pi: 0,
        rqs,
    }
}

/// The raw 64-byte CQE B wrote last (the node's poll parses fewer fields).
fn raw_cqe(n: &Node) -> [u8; 64] {
    let slot = u64::from(n.cq_ci.wrapping_sub(1) & ((1 << common::datapath::LOG_CQ) - 1));
    let mut b = [0u8; 64];
    n.dev().dma_read(n.cq.iova + slot * 64, &mut b).unwrap();
    b
}

/// What B's RQ `q` buffer `k` holds (`len` bytes).
fn received(n: &Node, mr: &Mr, q: u64, k: u64, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    n.dev()
        .dma_read(mr.buf.iova + (q * 16 + k) * BUF, &mut b)
        .unwrap();
    b
}

#[test]
fn frames_cross_the_fabric_through_sq_steering_tir_rss_and_rq() {
    let (fabric, mut a, mut b) = pair(Mode::Sync);
    let (amr, bmr) = (
        a.reg_mr(64 * 1024, false, false, false),
        b.reg_mr(64 * 1024, false, false, false),
    );
    let mut tx = sender(&mut a);
    let rx = receiver(&mut b, &bmr, 8);

    // A UDP datagram with its checksums left to the device.
    let payload: Vec<u8> = (0..100u8).collect();
    let f = frame(b.mac(), a.mac(), 17, &payload);
    let idx = send(&a, &mut tx, &amr, &f, 14, None);
    fabric.run_until_idle();
    let c = a.poll().expect("A's send completion");
    assert_eq!(
        (c.opcode, c.wqe_opcode, c.qpn, c.wqe_counter),
        (0, 0x0a, tx.sqn, idx)
    );
    let c = b.poll().expect("B's receive completion");
    assert_eq!(
        (c.opcode, c.byte_cnt, c.wqe_counter),
        (2, f.len() as u32, 0)
    );
    let raw = raw_cqe(&b);
    let rss = u32::from_be_bytes(raw[12..16].try_into().unwrap());
    assert_eq!(rss, HASH_4_TUPLE, "Toeplitz over addresses and ports");
    assert_eq!(
        raw[16],
        0x01 | 0x04 | 0x20 | 0x80,
        "rss_hash_type: IPv4 and UDP, both ends"
    );
    assert_eq!(raw[28], 0x06, "hds_ip_ext: L3 and L4 checksums good");
    assert_eq!(raw[29], 2 << 4 | 2 << 2, "l4 UDP, l3 IPv4, no VLAN");
    let q = u64::from(HASH_4_TUPLE % 2);
    let got = received(&b, &bmr, q, 0, f.len());
    assert!(checksums_ok(&got), "the device filled both checksums");
    assert_eq!(got[..24], f[..24]);
    assert_eq!(got[26..40], f[26..40]);
    assert_eq!(got[42..], f[42..], "payload");
    let sum = u16::from_be_bytes([raw[20], raw[21]]);
    assert_eq!(
        sum,
        ones(&got[14..], 0),
        "check_sum: from the IP header to the end"
    );

    // A VLAN-tagged frame: the tag is stripped into the CQE.
    let mut tagged = f.clone();
    tagged.splice(12..12, [0x81, 0x00, 0x20, 0x07]);
    send(&a, &mut tx, &amr, &tagged, 18, None);
    fabric.run_until_idle();
    assert!(a.poll().is_some());
    let c = b.poll().expect("the tagged frame");
    assert_eq!((c.byte_cnt, c.wqe_counter), (f.len() as u32, 1));
    let raw = raw_cqe(&b);
    assert_eq!(raw[29] & 1, 1, "cv");
    assert_eq!(u16::from_be_bytes([raw[30], raw[31]]), 0x2007, "vlan_info");
    assert!(checksums_ok(&received(&b, &bmr, q, 1, f.len())));

    // TSO: 3000 bytes of TCP payload in segments of 1000; TCP to a UDP TIR hashes addresses only.
    let big: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
    let t = frame(b.mac(), a.mac(), 6, &big);
    send(&a, &mut tx, &amr, &t, 14 + 20 + 20, Some(1000));
    fabric.run_until_idle();
    let c = a.poll().expect("the TSO WQE's completion");
    assert_eq!(c.wqe_opcode, 0x0e);
    let q2 = u64::from(HASH_2_TUPLE % 2);
    let mut joined = Vec::new();
    for k in 0..3u16 {
        let c = b.poll().expect("a TSO segment");
        assert_eq!(c.byte_cnt, 14 + 40 + 1000);
        let raw = raw_cqe(&b);
        assert_eq!(
            u32::from_be_bytes(raw[12..16].try_into().unwrap()),
            HASH_2_TUPLE
        );
        let want_k = if q2 == q {
            u64::from(k) + 2
        } else {
            u64::from(k)
        };
        assert_eq!(u64::from(c.wqe_counter), want_k);
        let s = received(&b, &bmr, q2, want_k, c.byte_cnt as usize);
        assert!(checksums_ok(&s), "segment {k}");
        let seq = u32::from_be_bytes(s[38..42].try_into().unwrap());
        assert_eq!(seq, 7000 + 1000 * u32::from(k));
        assert_eq!(s[47] & 0x08 != 0, k == 2, "PSH on the last segment only");
        joined.extend_from_slice(&s[54..]);
    }
    assert_eq!(joined, big);

    // Drops: a broadcast has no entry in B's table; a unicast MAC nobody has is flooded by
    // the switch to B, whose table has no entry for it either; counted where they happen.
    let before = b.dev().datapath_counters();
    send(
        &a,
        &mut tx,
        &amr,
        &frame([0xff; 6], a.mac(), 17, &payload),
        14,
        None,
    );
    send(
        &a,
        &mut tx,
        &amr,
        &frame([2, 0, 0, 0, 0, 0x99], a.mac(), 17, &payload),
        14,
        None,
    );
    fabric.run_until_idle();
    assert_eq!(a.drain().len(), 2, "both sent");
    assert!(b.poll().is_none());
    let after = b.dev().datapath_counters();
    assert_eq!(
        after.eth_rx_steering_drops - before.eth_rx_steering_drops,
        2
    );
    assert_eq!(fabric.counters().unroutable, 0);
    assert_eq!(rx.rqs.len(), 2);
}

#[test]
fn an_rq_without_posted_buffers_drops_and_counts() {
    let (fabric, mut a, mut b) = pair(Mode::Sync);
    let (amr, bmr) = (
        a.reg_mr(8192, false, false, false),
        b.reg_mr(64 * 1024, false, false, false),
    );
    let mut tx = sender(&mut a);
    let rx = receiver(&mut b, &bmr, 0);
    let f = frame(b.mac(), a.mac(), 17, &[1, 2, 3]);
    send(&a, &mut tx, &amr, &f, 14, None);
    fabric.run_until_idle();
    assert!(b.poll().is_none());
    assert_eq!(b.dev().datapath_counters().eth_rx_out_of_buffer, 1);
    // One WQE posted on each RQ (the doorbell record): the same frame now lands, padded to
    // the 60-byte minimum by the sender.
    for (_, _, dbr) in &rx.rqs {
        b.dev().dma_write(dbr.iova, &1u32.to_be_bytes()).unwrap();
    }
    send(&a, &mut tx, &amr, &f, 14, None);
    fabric.run_until_idle();
    let c = b.poll().expect("delivered once a buffer is posted");
    assert_eq!((c.opcode, c.byte_cnt, c.wqe_counter), (2, 60, 0));
}

/// A direct TIR of domain `td` (with `self_lb_block` `block`) over a new RDY RQ of 16 posted
/// 2 KiB buffers at `mr` + `16 * slot * BUF`: `(tir, rqn)`.
fn direct_rx(n: &mut Node, mr: &Mr, slot: u64, td: u32, block: u64) -> (u32, u32) {
    let (rqn, _, _) = posted_rq(n, mr, slot, 16);
    let tir_in = cmd::<CreateTirIn>(Opcode::CreateTir, 0, |v| {
        let mut c = v.nested_mut(CreateTirIn::CTX);
        c.set(Tirc::INLINE_RQN, rqn.into()).unwrap();
        c.set(Tirc::TRANSPORT_DOMAIN, td.into()).unwrap();
        c.set(Tirc::SELF_LB_BLOCK, block).unwrap();
    });
    (
        made::<CreateTirOut>(&mut n.fx, &tir_in, CreateTirOut::TIRN),
        rqn,
    )
}

/// A device loops the multicast its SQs send back to its own port, as Linux's users rely on
/// (rdma-core's raw packet flow tests send to a multicast MAC between two QPs of one port;
/// mlx5e's TIRs block their own domain's with `self_lb_block`, mlx5_ib's vport setting turns
/// local loopback off when one user context is alone): the flow tables steer the copy, a TIR
/// of the sender's transport domain that blocks multicast self-loopback does not take it, one
/// of another domain does; with the vport's `disable_mc_local_lb` set nothing comes back.
#[test]
fn multicast_an_sq_sends_comes_back_past_the_tirs_of_its_domain_that_block_it() {
    looped_back_past_blocking_tirs(false);
}

/// A frame an SQ sends to its own port's MAC stays in the device — never on the wire — and
/// comes back as multicast does, past the TIRs of the sender's domain that block unicast
/// self-loopback (`self_lb_block` bit 0, as mlx5e's TIRs set it); the vport's
/// `disable_uc_local_lb` turns it off.
#[test]
fn unicast_to_the_ports_own_mac_comes_back_inside_the_device() {
    looped_back_past_blocking_tirs(true);
}

/// Sends a frame to a multicast group (or, `unicast`, to the port's own MAC) from an SQ and
/// checks who gets it back: a TIR of another domain does, one of the sender's domain that
/// blocks that kind does not; with the vport's local loopback of that kind off, nobody does.
fn looped_back_past_blocking_tirs(unicast: bool) {
    use mlx5_ifc::prm::vport::{
        ModifyNicVportContextIn as ModIn, ModifyNicVportFieldSelect as FieldSel,
        NicVportContext as Ctx,
    };
    let mut n = Node::new(Mode::Sync, 1);
    let mr = n.reg_mr(64 * 1024, false, false, false);
    let mut a = sender(&mut n);
    let other = transport_domain(&mut n);
    let block = if unicast { 1 } else { 2 };
    let (open_tir, open_rq) = direct_rx(&mut n, &mr, 0, other, 0);
    let (blocking_tir, _) = direct_rx(&mut n, &mr, 1, a.td, block);
    let dmac = if unicast {
        n.mac()
    } else {
        [0x01, 0x00, 0x5e, 0x00, 0x00, 0xfb]
    };
    steer_mac_to(&mut n, dmac, &[open_tir, blocking_tir]);
    let f = frame(dmac, n.mac(), 17, &[5; 40]);
    let src = n.reg_mr(4096, false, false, false);
    send(&n, &mut a, &src, &f, 14, None);
    let cqes = n.drain();
    let rx = cqes.iter().filter(|c| c.opcode == 0x2).count();
    assert_eq!(rx, 1, "received once");
    assert_eq!(
        received(&n, &mr, 0, 0, f.len())[..12],
        f[..12],
        "in RQ {open_rq:#x}, the other domain's TIR's"
    );
    assert_eq!(
        received(&n, &mr, 1, 0, 12),
        vec![0; 12],
        "not through the blocking TIR"
    );
    let c = n.dev().datapath_counters();
    assert_eq!((c.eth_rx_delivered, c.eth_rx_self_lb_blocked), (1, 1));
    // A unicast frame to the port itself never reaches the wire; a multicast one does.
    assert_eq!(c.tx_frames, if unicast { 0 } else { 1 });

    // The vport turns that kind of local loopback off: the next frame does not come back.
    n.fx.p.ok(
        &cmd::<ModIn>(Opcode::ModifyNicVportContext, 0, |v| {
            let (sel, field) = if unicast {
                (FieldSel::DISABLE_UC_LOCAL_LB, Ctx::DISABLE_UC_LOCAL_LB)
            } else {
                (FieldSel::DISABLE_MC_LOCAL_LB, Ctx::DISABLE_MC_LOCAL_LB)
            };
            v.nested_mut(ModIn::FIELD_SELECT).set(sel, 1).unwrap();
            v.nested_mut(ModIn::NIC_VPORT_CONTEXT)
                .set(field, 1)
                .unwrap();
        }),
        0x10,
    );
    send(&n, &mut a, &src, &f, 14, None);
    assert!(
        n.drain().iter().all(|c| c.opcode != 0x2),
        "nothing received"
    );
    let c = n.dev().datapath_counters();
    assert_eq!(
        (
            c.eth_rx_delivered,
            c.eth_rx_self_lb_blocked,
            c.eth_tx_frames
        ),
        (1, 1, 2)
    );
}

/// The device reports `wqe_inline_mode` 2 (not required), as a ConnectX-5 does: a SEND with no
/// inline header at all — the whole frame behind one data segment, as mlx5e then sends — puts
/// the same frame on the wire, its checksums computed.
#[test]
fn a_send_without_inline_headers_sends_the_frame_from_its_data_segment() {
    use mlx5_ifc::consts::wqe_inline_mode;
    use mlx5_ifc::prm::caps::PerProtocolNetworkingOffloadCaps as EthCaps;
    let (fabric, mut a, mut b) = pair(Mode::Sync);
    let caps = a.fx.p.query_cap(1, 1);
    let mode = View::<EthCaps>::new(&caps)
        .unwrap()
        .get(EthCaps::WQE_INLINE_MODE);
    assert_eq!(mode, wqe_inline_mode::NOT_REQUIRED);
    let (amr, bmr) = (
        a.reg_mr(64 * 1024, false, false, false),
        b.reg_mr(64 * 1024, false, false, false),
    );
    let mut tx = sender(&mut a);
    let _rx = receiver(&mut b, &bmr, 8);
    let payload: Vec<u8> = (0..200u8).collect();
    let f = frame(b.mac(), a.mac(), 17, &payload);
    send(&a, &mut tx, &amr, &f, 0, None);
    fabric.run_until_idle();
    assert_eq!(a.poll().map(|c| c.opcode), Some(0));
    let c = b.poll().expect("B's receive completion");
    assert_eq!((c.opcode, c.byte_cnt), (2, f.len() as u32));
    let got = received(&b, &bmr, 0, 0, f.len());
    // The frame as sent but for the checksums the device filled in (IPv4 header, UDP).
    let mut want = f.clone();
    want[24..26].copy_from_slice(&got[24..26]);
    want[40..42].copy_from_slice(&got[40..42]);
    assert_eq!(got, want);
    assert!(checksums_ok(&got));
}

/// Packet pacing as Linux's `mlx5_rl_add_rate` and mlx5_ib's raw packet QP rate limit drive it:
/// the QOS capability page, SET_PP_RATE_LIMIT and its refusals, MODIFY_SQ's rate index — and the
/// rate kept on the wire: each frame leaves once the previous one's bits have gone at the rate.
#[test]
fn a_rate_limited_sq_keeps_its_rate_on_the_wire() {
    use mlx5_ifc::consts::{cap_mode, cap_type};
    use mlx5_ifc::prm::pacing::{QosCap, SetPpRateLimitContext as Ctx, SetPpRateLimitIn};
    let (fabric, mut a, _b) = pair(Mode::Sync);
    let qos = a.fx.p.query_cap(cap_type::QOS, cap_mode::CUR);
    let q = View::<QosCap>::new(&qos).unwrap();
    assert_eq!(
        [
            QosCap::PACKET_PACING,
            QosCap::PACKET_PACING_MIN_RATE,
            QosCap::PACKET_PACING_MAX_RATE,
            QosCap::PACKET_PACING_RATE_TABLE_SIZE
        ]
        .map(|f| q.get(f)),
        [1, 1, 100_000_000, 128],
        "a 100 GbE ConnectX-5's packet pacing"
    );
    let rate = |index: u64, kbps: u64| {
        cmd::<SetPpRateLimitIn>(Opcode::SetPpRateLimit, 0, |v| {
            v.set(SetPpRateLimitIn::RATE_LIMIT_INDEX, index).unwrap();
            v.nested_mut(SetPpRateLimitIn::CTX)
                .set(Ctx::RATE_LIMIT, kbps)
                .unwrap();
        })
    };
    let (bad_index, bad_range) = ((0x03, 0x5e03_006c), (0x03, 0x5e03_006d));
    a.fx.expect(&rate(0, 1000), 0x10, bad_index);
    a.fx.expect(&rate(128, 1000), 0x10, bad_index);
    a.fx.expect(&rate(1, 100_000_001), 0x10, bad_range);
    // 8000 kbit/s: a byte a microsecond.
    a.fx.expect(&rate(1, 8000), 0x10, (0, 0));
    let amr = a.reg_mr(64 * 1024, false, false, false);
    let mut tx = sender(&mut a);
    let sqn = tx.sqn;
    let modify = |index: u64| {
        cmd::<ModifySqIn>(Opcode::ModifySq, 0, |v| {
            v.set(ModifySqIn::SQN, sqn.into()).unwrap();
            v.set(ModifySqIn::SQ_STATE, 1).unwrap();
            v.set(ModifySqIn::MODIFY_BITMASK, 1).unwrap();
            let mut c = v.nested_mut(ModifySqIn::CTX);
            c.set(Sqc::STATE, 1).unwrap();
            c.set(Sqc::PACKET_PACING_RATE_LIMIT_INDEX, index).unwrap();
        })
    };
    a.fx.expect(&modify(2), 0x10, bad_index);
    a.fx.expect(&modify(1), 0x10, (0, 0));

    fabric.keep_frames(16);
    let f = frame([0x02, 0, 0, 0, 0, 0x99], a.mac(), 17, &[7; 958]);
    for _ in 0..4 {
        send(&a, &mut tx, &amr, &f, 0, None);
    }
    let done: Vec<_> = std::iter::from_fn(|| a.wait(20_000_000)).take(4).collect();
    assert_eq!(done.len(), 4, "every frame sent");
    let times: Vec<u64> = fabric.captured().iter().map(|(t, _)| *t).collect();
    assert_eq!(times.len(), 4);
    let gap = f.len() as u64 * 1000;
    for w in times.windows(2) {
        assert!(
            w[1] - w[0] >= gap,
            "{times:?}: {gap} ns a frame at the rate"
        );
    }
    // Unpaced again (index 0): the next frames leave at once.
    a.fx.expect(&modify(0), 0x10, (0, 0));
    for _ in 0..2 {
        send(&a, &mut tx, &amr, &f, 0, None);
    }
    fabric.run_until_idle();
    let times: Vec<u64> = fabric.captured().iter().map(|(t, _)| *t).collect();
    assert_eq!(times.len(), 6);
    assert!(times[5] - times[4] < gap, "{times:?}");
}

/// Scatter FCS and PCI write end padding, as mlx5_ib creates a raw packet QP's RQ for
/// IBV_QP_CREATE_SCATTER_FCS and IBV_QP_CREATE_PCI_WRITE_END_PADDING: the frame's FCS (that of
/// the frame on the wire, least significant byte first) follows it and counts in the byte count;
/// the write then goes on with zeros to the end of its 64-byte line, which is not counted, and
/// nothing past that line is touched.
#[test]
fn scatter_fcs_puts_the_wire_fcs_after_the_frame_and_end_padding_fills_the_line() {
    use mlx5_ifc::prm::caps::{CmdHcaCap, PerProtocolNetworkingOffloadCaps as EthCaps};
    use mlx5_ifc::prm::srq::Wq;
    let (fabric, mut a, mut b) = pair(Mode::Sync);
    let eth_caps = b.fx.p.query_cap(1, 1);
    let general = b.fx.p.query_cap(0, 1);
    assert_eq!(
        (
            View::<EthCaps>::new(&eth_caps)
                .unwrap()
                .get(EthCaps::SCATTER_FCS),
            View::<CmdHcaCap>::new(&general)
                .unwrap()
                .get(CmdHcaCap::END_PAD)
        ),
        (1, 1)
    );
    let (amr, bmr) = (
        a.reg_mr(64 * 1024, false, false, false),
        b.reg_mr(64 * 1024, false, false, false),
    );
    b.dev().dma_write(bmr.buf.iova, &[0xee; 64 * 1024]).unwrap();
    let mut tx = sender(&mut a);
    let _rx = receiver_with(&mut b, &bmr, 8, |c| {
        c.set(Rqc::SCATTER_FCS, 1).unwrap();
        c.nested_mut(Rqc::WQ).set(Wq::END_PADDING_MODE, 1).unwrap();
    });
    fabric.keep_frames(4);
    let payload: Vec<u8> = (0..100u8).collect();
    let f = frame(b.mac(), a.mac(), 17, &payload);
    send(&a, &mut tx, &amr, &f, 0, None);
    fabric.run_until_idle();
    assert_eq!(a.poll().map(|c| c.opcode), Some(0));
    let c = b.poll().expect("B's receive completion");
    assert_eq!(
        (c.opcode, c.byte_cnt),
        (2, f.len() as u32 + 4),
        "frame and FCS"
    );
    let wire = fabric.captured()[0].1.clone();
    let fcs = crc32fast::hash(&wire).to_le_bytes();
    // The RQ the hash picked: find the buffer holding the frame.
    let (q, k) = [(0, 0), (1, 0)]
        .into_iter()
        .find(|&(q, k)| received(&b, &bmr, q, k, 14)[..6] == b.mac())
        .expect("the frame in an RQ's first buffer");
    let got = received(&b, &bmr, q, k, 256);
    let n = wire.len();
    assert_eq!(&got[..n], &wire[..]);
    assert_eq!(got[n..n + 4], fcs, "the FCS");
    let line_end = (n + 4).next_multiple_of(64);
    assert!(
        got[n + 4..line_end].iter().all(|&x| x == 0),
        "zeros to the line's end"
    );
    assert!(
        got[line_end..].iter().all(|&x| x == 0xee),
        "nothing past the line"
    );
}

/// Delay drop, as mlx5_ib arms it for an RQ made with IBV_WQ_FLAGS_DELAY_DROP: the RQ
/// (`delay_drop_en`) without a WQE holds a frame until one is posted; when none comes before
/// the timeout, the frame is dropped and counted, the device posts DELAY_DROP_TIMEOUT and
/// disarms delay drop — the next frame without a WQE is dropped at once — until
/// SET_DELAY_DROP_PARAMS again.
#[test]
fn an_rq_with_delay_drop_holds_frames_until_a_wqe_or_the_timeout() {
    use mlx5_ifc::prm::sq_rq::SetDelayDropParamsIn;
    let (fabric, mut a, mut b) = pair(Mode::Sync);
    let (amr, bmr) = (
        a.reg_mr(64 * 1024, false, false, false),
        b.reg_mr(64 * 1024, false, false, false),
    );
    let arm = cmd::<SetDelayDropParamsIn>(Opcode::SetDelayDropParams, 0, |v| {
        v.set(SetDelayDropParamsIn::DELAY_DROP_TIMEOUT, 10).unwrap(); // 1 ms
    });
    b.fx.expect(&arm, 0x10, (0, 0));
    let mut tx = sender(&mut a);
    let rx = receiver_with(&mut b, &bmr, 0, |c| {
        c.set(Rqc::DELAY_DROP_EN, 1).unwrap();
    });
    let f = frame(b.mac(), a.mac(), 17, &[3; 100]);
    send(&a, &mut tx, &amr, &f, 0, None);
    fabric.run_until_idle();
    assert!(b.poll().is_none(), "held: no WQE yet");
    assert_eq!(b.dev().datapath_counters().eth_rx_out_of_buffer, 0);
    // A WQE posted on every RQ (the hash picks one): the held frame lands within a poll.
    for (_, _, dbr) in &rx.rqs {
        b.dev().dma_write(dbr.iova, &1u32.to_be_bytes()).unwrap();
    }
    let c = b.wait(100_000).expect("the held frame lands");
    assert_eq!((c.opcode, c.byte_cnt), (2, f.len() as u32));

    // Again without a WQE: past the timeout, dropped and counted, the event, delay drop off.
    let before = b.dev().datapath_counters().eth_rx_out_of_buffer;
    let mut k = 0;
    while b.dev().datapath_counters().eth_rx_out_of_buffer == before {
        send(&a, &mut tx, &amr, &f, 0, None);
        fabric.run_until_idle();
        let _ = b.wait(2_000_000);
        k += 1;
        assert!(k < 8, "a frame is dropped in the end");
    }
    let ev = std::iter::from_fn(|| b.poll_eq()).find(|(t, _)| *t == 0x22);
    let (_, data) = ev.expect("a GENERAL_EVENT");
    assert_eq!(data[8] >> 4, 1, "port 1");
    let dropped = b.dev().datapath_counters().eth_rx_out_of_buffer;
    send(&a, &mut tx, &amr, &f, 0, None);
    fabric.run_until_idle();
    assert_eq!(
        b.dev().datapath_counters().eth_rx_out_of_buffer,
        dropped + 1,
        "disarmed: dropped at once"
    );
}

/// A send doorbell names its queue by a 24-bit number alone, a QP's or an Ethernet SQ's: SQs take
/// their numbers from the QPs' space. They used to be numbered on their own, from 1: after a few
/// hundred SQs (rdma-core's DR tests run over and over in one guest) an SQ took the number of
/// mlx5_ib's long-lived UMR QP, whose next doorbell went to the SQ and was refused as a bad
/// doorbell ("SQ 0x102 uses UAR 0x191, not UAR page 0x9"): the UMR never ran and the guest hung.
#[test]
fn sq_numbers_never_take_a_live_qps() {
    let mut n = Node::new(Mode::Sync, 1);
    let qp = n.create_qp(mlx5_ifc::consts::qp_st::RC);
    let td = transport_domain(&mut n);
    let tis_in = cmd::<mlx5_ifc::prm::tir::CreateTisIn>(Opcode::CreateTis, 0, |v| {
        v.nested_mut(mlx5_ifc::prm::tir::CreateTisIn::CTX)
            .set(mlx5_ifc::prm::tir::Tisc::TRANSPORT_DOMAIN, td.into())
            .unwrap();
    });
    let tis = made::<mlx5_ifc::prm::tir::CreateTisOut>(
        &mut n.fx,
        &tis_in,
        mlx5_ifc::prm::tir::CreateTisOut::TISN,
    );
    let mut past = false;
    for _ in 0..400 {
        let e = rdy_sq(&mut n, tis, |_| {});
        assert_ne!(e.sqn, qp.qpn, "an SQ took a live QP's number");
        past |= e.sqn > qp.qpn;
        n.fx.p.ok(
            &by_id::<mlx5_ifc::prm::sq_rq::DestroySqIn>(
                Opcode::DestroySq,
                mlx5_ifc::prm::sq_rq::DestroySqIn::SQN,
                e.sqn,
            ),
            0x10,
        );
    }
    assert!(past, "the SQ numbers went past the QP's");
}
