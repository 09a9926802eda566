//! Event queue entry types (PRM "Events"; the `event_bitmask` bit of each in CREATE_EQ).
//!
//! The entry itself is [`crate::prm::eqe::Eqe`]; the data of each event type is one of the
//! layouts of [`crate::prm::eqe`] ([`crate::prm::eqe::CompEvent`] for [`COMPLETION`],
//! [`crate::prm::eqe::QpEvents`] for the QP and SRQ events, [`crate::prm::eqe::CqError`] for
//! [`CQ_ERROR`]...).

/// Completion event (a CQ was armed and got a CQE).
pub const COMPLETION: u8 = 0x00;
/// Path migrated.
pub const PATH_MIG: u8 = 0x01;
/// Communication established (first packet on an RTR QP).
pub const COMM_EST: u8 = 0x02;
/// Send queue drained.
pub const SQ_DRAINED: u8 = 0x03;
/// CQ error (overrun, access).
pub const CQ_ERROR: u8 = 0x04;
/// Work queue catastrophic error.
pub const WQ_CATAS_ERROR: u8 = 0x05;
/// Path migration failed.
pub const PATH_MIG_FAILED: u8 = 0x07;
/// Internal device error.
pub const INTERNAL_ERROR: u8 = 0x08;
/// Port state changed.
pub const PORT_CHANGE: u8 = 0x09;
/// Command completion (event-mode command interface).
pub const CMD: u8 = 0x0a;
/// Firmware page request.
pub const PAGE_REQUEST: u8 = 0x0b;
/// Page fault (on-demand paging): a WQE's or an RDMA access's pages are not present; the data
/// is a [`crate::prm::odp::WqeAssociatedPageFaultEvent`] or a
/// [`crate::prm::odp::RdmaPageFaultEvent`] by the sub-type ([`crate::consts::odp`]).
pub const PAGE_FAULT: u8 = 0x0c;
/// A general event; sub-type 1 ([`DELAY_DROP_TIMEOUT`]): an RQ with delay drop held a frame
/// past the timeout, dropped it and disarmed delay drop until SET_DELAY_DROP_PARAMS.
pub const GENERAL_EVENT: u8 = 0x22;
/// GENERAL_EVENT sub-type: the delay drop timeout expired.
pub const DELAY_DROP_TIMEOUT: u8 = 0x01;
/// A DCT finished draining (DRAIN_DCT): no connection of it is left (`dct_events`); Linux's
/// mlx5_ib waits for it before DESTROY_DCT. Its event mask bit is set when `dct` is offered.
pub const DCT_DRAINED: u8 = 0x1c;
/// A request reached a DCT with another DC access key, while the DCT was armed for it
/// (ARM_DCT_FOR_KEY_VIOLATION): once per arming.
pub const DCT_KEY_VIOLATION: u8 = 0x1d;
/// Invalid request on a work queue.
pub const WQ_INVAL_REQ_ERROR: u8 = 0x10;
/// Access violation on a work queue.
pub const WQ_ACCESS_ERROR: u8 = 0x11;
/// SRQ catastrophic error.
pub const SRQ_CATAS_ERROR: u8 = 0x12;
/// Last WQE reached on a QP attached to an SRQ.
pub const SRQ_LAST_WQE: u8 = 0x13;
/// SRQ limit reached.
pub const SRQ_RQ_LIMIT: u8 = 0x14;

/// The asynchronous events a RoCE driver subscribes its async EQ to: the set Linux's
/// `MLX5_ASYNC_EVENT_MASK` names for these, which leaves INTERNAL_ERROR (0x08) out — a fatal
/// error is read from the health buffer, not taken as an event.
pub const ASYNC_EVENTS: &[u8] = &[
    PATH_MIG,
    COMM_EST,
    SQ_DRAINED,
    CQ_ERROR,
    WQ_CATAS_ERROR,
    PATH_MIG_FAILED,
    PORT_CHANGE,
    WQ_INVAL_REQ_ERROR,
    WQ_ACCESS_ERROR,
    SRQ_CATAS_ERROR,
    SRQ_LAST_WQE,
    SRQ_RQ_LIMIT,
];

/// Size of an event queue entry.
pub const EQE_BYTES: usize = 64;
/// Offset of the owner byte (bit 0) in an EQE (the byte of [`crate::prm::eqe::Eqe::OWNER`]).
pub const EQE_OWNER: usize = 0x3f;
