//! Moving a QP to ERR: the error CQE of the failing WQE and WR_FLUSH_ERR for every other
//! outstanding or posted WQE, send and receive, in order. Called by the data path (a WQE or a
//! packet that fails) and by the command handlers (2ERR_QP) alike.

use mlx5_ifc::consts::qp_state;
use mlx5_ifc::wqe::CtrlSeg;
use mlx5_ifc::View;

use crate::events::cqe::{self, op as cqe_op, syndrome as syn, Cqe};
use crate::fabric::pool;
use crate::memory::queue::{dma_fault, read_be32, read_queue};
use crate::model::qp::qp_rt;
use crate::model::qp::set_qp_state;
use crate::model::qp_info::QpInfo;
use crate::model::runtime::RecvCtx;
use crate::model::runtime::SendReq;
use crate::model::Hw;

/// A flush CQE for WQE `cc` (requester) of `info`.
pub(crate) fn flush_wqe(hw: &mut Hw<'_>, info: &QpInfo, cc: u16, opcode: u8) {
    hw.model.rt.counters.wqes_flushed += 1;
    let c = Cqe {
        opcode: cqe_op::REQ_ERR,
        wqe_opcode: opcode,
        qpn: info.qpn,
        wqe_counter: cc,
        srqn_uidx: cqe::srqn_uidx(hw, info.user_index, None),
        syndrome: syn::WR_FLUSH_ERR,
        ..Cqe::default()
    };
    cqe::post(hw, info.cqn_snd, &c);
}

/// Moves QP `qpn` to ERR. `failing` — `(WQE counter, opcode, syndrome, vendor error)` — gets an
/// error CQE in its place; every other outstanding WQE, every WQE still in the SQ and every
/// posted RQ WQE completes with WR_FLUSH_ERR, in order.
pub(crate) fn enter_error(hw: &mut Hw<'_>, qpn: u32, failing: Option<(u16, u8, u8, u8)>) {
    let Some(info) = QpInfo::load(hw.model, qpn) else {
        return;
    };
    set_qp_state(hw.model, qpn, qp_state::ERR);
    let rt = qp_rt(&mut hw.model.rt, &info);
    let outstanding: Vec<SendReq> = rt.outstanding.drain(..).collect();
    let recv = rt.recv.take();
    (rt.timer, rt.resend_at, rt.write) = (None, None, None);
    hw.model.rt.note_timers(info.rt_key);
    let mut posted = false;
    for r in &outstanding {
        match failing {
            Some((cc, opcode, s, vendor)) if cc == r.wqe_counter && !posted => {
                posted = true;
                error_cqe(hw, &info, cc, opcode, s, vendor);
            }
            _ => flush_wqe(hw, &info, r.wqe_counter, r.opcode),
        }
    }
    if let (Some((cc, opcode, s, vendor)), false) = (failing, posted) {
        error_cqe(hw, &info, cc, opcode, s, vendor);
    }
    if info.sq_wqebbs > 0 {
        flush_send_queue(hw, &info);
    }
    flush_receives(hw, &info, recv);
}

fn error_cqe(hw: &mut Hw<'_>, info: &QpInfo, cc: u16, opcode: u8, s: u8, vendor: u8) {
    let c = Cqe {
        opcode: cqe_op::REQ_ERR,
        wqe_opcode: opcode,
        qpn: info.qpn,
        wqe_counter: cc,
        srqn_uidx: cqe::srqn_uidx(hw, info.user_index, None),
        syndrome: s,
        vendor,
        ..Cqe::default()
    };
    cqe::post(hw, info.cqn_snd, &c);
}

