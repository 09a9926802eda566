//! Memory windows at the byte level, as Linux and rdma-core make and use them: mlx5_ib's
//! `mlx5_ib_alloc_mw` creates a free, `umr_en`, KLM-mode key (`en_rinval` for type 2, QPN
//! 0xffffff, room for 4 KLM octwords); rdma-core's mlx5 provider binds it with a UMR WQE on an
//! RC QP (`set_bind_wr`: INLINE | TRANSLATION_OFFSET, CHECK_FREE for type 2; the mask FREE, MKEY,
//! LEN, START_ADDR and the access bits, QPN for type 2; the new key byte and — type 2 — the QP in
//! the mkey segment's `qpn_mkey`; one KLM naming the MR), invalidates a type 2 window locally
//! with the same WQE (length 0, CHECK_QPN, `free`) and a type 1 window by binding it to length 0.

mod common;

use common::cmd;
use common::datapath::{connected, fill, pair, read, Mr, Node, Qp, Seg};
use mlx5_ifc::consts::qp_st::RC;
use mlx5_ifc::prm::mr::{CreateMkeyIn, CreateMkeyOut, Mkc};
use mlx5_ifc::{Layout, Opcode, View};
use mlx5_sim::{Fabric, Mode};

const UMR: u8 = 0x25;
const WRITE: u8 = 0x08;
const SEND_INV: u8 = 0x01;
const SIGNALED: u8 = 0x08;
const REQ: u8 = 0x0;
const REQ_ERR: u8 = 0xd;
const LOCAL_PROT_ERR: u8 = 0x04;
const REMOTE_ACCESS_ERR: u8 = 0x13;
const RESP_SEND_INV: u8 = 0x4;

/// `flags` of the UMR control segment (mlx5dv.h `MLX5_WQE_UMR_CTRL_FLAG_*`).
const INLINE: u8 = 1 << 7;
const CHECK_FREE: u8 = 1 << 5;
const TRANSLATION_OFFSET: u8 = 1 << 4;
const CHECK_QPN: u8 = 1 << 3;
/// `mkey_mask` bits (mlx5dv.h `MLX5_WQE_UMR_CTRL_MKEY_MASK_*`).
const LEN: u64 = 1 << 0;
const START_ADDR: u64 = 1 << 6;
const MKEY: u64 = 1 << 13;
const QPN: u64 = 1 << 14;
const ACCESS: u64 = (1 << 18) | (1 << 19) | (1 << 20) | (1 << 21);
const FREE: u64 = 1 << 29;

/// A window as mlx5_ib allocates it: type 2 with `en_rinval`.
fn alloc_mw(n: &mut Node, type2: bool) -> u32 {
    let pd = n.fx.pd;
    let input = cmd::<CreateMkeyIn>(Opcode::CreateMkey, 0, |v| {
        let mut c = v.nested_mut(CreateMkeyIn::MEMORY_KEY_MKEY_ENTRY);
        c.set(Mkc::FREE, 1).unwrap();
        c.set(Mkc::UMR_EN, 1).unwrap();
        c.set(Mkc::LR, 1).unwrap();
        c.set(Mkc::ACCESS_MODE_1_0, 2).unwrap();
        c.set(Mkc::EN_RINVAL, type2.into()).unwrap();
        c.set(Mkc::QPN, 0xff_ffff).unwrap();
        c.set(Mkc::PD, pd.into()).unwrap();
        c.set(Mkc::TRANSLATIONS_OCTWORD_SIZE, 4).unwrap();
    });
    let out = n.fx.p.ok(&input, CreateMkeyOut::BYTES);
    View::<CreateMkeyOut>::new(&out)
        .unwrap()
        .get32(CreateMkeyOut::MKEY_INDEX)
        << 8
}

