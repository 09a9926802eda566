//! The command queue as the driver uses it: the command entries ([`CmdIo`]), the pages lent to
//! the firmware and the EQ its page requests arrive on. Every command runs through its
//! [`Exec`] implementation, which answers page requests while the command waits — the one
//! recursion of the firmware interface (a command's wait sends MANAGE_PAGES commands), made
//! explicit: the code below this file (`fw::cmd`, `fw::eq`, `fw::uar`, `fw::pages`) runs
//! commands through `&dyn Exec` and never names this type.
//!
//! The queue is shared by every thread (`&self`): each command claims an entry of its own, so
//! several run at once. The pages and their EQ sit under one lock, taken by whichever waiting
//! thread gets it first to answer the requests on the EQ through the pages entry; the others go
//! on polling their own entries. Only MANAGE_PAGES and QUERY_PAGES run while that lock is held,
//! and they never wait for pages, so no command waits for a thread that waits for it.

use crate::error::{DeadCause, Result};
use crate::fw::cmd::{CmdIo, CmdStats, Exec, Slot};
use crate::fw::eq::Eq;
use crate::fw::page_req;
use crate::fw::pages::PagePool;
use crate::fw::quarantine::Quarantine;
use crate::io::platform::Platform;

/// The pages lent to the firmware and the EQ their requests arrive on.
#[derive(Debug, Default)]
struct Pages {
    pool: PagePool,
    eq: Option<Eq>,
}

/// The command queue, the firmware's pages and the EQ their requests arrive on.
#[derive(Debug)]
pub(crate) struct CmdQueue {
    io: CmdIo,
    pages: spin::Mutex<Pages>,
}

impl CmdQueue {
    /// Allocates the queue page and mailboxes for `slots` entries. The caller writes the queue
    /// address to the device.
    pub(crate) fn new<P: Platform>(
        p: &P,
        slots: usize,
        log_stride: u8,
        timeout_ms: u64,
    ) -> Result<Self> {
        Ok(Self {
            io: CmdIo::new(p, slots, log_stride, timeout_ms)?,
            pages: spin::Mutex::new(Pages::default()),
        })
    }

    /// Device address of the queue page (for `cmdq_addr_h` / `cmdq_addr_l_sz`).
    pub(crate) fn iova(&self) -> u64 {
        self.io.iova()
    }

    /// Sets the per-command timeout.
    pub(crate) fn set_timeout_ms(&self, ms: u64) {
        self.io.set_timeout_ms(ms);
    }

    /// Whether the firmware verifies signatures (cmd_hca_cap `cmdif_checksum` = 3).
    pub(crate) fn set_checksum(&self, on: bool) {
        self.io.set_checksum(on);
    }

    /// Why the queue no longer issues commands, if it does not.
    pub(crate) fn dead(&self) -> Option<DeadCause> {
        self.io.dead()
    }

    /// Stops issuing commands.
    pub(crate) fn mark_dead(&self, cause: DeadCause) {
        self.io.mark_dead(cause);
    }

    /// Counters.
    pub(crate) fn stats(&self) -> CmdStats {
        self.io.stats()
    }

    /// Runs `f` with the command entries and the page pool, the pool locked: for the pool's
    /// own commands (bring-up, teardown, answering requests), which must be MANAGE_PAGES or
    /// QUERY_PAGES only.
    pub(crate) fn with_pages<R>(&self, f: impl FnOnce(&CmdIo, &mut PagePool) -> R) -> R {
        f(&self.io, &mut self.pages.lock().pool)
    }

    /// From now on page requests arrive on `eq` (subscribed to PAGE_REQUEST only).
    pub(crate) fn set_pages_eq(&self, eq: Eq) {
        self.pages.lock().eq = Some(eq);
    }

    /// The pages EQ, handed over to be destroyed: page requests are no longer answered.
    pub(crate) fn take_pages_eq(&self) -> Option<Eq> {
        self.pages.lock().eq.take()
    }

    /// The pages EQ's number.
    pub(crate) fn pages_eqn(&self) -> Option<u8> {
        self.pages.lock().eq.as_ref().map(Eq::eqn)
    }

    /// Answers the page requests waiting on the pages EQ (none waits: `Ok`), waiting for the
    /// pages lock if another thread holds it. An error means the device became unusable while
    /// answering.
    pub(crate) fn service_pages<P: Platform>(&self, p: &P) -> Result<()> {
        if self.io.dead().is_some() {
            return Ok(());
        }
        let mut g = self.pages.lock();
        let Pages { pool, eq } = &mut *g;
        page_req::service(&self.io, pool, eq.as_ref(), p, u64::MAX)
    }

    /// As [`CmdQueue::service_pages`] until `deadline_ns`, unless another thread is answering
    /// them (then `Ok` at once).
    pub(crate) fn try_service_pages<P: Platform>(&self, p: &P, deadline_ns: u64) -> Result<()> {
        let Some(mut g) = self.pages.try_lock() else {
            return Ok(());
        };
        let Pages { pool, eq } = &mut *g;
        page_req::service(&self.io, pool, eq.as_ref(), p, deadline_ns)
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

    /// Executes one command in a free entry: `input` (opcode, op_mod, fields) in, `output`
    /// filled. The firmware's status is checked; a non-OK status is [`Error::Cmd`]. While the
    /// command is the device's, the firmware's page requests are answered in the pages entry
    /// (unless another thread is answering them).
    ///
    /// [`Error::Cmd`]: crate::error::Error::Cmd
    pub(crate) fn exec<P: Platform>(&self, p: &P, input: &[u8], output: &mut [u8]) -> Result<()> {
        let r = self
            .io
            .exec_with(p, Slot::Main, input, output, |p, deadline| {
                self.try_service_pages(p, deadline)
            });
        // What the firmware asked for while executing it (a command that completes before the
        // first poll never ran the loop above) is answered now, not at the next wait.
        if let Err(e) = self.service_pages(p) {
            log::error!("answering page requests after a command: {e}");
        }
        r
    }
}

impl<P: Platform> Exec<P> for CmdQueue {
    fn exec(&self, p: &P, input: &[u8], output: &mut [u8]) -> Result<()> {
        CmdQueue::exec(self, p, input, output)
    }
}
