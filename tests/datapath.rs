//! The data path on simulated ConnectX-5s exchanging RoCE v2 frames: SEND/RECV, WRITE, READ,
//! atomics, UD, a shared SRQ, every error status through a real cause, exactly one completion
//! per signaled work request, and a ring wrapping over a million work requests.

mod common;

use common::*;
use mlx5::mr::MrAccess;
use mlx5::qp::UdAddr;
use mlx5::qp::{ConnectOpts, Payload, QpInitAttr, QpType, RecvWr, SendOp, SendWr, Sge};
use mlx5::sim::{Fabric, Mode};
use mlx5::srq::SrqAttr;
use mlx5::{WcOpcode, WcStatus};

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn ping_pong(mode: Mode) {
    let fabric = Fabric::new();
    let (_sa, a) = nic(&fabric, mode);
    let (_sb, b) = nic(&fabric, mode);
    let (cqa, cqb) = (a.create_cq(64).unwrap(), b.create_cq(64).unwrap());
    let (mra, mrb) = (
        a.alloc_mr(a.pd(), 8192, MrAccess::ALL).unwrap(),
        b.alloc_mr(b.pd(), 8192, MrAccess::ALL).unwrap(),
    );
    let mut qa = qp(&a, &cqa, QpType::Rc, cap(16, 16, 2));
    let mut qb = qp(&b, &cqb, QpType::Rc, cap(16, 16, 2));
    connect(&mut qa, &mut qb, &ConnectOpts::default());
    for round in 0..10u8 {
        let msg = pattern(3000, round);
        qb.post_recv(&[RecvWr {
            wr_id: 100 + u64::from(round),
            sg_list: &[Sge {
                addr: mrb.addr(),
                length: 4096,
                lkey: mrb.lkey(),
            }],
        }])
        .unwrap();
        mra.write(0, &msg).unwrap();
        qa.post_send(&[SendWr::send(
            u64::from(round),
            &[Sge {
                addr: mra.addr(),
                length: 3000,
                lkey: mra.lkey(),
            }],
        )])
        .unwrap();
        let wc = wait(&cqb, &b, 1);
        assert_eq!(
            (wc[0].status, wc[0].opcode, wc[0].byte_len, wc[0].wr_id),
            (
                WcStatus::Success,
                WcOpcode::Recv,
                3000,
                100 + u64::from(round)
            )
        );
        let mut got = vec![0u8; 3000];
        mrb.read(0, &mut got).unwrap();
        assert_eq!(got, msg, "round {round}: every byte");
        let wc = wait(&cqa, &a, 1);
        assert_eq!(
            (wc[0].status, wc[0].opcode, wc[0].wr_id),
            (WcStatus::Success, WcOpcode::Send, u64::from(round))
        );
        // Pong, with immediate data and inline payload.
        qa.post_recv(&[RecvWr {
            wr_id: 7,
            sg_list: &[Sge {
                addr: mra.addr() + 4096,
                length: 64,
                lkey: mra.lkey(),
            }],
        }])
        .unwrap();
        let pong = [round; 40];
        qb.post_send(&[SendWr {
            op: SendOp::SendImm(0xdead_0000 | u32::from(round)),
            payload: Payload::Inline(&pong),
            ..SendWr::send(9, &[])
        }])
        .unwrap();
        let wc = wait(&cqa, &a, 1);
        assert_eq!(
            (wc[0].status, wc[0].byte_len, wc[0].imm_data),
            (WcStatus::Success, 40, Some(0xdead_0000 | u32::from(round)))
        );
        let mut got = [0u8; 40];
        mra.read(4096, &mut got).unwrap();
        assert_eq!(got, pong);
        wait(&cqb, &b, 1);
    }
}

#[test]
fn rc_ping_pong_sync() {
    ping_pong(Mode::Sync);
}

#[test]
fn rc_ping_pong_threaded() {
    ping_pong(Mode::Threaded);
}

