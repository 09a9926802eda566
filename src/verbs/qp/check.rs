//! The send checks, written once: [`Qp::check`] measures a send work request against the QP
//! (DS units, WQEBBs, bytes, packed for `write_wqe`) or says why the QP refuses it with a
//! [`Refused`] code; the error a caller sees is made from the code, out of line
//! ([`Qp::refusal`]). The single post and the list post both go through [`Qp::measure`].
//!
//! The checks, in the order a refusal reports the first that fails: the op is one the QP was
//! created with; a UD send names its destination; the SGEs fit `max_send_sge`; an atomic
//! returns into exactly one 8-byte SGE; inline data fits `max_inline_data` and is not a READ's
//! or an atomic's; an atomic's address is 8-byte aligned; the WQE fits the QP's send WQE size
//! (and `MAX_DS`); the message fits `log_max_msg`.

use super::create::Qp;
use super::sizing::SendOps;
use super::wr::{Payload, SendOp, SendWr, Sge};
use super::write::{pack, refuse};
use crate::error::{Error, Result};
use crate::io::platform::Platform;
use crate::verbs::wqe::{self, opcode, DS, MAX_DS, WQEBB};

/// Why the QP refuses a send work request (the check that failed), and the number the error
/// reports as requested.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refused {
    /// An op the QP was not created with (the op's bit).
    Opcode(SendOps),
    /// A UD send without a destination.
    NoDestination,
    /// More SGEs than `max_send_sge` (the count).
    NumSge(usize),
    /// An atomic whose gather list is not one 8-byte SGE (the count).
    AtomicSge(usize),
    /// More inline bytes than `max_inline_data` (the length).
    InlineLength(usize),
    /// Inline data on a READ or an atomic.
    InlinePayload,
    /// An atomic's unaligned remote address.
    RemoteAddr(u64),
    /// A WQE larger than the QP's send WQE size (its DS units).
    WqeSize(usize),
    /// A message longer than `log_max_msg` allows (its bytes).
    MessageLength(u64),
}

/// Data segments (zero-length SGEs are skipped) and bytes of a gather list.
#[inline]
fn gather_size(sg: &[Sge]) -> (usize, u64) {
    sg.iter().fold((0, 0), |(n, b), s| {
        (n + usize::from(s.length > 0), b + u64::from(s.length))
    })
}

/// The control-segment opcode, send op, DS units before the data and `imm` word of an op that
/// is not an atomic (the shapes `check` takes in a straight line); `None` for the atomics.
#[inline(always)]
fn plain_op(op: &SendOp) -> Option<(u8, SendOps, usize, u32)> {
    Some(match *op {
        SendOp::Send => (opcode::SEND, SendOps::SEND, 1, 0),
        SendOp::SendImm(imm) => (opcode::SEND_IMM, SendOps::SEND_IMM, 1, imm),
        SendOp::SendInv(rkey) => (opcode::SEND_INVAL, SendOps::SEND_INV, 1, rkey),
        SendOp::Write { .. } => (opcode::RDMA_WRITE, SendOps::WRITE, 2, 0),
        SendOp::WriteImm { imm, .. } => (opcode::RDMA_WRITE_IMM, SendOps::WRITE_IMM, 2, imm),
        SendOp::Read { .. } => (opcode::RDMA_READ, SendOps::READ, 2, 0),
        SendOp::CmpSwap { .. } | SendOp::FetchAdd { .. } => return None,
    })
}

