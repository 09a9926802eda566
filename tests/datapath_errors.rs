//! Every error status through a real cause, flushes, exactly one completion per signaled work
//! request, and a ring wrapping over a million work requests.

mod common;

use common::*;
use mlx5::mr::MrAccess;
use mlx5::qp::{ConnectOpts, QpState, QpType, RecvWr, SendOp, SendWr, Sge};
use mlx5::sim::{Fabric, Mode, WireFault};
use mlx5::{Error, WcStatus};

struct Pair {
    fabric: Fabric,
    a: Dev,
    b: Dev,
}

fn pair() -> Pair {
    let fabric = Fabric::new();
    let (_sa, a) = nic(&fabric, Mode::Sync);
    let (_sb, b) = nic(&fabric, Mode::Sync);
    Pair { fabric, a, b }
}

#[test]
fn remote_access_errors_bad_rkey_and_missing_right() {
    let p = pair();
    let (cqa, cqb) = (p.a.create_cq(64).unwrap(), p.b.create_cq(64).unwrap());
    let mra = p.a.alloc_mr(p.a.pd(), 4096, MrAccess::ALL).unwrap();
    let read_only =
        p.b.alloc_mr(
            p.b.pd(),
            4096,
            MrAccess {
                remote_read: true,
                ..MrAccess::LOCAL
            },
        )
        .unwrap();
    for (rkey, addr, what) in [
        (read_only.rkey() ^ 0x77_0000, read_only.addr(), "bad rkey"),
        (read_only.rkey(), read_only.addr(), "no remote write right"),
        (read_only.rkey(), read_only.addr() + 4090, "out of bounds"),
    ] {
        let mut qa = qp(&p.a, &cqa, QpType::Rc, cap(16, 1, 1));
        let mut qb = qp(&p.b, &cqb, QpType::Rc, cap(16, 1, 1));
        connect(&mut qa, &mut qb, &ConnectOpts::default());
        let sge = [Sge {
            addr: mra.addr(),
            length: 64,
            lkey: mra.lkey(),
        }];
        let w = SendWr {
            op: SendOp::Write {
                remote_addr: addr,
                rkey,
            },
            ..SendWr::send(1, &sge)
        };
        // The failing one, then three more that must be flushed, one of them unsignaled.
        let more = [
            SendWr { wr_id: 2, ..w },
            SendWr {
                wr_id: 3,
                signaled: false,
                ..w
            },
            SendWr { wr_id: 4, ..w },
        ];
        qa.post_send(&[w]).unwrap();
        qa.post_send(&more).unwrap();
        let wc = wait(&cqa, &p.a, 4);
        assert_eq!(
            (wc[0].wr_id, wc[0].status),
            (1, WcStatus::RemAccessErr),
            "{what}"
        );
        for c in &wc[1..] {
            assert_eq!(
                c.status,
                WcStatus::WrFlushErr,
                "{what}: outstanding work is flushed"
            );
        }
        let mut ids: Vec<u64> = wc.iter().map(|c| c.wr_id).collect();
        ids.sort();
        assert_eq!(
            ids,
            vec![1, 2, 3, 4],
            "{what}: exactly one completion each, flushes included"
        );
        assert_eq!(
            cqa.poll(&mut [empty_wc(); 4]).unwrap(),
            0,
            "{what}: no duplicate"
        );
        assert_eq!(
            qa.query().unwrap().state,
            QpState::Err,
            "{what}: the requester QP moved to ERR"
        );
    }
}

#[test]
fn a_message_longer_than_the_receive_buffer() {
    let p = pair();
    let (cqa, cqb) = (p.a.create_cq(64).unwrap(), p.b.create_cq(64).unwrap());
    let (mra, mrb) = (
        p.a.alloc_mr(p.a.pd(), 8192, MrAccess::ALL).unwrap(),
        p.b.alloc_mr(p.b.pd(), 8192, MrAccess::ALL).unwrap(),
    );
    let mut qa = qp(&p.a, &cqa, QpType::Rc, cap(16, 1, 1));
    let mut qb = qp(&p.b, &cqb, QpType::Rc, cap(16, 16, 1));
    connect(&mut qa, &mut qb, &ConnectOpts::default());
    qb.post_recv(&[RecvWr {
        wr_id: 5,
        sg_list: &[Sge {
            addr: mrb.addr(),
            length: 100,
            lkey: mrb.lkey(),
        }],
    }])
    .unwrap();
    qa.post_send(&[SendWr::send(
        1,
        &[Sge {
            addr: mra.addr(),
            length: 1000,
            lkey: mra.lkey(),
        }],
    )])
    .unwrap();
    let wb = wait(&cqb, &p.b, 1);
    assert_eq!((wb[0].wr_id, wb[0].status), (5, WcStatus::LocLenErr));
    let wa = wait(&cqa, &p.a, 1);
    assert_eq!(wa[0].status, WcStatus::RemInvReqErr);
}

