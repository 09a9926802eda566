//! The Ethernet objects Linux's mlx5e creates, at the byte level: a transport domain, a TIS, an
//! RQ behind an RQT behind a TIR, an SQ, a Q counter, and receive flow steering (a root table,
//! a group, an entry forwarding to the TIR, a table forwarding on miss) — each refusal with its
//! syndrome, references that keep used objects alive (RES_BUSY), and a clean teardown.

mod common;

use common::cmd;
use common::ethernet::{self as eth, *};
use common::queues::*;
use mlx5_ifc::prm::cq::DestroyCqIn;
use mlx5_ifc::prm::eq::DestroyEqIn;
use mlx5_ifc::prm::flow::{
    CreateFlowGroupOut, CreateFlowTableOut, DeleteFteIn, DestroyFlowGroupIn, DestroyFlowTableIn,
    SetFlowTableRootIn,
};
use mlx5_ifc::prm::sq_rq::{
    AllocQCounterOut, CreateRqOut, CreateSqOut, DeallocQCounterIn, DestroyRqIn, DestroySqIn,
    ModifyRqIn, ModifySqIn, QueryRqIn, QueryRqOut, Rqc, Sqc,
};
use mlx5_ifc::prm::srq::Wq;
use mlx5_ifc::prm::tir::{
    AllocTransportDomainOut, CreateRqtOut, CreateTirIn, CreateTirOut, CreateTisIn, CreateTisOut,
    DeallocTransportDomainIn, DestroyRqtIn, DestroyTirIn, DestroyTisIn, Tirc, Tisc,
};
use mlx5_ifc::{CmdStatus, Opcode, View, ViewMut};
use mlx5_sim::syndrome as syn;
use mlx5_sim::Mode;

const BAD_PARAM: u8 = CmdStatus::BadParam.raw();
const BAD_RES: u8 = CmdStatus::BadRes.raw();
const RES_BUSY: u8 = CmdStatus::ResBusy.raw();