/// Flushes the receive side of a QP entering ERR: the WQE of a message in progress, then every
/// posted RQ WQE (an SRQ's WQEs stay for its other QPs).
pub(crate) fn flush_receives(hw: &mut Hw<'_>, info: &QpInfo, recv: Option<RecvCtx>) {
    let flush = |hw: &mut Hw<'_>, wqe_counter: u16| {
        hw.model.rt.counters.wqes_flushed += 1;
        let c = Cqe {
            opcode: cqe_op::RESP_ERR,
            qpn: info.qpn,
            wqe_counter,
            srqn_uidx: cqe::srqn_uidx(hw, info.user_index, info.srq.map(|s| s.1)),
            syndrome: syn::WR_FLUSH_ERR,
            ..Cqe::default()
        };
        cqe::post(hw, info.cqn_rcv, &c);
    };
    if let Some(r) = recv {
        flush(hw, r.wqe_counter);
    }
    if info.srq.is_some() || info.rq_wqes == 0 {
        return;
    }
    let Some(pi) = crate::memory::queue::read_be32(hw.iommu, info.dbr) else {
        return;
    };
    let mut cc = qp_rt(&mut hw.model.rt, info).rq_cc;
    let mut budget = info.rq_wqes;
    while cc != pi as u16 && budget > 0 {
        flush(hw, cc);
        cc = cc.wrapping_add(1);
        budget -= 1;
    }
    qp_rt(&mut hw.model.rt, info).rq_cc = cc;
}

/// Flushes the WQEs posted to the send queue of a QP in ERR, in order (what a send doorbell
/// does for a QP in ERR, [`crate::engine::requester`]): WR_FLUSH_ERR for each.
fn flush_send_queue(hw: &mut Hw<'_>, info: &QpInfo) {
    let qpn = info.qpn;
    let Some(pi) = read_be32(hw.iommu, info.dbr + 4) else {
        dma_fault(
            hw.faults,
            info.dbr + 4,
            4,
            false,
            format!("QP {qpn:#x} doorbell record"),
        );
        return;
    };
    let mut budget = info.sq_wqebbs;
    while budget > 0 {
        let cc = qp_rt(&mut hw.model.rt, info).sq_cc;
        if cc == pi as u16 {
            break;
        }
        let Some((bytes, bbs)) = fetch(hw, info, cc) else {
            return;
        };
        if let Some(rt) = hw.model.rt.qps.get_mut(&qpn) {
            rt.sq_cc = cc.wrapping_add(bbs);
        }
        budget = budget.saturating_sub(u32::from(bbs));
        flush_wqe(hw, info, cc, bytes.get(3).copied().unwrap_or(0));
        pool::give(bytes);
    }
}

/// Reads the WQE at WQEBB counter `cc`: its `DS × 16` bytes and the WQEBBs it spans.
pub(crate) fn fetch(hw: &mut Hw<'_>, info: &QpInfo, cc: u16) -> Option<(Vec<u8>, u16)> {
    let mask = info.sq_wqebbs - 1;
    let mut read = |k: u16, buf: &mut [u8]| {
        let slot = u64::from(u32::from(cc.wrapping_add(k)) & mask);
        let off = info.start + info.sq_offset + slot * 64;
        read_queue(hw.iommu, &info.pas, info.page, off, buf).map_err(|iova| {
            dma_fault(
                hw.faults,
                iova,
                64,
                false,
                format!("QP {:#x} send WQE", info.qpn),
            );
        })
    };
    let mut first = [0u8; 64];
    read(0, &mut first).ok()?;
    let ds = View::<CtrlSeg>::new(&first).map_or(0, |c| c.get(CtrlSeg::DS) as usize);
    let bbs = (ds * 16).div_ceil(64).max(1) as u16;
    // A pooled buffer: the doorbell loop gives it back once the WQE is executed.
    let mut bytes = pool::copy(&first);
    for k in 1..bbs.min(info.sq_wqebbs as u16) {
        let mut bb = [0u8; 64];
        read(k, &mut bb).ok()?;
        bytes.extend_from_slice(&bb);
    }
    bytes.truncate(ds * 16);
    Some((bytes, bbs))
}