#[test]
fn a_bad_lkey_is_a_local_protection_error() {
    let p = pair();
    let (cqa, cqb) = (p.a.create_cq(64).unwrap(), p.b.create_cq(64).unwrap());
    let mra = p.a.alloc_mr(p.a.pd(), 4096, MrAccess::ALL).unwrap();
    let mut qa = qp(&p.a, &cqa, QpType::Rc, cap(16, 1, 1));
    let mut qb = qp(&p.b, &cqb, QpType::Rc, cap(16, 16, 1));
    connect(&mut qa, &mut qb, &ConnectOpts::default());
    qa.post_send(&[SendWr::send(
        1,
        &[Sge {
            addr: mra.addr(),
            length: 64,
            lkey: mra.lkey() + 0x100,
        }],
    )])
    .unwrap();
    let wa = wait(&cqa, &p.a, 1);
    assert_eq!(wa[0].status, WcStatus::LocProtErr);
}

#[test]
fn no_receive_posted_exhausts_rnr_retries() {
    let p = pair();
    let (cqa, cqb) = (p.a.create_cq(64).unwrap(), p.b.create_cq(64).unwrap());
    let mra = p.a.alloc_mr(p.a.pd(), 4096, MrAccess::ALL).unwrap();
    let mut qa = qp(&p.a, &cqa, QpType::Rc, cap(16, 1, 1));
    let mut qb = qp(&p.b, &cqb, QpType::Rc, cap(16, 16, 1));
    connect(
        &mut qa,
        &mut qb,
        &ConnectOpts {
            rnr_retry: 2,
            min_rnr_timer: 1,
            ..ConnectOpts::default()
        },
    );
    qa.post_send(&[SendWr::send(
        1,
        &[Sge {
            addr: mra.addr(),
            length: 64,
            lkey: mra.lkey(),
        }],
    )])
    .unwrap();
    let wa = wait(&cqa, &p.a, 1);
    assert_eq!(wa[0].status, WcStatus::RnrRetryExcErr);
}

#[test]
fn lost_packets_past_the_retry_count() {
    let p = pair();
    let (cqa, cqb) = (p.a.create_cq(64).unwrap(), p.b.create_cq(64).unwrap());
    let mra = p.a.alloc_mr(p.a.pd(), 4096, MrAccess::ALL).unwrap();
    let mrb = p.b.alloc_mr(p.b.pd(), 4096, MrAccess::ALL).unwrap();
    let mut qa = qp(&p.a, &cqa, QpType::Rc, cap(16, 1, 1));
    let mut qb = qp(&p.b, &cqb, QpType::Rc, cap(16, 16, 1));
    connect(
        &mut qa,
        &mut qb,
        &ConnectOpts {
            retry_cnt: 2,
            timeout: 1,
            ..ConnectOpts::default()
        },
    );
    p.fabric.inject(WireFault::LinkDown);
    qa.post_send(&[SendWr {
        op: SendOp::Write {
            remote_addr: mrb.addr(),
            rkey: mrb.rkey(),
        },
        ..SendWr::send(
            1,
            &[Sge {
                addr: mra.addr(),
                length: 64,
                lkey: mra.lkey(),
            }],
        )
    }])
    .unwrap();
    let wa = wait(&cqa, &p.a, 1);
    assert_eq!(wa[0].status, WcStatus::RetryExcErr);
}

