//! PAGE_FAULT events (on-demand paging, event type 0x0c): the device met a page that is not
//! present (an MTT entry without its read or write bit while `pg` is on) and stops what needed
//! it until the driver resolves the fault and sends PAGE_FAULT_RESUME.
//!
//! The event data, as Linux 6.1's mlx5_ib reads it (`mlx5_eqe_page_fault`, docs/fields.md
//! "ODP"), after `bytes_committed` (BE32 at 0, always 0 here: nothing of the WQE or message was
//! done before the fault):
//!
//! | sub-type | data |
//! |---|---|
//! | WQE (1) | `wqe_index` BE16 at 6 (the WQE's counter), `len` BE16 at 10 (the WQE's bytes), the token BE32 at 12 (a word `mlx5_ifc` leaves reserved), the fault type at byte 24 ([`odp::WQE_RESP`]...), the queue (QP or SRQ) in the low 24 bits of BE32 24 |
//! | RDMA (0) | `r_key` BE32 at 4, `packet_len` BE16 at 10, `rdma_op_len` BE32 at 12 (the message's length), `rdma_va` BE64 at 16 (its address), the flags at byte 24 ([`odp::RDMA_RDMA`], [`odp::RDMA_WRITE`]), the token — the QP — in the low 24 bits of BE32 24 |
//!
//! The event goes to every EQ subscribed to PAGE_FAULT (Linux's mlx5_ib makes one for it with
//! its first ODP MR); with none, the fault waits forever, as on the card.

use mlx5_ifc::consts::odp;
use mlx5_ifc::event;
use mlx5_ifc::prm::odp::{RdmaPageFaultEvent, WqeAssociatedPageFaultEvent};

use super::eqe::{async_event_sub, event_data, EVENT_DATA_BYTES};
use crate::model::runtime::{FaultState, PageFault};
use crate::model::Hw;

/// The byte of a WQE fault's event data that holds its token (Linux's
/// `mlx5_eqe_page_fault.wqe.token`).
const WQE_TOKEN_AT: usize = 12;

/// Raises a WQE page fault of `kind` (a WQE fault type of [`odp`]) on WQE `wqe_index` (`len`
/// bytes) of queue `wq`, and returns what the QP now waits on.
pub(crate) fn wqe_fault(hw: &mut Hw<'_>, kind: u8, wq: u32, wqe_index: u16, len: u16) -> PageFault {
    hw.model.rt.fault_token = (hw.model.rt.fault_token + 1) & 0xff_ffff;
    let token = hw.model.rt.fault_token;
    let mut data = event_data::<WqeAssociatedPageFaultEvent>(|v| {
        v.set(WqeAssociatedPageFaultEvent::WQE_INDEX, wqe_index.into())?
            .set(WqeAssociatedPageFaultEvent::LEN, len.into())?
            .set(
                WqeAssociatedPageFaultEvent::REQUESTOR,
                u64::from(kind & odp::RDMA_REQUESTOR),
            )?
            .set(
                WqeAssociatedPageFaultEvent::WRITE_READ,
                u64::from((kind >> 1) & 1),
            )?
            .set(WqeAssociatedPageFaultEvent::QPN, (wq & 0xff_ffff).into())
            .map(drop)
    });
    data[WQE_TOKEN_AT..WQE_TOKEN_AT + 4].copy_from_slice(&token.to_be_bytes());
    log::debug!("mlx5-sim: page fault (WQE, type {kind}) on queue {wq:#x} WQE {wqe_index}, token {token:#x}");
    let f = raise(hw, odp::SUBTYPE_WQE, kind, (wq, token), &data);
    PageFault {
        wqe: wqe_index,
        ..f
    }
}

/// Posts the event of sub-type `subtype` with `data`, counts it, and returns the fault of
/// `kind` on queue `wq` with `token` that now waits for its resume.
fn raise(
    hw: &mut Hw<'_>,
    subtype: u8,
    kind: u8,
    (wq, token): (u32, u32),
    data: &[u8; EVENT_DATA_BYTES],
) -> PageFault {
    hw.model.rt.counters.page_faults += 1;
    async_event_sub(hw, event::PAGE_FAULT, subtype, data);
    PageFault {
        subtype,
        kind,
        wq,
        token,
        wqe: 0,
        state: FaultState::Pending,
    }
}

/// Raises an RDMA page fault on QP `qpn`'s responder: `rkey` at `va` for a message of `len`
/// bytes, in a packet of `packet_len`; `write` for a WRITE or an atomic.
pub(crate) fn rdma_fault(
    hw: &mut Hw<'_>,
    qpn: u32,
    (rkey, va, len): (u32, u64, u32),
    packet_len: u16,
    write: bool,
) -> PageFault {
    let kind = odp::RDMA_RDMA | if write { odp::RDMA_WRITE } else { 0 };
    let data = event_data::<RdmaPageFaultEvent>(|v| {
        v.set(RdmaPageFaultEvent::R_KEY, rkey.into())?
            .set(RdmaPageFaultEvent::PACKET_LEN, packet_len.into())?
            .set(RdmaPageFaultEvent::RDMA_OP_LEN, len.into())?
            .set(RdmaPageFaultEvent::RDMA_VA, va)?
            .set(RdmaPageFaultEvent::RDMA, 1)?
            .set(RdmaPageFaultEvent::WRITE, u64::from(write))?
            .set(RdmaPageFaultEvent::QP_NUMBER, (qpn & 0xff_ffff).into())
            .map(drop)
    });
    log::debug!("mlx5-sim: page fault (RDMA) on QP {qpn:#x}: rkey {rkey:#x} at {va:#x}+{len}");
    let qpn = qpn & 0xff_ffff;
    raise(hw, odp::SUBTYPE_RDMA, kind, (qpn, qpn), &data)
}
