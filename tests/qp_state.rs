//! The QP state machine on both sides (driver refusals before any command, firmware refusals of
//! raw commands), and the CREATE_QP context decoded from the trace with the reference offsets.
// Raw commands go through `mlx5::raw::raw_command`, an `unsafe fn` (the crate denies the lint).
#![allow(unsafe_code)]

use mlx5::ifc::prm::qp::{Init2rtrQpIn, Rst2initQpIn};
use mlx5::ifc::{CmdStatus, Layout, Opcode, ViewMut};
use mlx5::qp::{
    Access, AhAttr, AttrProblem, Mtu, QpAttr, QpAttrMask as M, QpCap, QpInitAttr, QpState, QpType,
};
use mlx5::sim::{Mode, Profile, SimDevice};
use mlx5::{Device, DeviceConfig, Error, SimPlatform};

fn open() -> (SimDevice, Device<SimPlatform>) {
    let sim = SimDevice::new(Profile::connectx5(), Mode::Sync);
    let dev = Device::open(SimPlatform::new(sim.clone()), DeviceConfig::default()).unwrap();
    (sim, dev)
}

const CAP: QpCap = QpCap {
    max_send_wr: 16,
    max_recv_wr: 16,
    max_send_sge: 1,
    max_recv_sge: 1,
    max_inline_data: 0,
};

fn to_init(t: QpType) -> (QpAttr, M) {
    let mut a = QpAttr {
        qp_state: Some(QpState::Init),
        port_num: 1,
        ..QpAttr::default()
    };
    if t == QpType::Ud {
        a.qkey = 0x1111_1111;
        (a, M::STATE | M::PKEY_INDEX | M::PORT | M::QKEY)
    } else {
        a.access = Access {
            remote_write: true,
            remote_read: t == QpType::Rc,
            remote_atomic: t == QpType::Rc,
        };
        (a, M::STATE | M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS)
    }
}

fn to_rtr(t: QpType, dest: u32, gid0: [u8; 16]) -> (QpAttr, M) {
    let ah = AhAttr {
        sgid_index: 0,
        dgid: gid0,
        dmac: [0x02, 0xc5, 0x5a, 0, 0, 2],
        hop_limit: 64,
        ..AhAttr::default()
    };
    let a = QpAttr {
        qp_state: Some(QpState::Rtr),
        ah_attr: ah,
        path_mtu: Mtu::Mtu4096,
        dest_qp_num: dest,
        rq_psn: 0x1234,
        max_dest_rd_atomic: 16,
        min_rnr_timer: 12,
        ..QpAttr::default()
    };
    let m = match t {
        QpType::Rc => {
            M::STATE
                | M::AV
                | M::PATH_MTU
                | M::DEST_QPN
                | M::RQ_PSN
                | M::MAX_DEST_RD_ATOMIC
                | M::MIN_RNR_TIMER
        }
        QpType::Uc => M::STATE | M::AV | M::PATH_MTU | M::DEST_QPN | M::RQ_PSN,
        QpType::Ud | QpType::Gsi => M::STATE,
    };
    (a, m)
}

fn to_rts(t: QpType) -> (QpAttr, M) {
    let a = QpAttr {
        qp_state: Some(QpState::Rts),
        sq_psn: 0x4321,
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        max_rd_atomic: 16,
        ..QpAttr::default()
    };
    let m = match t {
        QpType::Rc => {
            M::STATE | M::SQ_PSN | M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::MAX_QP_RD_ATOMIC
        }
        _ => M::STATE | M::SQ_PSN,
    };
    (a, m)
}