impl<P: Platform> Qp<'_, P> {
    /// DS units, WQEBBs and bytes of a send work request, or the error saying why the QP
    /// refuses it.
    #[inline(always)]
    pub(super) fn measure(&self, wr: &SendWr<'_>) -> Result<u128> {
        match self.check(wr) {
            Ok(m) => Ok(m),
            Err(why) => Err(self.refusal(why)),
        }
    }

    /// The send checks: the packed sizes of a request the QP takes, or why it refuses it.
    ///
    /// The common shapes — no atomic, at most one SGE or inline data, not UD — are decided
    /// in a straight line with what the shape makes constant folded; every other request goes
    /// through every check in order ([`Self::check_any`]), and so does a request of a common
    /// shape that fails: `check_any` names the first check that fails.
    #[inline(always)]
    pub(super) fn check(&self, wr: &SendWr<'_>) -> core::result::Result<u128, Refused> {
        if let (Payload::Sges(sg @ ([] | [_])), false) = (wr.payload, self.qp_type.is_datagram()) {
            if let Some((op, op_set, ds, imm)) = plain_op(&wr.op) {
                let (segs, bytes) = gather_size(sg);
                let ds = ds + segs;
                let ok = self.ops.contains(op_set)
                    && sg.len() as u64 <= u64::from(self.cap.max_send_sge)
                    && ds * DS <= self.layout.sq_wqe_bytes as usize
                    && bytes <= self.max_msg;
                if ok {
                    return Ok(pack((ds as u8, 1, bytes as u32), op, imm));
                }
            }
        } else if let (Payload::Inline(data), false) = (wr.payload, self.qp_type.is_datagram()) {
            let plain = plain_op(&wr.op).filter(|_| !matches!(wr.op, SendOp::Read { .. }));
            if let Some((op, op_set, ds, imm)) = plain {
                // `inline_lim` folds the inline, DS, WQE and message limits
                // (`write::inline_limit`).
                let ok = self.ops.contains(op_set)
                    && (data.len() as u64) < u64::from(self.inline_lim[ds - 1]);
                let ds = ds + wqe::inline_ds(data.len());
                let nbb = (ds * DS).div_ceil(WQEBB) as u32;
                if ok {
                    return Ok(pack((ds as u8, nbb, data.len() as u32), op, imm));
                }
            }
        }
        self.check_any(wr)
    }

    /// Every check, in order, for any request (out of line: the post paths keep the common
    /// shapes' straight line small).
    #[inline(never)]
    fn check_any(&self, wr: &SendWr<'_>) -> core::result::Result<u128, Refused> {
        let (op, op_set, imm) = wr.op.parts();
        if !self.ops.contains(op_set) {
            return Err(Refused::Opcode(op_set));
        }
        let atomic = matches!(wr.op, SendOp::CmpSwap { .. } | SendOp::FetchAdd { .. });
        let mut ds = 1usize;
        match wr.op {
            SendOp::Write { .. } | SendOp::WriteImm { .. } | SendOp::Read { .. } => ds += 1,
            SendOp::CmpSwap { .. } | SendOp::FetchAdd { .. } => ds += 2,
            _ => {}
        }
        if self.qp_type.is_datagram() {
            if wr.ud.is_none() {
                return Err(Refused::NoDestination);
            }
            ds += 3;
        }
        let bytes: u64 = match wr.payload {
            Payload::Sges(sg) => {
                if sg.len() as u64 > u64::from(self.cap.max_send_sge) {
                    return Err(Refused::NumSge(sg.len()));
                }
                if atomic && (sg.len() != 1 || sg[0].length != 8) {
                    return Err(Refused::AtomicSge(sg.len()));
                }
                let (segs, bytes) = gather_size(sg);
                ds += segs;
                bytes
            }
            Payload::Inline(data) => {
                if data.len() as u64 > u64::from(self.cap.max_inline_data) {
                    return Err(Refused::InlineLength(data.len()));
                }
                if atomic || matches!(wr.op, SendOp::Read { .. }) {
                    return Err(Refused::InlinePayload);
                }
                ds += wqe::inline_ds(data.len());
                data.len() as u64
            }
        };
        if let SendOp::CmpSwap { remote_addr, .. } | SendOp::FetchAdd { remote_addr, .. } = wr.op {
            if remote_addr % 8 != 0 {
                return Err(Refused::RemoteAddr(remote_addr));
            }
        }
        if ds > MAX_DS || ds * DS > self.layout.sq_wqe_bytes as usize {
            return Err(Refused::WqeSize(ds));
        }
        if bytes > self.max_msg {
            return Err(Refused::MessageLength(bytes));
        }
        Ok(pack(
            (ds as u8, (ds * DS).div_ceil(WQEBB) as u32, bytes as u32),
            op,
            imm,
        ))
    }

    /// The error of a refused send work request (out of line: the post paths keep only their
    /// common case in registers).
    #[cold]
    #[inline(never)]
    pub(super) fn refusal(&self, why: Refused) -> Error {
        let r = |field, requested, max, limit| refuse("post_send", field, requested, max, limit);
        match why {
            Refused::Opcode(op_set) => r(
                "opcode",
                u64::from(op_set.bits()),
                u64::from(self.ops.bits()),
                "the send ops the QP was created with",
            ),
            Refused::NoDestination => r("ud", 0, 0, "a UD send needs a destination (SendWr::ud)"),
            Refused::NumSge(n) => r(
                "num_sge",
                n as u64,
                u64::from(self.cap.max_send_sge),
                "max_send_sge of the QP",
            ),
            Refused::AtomicSge(n) => r(
                "sg_list",
                n as u64,
                1,
                "atomics return 8 bytes into exactly one 8-byte SGE",
            ),
            Refused::InlineLength(n) => r(
                "inline length",
                n as u64,
                u64::from(self.cap.max_inline_data),
                "max_inline_data of the QP",
            ),
            Refused::InlinePayload => r("payload", 0, 0, "READ and atomics cannot be inline"),
            Refused::RemoteAddr(a) => r(
                "remote_addr",
                a,
                0,
                "atomics need an 8-byte aligned address",
            ),
            Refused::WqeSize(ds) => r(
                "WQE size (DS)",
                ds as u64,
                (self.layout.sq_wqe_bytes as usize / DS).min(MAX_DS) as u64,
                "the QP's send WQE size",
            ),
            Refused::MessageLength(bytes) => {
                r("message length", bytes, self.max_msg, "log_max_msg")
            }
        }
    }
}
