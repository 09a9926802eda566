//! A lying BAR0: init segment and health buffer words that read as chosen values (once, until
//! the device changes the word, or sticky), and a device that fell off the bus.

mod common;

use common::{assert_clean, bare, Poster};
use mlx5_ifc::prm::hca::{EnableHcaIn, QueryIssiIn};
use mlx5_ifc::{regs, Be32, Be64, Opcode};
use mlx5_sim::{Fault, Mode, Profile, SimDevice, HEALTH_TICK_NS, INIT_DELAY_NS, RELAX_NS};

fn read(dev: &SimDevice, off: u32) -> u32 {
    dev.bar_read32(off.into()).get()
}

fn relax_for(dev: &SimDevice, ns: u64) {
    for _ in 0..ns / RELAX_NS {
        dev.relax();
    }
}

fn forge(dev: &SimDevice, offset: u32, value: u32, sticky: bool) {
    dev.inject(Fault::InitSegWord {
        offset,
        value,
        sticky,
    });
}

#[test]
fn a_static_word_lies_until_cleared() {
    let dev = SimDevice::new(common::quiet(Profile::connectx5()), Mode::Sync);
    let (fw_rev, cmdif) = (read(&dev, regs::FW_REV), read(&dev, regs::CMDIF_REV_FW_SUB));
    forge(&dev, regs::FW_REV, 0xdead_beef, false);
    forge(&dev, regs::CMDIF_REV_FW_SUB, 4 << 16, false);
    forge(&dev, regs::CMD_EXEC_TO, 0x6000_0001, false); // 1 h
    forge(&dev, regs::CMD_Q_INIT_TO, 1, false); // 1 ms
    relax_for(&dev, 3 * INIT_DELAY_NS);
    for _ in 0..3 {
        assert_eq!(read(&dev, regs::FW_REV), 0xdead_beef);
        assert_eq!(read(&dev, regs::CMDIF_REV_FW_SUB), 4 << 16);
        assert_eq!(read(&dev, regs::CMD_EXEC_TO), 0x6000_0001);
        assert_eq!(read(&dev, regs::CMD_Q_INIT_TO), 1);
    }
    let ev = dev.fault_events();
    assert_eq!(ev.len(), 4);
    assert_eq!(ev[0].fault, "InitSegWord");
    assert_eq!(
        ev[0].what,
        "BAR0 word 0x0 reads 0xdeadbeef (until the device changes it)"
    );
    dev.clear_faults();
    assert_eq!(read(&dev, regs::FW_REV), fw_rev);
    assert_eq!(read(&dev, regs::CMDIF_REV_FW_SUB), cmdif);
    assert_eq!(read(&dev, regs::CMD_EXEC_TO), 0);
}

#[test]
fn a_one_shot_lie_ends_when_the_device_changes_the_word() {
    let dev = SimDevice::new(common::quiet(Profile::connectx5()), Mode::Sync);
    // `initializing` reads 0 while the firmware still initializes: a driver believing it rings
    // too early and the doorbell is ignored. Once the firmware is ready the true word changes
    // and the lie ends.
    forge(&dev, regs::INITIALIZING, 0, false);
    let mut p = Poster::new(dev.clone());
    assert_eq!(dev.now_ns(), 0, "no wait: the device said it was ready");
    let m = p.prepare(0, &bare::<EnableHcaIn>(Opcode::EnableHca, 0), 0x10);
    p.ring(1);
    assert_eq!(
        p.wait_for(&m, common::NEVER_NS),
        None,
        "ignored while initializing"
    );
    assert_eq!(read(&dev, regs::INITIALIZING), 0, "true now");
    p.ring(1);
    assert_eq!(p.wait(&m), Some(0));
    p.release(m);
    // The heartbeat: the lie holds until the counter ticks.
    let c0 = read(&dev, regs::HEALTH_COUNTER);
    forge(&dev, regs::HEALTH_COUNTER, 0x00ab_cdef, false);
    assert_eq!(read(&dev, regs::HEALTH_COUNTER), 0x00ab_cdef);
    relax_for(&dev, RELAX_NS);
    assert_eq!(read(&dev, regs::HEALTH_COUNTER), 0x00ab_cdef, "no tick yet");
    relax_for(&dev, HEALTH_TICK_NS);
    let c1 = read(&dev, regs::HEALTH_COUNTER);
    assert!(c1 > c0 && c1 < 0x00ab_cdef, "{c1:#x}");
    // The health buffer: a syndrome the firmware does not have, until it has a real one.
    forge(&dev, regs::HEALTH_SYND, 0x0008_0000, false);
    assert_eq!((read(&dev, regs::HEALTH_SYND) >> 16) & 0xff, 0x8);
    assert_eq!(dev.health_syndrome(), 0, "the firmware is fine");
    dev.inject(Fault::FatalHealth { synd: 0x1 });
    assert_eq!((read(&dev, regs::HEALTH_SYND) >> 16) & 0xff, 0x1);
    dev.clear_faults();
    assert_eq!((read(&dev, regs::HEALTH_SYND) >> 16) & 0xff, 0x1);
}

