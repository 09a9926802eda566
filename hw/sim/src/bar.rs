//! BAR0: the initialization segment, the health buffer and heartbeat, UAR page writes.
//!
//! The init segment is kept as its big-endian byte image (`initial_seg` layout); the
//! time-driven fields (`initializing`, `health_counter`) are brought up to date from the device
//! clock whenever they are read, so nothing has to tick in the background:
//!
//! * `initializing` (0x1fc bit 31) reads 1 until [`INIT_DELAY_NS`] of device time have passed
//!   since creation, forever while `Fault::StuckInitializing` is pending.
//! * `health_counter` (0x1010, low 24 bits) is `1 + now / HEALTH_TICK_NS`; it freezes when the
//!   health buffer reports a fatal syndrome.
//!
//! Injected lies (`Fault::InitSegWord`, `Fault::FellOffBus`) sit on top of the image and change
//! only what reads return, never the image the device itself works from:
//!
//! * a sticky word override returns its value on every read of that word;
//! * a one-shot override remembers the true word at injection and returns its value for as long
//!   as the true word is unchanged — until the heartbeat ticks, `initializing` clears, the
//!   driver programs the command queue address, the firmware reports a fatal error;
//! * off the bus, every read returns all ones and every write is lost.
//!
//! BAR0 is [`BAR_SIZE`] bytes. Pages 0–4 hold the init segment, the MSI-X table (0x2000) and the
//! PBA (0x3000) and read as the image / zero; UAR page `n` sits at `n * 4096` (n ≥ 5) and reads as
//! zero, below the MEMIC window — the top 128 KiB, device memory, which reads and writes as
//! memory (`crate::model::memic`, served by [`crate::SimDevice::bar_read32`] and
//! [`crate::SimDevice::bar_write_bytes`] before this module sees the access). Writes to UAR pages are recorded ([`UarWrite`]); the firmware acts on the EQ and CQ
//! doorbells among them (`fw::doorbell`).

use std::collections::BTreeMap;

use mlx5_ifc::prm::init_seg::{HealthBuffer, InitialSeg};
use mlx5_ifc::{regs, Field, FieldInfo, Layout, View, ViewMut};

use crate::Profile;

pub use crate::profile::BAR_SIZE;
/// Device time after creation until `initializing` clears.
pub const INIT_DELAY_NS: u64 = 2_000_000;
/// Device time per `health_counter` increment.
pub const HEALTH_TICK_NS: u64 = 100_000;
/// `log_cmdq_size` the device publishes (32 entries).
pub const LOG_CMDQ_SIZE: u64 = 5;
/// `log_cmdq_stride` the device publishes (64-byte entries).
pub const LOG_CMDQ_STRIDE: u64 = 6;
/// BAR0 pages taken by the init segment, MSI-X table and PBA; UAR indices start above them.
pub(crate) const INIT_SEG_PAGES: u64 = 5;

/// A write to a UAR page of BAR0 (doorbells; recorded for later use).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UarWrite {
    /// Byte offset in BAR0.
    pub offset: u64,
    /// The value, as a host integer (the driver's `Be32`/`Be64` decoded).
    pub value: u64,
    /// Access width in bits (32 or 64).
    pub width: u8,
}

/// UAR writes the BAR keeps for inspection ([`crate::SimDevice::uar_writes_since`]).
pub const UAR_LOG: usize = 4096;

/// The BAR0 state of one device.
pub(crate) struct Bar {
    image: Vec<u8>,
    cmdq_programmed: bool,
    frozen_counter: Option<u32>,
    /// The last [`UAR_LOG`] UAR writes (older ones are forgotten: a long run's doorbells must
    /// not grow the simulator's memory), and how many there were in all.
    uar_writes: std::collections::VecDeque<UarWrite>,
    uar_total: u64,
    /// `Fault::InitSegWord` with `sticky`: offset → value.
    sticky: BTreeMap<u64, u32>,
    /// `Fault::InitSegWord` without `sticky`: offset → (value, the true word when injected).
    once: BTreeMap<u64, (u32, u32)>,
    /// `Fault::FellOffBus`.
    off_bus: bool,
    /// Device time of power-on or the last function-level reset.
    born: u64,
}

