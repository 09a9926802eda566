//! EQs, CQs, SRQs, RMPs and QPs at the byte level: create, query, destroy, EQ/CQ doorbells,
//! references (RES_BUSY), numbering and limits, CREATE_QP checks, a run in threaded mode. The
//! buffer and parameter refusals of EQ/CQ/SRQ/RMP are in `refusals.rs`.

mod common;

use common::cmd;
use common::queues::*;
use mlx5_ifc::consts::{arm_state, qp_st, qp_state, rmp_state, rq_type};
use mlx5_ifc::prm::cq::{Cqc, CreateCqOut, DestroyCqIn, QueryCqIn, QueryCqOut};
use mlx5_ifc::prm::eq::{CreateEqOut, DestroyEqIn, Eqc, QueryEqIn, QueryEqOut};
use mlx5_ifc::prm::qp::{CreateQpIn, DestroyQpIn, Qpc, QueryQpIn, QueryQpOut};
use mlx5_ifc::prm::srq::{
    DestroyRmpIn, DestroySrqIn, QueryRmpIn, QueryRmpOut, QuerySrqIn, QuerySrqOut, Rmpc, Srqc, Wq,
};
use mlx5_ifc::prm::uar_pd::{DeallocPdIn, DeallocUarIn};
use mlx5_ifc::{Be32, Be64, Layout, Opcode, View};
use mlx5_sim::syndrome as syn;
use mlx5_sim::{DmaFaultKind, Mode, ObjectKind, Profile, FIRST_QPN};

const UAR_PAGE: u64 = 4096;

fn query_eq(fx: &mut Fx, eqn: u32) -> Vec<u8> {
    let input = cmd::<QueryEqIn>(Opcode::QueryEq, 0, |v| {
        v.set(QueryEqIn::EQ_NUMBER, eqn.into()).unwrap();
    });
    fx.p.ok(&input, QueryEqOut::BYTES + 8)
}

fn query_cq(fx: &mut Fx, cqn: u32) -> Vec<u8> {
    let input = cmd::<QueryCqIn>(Opcode::QueryCq, 0, |v| {
        v.set(QueryCqIn::CQN, cqn.into()).unwrap();
    });
    fx.p.ok(&input, QueryCqOut::BYTES + 8)
}

