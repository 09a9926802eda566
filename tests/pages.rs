//! Firmware page requests as a PF's firmware makes them (issue #10, row 1): the simulated
//! firmware holds a CREATE until the pages it needs arrive and asks for them — and offers pages
//! back — with PAGE_REQUEST events at any moment; the driver answers on its own, in the second
//! command slot while a command waits and whenever events are serviced. Nobody calls
//! `service_page_requests`.

mod common;

use common::*;
use mlx5::ifc::{CmdStatus, Opcode};
use mlx5::qp::{ConnectOpts, QpInitAttr, QpType, RecvWr, SendWr, Sge};
use mlx5::sim::{Fault, Mode, PagePolicy, Profile, RandomPages, SimDevice};
use mlx5::srq::SrqAttr;
use mlx5::{DeviceConfig, Error, MrAccess, Quarantined, SimPlatform, Wait, WcStatus};

/// A device of the `cx5` profile under `policy`, alone on its fabric (loopback).
fn open(policy: PagePolicy, mode: Mode, config: DeviceConfig) -> (SimDevice, Dev) {
    let sim = SimDevice::new(Profile::connectx5().with_page_policy(policy), mode);
    let dev = mlx5::Device::open(SimPlatform::new(sim.clone()), config).expect("bring-up");
    (sim, dev)
}

fn icm(pages: u32) -> PagePolicy {
    PagePolicy {
        icm_pages_per_object: pages,
        ..PagePolicy::default()
    }
}

/// Nothing left: no page, object, DMA memory or DMA fault in the device, nothing quarantined.
fn assert_clean(sim: &SimDevice, closed: (mlx5::Result<()>, Quarantined)) {
    let (r, q) = closed;
    r.expect("close");
    assert_eq!(q, Quarantined::default(), "nothing quarantined");
    assert_eq!(sim.pages_held(), 0, "pages held");
    let st = sim.page_stats();
    assert_eq!(st.held, 0);
    assert_eq!(st.pages_given, st.pages_taken, "every page given came back");
    assert_eq!(st.waiting_commands, 0);
    assert!(sim.live_objects().is_empty(), "{:?}", sim.live_objects());
    assert_eq!(sim.dma_bytes_mapped(), 0, "DMA memory left mapped");
    assert!(sim.dma_faults().is_empty(), "{:?}", sim.dma_faults());
}

/// The sequence numbers of the successful commands `opcode` in the device's trace.
fn seqs(sim: &SimDevice, opcode: Opcode, op_mod: u16) -> Vec<u64> {
    sim.trace()
        .iter()
        .filter(|r| r.opcode == opcode as u16 && r.op_mod == op_mod && r.status == 0)
        .map(|r| r.seq)
        .collect()
}

fn held_create_completes(mode: Mode) {
    let (sim, dev) = open(icm(4), mode, DeviceConfig::default());
    let before = dev.page_stats();
    let cq = dev
        .create_cq(64)
        .expect("a CREATE_CQ that waits for its pages");
    let st = sim.page_stats();
    assert_eq!(
        (
            st.commands_held,
            st.requests,
            st.pages_requested,
            st.waiting_commands
        ),
        (1, 1, 4, 0),
        "held once, asked once for its 4 pages, released"
    );
    let after = dev.page_stats();
    assert_eq!(after.requests - before.requests, 1, "the driver answered");
    assert_eq!(after.given - before.given, 4);
    assert_eq!(dev.pages_held(), sim.pages_held());
    // The give ran while CREATE_CQ waited: the firmware executed it first.
    let give = *seqs(&sim, Opcode::ManagePages, 1).last().unwrap();
    let create = *seqs(&sim, Opcode::CreateCq, 0).last().unwrap();
    assert!(
        give < create,
        "MANAGE_PAGES {give} before CREATE_CQ {create}"
    );
    assert!(
        seqs(&sim, Opcode::QueryPages, 3).is_empty(),
        "no QUERY_PAGES regular: nobody called service_page_requests"
    );
    // A second CQ needs 4 more.
    let cq2 = dev.create_cq(16).unwrap();
    assert_eq!(sim.page_stats().commands_held, 2);
    cq2.destroy().unwrap();
    cq.destroy().unwrap();
    assert_clean(&sim, dev.close_accounted());
}

#[test]
fn a_create_that_needs_pages_completes_once_they_arrive() {
    held_create_completes(Mode::Sync);
}

#[test]
fn a_create_that_needs_pages_completes_on_a_threaded_device() {
    held_create_completes(Mode::Threaded);
}