/// Soak finding, and the RNR rule: two SENDs to a QP with no receive posted. The first gets an
/// RNR NAK; the second, out of sequence behind it, is dropped without a NAK sequence error — one
/// would send the requester back at once, spending a retry each round (the soak once spent
/// seconds in one post_send, and a long-held responder, as an ODP page fault holds it, would
/// exhaust `retry_cnt`). The requester waits its RNR timer and goes back, for ever with
/// `rnr_retry` 7 and using up no retry; once receives are posted both SENDs complete.
#[test]
fn an_rnr_nak_holds_the_window_without_sequence_naks() {
    let fabric = Fabric::new();
    let (_sa, a) = nic(&fabric, Mode::Sync);
    let (sb, b) = nic(&fabric, Mode::Sync);
    let (cqa, cqb) = (a.create_cq(64).unwrap(), b.create_cq(64).unwrap());
    let mra = a.alloc_mr(a.pd(), 4096, MrAccess::ALL).unwrap();
    let mrb = b.alloc_mr(b.pd(), 4096, MrAccess::ALL).unwrap();
    let mut qa = qp(&a, &cqa, QpType::Rc, cap(16, 1, 1));
    let mut qb = qp(&b, &cqb, QpType::Rc, cap(16, 16, 1));
    let opts = ConnectOpts {
        retry_cnt: 1,
        rnr_retry: 7,
        // 0.01 ms: many RNR rounds in the loop below.
        min_rnr_timer: 1,
        ..ConnectOpts::default()
    };
    connect(&mut qa, &mut qb, &opts);
    let sge = sge1(&mra, 64);
    qa.post_send(&[SendWr::send(1, &sge), SendWr::send(2, &sge)])
        .unwrap();
    let mut buf = [empty_wc(); 4];
    for _ in 0..1000 {
        assert_eq!(cqa.poll(&mut buf).unwrap(), 0, "the SENDs wait");
        mlx5::Platform::relax(a.platform());
    }
    let c = sb.datapath_counters();
    assert!(c.rnr_naks_sent >= 10, "RNR rounds: {}", c.rnr_naks_sent);
    assert_eq!(c.naks_sent, 0, "no sequence NAK");
    let rsge = sge1(&mrb, 64);
    let recvs = recv_wrs(&rsge, 2);
    qb.post_recv(&recvs).unwrap();
    let wa = wait(&cqa, &a, 2);
    assert_eq!(
        wa.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        [(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    assert_eq!(wait(&cqb, &b, 2).len(), 2);
}

#[test]
fn a_full_queue_is_an_error_never_an_overwrite() {
    let p = pair();
    let (cqa, cqb) = (p.a.create_cq(64).unwrap(), p.b.create_cq(64).unwrap());
    let mra = p.a.alloc_mr(p.a.pd(), 4096, MrAccess::ALL).unwrap();
    let mut qa = qp(&p.a, &cqa, QpType::Rc, cap(4, 4, 1));
    let mut qb = qp(&p.b, &cqb, QpType::Rc, cap(4, 4, 1));
    connect(&mut qa, &mut qb, &ConnectOpts::default());
    let sge = [Sge {
        addr: mra.addr(),
        length: 8,
        lkey: mra.lkey(),
    }];
    let recvs: Vec<RecvWr<'_>> = (0..qb.cap().max_recv_wr as u64)
        .map(|i| RecvWr {
            wr_id: i,
            sg_list: &sge,
        })
        .collect();
    qb.post_recv(&recvs).unwrap();
    let e = qb.post_recv(&recvs[..1]).unwrap_err();
    assert!(
        matches!(
            e,
            Error::QueueFull {
                queue: "receive queue",
                ..
            }
        ),
        "{e}"
    );
    // Sends before RTS are refused by the driver.
    let mut fresh = qp(&p.a, &cqa, QpType::Rc, cap(4, 4, 1));
    assert!(matches!(
        fresh.post_send(&[SendWr::send(1, &sge)]),
        Err(Error::QpState { .. })
    ));
    let _ = &mut fresh;
}

#[test]
fn the_ring_wraps_over_a_million_work_requests() {
    let p = pair();
    let (cqa, cqb) = (p.a.create_cq(1024).unwrap(), p.b.create_cq(64).unwrap());
    let mra = p.a.alloc_mr(p.a.pd(), 4096, MrAccess::ALL).unwrap();
    let mrb = p.b.alloc_mr(p.b.pd(), 4096, MrAccess::ALL).unwrap();
    let mut qa = qp(&p.a, &cqa, QpType::Rc, cap(64, 1, 1));
    let mut qb = qp(&p.b, &cqb, QpType::Rc, cap(64, 1, 1));
    connect(&mut qa, &mut qb, &ConnectOpts::default());
    let sge = [Sge {
        addr: mra.addr(),
        length: 8,
        lkey: mra.lkey(),
    }];
    let total: u64 = 1 << 20;
    let batch = 32u64;
    let mut wrs: Vec<SendWr<'_>> = (0..batch)
        .map(|i| SendWr {
            op: SendOp::Write {
                remote_addr: mrb.addr(),
                rkey: mrb.rkey(),
            },
            signaled: i == batch - 1,
            ..SendWr::send(0, &sge)
        })
        .collect();
    let mut wc = [empty_wc(); 16];
    let mut done = 0u64;
    let mut posted = 0u64;
    while done < total {
        if posted - done * batch < 32 && posted < total {
            for (i, w) in wrs.iter_mut().enumerate() {
                w.wr_id = posted + i as u64;
            }
            mra.write(0, &posted.to_be_bytes()).unwrap();
            qa.post_send(&wrs).unwrap();
            posted += batch;
        }
        let n = cqa.poll(&mut wc).unwrap();
        for c in &wc[..n] {
            assert_eq!(c.status, WcStatus::Success);
            assert_eq!(
                c.wr_id,
                done * batch + batch - 1,
                "one completion per signaled WR, in order"
            );
            done += 1;
        }
        if n == 0 && posted >= total {
            mlx5::Platform::relax(p.a.platform());
        }
        if done * batch >= total {
            break;
        }
    }
    let mut last = [0u8; 8];
    mrb.read(0, &mut last).unwrap();
    assert_eq!(
        u64::from_be_bytes(last),
        total - batch,
        "the last write landed"
    );
}

/// Issue #26: a UD message longer than the receive buffer moved the QP to ERR (an error CQE,
/// then every receive flushed): any host on the link could stop a UD QP — QP1, and with it the
/// connection manager — with one datagram. As IBA's class D (Linux's soft RoCE drops a UD or
/// UC message too long for a QP without SRQ), the message is dropped and counted, the receive
/// WQE kept for the next message, the QP left up.
#[test]
fn a_ud_message_too_long_for_the_receive_buffer_is_dropped_and_the_qp_runs_on() {
    use mlx5::qp::UdAddr;
    let fabric = Fabric::new();
    let (_sa, a) = nic(&fabric, Mode::Sync);
    let (sb, b) = nic(&fabric, Mode::Sync);
    let (cqa, cqb) = (a.create_cq(16).unwrap(), b.create_cq(16).unwrap());
    let mra = a.alloc_mr(a.pd(), 4096, MrAccess::ALL).unwrap();
    let mrb = b.alloc_mr(b.pd(), 4096, MrAccess::ALL).unwrap();
    let mut qa = qp(&a, &cqa, QpType::Ud, cap(4, 4, 1));
    let mut qb = qp(&b, &cqb, QpType::Ud, cap(4, 4, 1));
    connect(&mut qa, &mut qb, &ConnectOpts::default());
    qb.post_recv(&[RecvWr {
        wr_id: 7,
        sg_list: &[Sge {
            addr: mrb.addr(),
            length: 40 + 100,
            lkey: mrb.lkey(),
        }],
    }])
    .unwrap();
    mra.write(0, &[0x5a; 500]).unwrap();
    let eb = qb.endpoint();
    let mut send = |wr_id: u64, len: u32| {
        let ud = UdAddr {
            remote_qpn: eb.qpn,
            qkey: ConnectOpts::default().qkey,
            dgid: eb.gid,
            dmac: eb.mac,
            hop_limit: 64,
            ..UdAddr::default()
        };
        let sge = [Sge {
            addr: mra.addr(),
            length: len,
            lkey: mra.lkey(),
        }];
        qa.post_send(&[SendWr {
            ud: Some(ud),
            signaled: true,
            ..SendWr::send(wr_id, &sge)
        }])
        .unwrap();
        assert_eq!(wait(&cqa, &a, 1)[0].status, WcStatus::Success);
    };
    let dropped = sb.datapath_counters().rx_dropped;
    send(1, 500);
    let mut wc = [empty_wc(); 4];
    assert_eq!(cqb.poll(&mut wc).unwrap(), 0, "no completion: {:?}", wc[0]);
    assert_eq!(sb.datapath_counters().rx_dropped, dropped + 1, "counted");
    assert_eq!(
        sb.qp_state(qb.qpn()),
        Some(mlx5::ifc::consts::qp_state::RTS as u8),
        "the QP runs on"
    );
    send(2, 60);
    let w = wait(&cqb, &b, 1)[0];
    assert_eq!(
        (w.wr_id, w.status, w.byte_len),
        (7, WcStatus::Success, 40 + 60),
        "the next message takes the receive the long one left"
    );
}
