//! The firmware command interface in polling mode (PRM "Command Interface").
//!
//! One 4 KiB command queue page; a command takes entry 0 ([`Slot::Main`]): the first 16 input
//! bytes sit in the entry, the rest in a chain of 576-byte mailbox blocks (1 KiB aligned)
//! carrying the same token; the output comes back the same way. The driver hands the entry over
//! by setting its ownership bit and writing `1 << slot` to the command doorbell, then polls the
//! ownership bit with a deadline. A command that never completes leaves the device unusable
//! rather than hanging.
//!
//! **Firmware pages while a command waits.** The firmware may hold a command (a CREATE that
//! needs ICM, say) until the driver gives it pages, asking for them with a PAGE_REQUEST event on
//! the pages EQ. So while entry 0 is the device's, every poll also drains the pages EQ and
//! answers each request at once with MANAGE_PAGES in entry 1 ([`Slot::Pages`], mailboxes of its
//! own), waited for with the same deadline rules, before going back to waiting for entry 0
//! (`crate::fw::page_req`); once entry 0 is back, the pages EQ is drained once more, so what
//! the firmware asked for while executing the command is answered at once too. Nothing the
//! caller does is needed; the device is never asked to wait for a command that waits for it.

mod run;
mod slot;

pub use run::{run, run_create, SMALL_CMD_BYTES};
pub(crate) use slot::{CmdIo, Slot};

use mlx5_ifc::consts::{CMD_INLINE_BYTES, MAILBOX_DATA_BYTES};
use mlx5_ifc::prm::init_seg::HealthBuffer;
use mlx5_ifc::{regs, HealthSyndrome, View};

use crate::error::{DeadCause, Error, Result};
use crate::fw::eq::Eq;
use crate::fw::page_req;
use crate::fw::pages::PagePool;
use crate::fw::quarantine::Quarantine;
use crate::platform::Platform;

/// Mailbox blocks per direction: commands carry at most `16 + 64 * 512` bytes each way.
pub const MAX_MAILBOX_BLOCKS: usize = 64;
/// The largest command input or output the queue carries.
pub const MAX_CMD_BYTES: usize = CMD_INLINE_BYTES + MAX_MAILBOX_BLOCKS * MAILBOX_DATA_BYTES;

/// Counters of the command interface.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CmdStats {
    /// Commands that completed (successfully or with a firmware status).
    pub executed: u64,
    /// Commands the firmware refused with a non-OK status.
    pub failed: u64,
}

/// The command queue, the firmware's pages and the EQ their requests arrive on.
#[derive(Debug)]
pub struct CmdQueue {
    io: CmdIo,
    pages: PagePool,
    pages_eq: Option<Eq>,
}

impl CmdQueue {
    /// Allocates the queue page and mailboxes. The caller writes the queue address to the device.
    pub fn new<P: Platform>(p: &P, log_stride: u8, timeout_ms: u64) -> Result<Self> {
        Ok(Self {
            io: CmdIo::new(p, log_stride, timeout_ms)?,
            pages: PagePool::default(),
            pages_eq: None,
        })
    }

    /// Device address of the queue page (for `cmdq_addr_h` / `cmdq_addr_l_sz`).
    pub fn iova(&self) -> u64 {
        self.io.iova()
    }

    /// Sets the per-command timeout.
    pub fn set_timeout_ms(&mut self, ms: u64) {
        self.io.set_timeout_ms(ms);
    }

    /// Whether the firmware verifies signatures (cmd_hca_cap `cmdif_checksum` = 3).
    pub fn set_checksum(&mut self, on: bool) {
        self.io.checksum = on;
    }

    /// Why the queue no longer issues commands, if it does not.
    pub fn dead(&self) -> Option<DeadCause> {
        self.io.dead()
    }

    /// Stops issuing commands.
    pub fn mark_dead(&mut self, cause: DeadCause) {
        self.io.mark_dead(cause);
    }

    /// Counters.
    pub fn stats(&self) -> CmdStats {
        self.io.stats
    }

    /// The pages lent to the firmware.
    pub(crate) fn pages(&self) -> &PagePool {
        &self.pages
    }

