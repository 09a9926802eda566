//! Striding (multi-packet) receive queues, as Linux's mlx5e drives them on a real ConnectX-5
//! (its MPWQE RQ: "StrdRq(1)") and as mlx5_ib's striding WQs and DPDK's MPRQ do (cyclic), byte
//! by byte and independent of the driver (facts: docs/fields.md, "Striding RQ"):
//! the capabilities; a UMR mkey mapped by UMR WQEs from an ICOSQ (`reg_umr`); a linked list of
//! WQEs whose strides frames fill, a filler CQE where a frame does not fit, the list's order
//! followed; a cyclic ring with the two-byte shift; the refusals.

mod common;

use common::cmd;
use common::datapath::{Mr, Node};
use common::eth_node::*;
use common::ethernet as eth;
use common::queues::with_pas;
use mlx5_ifc::consts::striding::{CQE_FILLER, CQE_STRIDES_SHIFT};
use mlx5_ifc::consts::wq_type;
use mlx5_ifc::prm::caps::{CmdHcaCap, PerProtocolNetworkingOffloadCaps as EthCaps};
use mlx5_ifc::prm::mr::{CreateMkeyIn, CreateMkeyOut, Mkc};
use mlx5_ifc::prm::sq_rq::{Rqc, Sqc};
use mlx5_ifc::prm::srq::Wq;
use mlx5_ifc::{CmdStatus, Layout, Opcode, View};
use mlx5_sim::syndrome as syn;
use mlx5_sim::Mode;

/// The UMR mkey mlx5e makes for a striding RQ: free, `umr_en`, MTT, local read and write,
/// zero-based over `wqes` WQEs, every entry the overflow page (no present bits, no
/// `pg_access`).
fn rq_umr_key(n: &mut Node, wqes: u64, overflow: u64) -> u32 {
    let pd = n.fx.pd;
    let entries = wqes * WQE_BYTES / 4096;
    let input = cmd::<CreateMkeyIn>(Opcode::CreateMkey, 0, |v| {
        let mut c = v.nested_mut(CreateMkeyIn::MEMORY_KEY_MKEY_ENTRY);
        c.set(Mkc::FREE, 1).unwrap();
        c.set(Mkc::UMR_EN, 1).unwrap();
        c.set(Mkc::LR, 1).unwrap();
        c.set(Mkc::LW, 1).unwrap();
        c.set(Mkc::ACCESS_MODE_1_0, 1).unwrap();
        c.set(Mkc::QPN, 0xff_ffff).unwrap();
        c.set(Mkc::MKEY_7_0, 0x5a).unwrap();
        c.set(Mkc::PD, pd.into()).unwrap();
        c.set(Mkc::LEN, wqes * WQE_BYTES).unwrap();
        c.set(Mkc::LOG_PAGE_SIZE, 12).unwrap();
        c.set(Mkc::TRANSLATIONS_OCTWORD_SIZE, entries / 2).unwrap();
    });
    let pas = vec![overflow; entries as usize];
    let out = n.fx.p.ok(&with_pas(input, &pas), CreateMkeyOut::BYTES);
    View::<CreateMkeyOut>::new(&out)
        .unwrap()
        .get32(CreateMkeyOut::MKEY_INDEX)
        << 8
        | 0x5a
}

/// An SQ that executes UMR WQEs (mlx5e's ICOSQ: `reg_umr`, no TIS), RDY.
fn icosq(n: &mut Node) -> Eth {
    rdy_sq(n, 0, |c| {
        c.set(Sqc::TIS_LST_SZ, 0).unwrap();
        c.set(Sqc::REG_UMR, 1).unwrap();
    })
}

/// Posts the UMR WQE mlx5e posts before it posts RQ WQE `index`: the key's entries of that
/// WQE (one octoword: two pages at `pages`, write bit set), inline at `xlt_offset` = `index`
/// octowords, the key no longer free (`mkey_mask` FREE, a zero mkey segment), CQ update.
fn map_wqe(n: &Node, q: &mut Eth, key: u32, index: u16, pages: u64) -> u16 {
    umr_wqe(n, q, key, index, pages, None)
}

