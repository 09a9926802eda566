//! Error completions through real causes: bad lkey, bad rkey, no remote write right, a message
//! too long for the receive buffer, RNR retries exhausted, packets lost past the retry count;
//! flushes; retransmission after a drop or an ICRC error; duplicated and reordered frames; 2ERR;
//! CQ events and overflow.

mod common;

use common::datapath::*;
use mlx5_ifc::consts::qp_st::RC;
use mlx5_ifc::consts::qp_state;
use mlx5_ifc::event;
use mlx5_ifc::prm::qp::{Ads, Qpc};
use mlx5_ifc::{Be64, ViewMut};
use mlx5_sim::{Mode, WireFault};

use common::queues::force_in;

const SIGNALED: u8 = 0x08;
const SEND: u8 = 0x0a;
const WRITE: u8 = 0x08;
const READ: u8 = 0x10;
const FETCH_ADD: u8 = 0x12;
const REQ: u8 = 0x0;
const RESP_SEND: u8 = 0x2;
const REQ_ERR: u8 = 0xd;
const RESP_ERR: u8 = 0xe;

const LOCAL_LENGTH_ERR: u8 = 0x01;
const LOCAL_PROT_ERR: u8 = 0x04;
const WR_FLUSH_ERR: u8 = 0x05;
const REMOTE_INVAL_REQ_ERR: u8 = 0x12;
const REMOTE_ACCESS_ERR: u8 = 0x13;
const TRANSPORT_RETRY_EXC_ERR: u8 = 0x15;
const RNR_RETRY_EXC_ERR: u8 = 0x16;

fn err(c: &Cqe) -> (u8, u8, u16) {
    (c.opcode, c.syndrome, c.wqe_counter)
}

#[test]
fn bad_lkey_is_a_local_protection_error_that_flushes_the_rest() {
    let (_fabric, mut a, mut b) = pair(Mode::Sync);
    let (mut qa, _qb) = connected(&mut a, &mut b, RC, |_| {});
    let mr = a.reg_mr(4096, false, false, false);
    a.post_recv(&mut qa, &[(64, mr.key, mr.va(0))]);
    // WQE 0 names a key with the wrong variant byte; WQE 1 is fine; one doorbell for both.
    a.write_wqe(
        &mut qa,
        SEND,
        SIGNALED,
        [0; 4],
        &[Seg::Data(16, mr.key ^ 1, mr.va(0))],
    );
    a.post_send(&mut qa, SEND, 0, [0; 4], &[Seg::Data(16, mr.key, mr.va(0))]);
    let c = a.drain();
    assert_eq!(c.len(), 3, "{c:?}");
    assert_eq!(err(&c[0]), (REQ_ERR, LOCAL_PROT_ERR, 0));
    assert_eq!(c[0].wqe_opcode, SEND);
    assert_eq!(
        err(&c[1]),
        (REQ_ERR, WR_FLUSH_ERR, 1),
        "unsignaled, flushed anyway"
    );
    assert_eq!(
        err(&c[2]),
        (RESP_ERR, WR_FLUSH_ERR, 0),
        "the posted receive"
    );
    assert_eq!(a.dev().qp_state(qa.qpn), Some(qp_state::ERR as u8));
    // Every later WQE flushes too.
    let idx = a.post_send(&mut qa, SEND, 0, [0; 4], &[Seg::Inline(vec![1])]);
    assert_eq!(
        a.poll().map(|c| err(&c)),
        Some((REQ_ERR, WR_FLUSH_ERR, idx))
    );
    // An out-of-bounds range of a good key is a protection error too.
    let (mut qa2, _qb2) = connected(&mut a, &mut b, RC, |_| {});
    a.post_send(
        &mut qa2,
        SEND,
        0,
        [0; 4],
        &[Seg::Data(64, mr.key, mr.va(4090))],
    );
    assert_eq!(
        a.poll().map(|c| err(&c)),
        Some((REQ_ERR, LOCAL_PROT_ERR, 0))
    );
    assert_eq!(b.poll(), None, "nothing went on the wire");
}

