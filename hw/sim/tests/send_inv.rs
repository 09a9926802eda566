//! A SEND with no bytes and SEND with invalidate at the byte level, with WQEs written by the test
//! itself (`mlx5-datapath-sizing.md` §1.2, §1.3, §1.5, §4.1, §4.2; the invalidation rule of
//! `src/fw/mkey.rs`): a SEND WQE of its control segment alone (DS 1) is a message of no bytes;
//! SEND_INVAL (0x01) carries the rkey of its control segment's `imm` in an IETH, and the
//! responder invalidates that mkey when it was created with `en_rinval` — RESP_SEND_INV with the
//! rkey in `imm_inval_pkey`, the mkey `free` from then on, every access through it refused —
//! and otherwise completes the receive with REMOTE_INVAL_REQ_ERR and NAKs the request.

mod common;

use common::datapath::*;
use mlx5_ifc::consts::qp_st::{RC, UC};
use mlx5_ifc::consts::qp_state;
use mlx5_ifc::prm::mr::Mkc;
use mlx5_sim::{Mode, ObjectKind, SimDevice};

const SIGNALED: u8 = 0x08;
const SEND: u8 = 0x0a;
const SEND_INVAL: u8 = 0x01;
const WRITE: u8 = 0x08;
const REQ: u8 = 0x0;
const RESP_SEND: u8 = 0x2;
const RESP_SEND_INV: u8 = 0x4;
const REQ_ERR: u8 = 0xd;
const RESP_ERR: u8 = 0xe;
const LOCAL_QP_OP_ERR: u8 = 0x02;
const REMOTE_INVAL_REQ_ERR: u8 = 0x12;
const REMOTE_ACCESS_ERR: u8 = 0x13;

/// Whether mkey `key`'s context has `free` set (mkc bit 1).
fn free(dev: &SimDevice, key: u32) -> bool {
    dev.object_context(ObjectKind::Mkey, key >> 8).unwrap()[0] & 0x40 != 0
}

#[test]
fn a_send_of_only_a_control_segment_is_a_message_of_no_bytes() {
    let (fabric, mut a, mut b) = pair(Mode::Sync);
    let (mut qa, mut qb) = connected(&mut a, &mut b, RC, |_| {});
    let dst = b.reg_mr(4096, false, false, false);
    let db = b.dev();
    db.dma_write(dst.buf.iova, &[0xee; 64]).unwrap();
    b.post_recv(&mut qb, &[(64, dst.key, dst.va(0))]);
    let idx = a.post_send(&mut qa, SEND, SIGNALED, [0; 4], &[]);
    let r = b.poll().expect("responder CQE");
    assert_eq!(
        (r.opcode, r.qpn, r.byte_cnt, r.wqe_counter),
        (RESP_SEND, qb.qpn, 0, 0)
    );
    let s = a.poll().expect("requester CQE");
    assert_eq!(
        (s.opcode, s.wqe_opcode, s.wqe_counter, s.byte_cnt),
        (REQ, SEND, idx, 0)
    );
    assert_eq!(read(&db, &dst, 0, 64), vec![0xee; 64], "nothing written");
    assert_eq!(fabric.counters().frames, 2, "one SEND ONLY packet, one ACK");
    // The next WQE follows in the next WQEBB.
    b.post_recv(&mut qb, &[(64, dst.key, dst.va(0))]);
    let idx2 = a.post_send(&mut qa, SEND, SIGNALED, [0; 4], &[Seg::Inline(vec![5; 3])]);
    assert_eq!(idx2, idx.wrapping_add(1));
    assert_eq!(
        b.poll().map(|c| (c.opcode, c.byte_cnt)),
        Some((RESP_SEND, 3))
    );
    assert_eq!(a.poll().map(|c| c.wqe_counter), Some(idx2));
    assert!(a.dev().dma_faults().is_empty() && db.dma_faults().is_empty());
}

