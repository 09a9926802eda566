//! The requester: executing the send queue, PSNs, acknowledgements, retransmission, errors.
//!
//! A send doorbell for QP n makes the device read the SQ producer counter (doorbell record
//! word 1) and execute the WQEs from its own consumer counter up to it. A WQE sits at ring
//! slot `counter & (wqebbs - 1)`, is DS × 16 bytes long and spans `ceil(DS / 4)` WQEBBs,
//! wrapping at the ring end. Only a QP in RTS or SQD executes; in RST, INIT and RTR the WQEs
//! wait (the next doorbell after RTS runs them); in ERR each completes with WR_FLUSH_ERR.
//!
//! Per WQE: a bad opcode for the service type, a DS too small for its segments or above
//! `max_wqe_sz_sq`, or a control segment naming another QP → LOCAL_QP_OP_ERR; a data segment
//! whose lkey does not grant local read (or local write, for READ and atomic destinations) or
//! whose range is outside the key → LOCAL_PROT_ERR; a message above `2^log_msg_max` (UD: above
//! the path MTU the port allows) or an atomic without an 8-byte destination (a masked one's: N
//! bytes) → LOCAL_LENGTH_ERR; a masked atomic whose `opmod` lacks the extended flag (0x08) or
//! names a size the device does not offer (`atomic_size_qp`, `_dc` on a DCI) →
//! LOCAL_QP_OP_ERR.
//! An error CQE moves the QP to ERR: the outstanding WQEs before it and every later WQE complete
//! with WR_FLUSH_ERR, in order, and so do the posted receive WQEs of its RQ.
//!
//! RC: each request takes PSNs from `next_send_psn` (READ: one per response packet); nothing of
//! its frames is kept — a retransmission reads the WQE and its data again, as ConnectX does
//! (a page of it invalidated meanwhile is a page fault, and nothing goes again until the
//! resume).
//! An ACK completes every request it covers, in order; a READ completes with its last response,
//! an atomic with its atomic ACK (the original value goes to the local buffer). NAK sequence
//! error: go back to the NAK'd PSN, using up one of the `retry_count` retries as an ack timeout
//! does (the count restarts on progress). NAK invalid request
//! / remote access / remote operational error: REMOTE_INVAL_REQ_ERR (0x12) / REMOTE_ACCESS_ERR
//! (0x13) / REMOTE_OP_ERR (0x14). RNR NAK: wait the RNR timer it carries and go back, at most
//! `rnr_retry` times (7 = forever) → RNR_RETRY_EXC_ERR (0x16). Ack timeout (4.096 µs ×
//! 2^`ack_timeout` of device time; 0 = none): go back to the oldest unacknowledged PSN, at most
//! `retry_count` times → TRANSPORT_RETRY_EXC_ERR (0x15). UC and UD requests complete once on
//! the wire. A requester CQE is written when `fm_ce_se` asks for one (CE 2 or 3) or on error.

use mlx5_ifc::consts::{odp, qp_st, qp_state};
use mlx5_ifc::prm::caps::CmdHcaCap;
use mlx5_ifc::prm::odp::OdpPerTransportServiceCap as T;
use mlx5_ifc::wqe::CtrlSeg;
use mlx5_ifc::View;

use super::psn::psn_add;
use super::psn::psn_diff;
use super::wqe::{self, opcode as wop, LocalError, SendWqe};
use super::{dci, dma, masked_atomic, timer};
use crate::events::cqe::{self, op as cqe_op, syndrome as syn, Cqe};
use crate::events::flush::{self, fetch};
use crate::events::page_fault;
use crate::fabric::frame::{op, AtomicEth, Packet, Reth, Route};
use crate::fabric::pool;
use crate::fault::{DmaFault, DmaFaultKind};
use crate::model::qp::qp_rt;
use crate::model::qp_info::QpInfo;
use crate::model::runtime::{FaultState, SendReq};
use crate::model::Hw;

