//! The data path at the byte level, with WQEs written by the test itself: loopback on one
//! device, RC SEND / RDMA WRITE / READ / atomics, UD with its GRH, UC, send queue wrap,
//! BlueFlame, the pcap capture, and a threaded run.

mod common;

use common::datapath::*;
use mlx5_ifc::consts::qp_st::{QP1, RC, UC, UD};
use mlx5_ifc::prm::qp::Qpc;
use mlx5_ifc::prm::srq::{CreateRmpIn, CreateRmpOut, QueryRmpIn, QueryRmpOut, Rmpc, Wq};
use mlx5_ifc::{Be64, Layout, Opcode, View, ViewMut};
use mlx5_sim::{DmaFaultKind, Mode, WireFault, PCAP_MAGIC_NS};

const SIGNALED: u8 = 0x08;
const SEND: u8 = 0x0a;
const SEND_IMM: u8 = 0x0b;
const WRITE: u8 = 0x08;
const WRITE_IMM: u8 = 0x09;
const READ: u8 = 0x10;
const CS: u8 = 0x11;
const FA: u8 = 0x12;
const REQ: u8 = 0x0;
const RESP_WR_IMM: u8 = 0x1;
const RESP_SEND: u8 = 0x2;
const RESP_SEND_IMM: u8 = 0x3;

#[test]
fn loopback_send_recv_and_blueflame_on_one_device() {
    let mut n = Node::new(Mode::Sync, 1);
    let (mut qa, mut qb) = (n.create_qp(RC), n.create_qp(RC));
    n.connect(&qa, 1, qb.qpn, |_| {});
    n.connect(&qb, 1, qa.qpn, |_| {});
    let src = n.reg_mr(8192, false, false, false);
    let dst = n.reg_mr(8192, false, false, false);
    let dev = n.dev();
    let data = fill(&dev, &src, 7);
    n.post_recv(
        &mut qb,
        &[(100, dst.key, dst.va(0)), (5000, dst.key, dst.va(200))],
    );
    let idx = n.post_send(
        &mut qa,
        SEND_IMM,
        SIGNALED,
        [1, 2, 3, 4],
        &[Seg::Data(3000, src.key, src.va(10))],
    );
    let cqes = n.drain();
    assert_eq!(cqes.len(), 2, "{cqes:?}");
    let (recv, send) = (cqes[0], cqes[1]);
    assert_eq!(
        (
            recv.opcode,
            recv.qpn,
            recv.byte_cnt,
            recv.imm,
            recv.wqe_counter
        ),
        (RESP_SEND_IMM, qb.qpn, 3000, [1, 2, 3, 4], 0)
    );
    assert_eq!(recv.srqn_uidx, 0x77, "CQE version 1: the user index");
    assert_eq!(
        (send.opcode, send.wqe_opcode, send.qpn, send.wqe_counter),
        (REQ, SEND_IMM, qa.qpn, idx)
    );
    assert_eq!(read(&dev, &dst, 0, 100), &data[10..110]);
    assert_eq!(read(&dev, &dst, 200, 2900), &data[110..3010]);
    assert_eq!(read(&dev, &dst, 100, 100), vec![0; 100], "between the SGEs");

    // BlueFlame with inline data: the copy matches the ring, no fault.
    n.post_recv(&mut qb, &[(64, dst.key, dst.va(4096))]);
    n.post_send_bf(
        &mut qa,
        SEND,
        SIGNALED,
        [0; 4],
        &[Seg::Inline(b"blue flame!".to_vec())],
    );
    let cqes = n.drain();
    assert_eq!(cqes[0].opcode, RESP_SEND);
    assert_eq!(cqes[0].byte_cnt, 11);
    assert_eq!(read(&dev, &dst, 4096, 11), b"blue flame!");
    assert!(dev.dma_faults().is_empty(), "{:?}", dev.dma_faults());
    assert_eq!(dev.cqe_count(n.cqn), Some(4));
    assert_eq!(dev.wqes_executed(), 2);
    assert!(dev.fabric().counters().frames >= 4, "loopback frames");

    // A BlueFlame word that differs from the send queue is recorded.
    n.post_recv(&mut qb, &[(64, dst.key, dst.va(4096))]);
    n.post_send(&mut qa, SEND, 0, [0; 4], &[Seg::Inline(vec![1; 8])]);
    let uar = u64::from(n.fx.uar) * 4096;
    dev.bar_write64(uar + 0x800 + 8, Be64::new(0xdead));
    let faults = dev.dma_faults();
    assert_eq!(faults.len(), 1);
    assert_eq!(faults[0].kind, DmaFaultKind::BlueFlameMismatch);
    // Past the WQE's DS units (2 here: 32 bytes) the copy's last block carries whatever the
    // host's buffer held, which the device ignores, as rdma-core's copy does: no fault.
    for at in [32, 40, 56] {
        dev.bar_write64(uar + 0x800 + at, Be64::new(0xdead));
    }
    assert_eq!(dev.dma_faults().len(), 1, "{:?}", dev.dma_faults());
}

