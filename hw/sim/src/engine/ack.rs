//! RC acknowledgements on the requester side: ACK / NAK / RNR NAK, READ responses and atomic
//! ACKs, the ack timer and the RNR wait ([`super::timer`]), retransmission (see [`super::requester`] for the
//! behaviour).

use mlx5_ifc::consts::{odp, qp_state};

use super::dma;
use super::psn::psn_add;
use super::psn::psn_diff;
use super::requester::{complete_ready, local_syndrome, may_fault, resend};
use super::timer::{arm_timer, rnr_timer_ns};
use super::wqe::LocalError;
use crate::events::cqe::syndrome as syn;
use crate::events::flush::enter_error;
use crate::events::page_fault;
use crate::fabric::frame::{op, Packet};
use crate::model::qp::qp_rt;
use crate::model::qp_info::QpInfo;
use crate::model::Hw;
use crate::small::SmallList;

/// Marks done every request an acknowledgement of `psn` covers; whether any was.
fn ack_through(hw: &mut Hw<'_>, qpn: u32, psn: u32) -> bool {
    let Some(rt) = hw.model.rt.qps.get_mut(&qpn) else {
        return false;
    };
    let mut progress = false;
    for r in rt.outstanding.iter_mut() {
        if r.done {
            continue;
        }
        if psn_diff(r.last_psn, psn) > 0 || r.needs_response {
            break;
        }
        r.done = true;
        progress = true;
    }
    if progress {
        rt.retries = 0;
        rt.rnr_retries = 0;
    }
    progress
}

/// Sends again every unfinished request from `psn` on, in order (each read from the send queue
/// again: [`super::requester::resend`]).
fn retransmit_from(hw: &mut Hw<'_>, info: &QpInfo, psn: u32) {
    let Some(rt) = hw.model.rt.qps.get_mut(&info.qpn) else {
        return;
    };
    let mut again: SmallList<(u16, u32), 8> = SmallList::new();
    for r in rt.outstanding.iter_mut().filter(|r| !r.done) {
        if psn_diff(r.last_psn, psn) < 0 {
            continue;
        }
        if r.needs_response {
            r.got_pkts = 0;
            r.got_bytes = 0;
        }
        again.push((r.wqe_counter, r.first_psn));
    }
    for &(cc, first) in again.iter() {
        let n = resend(hw, info, cc, first, psn);
        hw.model.rt.counters.retransmits += n;
        if crate::model::qp::qp_state_of(hw.model, info.qpn) == Some(qp_state::ERR) {
            return;
        }
    }
}

/// The WQE counter and opcode of the unfinished request holding `psn` (else the oldest).
fn request_at(hw: &Hw<'_>, qpn: u32, psn: u32) -> Option<(u16, u8)> {
    let rt = hw.model.rt.qps.get(&qpn)?;
    let pending = || rt.outstanding.iter().filter(|r| !r.done);
    pending()
        .find(|r| psn_diff(psn, r.first_psn) >= 0 && psn_diff(r.last_psn, psn) >= 0)
        .or_else(|| pending().next())
        .map(|r| (r.wqe_counter, r.opcode))
}

/// Fails the request holding `psn` with `syndrome`; the QP goes to ERR.
fn fail_at(hw: &mut Hw<'_>, info: &QpInfo, psn: u32, syndrome: u8) {
    complete_ready(hw, info);
    let failing = request_at(hw, info.qpn, psn).map(|(c, o)| (c, o, syndrome, 0));
    enter_error(hw, info.qpn, failing);
}

