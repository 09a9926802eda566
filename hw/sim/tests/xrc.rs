//! XRC transport, checked against what its users do: mlx5_ib creates an XRC initiator (a send
//! queue, `rq_type` SRQ on a device SRQ, the device's spare XRC domain) and an XRC target
//! (`no_sq`, its domain), both `st` XRC (3); rdma-core writes an XRC segment naming the remote
//! XRC SRQ after the control segment of each send WQE (`struct mlx5_wqe_xrc_seg`), and polls a
//! target's completions on the XRC SRQ's CQ by the SRQ's user index. On the wire (IBTA): the
//! XRC opcodes (service 5, 0xa0) with an XRCETH after the BTH of each request.

mod common;

use common::datapath::*;
use common::{bare, cmd, status};
use mlx5_ifc::consts::qp_st::XRC;
use mlx5_ifc::prm::qp::Qpc;
use mlx5_ifc::prm::srq::{CreateXrcSrqIn, CreateXrcSrqOut, XrcSrqc};
use mlx5_ifc::prm::uar_pd::{AllocXrcdIn, AllocXrcdOut, DeallocXrcdIn};
use mlx5_ifc::{Layout, Opcode, View};
use mlx5_sim::Mode;

const SIGNALED: u8 = 0x08;
const SEND_IMM: u8 = 0x0b;
const WRITE: u8 = 0x08;
const READ: u8 = 0x10;
const FA: u8 = 0x12;
const REQ: u8 = 0x0;
const RESP_SEND_IMM: u8 = 0x3;
const REQ_ERR: u8 = 0xd;
const REMOTE_INVAL_REQ_ERR: u8 = 0x12;
const RES_BUSY: u8 = 0x06;
const XRCD_IN_USE: u32 = 0x5e06_000d;
const XRC_SRQ_USER_INDEX: u32 = 0x5a5a;

fn alloc_xrcd(n: &mut Node) -> u32 {
    let out = n.fx.p.ok(&bare::<AllocXrcdIn>(Opcode::AllocXrcd, 0), 0x10);
    View::<AllocXrcdOut>::new(&out)
        .unwrap()
        .get32(AllocXrcdOut::XRCD)
}

/// An XRC SRQ of 4 WQEs of 64 bytes with its buffer and doorbell record.
fn xrc_srq(n: &mut Node, xrcd: u32) -> SrqRing {
    let dev = n.dev();
    let (buf, dbr) = (
        dev.dma_alloc(4096, 4096).unwrap(),
        dev.dma_alloc(64, 64).unwrap(),
    );
    let (pd, cqn) = (n.fx.pd, n.cqn);
    let input = cmd::<CreateXrcSrqIn>(Opcode::CreateXrcSrq, 0, |v| {
        let mut c = v.nested_mut(CreateXrcSrqIn::XRC_SRQ_CONTEXT_ENTRY);
        c.set(XrcSrqc::LOG_XRC_SRQ_SIZE, 2).unwrap();
        c.set(XrcSrqc::LOG_RQ_STRIDE, 2).unwrap();
        c.set(XrcSrqc::XRCD, xrcd.into()).unwrap();
        c.set(XrcSrqc::CQN, cqn.into()).unwrap();
        c.set(XrcSrqc::PD, pd.into()).unwrap();
        c.set(XrcSrqc::USER_INDEX, XRC_SRQ_USER_INDEX.into())
            .unwrap();
        c.set(XrcSrqc::DB_RECORD_ADDR_H, dbr.iova >> 32).unwrap();
        c.set(XrcSrqc::DB_RECORD_ADDR_L, (dbr.iova & 0xffff_ffff) >> 2)
            .unwrap();
    });
    let out = n.fx.p.ok(
        &common::queues::with_pas(input, &[buf.iova]),
        CreateXrcSrqOut::BYTES,
    );
    let srqn = View::<CreateXrcSrqOut>::new(&out)
        .unwrap()
        .get32(CreateXrcSrqOut::XRC_SRQN);
    SrqRing {
        n: srqn,
        buf,
        dbr,
        size: 4,
        posted: 0,
    }
}

/// The XRC segment naming XRC SRQ `srqn`.
fn xrc_seg(srqn: u32) -> Seg {
    let mut b = vec![0u8; 16];
    b[..4].copy_from_slice(&srqn.to_be_bytes());
    Seg::Raw(b)
}