#[test]
fn rc_send_between_two_devices_byte_by_byte() {
    let (fabric, mut a, mut b) = pair(Mode::Sync);
    let (mut qa, mut qb) = connected(&mut a, &mut b, RC, |_| {});
    let src = a.reg_mr(16384, false, false, false);
    let dst = b.reg_mr(16384, false, false, false);
    let data = fill(&a.dev(), &src, 3);
    b.post_recv(&mut qb, &[(10000, dst.key, dst.va(0))]);
    a.post_send(
        &mut qa,
        SEND,
        SIGNALED,
        [0; 4],
        &[Seg::Data(5000, src.key, src.va(1))],
    );
    let r = b.poll().expect("responder CQE");
    assert_eq!(
        (r.opcode, r.qpn, r.byte_cnt, r.wqe_counter),
        (RESP_SEND, qb.qpn, 5000, 0)
    );
    let s = a.poll().expect("requester CQE");
    assert_eq!(
        (s.opcode, s.wqe_opcode, s.qpn, s.wqe_counter),
        (REQ, SEND, qa.qpn, 0)
    );
    let got = read(&b.dev(), &dst, 0, 5001);
    for (i, (g, w)) in got.iter().zip(&data[1..5001]).enumerate() {
        assert_eq!(g, w, "byte {i}");
    }
    assert_eq!(got[5000], 0, "nothing past the message");
    let c = fabric.counters();
    assert_eq!(c.frames, 5 + 1, "five MTU-sized packets and one ACK");
    assert_eq!((c.dropped, c.unroutable), (0, 0));

    // An unsignaled WQE completes without a requester CQE.
    b.post_recv(&mut qb, &[(16, dst.key, dst.va(0))]);
    a.post_send(&mut qa, SEND, 0, [0; 4], &[Seg::Inline(vec![9; 16])]);
    assert_eq!(b.poll().map(|c| c.opcode), Some(RESP_SEND));
    assert_eq!(a.poll(), None);
    assert!(a.dev().dma_faults().is_empty() && b.dev().dma_faults().is_empty());
}

