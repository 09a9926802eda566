//! The connection manager between two simulated ConnectX-5s: QP1 on each, an RC connection set
//! up by REQ/REP/RTU and torn down by DREQ/DREP, data across it, a refused port, and the
//! handshake surviving lost MADs (retransmission on short timers).

mod common;

use common::cm::fast;
use common::*;
use mlx5::cm::{mapped, Cm, CmEvent, ConnParam, Gsi, GsiBufs, Route};
use mlx5::mr::MrAccess;
use mlx5::qp::{QpState, QpType, RecvWr, SendWr, Sge};
use mlx5::sim::{Fabric, Mode, WireFault};
use mlx5::{GidEntry, WcOpcode, WcStatus};

const IP_A: [u8; 4] = [10, 0, 0, 1];
const IP_B: [u8; 4] = [10, 0, 0, 2];

fn with_ip(dev: &Dev, ip: [u8; 4]) {
    let mac = dev.vport().mac;
    dev.set_gid(
        1,
        Some(GidEntry {
            gid: mapped(ip),
            mac,
            vlan: None,
        }),
    )
    .unwrap();
}

/// Two NICs on `fabric`, A at 10.0.0.1 and B at 10.0.0.2 (GID index 1).
fn two(fabric: &Fabric) -> ((mlx5::sim::SimDevice, Dev), (mlx5::sim::SimDevice, Dev)) {
    let (sa, a) = nic(fabric, Mode::Sync);
    let (sb, b) = nic(fabric, Mode::Sync);
    with_ip(&a, IP_A);
    with_ip(&b, IP_B);
    ((sa, a), (sb, b))
}

/// Polls both CMs until `want` says an event is the one awaited (others are returned too).
fn next(
    cm: &mut Cm<'_, mlx5::SimPlatform>,
    other: &mut Cm<'_, mlx5::SimPlatform>,
    dev: &Dev,
) -> CmEvent {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if let Some(e) = cm.poll().unwrap() {
            return e;
        }
        // The other side must run too: its MADs and timers.
        if let Some(e) = other.poll().unwrap() {
            panic!("unexpected event on the other side: {e:?}");
        }
        assert!(std::time::Instant::now() < deadline, "no CM event");
        // Device time moves on (virtual in Sync mode): the retransmission timers run.
        mlx5::Platform::relax(dev.platform());
    }
}

