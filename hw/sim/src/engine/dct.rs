//! A DC target taking a request: the DCT its BTH names, its state and access key, and the
//! connection of the initiator that sent it — which [`super::responder`] then serves as an RC
//! responder would ([`target`] gives it the view it runs).
//!
//! A request is dropped (and counted) when its DCT is not live or not ACTIVE (DRAIN_DCT closed
//! it), or when its DCETH's access key is not the DCT's: the DCT's
//! `dc_access_key_violation_count` counts it, and a DCT armed by ARM_DCT_FOR_KEY_VIOLATION
//! raises one DCT_KEY_VIOLATION event. A packet without the connect flag from an initiator the
//! DCT has no connection with is dropped: the initiator's retransmission of its connect packet
//! starts one. The connection's responder state (expected PSN, MSN, a message in progress,
//! the atomics' results, READ responses) is an RC QP's; its receive WQEs come from the DCT's
//! SRQ, its CQEs go to the DCT's CQ with the DCT's number and user index, its responses
//! (ACK, NAK, READ response, atomic ACK) go back to the DCI on the path the request came by,
//! from the DCT's RoCE address. An error never moves the DCT anywhere: it serves others.

use std::sync::Arc;

use mlx5_ifc::consts::{dct_state, qp_st, qp_state};
use mlx5_ifc::prm::caps::CmdHcaCap;
use mlx5_ifc::prm::dct::Dctc;
use mlx5_ifc::{View, ViewMut};

use super::recv::drop_frame;
use crate::fabric::frame::{Received, Route};
use crate::model::dc::{ConnId, Found};
use crate::model::objects::ObjectKind;
use crate::model::qp::{gid_is_v1, own_gid, wire_sport};
use crate::model::qp_info::QpInfo;
use crate::model::Hw;

/// The view the responder runs a DC request `rx` with, or `None` (dropped, counted).
pub(super) fn target(hw: &mut Hw<'_>, rx: &Received<'_>) -> Option<QpInfo> {
    let p = &rx.packet;
    let Some(d) = p.dceth else {
        drop_frame(hw, "DC request without a DCETH");
        return None;
    };
    let dctn = p.dqpn;
    let Some(ctx) = hw
        .model
        .objects
        .queue(ObjectKind::Dct, dctn)
        .map(|q| q.ctx.clone())
    else {
        drop_frame(hw, "no such DCT");
        return None;
    };
    let c = View::<Dctc>::new(&ctx).ok()?;
    if c.get(Dctc::STATE) != dct_state::ACTIVE {
        drop_frame(hw, "DCT not active");
        return None;
    }
    if c.get(Dctc::DC_ACCESS_KEY) != d.key {
        key_violation(hw, dctn);
        drop_frame(hw, "DC access key violation");
        return None;
    }
    let id = ConnId {
        dctn,
        sgid: rx.route.sgid,
        dci: d.dci,
    };
    let (now, rt, dc) = (hw.now, &mut hw.model.rt, &mut hw.model.dc);
    let found = dc.connect(id, p.psn, d.connect, now, &mut |key| {
        rt.qps.remove(&key);
    });
    let key = match found {
        Found::Existing(k) | Found::New(k) => k,
        Found::None => {
            drop_frame(hw, "DC request of no connection");
            return None;
        }
    };
    Some(view(hw, &c, rx, d.dci, key))
}

/// A request with another access key: counted in the DCT's context; the event, once, if armed.
fn key_violation(hw: &mut Hw<'_>, dctn: u32) {
    hw.model.rt.counters.dc_key_violations += 1;
    if let Some(q) = hw.model.objects.queue_mut(ObjectKind::Dct, dctn) {
        if let Ok(mut v) = ViewMut::<Dctc>::new(&mut q.ctx) {
            let n = v.as_view().get(Dctc::DC_ACCESS_KEY_VIOLATION_COUNT);
            let _ = v.set(Dctc::DC_ACCESS_KEY_VIOLATION_COUNT, (n + 1) & 0xffff_ffff);
        }
    }
    if hw.model.dc.armed.remove(&dctn) {
        crate::events::eqe::dct_event(hw, mlx5_ifc::event::DCT_KEY_VIOLATION, dctn);
    }
}

/// The RC responder DCT `c` is for the connection `key` of DCI `dci` that sent `rx`.
fn view(hw: &Hw<'_>, c: &View<'_, Dctc>, rx: &Received<'_>, dci: u32, key: u32) -> QpInfo {
    let model = &*hw.model;
    let dctn = rx.packet.dqpn;
    let gid = c.get(Dctc::MY_ADDR_INDEX) as usize;
    let route = Route {
        smac: model.vport.source_mac(gid),
        dmac: rx.route.smac,
        sgid: own_gid(model, gid),
        dgid: rx.route.sgid,
        tclass: c.get(Dctc::TCLASS) as u8,
        flow_label: c.get32(Dctc::FLOW_LABEL),
        hop_limit: match c.get(Dctc::HOP_LIMIT) as u8 {
            0 => 64,
            h => h,
        },
        sport: wire_sport(model, 0, dctn),
        ip_id: 0,
        v1: gid_is_v1(model, gid),
        loopback: false,
    };
    let srqn = c.get32(Dctc::SRQN_XRQN);
    let srq_kind = if model.objects.contains(ObjectKind::Rmp, srqn) {
        ObjectKind::Rmp
    } else {
        ObjectKind::Srq
    };
    QpInfo {
        qpn: dctn,
        st: qp_st::RC,
        umr: false,
        gsi: false,
        rra: 1 << model.cur(CmdHcaCap::LOG_MAX_RA_RES_DC).min(8),
        state: qp_state::RTR,
        pd: c.get32(Dctc::PD),
        cqn_snd: c.get32(Dctc::CQN),
        cqn_rcv: c.get32(Dctc::CQN),
        dbr: 0,
        pas: Arc::from(Vec::new()),
        page: 4096,
        start: 0,
        rq_wqes: 0,
        rq_stride: 16,
        sq_wqebbs: 0,
        sq_offset: 0,
        srq: Some((srq_kind, srqn)),
        mtu: match c.get(Dctc::MTU) {
            m @ 1..=5 => 256 << (m - 1),
            _ => 256,
        },
        remote_qpn: dci,
        armed: false,
        rre: c.get(Dctc::RRE) == 1,
        rwe: c.get(Dctc::RWE) == 1,
        rae: c.get(Dctc::RAE) == 1,
        atomic_mode: c.get(Dctc::ATOMIC_MODE) as u8,
        block_lb_mc: false,
        xrcd: 0,
        q_key: 0,
        retry_count: 0,
        rnr_retry: 0,
        min_rnr_nak: c.get(Dctc::MIN_RNR_NAK) as u8,
        ack_timeout: 0,
        log_msg_max: model.cur(CmdHcaCap::LOG_MAX_MSG) as u32,
        user_index: c.get32(Dctc::USER_INDEX),
        next_send_psn: 0,
        // A new connection's runtime starts at its connect packet's PSN.
        next_rcv_psn: rx.packet.psn,
        route,
        dct: true,
        rt_key: key,
    }
}
