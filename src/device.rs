//! [`Device`]: an mlx5 function brought from reset to a usable RoCE port, and back.
//!
//! Bring-up follows the PF order (docs/bring-up.md): wait for `initializing` to clear, check the
//! command interface revision, program the command queue, ENABLE_HCA, ISSI, boot pages,
//! HOST_ENDIANNESS, capabilities (query, set), init pages, INIT_HCA, driver version, current
//! capabilities, ALLOC_UAR, the async, completion and pages EQs, special keys, RoCE on the
//! vport, the default GID, the port up, ALLOC_PD. [`Device::close`] undoes each step that was
//! done, in reverse, and takes every page back; a device dropped without `close` is closed on
//! drop, best effort.

use mlx5_ifc::consts::{cmdif_checksum, reg, teardown_profile};
use mlx5_ifc::prm::hca::RegisterHostEndianness;
use mlx5_ifc::{event, regs, Be32, Layout, ViewMut};

/// GID table entries the driver keeps track of.
pub const MAX_GIDS: usize = 16;

/// Events the async EQ holds.
const ASYNC_EQ_SIZE: u32 = 128;
/// Events the pages EQ holds (beyond the spare entries every EQ has).
const PAGES_EQ_SIZE: u32 = 16;

mod bfregs;
mod config;
mod events;

pub use config::DeviceConfig;

use crate::error::{DeadCause, Error, Result, Wait};
use crate::fw::bfreg::BfregPool;
use crate::fw::caps::{Caps, DeviceAttr, CAP_BYTES};
use crate::fw::cmd::{check_health, CmdStats};
use crate::fw::cmdq::CmdQueue;
use crate::fw::eq::Eq;
use crate::fw::hca;
use crate::fw::negotiate;
use crate::fw::pages::PageRequest;
use crate::fw::quarantine::{Quarantine, Quarantined};
use crate::fw::uar::Uar;
use crate::fw::vport::{self, GidEntry, PortState, VportInfo};
use crate::io::barrier;
use crate::io::platform::Platform;
use crate::io::raw::{Accepted, RawTarget};
use crate::verbs::pd::{query_special_keys, Pd, SpecialKeys};

/// Firmware version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FwVersion {
    /// Major.
    pub major: u16,
    /// Minor.
    pub minor: u16,
    /// Sub-minor.
    pub subminor: u16,
}

impl core::fmt::Display for FwVersion {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.subminor)
    }
}

/// How the bring-up went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BringUp {
    /// Platform time from the first register read to a usable device.
    pub elapsed_ns: u64,
    /// Commands executed.
    pub commands: u64,
    /// Boot pages given.
    pub boot_pages: usize,
    /// Init pages given.
    pub init_pages: usize,
}

/// Bring-up progress; teardown undoes every stage reached, in reverse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    CmdQueue,
    Enabled,
    Initialized,
    Uar,
    Eqs,
    RoceEnabled,
    Gid,
    Pd,
}

/// An mlx5 function, initialized.
#[derive(Debug)]
pub struct Device<P: Platform> {
    platform: P,
    cmd: CmdQueue,
    caps: Caps,
    fw: FwVersion,
    issi: u16,
    embedded_cpu: bool,
    /// A virtual function (its PCI device id, [`Platform::pci_device_id`]).
    vf: bool,
    uar: Option<Uar>,
    async_eq: Option<Eq>,
    comp_eq: Option<Eq>,
    /// The device's PD: allocated at the last bring-up stage (`Stage::Pd`), so valid in every
    /// device a caller holds (`open` returns only a device brought up in full).
    pd: Pd,
    keys: SpecialKeys,
    vport: VportInfo,
    gid0: Option<GidEntry>,
    gids: spin::Mutex<heapless::Vec<(u16, GidEntry), MAX_GIDS>>,
    /// The queues' send doorbells.
    bfregs: spin::Mutex<BfregPool>,
    /// UAR pages whose DEALLOC_UAR failed: still the device's; tried again at close.
    stale_uars: spin::Mutex<heapless::Vec<Uar, MAX_STALE_UARS>>,
    config: DeviceConfig,
    stage: Option<Stage>,
    bringup: BringUp,
    last_heartbeat: spin::Mutex<u32>,
    quarantine: Quarantine,
}