#[test]
fn send_with_invalidate_frees_a_key_created_with_en_rinval() {
    let (_fabric, mut a, mut b) = pair(Mode::Sync);
    let (mut qa, mut qb) = connected(&mut a, &mut b, RC, |_| {});
    let src = a.reg_mr(4096, false, false, false);
    let dst = b.reg_mr(4096, false, false, false);
    let target = b.reg_mr_with(4096, false, true, false, |c| {
        c.set(Mkc::EN_RINVAL, 1).unwrap();
    });
    let (da, db) = (a.dev(), b.dev());
    let data = fill(&da, &src, 4);
    assert!(!free(&db, target.key));

    b.post_recv(&mut qb, &[(64, dst.key, dst.va(0))]);
    let idx = a.post_send(
        &mut qa,
        SEND_INVAL,
        SIGNALED,
        target.key.to_be_bytes(),
        &[Seg::Data(20, src.key, src.va(0))],
    );
    let r = b.poll().expect("responder CQE");
    assert_eq!(
        (r.opcode, r.byte_cnt, r.imm),
        (RESP_SEND_INV, 20, target.key.to_be_bytes()),
        "RESP_SEND_INV, the rkey in imm_inval_pkey"
    );
    assert_eq!(read(&db, &dst, 0, 20), &data[..20]);
    let s = a.poll().expect("requester CQE");
    assert_eq!(
        (s.opcode, s.wqe_opcode, s.wqe_counter),
        (REQ, SEND_INVAL, idx)
    );
    assert!(free(&db, target.key), "the mkey is free");

    // Every access through it is refused now: an RDMA WRITE is NAK'd (remote access error).
    a.post_send(
        &mut qa,
        WRITE,
        SIGNALED,
        [0; 4],
        &[
            Seg::Raddr(target.va(0), target.key),
            Seg::Data(8, src.key, src.va(0)),
        ],
    );
    let s = a.poll().expect("requester error CQE");
    assert_eq!(
        (s.opcode, s.syndrome, s.wqe_opcode),
        (REQ_ERR, REMOTE_ACCESS_ERR, WRITE)
    );
    assert_eq!(read(&db, &target, 0, 8), vec![0; 8]);
    assert!(da.dma_faults().is_empty() && db.dma_faults().is_empty());
}

#[test]
fn send_with_invalidate_of_a_key_without_en_rinval_is_an_invalid_request() {
    let (_fabric, mut a, mut b) = pair(Mode::Sync);
    let dst = b.reg_mr(4096, false, false, false);
    // Remote write allowed, remote invalidation not (en_rinval 0, as a plain registration).
    let plain = b.reg_mr(4096, true, true, false);
    let freed = b.reg_mr_with(4096, false, true, false, |c| {
        c.set(Mkc::EN_RINVAL, 1).unwrap();
        c.set(Mkc::FREE, 1).unwrap();
    });
    for (key, what) in [
        (plain.key, "no en_rinval"),
        (plain.key ^ 0xff, "wrong variant byte"),
        (0x100, "the reserved lkey"),
        (freed.key, "a free mkey"),
    ] {
        let (mut qa, mut qb) = connected(&mut a, &mut b, RC, |_| {});
        b.post_recv(&mut qb, &[(64, dst.key, dst.va(0))]);
        a.post_send(
            &mut qa,
            SEND_INVAL,
            SIGNALED,
            key.to_be_bytes(),
            &[Seg::Inline(vec![1; 8])],
        );
        let r = b.poll().expect("responder error CQE");
        assert_eq!(
            (r.opcode, r.syndrome, r.qpn, r.wqe_counter),
            (RESP_ERR, REMOTE_INVAL_REQ_ERR, qb.qpn, 0),
            "{what}"
        );
        assert_eq!(
            b.dev().qp_state(qb.qpn),
            Some(qp_state::ERR as u8),
            "{what}"
        );
        let s = a.poll().expect("requester error CQE");
        assert_eq!(
            (s.opcode, s.syndrome, s.wqe_opcode),
            (REQ_ERR, REMOTE_INVAL_REQ_ERR, SEND_INVAL),
            "{what}: NAK invalid request"
        );
    }
    assert!(!free(&b.dev(), plain.key), "the refused key is untouched");
    // Still usable: an RDMA WRITE through it.
    let (mut qa, _qb) = connected(&mut a, &mut b, RC, |_| {});
    a.post_send(
        &mut qa,
        WRITE,
        SIGNALED,
        [0; 4],
        &[
            Seg::Raddr(plain.va(0), plain.key),
            Seg::Inline(b"ok".to_vec()),
        ],
    );
    assert_eq!(a.poll().map(|c| c.opcode), Some(REQ));
    assert_eq!(read(&b.dev(), &plain, 0, 2), b"ok");
}

#[test]
fn uc_has_no_send_with_invalidate() {
    let (_fabric, mut a, mut b) = pair(Mode::Sync);
    let (mut qa, _qb) = connected(&mut a, &mut b, UC, |_| {});
    a.post_send(
        &mut qa,
        SEND_INVAL,
        SIGNALED,
        [0, 0, 1, 0],
        &[Seg::Inline(vec![1; 8])],
    );
    let s = a.poll().expect("requester error CQE");
    assert_eq!((s.opcode, s.syndrome), (REQ_ERR, LOCAL_QP_OP_ERR));
}