#[test]
fn write_read_and_atomics_move_every_byte() {
    let fabric = Fabric::new();
    let (_sa, a) = nic(&fabric, Mode::Sync);
    let (_sb, b) = nic(&fabric, Mode::Sync);
    let (cqa, cqb) = (a.create_cq(64).unwrap(), b.create_cq(64).unwrap());
    let (mra, mrb) = (
        a.alloc_mr(a.pd(), 65536, MrAccess::ALL).unwrap(),
        b.alloc_mr(b.pd(), 65536, MrAccess::ALL).unwrap(),
    );
    let mut qa = qp(&a, &cqa, QpType::Rc, cap(16, 16, 4));
    let mut qb = qp(&b, &cqb, QpType::Rc, cap(16, 16, 4));
    connect(&mut qa, &mut qb, &ConnectOpts::default());
    // WRITE 20000 bytes gathered from three SGEs.
    let data = pattern(20000, 3);
    mra.write(0, &data).unwrap();
    let sges = [
        Sge {
            addr: mra.addr(),
            length: 7000,
            lkey: mra.lkey(),
        },
        Sge {
            addr: mra.addr() + 7000,
            length: 6000,
            lkey: mra.lkey(),
        },
        Sge {
            addr: mra.addr() + 13000,
            length: 7000,
            lkey: mra.lkey(),
        },
    ];
    qa.post_send(&[SendWr {
        op: SendOp::Write {
            remote_addr: mrb.addr() + 100,
            rkey: mrb.rkey(),
        },
        ..SendWr::send(1, &sges)
    }])
    .unwrap();
    let wc = wait(&cqa, &a, 1);
    assert_eq!(
        (wc[0].status, wc[0].opcode, wc[0].byte_len),
        (WcStatus::Success, WcOpcode::RdmaWrite, 20000)
    );
    let mut got = vec![0u8; 20000];
    mrb.read(100, &mut got).unwrap();
    assert_eq!(got, data);
    // READ it back into another place.
    qa.post_send(&[SendWr {
        op: SendOp::Read {
            remote_addr: mrb.addr() + 100,
            rkey: mrb.rkey(),
        },
        ..SendWr::send(
            2,
            &[Sge {
                addr: mra.addr() + 30000,
                length: 20000,
                lkey: mra.lkey(),
            }],
        )
    }])
    .unwrap();
    let wc = wait(&cqa, &a, 1);
    assert_eq!(
        (wc[0].status, wc[0].opcode, wc[0].byte_len),
        (WcStatus::Success, WcOpcode::RdmaRead, 20000)
    );
    mra.read(30000, &mut got).unwrap();
    assert_eq!(got, data);
    // Atomics on an 8-byte word at the peer: remote memory and the returned value are in host
    // order (the driver sets the host-order requester mode; HOST_ENDIANNESS says little-endian).
    mrb.write(64000, &100u64.to_ne_bytes()).unwrap();
    let result = [Sge {
        addr: mra.addr() + 60000,
        length: 8,
        lkey: mra.lkey(),
    }];
    qa.post_send(&[SendWr {
        op: SendOp::FetchAdd {
            remote_addr: mrb.addr() + 64000,
            rkey: mrb.rkey(),
            add: 23,
        },
        ..SendWr::send(3, &result)
    }])
    .unwrap();
    let wc = wait(&cqa, &a, 1);
    assert_eq!(
        (wc[0].status, wc[0].opcode, wc[0].byte_len),
        (WcStatus::Success, WcOpcode::FetchAdd, 8)
    );
    let mut w = [0u8; 8];
    mra.read(60000, &mut w).unwrap();
    assert_eq!(
        u64::from_ne_bytes(w),
        100,
        "fetch-and-add returns the old value"
    );
    mrb.read(64000, &mut w).unwrap();
    assert_eq!(u64::from_ne_bytes(w), 123);
    qa.post_send(&[SendWr {
        op: SendOp::CmpSwap {
            remote_addr: mrb.addr() + 64000,
            rkey: mrb.rkey(),
            compare: 123,
            swap: 7,
        },
        ..SendWr::send(4, &result)
    }])
    .unwrap();
    let wc = wait(&cqa, &a, 1);
    assert_eq!(
        (wc[0].status, wc[0].opcode),
        (WcStatus::Success, WcOpcode::CompSwap)
    );
    mrb.read(64000, &mut w).unwrap();
    assert_eq!(u64::from_ne_bytes(w), 7, "compare matched: swapped");
    qa.post_send(&[SendWr {
        op: SendOp::CmpSwap {
            remote_addr: mrb.addr() + 64000,
            rkey: mrb.rkey(),
            compare: 1,
            swap: 9,
        },
        ..SendWr::send(5, &result)
    }])
    .unwrap();
    wait(&cqa, &a, 1);
    mra.read(60000, &mut w).unwrap();
    assert_eq!(u64::from_ne_bytes(w), 7, "the old value comes back");
    mrb.read(64000, &mut w).unwrap();
    assert_eq!(u64::from_ne_bytes(w), 7, "compare failed: unchanged");
    assert_eq!(
        cqb.poll(&mut [empty_wc(); 4]).unwrap(),
        0,
        "one-sided operations complete nothing at the responder"
    );
}

