//! SEND with invalidate end to end (issue #10, item 7): the driver posts it (control-segment
//! opcode SEND_INVAL 0x01, the rkey in the control segment's `imm`), only on a QP created with
//! the op; the simulated peer invalidates the named key if it allows remote invalidation (mkc
//! `en_rinval`), completes the receive with WITH_INV and the rkey, and refuses every access
//! through the key afterwards; a key that does not allow it is refused as a remote invalid
//! request on both sides.

mod common;

use common::*;
use mlx5::mr::MrAccess;
use mlx5::qp::{ConnectOpts, Payload, QpInitAttr, QpType, RecvWr, SendOp, SendOps, SendWr, Sge};
use mlx5::sim::{Fabric, Mode, ObjectKind, SimDevice};
use mlx5::{Error, WcFlags, WcOpcode, WcStatus};

/// What a peer may do to the region of the tests: write it and invalidate its key.
const INVALIDATABLE: MrAccess = MrAccess {
    remote_write: true,
    remote_invalidate: true,
    ..MrAccess::LOCAL
};

/// The `free` bit of mkey `key`'s context as the simulated firmware holds it (mkc bit 1).
fn mkey_free(sim: &SimDevice, key: u32) -> bool {
    let ctx = sim
        .object_context(ObjectKind::Mkey, key >> 8)
        .expect("live mkey");
    ctx[0] & 0x40 != 0
}

#[test]
fn send_with_invalidate_invalidates_the_peer_key() {
    let fabric = Fabric::new();
    let (sa, a) = nic(&fabric, Mode::Sync);
    let (sb, b) = nic(&fabric, Mode::Sync);
    let (cqa, cqb) = (a.create_cq(16).unwrap(), b.create_cq(16).unwrap());
    let mra = a.alloc_mr(a.pd(), 4096, MrAccess::LOCAL).unwrap();
    let mrb = b.alloc_mr(b.pd(), 8192, INVALIDATABLE).unwrap();
    let rkey = mrb.rkey();
    let mut qa = qp(&a, &cqa, QpType::Rc, cap(8, 8, 1));
    let mut qb = qp(&b, &cqb, QpType::Rc, cap(8, 8, 1));
    connect(&mut qa, &mut qb, &ConnectOpts::default());
    let sge = [Sge {
        addr: mra.addr(),
        length: 16,
        lkey: mra.lkey(),
    }];
    let rsge = [Sge {
        addr: mrb.addr(),
        length: 64,
        lkey: mrb.lkey(),
    }];
    let write = |id, rkey| SendWr {
        op: SendOp::Write {
            remote_addr: mrb.addr() + 4096,
            rkey,
        },
        ..SendWr::send(id, &sge)
    };

    // The key works before: an RDMA WRITE through it.
    mra.write(0, b"before the SEND!").unwrap();
    qa.post_send(&[write(1, rkey)]).unwrap();
    assert_eq!(wait(&cqa, &a, 1)[0].status, WcStatus::Success);
    let mut got = [0u8; 16];
    mrb.read(4096, &mut got).unwrap();
    assert_eq!(&got, b"before the SEND!");
    assert!(!mkey_free(&sb, rkey));

    // SEND with invalidate, inline (BlueFlame: the doorbell words are the WQE, so the control
    // segment's opcode and `imm` can be read from them).
    qb.post_recv(&[RecvWr {
        wr_id: 50,
        sg_list: &rsge,
    }])
    .unwrap();
    let before = sa.uar_write_count();
    qa.post_send(&[SendWr {
        op: SendOp::SendInv(rkey),
        payload: Payload::Inline(b"done with it"),
        ..SendWr::send(2, &[])
    }])
    .unwrap();
    let words: Vec<u64> = sa
        .uar_writes_since(before)
        .iter()
        .map(|w| w.value)
        .collect();
    assert_eq!(words.len(), 8, "one WQEBB through BlueFlame");
    assert_eq!((words[0] >> 32) & 0xff, 0x01, "opcode SEND_INVAL");
    assert_eq!(words[0] & 0x3f, 2, "DS: control + inline");
    assert_eq!(
        words[1] as u32, rkey,
        "the rkey in the control segment's imm"
    );
    let r = wait(&cqb, &b, 1);
    assert_eq!(
        (r[0].status, r[0].opcode, r[0].wr_id, r[0].byte_len),
        (WcStatus::Success, WcOpcode::Recv, 50, 12)
    );
    assert_eq!(
        (r[0].wc_flags, r[0].invalidated_rkey, r[0].imm_data),
        (WcFlags::WITH_INV, Some(rkey), None),
        "RECV with WITH_INV and the invalidated rkey"
    );
    mrb.read(0, &mut got[..12]).unwrap();
    assert_eq!(&got[..12], b"done with it");
    let s = wait(&cqa, &a, 1);
    assert_eq!(
        (s[0].status, s[0].opcode, s[0].wc_flags, s[0].wr_id),
        (WcStatus::Success, WcOpcode::Send, WcFlags::empty(), 2),
        "the send completion of SEND_INV is a plain SEND (rdma-core handle_good_req)"
    );
    assert!(mkey_free(&sb, rkey), "the peer's mkey is free now");

    // The key is dead: an RDMA WRITE through it is refused with a remote access error.
    mra.write(0, b"after the SEND!!").unwrap();
    qa.post_send(&[write(3, rkey)]).unwrap();
    let s = wait(&cqa, &a, 1);
    assert_eq!(
        (s[0].status, s[0].wr_id),
        (WcStatus::RemAccessErr, 3),
        "{s:?}"
    );
    mrb.read(4096, &mut got).unwrap();
    assert_eq!(&got, b"before the SEND!", "nothing written");

    // The region stays registered until dereg, which still succeeds.
    assert!(mrb.dereg().unwrap().is_none());
    assert!(sa.dma_faults().is_empty() && sb.dma_faults().is_empty());
}

