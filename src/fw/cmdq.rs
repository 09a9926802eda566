//! The command queue as the driver uses it: the command slots ([`CmdIo`]), the pages lent to
//! the firmware and the EQ its page requests arrive on. Every command runs through its
//! [`Exec`] implementation, which answers page requests while the command waits — the one
//! recursion of the firmware interface (a command's wait sends MANAGE_PAGES commands), made
//! explicit: the code below this file (`fw::cmd`, `fw::eq`, `fw::uar`, `fw::pages`) runs
//! commands through `&mut dyn Exec` and never names this type.

use crate::error::{DeadCause, Result};
use crate::fw::cmd::{CmdIo, CmdStats, Exec, Slot};
use crate::fw::eq::Eq;
use crate::fw::page_req;
use crate::fw::pages::PagePool;
use crate::fw::quarantine::Quarantine;
use crate::io::platform::Platform;

/// The command queue, the firmware's pages and the EQ their requests arrive on.
#[derive(Debug)]
pub(crate) struct CmdQueue {
    io: CmdIo,
    pages: PagePool,
    pages_eq: Option<Eq>,
}

impl CmdQueue {
    /// Allocates the queue page and mailboxes. The caller writes the queue address to the device.
    pub(crate) fn new<P: Platform>(p: &P, log_stride: u8, timeout_ms: u64) -> Result<Self> {
        Ok(Self {
            io: CmdIo::new(p, log_stride, timeout_ms)?,
            pages: PagePool::default(),
            pages_eq: None,
        })
    }

    /// Device address of the queue page (for `cmdq_addr_h` / `cmdq_addr_l_sz`).
    pub(crate) fn iova(&self) -> u64 {
        self.io.iova()
    }

    /// Sets the per-command timeout.
    pub(crate) fn set_timeout_ms(&mut self, ms: u64) {
        self.io.set_timeout_ms(ms);
    }

    /// Whether the firmware verifies signatures (cmd_hca_cap `cmdif_checksum` = 3).
    pub(crate) fn set_checksum(&mut self, on: bool) {
        self.io.checksum = on;
    }

    /// Why the queue no longer issues commands, if it does not.
    pub(crate) fn dead(&self) -> Option<DeadCause> {
        self.io.dead()
    }

    /// Stops issuing commands.
    pub(crate) fn mark_dead(&mut self, cause: DeadCause) {
        self.io.mark_dead(cause);
    }

    /// Counters.
    pub(crate) fn stats(&self) -> CmdStats {
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
    pub(crate) fn release<P: Platform>(&mut self, p: &P) {
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
    pub(crate) fn exec<P: Platform>(
        &mut self,
        p: &P,
        input: &[u8],
        output: &mut [u8],
    ) -> Result<()> {
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

impl<P: Platform> Exec<P> for CmdQueue {
    fn exec(&mut self, p: &P, input: &[u8], output: &mut [u8]) -> Result<()> {
        CmdQueue::exec(self, p, input, output)
    }
}