#[test]
fn ud_sends_carry_a_grh_and_the_source_qp() {
    let fabric = Fabric::new();
    let (_sa, a) = nic(&fabric, Mode::Sync);
    let (_sb, b) = nic(&fabric, Mode::Sync);
    let (cqa, cqb) = (a.create_cq(64).unwrap(), b.create_cq(64).unwrap());
    let (mra, mrb) = (
        a.alloc_mr(a.pd(), 8192, MrAccess::ALL).unwrap(),
        b.alloc_mr(b.pd(), 8192, MrAccess::ALL).unwrap(),
    );
    let mut qa = qp(&a, &cqa, QpType::Ud, cap(16, 16, 1));
    let mut qb = qp(&b, &cqb, QpType::Ud, cap(16, 16, 1));
    connect(&mut qa, &mut qb, &ConnectOpts::default());
    qb.post_recv(&[RecvWr {
        wr_id: 1,
        sg_list: &[Sge {
            addr: mrb.addr(),
            length: 40 + 512,
            lkey: mrb.lkey(),
        }],
    }])
    .unwrap();
    let msg = pattern(500, 9);
    mra.write(0, &msg).unwrap();
    let eb = qb.endpoint();
    let ud = UdAddr {
        remote_qpn: eb.qpn,
        qkey: ConnectOpts::default().qkey,
        dgid: eb.gid,
        dmac: eb.mac,
        hop_limit: 64,
        udp_sport: 0xc123,
        ..UdAddr::default()
    };
    qa.post_send(&[SendWr {
        ud: Some(ud),
        ..SendWr::send(
            1,
            &[Sge {
                addr: mra.addr(),
                length: 500,
                lkey: mra.lkey(),
            }],
        )
    }])
    .unwrap();
    let wc = wait(&cqb, &b, 1);
    assert_eq!(
        (wc[0].status, wc[0].byte_len, wc[0].src_qp),
        (WcStatus::Success, 540, qa.qpn())
    );
    let mut got = vec![0u8; 500];
    mrb.read(40, &mut got).unwrap();
    assert_eq!(got, msg, "payload after the 40-byte GRH");
    // A wrong Q_Key is dropped silently.
    qb.post_recv(&[RecvWr {
        wr_id: 2,
        sg_list: &[Sge {
            addr: mrb.addr(),
            length: 552,
            lkey: mrb.lkey(),
        }],
    }])
    .unwrap();
    qa.post_send(&[SendWr {
        ud: Some(UdAddr { qkey: 5, ..ud }),
        ..SendWr::send(
            2,
            &[Sge {
                addr: mra.addr(),
                length: 500,
                lkey: mra.lkey(),
            }],
        )
    }])
    .unwrap();
    wait(&cqa, &a, 2);
    assert_eq!(cqb.poll(&mut [empty_wc(); 2]).unwrap(), 0);
}

