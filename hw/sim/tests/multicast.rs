//! UD multicast: ATTACH_TO_MCG / DETACH_FROM_MCG and delivery, checked against what their users
//! do — ib_core's `ib_attach_mcast` (UD QPs, a multicast GID), rdma_cm's RoCE v2 groups
//! (`230.x.y.z` as an IPv4-mapped GID, the frames to MAC 01:00:5e:…, QPN 0xffffff) and
//! rdma-core's test suite, whose sender and receivers share one port (so the device loops its
//! multicast back to its own port).

mod common;

use common::datapath::*;
use common::{cmd, status};
use mlx5_ifc::consts::qp_st::{RC, UD};
use mlx5_ifc::prm::qp::{AttachToMcgIn, DestroyQpIn, DetachFromMcgIn, Qpc};
use mlx5_ifc::{Layout, Opcode};
use mlx5_sim::Mode;

const SIGNALED: u8 = 0x08;
const SEND: u8 = 0x0a;
const RESP_SEND: u8 = 0x2;
const QKEY: u32 = 0x1111_1111;
const MULTICAST_QPN: u32 = 0xff_ffff;

const BAD_PARAM: u8 = 0x03;
const BAD_RES: u8 = 0x05;
const EXCEED_LIM: u8 = 0x08;
const UNKNOWN_QP: u32 = 0x5e05_0006;
const MCG_QP_TYPE: u32 = 0x5e03_0068;
const MCG_GID: u32 = 0x5e03_0069;
const MCG_NOT_ATTACHED: u32 = 0x5e03_006a;
const MCG_EXHAUSTED: u32 = 0x5e08_000a;

/// `::ffff:230.0.0.n`, the GID rdma_cm gives a RoCE v2 group of `230.0.0.n`.
fn group(n: u8) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10..].copy_from_slice(&[0xff, 0xff, 230, 0, 0, n]);
    g
}

/// The IPv4 multicast MAC of `230.0.0.n`.
fn group_mac(n: u8) -> [u8; 6] {
    [0x01, 0x00, 0x5e, 0, 0, n]
}

fn mcg<L: Layout>(
    op: Opcode,
    qpn: mlx5_ifc::Field<L>,
    gid: mlx5_ifc::Bytes<L>,
    q: u32,
    g: [u8; 16],
) -> Vec<u8> {
    cmd::<L>(op, 0, |v| {
        v.set(qpn, q.into()).unwrap();
        v.bytes_mut(gid).copy_from_slice(&g);
    })
}

fn attach(n: &mut Node, qpn: u32, g: [u8; 16]) -> (u8, u32) {
    let i = mcg::<AttachToMcgIn>(
        Opcode::AttachToMcg,
        AttachToMcgIn::QPN,
        AttachToMcgIn::MULTICAST_GID,
        qpn,
        g,
    );
    status(&n.fx.p.exec(&i, 0x10))
}

fn detach(n: &mut Node, qpn: u32, g: [u8; 16]) -> (u8, u32) {
    let i = mcg::<DetachFromMcgIn>(
        Opcode::DetachFromMcg,
        DetachFromMcgIn::QPN,
        DetachFromMcgIn::MULTICAST_GID,
        qpn,
        g,
    );
    status(&n.fx.p.exec(&i, 0x10))
}

/// The UD address vector of group `g` (QPN 0xffffff, the group's MAC and GID).
fn group_av(g: u8) -> Seg {
    let mut av = [0u8; 48];
    av[..4].copy_from_slice(&QKEY.to_be_bytes());
    av[8..12].copy_from_slice(&(MULTICAST_QPN | 0x8000_0000).to_be_bytes());
    av[14..16].copy_from_slice(&0xc123u16.to_be_bytes());
    av[20..26].copy_from_slice(&group_mac(g));
    av[27] = 64;
    av[32..48].copy_from_slice(&group(g));
    Seg::Raw(av.to_vec())
}

/// A signaled UD SEND of `data` (inline) from `qp` to group `g`.
fn send_to_group(n: &Node, qp: &mut Qp, g: u8, data: Vec<u8>) {
    n.post_send(
        qp,
        SEND,
        SIGNALED,
        [0; 4],
        &[group_av(g), Seg::Inline(data)],
    );
}