#[test]
fn bad_rkeys_and_missing_rights_are_remote_access_errors() {
    let (_fabric, mut a, mut b) = pair(Mode::Sync);
    let la = a.reg_mr(8192, false, false, false);
    let readonly = b.reg_mr(4096, true, false, false);
    let cases: [(u8, u32, u64, u32); 3] = [
        (WRITE, 0x00ab_cd42, readonly.va(0), 64),
        (WRITE, readonly.key, readonly.va(0), 64),
        (READ, readonly.key, readonly.va(4000), 200),
    ];
    for (k, (op, rkey, va, len)) in cases.into_iter().enumerate() {
        let (mut qa, qb) = connected(&mut a, &mut b, RC, |_| {});
        a.post_send(
            &mut qa,
            op,
            SIGNALED,
            [0; 4],
            &[Seg::Raddr(va, rkey), Seg::Data(len, la.key, la.va(0))],
        );
        let c = a.poll().expect("requester error");
        assert_eq!(
            (c.opcode, c.syndrome, c.wqe_opcode),
            (REQ_ERR, REMOTE_ACCESS_ERR, op),
            "case {k}"
        );
        assert_eq!(
            b.dev().qp_state(qb.qpn),
            Some(qp_state::ERR as u8),
            "case {k}"
        );
        let (etype, data) = b.poll_eq().expect("async event");
        assert_eq!(etype, event::WQ_ACCESS_ERROR);
        assert_eq!(
            &data[0x18..0x1c],
            &qb.qpn.to_be_bytes(),
            "QPN at EQE byte 0x38"
        );
    }
    assert_eq!(la.buf.len, 8192);
}

#[test]
fn a_send_too_long_for_the_receive_buffer() {
    let (_fabric, mut a, mut b) = pair(Mode::Sync);
    let (mut qa, mut qb) = connected(&mut a, &mut b, RC, |_| {});
    let dst = b.reg_mr(4096, false, false, false);
    b.post_recv(&mut qb, &[(100, dst.key, dst.va(0))]);
    b.post_recv(&mut qb, &[(100, dst.key, dst.va(0))]);
    a.post_send(
        &mut qa,
        SEND,
        SIGNALED,
        [0; 4],
        &[Seg::Inline(vec![7; 500])],
    );
    let r = b.drain();
    assert_eq!(err(&r[0]), (RESP_ERR, LOCAL_LENGTH_ERR, 0));
    assert_eq!(
        err(&r[1]),
        (RESP_ERR, WR_FLUSH_ERR, 1),
        "the other posted receive"
    );
    let s = a.poll().unwrap();
    assert_eq!(err(&s), (REQ_ERR, REMOTE_INVAL_REQ_ERR, 0));
    assert_eq!(b.dev().qp_state(qb.qpn), Some(qp_state::ERR as u8));
}

fn short_timers(rnr_retry: u64, retry: u64) -> impl Fn(&mut ViewMut<'_, Qpc>) {
    move |c| {
        c.set(Qpc::RNR_RETRY, rnr_retry).unwrap();
        c.set(Qpc::MIN_RNR_NAK, 1).unwrap();
        c.set(Qpc::RETRY_COUNT, retry).unwrap();
        c.nested_mut(Qpc::PRIMARY_ADDRESS_PATH)
            .set(Ads::ACK_TIMEOUT, 1)
            .unwrap();
    }
}

#[test]
fn no_receive_posted_until_the_rnr_retries_run_out() {
    let (fabric, mut a, mut b) = pair(Mode::Sync);
    let (mut qa, _qb) = connected(&mut a, &mut b, RC, short_timers(2, 7));
    a.post_send(&mut qa, SEND, SIGNALED, [0; 4], &[Seg::Inline(vec![1; 8])]);
    assert_eq!(a.poll(), None, "waiting for the RNR timer");
    fabric.advance(1_000_000);
    let c = a.poll().expect("RNR retry exceeded");
    assert_eq!(err(&c), (REQ_ERR, RNR_RETRY_EXC_ERR, 0));
    assert_eq!(
        b.dev().datapath_counters().rnr_naks_sent,
        3,
        "first try and two retries"
    );
}

#[test]
fn an_rnr_wait_ends_when_a_receive_is_posted() {
    let (fabric, mut a, mut b) = pair(Mode::Sync);
    let (mut qa, mut qb) = connected(&mut a, &mut b, RC, short_timers(7, 7));
    let dst = b.reg_mr(4096, false, false, false);
    a.post_send(&mut qa, SEND, SIGNALED, [0; 4], &[Seg::Inline(vec![3; 8])]);
    fabric.advance(100_000);
    assert_eq!(a.poll(), None, "rnr_retry 7 retries forever");
    b.post_recv(&mut qb, &[(64, dst.key, dst.va(0))]);
    fabric.advance(20_000);
    assert_eq!(b.poll().map(|c| c.opcode), Some(RESP_SEND));
    assert_eq!(a.poll().map(|c| c.opcode), Some(REQ));
}

