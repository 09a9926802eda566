//! create_qp on the simulated ConnectX-5: the seed's examples, the programmed context (decoded
//! from the command trace with the reference offsets), SRQs, CQs, and object accounting.

use mlx5::qp::{CapField, QpCap, QpInitAttr, QpType, SendOps, SizingError};
use mlx5::raw::SizeMode;
use mlx5::sim::{Mode, ObjectKind, Profile, SimDevice};
use mlx5::srq::SrqAttr;
use mlx5::{Device, DeviceConfig, Error, SimPlatform};

fn open(profile: Profile, mode: Mode) -> (SimDevice, Device<SimPlatform>) {
    let sim = SimDevice::new(profile, mode);
    let dev =
        Device::open(SimPlatform::new(sim.clone()), DeviceConfig::default()).expect("bring-up");
    (sim, dev)
}

fn cap(s_wr: u32, r_wr: u32, s_sge: u32, r_sge: u32, inl: u32) -> QpCap {
    QpCap {
        max_send_wr: s_wr,
        max_recv_wr: r_wr,
        max_send_sge: s_sge,
        max_recv_sge: r_sge,
        max_inline_data: inl,
    }
}

fn assert_clean(sim: &SimDevice) {
    assert_eq!(sim.pages_held(), 0);
    assert!(sim.live_objects().is_empty(), "{:?}", sim.live_objects());
    assert_eq!(sim.dma_bytes_mapped(), 0);
    assert!(sim.dma_faults().is_empty(), "{:?}", sim.dma_faults());
}

fn count(sim: &SimDevice, kind: ObjectKind) -> usize {
    sim.live_objects()
        .iter()
        .filter(|(k, _)| *k == kind)
        .count()
}

#[test]
fn the_seeds_four_examples() {
    for mode in [Mode::Sync, Mode::Threaded] {
        let (sim, dev) = open(Profile::connectx5(), mode);
        {
            let pd = dev.pd();
            let cq = dev.create_cq(16).unwrap();
            let cq2 = dev.create_cq(16).unwrap();
            // 1) one CQ for both queues.
            let mut a = QpInitAttr::new(QpType::Rc, &cq, &cq, cap(2, 2, 1, 1, 0));
            a.qp_context = 0xfeed;
            let qp = dev.create_qp(pd, &a).unwrap();
            assert_eq!(qp.cap(), cap(2, 4, 1, 1, 60));
            assert_eq!(qp.context(), 0xfeed, "qp_context comes back with the QP");
            qp.destroy().unwrap();
            // 2) different CQs.
            let qp = dev
                .create_qp(
                    pd,
                    &QpInitAttr::new(QpType::Rc, &cq, &cq2, cap(2, 2, 1, 1, 0)),
                )
                .unwrap();
            assert_eq!(qp.handles().1, cq.cqn());
            assert_eq!(qp.handles().2, cq2.cqn());
            drop(qp);
            // 3) with an SRQ: receive attributes left 0, granted 0.
            let srq = dev
                .create_srq(
                    pd,
                    &SrqAttr {
                        max_wr: 16,
                        max_sge: 1,
                        srq_limit: 0,
                    },
                )
                .unwrap();
            let mut a = QpInitAttr::new(QpType::Rc, &cq, &cq2, cap(2, 0, 1, 0, 0));
            a.srq = Some(&srq);
            let qp = dev.create_qp(pd, &a).unwrap();
            assert_eq!(qp.cap(), cap(2, 0, 1, 0, 60));
            assert_eq!(qp.handles().3, Some(srq.srqn()));
            drop(qp);
            // 4) inline 512.
            let qp = dev
                .create_qp(
                    pd,
                    &QpInitAttr::new(QpType::Rc, &cq, &cq, cap(2, 2, 1, 1, 512)),
                )
                .unwrap();
            assert_eq!(qp.cap(), cap(2, 4, 1, 1, 572));
            assert_eq!(qp.layout().sq_wqe_bytes, 768);
            assert_eq!(count(&sim, ObjectKind::Qp), 1);
        }
        dev.close().unwrap();
        assert_clean(&sim);
    }
}

