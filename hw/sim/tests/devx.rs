//! DevX, byte by byte and independent of the driver (facts: docs/fields.md, "DevX"): user
//! contexts and the uid every command carries — objects owned by the uid that made them, only
//! that uid (or the kernel's 0) changing or destroying them, a context that owns objects not
//! destroyed, a uid that is no context refused — and user memory: CREATE_UMEM's checks, a DevX
//! CQ in umems (its buffer and doorbell record), umems held while a CQ lives in them, a queue
//! past a umem's end refused, and a DevX RC QP in umems carrying traffic both ways.

mod common;

use common::queues::{with_pas, Fx};
use common::{bare, cmd, quiet};
use mlx5_ifc::prm::caps::CmdHcaCap;
use mlx5_ifc::prm::cq::{Cqc, CreateCqIn, CreateCqOut, DestroyCqIn, QueryCqIn, QueryCqOut};
use mlx5_ifc::prm::devx::{
    CreateUctxIn, CreateUctxOut, CreateUmemIn, CreateUmemOut, DestroyUctxIn, DestroyUmemIn, Uctx,
    Umem,
};
use mlx5_ifc::prm::uar_pd::{AllocPdIn, AllocPdOut, DeallocPdIn};
use mlx5_ifc::{CmdInHeader, CmdStatus, Layout, Opcode, View, ViewMut};
use mlx5_sim::syndrome as syn;
use mlx5_sim::{Mode, Profile};

const BAD_PARAM: u8 = CmdStatus::BadParam.raw();
const BAD_RES: u8 = CmdStatus::BadRes.raw();
const RES_BUSY: u8 = CmdStatus::ResBusy.raw();

/// The ConnectX-5 profile: DevX on, 2^10 user contexts, 2^20 umems.
fn fx() -> Fx {
    Fx::new(quiet(Profile::connectx5()), Mode::Sync, 1)
}

/// `input` with `uid` in its header.
fn as_uid(mut input: Vec<u8>, uid: u16) -> Vec<u8> {
    ViewMut::<CmdInHeader>::new(&mut input)
        .unwrap()
        .set(CmdInHeader::UID, uid.into())
        .unwrap();
    input
}

fn create_uctx(fx: &mut Fx, cap: u64) -> u16 {
    let input = cmd::<CreateUctxIn>(Opcode::CreateUctx, 0, |v| {
        v.nested_mut(CreateUctxIn::UCTX)
            .set(Uctx::CAP, cap)
            .unwrap();
    });
    let out = fx.p.ok(&input, CreateUctxOut::BYTES);
    View::<CreateUctxOut>::new(&out)
        .unwrap()
        .get(CreateUctxOut::UID) as u16
}

fn destroy_uctx(uid: u16) -> Vec<u8> {
    cmd::<DestroyUctxIn>(Opcode::DestroyUctx, 0, |v| {
        v.set(DestroyUctxIn::UID, uid.into()).unwrap();
    })
}

fn dealloc_pd(pd: u32, uid: u16) -> Vec<u8> {
    as_uid(
        cmd::<DeallocPdIn>(Opcode::DeallocPd, 0, |v| {
            v.set(DeallocPdIn::PD, pd.into()).unwrap();
        }),
        uid,
    )
}

fn alloc_pd(fx: &mut Fx, uid: u16) -> u32 {
    let out = fx.p.ok(
        &as_uid(bare::<AllocPdIn>(Opcode::AllocPd, 0), uid),
        AllocPdOut::BYTES,
    );
    View::<AllocPdOut>::new(&out).unwrap().get32(AllocPdOut::PD)
}