/// UAR pages a device remembers whose DEALLOC_UAR failed (more are logged and left).
const MAX_STALE_UARS: usize = 64;

/// Polls between two health checks while waiting for `initializing` to clear.
const INIT_HEALTH_EVERY: u32 = 64;

fn wait_not_initializing<P: Platform>(p: &P, what: Wait, timeout_ms: u64) -> Result<()> {
    let start = p.now_ns();
    let mut polls = 0u32;
    loop {
        let v = p.bar_read32(u64::from(regs::INITIALIZING)).get();
        if v == u32::MAX {
            // All-ones: the function does not answer (or is in reset); keep waiting until the
            // deadline like a real reset would require.
        } else if v & regs::INITIALIZING_BIT == 0 {
            return Ok(());
        } else {
            // A firmware that died while initializing says so in its health buffer (a fatal
            // syndrome with a reset request): stop at once rather than at the deadline.
            polls = polls.wrapping_add(1);
            if polls % INIT_HEALTH_EVERY == 1 {
                health_during_init(p)?;
            }
        }
        let waited = p.now_ns().saturating_sub(start);
        if waited > timeout_ms.saturating_mul(1_000_000) {
            return Err(Error::Timeout {
                waiting_for: what,
                waited_ms: waited / 1_000_000,
            });
        }
        p.relax();
    }
}

/// A fatal health syndrome (with a reset request) while the firmware initializes.
fn health_during_init<P: Platform>(p: &P) -> Result<()> {
    match check_health(p) {
        // All-ones is handled by the caller (it keeps waiting for a reset to finish).
        Err(Error::BadDeviceValue { .. }) => Ok(()),
        r => r,
    }
}

