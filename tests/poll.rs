//! `poll_cq` against what the device can write: CQEs that make no sense are typed errors (never
//! an out-of-bounds read, never a panic), and the short path for runs of one QP's send
//! completions gives exactly what the general decode gives, across ring wraps, several QPs on
//! one CQ, unsignaled work requests, READs and atomics, and any size of work-completion array.

mod common;

use common::*;
use mlx5::mr::MrAccess;
use mlx5::qp::{ConnectOpts, QpInitAttr, QpType, RecvWr, SendOp, SendWr, Sge};
use mlx5::sim::{CqeField, Fabric, Fault, Mode};
use mlx5::srq::SrqAttr;
use mlx5::{Error, WcOpcode, WcStatus};

/// Polls once, expecting the device-value error whose `what` contains `needle`.
fn expect_bad(cq: &mlx5::cq::Cq<'_, mlx5::SimPlatform>, needle: &str) -> (u64, u64) {
    let mut wc = [empty_wc(); 8];
    match cq.poll(&mut wc) {
        Err(Error::BadDeviceValue { what, value, limit }) => {
            assert!(what.contains(needle), "{what:?} should name {needle:?}");
            (value, limit)
        }
        other => panic!("expected a CQE refused for {needle:?}, got {other:?}"),
    }
}

#[test]
fn send_cqes_that_make_no_sense_are_refused_and_polling_goes_on() {
    let fabric = Fabric::new();
    let (sim, dev) = nic(&fabric, Mode::Sync);
    let cq = dev.create_cq(64).unwrap();
    let mr = dev.alloc_mr(dev.pd(), 4096, MrAccess::ALL).unwrap();
    let mut q = looped(&dev, &cq, cap(64, 1, 1));
    let sge_write = [Sge {
        addr: mr.addr(),
        length: 64,
        lkey: mr.lkey(),
    }];
    let write = |id| write_wr(&mr, &sge_write, id);
    let sge_read = [Sge {
        addr: mr.addr() + 512,
        length: 32,
        lkey: mr.lkey(),
    }];
    let read = |id| SendWr {
        op: SendOp::Read {
            remote_addr: mr.addr() + 1024,
            rkey: mr.rkey(),
        },
        ..SendWr::send(id, &sge_read)
    };
    let cases: [(CqeField, u32, &str, SendWr<'_>); 4] = [
        (CqeField::Qpn, 0x00ab_cdef, "CQE QPN", write(1)),
        (CqeField::WqeCounter, 0x7777, "wqe_counter", write(2)),
        (CqeField::Opcode, 0x7, "CQE opcode", write(3)),
        (CqeField::ByteCnt, 1 << 20, "byte_cnt", read(4)),
    ];
    for (field, value, needle, wr) in cases {
        sim.inject(Fault::CorruptCqe { field, value });
        q.post_send(&[wr]).unwrap();
        let (got, _) = expect_bad(&cq, needle);
        assert_eq!(
            got,
            u64::from(value),
            "{field:?}: the error carries the value read"
        );
        // The CQE was consumed: nothing more is pending, and the QP goes on working.
        assert_eq!(cq.poll(&mut [empty_wc(); 4]).unwrap(), 0, "{field:?}");
        q.post_send(&[write(100)]).unwrap();
        let wc = wait(&cq, &dev, 1);
        assert_eq!(
            (wc[0].wr_id, wc[0].status),
            (100, WcStatus::Success),
            "{field:?}"
        );
    }
}

#[test]
fn receive_cqes_that_make_no_sense_are_refused() {
    let fabric = Fabric::new();
    let (_sa, a) = nic(&fabric, Mode::Sync);
    let (sb, b) = nic(&fabric, Mode::Sync);
    let (cqa, cqb) = (a.create_cq(64).unwrap(), b.create_cq(64).unwrap());
    let mra = a.alloc_mr(a.pd(), 4096, MrAccess::ALL).unwrap();
    let mrb = b.alloc_mr(b.pd(), 4096, MrAccess::ALL).unwrap();
    let srq = b
        .create_srq(
            b.pd(),
            &SrqAttr {
                max_wr: 8,
                max_sge: 1,
                srq_limit: 0,
            },
        )
        .unwrap();
    let mut s1 = qp(&a, &cqa, QpType::Rc, cap(16, 1, 1));
    let mut r1 = qp(&b, &cqb, QpType::Rc, cap(16, 16, 1));
    connect(&mut s1, &mut r1, &ConnectOpts::default());
    let mut s2 = qp(&a, &cqa, QpType::Rc, cap(16, 1, 1));
    let mut attr = QpInitAttr::new(QpType::Rc, &cqb, &cqb, cap(16, 0, 1));
    attr.srq = Some(&srq);
    let mut r2 = b.create_qp(b.pd(), &attr).unwrap();
    connect(&mut s2, &mut r2, &ConnectOpts::default());
    let send = [Sge {
        addr: mra.addr(),
        length: 100,
        lkey: mra.lkey(),
    }];
    let recv = [Sge {
        addr: mrb.addr(),
        length: 256,
        lkey: mrb.lkey(),
    }];
    let rwr = |id| RecvWr {
        wr_id: id,
        sg_list: &recv,
    };
    // RQ: a SEND said to be longer than the receive buffer.
    r1.post_recv(&[rwr(1), rwr(2)]).unwrap();
    sb.inject(Fault::CorruptCqe {
        field: CqeField::ByteCnt,
        value: 4096,
    });
    s1.post_send(&[SendWr::send(1, &send)]).unwrap();
    assert_eq!(expect_bad(&cqb, "receive buffer"), (4096, 256));
    s1.post_send(&[SendWr::send(2, &send)]).unwrap();
    let wc = wait(&cqb, &b, 1);
    assert_eq!(
        (wc[0].wr_id, wc[0].byte_len, wc[0].opcode),
        (2, 100, WcOpcode::Recv),
        "the refused receive was still retired: the next one gets its own wr_id"
    );
    wait(&cqa, &a, 2);

    // SRQ: an index past the SRQ, one that is not posted, then a real one.
    srq.post_recv(&[rwr(10), rwr(11)]).unwrap();
    for (value, needle) in [(0x100, "SRQ WQE index"), (7, "not a posted receive")] {
        sb.inject(Fault::CorruptCqe {
            field: CqeField::WqeCounter,
            value,
        });
        s2.post_send(&[SendWr::send(3, &send)]).unwrap();
        expect_bad(&cqb, needle);
    }
    // The device consumed a WQE for each; the driver, refusing the indices, handed neither
    // back (a refused CQE costs its WQE, never another one's). The next posted WQE serves the
    // next SEND with its own wr_id.
    srq.post_recv(&[rwr(12)]).unwrap();
    s2.post_send(&[SendWr::send(4, &send)]).unwrap();
    let wc = wait(&cqb, &b, 1);
    assert_eq!((wc[0].wr_id, wc[0].qp_num), (12, r2.qpn()));
    let ids: Vec<u64> = wait(&cqa, &a, 3).iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, [3, 3, 4], "the sender saw every SEND acknowledged");
}