/// Like `map_wqe`; with `xlt`, the entries are not inline but written at that IOVA and named
/// by a data segment through the reserved lkey (`umr_ptr_rlky`).
fn umr_wqe(n: &Node, q: &mut Eth, key: u32, index: u16, pages: u64, xlt: Option<u64>) -> u16 {
    let mut w = vec![0u8; 16 + 48 + 64 + 16];
    w[12..16].copy_from_slice(&key.to_be_bytes());
    let u = &mut w[16..64];
    // INLINE (unless through a pointer) | TRANSLATION_OFFSET_EN
    u[0] = if xlt.is_some() { 0x10 } else { 0x80 | 0x10 };
    u[4..6].copy_from_slice(&1u16.to_be_bytes());
    u[6..8].copy_from_slice(&index.to_be_bytes());
    u[8..16].copy_from_slice(&(1u64 << 29).to_be_bytes());
    let mut mtts = [0u8; 16];
    for (k, e) in mtts.chunks_mut(8).enumerate() {
        e.copy_from_slice(&((pages + k as u64 * 4096) | 2).to_be_bytes());
    }
    match xlt {
        None => w[128..144].copy_from_slice(&mtts),
        Some(at) => {
            n.dev().dma_write(at, &mtts).unwrap();
            w[128..132].copy_from_slice(&16u32.to_be_bytes());
            w[132..136].copy_from_slice(&mlx5_sim::RESD_LKEY.to_be_bytes());
            w[136..144].copy_from_slice(&at.to_be_bytes());
        }
    }
    post_wqe(n, q, 0x25, w)
}

#[test]
fn a_striding_rq_fills_its_wqes_stride_by_stride_in_list_order_with_filler_cqes() {
    let mut n = Node::new(Mode::Sync, 1);
    // The capabilities mlx5e looks for before it makes a striding RQ.
    let general = n.fx.p.query_cap(0, 1);
    let g = View::<CmdHcaCap>::new(&general).unwrap();
    for f in [
        CmdHcaCap::STRIDING_RQ,
        CmdHcaCap::UMR_PTR_RLKY,
        CmdHcaCap::EXT_STRIDE_NUM_RANGE,
    ] {
        assert_eq!(g.get(f), 1, "{}", f.info.name);
    }
    let eth_caps = n.fx.p.query_cap(1, 1);
    assert_eq!(
        View::<EthCaps>::new(&eth_caps)
            .unwrap()
            .get(EthCaps::REG_UMR_SQ),
        1
    );

    let dev = n.dev();
    let data = dev.dma_alloc(4 * WQE_BYTES as usize, 4096).unwrap();
    let overflow = dev.dma_alloc(4096, 4096).unwrap();
    let key = rq_umr_key(&mut n, 4, overflow.iova);
    let mut ico = icosq(&mut n);
    let (rqn, rq, rq_dbr) = striding_rq(&mut n, wq_type::LINKED_LIST_STRIDING_RQ, |_| {});
    steer_own_mac_to(&mut n, rqn);
    // The list as mlx5e leaves it after reuse: 0 → 2 → 1 → 3 → 0. Each WQE's pages mapped
    // by a UMR first (its CQE before the WQE is posted), WQE k's buffer at k × WQE_BYTES of
    // the key.
    for (index, next) in [(0u16, 2u16), (2, 1), (1, 3), (3, 0)] {
        let at = u64::from(index) * WQE_BYTES;
        let umr = map_wqe(&n, &mut ico, key, index, data.iova + at);
        let c = n.poll().expect("the UMR's completion");
        assert_eq!((c.opcode, c.wqe_opcode, c.qpn), (0, 0x25, ico.sqn));
        assert_eq!(c.wqe_counter, umr);
        write_striding_wqe(&n, &rq, u64::from(index), next, key, at);
    }
    dev.dma_write(rq_dbr.iova, &3u32.to_be_bytes()).unwrap();

    let mut tx = sender(&mut n);
    let src = n.reg_mr(16384, false, false, false);
    // Frames of one, two and three strides.
    let sizes = [1000usize, 1500, 1024, 2500, 1200, 3000, 800];
    let frames: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(k, &len)| own_frame(&n, len, k as u8))
        .collect();
    for f in &frames {
        send(&n, &mut tx, &src, f, 14, None);
    }
    let got = receives(&n.drain());
    let rx = |strides: u32, len: usize| strides << CQE_STRIDES_SHIFT | len as u32;
    let filler = |strides: u32| CQE_FILLER | strides << CQE_STRIDES_SHIFT;
    assert_eq!(
        got,
        vec![
            // WQE 0: strides 0, 1–2, 3, 4–6, then 1200 bytes (2 strides) do not fit the 1 left.
            (0, 0, rx(1, 1000)),
            (0, 1, rx(2, 1500)),
            (0, 3, rx(1, 1024)),
            (0, 4, rx(3, 2500)),
            (0, 7, filler(1)),
            // The list's next WQE is 2, not 1.
            (2, 0, rx(2, 1200)),
            (2, 2, rx(3, 3000)),
            (2, 5, rx(1, 800)),
        ]
    );
    // Each frame where its CQE says, through the UMR key's pages.
    let place = [(0, 0), (0, 1), (0, 3), (0, 4), (2, 0), (2, 2), (2, 5)];
    for (f, (wqe, stride)) in frames.iter().zip(place) {
        let at = wqe * WQE_BYTES + stride * STRIDE;
        let mut b = vec![0u8; f.len()];
        dev.dma_read(data.iova + at, &mut b).unwrap();
        assert_eq!(b[..12], f[..12]);
        assert_eq!(b[42..], f[42..], "the payload at WQE {wqe} stride {stride}");
    }
    let c = dev.datapath_counters();
    assert_eq!((c.eth_rx_delivered, c.eth_rx_mpw_fillers), (7, 1));

    // WQE 2 has 2 strides left; a 2500-byte frame takes 3: a filler, then WQE 1 (posted third).
    // A fourth WQE is not posted: the next frame that needs a new WQE is dropped.
    send(&n, &mut tx, &src, &own_frame(&n, 2500, 9), 14, None);
    for k in 0..3u8 {
        send(&n, &mut tx, &src, &own_frame(&n, 3000, k), 14, None);
    }
    assert_eq!(
        receives(&n.drain()),
        vec![
            (2, 6, filler(2)),
            (1, 0, rx(3, 2500)),
            (1, 3, rx(3, 3000)),
            (1, 6, filler(2)),
        ]
    );
    let c = dev.datapath_counters();
    assert_eq!(c.eth_rx_out_of_buffer, 2, "no WQE for the last two");
    // Posting the fourth WQE makes room again.
    dev.dma_write(rq_dbr.iova, &4u32.to_be_bytes()).unwrap();
    send(&n, &mut tx, &src, &own_frame(&n, 100, 1), 14, None);
    assert_eq!(receives(&n.drain()), vec![(3, 0, rx(1, 100))]);
}

