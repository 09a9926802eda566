//! BAR0, the clock, health, fault injection, DMA memory and the host-pointer memory model.

mod common;

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

use common::{bare, Poster};
use mlx5_ifc::consts::query_pages;
use mlx5_ifc::prm::cmdif::CmdQueueEntry as Entry;
use mlx5_ifc::prm::hca::{EnableHcaIn, QueryIssiIn, QueryPagesIn, QueryPagesOut};
use mlx5_ifc::{regs, Be32, Be64, Layout, Opcode, View, ViewMut};
use mlx5_sim::{
    Fault, Mode, Profile, SimDevice, SimError, UarWrite, BAR_SIZE, HEALTH_TICK_NS, INIT_DELAY_NS,
    IOVA_BASE, RELAX_NS,
};

fn read(dev: &SimDevice, off: u32) -> u32 {
    dev.bar_read32(off.into()).get()
}

fn relax_for(dev: &SimDevice, ns: u64) {
    for _ in 0..ns / RELAX_NS {
        dev.relax();
    }
}

#[test]
fn the_init_segment() {
    let dev = SimDevice::new(common::quiet(Profile::connectx5()), Mode::Sync);
    assert_eq!(dev.bar_size(), 32 << 20);
    assert_eq!(read(&dev, regs::FW_REV), (35 << 16) | 16);
    assert_eq!(read(&dev, regs::CMDIF_REV_FW_SUB), (5 << 16) | 2000);
    assert_eq!(read(&dev, regs::CMDQ_ADDR_L_SZ), (5 << 4) | 6);
    assert_eq!(
        (
            read(&dev, regs::CMD_EXEC_TO),
            read(&dev, regs::CMD_Q_INIT_TO)
        ),
        (0, 0)
    );
    assert_eq!(
        read(&dev, regs::HEALTH_FW_VER),
        (16 << 24) | (35 << 16) | 2000
    );
    assert_eq!(
        (
            read(&dev, regs::HEALTH_SYND),
            read(&dev, regs::HEALTH_RFR_SEVERITY)
        ),
        (0, 0)
    );
    dev.bar_write32(regs::CMDQ_ADDR_H.into(), Be32::new(0x1));
    dev.bar_write32(regs::CMDQ_ADDR_L_SZ.into(), Be32::new(0x2345_6000 | 1 << 8));
    assert_eq!(read(&dev, regs::CMDQ_ADDR_H), 1);
    assert_eq!(
        read(&dev, regs::CMDQ_ADDR_L_SZ),
        0x2345_6156,
        "address | nic_interface | size | stride"
    );
    dev.bar_write32(regs::FW_REV.into(), Be32::new(0));
    assert_eq!(read(&dev, regs::FW_REV), (35 << 16) | 16, "read-only");
    // Misaligned and out-of-range accesses: all ones, ignored, never a panic.
    assert_eq!(dev.bar_read32(2).get(), u32::MAX);
    assert_eq!(dev.bar_read32(BAR_SIZE - 2).get(), u32::MAX);
    assert_eq!(dev.bar_read32(BAR_SIZE).get(), u32::MAX);
    assert_eq!(dev.bar_read32(u64::MAX - 1).get(), u32::MAX);
    dev.bar_write32(regs::CMD_DBELL as u64 + 1, Be32::new(1));
    dev.bar_write64(4, Be64::new(1));
    dev.bar_write64(BAR_SIZE, Be64::new(1));
    assert_eq!(read(&dev, 0x2000), 0, "MSI-X table");
    assert_eq!(read(&dev, 9 * 4096), 0, "UAR page");
    assert!(
        dev.uar_write_count() == 0 && dev.dma_faults().is_empty() && dev.commands_executed() == 0
    );
}

