//! UMR WQEs at the byte level, as Linux's mlx5_ib sends them from its REG_UMR QP: enabling a
//! free MR-cache key (CHECK_NOT_FREE, translations behind a data segment, the ENABLE mask),
//! using it from the wire, revoking it (INLINE, PD|FREE), and a refused check — an error CQE,
//! the QP in ERR and the next WQE flushed, which Linux's UMR recovery relies on.
//! A guest may not make the simulator hold more translation entries than its budget (2^24 for
//! the device): such a UMR fails with LOCAL_LENGTH_ERR.

mod common;

use common::cmd;
use common::datapath::{connected, fill, pair, read, Mr, Node, Qp, Seg};
use common::queues::Step;
use mlx5_ifc::consts::qp_st;
use mlx5_ifc::prm::mr::{CreateMkeyIn, CreateMkeyOut, Mkc};
use mlx5_ifc::{Layout, Opcode, View};
use mlx5_sim::Mode;

const UMR: u8 = 0x25;
const WRITE: u8 = 0x08;
/// Linux's ENABLE mask with atomics: KEY|FREE, LR..A, PD, LEN|PAGE_SIZE|START_ADDR.
const ENABLE_MASK: u64 = 0x203e_20c3;
/// Revoke: PD|FREE.
const REVOKE_MASK: u64 = 0x2000_0080;
const CHECK_NOT_FREE: u8 = 0x20;
const INLINE: u8 = 0x80;
const VA: u64 = 0x5500_0000_0000;

/// A key as mlx5_ib's MR cache makes them: free, `umr_en`, MTT with room for 4 pages, no range.
fn cache_key(n: &mut Node, variant: u8) -> u32 {
    sized_cache_key(n, variant, 2)
}

/// Like `cache_key`, with room for `octwords` × 2 pages.
fn sized_cache_key(n: &mut Node, variant: u8, octwords: u64) -> u32 {
    let pd = n.fx.pd;
    let input = cmd::<CreateMkeyIn>(Opcode::CreateMkey, 0, |v| {
        let mut c = v.nested_mut(CreateMkeyIn::MEMORY_KEY_MKEY_ENTRY);
        c.set(Mkc::FREE, 1).unwrap();
        c.set(Mkc::UMR_EN, 1).unwrap();
        c.set(Mkc::LR, 1).unwrap();
        c.set(Mkc::ACCESS_MODE_1_0, 1).unwrap();
        c.set(Mkc::QPN, 0xff_ffff).unwrap();
        c.set(Mkc::MKEY_7_0, variant.into()).unwrap();
        c.set(Mkc::PD, pd.into()).unwrap();
        c.set(Mkc::TRANSLATIONS_OCTWORD_SIZE, octwords).unwrap();
        c.set(Mkc::LOG_PAGE_SIZE, 12).unwrap();
    });
    let out = n.fx.p.ok(&input, CreateMkeyOut::BYTES);
    View::<CreateMkeyOut>::new(&out)
        .unwrap()
        .get32(CreateMkeyOut::MKEY_INDEX)
        << 8
        | u32::from(variant)
}

/// The UMR control segment and mkey segment (`free`, access, PD, range, page size).
fn umr_body(n: &Node, flags: u8, octowords: u16, mask: u64, free: bool, key: u32) -> Vec<u8> {
    let mut w = vec![0u8; 48 + 64];
    w[0] = flags;
    w[4..6].copy_from_slice(&octowords.to_be_bytes());
    w[8..16].copy_from_slice(&mask.to_be_bytes());
    let s = &mut w[48..];
    s[0] = if free { 0x40 } else { 0 };
    s[2] = 0x80 | 0x40 | 0x20 | 0x10 | 0x08 | 0x04 | 0x01; // umr_en, a, rw, rr, lw, lr, MTT
    s[4..8].copy_from_slice(&(0xffff_ff00 | (key & 0xff)).to_be_bytes());
    s[12..16].copy_from_slice(&n.fx.pd.to_be_bytes());
    s[16..24].copy_from_slice(&VA.to_be_bytes());
    s[24..32].copy_from_slice(&16384u64.to_be_bytes());
    s[52..56].copy_from_slice(&2u32.to_be_bytes());
    s[59] = 12;
    w
}

/// Posts a UMR WQE for `key` (`body` after the control segment) on the UMR QP and rings; Linux's
/// `fm_ce_se` (CQ update, small initiator fence).
fn post_umr(n: &Node, qp: &mut Qp, key: u32, body: &[u8]) -> u16 {
    n.post_send(qp, UMR, 0x28, key.to_be_bytes(), &[Seg::Raw(body.to_vec())])
}

