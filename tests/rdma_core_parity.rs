//! Where the driver must build and complete work requests exactly as rdma-core's mlx5 provider
//! does (issue #10, item 7): a zero-length inline SEND is its control segment alone (DS 1) with
//! a plain doorbell, and the send completion of a SEND or RDMA WRITE with immediate carries
//! WITH_IMM. (SEND with invalidate, the third difference, is `tests/send_inv.rs`.)

mod common;

use common::*;
use mlx5::mr::MrAccess;
use mlx5::qp::{ConnectOpts, Payload, QpType, RecvWr, SendOp, SendWr, Sge};
use mlx5::sim::{Fabric, Mode, SimDevice};
use mlx5::{WcFlags, WcOpcode, WcStatus};

/// The send doorbells and BlueFlame words rung since `since` UAR writes: their 64-bit values.
fn uar_words_since(sim: &SimDevice, since: u64) -> Vec<u64> {
    sim.uar_writes_since(since)
        .iter()
        .filter(|w| w.width == 64)
        .map(|w| w.value)
        .collect()
}

#[test]
fn a_zero_length_inline_send_is_one_ds_rung_with_a_plain_doorbell() {
    let fabric = Fabric::new();
    let (sa, a) = nic(&fabric, Mode::Sync);
    let (_sb, b) = nic(&fabric, Mode::Sync);
    let (cqa, cqb) = (a.create_cq(16).unwrap(), b.create_cq(16).unwrap());
    let mrb = b.alloc_mr(b.pd(), 4096, MrAccess::LOCAL).unwrap();
    let mut qa = qp(&a, &cqa, QpType::Rc, cap(8, 8, 1));
    let mut qb = qp(&b, &cqb, QpType::Rc, cap(8, 8, 1));
    connect(&mut qa, &mut qb, &ConnectOpts::default());
    mrb.write(0, &[0xee; 64]).unwrap();
    let rsge = [Sge {
        addr: mrb.addr(),
        length: 64,
        lkey: mrb.lkey(),
    }];
    let recv = |id| RecvWr {
        wr_id: id,
        sg_list: &rsge,
    };

    // No bytes inline: the WQE is the control segment alone, rung with the 8-byte doorbell,
    // which holds the control segment's first 8 bytes (opcode, WQE index, QPN, DS).
    qb.post_recv(&[recv(1)]).unwrap();
    let before = sa.uar_write_count();
    qa.post_send(&[SendWr {
        payload: Payload::Inline(&[]),
        ..SendWr::send(10, &[])
    }])
    .unwrap();
    let words = uar_words_since(&sa, before);
    assert_eq!(words.len(), 1, "one plain doorbell, no BlueFlame copy");
    let (opmod_idx_opcode, qpn_ds) = ((words[0] >> 32) as u32, words[0] as u32);
    assert_eq!(opmod_idx_opcode & 0xff, 0x0a, "SEND");
    assert_eq!(qpn_ds >> 8, qa.qpn());
    assert_eq!(qpn_ds & 0x3f, 1, "DS 1: no inline segment");
    let r = wait(&cqb, &b, 1);
    assert_eq!(
        (r[0].status, r[0].opcode, r[0].byte_len, r[0].wr_id),
        (WcStatus::Success, WcOpcode::Recv, 0, 1),
        "received as a message of no bytes"
    );
    let mut got = [0u8; 64];
    mrb.read(0, &mut got).unwrap();
    assert_eq!(got, [0xee; 64], "nothing written to the receive buffer");
    let s = wait(&cqa, &a, 1);
    assert_eq!(
        (s[0].status, s[0].opcode, s[0].byte_len, s[0].wr_id),
        (WcStatus::Success, WcOpcode::Send, 0, 10)
    );

    // One byte inline: control and inline segments (DS 2), through BlueFlame (one WQEBB as
    // eight 64-bit words, the first the same control segment bytes).
    qb.post_recv(&[recv(2)]).unwrap();
    let before = sa.uar_write_count();
    qa.post_send(&[SendWr {
        payload: Payload::Inline(&[0x42]),
        ..SendWr::send(11, &[])
    }])
    .unwrap();
    let words = uar_words_since(&sa, before);
    assert_eq!(words.len(), 8, "BlueFlame: the whole WQEBB");
    assert_eq!(words[0] as u32 & 0x3f, 2, "DS 2");
    let r = wait(&cqb, &b, 1);
    assert_eq!((r[0].status, r[0].byte_len), (WcStatus::Success, 1));
    mrb.read(0, &mut got[..2]).unwrap();
    assert_eq!(got[..2], [0x42, 0xee]);
    wait(&cqa, &a, 1);

    // An empty gather list is DS 1 as well (zero-length SGEs are skipped).
    qb.post_recv(&[recv(3)]).unwrap();
    let before = sa.uar_write_count();
    let empty = [Sge {
        addr: 0,
        length: 0,
        lkey: 0,
    }];
    qa.post_send(&[SendWr::send(12, &empty)]).unwrap();
    let words = uar_words_since(&sa, before);
    assert_eq!(words.len(), 1);
    assert_eq!(words[0] as u32 & 0x3f, 1);
    let r = wait(&cqb, &b, 1);
    assert_eq!((r[0].status, r[0].byte_len), (WcStatus::Success, 0));
    wait(&cqa, &a, 1);
    assert!(sa.dma_faults().is_empty());
}