/// An XRC initiator on `a` and a target on `b` (domain `xrcd`), connected to each other.
fn xrc_pair(a: &mut Node, b: &mut Node, xrcd: u32) -> (Qp, Qp) {
    // Linux gives each the device's own SRQ `s0` (`rq_type` SRQ; an XRC SRQ of the device's
    // domain `x0`) and the initiator its spare domain `x1`; here an RMP for the initiator.
    let (a_spare, a_srq) = (alloc_xrcd(a), a.fx.create_rmp());
    let b_x0 = alloc_xrcd(b);
    let b_srq = xrc_srq(b, b_x0).n;
    let ini = a.create_qp_with(XRC, Some(a_srq), |c| {
        c.set(Qpc::XRCD, a_spare.into()).unwrap();
    });
    // The target as mlx5_ib's create_xrc_tgt_qp makes it: no send queue, no UAR.
    let tgt = b.create_qp_with(XRC, Some(b_srq), |c| {
        c.set(Qpc::NO_SQ, 1).unwrap();
        c.set(Qpc::UAR_PAGE, 0).unwrap();
        c.set(Qpc::LOG_SQ_SIZE, 0).unwrap();
        c.set(Qpc::XRCD, xrcd.into()).unwrap();
    });
    let (ipa, ipb) = (a.ip, b.ip);
    let rights = |c: &mut mlx5_ifc::ViewMut<'_, Qpc>| {
        for f in [Qpc::RRE, Qpc::RWE, Qpc::RAE] {
            let _ = c.set(f, 1);
        }
        let _ = c.set(Qpc::ATOMIC_MODE, 1);
        let _ = c.set(Qpc::LOG_RRA_MAX, 2);
        let _ = c.set(Qpc::LOG_SRA_MAX, 2);
    };
    a.connect(&ini, ipb, tgt.qpn, rights);
    b.connect(&tgt, ipa, ini.qpn, rights);
    (ini, tgt)
}