impl<P: Platform> Device<P> {
    /// Brings the function up. On failure everything done so far is undone (as far as the
    /// device allows) and the error says which step failed.
    pub fn open(platform: P, config: DeviceConfig) -> Result<Self> {
        let min_bar = 2 * regs::UAR_PAGE_SIZE;
        if config.bar_size < min_bar {
            return Err(Error::InvalidArgument {
                op: "open",
                field: "DeviceConfig::bar_size",
                requested: config.bar_size,
                max: min_bar,
                limit: "the initialization segment page and at least one UAR page",
            });
        }
        let t0 = platform.now_ns();
        wait_not_initializing(&platform, Wait::FwPreInit, config.fw_pre_init_timeout_ms)?;
        let rev = platform.bar_read32(u64::from(regs::FW_REV)).get();
        let cmdif = platform.bar_read32(u64::from(regs::CMDIF_REV_FW_SUB)).get();
        let fw = FwVersion {
            major: rev as u16,
            minor: (rev >> 16) as u16,
            subminor: cmdif as u16,
        };
        let cmdif_rev = (cmdif >> 16) as u16;
        if cmdif_rev != regs::CMD_IF_REV {
            return Err(Error::Unsupported {
                what: "command interface revision 5",
                found: u64::from(cmdif_rev),
            });
        }
        let l = platform.bar_read32(u64::from(regs::CMDQ_ADDR_L_SZ)).get();
        let (log_size, log_stride) = (((l >> 4) & 0xf) as u8, (l & 0xf) as u8);
        if log_size == 0 {
            return Err(Error::Unsupported {
                what: "a command queue of 2 entries at least (entry 1 answers page requests)",
                found: 1,
            });
        }
        if (1usize << log_size) > mlx5_ifc::consts::MAX_COMMANDS
            || log_size + log_stride > 12
            || log_stride < 6
        {
            return Err(Error::BadDeviceValue {
                what: "command queue geometry (log_cmdq_size << 4 | log_cmdq_stride)",
                value: u64::from(l & 0xff),
                limit: 0x56,
            });
        }
        let embedded_cpu =
            platform.bar_read32(u64::from(regs::INITIALIZING)).get() & regs::EMBEDDED_CPU_BIT != 0;
        let vf = platform
            .pci_device_id()
            .is_some_and(mlx5_ifc::consts::pci_id::is_vf);
        let cmd = CmdQueue::new(&platform, 1 << log_size, log_stride, config.cmd_timeout_ms)?;
        let addr = cmd.iova();
        platform.bar_write32(u64::from(regs::CMDQ_ADDR_H), Be32::new((addr >> 32) as u32));
        platform.bar_write32(
            u64::from(regs::CMDQ_ADDR_L_SZ),
            Be32::new(addr as u32 & !0xfff),
        );
        barrier::mmio_wmb();
        let mut config = config;
        // The device's published timeouts, within the configured bounds: the configuration is
        // the ceiling (a device cannot make the driver wait for years), the floor keeps a
        // device from making every wait fail at once.
        let bounded = |published: Option<u64>, ceiling: u64| {
            published.map_or(ceiling, |ms| {
                ms.max(config.min_device_timeout_ms).min(ceiling)
            })
        };
        let init_to =
            regs::decode_timeout_ms(platform.bar_read32(u64::from(regs::CMD_Q_INIT_TO)).get());
        if init_to.is_some() {
            let exec_to =
                regs::decode_timeout_ms(platform.bar_read32(u64::from(regs::CMD_EXEC_TO)).get());
            config.fw_init_timeout_ms = bounded(init_to, config.fw_init_timeout_ms);
            config.cmd_timeout_ms = bounded(exec_to, config.cmd_timeout_ms);
        }
        let mut dev = Device {
            platform,
            cmd,
            caps: Caps::from_raw(
                [0; CAP_BYTES],
                [0; CAP_BYTES],
                [0; CAP_BYTES],
                [0; CAP_BYTES],
            ),
            fw,
            issi: 0,
            embedded_cpu,
            uar: None,
            async_eq: None,
            comp_eq: None,
            pd: Pd::UNALLOCATED,
            keys: SpecialKeys {
                resd_lkey: 0,
                null_mkey: 0,
            },
            vport: VportInfo {
                mac: [0; 6],
                random_mac: false,
                node_guid: 0,
                mtu: 0,
                roce_en: false,
            },
            vf,
            gid0: None,
            gids: spin::Mutex::new(heapless::Vec::new()),
            bfregs: spin::Mutex::new(BfregPool::new(0, 1, 0, 0)),
            stale_uars: spin::Mutex::new(heapless::Vec::new()),
            stage: Some(Stage::CmdQueue),
            bringup: BringUp {
                elapsed_ns: 0,
                commands: 0,
                boot_pages: 0,
                init_pages: 0,
            },
            last_heartbeat: spin::Mutex::new(0),
            quarantine: Quarantine::default(),
            config,
        };
        dev.cmd.set_timeout_ms(dev.config.cmd_timeout_ms);
        let max_pages = dev.config.fw_pages_max;
        dev.cmd
            .with_pages(|_, pages| pages.set_max_pages(max_pages));
        match dev.bring_up() {
            Ok(()) => {
                dev.bringup.elapsed_ns = dev.platform.now_ns().saturating_sub(t0);
                dev.bringup.commands = dev.cmd.stats().executed;
                log::info!(
                    "mlx5 up: fw {}, ISSI {}, {} commands, {} + {} pages",
                    dev.fw,
                    dev.issi,
                    dev.bringup.commands,
                    dev.bringup.boot_pages,
                    dev.bringup.init_pages
                );
                Ok(dev)
            }
            Err(e) => {
                log::error!("bring-up failed: {e}");
                if let Err(e2) = dev.shutdown() {
                    log::error!("cleanup after the failed bring-up also failed: {e2}");
                }
                Err(e)
            }
        }
    }