#[test]
fn eq_and_cq_create_query_doorbells_destroy() {
    let mut fx = Fx::cx5(Mode::Sync);
    let dev = fx.dev();
    let input = fx.eq_in(4, |c| {
        c.set(Eqc::INTR, 3).unwrap();
    });
    let out = fx.p.ok(&input, CreateEqOut::BYTES);
    let eqn = View::<CreateEqOut>::new(&out)
        .unwrap()
        .get32(CreateEqOut::EQ_NUMBER);
    assert_eq!(eqn, 0, "EQ numbers start at 0");
    let out = query_eq(&mut fx, eqn);
    let o = View::<QueryEqOut>::new(&out).unwrap();
    let c = o.nested(QueryEqOut::EQ_CONTEXT_ENTRY);
    assert_eq!(c.get(Eqc::LOG_EQ_SIZE), 4);
    assert_eq!(c.get32(Eqc::UAR_PAGE), fx.uar);
    assert_eq!(c.get(Eqc::INTR), 3);
    assert_eq!(c.get(Eqc::ST), arm_state::FIRED);
    assert_eq!(o.get(QueryEqOut::EVENT_BITMASK), 0x3f);
    assert_eq!(pas0(o.bytes(QueryEqOut::PAS)), fx.arena.iova);
    assert_eq!(
        dev.object_context(ObjectKind::Eq, eqn).unwrap(),
        c.as_bytes()[..Eqc::BYTES]
    );
    assert_eq!(dev.eq_armed(eqn), Some(false));

    // EQ doorbells: arm + CI, CI only.
    let uar = u64::from(fx.uar) * UAR_PAGE;
    dev.bar_write32(uar + 0x40, Be32::new(eqn << 24 | 5));
    assert_eq!(dev.eq_armed(eqn), Some(true));
    dev.bar_write32(uar + 0x48, Be32::new(eqn << 24 | 9));
    let ctx = dev.object_context(ObjectKind::Eq, eqn).unwrap();
    let c = View::<Eqc>::new(&ctx).unwrap();
    assert_eq!(
        (c.get(Eqc::CONSUMER_COUNTER), c.get(Eqc::ST)),
        (9, arm_state::ARMED)
    );
    assert!(dev.dma_faults().is_empty());
    // Unknown EQ, another UAR page, a 64-bit write: bad doorbells, nothing changes.
    dev.bar_write32(uar + 0x40, Be32::new(7 << 24 | 1));
    dev.bar_write32(uar + UAR_PAGE + 0x40, Be32::new(eqn << 24 | 1));
    dev.bar_write64(uar + 0x48, Be64::new(u64::from(eqn) << 56));
    assert_eq!(faults_of(&dev, DmaFaultKind::BadDoorbell), 3);
    let ctx = dev.object_context(ObjectKind::Eq, eqn).unwrap();
    assert_eq!(
        View::<Eqc>::new(&ctx).unwrap().get(Eqc::CONSUMER_COUNTER),
        9
    );

    // A CQ on it.
    let cqn = fx.create_cq(eqn);
    assert_eq!(cqn, 1, "CQ numbers start at 1");
    let out = query_cq(&mut fx, cqn);
    let o = View::<QueryCqOut>::new(&out).unwrap();
    let c = o.nested(QueryCqOut::CQ_CONTEXT);
    assert_eq!(c.get(Cqc::LOG_CQ_SIZE), 4);
    assert_eq!(c.get(Cqc::CQE_SZ), 0);
    assert_eq!(c.get32(Cqc::C_EQN_OR_APU_ELEMENT), eqn);
    assert_eq!(c.get32(Cqc::UAR_PAGE), fx.uar);
    assert_eq!(c.get(Cqc::DBR_ADDR), fx.dbr(1));
    assert_eq!((c.get(Cqc::CQ_PERIOD), c.get(Cqc::CQ_MAX_COUNT)), (16, 32));
    assert_eq!(c.get(Cqc::ST), arm_state::FIRED);
    assert_eq!(pas0(o.bytes(QueryCqOut::PAS)), fx.arena.iova);
    assert_eq!(dev.cq_armed(cqn), Some(false));

    // CQ arm doorbell: 64-bit, dword 0 = arm_sn | cmd | ci, dword 1 = cqn.
    let arm =
        |sn: u64, cmd: u64, ci: u64| Be64::new((sn << 28 | cmd << 24 | ci) << 32 | u64::from(cqn));
    dev.bar_write64(uar + 0x20, arm(1, 0, 7));
    assert_eq!(dev.cq_armed(cqn), Some(true));
    let ctx = dev.object_context(ObjectKind::Cq, cqn).unwrap();
    let c = View::<Cqc>::new(&ctx).unwrap();
    assert_eq!(
        (c.get(Cqc::CONSUMER_COUNTER), c.get(Cqc::ST)),
        (7, arm_state::ARMED)
    );
    dev.bar_write64(uar + 0x20, arm(2, 1, 8));
    let ctx = dev.object_context(ObjectKind::Cq, cqn).unwrap();
    assert_eq!(
        View::<Cqc>::new(&ctx).unwrap().get(Cqc::ST),
        arm_state::SOLICITED_ARMED
    );
    dev.bar_write32(uar + 0x20, Be32::new(1 << 28));
    dev.bar_write64(uar + 0x20, Be64::new(1 << 60 | 0x99));
    assert_eq!(faults_of(&dev, DmaFaultKind::BadDoorbell), 5);
    assert_eq!((dev.cq_armed(99), dev.eq_armed(99)), (None, None));
    assert_eq!(
        dev.uar_write_count(),
        9,
        "every UAR write is still recorded"
    );

    // A 128-byte-CQE CQ needs twice the buffer.
    let input = fx.cq_in(eqn, 5, |c| {
        c.set(Cqc::CQE_SZ, 1).unwrap();
    });
    let cqn2 = fx.p.ok(&input, 0x10);
    let cqn2 = View::<CreateCqOut>::new(&cqn2)
        .unwrap()
        .get32(CreateCqOut::CQN);
    assert_eq!(cqn2, 2);
    fx.destroy_cq(cqn2);
    fx.destroy_cq(cqn);
    fx.destroy_eq(eqn);
    let gone = cmd::<QueryEqIn>(Opcode::QueryEq, 0, |v| {
        v.set(QueryEqIn::EQ_NUMBER, eqn.into()).unwrap();
    });
    fx.expect(&gone, QueryEqOut::BYTES, (BAD_RES, syn::UNKNOWN_EQ));
    let dev = fx.finish();
    assert_eq!(dev.dma_faults().len(), 5);
}

