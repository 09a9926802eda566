//! The firmware command interface in polling mode (PRM "Command Interface").
//!
//! One 4 KiB command queue page of `1 << log_cmdq_size` entries (32 on a ConnectX-5), every one
//! of them used: a command claims a free entry ([`Slot::Main`]), the last entry is kept for
//! page requests ([`Slot::Pages`]), so as many commands as there are entries run at once, one
//! per thread. The first 16 input bytes sit in the entry, the rest in a chain of 576-byte
//! mailbox blocks (1 KiB aligned) of that entry carrying the command's token; the output comes
//! back the same way. The driver hands the entry over by setting its ownership bit and writing
//! `1 << entry` to the command doorbell, then polls the ownership bit with a deadline. A
//! command that never completes leaves the device unusable rather than hanging, and its entry
//! is never reused.
//!
//! **Firmware pages while a command waits.** The firmware may hold a command (a CREATE that
//! needs ICM, say) until the driver gives it pages, asking for them with a PAGE_REQUEST event on
//! the pages EQ. So while an entry is the device's, every poll also drains the pages EQ — the
//! thread that gets the pages lock does, the others go on polling — and answers each request at
//! once with MANAGE_PAGES in the pages entry (mailboxes of its own), waited for with the same
//! deadline rules, before going back to waiting for its own entry (`crate::fw::page_req`,
//! through the [`Exec`] that `crate::fw::cmdq::CmdQueue` implements above the pages and their
//! EQ); once its entry is back, the pages EQ is drained once more, so what the firmware asked
//! for while executing the command is answered at once too. Nothing the caller does is
//! needed; the device is never asked to wait for a command that waits for it.

mod health;
mod run;
mod slot;

pub(crate) use health::check_health;
pub(crate) use run::{run, run_create, Exec, SMALL_CMD_BYTES};
pub(crate) use slot::{CmdIo, CmdStats, Slot, PAGES_PER_CMD};