    fn bring_up(&mut self) -> Result<()> {
        let p = &self.platform;
        let q = &self.quarantine;
        let cmd = &self.cmd;
        wait_not_initializing(p, Wait::FwInit, self.config.fw_init_timeout_ms)?;
        check_health(p)?;
        hca::enable_hca(cmd, p, self.embedded_cpu)?;
        self.stage = Some(Stage::Enabled);
        self.issi = hca::negotiate_issi(cmd, p)?;
        self.bringup.boot_pages =
            cmd.with_pages(|io, pages| pages.satisfy(io, p, PageRequest::Boot))?;
        // Tell the firmware this host is little-endian (he = 0) or big-endian (he = 1) — a PF
        // only, as Linux (`set_hca_ctrl` returns early on a VF).
        if !self.vf {
            let mut he = [0u8; RegisterHostEndianness::BYTES];
            ViewMut::<RegisterHostEndianness>::new(&mut he)?.set(
                RegisterHostEndianness::HE,
                u64::from(cfg!(target_endian = "big")),
            )?;
            if let Err(e) = hca::access_reg(cmd, p, reg::HOST_ENDIANNESS, 0, true, &mut he) {
                log::warn!("HOST_ENDIANNESS not accepted ({e}); continuing");
            }
        }
        let negotiated = negotiate::negotiate(cmd, p, self.config.log_max_qp)?;
        self.bringup.init_pages =
            cmd.with_pages(|io, pages| pages.satisfy(io, p, PageRequest::Init))?;
        // A software owner id only where the capability says INIT_HCA takes one (Linux
        // `mlx5_cmd_init_hca`); rdma-core's mlx5_vfio never sends one.
        let owner = negotiated
            .sw_owner_id
            .then(|| (self.platform.now_ns() as u128).to_be_bytes());
        hca::init_hca(cmd, p, owner)?;
        self.stage = Some(Stage::Initialized);
        self.caps = negotiate::current(cmd, p, negotiated.general_max)?;
        if self.caps.driver_version() == 1 {
            if let Err(e) = hca::set_driver_version(cmd, p, self.config.driver_version) {
                log::warn!("SET_DRIVER_VERSION refused: {e}");
            }
        }
        cmd.set_checksum(self.caps.cmdif_checksum() == cmdif_checksum::ENABLED as u8);
        if self.caps.port_type() != mlx5_ifc::consts::port_type::ETH as u8 || self.caps.roce() == 0
        {
            return Err(Error::Unsupported {
                what: "an Ethernet port with RoCE",
                found: u64::from(self.caps.port_type()),
            });
        }
        let uar = Uar::alloc(cmd, p, self.config.bar_size)?;
        self.uar = Some(uar);
        let half = if p.uar_write_combining() {
            crate::fw::bfreg::bf_half(self.caps.bf(), self.caps.log_bf_reg_size())
        } else {
            0
        };
        *self.bfregs.get_mut() = BfregPool::new(
            self.config.dedicated_bfregs,
            self.config.shared_bfregs,
            self.caps.log_bf_reg_size(),
            half,
        );
        self.stage = Some(Stage::Uar);
        self.async_eq = Some(Eq::create(
            cmd,
            p,
            q,
            &self.caps,
            uar,
            ASYNC_EQ_SIZE,
            event::ASYNC_EVENTS,
            0,
        )?);
        self.stage = Some(Stage::Eqs);
        self.comp_eq = Some(Eq::create(
            cmd,
            p,
            q,
            &self.caps,
            uar,
            self.config.comp_eq_size,
            &[],
            0,
        )?);
        // Page requests on an EQ of their own, drained whenever a command waits
        // (crate::fw::page_req), as Linux's pages EQ is.
        if self.caps.get("page_request_disable") == Some(0) {
            let eq = Eq::create(
                cmd,
                p,
                q,
                &self.caps,
                uar,
                PAGES_EQ_SIZE,
                &[event::PAGE_REQUEST],
                0,
            )?;
            eq.arm(p);
            cmd.set_pages_eq(eq);
        }
        // Arm both: the consumer index is 0 and the device may raise the next event.
        for eq in [&self.async_eq, &self.comp_eq].into_iter().flatten() {
            eq.arm(p);
        }
        self.keys = query_special_keys(cmd, p)?;
        vport::set_roce_en(cmd, p, true)?;
        self.stage = Some(Stage::RoceEnabled);
        self.vport = vport::query_nic_vport(cmd, p)?;
        if self.vf && self.vport.mac == [0; 6] {
            // No MAC from the hypervisor: a random one, in the vport's address list (Linux's
            // mlx5e: "Assigned random MAC address").
            let seed = p.now_ns() ^ self.vport.node_guid.rotate_left(17) ^ cmd.iova();
            self.vport.mac = vport::random_mac(seed);
            self.vport.random_mac = true;
            vport::set_uc_list(cmd, p, Some(self.vport.mac))?;
            log::info!("VF: assigned random MAC address {:02x?}", self.vport.mac);
        }
        let gid = GidEntry::link_local(self.vport.mac);
        vport::set_roce_address(cmd, p, 0, Some(&gid), self.caps.roce_port())?;
        self.gid0 = Some(gid);
        let _ = self.gids.get_mut().push((0, gid));
        self.stage = Some(Stage::Gid);
        // A VF's link is its vport's (the hypervisor's e-switch sets it): it writes no port
        // register.
        if !self.vf {
            vport::ensure_port_up(cmd, p)?;
        }
        self.pd = Pd::alloc(cmd, p)?;
        self.stage = Some(Stage::Pd);
        *self.last_heartbeat.get_mut() = p.bar_read32(u64::from(regs::HEALTH_COUNTER)).get();
        Ok(())
    }