/// The largest UD payload for a port MTU: the largest IB MTU that fits with the headers.
fn ud_mtu(port_mtu: u16) -> u32 {
    [4096u32, 2048, 1024, 512, 256]
        .into_iter()
        .find(|m| m + 72 <= u32::from(port_mtu).max(328))
        .unwrap_or(256)
}

/// Executes the send queue of QP `qpn` (a send doorbell).
pub(crate) fn doorbell(hw: &mut Hw<'_>, qpn: u32) {
    let Some(info) = QpInfo::load(hw.model, qpn) else {
        return;
    };
    if info.sq_wqebbs == 0 {
        hw.faults.push(DmaFault {
            iova: info.dbr,
            len: 8,
            kind: DmaFaultKind::BadWqe,
            what: format!("send doorbell for QP {qpn:#x}, which has no send queue"),
        });
        return;
    }
    if !matches!(info.state, qp_state::RTS | qp_state::SQD | qp_state::ERR) {
        log::debug!("mlx5-sim: QP {qpn:#x} in state {}: WQEs wait", info.state);
        return;
    }
    let Some(pi) = crate::memory::queue::read_be32(hw.iommu, info.dbr + 4) else {
        crate::memory::queue::dma_fault(
            hw.faults,
            info.dbr + 4,
            4,
            false,
            format!("QP {qpn:#x} doorbell record"),
        );
        return;
    };
    // A page fault stops the queue at the WQE that faulted until PAGE_FAULT_RESUME; one resumed
    // with `error` fails that WQE. A QP in ERR flushes whatever a fault held.
    let mut fail_next = false;
    let rt = qp_rt(&mut hw.model.rt, &info);
    match rt.sq_fault {
        Some(_) if info.state == qp_state::ERR => rt.sq_fault = None,
        Some(f) if f.state == FaultState::Pending => return,
        // A retransmission's fault (its WQE went out already): that WQE fails.
        Some(f) if f.wqe != rt.sq_cc => {
            rt.sq_fault = None;
            let opcode = fetch(hw, &info, f.wqe).map_or(0, |(b, _)| {
                let o = View::<CtrlSeg>::new(&b).map_or(0, |c| c.get(CtrlSeg::OPCODE) as u8);
                pool::give(b);
                o
            });
            flush::enter_error(hw, qpn, Some((f.wqe, opcode, syn::LOCAL_PROT_ERR, 0)));
            return;
        }
        Some(_) => {
            rt.sq_fault = None;
            fail_next = true;
        }
        None => {}
    }
    let mut budget = info.sq_wqebbs;
    while budget > 0 {
        let rt = qp_rt(&mut hw.model.rt, &info);
        if rt.sq_fault.is_some() {
            break;
        }
        let cc = rt.sq_cc;
        if cc == pi as u16 {
            break;
        }
        let Some((bytes, bbs)) = fetch(hw, &info, cc) else {
            if crate::model::qp::qp_state_of(hw.model, qpn) == Some(qp_state::ERR) {
                return;
            }
            flush::enter_error(hw, qpn, None);
            crate::events::eqe::qp_event(hw, mlx5_ifc::event::WQ_CATAS_ERROR, qpn);
            return;
        };
        if info.dci() && dci::must_wait(hw, &info, &bytes) {
            // Another DCT than the one the DCI is connected to, with requests to that one
            // unacknowledged: the WQE waits ([`complete_ready`] runs the queue again).
            pool::give(bytes);
            break;
        }
        if let Some(rt) = hw.model.rt.qps.get_mut(&qpn) {
            rt.sq_cc = cc.wrapping_add(bbs);
        }
        budget = budget.saturating_sub(u32::from(bbs));
        if crate::model::qp::qp_state_of(hw.model, qpn) == Some(qp_state::ERR) {
            flush::flush_wqe(hw, &info, cc, bytes.get(3).copied().unwrap_or(0));
        } else if std::mem::take(&mut fail_next) {
            let opcode = View::<CtrlSeg>::new(&bytes).map_or(0, |c| c.get(CtrlSeg::OPCODE) as u8);
            flush::enter_error(hw, qpn, Some((cc, opcode, syn::LOCAL_PROT_ERR, 0)));
        } else {
            execute(hw, &info, cc, &bytes);
        }
        pool::give(bytes);
    }
}