#[test]
fn initializing_and_the_heartbeat_run_on_virtual_time() {
    let dev = SimDevice::new(common::quiet(Profile::connectx5()), Mode::Sync);
    assert_eq!(dev.now_ns(), 0);
    assert_eq!(read(&dev, regs::INITIALIZING), regs::INITIALIZING_BIT);
    relax_for(&dev, INIT_DELAY_NS - RELAX_NS);
    assert_eq!(read(&dev, regs::INITIALIZING), regs::INITIALIZING_BIT);
    dev.relax();
    assert_eq!(dev.now_ns(), INIT_DELAY_NS);
    assert_eq!(read(&dev, regs::INITIALIZING), 0);
    let c0 = read(&dev, regs::HEALTH_COUNTER);
    assert_ne!(c0, 0);
    relax_for(&dev, HEALTH_TICK_NS);
    assert_eq!(
        read(&dev, regs::HEALTH_COUNTER),
        c0 + 1,
        "one tick per 100 us"
    );
    assert_eq!(
        read(&dev, regs::HEALTH_COUNTER),
        c0 + 1,
        "reading does not advance time"
    );
}

#[test]
fn threaded_mode_runs_on_real_time() {
    let dev = SimDevice::new(common::quiet(Profile::connectx5()), Mode::Threaded);
    let c0 = read(&dev, regs::HEALTH_COUNTER);
    let t0 = dev.now_ns();
    std::thread::sleep(std::time::Duration::from_millis(3));
    dev.relax();
    assert!(dev.now_ns() - t0 >= 3_000_000);
    assert!(read(&dev, regs::HEALTH_COUNTER) >= c0 + 30);
    assert_eq!(read(&dev, regs::INITIALIZING), 0);
}

#[test]
fn stuck_initializing_until_cleared() {
    let dev = SimDevice::new(common::quiet(Profile::connectx5()), Mode::Sync);
    dev.inject(Fault::StuckInitializing);
    relax_for(&dev, 10 * INIT_DELAY_NS);
    assert_eq!(read(&dev, regs::INITIALIZING), regs::INITIALIZING_BIT);
    dev.clear_faults();
    assert_eq!(read(&dev, regs::INITIALIZING), 0);
}

#[test]
fn fatal_health_stops_the_heartbeat_and_the_firmware() {
    for mode in [Mode::Sync, Mode::Threaded] {
        let mut p = Poster::cx5(mode);
        p.ok(&bare::<EnableHcaIn>(Opcode::EnableHca, 0), 0x10);
        p.dev.inject(Fault::FatalHealth { synd: 0x8 });
        let dev = p.dev.clone();
        assert_eq!(dev.health_syndrome(), 0x8);
        assert_eq!((read(&dev, regs::HEALTH_SYND) >> 16) & 0xff, 0x8);
        assert_eq!(read(&dev, regs::HEALTH_RFR_SEVERITY) >> 31, 1, "rfr");
        let c0 = read(&dev, regs::HEALTH_COUNTER);
        relax_for(&dev, 10 * HEALTH_TICK_NS);
        std::thread::sleep(std::time::Duration::from_micros(300));
        assert_eq!(
            read(&dev, regs::HEALTH_COUNTER),
            c0,
            "{mode:?}: heartbeat stopped"
        );
        let m = p.prepare(0, &bare::<QueryIssiIn>(Opcode::QueryIssi, 0), 0x70);
        p.ring(1);
        assert_eq!(
            p.wait_for(&m, common::NEVER_NS),
            None,
            "{mode:?}: a dead firmware completes nothing"
        );
        assert_eq!(dev.commands_executed(), 1);
        dev.clear_faults();
        assert_eq!(
            dev.health_syndrome(),
            0x8,
            "clear_faults does not revive the firmware"
        );
    }
}

