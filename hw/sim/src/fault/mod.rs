//! Fault injection: what a buggy or hostile device can do to its driver, and the records of
//! DMA violations and of the injected faults as they take effect.
//!
//! A [`Fault`] is injected with `SimDevice::inject`. Most wait for the event they corrupt and
//! are consumed by it (**one-shot**: inject twice to have it happen twice); a few act at the
//! moment of injection; the **sticky** ones last until `SimDevice::clear_faults`, which also
//! drops every pending one-shot fault (a fatal health state, and bytes already written, stay).
//! Every fault that takes effect is recorded in `SimDevice::fault_events` (and logged); the
//! ones that change a command's completion are also named in that command's
//! [`crate::TraceRecord::faults`].
//!
//! | Fault | What the device does | Lifetime |
//! |---|---|---|
//! | [`Fault::StuckInitializing`] | `initializing` stays 1; doorbells are ignored | sticky |
//! | [`Fault::FailCommand`] | next command of the opcode fails with the given status/syndrome, no effect | one-shot |
//! | [`Fault::NeverComplete`] | next entry of the opcode is swallowed, never handed back | one-shot |
//! | [`Fault::SlowCommand`] | next entry of the opcode is kept, unexecuted, until `SimDevice::finish_slow_commands` | one-shot |
//! | [`Fault::FatalHealth`] | health buffer reports a fatal syndrome, heartbeat stops, firmware dead | at once, permanent |
//! | [`Fault::DmaFault`] | next command's input mailbox read faults (delivery status 0x6) | one-shot |
//! | [`Fault::CorruptCqe`] | next CQE (any CQ) carries a wrong field | one-shot |
//! | [`Fault::CorruptEqe`] | next EQE (any EQ, or one EQ) carries a wrong field or a flipped owner bit | one-shot |
//! | [`Fault::CorruptOutput`] | next completion of the opcode: output bytes replaced after execution | one-shot |
//! | [`Fault::CorruptOutputToken`] | next completion of the opcode: an output mailbox block carries a wrong token | one-shot |
//! | [`Fault::CorruptOutputSignature`] | next completion of the opcode: entry or block signature wrong | one-shot |
//! | [`Fault::InitSegWord`] `sticky: false` | a 32-bit BAR0 word reads as a chosen value until the device next changes it | until overwritten |
//! | [`Fault::InitSegWord`] `sticky: true` | every read of that word returns the chosen value | sticky |
//! | [`Fault::FellOffBus`] | every BAR read returns `0xffffffff`, BAR writes are lost | sticky |
//! | [`Fault::DmaScribble`] | the device writes chosen bytes at an IOVA (any live allocation) | at once |
//! | [`Fault::CompleteTwice`] | the completion of the next entry of the opcode is written again later | one-shot |
//! | [`Fault::CompleteOutOfOrder`] | next doorbell: entries complete highest slot first; a lone entry also gets an idle slot spuriously completed | one-shot |
//! | [`Fault::SqReadFault`] | next send WQE an Ethernet SQ executes: its data read faults; error CQE, the SQ to ERR | one-shot |
//!
//! `SimDevice::dma_scribble(seed, count)` is the random form of [`Fault::DmaScribble`]: random
//! bytes at random offsets of random live allocations, reproducible from the seed.
//!
//! Wire faults (dropped, corrupted, delayed, reordered frames; link down) are
//! [`crate::WireFault`]s of the fabric, not device faults.

mod entries;
mod inject;
mod pending;
mod record;

pub use entries::{CqeField, EqeField, EQE_DATA_WORDS};
pub use inject::{Fault, Replay, SPURIOUS_STATUS};
pub(crate) use pending::{ArmedReplay, Faults};
pub use record::{DmaFault, DmaFaultKind, FaultEvent};