#[test]
fn a_retransmission_reads_the_wqe_and_its_data_again() {
    // Nothing of a request's frames is kept: as ConnectX does, a retransmission reads the WQE
    // from the send queue and gathers its data again, so it carries the buffer as it is then.
    let (fabric, mut a, mut b) = pair(Mode::Sync);
    let (mut qa, _qb) = connected(&mut a, &mut b, RC, short_timers(7, 7));
    let src = a.reg_mr(4096, false, false, false);
    let dst = b.reg_mr(4096, false, true, false);
    a.dev().dma_write(src.buf.iova, &[1; 2500]).unwrap();
    fabric.inject(WireFault::LinkDown);
    a.post_send(
        &mut qa,
        WRITE,
        SIGNALED,
        [0; 4],
        &[
            Seg::Raddr(dst.va(0), dst.key),
            Seg::Data(2500, src.key, src.va(0)),
        ],
    );
    assert_eq!(fabric.counters().dropped, 3, "its three frames (MTU 1024)");
    assert_eq!(a.poll(), None);
    a.dev().dma_write(src.buf.iova, &[2; 2500]).unwrap();
    fabric.inject(WireFault::LinkUp);
    fabric.advance(100_000);
    assert_eq!(a.poll().map(|c| c.opcode), Some(REQ));
    let got = read(&b.dev(), &dst, 0, 2500);
    assert!(
        got.iter().all(|&x| x == 2),
        "every frame sent again, read again"
    );
    assert_eq!(a.dev().datapath_counters().retransmits, 3);
}

#[test]
fn lost_packets_past_the_retry_count() {
    let (fabric, mut a, mut b) = pair(Mode::Sync);
    let (mut qa, mut qb) = connected(&mut a, &mut b, RC, short_timers(7, 2));
    let dst = b.reg_mr(4096, false, false, false);
    b.post_recv(&mut qb, &[(64, dst.key, dst.va(0))]);
    fabric.inject(WireFault::LinkDown);
    a.write_wqe(&mut qa, SEND, SIGNALED, [0; 4], &[Seg::Inline(vec![1; 8])]);
    a.post_send(&mut qa, SEND, SIGNALED, [0; 4], &[Seg::Inline(vec![2; 8])]);
    fabric.advance(1_000_000);
    let c = a.drain();
    assert_eq!(err(&c[0]), (REQ_ERR, TRANSPORT_RETRY_EXC_ERR, 0), "{c:?}");
    assert_eq!(
        err(&c[1]),
        (REQ_ERR, WR_FLUSH_ERR, 1),
        "the outstanding one after it"
    );
    assert_eq!(
        a.dev().datapath_counters().retransmits,
        2 * 2,
        "two retries of two packets"
    );
    assert_eq!(fabric.counters().dropped, 6);
    assert_eq!(b.poll(), None);
}

#[test]
fn a_dropped_or_corrupted_packet_is_sent_again() {
    let (fabric, mut a, mut b) = pair(Mode::Sync);
    let (mut qa, mut qb) = connected(&mut a, &mut b, RC, short_timers(7, 7));
    let dst = b.reg_mr(4096, false, false, false);
    for (k, fault) in [
        WireFault::Drop { count: 1 },
        WireFault::Corrupt { count: 1 },
    ]
    .into_iter()
    .enumerate()
    {
        b.post_recv(&mut qb, &[(3000, dst.key, dst.va(0))]);
        fabric.inject(fault);
        a.post_send(
            &mut qa,
            SEND,
            SIGNALED,
            [0; 4],
            &[Seg::Inline(vec![k as u8 + 1; 600])],
        );
        assert_eq!(a.poll(), None, "case {k}: not yet");
        fabric.advance(100_000);
        assert_eq!(b.poll().map(|c| c.byte_cnt), Some(600), "case {k}");
        assert_eq!(a.poll().map(|c| c.opcode), Some(REQ), "case {k}");
        assert_eq!(read(&b.dev(), &dst, 0, 600), vec![k as u8 + 1; 600]);
    }
    assert_eq!(
        b.dev().datapath_counters().rx_icrc_errors,
        1,
        "the corrupted frame"
    );
    assert_eq!(fabric.counters().corrupted, 1);
    assert_eq!(a.dev().datapath_counters().retransmits, 2);
}