#[test]
fn srq_at_issi_0_and_rmp_at_issi_1() {
    let mut fx = Fx::new(common::quiet(Profile::connectx5()), Mode::Sync, 0);
    let srqn = fx.create_srq();
    let input = cmd::<QuerySrqIn>(Opcode::QuerySrq, 0, |v| {
        v.set(QuerySrqIn::SRQN, srqn.into()).unwrap();
    });
    let out = fx.p.ok(&input, QuerySrqOut::BYTES + 8);
    let o = View::<QuerySrqOut>::new(&out).unwrap();
    let c = o.nested(QuerySrqOut::SRQ_CONTEXT_ENTRY);
    assert_eq!(
        (c.get(Srqc::LOG_SRQ_SIZE), c.get(Srqc::LOG_RQ_STRIDE)),
        (4, 1)
    );
    assert_eq!(c.get32(Srqc::PD), fx.pd);
    assert_eq!(c.get(Srqc::DBR_ADDR), fx.dbr(2));
    assert_eq!(pas0(o.bytes(QuerySrqOut::PAS)), fx.arena.iova);
    let rmp = fx.rmp_in(4, 5, |_| {});
    fx.expect(&rmp, 0x10, (BAD_OP, syn::CREATE_RMP_AT_ISSI_0));
    fx.destroy_srq(srqn);
    let again = cmd::<DestroySrqIn>(Opcode::DestroySrq, 0, |v| {
        v.set(DestroySrqIn::SRQN, srqn.into()).unwrap();
    });
    fx.expect(&again, 0x10, (BAD_RES, syn::UNKNOWN_SRQ));
    fx.finish_clean();

    let mut fx = Fx::cx5(Mode::Sync);
    let dev = fx.dev();
    let srq = fx.srq_in(4, 1, |_| {});
    fx.expect(&srq, 0x10, (BAD_OP, syn::CREATE_SRQ_AT_ISSI_1));
    let rmpn = fx.create_rmp();
    assert!(rmpn >= 1);
    let input = cmd::<QueryRmpIn>(Opcode::QueryRmp, 0, |v| {
        v.set(QueryRmpIn::RMPN, rmpn.into()).unwrap();
    });
    let out = fx.p.ok(&input, QueryRmpOut::BYTES + 8);
    let o = View::<QueryRmpOut>::new(&out).unwrap();
    let c = o.nested(QueryRmpOut::RMP_CONTEXT);
    let w = c.nested(Rmpc::WQ);
    assert_eq!(c.get(Rmpc::STATE), rmp_state::RDY);
    assert_eq!((w.get(Wq::LOG_WQ_SZ), w.get(Wq::LOG_WQ_STRIDE)), (4, 5));
    assert_eq!((w.get32(Wq::PD), w.get(Wq::DBR_ADDR)), (fx.pd, fx.dbr(3)));
    assert_eq!(pas0(w.bytes(Wq::PAS)), fx.arena.iova);
    assert_eq!(
        dev.object_context(ObjectKind::Rmp, rmpn).unwrap(),
        c.as_bytes()[..Rmpc::BYTES]
    );
    // An RMP is not an SRQ.
    let wrong = cmd::<DestroySrqIn>(Opcode::DestroySrq, 0, |v| {
        v.set(DestroySrqIn::SRQN, rmpn.into()).unwrap();
    });
    fx.expect(&wrong, 0x10, (BAD_RES, syn::UNKNOWN_SRQ));
    fx.destroy_rmp(rmpn);
    fx.finish_clean();
}