pub(crate) fn local_syndrome(e: LocalError) -> (u8, u8) {
    match e {
        LocalError::Length => (syn::LOCAL_LENGTH_ERR, 0),
        LocalError::Protection | LocalError::PageFault => (syn::LOCAL_PROT_ERR, 0),
        LocalError::Dma => (syn::LOCAL_PROT_ERR, cqe::VENDOR_DMA),
    }
}

/// Executes one fetched WQE.
fn execute(hw: &mut Hw<'_>, info: &QpInfo, cc: u16, bytes: &[u8]) {
    let opcode = View::<CtrlSeg>::new(bytes).map_or(0, |c| c.get(CtrlSeg::OPCODE) as u8);
    let too_big = bytes.len() as u64 > hw.model.cur(CmdHcaCap::MAX_WQE_SZ_SQ);
    // UMR: the REG_UMR QP's, and on RC and UC QPs rdma-core's memory window binds and local
    // invalidations (`IBV_WR_BIND_MW`, `IBV_WR_LOCAL_INV`).
    if opcode == wop::UMR && (info.umr || matches!(info.st, qp_st::RC | qp_st::UC)) {
        umr(hw, info, cc, bytes, too_big);
        return;
    }
    let w = match wqe::parse_send(bytes, info.st) {
        Ok(w) if w.qpn == info.qpn && !too_big && masked_atomic::offered(hw.model, info, &w) => w,
        other => {
            log::info!(
                "mlx5-sim: QP {:#x} WQE {cc}: {}",
                info.qpn,
                other.err().unwrap_or(
                    "DS or QPN of the control segment wrong, or a masked atomic not offered"
                )
            );
            flush::enter_error(hw, info.qpn, Some((cc, opcode, syn::LOCAL_QP_OP_ERR, 0)));
            return;
        }
    };
    hw.model.rt.counters.wqes_executed += 1;
    let r = match w.opcode {
        wop::NOP => Ok(request(cc, &w, 0)),
        wop::RDMA_READ
        | wop::ATOMIC_CS
        | wop::ATOMIC_FA
        | wop::ATOMIC_MASKED_CS
        | wop::ATOMIC_MASKED_FA => remote_read(hw, info, cc, &w),
        _ => send_or_write(hw, info, cc, &w),
    };
    match r {
        Ok(req) => {
            let rt = qp_rt(&mut hw.model.rt, info);
            let start_timer = !req.done && rt.timer.is_none() && rt.resend_at.is_none();
            rt.outstanding.push_back(req);
            if start_timer {
                rt.timer = timer::ack_timeout_ns(info.ack_timeout).map(|t| hw.now + t);
                hw.model.rt.note_timers(info.rt_key);
            }
            complete_ready(hw, info);
        }
        Err(LocalError::PageFault) if may_fault(hw, info, w.opcode) => {
            // The WQE waits, unexecuted, for PAGE_FAULT_RESUME; the queue stops at it.
            hw.model.rt.counters.wqes_executed -= 1;
            let kind = if w.opcode == wop::RDMA_READ || wqe::is_atomic(w.opcode) {
                odp::WQE_REQ_READ_OR_ATOMIC
            } else {
                odp::WQE_REQ_SEND_OR_WRITE
            };
            let len = u16::try_from(bytes.len()).unwrap_or(u16::MAX);
            let f = page_fault::wqe_fault(hw, kind, info.qpn, cc, len);
            let rt = qp_rt(&mut hw.model.rt, info);
            rt.sq_cc = cc;
            rt.sq_fault = Some(f);
        }
        Err(e) => {
            let (s, vendor) = local_syndrome(e);
            flush::enter_error(hw, info.qpn, Some((cc, opcode, s, vendor)));
        }
    }
}

