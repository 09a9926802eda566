//! The driver against a device that misbehaves and a caller that asks for the absurd: each test
//! is a finding of the reliability review (issue #9) that failed before its fix — a stale CQE
//! reported as a new completion, memory freed under a device that may still use it, a device
//! value that panicked a debug build, a BlueFlame store into another QP's UAR page.

mod common;

use common::*;
use mlx5::mr::MrAccess;
use mlx5::qp::{
    Payload, QpAttr, QpAttrMask as M, QpInitAttr, QpState, QpType, RecvWr, SendOp, SendWr, Sge,
};
use mlx5::raw::{DmaBuf, SharedTable};
use mlx5::sim::{Fabric, Fault, Mode, Profile, SimDevice};
use mlx5::srq::SrqAttr;
use mlx5::{Device, DeviceConfig, Error, Quarantined, SimPlatform, Wait, WcStatus};

fn to_state(q: &mut mlx5::qp::Qp<'_, SimPlatform>, s: QpState) {
    q.modify(
        &QpAttr {
            qp_state: Some(s),
            ..QpAttr::default()
        },
        M::STATE,
    )
    .unwrap();
}

fn open_with(profile: &str, config: DeviceConfig) -> (SimDevice, mlx5::Result<Dev>) {
    let p = Profile::from_json_str(profile).expect("profile");
    let sim = SimDevice::new(p, Mode::Sync);
    let dev = Device::open(SimPlatform::new(sim.clone()), config);
    (sim, dev)
}