#[test]
fn references_make_destroy_and_dealloc_busy() {
    let mut fx = Fx::cx5(Mode::Sync);
    let dev = fx.dev();
    let eqn = fx.create_eq();
    let (cqa, cqb) = (fx.create_cq(eqn), fx.create_cq(eqn));
    let rmpn = fx.create_rmp();
    let input = fx.qp_in(qp_st::RC, cqa, |c| {
        c.set(Qpc::CQN_RCV, cqb.into()).unwrap();
        c.set(Qpc::RQ_TYPE, rq_type::SRQ).unwrap();
        c.set(Qpc::LOG_RQ_SIZE, 0).unwrap();
        c.set(Qpc::SRQN_RMPN_XRQN, rmpn.into()).unwrap();
    });
    let qpn = fx.create_qp_with(&input);
    assert_eq!(qpn, FIRST_QPN);
    assert_eq!(
        dev.live_objects(),
        vec![
            (ObjectKind::Uar, fx.uar),
            (ObjectKind::Pd, fx.pd),
            (ObjectKind::Eq, eqn),
            (ObjectKind::Cq, cqa),
            (ObjectKind::Cq, cqb),
            (ObjectKind::Rmp, rmpn),
            (ObjectKind::Qp, qpn),
        ]
    );
    let (pd, uar) = (fx.pd, fx.uar);
    let busy: Vec<(Vec<u8>, u32)> = vec![
        (
            cmd::<DestroyEqIn>(Opcode::DestroyEq, 0, |v| {
                drop(v.set(DestroyEqIn::EQ_NUMBER, eqn.into()))
            }),
            syn::EQ_IN_USE,
        ),
        (
            cmd::<DestroyCqIn>(Opcode::DestroyCq, 0, |v| {
                drop(v.set(DestroyCqIn::CQN, cqa.into()))
            }),
            syn::CQ_IN_USE,
        ),
        (
            cmd::<DestroyCqIn>(Opcode::DestroyCq, 0, |v| {
                drop(v.set(DestroyCqIn::CQN, cqb.into()))
            }),
            syn::CQ_IN_USE,
        ),
        (
            cmd::<DestroyRmpIn>(Opcode::DestroyRmp, 0, |v| {
                drop(v.set(DestroyRmpIn::RMPN, rmpn.into()))
            }),
            syn::SRQ_IN_USE,
        ),
        (
            cmd::<DeallocPdIn>(Opcode::DeallocPd, 0, |v| {
                drop(v.set(DeallocPdIn::PD, pd.into()))
            }),
            syn::PD_IN_USE,
        ),
        (
            cmd::<DeallocUarIn>(Opcode::DeallocUar, 0, |v| {
                drop(v.set(DeallocUarIn::UAR, uar.into()))
            }),
            syn::UAR_IN_USE,
        ),
    ];
    for (input, want) in &busy {
        fx.expect(input, 0x10, (RES_BUSY, *want));
    }
    // Destroy in dependency order; the EQ stays busy while any CQ reports to it.
    fx.destroy_qp(qpn);
    fx.destroy_rmp(rmpn);
    fx.destroy_cq(cqa);
    fx.expect(&busy[0].0, 0x10, (RES_BUSY, syn::EQ_IN_USE));
    fx.destroy_cq(cqb);
    fx.destroy_eq(eqn);
    fx.finish_clean();
}