/// An ACK / NAK / RNR NAK (AETH `syndrome`) for `psn`.
fn on_aeth(hw: &mut Hw<'_>, info: &QpInfo, psn: u32, syndrome: u8) {
    let prev = psn_add(psn, 0xff_ffff);
    match syndrome >> 5 {
        0 => {
            ack_through(hw, info.qpn, psn);
        }
        1 => {
            ack_through(hw, info.qpn, prev);
            complete_ready(hw, info);
            let rt = qp_rt(&mut hw.model.rt, info);
            if info.rnr_retry != 7 && rt.rnr_retries >= info.rnr_retry {
                fail_at(hw, info, psn, syn::RNR_RETRY_EXC_ERR);
                return;
            }
            rt.rnr_retries = rt.rnr_retries.saturating_add(1);
            rt.resend_at = Some(hw.now + rnr_timer_ns(syndrome));
            rt.resend_psn = psn;
            rt.timer = None;
            hw.model.rt.note_timers(info.rt_key);
            return;
        }
        3 => {
            ack_through(hw, info.qpn, prev);
            let s = match syndrome & 0x1f {
                0 => {
                    // A PSN sequence error: retransmit from `psn`. Like an ack timeout, it uses
                    // up one of `retry_count` retries (IBA: the retry count is for timeouts and
                    // sequence-error NAKs; Linux's rxe counts both), so two QPs that disagree on
                    // PSNs cannot NAK and retransmit to each other forever.
                    complete_ready(hw, info);
                    let rt = qp_rt(&mut hw.model.rt, info);
                    if rt.retries >= info.retry_count {
                        fail_at(hw, info, psn, syn::TRANSPORT_RETRY_EXC_ERR);
                        return;
                    }
                    rt.retries += 1;
                    retransmit_from(hw, info, psn);
                    arm_timer(hw, info);
                    return;
                }
                1 => syn::REMOTE_INVAL_REQ_ERR,
                2 => syn::REMOTE_ACCESS_ERR,
                _ => syn::REMOTE_OP_ERR,
            };
            fail_at(hw, info, psn, s);
            return;
        }
        _ => {}
    }
    complete_ready(hw, info);
}

/// A response packet (ACK, READ response, atomic ACK) for RC QP `info`.
pub(crate) fn on_response(hw: &mut Hw<'_>, info: &QpInfo, p: &Packet) {
    if !matches!(info.state, qp_state::RTS | qp_state::SQD) {
        hw.model.rt.counters.rx_dropped += 1;
        return;
    }
    let o = p.opcode & 0x1f;
    if o == op::ACK {
        let (s, _) = p.aeth.unwrap_or_default();
        on_aeth(hw, info, p.psn, s);
        return;
    }
    // A READ response or atomic ACK: it acknowledges every earlier request.
    let Some(rt) = hw.model.rt.qps.get_mut(&info.qpn) else {
        return;
    };
    let idx = rt.outstanding.iter().position(|r| {
        !r.done
            && r.needs_response
            && psn_diff(p.psn, r.first_psn) >= 0
            && psn_diff(r.last_psn, p.psn) >= 0
    });
    let Some(idx) = idx else {
        hw.model.rt.counters.rx_dropped += 1;
        return;
    };
    if rt
        .outstanding
        .iter()
        .take(idx)
        .any(|r| !r.done && r.needs_response)
    {
        hw.model.rt.counters.rx_dropped += 1;
        return;
    }
    for r in rt.outstanding.iter_mut().take(idx) {
        r.done = true;
    }
    let r = &rt.outstanding[idx];
    let (first, local, got, total) = (r.first_psn, r.local.clone(), r.got_bytes, r.byte_count);
    let (wqe_counter, opcode) = (r.wqe_counter, r.opcode);
    let atomic;
    let data: &[u8] = match (o, p.atomic_ack) {
        (op::ATOMIC_ACK, Some(v)) if p.psn == first => {
            atomic = atomic_result(hw.model, v);
            &atomic
        }
        (op::READ_RESP_FIRST..=op::READ_RESP_ONLY, _) if p.psn == psn_add(first, r.got_pkts) => {
            p.payload
        }
        _ => {
            hw.model.rt.counters.rx_dropped += 1;
            return;
        }
    };
    if u64::from(got) + data.len() as u64 > u64::from(total) {
        enter_error(
            hw,
            info.qpn,
            Some((wqe_counter, opcode, syn::BAD_RESP_ERR, 0)),
        );
        return;
    }
    if let Err(e) = dma::scatter(hw, info.pd, &local, u64::from(got), data) {
        if e == LocalError::PageFault && may_fault(hw, info, opcode) {
            // The READ's (atomic's) buffer lost a page since the request went out: a WQE fault;
            // the response is dropped, and the request goes again after the resume.
            if qp_rt(&mut hw.model.rt, info).sq_fault.is_none() {
                let f = page_fault::wqe_fault(
                    hw,
                    odp::WQE_REQ_READ_OR_ATOMIC,
                    info.qpn,
                    wqe_counter,
                    0,
                );
                qp_rt(&mut hw.model.rt, info).sq_fault = Some(f);
            }
            hw.model.rt.counters.rx_dropped += 1;
            return;
        }
        let (s, vendor) = local_syndrome(e);
        enter_error(hw, info.qpn, Some((wqe_counter, opcode, s, vendor)));
        return;
    }
    if let Some(r) = hw
        .model
        .rt
        .qps
        .get_mut(&info.qpn)
        .and_then(|rt| rt.outstanding.get_mut(idx))
    {
        r.got_pkts += 1;
        r.got_bytes += data.len() as u32;
        r.done = matches!(o, op::ATOMIC_ACK | op::READ_RESP_LAST | op::READ_RESP_ONLY);
    }
    if let Some(rt) = hw.model.rt.qps.get_mut(&info.qpn) {
        rt.retries = 0;
    }
    complete_ready(hw, info);
}