#[test]
fn xrc_sends_land_in_the_srq_the_initiator_names_and_complete_on_its_cq() {
    let (fabric, mut a, mut b) = pair(Mode::Sync);
    let xrcd = alloc_xrcd(&mut b);
    let (mut s1, mut s2) = (xrc_srq(&mut b, xrcd), xrc_srq(&mut b, xrcd));
    let (mut ini, tgt) = xrc_pair(&mut a, &mut b, xrcd);
    let src = a.reg_mr(8192, true, true, true);
    let dst = b.reg_mr(8192, true, true, true);
    let data = fill(&a.dev(), &src, 3);
    fabric.keep_frames(16);
    s1.post(&b.dev(), &dst, 0, 4096);
    s2.post(&b.dev(), &dst, 4096, 4096);
    // Two messages, one to each SRQ; the second spans three packets of 1 KiB.
    a.post_send(
        &mut ini,
        SEND_IMM,
        SIGNALED,
        [1, 1, 1, 1],
        &[xrc_seg(s2.n), Seg::Data(100, src.key, src.va(0))],
    );
    a.post_send(
        &mut ini,
        SEND_IMM,
        SIGNALED,
        [2, 2, 2, 2],
        &[xrc_seg(s1.n), Seg::Data(2500, src.key, src.va(100))],
    );
    let r: Vec<(u8, u32, u32, u32, [u8; 4])> = b
        .drain()
        .iter()
        .map(|c| (c.opcode, c.qpn, c.byte_cnt, c.srqn_uidx, c.imm))
        .collect();
    assert_eq!(
        r,
        [
            (RESP_SEND_IMM, tgt.qpn, 100, XRC_SRQ_USER_INDEX, [1; 4]),
            (RESP_SEND_IMM, tgt.qpn, 2500, XRC_SRQ_USER_INDEX, [2; 4]),
        ],
        "the target's QPN, the XRC SRQ's user index"
    );
    assert_eq!(read(&b.dev(), &dst, 4096, 100), data[..100]);
    assert_eq!(read(&b.dev(), &dst, 0, 2500), data[100..2600]);
    let sent: Vec<(u8, u16)> = a
        .drain()
        .iter()
        .map(|c| (c.opcode, c.wqe_counter))
        .collect();
    assert_eq!(sent, [(REQ, 0), (REQ, 1)]);
    // The wire carried XRC opcodes with XRCETHs: SEND_ONLY_IMM (0xa5), then FIRST / MIDDLE /
    // LAST_IMM (0xa0, 0xa1, 0xa3), and the target's XRC ACKs (0xb1).
    // (RoCE v2 over IPv4: the BTH at byte 42, the XRCETH right after it.)
    let bth: Vec<(u8, Option<u32>)> = fabric
        .captured()
        .iter()
        .map(|(_, f)| {
            let xrceth = (f[42] & 0x1f) < 0x0d || (f[42] & 0x1f) > 0x12;
            let srqn = u32::from_be_bytes(f[54..58].try_into().unwrap());
            (f[42], xrceth.then_some(srqn))
        })
        .collect();
    assert_eq!(
        bth,
        [
            (0xa5, Some(s2.n)),
            (0xb1, None),
            (0xa0, Some(s1.n)),
            (0xa1, Some(s1.n)),
            (0xa3, Some(s1.n)),
            (0xb1, None),
        ]
    );

    // RDMA WRITE, READ and an atomic through the target: the rkeys are checked against the
    // XRC SRQ's PD (the target has no PD of its own to use).
    let w = a.post_send(
        &mut ini,
        WRITE,
        SIGNALED,
        [0; 4],
        &[
            xrc_seg(s1.n),
            Seg::Raddr(dst.va(6000), dst.key),
            Seg::Data(64, src.key, src.va(1000)),
        ],
    );
    let r = a.post_send(
        &mut ini,
        READ,
        SIGNALED,
        [0; 4],
        &[
            xrc_seg(s1.n),
            Seg::Raddr(dst.va(6000), dst.key),
            Seg::Data(64, src.key, src.va(7000)),
        ],
    );
    b.fx.dev()
        .dma_write(dst.buf.iova + 7168, &40u64.to_le_bytes())
        .unwrap();
    let f = a.post_send(
        &mut ini,
        FA,
        SIGNALED,
        [0; 4],
        &[
            xrc_seg(s1.n),
            Seg::Raddr(dst.va(7168), dst.key),
            Seg::Atomic(2, 0),
            Seg::Data(8, src.key, src.va(7200)),
        ],
    );
    let done: Vec<(u8, u16)> = a
        .drain()
        .iter()
        .map(|c| (c.opcode, c.wqe_counter))
        .collect();
    assert_eq!(done, [(REQ, w), (REQ, r), (REQ, f)]);
    assert_eq!(read(&b.dev(), &dst, 6000, 64), data[1000..1064]);
    assert_eq!(read(&a.dev(), &src, 7000, 64), data[1000..1064]);
    // As the RC atomics: host memory in host order, the original value returned big-endian.
    assert_eq!(read(&a.dev(), &src, 7200, 8), 40u64.to_be_bytes());
    assert_eq!(read(&b.dev(), &dst, 7168, 8), 42u64.to_le_bytes());
    assert!(
        b.drain().is_empty(),
        "no receive WQE taken by WRITE, READ or atomics"
    );

    // The domain is in use while the target is.
    let dealloc = cmd::<DeallocXrcdIn>(Opcode::DeallocXrcd, 0, |v| {
        v.set(DeallocXrcdIn::XRCD, xrcd.into()).unwrap();
    });
    assert_eq!(
        status(&b.fx.p.exec(&dealloc, 0x10)),
        (RES_BUSY, XRCD_IN_USE)
    );
    assert!(a.dev().dma_faults().is_empty() && b.dev().dma_faults().is_empty());
}

#[test]
fn an_xrc_srq_of_another_domain_is_an_invalid_request() {
    let (_fabric, mut a, mut b) = pair(Mode::Sync);
    let (xrcd, other) = (alloc_xrcd(&mut b), alloc_xrcd(&mut b));
    let mut foreign = xrc_srq(&mut b, other);
    let (mut ini, _tgt) = xrc_pair(&mut a, &mut b, xrcd);
    let src = a.reg_mr(4096, false, false, false);
    let dst = b.reg_mr(4096, false, false, false);
    foreign.post(&b.dev(), &dst, 0, 4096);
    a.post_send(
        &mut ini,
        SEND_IMM,
        SIGNALED,
        [0; 4],
        &[xrc_seg(foreign.n), Seg::Data(10, src.key, src.va(0))],
    );
    let c = a.poll().expect("an error completion");
    assert_eq!((c.opcode, c.syndrome), (REQ_ERR, REMOTE_INVAL_REQ_ERR));
    assert!(b.drain().is_empty(), "the foreign SRQ's WQE is not taken");
}