/// The long workload: rounds of CQ, SRQ, two QPs and an MR created, traffic through them
/// (SEND to the SRQ, RDMA WRITE), all destroyed — while the firmware needs ICM for every object,
/// offers its spare pages back after each destroy, and asks for and offers pages at random
/// moments (seeded).
fn workload(mode: Mode, rounds: u32, seed: u64) {
    let policy = PagePolicy {
        icm_pages_per_object: 3,
        spare_pages: Some(0),
        random: Some(RandomPages {
            seed,
            per_mille: 250,
            max_pages: 8,
        }),
    };
    let (sim, dev) = open(policy, mode, DeviceConfig::default());
    let pd = dev.pd();
    let mut events = [mlx5::Event::default(); 8];
    for round in 0..rounds {
        let cq = dev.create_cq(64).expect("create_cq");
        let srq = dev
            .create_srq(
                pd,
                &SrqAttr {
                    max_wr: 16,
                    max_sge: 1,
                    srq_limit: 0,
                },
            )
            .expect("create_srq");
        let mr = dev.alloc_mr(pd, 16384, MrAccess::ALL).expect("alloc_mr");
        let mut a = qp(&dev, &cq, QpType::Rc, cap(8, 1, 1));
        let mut attr = QpInitAttr::new(QpType::Rc, &cq, &cq, cap(8, 0, 1));
        attr.srq = Some(&srq);
        let mut b = dev.create_qp(pd, &attr).expect("create_qp with SRQ");
        connect(&mut a, &mut b, &ConnectOpts::default());
        let msg = [round as u8; 300];
        mr.write(0, &msg).unwrap();
        srq.post_recv(&[RecvWr {
            wr_id: 7,
            sg_list: &[Sge {
                addr: mr.addr() + 8192,
                length: 1024,
                lkey: mr.lkey(),
            }],
        }])
        .unwrap();
        let sge = [Sge {
            addr: mr.addr(),
            length: 300,
            lkey: mr.lkey(),
        }];
        a.post_send(&[SendWr::send(1, &sge), write_wr(&mr, &sge, 2)])
            .unwrap();
        let wcs = wait(&cq, &dev, 3);
        assert!(
            wcs.iter().all(|w| w.status == WcStatus::Success),
            "round {round}: {wcs:?}"
        );
        let mut got = [0u8; 300];
        mr.read(8192, &mut got).unwrap();
        assert_eq!(got, msg, "round {round}: the SEND");
        mr.read(2048, &mut got).unwrap();
        assert_eq!(got, msg, "round {round}: the WRITE");
        if round % 3 == 0 {
            // Async events are polled now and then: page requests are answered there too.
            dev.poll_async_events(&mut events).unwrap();
        }
        b.destroy().unwrap();
        a.destroy().unwrap();
        mr.dereg().unwrap();
        srq.destroy().unwrap();
        cq.destroy().unwrap();
        assert_eq!(sim.page_stats().waiting_commands, 0);
    }
    let st = sim.page_stats();
    let ds = dev.page_stats();
    assert!(
        st.commands_held >= u64::from(rounds) && st.requests > u64::from(rounds) * 2,
        "commands waited and pages were asked for throughout: {st:?}"
    );
    assert!(st.reclaims > u64::from(rounds), "and offered back: {st:?}");
    assert!(ds.taken > 0 && ds.failures == 0 && ds.lost == 0, "{ds:?}");
    assert_eq!(
        dev.pages_held(),
        sim.pages_held(),
        "driver and firmware agree"
    );
    assert_eq!(dev.quarantined(), Quarantined::default());
    assert_eq!(dev.cmd_stats().failed, 0, "no command refused");
    assert_clean(&sim, dev.close_accounted());
}

#[test]
fn a_long_workload_while_the_firmware_asks_for_and_reclaims_pages() {
    workload(Mode::Sync, 40, 0x5eed);
}

#[test]
fn the_same_on_a_threaded_device() {
    workload(Mode::Threaded, 10, 0xfeed);
}

#[test]
fn the_same_seed_asks_the_same() {
    let run = |seed| {
        let policy = PagePolicy {
            icm_pages_per_object: 1,
            spare_pages: Some(0),
            random: Some(RandomPages {
                seed,
                per_mille: 500,
                max_pages: 8,
            }),
        };
        let (sim, dev) = open(policy, Mode::Sync, DeviceConfig::default());
        for _ in 0..10 {
            dev.create_cq(8).unwrap().destroy().unwrap();
        }
        let st = sim.page_stats();
        assert_clean(&sim, dev.close_accounted());
        st
    };
    assert_eq!(run(3), run(3));
}

