//! The connection manager against a hostile peer (issue #26): a raw QP1 on a third simulated
//! NIC sends crafted MADs at a listening CM. Every resource such a peer can make us hold is
//! bounded and expires on our clock; an answer we cannot send is dropped and counted, never an
//! error of `Cm::poll`; a REJ ends a connection only as Linux's CM lets one.

mod common;

use common::cm::{fast, greedy_req, send, to, with_ip};
use common::*;
use mlx5::cm::{mapped, Cm, CmEvent, CmId, ConnParam, ConnRequest, Gsi, GsiBufs, Route};
use mlx5::qp::QpType;
use mlx5::raw::mad::{attr, dreq, ids, mra, msg, rej, req, Mad};
use mlx5::sim::{Fabric, Mode};

type SimCm<'a> = Cm<'a, mlx5::SimPlatform>;

const IP_A: [u8; 4] = [10, 0, 0, 1];
const IP_B: [u8; 4] = [10, 0, 0, 2];
const IP_C: [u8; 4] = [10, 0, 0, 3];
const PORT: u16 = 7174;

/// The three NICs of a test on one fabric — A and B (ours), C (the hostile peer) — and the
/// GSI buffers of each: `three!(fabric, (a, b, c), (ba, bb, bc))`.
macro_rules! three {
    ($fabric:ident, ($a:ident, $b:ident, $c:ident), ($ba:ident, $bb:ident, $bc:ident)) => {
        let $fabric = Fabric::new();
        let (_sa, $a) = node(&$fabric, IP_A);
        let (_sb, $b) = node(&$fabric, IP_B);
        let (_sc, $c) = node(&$fabric, IP_C);
        let ($ba, $bb, $bc) = (
            GsiBufs::new(&$a).unwrap(),
            GsiBufs::new(&$b).unwrap(),
            GsiBufs::new(&$c).unwrap(),
        );
    };
}

fn node(fabric: &Fabric, ip: [u8; 4]) -> (mlx5::sim::SimDevice, Dev) {
    let (s, d) = nic(fabric, Mode::Sync);
    with_ip(&d, ip);
    (s, d)
}

/// Polls `cm` (device time moving 1 ms a round) until `f` takes an event, at most `rounds`.
fn until<T>(
    cm: &mut SimCm<'_>,
    fabric: &Fabric,
    rounds: u32,
    mut f: impl FnMut(CmEvent) -> Option<T>,
) -> Option<T> {
    for _ in 0..rounds {
        while let Some(e) = cm.poll().expect("Cm::poll") {
            if let Some(t) = f(e) {
                return Some(t);
            }
        }
        fabric.advance(1_000_000);
    }
    None
}

/// The route of a REQ from `src_ip`:`src_port` to B's listening port.
fn to_b(src_ip: [u8; 4], src_port: u16, b: &Dev) -> Route {
    Route {
        src_ip,
        src_port,
        dst_ip: IP_B,
        dst_port: PORT,
        dmac: b.vport().mac,
    }
}

/// The first connection request `cm` hears within `rounds` milliseconds of device time.
fn heard_request(cm: &mut SimCm<'_>, fabric: &Fabric, rounds: u32) -> Option<ConnRequest> {
    until(cm, fabric, rounds, |e| match e {
        CmEvent::ConnectRequest(r) => Some(r),
        _ => None,
    })
}

#[test]
fn a_req_asking_for_the_longest_timers_is_forgotten_on_our_clock() {
    // Row 3: the peer chose 2^23 ms × 16 tries (about 74 h); we wait what we would ask a peer
    // to wait for us (fast config: 192 ms), whatever the REQ says.
    let fabric = Fabric::new();
    let (_sa, a) = node(&fabric, IP_A);
    let (_sb, b) = node(&fabric, IP_B);
    let (ba, bb) = (GsiBufs::new(&a).unwrap(), GsiBufs::new(&b).unwrap());
    let mut ga = Gsi::open(&a, &ba, 1).unwrap();
    let mut cb = Cm::new(Gsi::open(&b, &bb, 1).unwrap(), fast(&b));
    cb.listen(PORT).unwrap();
    send(&mut ga, &to(&b, IP_B), &greedy_req(PORT, 1, IP_A));
    let id = until(&mut cb, &fabric, 10, |e| match e {
        CmEvent::ConnectRequest(r) => Some(r.id),
        _ => None,
    })
    .expect("the REQ was taken");
    let start = fabric.now_ns();
    let gone = until(&mut cb, &fabric, 2_000, |e| match e {
        CmEvent::Unreachable { id: i, .. } if i == id => Some(fabric.now_ns() - start),
        _ => None,
    });
    let waited = gone.expect("a REQ nobody answers is forgotten within 2 s of our clock");
    assert!(
        waited <= 200_000_000,
        "forgotten after {waited} ns, not ≤ 192 ms"
    );
}