/// Binds window `mw` (its current key) to `[mr.va(off), + len)` of `mr` with remote write,
/// giving it key byte `variant`; type 2 to QP `qp`. Returns the new key.
fn bind(
    n: &Node,
    qp: &mut Qp,
    (mw, variant): (u32, u8),
    mr: &Mr,
    (off, len): (u64, u64),
    type2: bool,
) -> u32 {
    let mut w = vec![0u8; 48 + 64 + 64];
    w[0] = INLINE | TRANSLATION_OFFSET | if type2 { CHECK_FREE } else { 0 };
    w[4..6].copy_from_slice(&4u16.to_be_bytes());
    let mask = FREE | MKEY | LEN | START_ADDR | ACCESS | if type2 { QPN } else { 0 };
    w[8..16].copy_from_slice(&mask.to_be_bytes());
    let s = &mut w[48..112];
    s[2] = 0x20 | 0x08; // remote write, local write
    let qpn = if type2 { qp.qpn } else { 0xff_ffff };
    s[4..8].copy_from_slice(&((qpn << 8) | u32::from(variant)).to_be_bytes());
    s[16..24].copy_from_slice(&mr.va(off).to_be_bytes());
    s[24..32].copy_from_slice(&len.to_be_bytes());
    let k = &mut w[112..128];
    k[..4].copy_from_slice(&(len as u32).to_be_bytes());
    k[4..8].copy_from_slice(&mr.key.to_be_bytes());
    k[8..16].copy_from_slice(&mr.va(off).to_be_bytes());
    n.post_send(qp, UMR, SIGNALED, mw.to_be_bytes(), &[Seg::Raw(w)]);
    (mw & !0xff) | u32::from(variant)
}

/// rdma-core's local invalidation of a type 2 window (`IBV_WR_LOCAL_INV`): length 0,
/// CHECK_QPN, `free`, QPN 0xffffff, key byte 0.
fn local_invalidate(n: &Node, qp: &mut Qp, key: u32) {
    let mut w = vec![0u8; 48 + 64];
    w[0] = INLINE | TRANSLATION_OFFSET | CHECK_QPN;
    w[8..16].copy_from_slice(&(FREE | MKEY | QPN).to_be_bytes());
    w[48] = 0x40;
    w[52..56].copy_from_slice(&0xffff_ff00u32.to_be_bytes());
    n.post_send(qp, UMR, SIGNALED, key.to_be_bytes(), &[Seg::Raw(w)]);
}

/// Two nodes, a connected RC pair, a source MR on `a` and a local-write MR on `b`.
fn setup() -> (Fabric, Node, Node, Qp, Qp, Mr, Mr) {
    let (fabric, mut a, mut b) = pair(Mode::Sync);
    let (qa, qb) = connected(&mut a, &mut b, RC, |c| {
        c.set(mlx5_ifc::prm::qp::Qpc::RWE, 1).unwrap();
    });
    let src = a.reg_mr(8192, false, false, false);
    let dst = b.reg_mr(8192, false, false, false);
    fill(&a.dev(), &src, 9);
    (fabric, a, b, qa, qb, src, dst)
}

fn write(a: &mut Node, qa: &mut Qp, src: &Mr, rkey: u32, va: u64, len: u32) -> (u8, u8) {
    a.post_send(
        qa,
        WRITE,
        SIGNALED,
        [0; 4],
        &[Seg::Raddr(va, rkey), Seg::Data(len, src.key, src.va(0))],
    );
    let c = a.poll().expect("a write completion");
    (c.opcode, if c.opcode == REQ_ERR { c.syndrome } else { 0 })
}

#[test]
fn a_type2_window_grants_its_range_to_its_qp_until_invalidated_locally() {
    let (_f, mut a, mut b, mut qa, mut qb, src, dst) = setup();
    let mw = alloc_mw(&mut b, true);
    let rkey = bind(&b, &mut qb, (mw, 0x77), &dst, (1024, 2048), true);
    assert_eq!(b.poll().map(|c| c.opcode), Some(REQ), "the bind completes");
    assert_eq!(
        write(&mut a, &mut qa, &src, rkey, dst.va(1024 + 100), 300),
        (REQ, 0)
    );
    assert_eq!(
        read(&b.dev(), &dst, 1124, 300),
        read(&a.dev(), &src, 0, 300)
    );
    // A second bind of a bound type 2 window is refused (CHECK_FREE).
    bind(&b, &mut qb, (rkey, 0x78), &dst, (0, 64), true);
    let c = b.poll().expect("an error completion");
    assert_eq!((c.opcode, c.syndrome), (REQ_ERR, LOCAL_PROT_ERR));
}

