//! A QP as the data path sees it ([`QpInfo`], decoded from its context and cached in the
//! runtime until a command could change it), its state, its runtime, the GSI QP, and the
//! addresses its packets carry (source GID, RoCE v1 or v2, UDP source port).

use std::sync::Arc;

use mlx5_ifc::consts::{qp_st, rq_type};
use mlx5_ifc::prm::qp::{Ads, Qpc};
use mlx5_ifc::prm::vport::RoceAddrLayout;
use mlx5_ifc::{Layout, View, ViewMut};

use super::objects::ObjectKind;
use super::qp_info::QpInfo;
use super::runtime::{QpRt, Runtime};
use super::Model;
use crate::fabric::frame::Route;
use crate::memory::queue::queue_start;

impl QpInfo {
    /// The QP `qpn` as the data path sees it, if it is live. Decoded from the context (and
    /// the vport: MAC, GIDs) once, then kept in the engine until something could change it:
    /// every firmware command drops the whole cache ([`Runtime::commanded`]), and a state
    /// change the data path makes itself ([`set_qp_state`]) drops the QP's entry.
    pub(crate) fn load(model: &mut Model, qpn: u32) -> Option<Arc<QpInfo>> {
        if let Some(i) = model.rt.qp_cache.get(&qpn) {
            return Some(i.clone());
        }
        let i = Arc::new(Self::decode(model, qpn)?);
        model.rt.qp_cache.insert(qpn, i.clone());
        Some(i)
    }