#[test]
fn a_full_table_of_half_open_reqs_makes_room_for_a_new_client() {
    // Row 3: 16 greedy REQs fill the table; a legitimate client's REQ then evicts the oldest
    // half-open one (as a SYN cookie-less TCP stack drops its oldest embryonic connection)
    // instead of being refused with REJ 3 "no resources".
    three!(fabric, (a, b, c), (ba, bb, bc));
    let mut ga = Gsi::open(&a, &ba, 1).unwrap();
    let mut cb = Cm::new(Gsi::open(&b, &bb, 1).unwrap(), fast(&b));
    let mut cc = Cm::new(Gsi::open(&c, &bc, 1).unwrap(), fast(&c));
    cb.listen(PORT).unwrap();
    cb.learn(mapped(IP_A), a.vport().mac);
    cb.learn(mapped(IP_C), c.vport().mac);
    let mut greedy = Vec::new();
    for n in 0..mlx5::cm::MAX_CONNS as u32 {
        send(&mut ga, &to(&b, IP_B), &greedy_req(PORT, 100 + n, IP_A));
        // One at a time, so that "oldest" is well defined.
        let id = until(&mut cb, &fabric, 5, |e| match e {
            CmEvent::ConnectRequest(r) => Some(r.id),
            _ => None,
        })
        .expect("a greedy REQ was taken");
        greedy.push(id);
    }
    let cqc = c.create_cq(16).unwrap();
    let cqb = b.create_cq(16).unwrap();
    let mut qc = qp(&c, &cqc, QpType::Rc, cap(4, 4, 1));
    let mut qb = qp(&b, &cqb, QpType::Rc, cap(4, 4, 1));
    let route = to_b(IP_C, 40_100, &b);
    let id_c = cc.connect(&mut qc, &route, &ConnParam::default()).unwrap();
    let mut evicted = Vec::new();
    let r = until(&mut cb, &fabric, 50, |e| match e {
        CmEvent::ConnectRequest(r) => Some(r),
        CmEvent::Unreachable { id, .. } => {
            evicted.push(id);
            None
        }
        _ => None,
    });
    // Whatever B did, C hears it (a REJ 3 before the fix).
    if let Some(e) = cc.poll().unwrap() {
        panic!("the legitimate client heard {e:?} before B answered");
    }
    let r = r.expect("the legitimate REQ was taken, not refused");
    assert_eq!(r.remote_gid, mapped(IP_C));
    assert_eq!(evicted, [greedy[0]], "the oldest half-open REQ makes room");
    assert_eq!(cb.evicted, 1);
    cb.accept(r.id, &mut qb, c.vport().mac, &ConnParam::default())
        .unwrap();
    let resp = until(&mut cc, &fabric, 50, |e| match e {
        CmEvent::ConnectResponse { id, .. } => Some(id),
        other => panic!("C: {other:?}"),
    });
    assert_eq!(resp, Some(id_c));
    cc.establish(id_c, &mut qc).unwrap();
    let est = until(&mut cb, &fabric, 50, |e| match e {
        CmEvent::Established { id } => Some(id),
        _ => None,
    });
    assert_eq!(est, Some(r.id));
    // An established connection is never evicted: 16 more greedy REQs take the 15 other
    // slots in turn, and the connection stays.
    for n in 0..16u32 {
        send(&mut ga, &to(&b, IP_B), &greedy_req(PORT, 200 + n, IP_A));
        until(&mut cb, &fabric, 1, |_| None::<()>);
    }
    assert!(cb.disconnect(r.id, &mut qb).is_ok());
    let gone = until(&mut cc, &fabric, 50, |e| match e {
        CmEvent::Disconnected { id } => Some(id),
        _ => None,
    });
    assert_eq!(
        gone,
        Some(id_c),
        "the established connection survived the storm"
    );
}

