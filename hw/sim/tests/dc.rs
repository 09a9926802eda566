//! The Dynamically Connected transport, checked against what its users do (Linux 6.1's mlx5_ib
//! and rdma-core's mlx5 provider, docs/fields.md "DC"): a DCI is CREATE_QP `st` 5 with an SRQ
//! (`rq_type` 1) moved RST→INIT→RTR (only `mtu` and `log_msg_max`)→RTS; each send WQE names its
//! destination in a 48-byte address vector after the control segment — the DC access key in
//! bytes 0..8, the DCT number with bit 31 (extended AV) in bytes 8..12, the MAC and GID as for
//! UD. A DCT is CREATE_DCT (at the DCT's INIT→RTR); its SENDs take the SRQ's WQEs and complete
//! on its CQ with its number and user index. mlx5_ib destroys a DCT with DRAIN_DCT, waits for
//! DCT_DRAINED (0x1c, the DCT number in the EQE's low 24 bits at byte 0x38), then DESTROY_DCT.
//! On the wire the simulated NICs speak the simulator's own DC encoding (DC's is not public):
//! service bits 0xc0, a DCETH (key, connect flag, DCI) after each request's BTH.

mod common;

use common::datapath::*;
use common::queues::Step;
use common::{cmd, status};
use mlx5_ifc::consts::qp_st::{DCI, RC};
use mlx5_ifc::prm::dct::{
    ArmDctIn, CreateDctIn, CreateDctOut, Dctc, DestroyDctIn, DrainDctIn, QueryDctIn, QueryDctOut,
};
use mlx5_ifc::prm::qp::{Ads, Qpc};
use mlx5_ifc::prm::srq::{CreateRmpIn, CreateRmpOut, Rmpc, Wq};
use mlx5_ifc::{Layout, Opcode, View, ViewMut};
use mlx5_sim::{Mode, Profile, WireFault};

const SIGNALED: u8 = 0x08;
const SEND: u8 = 0x0a;
const SEND_INVAL: u8 = 0x01;
const WRITE: u8 = 0x08;
const READ: u8 = 0x10;
const FA: u8 = 0x12;
const REQ: u8 = 0x0;
const REQ_ERR: u8 = 0xd;
const RESP_SEND: u8 = 0x2;
const LOCAL_QP_OP_ERR: u8 = 0x02;
const KEY: u64 = 0xbadc0de;
const DCT_USER_INDEX: u32 = 0x4242;
const DCT_DRAINED: u8 = 0x1c;
const DCT_KEY_VIOLATION: u8 = 0x1d;
const BAD_OP: u8 = 0x02;
const BAD_PARAM: u8 = 0x03;
const BAD_RES: u8 = 0x05;
const BAD_RES_STATE: u8 = 0x09;