    /// The QP `qpn` decoded from its context.
    fn decode(model: &Model, qpn: u32) -> Option<QpInfo> {
        let q = model.objects.queue(ObjectKind::Qp, qpn)?;
        let c = View::<Qpc>::new(&q.ctx).ok()?;
        let a = c.nested(Qpc::PRIMARY_ADDRESS_PATH);
        let regular = c.get(Qpc::RQ_TYPE) == rq_type::REGULAR;
        let rq_stride = 16u64 << c.get(Qpc::LOG_RQ_STRIDE);
        let rq_wqes = if regular {
            1u32 << c.get(Qpc::LOG_RQ_SIZE).min(24)
        } else {
            0
        };
        let no_sq = c.get(Qpc::NO_SQ) == 1;
        let mut rmac = [0u8; 6];
        rmac[..2].copy_from_slice(&(a.get(Ads::RMAC_47_32) as u16).to_be_bytes());
        rmac[2..].copy_from_slice(&(a.get(Ads::RMAC_31_0) as u32).to_be_bytes());
        let mut dgid = [0u8; 16];
        dgid.copy_from_slice(a.bytes(Ads::RGID_RIP));
        let tclass = match a.get(Ads::TCLASS) as u8 {
            0 => (a.get(Ads::DSCP) as u8) << 2,
            t => t,
        };
        let page = 4096u64 << c.get(Qpc::LOG_PAGE_SIZE).min(20);
        let route = if a.get(Ads::FL) == 1 {
            // Force loopback: no addresses — the frames stay in the function.
            let mac = model.vport.mac();
            Route {
                smac: mac,
                dmac: mac,
                hop_limit: 64,
                sport: wire_sport(model, a.get(Ads::UDP_SPORT) as u16, qpn),
                loopback: true,
                ..Route::default()
            }
        } else {
            Route {
                smac: model.vport.source_mac(a.get(Ads::SRC_ADDR_INDEX) as usize),
                dmac: rmac,
                sgid: own_gid(model, a.get(Ads::SRC_ADDR_INDEX) as usize),
                dgid,
                tclass,
                flow_label: a.get(Ads::FLOW_LABEL) as u32,
                hop_limit: a.get(Ads::HOP_LIMIT) as u8,
                sport: wire_sport(model, a.get(Ads::UDP_SPORT) as u16, qpn),
                ip_id: 0,
                v1: gid_is_v1(model, a.get(Ads::SRC_ADDR_INDEX) as usize),
                loopback: false,
            }
        };
        Some(QpInfo {
            qpn,
            st: mlx5_ifc::consts::qp_st::transport(c.get(Qpc::ST)),
            umr: c.get(Qpc::ST) == qp_st::REG_UMR,
            gsi: c.get(Qpc::ST) == qp_st::QP1,
            rra: 1 << c.get(Qpc::LOG_RRA_MAX).min(8),
            state: c.get(Qpc::STATE),
            pd: c.get32(Qpc::PD),
            cqn_snd: c.get32(Qpc::CQN_SND),
            cqn_rcv: c.get32(Qpc::CQN_RCV),
            dbr: c.get(Qpc::DBR_ADDR),
            pas: q.pas.clone(),
            page,
            start: queue_start(page, c.get(Qpc::PAGE_OFFSET)),
            rq_wqes,
            rq_stride,
            sq_wqebbs: if no_sq {
                0
            } else {
                1u32 << c.get(Qpc::LOG_SQ_SIZE).min(24)
            },
            sq_offset: u64::from(rq_wqes) * rq_stride,
            srq: q
                .holds
                .iter()
                .copied()
                .find(|(k, _)| matches!(k, ObjectKind::Srq | ObjectKind::Rmp)),
            // Every transition to RTR checks `mtu` is 1..=5 (BAD_PATH_MTU); the smallest MTU
            // only keeps the arithmetic safe for a context that never got there.
            mtu: match c.get(Qpc::MTU) {
                m @ 1..=5 => 256 << (m - 1),
                _ => 256,
            },
            remote_qpn: c.get32(Qpc::REMOTE_QPN),
            rre: c.get(Qpc::RRE) == 1,
            rwe: c.get(Qpc::RWE) == 1,
            rae: c.get(Qpc::RAE) == 1,
            atomic_mode: c.get(Qpc::ATOMIC_MODE) as u8,
            block_lb_mc: c.get(Qpc::BLOCK_LB_MC) == 1,
            xrcd: c.get32(Qpc::XRCD),
            q_key: c.get32(Qpc::Q_KEY),
            retry_count: c.get(Qpc::RETRY_COUNT) as u8,
            rnr_retry: c.get(Qpc::RNR_RETRY) as u8,
            min_rnr_nak: c.get(Qpc::MIN_RNR_NAK) as u8,
            ack_timeout: a.get(Ads::ACK_TIMEOUT) as u8,
            armed: c.get(Qpc::PM_STATE) == mlx5_ifc::consts::pm_state::ARMED,
            log_msg_max: c.get(Qpc::LOG_MSG_MAX) as u32,
            user_index: c.get32(Qpc::USER_INDEX),
            next_send_psn: c.get32(Qpc::NEXT_SEND_PSN),
            next_rcv_psn: c.get32(Qpc::NEXT_RCV_PSN),
            route,
            dct: false,
            rt_key: qpn,
        })
    }
}

/// Sets the state of QP `qpn` in its context.
pub(crate) fn set_qp_state(model: &mut Model, qpn: u32, state: u64) {
    model.rt.qp_cache.remove(&qpn);
    if let Some(q) = model.objects.queue_mut(ObjectKind::Qp, qpn) {
        if let Ok(mut v) = ViewMut::<Qpc>::new(&mut q.ctx) {
            if let Err(e) = v.set(Qpc::STATE, state) {
                log::error!("mlx5-sim: QP {qpn:#x}: {e}");
            }
        }
    }
}

/// Migrates QP `qpn` to its alternate path (automatic path migration, or software asking for
/// MIGRATED while ARMED): the secondary address path becomes the primary one, `pm_state` becomes
/// MIGRATED, as QUERY_QP then shows.
pub(crate) fn migrate(model: &mut Model, qpn: u32) {
    model.rt.qp_cache.remove(&qpn);
    if let Some(q) = model.objects.queue_mut(ObjectKind::Qp, qpn) {
        if let Ok(mut v) = ViewMut::<Qpc>::new(&mut q.ctx) {
            migrate_ctx(&mut v);
        }
    }
}