#[test]
fn numbering_and_limits_on_cx5_tight() {
    let mut fx = Fx::new(common::quiet_by_name("cx5-tight").unwrap(), Mode::Sync, 1);
    // log_max_eq 7: 127 EQs, numbered from 0; a freed number is not handed out again at once.
    let eqs: Vec<u32> = (0..127).map(|_| fx.create_eq()).collect();
    assert_eq!(eqs, (0..127).collect::<Vec<u32>>());
    let input = fx.eq_in(4, |_| {});
    fx.expect(&input, 0x10, (EXCEED_LIM, syn::EQ_EXHAUSTED));
    fx.destroy_eq(5);
    assert_eq!(fx.create_eq(), 127);
    // log_max_cq 8: 255 CQs from 1.
    let cqs: Vec<u32> = (0..255).map(|_| fx.create_cq(0)).collect();
    assert_eq!((cqs[0], cqs[254]), (1, 255));
    let input = fx.cq_in(0, 4, |_| {});
    fx.expect(&input, 0x10, (EXCEED_LIM, syn::CQ_EXHAUSTED));
    // log_max_srq 4: 15 RMPs.
    let rmps: Vec<u32> = (0..15).map(|_| fx.create_rmp()).collect();
    let input = fx.rmp_in(4, 5, |_| {});
    fx.expect(&input, 0x10, (EXCEED_LIM, syn::SRQ_EXHAUSTED));
    // log_max_qp 8: 255 QPs from 0x100.
    let qps: Vec<u32> = (0..255).map(|_| fx.create_qp(qp_st::UD, 1)).collect();
    assert_eq!((qps[0], qps[254]), (FIRST_QPN, FIRST_QPN + 254));
    let input = fx.qp_in(qp_st::UD, 1, |_| {});
    fx.expect(&input, 0x10, (EXCEED_LIM, syn::QP_EXHAUSTED));
    for qpn in qps {
        fx.destroy_qp(qpn);
    }
    for rmpn in rmps {
        fx.destroy_rmp(rmpn);
    }
    for cqn in cqs {
        fx.destroy_cq(cqn);
    }
    for eqn in fx
        .dev()
        .live_objects()
        .iter()
        .filter(|o| o.0 == ObjectKind::Eq)
        .map(|o| o.1)
    {
        fx.destroy_eq(eqn);
    }
    fx.finish_clean();
}