/// A captured frame: BTH opcode, destination QP, DCETH `(key, flags, DCI)` on requests.
type Frame = (u8, u32, Option<(u64, u8, u32)>);
/// An edit of a DCT context.
type DctEdit = Box<dyn Fn(&mut ViewMut<'_, Dctc>)>;

/// An RMP of 16 WQEs of 64 bytes with its buffer and doorbell record.
fn rmp(n: &mut Node) -> SrqRing {
    let dev = n.dev();
    let (buf, dbr) = (
        dev.dma_alloc(4096, 4096).unwrap(),
        dev.dma_alloc(64, 64).unwrap(),
    );
    let pd = n.fx.pd;
    let input = cmd::<CreateRmpIn>(Opcode::CreateRmp, 0, |v| {
        let mut c = v.nested_mut(CreateRmpIn::CTX);
        c.set(Rmpc::STATE, 1).unwrap();
        let mut w = c.nested_mut(Rmpc::WQ);
        w.set(Wq::LOG_WQ_SZ, 4).unwrap();
        w.set(Wq::LOG_WQ_STRIDE, 6).unwrap();
        w.set(Wq::PD, pd.into()).unwrap();
        w.set(Wq::DBR_ADDR, dbr.iova).unwrap();
    });
    let out = n.fx.p.ok(
        &common::queues::with_pas(input, &[buf.iova]),
        CreateRmpOut::BYTES,
    );
    let rmpn = View::<CreateRmpOut>::new(&out)
        .unwrap()
        .get32(CreateRmpOut::RMPN);
    SrqRing {
        n: rmpn,
        buf,
        dbr,
        size: 16,
        posted: 0,
    }
}

/// CREATE_DCT on `n` receiving from `srq`, as mlx5_ib fills it at INIT→RTR (remote write,
/// read and atomics; 1 KiB MTU; GID 0); `edit` last. `(status, syndrome, dctn)`.
fn create_dct(n: &mut Node, srq: u32, edit: impl FnOnce(&mut ViewMut<'_, Dctc>)) -> (u8, u32, u32) {
    let (pd, cqn) = (n.fx.pd, n.cqn);
    let input = cmd::<CreateDctIn>(Opcode::CreateDct, 0, |v| {
        let mut c = v.nested_mut(CreateDctIn::DCT_CONTEXT_ENTRY);
        c.set(Dctc::USER_INDEX, DCT_USER_INDEX.into()).unwrap();
        c.set(Dctc::CQN, cqn.into()).unwrap();
        c.set(Dctc::SRQN_XRQN, srq.into()).unwrap();
        c.set(Dctc::PD, pd.into()).unwrap();
        c.set(Dctc::DC_ACCESS_KEY, KEY).unwrap();
        for f in [Dctc::RRE, Dctc::RWE, Dctc::RAE] {
            c.set(f, 1).unwrap();
        }
        c.set(Dctc::ATOMIC_MODE, 1).unwrap();
        c.set(Dctc::MTU, 3).unwrap();
        c.set(Dctc::PORT, 1).unwrap();
        c.set(Dctc::MIN_RNR_NAK, 12).unwrap();
        c.set(Dctc::HOP_LIMIT, 64).unwrap();
        edit(&mut c);
    });
    let out = n.fx.p.exec(&input, CreateDctOut::BYTES);
    let (s, syn) = status(&out);
    let dctn = View::<CreateDctOut>::new(&out)
        .unwrap()
        .get32(CreateDctOut::DCTN);
    (s, syn, dctn)
}

/// A DCT command naming `dctn` (DESTROY, DRAIN, ARM; QUERY's output): `(status, syndrome, out)`.
fn dct_cmd(n: &mut Node, op: Opcode, dctn: u32) -> (u8, u32, Vec<u8>) {
    let input = match op {
        Opcode::DestroyDct => cmd::<DestroyDctIn>(op, 0, |v| {
            v.set(DestroyDctIn::DCTN, dctn.into()).unwrap();
        }),
        Opcode::DrainDct => cmd::<DrainDctIn>(op, 0, |v| {
            v.set(DrainDctIn::DCTN, dctn.into()).unwrap();
        }),
        Opcode::QueryDct => cmd::<QueryDctIn>(op, 0, |v| {
            v.set(QueryDctIn::DCTN, dctn.into()).unwrap();
        }),
        _ => cmd::<ArmDctIn>(op, 0, |v| {
            v.set(ArmDctIn::DCT_NUMBER, dctn.into()).unwrap();
        }),
    };
    let out = n.fx.p.exec(&input, QueryDctOut::BYTES);
    let (s, syn) = status(&out);
    (s, syn, out)
}

/// `(state, dc_access_key_violation_count)` of DCT `dctn` (QUERY_DCT).
fn query(n: &mut Node, dctn: u32) -> (u64, u64) {
    let (s, _, out) = dct_cmd(n, Opcode::QueryDct, dctn);
    assert_eq!(s, 0);
    let v = View::<QueryDctOut>::new(&out).unwrap();
    let c = v.nested(QueryDctOut::DCT_CONTEXT_ENTRY);
    (
        c.get(Dctc::STATE),
        c.get(Dctc::DC_ACCESS_KEY_VIOLATION_COUNT),
    )
}

/// A DCI on `n` (an RMP as its SRQ, as mlx5_ib gives every DCI one), in RTS as mlx5_ib
/// programs it: INIT (P_Key index, port), RTR (`mtu`, `log_msg_max`), RTS (retries, timeout).
fn dci(n: &mut Node) -> Qp {
    let srq = n.fx.create_rmp();
    let q = n.create_qp_srq(DCI, Some(srq));
    for step in [Step::Rst2Init, Step::Init2Rtr, Step::Rtr2Rts] {
        let r = n.fx.step(step, q.qpn, DCI, 0, |c| match step {
            Step::Init2Rtr => {
                c.set(Qpc::MTU, 3).unwrap();
                c.set(Qpc::LOG_MSG_MAX, 30).unwrap();
            }
            Step::Rtr2Rts => {
                c.set(Qpc::RETRY_COUNT, 7).unwrap();
                c.set(Qpc::RNR_RETRY, 7).unwrap();
                c.set(Qpc::LOG_SRA_MAX, 2).unwrap();
                let mut a = c.nested_mut(Qpc::PRIMARY_ADDRESS_PATH);
                a.set(Ads::ACK_TIMEOUT, 14).unwrap();
            }
            _ => {}
        });
        assert_eq!(r, (0, 0), "{step:?}");
    }
    q
}

/// The 48-byte DC address vector (`struct mlx5_wqe_av`): key, DCT with the extended-AV bit,
/// the MAC and GID of 10.0.0.`ip`.
fn dc_av(key: u64, dctn: u32, ip: u8) -> Seg {
    let mut av = vec![0u8; 48];
    av[..8].copy_from_slice(&key.to_be_bytes());
    av[8..12].copy_from_slice(&(dctn | 0x8000_0000).to_be_bytes());
    av[20..26].copy_from_slice(&[0x02, 0xc5, 0x5a, 0, 0, ip]);
    av[27] = 64;
    av[32..48].copy_from_slice(&gid(ip));
    Seg::Raw(av)
}

#[test]
fn dc_sends_writes_reads_and_atomics_reach_a_dct_through_its_srq_and_cq() {
    let (fabric, mut a, mut b) = pair(Mode::Sync);
    let mut srq = rmp(&mut b);
    let (s, syn, dctn) = create_dct(&mut b, srq.n, |_| {});
    assert_eq!((s, syn), (0, 0));
    let mut q = dci(&mut a);
    assert_eq!(query(&mut b, dctn), (0, 0), "ACTIVE, no violation");
    let src = a.reg_mr(8192, true, true, true);
    let dst = b.reg_mr(8192, true, true, true);
    let data = fill(&a.dev(), &src, 5);
    srq.post(&b.dev(), &dst, 0, 4096);
    fabric.keep_frames(16);
    // A SEND of three 1 KiB packets.
    a.post_send(
        &mut q,
        SEND,
        SIGNALED,
        [0; 4],
        &[dc_av(KEY, dctn, 2), Seg::Data(2500, src.key, src.va(0))],
    );
    let got = b.drain();
    assert_eq!(got.len(), 1, "{got:?}");
    let r = got[0];
    assert_eq!(
        (r.opcode, r.qpn, r.byte_cnt, r.srqn_uidx, r.wqe_counter),
        (RESP_SEND, dctn, 2500, DCT_USER_INDEX, 0),
        "the DCT's number and user index, the SRQ's WQE"
    );
    assert_eq!(read(&b.dev(), &dst, 0, 2500), data[..2500]);
    let sent: Vec<(u8, u32)> = a.drain().iter().map(|c| (c.opcode, c.qpn)).collect();
    assert_eq!(sent, [(REQ, q.qpn)]);
    // The wire: DC SEND FIRST / MIDDLE / LAST (0xc0-0xc2) to the DCT, a DCETH after each BTH
    // (the key, the connect flag on the first only, the DCI); the DCT's ACK (0xd1) to the DCI.
    // (RoCE v2 over IPv4: the BTH at byte 42.)
    let frames: Vec<Frame> = fabric
        .captured()
        .iter()
        .map(|(_, f)| {
            let dqpn = u32::from_be_bytes(f[46..50].try_into().unwrap()) & 0xff_ffff;
            let request = f[42] & 0x1f < 0x0d;
            let dceth = request.then(|| {
                (
                    u64::from_be_bytes(f[54..62].try_into().unwrap()),
                    f[62],
                    u32::from_be_bytes(f[62..66].try_into().unwrap()) & 0xff_ffff,
                )
            });
            (f[42], dqpn, dceth)
        })
        .collect();
    assert_eq!(
        frames,
        [
            (0xc0, dctn, Some((KEY, 0x80, q.qpn))),
            (0xc1, dctn, Some((KEY, 0, q.qpn))),
            (0xc2, dctn, Some((KEY, 0, q.qpn))),
            (0xd1, q.qpn, None),
        ]
    );
    // RDMA WRITE, READ and FETCH_ADD through the DCT: its access flags and PD.
    let w = a.post_send(
        &mut q,
        WRITE,
        SIGNALED,
        [0; 4],
        &[
            dc_av(KEY, dctn, 2),
            Seg::Raddr(dst.va(5000), dst.key),
            Seg::Data(64, src.key, src.va(3000)),
        ],
    );
    let r = a.post_send(
        &mut q,
        READ,
        SIGNALED,
        [0; 4],
        &[
            dc_av(KEY, dctn, 2),
            Seg::Raddr(dst.va(5000), dst.key),
            Seg::Data(64, src.key, src.va(6000)),
        ],
    );
    b.dev()
        .dma_write(dst.buf.iova + 7168, &40u64.to_le_bytes())
        .unwrap();
    let f = a.post_send(
        &mut q,
        FA,
        SIGNALED,
        [0; 4],
        &[
            dc_av(KEY, dctn, 2),
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
    assert_eq!(read(&b.dev(), &dst, 5000, 64), data[3000..3064]);
    assert_eq!(read(&a.dev(), &src, 6000, 64), data[3000..3064]);
    assert_eq!(read(&a.dev(), &src, 7200, 8), 40u64.to_be_bytes());
    assert_eq!(read(&b.dev(), &dst, 7168, 8), 42u64.to_le_bytes());
    assert!(b.drain().is_empty(), "WRITE, READ and atomics take no WQE");
    assert_eq!(b.dev().dc_connections(), 1);
}

/// Six SENDs written at once from one DCI to two DCTs in turn, then one doorbell, with
/// `fault` on the wire: each DCT gets its own, in order, exactly once.
fn dct_to_dct(fault: Option<WireFault>) {
    let (fabric, mut a, mut b) = pair(Mode::Sync);
    let mut srq = rmp(&mut b);
    let (_, _, d1) = create_dct(&mut b, srq.n, |_| {});
    let (_, _, d2) = create_dct(&mut b, srq.n, |c| {
        c.set(Dctc::USER_INDEX, 0x99).unwrap();
    });
    let mut q = dci(&mut a);
    let src = a.reg_mr(4096, true, true, true);
    let dst = b.reg_mr(4096, true, true, true);
    let data = fill(&a.dev(), &src, 9);
    for k in 0..6 {
        srq.post(&b.dev(), &dst, 512 * k, 512);
    }
    if let Some(f) = fault {
        fabric.inject(f);
    }
    // Written first, rung once: the DCI finishes with one DCT before it connects to the next.
    let mut last = Vec::new();
    for (k, d) in [d1, d2, d1, d1, d2, d2].into_iter().enumerate() {
        last = a
            .write_wqe(
                &mut q,
                SEND,
                SIGNALED,
                [0; 4],
                &[
                    dc_av(KEY, d, 2),
                    Seg::Data(100 + k as u32, src.key, src.va(100 * k as u64)),
                ],
            )
            .1;
    }
    let off = u64::from(a.fx.uar) * 4096 + 0x800;
    let first = u64::from_be_bytes(last[..8].try_into().unwrap());
    a.dev().bar_write64(off, mlx5_ifc::Be64::new(first));
    let sent: Vec<(u8, u16)> = (0..6)
        .filter_map(|_| a.wait(5_000_000_000))
        .map(|c| (c.opcode, c.wqe_counter))
        .collect();
    let wqes: Vec<(u8, u16)> = (0..6).map(|k| (REQ, 2 * k)).collect();
    assert_eq!(sent, wqes, "WQEs of two WQEBBs each, all done");
    let got: Vec<(u32, u32, u32)> = b
        .drain()
        .iter()
        .map(|c| (c.qpn, c.srqn_uidx, c.byte_cnt))
        .collect();
    assert_eq!(
        got,
        [
            (d1, DCT_USER_INDEX, 100),
            (d2, 0x99, 101),
            (d1, DCT_USER_INDEX, 102),
            (d1, DCT_USER_INDEX, 103),
            (d2, 0x99, 104),
            (d2, 0x99, 105),
        ]
    );
    for k in 0..6usize {
        let at = 512 * k as u64;
        assert_eq!(
            read(&b.dev(), &dst, at, 100 + k),
            data[100 * k..101 * k + 100]
        );
    }
    assert_eq!(b.dev().dc_connections(), 2);
}

#[test]
fn a_dci_goes_from_dct_to_dct_and_each_sees_its_own_messages() {
    dct_to_dct(None);
}

/// A late wire: the DCI's WQE for the other DCT waits until the first is acknowledged.
#[test]
fn a_dci_waits_for_its_acknowledgements_before_it_connects_elsewhere() {
    dct_to_dct(Some(WireFault::Delay { ns: 200_000 }));
}

/// A lossy wire: lost connect packets and ACKs are retransmitted; no message is lost or
/// delivered twice.
#[test]
fn lost_connects_and_acks_are_recovered_exactly_once() {
    for seed in 1..=8 {
        dct_to_dct(Some(WireFault::DropRandom {
            per_million: 200_000,
            seed,
        }));
    }
}

#[test]
fn a_wrong_key_is_counted_dropped_and_raises_the_armed_event_once() {
    let (_fabric, mut a, mut b) = pair(Mode::Sync);
    let mut srq = rmp(&mut b);
    let (_, _, dctn) = create_dct(&mut b, srq.n, |_| {});
    let mut q = dci(&mut a);
    let src = a.reg_mr(4096, true, true, true);
    let dst = b.reg_mr(4096, true, true, true);
    srq.post(&b.dev(), &dst, 0, 512);
    assert_eq!(dct_cmd(&mut b, Opcode::ArmDctForKeyViolation, dctn).0, 0);
    a.post_send(
        &mut q,
        SEND,
        SIGNALED,
        [0; 4],
        &[dc_av(KEY + 1, dctn, 2), Seg::Data(64, src.key, src.va(0))],
    );
    assert!(b.drain().is_empty(), "no WQE taken");
    let (_, violations) = query(&mut b, dctn);
    assert!(violations >= 1);
    assert!(b.dev().datapath_counters().dc_key_violations >= 1);
    let ev = b.poll_eq().expect("DCT_KEY_VIOLATION");
    assert_eq!(ev.0, DCT_KEY_VIOLATION);
    assert_eq!(
        u32::from_be_bytes(ev.1[24..28].try_into().unwrap()) & 0xff_ffff,
        dctn
    );
    // Retransmissions violate again: counted, no second event (the DCT is no longer armed).
    let before = query(&mut b, dctn).1;
    assert!(a.wait(200_000_000).is_none(), "still retrying");
    assert!(query(&mut b, dctn).1 > before);
    assert!(b.poll_eq().is_none());
}

#[test]
fn drain_posts_dct_drained_then_destroy_and_the_dct_takes_nothing_more() {
    let (_fabric, mut a, mut b) = pair(Mode::Sync);
    let mut srq = rmp(&mut b);
    let (_, _, dctn) = create_dct(&mut b, srq.n, |_| {});
    let mut q = dci(&mut a);
    let src = a.reg_mr(4096, true, true, true);
    let dst = b.reg_mr(4096, true, true, true);
    srq.post(&b.dev(), &dst, 0, 512);
    a.post_send(
        &mut q,
        SEND,
        SIGNALED,
        [0; 4],
        &[dc_av(KEY, dctn, 2), Seg::Data(8, src.key, src.va(0))],
    );
    assert_eq!(b.drain().len(), 1);
    assert_eq!(a.drain().len(), 1);
    assert_eq!(b.dev().dc_connections(), 1);
    assert_eq!(dct_cmd(&mut b, Opcode::DrainDct, dctn).0, 0);
    let ev = b.poll_eq().expect("DCT_DRAINED");
    assert_eq!(ev.0, DCT_DRAINED);
    assert_eq!(
        u32::from_be_bytes(ev.1[24..28].try_into().unwrap()) & 0xff_ffff,
        dctn
    );
    assert_eq!(query(&mut b, dctn).0, 2, "DRAINED");
    assert_eq!(b.dev().dc_connections(), 0);
    let (s, syn, _) = dct_cmd(&mut b, Opcode::DrainDct, dctn);
    assert_eq!((s, syn), (BAD_RES_STATE, 0x5e09_0003), "DCT_NOT_ACTIVE");
    // A request to a drained DCT is dropped.
    srq.post(&b.dev(), &dst, 512, 512);
    let dropped = b.dev().datapath_counters().rx_dropped;
    a.post_send(
        &mut q,
        SEND,
        SIGNALED,
        [0; 4],
        &[dc_av(KEY, dctn, 2), Seg::Data(8, src.key, src.va(0))],
    );
    assert!(b.drain().is_empty());
    assert!(b.dev().datapath_counters().rx_dropped > dropped);
    assert_eq!(dct_cmd(&mut b, Opcode::DestroyDct, dctn).0, 0);
    let (s, syn, _) = dct_cmd(&mut b, Opcode::QueryDct, dctn);
    assert_eq!((s, syn), (BAD_RES, 0x5e05_0015), "UNKNOWN_DCT");
}

#[test]
fn create_dct_and_dci_wqes_are_checked() {
    let (_fabric, mut a, mut b) = pair(Mode::Sync);
    let srq = rmp(&mut b);
    let cases: [(&str, DctEdit, u8, u32); 7] = [
        (
            "pd",
            Box::new(|c| c.set(Dctc::PD, 0x7777).map(drop).unwrap()),
            BAD_RES,
            0x5e05_0002,
        ),
        (
            "cqn",
            Box::new(|c| c.set(Dctc::CQN, 0x7777).map(drop).unwrap()),
            BAD_RES,
            0x5e05_0004,
        ),
        (
            "srq",
            Box::new(|c| c.set(Dctc::SRQN_XRQN, 0x7777).map(drop).unwrap()),
            BAD_RES,
            0x5e05_0005,
        ),
        (
            "port",
            Box::new(|c| c.set(Dctc::PORT, 2).map(drop).unwrap()),
            BAD_PARAM,
            0x5e03_002d,
        ),
        (
            "mtu",
            Box::new(|c| c.set(Dctc::MTU, 0).map(drop).unwrap()),
            BAD_PARAM,
            0x5e03_0030,
        ),
        (
            "gid",
            Box::new(|c| c.set(Dctc::MY_ADDR_INDEX, 200).map(drop).unwrap()),
            BAD_PARAM,
            0x5e03_0034,
        ),
        (
            "cs_res",
            Box::new(|c| c.set(Dctc::CS_RES, 3).map(drop).unwrap()),
            BAD_PARAM,
            0x5e03_0076,
        ),
    ];
    for (what, edit, s, syn) in cases {
        let (gs, gsyn, _) = create_dct(&mut b, srq.n, |c| edit(c));
        assert_eq!((gs, gsyn), (s, syn), "{what}");
    }
    // A DCI takes RC's operations without SEND with invalidate.
    let (_, _, dctn) = create_dct(&mut b, srq.n, |_| {});
    let mut q = dci(&mut a);
    let src = a.reg_mr(4096, true, true, true);
    a.post_send(
        &mut q,
        SEND_INVAL,
        SIGNALED,
        [0; 4],
        &[dc_av(KEY, dctn, 2), Seg::Data(8, src.key, src.va(0))],
    );
    let c = a.drain();
    assert_eq!((c[0].opcode, c[0].syndrome), (REQ_ERR, LOCAL_QP_OP_ERR));
    // An RC QP's number is never a DCT's: one number space.
    let rc = b.create_qp(RC);
    assert_ne!(rc.qpn, dctn);
}

#[test]
fn without_dct_a_device_refuses_dcis_and_dcts() {
    let profile = Profile::from_json_str(r#"{"_mac": "02:c5:5a:00:00:01", "dct": 0}"#).unwrap();
    let mut n = Node::with_profile(common::quiet(profile), Mode::Sync, 1);
    let srq = n.fx.create_rmp();
    let (s, _, _) = create_dct(&mut n, srq, |_| {});
    assert_eq!(s, BAD_OP);
    let input = n.fx.qp_in(DCI, n.cqn, |_| {});
    let out = n.fx.p.exec(&input, 0x10);
    assert_eq!(
        status(&out),
        (BAD_PARAM, 0x5e03_0025),
        "QP_ST_NOT_SUPPORTED"
    );
}