/// [`migrate`] on a context image.
pub(crate) fn migrate_ctx(v: &mut ViewMut<'_, Qpc>) {
    let alt = v
        .as_view()
        .nested(Qpc::SECONDARY_ADDRESS_PATH)
        .as_bytes()
        .to_vec();
    let mut primary = v.nested_mut(Qpc::PRIMARY_ADDRESS_PATH);
    let dst = primary.as_bytes();
    // A nested view runs to the end of the context: the path is its first `Ads::BYTES`.
    let n = Ads::BYTES.min(dst.len()).min(alt.len());
    dst[..n].copy_from_slice(&alt[..n]);
    if let Err(e) = v.set(Qpc::PM_STATE, mlx5_ifc::consts::pm_state::MIGRATED) {
        log::error!("mlx5-sim: migrating a QP: {e}");
    }
}

/// The runtime of QP `qpn`, PSNs initialized from its context.
pub(crate) fn qp_rt<'a>(engine: &'a mut Runtime, info: &QpInfo) -> &'a mut QpRt {
    let rt = engine.qps.entry(info.rt_key).or_default();
    if rt.epsn.is_none() {
        rt.epsn = Some(info.next_rcv_psn & 0xff_ffff);
    }
    if rt.next_psn.is_none() {
        rt.next_psn = Some(info.next_send_psn & 0xff_ffff);
    }
    rt
}

/// The state of QP `qpn` as its context holds it now.
pub(crate) fn qp_state_of(model: &Model, qpn: u32) -> Option<u64> {
    let q = model.objects.queue(ObjectKind::Qp, qpn)?;
    View::<Qpc>::new(&q.ctx).ok().map(|v| v.get(Qpc::STATE))
}

/// The live QP1 (GSI QP), the one RoCE packets to QP number 1 go to.
pub(crate) fn gsi_qp(model: &Model) -> Option<u32> {
    model.objects.queues(ObjectKind::Qp).into_iter().find(|&n| {
        model
            .objects
            .queue(ObjectKind::Qp, n)
            .and_then(|q| View::<Qpc>::new(&q.ctx).ok())
            .is_some_and(|v| v.get(Qpc::ST) == qp_st::QP1)
    })
}

/// The source GID of RoCE address `index` (zeros if unset or out of the table).
pub(crate) fn own_gid(model: &Model, index: usize) -> [u8; 16] {
    let mut g = [0u8; 16];
    if let Some(entry) = model.vport.gid(index) {
        if let Ok(v) = View::<RoceAddrLayout>::new(entry) {
            g.copy_from_slice(v.bytes(RoceAddrLayout::SOURCE_L3_ADDRESS));
        }
    }
    g
}

/// Whether GID table entry `index` is a RoCE (v1) GID: set (not all zero) with `roce_version`
/// 0. Its QPs' frames then go out as RoCE v1 ([`crate::fabric::frame`]).
pub(crate) fn gid_is_v1(model: &Model, index: usize) -> bool {
    model.vport.gid(index).is_some_and(|entry| {
        entry.iter().any(|&b| b != 0)
            && View::<RoceAddrLayout>::new(entry)
                .is_ok_and(|v| v.get(RoceAddrLayout::ROCE_VERSION) == 0)
    })
}

/// The UDP source port of a RoCE v2 packet of QP `qpn`: the one software gave (`ads.udp_sport`,
/// the UD address vector's `rlid`) when `roce_cap.sw_r_roce_src_udp_port` is set — literally,
/// even 0 — else the firmware's own choice in the dynamic range 0xc000..=0xffff.
pub(crate) fn wire_sport(model: &Model, given: u16, qpn: u32) -> u16 {
    let sw = View::<mlx5_ifc::prm::caps::RoceCap>::new(&model.cur_roce)
        .is_ok_and(|v| v.get(mlx5_ifc::prm::caps::RoceCap::SW_R_ROCE_SRC_UDP_PORT) == 1);
    if sw {
        given
    } else {
        0xc000 | ((qpn ^ (qpn >> 14)) & 0x3fff) as u16
    }
}