#[test]
fn several_qps_share_one_srq_and_every_type_takes_one() {
    let (sim, dev) = open(Profile::connectx5(), Mode::Sync);
    {
        let pd = dev.pd();
        let cq = dev.create_cq(64).unwrap();
        let srq = dev
            .create_srq(
                pd,
                &SrqAttr {
                    max_wr: 100,
                    max_sge: 1,
                    srq_limit: 0,
                },
            )
            .unwrap();
        assert_eq!(
            (srq.sized().attr.max_wr, srq.sized().attr.max_sge),
            (127, 1)
        );
        assert!(srq.is_rmp(), "ISSI 1 makes SRQs RMPs");
        let info = srq.query().unwrap();
        assert_eq!(
            (1u32 << info.log_size, info.stride, info.pdn),
            (256, 32, pd.pdn()),
            "what the device holds"
        );
        let mut qps = Vec::new();
        for t in [QpType::Rc, QpType::Rc, QpType::Uc, QpType::Ud] {
            // With an SRQ the receive attributes are ignored, even absurd ones.
            let mut a = QpInitAttr::new(t, &cq, &cq, cap(4, 1_000_000, 1, 1_000, 0));
            a.srq = Some(&srq);
            let qp = dev.create_qp(pd, &a).unwrap();
            assert_eq!((qp.cap().max_recv_wr, qp.cap().max_recv_sge), (0, 0));
            qps.push(qp);
        }
        assert_eq!(count(&sim, ObjectKind::Qp), 4);
        let e = dev
            .create_srq(
                pd,
                &SrqAttr {
                    max_wr: 32768,
                    max_sge: 1,
                    srq_limit: 0,
                },
            )
            .unwrap_err();
        assert!(
            matches!(
                e,
                Error::InvalidArgument {
                    field: "max_wr",
                    max: 32767,
                    ..
                }
            ),
            "{e}"
        );
    }
    dev.close().unwrap();
    assert_clean(&sim);
}

#[test]
fn sizing_errors_reach_the_caller_before_any_command() {
    let (sim, dev) = open(Profile::connectx5(), Mode::Sync);
    {
        let cq = dev.create_cq(8).unwrap();
        let before = sim.commands_executed();
        let e = dev
            .create_qp(
                dev.pd(),
                &QpInitAttr::new(QpType::Rc, &cq, &cq, cap(64, 1, 1, 1, 1005)),
            )
            .unwrap_err();
        let Error::Sizing(s) = e.clone() else {
            panic!("{e}")
        };
        assert_eq!(s.field(), Some(CapField::MaxInlineData));
        assert_eq!(
            e.to_string(),
            "create_qp: max_inline_data 1005 exceeds 828: a 1024-byte send WQE (max_wqe_sz_sq) minus 192 bytes of RC overhead and the 4-byte inline header"
        );
        assert_eq!(
            sim.commands_executed(),
            before,
            "nothing was sent to the device"
        );
        // Declared ops shrink the WQE: SEND only takes 1004 bytes inline.
        let mut a = QpInitAttr::new(QpType::Rc, &cq, &cq, cap(64, 1, 1, 1, 1004));
        a.send_ops = Some(SendOps::SEND);
        assert_eq!(
            dev.create_qp(dev.pd(), &a).unwrap().cap().max_inline_data,
            1004
        );
        // Clamp mode grants the most that fits instead.
        let mut a = QpInitAttr::new(QpType::Rc, &cq, &cq, cap(64, 1, 1, 1, 1005));
        a.size_mode = SizeMode::Clamp;
        assert_eq!(
            dev.create_qp(dev.pd(), &a).unwrap().cap().max_inline_data,
            828
        );
    }
    dev.close().unwrap();
}

