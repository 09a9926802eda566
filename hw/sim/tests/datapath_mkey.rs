//! CREATE_MKEY / QUERY_MKEY / DESTROY_MKEY: what the firmware keeps, and every refusal.

mod common;

use common::cmd;
use common::datapath::Node;
use common::queues::{with_pas, BAD_INLEN, BAD_PARAM, BAD_RES, EXCEED_LIM, RES_BUSY};
use mlx5_ifc::prm::mr::{
    CreateMkeyIn, CreateMkeyOut, DestroyMkeyIn, Mkc, QueryMkeyIn, QueryMkeyOut,
};
use mlx5_ifc::prm::uar_pd::DeallocPdIn;
use mlx5_ifc::{Be64, Layout, Opcode, View, ViewMut};
use mlx5_sim::syndrome as syn;
use mlx5_sim::{DmaFaultKind, Mode, ObjectKind};

/// A CREATE_MKEY input: MTT mode over `pages` 4 KiB pages at `start`, `len` bytes.
fn mkey_in(
    pd: u32,
    start: u64,
    len: u64,
    pages: &[u64],
    f: impl FnOnce(&mut ViewMut<'_, Mkc>),
) -> Vec<u8> {
    let input = cmd::<CreateMkeyIn>(Opcode::CreateMkey, 0, |v| {
        let mut c = v.nested_mut(CreateMkeyIn::MEMORY_KEY_MKEY_ENTRY);
        c.set(Mkc::ACCESS_MODE_1_0, 1).unwrap();
        c.set(Mkc::LR, 1).unwrap();
        c.set(Mkc::RW, 1).unwrap();
        c.set(Mkc::PD, pd.into()).unwrap();
        c.set(Mkc::START_ADDR, start).unwrap();
        c.set(Mkc::LEN, len).unwrap();
        c.set(Mkc::MKEY_7_0, 0x11).unwrap();
        c.set(Mkc::LOG_PAGE_SIZE, 12).unwrap();
        c.set(
            Mkc::TRANSLATIONS_OCTWORD_SIZE,
            pages.len().div_ceil(2) as u64,
        )
        .unwrap();
        f(&mut c);
    });
    with_pas(input, pages)
}

#[test]
fn create_query_destroy() {
    let mut n = Node::new(Mode::Sync, 1);
    let dev = n.dev();
    let buf = dev.dma_alloc(3 * 4096, 4096).unwrap();
    let pages: Vec<u64> = (0..3).map(|k| (buf.iova + k * 4096) | 1).collect();
    // 8000 bytes starting 0x800 into a page span 3 pages.
    let input = mkey_in(n.fx.pd, 0x5000_0800, 8000, &pages, |_| {});
    let out = n.fx.p.ok(&input, CreateMkeyOut::BYTES);
    let index = View::<CreateMkeyOut>::new(&out)
        .unwrap()
        .get32(CreateMkeyOut::MKEY_INDEX);
    assert!(
        index >= 3,
        "indices 1 and 2 are the reserved lkey and the null mkey"
    );
    assert!(dev.live_objects().contains(&(ObjectKind::Mkey, index)));
    let q = cmd::<QueryMkeyIn>(Opcode::QueryMkey, 0, |v| {
        v.set(QueryMkeyIn::MKEY_INDEX, index.into()).unwrap();
    });
    let out = n.fx.p.ok(&q, QueryMkeyOut::BYTES);
    let o = View::<QueryMkeyOut>::new(&out).unwrap();
    let c = o.nested(QueryMkeyOut::MEMORY_KEY_MKEY_ENTRY);
    assert_eq!(
        (c.get(Mkc::START_ADDR), c.get(Mkc::LEN), c.get32(Mkc::PD)),
        (0x5000_0800, 8000, n.fx.pd)
    );
    assert_eq!(
        (c.get(Mkc::MKEY_7_0), c.get(Mkc::RW), c.get(Mkc::RR)),
        (0x11, 1, 0)
    );
    let mtt = o.bytes(QueryMkeyOut::BSF0_KLM0_PAS_MTT0_1);
    assert_eq!(
        Be64::from_bytes(mtt[..8].try_into().unwrap()).get(),
        pages[0] & !0xfff,
        "flag bits cleared"
    );
    // The PD is held while the mkey lives.
    let dealloc = cmd::<DeallocPdIn>(Opcode::DeallocPd, 0, |v| {
        v.set(DeallocPdIn::PD, n.fx.pd.into()).unwrap();
    });
    n.fx.expect(&dealloc, 0x10, (RES_BUSY, syn::PD_IN_USE));
    let destroy = |index: u32| {
        cmd::<DestroyMkeyIn>(Opcode::DestroyMkey, 0, |v| {
            v.set(DestroyMkeyIn::MKEY_INDEX, index.into()).unwrap();
        })
    };
    n.fx.p.ok(&destroy(index), 0x10);
    n.fx.expect(&destroy(index), 0x10, (BAD_RES, syn::UNKNOWN_MKEY));
    n.fx.expect(&q, QueryMkeyOut::BYTES, (BAD_RES, syn::UNKNOWN_MKEY));
    // A PA mkey over the whole address space needs no MTT.
    let pa = mkey_in(n.fx.pd, 0, 0, &[], |c| {
        c.set(Mkc::ACCESS_MODE_1_0, 0).unwrap();
        c.set(Mkc::LENGTH64, 1).unwrap();
    });
    n.fx.p.ok(&pa, CreateMkeyOut::BYTES);
    assert!(dev.dma_faults().is_empty());
}

#[test]
fn refusals() {
    let mut n = Node::new(Mode::Sync, 1);
    let dev = n.dev();
    let buf = dev.dma_alloc(2 * 4096, 4096).unwrap();
    let pages = [buf.iova, buf.iova + 4096];
    let pd = n.fx.pd;
    let odd = if buf.iova % 8192 == 0 {
        buf.iova + 4096
    } else {
        buf.iova
    };
    let cases: Vec<(Vec<u8>, (u8, u32))> = vec![
        (
            // 6 (`access_mode_4_2` 1, `access_mode_1_0` 2): an access mode the simulator does
            // not model (PA, MTT, KLMS, KSM, SW_ICM and MEMIC it does).
            mkey_in(pd, 0, 8192, &pages, |c| {
                c.set(Mkc::ACCESS_MODE_1_0, 2).unwrap();
                c.set(Mkc::ACCESS_MODE_4_2, 1).unwrap();
            }),
            (BAD_PARAM, syn::MKEY_ACCESS_MODE),
        ),
        (
            mkey_in(pd + 7, 0, 8192, &pages, |_| {}),
            (BAD_RES, syn::UNKNOWN_PD),
        ),
        (
            mkey_in(pd, 0, 8192, &pages, |c| {
                c.set(Mkc::LENGTH64, 1).unwrap();
            }),
            (BAD_PARAM, syn::MKEY_LENGTH),
        ),
        (
            mkey_in(pd, 0, 8192, &pages, |c| {
                c.set(Mkc::LOG_PAGE_SIZE, 31).unwrap();
            }),
            (BAD_PARAM, syn::MKEY_PAGE_SIZE),
        ),
        (
            // Relative to 4 KiB, as the queue contexts are: 0 is not a page size here.
            mkey_in(pd, 0, 8192, &pages, |c| {
                c.set(Mkc::LOG_PAGE_SIZE, 0).unwrap();
            }),
            (BAD_PARAM, syn::MKEY_PAGE_SIZE),
        ),
        (
            mkey_in(pd, 0, 8192, &pages, |c| {
                c.set(Mkc::LOG_PAGE_SIZE, 11).unwrap();
            }),
            (BAD_PARAM, syn::MKEY_PAGE_SIZE),
        ),
        (
            mkey_in(pd, 0, 8192, &pages, |c| {
                c.set(Mkc::TRANSLATIONS_OCTWORD_SIZE, 0).unwrap();
            }),
            (BAD_PARAM, syn::MKEY_MTT_SIZE),
        ),
        (
            mkey_in(pd, 0, 8192, &pages[..1], |c| {
                c.set(Mkc::TRANSLATIONS_OCTWORD_SIZE, 1).unwrap();
            }),
            (BAD_INLEN, syn::INLEN_MKEY_MTT),
        ),
        (
            // Two octwords announced (four entries), two entries carried.
            {
                let mut i = mkey_in(pd, 0, 8192, &pages, |_| {});
                let at = CreateMkeyIn::TRANSLATIONS_OCTWORD_ACTUAL_SIZE
                    .info
                    .byte_offset();
                i[at..at + 4].copy_from_slice(&2u32.to_be_bytes());
                i
            },
            (BAD_INLEN, syn::INLEN_MKEY_MTT),
        ),
        (
            mkey_in(pd, 0, 8192, &[odd], |c| {
                c.set(Mkc::LOG_PAGE_SIZE, 13).unwrap();
            }),
            (BAD_PARAM, syn::MKEY_MTT_UNALIGNED),
        ),
        (
            mkey_in(pd, 0, 8192, &[buf.iova, buf.iova + 2 * 4096], |_| {}),
            (BAD_PARAM, syn::MKEY_MTT_UNMAPPED),
        ),
    ];
    for (input, want) in cases {
        n.fx.expect(&input, CreateMkeyOut::BYTES, want);
    }
    let faults = dev.dma_faults();
    assert_eq!(faults.len(), 1);
    assert_eq!(faults[0].kind, DmaFaultKind::MttNotMapped);
    assert_eq!(faults[0].iova, buf.iova + 2 * 4096);
}

#[test]
fn the_mkey_limit() {
    let profile = common::quiet_by_name("cx5-tight").unwrap();
    let mut fx = common::queues::Fx::new(profile, Mode::Sync, 1);
    let dev = fx.dev();
    let buf = dev.dma_alloc(4096, 4096).unwrap();
    let input = mkey_in(fx.pd, 0, 4096, &[buf.iova], |_| {});
    // log_max_mkey 8: 255 usable, minus the reserved lkey and the null mkey.
    for _ in 0..253 {
        fx.p.ok(&input, CreateMkeyOut::BYTES);
    }
    fx.expect(
        &input,
        CreateMkeyOut::BYTES,
        (EXCEED_LIM, syn::MKEY_EXHAUSTED),
    );
}