#[test]
fn a_burst_of_mads_that_each_want_an_answer_never_fails_poll() {
    // Row 4: 48 DREQs for connections B does not have, each answered with a DREP (as Linux's
    // cm_issue_drep answers), land before B polls; B has 32 GSI send slots. The answers that
    // find no free slot are dropped and counted; `Cm::poll` never fails on them.
    let fabric = Fabric::new();
    let (_sa, a) = node(&fabric, IP_A);
    let (_sb, b) = node(&fabric, IP_B);
    let (ba, bb) = (GsiBufs::new(&a).unwrap(), GsiBufs::new(&b).unwrap());
    let mut ga = Gsi::open(&a, &ba, 1).unwrap();
    let mut cb = Cm::new(Gsi::open(&b, &bb, 1).unwrap(), fast(&b));
    cb.listen(PORT).unwrap();
    cb.learn(mapped(IP_A), a.vport().mac);
    const BURST: u64 = 48;
    for n in 0..BURST {
        let mut m = Mad::cm(attr::DREQ, 0x5500 + n);
        m.set(ids::LOCAL_COMM_ID, 0x1000 + n);
        m.set(ids::REMOTE_COMM_ID, 0x2000 + n);
        m.set(dreq::REMOTE_QPN, 0x99);
        send(&mut ga, &to(&b, IP_B), &m);
    }
    for _ in 0..20 {
        while cb.poll().expect("Cm::poll after a burst").is_some() {}
        fabric.advance(1_000_000);
    }
    let mut dreps = 0;
    while let Some(r) = ga.recv().unwrap() {
        assert_eq!(r.mad.attr_id(), attr::DREP);
        dreps += 1;
    }
    assert!(cb.unsent > 0, "the burst did not exceed the send slots");
    assert_eq!(
        dreps + cb.unsent,
        BURST,
        "every DREQ answered or its answer counted"
    );
}

/// A and B connected through their CMs (B passive); C's raw QP1 is the stranger.
struct Connected<'a> {
    ca: SimCm<'a>,
    cb: SimCm<'a>,
    id_a: CmId,
    id_b: CmId,
}

fn connect<'a>(
    fabric: &Fabric,
    (a, b): (&'a Dev, &'a Dev),
    (ba, bb): (
        &'a GsiBufs<'a, mlx5::SimPlatform>,
        &'a GsiBufs<'a, mlx5::SimPlatform>,
    ),
    (qa, qb): (
        &mut mlx5::qp::Qp<'a, mlx5::SimPlatform>,
        &mut mlx5::qp::Qp<'a, mlx5::SimPlatform>,
    ),
) -> Connected<'a> {
    let mut ca = Cm::new(Gsi::open(a, ba, 1).unwrap(), fast(a));
    let mut cb = Cm::new(Gsi::open(b, bb, 1).unwrap(), fast(b));
    cb.listen(PORT).unwrap();
    let route = to_b(IP_A, 40_200, b);
    let id_a = ca.connect(qa, &route, &ConnParam::default()).unwrap();
    let r = heard_request(&mut cb, fabric, 50).unwrap();
    cb.accept(r.id, qb, a.vport().mac, &ConnParam::default())
        .unwrap();
    until(&mut ca, fabric, 50, |e| {
        matches!(e, CmEvent::ConnectResponse { .. }).then_some(())
    })
    .unwrap();
    ca.establish(id_a, qa).unwrap();
    until(&mut cb, fabric, 50, |e| {
        matches!(e, CmEvent::Established { .. }).then_some(())
    })
    .unwrap();
    Connected {
        ca,
        cb,
        id_a,
        id_b: r.id,
    }
}

