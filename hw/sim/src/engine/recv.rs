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

/// Whether BTH P_Key `pkey` matches the QP's: every QP has P_Key index 0 (a RoCE port's
/// only entry, the default P_Key 0xffff; other indices are refused at modify). IBTA's rule: the
/// low 15 bits equal, and at least one of the two a full member (bit 15).
pub(crate) fn pkey_member(pkey: u16) -> bool {
    let own = mlx5_ifc::consts::roce::DEFAULT_PKEY;
    (pkey & 0x7fff) == (own & 0x7fff) && (pkey | own) & 0x8000 != 0
}

#[cfg(test)]
mod tests {
    use super::pkey_member;

    #[test]
    fn p_key_membership_follows_ibta() {
        // The QP's P_Key is the default, 0xffff (full member).
        assert!(pkey_member(0xffff));
        // A limited member of the same partition talks to a full member.
        assert!(pkey_member(0x7fff));
        // Another partition, full or limited; the invalid P_Key.
        for other in [0x8001, 0x0001, 0x1234, 0x7ffe, 0x0000, 0x8000] {
            assert!(!pkey_member(other), "{other:#06x}");
        }
    }
}
