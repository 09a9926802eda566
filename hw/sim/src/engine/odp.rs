//! On-demand paging on the responder: what a request that meets an absent page does
//! ([`crate::model::translation`]'s `KeyError::Absent`). The requester's side — the send queue
//! stopping at the WQE that faulted — is [`super::requester`]'s.
//!
//! A reliable (RC, XRC) responder raises a page fault ([`crate::events::page_fault`]) and
//! answers the request with an RNR NAK, as a ConnectX answers it: the requester waits its RNR
//! timer and sends the request again. Until PAGE_FAULT_RESUME comes, every request in sequence
//! gets an RNR NAK and raises nothing new ([`held`]).
//!
//! * A SEND whose receive WQE's buffer is absent (the transport's `receive` ODP operation):
//!   a WQE fault of type RESP on the QP, the receive WQE kept for the retry. From an SRQ
//!   (`srq_receive`): a WQE fault of type RMP on the SRQ, and the SRQ WQE is given back to
//!   the driver with a RESP_ERR CQE of syndrome REMOTE_ABORTED (0x22) and vendor syndrome
//!   ODP_PFAULT (0x93) — which rdma-core's mlx5 provider never shows: it reposts the WQE.
//! * An RDMA WRITE, READ or atomic whose range is absent (`write`, `read`, `atomic`): an RDMA
//!   fault naming the rkey, the address and the bytes left of the message.
//!
//! An operation the current ODP caps do not name for the QP's transport takes no fault: it
//! fails as an access through a bad key would. A fault resumed with `error` fails the request
//! that comes next in its place ([`held`]).

use mlx5_ifc::consts::odp;
use mlx5_ifc::prm::odp::OdpPerTransportServiceCap as T;
use mlx5_ifc::Field;

use crate::events::cqe::{self, op as cqe_op, Cqe};
use crate::events::page_fault;
use crate::model::qp::qp_rt;
use crate::model::qp_info::QpInfo;
use crate::model::runtime::{FaultState, PageFault, RecvCtx};
use crate::model::Hw;

/// A responder's fault that decides the answer to the next request.
pub(super) enum Held {
    /// Not resumed yet: RNR NAK.
    Wait,
    /// Resumed with `error`: the request fails.
    Failed(PageFault),
}

/// The fault QP `info`'s responder is held by, if any (a failed one is taken: it answers once).
pub(super) fn held(hw: &mut Hw<'_>, info: &QpInfo) -> Option<Held> {
    let rt = qp_rt(&mut hw.model.rt, info);
    let f = rt.rq_fault?;
    Some(match f.state {
        FaultState::Pending => Held::Wait,
        FaultState::Failed => {
            rt.rq_fault = None;
            Held::Failed(f)
        }
    })
}

/// A SEND's payload (`packet_len` bytes) met an absent page of receive WQE `ctx`: raises the
/// fault if the transport may take it (then the caller answers RNR; a QP's own receive WQE is
/// kept in `recv` for the retry). `false`: no fault — the receive fails.
pub(super) fn recv_fault(hw: &mut Hw<'_>, info: &QpInfo, ctx: RecvCtx, packet_len: usize) -> bool {
    let srqn = info.srq.map(|s| s.1);
    let op = if srqn.is_some() {
        T::SRQ_RECEIVE
    } else {
        T::RECEIVE
    };
    if !hw.model.odp_allows(info.odp_transport(), op) {
        return false;
    }
    let len = u16::try_from(packet_len).unwrap_or(u16::MAX);
    let f = match srqn {
        Some(n) => {
            let f = page_fault::wqe_fault(hw, odp::WQE_RMP, n, ctx.wqe_counter, len);
            let c = Cqe {
                opcode: cqe_op::RESP_ERR,
                qpn: info.qpn,
                wqe_counter: ctx.wqe_counter,
                srqn_uidx: cqe::srqn_uidx(hw, info.user_index, Some(n)),
                syndrome: odp::SRQ_FAULT_SYNDROME,
                vendor: odp::SRQ_FAULT_VENDOR,
                ..Cqe::default()
            };
            cqe::post(hw, info.cqn_rcv, &c);
            f
        }
        None => {
            let f = page_fault::wqe_fault(hw, odp::WQE_RESP, info.qpn, ctx.wqe_counter, len);
            qp_rt(&mut hw.model.rt, info).recv = Some(ctx);
            f
        }
    };
    qp_rt(&mut hw.model.rt, info).rq_fault = Some(f);
    true
}

/// An RDMA access `op` (WRITE, READ, atomic) through `rkey` met an absent page of `[va, va +
/// len)`: raises the fault if the transport may take it (then the caller answers RNR).
pub(super) fn rdma_fault(
    hw: &mut Hw<'_>,
    info: &QpInfo,
    range: (u32, u64, u32),
    packet_len: usize,
    op: Field<T>,
) -> bool {
    if !hw.model.odp_allows(info.odp_transport(), op) {
        return false;
    }
    let write = op.info.bit != T::READ.info.bit;
    let len = u16::try_from(packet_len).unwrap_or(u16::MAX);
    let f = page_fault::rdma_fault(hw, info.qpn, range, len, write);
    qp_rt(&mut hw.model.rt, info).rq_fault = Some(f);
    true
}