#[test]
fn one_srq_feeds_several_qps() {
    let fabric = Fabric::new();
    let (_sa, a) = nic(&fabric, Mode::Sync);
    let (_sb, b) = nic(&fabric, Mode::Sync);
    let (cqa, cqb) = (a.create_cq(256).unwrap(), b.create_cq(256).unwrap());
    let (mra, mrb) = (
        a.alloc_mr(a.pd(), 8192, MrAccess::ALL).unwrap(),
        b.alloc_mr(b.pd(), 65536, MrAccess::ALL).unwrap(),
    );
    let srq = b
        .create_srq(
            b.pd(),
            &SrqAttr {
                max_wr: 64,
                max_sge: 1,
                srq_limit: 0,
            },
        )
        .unwrap();
    let mut senders = Vec::new();
    let mut receivers = Vec::new();
    for _ in 0..3 {
        let mut s = qp(&a, &cqa, QpType::Rc, cap(16, 1, 1));
        let mut attr = QpInitAttr::new(QpType::Rc, &cqb, &cqb, cap(16, 0, 1));
        attr.srq = Some(&srq);
        let mut r = b.create_qp(b.pd(), &attr).unwrap();
        connect(&mut s, &mut r, &ConnectOpts::default());
        senders.push(s);
        receivers.push(r);
    }
    for round in 0..4 {
        let posts: Vec<Vec<Sge>> = (0..12)
            .map(|i| {
                vec![Sge {
                    addr: mrb.addr() + 1024 * i,
                    length: 1024,
                    lkey: mrb.lkey(),
                }]
            })
            .collect();
        let wrs: Vec<RecvWr<'_>> = posts
            .iter()
            .enumerate()
            .map(|(i, s)| RecvWr {
                wr_id: 1000 * round + i as u64,
                sg_list: s,
            })
            .collect();
        srq.post_recv(&wrs).unwrap();
        for (k, s) in senders.iter_mut().enumerate() {
            for j in 0..4u64 {
                mra.write(0, &[k as u8; 100]).unwrap();
                s.post_send(&[SendWr::send(
                    j,
                    &[Sge {
                        addr: mra.addr(),
                        length: 100,
                        lkey: mra.lkey(),
                    }],
                )])
                .unwrap();
            }
        }
        let wcs = wait(&cqb, &b, 12);
        let mut ids: Vec<u64> = wcs.iter().map(|w| w.wr_id).collect();
        ids.sort();
        assert_eq!(
            ids,
            (0..12).map(|i| 1000 * round + i).collect::<Vec<_>>(),
            "each receive used once"
        );
        for r in &receivers {
            assert_eq!(wcs.iter().filter(|w| w.qp_num == r.qpn()).count(), 4);
        }
        wait(&cqa, &a, 12);
    }
}