/// Whether a send WQE of `opcode` on `info` may wait for a page fault: the current ODP caps
/// name the operation for the QP's transport (SEND and WRITE read their data: `send`).
pub(super) fn may_fault(hw: &Hw<'_>, info: &QpInfo, opcode: u8) -> bool {
    let op = match opcode {
        wop::RDMA_READ => T::READ,
        o if wqe::is_atomic(o) => T::ATOMIC,
        _ => T::SEND,
    };
    hw.model.odp_allows(info.odp_transport(), op)
}

/// A UMR WQE ([`super::umr`]): a local operation, done at once (its completion waits behind the
/// QP's outstanding requests, in order).
fn umr(hw: &mut Hw<'_>, info: &QpInfo, cc: u16, bytes: &[u8], too_big: bool) {
    let Ok(c) = View::<CtrlSeg>::new(bytes) else {
        return;
    };
    let w = SendWqe::of_ctrl(&c);
    if w.qpn != info.qpn || too_big {
        flush::enter_error(hw, info.qpn, Some((cc, wop::UMR, syn::LOCAL_QP_OP_ERR, 0)));
        return;
    }
    hw.model.rt.counters.wqes_executed += 1;
    match super::umr::execute(hw, bytes) {
        Ok(()) => {
            qp_rt(&mut hw.model.rt, info)
                .outstanding
                .push_back(request(cc, &w, 0));
            complete_ready(hw, info);
        }
        Err(e) => {
            let (s, vendor) = local_syndrome(e);
            flush::enter_error(hw, info.qpn, Some((cc, wop::UMR, s, vendor)));
        }
    }
}

/// A request record for WQE `cc` (done unless it goes out on RC).
fn request(cc: u16, w: &SendWqe, byte_count: u32) -> SendReq {
    SendReq {
        wqe_counter: cc,
        opcode: w.opcode,
        signaled: w.fm_ce_se & wqe::CE_ALWAYS != 0,
        first_psn: 0,
        last_psn: 0,
        byte_count,
        local: Vec::new(),
        needs_response: false,
        got_pkts: 0,
        got_bytes: 0,
        done: true,
    }
}

/// The route and destination QP of a request.
fn route_of(hw: &Hw<'_>, info: &QpInfo, w: &SendWqe) -> (Route, u32) {
    match &w.av {
        Some(av) => (
            Route {
                smac: hw.model.vport.source_mac(usize::from(av.sgid_index)),
                dmac: av.rmac,
                sgid: crate::model::qp::own_gid(hw.model, usize::from(av.sgid_index)),
                dgid: av.rgid,
                tclass: av.tclass,
                flow_label: av.flow_label,
                hop_limit: av.hop_limit,
                sport: crate::model::qp::wire_sport(hw.model, av.sport, info.qpn),
                ip_id: 0,
                v1: crate::model::qp::gid_is_v1(hw.model, usize::from(av.sgid_index)),
                loopback: false,
            },
            av.dqpn,
        ),
        None => (info.route, info.remote_qpn),
    }
}

/// Takes `n` PSNs.
fn take_psns(hw: &mut Hw<'_>, info: &QpInfo, n: u32) -> u32 {
    let rt = qp_rt(&mut hw.model.rt, info);
    let psn = rt.next_psn.unwrap_or(0);
    rt.next_psn = Some(psn_add(psn, n));
    psn
}

/// SEND, SEND_IMM, SEND_INVAL, RDMA_WRITE, RDMA_WRITE_IMM.
fn send_or_write(
    hw: &mut Hw<'_>,
    info: &QpInfo,
    cc: u16,
    w: &SendWqe,
) -> Result<SendReq, LocalError> {
    let max = if info.ud() {
        // One packet: the QP's MTU and message limit, within what the port carries.
        u64::from(ud_mtu(hw.model.vport.mtu()).min(info.mtu)).min(info.max_msg())
    } else {
        info.max_msg()
    };
    let data = dma::gather(hw, info.pd, &w.pieces, max)?;
    let req = message(hw, info, cc, w, &data, None);
    pool::give_spare(data);
    Ok(req)
}

