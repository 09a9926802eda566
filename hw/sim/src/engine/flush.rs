//! Moving a QP to ERR: the error CQE of the failing WQE and WR_FLUSH_ERR for every other
//! outstanding or posted WQE, send and receive, in order.

use mlx5_ifc::consts::qp_state;

use super::cqe::{self, op as cqe_op, syndrome as syn, Cqe};
use super::{qp_rt, set_qp_state, wqe, Hw, QpInfo, RecvCtx, SendReq};

/// A flush CQE for WQE `cc` (requester) of `info`.
pub(crate) fn flush_wqe(hw: &mut Hw<'_>, info: &QpInfo, cc: u16, opcode: u8) {
    hw.fw.engine.counters.wqes_flushed += 1;
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
    let Some(info) = QpInfo::load(hw.fw, qpn) else {
        return;
    };
    set_qp_state(hw.fw, qpn, qp_state::ERR);
    let rt = qp_rt(&mut hw.fw.engine, &info);
    let outstanding: Vec<SendReq> = rt.outstanding.drain(..).collect();
    let recv = rt.recv.take();
    (rt.timer, rt.resend_at, rt.write) = (None, None, None);
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
        super::requester::doorbell(hw, qpn);
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
        hw.fw.engine.counters.wqes_flushed += 1;
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
    let Some(pi) = wqe::read_be32(hw.iommu, info.dbr) else {
        return;
    };
    let mut cc = qp_rt(&mut hw.fw.engine, info).rq_cc;
    let mut budget = info.rq_wqes;
    while cc != pi as u16 && budget > 0 {
        flush(hw, cc);
        cc = cc.wrapping_add(1);
        budget -= 1;
    }
    qp_rt(&mut hw.fw.engine, info).rq_cc = cc;
}