/// The ack timer or the RNR wait of QP `qpn` expired.
pub(crate) fn on_timer(hw: &mut Hw<'_>, qpn: u32) {
    let Some(info) = QpInfo::load(hw.model, qpn) else {
        return;
    };
    let now = hw.now;
    let rt = qp_rt(&mut hw.model.rt, &info);
    if rt.resend_at.is_some_and(|t| t <= now) {
        rt.resend_at = None;
        let psn = rt.resend_psn;
        retransmit_from(hw, &info, psn);
        arm_timer(hw, &info);
        return;
    }
    if rt.timer.is_none_or(|t| t > now) {
        return;
    }
    rt.timer = None;
    let Some(oldest) = rt.outstanding.iter().find(|r| !r.done).map(|r| r.first_psn) else {
        return;
    };
    if rt.retries >= info.retry_count && info.armed {
        // Automatic path migration: the alternate path takes over, the retries start again,
        // the driver hears of it (PATH_MIG).
        log::info!("mlx5-sim: QP {qpn:#x}: retries out on the primary path; migrated");
        rt.retries = 0;
        crate::model::qp::migrate(hw.model, qpn);
        crate::events::eqe::qp_event(hw, mlx5_ifc::event::PATH_MIG, qpn);
        let Some(info) = QpInfo::load(hw.model, qpn) else {
            return;
        };
        retransmit_from(hw, &info, oldest);
        arm_timer(hw, &info);
        return;
    }
    if rt.retries >= info.retry_count {
        log::info!("mlx5-sim: QP {qpn:#x}: retry count exceeded");
        fail_at(hw, &info, oldest, syn::TRANSPORT_RETRY_EXC_ERR);
        return;
    }
    rt.retries += 1;
    retransmit_from(hw, &info, oldest);
    arm_timer(hw, &info);
}

/// The bytes an 8-byte atomic's original value lands as in the requester's memory: big-endian
/// in requester endianness mode 0, in the host's order (HOST_ENDIANNESS) in mode 1
/// (`atomic_caps.atomic_req_8B_endianness_mode`).
fn atomic_result(model: &crate::model::Model, v: u64) -> [u8; 8] {
    use mlx5_ifc::consts::atomic_caps::REQ_ENDIANNESS_HOST;
    use mlx5_ifc::prm::caps::AtomicCaps;
    let host = model.cur_atomic(AtomicCaps::ATOMIC_REQ_8B_ENDIANNESS_MODE) == REQ_ENDIANNESS_HOST;
    if host && !model.vport.host_big_endian() {
        v.to_le_bytes()
    } else {
        v.to_be_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::timer::ack_timeout_ns;

    #[test]
    fn timers() {
        assert_eq!(rnr_timer_ns(12), 640_000);
        assert_eq!(rnr_timer_ns(0), 655_360_000);
        assert_eq!(ack_timeout_ns(0), None);
        assert_eq!(ack_timeout_ns(1), Some(8192));
    }
}
