//! Work requests (`struct ibv_send_wr`, `struct ibv_recv_wr`) and their operations, as callers
//! build them; [`super::post`] checks them against the QP and writes them into the rings.

use super::sizing::SendOps;
use crate::verbs::wqe::{opcode, UdAddr};

/// A scatter/gather element: `length` bytes at `addr` in the memory of key `lkey`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Sge {
    /// Address (IOVA, in the region's address space).
    pub addr: u64,
    /// Bytes.
    pub length: u32,
    /// Local key of the region.
    pub lkey: u32,
}

/// What a send work request does (`ibv_wr_opcode` with its operands).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SendOp {
    /// SEND.
    Send,
    /// SEND with immediate data.
    SendImm(u32),
    /// SEND with invalidate (`IBV_WR_SEND_WITH_INV`): the peer invalidates its memory key
    /// `rkey` once the message is placed (RC; the key must allow remote invalidation, else the
    /// peer refuses the message and this request completes with REM_INV_REQ_ERR). The key goes
    /// in the control segment's `imm` field, big-endian, as rdma-core's `send_ieth` puts it.
    SendInv(u32),
    /// RDMA WRITE to `remote_addr` with `rkey`.
    Write {
        /// Remote address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// RDMA WRITE with immediate data (consumes a receive at the peer).
    WriteImm {
        /// Remote address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Immediate data.
        imm: u32,
    },
    /// RDMA READ from `remote_addr` into the SGEs.
    Read {
        /// Remote address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// 8-byte atomic compare-and-swap; the original value lands in the (8-byte) SGE.
    CmpSwap {
        /// Remote address (8-byte aligned).
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Expected value.
        compare: u64,
        /// New value.
        swap: u64,
    },
    /// 8-byte atomic fetch-and-add; the original value lands in the (8-byte) SGE.
    FetchAdd {
        /// Remote address (8-byte aligned).
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Addend.
        add: u64,
    },
}

impl SendOp {
    /// The control segment's opcode, the send op it needs and the control segment's `imm` word
    /// (immediate or rkey to invalidate, written big-endian). The completion's opcode and flags
    /// follow from the control segment's opcode ([`crate::verbs::wr_table::SQ_COMPLETION`]).
    pub(super) fn parts(&self) -> (u8, SendOps, u32) {
        match *self {
            SendOp::Send => (opcode::SEND, SendOps::SEND, 0),
            SendOp::SendImm(imm) => (opcode::SEND_IMM, SendOps::SEND_IMM, imm),
            SendOp::SendInv(rkey) => (opcode::SEND_INVAL, SendOps::SEND_INV, rkey),
            SendOp::Write { .. } => (opcode::RDMA_WRITE, SendOps::WRITE, 0),
            SendOp::WriteImm { imm, .. } => (opcode::RDMA_WRITE_IMM, SendOps::WRITE_IMM, imm),
            SendOp::Read { .. } => (opcode::RDMA_READ, SendOps::READ, 0),
            SendOp::CmpSwap { .. } => (opcode::ATOMIC_CS, SendOps::ATOMIC_CS, 0),
            SendOp::FetchAdd { .. } => (opcode::ATOMIC_FA, SendOps::ATOMIC_FA, 0),
        }
    }
}

/// Where the data of a send comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Payload<'a> {
    /// Registered memory, gathered by the device.
    Sges(&'a [Sge]),
    /// Bytes copied into the WQE (at most the QP's `max_inline_data`; memory needs no key).
    /// No bytes make no inline segment: the WQE is its control segment alone (DS = 1), as
    /// rdma-core builds a zero-length inline send.
    Inline(&'a [u8]),
}

/// A send work request (`struct ibv_send_wr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SendWr<'a> {
    /// Comes back in the completion.
    pub wr_id: u64,
    /// The operation.
    pub op: SendOp,
    /// The data.
    pub payload: Payload<'a>,
    /// Ask for a completion (always on with `sq_sig_all`).
    pub signaled: bool,
    /// Wait for earlier READs and atomics first.
    pub fence: bool,
    /// Raise a solicited event at the receiver.
    pub solicited: bool,
    /// The destination of a UD send.
    pub ud: Option<UdAddr>,
}

impl<'a> SendWr<'a> {
    /// A signaled SEND of `sges`.
    pub fn send(wr_id: u64, sges: &'a [Sge]) -> Self {
        Self {
            wr_id,
            op: SendOp::Send,
            payload: Payload::Sges(sges),
            signaled: true,
            fence: false,
            solicited: false,
            ud: None,
        }
    }
}

/// A receive work request (`struct ibv_recv_wr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RecvWr<'a> {
    /// Comes back in the completion.
    pub wr_id: u64,
    /// Where received data goes.
    pub sg_list: &'a [Sge],
}