#[test]
fn moving_a_qp_to_err_flushes_its_posted_receives() {
    let mut n = Node::new(Mode::Sync, 1);
    let mut qp = n.create_qp(RC);
    n.connect(&qp, 1, qp.qpn, |_| {});
    let mr = n.reg_mr(4096, false, false, false);
    for _ in 0..3 {
        n.post_recv(&mut qp, &[(64, mr.key, mr.va(0))]);
    }
    n.fx.p.ok(&force_in(qp.qpn, true), 0x10);
    let c = n.drain();
    let got: Vec<_> = c.iter().map(err).collect();
    assert_eq!(
        got,
        [
            (RESP_ERR, WR_FLUSH_ERR, 0),
            (RESP_ERR, WR_FLUSH_ERR, 1),
            (RESP_ERR, WR_FLUSH_ERR, 2)
        ]
    );
}

#[test]
fn cq_arming_and_overflow_events() {
    let mut n = Node::new(Mode::Sync, 1);
    let mut qp = n.create_qp(RC);
    n.connect(&qp, 1, qp.qpn, |_| {});
    let mr = n.reg_mr(4096, false, true, false);
    let dev = n.dev();
    let uar = u64::from(n.fx.uar) * 4096;
    let write = |n: &mut Node, qp: &mut Qp| {
        n.post_send(
            qp,
            WRITE,
            SIGNALED,
            [0; 4],
            &[Seg::Raddr(mr.va(0), mr.key), Seg::Inline(vec![1; 4])],
        )
    };
    // Armed: the next CQE writes a completion EQE with the CQN and disarms.
    dev.bar_write64(uar + 0x20, Be64::new(u64::from(n.cqn)));
    assert_eq!(dev.cq_armed(n.cqn), Some(true));
    write(&mut n, &mut qp);
    let (etype, data) = n.poll_eq().expect("completion event");
    assert_eq!(etype, event::COMPLETION);
    assert_eq!(&data[0x18..0x1c], &n.cqn.to_be_bytes());
    assert_eq!(dev.cq_armed(n.cqn), Some(false));
    write(&mut n, &mut qp);
    assert_eq!(n.poll_eq(), None, "disarmed");
    // Arming with CQEs already waiting fires at once.
    dev.bar_write64(uar + 0x20, Be64::new(u64::from(n.cqn)));
    assert_eq!(n.poll_eq().map(|e| e.0), Some(event::COMPLETION));
    // 64 CQEs fill the CQ (nothing polled); the next overflows it.
    for _ in 0..62 {
        write(&mut n, &mut qp);
    }
    assert!(n.poll_eq().is_none());
    write(&mut n, &mut qp);
    let (etype, data) = n.poll_eq().expect("CQ error");
    assert_eq!(etype, event::CQ_ERROR);
    assert_eq!(&data[..4], &n.cqn.to_be_bytes());
    assert_eq!(data[0x0b], 1, "overrun");
    assert_eq!(dev.datapath_counters().cqes_dropped, 1);
    assert_eq!(dev.cqe_count(n.cqn), Some(64));
    assert_eq!(n.drain().len(), 64);
}

/// `atomic_mode` 0 names no responder atomic mode (defined: 1 IB-spec .. 8 up to 256 bytes): a
/// QP whose context has RAE but mode 0 refuses every atomic as an invalid request, and the
/// responder raises WQ_INVAL_REQ_ERROR. The same request against mode 1 succeeds.
/// Posts a signaled FETCH_ADD of 1 on the first word of `rb`, the original into `la` at `at`.
fn fetch_add_one(a: &mut Node, qa: &mut Qp, rb: &Mr, la: &Mr, at: u64) {
    a.post_send(
        qa,
        FETCH_ADD,
        SIGNALED,
        [0; 4],
        &[
            Seg::Raddr(rb.va(0), rb.key),
            Seg::Atomic(1, 0),
            Seg::Data(8, la.key, la.va(at)),
        ],
    );
}

#[test]
fn atomics_need_a_responder_atomic_mode() {
    let (_fabric, mut a, mut b) = pair(Mode::Sync);
    let la = a.reg_mr(4096, false, false, false);
    let rb = b.reg_mr(4096, true, true, true);
    for (mode, want) in [(0u64, (REQ_ERR, REMOTE_INVAL_REQ_ERR)), (1, (REQ, 0))] {
        let (mut qa, qb) = connected(&mut a, &mut b, RC, move |c| {
            drop(c.set(Qpc::ATOMIC_MODE, mode))
        });
        fetch_add_one(&mut a, &mut qa, &rb, &la, 0);
        let c = a.poll().expect("a completion");
        let got = (c.opcode, if c.opcode == REQ { 0 } else { c.syndrome });
        assert_eq!(got, want, "atomic_mode {mode}");
        if mode == 0 {
            assert_eq!(b.dev().qp_state(qb.qpn), Some(qp_state::ERR as u8));
            let (etype, _) = b.poll_eq().expect("async event");
            assert_eq!(etype, event::WQ_INVAL_REQ_ERROR);
        }
    }
}

