//! Connecting a QP in one call: RESET → INIT → RTR → RTS with the attributes a RoCE v2 peer
//! needs, from the two sides' endpoints (what applications exchange out of band).

use super::create::Qp;
use super::modify::{Access, AhAttr, Mtu, QpAttr, QpAttrMask as M};
use super::sizing::QpType;
use super::state::QpState;
use crate::error::Result;
use crate::io::platform::Platform;

/// What a peer needs to know to connect to a QP (exchanged out of band).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct QpEndpoint {
    /// The QP number.
    pub qpn: u32,
    /// Its GID (GID table entry `gid_index` of its port).
    pub gid: [u8; 16],
    /// Its port's MAC (the next hop on a flat network).
    pub mac: [u8; 6],
    /// The first PSN it will send.
    pub psn: u32,
}

/// Transport choices of [`Qp::connect`]; the defaults suit a lossless or lightly lossy fabric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnectOpts {
    /// Path MTU.
    pub mtu: Mtu,
    /// Local GID index.
    pub gid_index: u8,
    /// Remote access rights granted to the peer.
    pub access: Access,
    /// Ack timeout exponent (4.096 µs × 2^timeout).
    pub timeout: u8,
    /// Transport retries.
    pub retry_cnt: u8,
    /// RNR retries (7 = forever).
    pub rnr_retry: u8,
    /// RNR NAK timer code.
    pub min_rnr_timer: u8,
    /// Outstanding READs/atomics, each way.
    pub max_rd_atomic: u8,
    /// Q_Key (UD).
    pub qkey: u32,
    /// IP hop limit.
    pub hop_limit: u8,
    /// IP traffic class.
    pub traffic_class: u8,
    /// The first PSN this QP sends: the `psn` of the endpoint the peer was given (0, as
    /// [`Qp::endpoint`] says, unless the application drew its own, as rdma-core's tools do);
    /// above 24 bits it is refused as `modify` refuses it.
    pub sq_psn: u32,
}

impl Default for ConnectOpts {
    fn default() -> Self {
        Self {
            mtu: Mtu::Mtu1024,
            gid_index: 0,
            access: Access {
                remote_write: true,
                remote_read: true,
                remote_atomic: true,
            },
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            max_rd_atomic: 16,
            qkey: 0x1111_1111,
            hop_limit: 64,
            traffic_class: 0,
            sq_psn: 0,
        }
    }
}

impl<P: Platform> Qp<'_, P> {
    /// This QP's endpoint on GID table entry 0 (first PSN 0).
    pub fn endpoint(&self) -> QpEndpoint {
        let gid = self.dev.gid0().map(|g| g.gid).unwrap_or_default();
        QpEndpoint {
            qpn: self.qpn,
            gid,
            mac: self.dev.vport().mac,
            psn: 0,
        }
    }

    /// RESET → INIT → RTR → RTS towards `remote` (for UD, `remote` is ignored: UD QPs address
    /// each send). Each step is checked as [`Qp::modify`] checks it.
    pub fn connect(&mut self, remote: &QpEndpoint, o: &ConnectOpts) -> Result<()> {
        let t = self.qp_type;
        let access = if t == QpType::Uc {
            Access {
                remote_write: o.access.remote_write,
                ..Access::default()
            }
        } else {
            o.access
        };
        let init = QpAttr {
            qp_state: Some(QpState::Init),
            port_num: self.port,
            access,
            qkey: o.qkey,
            ..QpAttr::default()
        };
        let m = if t.is_datagram() {
            M::QKEY
        } else {
            M::ACCESS_FLAGS
        };
        self.modify(&init, M::STATE | M::PORT | M::PKEY_INDEX | m)?;
        let ah = AhAttr {
            sgid_index: o.gid_index,
            dgid: remote.gid,
            dmac: remote.mac,
            hop_limit: o.hop_limit,
            traffic_class: o.traffic_class,
            ..AhAttr::default()
        };
        let rtr = QpAttr {
            qp_state: Some(QpState::Rtr),
            ah_attr: ah,
            path_mtu: o.mtu,
            dest_qp_num: remote.qpn,
            rq_psn: remote.psn,
            max_dest_rd_atomic: o.max_rd_atomic,
            min_rnr_timer: o.min_rnr_timer,
            ..QpAttr::default()
        };
        let m = match t {
            QpType::Rc => {
                M::AV
                    | M::PATH_MTU
                    | M::DEST_QPN
                    | M::RQ_PSN
                    | M::MAX_DEST_RD_ATOMIC
                    | M::MIN_RNR_TIMER
            }
            QpType::Uc => M::AV | M::PATH_MTU | M::DEST_QPN | M::RQ_PSN,
            QpType::Ud | QpType::Gsi => M::EMPTY,
        };
        self.modify(&rtr, M::STATE | m)?;
        let rts = QpAttr {
            qp_state: Some(QpState::Rts),
            sq_psn: o.sq_psn,
            timeout: o.timeout,
            retry_cnt: o.retry_cnt,
            rnr_retry: o.rnr_retry,
            max_rd_atomic: o.max_rd_atomic,
            ..QpAttr::default()
        };
        let m = match t {
            QpType::Rc => {
                M::SQ_PSN | M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::MAX_QP_RD_ATOMIC
            }
            QpType::Uc | QpType::Ud | QpType::Gsi => M::SQ_PSN,
        };
        self.modify(&rts, M::STATE | m)
    }
}