#[test]
fn a_window_refuses_what_lies_outside_it_and_after_invalidation() {
    // Past the window's end: a remote access error.
    let (_f, mut a, mut b, mut qa, mut qb, src, dst) = setup();
    let mw = alloc_mw(&mut b, true);
    let rkey = bind(&b, &mut qb, (mw, 0x11), &dst, (1024, 2048), true);
    b.poll().unwrap();
    assert_eq!(
        write(&mut a, &mut qa, &src, rkey, dst.va(1024 + 2000), 100),
        (REQ_ERR, REMOTE_ACCESS_ERR)
    );
    // Local invalidation: the old key then fails.
    let (_f, mut a, mut b, mut qa, mut qb, src, dst) = setup();
    let mw = alloc_mw(&mut b, true);
    let rkey = bind(&b, &mut qb, (mw, 0x12), &dst, (0, 4096), true);
    b.poll().unwrap();
    assert_eq!(write(&mut a, &mut qa, &src, rkey, dst.va(0), 8), (REQ, 0));
    local_invalidate(&b, &mut qb, rkey);
    assert_eq!(b.poll().map(|c| c.opcode), Some(REQ));
    assert_eq!(
        write(&mut a, &mut qa, &src, rkey, dst.va(0), 8),
        (REQ_ERR, REMOTE_ACCESS_ERR)
    );
    // Remote invalidation (SEND with invalidate): the old key then fails.
    let (_f, mut a, mut b, mut qa, mut qb, src, dst) = setup();
    let mw = alloc_mw(&mut b, true);
    let rkey = bind(&b, &mut qb, (mw, 0x13), &dst, (0, 4096), true);
    b.poll().unwrap();
    b.post_recv(&mut qb, &[(64, dst.key, dst.va(4096))]);
    a.post_send(
        &mut qa,
        SEND_INV,
        SIGNALED,
        rkey.to_be_bytes(),
        &[Seg::Inline(vec![1; 8])],
    );
    assert_eq!(a.poll().map(|c| c.opcode), Some(REQ));
    assert_eq!(b.poll().map(|c| c.opcode), Some(RESP_SEND_INV));
    assert_eq!(
        write(&mut a, &mut qa, &src, rkey, dst.va(0), 8),
        (REQ_ERR, REMOTE_ACCESS_ERR)
    );
}

#[test]
fn a_type2_window_is_for_its_own_qp_only() {
    let (_f, mut a, mut b, _qa, mut qb, src, dst) = setup();
    // A second connection between the same nodes.
    let (mut qa2, _qb2) = connected(&mut a, &mut b, RC, |c| {
        c.set(mlx5_ifc::prm::qp::Qpc::RWE, 1).unwrap();
    });
    let mw = alloc_mw(&mut b, true);
    let rkey = bind(&b, &mut qb, (mw, 0x21), &dst, (0, 4096), true);
    b.poll().unwrap();
    assert_eq!(
        write(&mut a, &mut qa2, &src, rkey, dst.va(0), 8),
        (REQ_ERR, REMOTE_ACCESS_ERR),
        "bound to the first QP, not this one"
    );
    // Nor may another QP invalidate it (CHECK_QPN): a third one tries.
    let (_qa3, mut qb3) = connected(&mut a, &mut b, RC, |_| {});
    local_invalidate(&b, &mut qb3, rkey);
    let c = b.poll().expect("an error completion");
    assert_eq!((c.opcode, c.syndrome), (REQ_ERR, LOCAL_PROT_ERR));
}