#[test]
fn rdma_write_read_and_atomics() {
    let (_fabric, mut a, mut b) = pair(Mode::Sync);
    let (mut qa, mut qb) = connected(&mut a, &mut b, RC, |_| {});
    let la = a.reg_mr(8192, false, false, false);
    let rb = b.reg_mr(8192, true, true, true);
    let (da, db) = (a.dev(), b.dev());
    let data = fill(&da, &la, 9);

    let w = a.post_send(
        &mut qa,
        WRITE,
        SIGNALED,
        [0; 4],
        &[
            Seg::Raddr(rb.va(100), rb.key),
            Seg::Data(3000, la.key, la.va(0)),
        ],
    );
    let c = a.poll().unwrap();
    assert_eq!((c.opcode, c.wqe_opcode, c.wqe_counter), (REQ, WRITE, w));
    assert_eq!(b.poll(), None, "RDMA WRITE consumes no receive WQE");
    assert_eq!(read(&db, &rb, 100, 3000), &data[..3000]);

    b.post_recv(&mut qb, &[]);
    a.post_send(
        &mut qa,
        WRITE_IMM,
        SIGNALED,
        [9, 8, 7, 6],
        &[
            Seg::Raddr(rb.va(5000), rb.key),
            Seg::Inline(b"imm!".to_vec()),
        ],
    );
    let r = b.poll().unwrap();
    assert_eq!(
        (r.opcode, r.imm, r.byte_cnt),
        (RESP_WR_IMM, [9, 8, 7, 6], 4)
    );
    assert_eq!(read(&db, &rb, 5000, 4), b"imm!");
    assert_eq!(a.poll().map(|c| c.wqe_opcode), Some(WRITE_IMM));

    a.post_send(
        &mut qa,
        READ,
        SIGNALED,
        [0; 4],
        &[
            Seg::Raddr(rb.va(100), rb.key),
            Seg::Data(2500, la.key, la.va(4096)),
        ],
    );
    let c = a.poll().unwrap();
    assert_eq!((c.opcode, c.wqe_opcode, c.byte_cnt), (REQ, READ, 2500));
    assert_eq!(read(&da, &la, 4096, 2500), &data[..2500]);

    // The responder's word is in its host's order (HOST_ENDIANNESS: little-endian unless told
    // otherwise); with the requester endianness mode left at 0 the original value comes back
    // big-endian.
    db.dma_write(rb.buf.iova + 8000, &5u64.to_le_bytes())
        .unwrap();
    let atomic = |a: &mut Node, qa: &mut Qp, op: u8, swap_add: u64, compare: u64| {
        a.post_send(
            qa,
            op,
            SIGNALED,
            [0; 4],
            &[
                Seg::Raddr(rb.va(8000), rb.key),
                Seg::Atomic(swap_add, compare),
                Seg::Data(8, la.key, la.va(6000)),
            ],
        );
        let c = a.poll().unwrap();
        assert_eq!((c.opcode, c.wqe_opcode, c.byte_cnt), (REQ, op, 8));
        let orig = u64::from_be_bytes(read(&a.dev(), &la, 6000, 8).try_into().unwrap());
        let now = u64::from_le_bytes(read(&b.dev(), &rb, 8000, 8).try_into().unwrap());
        (orig, now)
    };
    assert_eq!(atomic(&mut a, &mut qa, CS, 77, 5), (5, 77), "swapped");
    assert_eq!(
        atomic(&mut a, &mut qa, CS, 99, 5),
        (77, 77),
        "compare fails"
    );
    assert_eq!(atomic(&mut a, &mut qa, FA, 10, 0), (77, 87));
    assert!(da.dma_faults().is_empty() && db.dma_faults().is_empty());
}

