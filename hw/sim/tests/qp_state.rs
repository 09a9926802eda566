//! The QP state machine at the byte level: the legal path for RC, UC and UD with what each
//! transition programs, illegal transitions, missing or bad required attributes, the
//! `opt_param_mask` each transition takes.

mod common;

use common::queues::*;
use mlx5_ifc::consts::{qp_opt_param as opt, qp_st, qp_state};
use mlx5_ifc::prm::qp::{Ads, Qpc, QueryQpOut};
use mlx5_ifc::{View, ViewMut};
use mlx5_sim::syndrome as syn;
use mlx5_sim::{Mode, Profile};

/// A device with an EQ and a CQ; `(fixture, eqn, cqn)`.
fn setup(profile: Profile) -> (Fx, u32, u32) {
    let mut fx = Fx::new(profile, Mode::Sync, 1);
    let eqn = fx.create_eq();
    let cqn = fx.create_cq(eqn);
    (fx, eqn, cqn)
}

fn teardown(mut fx: Fx, eqn: u32, cqn: u32, qps: &[u32]) {
    for &qpn in qps {
        fx.destroy_qp(qpn);
    }
    fx.destroy_cq(cqn);
    fx.destroy_eq(eqn);
    fx.finish_clean();
}

fn path(c: &View<'_, Qpc>, f: mlx5_ifc::Field<Ads>) -> u64 {
    c.nested(Qpc::PRIMARY_ADDRESS_PATH).get(f)
}

