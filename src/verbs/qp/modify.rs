//! `modify_qp`: the QP state machine (RST → INIT → RTR → RTS, RTS → RTS, any → ERR, any → RST)
//! with what each transition needs for RoCE v2.
//!
//! The driver checks a transition against the verbs table (which attributes are required and
//! which are allowed, per transition and QP type) and the attribute values against the device
//! before it issues any command, and names what is wrong. The firmware checks again.

use mlx5_ifc::consts::pm_state;
use mlx5_ifc::consts::qp_opt_param as optpar;
use mlx5_ifc::prm::qp::{
    Ads, Init2initQpIn, Init2initQpOut, Init2rtrQpIn, Init2rtrQpOut, Qp2errIn, Qp2errOut, Qp2rstIn,
    Qp2rstOut, Qpc, QueryQpIn, QueryQpOut, Rst2initQpIn, Rst2initQpOut, Rtr2rtsQpIn, Rtr2rtsQpOut,
    Rts2rtsQpIn, Rts2rtsQpOut,
};
use mlx5_ifc::{Field, Layout, Nested, Opcode, ViewMut};

use super::create::Qp;
use super::sizing::QpType;
use super::state::QpState;
use crate::error::{AttrProblem, Error, Result};
use crate::fw::cmd::run;
use crate::io::platform::Platform;

/// `log_msg_max` of every UD transition: a datagram is at most one 4 KiB MTU.
const UD_LOG_MSG_MAX: u64 = 12;
/// QP1's largest message, 2^8: a MAD (Linux writes `log_msg_max` 8 for the GSI QP).
const GSI_LOG_MSG_MAX: u64 = 8;
/// `qpc.log_ack_req_freq` of every transition: Linux's `MLX5_IB_ACK_REQ_FREQ`.
const LOG_ACK_REQ_FREQ: u64 = 8;

/// Which attributes of a [`QpAttr`] a `modify_qp` call sets (`enum ibv_qp_attr_mask`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct QpAttrMask(u32);

macro_rules! attr_masks {
    ($($name:ident = $bit:expr, $text:expr;)*) => {
        impl QpAttrMask {
            $(#[doc = concat!("`", $text, "`.")] pub const $name: Self = Self(1 << $bit);)*
            const NAMES: &'static [(u32, &'static str)] = &[$((1 << $bit, $text),)*];
        }
    };
}

attr_masks! {
    STATE = 0, "qp_state";
    ACCESS_FLAGS = 3, "qp_access_flags";
    PKEY_INDEX = 4, "pkey_index";
    PORT = 5, "port_num";
    QKEY = 6, "qkey";
    AV = 7, "ah_attr";
    PATH_MTU = 8, "path_mtu";
    TIMEOUT = 9, "timeout";
    RETRY_CNT = 10, "retry_cnt";
    RNR_RETRY = 11, "rnr_retry";
    RQ_PSN = 12, "rq_psn";
    MAX_QP_RD_ATOMIC = 13, "max_rd_atomic";
    MIN_RNR_TIMER = 15, "min_rnr_timer";
    SQ_PSN = 16, "sq_psn";
    MAX_DEST_RD_ATOMIC = 17, "max_dest_rd_atomic";
    DEST_QPN = 20, "dest_qp_num";
}

impl QpAttrMask {
    /// No attribute.
    pub const EMPTY: Self = Self(0);
    /// Union.
    pub const fn union(self, o: Self) -> Self {
        Self(self.0 | o.0)
    }
    /// Whether all of `o` is set.
    pub const fn contains(self, o: Self) -> bool {
        self.0 & o.0 == o.0
    }
    const fn minus(self, o: Self) -> Self {
        Self(self.0 & !o.0)
    }
    /// The name of the lowest attribute in the set.
    pub(crate) fn first_name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(b, _)| self.0 & b != 0)
            .map_or("?", |&(_, n)| n)
    }
}

impl core::ops::BitOr for QpAttrMask {
    type Output = Self;
    fn bitor(self, o: Self) -> Self {
        self.union(o)
    }
}