/// A small LCG: the test is deterministic.
fn lcg(x: &mut u64) -> u64 {
    *x = x
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *x >> 33
}

#[test]
fn runs_of_send_completions_across_wraps_qps_and_array_sizes() {
    for mode in [Mode::Sync, Mode::Threaded] {
        let fabric = Fabric::new();
        let (_sim, dev) = nic(&fabric, mode);
        // 16 slots: the ring wraps every 16 completions.
        let cq = dev.create_cq(15).unwrap();
        let mr = dev.alloc_mr(dev.pd(), 8192, MrAccess::ALL).unwrap();
        let mut qps: Vec<_> = (0..2).map(|_| looped(&dev, &cq, cap(32, 1, 1))).collect();
        let local = |off: u64, len: u32| {
            [Sge {
                addr: mr.addr() + off,
                length: len,
                lkey: mr.lkey(),
            }]
        };
        let (w_sge, r_sge, a_sge) = (local(0, 64), local(512, 48), local(1024, 8));
        let mut seed = 0x5eed_u64;
        let mut next_id = 0u64;
        let mut expected: Vec<Vec<(u64, WcOpcode, u32)>> = vec![Vec::new(); qps.len()];
        let mut seen: Vec<Vec<(u64, WcOpcode, u32)>> = vec![Vec::new(); qps.len()];
        for _round in 0..300 {
            // Up to 12 signaled completions in flight: the 16-slot CQ never overflows.
            let mut signaled = 0;
            for (k, q) in qps.iter_mut().enumerate() {
                let n = 1 + lcg(&mut seed) as usize % 6;
                let wrs: Vec<SendWr<'_>> = (0..n)
                    .map(|i| {
                        next_id += 1;
                        let last = i + 1 == n;
                        let (op, sge, opc, len): (SendOp, &[Sge], WcOpcode, u32) =
                            match lcg(&mut seed) % 4 {
                                0 => (
                                    SendOp::Write {
                                        remote_addr: mr.addr() + 4096,
                                        rkey: mr.rkey(),
                                    },
                                    &w_sge,
                                    WcOpcode::RdmaWrite,
                                    64,
                                ),
                                1 => (
                                    SendOp::Read {
                                        remote_addr: mr.addr() + 6144,
                                        rkey: mr.rkey(),
                                    },
                                    &r_sge,
                                    WcOpcode::RdmaRead,
                                    48,
                                ),
                                2 => (
                                    SendOp::FetchAdd {
                                        remote_addr: mr.addr() + 7168 + 8 * k as u64,
                                        rkey: mr.rkey(),
                                        add: 1,
                                    },
                                    &a_sge,
                                    WcOpcode::FetchAdd,
                                    8,
                                ),
                                _ => (
                                    SendOp::Write {
                                        remote_addr: mr.addr() + 5120,
                                        rkey: mr.rkey(),
                                    },
                                    &w_sge,
                                    WcOpcode::RdmaWrite,
                                    64,
                                ),
                            };
                        // Some unsignaled ones: a later completion retires them.
                        let sig = last || lcg(&mut seed) % 3 != 0;
                        if sig {
                            signaled += 1;
                            expected[k].push((next_id, opc, len));
                        }
                        SendWr {
                            op,
                            signaled: sig,
                            ..SendWr::send(next_id, sge)
                        }
                    })
                    .collect();
                q.post_send(&wrs).unwrap();
            }
            // Poll with arrays of 1 to 7 entries until this round's completions are in.
            let mut got = 0;
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            while got < signaled {
                let mut wc = [empty_wc(); 7];
                let take = 1 + lcg(&mut seed) as usize % 7;
                let n = cq.poll(&mut wc[..take]).unwrap();
                for w in &wc[..n] {
                    assert_eq!(w.status, WcStatus::Success, "{w:?}");
                    let k = qps
                        .iter()
                        .position(|q| q.qpn() == w.qp_num)
                        .expect("own QPN");
                    assert_eq!(
                        (w.src_qp, w.grh, w.imm_data, w.vendor_err),
                        (0, false, None, 0)
                    );
                    seen[k].push((w.wr_id, w.opcode, w.byte_len));
                }
                got += n;
                if n == 0 {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "{mode:?}: completions missing"
                    );
                    mlx5::Platform::relax(dev.platform());
                }
            }
            assert_eq!(got, signaled, "{mode:?}: no extra completion");
        }
        assert_eq!(
            seen, expected,
            "{mode:?}: every signaled WR once, in order per QP"
        );
        assert_eq!(cq.poll(&mut [empty_wc(); 4]).unwrap(), 0);
    }
}