#[test]
fn ud_send_carries_the_grh_and_the_source_qpn() {
    let (_fabric, mut a, mut b) = pair(Mode::Sync);
    let (mut qa, mut qb) = (a.create_qp(UD), b.create_qp(UD));
    a.connect(&qa, 2, 0, |_| {});
    b.connect(&qb, 1, 0, |_| {});
    let src = a.reg_mr(4096, false, false, false);
    let dst = b.reg_mr(4096, false, false, false);
    let data = fill(&a.dev(), &src, 1);
    let qkey = 0x1111_1111;
    b.post_recv(&mut qb, &[(1000, dst.key, dst.va(0))]);
    let dqpn = qb.qpn;
    let av = |qkey| Seg::Av(dqpn, qkey, [2, 0xc5, 0x5a, 0, 0, 2], 2, 0xc001);
    a.post_send(
        &mut qa,
        SEND_IMM,
        SIGNALED,
        [4, 3, 2, 1],
        &[av(qkey), Seg::Data(200, src.key, src.va(0))],
    );
    let r = b.poll().expect("UD receive");
    assert_eq!(
        (r.opcode, r.byte_cnt, r.imm),
        (RESP_SEND_IMM, 240, [4, 3, 2, 1])
    );
    assert_eq!(
        r.flags_rqpn,
        (1 << 28) | (2 << 24) | qa.qpn,
        "GRH present, RoCE L3 header IPv4 (25:24 = 2, where mlx5_ib reads it), source QPN"
    );
    assert_eq!(r.l3, 2 << 2, "IPv4");
    let got = read(&b.dev(), &dst, 0, 240);
    assert_eq!(&got[..20], &[0; 20]);
    assert_eq!(
        got[20], 0x45,
        "the IPv4 header in the second half of the GRH"
    );
    assert_eq!(&got[32..36], &[10, 0, 0, 1]);
    assert_eq!(&got[36..40], &[10, 0, 0, 2]);
    assert_eq!(&got[40..], &data[..200]);
    assert_eq!(a.poll().map(|c| c.wqe_opcode), Some(SEND_IMM));

    // A wrong Q_Key: dropped by the receiver; the sender completes anyway.
    b.post_recv(&mut qb, &[(1000, dst.key, dst.va(0))]);
    a.post_send(
        &mut qa,
        SEND,
        SIGNALED,
        [0; 4],
        &[av(0x2222), Seg::Inline(vec![1; 4])],
    );
    assert_eq!(b.poll(), None);
    assert_eq!(b.dev().datapath_counters().rx_dropped, 1);
    assert_eq!(a.poll().map(|c| c.opcode), Some(REQ));
    // A Q_Key with the high bit set means "the QP's own".
    a.post_send(
        &mut qa,
        SEND,
        SIGNALED,
        [0; 4],
        &[av(0x8000_0000), Seg::Inline(vec![1; 4])],
    );
    assert_eq!(b.poll().map(|c| c.byte_cnt), Some(44));
}

/// QP1, the GSI QP: whatever number CREATE_QP gave it, it is QP 1 on the wire both ways — a
/// MAD to destination QP 1 reaches the peer's QP1, the DETH carries source QP 1 and the GSI
/// Q_Key, and the receive completion names source QP 1.
#[test]
fn qp1_is_qp_number_one_on_the_wire() {
    let (fabric, mut a, mut b) = pair(Mode::Sync);
    fabric.keep_frames(4);
    let (mut qa, mut qb) = (a.create_qp(QP1), b.create_qp(QP1));
    assert!(
        qa.qpn != 1 && qb.qpn != 1,
        "CREATE_QP numbers QP1 like any QP"
    );
    let gsi_qkey = |c: &mut ViewMut<'_, Qpc>| {
        c.set(Qpc::Q_KEY, 0x8001_0000).unwrap();
    };
    a.connect(&qa, 2, 0, gsi_qkey);
    b.connect(&qb, 1, 0, gsi_qkey);
    let dst = b.reg_mr(4096, false, false, false);
    b.post_recv(&mut qb, &[(40 + 256, dst.key, dst.va(0))]);
    let mad: Vec<u8> = (0..=255u8).collect();
    let av = Seg::Av(1, 0x8001_0000, [2, 0xc5, 0x5a, 0, 0, 2], 2, 0xc001);
    a.post_send(
        &mut qa,
        SEND,
        SIGNALED,
        [0; 4],
        &[av, Seg::Inline(mad.clone())],
    );
    let r = b.poll().expect("the MAD at the peer's QP1");
    assert_eq!(r.byte_cnt, 40 + 256);
    assert_eq!(r.flags_rqpn & 0xff_ffff, 1, "source QP 1");
    // What Linux's mlx5_ib reads of a MAD's CQE (handle_responder): the RoCE L3 header in
    // flags_rqpn 25:24 (2 = IPv4: a RoCE v2 MAD over IPv4, else ib_core takes it for RoCE v1
    // and drops it) and, on QP1, the BTH P_Key in imm_inval_pkey 15:0 (the default 0xffff).
    assert_eq!((r.flags_rqpn >> 24) & 3, 2, "RoCE v2 over IPv4");
    assert_eq!(r.imm, [0, 0, 0xff, 0xff], "the BTH P_Key");
    assert_eq!(read(&b.dev(), &dst, 40, 256), mad);
    assert_eq!(a.poll().map(|c| c.opcode), Some(REQ));
    let frames = fabric.captured();
    let f = &frames.last().expect("the MAD on the wire").1;
    // IPv4 (14 + 20), UDP 8: the BTH at 42, the DETH at 54.
    assert_eq!(&f[42 + 5..42 + 8], &[0, 0, 1], "BTH destination QP 1");
    assert_eq!(&f[54..58], &0x8001_0000u32.to_be_bytes(), "DETH Q_Key");
    assert_eq!(&f[58 + 1..58 + 4], &[0, 0, 1], "DETH source QP 1");
}