#[test]
fn objects_belong_to_the_uid_that_made_them() {
    let mut fx = fx();
    let caps = fx.p.query_cap(0, 1);
    let g = View::<CmdHcaCap>::new(&caps).unwrap();
    assert_eq!(g.get(CmdHcaCap::LOG_MAX_UCTX), 10);
    assert_eq!(g.get(CmdHcaCap::UCTX_CAP), 0);
    let (a, b) = (create_uctx(&mut fx, 0), create_uctx(&mut fx, 0));
    assert!(a != 0 && b != 0 && a != b && a != 0xffff && b != 0xffff);

    let pd = alloc_pd(&mut fx, a);
    // To another context the PD is not there; its owner may not go while it owns it.
    fx.expect(&dealloc_pd(pd, b), 0x10, (BAD_RES, syn::UNKNOWN_PD));
    fx.expect(&destroy_uctx(a), 0x10, (RES_BUSY, syn::UCTX_IN_USE));
    fx.p.ok(&dealloc_pd(pd, a), 0x10);
    fx.p.ok(&destroy_uctx(a), 0x10);
    fx.expect(&destroy_uctx(a), 0x10, (BAD_RES, syn::UNKNOWN_UCTX));
    // A uid that is no context: refused whatever the command.
    for uid in [a, 0x1234] {
        fx.expect(
            &as_uid(bare::<AllocPdIn>(Opcode::AllocPd, 0), uid),
            0x10,
            (BAD_PARAM, syn::BAD_UID),
        );
    }
    // The kernel's uid 0 may destroy a context's object; the shared uid is a valid one.
    let pd = alloc_pd(&mut fx, b);
    fx.p.ok(&dealloc_pd(pd, 0), 0x10);
    let shared = alloc_pd(&mut fx, 0xffff);
    fx.p.ok(&dealloc_pd(shared, 0xffff), 0x10);
    fx.p.ok(&destroy_uctx(b), 0x10);
    // `cap` bits the device does not offer.
    let input = cmd::<CreateUctxIn>(Opcode::CreateUctx, 0, |v| {
        v.nested_mut(CreateUctxIn::UCTX).set(Uctx::CAP, 1).unwrap();
    });
    fx.expect(&input, 0x10, (BAD_PARAM, syn::UCTX_CAP));
}

/// CREATE_UMEM of `pages` (4 KiB each, the region `offset` into the first), as uid `uid`.
fn umem_in(uid: u16, pages: &[u64], offset: u64, log_page: u64) -> Vec<u8> {
    let input = as_uid(
        cmd::<CreateUmemIn>(Opcode::CreateUmem, 0, |v| {
            let mut u = v.nested_mut(CreateUmemIn::UMEM);
            u.set(Umem::LOG_PAGE_SIZE, log_page).unwrap();
            u.set(Umem::PAGE_OFFSET, offset).unwrap();
            u.set(Umem::NUM_OF_MTT, pages.len() as u64).unwrap();
        }),
        uid,
    );
    // The MTT entries carry the read and write enables in bits 1:0, as Linux writes them.
    let entries: Vec<u64> = pages.iter().map(|p| p | 3).collect();
    with_pas(input, &entries)
}

fn create_umem(fx: &mut Fx, input: &[u8]) -> u32 {
    let out = fx.p.ok(input, CreateUmemOut::BYTES);
    View::<CreateUmemOut>::new(&out)
        .unwrap()
        .get32(CreateUmemOut::UMEM_ID)
}

fn destroy_umem(uid: u16, id: u32) -> Vec<u8> {
    as_uid(
        cmd::<DestroyUmemIn>(Opcode::DestroyUmem, 0, |v| {
            v.set(DestroyUmemIn::UMEM_ID, id.into()).unwrap();
        }),
        uid,
    )
}

