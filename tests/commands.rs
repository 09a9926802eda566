//! Issue #30 item 3: many commands in flight. Every command takes a command queue entry of its
//! own (the device offers 32; the last answers page requests), so a command the firmware takes
//! long over stops nobody: other threads' commands run and complete meanwhile, the page
//! requests they raise are answered, and the slow one completes when the firmware is done.

mod common;

use common::{cap, nic, qp};
use mlx5::ifc::Opcode;
use mlx5::qp::QpType;
use mlx5::sim::{Fabric, Fault, Mode, ObjectKind, PagePolicy, Profile, SimDevice};
use mlx5::{Device, DeviceConfig, SimPlatform};

/// Waits (bounded) until the simulator keeps `n` slow commands.
fn until_kept(sim: &SimDevice, n: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while sim.slow_commands() < n {
        assert!(
            std::time::Instant::now() < deadline,
            "the slow command never reached the device"
        );
        std::thread::yield_now();
    }
}

/// A CQ, a QP on it, both destroyed: five commands and more.
fn churn(dev: &common::Dev) {
    let cq = dev.create_cq(64).expect("create_cq");
    let q = qp(dev, &cq, QpType::Rc, cap(4, 4, 1));
    q.destroy().expect("destroy_qp");
    cq.destroy().expect("destroy_cq");
}

#[test]
fn a_slow_command_stops_no_other() {
    let fabric = Fabric::new();
    let (sim, dev) = nic(&fabric, Mode::Sync);
    assert_eq!(dev.cmd_stats().slots, 32, "every entry the device offers");
    sim.inject(Fault::SlowCommand {
        opcode: Opcode::QueryVportState as u16,
    });
    let before = dev.cmd_stats().executed;
    let dev = &dev;
    std::thread::scope(|s| {
        let slow = s.spawn(move || dev.port_state());
        until_kept(&sim, 1);
        // The query is the device's; these run and complete around it.
        for _ in 0..10 {
            churn(dev);
        }
        assert!(
            !slow.is_finished(),
            "the slow command is still the device's"
        );
        assert_eq!(sim.finish_slow_commands(), 1);
        assert_eq!(slow.join().unwrap().expect("port_state").oper, 1);
    });
    let stats = dev.cmd_stats();
    assert!(stats.max_in_flight >= 2, "{stats:?}");
    assert!(stats.executed >= before + 41, "{stats:?}");
    assert_eq!(stats.failed, 0);
    assert!(sim.dma_faults().is_empty());
}

/// The firmware wants pages for every object; a command is slow all along. Each thread's
/// creates wait for pages that some waiting thread answers in the pages entry.
#[test]
fn page_requests_are_answered_while_a_command_is_slow() {
    let fabric = Fabric::new();
    let profile = Profile::connectx5().with_page_policy(PagePolicy {
        icm_pages_per_object: 2,
        spare_pages: Some(0),
        ..PagePolicy::default()
    });
    let (sim, dev) = common::nic_with(&fabric, Mode::Threaded, profile);
    sim.inject(Fault::SlowCommand {
        opcode: Opcode::QueryVportState as u16,
    });
    let requests = dev.page_stats().requests;
    let dev = &dev;
    std::thread::scope(|s| {
        let slow = s.spawn(move || dev.port_state());
        until_kept(&sim, 1);
        let workers: Vec<_> = (0..3)
            .map(|_| {
                s.spawn(move || {
                    for _ in 0..20 {
                        churn(dev);
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        assert_eq!(sim.finish_slow_commands(), 1);
        assert_eq!(slow.join().unwrap().expect("port_state").oper, 1);
    });
    assert!(
        dev.page_stats().requests >= requests + 3 * 20 * 2,
        "every create asked for pages: {:?}",
        dev.page_stats()
    );
    assert_eq!(dev.cmd_stats().failed, 0);
    assert!(sim.dma_faults().is_empty());
}

/// Four threads create and destroy objects at once on a device whose firmware asks for and
/// offers back pages at random; every command completes and every account balances.
#[test]
fn four_threads_churn_objects_with_pages_coming_and_going() {
    let profile = Profile::connectx5().with_page_policy(PagePolicy {
        icm_pages_per_object: 1,
        spare_pages: Some(4),
        random: Some(mlx5::sim::RandomPages {
            seed: 30,
            per_mille: 100,
            max_pages: 8,
        }),
    });
    let sim = SimDevice::new(profile, Mode::Threaded);
    let dev = Device::open(SimPlatform::new(sim.clone()), DeviceConfig::default()).unwrap();
    let objects = sim.live_objects();
    let rounds = if cfg!(miri) { 2 } else { 25 };
    let devr = &dev;
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(move || {
                for _ in 0..rounds {
                    churn(devr);
                }
            });
        }
    });
    let stats = dev.cmd_stats();
    assert_eq!(stats.failed, 0, "{stats:?}");
    assert!(stats.max_in_flight <= 31, "{stats:?}");
    // Every object destroyed, but for the one empty UAR page the driver keeps as a spare.
    let uars = |v: &[(ObjectKind, u32)]| v.iter().filter(|(k, _)| *k == ObjectKind::Uar).count();
    let live = sim.live_objects();
    assert!(
        live.len() - uars(&live) == objects.len() - uars(&objects)
            && uars(&live) <= uars(&objects) + 1,
        "every object destroyed: {live:?}"
    );
    dev.close().expect("close");
    assert_eq!(
        sim.dma_bytes_mapped(),
        0,
        "every page back, every buffer freed"
    );
    assert!(sim.dma_faults().is_empty());
}
