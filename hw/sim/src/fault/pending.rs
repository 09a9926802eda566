//! The faults pending on one device, waiting for the event they corrupt, and the record of
//! those that took effect.

use super::entries::{CqeField, EqeField};
use super::inject::{Fault, Replay};
use super::record::FaultLog;

/// A completion `Fault::CompleteTwice` will write again.
#[derive(Debug, Clone)]
pub(crate) struct ArmedReplay {
    /// The opcode of the command completed.
    pub(crate) opcode: u16,
    /// Its slot and the IOVA of its entry.
    pub(crate) slot: u32,
    pub(crate) iova: u64,
    /// The entry as the device completed it.
    pub(crate) entry: [u8; 64],
    pub(crate) when: Replay,
}

/// The faults pending on one device.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    pub(crate) stuck_initializing: bool,
    fail: Vec<(u16, u8, u32)>,
    never: Vec<u16>,
    slow: Vec<u16>,
    dma: Vec<u16>,
    cqe: Vec<(CqeField, u32)>,
    eqe: Vec<(Option<u32>, EqeField, u32)>,
    /// `CorruptOutput`, `CorruptOutputToken`, `CorruptOutputSignature`, oldest first.
    output: Vec<Fault>,
    twice: Vec<(u16, Replay)>,
    /// Completions to write again.
    pub(crate) replays: Vec<ArmedReplay>,
    out_of_order: u32,
    sq_read: u32,
    /// The faults that took effect.
    pub(crate) log: FaultLog,
}

fn take(list: &mut Vec<u16>, opcode: u16) -> bool {
    match list.iter().position(|&o| o == opcode) {
        Some(i) => {
            list.remove(i);
            true
        }
        None => false,
    }
}

impl Faults {
    /// Queues a fault that waits for an event. The faults that act at once (`FatalHealth`,
    /// `InitSegWord`, `FellOffBus`, `DmaScribble`) are applied by the caller, not queued.
    pub(crate) fn add(&mut self, f: Fault) {
        match f {
            Fault::StuckInitializing => self.stuck_initializing = true,
            Fault::FailCommand {
                opcode,
                status,
                syndrome,
            } => self.fail.push((opcode, status, syndrome)),
            Fault::NeverComplete { opcode } => self.never.push(opcode),
            Fault::SlowCommand { opcode } => self.slow.push(opcode),
            Fault::DmaFault { opcode } => self.dma.push(opcode),
            Fault::CorruptCqe { field, value } => self.cqe.push((field, value)),
            Fault::CorruptEqe { eqn, field, value } => self.eqe.push((eqn, field, value)),
            f @ (Fault::CorruptOutput { .. }
            | Fault::CorruptOutputToken { .. }
            | Fault::CorruptOutputSignature { .. }) => self.output.push(f),
            Fault::CompleteTwice { opcode, when } => self.twice.push((opcode, when)),
            Fault::CompleteOutOfOrder => self.out_of_order += 1,
            Fault::SqReadFault => self.sq_read += 1,
            Fault::FatalHealth { .. }
            | Fault::InitSegWord { .. }
            | Fault::FellOffBus
            | Fault::DmaScribble { .. } => {
                log::error!("mlx5-sim: {f:?} acts at once; it is not queued");
            }
        }
    }

    /// Drops every pending fault (the record of those that took effect stays).
    pub(crate) fn clear(&mut self) {
        let log = std::mem::take(&mut self.log);
        *self = Self {
            log,
            ..Self::default()
        };
    }

    /// Consumes a pending `FailCommand` for `opcode`: `(status, syndrome)`.
    pub(crate) fn take_fail(&mut self, opcode: u16) -> Option<(u8, u32)> {
        let i = self.fail.iter().position(|f| f.0 == opcode)?;
        let (_, status, syndrome) = self.fail.remove(i);
        Some((status, syndrome))
    }

    /// Consumes a pending `NeverComplete` for `opcode`.
    pub(crate) fn take_never_complete(&mut self, opcode: u16) -> bool {
        take(&mut self.never, opcode)
    }

    /// Consumes a pending `SlowCommand` for `opcode`.
    pub(crate) fn take_slow(&mut self, opcode: u16) -> bool {
        take(&mut self.slow, opcode)
    }

    /// Consumes a pending `DmaFault` for `opcode`.
    pub(crate) fn take_dma(&mut self, opcode: u16) -> bool {
        take(&mut self.dma, opcode)
    }

    /// Consumes the oldest pending `CorruptCqe`.
    pub(crate) fn take_cqe(&mut self) -> Option<(CqeField, u32)> {
        (!self.cqe.is_empty()).then(|| self.cqe.remove(0))
    }

    /// Consumes the oldest pending `CorruptEqe` that applies to EQ `eqn`.
    pub(crate) fn take_eqe(&mut self, eqn: u32) -> Option<(EqeField, u32)> {
        let i = self.eqe.iter().position(|e| e.0.is_none_or(|n| n == eqn))?;
        let (_, field, value) = self.eqe.remove(i);
        Some((field, value))
    }

    /// Consumes every pending output fault of `opcode`, oldest first.
    pub(crate) fn take_output(&mut self, opcode: u16) -> Vec<Fault> {
        let (mine, rest) = std::mem::take(&mut self.output)
            .into_iter()
            .partition(|f| f.opcode() == Some(opcode));
        self.output = rest;
        mine
    }

    /// Consumes a pending `CompleteTwice` for `opcode`: when to write the completion again.
    pub(crate) fn take_twice(&mut self, opcode: u16) -> Option<Replay> {
        let i = self.twice.iter().position(|t| t.0 == opcode)?;
        Some(self.twice.remove(i).1)
    }

    /// Consumes a pending `CompleteOutOfOrder`.
    pub(crate) fn take_out_of_order(&mut self) -> bool {
        let some = self.out_of_order > 0;
        self.out_of_order = self.out_of_order.saturating_sub(1);
        some
    }

    /// Consumes a pending `SqReadFault`.
    pub(crate) fn take_sq_read(&mut self) -> bool {
        let some = self.sq_read > 0;
        self.sq_read = self.sq_read.saturating_sub(1);
        some
    }

    /// Takes the armed replays due `when`.
    pub(crate) fn take_replays(&mut self, when: Replay) -> Vec<ArmedReplay> {
        let (due, rest) = std::mem::take(&mut self.replays)
            .into_iter()
            .partition(|r| r.when == when);
        self.replays = rest;
        due
    }
}