/// The value of field `f` inside the 32-bit register at byte `word_off` holding `word`.
fn field_in_word(word: u32, word_off: u64, f: &FieldInfo) -> u64 {
    let start = u64::from(f.bit).saturating_sub(word_off * 8);
    let shift = 32u64.saturating_sub(start + u64::from(f.width));
    let mask = if f.width >= 32 {
        u64::from(u32::MAX)
    } else {
        (1u64 << f.width) - 1
    };
    (u64::from(word) >> shift) & mask
}

fn misaligned(off: u64, size: u64) -> bool {
    off % size != 0 || off.checked_add(size).is_none_or(|end| end > BAR_SIZE)
}

/// Whether an access of `size` bytes at `off` is an accepted write to a UAR page.
pub(crate) fn is_uar_access(off: u64, size: u64) -> bool {
    !misaligned(off, size) && off >= INIT_SEG_PAGES * regs::UAR_PAGE_SIZE
}

impl Bar {
    pub(crate) fn new(profile: &Profile) -> Self {
        let mut bar = Self {
            image: vec![0; InitialSeg::BYTES],
            cmdq_programmed: false,
            frozen_counter: None,
            uar_writes: std::collections::VecDeque::new(),
            uar_total: 0,
            sticky: BTreeMap::new(),
            once: BTreeMap::new(),
            off_bus: false,
            born: 0,
        };
        let (major, minor, sub) = profile.fw_version();
        bar.set(InitialSeg::FW_REV_MAJOR, major.into());
        bar.set(InitialSeg::FW_REV_MINOR, minor.into());
        bar.set(InitialSeg::CMD_INTERFACE_REV, regs::CMD_IF_REV.into());
        bar.set(InitialSeg::FW_REV_SUBMINOR, sub.into());
        bar.set(InitialSeg::LOG_CMDQ_SIZE, LOG_CMDQ_SIZE);
        bar.set(InitialSeg::LOG_CMDQ_STRIDE, LOG_CMDQ_STRIDE);
        bar.set(InitialSeg::INITIALIZING, 1);
        let fw_ver = (u64::from(major) << 24) | (u64::from(minor & 0xff) << 16) | u64::from(sub);
        bar.set_health(HealthBuffer::FW_VERSION, fw_ver);
        bar.set(InitialSeg::HEALTH_COUNTER, 1);
        bar
    }

    fn set(&mut self, f: Field<InitialSeg>, v: u64) {
        if let Ok(mut seg) = ViewMut::<InitialSeg>::new(&mut self.image) {
            if let Err(e) = seg.set(f, v) {
                log::error!("mlx5-sim: init segment: {e}");
            }
        }
    }

    fn get(&self, f: Field<InitialSeg>) -> u64 {
        View::<InitialSeg>::new(&self.image).map_or(0, |v| v.get(f))
    }

    fn set_health(&mut self, f: Field<HealthBuffer>, v: u64) {
        if let Ok(mut seg) = ViewMut::<InitialSeg>::new(&mut self.image) {
            if let Err(e) = seg.nested_mut(InitialSeg::HEALTH_BUFFER).set(f, v) {
                log::error!("mlx5-sim: health buffer: {e}");
            }
        }
    }

    fn health(&self, f: Field<HealthBuffer>) -> u64 {
        View::<InitialSeg>::new(&self.image)
            .map_or(0, |v| v.nested(InitialSeg::HEALTH_BUFFER).get(f))
    }

    /// The `health_counter` value at device time `now`.
    fn counter(&self, now: u64) -> u32 {
        self.frozen_counter
            .unwrap_or_else(|| (1 + now / HEALTH_TICK_NS) as u32)
    }

    fn refresh(&mut self, now: u64, stuck: bool) {
        self.set(
            InitialSeg::INITIALIZING,
            u64::from(self.initializing_at(now, stuck)),
        );
        self.set(
            InitialSeg::HEALTH_COUNTER,
            u64::from(self.counter(now) & 0xff_ffff),
        );
        self.set(InitialSeg::HEALTH_SYNDROME, u64::from(self.health_synd()));
    }

    /// Whether `initializing` reads 1 at device time `now` ([`INIT_DELAY_NS`] after power-on
    /// or the last reset).
    pub(crate) fn initializing_at(&self, now: u64, stuck: bool) -> bool {
        stuck || now < self.born.saturating_add(INIT_DELAY_NS)
    }

    /// The device was reset at device time `now`: it initializes again from then.
    pub(crate) fn set_born(&mut self, now: u64) {
        self.born = now;
    }