fn handshake_and_data(fabric: &Fabric, lossy: bool) {
    let ((_sa, a), (_sb, b)) = two(fabric);
    let (ba, bb) = (GsiBufs::new(&a).unwrap(), GsiBufs::new(&b).unwrap());
    let mut ca = Cm::new(Gsi::open(&a, &ba, 1).unwrap(), fast(&a));
    let mut cb = Cm::new(Gsi::open(&b, &bb, 1).unwrap(), fast(&b));
    cb.listen(7174).unwrap();
    let (cqa, cqb) = (a.create_cq(16).unwrap(), b.create_cq(16).unwrap());
    let mut qa = qp(&a, &cqa, QpType::Rc, cap(4, 4, 1));
    let mut qb = qp(&b, &cqb, QpType::Rc, cap(4, 4, 1));
    if lossy {
        // The first REQ and (after it) the first REP are lost.
        fabric.inject(WireFault::Drop { count: 1 });
    }
    let route = Route {
        src_ip: IP_A,
        src_port: 40_000,
        dst_ip: IP_B,
        dst_port: 7174,
        dmac: b.vport().mac,
    };
    let p = ConnParam {
        private_data: b"hello",
        ..ConnParam::default()
    };
    let id_a = ca.connect(&mut qa, &route, &p).unwrap();
    assert_eq!(qa.state(), QpState::Init);
    let CmEvent::ConnectRequest(r) = next(&mut cb, &mut ca, &b) else {
        panic!("no REQ")
    };
    assert_eq!((r.port, r.remote_qpn), (7174, qa.qpn()));
    assert_eq!(r.remote_gid, mapped(IP_A));
    let h = r.cma.expect("rdma_cm header");
    assert_eq!((h.src_ip, h.dst_ip, h.src_port), (IP_A, IP_B, 40_000));
    assert_eq!(&r.private_data[..5], b"hello");
    assert_eq!((r.responder_resources, r.initiator_depth), (1, 1));
    if lossy {
        fabric.inject(WireFault::Drop { count: 1 });
    }
    cb.accept(r.id, &mut qb, a.vport().mac, &ConnParam::default())
        .unwrap();
    assert_eq!(qb.state(), QpState::Rts);
    let CmEvent::ConnectResponse { id, .. } = next(&mut ca, &mut cb, &a) else {
        panic!("no REP")
    };
    assert_eq!(id, id_a);
    ca.establish(id, &mut qa).unwrap();
    assert_eq!(qa.state(), QpState::Rts);
    let CmEvent::Established { id: id_b } = next(&mut cb, &mut ca, &b) else {
        panic!("no RTU")
    };
    assert_eq!(id_b, r.id);

    // Data over the connection the CM made.
    let (mra, mrb) = (
        a.alloc_mr(a.pd(), 4096, MrAccess::ALL).unwrap(),
        b.alloc_mr(b.pd(), 4096, MrAccess::ALL).unwrap(),
    );
    qb.post_recv(&[RecvWr {
        wr_id: 7,
        sg_list: &[Sge {
            addr: mrb.addr(),
            length: 4096,
            lkey: mrb.lkey(),
        }],
    }])
    .unwrap();
    mra.write(0, b"over the CM's connection").unwrap();
    let sge = [Sge {
        addr: mra.addr(),
        length: 24,
        lkey: mra.lkey(),
    }];
    let mut wr = SendWr::send(1, &sge);
    wr.signaled = true;
    qa.post_send(&[wr]).unwrap();
    let wc = wait(&cqb, &b, 1);
    assert_eq!(
        (wc[0].status, wc[0].opcode, wc[0].byte_len),
        (WcStatus::Success, WcOpcode::Recv, 24)
    );
    let mut got = [0u8; 24];
    mrb.read(0, &mut got).unwrap();
    assert_eq!(&got, b"over the CM's connection");
    assert_eq!(wait(&cqa, &a, 1)[0].status, WcStatus::Success);

    // A disconnects; B hears it, answers, and both end.
    ca.disconnect(id_a, &mut qa).unwrap();
    assert_eq!(qa.state(), QpState::Err);
    let CmEvent::Disconnected { id } = next(&mut cb, &mut ca, &b) else {
        panic!("no DREQ")
    };
    assert_eq!(id, r.id);
    cb.disconnect(id, &mut qb).unwrap();
    let CmEvent::Disconnected { id } = next(&mut ca, &mut cb, &a) else {
        panic!("no DREP")
    };
    assert_eq!(id, id_a);
    assert_eq!((ca.dropped, cb.dropped), (0, 0));
    drop(wait(&cqb, &b, 0));
    drop((qa.destroy(), qb.destroy()));
    ca.into_gsi().close().unwrap();
    cb.into_gsi().close().unwrap();
    ba.destroy().unwrap();
    bb.destroy().unwrap();
    drop((mra, mrb, cqa, cqb));
}

#[test]
fn connect_send_disconnect() {
    handshake_and_data(&Fabric::new(), false);
}

#[test]
fn lost_req_and_rep_are_retransmitted() {
    handshake_and_data(&Fabric::new(), true);
}

#[test]
fn a_port_nobody_listens_on_is_rejected() {
    let fabric = Fabric::new();
    let ((_sa, a), (_sb, b)) = two(&fabric);
    let (ba, bb) = (GsiBufs::new(&a).unwrap(), GsiBufs::new(&b).unwrap());
    let mut ca = Cm::new(Gsi::open(&a, &ba, 1).unwrap(), fast(&a));
    let mut cb = Cm::new(Gsi::open(&b, &bb, 1).unwrap(), fast(&b));
    cb.listen(7174).unwrap();
    cb.learn(mapped(IP_A), a.vport().mac);
    let cqa = a.create_cq(16).unwrap();
    let mut qa = qp(&a, &cqa, QpType::Rc, cap(4, 4, 1));
    let route = Route {
        src_ip: IP_A,
        src_port: 40_001,
        dst_ip: IP_B,
        dst_port: 9999,
        dmac: b.vport().mac,
    };
    let id = ca.connect(&mut qa, &route, &ConnParam::default()).unwrap();
    assert_eq!(
        next(&mut ca, &mut cb, &a),
        CmEvent::Rejected { id, reason: 8 },
        "REJ reason 8: invalid ServiceID"
    );
}