/// Remote access rights of a QP (`qp_access_flags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access {
    /// Remote RDMA WRITE.
    pub remote_write: bool,
    /// Remote RDMA READ.
    pub remote_read: bool,
    /// Remote atomics.
    pub remote_atomic: bool,
}

/// Path MTU (`enum ibv_mtu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Mtu {
    /// 256 bytes.
    Mtu256 = 1,
    /// 512 bytes.
    Mtu512 = 2,
    /// 1024 bytes.
    #[default]
    Mtu1024 = 3,
    /// 2048 bytes.
    Mtu2048 = 4,
    /// 4096 bytes.
    Mtu4096 = 5,
}

/// The RoCE v2 address of the remote side (`struct ibv_ah_attr` with its GRH).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AhAttr {
    /// Local GID table index (source address).
    pub sgid_index: u8,
    /// Remote GID (IPv6, or IPv4-mapped).
    pub dgid: [u8; 16],
    /// Next-hop MAC of the remote side.
    pub dmac: [u8; 6],
    /// IP hop limit (TTL).
    pub hop_limit: u8,
    /// IP traffic class (DSCP << 2 | ECN).
    pub traffic_class: u8,
    /// IPv6 flow label (20 bits); also seeds the UDP source port.
    pub flow_label: u32,
    /// Service level (802.1p priority on Ethernet).
    pub sl: u8,
}

/// Attributes of `modify_qp` (`struct ibv_qp_attr`); which are used is said by a [`QpAttrMask`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct QpAttr {
    /// The state to move to.
    pub qp_state: Option<QpState>,
    /// Remote access rights (RC: all three; UC: write only).
    pub access: Access,
    /// P_Key index (0 on Ethernet).
    pub pkey_index: u16,
    /// Port (1).
    pub port_num: u8,
    /// Q_Key (UD).
    pub qkey: u32,
    /// Remote address (RC, UC).
    pub ah_attr: AhAttr,
    /// Path MTU (RC, UC).
    pub path_mtu: Mtu,
    /// Local ACK timeout exponent (4.096 µs × 2^timeout), 0..=31.
    pub timeout: u8,
    /// Transport retries, 0..=7.
    pub retry_cnt: u8,
    /// RNR retries, 0..=7 (7 = infinite).
    pub rnr_retry: u8,
    /// Receive PSN (24 bits).
    pub rq_psn: u32,
    /// Outstanding RDMA READ/atomic as initiator.
    pub max_rd_atomic: u8,
    /// Minimum RNR NAK timer code, 0..=31.
    pub min_rnr_timer: u8,
    /// Send PSN (24 bits).
    pub sq_psn: u32,
    /// Outstanding RDMA READ/atomic as responder.
    pub max_dest_rd_atomic: u8,
    /// Remote QP number (RC, UC).
    pub dest_qp_num: u32,
}

type M = QpAttrMask;

/// (required, optional) attributes of a transition for a QP type, per the verbs table. `None`:
/// the transition does not exist.
fn table(t: QpType, from: QpState, to: QpState) -> Option<(M, M)> {
    use QpState::{Init, Reset, Rtr, Rts};
    let st = M::STATE;
    let none = QpAttrMask::EMPTY;
    Some(match (from, to, t) {
        (_, Reset, _) | (_, QpState::Err, _) => (st, none),
        (Reset, Init, QpType::Ud | QpType::Gsi) => (st | M::PKEY_INDEX | M::PORT | M::QKEY, none),
        (Reset, Init, _) => (st | M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS, none),
        (Init, Init, QpType::Ud | QpType::Gsi) => (st, M::PKEY_INDEX | M::PORT | M::QKEY),
        (Init, Init, _) => (st, M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS),
        (Init, Rtr, QpType::Ud | QpType::Gsi) => (st, M::PKEY_INDEX | M::QKEY),
        (Init, Rtr, QpType::Uc) => (
            st | M::AV | M::PATH_MTU | M::DEST_QPN | M::RQ_PSN,
            M::ACCESS_FLAGS | M::PKEY_INDEX,
        ),
        (Init, Rtr, QpType::Rc) => (
            st | M::AV
                | M::PATH_MTU
                | M::DEST_QPN
                | M::RQ_PSN
                | M::MAX_DEST_RD_ATOMIC
                | M::MIN_RNR_TIMER,
            M::ACCESS_FLAGS | M::PKEY_INDEX,
        ),
        (Rtr, Rts, QpType::Ud | QpType::Gsi) => (st | M::SQ_PSN, M::QKEY),
        (Rtr, Rts, QpType::Uc) => (st | M::SQ_PSN, M::ACCESS_FLAGS),
        (Rtr, Rts, QpType::Rc) => (
            st | M::SQ_PSN | M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::MAX_QP_RD_ATOMIC,
            M::ACCESS_FLAGS | M::MIN_RNR_TIMER,
        ),
        (Rts, Rts, QpType::Ud | QpType::Gsi) => (st, M::QKEY),
        (Rts, Rts, QpType::Uc) => (st, M::ACCESS_FLAGS),
        (Rts, Rts, QpType::Rc) => (st, M::ACCESS_FLAGS | M::MIN_RNR_TIMER),
        _ => return None,
    })
}