#[test]
fn qp_create_checks_and_query() {
    let json = r#"{"base": "cx5-tight", "uc": 0}"#;
    let mut fx = Fx::new(
        common::quiet(Profile::from_json_str(json).unwrap()),
        Mode::Sync,
        1,
    );
    let dev = fx.dev();
    let eqn = fx.create_eq();
    let cqn = fx.create_cq(eqn);
    let rmpn = fx.create_rmp();
    let cases: Vec<(u64, Edit<Qpc>, (u8, u32))> = vec![
        // An XRC QP needs a live XRC domain; 7 (QP0, InfiniBand's SMI QP) is no RoCE type.
        (qp_st::XRC, |_| {}, (BAD_RES, syn::UNKNOWN_XRCD)),
        (7, |_| {}, (BAD_PARAM, syn::BAD_QP_ST)),
        (qp_st::UC, |_| {}, (BAD_PARAM, syn::QP_ST_NOT_SUPPORTED)),
        (
            qp_st::RC,
            |c| drop(c.set(Qpc::RQ_TYPE, 2)),
            (BAD_PARAM, syn::BAD_RQ_TYPE),
        ),
        (
            qp_st::RC,
            |c| drop(c.set(Qpc::LOG_RQ_STRIDE, 6)),
            (BAD_PARAM, syn::BAD_RQ_STRIDE),
        ),
        (
            qp_st::RC,
            |c| drop(c.set(Qpc::LOG_RQ_SIZE, 11)),
            (BAD_PARAM, syn::RQ_TOO_BIG),
        ),
        (
            qp_st::RC,
            |c| drop(c.set(Qpc::RQ_TYPE, rq_type::SRQ)),
            (BAD_PARAM, syn::RQ_SIZE_WITHOUT_RQ),
        ),
        (
            qp_st::RC,
            |c| drop(c.set(Qpc::RQ_TYPE, rq_type::ZERO_LEN)),
            (BAD_PARAM, syn::RQ_SIZE_WITHOUT_RQ),
        ),
        (
            qp_st::RC,
            |c| drop(c.set(Qpc::NO_SQ, 1)),
            (BAD_PARAM, syn::SQ_SIZE_WITH_NO_SQ),
        ),
        (
            qp_st::RC,
            |c| drop(c.set(Qpc::LOG_SQ_SIZE, 11)),
            (BAD_PARAM, syn::SQ_TOO_BIG),
        ),
        (
            qp_st::RC,
            |c| drop(c.set(Qpc::PD, 99)),
            (BAD_RES, syn::UNKNOWN_PD),
        ),
        (
            qp_st::RC,
            |c| drop(c.set(Qpc::CQN_SND, 99)),
            (BAD_RES, syn::UNKNOWN_CQ),
        ),
        (
            qp_st::RC,
            |c| drop(c.set(Qpc::CQN_RCV, 99)),
            (BAD_RES, syn::UNKNOWN_CQ),
        ),
        (
            qp_st::RC,
            |c| {
                c.set(Qpc::RQ_TYPE, rq_type::SRQ).unwrap();
                c.set(Qpc::LOG_RQ_SIZE, 0).unwrap();
                c.set(Qpc::SRQN_RMPN_XRQN, 99).unwrap();
            },
            (BAD_RES, syn::UNKNOWN_SRQ),
        ),
        (
            qp_st::RC,
            |c| drop(c.set(Qpc::UAR_PAGE, 3)),
            (BAD_RES, syn::UNKNOWN_UAR),
        ),
        (
            qp_st::RC,
            |c| drop(c.set(Qpc::DBR_ADDR, c.get(Qpc::DBR_ADDR) + 4)),
            (BAD_PARAM, syn::DBR_UNALIGNED),
        ),
    ];
    for (st, f, want) in cases {
        let input = fx.qp_in(st, cqn, f);
        fx.expect(&input, 0x10, want);
    }
    // A 17 KiB buffer (1 KiB RQ + 16 KiB SQ) needs 5 pages; 4 are too few.
    let big = fx.qp_in(qp_st::RC, cqn, |c| drop(c.set(Qpc::LOG_SQ_SIZE, 8)));
    assert_eq!(big.len(), CreateQpIn::PAS.offset() + 5 * 8);
    fx.expect(
        &big[..big.len() - 8],
        0x10,
        (BAD_INLEN, syn::INLEN_QUEUE_PAS),
    );
    // A buffer that starts 63/64 into its first page (`page_offset` 63: Linux's mlx5_ib gives
    // one for a user buffer not aligned to the page size it chose) spills into a sixth page:
    // five entries are too few, six are taken.
    let late = fx.qp_in(qp_st::RC, cqn, |c| {
        c.set(Qpc::LOG_SQ_SIZE, 8).unwrap();
        c.set(Qpc::PAGE_OFFSET, 63).unwrap();
    });
    fx.expect(&late, 0x10, (BAD_INLEN, syn::INLEN_QUEUE_PAS));
    let mut late6 = late.clone();
    let first = CreateQpIn::PAS.offset();
    late6.extend_from_slice(&late[first..first + 8]);
    let late = fx.create_qp_with(&late6);
    // QUERY_QP with the output Linux 6.1 asks for (0x110 bytes: through the QP context and the
    // reserved words after it, no room for the PAS) answers; one byte less is refused.
    let query = cmd::<QueryQpIn>(Opcode::QueryQp, 0, |v| {
        drop(v.set(QueryQpIn::QPN, late.into()))
    });
    let (st, out) = fx.run(&query, 0x110);
    assert_eq!(st, (0, 0), "QUERY_QP with 0x110 bytes of output");
    let q = View::<QueryQpOut>::new(&out).err();
    assert!(q.is_some(), "0x110 bytes are shorter than the whole layout");
    let qpc = &out[QueryQpOut::QPC.offset()..QueryQpOut::QPC.offset() + Qpc::BYTES];
    assert_eq!(View::<Qpc>::new(qpc).unwrap().get(Qpc::PAGE_OFFSET), 63);
    fx.expect(&query, 0x10f, (BAD_OUTLEN, syn::OUTLEN_BELOW_LAYOUT));
    let big = fx.create_qp_with(&big);
    // Neither RQ nor SQ: no PAS at all.
    let bare = fx.qp_in(qp_st::UD, cqn, |c| {
        c.set(Qpc::RQ_TYPE, rq_type::ZERO_LEN).unwrap();
        c.set(Qpc::LOG_RQ_SIZE, 0).unwrap();
        c.set(Qpc::NO_SQ, 1).unwrap();
        c.set(Qpc::LOG_SQ_SIZE, 0).unwrap();
    });
    assert_eq!(bare.len(), CreateQpIn::PAS.offset());
    let bare = fx.create_qp_with(&bare);
    // An RC QP on the RMP; attributes of later transitions given at create are not kept.
    let input = fx.qp_in(qp_st::RC, cqn, |c| {
        c.set(Qpc::RQ_TYPE, rq_type::SRQ).unwrap();
        c.set(Qpc::LOG_RQ_SIZE, 0).unwrap();
        c.set(Qpc::SRQN_RMPN_XRQN, rmpn.into()).unwrap();
        c.set(Qpc::MTU, 3).unwrap();
        c.set(Qpc::REMOTE_QPN, 0x55).unwrap();
        c.set(Qpc::STATE, qp_state::RTS).unwrap();
    });
    let qpn = fx.create_qp_with(&input);
    assert_eq!(dev.qp_state(qpn), Some(qp_state::RST as u8));
    let out = fx.query_qp(qpn);
    let o = View::<QueryQpOut>::new(&out).unwrap();
    let c = o.nested(QueryQpOut::QPC);
    assert_eq!(c.get(Qpc::STATE), qp_state::RST);
    assert_eq!(c.get(Qpc::ST), qp_st::RC);
    assert_eq!(c.get(Qpc::PM_STATE), 3);
    assert_eq!(c.get32(Qpc::PD), fx.pd);
    assert_eq!((c.get32(Qpc::CQN_SND), c.get32(Qpc::CQN_RCV)), (cqn, cqn));
    assert_eq!(
        (c.get(Qpc::RQ_TYPE), c.get32(Qpc::SRQN_RMPN_XRQN)),
        (rq_type::SRQ, rmpn)
    );
    assert_eq!((c.get(Qpc::LOG_RQ_SIZE), c.get(Qpc::LOG_SQ_SIZE)), (0, 4));
    assert_eq!(c.get(Qpc::DBR_ADDR), fx.dbr(4));
    assert_eq!(c.get32(Qpc::UAR_PAGE), fx.uar);
    assert_eq!(c.get(Qpc::USER_INDEX), 0x77);
    assert_eq!((c.get(Qpc::MTU), c.get(Qpc::REMOTE_QPN)), (0, 0));
    assert_eq!(
        pas0(o.bytes(QueryQpOut::QP_PAS_OR_QPC_EXT_AND_PAS)),
        fx.arena.iova
    );
    assert_eq!(
        dev.object_context(ObjectKind::Qp, qpn).unwrap(),
        c.as_bytes()[..Qpc::BYTES]
    );
    assert_eq!(dev.qp_state(1), None);
    for q in [qpn, big, bare, late] {
        fx.destroy_qp(q);
    }
    let gone = cmd::<DestroyQpIn>(Opcode::DestroyQp, 0, |v| {
        drop(v.set(DestroyQpIn::QPN, qpn.into()))
    });
    fx.expect(&gone, 0x10, (BAD_RES, syn::UNKNOWN_QP));
    fx.destroy_rmp(rmpn);
    fx.destroy_cq(cqn);
    fx.destroy_eq(eqn);
    fx.finish_clean();
}