/// Review finding 2: after ERR → RESET → reconnect, a CQE of the old incarnation was reported as
/// the completion of a new work request. Now the QP's CQEs leave the CQ on RESET, and another QP
/// sharing the CQ keeps its completions, in order.
#[test]
fn no_cqe_of_an_earlier_incarnation_is_ever_reported() {
    let fabric = Fabric::new();
    let (sim, dev) = nic(&fabric, Mode::Sync);
    let cq = dev.create_cq(64).unwrap();
    let mr = dev.alloc_mr(dev.pd(), 4096, MrAccess::ALL).unwrap();
    let mut a = looped(&dev, &cq, cap(16, 1, 1));
    let mut b = looped(&dev, &cq, cap(16, 1, 1));
    let sge = [Sge {
        addr: mr.addr(),
        length: 64,
        lkey: mr.lkey(),
    }];
    let write = |id| write_wr(&mr, &sge, id);
    // A and B interleaved, all completed by the device, none polled.
    for i in 0..4 {
        a.post_send(&[write(i)]).unwrap();
        if i < 3 {
            b.post_send(&[write(100 + i)]).unwrap();
        }
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while sim.cqe_count(cq.cqn()) != Some(7) {
        assert!(std::time::Instant::now() < deadline, "CQEs did not arrive");
        mlx5::Platform::relax(dev.platform());
    }
    to_state(&mut a, QpState::Err);
    to_state(&mut a, QpState::Reset);
    let me = a.endpoint();
    a.connect(&me, &Default::default()).unwrap();
    a.post_send(&[write(999)]).unwrap();
    let wc = wait(&cq, &dev, 4);
    let ids: Vec<u64> = wc.iter().map(|w| w.wr_id).collect();
    assert_eq!(
        ids,
        [100, 101, 102, 999],
        "B's completions in order, then A's new one"
    );
    assert!(wc.iter().all(|w| w.status == WcStatus::Success), "{wc:?}");
    assert_eq!(
        cq.poll(&mut [empty_wc(); 4]).unwrap(),
        0,
        "nothing stale left"
    );
    // And the rings work on: a whole ring's worth more.
    for i in 0..16 {
        a.post_send(&[write(1000 + i)]).unwrap();
        assert_eq!(wait(&cq, &dev, 1)[0].wr_id, 1000 + i);
    }
}

/// Destroying a QP takes its unpolled CQEs out of a shared CQ, and the SRQ WQEs its receive
/// CQEs named go back to the SRQ (so the SRQ can be filled again to its limit).
#[test]
fn destroying_a_qp_cleans_its_cqes_and_returns_its_srq_wqes() {
    let fabric = Fabric::new();
    let (_sa, a) = nic(&fabric, Mode::Sync);
    let (sb, b) = nic(&fabric, Mode::Sync);
    let (cqa, cqb) = (a.create_cq(64).unwrap(), b.create_cq(64).unwrap());
    let mra = a.alloc_mr(a.pd(), 4096, MrAccess::ALL).unwrap();
    let mrb = b.alloc_mr(b.pd(), 4096, MrAccess::ALL).unwrap();
    let srq = b
        .create_srq(
            b.pd(),
            &SrqAttr {
                max_wr: 4,
                max_sge: 1,
                srq_limit: 0,
            },
        )
        .unwrap();
    let recv = [Sge {
        addr: mrb.addr(),
        length: 256,
        lkey: mrb.lkey(),
    }];
    let send = [Sge {
        addr: mra.addr(),
        length: 32,
        lkey: mra.lkey(),
    }];
    let rwrs: Vec<RecvWr<'_>> = (0..4)
        .map(|i| RecvWr {
            wr_id: i,
            sg_list: &recv,
        })
        .collect();
    // Fill the SRQ to the last free WQE.
    let mut posted = 0;
    while srq.post_recv(&rwrs[..1]).is_ok() {
        posted += 1;
    }
    assert!(posted >= 4);
    // Another QP of B on the same CQ, with its own completions pending.
    let mut other = looped(&b, &cqb, cap(8, 1, 1));
    {
        let mut s = qp(&a, &cqa, QpType::Rc, cap(16, 1, 1));
        let mut attr = QpInitAttr::new(QpType::Rc, &cqb, &cqb, cap(16, 0, 1));
        attr.srq = Some(&srq);
        let mut r = b.create_qp(b.pd(), &attr).unwrap();
        connect(&mut s, &mut r, &Default::default());
        for i in 0..3 {
            s.post_send(&[SendWr::send(i, &send)]).unwrap();
            other
                .post_send(&[SendWr {
                    op: SendOp::Write {
                        remote_addr: mrb.addr() + 1024,
                        rkey: mrb.rkey(),
                    },
                    ..SendWr::send(50 + i, &recv[..])
                }])
                .unwrap();
        }
        assert_eq!(wait(&cqa, &a, 3).len(), 3);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while sb.cqe_count(cqb.cqn()) != Some(6) {
            assert!(std::time::Instant::now() < deadline, "CQEs did not arrive");
            mlx5::Platform::relax(b.platform());
        }
        r.destroy().unwrap();
        s.destroy().unwrap();
    }
    let wc = wait(&cqb, &b, 3);
    let ids: Vec<u64> = wc.iter().map(|w| w.wr_id).collect();
    assert_eq!(
        ids,
        [50, 51, 52],
        "only the other QP's completions are left"
    );
    assert_eq!(cqb.poll(&mut [empty_wc(); 4]).unwrap(), 0);
    // The three SRQ WQEs the gone QP consumed are free again: the SRQ takes three more.
    srq.post_recv(&rwrs[..3]).unwrap();
    assert!(matches!(
        srq.post_recv(&rwrs[..1]),
        Err(Error::QueueFull { .. })
    ));
}

/// Review finding 5: a CREATE_CQ that timed out had its ring and doorbell record freed though
/// the firmware may still create the CQ. Now they stay mapped, quarantined and counted — and so
/// does everything the dead device may still write when it is closed.
#[test]
fn a_create_that_timed_out_quarantines_its_memory() {
    let config = DeviceConfig {
        cmd_timeout_ms: 200,
        min_device_timeout_ms: 50,
        ..DeviceConfig::default()
    };
    let (sim, dev) = open_with("{}", config);
    let dev = dev.unwrap();
    assert_eq!(dev.quarantined(), Quarantined::default());
    let mapped = sim.dma_bytes_mapped();
    sim.inject(Fault::NeverComplete {
        opcode: mlx5::ifc::Opcode::CreateCq as u16,
    });
    let e = dev.create_cq(255).unwrap_err();
    assert!(matches!(
        e,
        Error::Timeout {
            waiting_for: Wait::Command { opcode: 0x400 },
            ..
        }
    ));
    let q = dev.quarantined();
    assert_eq!(q.buffers, 2, "the ring and the doorbell record");
    assert!(q.bytes >= 256 * 64, "{q:?}");
    assert!(
        sim.dma_bytes_mapped() >= mapped + 256 * 64,
        "still mapped for the device"
    );
    let (r, q) = dev.close_accounted();
    assert!(
        matches!(r, Err(Error::Unusable { .. })),
        "closing an unusable device says so"
    );
    assert_eq!(
        sim.dma_bytes_mapped() as u64,
        q.bytes,
        "all that stays mapped is quarantined (rings, command queue, firmware pages), and \
         nothing else: {q:?}"
    );
    assert_eq!(sim.dma_faults(), vec![], "nothing freed under the device");
}

/// Review finding 4: a failed DESTROY_MKEY handed the caller's buffer back (to be freed) while a
/// key still covered it. Now the buffer is quarantined, and the region had taken it for as long
/// as the key lived.
#[test]
fn a_failed_deregistration_quarantines_the_buffer() {
    let fabric = Fabric::new();
    let (sim, dev) = nic(&fabric, Mode::Sync);
    let buf = DmaBuf::alloc(dev.platform(), 2 * 4096, 4096).unwrap();
    let mr = dev.reg_mr(dev.pd(), buf, MrAccess::ALL).unwrap();
    sim.inject(Fault::FailCommand {
        opcode: mlx5::ifc::Opcode::DestroyMkey as u16,
        status: 0x3,
        syndrome: 0x1234,
    });
    let mapped = sim.dma_bytes_mapped();
    let e = mr.dereg().unwrap_err();
    assert!(
        matches!(e, Error::Cmd { opcode, .. } if opcode == mlx5::ifc::Opcode::DestroyMkey as u16),
        "{e}"
    );
    assert_eq!(
        dev.quarantined(),
        Quarantined {
            bytes: 2 * 4096,
            buffers: 1
        }
    );
    assert_eq!(
        sim.dma_bytes_mapped(),
        mapped,
        "still mapped: the key may be live"
    );
    // A region that deregisters cleanly hands the buffer back.
    let buf = DmaBuf::alloc(dev.platform(), 4096, 4096).unwrap();
    let mr = dev.reg_mr(dev.pd(), buf, MrAccess::LOCAL).unwrap();
    let back = mr.dereg().unwrap().expect("the caller's buffer");
    back.free(dev.platform()).unwrap();
}

/// Review finding 7: a device-reported `log_bf_reg_size` of 31 put BlueFlame stores into another
/// QP's UAR page and the SEND never completed. Now BlueFlame is off for such a device, and the
/// plain doorbell works.
#[test]
fn a_blueflame_register_larger_than_the_uar_page_is_not_used() {
    let (sim, dev) = open_with(r#"{"log_bf_reg_size":31}"#, DeviceConfig::default());
    let dev = dev.unwrap();
    Fabric::new().attach(&sim).unwrap();
    let cq = dev.create_cq(16).unwrap();
    let mr = dev.alloc_mr(dev.pd(), 4096, MrAccess::ALL).unwrap();
    let mut q = looped(&dev, &cq, cap(4, 4, 1));
    let recv = [Sge {
        addr: mr.addr() + 1024,
        length: 256,
        lkey: mr.lkey(),
    }];
    q.post_recv(&[RecvWr {
        wr_id: 7,
        sg_list: &recv,
    }])
    .unwrap();
    let data = [0x5au8; 48];
    let wr = SendWr {
        payload: Payload::Inline(&data),
        ..SendWr::send(1, &[])
    };
    q.post_send(&[wr]).unwrap();
    let wc = wait(&cq, &dev, 2);
    assert!(wc.iter().all(|w| w.status == WcStatus::Success), "{wc:?}");
    assert_eq!(
        sim.dma_faults(),
        vec![],
        "no store outside the QP's UAR page"
    );
}

/// Review §1.3: capability exponents past 63 panicked debug builds (`1 << log_max_cq_sz`), and
/// an SRQ of 2^17 WQEs overflowed its 16-bit free list on the first post.
#[test]
fn device_exponents_at_their_field_maxima_do_not_panic() {
    for log in [64, 255] {
        let (_sim, dev) = open_with(
            &format!(r#"{{"log_max_cq_sz":{log}}}"#),
            DeviceConfig::default(),
        );
        let dev = dev.unwrap();
        let _ = dev.create_cq(256).map(drop);
        let _ = dev.create_cq(u32::MAX).map(drop);
    }
    let (_sim, dev) = open_with(r#"{"log_max_srq_sz":17}"#, DeviceConfig::default());
    let dev = dev.unwrap();
    let big = dev.create_srq(
        dev.pd(),
        &SrqAttr {
            max_wr: 70_000,
            max_sge: 1,
            srq_limit: 0,
        },
    );
    assert!(
        matches!(
            big,
            Err(Error::InvalidArgument {
                field: "max_wr",
                max: 65535,
                ..
            })
        ),
        "a CQE's 16-bit wqe_counter bounds an SRQ: {big:?}"
    );
    let srq = dev
        .create_srq(
            dev.pd(),
            &SrqAttr {
                max_wr: 40_000,
                max_sge: 1,
                srq_limit: 0,
            },
        )
        .unwrap();
    assert!(srq.sized().wqe_cnt <= 1 << 16);
    let mr = dev.alloc_mr(dev.pd(), 4096, MrAccess::ALL).unwrap();
    let sge = [Sge {
        addr: mr.addr(),
        length: 64,
        lkey: mr.lkey(),
    }];
    srq.post_recv(&[RecvWr {
        wr_id: 1,
        sg_list: &sge,
    }])
    .unwrap();
}

/// Review §1.7 and §1.2: absurd caller values are typed errors, never panics.
#[test]
fn absurd_caller_values_are_refused() {
    let fabric = Fabric::new();
    let (_sim, dev) = nic(&fabric, Mode::Sync);
    let mr = dev.alloc_mr(dev.pd(), 4096, MrAccess::ALL).unwrap();
    assert!(matches!(
        mr.write(usize::MAX, &[1]),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        mr.read(usize::MAX - 1, &mut [0; 4]),
        Err(Error::InvalidArgument { .. })
    ));
    // A table whose size overflows is refused (it wrapped to 96 bytes and was written past).
    assert!(SharedTable::alloc(dev.platform(), usize::MAX / 8 + 5).is_err());
    assert!(SharedTable::alloc(dev.platform(), usize::MAX).is_err());
    // A BAR too small for a UAR page.
    let sim = SimDevice::new(Profile::connectx5(), Mode::Sync);
    let e = Device::open(
        SimPlatform::new(sim),
        DeviceConfig {
            bar_size: 1024,
            ..DeviceConfig::default()
        },
    )
    .unwrap_err();
    assert!(matches!(
        e,
        Error::InvalidArgument {
            field: "DeviceConfig::bar_size",
            ..
        }
    ));
}

/// Review finding 6: the device chose its own command timeouts (up to ~119 years) over the
/// configuration, and a published 1 ms made every command time out. Now the configuration is
/// the ceiling and `min_device_timeout_ms` the floor.
#[test]
fn device_published_timeouts_stay_within_the_configuration() {
    let years = 3 << 29 | 0xf_ffff; // 1 048 575 hours
    let one_ms = 1;
    for (exec_to, want) in [(years, 60_000), (one_ms, 1_000), (2 << 29 | 1, 60_000)] {
        let sim = SimDevice::new(Profile::connectx5(), Mode::Sync);
        for (offset, value) in [(0xff8, exec_to), (0xffc, years)] {
            sim.inject(Fault::InitSegWord {
                offset,
                value,
                sticky: true,
            });
        }
        let dev = Device::open(SimPlatform::new(sim.clone()), DeviceConfig::default()).unwrap();
        assert_eq!(
            dev.config().cmd_timeout_ms,
            want,
            "cmd_exec_to {exec_to:#x}"
        );
        assert_eq!(
            dev.config().fw_init_timeout_ms,
            DeviceConfig::default().fw_init_timeout_ms,
            "cmd_q_init_to of years is cut to the configured ceiling"
        );
        dev.close().unwrap();
    }
}

/// Review §1.1: the wait for `initializing` ignored the health buffer: a firmware that died
/// while initializing was waited for until the deadline. Now it is reported at once.
#[test]
fn a_firmware_dead_during_initialization_is_reported_at_once() {
    let sim = SimDevice::new(Profile::connectx5(), Mode::Sync);
    sim.inject(Fault::StuckInitializing);
    sim.inject(Fault::FatalHealth { synd: 0x1 });
    let started = std::time::Instant::now();
    let e = Device::open(
        SimPlatform::new(sim),
        DeviceConfig {
            fw_pre_init_timeout_ms: 1,
            fw_init_timeout_ms: 600_000,
            ..DeviceConfig::default()
        },
    )
    .unwrap_err();
    assert!(matches!(e, Error::Health { .. }), "{e}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}

/// Review finding 1: one 8-byte device write into a work-request table made `destroy` free the
/// table under a live handle (a heap corruption). The tables now live in host memory: here the
/// device overwrites every byte of every DMA buffer the QP and its CQ were given (rings,
/// doorbell records) with the word 1, and the driver goes on — polls give typed errors or nothing,
/// destroy works, a new QP on a new CQ works, and the accounts balance.
#[test]
fn device_writes_over_every_queue_buffer_cannot_reach_the_driver_bookkeeping() {
    let fabric = Fabric::new();
    let (sim, dev) = nic(&fabric, Mode::Sync);
    let mr = dev.alloc_mr(dev.pd(), 4096, MrAccess::ALL).unwrap();
    let sge = [Sge {
        addr: mr.addr(),
        length: 64,
        lkey: mr.lkey(),
    }];
    let write = |id| write_wr(&mr, &sge, id);
    let before: std::collections::HashSet<_> = sim.dma_allocations().into_iter().collect();
    {
        let cq = dev.create_cq(64).unwrap();
        let mut q = looped(&dev, &cq, cap(16, 16, 1));
        for i in 0..8 {
            q.post_send(&[write(i)]).unwrap();
        }
        assert_eq!(wait(&cq, &dev, 8).len(), 8);
        for i in 8..12 {
            q.post_send(&[write(i)]).unwrap();
        }
        let mine: Vec<_> = sim
            .dma_allocations()
            .into_iter()
            .filter(|a| !before.contains(a))
            .collect();
        assert!(mine.len() >= 4, "CQ ring + DBR, QP ring + DBR: {mine:?}");
        for (iova, len) in mine {
            for off in (0..len).step_by(8) {
                // The word the audit wrote into a table's reference count: 1.
                let n = (len - off).min(8);
                sim.inject(Fault::DmaScribble {
                    iova: iova + off as u64,
                    bytes: 1u64.to_ne_bytes()[..n].to_vec(),
                });
            }
        }
        for _ in 0..8 {
            match cq.poll(&mut [empty_wc(); 4]) {
                Ok(_) => {}
                Err(e) => assert!(!e.to_string().is_empty()),
            }
        }
        // Destroy works (it used to free the table under the CQ's handle); the CQ goes too.
        q.destroy().unwrap();
        cq.destroy().unwrap();
    }
    let cq = dev.create_cq(64).unwrap();
    let mut q = looped(&dev, &cq, cap(16, 16, 1));
    for i in 0..20 {
        q.post_send(&[write(100 + i)]).unwrap();
        let wc = wait(&cq, &dev, 1);
        assert_eq!((wc[0].wr_id, wc[0].status), (100 + i, WcStatus::Success));
    }
    drop(q);
    drop(cq);
    drop(mr);
    let (r, quarantined) = dev.close_accounted();
    r.unwrap();
    assert_eq!(sim.dma_bytes_mapped() as u64, quarantined.bytes);
}

/// Fuzzing finding (cmd_output, a CREATE_QP answer naming another QPN): when DESTROY_QP fails,
/// the QP's rings stay with the device, but its work-request tables — host memory the device
/// cannot reach — leaked with the CQ's handles. Now the CQ gives them back when it goes (its own
/// DESTROY_CQ fails: the device still has QPs on it), and after close no host memory is held.
#[test]
fn the_tables_of_a_qp_that_would_not_die_are_freed_with_its_cq() {
    let sim = SimDevice::new(Profile::connectx5(), Mode::Sync);
    let plat = SimPlatform::new(sim.clone());
    let dev = Device::open(plat.clone(), DeviceConfig::default()).unwrap();
    let held = plat.host_bytes_in_use();
    let pd = dev.pd();
    let cq = dev.create_cq(63).unwrap();
    let srq = dev
        .create_srq(
            pd,
            &SrqAttr {
                max_wr: 8,
                max_sge: 1,
                srq_limit: 0,
            },
        )
        .unwrap();
    let own = dev
        .create_qp(pd, &QpInitAttr::new(QpType::Rc, &cq, &cq, cap(8, 8, 1)))
        .unwrap();
    let mut attr = QpInitAttr::new(QpType::Rc, &cq, &cq, cap(8, 0, 1));
    attr.srq = Some(&srq);
    let on_srq = dev.create_qp(pd, &attr).unwrap();
    assert!(
        plat.host_bytes_in_use() > held,
        "the tables are host memory"
    );
    for q in [own, on_srq] {
        sim.inject(Fault::FailCommand {
            opcode: mlx5::ifc::Opcode::DestroyQp as u16,
            status: 0x3,
            syndrome: 0x51,
        });
        let e = q.destroy().unwrap_err();
        assert!(matches!(e, Error::Cmd { opcode: 0x501, .. }), "{e}");
    }
    assert!(
        dev.quarantined().buffers >= 4,
        "both QPs' rings stay with the device"
    );
    drop(srq);
    let e = cq.destroy().unwrap_err();
    assert!(matches!(e, Error::Cmd { opcode: 0x401, .. }), "{e}");
    let (_, q) = dev.close_accounted();
    assert_eq!(sim.dma_bytes_mapped() as u64, q.bytes, "{q:?}");
    assert_eq!(sim.dma_faults(), vec![], "nothing freed under the device");
    assert_eq!(
        plat.host_bytes_in_use(),
        0,
        "no host memory held after close"
    );
}

/// A QP's DEALLOC_UAR that fails (the soak's seed 1796186768186647305: an honest FailCommand)
/// leaves the page with the device: the driver remembers it and frees it again at close, so a
/// device whose teardown succeeds has no UAR left (it had one, unknown to the driver).
#[test]
fn a_uar_whose_dealloc_failed_is_freed_at_close() {
    let sim = SimDevice::new(Profile::connectx5(), Mode::Sync);
    let dev = Device::open(SimPlatform::new(sim.clone()), DeviceConfig::default()).unwrap();
    let cq = dev.create_cq(8).unwrap();
    // Five QPs on dedicated registers, four to a page: the fifth's page, once empty, stays as
    // the spare; the first page's last QP then gives its page back with DEALLOC_UAR.
    let mut qps: Vec<_> = (0..5)
        .map(|_| qp(&dev, &cq, QpType::Rc, cap(4, 4, 1)))
        .collect();
    let pages: Vec<u32> = qps.iter().map(|q| mlx5::raw::qp_uar(q).index()).collect();
    assert!(
        pages[..4].iter().all(|&p| p == pages[0]) && pages[4] != pages[0],
        "{pages:?}"
    );
    qps.pop().unwrap().destroy().unwrap();
    for q in qps.drain(1..) {
        q.destroy().unwrap();
    }
    let qp = qps.pop().unwrap();
    drop(qps);
    let uar = pages[0];
    sim.inject(Fault::FailCommand {
        opcode: mlx5::ifc::Opcode::DeallocUar as u16,
        status: 0x22,
        syndrome: 0x1234,
    });
    let e = qp.destroy().unwrap_err();
    assert!(matches!(e, Error::Cmd { opcode: 0x803, .. }), "{e:?}");
    assert!(
        sim.live_objects()
            .contains(&(mlx5::sim::ObjectKind::Uar, uar)),
        "the page is still the device's"
    );
    drop(cq);
    let (r, q) = dev.close_accounted();
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(q, Quarantined::default());
    assert!(sim.live_objects().is_empty(), "{:?}", sim.live_objects());
    assert_eq!(sim.pages_held(), 0);
}