    /// The command slots and the page pool, for the pool's own commands (bring-up, teardown).
    pub(crate) fn io_and_pages(&mut self) -> (&mut CmdIo, &mut PagePool) {
        (&mut self.io, &mut self.pages)
    }

    /// From now on page requests arrive on `eq` (subscribed to PAGE_REQUEST only).
    pub(crate) fn set_pages_eq(&mut self, eq: Eq) {
        self.pages_eq = Some(eq);
    }

    /// The pages EQ, handed over to be destroyed: page requests are no longer answered.
    pub(crate) fn take_pages_eq(&mut self) -> Option<Eq> {
        self.pages_eq.take()
    }

    /// The pages EQ's number.
    pub(crate) fn pages_eqn(&self) -> Option<u8> {
        self.pages_eq.as_ref().map(Eq::eqn)
    }

    /// Answers the page requests waiting on the pages EQ (none waits: `Ok`). An error means
    /// the device became unusable while answering.
    pub(crate) fn service_pages<P: Platform>(&mut self, p: &P) -> Result<()> {
        if self.io.dead().is_some() {
            return Ok(());
        }
        page_req::service(
            &mut self.io,
            &mut self.pages,
            self.pages_eq.as_ref(),
            p,
            u64::MAX,
        )
    }

    /// Frees the queue memory; the queue issues no command afterwards. Only call once the
    /// device no longer owns any entry (after DISABLE_HCA).
    pub fn release<P: Platform>(&mut self, p: &P) {
        self.io.release(p);
    }

    /// Leaves the queue memory to the device (it may still own an entry): quarantined, never
    /// freed; the queue issues no command afterwards.
    pub(crate) fn abandon(&mut self, q: &Quarantine) {
        self.io.abandon(q);
    }

    /// Executes one command: `input` (opcode, op_mod, fields) in, `output` filled. The firmware's
    /// status is checked; a non-OK status is [`Error::Cmd`]. While the command is the device's,
    /// the firmware's page requests are answered in the second slot.
    pub fn exec<P: Platform>(&mut self, p: &P, input: &[u8], output: &mut [u8]) -> Result<()> {
        let posted = self.io.post(p, Slot::Main, input, output.len())?;
        let (pages, eq) = (&mut self.pages, self.pages_eq.as_ref());
        let deadline = posted.deadline_ns();
        self.io.wait(p, &posted, |io, p| {
            page_req::service(io, pages, eq, p, deadline)
        })?;
        let r = self.io.collect(&posted, output);
        // What the firmware asked for while executing it (a command that completes before the
        // first poll never ran the loop above) is answered now, not at the next wait.
        if let Err(e) = self.service_pages(p) {
            log::error!("answering page requests after a command: {e}");
        }
        r
    }
}

/// Reads the health buffer: a fatal syndrome (with `rfr`), or a device that reads all-ones, is an
/// error.
pub fn check_health<P: Platform + ?Sized>(p: &P) -> Result<()> {
    let fw_ver = p.bar_read32(u64::from(regs::HEALTH_FW_VER)).get();
    let init = p.bar_read32(u64::from(regs::INITIALIZING)).get();
    if fw_ver == u32::MAX && init == u32::MAX {
        return Err(Error::BadDeviceValue {
            what: "health buffer (device gone?)",
            value: u64::from(fw_ver),
            limit: 0,
        });
    }
    let mut hb = [0u8; 64];
    for w in [0x38usize, 0x3c] {
        let v = p.bar_read32(u64::from(regs::HEALTH_BUFFER) + w as u64);
        hb[w..w + 4].copy_from_slice(&v.to_bytes());
    }
    let v = View::<HealthBuffer>::new(&hb)?;
    let synd = v.get(HealthBuffer::SYND) as u8;
    if synd != 0 {
        let ext = v.get(HealthBuffer::EXT_SYND) as u16;
        if v.get(HealthBuffer::RFR) == 1 {
            return Err(Error::Health {
                synd: HealthSyndrome::from_raw(synd),
                ext_synd: ext,
            });
        }
        log::warn!(
            "firmware health syndrome {} (ext {ext:#x}) without reset request",
            HealthSyndrome::from_raw(synd)
        );
    }
    Ok(())
}
