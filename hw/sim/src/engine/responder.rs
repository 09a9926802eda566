//! The responder: what a device does with a request that arrives from the wire.
//!
//! A decoded frame goes to the QP its BTH names if that QP exists, its BTH P_Key matches the
//! QP's (IBTA's membership rule against the default P_Key; else a P_Key violation, counted),
//! its service type matches the opcode's and it is in RTR, RTS or SQD (else it is dropped and
//! counted); RC responses (ACK,
//! READ response, atomic ACK) go to the [`super::requester`].
//!
//! RC: a PSN ahead of the expected one gets one NAK sequence error (until the expected PSN
//! arrives; none after an RNR NAK, whose PSN the requester goes back to); a PSN behind it is a duplicate — SEND and WRITE are acknowledged again, a READ is
//! executed again, an atomic gets its saved result again. In sequence:
//!
//! * SEND (FIRST / ONLY) consumes a receive WQE (RQ ring or SRQ list); with none posted the
//!   answer is an RNR NAK carrying `min_rnr_nak` and nothing changes. The payload is scattered
//!   through the WQE's lkeys (local write). Too long for the WQE → a RESP_ERR CQE
//!   LOCAL_LENGTH_ERR (0x01) and NAK invalid request; a bad lkey → RESP_ERR LOCAL_PROT_ERR
//!   (0x04) and NAK remote operational error. The last packet writes RESP_SEND (2),
//!   RESP_SEND_IMM (3) or RESP_SEND_INV (4, the IETH rkey in `imm_inval_pkey`). A SEND with
//!   invalidate (RC only: UC and UD have no such opcode) first invalidates the mkey its IETH
//!   names ([`crate::model::translation::invalidate_remote`]: live, the QP's PD, created with `en_rinval`), after
//!   which any access through it is refused (an RDMA WRITE: NAK remote access error); a key
//!   that may not be invalidated completes the receive WQE with RESP_ERR
//!   REMOTE_INVAL_REQ_ERR (0x12), the QP goes to ERR and the answer is NAK invalid request.
//!   A SEND of no bytes (one packet, no payload) is a message like any other: it consumes a
//!   receive WQE and completes with a byte count of 0.
//! * RDMA WRITE checks `rwe`, then the rkey (remote write, PD, bounds of the RETH length):
//!   failure → NAK remote access error. WRITE with immediate consumes a receive WQE at its
//!   last packet (RNR NAK if none) and writes RESP_WR_IMM (1).
//! * RDMA READ checks `rre` and the rkey (remote read) and answers with READ responses (one PSN
//!   each, path MTU sized).
//! * CMP_SWAP / FETCH_ADD check `rae`, 8-byte alignment (else NAK invalid request) and the rkey
//!   (atomic), operate on host memory atomically and answer with an atomic ACK carrying the
//!   original value.
//! * The masked atomics (the simulator's own opcodes, [`super::remote::masked`]) check what
//!   the device offers, N-byte alignment, an extended `atomic_mode` wide enough, `rae` and the
//!   rkey; an 8-byte one is answered with an atomic ACK, the others with a READ response of
//!   the N original bytes.
//!
//! A NAK invalid request, remote access or remote operational error moves the responder QP to
//! ERR and posts WQ_INVAL_REQ_ERROR, WQ_ACCESS_ERROR or WQ_CATAS_ERROR to the async EQs; an
//! error CQE moves it to ERR too. Every completed message is acknowledged (ACK with the MSN).
//! Messages above `2^log_msg_max` (and READs above 64 MiB) are invalid requests.
//!
//! UC: no acknowledgements. A packet out of sequence aborts the message in progress (a receive
//! WQE it took is kept for the next message); a message without a receive WQE or with a bad
//! rkey is dropped. UD: [`super::ud`].

use mlx5_ifc::consts::{odp, qp_st, qp_state};
use mlx5_ifc::event;
use mlx5_ifc::prm::odp::OdpPerTransportServiceCap as T;
use mlx5_ifc::prm::srq::XrcSrqc;
use mlx5_ifc::View;