/// The objects test's queues: one arena page and doorbell record 3 (RQ) or 4 (SQ).
fn rq_in(fx: &Fx, cqn: u32, f: impl FnOnce(&mut ViewMut<'_, Rqc>)) -> Vec<u8> {
    eth::rq_in(&Ring::in_arena(fx, 3), cqn, f)
}

fn sq_in(fx: &Fx, cqn: u32, tis: u32, f: impl FnOnce(&mut ViewMut<'_, Sqc>)) -> Vec<u8> {
    eth::sq_in(&Ring::in_arena(fx, 4), cqn, tis, f)
}

#[test]
fn mlx5e_objects_and_steering_with_their_refusals() {
    let mut fx = Fx::cx5(Mode::Sync);
    let out = fx.p.ok(
        &common::bare::<mlx5_ifc::prm::tir::AllocTransportDomainIn>(
            Opcode::AllocTransportDomain,
            0,
        ),
        0x10,
    );
    let td = View::<AllocTransportDomainOut>::new(&out)
        .unwrap()
        .get32(AllocTransportDomainOut::TRANSPORT_DOMAIN);
    let tis_in = |td: u32| {
        cmd::<CreateTisIn>(Opcode::CreateTis, 0, |v| {
            let mut c = v.nested_mut(CreateTisIn::CTX);
            c.set(Tisc::TRANSPORT_DOMAIN, td.into()).unwrap();
        })
    };
    fx.expect(&tis_in(td + 100), 0x10, (BAD_RES, syn::UNKNOWN_TD));
    let tis = made::<CreateTisOut>(&mut fx, &tis_in(td), CreateTisOut::TISN);
    let eqn = fx.create_eq();
    let cqn = fx.create_cq(eqn);
    let out = fx.p.ok(
        &common::bare::<mlx5_ifc::prm::sq_rq::AllocQCounterIn>(Opcode::AllocQCounter, 0),
        0x10,
    );
    let counter = View::<AllocQCounterOut>::new(&out)
        .unwrap()
        .get32(AllocQCounterOut::COUNTER_SET_ID);
    assert!(counter >= 1);

    // RQ: created in RST only, cyclic only; moved RST -> RDY from the state it is in.
    let bad = rq_in(&fx, cqn, |c| {
        c.set(Rqc::STATE, 1).unwrap();
    });
    fx.expect(&bad, 0x10, (BAD_PARAM, syn::WQ_STATE));
    let bad = rq_in(&fx, cqn, |c| {
        c.nested_mut(Rqc::WQ).set(Wq::WQ_TYPE, 0).unwrap();
    });
    fx.expect(&bad, 0x10, (BAD_PARAM, syn::BAD_WQ_TYPE));
    let rq = rq_in(&fx, cqn, |c| {
        c.set(Rqc::COUNTER_SET_ID, counter.into()).unwrap();
    });
    let rqn = made::<CreateRqOut>(&mut fx, &rq, CreateRqOut::RQN);
    let modify_rq = |cur: u64, next: u64| {
        cmd::<ModifyRqIn>(Opcode::ModifyRq, 0, |v| {
            v.set(ModifyRqIn::RQN, rqn.into()).unwrap();
            v.set(ModifyRqIn::RQ_STATE, cur).unwrap();
            v.nested_mut(ModifyRqIn::CTX).set(Rqc::STATE, next).unwrap();
        })
    };
    fx.expect(
        &modify_rq(1, 3),
        0x10,
        (CmdStatus::BadResState.raw(), syn::WQ_WRONG_STATE),
    );
    // RST -> RST (mlx5_ib's raw packet QP going to INIT, or to RESET from INIT) is taken and
    // leaves the RQ in RST.
    fx.p.ok(&modify_rq(0, 0), 0x10);
    fx.expect(
        &modify_rq(1, 1),
        0x10,
        (CmdStatus::BadResState.raw(), syn::WQ_WRONG_STATE),
    );
    fx.p.ok(&modify_rq(0, 1), 0x10);
    // RDY -> RDY with Linux's modify_bitmask: bit 1 VLAN stripping (vsd), bit 3 the counter
    // set (checked only when named).
    let modify_bits = |bits: u64, vsd: u64, counter: u32| {
        cmd::<ModifyRqIn>(Opcode::ModifyRq, 0, |v| {
            v.set(ModifyRqIn::RQN, rqn.into()).unwrap();
            v.set(ModifyRqIn::RQ_STATE, 1).unwrap();
            v.set(ModifyRqIn::MODIFY_BITMASK, bits).unwrap();
            let mut c = v.nested_mut(ModifyRqIn::CTX);
            c.set(Rqc::STATE, 1).unwrap();
            c.set(Rqc::VSD, vsd).unwrap();
            c.set(Rqc::COUNTER_SET_ID, counter.into()).unwrap();
        })
    };
    let query_rq = |fx: &mut Fx| {
        let out = fx.p.ok(
            &cmd::<QueryRqIn>(Opcode::QueryRq, 0, |v| {
                v.set(QueryRqIn::RQN, rqn.into()).unwrap();
            }),
            0x10 + 0x100,
        );
        let o = View::<QueryRqOut>::new(&out).unwrap();
        let c = o.nested(QueryRqOut::RQ_CONTEXT);
        (c.get(Rqc::VSD), c.get32(Rqc::COUNTER_SET_ID))
    };
    fx.expect(
        &modify_bits(1 << 3, 0, counter + 99),
        0x10,
        (BAD_RES, syn::UNKNOWN_Q_COUNTER),
    );
    // Bit 1 alone: vsd taken, the (bogus) counter in the context ignored.
    fx.p.ok(&modify_bits(1 << 1, 1, counter + 99), 0x10);
    assert_eq!(query_rq(&mut fx), (1, counter));
    fx.p.ok(&modify_bits(1 << 1 | 1 << 3, 0, 0), 0x10);
    assert_eq!(query_rq(&mut fx), (0, 0));

    // SQ: its TIS must exist; an internal SQ (no TIS) is fine too.
    fx.expect(
        &sq_in(&fx, cqn, tis + 7, |_| {}),
        0x10,
        (BAD_RES, syn::UNKNOWN_TIS),
    );
    let sq = sq_in(&fx, cqn, tis, |_| {});
    let sqn = made::<CreateSqOut>(&mut fx, &sq, CreateSqOut::SQN);
    let internal = sq_in(&fx, cqn, 0, |c| {
        c.set(Sqc::TIS_LST_SZ, 0).unwrap();
    });
    let icosq = made::<CreateSqOut>(&mut fx, &internal, CreateSqOut::SQN);
    // The SQ of mlx5_ib's raw packet QP: RST -> RST at INIT (SQ_STATE, the current state, is
    // 0 = RST in both commands), then RST -> RDY.
    fx.p.ok(
        &cmd::<ModifySqIn>(Opcode::ModifySq, 0, |v| {
            v.set(ModifySqIn::SQN, sqn.into()).unwrap();
            v.nested_mut(ModifySqIn::CTX).set(Sqc::STATE, 0).unwrap();
        }),
        0x10,
    );
    fx.p.ok(
        &cmd::<ModifySqIn>(Opcode::ModifySq, 0, |v| {
            v.set(ModifySqIn::SQN, sqn.into()).unwrap();
            v.nested_mut(ModifySqIn::CTX).set(Sqc::STATE, 1).unwrap();
        }),
        0x10,
    );

    // RQT and TIR.
    fx.expect(&rqt_in(&[rqn], 0), 0x10, (BAD_PARAM, syn::RQT_SIZE));
    fx.expect(&rqt_in(&[rqn, rqn], 1), 0x10, (BAD_PARAM, syn::RQT_SIZE));
    fx.expect(&rqt_in(&[rqn + 50], 4), 0x10, (BAD_RES, syn::UNKNOWN_RQ));
    let rqtn = made::<CreateRqtOut>(&mut fx, &rqt_in(&[rqn, rqn], 4), CreateRqtOut::RQTN);
    let tir_in = |disp: u64, hash: u64| {
        cmd::<CreateTirIn>(Opcode::CreateTir, 0, |v| {
            let mut c = v.nested_mut(CreateTirIn::CTX);
            c.set(Tirc::TRANSPORT_DOMAIN, td.into()).unwrap();
            c.set(Tirc::DISP_TYPE, disp).unwrap();
            c.set(Tirc::INDIRECT_TABLE, rqtn.into()).unwrap();
            c.set(Tirc::RX_HASH_FN, hash).unwrap();
        })
    };
    fx.expect(&tir_in(1, 3), 0x10, (BAD_PARAM, syn::TIR_DISP));
    fx.expect(&tir_in(2, 0), 0x10, (BAD_PARAM, syn::TIR_DISP));
    let tirn = made::<CreateTirOut>(&mut fx, &tir_in(1, 2), CreateTirOut::TIRN);
    // Transport domain 0 is none (rdma-core's DR tests make such a DevX TIR); a domain that is
    // not allocated is refused.
    let td_tir = |domain: u32| {
        cmd::<CreateTirIn>(Opcode::CreateTir, 0, |v| {
            let mut c = v.nested_mut(CreateTirIn::CTX);
            c.set(Tirc::TRANSPORT_DOMAIN, domain.into()).unwrap();
            c.set(Tirc::INLINE_RQN, rqn.into()).unwrap();
        })
    };
    fx.expect(&td_tir(td + 100), 0x10, (BAD_RES, syn::UNKNOWN_TD));
    let no_domain = made::<CreateTirOut>(&mut fx, &td_tir(0), CreateTirOut::TIRN);
    fx.p.ok(
        &cmd::<DestroyTirIn>(Opcode::DestroyTir, 0, |v| {
            v.set(DestroyTirIn::TIRN, no_domain.into()).unwrap();
        }),
        0x10,
    );

    // Steering: the anchor at a high level, a table above it missing to it, a group, entries.
    fx.expect(&table_in(64, None), 0x10, (BAD_PARAM, syn::FT_LEVEL));
    let anchor =
        made::<CreateFlowTableOut>(&mut fx, &table_in(10, None), CreateFlowTableOut::TABLE_ID);
    fx.expect(
        &table_in(11, Some(anchor)),
        0x10,
        (BAD_PARAM, syn::FT_MISS_ACTION),
    );
    let ttc = made::<CreateFlowTableOut>(
        &mut fx,
        &table_in(6, Some(anchor)),
        CreateFlowTableOut::TABLE_ID,
    );
    let root = |t: u32| {
        by_id::<SetFlowTableRootIn>(Opcode::SetFlowTableRoot, SetFlowTableRootIn::TABLE_ID, t)
    };
    fx.p.ok(&root(ttc), 0x10);
    fx.expect(&group_in(ttc, 4, 16), 0x10, (BAD_PARAM, syn::FG_RANGE));
    let g = made::<CreateFlowGroupOut>(&mut fx, &group_in(ttc, 0, 7), CreateFlowGroupOut::GROUP_ID);
    fx.expect(&group_in(ttc, 7, 9), 0x10, (BAD_PARAM, syn::FG_RANGE));
    fx.expect(
        &fte_in(ttc, g, 8, &[(2, tirn)]),
        0x10,
        (BAD_PARAM, syn::FTE_INDEX),
    );
    fx.expect(
        &fte_in(ttc, g, 0, &[(2, tirn + 9)]),
        0x10,
        (BAD_RES, syn::UNKNOWN_TIR),
    );
    fx.expect(
        &fte_in(ttc, g, 0, &[(0, 1)]),
        0x10,
        (BAD_PARAM, syn::FTE_DEST),
    );
    fx.p.ok(&fte_in(ttc, g, 0, &[(2, tirn)]), 0x10);
    fx.expect(
        &fte_in(ttc, g, 0, &[(2, tirn)]),
        0x10,
        (BAD_PARAM, syn::FTE_EXISTS),
    );
    fx.p.ok(&fte_in(ttc, g, 1, &[(1, anchor)]), 0x10);

    // Everything in use says so.
    let busy = [
        (
            by_id::<DestroyTirIn>(Opcode::DestroyTir, DestroyTirIn::TIRN, tirn),
            syn::TIR_IN_USE,
        ),
        (
            by_id::<DestroyRqtIn>(Opcode::DestroyRqt, DestroyRqtIn::RQTN, rqtn),
            syn::RQT_IN_USE,
        ),
        (
            by_id::<DestroyRqIn>(Opcode::DestroyRq, DestroyRqIn::RQN, rqn),
            syn::WQ_IN_USE,
        ),
        (
            by_id::<DestroyTisIn>(Opcode::DestroyTis, DestroyTisIn::TISN, tis),
            syn::TIS_IN_USE,
        ),
        (
            by_id::<DeallocTransportDomainIn>(
                Opcode::DeallocTransportDomain,
                DeallocTransportDomainIn::TRANSPORT_DOMAIN,
                td,
            ),
            syn::TD_IN_USE,
        ),
        (
            by_id::<DestroyFlowTableIn>(
                Opcode::DestroyFlowTable,
                DestroyFlowTableIn::TABLE_ID,
                anchor,
            ),
            syn::FLOW_TABLE_IN_USE,
        ),
        (
            by_id::<DestroyFlowTableIn>(
                Opcode::DestroyFlowTable,
                DestroyFlowTableIn::TABLE_ID,
                ttc,
            ),
            syn::FLOW_TABLE_IN_USE,
        ),
    ];
    for (input, s) in &busy {
        fx.expect(input, 0x10, (RES_BUSY, *s));
    }
    let destroy_group = cmd::<DestroyFlowGroupIn>(Opcode::DestroyFlowGroup, 0, |v| {
        v.set(DestroyFlowGroupIn::TABLE_ID, ttc.into()).unwrap();
        v.set(DestroyFlowGroupIn::GROUP_ID, g.into()).unwrap();
    });
    fx.expect(&destroy_group, 0x10, (RES_BUSY, syn::FLOW_GROUP_IN_USE));

    // Teardown in Linux's order; the device ends with nothing of it.
    for index in [0, 1] {
        fx.p.ok(
            &cmd::<DeleteFteIn>(Opcode::DeleteFlowTableEntry, 0, |v| {
                v.set(DeleteFteIn::TABLE_ID, ttc.into()).unwrap();
                v.set(DeleteFteIn::FLOW_INDEX, index).unwrap();
            }),
            0x10,
        );
    }
    fx.p.ok(&destroy_group, 0x10);
    fx.p.ok(&root(anchor), 0x10);
    for (t, s) in [(ttc, 0), (anchor, 1)] {
        let disconnect = cmd::<SetFlowTableRootIn>(Opcode::SetFlowTableRoot, s, |_| {});
        if s == 1 {
            fx.p.ok(&disconnect, 0x10);
        }
        fx.p.ok(
            &by_id::<DestroyFlowTableIn>(Opcode::DestroyFlowTable, DestroyFlowTableIn::TABLE_ID, t),
            0x10,
        );
    }
    for input in [
        by_id::<DestroyTirIn>(Opcode::DestroyTir, DestroyTirIn::TIRN, tirn),
        by_id::<DestroyRqtIn>(Opcode::DestroyRqt, DestroyRqtIn::RQTN, rqtn),
        by_id::<DestroyRqIn>(Opcode::DestroyRq, DestroyRqIn::RQN, rqn),
        by_id::<DestroySqIn>(Opcode::DestroySq, DestroySqIn::SQN, sqn),
        by_id::<DestroySqIn>(Opcode::DestroySq, DestroySqIn::SQN, icosq),
        by_id::<DestroyTisIn>(Opcode::DestroyTis, DestroyTisIn::TISN, tis),
        by_id::<DeallocQCounterIn>(
            Opcode::DeallocQCounter,
            DeallocQCounterIn::COUNTER_SET_ID,
            counter,
        ),
        by_id::<DeallocTransportDomainIn>(
            Opcode::DeallocTransportDomain,
            DeallocTransportDomainIn::TRANSPORT_DOMAIN,
            td,
        ),
        by_id::<DestroyCqIn>(Opcode::DestroyCq, DestroyCqIn::CQN, cqn),
        by_id::<DestroyEqIn>(Opcode::DestroyEq, DestroyEqIn::EQ_NUMBER, eqn),
    ] {
        fx.p.ok(&input, 0x10);
    }
    fx.finish_clean();
}