    /// A 32-bit read at `off` as the driver sees it (injected lies included); misaligned or
    /// out-of-range reads return all ones.
    pub(crate) fn read32(&mut self, off: u64, now: u64, stuck: bool) -> u32 {
        if self.off_bus {
            return u32::MAX;
        }
        let word = self.true_read32(off, now, stuck);
        if let Some(&v) = self.sticky.get(&off) {
            return v;
        }
        match self.once.get(&off) {
            Some(&(v, base)) if base == word => v,
            Some(_) => {
                self.once.remove(&off);
                word
            }
            None => word,
        }
    }

    /// Whether `off` is a word [`Bar::forge`] accepts: 4-aligned, in the init segment pages.
    pub(crate) fn forgeable(off: u64) -> bool {
        off % 4 == 0 && off < INIT_SEG_PAGES * regs::UAR_PAGE_SIZE
    }

    /// `Fault::InitSegWord`: the word at `off` reads `value` (see the module documentation).
    pub(crate) fn forge(&mut self, off: u64, value: u32, sticky: bool, now: u64, stuck: bool) {
        if sticky {
            self.once.remove(&off);
            self.sticky.insert(off, value);
        } else {
            let base = self.true_read32(off, now, stuck);
            self.once.insert(off, (value, base));
        }
    }

    /// `Fault::FellOffBus`.
    pub(crate) fn fall_off_bus(&mut self) {
        self.off_bus = true;
    }

    /// Whether the device is off the bus (reads all ones, writes lost).
    pub(crate) fn off_bus(&self) -> bool {
        self.off_bus
    }

    /// Drops every injected lie.
    pub(crate) fn clear_lies(&mut self) {
        self.sticky.clear();
        self.once.clear();
        self.off_bus = false;
    }

    /// A 32-bit read of the device's true register image.
    fn true_read32(&mut self, off: u64, now: u64, stuck: bool) -> u32 {
        if misaligned(off, 4) {
            log::warn!("mlx5-sim: misaligned or out-of-range 32-bit BAR read at {off:#x}");
            return u32::MAX;
        }
        let o = off as usize;
        match self.image.get(o..o + 4) {
            Some(_) => {
                self.refresh(now, stuck);
                let mut w = [0u8; 4];
                w.copy_from_slice(&self.image[o..o + 4]);
                u32::from_be_bytes(w)
            }
            None => 0,
        }
    }

    /// A 32-bit write at `off`; returns the doorbell vector for a write to `cmd_dbell`.
    pub(crate) fn write32(&mut self, off: u64, v: u32) -> Option<u32> {
        if misaligned(off, 4) {
            log::warn!("mlx5-sim: misaligned or out-of-range 32-bit BAR write at {off:#x} ignored");
            return None;
        }
        if off >= INIT_SEG_PAGES * regs::UAR_PAGE_SIZE {
            self.log_uar(UarWrite {
                offset: off,
                value: v.into(),
                width: 32,
            });
            return None;
        }
        match u32::try_from(off).unwrap_or(u32::MAX) {
            regs::CMDQ_ADDR_H => self.set(InitialSeg::CMDQ_PHY_ADDR_63_32, v.into()),
            regs::CMDQ_ADDR_L_SZ => {
                let addr = field_in_word(v, off, &InitialSeg::CMDQ_PHY_ADDR_31_12.info);
                let nic = field_in_word(v, off, &InitialSeg::NIC_INTERFACE.info);
                self.set(InitialSeg::CMDQ_PHY_ADDR_31_12, addr);
                self.set(InitialSeg::NIC_INTERFACE, nic);
                self.cmdq_programmed = true;
            }
            regs::CMD_DBELL => return Some(v),
            _ => log::debug!("mlx5-sim: write {v:#x} to read-only BAR offset {off:#x} ignored"),
        }
        None
    }

    /// A 64-bit write at `off` (UAR doorbells).
    pub(crate) fn write64(&mut self, off: u64, v: u64) {
        if misaligned(off, 8) {
            log::warn!("mlx5-sim: misaligned or out-of-range 64-bit BAR write at {off:#x} ignored");
        } else if off < INIT_SEG_PAGES * regs::UAR_PAGE_SIZE {
            log::warn!("mlx5-sim: 64-bit write to init segment offset {off:#x} ignored");
        } else {
            self.log_uar(UarWrite {
                offset: off,
                value: v,
                width: 64,
            });
        }
    }