/// `umr_ptr_rlky`: a UMR WQE's translation entries may sit in host memory behind a data segment
/// through the reserved lkey; the striding RQ then receives into the pages they name.
#[test]
fn a_umr_on_the_icosq_may_take_its_translations_through_the_reserved_lkey() {
    let mut n = Node::new(Mode::Sync, 1);
    let dev = n.dev();
    let data = dev.dma_alloc(WQE_BYTES as usize, 4096).unwrap();
    let table = dev.dma_alloc(4096, 4096).unwrap();
    let key = rq_umr_key(&mut n, 1, table.iova);
    let mut ico = icosq(&mut n);
    let (rqn, rq, rq_dbr) = striding_rq(&mut n, wq_type::LINKED_LIST_STRIDING_RQ, |_| {});
    steer_own_mac_to(&mut n, rqn);
    umr_wqe(&n, &mut ico, key, 0, data.iova, Some(table.iova + 512));
    let c = n.poll().expect("the UMR's completion");
    assert_eq!((c.opcode, c.wqe_opcode), (0, 0x25));
    write_striding_wqe(&n, &rq, 0, 0, key, 0);
    dev.dma_write(rq_dbr.iova, &1u32.to_be_bytes()).unwrap();
    let mut tx = sender(&mut n);
    let src = n.reg_mr(8192, false, false, false);
    let f = own_frame(&n, 5000, 3);
    send(&n, &mut tx, &src, &f, 14, None);
    assert_eq!(
        receives(&n.drain()),
        vec![(0, 0, 5 << CQE_STRIDES_SHIFT | 5000)]
    );
    let mut b = vec![0u8; f.len()];
    dev.dma_read(data.iova, &mut b).unwrap();
    assert_eq!(b[42..], f[42..], "across both pages the UMR mapped");
}