fn legal_path(st: u64) {
    let (mut fx, eqn, cqn) = setup(common::quiet(Profile::connectx5()));
    let dev = fx.dev();
    let qpn = fx.create_qp(st, cqn);
    let state = |s: u64| Some(s as u8);

    assert_eq!(fx.step(Step::Rst2Init, qpn, st, 0, |_| {}), (0, 0));
    assert_eq!(dev.qp_state(qpn), state(qp_state::INIT));
    let ctx = fx.qpc(qpn);
    let c = View::<Qpc>::new(&ctx).unwrap();
    assert_eq!(
        (path(&c, Ads::PKEY_INDEX), path(&c, Ads::VHCA_PORT_NUM)),
        (0, 1)
    );
    let access = (c.get(Qpc::RRE), c.get(Qpc::RWE), c.get(Qpc::RAE));
    match st {
        qp_st::RC => assert_eq!((access, c.get(Qpc::ATOMIC_MODE)), ((1, 1, 1), 3)),
        qp_st::UC => assert_eq!(access, (0, 1, 0)),
        _ => assert_eq!((access, c.get(Qpc::Q_KEY)), ((0, 0, 0), 0x1111_1111)),
    }

    // INIT2INIT: only what the mask names.
    let mask = opt::Q_KEY | opt::PKEY_INDEX | opt::PRI_PORT | opt::RWE;
    let r = fx.step(Step::Init2Init, qpn, st, mask, |c| {
        c.set(Qpc::Q_KEY, 0x2222_2222).unwrap();
        c.set(Qpc::RRE, 0).unwrap();
        c.nested_mut(Qpc::PRIMARY_ADDRESS_PATH)
            .set(Ads::VHCA_PORT_NUM, 1)
            .unwrap();
    });
    assert_eq!(r, (0, 0));
    let ctx = fx.qpc(qpn);
    let c = View::<Qpc>::new(&ctx).unwrap();
    assert_eq!(c.get(Qpc::STATE), qp_state::INIT);
    assert_eq!(c.get(Qpc::Q_KEY), 0x2222_2222);
    assert_eq!(c.get(Qpc::RWE), 0, "RWE in the mask applies rwe = 0");
    assert_eq!(
        c.get(Qpc::RRE),
        u64::from(st == qp_st::RC),
        "RRE not in the mask"
    );

    assert_eq!(fx.step(Step::Init2Rtr, qpn, st, 0, |_| {}), (0, 0));
    assert_eq!(dev.qp_state(qpn), state(qp_state::RTR));
    let ctx = fx.qpc(qpn);
    let c = View::<Qpc>::new(&ctx).unwrap();
    if connected(st) {
        assert_eq!(c.get(Qpc::MTU), 3);
        assert_eq!(c.get(Qpc::LOG_MSG_MAX), 30);
        assert_eq!(c.get(Qpc::REMOTE_QPN), 0x1234);
        assert_eq!(c.get(Qpc::NEXT_RCV_PSN), 0x100);
        assert_eq!(
            path(&c, Ads::RMAC_47_32) << 32 | path(&c, Ads::RMAC_31_0),
            RMAC
        );
        assert_eq!(
            (path(&c, Ads::HOP_LIMIT), path(&c, Ads::TCLASS)),
            (64, 0x68)
        );
        assert_eq!(
            (path(&c, Ads::FLOW_LABEL), path(&c, Ads::UDP_SPORT)),
            (0x12345, 0xc123)
        );
        assert_eq!(path(&c, Ads::DSCP), 0x1a);
        let rgid = c.nested(Qpc::PRIMARY_ADDRESS_PATH).bytes(Ads::RGID_RIP);
        assert_eq!(&rgid[10..], &[0xff, 0xff, 10, 0, 0, 2]);
        assert_eq!(
            path(&c, Ads::ACK_TIMEOUT),
            0,
            "INIT2RTR ignores ack_timeout"
        );
        let rc = st == qp_st::RC;
        assert_eq!(c.get(Qpc::LOG_RRA_MAX), if rc { 4 } else { 0 });
        assert_eq!(c.get(Qpc::MIN_RNR_NAK), if rc { 12 } else { 0 });
    } else {
        // UD: the MTU and message limit every UD transition carries; no remote QP.
        assert_eq!(
            (
                c.get(Qpc::MTU),
                c.get(Qpc::LOG_MSG_MAX),
                c.get(Qpc::REMOTE_QPN)
            ),
            (5, 12, 0)
        );
    }

    assert_eq!(fx.step(Step::Rtr2Rts, qpn, st, 0, |_| {}), (0, 0));
    assert_eq!(dev.qp_state(qpn), state(qp_state::RTS));
    let ctx = fx.qpc(qpn);
    let c = View::<Qpc>::new(&ctx).unwrap();
    assert_eq!(c.get(Qpc::NEXT_SEND_PSN), 0x200);
    if st == qp_st::RC {
        assert_eq!((c.get(Qpc::RETRY_COUNT), c.get(Qpc::RNR_RETRY)), (7, 7));
        assert_eq!(
            (c.get(Qpc::LOG_SRA_MAX), path(&c, Ads::ACK_TIMEOUT)),
            (4, 14)
        );
    }

    // PM_STATE REARM arms the alternate path loaded with it (and reads back ARMED).
    let mask = opt::ACK_TIMEOUT | opt::RNR_TIMEOUT | opt::PM_STATE | opt::ALT_ADDR_PATH;
    let r = fx.step(Step::Rts2Rts, qpn, st, mask, |c| {
        c.nested_mut(Qpc::PRIMARY_ADDRESS_PATH)
            .set(Ads::ACK_TIMEOUT, 20)
            .unwrap();
        let mut alt = c.nested_mut(Qpc::SECONDARY_ADDRESS_PATH);
        alt.set(Ads::RMAC_47_32, 0x02c5).unwrap();
        alt.set(Ads::RMAC_31_0, 0x5a00_0003).unwrap();
        c.set(Qpc::MIN_RNR_NAK, 5).unwrap();
        c.set(Qpc::PM_STATE, 1).unwrap();
        c.set(Qpc::REMOTE_QPN, 0x999).unwrap();
    });
    assert_eq!(r, (0, 0));
    let ctx = fx.qpc(qpn);
    let c = View::<Qpc>::new(&ctx).unwrap();
    assert_eq!(c.get(Qpc::STATE), qp_state::RTS);
    assert_eq!(path(&c, Ads::ACK_TIMEOUT), 20);
    assert_eq!((c.get(Qpc::MIN_RNR_NAK), c.get(Qpc::PM_STATE)), (5, 0));
    assert_ne!(c.get(Qpc::REMOTE_QPN), 0x999, "not an RTS2RTS attribute");

    for _ in 0..2 {
        assert_eq!(fx.run(&force_in(qpn, true), 0x10).0, (0, 0));
        assert_eq!(dev.qp_state(qpn), state(qp_state::ERR));
    }
    assert_eq!(fx.run(&force_in(qpn, false), 0x10).0, (0, 0));
    assert_eq!(dev.qp_state(qpn), state(qp_state::RST));
    let out = fx.query_qp(qpn);
    let o = View::<QueryQpOut>::new(&out).unwrap();
    let pas = o.bytes(QueryQpOut::QP_PAS_OR_QPC_EXT_AND_PAS);
    assert_eq!(
        pas[..8],
        fx.arena.iova.to_be_bytes(),
        "2RST keeps the buffer"
    );
    assert_eq!(o.nested(QueryQpOut::QPC).get(Qpc::NEXT_SEND_PSN), 0x200);
    // And the QP can start over.
    assert_eq!(fx.step(Step::Rst2Init, qpn, st, 0, |_| {}), (0, 0));
    teardown(fx, eqn, cqn, &[qpn]);
}