/// A short command timeout, so the bounded waits end soon (device time).
fn short_timeouts() -> DeviceConfig {
    DeviceConfig {
        cmd_timeout_ms: 200,
        min_device_timeout_ms: 100,
        reclaim_timeout_ms: 50,
        ..DeviceConfig::default()
    }
}

#[test]
fn pages_that_never_arrive_end_in_a_bounded_timeout() {
    let (sim, dev) = open(icm(4), Mode::Sync, short_timeouts());
    // The firmware refuses the give: the CREATE_CQ it holds never gets its pages.
    sim.inject(Fault::FailCommand {
        opcode: Opcode::ManagePages as u16,
        status: CmdStatus::BadParam.raw(),
        syndrome: 0x1234,
    });
    let t0 = sim.now_ns();
    let Err(e) = dev.create_cq(64) else {
        panic!("no pages, no CQ")
    };
    let waited = (sim.now_ns() - t0) / 1_000_000;
    match e {
        Error::Timeout {
            waiting_for: Wait::Command { opcode },
            waited_ms,
        } => {
            assert_eq!(opcode, Opcode::CreateCq as u16);
            assert!((200..=250).contains(&waited_ms), "{waited_ms} ms");
        }
        e => panic!("{e:?}"),
    }
    assert!(waited < 300, "bounded: {waited} ms of device time");
    let st = dev.page_stats();
    assert_eq!(
        (st.requests, st.failures),
        (1, 1),
        "the refused give was counted"
    );
    assert_eq!(
        sim.page_stats().waiting_commands,
        1,
        "still held by the device"
    );
    assert!(matches!(dev.create_cq(8), Err(Error::Unusable { .. })));
    let (r, q) = dev.close_accounted();
    assert!(r.is_err());
    assert!(
        q.bytes > 0,
        "the device may still use its memory: quarantined"
    );
    assert!(sim.dma_faults().is_empty(), "{:?}", sim.dma_faults());
}

#[test]
fn a_give_that_never_completes_ends_in_a_bounded_timeout() {
    let (sim, dev) = open(icm(4), Mode::Sync, short_timeouts());
    sim.inject(Fault::NeverComplete {
        opcode: Opcode::ManagePages as u16,
    });
    let t0 = sim.now_ns();
    match dev.create_cq(64) {
        Err(Error::Timeout {
            waiting_for: Wait::Command { opcode },
            ..
        }) => assert_eq!(opcode, Opcode::ManagePages as u16, "the give in slot 1"),
        other => panic!("{:?}", other.err()),
    }
    assert!((sim.now_ns() - t0) / 1_000_000 < 300, "bounded");
    let plat = dev.platform().clone();
    let (r, q) = dev.close_accounted();
    assert!(r.is_err() && q.bytes > 0);
    // The pages stay the device's (quarantined); the driver's own table of them does not.
    assert_eq!(plat.host_bytes_in_use(), 0, "host memory held after close");
    assert!(sim.dma_faults().is_empty(), "{:?}", sim.dma_faults());
}

#[test]
fn pages_the_driver_cannot_give_fail_the_command_not_the_device() {
    // More ICM than the driver's pool may lend (configured to 128 MiB).
    let config = DeviceConfig {
        fw_pages_max: 32_768,
        ..DeviceConfig::default()
    };
    let (sim, dev) = open(icm(40_000), Mode::Sync, config);
    match dev.create_cq(64) {
        Err(Error::Cmd { opcode, status, .. }) => {
            assert_eq!(opcode, Opcode::CreateCq as u16);
            assert_eq!(status, CmdStatus::NoResources);
        }
        other => panic!("{:?}", other.err()),
    }
    assert_eq!(
        sim.page_stats().alloc_fail_notices,
        1,
        "MANAGE_PAGES op_mod 0"
    );
    assert_eq!(dev.page_stats().failures, 1);
    // The device is fine: with the ICM it can have, a CQ is made.
    sim.set_page_policy(icm(2));
    dev.create_cq(64).unwrap().destroy().unwrap();
    assert_clean(&sim, dev.close_accounted());
}