#[test]
fn never_complete_swallows_one_entry() {
    for mode in [Mode::Sync, Mode::Threaded] {
        let mut p = Poster::cx5(mode);
        p.ok(&bare::<EnableHcaIn>(Opcode::EnableHca, 0), 0x10);
        p.dev.inject(Fault::NeverComplete {
            opcode: Opcode::QueryIssi as u16,
        });
        let m = p.prepare(2, &bare::<QueryIssiIn>(Opcode::QueryIssi, 0), 0x70);
        p.ring(1 << 2);
        assert_eq!(p.wait_for(&m, common::NEVER_NS), None, "{mode:?}");
        assert_eq!(p.entry(&m)[0x3f] & 1, 1, "still owned by the device");
        p.ok(&bare::<QueryIssiIn>(Opcode::QueryIssi, 0), 0x70);
        assert_eq!(
            p.dev.commands_executed(),
            2,
            "{mode:?}: the swallowed command never ran"
        );
        p.release(m);
    }
}

#[test]
fn uar_writes_are_recorded() {
    let dev = SimDevice::new(common::quiet(Profile::connectx5()), Mode::Sync);
    dev.bar_write64(8 * 4096 + 0x800, Be64::new(0x0102_0304_0506_0708));
    dev.bar_write32(9 * 4096 + 0x40, Be32::new(0x0500_0010));
    dev.bar_write64(8 * 4096 + 0x804, Be64::new(1));
    assert_eq!(
        dev.uar_writes_since(0),
        vec![
            UarWrite {
                offset: 8 * 4096 + 0x800,
                value: 0x0102_0304_0506_0708,
                width: 64
            },
            UarWrite {
                offset: 9 * 4096 + 0x40,
                value: 0x0500_0010,
                width: 32
            },
        ]
    );
}

#[test]
fn dma_memory_accounting_and_errors() {
    let dev = SimDevice::new(common::quiet(Profile::connectx5()), Mode::Sync);
    let a = dev.dma_alloc(100, 8).unwrap();
    let b = dev.dma_alloc(8192, 1 << 20).unwrap();
    assert!(a.iova >= IOVA_BASE && a.iova % 4096 == 0 && a.host.as_ptr() as usize % 8 == 0);
    assert_eq!(b.iova % (1 << 20), 0);
    assert_eq!(dev.dma_bytes_mapped(), 8292);
    assert_eq!(dev.dma_alloc(0, 8).unwrap_err(), SimError::DmaZeroLength);
    assert_eq!(
        dev.dma_alloc(8, 24).unwrap_err().to_string(),
        "DMA alignment 0x18 is not a power of two up to 2 MiB"
    );
    dev.dma_free(a.iova).unwrap();
    let e = dev.dma_free(a.iova).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("DMA free of unknown iova {:#x}", a.iova)
    );
    assert_eq!(
        dev.dma_free(b.iova + 8).unwrap_err(),
        SimError::DmaUnknownIova { iova: b.iova + 8 }
    );
    assert!(matches!(
        dev.dma_read(a.iova, &mut [0; 4]),
        Err(SimError::DmaUnmapped { .. })
    ));
    assert!(dev.dma_write(b.iova + 8190, &[0; 4]).is_err());
    let c = dev.dma_alloc(100, 8).unwrap();
    assert!(
        c.iova > b.iova,
        "a freed IOVA range is not handed out again"
    );
    dev.dma_free(b.iova).unwrap();
    dev.dma_free(c.iova).unwrap();
    assert_eq!(dev.dma_bytes_mapped(), 0);
    assert!(dev.dma_faults().is_empty());
}

#[test]
fn host_pointer_and_device_see_the_same_bytes() {
    let dev = SimDevice::new(common::quiet(Profile::connectx5()), Mode::Sync);
    let b = dev.dma_alloc(16, 8).unwrap();
    // SAFETY: `b.host` is 8-aligned and points to 16 bytes the simulator keeps alive until
    // `dma_free`; every access to them, ours and the device's, is atomic.
    let w0 = unsafe { AtomicU64::from_ptr(b.host.as_ptr().cast::<u64>()) };
    w0.store(
        u64::from_ne_bytes([1, 2, 3, 4, 5, 6, 7, 8]),
        Ordering::Release,
    );
    let mut buf = [0u8; 8];
    dev.dma_read(b.iova, &mut buf).unwrap();
    assert_eq!(buf, [1, 2, 3, 4, 5, 6, 7, 8]);
    dev.dma_write(b.iova + 11, &[0xaa, 0xbb]).unwrap();
    // SAFETY: as above; byte 11 is inside the block.
    let b11 = unsafe { AtomicU8::from_ptr(b.host.as_ptr().add(11)) };
    assert_eq!(b11.load(Ordering::Acquire), 0xaa);
    dev.dma_free(b.iova).unwrap();
}