#[test]
fn an_unanswered_req_ends_unreachable() {
    let fabric = Fabric::new();
    let (_sa, a) = nic(&fabric, Mode::Sync);
    with_ip(&a, IP_A);
    let ba = GsiBufs::new(&a).unwrap();
    let mut ca = Cm::new(Gsi::open(&a, &ba, 1).unwrap(), fast(&a));
    let cqa = a.create_cq(16).unwrap();
    let mut qa = qp(&a, &cqa, QpType::Rc, cap(4, 4, 1));
    let route = Route {
        src_ip: IP_A,
        src_port: 40_002,
        dst_ip: IP_B,
        dst_port: 7174,
        dmac: [2, 0, 0, 0, 0, 0x99],
    };
    let id = ca.connect(&mut qa, &route, &ConnParam::default()).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let e = loop {
        if let Some(e) = ca.poll().unwrap() {
            break e;
        }
        assert!(std::time::Instant::now() < deadline);
        mlx5::Platform::relax(a.platform());
    };
    assert_eq!(
        e,
        CmEvent::Unreachable {
            id,
            waiting_for: "a REP to our REQ"
        }
    );
}

#[test]
fn random_cm_messages_never_upset_the_connection_manager() {
    // A raw QP1 on A sends B 400 MADs with a CM header and random bodies (attribute IDs REQ to
    // DREP); B's CM answers what deserves an answer (REJ, DREP, MRA), never panics, and the
    // REQs it took and nobody answered are forgotten in time (the table never stays full).
    let fabric = Fabric::new();
    let ((_sa, a), (_sb, b)) = two(&fabric);
    let (ba, bb) = (GsiBufs::new(&a).unwrap(), GsiBufs::new(&b).unwrap());
    let mut ga = Gsi::open(&a, &ba, 1).unwrap();
    let mut cb = Cm::new(Gsi::open(&b, &bb, 1).unwrap(), fast(&b));
    cb.listen(7174).unwrap();
    cb.learn(mapped(IP_A), a.vport().mac);
    let to = mlx5::cm::MadAddr {
        gid: mapped(IP_B),
        mac: b.vport().mac,
        sgid_index: 1,
        hop_limit: 64,
        traffic_class: 0,
    };
    let mut seed = 0x1234_5678_9abc_def1u64;
    let mut rnd = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut requests = 0;
    for i in 0..400u32 {
        let attr = 0x10 + (rnd() % 7) as u16;
        let mut m = mlx5::raw::mad::Mad::cm(attr, rnd());
        for byte in m.0[24..].iter_mut() {
            *byte = rnd() as u8;
        }
        if i % 3 == 0 {
            // Aim at a port B listens on, so that some REQs are taken.
            m.set(mlx5::raw::mad::req::SERVICE_ID, 0x0106_0000 | 7174);
            m.set(mlx5::raw::mad::req::PATH_MTU, 3);
            m.set(mlx5::raw::mad::req::TRANSPORT, 0);
        }
        ga.send(&to, &m).unwrap();
        // Drain A's QP1 (B's answers, and A's send completions).
        while ga.recv().unwrap().is_some() {}
        mlx5::Platform::relax(b.platform());
        while let Some(e) = cb.poll().unwrap() {
            if let CmEvent::ConnectRequest(r) = e {
                requests += 1;
                // Refuse half, leave half to time out.
                if requests % 2 == 0 {
                    cb.reject(r.id, 28).unwrap();
                }
            }
        }
    }
    assert!(requests > 0, "no random REQ was taken");
    assert!(cb.dropped > 0, "every random MAD was taken");
    // The unanswered REQs expire (the fast config: 2 × 16 ms × up to 16 tries each).
    let mut expired = 0;
    for _ in 0..2_000_000 {
        mlx5::Platform::relax(b.platform());
        match cb.poll().unwrap() {
            Some(CmEvent::Unreachable { waiting_for, .. }) => {
                assert_eq!(waiting_for, "our accept or reject of its REQ");
                expired += 1;
            }
            Some(_) => {}
            None if expired > 0 => break,
            None => {}
        }
    }
    assert!(expired > 0, "no unanswered REQ was forgotten");
}