/// The UMR QP, in RTS.
fn umr_qp(n: &mut Node) -> Qp {
    let qp = n.create_qp(qp_st::REG_UMR);
    // Programmed as a UD QP is (Linux's mlx5r_umr_qp_rst2rts: port 1, no path).
    for step in [Step::Rst2Init, Step::Init2Rtr, Step::Rtr2Rts] {
        assert_eq!(
            n.fx.step(step, qp.qpn, qp_st::UD, 0, |_| {}),
            (0, 0),
            "{step:?}"
        );
    }
    qp
}

/// Enables `key` over 4 pages of `buf` with translations in `xlt` (a registered region).
fn enable(n: &Node, qp: &mut Qp, key: u32, pages: u64, xlt: &Mr) -> u16 {
    let dev = n.dev();
    let mut list = Vec::new();
    for k in 0..8u64 {
        let e = if k < 4 { (pages + k * 4096) | 3 } else { 0 };
        list.extend_from_slice(&e.to_be_bytes());
    }
    dev.dma_write(xlt.buf.iova, &list).unwrap();
    let mut body = umr_body(n, CHECK_NOT_FREE, 4, ENABLE_MASK, false, key);
    body.extend_from_slice(&64u32.to_be_bytes());
    body.extend_from_slice(&xlt.key.to_be_bytes());
    body.extend_from_slice(&xlt.va.to_be_bytes());
    post_umr(n, qp, key, &body)
}

#[test]
fn a_cache_key_is_enabled_used_and_revoked_by_umr() {
    let (_fabric, mut a, mut b) = pair(Mode::Sync);
    let (mut qa, _qb) = connected(&mut a, &mut b, qp_st::RC, |_| {});
    let la = a.reg_mr(16384, false, false, false);
    let xlt = b.reg_mr(4096, false, false, false);
    let key = cache_key(&mut b, 0x5a);
    let mut umr = umr_qp(&mut b);
    let buf = b.dev().dma_alloc(16384, 4096).unwrap();

    let idx = enable(&b, &mut umr, key, buf.iova, &xlt);
    let c = b.poll().expect("the UMR's completion");
    assert_eq!(
        (c.opcode, c.wqe_opcode, c.qpn, c.wqe_counter),
        (0, UMR, umr.qpn, idx)
    );

    // The enabled key takes an RDMA WRITE across its four pages.
    let data = fill(&a.dev(), &la, 3);
    a.post_send(
        &mut qa,
        WRITE,
        0x08,
        [0; 4],
        &[
            Seg::Raddr(VA + 100, key),
            Seg::Data(12000, la.key, la.va(0)),
        ],
    );
    let c = a.poll().expect("the WRITE's completion");
    assert_eq!(c.opcode, 0, "a success CQE");
    let region = Mr { key, buf, va: VA };
    assert_eq!(read(&b.dev(), &region, 100, 12000), &data[..12000]);

    // Revoked (free again): the next WRITE is refused by the responder.
    post_umr(
        &b,
        &mut umr,
        key,
        &umr_body(&b, INLINE, 0, REVOKE_MASK, true, key),
    );
    assert_eq!(b.poll().map(|c| c.opcode), Some(0));
    a.post_send(
        &mut qa,
        WRITE,
        0x08,
        [0; 4],
        &[Seg::Raddr(VA, key), Seg::Data(64, la.key, la.va(0))],
    );
    let c = a.poll().expect("the refused WRITE");
    assert_eq!(c.opcode, 0xd, "requester error CQE");
}

/// mlx5_ib without its MR cache (on a VF, `reg_create` with no page list): a free, UMR-enabled
/// MTT key with its range and table size but no entries in the input (272 bytes,
/// `translations_octword_actual_size` 0) — accepted; the UMR that enables it brings the
/// entries. A key that is not free still needs its list.
#[test]
fn a_free_key_created_without_its_list_is_enabled_by_umr() {
    let (_fabric, mut a, mut b) = pair(Mode::Sync);
    let (mut qa, _qb) = connected(&mut a, &mut b, qp_st::RC, |_| {});
    let la = a.reg_mr(16384, false, false, false);
    let xlt = b.reg_mr(4096, false, false, false);
    let pd = b.fx.pd;
    let key_in = |free: u64| {
        cmd::<CreateMkeyIn>(Opcode::CreateMkey, 0, |v| {
            let mut c = v.nested_mut(CreateMkeyIn::MEMORY_KEY_MKEY_ENTRY);
            c.set(Mkc::FREE, free).unwrap();
            c.set(Mkc::UMR_EN, 1).unwrap();
            c.set(Mkc::LR, 1).unwrap();
            c.set(Mkc::LW, 1).unwrap();
            c.set(Mkc::RW, 1).unwrap();
            c.set(Mkc::ACCESS_MODE_1_0, 1).unwrap();
            c.set(Mkc::QPN, 0xff_ffff).unwrap();
            c.set(Mkc::MKEY_7_0, 0x33).unwrap();
            c.set(Mkc::PD, pd.into()).unwrap();
            c.set(Mkc::START_ADDR, VA).unwrap();
            c.set(Mkc::LEN, 16384).unwrap();
            c.set(Mkc::TRANSLATIONS_OCTWORD_SIZE, 2).unwrap();
            c.set(Mkc::LOG_PAGE_SIZE, 12).unwrap();
        })
    };
    let out = b.fx.p.exec(&key_in(0), CreateMkeyOut::BYTES);
    assert_eq!(common::status(&out), (0x50, 0x5e50_0006), "INLEN_MKEY_MTT");
    let out = b.fx.p.ok(&key_in(1), CreateMkeyOut::BYTES);
    let key = View::<CreateMkeyOut>::new(&out)
        .unwrap()
        .get32(CreateMkeyOut::MKEY_INDEX)
        << 8
        | 0x33;
    let mut umr = umr_qp(&mut b);
    let buf = b.dev().dma_alloc(16384, 4096).unwrap();
    enable(&b, &mut umr, key, buf.iova, &xlt);
    assert_eq!(b.poll().map(|c| c.opcode), Some(0));
    let data = fill(&a.dev(), &la, 5);
    a.post_send(
        &mut qa,
        WRITE,
        0x08,
        [0; 4],
        &[Seg::Raddr(VA, key), Seg::Data(16384, la.key, la.va(0))],
    );
    assert_eq!(a.poll().map(|c| c.opcode), Some(0));
    let region = Mr { key, buf, va: VA };
    assert_eq!(read(&b.dev(), &region, 0, 16384), data);
}