#[test]
fn a_type1_window_serves_any_qp_and_is_invalidated_by_a_zero_length_bind() {
    let (_f, mut a, mut b, mut qa, mut qb, src, dst) = setup();
    let mw = alloc_mw(&mut b, false);
    let rkey = bind(&b, &mut qb, (mw, 0x31), &dst, (2048, 1024), false);
    b.poll().unwrap();
    assert_eq!(
        write(&mut a, &mut qa, &src, rkey, dst.va(2048), 1024),
        (REQ, 0)
    );
    assert_eq!(
        read(&b.dev(), &dst, 2048, 1024),
        read(&a.dev(), &src, 0, 1024)
    );
    // Rebound to length 0 (free, no KLM): the key is gone.
    let mut w = vec![0u8; 48 + 64];
    w[0] = INLINE | TRANSLATION_OFFSET;
    w[8..16].copy_from_slice(&(FREE | MKEY).to_be_bytes());
    w[48] = 0x40;
    w[52..56].copy_from_slice(&(0xffff_ff00u32 | 0x32).to_be_bytes());
    b.post_send(&mut qb, UMR, SIGNALED, rkey.to_be_bytes(), &[Seg::Raw(w)]);
    assert_eq!(b.poll().map(|c| c.opcode), Some(REQ));
    assert_eq!(
        write(&mut a, &mut qa, &src, rkey, dst.va(2048), 8),
        (REQ_ERR, REMOTE_ACCESS_ERR)
    );
}

/// rdma-core's interleaved layout on a KLM key (`mlx5dv_wr_mr_interleaved`,
/// `umr_strided_seg_create`): a repeat block — one round's total bytes, `op` 0x400, the round
/// count, the entry count — and its entries (stride, bytes, key, address); round `r` takes each
/// entry's bytes at `address + r × stride`. Remote writes through the key land interleaved.
/// Then rdma-core's local invalidation of that key — bound to no QP — with CHECK_QPN, which the
/// device takes (rdma-core's mkey tests invalidate their mlx5dv keys so on real cards).
#[test]
fn an_interleaved_klm_layout_spreads_writes_and_a_key_bound_to_no_qp_is_invalidated() {
    let (fabric, mut a, mut b, mut qa, mut qb, src, dst) = setup();
    let mw = alloc_mw(&mut b, false);
    let mut w = vec![0u8; 48 + 64 + 64];
    w[0] = INLINE;
    w[4..6].copy_from_slice(&4u16.to_be_bytes());
    w[8..16].copy_from_slice(&(FREE | MKEY | LEN | ACCESS).to_be_bytes());
    let s = &mut w[48..112];
    s[2] = 0x20 | 0x08; // remote write, local write
    s[4..8].copy_from_slice(&0xffff_ff07u32.to_be_bytes());
    s[24..32].copy_from_slice(&48u64.to_be_bytes());
    let x = &mut w[112..176];
    x[..4].copy_from_slice(&16u32.to_be_bytes()); // one round: 8 + 8 bytes
    x[4..8].copy_from_slice(&0x400u32.to_be_bytes());
    x[8..12].copy_from_slice(&3u32.to_be_bytes()); // three rounds
    x[14..16].copy_from_slice(&2u16.to_be_bytes()); // two entries
    for (k, off) in [0u64, 100].into_iter().enumerate() {
        let e = &mut x[16 + 16 * k..32 + 16 * k];
        e[..2].copy_from_slice(&16u16.to_be_bytes()); // stride
        e[2..4].copy_from_slice(&8u16.to_be_bytes()); // bytes
        e[4..8].copy_from_slice(&dst.key.to_be_bytes());
        e[8..16].copy_from_slice(&dst.va(off).to_be_bytes());
    }
    b.post_send(&mut qb, UMR, SIGNALED, mw.to_be_bytes(), &[Seg::Raw(w)]);
    assert_eq!(b.poll().map(|c| c.opcode), Some(REQ), "the layout is taken");
    let key = (mw & !0xff) | 7;
    assert_eq!(write(&mut a, &mut qa, &src, key, 0, 48), (REQ, 0));
    fabric.run_until_idle();
    let sent = read(&a.dev(), &src, 0, 48);
    for r in 0..3u64 {
        for (k, off) in [0u64, 100].into_iter().enumerate() {
            let from = (16 * r + 8 * k as u64) as usize;
            assert_eq!(
                read(&b.dev(), &dst, off + 16 * r, 8),
                sent[from..from + 8],
                "round {r}, entry {k}"
            );
        }
    }
    // The key is bound to no QP (qpn 0xffffff): CHECK_QPN passes, and the key is free after.
    local_invalidate(&b, &mut qb, key);
    assert_eq!(b.poll().map(|c| c.opcode), Some(REQ));
    assert_eq!(
        write(&mut a, &mut qa, &src, key, 0, 8),
        (REQ_ERR, REMOTE_ACCESS_ERR)
    );
}