#[test]
fn a_rej_ends_an_established_connection_only_when_it_names_both_comm_ids() {
    // Linux's cm_acquire_rejected_id: a REJ of a REQ matches only a connection still waiting
    // for the answer to its REQ (remote ID unknown); any other REJ needs both IDs — and then
    // ends even an ESTABLISHED connection (cm_rej_handler: timewait, RDMA_CM_EVENT_REJECTED).
    three!(fabric, (a, b, c), (ba, bb, bc));
    let mut gc = Gsi::open(&c, &bc, 1).unwrap();
    let (cqa, cqb) = (a.create_cq(16).unwrap(), b.create_cq(16).unwrap());
    let mut qa = qp(&a, &cqa, QpType::Rc, cap(4, 4, 1));
    let mut qb = qp(&b, &cqb, QpType::Rc, cap(4, 4, 1));
    let mut k = connect(&fabric, (&a, &b), (&ba, &bb), (&mut qa, &mut qb));
    let dropped = k.cb.dropped;

    // A stranger's REJ "of a REQ" naming only B's comm ID: nothing happens.
    let mut j = Mad::cm(attr::REJ, 0x1234);
    j.set(rej::LOCAL_COMM_ID, 0xdead_beef);
    j.set(rej::REMOTE_COMM_ID, u64::from(k.id_b.0));
    j.set(rej::MESSAGE_REJECTED, msg::REQ);
    j.set(rej::REASON, 28);
    send(&mut gc, &to(&b, IP_B), &j);
    // And one "of a REP or other" with a wrong remote ID.
    j.set(rej::MESSAGE_REJECTED, msg::OTHER);
    send(&mut gc, &to(&b, IP_B), &j);
    let heard = until(&mut k.cb, &fabric, 20, Some);
    assert_eq!(heard, None, "a REJ naming one comm ID ended the connection");
    assert_eq!(k.cb.dropped, dropped + 2, "both stray REJs counted");

    // Both IDs: the connection ends as Linux ends it (REJECTED, then time-wait).
    j.set(rej::LOCAL_COMM_ID, u64::from(k.id_a.0));
    send(&mut gc, &to(&b, IP_B), &j);
    let heard = until(&mut k.cb, &fabric, 20, Some);
    assert_eq!(
        heard,
        Some(CmEvent::Rejected {
            id: k.id_b,
            reason: 28
        })
    );
    // A's side is untouched by what happened at B.
    assert_eq!(until(&mut k.ca, &fabric, 5, Some), None);
}

#[test]
fn an_mra_extends_our_wait_once_and_not_past_our_cap() {
    // An MRA asks us to wait longer for an answer; a peer that MRAs every retransmission with
    // service timeout 31 (2^23 ms) would hold our REQ for ever. As Linux's cm_mra_handler, one
    // MRA per message is taken (MRA_REQ_RCVD ignores the next), its wait capped.
    let fabric = Fabric::new();
    let (_sa, a) = node(&fabric, IP_A);
    let (_sb, b) = node(&fabric, IP_B);
    let (ba, bb) = (GsiBufs::new(&a).unwrap(), GsiBufs::new(&b).unwrap());
    let mut ca = Cm::new(Gsi::open(&a, &ba, 1).unwrap(), fast(&a));
    let mut gb = Gsi::open(&b, &bb, 1).unwrap();
    let cqa = a.create_cq(16).unwrap();
    let mut qa = qp(&a, &cqa, QpType::Rc, cap(4, 4, 1));
    let route = to_b(IP_A, 40_300, &b);
    let id = ca.connect(&mut qa, &route, &ConnParam::default()).unwrap();
    let start = fabric.now_ns();
    let mut gone = None;
    // Up to 3 h of device time, 1 s a step: MRA each REQ (re)transmission at once.
    for _ in 0..3 * 3600 {
        while let Some(r) = gb.recv().unwrap() {
            if r.mad.attr_id() == attr::REQ {
                let mut m = Mad::cm(attr::MRA, r.mad.tid());
                m.set(ids::LOCAL_COMM_ID, 0x4242);
                m.set(ids::REMOTE_COMM_ID, r.mad.get(req::LOCAL_COMM_ID));
                m.set(mra::MESSAGE_MRAED, msg::REQ);
                m.set(mra::SERVICE_TIMEOUT, 31);
                send(&mut gb, &to(&a, IP_A), &m);
            }
        }
        if let Some(e) = ca.poll().unwrap() {
            gone = Some((e, fabric.now_ns() - start));
            break;
        }
        fabric.advance(1_000_000_000);
    }
    let (e, after) = gone.expect("the REQ was held for 3 h by MRAs");
    assert_eq!(
        e,
        CmEvent::Unreachable {
            id,
            waiting_for: "a REP to our REQ"
        }
    );
    // One MRA taken, of at most 2^(24−8) ms (rdma_cm's own MRA), then the 5 retries (each
    // seen a 1 s step later here).
    assert!(
        (65_000_000_000..75_000_000_000).contains(&after),
        "given up after {after} ns"
    );
}