/// The frames of the SEND or WRITE `w` whose payload is `data`. `again`: an RC request sent
/// once already, `(first PSN, from)` — its frames from PSN `from` on go out again, with the
/// PSNs they had.
fn message(
    hw: &mut Hw<'_>,
    info: &QpInfo,
    cc: u16,
    w: &SendWqe,
    data: &[u8],
    again: Option<(u32, u32)>,
) -> SendReq {
    let mut req = request(cc, w, data.len() as u32);
    let (route, dqpn) = route_of(hw, info, w);
    let write = matches!(w.opcode, wop::RDMA_WRITE | wop::RDMA_WRITE_IMM);
    let imm = matches!(w.opcode, wop::SEND_IMM | wop::RDMA_WRITE_IMM);
    let inv = w.opcode == wop::SEND_INVAL;
    let se = w.fm_ce_se & wqe::SOLICITED != 0;
    if info.ud() {
        // QP1 is number 1 on the wire: the DETH's source QP of the GSI QP's MADs.
        let sqpn = if info.gsi { 1 } else { info.qpn };
        let (qkey, sqpn) = match w.av {
            Some(av) if av.qkey & 0x8000_0000 == 0 => (av.qkey, sqpn),
            _ => (info.q_key, sqpn),
        };
        let p = Packet {
            opcode: op::UD
                | if imm {
                    op::SEND_ONLY_IMM
                } else {
                    op::SEND_ONLY
                },
            se,
            dqpn,
            psn: take_psns(hw, info, 1),
            deth: Some((qkey, sqpn)),
            imm: imm.then_some(w.imm),
            payload: data,
            ..Packet::default()
        };
        hw.model.rt.send(&route, &p);
        return req;
    }
    let (svc, reliable) = (info.service(), info.st != qp_st::UC);
    let mtu = info.mtu as usize;
    let n = data.len().div_ceil(mtu).max(1);
    let first_psn = match again {
        Some((first, _)) => first,
        None => take_psns(hw, info, n as u32),
    };
    for i in 0..n {
        if again.is_some_and(|(_, from)| psn_diff(psn_add(first_psn, i as u32), from) < 0) {
            continue;
        }
        let (first, last) = (i == 0, i + 1 == n);
        let chunk = &data[(i * mtu).min(data.len())..((i + 1) * mtu).min(data.len())];
        let o = match (write, first, last) {
            (false, true, true) if imm => op::SEND_ONLY_IMM,
            (false, true, true) if inv => op::SEND_ONLY_INV,
            (false, true, true) => op::SEND_ONLY,
            (false, true, false) => op::SEND_FIRST,
            (false, false, true) if imm => op::SEND_LAST_IMM,
            (false, false, true) if inv => op::SEND_LAST_INV,
            (false, false, true) => op::SEND_LAST,
            (false, false, false) => op::SEND_MIDDLE,
            (true, true, true) if imm => op::WRITE_ONLY_IMM,
            (true, true, true) => op::WRITE_ONLY,
            (true, true, false) => op::WRITE_FIRST,
            (true, false, true) if imm => op::WRITE_LAST_IMM,
            (true, false, true) => op::WRITE_LAST,
            (true, false, false) => op::WRITE_MIDDLE,
        };
        let (va, rkey) = w.raddr.unwrap_or_default();
        let psn = psn_add(first_psn, i as u32);
        let dceth =
            dc_dest(w).and_then(|d| dci::dceth(hw, info, d, (first_psn, psn), again.is_some()));
        let p = Packet {
            opcode: svc | o,
            se: se && last,
            dqpn,
            ack_req: last && reliable,
            xrc_srqn: w.xrc_srqn,
            dceth,
            psn,
            reth: (write && first).then_some(Reth {
                va,
                rkey,
                len: req.byte_count,
            }),
            imm: (last && imm).then_some(w.imm),
            ieth: (last && inv).then(|| u32::from_be_bytes(w.imm)),
            payload: chunk,
            ..Packet::default()
        };
        hw.model.rt.send(&route, &p);
    }
    if reliable {
        req.first_psn = first_psn;
        req.last_psn = psn_add(first_psn, n as u32 - 1);
        req.done = false;
    }
    req
}