use super::dma;
use super::odp::Held;
use super::psn::psn_add;
use super::psn::psn_diff;
use super::recv::{self, drop_frame};
use super::remote::{atomic, masked, read, respond};
use super::verdict::{access_error, invalid, owe_ack, send_aeth, Verdict};
use super::wqe::{self, LocalError};
use crate::events::cqe::{self, op as cqe_op, syndrome as syn, Cqe};
use crate::fabric::frame::{aeth, op, Packet, Received};
use crate::model::mkey::{access, KeyError};
use crate::model::objects::ObjectKind;
use crate::model::qp::qp_rt;
use crate::model::qp_info::QpInfo;
use crate::model::runtime::WriteCtx;
use crate::model::runtime::{PageFault, RecvCtx};
use crate::model::translation;
use crate::model::Hw;

/// Routes a received frame to its QP (a multicast one to its group's, [`super::ud::multicast`]).
pub(crate) fn dispatch(hw: &mut Hw<'_>, rx: Received) {
    if rx.route.dmac[0] & 1 != 0 {
        return super::ud::multicast(hw, &rx, false);
    }
    if !hw.model.vport.owns(&rx.route.dmac) {
        return drop_frame(hw, "not for this port's MAC");
    }
    to_qp(hw, &rx);
}

/// Routes a frame a force-loopback QP of this function sent (path `fl`): to the QP its BTH
/// names, with no address checked — it never left the device.
pub(crate) fn dispatch_looped(hw: &mut Hw<'_>, rx: Received) {
    to_qp(hw, &rx);
}

/// Routes a unicast frame for this function to its QP.
fn to_qp(hw: &mut Hw<'_>, rx: &Received) {
    let p = &rx.packet;
    if p.opcode & 0xe0 == op::DC {
        return dc(hw, rx);
    }
    // QP number 1 on the wire is the GSI QP, whatever number CREATE_QP gave it.
    let dqpn = match p.dqpn {
        1 => crate::model::qp::gsi_qp(hw.model).unwrap_or(1),
        n => n,
    };
    let Some(info) = QpInfo::load(hw.model, dqpn) else {
        return drop_frame(hw, "no such QP");
    };
    if !super::recv::pkey_member(p.pkey) {
        hw.model.rt.counters.pkey_violations += 1;
        return drop_frame(hw, "P_Key violation");
    }
    if !matches!(info.st, qp_st::RC | qp_st::UC | qp_st::UD | qp_st::XRC) {
        return drop_frame(hw, "QP of an unsupported service type");
    }
    let svc = info.service();
    if p.opcode & 0xe0 != svc {
        return drop_frame(hw, "opcode of another service type");
    }
    let o = p.opcode & 0x1f;
    if (svc == op::RC || svc == op::XRC) && (op::READ_RESP_FIRST..=op::ATOMIC_ACK).contains(&o) {
        return super::ack::on_response(hw, &info, p);
    }
    if !matches!(info.state, qp_state::RTR | qp_state::RTS | qp_state::SQD) {
        return drop_frame(hw, "QP not ready to receive");
    }
    match info.st {
        qp_st::UD => super::ud::receive(hw, &info, rx),
        qp_st::UC => uc(hw, &info, p),
        qp_st::XRC => xrc(hw, &info, p),
        _ => rc(hw, &info, p),
    }
}

/// A DC packet: a response goes to its DCI's requester, a request to the DCT's connection
/// ([`super::dct::target`]), which runs it as an RC responder.
fn dc(hw: &mut Hw<'_>, rx: &Received<'_>) {
    let p = &rx.packet;
    if !super::recv::pkey_member(p.pkey) {
        hw.model.rt.counters.pkey_violations += 1;
        return drop_frame(hw, "P_Key violation");
    }
    if (op::READ_RESP_FIRST..=op::ATOMIC_ACK).contains(&(p.opcode & 0x1f)) {
        return match QpInfo::load(hw.model, p.dqpn) {
            Some(info) if info.dci() => super::ack::on_response(hw, &info, p),
            _ => drop_frame(hw, "DC response for no DCI"),
        };
    }
    if let Some(view) = super::dct::target(hw, rx) {
        rc(hw, &view, p);
    }
}

/// An XRC request: only a target takes one; its XRCETH must name an XRC SRQ of the target's
/// domain (else NAK invalid request and the target to ERR). It then runs as an RC request
/// with the SRQ's receive WQEs, CQ, PD (for every key check, as IBTA has XRC responders use
/// the SRQ's) and user index.
fn xrc(hw: &mut Hw<'_>, info: &QpInfo, p: &Packet) {
    if !info.xrc_target() {
        return drop_frame(hw, "XRC request to an initiator");
    }
    match p.xrc_srqn.and_then(|n| xrc_srq_view(hw, info, n)) {
        Some(t) => rc(hw, &t, p),
        None => {
            send_aeth(hw, info, p.psn, aeth::NAK_INVALID_REQ);
            crate::events::flush::enter_error(hw, info.qpn, None);
            crate::events::eqe::qp_event(hw, event::WQ_INVAL_REQ_ERROR, info.qpn);
        }
    }
}