#[test]
fn legal_path_rc() {
    legal_path(qp_st::RC);
}

#[test]
fn legal_path_uc() {
    legal_path(qp_st::UC);
}

#[test]
fn legal_path_ud() {
    legal_path(qp_st::UD);
}

#[test]
fn transitions_from_the_wrong_state() {
    let (mut fx, eqn, cqn) = setup(common::quiet(Profile::connectx5()));
    let dev = fx.dev();
    let st = qp_st::RC;
    let qpn = fx.create_qp(st, cqn);
    let wrong = (BAD_RES_STATE, syn::QP_WRONG_STATE);
    for step in [
        Step::Init2Init,
        Step::Init2Rtr,
        Step::Rtr2Rts,
        Step::Rts2Rts,
    ] {
        assert_eq!(
            fx.step(step, qpn, st, 0, |_| {}),
            wrong,
            "{step:?} from RST"
        );
    }
    assert_eq!(fx.step(Step::Rst2Init, qpn, st, 0, |_| {}), (0, 0));
    for step in [Step::Rst2Init, Step::Rtr2Rts, Step::Rts2Rts] {
        assert_eq!(
            fx.step(step, qpn, st, 0, |_| {}),
            wrong,
            "{step:?} from INIT"
        );
    }
    assert_eq!(fx.step(Step::Init2Rtr, qpn, st, 0, |_| {}), (0, 0));
    for step in [
        Step::Rst2Init,
        Step::Init2Init,
        Step::Init2Rtr,
        Step::Rts2Rts,
    ] {
        assert_eq!(
            fx.step(step, qpn, st, 0, |_| {}),
            wrong,
            "{step:?} from RTR"
        );
    }
    assert_eq!(dev.qp_state(qpn), Some(qp_state::RTR as u8));
    assert_eq!(fx.run(&force_in(qpn, true), 0x10).0, (0, 0));
    for step in [Step::Rst2Init, Step::Init2Rtr, Step::Rtr2Rts, Step::Rts2Rts] {
        assert_eq!(
            fx.step(step, qpn, st, 0, |_| {}),
            wrong,
            "{step:?} from ERR"
        );
    }
    // An unknown QP.
    let unknown = (BAD_RES, syn::UNKNOWN_QP);
    assert_eq!(fx.step(Step::Rst2Init, 0x999, st, 0, |_| {}), unknown);
    assert_eq!(fx.run(&force_in(0x999, true), 0x10).0, unknown);
    assert_eq!(fx.run(&force_in(0x999, false), 0x10).0, unknown);
    teardown(fx, eqn, cqn, &[qpn]);
}

