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
//! (`crate::fw::page_req`, through the [`Exec`] that `crate::fw::cmdq::CmdQueue` implements above the pages and their EQ); once entry 0 is back, the pages EQ is drained once more, so what
//! the firmware asked for while executing the command is answered at once too. Nothing the
//! caller does is needed; the device is never asked to wait for a command that waits for it.

mod health;
mod run;
mod slot;

pub(crate) use health::check_health;
pub(crate) use run::{run, run_create, Exec, SMALL_CMD_BYTES};
pub(crate) use slot::{CmdIo, CmdStats, Slot, PAGES_PER_CMD};
