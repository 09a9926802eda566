//! What a responder answers a request with ([`Verdict`]) and its acknowledgements: ACK, NAK
//! and RNR NAK packets, owed ACKs coalesced until the device has taken in every frame due for
//! it ([`owed_acks`]) — shared by [`super::responder`] and [`super::remote`].

use mlx5_ifc::consts::qp_state;
use mlx5_ifc::event;

use crate::fabric::frame::{aeth, op, Packet};
use crate::model::qp::qp_rt;
use crate::model::qp_info::QpInfo;
use crate::model::Hw;

/// What to answer a request packet with.
pub(super) enum Verdict {
    /// Accepted: the PSN advances by `psns`; acknowledge it when `ack`.
    Done { psns: u32, ack: bool },
    /// No receive WQE.
    Rnr,
    /// NAK with this code; the QP goes to ERR with `event` (if any) — already done for errors
    /// reported by a CQE.
    Nak(u8, Option<u8>),
    /// Dropped silently.
    Drop,
}

pub(super) fn invalid(reliable: bool) -> Verdict {
    if reliable {
        Verdict::Nak(aeth::NAK_INVALID_REQ, Some(event::WQ_INVAL_REQ_ERROR))
    } else {
        Verdict::Drop
    }
}

pub(super) fn access_error(reliable: bool) -> Verdict {
    if reliable {
        Verdict::Nak(aeth::NAK_REMOTE_ACCESS, Some(event::WQ_ACCESS_ERROR))
    } else {
        Verdict::Drop
    }
}

/// Sends an ACK / NAK / RNR NAK for `psn` with AETH `syndrome` — after the ACK the QP owes,
/// so that acknowledgements leave in PSN order.
pub(super) fn send_aeth(hw: &mut Hw<'_>, info: &QpInfo, psn: u32, syndrome: u8) {
    flush_ack(hw, info);
    let msn = qp_rt(&mut hw.model.rt, info).msn;
    put_aeth(hw, info, psn, syndrome, msn);
}

/// Puts an AETH packet on the wire now.
fn put_aeth(hw: &mut Hw<'_>, info: &QpInfo, psn: u32, syndrome: u8, msn: u32) {
    let p = Packet {
        opcode: info.service() | op::ACK,
        dqpn: info.remote_qpn,
        psn,
        aeth: Some((syndrome, msn)),
        ..Packet::default()
    };
    let c = &mut hw.model.rt.counters;
    match syndrome & 0xe0 {
        aeth::ACK => c.acks_sent += 1,
        aeth::RNR => c.rnr_naks_sent += 1,
        _ => c.naks_sent += 1,
    }
    hw.model.rt.send(&info.route, &p);
}

/// Owes an ACK of `psn` (and of everything before it): it leaves when the device has taken in
/// every frame the wire holds for it ([`owed_acks`]) or before any other response of the QP,
/// so a burst of requests gets one coalesced ACK — as a ConnectX responder coalesces them.
pub(super) fn owe_ack(hw: &mut Hw<'_>, info: &QpInfo, psn: u32) {
    if info.dct {
        // A DCT connection is no QP the idle pass could find again: its ACK leaves now.
        let msn = qp_rt(&mut hw.model.rt, info).msn;
        return put_aeth(hw, info, psn, aeth::ACK | aeth::NO_CREDITS, msn);
    }
    let rt = qp_rt(&mut hw.model.rt, info);
    let first = rt.ack_owed.is_none();
    rt.ack_owed = Some((psn, rt.msn));
    if first {
        hw.model.rt.acks_owed.push(info.qpn);
    }
}

/// Sends the ACK QP `info` owes, if any.
pub(crate) fn flush_ack(hw: &mut Hw<'_>, info: &QpInfo) {
    if let Some((psn, msn)) = hw
        .model
        .rt
        .qps
        .get_mut(&info.rt_key)
        .and_then(|rt| rt.ack_owed.take())
    {
        put_aeth(hw, info, psn, aeth::ACK | aeth::NO_CREDITS, msn);
    }
}

/// The device has taken in every frame due for it: every ACK owed leaves (a QP that left the
/// receiving states since sends none).
pub(crate) fn owed_acks(hw: &mut Hw<'_>) {
    let mut owed = std::mem::take(&mut hw.model.rt.acks_owed);
    for &qpn in &owed {
        let Some(info) = QpInfo::load(hw.model, qpn) else {
            continue;
        };
        if matches!(info.state, qp_state::RTR | qp_state::RTS | qp_state::SQD) {
            flush_ack(hw, &info);
        } else if let Some(rt) = hw.model.rt.qps.get_mut(&qpn) {
            rt.ack_owed = None;
        }
    }
    // The list goes back empty, its capacity kept (nothing owed an ACK meanwhile: sending one
    // owes none).
    owed.clear();
    if hw.model.rt.acks_owed.is_empty() {
        hw.model.rt.acks_owed = owed;
    }
}

/// Sends the ACKs the force-loopback QPs owe (path `fl`): their requester is in this device,
/// so nothing more is coming for them in this pass — waiting for the wire to go idle would
/// only delay their completions.
pub(crate) fn owed_looped_acks(hw: &mut Hw<'_>) {
    let owed = std::mem::take(&mut hw.model.rt.acks_owed);
    let mut kept = Vec::with_capacity(owed.len());
    for qpn in owed {
        match QpInfo::load(hw.model, qpn) {
            Some(info) if info.route.loopback => {
                if matches!(info.state, qp_state::RTR | qp_state::RTS | qp_state::SQD) {
                    flush_ack(hw, &info);
                } else if let Some(rt) = hw.model.rt.qps.get_mut(&qpn) {
                    rt.ack_owed = None;
                }
            }
            _ => kept.push(qpn),
        }
    }
    // Flushing owes nothing new; anything owed meanwhile is kept too.
    kept.append(&mut hw.model.rt.acks_owed);
    hw.model.rt.acks_owed = kept;
}