#[test]
fn uc_write_and_a_lost_message() {
    let (fabric, mut a, mut b) = pair(Mode::Sync);
    let (mut qa, _qb) = connected(&mut a, &mut b, UC, |_| {});
    let la = a.reg_mr(8192, false, false, false);
    let rb = b.reg_mr(8192, false, true, false);
    let data = fill(&a.dev(), &la, 5);
    let write = |a: &mut Node, qa: &mut Qp, off: u64| {
        a.post_send(
            qa,
            WRITE,
            SIGNALED,
            [0; 4],
            &[
                Seg::Raddr(rb.va(off), rb.key),
                Seg::Data(3000, la.key, la.va(0)),
            ],
        );
        assert_eq!(
            a.poll().map(|c| c.opcode),
            Some(REQ),
            "UC completes on the wire"
        );
    };
    write(&mut a, &mut qa, 0);
    assert_eq!(read(&b.dev(), &rb, 0, 3000), &data[..3000]);
    fabric.inject(WireFault::Drop { count: 1 });
    write(&mut a, &mut qa, 4000);
    assert_eq!(
        read(&b.dev(), &rb, 4000, 3000),
        vec![0; 3000],
        "message lost"
    );
    assert_eq!(fabric.counters().dropped, 1);
    write(&mut a, &mut qa, 4000);
    assert_eq!(read(&b.dev(), &rb, 4000, 3000), &data[..3000]);
    assert_eq!(
        a.dev().datapath_counters().retransmits,
        0,
        "UC never retries"
    );
}

#[test]
fn send_queue_and_receive_queue_wrap_around() {
    let (_fabric, mut a, mut b) = pair(Mode::Sync);
    let (mut qa, mut qb) = connected(&mut a, &mut b, RC, |_| {});
    let dst = b.reg_mr(4096, false, false, false);
    // A one-WQEBB WQE first, so two-WQEBB WQEs straddle the end of the 16-WQEBB ring.
    b.post_recv(&mut qb, &[(64, dst.key, dst.va(0))]);
    a.post_send(&mut qa, SEND, SIGNALED, [0; 4], &[Seg::Inline(vec![0; 8])]);
    assert_eq!(b.drain().len() + a.drain().len(), 2);
    for round in 0..6u8 {
        // Three WQEs (2 WQEBBs each: 100 bytes inline) behind one doorbell.
        let mut idx = Vec::new();
        for k in 0..3u8 {
            b.post_recv(&mut qb, &[(128, dst.key, dst.va(128 * u64::from(k)))]);
            let payload = vec![round * 3 + k; 100];
            let (i, _) = a.write_wqe(&mut qa, SEND, SIGNALED, [0; 4], &[Seg::Inline(payload)]);
            idx.push(i);
        }
        b.post_recv(&mut qb, &[(128, dst.key, dst.va(3 * 128))]);
        let last = a.post_send(
            &mut qa,
            SEND,
            SIGNALED,
            [0; 4],
            &[Seg::Inline(vec![0xee; 4])],
        );
        let sends = a.drain();
        let recvs = b.drain();
        assert_eq!(sends.len(), 4, "round {round}: {sends:?}");
        let counters: Vec<u16> = sends.iter().map(|c| c.wqe_counter).collect();
        assert_eq!(counters, [idx[0], idx[1], idx[2], last]);
        assert!(recvs.iter().take(3).all(|c| c.byte_cnt == 100), "{recvs:?}");
        for k in 0..3u8 {
            let got = read(&b.dev(), &dst, 128 * u64::from(k), 100);
            assert_eq!(got, vec![round * 3 + k; 100], "round {round} WQE {k}");
        }
        b.drain();
    }
    assert!(a.dev().dma_faults().is_empty());
    assert!(qa.sq_pi > 32, "the ring went round more than twice");
}

