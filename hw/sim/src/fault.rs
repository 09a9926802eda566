//! Fault injection, and the record of DMA translation faults the device hit.

/// A fault to inject with `SimDevice::inject`.
///
/// Command faults are one-shot: each injection affects the next execution of its opcode only
/// and is consumed by it (inject twice to fail twice). `clear_faults` drops every pending one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
}

/// A CQE field [`Fault::CorruptCqe`] can overwrite (`mlx5-datapath-sizing.md` §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CqeField {
    /// `sop_drop_qpn` bits 23:0: the QP number (bytes 57..60).
    Qpn,
    /// `wqe_counter` (bytes 60..62): the WQE completed, or the SRQ WQE index.
    WqeCounter,
    /// `byte_cnt` (bytes 44..48).
    ByteCnt,
    /// The opcode, `op_own` bits 7:4 (byte 63; the owner bit is kept).
    Opcode,
}

impl CqeField {
    /// Overwrites this field of the 64-byte CQE image `cqe` with `value`.
    pub(crate) fn apply(self, cqe: &mut [u8; 64], value: u32) {
        match self {
            CqeField::Qpn => cqe[57..60].copy_from_slice(&value.to_be_bytes()[1..]),
            CqeField::WqeCounter => cqe[60..62].copy_from_slice(&(value as u16).to_be_bytes()),
            CqeField::ByteCnt => cqe[44..48].copy_from_slice(&value.to_be_bytes()),
            CqeField::Opcode => cqe[63] = (cqe[63] & 0x0f) | ((value as u8 & 0xf) << 4),
        }
    }
}

/// What kind of DMA violation a [`DmaFault`] records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DmaFaultKind {
    /// The device read memory that is not mapped.
    Read,
    /// The device wrote memory that is not mapped.
    Write,
    /// A read failed because `Fault::DmaFault` was injected.
    Injected,
    /// MANAGE_PAGES gave the device a page that is not (entirely) mapped.
    PageNotMapped,
    /// The host freed DMA memory holding a page the device still owns (given by MANAGE_PAGES,
    /// not taken back).
    HostFreedDevicePage,
    /// A queue's buffer page (PAS entry) or doorbell record given to CREATE_EQ/CQ/SRQ/RMP/QP is
    /// not (entirely) mapped.
    QueueNotMapped,
    /// A doorbell write to a UAR page that names no object using that page (unknown EQ/CQ
    /// number, or the object's doorbells go to another UAR), or with the wrong access width.
    /// `iova` is the BAR0 offset written.
    BadDoorbell,
    /// An MTT page given to CREATE_MKEY is not (entirely, for the part the key uses) mapped.
    MttNotMapped,
    /// A BlueFlame write (a 64-bit word after the doorbell word in the same half of a BlueFlame
    /// register) differs from the WQE in the send queue at that offset. `iova` is the BAR0
    /// offset written.
    BlueFlameMismatch,
    /// A send doorbell whose WQE the device could not use: the QP's send queue names another
    /// QP in its control segment, or the doorbell names a QP without a send queue.
    BadWqe,
}

/// One DMA violation: a translation fault of the device, or the host freeing device memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DmaFault {
    /// The IOVA accessed.
    pub iova: u64,
    /// Length of the access in bytes.
    pub len: usize,
    /// What kind of violation.
    pub kind: DmaFaultKind,
    /// What the device was doing, e.g. `"read input mailbox block 1 of QUERY_HCA_CAP"`.
    pub what: String,
}

/// The faults pending on one device.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    pub(crate) stuck_initializing: bool,
    fail: Vec<(u16, u8, u32)>,
    never: Vec<u16>,
    dma: Vec<u16>,
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
    /// Queues a command fault (FatalHealth is applied by the caller, not queued).
    pub(crate) fn add(&mut self, f: Fault) {
        match f {
            Fault::StuckInitializing => self.stuck_initializing = true,
            Fault::FailCommand {
                opcode,
                status,
                syndrome,
            } => self.fail.push((opcode, status, syndrome)),
            Fault::NeverComplete { opcode } => self.never.push(opcode),
            Fault::DmaFault { opcode } => self.dma.push(opcode),
            // Kept by the data path engine (applied by the caller).
            Fault::CorruptCqe { .. } => {}
            Fault::FatalHealth { .. } => {}
        }
    }

    /// Drops every pending fault.
    pub(crate) fn clear(&mut self) {
        *self = Self::default();
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

    /// Consumes a pending `DmaFault` for `opcode`.
    pub(crate) fn take_dma(&mut self, opcode: u16) -> bool {
        take(&mut self.dma, opcode)
    }
}