#[test]
fn an_armed_cq_raises_a_completion_event_and_errors_reach_the_async_eq() {
    use mlx5::Event;
    let fabric = Fabric::new();
    let (_sa, a) = nic(&fabric, Mode::Sync);
    let (_sb, b) = nic(&fabric, Mode::Sync);
    let (cqa, cqb) = (a.create_cq(64).unwrap(), b.create_cq(64).unwrap());
    let (mra, mrb) = (
        a.alloc_mr(a.pd(), 4096, MrAccess::ALL).unwrap(),
        b.alloc_mr(b.pd(), 4096, MrAccess::LOCAL).unwrap(),
    );
    let mut qa = qp(&a, &cqa, QpType::Rc, cap(16, 16, 1));
    let mut qb = qp(&b, &cqb, QpType::Rc, cap(16, 16, 1));
    connect(&mut qa, &mut qb, &ConnectOpts::default());
    let blank = Event {
        event_type: 0xff,
        sub_type: 0,
        data: [0; 28],
    };
    let mut ev = [blank; 8];
    assert_eq!(b.poll_completion_events(&mut ev).unwrap(), 0);
    cqb.req_notify(false).unwrap();
    qb.post_recv(&[RecvWr {
        wr_id: 1,
        sg_list: &[Sge {
            addr: mrb.addr(),
            length: 64,
            lkey: mrb.lkey(),
        }],
    }])
    .unwrap();
    qa.post_send(&[SendWr::send(
        1,
        &[Sge {
            addr: mra.addr(),
            length: 64,
            lkey: mra.lkey(),
        }],
    )])
    .unwrap();
    wait(&cqa, &a, 1);
    let n = b.poll_completion_events(&mut ev).unwrap();
    assert_eq!(n, 1, "one event for the armed CQ");
    assert_eq!(
        (ev[0].event_type, ev[0].cqn()),
        (mlx5::ifc::event::COMPLETION, Some(cqb.cqn()))
    );
    cqb.ack_event().unwrap();
    assert_eq!(wait(&cqb, &b, 1)[0].status, WcStatus::Success);
    // Not re-armed: the next completion raises no event.
    qb.post_recv(&[RecvWr {
        wr_id: 2,
        sg_list: &[Sge {
            addr: mrb.addr(),
            length: 64,
            lkey: mrb.lkey(),
        }],
    }])
    .unwrap();
    qa.post_send(&[SendWr::send(
        2,
        &[Sge {
            addr: mra.addr(),
            length: 64,
            lkey: mra.lkey(),
        }],
    )])
    .unwrap();
    wait(&cqb, &b, 1);
    wait(&cqa, &a, 1);
    assert_eq!(b.poll_completion_events(&mut ev).unwrap(), 0);
    // A remote WRITE into memory without remote write: the responder's QP reports the error.
    qa.post_send(&[SendWr {
        op: SendOp::Write {
            remote_addr: mrb.addr(),
            rkey: mrb.rkey(),
        },
        ..SendWr::send(
            3,
            &[Sge {
                addr: mra.addr(),
                length: 8,
                lkey: mra.lkey(),
            }],
        )
    }])
    .unwrap();
    assert_eq!(wait(&cqa, &a, 1)[0].status, WcStatus::RemAccessErr);
    let n = b.poll_async_events(&mut ev).unwrap();
    assert!(ev[..n].iter().any(|e| e.event_type == mlx5::ifc::event::WQ_ACCESS_ERROR && e.qpn() == Some(qb.qpn())), "{:?}", &ev[..n]);
}