#[test]
fn a_reclaim_naming_a_page_not_ours_is_refused_and_kept_from_reuse() {
    let policy = PagePolicy {
        icm_pages_per_object: 2,
        spare_pages: Some(0),
        random: None,
    };
    let (sim, dev) = open(policy, Mode::Sync, short_timeouts());
    let cq = dev.create_cq(8).unwrap();
    let held = dev.pages_held();
    // After DESTROY_CQ the firmware offers its 2 spare pages back and the driver takes them
    // at once — but the take's output lies: its first address is nothing the driver gave.
    sim.inject(Fault::CorruptOutput {
        opcode: Opcode::ManagePages as u16,
        offset: 16,
        bytes: 0xdead_b000u64.to_be_bytes().to_vec(),
    });
    cq.destroy().unwrap();
    assert_eq!(sim.page_stats().reclaims, 1);
    let st = dev.page_stats();
    assert_eq!((st.failures, st.lost), (1, 1), "{st:?}");
    assert_eq!(
        dev.pages_held(),
        held - 1,
        "the named page of ours: lost, not freed"
    );
    assert_eq!(sim.pages_held(), held - 2, "the device did give both back");
    let mut ev = [mlx5::Event::default(); 4];
    assert_eq!(
        dev.poll_async_events(&mut ev).unwrap(),
        0,
        "nothing for the caller"
    );
    // The device still works.
    dev.create_cq(8).unwrap().destroy().unwrap();
    // At close the driver waits (bounded) for the page the output did not name, then keeps
    // every chunk: nothing the device might still hold goes back to the platform.
    let (r, q) = dev.close_accounted();
    assert!(
        matches!(
            r,
            Err(Error::Timeout {
                waiting_for: Wait::PageReclaim { outstanding: 1 },
                ..
            })
        ),
        "{r:?}"
    );
    assert!(q.bytes >= 64 * 4096, "{q:?}");
    assert_eq!(sim.pages_held(), 0);
    assert!(
        sim.dma_faults().is_empty(),
        "no page the device held was freed: {:?}",
        sim.dma_faults()
    );
}

#[test]
fn a_command_queue_of_one_entry_is_refused() {
    // Entry 1 answers page requests while entry 0 waits: a queue without it cannot work.
    let sim = SimDevice::new(Profile::connectx5(), Mode::Sync);
    sim.inject(Fault::InitSegWord {
        offset: mlx5::ifc::regs::CMDQ_ADDR_L_SZ,
        value: 6, // log_cmdq_size 0, log_cmdq_stride 6
        sticky: true,
    });
    match mlx5::Device::open(SimPlatform::new(sim.clone()), DeviceConfig::default()) {
        Err(Error::Unsupported { found: 1, .. }) => {}
        other => panic!("{:?}", other.err()),
    }
    assert_eq!(sim.dma_bytes_mapped(), 0, "nothing allocated");
}

#[test]
fn page_requests_that_lie_are_not_trusted() {
    use mlx5::sim::EqeField;
    let (sim, dev) = open(PagePolicy::default(), Mode::Sync, DeviceConfig::default());
    let eqn = u32::from(mlx5::raw::pages_eqn(&dev).expect("a pages EQ"));
    let held = dev.pages_held();
    // A request for another function: refused, nothing given.
    sim.inject(Fault::CorruptEqe {
        eqn: Some(eqn),
        field: EqeField::Data(0),
        value: 5,
    });
    sim.request_pages(3);
    let mut ev = [mlx5::Event::default(); 4];
    assert_eq!(dev.poll_async_events(&mut ev).unwrap(), 0);
    assert_eq!(
        (dev.page_stats().requests, dev.page_stats().failures),
        (1, 1)
    );
    assert_eq!((dev.pages_held(), sim.page_stats().asked), (held, 3));
    // service_page_requests still asks the firmware itself (QUERY_PAGES regular).
    assert_eq!(dev.service_page_requests().unwrap(), 3);
    assert_eq!((dev.pages_held(), sim.page_stats().asked), (held + 3, 0));
    // 2^31 - 1 pages: more than the pool lends; the firmware is told it cannot have them.
    sim.inject(Fault::CorruptEqe {
        eqn: Some(eqn),
        field: EqeField::Data(1),
        value: 0x7fff_ffff,
    });
    sim.request_pages(1);
    dev.poll_async_events(&mut ev).unwrap();
    assert_eq!(sim.page_stats().alloc_fail_notices, 1);
    assert_eq!(dev.pages_held(), held + 3);
    // "Released all pages": believed only as far as never giving the memory back.
    sim.inject(Fault::CorruptEqe {
        eqn: Some(eqn),
        field: EqeField::Data(0),
        value: 0x4000_0000,
    });
    sim.request_pages(1);
    dev.check_health().unwrap();
    assert_eq!(dev.pages_held(), 0);
    assert_eq!(dev.page_stats().lost, (held + 3) as u64);
    // The device goes on working.
    dev.create_cq(8).unwrap().destroy().unwrap();
    // At close, after TEARDOWN_HCA, the driver asks for the lost pages too: this firmware did
    // not release them (the event lied), so it names them all and nothing is quarantined.
    assert_clean(&sim, dev.close_accounted());
}