#[test]
fn send_completions_of_immediate_carry_with_imm() {
    let fabric = Fabric::new();
    let (_sa, a) = nic(&fabric, Mode::Sync);
    let (_sb, b) = nic(&fabric, Mode::Sync);
    let (cqa, cqb) = (a.create_cq(64).unwrap(), b.create_cq(64).unwrap());
    let mra = a.alloc_mr(a.pd(), 4096, MrAccess::ALL).unwrap();
    let mrb = b.alloc_mr(b.pd(), 8192, MrAccess::ALL).unwrap();
    let mut qa = qp(&a, &cqa, QpType::Rc, cap(16, 16, 1));
    let mut qb = qp(&b, &cqb, QpType::Rc, cap(16, 16, 1));
    connect(&mut qa, &mut qb, &ConnectOpts::default());
    let sge = [Sge {
        addr: mra.addr(),
        length: 32,
        lkey: mra.lkey(),
    }];
    let rsge = [Sge {
        addr: mrb.addr(),
        length: 64,
        lkey: mrb.lkey(),
    }];
    let remote_addr = mrb.addr() + 4096;
    let ops = [
        (SendOp::Send, WcOpcode::Send, WcFlags::empty()),
        (
            SendOp::SendImm(0x1234_5678),
            WcOpcode::Send,
            WcFlags::WITH_IMM,
        ),
        (
            SendOp::Write {
                remote_addr,
                rkey: mrb.rkey(),
            },
            WcOpcode::RdmaWrite,
            WcFlags::empty(),
        ),
        (
            SendOp::WriteImm {
                remote_addr,
                rkey: mrb.rkey(),
                imm: 0x9abc_def0,
            },
            WcOpcode::RdmaWrite,
            WcFlags::WITH_IMM,
        ),
    ];
    let wrs: Vec<SendWr<'_>> = ops
        .iter()
        .enumerate()
        .map(|(i, &(op, _, _))| SendWr {
            op,
            ..SendWr::send(i as u64, &sge)
        })
        .collect();
    let recvs: Vec<RecvWr<'_>> = (0..3)
        .map(|i| RecvWr {
            wr_id: 100 + i,
            sg_list: &rsge,
        })
        .collect();
    qb.post_recv(&recvs).unwrap();
    // One at a time, then all four in one list (the batched path writes the same table).
    for wr in &wrs {
        qa.post_send(std::slice::from_ref(wr)).unwrap();
    }
    let mut got = wait(&cqa, &a, 4);
    qb.post_recv(&recvs).unwrap();
    qa.post_send(&wrs).unwrap();
    got.extend(wait(&cqa, &a, 4));
    for (k, w) in got.iter().enumerate() {
        let (_, opcode, flags) = ops[k % 4];
        assert_eq!(
            (w.wr_id, w.status, w.opcode, w.wc_flags, w.byte_len),
            ((k % 4) as u64, WcStatus::Success, opcode, flags, 32),
            "send completion {k}"
        );
        assert_eq!(
            (w.imm_data, w.invalidated_rkey),
            (None, None),
            "a requester CQE carries no immediate"
        );
    }
    // The receives: WITH_IMM and the value, as before.
    let r = wait(&cqb, &b, 6);
    let want = [
        (WcOpcode::Recv, WcFlags::empty(), None),
        (WcOpcode::Recv, WcFlags::WITH_IMM, Some(0x1234_5678)),
        (
            WcOpcode::RecvRdmaWithImm,
            WcFlags::WITH_IMM,
            Some(0x9abc_def0),
        ),
    ];
    for (k, w) in r.iter().enumerate() {
        assert_eq!(w.status, WcStatus::Success);
        assert_eq!(
            (w.opcode, w.wc_flags, w.imm_data, w.invalidated_rkey),
            (want[k % 3].0, want[k % 3].1, want[k % 3].2, None),
            "receive {k}"
        );
    }
}