/// Target `info` as it serves a request for XRC SRQ `n`, if `n` is a live XRC SRQ of its domain.
fn xrc_srq_view(hw: &Hw<'_>, info: &QpInfo, n: u32) -> Option<QpInfo> {
    let q = hw.model.objects.queue(ObjectKind::XrcSrq, n)?;
    let c = View::<XrcSrqc>::new(&q.ctx).ok()?;
    if c.get32(XrcSrqc::XRCD) != info.xrcd {
        return None;
    }
    let mut t = info.clone();
    t.srq = Some((ObjectKind::XrcSrq, n));
    t.cqn_rcv = c.get32(XrcSrqc::CQN);
    t.pd = c.get32(XrcSrqc::PD);
    t.user_index = if c.get(XrcSrqc::USER_INDEX_EQUAL_XRC_SRQN) == 1 {
        n
    } else {
        c.get32(XrcSrqc::USER_INDEX)
    };
    Some(t)
}

fn rc(hw: &mut Hw<'_>, info: &QpInfo, p: &Packet) {
    let rt = qp_rt(&mut hw.model.rt, info);
    let epsn = rt.epsn.unwrap_or(0);
    let d = psn_diff(p.psn, epsn);
    if d > 0 {
        let first = !rt.nak_sent;
        rt.nak_sent = true;
        if first {
            send_aeth(hw, info, epsn, aeth::NAK_PSN_SEQ);
        }
        return drop_frame(hw, "PSN ahead of the expected one");
    }
    if d < 0 {
        return duplicate(hw, info, p);
    }
    rt.nak_sent = false;
    let verdict = match super::odp::held(hw, info) {
        Some(Held::Wait) => Verdict::Rnr,
        Some(Held::Failed(f)) => fault_failed(hw, info, f),
        None => request(hw, info, p, true),
    };
    match verdict {
        Verdict::Done { psns, ack } => {
            let rt = qp_rt(&mut hw.model.rt, info);
            rt.epsn = Some(psn_add(epsn, psns));
            if ack {
                owe_ack(hw, info, p.psn);
            }
        }
        Verdict::Rnr => {
            // The rest of the message, already on its way, is out of sequence now: it is
            // dropped without a sequence NAK (the requester goes back to this PSN after its RNR
            // wait anyway).
            qp_rt(&mut hw.model.rt, info).nak_sent = true;
            send_aeth(hw, info, p.psn, aeth::RNR | (info.min_rnr_nak & 0x1f));
        }
        Verdict::Nak(code, ev) => {
            send_aeth(hw, info, p.psn, code);
            // A DCT serves other initiators: an error moves it nowhere.
            if let Some(ev) = ev.filter(|_| !info.dct) {
                crate::events::flush::enter_error(hw, info.qpn, None);
                crate::events::eqe::qp_event(hw, ev, info.qpn);
            }
        }
        Verdict::Drop => drop_frame(hw, "request refused"),
    }
}

fn uc(hw: &mut Hw<'_>, info: &QpInfo, p: &Packet) {
    let o = p.opcode & 0x1f;
    let starts = matches!(
        o,
        op::SEND_FIRST | op::SEND_ONLY | op::SEND_ONLY_IMM | op::WRITE_FIRST | op::WRITE_ONLY
    ) || o == op::WRITE_ONLY_IMM;
    let rt = qp_rt(&mut hw.model.rt, info);
    let in_seq = rt.epsn == Some(p.psn);
    rt.epsn = Some(psn_add(p.psn, 1));
    if !in_seq && !starts {
        rt.write = None;
        if let Some(r) = rt.recv.as_mut() {
            r.offset = u64::MAX;
        }
        return drop_frame(hw, "UC packet out of sequence: message lost");
    }
    match request(hw, info, p, false) {
        Verdict::Done { .. } => {}
        _ => {
            let rt = qp_rt(&mut hw.model.rt, info);
            rt.write = None;
            if let Some(r) = rt.recv.as_mut() {
                r.offset = u64::MAX;
            }
            drop_frame(hw, "UC message dropped");
        }
    }
}