#[test]
fn a_tight_device_refuses_what_the_connectx5_takes() {
    let (sim, dev) = open(Profile::by_name("cx5-tight").unwrap(), Mode::Sync);
    {
        let cq = dev.create_cq(8).unwrap();
        let pd = dev.pd();
        let qp = dev
            .create_qp(
                pd,
                &QpInitAttr::new(QpType::Rc, &cq, &cq, cap(100, 100, 1, 1, 0)),
            )
            .unwrap();
        assert_eq!(qp.cap(), cap(128, 128, 1, 1, 60), "reference row 29");
        let e = dev
            .create_qp(
                pd,
                &QpInitAttr::new(QpType::Rc, &cq, &cq, cap(300, 1, 1, 1, 0)),
            )
            .unwrap_err();
        assert!(
            matches!(
                e,
                Error::Sizing(SizingError::TooLarge {
                    field: CapField::MaxSendWr,
                    max: 256,
                    ..
                })
            ),
            "reference row 30: {e}"
        );
        let e = dev.create_cq(1024).unwrap_err();
        assert!(
            matches!(
                e,
                Error::InvalidArgument {
                    field: "cqe",
                    max: 1023,
                    ..
                }
            ),
            "{e}"
        );
    }
    dev.close().unwrap();
    assert_clean(&sim);
}

#[test]
fn the_qp_limit_is_the_firmwares_to_enforce() {
    // cx5-tight: log_max_qp 8. The firmware refuses the QP past its limit; the driver reports it.
    let (sim, dev) = open(Profile::by_name("cx5-tight").unwrap(), Mode::Sync);
    {
        let cq = dev.create_cq(8).unwrap();
        let pd = dev.pd();
        let mut qps = Vec::new();
        let err = loop {
            match dev.create_qp(
                pd,
                &QpInitAttr::new(QpType::Ud, &cq, &cq, cap(1, 1, 1, 1, 0)),
            ) {
                Ok(qp) => qps.push(qp),
                Err(e) => break e,
            }
            assert!(qps.len() <= 256, "the device never refused");
        };
        assert!(
            matches!(
                err,
                Error::Cmd {
                    opcode: 0x500,
                    status: mlx5::ifc::CmdStatus::ExceedLim,
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(count(&sim, ObjectKind::Qp), qps.len());
        assert!(qps.len() >= 200);
    }
    dev.close().unwrap();
    assert_clean(&sim);
}

#[test]
fn objects_left_alive_at_teardown_show_in_the_devices_accounts() {
    let (sim, dev) = open(Profile::connectx5(), Mode::Sync);
    let (async_eqn, comp_eqn) = (
        mlx5::raw::async_eqn(&dev).unwrap(),
        mlx5::raw::comp_eqn(&dev).unwrap(),
    );
    assert_eq!(
        sim.eq_armed(u32::from(async_eqn)),
        Some(true),
        "EQs are armed at bring-up"
    );
    assert_eq!(sim.eq_armed(u32::from(comp_eqn)), Some(true));
    let cq = dev.create_cq(8).unwrap();
    let qp = dev
        .create_qp(
            dev.pd(),
            &QpInitAttr::new(QpType::Uc, &cq, &cq, cap(1, 1, 1, 1, 0)),
        )
        .unwrap();
    let qpn = qp.qpn();
    // Leak the QP and CQ past the driver's bookkeeping (as a buggy caller with mem::forget could).
    std::mem::forget(qp);
    std::mem::forget(cq);
    let _ = dev.close();
    let left = sim.live_objects();
    assert!(left.contains(&(ObjectKind::Qp, qpn)), "{left:?}");
    assert_eq!(count(&sim, ObjectKind::Cq), 1);
    assert!(
        !left.contains(&(ObjectKind::Eq, u32::from(async_eqn))),
        "the async EQ was destroyed"
    );
    assert!(
        left.contains(&(ObjectKind::Eq, u32::from(comp_eqn))),
        "the completion EQ is held by the leaked CQ"
    );
}

/// A QP with no send queue (`max_send_wr` 0) or no receive queue: the empty ring is refused as a
/// geometry, never computed (`entries - 1` of 0 overflowed in debug builds; the caps_profile
/// fuzz target found it with `{"_boot_pages":14350}`).
#[test]
fn queues_of_no_entries_are_created_without_overflow() {
    let (_sim, dev) = open(Profile::connectx5(), Mode::Sync);
    let cq = dev.create_cq(16).unwrap();
    for (s, r) in [(0u32, 4u32), (4, 0), (0, 0)] {
        for t in [QpType::Rc, QpType::Uc, QpType::Ud] {
            let cap = QpCap {
                max_send_wr: s,
                max_recv_wr: r,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            };
            let _ = dev.create_qp(dev.pd(), &QpInitAttr::new(t, &cq, &cq, cap));
        }
    }
}