/// The driver's way of posting: entry words stored through the host pointer, the word holding
/// the ownership byte last with release; completion polled with acquire on the ownership byte.
#[test]
fn commands_posted_through_the_host_pointer_in_threaded_mode() {
    let mut p = Poster::cx5(Mode::Threaded);
    p.ok(&bare::<EnableHcaIn>(Opcode::EnableHca, 0), 0x10);
    let (dev, q) = (p.dev.clone(), p.cmdq);
    let word = |i: usize| {
        // SAFETY: the command queue block is 4096 bytes, 8-aligned, alive until `dma_free`, and
        // accessed atomically by both sides; `i < 8` stays inside entry 0.
        unsafe { AtomicU64::from_ptr(q.host.as_ptr().cast::<u64>().add(i)) }
    };
    // SAFETY: as above; byte 0x3f of entry 0.
    let own = unsafe { AtomicU8::from_ptr(q.host.as_ptr().add(0x3f)) };
    for n in 0..200u32 {
        let mut e = [0u8; Entry::BYTES];
        let mut v = ViewMut::<Entry>::new(&mut e).unwrap();
        v.set(Entry::TYPE, 7)
            .unwrap()
            .set(Entry::INPUT_LENGTH, 16)
            .unwrap();
        v.set(Entry::OUTPUT_LENGTH, 16)
            .unwrap()
            .set(Entry::TOKEN, u64::from(n % 255 + 1))
            .unwrap();
        v.set(Entry::OWNERSHIP, 1).unwrap();
        let input = bare::<QueryPagesIn>(Opcode::QueryPages, query_pages::BOOT);
        v.bytes_mut(Entry::COMMAND_INPUT_INLINE_DATA)
            .copy_from_slice(&input);
        for i in 0..8 {
            let w = u64::from_ne_bytes(e[i * 8..i * 8 + 8].try_into().unwrap());
            word(i).store(
                w,
                if i == 7 {
                    Ordering::Release
                } else {
                    Ordering::Relaxed
                },
            );
        }
        dev.bar_write32(regs::CMD_DBELL.into(), Be32::new(1));
        while own.load(Ordering::Acquire) & 1 == 1 {
            dev.relax();
        }
        assert_eq!(own.load(Ordering::Acquire) >> 1, 0, "delivery status");
        let mut out = Vec::new();
        for i in 4..6 {
            out.extend_from_slice(&word(i).load(Ordering::Acquire).to_ne_bytes());
        }
        let o = View::<QueryPagesOut>::new(&out).unwrap();
        assert_eq!(
            (o.get(QueryPagesOut::STATUS), o.get(QueryPagesOut::SYNDROME)),
            (0, 0)
        );
        assert_eq!(o.get(QueryPagesOut::NUM_PAGES), 16);
    }
    assert_eq!(dev.commands_executed(), 201);
    assert!(dev.trace().iter().all(|t| t.status == 0));
}