#[test]
fn every_type_walks_the_state_machine() {
    let (sim, dev) = open();
    {
        let cq = dev.create_cq(32).unwrap();
        let gid0 = dev.gid0().unwrap().gid;
        for t in [QpType::Rc, QpType::Uc, QpType::Ud] {
            let mut qp = dev
                .create_qp(dev.pd(), &QpInitAttr::new(t, &cq, &cq, CAP))
                .unwrap();
            assert_eq!(sim.qp_state(qp.qpn()), Some(0));
            for (a, m) in [to_init(t), to_rtr(t, 0x1ab, gid0), to_rts(t)] {
                qp.modify(&a, m).unwrap_or_else(|e| panic!("{t:?}: {e}"));
            }
            let q = qp.query().unwrap();
            assert_eq!(q.state, QpState::Rts);
            assert_eq!(q.next_send_psn, 0x4321);
            if t != QpType::Ud {
                assert_eq!((q.remote_qpn, q.next_rcv_psn, q.mtu), (0x1ab, 0x1234, 5));
            } else {
                assert_eq!(q.q_key, 0x1111_1111);
            }
            // RTS -> RTS with an optional attribute, then ERR, then RESET.
            let (rts, _) = to_rts(t);
            let opt = if t == QpType::Ud {
                M::QKEY
            } else {
                M::ACCESS_FLAGS
            };
            qp.modify(&QpAttr { qkey: 7, ..rts }, M::STATE | opt)
                .unwrap();
            qp.modify(
                &QpAttr {
                    qp_state: Some(QpState::Err),
                    ..QpAttr::default()
                },
                M::STATE,
            )
            .unwrap();
            assert_eq!(sim.qp_state(qp.qpn()), Some(6));
            qp.modify(
                &QpAttr {
                    qp_state: Some(QpState::Reset),
                    ..QpAttr::default()
                },
                M::STATE,
            )
            .unwrap();
            assert_eq!(qp.query().unwrap().state, QpState::Reset);
        }
    }
    dev.close().unwrap();
    assert!(sim.live_objects().is_empty());
}

#[test]
fn the_driver_refuses_before_sending_anything() {
    let (sim, dev) = open();
    {
        let cq = dev.create_cq(32).unwrap();
        let mut qp = dev
            .create_qp(dev.pd(), &QpInitAttr::new(QpType::Rc, &cq, &cq, CAP))
            .unwrap();
        let gid0 = dev.gid0().unwrap().gid;
        let before = sim.commands_executed();
        let qpn = qp.qpn();
        // An illegal transition.
        let (rtr, m) = to_rtr(QpType::Rc, 5, gid0);
        assert_eq!(
            qp.modify(&rtr, m).unwrap_err(),
            Error::QpTransition {
                qpn,
                from: QpState::Reset,
                to: QpState::Rtr
            }
        );
        // A missing required attribute.
        let (init, m) = to_init(QpType::Rc);
        let e = qp
            .modify(&init, M::STATE | M::PORT | M::PKEY_INDEX)
            .unwrap_err();
        assert_eq!(
            e,
            Error::QpAttr {
                qpn,
                from: QpState::Reset,
                to: QpState::Init,
                attr: "qp_access_flags",
                problem: AttrProblem::Missing
            }
        );
        assert_eq!(
            e.to_string(),
            format!("modify_qp: QP {qpn:#x} RESET->INIT requires qp_access_flags")
        );
        assert_eq!(qp.state(), QpState::Reset);
        assert_eq!(sim.commands_executed(), before, "refused without a command");
        qp.modify(&init, m).unwrap();
        assert_eq!(qp.state(), QpState::Init);
        let after_init = sim.commands_executed();
        assert_eq!(after_init, before + 1);
        // An attribute the transition does not take.
        let e = qp
            .modify(
                &rtr,
                m.union(to_rtr(QpType::Rc, 5, gid0).1).union(M::SQ_PSN),
            )
            .unwrap_err();
        assert!(
            matches!(
                e,
                Error::QpAttr {
                    problem: AttrProblem::NotAllowed,
                    ..
                }
            ),
            "{e}"
        );
        // Values the device cannot take.
        let (rtr, m) = to_rtr(QpType::Rc, 5, gid0);
        let bad = [
            (
                QpAttr {
                    ah_attr: AhAttr {
                        sgid_index: 255,
                        ..rtr.ah_attr
                    },
                    ..rtr
                },
                "ah_attr.sgid_index",
            ),
            (
                QpAttr {
                    ah_attr: AhAttr {
                        dmac: [0; 6],
                        ..rtr.ah_attr
                    },
                    ..rtr
                },
                "ah_attr.dmac",
            ),
            (
                QpAttr {
                    dest_qp_num: 1 << 24,
                    ..rtr
                },
                "dest_qp_num",
            ),
            (
                QpAttr {
                    rq_psn: 1 << 24,
                    ..rtr
                },
                "rq_psn",
            ),
            (
                QpAttr {
                    max_dest_rd_atomic: 64,
                    ..rtr
                },
                "max_dest_rd_atomic",
            ),
        ];
        for (a, field) in bad {
            let e = qp.modify(&a, m).unwrap_err();
            assert!(
                matches!(e, Error::InvalidArgument { field: f, .. } if f == field),
                "{field}: {e}"
            );
        }
        assert_eq!(
            sim.commands_executed(),
            after_init,
            "no command for a refused modify"
        );
    }
    dev.close().unwrap();
}

