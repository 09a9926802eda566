//! The faults a test can inject ([`Fault`]) and when a repeated completion lands ([`Replay`]).

use super::entries::{CqeField, EqeField};

/// When [`Fault::CompleteTwice`] writes a completion again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Replay {
    /// At the next command doorbell, before the device fetches the entries rung. A command
    /// the driver has meanwhile placed in that slot reads as complete at once, with the old
    /// completion's status and inline output; its ownership bit is then clear, so the device
    /// ignores the doorbell for it (the command never executes).
    BeforeNextCommand,
    /// Right after the entries of the next command doorbell have been executed and completed:
    /// the slot's status and inline output are the old completion's again, over the new one.
    AfterNextCommand,
}

/// A fault to inject with `SimDevice::inject` (summary in the module documentation).
///
/// Command faults are one-shot: each injection affects the next execution of its opcode only
/// and is consumed by it (inject twice to fail twice). `clear_faults` drops every pending one.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// `initializing` (init segment 0x1fc bit 31) never clears while this is pending.
    StuckInitializing,
    /// The next execution of `opcode` fails with `status` / `syndrome` and has no effect (the
    /// rest of its output is zero).
    FailCommand {
        /// The opcode to fail.
        opcode: u16,
        /// The command status to report.
        status: u8,
        /// The syndrome to report.
        syndrome: u32,
    },
    /// The device takes the next entry carrying `opcode` and never hands it back (ownership stays
    /// with the device; the command is not executed).
    NeverComplete {
        /// The opcode to swallow.
        opcode: u16,
    },
    /// The device takes the next entry carrying `opcode`, checks it as it checks every entry,
    /// and keeps it without executing it until `SimDevice::finish_slow_commands` (a firmware
    /// busy with one command for as long as a test needs): its entry stays the device's, the
    /// other slots' commands go on executing. Then it executes (waiting for pages first if it
    /// needs them) and completes as usual.
    SlowCommand {
        /// The opcode to keep.
        opcode: u16,
    },
    /// The firmware dies now: health `synd` := `synd`, `rfr` := 1, `time` := now; the health
    /// counter stops and no further command completes.
    FatalHealth {
        /// The health syndrome to report (see `mlx5_ifc::HealthSyndrome`).
        synd: u8,
    },
    /// Reading the input mailbox of the next command carrying `opcode` faults as if unmapped
    /// (delivery status 0x6, FW internal error; a `DmaFault` is recorded).
    DmaFault {
        /// The opcode whose input mailbox faults.
        opcode: u16,
    },
    /// The next CQE the device writes (to any CQ) carries `value` in `field` instead of what
    /// the completion says — what a driver sees of a firmware bug or a corrupted DMA write.
    /// The device's own state moves on as for the true CQE.
    CorruptCqe {
        /// The field to overwrite.
        field: CqeField,
        /// What it holds instead (truncated to the field's width).
        value: u32,
    },
    /// The next EQE the device writes — to EQ `eqn`, or to any EQ when `eqn` is `None` —
    /// carries `value` in `field` (or, for [`EqeField::OwnerFlipped`], the wrong owner bit).
    /// The device's own state moves on as for the true EQE: its producer counter advances, the
    /// EQ fires and is disarmed, the event counts as delivered.
    CorruptEqe {
        /// The EQ whose next EQE is corrupted; `None`: the next EQE of any EQ.
        eqn: Option<u32>,
        /// The field to overwrite.
        field: EqeField,
        /// What it holds instead (truncated to the field's width).
        value: u32,
    },
    /// The next command carrying `opcode` that is delivered (delivery status OK) is executed
    /// as usual — an object it creates exists, a state it changes has changed — but the device
    /// then writes `bytes` at byte `offset` of its output instead of what the firmware
    /// produced: offsets 0..16 are the inline output in the entry (status at 0, syndrome at
    /// 4..8), offset `16 + 512k + j` is byte `j` of the data of output mailbox block `k`. Bytes
    /// beyond the command's room (16 + 512 × its output blocks) are dropped. Every pending
    /// output fault of the opcode applies to the same completion (inject several to change
    /// several fields of one output).
    CorruptOutput {
        /// The command whose output lies.
        opcode: u16,
        /// Byte offset in the output (inline bytes first, then mailbox data).
        offset: usize,
        /// What the device writes there.
        bytes: Vec<u8>,
    },
    /// As [`Fault::CorruptOutput`], but the output mailbox block `block` (0-based) carries
    /// `token` instead of the command's token. A command with fewer output blocks is
    /// unaffected (the fault is consumed anyway, and recorded as having changed nothing).
    CorruptOutputToken {
        /// The command whose output lies.
        opcode: u16,
        /// The output mailbox block.
        block: usize,
        /// The token written in it.
        token: u8,
    },
    /// As [`Fault::CorruptOutput`], but a signature of the completion does not check: the
    /// entry's (byte 0x3d) when `block` is `None`, output mailbox block `block`'s `signature`
    /// (byte 0x23f) otherwise. Written even when checksums are off (when they are, the device
    /// writes no signature and the byte would otherwise hold whatever the driver left).
    CorruptOutputSignature {
        /// The command whose completion lies.
        opcode: u16,
        /// `None`: the entry signature; `Some(k)`: output block `k`'s.
        block: Option<usize>,
    },
    /// The 32-bit BAR0 word at byte `offset` — any word of the init segment and health buffer:
    /// `fw_rev` 0x0, `cmdif_rev_fw_sub` 0x4, `cmdq_phy_addr` 0x10/0x14, `initializing` 0x1fc,
    /// the health buffer 0x200..0x240, `cmd_exec_to` 0xff8, `cmd_q_init_to` 0xffc,
    /// `health_counter` 0x1010... (4-aligned, below 0x5000; anything else is ignored with a
    /// warning) — reads as `value`. With `sticky`, every read returns it until `clear_faults`;
    /// without, reads return it until the device itself next changes that word (the heartbeat
    /// ticks, `initializing` clears, the driver programs the command queue address, the
    /// firmware reports a fatal error), so a static word (`fw_rev`, the timeouts) keeps it
    /// until `clear_faults`. Only what the driver reads lies: the device goes on using its
    /// real command queue address, health state and clock.
    InitSegWord {
        /// Byte offset of the word in BAR0.
        offset: u32,
        /// The value reads return (host order: what `bar_read32(..).get()` gives).
        value: u32,
        /// Every read (until `clear_faults`) rather than until the device changes the word.
        sticky: bool,
    },
    /// The device falls off the bus: every BAR0 read returns `0xffffffff` and every BAR0 write
    /// (doorbells included) is lost, until `clear_faults`. The device's state does not change;
    /// work it already has (frames arriving for its QPs) goes on.
    FellOffBus,
    /// The device writes `bytes` at `iova` now, at injection: a stray DMA write into whatever
    /// the memory holds (a queue, a doorbell record, a mailbox, the command queue, data).
    /// A range not inside one live allocation is blocked by the IOMMU: nothing is written and a
    /// [`crate::DmaFaultKind::Write`] is recorded.
    DmaScribble {
        /// Where the device writes.
        iova: u64,
        /// What it writes.
        bytes: Vec<u8>,
    },
    /// The next entry carrying `opcode` completes normally (whatever its delivery status); the
    /// device then writes that completion — its 16 inline output bytes, signature and status
    /// byte with ownership 0 — to the same slot a second time, at the moment `when` says.
    CompleteTwice {
        /// The command whose completion is written twice.
        opcode: u16,
        /// When the second copy lands.
        when: Replay,
    },
    /// The next command doorbell: when it hands over several entries, the device executes and
    /// completes them from the highest slot down (the later one first); when it hands over a
    /// single entry, the device completes it normally and then also "completes" a slot nobody
    /// rang — the next one above it (modulo the 32 slots) whose ownership bit is 0 — by
    /// writing its status byte with delivery status [`SPURIOUS_STATUS`] and ownership 0.
    CompleteOutOfOrder,
    /// The next send WQE an Ethernet SQ executes cannot read its data: the read faults as if
    /// the buffer were unmapped (a PCIe read error as the driver sees it). A [`crate::DmaFault`] of
    /// kind [`crate::DmaFaultKind::Injected`] is recorded; the WQE completes with a local QP
    /// operation error (syndrome 0x2), nothing goes on the wire, and the SQ goes to ERR (the
    /// WQEs after it flushed, with `flush_in_error_en`) — what a driver must recover from by
    /// moving the SQ back to RDY through RST.
    SqReadFault,
}