#[test]
fn an_active_side_that_gives_up_frees_its_req_at_once() {
    // An active side abandoning its REQ sends REJ 4 (timeout) with its CA GUID in the ARI
    // (Linux's cm_destroy_id in REQ_SENT; ours in `Cm::disconnect`); the passive finds the
    // REQ by that GUID and the sender's comm ID (cm_acquire_rejected_id) and frees its slot.
    let fabric = Fabric::new();
    let (_sa, a) = node(&fabric, IP_A);
    let (_sb, b) = node(&fabric, IP_B);
    let (ba, bb) = (GsiBufs::new(&a).unwrap(), GsiBufs::new(&b).unwrap());
    let mut ca = Cm::new(Gsi::open(&a, &ba, 1).unwrap(), fast(&a));
    let mut cb = Cm::new(Gsi::open(&b, &bb, 1).unwrap(), fast(&b));
    cb.listen(PORT).unwrap();
    let cqa = a.create_cq(16).unwrap();
    let mut qa = qp(&a, &cqa, QpType::Rc, cap(4, 4, 1));
    let route = to_b(IP_A, 40_400, &b);
    let id_a = ca.connect(&mut qa, &route, &ConnParam::default()).unwrap();
    let r = heard_request(&mut cb, &fabric, 10).unwrap();
    ca.disconnect(id_a, &mut qa).unwrap();
    let heard = until(&mut cb, &fabric, 5, Some);
    assert_eq!(
        heard,
        Some(CmEvent::Rejected {
            id: r.id,
            reason: 4
        })
    );
    assert!(cb.reject(r.id, 28).is_err(), "the REQ is gone");
}

#[test]
fn a_storm_of_reqs_evicts_its_own_before_a_connection_we_accepted() {
    // B accepted C's REQ (REP sent, C's RTU not yet back) when a storm of greedy REQs fills the
    // table: the storm's REQs, which nobody accepted, make room for each other; C's connection,
    // older than all of them, survives and completes.
    three!(fabric, (a, b, c), (ba, bb, bc));
    let mut ga = Gsi::open(&a, &ba, 1).unwrap();
    let mut cb = Cm::new(Gsi::open(&b, &bb, 1).unwrap(), fast(&b));
    let mut cc = Cm::new(Gsi::open(&c, &bc, 1).unwrap(), fast(&c));
    cb.listen(PORT).unwrap();
    let (cqb, cqc) = (b.create_cq(16).unwrap(), c.create_cq(16).unwrap());
    let mut qb = qp(&b, &cqb, QpType::Rc, cap(4, 4, 1));
    let mut qc = qp(&c, &cqc, QpType::Rc, cap(4, 4, 1));
    let route = to_b(IP_C, 40_500, &b);
    let id_c = cc.connect(&mut qc, &route, &ConnParam::default()).unwrap();
    let r = heard_request(&mut cb, &fabric, 10).unwrap();
    cb.accept(r.id, &mut qb, c.vport().mac, &ConnParam::default())
        .unwrap();
    // The storm, C not polled meanwhile (its RTU waits).
    let mut greedy = Vec::new();
    let mut evicted = Vec::new();
    for n in 0..20u32 {
        send(&mut ga, &to(&b, IP_B), &greedy_req(PORT, 300 + n, IP_A));
        while let Some(e) = cb.poll().unwrap() {
            match e {
                CmEvent::ConnectRequest(g) => greedy.push(g.id),
                CmEvent::Unreachable { id, .. } => evicted.push(id),
                other => panic!("B: {other:?}"),
            }
        }
    }
    // 15 slots besides C's: the 5 oldest of the 20 made room, C's connection not.
    assert_eq!(evicted, greedy[..5]);
    assert_eq!(cb.evicted, 5);
    let resp = until(&mut cc, &fabric, 10, |e| match e {
        CmEvent::ConnectResponse { id, .. } => Some(id),
        other => panic!("C: {other:?}"),
    });
    assert_eq!(resp, Some(id_c));
    cc.establish(id_c, &mut qc).unwrap();
    let est = until(&mut cb, &fabric, 10, |e| match e {
        CmEvent::Established { id } => Some(id),
        _ => None,
    });
    assert_eq!(est, Some(r.id), "the accepted connection completed");
}