#[test]
fn caller_allocated_memory_registers_and_receives() {
    use mlx5::raw::DmaBuf;
    let fabric = Fabric::new();
    let (_sa, a) = nic(&fabric, Mode::Sync);
    let (_sb, b) = nic(&fabric, Mode::Sync);
    let (cqa, cqb) = (a.create_cq(16).unwrap(), b.create_cq(16).unwrap());
    let mra = a.alloc_mr(a.pd(), 4096, MrAccess::ALL).unwrap();
    // The caller's own DMA memory, allocated through the platform, registered as it is.
    let mine = DmaBuf::alloc(b.platform(), 3 * 4096, 4096).unwrap();
    let iova = mine.iova();
    let mapped = _sb.dma_bytes_mapped();
    {
        // The region takes the buffer for as long as its key exists.
        let mrb = b.reg_mr(b.pd(), mine, MrAccess::ALL).unwrap();
        assert_eq!((mrb.addr(), mrb.len()), (iova, 3 * 4096));
        let mut qa = qp(&a, &cqa, QpType::Rc, cap(4, 4, 1));
        let mut qb = qp(&b, &cqb, QpType::Rc, cap(4, 4, 1));
        connect(&mut qa, &mut qb, &ConnectOpts::default());
        let data = pattern(9000, 5);
        mra.write(0, &data[..4096]).unwrap();
        qa.post_send(&[SendWr {
            op: SendOp::Write {
                remote_addr: mrb.addr() + 100,
                rkey: mrb.rkey(),
            },
            ..SendWr::send(
                1,
                &[Sge {
                    addr: mra.addr(),
                    length: 4096,
                    lkey: mra.lkey(),
                }],
            )
        }])
        .unwrap();
        assert_eq!(wait(&cqa, &a, 1)[0].status, WcStatus::Success);
        let mut got = vec![0u8; 4096];
        mrb.read(100, &mut got).unwrap();
        assert_eq!(got, data[..4096], "the WRITE landed in the caller's buffer");
        drop((qa, qb));
        // Deregistration hands the buffer back, with what the device wrote.
        let mine = mrb.dereg().unwrap().expect("the caller's buffer");
        assert_eq!(mine.iova(), iova);
        mine.read_bytes(100, &mut got).unwrap();
        assert_eq!(got, data[..4096]);
        mine.free(b.platform()).unwrap();
        // A buffer that does not start on a page is refused (and freed: it was handed over).
        let odd = DmaBuf::alloc(b.platform(), 64, 64).unwrap();
        if odd.iova() % 4096 != 0 {
            assert!(matches!(
                b.reg_mr(b.pd(), odd, MrAccess::LOCAL),
                Err(mlx5::Error::InvalidArgument { op: "reg_mr", .. })
            ));
        } else {
            odd.free(b.platform()).unwrap();
        }
    }
    assert_eq!(
        _sb.dma_bytes_mapped(),
        mapped - 3 * 4096,
        "every buffer freed"
    );
    assert_eq!(b.quarantined(), mlx5::Quarantined::default());
}

/// A datagram address on a request to an RC QP is not the QP's to use: the WQE is the RC one
/// (`fits` counts a datagram segment only on a UD QP, and the WQE now writes one only there
/// too), for an SGE and for inline data, and the bytes arrive.
#[test]
fn a_datagram_address_on_an_rc_send_is_ignored() {
    let fabric = Fabric::new();
    let (_sim, dev) = nic(&fabric, Mode::Sync);
    let cq = dev.create_cq(16).unwrap();
    let mr = dev.alloc_mr(dev.pd(), 4096, MrAccess::ALL).unwrap();
    let mut q = looped(&dev, &cq, cap(4, 4, 1));
    let recv = [Sge {
        addr: mr.addr() + 1024,
        length: 256,
        lkey: mr.lkey(),
    }];
    let data = pattern(40, 3);
    mr.write(0, &data).unwrap();
    let sge = [Sge {
        addr: mr.addr(),
        length: 40,
        lkey: mr.lkey(),
    }];
    let ud = Some(UdAddr {
        remote_qpn: 0x123,
        qkey: 0x1111,
        ..UdAddr::default()
    });
    let inline = pattern(24, 9);
    for wr in [
        SendWr {
            ud,
            ..SendWr::send(1, &sge)
        },
        SendWr {
            ud,
            payload: Payload::Inline(&inline),
            ..SendWr::send(2, &[])
        },
    ] {
        q.post_recv(&[RecvWr {
            wr_id: 7,
            sg_list: &recv,
        }])
        .unwrap();
        q.post_send(&[wr]).unwrap();
        let wc = wait(&cq, &dev, 2);
        assert!(wc.iter().all(|w| w.status == WcStatus::Success), "{wc:?}");
        let want = match wr.payload {
            Payload::Inline(d) => d.to_vec(),
            Payload::Sges(_) => data.clone(),
        };
        let mut got = vec![0; want.len()];
        mr.read(1024, &mut got).unwrap();
        assert_eq!(got, want);
    }
}