    /// The command queue address, once the driver has programmed it.
    pub(crate) fn cmdq_base(&self) -> Option<u64> {
        self.cmdq_programmed.then(|| {
            (self.get(InitialSeg::CMDQ_PHY_ADDR_63_32) << 32)
                | (self.get(InitialSeg::CMDQ_PHY_ADDR_31_12) << 12)
        })
    }

    /// The health buffer syndrome (0 = healthy).
    pub(crate) fn health_synd(&self) -> u8 {
        self.health(HealthBuffer::SYND) as u8
    }

    /// Whether the firmware has declared itself dead (`rfr` with a syndrome).
    pub(crate) fn fatal(&self) -> bool {
        self.health(HealthBuffer::RFR) == 1 && self.health_synd() != 0
    }

    /// Reports a fatal error in the health buffer: `synd`, `rfr` = 1, `time` = device time in
    /// microseconds; the heartbeat stops.
    pub(crate) fn set_fatal(&mut self, synd: u8, now: u64) {
        log::warn!("mlx5-sim: firmware fatal error, health syndrome {synd:#x}");
        self.set_health(HealthBuffer::SYND, synd.into());
        self.set_health(HealthBuffer::RFR, 1);
        self.set_health(HealthBuffer::VALID, 1);
        self.set_health(HealthBuffer::SEVERITY, 2);
        self.set_health(HealthBuffer::TIME, (now / 1000) & u64::from(u32::MAX));
        if self.frozen_counter.is_none() {
            self.frozen_counter = Some(self.counter(now));
        }
    }

    fn log_uar(&mut self, w: UarWrite) {
        if self.uar_writes.len() == UAR_LOG {
            self.uar_writes.pop_front();
        }
        self.uar_writes.push_back(w);
        self.uar_total += 1;
    }

    /// UAR writes so far, in all.
    pub(crate) fn uar_write_count(&self) -> u64 {
        self.uar_total
    }

    /// The UAR writes from number `since` on (counting from 0), as far as they are kept (the
    /// last [`UAR_LOG`]).
    pub(crate) fn uar_writes_since(&self, since: u64) -> Vec<UarWrite> {
        let first = self.uar_total - self.uar_writes.len() as u64;
        let skip = since.saturating_sub(first) as usize;
        self.uar_writes.iter().skip(skip).copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_decode_through_the_layout() {
        let info = InitialSeg::NIC_INTERFACE.info;
        assert_eq!(
            field_in_word(0x1234_5100, u64::from(regs::CMDQ_ADDR_L_SZ), &info),
            1
        );
        let info = InitialSeg::CMDQ_PHY_ADDR_31_12.info;
        assert_eq!(
            field_in_word(0x1234_5100, u64::from(regs::CMDQ_ADDR_L_SZ), &info),
            0x12345
        );
    }

    #[test]
    fn init_segment_reads() {
        let mut bar = Bar::new(&Profile::connectx5());
        assert_eq!(bar.read32(regs::FW_REV.into(), 0, false), (35 << 16) | 16);
        assert_eq!(
            bar.read32(regs::CMDIF_REV_FW_SUB.into(), 0, false),
            (5 << 16) | 2000
        );
        assert_eq!(bar.read32(regs::CMDQ_ADDR_L_SZ.into(), 0, false), 0x56);
        assert_eq!(bar.write32(regs::CMDQ_ADDR_L_SZ.into(), 0xabcd_e000), None);
        assert_eq!(
            bar.read32(regs::CMDQ_ADDR_L_SZ.into(), 0, false),
            0xabcd_e056
        );
        assert_eq!(bar.cmdq_base(), Some(0xabcd_e000));
        assert_eq!(
            bar.read32(regs::INITIALIZING.into(), 0, false),
            regs::INITIALIZING_BIT
        );
        assert_eq!(
            bar.read32(regs::INITIALIZING.into(), INIT_DELAY_NS, false),
            0
        );
        assert_eq!(
            bar.read32(regs::HEALTH_FW_VER.into(), 0, false),
            (16 << 24) | (35 << 16) | 2000
        );
        assert_eq!(bar.read32(3, 0, false), u32::MAX);
        assert_eq!(bar.read32(BAR_SIZE, 0, false), u32::MAX);
    }
}