#[test]
fn an_answer_to_a_node_never_learnt_is_not_sent_but_counted() {
    // Found by the hostile-peer soak: B answers a DREQ for a connection it does not have and
    // refuses a REQ for a port nobody listens on — but it has no next hop for a node it never
    // learnt (one whose source address a peer spoofed, say), and those answers went nowhere
    // without a trace. They are counted in `unsent`, as answers without a free send slot.
    let fabric = Fabric::new();
    let (_sa, a) = node(&fabric, IP_A);
    let (_sb, b) = node(&fabric, IP_B);
    let (ba, bb) = (GsiBufs::new(&a).unwrap(), GsiBufs::new(&b).unwrap());
    let mut ga = Gsi::open(&a, &ba, 1).unwrap();
    let mut cb = Cm::new(Gsi::open(&b, &bb, 1).unwrap(), fast(&b));
    cb.listen(PORT).unwrap();
    let mut d = Mad::cm(attr::DREQ, 0x99);
    d.set(ids::LOCAL_COMM_ID, 0x1234);
    d.set(ids::REMOTE_COMM_ID, 0x5678);
    d.set(dreq::REMOTE_QPN, 0x99);
    let mut answers = 0;
    for id in [1, 2] {
        answers += send(&mut ga, &to(&b, IP_B), &d);
        answers += send(&mut ga, &to(&b, IP_B), &greedy_req(PORT + 1, id, IP_A));
        assert_eq!(until(&mut cb, &fabric, 5, Some), None);
        if id == 1 {
            assert_eq!((cb.unsent, cb.dropped), (2, 0), "both answers counted");
            // Once A is learnt (as ARP would find it), the answers go out.
            cb.learn(mapped(IP_A), a.vport().mac);
        }
    }
    while ga.recv().unwrap().is_some() {
        answers += 1;
    }
    assert_eq!(
        (answers, cb.unsent),
        (2, 2),
        "a DREP and a REJ the second time"
    );
}

#[test]
fn mads_for_connections_we_do_not_have_are_counted() {
    // Found by the hostile-peer soak: RTUs, DREPs and MRAs naming no connection of ours, and a
    // REP naming our comm ID with another peer's, were taken in without a trace (a REP or REJ
    // for nobody was counted). Each is counted in `dropped`; the connection is untouched.
    three!(fabric, (a, b, c), (ba, bb, bc));
    let mut gc = Gsi::open(&c, &bc, 1).unwrap();
    let (cqa, cqb) = (a.create_cq(16).unwrap(), b.create_cq(16).unwrap());
    let mut qa = qp(&a, &cqa, QpType::Rc, cap(4, 4, 1));
    let mut qb = qp(&b, &cqb, QpType::Rc, cap(4, 4, 1));
    let mut k = connect(&fabric, (&a, &b), (&ba, &bb), (&mut qa, &mut qb));
    let (da, db) = (k.ca.dropped, k.cb.dropped);
    let stranger = |attr: u16, local: u32, remote: u32| {
        let mut m = Mad::cm(attr, 0x4242);
        m.set(ids::LOCAL_COMM_ID, u64::from(local));
        m.set(ids::REMOTE_COMM_ID, u64::from(remote));
        m
    };
    let mut mads = vec![
        stranger(attr::RTU, 0xdead, 0xbeef),
        stranger(attr::DREP, 0xdead, 0xbeef),
        stranger(attr::MRA, 0xdead, 0xbeef),
        // Our comm ID, another peer's: a REP to the passive side, an RTU and a DREP.
        stranger(attr::REP, 0xdead, k.id_b.0),
        stranger(attr::RTU, 0xdead, k.id_b.0),
        stranger(attr::DREP, 0xdead, k.id_b.0),
    ];
    let mut mra = stranger(attr::MRA, 0xdead, 0xbeef);
    mra.set(mra::MESSAGE_MRAED, msg::REQ);
    mads.push(mra);
    for m in &mads {
        send(&mut gc, &to(&b, IP_B), m);
    }
    // And a REP naming the active side's ID with another peer's, to A.
    send(
        &mut gc,
        &to(&a, IP_A),
        &stranger(attr::REP, 0xdead, k.id_a.0),
    );
    assert_eq!(until(&mut k.cb, &fabric, 5, Some), None);
    assert_eq!(until(&mut k.ca, &fabric, 5, Some), None);
    assert_eq!(k.cb.dropped - db, mads.len() as u64, "each counted at B");
    assert_eq!(k.ca.dropped - da, 1, "and at A");
    // The connection runs on: A disconnects, B hears it.
    k.ca.disconnect(k.id_a, &mut qa).unwrap();
    let heard = until(&mut k.cb, &fabric, 10, Some);
    assert_eq!(heard, Some(CmEvent::Disconnected { id: k.id_b }));
}

