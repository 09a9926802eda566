//! UD receives: a datagram to its QP, and multicast to every QP of a group.
//!
//! The DETH Q_Key must equal the QP's (else dropped and counted as a Q_Key violation); a message too long for the receive WQE is
//! dropped and the WQE kept (IBA class D; the QP stays up); the receive buffer gets the 40-byte
//! GRH first (IPv6: the IPv6 header; IPv4: 20 zero bytes then the IPv4 header), the CQE the
//! source QPN, the GRH flag and the RoCE L3 header type (25:24: 0 GRH, 1 IPv6, 2 IPv4) in
//! `flags_rqpn`, the L3 type in byte 29, and without an immediate the BTH P_Key in
//! `imm_inval_pkey`.

use mlx5_ifc::consts::qp_state;
use mlx5_ifc::cqe::{l3_hdr_type, roce_l3_hdr_type};

use super::dma;
use super::recv::{self, drop_frame};
use super::wqe;
use crate::events::cqe::{self, op as cqe_op, Cqe};
use crate::fabric::frame::{op, Received, IPV4_BYTES, IPV6_BYTES};
use crate::model::qp::qp_rt;
use crate::model::qp_info::QpInfo;
use crate::model::Hw;

/// The destination QPN of a multicast packet.
const MULTICAST_QPN: u32 = 0xff_ffff;

/// A group-addressed frame: a UD SEND to QPN 0xffffff goes to every QP attached to the group of
/// its destination GID that is ready to receive, each taking its own receive WQE (a QP without
/// one, or with another Q_Key, drops its copy). `looped`: the frame is this port's own (a device
/// loops its multicast back to the port); the sending QP does not get it back when it was
/// created with `block_lb_mc`.
pub(crate) fn multicast(hw: &mut Hw<'_>, rx: &Received, looped: bool) {
    let p = &rx.packet;
    if p.dqpn != MULTICAST_QPN || p.opcode & 0xe0 != op::UD {
        return drop_frame(hw, "group-addressed, but not a UD multicast");
    }
    if !super::recv::pkey_member(p.pkey) {
        hw.model.rt.counters.pkey_violations += 1;
        return drop_frame(hw, "P_Key violation");
    }
    let members = hw.model.mcg.members(&rx.route.dgid).to_vec();
    if members.is_empty() {
        return drop_frame(hw, "multicast GID no QP is attached to");
    }
    let sender = p.deth.map(|(_, sqpn)| sqpn);
    for qpn in members {
        let Some(info) = QpInfo::load(hw.model, qpn) else {
            continue;
        };
        if looped && sender == Some(qpn) && info.block_lb_mc {
            continue;
        }
        if !matches!(info.state, qp_state::RTR | qp_state::RTS | qp_state::SQD) {
            drop_frame(hw, "multicast member not ready to receive");
            continue;
        }
        receive(hw, &info, rx);
    }
}

/// A UD datagram for QP `info` (see the module documentation).
pub(crate) fn receive(hw: &mut Hw<'_>, info: &QpInfo, rx: &Received) {
    let p = &rx.packet;
    let Some((qkey, sqpn)) = p.deth else {
        return drop_frame(hw, "UD without DETH");
    };
    if qkey != info.q_key {
        hw.model.rt.counters.qkey_violations += 1;
        return drop_frame(hw, "Q_Key mismatch");
    }
    // What the WQE was taken from, to give it back to a message too long for it.
    let srq = info
        .srq
        .map(|(_, n)| (n, hw.model.rt.srqs.get(&n).copied()));
    let cc = qp_rt(&mut hw.model.rt, info).rq_cc;
    let Ok(Some((wqe_counter, sges))) = wqe::take_recv(hw, info) else {
        return drop_frame(hw, "UD message without a receive WQE");
    };
    if (IPV6_BYTES + p.payload.len()) as u64 > dma::capacity(&sges) {
        // IBA class D (as Linux's soft RoCE drops a UD or UC message too long for its
        // buffer): the message is dropped and the WQE kept for the next one; the QP runs on.
        // Entering ERR here would let any host on the link stop a UD QP — QP1 among them —
        // with one datagram.
        match srq {
            Some((n, Some(was))) => {
                hw.model.rt.srqs.insert(n, was);
            }
            Some((n, None)) => {
                hw.model.rt.srqs.remove(&n);
            }
            None => qp_rt(&mut hw.model.rt, info).rq_cc = cc,
        }
        return drop_frame(hw, "UD message too long for the receive WQE");
    }
    let mut data = vec![0u8; IPV6_BYTES];
    let h = &rx.ip_header;
    if rx.ipv4 {
        data[IPV6_BYTES - IPV4_BYTES..].copy_from_slice(&h[..IPV4_BYTES.min(h.len())]);
    } else {
        data.copy_from_slice(&h[..IPV6_BYTES.min(h.len())]);
    }
    data.extend_from_slice(p.payload);
    if let Err(e) = dma::scatter(hw, info.pd, &sges, 0, &data) {
        recv::error(hw, info, wqe_counter, e);
        return;
    }
    let roce_l3 = if rx.route.v1 {
        roce_l3_hdr_type::GRH
    } else if rx.ipv4 {
        roce_l3_hdr_type::IPV4
    } else {
        roce_l3_hdr_type::IPV6
    };
    let c = Cqe {
        opcode: if p.imm.is_some() {
            cqe_op::RESP_SEND_IMM
        } else {
            cqe_op::RESP_SEND
        },
        qpn: info.qpn,
        wqe_counter,
        byte_cnt: data.len() as u32,
        // Without an immediate, bits 15:0 carry the BTH P_Key (mlx5_ib reads QP1's there).
        imm: p.imm.unwrap_or(u32::from(p.pkey).to_be_bytes()),
        srqn_uidx: cqe::srqn_uidx(hw, info.user_index, info.srq.map(|s| s.1)),
        // GRH present (29:28), the RoCE L3 header (25:24), the source QP (23:0).
        flags_rqpn: (1 << 28) | (u32::from(roce_l3) << 24) | (sqpn & 0xff_ffff),
        l3_hdr_type: if rx.ipv4 {
            l3_hdr_type::IPV4
        } else {
            l3_hdr_type::IPV6
        },
        solicited: p.se,
        ..Cqe::default()
    };
    cqe::post(hw, info.cqn_rcv, &c);
}
