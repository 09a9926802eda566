//! A delivered command as the device keeps it between delivery and completion: its parsed
//! mailbox chains ([`Parsed`]) and, while it waits for firmware pages, the whole of it
//! ([`Held`], queued in [`crate::state::State::held`]). Its own file so that the device state can
//! hold commands without depending on the command interface that parses and completes them.

use mlx5_ifc::prm::cmdif::{CmdIfBox, CmdQueueEntry as Entry};
use mlx5_ifc::Layout;

/// One output mailbox block: where it is and the image the device writes there.
pub(super) struct Block {
    pub(super) iova: u64,
    pub(super) image: [u8; CmdIfBox::BYTES],
}

/// A command's mailbox chains as delivered: token, output length, the input, the output blocks.
pub(super) struct Parsed {
    pub(super) token: u8,
    pub(super) outlen: usize,
    pub(super) input: Vec<u8>,
    pub(super) out_chain: Vec<Block>,
}

/// A delivered command the firmware has not executed yet: it waits for pages.
pub(crate) struct Held {
    pub(super) slot: u32,
    pub(super) entry_iova: u64,
    pub(super) entry: [u8; Entry::BYTES],
    pub(super) opcode: u16,
    pub(super) op_mod: u16,
    pub(super) checksum: bool,
    pub(super) parsed: Parsed,
    pub(super) notes: Vec<String>,
    /// Pages of ICM it needs.
    pub(super) need: u64,
}