/// A DevX CREATE_CQ of 64 CQEs: buffer at `at` of umem `buf`, doorbell record at `dbr_at` of
/// umem `dbr`.
fn umem_cq_in(
    fx: &Fx,
    eqn: u32,
    uid: u16,
    (buf, at): (u32, u64),
    (dbr, dbr_at): (u32, u64),
) -> Vec<u8> {
    let uar = fx.uar;
    as_uid(
        cmd::<CreateCqIn>(Opcode::CreateCq, 0, |v| {
            v.set(CreateCqIn::CQ_UMEM_VALID, 1).unwrap();
            v.set(CreateCqIn::CQ_UMEM_ID, buf.into()).unwrap();
            v.set(CreateCqIn::CQ_UMEM_OFFSET, at).unwrap();
            let mut c = v.nested_mut(CreateCqIn::CQ_CONTEXT);
            c.set(Cqc::LOG_CQ_SIZE, 6).unwrap();
            c.set(Cqc::UAR_PAGE, uar.into()).unwrap();
            c.set(Cqc::C_EQN_OR_APU_ELEMENT, eqn.into()).unwrap();
            c.set(Cqc::DBR_UMEM_VALID, 1).unwrap();
            c.set(Cqc::DBR_UMEM_ID, dbr.into()).unwrap();
            c.set(Cqc::DBR_ADDR, dbr_at).unwrap();
        }),
        uid,
    )
}

#[test]
fn a_devx_cq_lives_in_umems_that_it_holds() {
    let mut fx = fx();
    let uid = create_uctx(&mut fx, 0);
    let eqn = fx.create_eq();
    let dev = fx.p.dev.clone();
    let buf = dev.dma_alloc(3 * 4096, 4096).unwrap();
    let db = dev.dma_alloc(4096, 4096).unwrap();
    let pages: Vec<u64> = (0..3).map(|k| buf.iova + k * 4096).collect();

    // CREATE_UMEM's checks: a umem belongs to a context; the offset inside the first page; at
    // least one page; pages aligned and mapped.
    for (input, want) in [
        (umem_in(0, &pages, 0, 0), (BAD_PARAM, syn::BAD_UID)),
        (umem_in(uid, &pages, 4096, 0), (BAD_PARAM, syn::UMEM_PARAM)),
        (umem_in(uid, &[], 0, 0), (BAD_PARAM, syn::UMEM_PARAM)),
        (
            umem_in(uid, &[buf.iova + 0x800], 0, 0),
            (BAD_PARAM, syn::QUEUE_PAS_UNALIGNED),
        ),
        (
            umem_in(uid, &[0x7fff_0000_0000], 0, 0),
            (BAD_PARAM, syn::QUEUE_PAS_UNMAPPED),
        ),
    ] {
        fx.expect(&input, 0x10, want);
    }

    // The CQ's 4 KiB of CQEs start 1 KiB into the second page of a umem that itself starts
    // 0x200 into its first; its doorbell record is 8 bytes at 0x48 of a one-page umem.
    let big = create_umem(&mut fx, &umem_in(uid, &pages, 0x200, 0));
    let small = create_umem(&mut fx, &umem_in(uid, &[db.iova], 0, 0));
    let at = 4096 - 0x200 + 1024;
    // Past the umem's end: refused.
    fx.expect(
        &umem_cq_in(&fx, eqn, uid, (big, 3 * 4096 - 0x200 - 2048), (small, 0x48)),
        0x10,
        (BAD_PARAM, syn::UMEM_RANGE),
    );
    let out = fx.p.ok(
        &umem_cq_in(&fx, eqn, uid, (big, at), (small, 0x48)),
        CreateCqOut::BYTES,
    );
    let cqn = View::<CreateCqOut>::new(&out)
        .unwrap()
        .get32(CreateCqOut::CQN);
    // As the device holds it: pages 2 and 3 of 4 KiB, 16/64ths in; the record's IOVA.
    let q = fx.p.ok(
        &cmd::<QueryCqIn>(Opcode::QueryCq, 0, |v| {
            v.set(QueryCqIn::CQN, cqn.into()).unwrap();
        }),
        QueryCqOut::BYTES + 16,
    );
    let ctx = View::<QueryCqOut>::new(&q).unwrap();
    let c = ctx.nested(QueryCqOut::CQ_CONTEXT);
    assert_eq!(
        (
            c.get(Cqc::LOG_PAGE_SIZE),
            c.get(Cqc::PAGE_OFFSET),
            c.get(Cqc::DBR_ADDR)
        ),
        (0, 16, db.iova + 0x48)
    );
    assert_eq!(
        q[QueryCqOut::BYTES..QueryCqOut::BYTES + 16],
        [
            (buf.iova + 4096).to_be_bytes(),
            (buf.iova + 8192).to_be_bytes()
        ]
        .concat()
    );
    // The umems stay while the CQ lives in them; another context cannot reach them at all,
    // nor query the CQ.
    fx.expect(&destroy_umem(uid, big), 0x10, (RES_BUSY, syn::UMEM_IN_USE));
    let other = create_uctx(&mut fx, 0);
    let query_as = |u: u16| {
        as_uid(
            cmd::<QueryCqIn>(Opcode::QueryCq, 0, |v| {
                v.set(QueryCqIn::CQN, cqn.into()).unwrap();
            }),
            u,
        )
    };
    fx.expect(
        &query_as(other),
        QueryCqOut::BYTES + 16,
        (BAD_RES, syn::UNKNOWN_CQ),
    );
    fx.p.ok(&query_as(uid), QueryCqOut::BYTES + 16);
    fx.expect(
        &destroy_umem(other, small),
        0x10,
        (BAD_RES, syn::UNKNOWN_UMEM),
    );
    fx.p.ok(
        &as_uid(
            cmd::<DestroyCqIn>(Opcode::DestroyCq, 0, |v| {
                v.set(DestroyCqIn::CQN, cqn.into()).unwrap();
            }),
            uid,
        ),
        0x10,
    );
    for id in [big, small] {
        fx.p.ok(&destroy_umem(uid, id), 0x10);
    }
    fx.p.ok(&destroy_uctx(uid), 0x10);
    fx.p.ok(&destroy_uctx(other), 0x10);
}