#[test]
fn receives_from_an_rmp_follow_its_linked_list() {
    let (_fabric, mut a, mut b) = pair(Mode::Sync);
    // An RMP of 4 WQEs of 64 bytes (next segment + 3 data segments), linked 0 → 2 → 1 → 3,
    // created with its limit event armed at 2 WQEs.
    let dev = b.dev();
    let (rmp_buf, rmp_dbr) = (
        dev.dma_alloc(4096, 4096).unwrap(),
        dev.dma_alloc(64, 64).unwrap(),
    );
    let pd = b.fx.pd;
    let input = common::cmd::<CreateRmpIn>(Opcode::CreateRmp, 0, |v| {
        let mut c = v.nested_mut(CreateRmpIn::CTX);
        c.set(Rmpc::STATE, 1).unwrap();
        let mut w = c.nested_mut(Rmpc::WQ);
        w.set(Wq::LOG_WQ_SZ, 2).unwrap();
        w.set(Wq::LOG_WQ_STRIDE, 6).unwrap();
        w.set(Wq::PD, pd.into()).unwrap();
        w.set(Wq::DBR_ADDR, rmp_dbr.iova).unwrap();
        w.set(Wq::LWM, 2).unwrap();
    });
    let input = common::queues::with_pas(input, &[rmp_buf.iova]);
    let out = b.fx.p.ok(&input, CreateRmpOut::BYTES);
    let rmpn = View::<CreateRmpOut>::new(&out)
        .unwrap()
        .get32(CreateRmpOut::RMPN);
    let dst = b.reg_mr(4096, false, false, false);
    let order = [0u16, 2, 1, 3];
    for (k, &i) in order.iter().enumerate() {
        let mut w = [0u8; 64];
        w[2..4].copy_from_slice(&order[(k + 1) % 4].to_be_bytes());
        w[16..20].copy_from_slice(&32u32.to_be_bytes());
        w[20..24].copy_from_slice(&dst.key.to_be_bytes());
        w[24..32].copy_from_slice(&dst.va(64 * u64::from(i)).to_be_bytes());
        w[36..40].copy_from_slice(&0x100u32.to_be_bytes());
        dev.dma_write(rmp_buf.iova + 64 * u64::from(i), &w).unwrap();
    }
    dev.dma_write(rmp_dbr.iova, &3u32.to_be_bytes()).unwrap();
    let mut qa = a.create_qp(RC);
    let qb = b.create_qp_srq(RC, Some(rmpn));
    // A WQE posted while the QP is in RST waits for RTS (and the next doorbell).
    let early = a.post_send(&mut qa, SEND, SIGNALED, [0; 4], &[Seg::Inline(vec![1; 8])]);
    assert_eq!((a.poll(), a.dev().wqes_executed()), (None, 0));
    let (ipa, ipb) = (a.ip, b.ip);
    a.connect(&qa, ipb, qb.qpn, |_| {});
    b.connect(&qb, ipa, qa.qpn, |_| {});
    a.post_send(&mut qa, SEND, SIGNALED, [0; 4], &[Seg::Inline(vec![2; 8])]);
    a.post_send(&mut qa, SEND, SIGNALED, [0; 4], &[Seg::Inline(vec![3; 8])]);
    let sends: Vec<u16> = a.drain().iter().map(|c| c.wqe_counter).collect();
    assert_eq!(sends, [early, early + 1, early + 2]);
    let recvs: Vec<u16> = b.drain().iter().map(|c| c.wqe_counter).collect();
    assert_eq!(recvs, [0, 2, 1], "SRQ WQE indices, in list order");
    for (k, i) in [0u64, 2, 1].into_iter().enumerate() {
        assert_eq!(read(&dev, &dst, 64 * i, 8), vec![k as u8 + 1; 8]);
    }
    // Three posted, three taken: the second left one (< 2), which raised the limit event once
    // and disarmed it — an `lwm` given at creation is armed from birth.
    let mut limit = Vec::new();
    while let Some((etype, data)) = b.poll_eq() {
        if etype == mlx5_ifc::event::SRQ_RQ_LIMIT {
            limit.push((
                data[0x14],
                u32::from_be_bytes(data[0x18..0x1c].try_into().unwrap()),
            ));
        }
    }
    assert_eq!(
        limit,
        [(1, rmpn)],
        "one event, queue type SRQ, the RMP's number"
    );
    let out = b.fx.p.ok(
        &common::cmd::<QueryRmpIn>(Opcode::QueryRmp, 0, |v| {
            v.set(QueryRmpIn::RMPN, rmpn.into()).unwrap();
        }),
        QueryRmpOut::BYTES,
    );
    let lwm = View::<QueryRmpOut>::new(&out)
        .unwrap()
        .nested(QueryRmpOut::RMP_CONTEXT)
        .nested(Rmpc::WQ)
        .get(Wq::LWM);
    assert_eq!(lwm, 0, "disarmed after firing");
    // The fourth send finds no posted WQE: RNR (the RMP's counter says 3).
    a.post_send(&mut qa, SEND, SIGNALED, [0; 4], &[Seg::Inline(vec![4; 8])]);
    assert_eq!(b.poll(), None);
    assert_eq!(b.dev().datapath_counters().rnr_naks_sent, 1);
}