/// Sends a raw QP transition, bypassing the driver's checks, to see the firmware's own answer.
fn raw<L: Layout>(
    dev: &Device<SimPlatform>,
    op: Opcode,
    fill: impl FnOnce(&mut [u8]),
) -> Result<(), Error> {
    let mut i = vec![0u8; L::BYTES];
    i[0..2].copy_from_slice(&(op as u16).to_be_bytes());
    fill(&mut i);
    let mut o = [0u8; 16];
    // SAFETY: the transitions name a QP of this test only, which it does not use afterwards
    // other than to see the firmware's answer; no memory is named.
    unsafe { mlx5::raw::raw_command(dev, &i, &mut o) }
}

#[test]
fn the_firmware_refuses_independently() {
    let (_sim, dev) = open();
    {
        let cq = dev.create_cq(32).unwrap();
        let qp = dev
            .create_qp(dev.pd(), &QpInitAttr::new(QpType::Rc, &cq, &cq, CAP))
            .unwrap();
        let qpn = u64::from(qp.qpn());
        // INIT2RTR on a QP in RESET: bad resource state.
        let e = raw::<Init2rtrQpIn>(&dev, Opcode::Init2RtrQp, |b| {
            ViewMut::<Init2rtrQpIn>::new(b)
                .unwrap()
                .set(Init2rtrQpIn::QPN, qpn)
                .unwrap();
        })
        .unwrap_err();
        assert!(
            matches!(
                e,
                Error::Cmd {
                    opcode: 0x503,
                    status: CmdStatus::BadResState,
                    ..
                }
            ),
            "{e}"
        );
        // RST2INIT without the port: bad parameter.
        let e = raw::<Rst2initQpIn>(&dev, Opcode::Rst2InitQp, |b| {
            ViewMut::<Rst2initQpIn>::new(b)
                .unwrap()
                .set(Rst2initQpIn::QPN, qpn)
                .unwrap();
        })
        .unwrap_err();
        assert!(
            matches!(
                e,
                Error::Cmd {
                    opcode: 0x502,
                    status: CmdStatus::BadParam,
                    ..
                }
            ),
            "{e}"
        );
        // An unknown QP: bad resource.
        let e = raw::<Rst2initQpIn>(&dev, Opcode::Rst2InitQp, |b| {
            ViewMut::<Rst2initQpIn>::new(b)
                .unwrap()
                .set(Rst2initQpIn::QPN, 0xabcdef)
                .unwrap();
        })
        .unwrap_err();
        assert!(
            matches!(
                e,
                Error::Cmd {
                    status: CmdStatus::BadRes,
                    ..
                }
            ),
            "{e}"
        );
        // A CQ in use by a QP cannot be destroyed (the firmware says so; the driver's borrows
        // make it impossible through the API).
        let mut i = [0u8; 16];
        i[0..2].copy_from_slice(&(Opcode::DestroyCq as u16).to_be_bytes());
        i[8..12].copy_from_slice(&cq.cqn().to_be_bytes());
        // SAFETY: DESTROY_CQ of a CQ in use is refused by the firmware (what the test checks);
        // were it not, the test fails before using the CQ again.
        let e = unsafe { mlx5::raw::raw_command(&dev, &i, &mut [0u8; 16]) }.unwrap_err();
        assert!(
            matches!(
                e,
                Error::Cmd {
                    opcode: 0x401,
                    status: CmdStatus::ResBusy,
                    ..
                }
            ),
            "{e}"
        );
    }
    dev.close().unwrap();
}