#[test]
fn a_key_that_does_not_allow_remote_invalidation_is_refused() {
    let fabric = Fabric::new();
    let (_sa, a) = nic(&fabric, Mode::Sync);
    let (sb, b) = nic(&fabric, Mode::Sync);
    let (cqa, cqb) = (a.create_cq(16).unwrap(), b.create_cq(16).unwrap());
    let mra = a.alloc_mr(a.pd(), 4096, MrAccess::LOCAL).unwrap();
    // A plain registered region (no en_rinval), as ibv_reg_mr makes on mlx5.
    let plain = b.alloc_mr(b.pd(), 4096, MrAccess::ALL).unwrap();
    let dead = b.alloc_mr(b.pd(), 4096, INVALIDATABLE).unwrap();
    let sge = [Sge {
        addr: mra.addr(),
        length: 8,
        lkey: mra.lkey(),
    }];
    let rsge = [Sge {
        addr: plain.addr(),
        length: 64,
        lkey: plain.lkey(),
    }];
    let run = |rkey: u32, what: &str| {
        let mut qa = qp(&a, &cqa, QpType::Rc, cap(8, 8, 1));
        let mut qb = qp(&b, &cqb, QpType::Rc, cap(8, 8, 1));
        connect(&mut qa, &mut qb, &ConnectOpts::default());
        qb.post_recv(&[RecvWr {
            wr_id: 7,
            sg_list: &rsge,
        }])
        .unwrap();
        qa.post_send(&[SendWr {
            op: SendOp::SendInv(rkey),
            ..SendWr::send(8, &sge)
        }])
        .unwrap();
        // The receive completes in error (remote invalid request) and the requester's SEND is
        // NAK'd as an invalid request.
        let r = wait(&cqb, &b, 1);
        assert_eq!(
            (
                r[0].status,
                r[0].wr_id,
                r[0].wc_flags,
                r[0].invalidated_rkey
            ),
            (WcStatus::RemInvReqErr, 7, WcFlags::empty(), None),
            "{what}: receive"
        );
        let s = wait(&cqa, &a, 1);
        assert_eq!(
            (s[0].status, s[0].wr_id, s[0].wc_flags),
            (WcStatus::RemInvReqErr, 8, WcFlags::empty()),
            "{what}: send"
        );
    };
    run(plain.rkey(), "a key without en_rinval");
    assert!(!mkey_free(&sb, plain.rkey()), "the key is still valid");
    run(plain.rkey() ^ 0x5500_0000, "no such key");
    // A key invalidated once cannot be invalidated again.
    {
        let mut qa = qp(&a, &cqa, QpType::Rc, cap(8, 8, 1));
        let mut qb = qp(&b, &cqb, QpType::Rc, cap(8, 8, 1));
        connect(&mut qa, &mut qb, &ConnectOpts::default());
        qb.post_recv(&[RecvWr {
            wr_id: 9,
            sg_list: &rsge,
        }])
        .unwrap();
        qa.post_send(&[SendWr {
            op: SendOp::SendInv(dead.rkey()),
            ..SendWr::send(10, &sge)
        }])
        .unwrap();
        assert_eq!(wait(&cqb, &b, 1)[0].invalidated_rkey, Some(dead.rkey()));
        assert_eq!(wait(&cqa, &a, 1)[0].status, WcStatus::Success);
    }
    run(dead.rkey(), "a key already invalidated");

    // The key that was refused still grants what it granted: an RDMA WRITE through it.
    let mut qa = qp(&a, &cqa, QpType::Rc, cap(8, 8, 1));
    let mut qb = qp(&b, &cqb, QpType::Rc, cap(8, 8, 1));
    connect(&mut qa, &mut qb, &ConnectOpts::default());
    mra.write(0, b"still ok").unwrap();
    qa.post_send(&[SendWr {
        op: SendOp::Write {
            remote_addr: plain.addr() + 1024,
            rkey: plain.rkey(),
        },
        ..SendWr::send(11, &sge)
    }])
    .unwrap();
    assert_eq!(wait(&cqa, &a, 1)[0].status, WcStatus::Success);
    let mut got = [0u8; 8];
    plain.read(1024, &mut got).unwrap();
    assert_eq!(&got, b"still ok");
}