/// RDMA_READ and the atomics (RC and XRC).
fn remote_read(
    hw: &mut Hw<'_>,
    info: &QpInfo,
    cc: u16,
    w: &SendWqe,
) -> Result<SendReq, LocalError> {
    let local = w.sges();
    let len = dma::capacity(&local);
    let atomic = w.opcode != wop::RDMA_READ;
    // An atomic's destination holds its original value: 8 bytes, or a masked one's N.
    let arg = w.masked.map_or(8, |m| m.n as u64);
    if (atomic && len != arg) || len > info.max_msg() {
        return Err(LocalError::Length);
    }
    dma::check_writable(hw, info.pd, &local)?;
    let npkts = if atomic {
        1
    } else {
        (len.div_ceil(u64::from(info.mtu)).max(1)) as u32
    };
    let psn = take_psns(hw, info, npkts);
    read_request(hw, info, w, psn, len as u32, false);
    let mut req = request(cc, w, len as u32);
    req.first_psn = psn;
    req.last_psn = psn_add(psn, npkts - 1);
    req.local = local;
    req.needs_response = true;
    req.done = false;
    Ok(req)
}

/// Sends the READ or atomic request of `w` (`len` bytes) with PSN `psn` (`again`: a
/// retransmission).
fn read_request(hw: &mut Hw<'_>, info: &QpInfo, w: &SendWqe, psn: u32, len: u32, again: bool) {
    let atomic = w.opcode != wop::RDMA_READ;
    let (va, rkey) = w.raddr.unwrap_or_default();
    let (route, dqpn) = route_of(hw, info, w);
    let dceth = dc_dest(w).and_then(|d| dci::dceth(hw, info, d, (psn, psn), again));
    let mut p = Packet {
        dqpn,
        ack_req: true,
        psn,
        xrc_srqn: w.xrc_srqn,
        dceth,
        ..Packet::default()
    };
    if let Some(m) = w.masked {
        p.opcode = info.service()
            | if w.opcode == wop::ATOMIC_MASKED_CS {
                op::MASKED_CMP_SWAP
            } else {
                op::MASKED_FETCH_ADD
            };
        p.reth = Some(Reth {
            va,
            rkey,
            len: m.n as u32,
        });
        p.payload = m.operands;
    } else if atomic {
        let (swap_add, compare) = w.atomic.unwrap_or_default();
        p.opcode = info.service()
            | if w.opcode == wop::ATOMIC_CS {
                op::CMP_SWAP
            } else {
                op::FETCH_ADD
            };
        p.atomic = Some(AtomicEth {
            va,
            rkey,
            swap_add,
            compare,
        });
    } else {
        p.opcode = info.service() | op::READ_REQ;
        p.reth = Some(Reth { va, rkey, len });
    }
    hw.model.rt.send(&route, &p);
}

/// A DCI's WQE's destination: `(DCT GID, DCT number, DC access key)`.
fn dc_dest(w: &SendWqe) -> Option<([u8; 16], u32, u64)> {
    w.av.map(|av| (av.rgid, av.dqpn, av.dc_key))
}