#[test]
fn interleaved_qps_are_never_confused_and_every_retired_wqe_frees_its_room() {
    let fabric = Fabric::new();
    let (_sim, dev) = nic(&fabric, Mode::Sync);
    let cq = dev.create_cq(255).unwrap();
    let mr = dev.alloc_mr(dev.pd(), 4096, MrAccess::ALL).unwrap();
    let mut qps: Vec<_> = (0..2).map(|_| looped(&dev, &cq, cap(64, 1, 1))).collect();
    let sge = [Sge {
        addr: mr.addr(),
        length: 16,
        lkey: mr.lkey(),
    }];
    let write = |id, signaled| SendWr {
        op: SendOp::Write {
            remote_addr: mr.addr() + 2048,
            rkey: mr.rkey(),
        },
        signaled,
        ..SendWr::send(id, &sge)
    };
    // QP 1 runs one WQE ahead of QP 0, so each of its CQEs carries the WQE counter QP 0's next
    // CQE will: only the QPN tells them apart.
    qps[1].post_send(&[write(999, true)]).unwrap();
    assert_eq!(wait(&cq, &dev, 1)[0].wr_id, 999);
    for i in 0..40u64 {
        qps[0].post_send(&[write(i, true)]).unwrap();
        qps[1].post_send(&[write(1000 + i, true)]).unwrap();
    }
    let wc = wait(&cq, &dev, 80);
    for (k, q) in qps.iter().enumerate() {
        let ids: Vec<u64> = wc
            .iter()
            .filter(|w| w.qp_num == q.qpn())
            .map(|w| w.wr_id)
            .collect();
        assert_eq!(
            ids,
            (0..40).map(|i| 1000 * k as u64 + i).collect::<Vec<_>>()
        );
    }
    // Every WQE retired gave its room back: the whole ring (each WRITE here is one WQEBB)
    // posts again, twice over (all but the last unsignaled, so one CQE retires them all).
    for q in &mut qps {
        for round in 0..2 {
            // A run of this QP's completions polled in one call (the short path retires all
            // but the first).
            let run: Vec<SendWr<'_>> = (0..8).map(|i| write(4000 + i, true)).collect();
            q.post_send(&run).unwrap();
            assert_eq!(wait(&cq, &dev, 8)[7].wr_id, 4007);
            let n = u64::from(q.layout().sq_wqebb_cnt);
            let wrs: Vec<SendWr<'_>> = (0..n).map(|i| write(5000 + i, i + 1 == n)).collect();
            q.post_send(&wrs)
                .unwrap_or_else(|e| panic!("round {round}: a full queue after polling: {e}"));
            assert_eq!(wait(&cq, &dev, 1)[0].wr_id, 5000 + n - 1);
        }
    }
}