/// A UD QP in RTS; `edit` applies to its CREATE_QP context.
fn ud_qp(n: &mut Node, edit: impl FnOnce(&mut mlx5_ifc::ViewMut<'_, Qpc>)) -> Qp {
    let q = n.create_qp_with(UD, None, edit);
    let ip = n.ip;
    n.connect(&q, ip, 0, |_| {});
    q
}

/// Every receive CQE now on the node, as (QPN, byte count).
fn received(n: &mut Node) -> Vec<(u32, u32)> {
    let mut v: Vec<(u32, u32)> = n
        .drain()
        .into_iter()
        .filter(|c| c.opcode == RESP_SEND)
        .map(|c| (c.qpn, c.byte_cnt))
        .collect();
    v.sort_unstable();
    v
}

#[test]
fn a_multicast_send_reaches_every_attached_qp_on_the_wire_and_on_its_own_port() {
    let (_fabric, mut a, mut b) = pair(Mode::Sync);
    let sender = ud_qp(&mut a, |_| {});
    let mut near = ud_qp(&mut a, |_| {});
    let (mut far1, mut far2) = (ud_qp(&mut b, |_| {}), ud_qp(&mut b, |_| {}));
    let mut other = ud_qp(&mut b, |_| {});
    assert_eq!(attach(&mut a, near.qpn, group(1)), (0, 0));
    assert_eq!(attach(&mut b, far1.qpn, group(1)), (0, 0));
    assert_eq!(attach(&mut b, far2.qpn, group(1)), (0, 0));
    assert_eq!(attach(&mut b, other.qpn, group(2)), (0, 0), "another group");
    let (ma, mb) = (
        a.reg_mr(4096, false, false, false),
        b.reg_mr(4096, false, false, false),
    );
    for q in [&mut far1, &mut far2, &mut other] {
        b.post_recv(q, &[(1000, mb.key, mb.va(0))]);
    }
    a.post_recv(&mut near, &[(1000, ma.key, ma.va(0))]);
    let mut sender = sender;
    send_to_group(&a, &mut sender, 1, vec![7; 24]);
    // 40 bytes of GRH, then the 24 of the message, on each QP of group 1 — the one on the
    // sending port included — and nowhere else.
    let mut far = vec![(far1.qpn, 64), (far2.qpn, 64)];
    far.sort_unstable();
    assert_eq!(received(&mut b), far);
    let got = received(&mut a);
    assert_eq!(got, vec![(near.qpn, 64)], "looped back to the sending port");
    assert_eq!(
        read(&b.dev(), &mb, 36, 4),
        vec![230, 0, 0, 1],
        "the IPv4 header in the GRH names the group"
    );

    // One leaves: the next message reaches the other only.
    assert_eq!(detach(&mut b, far1.qpn, group(1)), (0, 0));
    for q in [&mut far1, &mut far2] {
        b.post_recv(q, &[(1000, mb.key, mb.va(0))]);
    }
    a.post_recv(&mut near, &[(1000, ma.key, ma.va(0))]);
    send_to_group(&a, &mut sender, 1, vec![8; 8]);
    assert_eq!(received(&mut b), vec![(far2.qpn, 48)]);
    assert_eq!(received(&mut a), vec![(near.qpn, 48)]);

    // A destroyed QP leaves its groups: the next message reaches the rest.
    let i = cmd::<DestroyQpIn>(Opcode::DestroyQp, 0, |v| {
        v.set(DestroyQpIn::QPN, far2.qpn.into()).unwrap();
    });
    assert_eq!(status(&b.fx.p.exec(&i, 0x10)), (0, 0));
    assert_eq!(attach(&mut b, far1.qpn, group(1)), (0, 0));
    a.post_recv(&mut near, &[(1000, ma.key, ma.va(0))]);
    send_to_group(&a, &mut sender, 1, vec![9; 8]);
    assert_eq!(received(&mut b), vec![(far1.qpn, 48)]);
    assert_eq!(received(&mut a), vec![(near.qpn, 48)]);
    assert!(a.dev().dma_faults().is_empty() && b.dev().dma_faults().is_empty());
}

#[test]
fn block_lb_mc_keeps_a_qps_own_multicast_from_coming_back_to_it() {
    let mut n = Node::new(Mode::Sync, 1);
    let mut plain = ud_qp(&mut n, |_| {});
    let mut blocked = ud_qp(&mut n, |c| {
        c.set(Qpc::BLOCK_LB_MC, 1).unwrap();
    });
    let m = n.reg_mr(4096, false, false, false);
    for q in [&plain, &blocked] {
        assert_eq!(attach(&mut n, q.qpn, group(3)), (0, 0));
    }
    for q in [&mut plain, &mut blocked] {
        n.post_recv(q, &[(1000, m.key, m.va(0))]);
    }
    // The blocked QP sends: the plain one gets it, the sender does not.
    send_to_group(&n, &mut blocked, 3, vec![1; 8]);
    assert_eq!(received(&mut n), vec![(plain.qpn, 48)]);
    // The plain one sends: both get it, itself included.
    n.post_recv(&mut plain, &[(1000, m.key, m.va(0))]);
    send_to_group(&n, &mut plain, 3, vec![2; 8]);
    let mut want = vec![(plain.qpn, 48), (blocked.qpn, 48)];
    want.sort_unstable();
    assert_eq!(received(&mut n), want);
}

#[test]
fn attach_and_detach_refusals_name_their_reason() {
    let mut n = Node::new(Mode::Sync, 1);
    let ud = ud_qp(&mut n, |_| {});
    let rc = n.create_qp(RC);
    let mut unicast = group(1);
    unicast[12] = 10;
    for (what, got, want) in [
        (
            "an RC QP",
            attach(&mut n, rc.qpn, group(1)),
            (BAD_PARAM, MCG_QP_TYPE),
        ),
        (
            "a unicast GID",
            attach(&mut n, ud.qpn, unicast),
            (BAD_PARAM, MCG_GID),
        ),
        (
            "a QP that does not exist",
            attach(&mut n, ud.qpn + 50, group(1)),
            (BAD_RES, UNKNOWN_QP),
        ),
        (
            "leaving a group not joined",
            detach(&mut n, ud.qpn, group(1)),
            (BAD_PARAM, MCG_NOT_ATTACHED),
        ),
    ] {
        assert_eq!(got, want, "{what}");
    }
    let mut ipv6 = [0u8; 16];
    ipv6[0] = 0xff;
    ipv6[1] = 0x0e;
    assert_eq!(
        attach(&mut n, ud.qpn, ipv6),
        (0, 0),
        "an IPv6 multicast GID"
    );
    assert_eq!(
        attach(&mut n, ud.qpn, ipv6),
        (0, 0),
        "joining twice changes nothing"
    );
    assert_eq!(detach(&mut n, ud.qpn, ipv6), (0, 0));
    assert_eq!(
        detach(&mut n, ud.qpn, ipv6),
        (BAD_PARAM, MCG_NOT_ATTACHED),
        "left once"
    );
}

#[test]
fn groups_and_their_members_are_bounded_by_the_capabilities() {
    let json = r#"{"_mac": "02:c5:5a:00:00:01", "max_qp_mcg": 2, "log_max_mcg": 1}"#;
    let profile = common::quiet(mlx5_sim::Profile::from_json_str(json).unwrap());
    let mut n = Node::with_profile(profile, Mode::Sync, 1);
    let qps: Vec<Qp> = (0..3).map(|_| ud_qp(&mut n, |_| {})).collect();
    assert_eq!(attach(&mut n, qps[0].qpn, group(1)), (0, 0));
    assert_eq!(attach(&mut n, qps[1].qpn, group(1)), (0, 0));
    assert_eq!(
        attach(&mut n, qps[2].qpn, group(1)),
        (EXCEED_LIM, MCG_EXHAUSTED),
        "max_qp_mcg QPs in the group"
    );
    assert_eq!(attach(&mut n, qps[2].qpn, group(2)), (0, 0));
    assert_eq!(
        attach(&mut n, qps[2].qpn, group(3)),
        (EXCEED_LIM, MCG_EXHAUSTED),
        "2^log_max_mcg groups"
    );
    assert_eq!(detach(&mut n, qps[2].qpn, group(2)), (0, 0));
    assert_eq!(
        attach(&mut n, qps[2].qpn, group(3)),
        (0, 0),
        "a group freed"
    );
}

#[test]
fn block_lb_mc_needs_its_capability() {
    let json = r#"{"_mac": "02:c5:5a:00:00:01", "block_lb_mc": 0}"#;
    let profile = common::quiet(mlx5_sim::Profile::from_json_str(json).unwrap());
    let mut n = Node::with_profile(profile, Mode::Sync, 1);
    let (pd, uar, cqn) = (n.fx.pd, n.fx.uar, n.cqn);
    let dev = n.dev();
    let buf = dev.dma_alloc(4096, 4096).unwrap();
    let dbr = dev.dma_alloc(64, 64).unwrap();
    let input = cmd::<mlx5_ifc::prm::qp::CreateQpIn>(Opcode::CreateQp, 0, |v| {
        let mut c = v.nested_mut(mlx5_ifc::prm::qp::CreateQpIn::QPC);
        for (f, x) in [
            (Qpc::ST, UD),
            (Qpc::PM_STATE, 3),
            (Qpc::PD, pd.into()),
            (Qpc::UAR_PAGE, uar.into()),
            (Qpc::CQN_SND, cqn.into()),
            (Qpc::CQN_RCV, cqn.into()),
            (Qpc::LOG_RQ_STRIDE, 2),
            (Qpc::DBR_ADDR, dbr.iova),
            (Qpc::BLOCK_LB_MC, 1),
        ] {
            c.set(f, x).unwrap();
        }
    });
    let input = common::queues::with_pas(input, &[buf.iova]);
    assert_eq!(status(&n.fx.p.exec(&input, 0x10)), (BAD_PARAM, 0x5e03_0025));
}