/// A cyclic striding RQ (mlx5_ib's striding WQs, DPDK's MPRQ) through an ordinary MR, with
/// `two_byte_shift_en`: each frame starts 2 bytes into its first stride (the 2 bytes count in
/// its strides, not in its byte count), and the WQEs are used in ring order.
#[test]
fn a_cyclic_striding_rq_with_the_two_byte_shift() {
    let mut n = Node::new(Mode::Sync, 1);
    let mr: Mr = n.reg_mr(4 * WQE_BYTES as usize, false, false, false);
    let (rqn, rq, rq_dbr) = striding_rq(&mut n, wq_type::CYCLIC_STRIDING_RQ, |w| {
        w.set(Wq::TWO_BYTE_SHIFT_EN, 1).unwrap();
    });
    steer_own_mac_to(&mut n, rqn);
    for k in 0..4u64 {
        // The next segment is not looked at in a ring.
        write_striding_wqe(&n, &rq, k, 0x7777, mr.key, mr.va(k * WQE_BYTES));
    }
    n.dev().dma_write(rq_dbr.iova, &2u32.to_be_bytes()).unwrap();
    let mut tx = sender(&mut n);
    let src = n.reg_mr(16384, false, false, false);
    let frames: Vec<Vec<u8>> = [1022usize, 1023, 4000, 3000]
        .iter()
        .map(|&len| own_frame(&n, len, len as u8))
        .collect();
    for f in &frames {
        send(&n, &mut tx, &src, f, 14, None);
    }
    let rx = |strides: u32, len: usize| strides << CQE_STRIDES_SHIFT | len as u32;
    assert_eq!(
        receives(&n.drain()),
        vec![
            (0, 0, rx(1, 1022)),
            (0, 1, rx(2, 1023)),
            (0, 3, rx(4, 4000)),
            (0, 7, CQE_FILLER | 1 << CQE_STRIDES_SHIFT),
            (1, 0, rx(3, 3000)),
        ]
    );
    for (f, at) in frames.iter().zip([0, STRIDE, 3 * STRIDE, WQE_BYTES]) {
        let mut b = vec![0u8; f.len() + 2];
        n.dev().dma_read(mr.buf.iova + at, &mut b).unwrap();
        assert_eq!(b[..2], [0, 0], "two bytes of shift");
        assert_eq!(b[2 + 42..], f[42..]);
    }
}

/// What the device refuses of a striding RQ (BAD_PARAM `0x5e030071`): a stride count value
/// that encodes none (8 and 9), a WQE stride below 32 bytes (no room for the next segment and
/// a data segment); and a UMR WQE on an SQ made without `reg_umr` fails with a local QP
/// operation error.
#[test]
fn what_the_device_refuses_of_striding_rqs_and_umr_sqs() {
    let mut n = Node::new(Mode::Sync, 1);
    for (strides, stride) in [(8u64, 5u64), (9, 5), (LOG_STRIDES_FIELD, 4)] {
        let (r, _buf, _dbr) = ring(&n, 1);
        let input = eth::rq_in(&r, n.cqn, |c| {
            let mut w = c.nested_mut(Rqc::WQ);
            w.set(Wq::WQ_TYPE, wq_type::LINKED_LIST_STRIDING_RQ)
                .unwrap();
            w.set(Wq::LOG_WQ_STRIDE, stride).unwrap();
            w.set(Wq::LOG_WQE_NUM_OF_STRIDES, strides).unwrap();
        });
        n.fx.expect(&input, 0x10, (CmdStatus::BadParam.raw(), syn::STRIDING_RQ));
    }

    let page = n.dev().dma_alloc(4096, 4096).unwrap();
    let key = rq_umr_key(&mut n, 1, page.iova);
    let mut plain = sender(&mut n);
    map_wqe(&n, &mut plain, key, 0, page.iova);
    let c = n.poll().expect("an error CQE");
    assert_eq!((c.opcode, c.syndrome), (13, 0x02), "LOCAL_QP_OP_ERR");
}