/// The modify commands share one shape: qpn, opt_param_mask, qpc.
trait ModifyCmd: Layout + Sized {
    type Out: Layout;
    const OP: Opcode;
    const QPN: Field<Self>;
    const MASK: Field<Self>;
    const QPC: Nested<Self, Qpc>;
}

macro_rules! modify_cmd {
    ($in:ident, $out:ident, $op:ident) => {
        impl ModifyCmd for $in {
            type Out = $out;
            const OP: Opcode = Opcode::$op;
            const QPN: Field<Self> = $in::QPN;
            const MASK: Field<Self> = $in::OPT_PARAM_MASK;
            const QPC: Nested<Self, Qpc> = $in::QPC;
        }
    };
}
modify_cmd!(Rst2initQpIn, Rst2initQpOut, Rst2InitQp);
modify_cmd!(Init2initQpIn, Init2initQpOut, Init2InitQp);
modify_cmd!(Init2rtrQpIn, Init2rtrQpOut, Init2RtrQp);
modify_cmd!(Rtr2rtsQpIn, Rtr2rtsQpOut, Rtr2RtsQp);
modify_cmd!(Rts2rtsQpIn, Rts2rtsQpOut, Rts2RtsQp);

impl<P: Platform> Qp<'_, P> {
    fn arg(&self, field: &'static str, requested: u64, max: u64, limit: &'static str) -> Error {
        Error::InvalidArgument {
            op: "modify_qp",
            field,
            requested,
            max,
            limit,
        }
    }

    /// Checks values against the device before anything is sent.
    fn check_values(&self, a: &QpAttr, mask: QpAttrMask) -> Result<()> {
        let caps = self.dev.caps();
        let max24 = 0xff_ffff;
        let checks: [(QpAttrMask, &'static str, u64, u64, &'static str); 10] = [
            (
                M::PORT,
                "port_num",
                u64::from(a.port_num),
                u64::from(caps.num_ports().max(1)),
                "num_ports (ports count from 1)",
            ),
            (
                M::PKEY_INDEX,
                "pkey_index",
                u64::from(a.pkey_index),
                0,
                "Ethernet ports have one P_Key",
            ),
            (
                M::DEST_QPN,
                "dest_qp_num",
                u64::from(a.dest_qp_num),
                max24,
                "24-bit QP numbers",
            ),
            (
                M::RQ_PSN,
                "rq_psn",
                u64::from(a.rq_psn),
                max24,
                "24-bit PSNs",
            ),
            (
                M::SQ_PSN,
                "sq_psn",
                u64::from(a.sq_psn),
                max24,
                "24-bit PSNs",
            ),
            (
                M::TIMEOUT,
                "timeout",
                u64::from(a.timeout),
                31,
                "5-bit ack timeout exponent",
            ),
            (
                M::RETRY_CNT,
                "retry_cnt",
                u64::from(a.retry_cnt),
                7,
                "3-bit retry count",
            ),
            (
                M::RNR_RETRY,
                "rnr_retry",
                u64::from(a.rnr_retry),
                7,
                "3-bit RNR retry count",
            ),
            (
                M::MIN_RNR_TIMER,
                "min_rnr_timer",
                u64::from(a.min_rnr_timer),
                31,
                "5-bit RNR timer code",
            ),
            (
                M::MAX_QP_RD_ATOMIC,
                "max_rd_atomic",
                u64::from(a.max_rd_atomic),
                1 << caps.log_max_ra_req_qp(),
                "log_max_ra_req_qp",
            ),
        ];
        for (m, field, v, max, limit) in checks {
            if mask.contains(m) && v > max {
                return Err(self.arg(field, v, max, limit));
            }
        }
        if mask.contains(M::PORT) && a.port_num == 0 {
            return Err(self.arg("port_num", 0, 1, "ports count from 1"));
        }
        if mask.contains(M::MAX_DEST_RD_ATOMIC)
            && u64::from(a.max_dest_rd_atomic) > 1 << caps.log_max_ra_res_qp()
        {
            let max = 1 << caps.log_max_ra_res_qp();
            return Err(self.arg(
                "max_dest_rd_atomic",
                u64::from(a.max_dest_rd_atomic),
                max,
                "log_max_ra_res_qp",
            ));
        }
        if mask.contains(M::AV) {
            let gids = u64::from(caps.roce_address_table_size());
            if u64::from(a.ah_attr.sgid_index) >= gids {
                return Err(self.arg(
                    "ah_attr.sgid_index",
                    u64::from(a.ah_attr.sgid_index),
                    gids.saturating_sub(1),
                    "roce_address_table_size",
                ));
            }
            if self.dev.gid(u16::from(a.ah_attr.sgid_index)).is_none() {
                return Err(self.arg(
                    "ah_attr.sgid_index",
                    u64::from(a.ah_attr.sgid_index),
                    0,
                    "a GID table entry that is set (Device::set_gid)",
                ));
            }
            if a.ah_attr.dmac == [0; 6] {
                return Err(self.arg(
                    "ah_attr.dmac",
                    0,
                    0,
                    "RoCE needs the next hop's MAC (not 00:00:00:00:00:00)",
                ));
            }
            if a.ah_attr.flow_label > 0xf_ffff {
                return Err(self.arg(
                    "ah_attr.flow_label",
                    u64::from(a.ah_attr.flow_label),
                    0xf_ffff,
                    "20-bit flow label",
                ));
            }
        }
        if mask.contains(M::ACCESS_FLAGS)
            && self.qp_type == QpType::Uc
            && (a.access.remote_read || a.access.remote_atomic)
        {
            return Err(self.arg("qp_access_flags", 1, 0, "UC QPs take remote write only"));
        }
        if mask.contains(M::ACCESS_FLAGS)
            && self.qp_type == QpType::Rc
            && a.access.remote_atomic
            && self.dev.caps().atomic_mode().is_none()
        {
            return Err(self.arg(
                "qp_access_flags.remote_atomic",
                1,
                0,
                "the device does no atomics (atomic_caps: no compare-and-swap and fetch-and-add)",
            ));
        }
        Ok(())
    }

    /// Moves the QP to `attr.qp_state` (`ibv_modify_qp`), setting the attributes in `mask`.
    pub fn modify(&mut self, attr: &QpAttr, mask: QpAttrMask) -> Result<()> {
        let from = self.state;
        let Some(to) = attr.qp_state.filter(|_| mask.contains(M::STATE)) else {
            return Err(Error::QpAttr {
                qpn: self.qpn,
                from,
                to: from,
                attr: "qp_state",
                problem: AttrProblem::Missing,
            });
        };
        let Some((required, optional)) = table(self.qp_type, from, to) else {
            return Err(Error::QpTransition {
                qpn: self.qpn,
                from,
                to,
            });
        };
        let missing = required.minus(mask);
        if missing != QpAttrMask::EMPTY {
            return Err(Error::QpAttr {
                qpn: self.qpn,
                from,
                to,
                attr: missing.first_name(),
                problem: AttrProblem::Missing,
            });
        }
        let extra = mask.minus(required).minus(optional);
        if extra != QpAttrMask::EMPTY {
            return Err(Error::QpAttr {
                qpn: self.qpn,
                from,
                to,
                attr: extra.first_name(),
                problem: AttrProblem::NotAllowed,
            });
        }
        self.check_values(attr, mask)?;
        let opt = mask.minus(required);
        use QpState::{Init, Reset, Rtr, Rts};
        match (from, to) {
            (_, Reset) => self.simple::<Qp2rstIn, Qp2rstOut>(Opcode::Qp2Rst, Qp2rstIn::QPN)?,
            (_, QpState::Err) => {
                self.simple::<Qp2errIn, Qp2errOut>(Opcode::Qp2Err, Qp2errIn::QPN)?
            }
            (Reset, Init) => self.transition::<Rst2initQpIn>(attr, mask, opt)?,
            (Init, Init) => self.transition::<Init2initQpIn>(attr, mask, opt)?,
            (Init, Rtr) => self.transition::<Init2rtrQpIn>(attr, mask, opt)?,
            (Rtr, Rts) => self.transition::<Rtr2rtsQpIn>(attr, mask, opt)?,
            (Rts, Rts) => self.transition::<Rts2rtsQpIn>(attr, mask, opt)?,
            _ => {
                return Err(Error::QpTransition {
                    qpn: self.qpn,
                    from,
                    to,
                })
            }
        }
        if mask.contains(M::PORT) {
            self.port = attr.port_num;
        }
        if to == QpState::Reset {
            // No CQE of this incarnation may be read against the rings started anew.
            self.clean_cqs()?;
            self.reset_rings();
        }
        self.state = to;
        Ok(())
    }

    fn simple<I: Layout, O: Layout>(&self, op: Opcode, qpn: Field<I>) -> Result<()> {
        let n = u64::from(self.qpn);
        self.dev.with_cmd(|cmd, p| {
            run::<I, O, _, _>(cmd, p, op, 0, |v| {
                v.set(qpn, n).map(drop).map_err(Error::from)
            })
            .map(drop)
        })
    }

    fn transition<C: ModifyCmd>(
        &self,
        a: &QpAttr,
        mask: QpAttrMask,
        opt: QpAttrMask,
    ) -> Result<()> {
        let t = self.qp_type;
        let log_msg_max = u64::from(self.dev.caps().log_max_msg());
        let atomic_mode = self.dev.caps().atomic_mode();
        let qpn = self.qpn;
        let mut bits = 0u32;
        let fill = |v: &mut ViewMut<'_, C>| -> Result<()> {
            v.set(C::QPN, u64::from(qpn))?;
            let mut c = v.nested_mut(C::QPC);
            // No alternate path: MIGRATED in every transition, as Linux's modify does (and
            // rdma-core's dr_devx, mlx5vf and UCX in RST2INIT).
            c.set(Qpc::PM_STATE, pm_state::MIGRATED)?;
            // The service type and an ACK request every 2^8 packets of a message, in every
            // transition, as Linux's `__mlx5_ib_modify_qp` writes them (`MLX5_IB_ACK_REQ_FREQ`;
            // the differential against rdma-core found both missing).
            c.set(Qpc::ST, super::create::st_of(t))?
                .set(Qpc::LOG_ACK_REQ_FREQ, LOG_ACK_REQ_FREQ)?;
            if t == QpType::Ud {
                // UD messages are at most one MTU: Linux writes 4096 and 2^12 on every UD
                // transition; the port's MTU still bounds what goes on the wire.
                c.set(Qpc::MTU, Mtu::Mtu4096 as u64)?
                    .set(Qpc::LOG_MSG_MAX, UD_LOG_MSG_MAX)?;
            } else if t == QpType::Gsi {
                // QP1 carries 256-byte MADs: Linux's modify writes MTU 256 and 2^8 for it
                // (docs/rdma-cm-facts.md §1.2).
                c.set(Qpc::MTU, Mtu::Mtu256 as u64)?
                    .set(Qpc::LOG_MSG_MAX, GSI_LOG_MSG_MAX)?;
            }
            if mask.contains(M::ACCESS_FLAGS) {
                let rw = a.access.remote_write;
                let (rr, ra) = if t == QpType::Rc {
                    (a.access.remote_read, a.access.remote_atomic)
                } else {
                    (false, false)
                };
                c.set(Qpc::RWE, u64::from(rw))?
                    .set(Qpc::RRE, u64::from(rr))?
                    .set(Qpc::RAE, u64::from(ra))?;
                if ra {
                    // Checked in check_values: a device without atomics refuses RAE first.
                    c.set(Qpc::ATOMIC_MODE, u64::from(atomic_mode.unwrap_or(0)))?;
                }
                if opt.contains(M::ACCESS_FLAGS) {
                    bits |= optpar::RWE
                        | if t == QpType::Rc {
                            optpar::RRE | optpar::RAE
                        } else {
                            0
                        };
                }
            }
            if mask.contains(M::QKEY) {
                c.set(Qpc::Q_KEY, u64::from(a.qkey))?;
                if opt.contains(M::QKEY) {
                    bits |= optpar::Q_KEY;
                }
            }
            if mask.contains(M::PATH_MTU) {
                c.set(Qpc::MTU, a.path_mtu as u64)?
                    .set(Qpc::LOG_MSG_MAX, log_msg_max)?;
            }
            if mask.contains(M::DEST_QPN) {
                c.set(Qpc::REMOTE_QPN, u64::from(a.dest_qp_num))?;
            }
            if mask.contains(M::RQ_PSN) {
                c.set(Qpc::NEXT_RCV_PSN, u64::from(a.rq_psn))?;
            }
            if mask.contains(M::SQ_PSN) {
                c.set(Qpc::NEXT_SEND_PSN, u64::from(a.sq_psn))?;
            }
            if mask.contains(M::MAX_DEST_RD_ATOMIC) {
                // ⌈log2⌉: never fewer responder resources than asked. Linux rounds up again
                // since 6.12 ("Round max_rd_atomic/max_dest_rd_atomic up instead of down"),
                // 5.x–6.11 and UCX rounded down: a peer's requester sized by either rule for
                // the same n stays within what this responder accepts.
                c.set(
                    Qpc::LOG_RRA_MAX,
                    u64::from(crate::fw::queue::ceil_log2(u64::from(a.max_dest_rd_atomic))),
                )?;
            }
            if mask.contains(M::MAX_QP_RD_ATOMIC) {
                // ⌊log2⌋: never more READs/atomics outstanding than asked, so a peer's
                // responder sized for n by either rule (⌊⌋ or ⌈⌉) takes them all.
                c.set(Qpc::LOG_SRA_MAX, floor_log2(a.max_rd_atomic))?;
            }
            if mask.contains(M::RETRY_CNT) {
                c.set(Qpc::RETRY_COUNT, u64::from(a.retry_cnt))?;
            }
            if mask.contains(M::RNR_RETRY) {
                c.set(Qpc::RNR_RETRY, u64::from(a.rnr_retry))?;
            }
            if mask.contains(M::MIN_RNR_TIMER) {
                c.set(Qpc::MIN_RNR_NAK, u64::from(a.min_rnr_timer))?;
                if opt.contains(M::MIN_RNR_TIMER) {
                    bits |= optpar::RNR_TIMEOUT;
                }
            }
            let mut path = c.nested_mut(Qpc::PRIMARY_ADDRESS_PATH);
            if mask.contains(M::PKEY_INDEX) {
                path.set(Ads::PKEY_INDEX, u64::from(a.pkey_index))?;
                if opt.contains(M::PKEY_INDEX) {
                    bits |= optpar::PKEY_INDEX;
                }
            }
            if mask.contains(M::PORT) {
                path.set(Ads::VHCA_PORT_NUM, u64::from(a.port_num))?;
                if opt.contains(M::PORT) {
                    bits |= optpar::PRI_PORT;
                }
            }
            if mask.contains(M::TIMEOUT) {
                path.set(Ads::ACK_TIMEOUT, u64::from(a.timeout))?;
            }
            if mask.contains(M::AV) {
                let ah = &a.ah_attr;
                path.set(Ads::SRC_ADDR_INDEX, u64::from(ah.sgid_index))?;
                path.set(Ads::HOP_LIMIT, u64::from(ah.hop_limit))?;
                path.set(Ads::TCLASS, u64::from(ah.traffic_class))?;
                path.set(Ads::DSCP, u64::from(ah.traffic_class >> 2))?;
                path.set(Ads::FLOW_LABEL, u64::from(ah.flow_label))?;
                path.set_bytes(Ads::RGID_RIP, &ah.dgid)?;
                path.set(
                    Ads::RMAC_47_32,
                    u64::from(u16::from_be_bytes([ah.dmac[0], ah.dmac[1]])),
                )?;
                path.set(
                    Ads::RMAC_31_0,
                    u64::from(u32::from_be_bytes([
                        ah.dmac[2], ah.dmac[3], ah.dmac[4], ah.dmac[5],
                    ])),
                )?;
                path.set(Ads::ETH_PRIO, u64::from(ah.sl & 7))?;
                path.set(
                    Ads::UDP_SPORT,
                    u64::from(crate::verbs::wqe::roce_sport(
                        qpn,
                        a.dest_qp_num,
                        ah.flow_label,
                    )),
                )?;
                path.set(Ads::VHCA_PORT_NUM, u64::from(self.port))?;
            }
            v.set(C::MASK, u64::from(bits))?;
            Ok(())
        };
        self.dev
            .with_cmd(|cmd, p| run::<C, C::Out, _, _>(cmd, p, C::OP, 0, fill).map(drop))
    }

    /// QUERY_QP: the state and the main attributes as the device holds them.
    pub fn query(&self) -> Result<QpQuery> {
        let n = u64::from(self.qpn);
        self.dev.with_cmd(|cmd, p| {
            let out = run::<QueryQpIn, QueryQpOut, _, _>(cmd, p, Opcode::QueryQp, 0, |v| {
                v.set(QueryQpIn::QPN, n)?;
                Ok(())
            })?;
            let v = out.view()?;
            let c = v.nested(QueryQpOut::QPC);
            let raw = c.get(Qpc::STATE);
            let state = QpState::from_hw(raw).ok_or(Error::BadDeviceValue {
                what: "QUERY_QP state",
                value: raw,
                limit: 7,
            })?;
            Ok(QpQuery {
                state,
                remote_qpn: c.get(Qpc::REMOTE_QPN) as u32,
                next_send_psn: c.get(Qpc::NEXT_SEND_PSN) as u32,
                next_rcv_psn: c.get(Qpc::NEXT_RCV_PSN) as u32,
                mtu: c.get(Qpc::MTU) as u8,
                q_key: c.get(Qpc::Q_KEY) as u32,
                log_sq_size: c.get(Qpc::LOG_SQ_SIZE) as u8,
                log_rq_size: c.get(Qpc::LOG_RQ_SIZE) as u8,
            })
        })
    }
}

/// What QUERY_QP reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpQuery {
    /// Current state.
    pub state: QpState,
    /// Destination QP number.
    pub remote_qpn: u32,
    /// Next send PSN.
    pub next_send_psn: u32,
    /// Next expected receive PSN.
    pub next_rcv_psn: u32,
    /// Path MTU code.
    pub mtu: u8,
    /// Q_Key.
    pub q_key: u32,
    /// log2 of the SQ WQEBBs.
    pub log_sq_size: u8,
    /// log2 of the RQ WQEs.
    pub log_rq_size: u8,
}

/// `⌊log2(n)⌋` (0 for n ≤ 1): the `log_sra_max`/`log_rra_max` of a verbs count.
fn floor_log2(n: u8) -> u64 {
    u64::from(n.checked_ilog2().unwrap_or(0))
}
