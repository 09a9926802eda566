//! What every receive path shares: dropping a frame (counted), and a receive error reported
//! by an error CQE, after which the QP is in ERR.

use super::wqe::LocalError;
use crate::events::cqe::{self, op as cqe_op, syndrome as syn, Cqe};
use crate::fabric::frame::aeth;
use crate::model::qp_info::QpInfo;
use crate::model::Hw;

/// Drops a received frame, counted in `rx_dropped`.
pub(crate) fn drop_frame(hw: &mut Hw<'_>, why: &str) {
    log::debug!("mlx5-sim: frame dropped: {why}");
    hw.model.rt.counters.rx_dropped += 1;
}

/// A receive error on WQE `wqe_counter` of QP `info`: a RESP_ERR CQE on its receive CQ, the QP
/// to ERR. Returns the NAK code a reliable responder answers with.
pub(crate) fn error(hw: &mut Hw<'_>, info: &QpInfo, wqe_counter: u16, e: LocalError) -> u8 {
    let (s, nak) = match e {
        LocalError::Length => (syn::LOCAL_LENGTH_ERR, aeth::NAK_INVALID_REQ),
        // A page fault reaching here is one that may not wait (UD, UC) or that failed.
        LocalError::Protection | LocalError::PageFault => {
            (syn::LOCAL_PROT_ERR, aeth::NAK_REMOTE_OP)
        }
        LocalError::Dma => (syn::LOCAL_PROT_ERR, aeth::NAK_REMOTE_OP),
    };
    let c = Cqe {
        opcode: cqe_op::RESP_ERR,
        qpn: info.qpn,
        wqe_counter,
        srqn_uidx: cqe::srqn_uidx(hw, info.user_index, info.srq.map(|s| s.1)),
        syndrome: s,
        vendor: if e == LocalError::Dma {
            cqe::VENDOR_DMA
        } else {
            0
        },
        ..Cqe::default()
    };
    cqe::post(hw, info.cqn_rcv, &c);
    crate::events::flush::enter_error(hw, info.qpn, None);
    nak
}