/// Sends the unfinished RC request of WQE `cc`, whose PSNs start at `first_psn`, again from PSN
/// `from` on (a READ or atomic: its request, whole). As ConnectX retransmits, the WQE is read
/// from the send queue again (its slot is not reused before its completion) and its data
/// gathered again — nothing of the first transmission is kept. A WQE that cannot be read, or
/// no longer parses or gathers, fails the QP as it would have the first time. The frames sent.
pub(crate) fn resend(hw: &mut Hw<'_>, info: &QpInfo, cc: u16, first_psn: u32, from: u32) -> u64 {
    // A page fault the queue waits on: nothing goes again until it is resumed (the ack timer
    // tries again then).
    if qp_rt(&mut hw.model.rt, info).sq_fault.is_some() {
        return 0;
    }
    let Some((bytes, _)) = fetch(hw, info, cc) else {
        if crate::model::qp::qp_state_of(hw.model, info.qpn) != Some(qp_state::ERR) {
            flush::enter_error(hw, info.qpn, None);
            crate::events::eqe::qp_event(hw, mlx5_ifc::event::WQ_CATAS_ERROR, info.qpn);
        }
        return 0;
    };
    let sent = |hw: &Hw<'_>| hw.model.rt.counters.tx_frames + hw.model.rt.counters.fl_frames;
    let before = sent(hw);
    let opcode = View::<CtrlSeg>::new(&bytes).map_or(0, |c| c.get(CtrlSeg::OPCODE) as u8);
    let failed = match wqe::parse_send(&bytes, info.st) {
        Ok(w) if w.qpn == info.qpn => match w.opcode {
            o if o == wop::RDMA_READ || wqe::is_atomic(o) => {
                let len = dma::capacity(&w.sges()) as u32;
                read_request(hw, info, &w, first_psn, len, true);
                None
            }
            _ => match dma::gather(hw, info.pd, &w.pieces, info.max_msg()) {
                Ok(data) => {
                    message(hw, info, cc, &w, &data, Some((first_psn, from)));
                    pool::give_spare(data);
                    None
                }
                // A page of the data went away since the first transmission (the driver
                // invalidated it): the same WQE fault; the queue waits for the resume.
                Err(LocalError::PageFault) if may_fault(hw, info, w.opcode) => {
                    let len = u16::try_from(bytes.len()).unwrap_or(u16::MAX);
                    let f =
                        page_fault::wqe_fault(hw, odp::WQE_REQ_SEND_OR_WRITE, info.qpn, cc, len);
                    qp_rt(&mut hw.model.rt, info).sq_fault = Some(f);
                    None
                }
                Err(e) => Some(local_syndrome(e)),
            },
        },
        _ => Some((syn::LOCAL_QP_OP_ERR, 0)),
    };
    pool::give(bytes);
    if let Some((s, vendor)) = failed {
        flush::enter_error(hw, info.qpn, Some((cc, opcode, s, vendor)));
    }
    sent(hw) - before
}

/// Writes the CQEs of the finished requests at the front of the queue, in order.
pub(crate) fn complete_ready(hw: &mut Hw<'_>, info: &QpInfo) {
    loop {
        let Some(rt) = hw.model.rt.qps.get_mut(&info.qpn) else {
            return;
        };
        if !rt.outstanding.front().is_some_and(|r| r.done) {
            break;
        }
        let Some(r) = rt.outstanding.pop_front() else {
            break;
        };
        if r.signaled {
            let c = Cqe {
                opcode: cqe_op::REQ,
                wqe_opcode: r.opcode,
                qpn: info.qpn,
                wqe_counter: r.wqe_counter,
                byte_cnt: r.byte_count,
                srqn_uidx: cqe::srqn_uidx(hw, info.user_index, None),
                ..Cqe::default()
            };
            cqe::post(hw, info.cqn_snd, &c);
        }
    }
    timer::arm_timer(hw, info);
    if info.dci() && dci::may_go_on(hw, info) {
        doorbell(hw, info.qpn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ud_payload_limit() {
        assert_eq!(ud_mtu(1500), 1024);
        assert_eq!(ud_mtu(9000), 4096);
    }
}
