//! Bring-up and teardown of the driver on the simulated ConnectX-5, in both simulator modes,
//! and every injected fault ending in its documented error — no hang, no panic, nothing left
//! behind in the device.

use mlx5::ifc::{CmdStatus, DeliveryStatus, HealthSyndrome, Opcode};
use mlx5::sim::{Fault, Mode, Profile, SimDevice};
use mlx5::{DeadCause, Device, DeviceConfig, Error, SimPlatform, Wait};

fn config() -> DeviceConfig {
    DeviceConfig {
        fw_pre_init_timeout_ms: 50,
        fw_init_timeout_ms: 50,
        cmd_timeout_ms: 200,
        ..DeviceConfig::default()
    }
}

fn sim(mode: Mode) -> SimDevice {
    SimDevice::new(Profile::connectx5(), mode)
}

/// After a complete teardown the device holds nothing of the driver's.
fn assert_clean(dev: &SimDevice) {
    assert_eq!(dev.pages_held(), 0, "firmware pages still held");
    assert!(
        dev.live_objects().is_empty(),
        "objects left: {:?}",
        dev.live_objects()
    );
    assert_eq!(dev.dma_bytes_mapped(), 0, "host DMA memory still allocated");
    assert!(
        dev.dma_faults().is_empty(),
        "DMA faults: {:?}",
        dev.dma_faults()
    );
}

fn bring_up_and_close(mode: Mode) {
    let dev = sim(mode);
    let d = Device::open(SimPlatform::new(dev.clone()), config()).expect("bring-up");
    assert_eq!(d.fw_version().to_string(), "16.35.2000");
    assert_eq!(d.issi(), 1);
    assert!(mlx5::raw::device_uar(&d).is_some());
    let _: &mlx5::pd::Pd = d.pd();
    assert!(
        dev.pages_held() >= 80,
        "boot + init pages given: {}",
        dev.pages_held()
    );
    assert_eq!(
        d.pages_held(),
        dev.pages_held(),
        "driver and device agree on the page count"
    );
    let b = d.bringup();
    assert_eq!(b.boot_pages + b.init_pages, dev.pages_held());
    assert_eq!(b.commands, dev.commands_executed());
    assert!(d.check_health().is_ok());
    assert_eq!(d.port_state().unwrap().oper, 1);
    assert!(d.vport().roce_en);
    d.close().expect("teardown");
    assert_clean(&dev);
}

#[test]
fn bring_up_and_teardown_sync() {
    bring_up_and_close(Mode::Sync);
}