#[test]
fn profiles_from_json() {
    let p = Profile::from_json_str(
        r#"{"name": "small", "log_max_qp": 4, "roce_cap.roce_address_table_size": 8,
            "_boot_pages": 1, "_mac": "02:00:00:00:00:09", "base": "cx5-tight"}"#,
    )
    .unwrap();
    assert_eq!(p.name(), "small");
    assert_eq!(p.general_cap(mlx5_ifc::prm::caps::CmdHcaCap::LOG_MAX_QP), 4);
    assert_eq!(
        p.general_cap(mlx5_ifc::prm::caps::CmdHcaCap::LOG_MAX_PD),
        4,
        "from the base"
    );
    assert_eq!(
        p.general_cap(mlx5_ifc::prm::caps::CmdHcaCap::LOG_MAX_CQ_SZ),
        10
    );
    assert_eq!(
        p.roce_field(mlx5_ifc::prm::caps::RoceCap::ROCE_ADDRESS_TABLE_SIZE),
        8
    );
    assert_eq!(
        (p.boot_pages(), p.init_pages(), p.mac()),
        (1, 64, [2, 0, 0, 0, 0, 9])
    );
    let d = common::quiet(Profile::from_json_str("{}").unwrap());
    assert_eq!(
        &d.hca_cap_max()[..],
        &common::quiet(Profile::connectx5()).hca_cap_max()[..]
    );
    assert_eq!(d.fw_version(), (16, 35, 2000));
    let err = |s: &str| Profile::from_json_str(s).unwrap_err().to_string();
    assert_eq!(err(r#"{"foo": 1}"#), "unknown profile key \"foo\"");
    assert_eq!(
        err(r#"{"roce_cap.foo": 1}"#),
        "unknown profile key \"roce_cap.foo\""
    );
    assert_eq!(
        err(r#"{"log_max_qp_sz": 300}"#),
        "value 300 does not fit log_max_qp_sz (8 bits)"
    );
    assert_eq!(
        err(r#"{"log_max_qp": "x"}"#),
        "profile key \"log_max_qp\" takes a non-negative integer"
    );
    assert_eq!(err(r#"{"base": "cx9"}"#), "unknown profile \"cx9\"");
    assert!(err("[1]").starts_with("profile is not a JSON object"));
    assert_eq!(
        Profile::names(),
        &["cx5", "cx5-tight", "cx5-sq512", "cx5-vf"]
    );
    // A virtual function: PCI 15b3:1018, fewer MSI-X vectors; the hypervisor's MAC unset.
    let vf = Profile::by_name("cx5-vf").unwrap();
    assert_eq!(
        (vf.is_vf(), vf.pci_device_id(), vf.msix_vectors()),
        (true, 0x1018, 11)
    );
    assert_eq!(Profile::connectx5().pci_device_id(), 0x1017);
    let j = Profile::from_json_str(r#"{"base": "cx5-vf", "_mac_unset": 1}"#).unwrap();
    assert!(j.is_vf() && j.mac_unset());
    assert!(common::quiet_by_name("cx6").is_none());
    let path = std::env::temp_dir().join(format!("mlx5-sim-profile-{}.json", std::process::id()));
    std::fs::write(&path, r#"{"max_wqe_sz_sq": 512}"#).unwrap();
    let f = Profile::from_json_file(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(
        f.general_cap(mlx5_ifc::prm::caps::CmdHcaCap::MAX_WQE_SZ_SQ),
        512
    );
    assert!(matches!(
        Profile::from_json_file(&path),
        Err(SimError::ProfileFile { .. })
    ));
}

#[test]
fn the_uar_log_keeps_the_last_writes_only() {
    // A long run's doorbells must not grow the simulator's memory: the log keeps the last
    // UAR_LOG writes, and the count goes on.
    let dev = SimDevice::new(Profile::connectx5(), Mode::Sync);
    let uar = 0x1000 * 16;
    let n = mlx5_sim::UAR_LOG as u64 + 10;
    for k in 0..n {
        dev.bar_write64(uar + 0x20, Be64::new(k));
    }
    assert_eq!(dev.uar_write_count(), n);
    assert_eq!(dev.uar_writes_since(0).len(), mlx5_sim::UAR_LOG);
    let last = dev.uar_writes_since(n - 2);
    assert_eq!(last.len(), 2);
    assert_eq!(last[1].value, n - 1);
}