/// The (invalid) delivery status of a slot [`Fault::CompleteOutOfOrder`] completes spuriously.
pub const SPURIOUS_STATUS: u8 = 0x5a;

impl Fault {
    /// The variant's name, as recorded in [`crate::FaultEvent::fault`].
    pub fn name(&self) -> &'static str {
        match self {
            Fault::StuckInitializing => "StuckInitializing",
            Fault::FailCommand { .. } => "FailCommand",
            Fault::NeverComplete { .. } => "NeverComplete",
            Fault::SlowCommand { .. } => "SlowCommand",
            Fault::FatalHealth { .. } => "FatalHealth",
            Fault::DmaFault { .. } => "DmaFault",
            Fault::CorruptCqe { .. } => "CorruptCqe",
            Fault::CorruptEqe { .. } => "CorruptEqe",
            Fault::CorruptOutput { .. } => "CorruptOutput",
            Fault::CorruptOutputToken { .. } => "CorruptOutputToken",
            Fault::CorruptOutputSignature { .. } => "CorruptOutputSignature",
            Fault::InitSegWord { .. } => "InitSegWord",
            Fault::FellOffBus => "FellOffBus",
            Fault::DmaScribble { .. } => "DmaScribble",
            Fault::CompleteTwice { .. } => "CompleteTwice",
            Fault::CompleteOutOfOrder => "CompleteOutOfOrder",
            Fault::SqReadFault => "SqReadFault",
        }
    }

    /// The opcode a command fault waits for.
    pub(crate) fn opcode(&self) -> Option<u16> {
        match *self {
            Fault::FailCommand { opcode, .. }
            | Fault::NeverComplete { opcode }
            | Fault::SlowCommand { opcode }
            | Fault::DmaFault { opcode }
            | Fault::CorruptOutput { opcode, .. }
            | Fault::CorruptOutputToken { opcode, .. }
            | Fault::CorruptOutputSignature { opcode, .. }
            | Fault::CompleteTwice { opcode, .. } => Some(opcode),
            _ => None,
        }
    }
}
