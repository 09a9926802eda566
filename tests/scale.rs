//! Issue #30: queues at scale. More QPs than BAR0 has UAR pages, all on one CQ, share doorbell
//! registers (the first ones BlueFlame registers of their own, the rest the 8-byte doorbell of
//! shared ones); completions of any of them are found on the CQ; and every UAR page goes back
//! to the device when the queues go.

mod common;

use common::{cap, connect, nic, wait};
use mlx5::mr::MrAccess;
use mlx5::qp::{ConnectOpts, Qp, QpInitAttr, QpType, RecvWr, SendWr};
use mlx5::sim::{Fabric, Mode};
use mlx5::{SimPlatform, WcOpcode, WcStatus};

/// UAR pages in the simulated BAR0 (32 MiB of 4 KiB pages; the first holds the initialization
/// segment and the last ones device memory, so fewer are allocatable).
const BAR_PAGES: usize = (32 << 20) / 4096;

/// SEND `id` from `a` to `b` (one receive posted), checked on the shared CQ.
fn send_between(
    a: &mut Qp<'_, SimPlatform>,
    b: &mut Qp<'_, SimPlatform>,
    cq: &mlx5::cq::Cq<'_, SimPlatform>,
    dev: &common::Dev,
    mr: &mlx5::MemoryRegion<'_, SimPlatform>,
    id: u64,
) {
    let src = [mlx5::qp::Sge {
        addr: mr.addr(),
        length: 64,
        lkey: mr.lkey(),
    }];
    let dst = [mlx5::qp::Sge {
        addr: mr.addr() + 1024,
        length: 64,
        lkey: mr.lkey(),
    }];
    b.post_recv(&[RecvWr {
        wr_id: id + 1,
        sg_list: &dst,
    }])
    .unwrap();
    a.post_send(&[SendWr::send(id, &src)]).unwrap();
    let wc = wait(cq, dev, 2);
    let mut got: Vec<_> = wc
        .iter()
        .map(|w| (w.qp_num, w.wr_id, w.opcode, w.status))
        .collect();
    got.sort_by_key(|g| g.1);
    assert_eq!(
        got,
        [
            (a.qpn(), id, WcOpcode::Send, WcStatus::Success),
            (b.qpn(), id + 1, WcOpcode::Recv, WcStatus::Success)
        ]
    );
}

#[test]
fn more_qps_than_uar_pages_on_one_cq() {
    let fabric = Fabric::new();
    let (sim, dev) = nic(&fabric, Mode::Sync);
    let cq = dev.create_cq(256).unwrap();
    let mr = dev.alloc_mr(dev.pd(), 4096, MrAccess::ALL).unwrap();
    let n = BAR_PAGES + 1_900;
    let mut qps = Vec::with_capacity(n);
    for i in 0..n {
        let attr = QpInitAttr::new(QpType::Rc, &cq, &cq, cap(1, 1, 1));
        match dev.create_qp(dev.pd(), &attr) {
            Ok(q) => qps.push(q),
            Err(e) => panic!("QP {i} of {n}: {e}"),
        }
    }
    assert!(qps.len() > 10_000, "more than 10 000 queues on one CQ");
    let used = dev.bfreg_usage();
    let cfg = dev.config();
    assert_eq!(used.dedicated, cfg.dedicated_bfregs, "{used:?}");
    assert_eq!(
        used.shared_users as usize,
        n - cfg.dedicated_bfregs as usize
    );
    assert_eq!(used.shared, cfg.shared_bfregs);
    assert_eq!(
        used.pages,
        (cfg.dedicated_bfregs + cfg.shared_bfregs) / 4,
        "four registers a page: {used:?}"
    );
    let uars = mlx5::raw::qp_uar(&qps[n - 1]).index();
    assert!(uars > 0 && (uars as usize) < BAR_PAGES);

    // Traffic between the first two (dedicated registers), the last two (shared registers) and
    // across the classes; every completion found among the queues on the CQ.
    let opts = ConnectOpts::default();
    let mut last = qps.pop().unwrap();
    let mut before_last = qps.pop().unwrap();
    let mut second = qps.remove(1);
    let mut first = qps.remove(0);
    connect(&mut first, &mut second, &opts);
    connect(&mut before_last, &mut last, &opts);
    send_between(&mut first, &mut second, &cq, &dev, &mr, 10);
    send_between(&mut last, &mut before_last, &cq, &dev, &mr, 20);
    send_between(&mut before_last, &mut last, &cq, &dev, &mr, 30);

    for q in qps.drain(..) {
        q.destroy().unwrap();
    }
    for q in [first, second, before_last, last] {
        q.destroy().unwrap();
    }
    drop(qps);
    let left = dev.bfreg_usage();
    assert!(
        left.pages <= 1 && left.dedicated == 0 && left.shared_users == 0,
        "every page given back but one empty spare: {left:?}"
    );
    drop(mr);
    cq.destroy().unwrap();
    let faults = sim.dma_faults();
    assert!(faults.is_empty(), "{faults:?}");
}

/// A device is shared by threads; its queues move between them.
#[test]
fn a_device_is_sync_and_its_objects_send() {
    fn sync_send<T: Sync + Send>() {}
    fn send<T: Send>() {}
    sync_send::<mlx5::Device<SimPlatform>>();
    sync_send::<mlx5::cq::Cq<'static, SimPlatform>>();
    send::<Qp<'static, SimPlatform>>();
    send::<mlx5::MemoryRegion<'static, SimPlatform>>();
}

/// Two threads, each with its own CQ and QPs on one device, post and poll at the same time;
/// every byte arrives.
#[test]
fn two_threads_post_and_poll_on_one_device() {
    let fabric = Fabric::new();
    let (sim, dev) = nic(&fabric, Mode::Sync);
    // Of the four QPs the threads create, two get the last two dedicated registers and two
    // shared ones (which thread gets which depends on who comes first).
    let cq0 = dev.create_cq(64).unwrap();
    let filler: Vec<Qp<'_, SimPlatform>> = (0..dev.config().dedicated_bfregs - 2)
        .map(|_| {
            dev.create_qp(
                dev.pd(),
                &QpInitAttr::new(QpType::Rc, &cq0, &cq0, cap(1, 1, 1)),
            )
            .unwrap()
        })
        .collect();
    let dev = &dev;
    std::thread::scope(|s| {
        for t in 0..2u8 {
            s.spawn(move || {
                let cq = dev.create_cq(64).unwrap();
                let mr = dev.alloc_mr(dev.pd(), 4096, MrAccess::ALL).unwrap();
                let attr = QpInitAttr::new(QpType::Rc, &cq, &cq, cap(4, 4, 1));
                let mut a = dev.create_qp(dev.pd(), &attr).unwrap();
                let mut b = dev.create_qp(dev.pd(), &attr).unwrap();
                connect(&mut a, &mut b, &ConnectOpts::default());
                for round in 0..200u64 {
                    let data = [t ^ round as u8; 64];
                    mr.write(0, &data).unwrap();
                    send_between(&mut a, &mut b, &cq, dev, &mr, round * 2 + 100);
                    let mut got = [0u8; 64];
                    mr.read(1024, &mut got).unwrap();
                    assert_eq!(got, data, "thread {t}, round {round}");
                }
            });
        }
    });
    assert_eq!(
        dev.bfreg_usage().dedicated,
        dev.config().dedicated_bfregs - 2
    );
    drop(filler);
    assert!(sim.dma_faults().is_empty());
}