#[test]
fn required_attributes() {
    let (mut fx, eqn, cqn) = setup(common::quiet(Profile::connectx5()));
    let dev = fx.dev();
    let (rc, uc, ud) = (
        fx.create_qp(qp_st::RC, cqn),
        fx.create_qp(qp_st::UC, cqn),
        fx.create_qp(qp_st::UD, cqn),
    );
    type Edit = fn(&mut ViewMut<'_, Qpc>);
    let bad = |e: u32| (BAD_PARAM, e);
    let init: [(u32, u64, Edit, u32); 10] = [
        // The reserved path-migration state.
        (
            rc,
            qp_st::RC,
            |c| drop(c.set(Qpc::PM_STATE, 2)),
            syn::BAD_PM_STATE,
        ),
        (
            ud,
            qp_st::UD,
            |c| drop(c.set(Qpc::PM_STATE, 2)),
            syn::BAD_PM_STATE,
        ),
        // Responder atomic modes stop at 8 (up to 256 bytes).
        (
            rc,
            qp_st::RC,
            |c| drop(c.set(Qpc::ATOMIC_MODE, 9)),
            syn::BAD_ATOMIC_MODE,
        ),
        (
            ud,
            qp_st::UD,
            |c| drop(c.set(Qpc::MTU, 0)),
            syn::BAD_PATH_MTU,
        ),
        (
            rc,
            qp_st::RC,
            |c| {
                drop(
                    c.nested_mut(Qpc::PRIMARY_ADDRESS_PATH)
                        .set(Ads::VHCA_PORT_NUM, 2),
                )
            },
            syn::BAD_QP_PORT,
        ),
        (
            rc,
            qp_st::RC,
            |c| {
                drop(
                    c.nested_mut(Qpc::PRIMARY_ADDRESS_PATH)
                        .set(Ads::VHCA_PORT_NUM, 0),
                )
            },
            syn::BAD_QP_PORT,
        ),
        (
            rc,
            qp_st::RC,
            |c| {
                drop(
                    c.nested_mut(Qpc::PRIMARY_ADDRESS_PATH)
                        .set(Ads::PKEY_INDEX, 1),
                )
            },
            syn::BAD_PKEY_INDEX,
        ),
        (
            uc,
            qp_st::UC,
            |c| drop(c.set(Qpc::RRE, 1)),
            syn::QP_ACCESS_NOT_SUPPORTED,
        ),
        (
            uc,
            qp_st::UC,
            |c| drop(c.set(Qpc::RAE, 1)),
            syn::QP_ACCESS_NOT_SUPPORTED,
        ),
        (
            ud,
            qp_st::UD,
            |c| drop(c.set(Qpc::RWE, 1)),
            syn::QP_ACCESS_NOT_SUPPORTED,
        ),
    ];
    for (qpn, st, f, want) in init {
        let before = fx.qpc(qpn);
        assert_eq!(fx.step(Step::Rst2Init, qpn, st, 0, f), bad(want));
        assert_eq!(fx.qpc(qpn), before, "a refused transition changes nothing");
    }
    for (qpn, st) in [(rc, qp_st::RC), (uc, qp_st::UC), (ud, qp_st::UD)] {
        assert_eq!(fx.step(Step::Rst2Init, qpn, st, 0, |_| {}), (0, 0));
    }
    let rtr: [(u32, u64, Edit, u32); 10] = [
        (
            rc,
            qp_st::RC,
            |c| {
                drop(
                    c.nested_mut(Qpc::PRIMARY_ADDRESS_PATH)
                        .set(Ads::RMAC_47_32, 0)
                        .unwrap()
                        .set(Ads::RMAC_31_0, 0),
                )
            },
            syn::MISSING_RMAC,
        ),
        (
            rc,
            qp_st::RC,
            |c| drop(c.set(Qpc::REMOTE_QPN, 0)),
            syn::BAD_REMOTE_QPN,
        ),
        (
            rc,
            qp_st::RC,
            |c| drop(c.set(Qpc::REMOTE_QPN, 1)),
            syn::BAD_REMOTE_QPN,
        ),
        (
            rc,
            qp_st::RC,
            |c| {
                drop(
                    c.nested_mut(Qpc::PRIMARY_ADDRESS_PATH)
                        .set(Ads::SRC_ADDR_INDEX, 5),
                )
            },
            syn::QP_GID_NOT_SET,
        ),
        (
            rc,
            qp_st::RC,
            |c| drop(c.set(Qpc::MTU, 0)),
            syn::BAD_PATH_MTU,
        ),
        (
            rc,
            qp_st::RC,
            |c| drop(c.set(Qpc::MTU, 6)),
            syn::BAD_PATH_MTU,
        ),
        (
            rc,
            qp_st::RC,
            |c| drop(c.set(Qpc::LOG_RRA_MAX, 5)),
            syn::RRA_MAX_TOO_BIG,
        ),
        (
            rc,
            qp_st::RC,
            |c| drop(c.set(Qpc::LOG_MSG_MAX, 31)),
            syn::MSG_MAX_TOO_BIG,
        ),
        (
            uc,
            qp_st::UC,
            |c| {
                drop(
                    c.nested_mut(Qpc::PRIMARY_ADDRESS_PATH)
                        .set(Ads::RMAC_31_0, 0)
                        .unwrap()
                        .set(Ads::RMAC_47_32, 0),
                )
            },
            syn::MISSING_RMAC,
        ),
        (
            uc,
            qp_st::UC,
            |c| drop(c.set(Qpc::MTU, 0)),
            syn::BAD_PATH_MTU,
        ),
    ];
    for (qpn, st, f, want) in rtr {
        assert_eq!(
            fx.step(Step::Init2Rtr, qpn, st, 0, f),
            bad(want),
            "{}",
            syn::name(want).unwrap()
        );
        assert_eq!(dev.qp_state(qpn), Some(qp_state::INIT as u8));
    }
    // UC has no RDMA read: log_rra_max is not its to check.
    let r = fx.step(Step::Init2Rtr, uc, qp_st::UC, 0, |c| {
        drop(c.set(Qpc::LOG_RRA_MAX, 7))
    });
    assert_eq!(r, (0, 0));
    // UD: no default MTU or message limit (Linux writes 4096 and 2^12 on every UD modify).
    assert_eq!(
        fx.step(Step::Init2Rtr, ud, qp_st::UD, 0, |c| drop(
            c.set(Qpc::MTU, 0)
        )),
        bad(syn::BAD_PATH_MTU)
    );
    assert_eq!(
        fx.step(Step::Init2Rtr, ud, qp_st::UD, 0, |c| drop(
            c.set(Qpc::LOG_MSG_MAX, 31)
        )),
        bad(syn::MSG_MAX_TOO_BIG)
    );
    assert_eq!(fx.step(Step::Init2Rtr, ud, qp_st::UD, 0, |_| {}), (0, 0));
    assert_eq!(
        fx.step(Step::Rtr2Rts, ud, qp_st::UD, 0, |c| drop(
            c.set(Qpc::MTU, 0)
        )),
        bad(syn::BAD_PATH_MTU),
        "RTR2RTS of a UD QP without an MTU"
    );
    assert_eq!(fx.step(Step::Init2Rtr, rc, qp_st::RC, 0, |_| {}), (0, 0));
    let r = fx.step(Step::Rtr2Rts, rc, qp_st::RC, 0, |c| {
        drop(c.set(Qpc::LOG_SRA_MAX, 5))
    });
    assert_eq!(r, bad(syn::SRA_MAX_TOO_BIG));
    assert_eq!(dev.qp_state(rc), Some(qp_state::RTR as u8));
    teardown(fx, eqn, cqn, &[rc, uc, ud]);

    // A GID index beyond a small RoCE address table.
    let json = r#"{"roce_cap.roce_address_table_size": 4}"#;
    let (mut fx, eqn, cqn) = setup(common::quiet(Profile::from_json_str(json).unwrap()));
    let qpn = fx.create_qp(qp_st::RC, cqn);
    assert_eq!(fx.step(Step::Rst2Init, qpn, qp_st::RC, 0, |_| {}), (0, 0));
    let r = fx.step(Step::Init2Rtr, qpn, qp_st::RC, 0, |c| {
        drop(
            c.nested_mut(Qpc::PRIMARY_ADDRESS_PATH)
                .set(Ads::SRC_ADDR_INDEX, 4),
        )
    });
    assert_eq!(r, bad(syn::QP_GID_INDEX));
    fx.set_gid(3);
    let r = fx.step(Step::Init2Rtr, qpn, qp_st::RC, 0, |c| {
        drop(
            c.nested_mut(Qpc::PRIMARY_ADDRESS_PATH)
                .set(Ads::SRC_ADDR_INDEX, 3),
        )
    });
    assert_eq!(r, (0, 0));
    teardown(fx, eqn, cqn, &[qpn]);
}

#[test]
fn opt_param_mask_per_transition() {
    let (mut fx, eqn, cqn) = setup(common::quiet(Profile::connectx5()));
    let st = qp_st::RC;
    let qpn = fx.create_qp(st, cqn);
    let refused = (BAD_PARAM, syn::BAD_OPT_PARAM_MASK);
    for bit in [opt::RRE, opt::PKEY_INDEX, opt::ALT_ADDR_PATH] {
        assert_eq!(fx.step(Step::Rst2Init, qpn, st, bit, |_| {}), refused);
    }
    assert_eq!(fx.step(Step::Rst2Init, qpn, st, 0, |_| {}), (0, 0));
    for bit in [
        opt::RNR_TIMEOUT,
        opt::ACK_TIMEOUT,
        opt::PM_STATE,
        opt::ALT_ADDR_PATH,
    ] {
        assert_eq!(fx.step(Step::Init2Init, qpn, st, bit, |_| {}), refused);
    }
    for bit in [
        opt::RNR_TIMEOUT,
        opt::PRI_PORT,
        opt::SRA_MAX,
        1 << 11,
        1 << 31,
    ] {
        assert_eq!(fx.step(Step::Init2Rtr, qpn, st, bit, |_| {}), refused);
    }
    // INIT2RTR takes the alternate path and access flags.
    let r = fx.step(
        Step::Init2Rtr,
        qpn,
        st,
        opt::ALT_ADDR_PATH | opt::RRE,
        |c| {
            c.set(Qpc::RRE, 0).unwrap();
            let mut alt = c.nested_mut(Qpc::SECONDARY_ADDRESS_PATH);
            alt.set(Ads::HOP_LIMIT, 9).unwrap();
            alt.set(Ads::VHCA_PORT_NUM, 1).unwrap();
        },
    );
    assert_eq!(r, (0, 0));
    let ctx = fx.qpc(qpn);
    let c = View::<Qpc>::new(&ctx).unwrap();
    assert_eq!(c.get(Qpc::RRE), 0);
    assert_eq!(c.nested(Qpc::SECONDARY_ADDRESS_PATH).get(Ads::HOP_LIMIT), 9);
    for bit in [
        opt::PKEY_INDEX,
        opt::SRA_MAX,
        opt::ACK_TIMEOUT,
        opt::PRI_PORT,
    ] {
        assert_eq!(fx.step(Step::Rtr2Rts, qpn, st, bit, |_| {}), refused);
    }
    assert_eq!(
        fx.step(Step::Rtr2Rts, qpn, st, opt::RNR_TIMEOUT, |c| drop(
            c.set(Qpc::MIN_RNR_NAK, 3)
        )),
        (0, 0)
    );
    assert_eq!(
        View::<Qpc>::new(&fx.qpc(qpn))
            .unwrap()
            .get(Qpc::MIN_RNR_NAK),
        3
    );
    for bit in [opt::PRI_PORT, opt::PKEY_INDEX, opt::RETRY_COUNT, 1 << 11] {
        assert_eq!(fx.step(Step::Rts2Rts, qpn, st, bit, |_| {}), refused);
    }
    let r = fx.step(Step::Rts2Rts, qpn, st, opt::PRIMARY_ADDR_PATH, |c| {
        drop(
            c.nested_mut(Qpc::PRIMARY_ADDRESS_PATH)
                .set(Ads::ACK_TIMEOUT, 18),
        )
    });
    assert_eq!(r, (0, 0));
    let ctx = fx.qpc(qpn);
    let c = View::<Qpc>::new(&ctx).unwrap();
    assert_eq!(path(&c, Ads::ACK_TIMEOUT), 18);
    assert_eq!(
        path(&c, Ads::RMAC_31_0),
        RMAC & 0xffff_ffff,
        "only ack_timeout of the path"
    );
    teardown(fx, eqn, cqn, &[qpn]);
}

/// RST2INIT leaves a QP MIGRATED whatever ARMED or REARM the command says: no alternate path
/// is loaded yet, so nothing can be armed (rdma-core's DevX test sends 0 there after creating the
/// QP MIGRATED, and passes on real cards; Linux sends MIGRATED).
#[test]
fn rst2init_without_an_alternate_path_leaves_the_qp_migrated() {
    let (mut fx, eqn, cqn) = setup(common::quiet(Profile::connectx5()));
    let mut qps = Vec::new();
    for asked in [0u64, 1] {
        let qpn = fx.create_qp(qp_st::RC, cqn);
        let r = fx.step(Step::Rst2Init, qpn, qp_st::RC, 0, |c| {
            c.set(Qpc::PM_STATE, asked).unwrap();
        });
        assert_eq!(r, (0, 0), "pm_state {asked}");
        let ctx = fx.qpc(qpn);
        assert_eq!(View::<Qpc>::new(&ctx).unwrap().get(Qpc::PM_STATE), 3);
        qps.push(qpn);
    }
    teardown(fx, eqn, cqn, &qps);
}