#[test]
fn a_refused_check_stops_the_umr_qp_and_flushes_the_next_wqe() {
    let (_fabric, _a, mut b) = pair(Mode::Sync);
    let xlt = b.reg_mr(4096, false, false, false);
    let key = cache_key(&mut b, 1);
    let mut umr = umr_qp(&mut b);
    let buf = b.dev().dma_alloc(16384, 4096).unwrap();
    enable(&b, &mut umr, key, buf.iova, &xlt);
    assert_eq!(b.poll().map(|c| c.opcode), Some(0));
    // Enabling it again: CHECK_NOT_FREE on a key in use.
    enable(&b, &mut umr, key, buf.iova, &xlt);
    let c = b.poll().expect("an error CQE");
    assert_eq!(
        (c.opcode, c.syndrome),
        (0xd, 0x04),
        "REQ_ERR, LOCAL_PROT_ERR"
    );
    // Linux's recovery posts again while the QP is in ERR and waits for the flush.
    post_umr(
        &b,
        &mut umr,
        key,
        &umr_body(&b, INLINE, 0, REVOKE_MASK, true, key),
    );
    let c = b.poll().expect("a flush CQE");
    assert_eq!((c.opcode, c.syndrome), (0xd, 0x05), "WR_FLUSH_ERR");
}

#[test]
fn a_umr_may_not_make_the_simulator_hold_more_than_its_translation_budget() {
    let (_fabric, _a, mut b) = pair(Mode::Sync);
    let xlt = b.reg_mr(4096, false, false, false);
    // A free key whose table claims 2^26 MTT entries (room a guest may ask for).
    let key = sized_cache_key(&mut b, 0, 1 << 25);
    let mut umr = umr_qp(&mut b);
    // Eight entries at entry 2^24 (byte 2^27, octword 2^23): the table would hold 2^24 + 8,
    // past the simulator's budget of 2^24 entries for the whole device.
    let update = |n: &Node, umr: &mut Qp, octword: u64| {
        let mut body = vec![0u8; 48 + 64];
        body[0] = 0x10 | 0x40; // TRANSLATION_OFFSET_EN | CHECK_FREE
        body[4..6].copy_from_slice(&4u16.to_be_bytes());
        body[6..8].copy_from_slice(&(octword as u16).to_be_bytes());
        body[16..20].copy_from_slice(&((octword >> 16) as u32).to_be_bytes());
        body.extend_from_slice(&64u32.to_be_bytes());
        body.extend_from_slice(&xlt.key.to_be_bytes());
        body.extend_from_slice(&xlt.va.to_be_bytes());
        post_umr(n, umr, key, &body)
    };
    // The key must not be free for CHECK_FREE: enable it first, entries at the start.
    enable_at_start(&mut b, &mut umr, key, &xlt);
    update(&b, &mut umr, 1 << 23);
    let c = b.poll().expect("an error CQE");
    assert_eq!(
        (c.opcode, c.syndrome),
        (0xd, 0x01),
        "REQ_ERR, LOCAL_LENGTH_ERR"
    );
}

/// Enables the free `key` over 4 pages at its start (the ENABLE mask); waits for it.
fn enable_at_start(n: &mut Node, qp: &mut Qp, key: u32, xlt: &Mr) {
    let buf = n.dev().dma_alloc(16384, 4096).unwrap();
    enable(n, qp, key, buf.iova, xlt);
    assert_eq!(n.poll().map(|c| c.opcode), Some(0), "enabled");
}