#[test]
fn send_with_invalidate_needs_the_op_at_create_time() {
    let fabric = Fabric::new();
    let (_s, dev) = nic(&fabric, Mode::Sync);
    let cq = dev.create_cq(16).unwrap();
    let mut attr = QpInitAttr::new(QpType::Rc, &cq, &cq, cap(8, 8, 1));
    attr.send_ops = Some(SendOps::SEND.union(SendOps::SEND_IMM));
    let mut q = dev.create_qp(dev.pd(), &attr).unwrap();
    let me = q.endpoint();
    q.connect(&me, &ConnectOpts::default()).unwrap();
    let inv = SendWr {
        op: SendOp::SendInv(0x1234),
        ..SendWr::send(1, &[])
    };
    match q.post_send(&[inv]) {
        Err(Error::InvalidArgument { field, .. }) => assert_eq!(field, "opcode"),
        other => panic!("SEND_INV on a QP created without it: {other:?}"),
    }
    // With the op declared it is taken (to itself, naming a key of its own device).
    let mr = dev.alloc_mr(dev.pd(), 4096, INVALIDATABLE).unwrap();
    attr.send_ops = Some(SendOps::SEND.union(SendOps::SEND_INV));
    let mut q2 = dev.create_qp(dev.pd(), &attr).unwrap();
    assert!(q2.send_ops().contains(SendOps::SEND_INV));
    let me = q2.endpoint();
    q2.connect(&me, &ConnectOpts::default()).unwrap();
    let rsge = [Sge {
        addr: mr.addr(),
        length: 64,
        lkey: mr.lkey(),
    }];
    q2.post_recv(&[RecvWr {
        wr_id: 2,
        sg_list: &rsge,
    }])
    .unwrap();
    q2.post_send(&[SendWr {
        op: SendOp::SendInv(mr.rkey()),
        ..SendWr::send(3, &[])
    }])
    .unwrap();
    let mut w = wait(&cq, &dev, 2);
    w.sort_by_key(|w| w.wr_id);
    assert_eq!(
        (w[0].opcode, w[0].wc_flags, w[0].invalidated_rkey),
        (WcOpcode::Recv, WcFlags::WITH_INV, Some(mr.rkey()))
    );
    assert_eq!(
        (w[1].opcode, w[1].status),
        (WcOpcode::Send, WcStatus::Success)
    );
    // The default RC set has it, as rdma-core's does.
    let d = looped(&dev, &cq, cap(8, 8, 1));
    assert!(d.send_ops().contains(SendOps::SEND_INV));
    // UD cannot declare it at all.
    let mut ud = QpInitAttr::new(QpType::Ud, &cq, &cq, cap(8, 8, 1));
    ud.send_ops = Some(SendOps::SEND.union(SendOps::SEND_INV));
    assert!(dev.create_qp(dev.pd(), &ud).is_err());
}