    /// Undoes every bring-up stage reached, in reverse. The first error is returned after all
    /// steps that can still run have run.
    fn shutdown(&mut self) -> Result<()> {
        let Some(stage) = self.stage.take() else {
            return Ok(());
        };
        let p = &self.platform;
        let q = &self.quarantine;
        let cmd = &mut self.cmd;
        let mut first: Option<Error> = None;
        let mut note = |r: Result<()>| {
            if let Err(e) = r {
                log::warn!("teardown step failed: {e}");
                first.get_or_insert(e);
            }
        };
        let alive = cmd.dead().is_none();
        if let Some(cause) = cmd.dead() {
            // Nothing can be torn down: say so (the memory the device may use is quarantined
            // below).
            note(Err(Error::Unusable {
                opcode: mlx5_ifc::Opcode::TeardownHca as u16,
                cause,
            }));
        }
        if alive {
            // UAR pages whose DEALLOC_UAR failed earlier (the QPs that used them are gone).
            let held = self.bfregs.get_mut().drain();
            for uar in core::mem::take(self.stale_uars.get_mut())
                .into_iter()
                .chain(held)
            {
                note(uar.free(cmd, p));
            }
            if stage >= Stage::Pd {
                let pd = core::mem::replace(&mut self.pd, Pd::UNALLOCATED);
                note(pd.free(cmd, p));
            }
            if stage >= Stage::Gid {
                let port = self.caps.roce_port();
                let set: heapless::Vec<u16, MAX_GIDS> =
                    self.gids.get_mut().iter().map(|&(i, _)| i).collect();
                for i in set {
                    note(vport::set_roce_address(cmd, p, i, None, port));
                }
                self.gids.get_mut().clear();
            }
            if stage >= Stage::RoceEnabled {
                note(vport::set_roce_en(cmd, p, false));
            }
            if stage >= Stage::Eqs {
                // The pages EQ goes before the async EQ, as in Linux; from here on page requests
                // are not answered (the firmware returns everything after TEARDOWN_HCA).
                let pages_eq = cmd.take_pages_eq();
                for eq in [self.comp_eq.take(), pages_eq, self.async_eq.take()]
                    .into_iter()
                    .flatten()
                {
                    note(eq.destroy(cmd, p, q));
                }
            }
            if stage >= Stage::Uar {
                if let Some(uar) = self.uar.take() {
                    note(uar.free(cmd, p));
                }
            }
            let mut torn_down = true;
            if stage >= Stage::Initialized {
                let r = hca::teardown_hca(cmd, p, teardown_profile::GRACEFUL);
                torn_down = r.is_ok();
                note(r);
            }
            if torn_down && cmd.dead().is_none() {
                let ms = self.config.reclaim_timeout_ms;
                note(cmd.with_pages(|io, pages| pages.reclaim_all(io, p, ms)));
            }
            if stage >= Stage::Enabled && cmd.dead().is_none() {
                note(hca::disable_hca(cmd, p, self.embedded_cpu));
            }
        }
        // EQs a dead device still has (their DESTROY_EQ was never sent).
        let pages_eq = cmd.take_pages_eq();
        for eq in [self.comp_eq.take(), pages_eq, self.async_eq.take()]
            .into_iter()
            .flatten()
        {
            eq.abandon(q);
        }
        let kept = cmd.with_pages(|io, pages| {
            if pages.held() > 0 || io.dead().is_some() {
                // The device may still write to its pages and to the command queue: never
                // free them.
                pages.abandon(p, q);
                true
            } else {
                pages.retire(p, q);
                false
            }
        });
        if kept {
            cmd.abandon(q);
        } else {
            cmd.release(p);
        }
        match first {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Tears the device down: every object of the bring-up released, every page taken back,
    /// DISABLE_HCA, command queue freed. Returns the first step that failed, if any.
    pub fn close(mut self) -> Result<()> {
        self.shutdown()
    }

    /// [`Device::close`], and what it had to leave to the device: the memory quarantined over
    /// the device's life, teardown included. After it, the platform holds exactly that much DMA
    /// memory of this device and nothing else.
    pub fn close_accounted(mut self) -> (Result<()>, Quarantined) {
        let r = self.shutdown();
        (r, self.quarantine.get())
    }

    /// The configuration the device was opened with (timeouts as adjusted by the firmware).
    pub fn config(&self) -> &DeviceConfig {
        &self.config
    }

    /// DEALLOC_UAR of a page a QP used. When it fails the page is still the device's: it is
    /// remembered and freed again at close (and the error returned).
    pub(crate) fn free_uar(&self, uar: Uar) -> Result<()> {
        let r = self.with_cmd(|cmd, p| uar.free(cmd, p));
        if let Err(e) = &r {
            log::warn!("DEALLOC_UAR {}: {e}; tried again at close", uar.index());
            if self.stale_uars.lock().push(uar).is_err() {
                log::error!(
                    "UAR page {} left to the device: too many stale UARs",
                    uar.index()
                );
            }
        }
        r
    }

    /// The platform the device runs on.
    pub fn platform(&self) -> &P {
        &self.platform
    }

    /// The capabilities (current values).
    pub fn caps(&self) -> &Caps {
        &self.caps
    }

    /// The device attributes in verbs terms.
    pub fn device_attr(&self) -> DeviceAttr {
        self.caps.device_attr()
    }

    /// Firmware version.
    pub fn fw_version(&self) -> FwVersion {
        self.fw
    }

    /// The interface step (ISSI) in use.
    pub fn issi(&self) -> u16 {
        self.issi
    }

    /// The UAR page the driver's doorbells go to.
    pub(crate) fn uar(&self) -> Option<Uar> {
        self.uar
    }

    /// The size of BAR0 the device was opened with.
    pub fn bar_size(&self) -> u64 {
        self.config.bar_size
    }

    /// The completion EQ every CQ reports to.
    pub(crate) fn comp_eqn(&self) -> Option<u8> {
        self.comp_eq.as_ref().map(Eq::eqn)
    }

    /// The device's protection domain, made when the device was opened (`ibv_alloc_pd`'s
    /// result, once per device).
    pub fn pd(&self) -> &Pd {
        &self.pd
    }

    /// The special memory keys.
    pub fn special_keys(&self) -> SpecialKeys {
        self.keys
    }

    /// Whether the function is a virtual function (known by its PCI device id).
    pub fn is_vf(&self) -> bool {
        self.vf
    }

    /// What the vport reported at bring-up (MAC, MTU, RoCE).
    pub fn vport(&self) -> VportInfo {
        self.vport
    }

    /// GID table entry 0 (link-local, RoCE v2).
    pub fn gid0(&self) -> Option<GidEntry> {
        self.gid0
    }

    /// GID table entry `index`, if the driver set it.
    pub fn gid(&self, index: u16) -> Option<GidEntry> {
        self.gids
            .lock()
            .iter()
            .find(|&&(i, _)| i == index)
            .map(|&(_, g)| g)
    }

    /// Sets (or with `None` clears) GID table entry `index` of port 1 (SET_ROCE_ADDRESS), e.g. an
    /// IPv4 GID with [`GidEntry::ipv4`].
    pub fn set_gid(&self, index: u16, entry: Option<GidEntry>) -> Result<()> {
        let size = self.caps.roce_address_table_size();
        if u32::from(index) >= size {
            return Err(Error::InvalidArgument {
                op: "set_gid",
                field: "index",
                requested: u64::from(index),
                max: u64::from(size.saturating_sub(1)),
                limit: "roce_address_table_size",
            });
        }
        let mut gids = self.gids.lock();
        let known = gids.iter().position(|&(i, _)| i == index);
        if entry.is_some() && known.is_none() && gids.is_full() {
            return Err(Error::Capacity {
                what: "driver GID table",
                limit: MAX_GIDS,
            });
        }
        let port = self.caps.roce_port();
        self.with_cmd(|cmd, p| vport::set_roce_address(cmd, p, index, entry.as_ref(), port))?;
        if let Some(k) = known {
            gids.swap_remove(k);
        }
        if let Some(e) = entry {
            let _ = gids.push((index, e));
        }
        Ok(())
    }

    /// How the bring-up went.
    pub fn bringup(&self) -> BringUp {
        self.bringup
    }

    /// Command counters.
    pub fn cmd_stats(&self) -> CmdStats {
        self.cmd.stats()
    }

    /// DMA memory kept from the platform because the device may still use it (a create or
    /// destroy that timed out or was refused, a device that died): mapped, never reused.
    pub fn quarantined(&self) -> Quarantined {
        self.quarantine.get()
    }

    /// The account of quarantined memory, for the object modules.
    pub(crate) fn quarantine(&self) -> &Quarantine {
        &self.quarantine
    }

    /// Runs `f` with the command queue and the platform. Any number of threads run commands
    /// at once, each in an entry of its own.
    pub(crate) fn with_cmd<R>(&self, f: impl FnOnce(&CmdQueue, &P) -> Result<R>) -> Result<R> {
        f(&self.cmd, &self.platform)
    }

    /// Port state now (QUERY_VPORT_STATE).
    pub fn port_state(&self) -> Result<PortState> {
        self.with_cmd(vport::query_vport_state)
    }

    /// Health check: a fatal syndrome is an error (and the device becomes unusable); `Ok(false)`
    /// when the heartbeat counter has not moved since the last check.
    pub fn check_health(&self) -> Result<bool> {
        if let Err(e) = check_health(&self.platform) {
            let cause = match e {
                Error::Health { synd, .. } => DeadCause::Fatal { synd },
                _ => DeadCause::Gone,
            };
            self.cmd.mark_dead(cause);
            return Err(e);
        }
        let now = self
            .platform
            .bar_read32(u64::from(regs::HEALTH_COUNTER))
            .get();
        let moved = {
            let mut last = self.last_heartbeat.lock();
            let moved = now != *last;
            *last = now;
            moved
        };
        self.answer_page_requests()?;
        Ok(moved)
    }
}

impl<P: Platform> Drop for Device<P> {
    fn drop(&mut self) {
        if self.stage.is_some() {
            log::debug!("mlx5 device dropped without close(); tearing down");
            if let Err(e) = self.shutdown() {
                log::error!("teardown on drop failed: {e}");
            }
        }
    }
}

/// Any command, bypassing every object the driver tracks: reached only through
/// `io::raw::raw_command` (`mlx5::raw`, feature `raw`), whose safety contract says why.
impl<P: Platform> RawTarget for Device<P> {
    fn run_raw(&self, _: Accepted, input: &[u8], output: &mut [u8]) -> Result<()> {
        self.cmd.exec(&self.platform, input, output)
    }
}