/// The bring-up Miri runs (CI): a device that asks for one boot and one init page and no pages
/// at run time, so the interpreter spends its time on the driver's unsafe room (MMIO, DMA,
/// host tables), not on handing out eighty firmware pages.
#[test]
fn bring_up_and_teardown_few_pages() {
    let profile = Profile::from_json_str(r#"{"_boot_pages": 1, "_init_pages": 1}"#)
        .unwrap()
        .with_page_policy(mlx5::sim::PagePolicy::default());
    let dev = SimDevice::new(profile, Mode::Sync);
    let d = Device::open(SimPlatform::new(dev.clone()), config()).expect("bring-up");
    assert_eq!(d.pages_held(), 2);
    let cq = d.create_cq(15).unwrap();
    cq.destroy().unwrap();
    d.close().expect("teardown");
    assert_clean(&dev);
}

#[test]
fn bring_up_and_teardown_threaded() {
    bring_up_and_close(Mode::Threaded);
}

#[test]
fn bring_up_follows_the_pf_order() {
    let dev = sim(Mode::Sync);
    let d = Device::open(SimPlatform::new(dev.clone()), config()).unwrap();
    d.close().unwrap();
    let ops: Vec<u16> = dev.trace().iter().map(|t| t.opcode).collect();
    let pos = |op: Opcode| {
        ops.iter()
            .position(|&o| o == op as u16)
            .unwrap_or_else(|| panic!("{} not issued", op.name()))
    };
    assert_eq!(ops[0], Opcode::EnableHca as u16, "ENABLE_HCA comes first");
    assert!(pos(Opcode::QueryIssi) < pos(Opcode::SetIssi));
    assert!(pos(Opcode::SetIssi) < pos(Opcode::QueryPages));
    assert!(pos(Opcode::QueryPages) < pos(Opcode::ManagePages));
    assert!(pos(Opcode::ManagePages) < pos(Opcode::SetHcaCap));
    assert!(pos(Opcode::SetHcaCap) < pos(Opcode::InitHca));
    assert!(pos(Opcode::InitHca) < pos(Opcode::AllocUar));
    assert!(pos(Opcode::AllocUar) < pos(Opcode::AllocPd));
    assert!(pos(Opcode::AllocPd) < pos(Opcode::DeallocPd));
    assert!(pos(Opcode::TeardownHca) < pos(Opcode::DisableHca));
    assert_eq!(
        *ops.last().unwrap(),
        Opcode::DisableHca as u16,
        "DISABLE_HCA comes last"
    );
    // The page reclaim happens between TEARDOWN_HCA and DISABLE_HCA.
    let teardown = pos(Opcode::TeardownHca);
    assert!(ops[teardown..].contains(&(Opcode::ManagePages as u16)));
    assert!(
        dev.trace().iter().all(|t| t.status == 0),
        "no command failed"
    );
}

#[test]
fn caps_and_device_attr_are_the_connectx5s() {
    let dev = sim(Mode::Sync);
    let d = Device::open(SimPlatform::new(dev.clone()), config()).unwrap();
    let c = d.caps();
    assert_eq!(
        (
            c.log_max_qp_sz(),
            c.max_wqe_sz_sq(),
            c.max_wqe_sz_rq(),
            c.log_max_cq_sz()
        ),
        (15, 1024, 512, 22)
    );
    assert_eq!(c.get("log_max_qp"), Some(18));
    assert_eq!(c.cmdif_checksum(), 0, "SET_HCA_CAP turned checksums off");
    let a = d.device_attr();
    assert_eq!(a.max_qp, 262_144);
    assert_eq!(a.max_qp_wr, 32_768);
    assert_eq!(a.max_sge, 30);
    assert_eq!(a.max_cq, 16_777_216);
    assert_eq!(a.max_cqe, 4_194_303);
    assert_eq!(a.max_mr, 16_777_216);
    assert_eq!(
        a.max_pd, 8_388_608,
        "firmware 16.31 and later (real-cx5.md row 18)"
    );
    assert_eq!(a.max_qp_rd_atom, 16);
    assert_eq!(a.max_srq, 8_388_608);
    assert_eq!(a.max_srq_wr, 32_767);
    assert_eq!(a.max_srq_sge, 31);
    assert_eq!(a.page_size_cap, 0xffff_ffff_ffff_f000);
    d.close().unwrap();
}

#[test]
fn a_tight_profile_is_reported_as_such() {
    let dev = SimDevice::new(Profile::by_name("cx5-tight").unwrap(), Mode::Sync);
    let d = Device::open(SimPlatform::new(dev.clone()), config()).unwrap();
    assert_eq!(d.device_attr().max_qp_wr, 1024);
    d.close().unwrap();
    assert_clean(&dev);
}

#[test]
fn dropping_an_open_device_tears_it_down() {
    let dev = sim(Mode::Sync);
    drop(Device::open(SimPlatform::new(dev.clone()), config()).unwrap());
    assert_clean(&dev);
}

#[test]
fn firmware_stuck_initializing_times_out() {
    for mode in [Mode::Sync, Mode::Threaded] {
        let dev = sim(mode);
        dev.inject(Fault::StuckInitializing);
        let e = Device::open(SimPlatform::new(dev.clone()), config()).unwrap_err();
        assert!(
            matches!(e, Error::Timeout { waiting_for: Wait::FwPreInit, waited_ms } if waited_ms >= 50),
            "{mode:?}: {e}"
        );
        assert_eq!(dev.commands_executed(), 0);
        assert_clean(&dev);
    }
}

#[test]
fn a_failing_command_is_reported_and_everything_is_undone() {
    for mode in [Mode::Sync, Mode::Threaded] {
        let dev = sim(mode);
        dev.inject(Fault::FailCommand {
            opcode: Opcode::InitHca as u16,
            status: 0x03,
            syndrome: 0x1234_5678,
        });
        let e = Device::open(SimPlatform::new(dev.clone()), config()).unwrap_err();
        assert_eq!(
            e,
            Error::Cmd {
                opcode: 0x102,
                op_mod: 0,
                status: CmdStatus::BadParam,
                syndrome: 0x1234_5678
            },
            "{mode:?}"
        );
        assert_eq!(
            e.to_string(),
            "INIT_HCA(0x0102) op_mod(0x0) failed: status bad parameter (0x3), syndrome 0x12345678"
        );
        assert_clean(&dev);
    }
}

#[test]
fn a_failure_late_in_bring_up_releases_uar_and_gid() {
    let dev = sim(Mode::Sync);
    dev.inject(Fault::FailCommand {
        opcode: Opcode::AllocPd as u16,
        status: 0x08,
        syndrome: 0x77,
    });
    let e = Device::open(SimPlatform::new(dev.clone()), config()).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Cmd {
                opcode: 0x800,
                status: CmdStatus::ExceedLim,
                ..
            }
        ),
        "{e}"
    );
    assert_clean(&dev);
}

