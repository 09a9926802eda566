//! The data path (the WQE engine): doorbells and BlueFlame, WQE execution, the RoCE v2
//! transports (RC, UC, UD) as requester and responder, Ethernet send and receive.
//!
//! Floors: the engine works on the model ([`crate::model`]: objects, keys, the runtime of each
//! object), host memory ([`crate::memory`]) and the events ([`crate::events`]: CQEs, EQEs,
//! arming, a QP entering ERR); it never imports the command handlers ([`crate::fw`]), which sit
//! beside it. A doorbell comes here from the device ([`crate::device`]) and goes down from here.
//! A new verb is code here and, if it needs state, a field in the model's runtime.
//!
//! * [`doorbell`]: UAR writes decoded against the model (EQ and CQ arming, send doorbells,
//!   BlueFlame words); [`uar_write`] acts on them;
//! * [`wqe`]: send WQE parsing, receive WQEs (RQ ring, SRQ/RMP linked list); [`dma`]: gather and
//!   scatter through memory keys; [`umr`]: UMR WQEs;
//! * [`requester`]: executing the send queue; [`ack`]: ACK/NAK processing, retransmission and
//!   the retry and RNR counts; [`timer`]: the ack timeout and RNR wait; [`psn`]: PSN arithmetic;
//! * [`responder`]: inbound requests: receive WQE consumption, RDMA WRITE / READ / atomics
//!   with rkey checks ([`remote`]: READ responses and atomics; [`verdict`]: ACK / NAK / RNR
//!   NAK generation); [`odp`]: its page faults; [`ud`]:
//!   datagrams and multicast;
//!   [`recv`]: dropped frames and receive errors, which both share;
//! * [`eth`], [`eth_rx`], [`steering`]: Ethernet send queues, receive, flow tables and RSS.
//!
//! Everything here runs under the device lock with a [`Hw`]: the model, the IOMMU, the DMA
//! fault record and the device time. Frames to transmit are queued in the model's runtime
//! (`tx`); the device hands them to its fabric once the lock is released.

pub(crate) mod ack;
pub(crate) mod dci;
pub(crate) mod dct;
pub(crate) mod dma;
pub(crate) mod doorbell;
pub(crate) mod eth;
pub(crate) mod eth_mpw;
pub(crate) mod eth_rx;
pub(crate) mod masked_atomic;
pub(crate) mod mod_hdr;
pub(crate) mod odp;
pub(crate) mod psn;
pub(crate) mod recv;
pub(crate) mod remote;
pub(crate) mod requester;
pub(crate) mod responder;
pub(crate) mod ste;
pub(crate) mod ste_action;
pub(crate) mod ste_key;
#[cfg(test)]
mod ste_tests;
pub(crate) mod steering;
pub(crate) mod timer;
pub(crate) mod ud;
pub(crate) mod umr;
pub(crate) mod verdict;
pub(crate) mod wqe;

use doorbell::UarAction;

use crate::events::cqe;
use crate::fabric::frame;
use crate::fault::{DmaFault, DmaFaultKind};
use crate::memory::queue::read_queue;
use crate::model::qp_info::QpInfo;
use crate::model::runtime::{BfCopy, BF_HALF_MAX};
use crate::model::Hw;

/// Services the timers of every QP that are due at `hw.now`.
pub(crate) fn tick(hw: &mut Hw<'_>) {
    // Only the QPs with a timer running are looked at.
    let rt = &mut hw.model.rt;
    let timed: Vec<u32> = rt.timed.iter().copied().collect();
    let due: Vec<u32> = timed
        .iter()
        .copied()
        .filter(|k| {
            rt.qps.get(k).is_some_and(|q| {
                q.timer.is_some_and(|t| t <= hw.now) || q.resend_at.is_some_and(|t| t <= hw.now)
            })
        })
        .collect();
    for qpn in due {
        ack::on_timer(hw, qpn);
        hw.model.rt.note_timers(qpn);
    }
    // Send queues resumed after a page fault run again.
    let rt = &mut hw.model.rt;
    let mut resumed = Vec::new();
    for k in timed {
        if let Some(q) = rt
            .qps
            .get_mut(&k)
            .filter(|q| q.resume_at.is_some_and(|t| t <= hw.now))
        {
            q.resume_at = None;
            resumed.push(k);
        }
        rt.note_timers(k);
    }
    for qpn in resumed {
        requester::doorbell(hw, qpn);
    }
    eth::paced_due(hw);
    eth_rx::held_due(hw);
}