/// Everything once more with the firmware on its own thread.
#[test]
fn objects_in_threaded_mode() {
    let mut fx = Fx::cx5(Mode::Threaded);
    let dev = fx.dev();
    let eqn = fx.create_eq();
    let cqn = fx.create_cq(eqn);
    let rmpn = fx.create_rmp();
    let uar = u64::from(fx.uar) * UAR_PAGE;
    dev.bar_write32(uar + 0x40, Be32::new(eqn << 24));
    dev.bar_write64(uar + 0x20, Be64::new(u64::from(cqn)));
    assert_eq!(
        (dev.eq_armed(eqn), dev.cq_armed(cqn)),
        (Some(true), Some(true))
    );
    let mut qps = Vec::new();
    for st in [qp_st::RC, qp_st::UC, qp_st::UD] {
        let qpn = fx.create_qp(st, cqn);
        fx.bring_to_rts(qpn, st);
        assert_eq!(dev.qp_state(qpn), Some(qp_state::RTS as u8));
        qps.push(qpn);
    }
    let input = fx.qp_in(qp_st::RC, cqn, |c| {
        c.set(Qpc::RQ_TYPE, rq_type::SRQ).unwrap();
        c.set(Qpc::LOG_RQ_SIZE, 0).unwrap();
        c.set(Qpc::SRQN_RMPN_XRQN, rmpn.into()).unwrap();
    });
    qps.push(fx.create_qp_with(&input));
    for qpn in qps {
        fx.destroy_qp(qpn);
    }
    fx.destroy_rmp(rmpn);
    fx.destroy_cq(cqn);
    fx.destroy_eq(eqn);
    fx.finish_clean();
}