/// A `Write` into a buffer the test keeps.
struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Shared {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn pcap_capture_holds_roce_v2_frames() {
    let (fabric, mut a, mut b) = pair(Mode::Sync);
    fabric.keep_frames(16);
    let (mut qa, mut qb) = connected(&mut a, &mut b, RC, |_| {});
    let dst = b.reg_mr(4096, false, false, false);
    b.post_recv(&mut qb, &[(64, dst.key, dst.va(0))]);
    let streamed = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    fabric.pcap_to(Box::new(Shared(streamed.clone()))).unwrap();
    a.post_send(
        &mut qa,
        SEND,
        SIGNALED,
        [0; 4],
        &[Seg::Inline(b"pcap".to_vec())],
    );
    assert_eq!(
        fabric.pcap_finish().unwrap(),
        2,
        "the SEND and its ACK streamed"
    );
    let mut out = Vec::new();
    fabric.write_pcap(&mut out).unwrap();
    assert_eq!(
        *streamed.lock().unwrap(),
        out,
        "the stream holds what was kept"
    );
    assert_eq!(&out[..4], &PCAP_MAGIC_NS.to_le_bytes());
    assert_eq!(
        u32::from_le_bytes(out[20..24].try_into().unwrap()),
        1,
        "Ethernet"
    );
    // The first record: the SEND, IPv4, UDP destination port 4791.
    let frame = &out[40..];
    assert_eq!(&frame[12..14], &[0x08, 0x00]);
    assert_eq!(&frame[36..38], &4791u16.to_be_bytes());
    assert_eq!(fabric.captured().len(), 2, "the SEND and its ACK");
}

#[test]
fn threaded_devices_exchange_a_send() {
    let (_fabric, mut a, mut b) = pair(Mode::Threaded);
    let (mut qa, mut qb) = connected(&mut a, &mut b, RC, |_| {});
    let src = a.reg_mr(8192, false, false, false);
    let dst = b.reg_mr(8192, false, false, false);
    let data = fill(&a.dev(), &src, 11);
    b.post_recv(&mut qb, &[(8192, dst.key, dst.va(0))]);
    a.post_send(
        &mut qa,
        SEND,
        SIGNALED,
        [0; 4],
        &[Seg::Data(4000, src.key, src.va(0))],
    );
    let s = a.wait(5_000_000_000).expect("requester CQE");
    assert_eq!((s.opcode, s.wqe_opcode), (REQ, SEND));
    let r = b.wait(5_000_000_000).expect("responder CQE");
    assert_eq!((r.opcode, r.byte_cnt), (RESP_SEND, 4000));
    assert_eq!(read(&b.dev(), &dst, 0, 4000), &data[..4000]);
}