/// Duplicated and reordered frames, both ways (requests and ACKs): every message arrives once,
/// whole and in order, and every request completes once — a duplicate request is answered again
/// and not executed twice, a stale ACK is ignored, a PSN gap is NAK'd and sent again.
#[test]
fn duplicated_and_reordered_frames_leave_every_message_placed_once() {
    let (fabric, mut a, mut b) = pair(Mode::Sync);
    let (mut qa, mut qb) = connected(&mut a, &mut b, RC, short_timers(7, 7));
    let src = a.reg_mr(8 * 3000, false, false, false);
    let dst = b.reg_mr(8 * 3000, false, false, false);
    fabric.inject(WireFault::DuplicateRandom {
        per_million: 150_000,
        seed: 3,
    });
    fabric.inject(WireFault::ReorderRandom {
        per_million: 150_000,
        seed: 5,
    });
    for round in 0..8u8 {
        let data = fill(&a.dev(), &src, round);
        for i in 0..8u64 {
            b.post_recv(&mut qb, &[(3000, dst.key, dst.va(i * 3000))]);
        }
        for i in 0..8u64 {
            a.post_send(
                &mut qa,
                SEND,
                SIGNALED,
                [0; 4],
                &[Seg::Data(3000, src.key, src.va(i * 3000))],
            );
        }
        fabric.advance(2_000_000);
        let got: Vec<_> = std::iter::from_fn(|| b.poll()).collect();
        assert_eq!(
            got.len(),
            8,
            "round {round}: one receive completion per message"
        );
        assert!(
            got.iter()
                .all(|c| c.byte_cnt == 3000 && c.opcode == RESP_SEND),
            "round {round}: {got:?}"
        );
        let sent: Vec<_> = std::iter::from_fn(|| a.poll()).collect();
        assert_eq!(
            sent.len(),
            8,
            "round {round}: one send completion per message"
        );
        assert!(
            sent.iter().all(|c| c.opcode == REQ),
            "round {round}: {sent:?}"
        );
        assert_eq!(read(&b.dev(), &dst, 0, 8 * 3000), data, "round {round}");
    }
    let c = fabric.counters();
    assert!(c.duplicated > 10 && c.reordered > 10, "{c:?}");
    assert!(a.dev().datapath_counters().retransmits > 0);
}

/// Atomics outstanding eight at a time, with frames lost, duplicated and reordered both ways:
/// each is executed exactly once — a retransmitted atomic, whichever of the outstanding ones
/// it is, is answered from the responder resources with its original value — so the counter
/// ends at the number of atomics and every original value comes back once.
#[test]
fn retransmitted_atomics_are_answered_again_not_executed_again() {
    let (fabric, mut a, mut b) = pair(Mode::Sync);
    let (mut qa, _qb) = connected(&mut a, &mut b, RC, short_timers(7, 7));
    let la = a.reg_mr(8 * 64, false, false, false);
    let rb = b.reg_mr(4096, false, false, true);
    lossy(&fabric, 7);
    for round in 0..8u64 {
        for i in 0..8u64 {
            fetch_add_one(&mut a, &mut qa, &rb, &la, (round * 8 + i) * 8);
        }
        fabric.advance(10_000_000);
        let done: Vec<_> = std::iter::from_fn(|| a.poll()).collect();
        assert_eq!(done.len(), 8, "round {round}: {done:?}");
        assert!(
            done.iter().all(|c| c.opcode == REQ),
            "round {round}: {done:?}"
        );
    }
    // Originals come back big-endian (requester endianness mode 0); the responder's word is in
    // its host's (little-endian) order.
    let mut orig: Vec<u64> = (0..64)
        .map(|k| u64::from_be_bytes(read(&a.dev(), &la, k * 8, 8).try_into().unwrap()))
        .collect();
    orig.sort_unstable();
    assert_eq!(orig, (0..64).collect::<Vec<u64>>());
    let end = u64::from_le_bytes(read(&b.dev(), &rb, 0, 8).try_into().unwrap());
    assert_eq!(end, 64, "each atomic executed once");
    let c = fabric.counters();
    assert!(
        c.dropped > 0 && c.duplicated > 0 && c.reordered > 0,
        "{c:?}"
    );
}