#[test]
fn a_polling_loop_holds_the_cq_and_arms_it_through_the_poller() {
    let fabric = Fabric::new();
    let (_sim, dev) = nic(&fabric, Mode::Sync);
    let cq = dev.create_cq(63).unwrap();
    let mr = dev.alloc_mr(dev.pd(), 4096, MrAccess::ALL).unwrap();
    let mut q = looped(&dev, &cq, cap(64, 1, 1));
    let sge = [Sge {
        addr: mr.addr(),
        length: 8,
        lkey: mr.lkey(),
    }];
    let wrs: Vec<SendWr<'_>> = (0..40)
        .map(|i| SendWr {
            op: SendOp::Write {
                remote_addr: mr.addr() + 1024,
                rkey: mr.rkey(),
            },
            ..SendWr::send(i, &sge)
        })
        .collect();
    q.post_send(&wrs).unwrap();
    let mut ids = Vec::new();
    {
        let mut p = cq.start_poll().unwrap();
        // Another thread (or this one) cannot take the CQ meanwhile.
        std::thread::scope(|t| {
            t.spawn(|| assert!(cq.try_start_poll().is_none(), "the CQ is held"));
        });
        let mut wc = [empty_wc(); 7];
        while ids.len() < 40 {
            let n = p.poll(&mut wc).unwrap();
            assert!(n > 0, "every completion is there (synchronous device)");
            ids.extend(wc[..n].iter().map(|w| w.wr_id));
        }
        assert_eq!(p.poll(&mut wc).unwrap(), 0);
        // Armed through the poller: the next completion raises an event.
        p.req_notify(false).unwrap();
    }
    assert_eq!(ids, (0..40).collect::<Vec<_>>());
    q.post_send(&wrs[..1]).unwrap();
    let blank = mlx5::Event {
        event_type: 0xff,
        sub_type: 0,
        data: [0; 28],
    };
    let mut ev = [blank; 4];
    assert_eq!(dev.poll_completion_events(&mut ev).unwrap(), 1);
    assert_eq!(ev[0].cqn(), Some(cq.cqn()));
    let mut p = cq
        .try_start_poll()
        .expect("released when the poller was dropped");
    p.ack_event();
    assert_eq!(p.poll(&mut [empty_wc(); 2]).unwrap(), 1);
}

#[test]
fn a_held_cq_makes_other_calls_fail_after_a_bounded_wait() {
    use mlx5::sim::{Profile, SimDevice};
    use mlx5::{Device, DeviceConfig, SimPlatform, Wait};
    let sim = SimDevice::new(Profile::connectx5(), Mode::Sync);
    let config = DeviceConfig {
        cq_lock_timeout_ms: 5,
        ..DeviceConfig::default()
    };
    let dev = Device::open(SimPlatform::new(sim.clone()), config).unwrap();
    let cq = dev.create_cq(15).unwrap();
    let cqn = cq.cqn();
    let timed_out = |r: mlx5::Result<()>, what: &str| match r {
        Err(Error::Timeout {
            waiting_for: Wait::CqLock { cqn: c },
            waited_ms,
        }) => {
            assert_eq!(c, cqn, "{what}");
            assert!(waited_ms >= 5, "{what}: waited {waited_ms} ms");
        }
        other => panic!("{what}: expected a timeout on the CQ, got {other:?}"),
    };
    let held = cq.start_poll().unwrap();
    // Another thread's poll gives up with a typed error instead of spinning for ever...
    std::thread::scope(|t| {
        t.spawn(|| timed_out(cq.poll(&mut [empty_wc(); 1]).map(|_| ()), "poll"));
    });
    // ... and so do this thread's own calls that need the CQ.
    timed_out(cq.req_notify(false), "req_notify");
    timed_out(cq.ack_event(), "ack_event");
    let attr = QpInitAttr::new(QpType::Rc, &cq, &cq, cap(4, 4, 1));
    timed_out(dev.create_qp(dev.pd(), &attr).map(|_| ()), "create_qp");
    drop(held);
    // The refused QP was destroyed in the firmware again.
    let qps = |s: &SimDevice| {
        s.live_objects()
            .iter()
            .filter(|(k, _)| *k == mlx5::sim::ObjectKind::Qp)
            .count()
    };
    assert_eq!(qps(&sim), 0);
    // Released: everything works again.
    assert_eq!(cq.poll(&mut [empty_wc(); 1]).unwrap(), 0);
    let q = dev.create_qp(dev.pd(), &attr).unwrap();
    cq.req_notify(false).unwrap();
    assert_eq!(qps(&sim), 1);
    q.destroy().unwrap();
    assert_eq!(qps(&sim), 0);
}