pub(crate) use crate::work::Rung;

/// Executes the send queue a doorbell rang.
pub(crate) fn ring(hw: &mut Hw<'_>, rung: Rung) {
    match rung {
        Rung::Qp(qpn) => requester::doorbell(hw, qpn),
        Rung::EthSq { sqn, wqe } => eth::doorbell(hw, sqn, wqe),
    }
}

/// A write to a UAR page: EQ and CQ doorbells ([`doorbell`]), send doorbells and
/// BlueFlame words. Returns the send queue the device must now execute — not executed here,
/// so that the caller keeps the order in which doorbells came ([`ring`]).
pub(crate) fn uar_write(hw: &mut Hw<'_>, off: u64, value: u64, width: u8) -> Option<Rung> {
    match doorbell::uar_write(hw.model, off, value, width, hw.faults) {
        UarAction::None => None,
        UarAction::CqArmed { cqn, ci } => {
            cqe::arm_check(hw, cqn, ci);
            None
        }
        UarAction::Send { qpn, wqe, half } => {
            // The control segment's DS (byte 7, low 6 bits): how much of what follows the
            // device reads as the WQE.
            let ds = value.to_be_bytes()[7] & 0x3f;
            let copy = bf_copy(hw, qpn, wqe, ds);
            hw.model.rt.bf.insert(half, copy);
            blueflame(hw, off, half, 0, value);
            Some(Rung::Qp(qpn))
        }
        UarAction::BlueFlame { half, at } => {
            blueflame(hw, off, half, at, value);
            None
        }
        UarAction::EqArmed { eqn, ci } => {
            crate::events::eqe::eq_arm_check(hw, eqn, ci);
            None
        }
        UarAction::EthSend { sqn, wqe } => Some(Rung::EthSq { sqn, wqe }),
    }
}

/// Reads the WQE `wqe` of QP `qpn` from its send queue (one WQEBB at a time: the ring may
/// wrap), `ds` units of 16 bytes.
fn bf_copy(hw: &mut Hw<'_>, qpn: u32, wqe: u16, ds: u8) -> BfCopy {
    let mut copy = BfCopy {
        qpn,
        wqe,
        len: 0,
        bytes: [0; BF_HALF_MAX],
    };
    let Some(info) = QpInfo::load(hw.model, qpn) else {
        return copy;
    };
    if info.sq_wqebbs == 0 {
        return copy;
    }
    let want = (usize::from(ds) * 16).min(BF_HALF_MAX);
    for (i, block) in copy.bytes[..want].chunks_mut(64).enumerate() {
        let slot = (u64::from(wqe) + i as u64) & u64::from(info.sq_wqebbs - 1);
        let at = info.start + info.sq_offset + slot * 64;
        if read_queue(hw.iommu, &info.pas, info.page, at, block).is_err() {
            break;
        }
        copy.len += block.len();
    }
    copy
}
/// Compares the doorbell or BlueFlame word `value` at byte `at` of the half at `half` with the
/// WQE its doorbell named ([`BfCopy`]); a difference is a [`DmaFaultKind::BlueFlameMismatch`].
fn blueflame(hw: &mut Hw<'_>, off: u64, half: u64, at: u64, value: u64) {
    let Some(copy) = hw.model.rt.bf.get(&half) else {
        hw.faults.push(DmaFault {
            iova: off,
            len: 8,
            kind: DmaFaultKind::BlueFlameMismatch,
            what: format!("BlueFlame word at {off:#x} without a doorbell"),
        });
        return;
    };
    let Some(ring) = usize::try_from(at)
        .ok()
        .and_then(|at| copy.bytes[..copy.len].get(at..at + 8))
    else {
        return;
    };
    if ring != value.to_be_bytes() {
        let (qpn, wqe) = (copy.qpn, copy.wqe);
        let held = u64::from_be_bytes(ring.try_into().unwrap_or_default());
        log::warn!("mlx5-sim: QP {qpn:#x} WQE {wqe}: BlueFlame byte {at} differs from the ring");
        hw.faults.push(DmaFault {
            iova: off,
            len: 8,
            kind: DmaFaultKind::BlueFlameMismatch,
            what: format!(
                "QP {qpn:#x} WQE {wqe}: BlueFlame word at byte {at} is {value:#018x}, the send queue holds {held:#018x}"
            ),
        });
    }
}