/// A receive WQE ends where its scatter list ends: a slot that held a three-SGE receive and is
/// reused by a one-SGE receive gets the invalid-lkey terminator after its one segment, so the
/// device never scatters into the stale segments behind it (a message longer than the one SGE
/// is a local length error, not a success spread over old buffers), and a list that starts with
/// a zero-length SGE is written without it.
#[test]
fn a_receive_wqe_ends_where_its_scatter_list_ends() {
    let fabric = Fabric::new();
    let (_sa, a) = nic(&fabric, Mode::Sync);
    let (_sb, b) = nic(&fabric, Mode::Sync);
    let (cqa, cqb) = (a.create_cq(64).unwrap(), b.create_cq(64).unwrap());
    let mra = a.alloc_mr(a.pd(), 4096, MrAccess::ALL).unwrap();
    let mrb = b.alloc_mr(b.pd(), 4096, MrAccess::ALL).unwrap();
    let mut qa = qp(&a, &cqa, QpType::Rc, cap(4, 1, 3));
    let mut qb = qp(&b, &cqb, QpType::Rc, cap(4, 1, 3));
    connect(&mut qa, &mut qb, &ConnectOpts::default());
    let slots = qb.layout().rq_wqe_cnt as u64;
    assert!(
        qb.layout().rq_stride_bytes >= 48,
        "three segments per receive"
    );
    let sge = |off: u64, length: u32| Sge {
        addr: mrb.addr() + off,
        length,
        lkey: mrb.lkey(),
    };
    mra.write(0, &pattern(24, 9)).unwrap();
    let send = |qa: &mut mlx5::qp::Qp<'_, mlx5::SimPlatform>, id: u64| {
        qa.post_send(&[SendWr::send(
            id,
            &[Sge {
                addr: mra.addr(),
                length: 24,
                lkey: mra.lkey(),
            }],
        )])
        .unwrap();
    };
    // Every slot once with a zero-length SGE first, then one of 24 bytes (the empty one is
    // skipped).
    for i in 0..slots {
        qb.post_recv(&[RecvWr {
            wr_id: 100 + i,
            sg_list: &[sge(3000, 0), sge(3072, 24)],
        }])
        .unwrap();
        send(&mut qa, 100 + i);
        let wc = wait(&cqb, &b, 1);
        assert_eq!((wc[0].status, wc[0].byte_len), (WcStatus::Success, 24));
        let mut got = [0u8; 24];
        mrb.read(3072, &mut got).unwrap();
        assert_eq!(got.to_vec(), pattern(24, 9));
        wait(&cqa, &a, 1);
    }
    // Every slot again with three 8-byte segments: 24 bytes land in three places.
    for i in 0..slots {
        qb.post_recv(&[RecvWr {
            wr_id: i,
            sg_list: &[sge(0, 8), sge(1024, 8), sge(2048, 8)],
        }])
        .unwrap();
        send(&mut qa, i);
        let wc = wait(&cqb, &b, 1);
        assert_eq!((wc[0].status, wc[0].byte_len), (WcStatus::Success, 24));
        wait(&cqa, &a, 1);
    }
    // Now one 8-byte SGE in a slot whose old segments 2 and 3 are still in the ring.
    mrb.write(1024, &[0xee; 8]).unwrap();
    qb.post_recv(&[RecvWr {
        wr_id: 200,
        sg_list: &[sge(0, 8)],
    }])
    .unwrap();
    send(&mut qa, 200);
    let wc = wait(&cqb, &b, 1);
    assert_eq!(
        (wc[0].wr_id, wc[0].status),
        (200, WcStatus::LocLenErr),
        "24 bytes into one 8-byte SGE"
    );
    let mut stale = [0u8; 8];
    mrb.read(1024, &mut stale).unwrap();
    assert_eq!(stale, [0xee; 8], "nothing scattered into a stale segment");
}
