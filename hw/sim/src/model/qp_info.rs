//! What the data path needs from a QP context ([`QpInfo`]); decoded and cached by
//! [`super::qp`].

use std::sync::Arc;

use mlx5_ifc::consts::qp_st;

use super::objects::ObjectKind;
use crate::fabric::frame::{op, Route};

/// What the data path needs from a QP context.
#[derive(Debug, Clone)]
pub(crate) struct QpInfo {
    pub(crate) qpn: u32,
    pub(crate) st: u64,
    /// A REG_UMR QP (its `st` is UD's: [`qp_st::transport`]).
    pub(crate) umr: bool,
    /// QP1, the GSI QP (its `st` is UD's): number 1 on the wire, whatever CREATE_QP named it.
    pub(crate) gsi: bool,
    /// Responder resources: the READs and atomics a requester may have outstanding
    /// (`2^log_rra_max`).
    pub(crate) rra: usize,
    pub(crate) state: u64,
    pub(crate) pd: u32,
    pub(crate) cqn_snd: u32,
    pub(crate) cqn_rcv: u32,
    pub(crate) dbr: u64,
    pub(crate) pas: Arc<[u64]>,
    pub(crate) page: u64,
    /// Where the queue starts in its first page (`page_offset`).
    pub(crate) start: u64,
    pub(crate) rq_wqes: u32,
    pub(crate) rq_stride: u64,
    pub(crate) sq_wqebbs: u32,
    pub(crate) sq_offset: u64,
    /// The SRQ / RMP the QP receives from.
    pub(crate) srq: Option<(ObjectKind, u32)>,
    pub(crate) mtu: u32,
    pub(crate) remote_qpn: u32,
    /// `pm_state` ARMED: an alternate path waits; the requester migrates to it rather than
    /// fail when its retries run out.
    pub(crate) armed: bool,
    pub(crate) rre: bool,
    pub(crate) rwe: bool,
    pub(crate) rae: bool,
    /// `atomic_mode`: 0 (undefined: atomics are refused), 1 IB-spec, 2 CX, 3..=8 extended.
    pub(crate) atomic_mode: u8,
    /// `block_lb_mc`: the multicast this QP sends does not come back to it.
    pub(crate) block_lb_mc: bool,
    /// The XRC domain (XRC QPs: a target takes requests for this domain's XRC SRQs).
    pub(crate) xrcd: u32,
    pub(crate) q_key: u32,
    pub(crate) retry_count: u8,
    pub(crate) rnr_retry: u8,
    pub(crate) min_rnr_nak: u8,
    pub(crate) ack_timeout: u8,
    pub(crate) log_msg_max: u32,
    pub(crate) user_index: u32,
    pub(crate) next_send_psn: u32,
    pub(crate) next_rcv_psn: u32,
    /// The primary path as a route (RC / UC; a DCT connection: back to its initiator).
    pub(crate) route: Route,
    /// A DCT connection seen as the RC responder it runs as (`qpn` the DCT, `remote_qpn` the
    /// initiator's DCI, `st` RC): no QP state of its own to change, its packets DC's.
    pub(crate) dct: bool,
    /// The key of its runtime ([`super::runtime::Runtime::qps`]): the QP number, or a DCT
    /// connection's key ([`super::dc::KEY_BASE`] and up).
    pub(crate) rt_key: u32,
}

impl QpInfo {
    /// Whether the QP is UD.
    pub(crate) fn ud(&self) -> bool {
        self.st == qp_st::UD
    }

    /// Whether the QP is an XRC target (an XRC QP without a send queue).
    pub(crate) fn xrc_target(&self) -> bool {
        self.st == qp_st::XRC && self.sq_wqebbs == 0
    }

    /// The transport service bits of the QP's packets (BTH opcode bits 7:5).
    pub(crate) fn service(&self) -> u8 {
        if self.dct {
            return op::DC;
        }
        match self.st {
            qp_st::DCI => op::DC,
            qp_st::UC => op::UC,
            qp_st::UD => op::UD,
            qp_st::XRC => op::XRC,
            _ => op::RC,
        }
    }

    /// The service type whose ODP capabilities apply: a DCT connection's are DC's.
    pub(crate) fn odp_transport(&self) -> u64 {
        if self.dct {
            qp_st::DCI
        } else {
            self.st
        }
    }

    /// Whether the QP is a DC initiator.
    pub(crate) fn dci(&self) -> bool {
        self.st == qp_st::DCI
    }

    /// The largest message the QP takes: `2^log_msg_max`, literally (0 is one byte), capped at
    /// 2 GiB.
    pub(crate) fn max_msg(&self) -> u64 {
        1u64 << self.log_msg_max.min(31)
    }
}