/// Executes a request packet in sequence (RC, or UC with `reliable` false).
fn request(hw: &mut Hw<'_>, info: &QpInfo, p: &Packet, reliable: bool) -> Verdict {
    match p.opcode & 0x1f {
        op::SEND_FIRST..=op::SEND_ONLY_IMM | op::SEND_LAST_INV | op::SEND_ONLY_INV => {
            send(hw, info, p, reliable)
        }
        op::WRITE_FIRST..=op::WRITE_ONLY_IMM => write(hw, info, p, reliable),
        op::READ_REQ => read(hw, info, p),
        op::CMP_SWAP | op::FETCH_ADD => atomic(hw, info, p),
        op::MASKED_CMP_SWAP | op::MASKED_FETCH_ADD => masked(hw, info, p),
        _ => Verdict::Drop,
    }
}

/// The request after a page fault resumed with `error`: a receive WQE kept for it completes
/// with LOCAL_PROT_ERR (NAK remote operational error); an SRQ's (given back already) or an
/// RDMA access fails with a NAK remote operational / access error. The QP goes to ERR.
fn fault_failed(hw: &mut Hw<'_>, info: &QpInfo, f: PageFault) -> Verdict {
    match (f.subtype, f.kind) {
        (odp::SUBTYPE_WQE, odp::WQE_RESP) => match qp_rt(&mut hw.model.rt, info).recv.take() {
            Some(ctx) => recv_error(hw, info, ctx.wqe_counter, LocalError::PageFault),
            None => Verdict::Nak(aeth::NAK_REMOTE_OP, Some(event::WQ_CATAS_ERROR)),
        },
        (odp::SUBTYPE_WQE, _) => Verdict::Nak(aeth::NAK_REMOTE_OP, Some(event::WQ_CATAS_ERROR)),
        _ => access_error(true),
    }
}

/// A receive error reported by a CQE on WQE `wqe_counter`: the QP goes to ERR.
fn recv_error(hw: &mut Hw<'_>, info: &QpInfo, wqe_counter: u16, e: LocalError) -> Verdict {
    Verdict::Nak(recv::error(hw, info, wqe_counter, e), None)
}

/// A SEND with invalidate whose key may not be invalidated: the receive WQE completes with
/// REMOTE_INVAL_REQ_ERR (the status Linux's soft RoCE gives it, "class J"), the QP goes to ERR,
/// and the requester gets a NAK invalid request, so its SEND completes with
/// REMOTE_INVAL_REQ_ERR too (the simulator's choice: soft RoCE acknowledges the message).
fn invalidate_error(hw: &mut Hw<'_>, info: &QpInfo, wqe_counter: u16) -> Verdict {
    let c = Cqe {
        opcode: cqe_op::RESP_ERR,
        qpn: info.qpn,
        wqe_counter,
        srqn_uidx: cqe::srqn_uidx(hw, info.user_index, info.srq.map(|s| s.1)),
        syndrome: syn::REMOTE_INVAL_REQ_ERR,
        ..Cqe::default()
    };
    cqe::post(hw, info.cqn_rcv, &c);
    crate::events::flush::enter_error(hw, info.qpn, None);
    Verdict::Nak(aeth::NAK_INVALID_REQ, None)
}

/// The receive WQE of a message starting now (a kept one first).
fn start_recv(hw: &mut Hw<'_>, info: &QpInfo) -> Result<Option<RecvCtx>, ()> {
    if let Some(mut r) = qp_rt(&mut hw.model.rt, info).recv.take() {
        r.offset = 0;
        return Ok(Some(r));
    }
    Ok(
        wqe::take_recv(hw, info)?.map(|(wqe_counter, sges)| RecvCtx {
            wqe_counter,
            sges,
            offset: 0,
        }),
    )
}