#[test]
fn the_cmdq_address_lies_but_the_device_uses_its_own() {
    let mut p = Poster::cx5(Mode::Sync);
    let dev = p.dev.clone();
    let (hi, lo) = (
        read(&dev, regs::CMDQ_ADDR_H),
        read(&dev, regs::CMDQ_ADDR_L_SZ),
    );
    forge(&dev, regs::CMDQ_ADDR_H, 0x1234_5678, false);
    forge(&dev, regs::CMDQ_ADDR_L_SZ, 0x9abc_d000 | (lo & 0xfff), true);
    assert_eq!(read(&dev, regs::CMDQ_ADDR_H), 0x1234_5678);
    assert_eq!(read(&dev, regs::CMDQ_ADDR_L_SZ), 0x9abc_d000 | (lo & 0xfff));
    p.ok(&bare::<EnableHcaIn>(Opcode::EnableHca, 0), 0x10);
    // Programming the queue again changes the true high word (0 → the same 0 would not).
    dev.bar_write32(regs::CMDQ_ADDR_H.into(), Be32::new(hi + 1));
    assert_eq!(read(&dev, regs::CMDQ_ADDR_H), hi + 1, "one-shot lie over");
    assert_eq!(
        read(&dev, regs::CMDQ_ADDR_L_SZ),
        0x9abc_d000 | (lo & 0xfff),
        "sticky"
    );
    dev.bar_write32(regs::CMDQ_ADDR_H.into(), Be32::new(hi));
    dev.clear_faults();
    assert_eq!(read(&dev, regs::CMDQ_ADDR_L_SZ), lo);
    p.ok(&bare::<QueryIssiIn>(Opcode::QueryIssi, 0), 0x70);
    assert_clean(&p.finish());
}

#[test]
fn a_sticky_word_ignores_the_device() {
    let dev = SimDevice::new(common::quiet(Profile::connectx5()), Mode::Sync);
    let mut p = Poster::new(dev.clone());
    forge(&dev, regs::HEALTH_COUNTER, 7, true);
    forge(&dev, regs::INITIALIZING, regs::INITIALIZING_BIT, true);
    forge(&dev, regs::HEALTH_RFR_SEVERITY, 1 << 31, true);
    relax_for(&dev, 10 * HEALTH_TICK_NS);
    assert_eq!(
        read(&dev, regs::HEALTH_COUNTER),
        7,
        "a heartbeat that stopped"
    );
    assert_eq!(read(&dev, regs::INITIALIZING), regs::INITIALIZING_BIT);
    assert_eq!(read(&dev, regs::HEALTH_RFR_SEVERITY) >> 31, 1);
    // Behind the lies the firmware is ready and healthy: commands run.
    p.ok(&bare::<EnableHcaIn>(Opcode::EnableHca, 0), 0x10);
    assert_eq!(read(&dev, regs::HEALTH_COUNTER), 7);
    // A one-shot injection over a sticky word does not end it early.
    forge(&dev, regs::HEALTH_COUNTER, 8, false);
    assert_eq!(read(&dev, regs::HEALTH_COUNTER), 7);
    dev.clear_faults();
    assert!(read(&dev, regs::HEALTH_COUNTER) > 7);
    assert_eq!(read(&dev, regs::INITIALIZING), 0);
    // Not a word of the init segment pages: ignored.
    let before = dev.fault_events().len();
    forge(&dev, 2, 1, true);
    forge(&dev, 0x5000, 1, true);
    assert_eq!(dev.fault_events().len(), before);
    assert_eq!(read(&dev, 0x5000), 0);
}

#[test]
fn a_device_off_the_bus_reads_all_ones_and_hears_nothing() {
    for mode in [Mode::Sync, Mode::Threaded] {
        let mut p = Poster::cx5(mode);
        p.ok(&bare::<EnableHcaIn>(Opcode::EnableHca, 0), 0x10);
        let dev = p.dev.clone();
        forge(&dev, regs::FW_REV, 0x1234, true);
        dev.inject(Fault::FellOffBus);
        for off in [
            regs::FW_REV,
            regs::INITIALIZING,
            regs::HEALTH_FW_VER,
            regs::HEALTH_SYND,
            regs::HEALTH_COUNTER,
            0x2000,
            9 * 4096,
        ] {
            assert_eq!(read(&dev, off), u32::MAX, "{mode:?} {off:#x}");
        }
        // A command doorbell is lost; so is a UAR write.
        let m = p.prepare(0, &bare::<QueryIssiIn>(Opcode::QueryIssi, 0), 0x70);
        p.ring(1);
        assert_eq!(p.wait_for(&m, common::NEVER_NS), None, "{mode:?}");
        dev.bar_write64(9 * 4096 + 0x20, Be64::new(1));
        assert!(dev.uar_write_count() == 0);
        assert_eq!(dev.commands_executed(), 1);
        // Back on the bus: the entry is still the device's; ringing again runs it.
        dev.clear_faults();
        assert_eq!(read(&dev, regs::FW_REV), (35 << 16) | 16, "{mode:?}");
        p.ring(1);
        assert_eq!(p.wait(&m), Some(0));
        p.release(m);
        assert_eq!(dev.commands_executed(), 2);
        let ev = dev.fault_events();
        assert_eq!(ev.last().map(|e| e.fault), Some("FellOffBus"));
    }
}