#[test]
fn datagrams_of_the_wrong_size_on_qp1_are_counted_and_deafen_nobody() {
    // Found by the hostile-peer soak: a datagram to QP1 shorter than a MAD was dropped by the
    // GSI without a trace, and one longer than QP1's buffers moved QP1 to ERR (the simulator;
    // tests/datapath_errors.rs) — after which the CM heard nothing, ever, and said nothing.
    // The short one is counted in `dropped`, the long one by the device, and a client
    // connects after both.
    use mlx5::qp::ConnectOpts;
    use mlx5::qp::UdAddr;
    let fabric = Fabric::new();
    let (_sa, a) = node(&fabric, IP_A);
    let (sb, b) = node(&fabric, IP_B);
    let (_sc, c) = node(&fabric, IP_C);
    let (bb, bc) = (GsiBufs::new(&b).unwrap(), GsiBufs::new(&c).unwrap());
    let mut cb = Cm::new(Gsi::open(&b, &bb, 1).unwrap(), fast(&b));
    let mut cc = Cm::new(Gsi::open(&c, &bc, 1).unwrap(), fast(&c));
    cb.listen(PORT).unwrap();
    cb.learn(mapped(IP_C), c.vport().mac);
    // A raw UD QP on A with QP1's Q_Key.
    let cqa = a.create_cq(16).unwrap();
    let mut ua = qp(&a, &cqa, QpType::Ud, cap(4, 4, 1));
    let o = ConnectOpts {
        qkey: mlx5::cm::QP1_QKEY,
        ..ConnectOpts::default()
    };
    let me = ua.endpoint();
    ua.connect(&me, &o).unwrap();
    let mr = a.alloc_mr(a.pd(), 4096, mlx5::MrAccess::ALL).unwrap();
    let dropped = sb.datapath_counters().rx_dropped;
    for (wr_id, len) in [(1, 100u32), (2, 600)] {
        let ud = UdAddr {
            remote_qpn: 1,
            qkey: mlx5::cm::QP1_QKEY,
            dgid: mapped(IP_B),
            dmac: b.vport().mac,
            sgid_index: 1,
            hop_limit: 64,
            ..UdAddr::default()
        };
        let sge = [mlx5::qp::Sge {
            addr: mr.addr(),
            length: len,
            lkey: mr.lkey(),
        }];
        ua.post_send(&[mlx5::qp::SendWr {
            ud: Some(ud),
            signaled: true,
            ..mlx5::qp::SendWr::send(wr_id, &sge)
        }])
        .unwrap();
        assert_eq!(wait(&cqa, &a, 1)[0].status, mlx5::WcStatus::Success);
    }
    assert_eq!(until(&mut cb, &fabric, 5, Some), None);
    assert_eq!(cb.dropped, 1, "the short datagram");
    assert_eq!(
        sb.datapath_counters().rx_dropped,
        dropped + 1,
        "the long one"
    );
    // QP1 still hears: C connects.
    let cqc = c.create_cq(16).unwrap();
    let mut qc = qp(&c, &cqc, QpType::Rc, cap(4, 4, 1));
    let route = to_b(IP_C, 40_600, &b);
    cc.connect(&mut qc, &route, &ConnParam::default()).unwrap();
    let r = heard_request(&mut cb, &fabric, 50);
    assert_eq!(
        r.map(|r| r.remote_gid),
        Some(mapped(IP_C)),
        "B heard C's REQ"
    );
}