/// MSB-first bit field of a big-endian image, read with the reference offsets (not mlx5-ifc).
fn bits(buf: &[u8], bit: u64, width: u64) -> u64 {
    (bit..bit + width).fold(0, |v, i| {
        (v << 1) | u64::from(buf[(i / 8) as usize] >> (7 - i % 8) & 1)
    })
}

#[test]
fn create_qp_in_the_trace_carries_the_context_the_driver_meant() {
    let (sim, dev) = open();
    let facts: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/hw/ifc/reference/mlx5_ifc_offsets.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let at = |s: &str, f: &str| {
        (
            facts[s][f][0].as_u64().unwrap(),
            facts[s][f][1].as_u64().unwrap(),
        )
    };
    {
        let scq = dev.create_cq(64).unwrap();
        let rcq = dev.create_cq(64).unwrap();
        let qp = dev
            .create_qp(
                dev.pd(),
                &QpInitAttr::new(
                    QpType::Ud,
                    &scq,
                    &rcq,
                    QpCap {
                        max_recv_sge: 3,
                        max_recv_wr: 100,
                        ..CAP
                    },
                ),
            )
            .unwrap();
        let rec = sim
            .trace()
            .into_iter()
            .rev()
            .find(|r| r.opcode == Opcode::CreateQp as u16)
            .unwrap();
        let input = &rec.input;
        let (qpc, _) = at("create_qp_in", "qpc");
        let f = |name: &str| {
            let (b, w) = at("qpc", name);
            bits(input, qpc + b, w)
        };
        let (pd, snd, rcv, _) = qp.handles();
        assert_eq!(f("st"), 2, "UD");
        assert_eq!(f("pd"), u64::from(pd));
        assert_eq!(f("cqn_snd"), u64::from(snd));
        assert_eq!(f("cqn_rcv"), u64::from(rcv));
        assert_eq!(
            f("uar_page"),
            u64::from(mlx5::raw::qp_uar(&qp).index()),
            "the QP rings its own UAR page"
        );
        let l = qp.layout();
        assert_eq!(1 << f("log_sq_size"), u64::from(l.sq_wqebb_cnt));
        assert_eq!(1 << f("log_rq_size"), u64::from(l.rq_wqe_cnt));
        assert_eq!(16 << f("log_rq_stride"), u64::from(l.rq_stride_bytes));
        assert_eq!((l.rq_wqe_cnt, l.rq_stride_bytes), (128, 64));
        assert_eq!(f("no_sq"), 0);
        assert_eq!(f("rq_type"), 0);
        let (buf, dbr) = qp.buffer_iovas();
        assert_eq!(f("dbr_addr"), dbr.unwrap());
        let (pas, _) = at("create_qp_in", "pas");
        let page = 4096u64 << f("log_page_size");
        let total = l.rq_bytes() + l.sq_bytes();
        let n = total.div_ceil(page);
        assert_eq!(
            input.len() as u64,
            pas / 8 + 8 * n,
            "input carries exactly the PAS entries"
        );
        for k in 0..n {
            assert_eq!(
                bits(input, pas + 64 * k, 64),
                buf.unwrap() + k * page,
                "PAS entry {k}"
            );
        }
    }
    dev.close().unwrap();
}