#[test]
fn a_command_that_never_completes_makes_the_device_unusable() {
    for mode in [Mode::Sync, Mode::Threaded] {
        let dev = sim(mode);
        let d = Device::open(SimPlatform::new(dev.clone()), config()).unwrap();
        dev.inject(Fault::NeverComplete {
            opcode: Opcode::QueryVportState as u16,
        });
        let e = d.port_state().unwrap_err();
        assert!(
            matches!(
                e,
                Error::Timeout {
                    waiting_for: Wait::Command { opcode: 0x750 },
                    ..
                }
            ),
            "{mode:?}: {e}"
        );
        let e = d.port_state().unwrap_err();
        assert_eq!(
            e,
            Error::Unusable {
                opcode: 0x750,
                cause: DeadCause::CommandTimeout { opcode: 0x750 }
            },
            "{mode:?}: later commands are refused without touching the device"
        );
        // Teardown cannot run commands; it must not free memory the device may still use.
        let _ = d.close();
        assert!(dev.dma_faults().is_empty(), "{mode:?}: no use-after-free");
    }
}

#[test]
fn a_fatal_health_syndrome_is_an_error() {
    for mode in [Mode::Sync, Mode::Threaded] {
        let dev = sim(mode);
        let d = Device::open(SimPlatform::new(dev.clone()), config()).unwrap();
        dev.inject(Fault::FatalHealth { synd: 0x8 });
        let e = d.check_health().unwrap_err();
        assert_eq!(
            e,
            Error::Health {
                synd: HealthSyndrome::HwUnrecoverableErr,
                ext_synd: 0
            },
            "{mode:?}"
        );
        assert!(matches!(
            d.port_state(),
            Err(Error::Unusable {
                cause: DeadCause::Fatal { .. },
                ..
            })
        ));
        let _ = d.close();
    }
}

#[test]
fn a_fatal_syndrome_during_bring_up_stops_it() {
    let dev = sim(Mode::Sync);
    dev.inject(Fault::FatalHealth { synd: 0x1 });
    let e = Device::open(SimPlatform::new(dev.clone()), config()).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Health {
                synd: HealthSyndrome::FwInternalErr,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn a_dma_fault_on_a_mailbox_is_a_delivery_error() {
    let dev = sim(Mode::Sync);
    dev.inject(Fault::DmaFault {
        opcode: Opcode::SetHcaCap as u16,
    });
    let e = Device::open(SimPlatform::new(dev.clone()), config()).unwrap_err();
    assert_eq!(
        e,
        Error::Delivery {
            opcode: 0x109,
            status: DeliveryStatus::FwInternal
        }
    );
    assert_eq!(dev.dma_faults().len(), 1, "the device reported the fault");
    assert_eq!(dev.pages_held(), 0, "pages taken back after the failure");
}

#[test]
fn the_trace_is_json_lines() {
    let dev = sim(Mode::Sync);
    let d = Device::open(SimPlatform::new(dev.clone()), config()).unwrap();
    d.close().unwrap();
    let first = dev.trace()[0].to_json_line();
    let v: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert_eq!(v["seq"], 0);
    assert_eq!(v["opcode"], "0x0104");
    assert_eq!(v["name"], "ENABLE_HCA");
    assert_eq!(v["status"], 0);
    assert_eq!(v["syndrome"], "0x00000000");
    assert_eq!(
        v["input"].as_str().unwrap().len(),
        2 * 16,
        "inlen bytes of input"
    );
    assert!(v["input"].as_str().unwrap().starts_with("0104"));
}