fn send(hw: &mut Hw<'_>, info: &QpInfo, p: &Packet, reliable: bool) -> Verdict {
    let o = p.opcode & 0x1f;
    let first = matches!(
        o,
        op::SEND_FIRST | op::SEND_ONLY | op::SEND_ONLY_IMM | op::SEND_ONLY_INV
    );
    let last = !matches!(o, op::SEND_FIRST | op::SEND_MIDDLE);
    let mut ctx = if first {
        match start_recv(hw, info) {
            Ok(Some(c)) => c,
            Ok(None) => return Verdict::Rnr,
            Err(()) => return Verdict::Nak(aeth::NAK_REMOTE_OP, Some(event::WQ_CATAS_ERROR)),
        }
    } else {
        match qp_rt(&mut hw.model.rt, info).recv.take() {
            Some(c) if c.offset != u64::MAX => c,
            other => {
                qp_rt(&mut hw.model.rt, info).recv = other;
                return invalid(reliable);
            }
        }
    };
    let len = p.payload.len() as u64;
    if (!last && len != u64::from(info.mtu)) || len > u64::from(info.mtu) {
        qp_rt(&mut hw.model.rt, info).recv = Some(ctx);
        return invalid(reliable);
    }
    if let Err(e) = dma::scatter(hw, info.pd, &ctx.sges, ctx.offset, p.payload) {
        let counter = ctx.wqe_counter;
        if e == LocalError::PageFault
            && reliable
            && super::odp::recv_fault(hw, info, ctx, p.payload.len())
        {
            return Verdict::Rnr;
        }
        return recv_error(hw, info, counter, e);
    }
    ctx.offset += len;
    if !last {
        qp_rt(&mut hw.model.rt, info).recv = Some(ctx);
        return Verdict::Done {
            psns: 1,
            ack: p.ack_req,
        };
    }
    if let (Some(rkey), None) = (p.ieth, p.imm) {
        if let Err(e) = translation::invalidate_remote(hw.model, rkey, (info.pd, info.qpn)) {
            log::info!(
                "mlx5-sim: QP {:#x}: SEND with invalidate of rkey {rkey:#x}: {e:?}",
                info.qpn
            );
            return invalidate_error(hw, info, ctx.wqe_counter);
        }
    }
    let (opcode, imm) = match (p.imm, p.ieth) {
        (Some(imm), _) => (cqe_op::RESP_SEND_IMM, imm),
        (None, Some(rkey)) => (cqe_op::RESP_SEND_INV, rkey.to_be_bytes()),
        _ => (cqe_op::RESP_SEND, [0; 4]),
    };
    let c = Cqe {
        opcode,
        qpn: info.qpn,
        wqe_counter: ctx.wqe_counter,
        byte_cnt: ctx.offset as u32,
        imm,
        srqn_uidx: cqe::srqn_uidx(hw, info.user_index, info.srq.map(|s| s.1)),
        solicited: p.se,
        ..Cqe::default()
    };
    cqe::post(hw, info.cqn_rcv, &c);
    let rt = qp_rt(&mut hw.model.rt, info);
    rt.msn = psn_add(rt.msn, 1);
    Verdict::Done { psns: 1, ack: true }
}