/// The port receives the multicast it sent, as a device loops its multicast back: each RoCE
/// group's QPs on this port get a copy ([`ud::multicast`]); an Ethernet multicast or broadcast
/// frame — and an Ethernet frame to the port's own MAC, which never reaches the wire — goes
/// through the receive flow tables, past the TIRs of the sender's transport domain that block
/// self-loopback of its kind ([`eth_rx::looped_back`]).
pub(crate) fn loop_back(hw: &mut Hw<'_>) {
    force_loopback(hw);
    let frames = std::mem::take(&mut hw.model.rt.looped);
    for f in &frames {
        if let Ok(rx) = frame::decode(f) {
            ud::multicast(hw, &rx, true);
        }
    }
    let frames = std::mem::take(&mut hw.model.rt.eth_looped);
    for (f, td) in &frames {
        hw.model.rt.counters.rx_frames += 1;
        eth_rx::looped_back(hw, f, *td);
    }
}

/// The most force-loopback frames one pass of the data path takes in (a bound on what a
/// misbehaving pair of QPs could make it do; the rest wait for the next pass).
const FL_FRAMES_PER_PASS: usize = 1 << 20;

/// Force-loopback RC QPs (path `fl`): their requests, responses and ACKs go straight to the
/// function's own receive side, until none is left — the requester's completions are written
/// before the pass ends (a DR send ring waits for them at the doorbell). The ACKs such a QP
/// owes leave as soon as its frames are in.
fn force_loopback(hw: &mut Hw<'_>) {
    let mut budget = FL_FRAMES_PER_PASS;
    loop {
        if hw.model.rt.fl_looped.is_empty() {
            verdict::owed_looped_acks(hw);
        }
        let frames = std::mem::take(&mut hw.model.rt.fl_looped);
        if frames.is_empty() || budget == 0 {
            hw.model.rt.fl_looped = frames;
            return;
        }
        for f in frames {
            budget = budget.saturating_sub(1);
            match frame::decode(&f) {
                Ok(rx) => responder::dispatch_looped(hw, rx),
                Err(e) => log::warn!("mlx5-sim: a force-loopback frame did not decode: {e:?}"),
            }
            crate::fabric::pool::give(f);
        }
    }
}

/// Handles a frame received from the wire.
pub(crate) fn receive(hw: &mut Hw<'_>, bytes: &[u8]) {
    hw.model.rt.counters.rx_frames += 1;
    if !crate::fabric::packet::is_roce(bytes) {
        eth_rx::receive(hw, bytes);
        return;
    }
    // RoCE is received on the function's own MACs (or a group address): a switch floods
    // unicast it has not learned to every port, and the others' frames are not ours.
    if bytes.len() >= 6 && bytes[0] & 1 == 0 && !hw.model.vport.owns(&bytes[..6]) {
        hw.model.rt.counters.rx_not_ours += 1;
        return;
    }
    match frame::decode(bytes) {
        Ok(rx) => responder::dispatch(hw, rx),
        Err(frame::Refused::Icrc) => {
            log::info!("mlx5-sim: frame with a bad ICRC dropped");
            hw.model.rt.counters.rx_icrc_errors += 1;
        }
        Err(frame::Refused::Malformed) => {
            log::info!("mlx5-sim: malformed frame dropped");
            hw.model.rt.counters.rx_malformed += 1;
        }
    }
}