/// A device without DevX (`log_max_uctx` 0): no user contexts, and a command with a uid
/// refused.
#[test]
fn without_devx_there_are_no_user_contexts() {
    let p = Profile::from_json_str(r#"{"log_max_uctx": 0}"#).unwrap();
    let mut fx = Fx::new(quiet(p), Mode::Sync, 1);
    let caps = fx.p.query_cap(0, 1);
    assert_eq!(
        View::<CmdHcaCap>::new(&caps)
            .unwrap()
            .get(CmdHcaCap::LOG_MAX_UCTX),
        0
    );
    let input = bare::<CreateUctxIn>(Opcode::CreateUctx, 0);
    fx.expect(&input, 0x10, (CmdStatus::BadOp.raw(), syn::UNKNOWN_OPCODE));
    fx.expect(
        &as_uid(bare::<AllocPdIn>(Opcode::AllocPd, 0), 1),
        0x10,
        (BAD_PARAM, syn::BAD_UID),
    );
}

/// A DevX RC QP whose work queues and doorbell record live in umems (`wq_umem_valid`,
/// `dbr_umem_valid`), as rdma-core's DevX test makes one: the device takes its receive and send
/// WQEs from the umem's page and its doorbell record through the other umem, and traffic runs
/// both ways with a plain QP on another device. The kernel's uid 0 moves it through its states
/// (Linux modifies user objects with their uid; uid 0 may touch anything); its umems are held
/// until it is destroyed.
#[test]
fn a_devx_qp_in_umems_carries_traffic() {
    use common::datapath::{fill, pair, read, Qp, Seg};
    use mlx5_ifc::consts::qp_st::RC;
    use mlx5_ifc::prm::qp::{CreateQpIn, CreateQpOut, DestroyQpIn, Qpc};
    let (_fabric, mut a, mut b) = pair(Mode::Sync);
    let uid = create_uctx(&mut a.fx, 0);
    let dev = a.dev();
    let (buf, dbr) = (
        dev.dma_alloc(4096, 4096).unwrap(),
        dev.dma_alloc(4096, 4096).unwrap(),
    );
    let wq = create_umem(&mut a.fx, &umem_in(uid, &[buf.iova], 0, 0));
    let db = create_umem(&mut a.fx, &umem_in(uid, &[dbr.iova], 0, 0));
    let (pd, uar, cqn) = (a.fx.pd, a.fx.uar, a.cqn);
    let input = as_uid(
        cmd::<CreateQpIn>(Opcode::CreateQp, 0, |v| {
            v.set(CreateQpIn::WQ_UMEM_VALID, 1).unwrap();
            v.set(CreateQpIn::WQ_UMEM_ID, wq.into()).unwrap();
            let mut c = v.nested_mut(CreateQpIn::QPC);
            for (f, x) in [
                (Qpc::ST, RC),
                (Qpc::PM_STATE, 3),
                (Qpc::PD, pd.into()),
                (Qpc::UAR_PAGE, uar.into()),
                (Qpc::CQN_SND, cqn.into()),
                (Qpc::CQN_RCV, cqn.into()),
                (Qpc::LOG_RQ_SIZE, 4),
                (Qpc::LOG_RQ_STRIDE, 2),
                (Qpc::LOG_SQ_SIZE, 4),
                (Qpc::DBR_UMEM_VALID, 1),
                (Qpc::DBR_UMEM_ID, db.into()),
                (Qpc::DBR_ADDR, 0),
            ] {
                c.set(f, x).unwrap();
            }
        }),
        uid,
    );
    let out = a.fx.p.ok(&input, CreateQpOut::BYTES);
    let qpn = View::<CreateQpOut>::new(&out)
        .unwrap()
        .get32(CreateQpOut::QPN);
    let mut qa = Qp {
        qpn,
        st: RC,
        buf,
        dbr,
        sq_bbs: 16,
        rq_wqes: 16,
        rq_stride: 64,
        sq_pi: 0,
        rq_pi: 0,
        bf_half: 0,
    };
    let mut qb = b.create_qp(RC);
    let (ipa, ipb) = (a.ip, b.ip);
    a.connect(&qa, ipb, qb.qpn, |_| {});
    b.connect(&qb, ipa, qa.qpn, |_| {});

    let (ma, mb) = (
        a.reg_mr(8192, false, false, false),
        b.reg_mr(8192, false, false, false),
    );
    // From the DevX QP (its send queue in the umem) ...
    let sent = fill(&a.dev(), &ma, 5);
    b.post_recv(&mut qb, &[(4096, mb.key, mb.va(0))]);
    a.post_send(
        &mut qa,
        0x0a,
        0x08,
        [0; 4],
        &[Seg::Data(3000, ma.key, ma.va(0))],
    );
    assert_eq!(b.poll().map(|c| (c.opcode, c.byte_cnt)), Some((2, 3000)));
    assert_eq!(a.poll().map(|c| c.opcode), Some(0));
    assert_eq!(read(&b.dev(), &mb, 0, 3000), sent[..3000]);
    // ... and to it (its receive queue in the umem).
    let back = fill(&b.dev(), &mb, 9);
    a.post_recv(&mut qa, &[(4096, ma.key, ma.va(4096))]);
    b.post_send(
        &mut qb,
        0x0a,
        0x08,
        [0; 4],
        &[Seg::Data(2000, mb.key, mb.va(0))],
    );
    assert_eq!(
        a.poll().map(|c| (c.opcode, c.qpn, c.byte_cnt)),
        Some((2, qpn, 2000))
    );
    assert_eq!(b.poll().map(|c| c.opcode), Some(0));
    assert_eq!(read(&a.dev(), &ma, 4096, 2000), back[..2000]);

    // The umems stay while the QP lives in them.
    a.fx.expect(&destroy_umem(uid, wq), 0x10, (RES_BUSY, syn::UMEM_IN_USE));
    a.fx.p.ok(
        &as_uid(
            cmd::<DestroyQpIn>(Opcode::DestroyQp, 0, |v| {
                v.set(DestroyQpIn::QPN, qpn.into()).unwrap();
            }),
            uid,
        ),
        0x10,
    );
    for id in [wq, db] {
        a.fx.p.ok(&destroy_umem(uid, id), 0x10);
    }
    a.fx.p.ok(&destroy_uctx(uid), 0x10);
}