fn write(hw: &mut Hw<'_>, info: &QpInfo, p: &Packet, reliable: bool) -> Verdict {
    let o = p.opcode & 0x1f;
    let first = matches!(o, op::WRITE_FIRST | op::WRITE_ONLY | op::WRITE_ONLY_IMM);
    let last = !matches!(o, op::WRITE_FIRST | op::WRITE_MIDDLE);
    let len = p.payload.len() as u64;
    if (!last && len != u64::from(info.mtu)) || len > u64::from(info.mtu) {
        return invalid(reliable);
    }
    if first {
        let Some(r) = p.reth else {
            return invalid(reliable);
        };
        if u64::from(r.len) > info.max_msg() {
            return invalid(reliable);
        }
        if !info.rwe {
            return access_error(reliable);
        }
        match translation::translate_remote(
            hw.model,
            r.rkey,
            r.va,
            r.len.into(),
            access::REMOTE_WRITE,
            (info.pd, info.qpn),
        ) {
            Ok(pieces) => {
                qp_rt(&mut hw.model.rt, info).write = Some(WriteCtx {
                    pieces,
                    at: 0,
                    used: 0,
                    total: r.len,
                    key: r.rkey,
                    va: r.va,
                    written: 0,
                });
            }
            Err(KeyError::Absent)
                if reliable
                    && super::odp::rdma_fault(
                        hw,
                        info,
                        (r.rkey, r.va, r.len),
                        p.payload.len(),
                        T::WRITE,
                    ) =>
            {
                return Verdict::Rnr;
            }
            Err(e) => {
                log::info!(
                    "mlx5-sim: QP {:#x}: RDMA WRITE rkey {:#x}: {e:?}",
                    info.qpn,
                    r.rkey
                );
                return access_error(reliable);
            }
        }
    }
    let Some(mut ctx) = qp_rt(&mut hw.model.rt, info).write.take() else {
        return invalid(reliable);
    };
    if ctx.written.saturating_add(len) > u64::from(ctx.total) {
        return invalid(reliable);
    }
    if !first {
        // The rkey is looked up again for every packet, as the device checks each one: a
        // WRITE whose MR was deregistered after its first packet is refused (remote access
        // NAK), never placed through the translation of a key that is gone.
        let at = ctx.va.wrapping_add(ctx.written);
        match translation::translate_remote(
            hw.model,
            ctx.key,
            at,
            len,
            access::REMOTE_WRITE,
            (info.pd, info.qpn),
        ) {
            Ok(pieces) => (ctx.pieces, ctx.at, ctx.used) = (pieces, 0, 0),
            Err(KeyError::Absent)
                if reliable
                    && super::odp::rdma_fault(
                        hw,
                        info,
                        (ctx.key, at, ctx.total - ctx.written as u32),
                        p.payload.len(),
                        T::WRITE,
                    ) =>
            {
                qp_rt(&mut hw.model.rt, info).write = Some(ctx);
                return Verdict::Rnr;
            }
            Err(e) => {
                log::info!(
                    "mlx5-sim: QP {:#x}: RDMA WRITE rkey {:#x} at byte {} of {}: {e:?}",
                    info.qpn,
                    ctx.key,
                    ctx.written,
                    ctx.total
                );
                return access_error(reliable);
            }
        }
    }
    let mut recv = None;
    if matches!(o, op::WRITE_LAST_IMM | op::WRITE_ONLY_IMM) {
        match start_recv(hw, info) {
            Ok(Some(c)) => recv = Some(c),
            Ok(None) => {
                qp_rt(&mut hw.model.rt, info).write = Some(ctx);
                return Verdict::Rnr;
            }
            Err(()) => return Verdict::Nak(aeth::NAK_REMOTE_OP, Some(event::WQ_CATAS_ERROR)),
        }
    }
    if let Err(e) = dma::write_pieces(hw, &mut ctx, p.payload) {
        qp_rt(&mut hw.model.rt, info).recv = recv;
        return match e {
            LocalError::Length => invalid(reliable),
            _ => Verdict::Nak(aeth::NAK_REMOTE_OP, Some(event::WQ_CATAS_ERROR)),
        };
    }
    ctx.written += len;
    if !last {
        qp_rt(&mut hw.model.rt, info).write = Some(ctx);
        return Verdict::Done {
            psns: 1,
            ack: p.ack_req,
        };
    }
    if ctx.written != u64::from(ctx.total) {
        qp_rt(&mut hw.model.rt, info).recv = recv;
        return invalid(reliable);
    }
    if let Some(r) = recv {
        let c = Cqe {
            opcode: cqe_op::RESP_WR_IMM,
            qpn: info.qpn,
            wqe_counter: r.wqe_counter,
            byte_cnt: ctx.total,
            imm: p.imm.unwrap_or_default(),
            srqn_uidx: cqe::srqn_uidx(hw, info.user_index, info.srq.map(|s| s.1)),
            solicited: p.se,
            ..Cqe::default()
        };
        cqe::post(hw, info.cqn_rcv, &c);
    }
    let rt = qp_rt(&mut hw.model.rt, info);
    rt.msn = psn_add(rt.msn, 1);
    Verdict::Done { psns: 1, ack: true }
}

/// A request whose PSN the responder has seen already.
fn duplicate(hw: &mut Hw<'_>, info: &QpInfo, p: &Packet) {
    match p.opcode & 0x1f {
        op::READ_REQ => {
            read(hw, info, p);
        }
        op::CMP_SWAP | op::FETCH_ADD | op::MASKED_CMP_SWAP | op::MASKED_FETCH_ADD => {
            // Answered again from the responder resources; one older than they hold is
            // dropped (the requester had more outstanding than it was allowed).
            let saved = qp_rt(&mut hw.model.rt, info)
                .atomics
                .iter()
                .find(|(psn, _)| *psn == p.psn)
                .copied();
            match saved {
                Some((psn, value)) => respond(hw, info, psn, value),
                None => drop_frame(hw, "duplicate atomic older than the responder resources"),
            }
        }
        _ => {
            let epsn = qp_rt(&mut hw.model.rt, info).epsn.unwrap_or(0);
            send_aeth(
                hw,
                info,
                psn_add(epsn, 0xff_ffff),
                aeth::ACK | aeth::NO_CREDITS,
            );
        }
    }
}
