//! The QP state machine: RST2INIT, INIT2INIT, INIT2RTR, RTR2RTS, RTS2RTS, 2ERR, 2RST.
//!
//! Every transition checks, in order: the QP is live (BAD_RES UNKNOWN_QP); it is in the state
//! the transition starts from (BAD_RES_STATE QP_WRONG_STATE; 2ERR and 2RST start anywhere);
//! `opt_param_mask` has only bits the transition takes (BAD_PARAM BAD_OPT_PARAM_MASK); then the
//! transition's own checks. A refused transition changes nothing.
//!
//! | transition | from | applies (always) | optional bits taken |
//! |---|---|---|---|
//! | RST2INIT | RST | path `pkey_index` (0 on Ethernet, BAD_PKEY_INDEX), `vhca_port_num` (must be 1, BAD_QP_PORT); `pm_state` (the QP is MIGRATED: no alternate path can be armed yet, so ARMED and REARM leave it so; the reserved 2 is BAD_PM_STATE); `rre`/`rwe`/`rae` (with `rae`, `atomic_mode` at most 8, BAD_ATOMIC_MODE); UD: `q_key` | none |
//! | INIT2INIT | INIT | — | RRE RAE RWE PKEY_INDEX PRI_PORT Q_KEY |
//! | INIT2RTR | INIT | RC/UC: `mtu` (1..=5, BAD_PATH_MTU), `log_msg_max` (≤ `log_max_msg`, MSG_MAX_TOO_BIG), `remote_qpn` (≥ 2, BAD_REMOTE_QPN), `next_rcv_psn`, the primary path's RoCE fields (`rmac` nonzero, MISSING_RMAC; `src_addr_index` inside the RoCE address table, QP_GID_INDEX, and a set entry, QP_GID_NOT_SET); RC also `log_rra_max` (≤ `log_max_ra_res_qp`, RRA_MAX_TOO_BIG), `min_rnr_nak`; DCI: `mtu` and `log_msg_max` only (no path, no remote QP); UD: nothing | ALT_ADDR_PATH RRE RAE RWE PKEY_INDEX Q_KEY |
//! | RTR2RTS | RTR | `next_send_psn`; RC and DCI also `retry_count`, `rnr_retry`, `log_sra_max` (≤ `log_max_ra_req_qp`, a DCI's `log_max_ra_req_dc`, SRA_MAX_TOO_BIG), path `ack_timeout` | ALT_ADDR_PATH RRE RAE RWE PM_STATE RNR_TIMEOUT Q_KEY |
//! | RTS2RTS | RTS | — | ALT_ADDR_PATH RRE RAE RWE PM_STATE RNR_TIMEOUT Q_KEY PRIMARY_ADDR_PATH ACK_TIMEOUT |
//! | every UD transition (not 2ERR/2RST) | | `mtu` (1..=5, BAD_PATH_MTU), `log_msg_max` (≤ `log_max_msg`, MSG_MAX_TOO_BIG) | |
//! | 2ERR | any | — | — |
//! | 2RST | any | the work queue counters and PSN bookkeeping reset; buffers and attributes kept | — |
//!
//! Optional bits apply: RRE/RAE/RWE the access flag (RAE with `atomic_mode`), PKEY_INDEX and
//! PRI_PORT the path field (same checks as RST2INIT), Q_KEY `q_key`, RNR_TIMEOUT
//! `min_rnr_nak`, ACK_TIMEOUT and PRIMARY_ADDR_PATH the path `ack_timeout`, ALT_ADDR_PATH the
//! whole secondary path, and PM_STATE the path migration state (after the secondary path):
//! REARM or ARMED arms the alternate path — its RoCE fields checked as the primary path's — and
//! reads back ARMED; MIGRATED while ARMED migrates at once (the secondary path becomes the
//! primary one); otherwise only the current state (BAD_PM_STATE). An ARMED RC QP whose retries
//! run out migrates by itself ([`crate::engine`]'s ack timer: a PATH_MIG event, the retries start
//! again on the new path). Access flags a service type lacks — `rre`/`rae` on UC,
//! any on UD — are refused when set (QP_ACCESS_NOT_SUPPORTED).

use mlx5_ifc::consts::{atomic_mode, pm_state, port_type, qp_opt_param as opt, qp_st, qp_state};
use mlx5_ifc::prm::caps::{CmdHcaCap, RoceCap};
use mlx5_ifc::prm::qp::{
    Ads, Init2initQpIn, Init2rtrQpIn, Qp2errIn, Qp2rstIn, Qpc, Rst2initQpIn, Rtr2rtsQpIn,
    Rts2rtsQpIn,
};
use mlx5_ifc::{CmdStatus, Field, Layout, View, ViewMut};

use super::cmd::{bad_param, encoded, fail, input, CmdResult, Env, Req};
use super::qp::copy;
use super::queue;
use crate::model::objects::ObjectKind;
use crate::model::Model;
use crate::syndrome as syn;

type Apply = fn(&Model, &mut ViewMut<'_, Qpc>, &View<'_, Qpc>, u64, u32) -> CmdResult;

/// One modify-QP command.
struct Transition {
    /// The states it starts from (empty: any).
    from: &'static [u64],
    to: u64,
    /// The `opt_param_mask` bits it takes.
    optional: u32,
    apply: Apply,
}

const ACCESS: u32 = opt::RRE | opt::RAE | opt::RWE;

const RST2INIT: Transition = Transition {
    from: &[qp_state::RST],
    to: qp_state::INIT,
    optional: 0,
    apply: rst2init,
};
const INIT2INIT: Transition = Transition {
    from: &[qp_state::INIT],
    to: qp_state::INIT,
    optional: ACCESS | opt::PKEY_INDEX | opt::PRI_PORT | opt::Q_KEY,
    apply: optional,
};
const INIT2RTR: Transition = Transition {
    from: &[qp_state::INIT],
    to: qp_state::RTR,
    optional: opt::ALT_ADDR_PATH | ACCESS | opt::PKEY_INDEX | opt::Q_KEY,
    apply: init2rtr,
};
const RTR2RTS: Transition = Transition {
    from: &[qp_state::RTR],
    to: qp_state::RTS,
    optional: opt::ALT_ADDR_PATH | ACCESS | opt::PM_STATE | opt::RNR_TIMEOUT | opt::Q_KEY,
    apply: rtr2rts,
};
const RTS2RTS: Transition = Transition {
    from: &[qp_state::RTS],
    to: qp_state::RTS,
    optional: opt::ALT_ADDR_PATH
        | ACCESS
        | opt::PM_STATE
        | opt::RNR_TIMEOUT
        | opt::Q_KEY
        | opt::PRIMARY_ADDR_PATH
        | opt::ACK_TIMEOUT,
    apply: optional,
};

/// The primary path fields INIT2RTR programs (RoCE addressing; not `pkey_index`,
/// `vhca_port_num` or `ack_timeout`).
const RTR_PATH: &[Field<Ads>] = &[
    Ads::FL,
    Ads::FREE_AR,
    Ads::GRH,
    Ads::MLID,
    Ads::RLID,
    Ads::SRC_ADDR_INDEX,
    Ads::STAT_RATE,
    Ads::HOP_LIMIT,
    Ads::TCLASS,
    Ads::FLOW_LABEL,
    Ads::F_DSCP,
    Ads::F_ECN,
    Ads::F_ETH_PRIO,
    Ads::ECN,
    Ads::DSCP,
    Ads::UDP_SPORT,
    Ads::DEI_CFI,
    Ads::ETH_PRIO,
    Ads::SL,
    Ads::RMAC_47_32,
    Ads::RMAC_31_0,
];

/// The work queue counters and PSN bookkeeping 2RST clears.
const COUNTERS: &[Field<Qpc>] = &[
    Qpc::CUR_RNR_RETRY,
    Qpc::CUR_RETRY_COUNT,
    Qpc::LAST_ACKED_PSN,
    Qpc::SSN,
    Qpc::RMSN,
    Qpc::HW_SQ_WQEBB_COUNTER,
    Qpc::SW_SQ_WQEBB_COUNTER,
    Qpc::HW_RQ_COUNTER,
    Qpc::SW_RQ_COUNTER,
];

/// Copies primary path `fields` from `src` to `dst`.
fn copy_path(dst: &mut ViewMut<'_, Qpc>, src: &View<'_, Qpc>, fields: &[Field<Ads>]) -> CmdResult {
    let from = src.nested(Qpc::PRIMARY_ADDRESS_PATH);
    let mut to = dst.nested_mut(Qpc::PRIMARY_ADDRESS_PATH);
    for &f in fields {
        encoded(to.set(f, from.get(f)))?;
    }
    Ok(())
}

fn path(src: &View<'_, Qpc>, f: Field<Ads>) -> u64 {
    src.nested(Qpc::PRIMARY_ADDRESS_PATH).get(f)
}

fn check_port(src: &View<'_, Qpc>) -> CmdResult {
    if path(src, Ads::VHCA_PORT_NUM) != 1 {
        return Err(bad_param(syn::BAD_QP_PORT));
    }
    Ok(())
}

fn check_pkey(model: &Model, src: &View<'_, Qpc>) -> CmdResult {
    let entries = if model.cur(CmdHcaCap::PORT_TYPE) == port_type::ETH {
        1
    } else {
        128u64 << model.cur(CmdHcaCap::PKEY_TABLE_SIZE).min(8)
    };
    if path(src, Ads::PKEY_INDEX) >= entries {
        return Err(bad_param(syn::BAD_PKEY_INDEX));
    }
    Ok(())
}

/// Applies the access flags `bits` selects (RRE, RAE, RWE), refusing flags `st` lacks.
fn access(dst: &mut ViewMut<'_, Qpc>, src: &View<'_, Qpc>, st: u64, bits: u32) -> CmdResult {
    for (bit, f) in [
        (opt::RRE, Qpc::RRE),
        (opt::RWE, Qpc::RWE),
        (opt::RAE, Qpc::RAE),
    ] {
        if bits & bit == 0 {
            continue;
        }
        let supported = match st {
            qp_st::RC | qp_st::XRC => true,
            qp_st::UC => bit == opt::RWE,
            _ => false,
        };
        let value = src.get(f);
        if value != 0 && !supported {
            return Err(bad_param(syn::QP_ACCESS_NOT_SUPPORTED));
        }
        encoded(dst.set(f, value))?;
        if bit == opt::RAE {
            // Defined responder modes: 1 (IB-spec), 2 (CX), 3..=8 (extended, up to 8..256
            // bytes). 0 is accepted here — Linux never sends it with RAE — and the responder
            // then refuses every atomic (a remote invalid request).
            if value != 0 && src.get(Qpc::ATOMIC_MODE) > atomic_mode::UP_TO_256B {
                return Err(bad_param(syn::BAD_ATOMIC_MODE));
            }
            copy(dst, src, &[Qpc::ATOMIC_MODE])?;
        }
    }
    Ok(())
}

/// Applies the optional fields `mask` names.
fn optional(
    model: &Model,
    dst: &mut ViewMut<'_, Qpc>,
    src: &View<'_, Qpc>,
    st: u64,
    mask: u32,
) -> CmdResult {
    access(dst, src, st, mask & ACCESS)?;
    if mask & opt::PKEY_INDEX != 0 {
        check_pkey(model, src)?;
        copy_path(dst, src, &[Ads::PKEY_INDEX])?;
    }
    if mask & opt::PRI_PORT != 0 {
        check_port(src)?;
        copy_path(dst, src, &[Ads::VHCA_PORT_NUM])?;
    }
    let plain = [
        (opt::Q_KEY, Qpc::Q_KEY),
        (opt::RNR_TIMEOUT, Qpc::MIN_RNR_NAK),
    ];
    for (bit, f) in plain {
        if mask & bit != 0 {
            copy(dst, src, &[f])?;
        }
    }
    if mask & (opt::ACK_TIMEOUT | opt::PRIMARY_ADDR_PATH) != 0 {
        copy_path(dst, src, &[Ads::ACK_TIMEOUT])?;
    }
    if mask & opt::ALT_ADDR_PATH != 0 {
        let from = src.nested(Qpc::SECONDARY_ADDRESS_PATH).as_bytes();
        let n = Ads::BYTES.min(from.len());
        queue::put(
            dst.nested_mut(Qpc::SECONDARY_ADDRESS_PATH).as_bytes(),
            &from[..n],
        );
    }
    if mask & opt::PM_STATE != 0 {
        pm_state_change(model, dst, src.get(Qpc::PM_STATE))?;
    }
    Ok(())
}

/// A path's RoCE fields: `rmac` nonzero (MISSING_RMAC), `src_addr_index` inside the RoCE
/// address table (QP_GID_INDEX) and a set entry (QP_GID_NOT_SET).
fn roce_path(model: &Model, a: &View<'_, Ads>) -> CmdResult {
    if a.get(Ads::RMAC_47_32) == 0 && a.get(Ads::RMAC_31_0) == 0 {
        return Err(bad_param(syn::MISSING_RMAC));
    }
    let gid = usize::try_from(a.get(Ads::SRC_ADDR_INDEX)).unwrap_or(usize::MAX);
    match model.vport.gid(gid) {
        None => Err(bad_param(syn::QP_GID_INDEX)),
        Some(entry) if entry.iter().all(|&b| b == 0) => Err(bad_param(syn::QP_GID_NOT_SET)),
        Some(_) => Ok(()),
    }
}

/// A primary path with `fl` (force loopback: the QP's packets go to `remote_qpn` of this
/// function, never the wire, so no `rmac` or GID is needed): an RC QP only, on a device whose
/// `roce_cap` offers it for the vport's current `roce_en` (`fl_rc_qp_when_roce_enabled` /
/// `_disabled`); else BAD_PARAM FORCE_LOOPBACK.
fn force_loopback(model: &Model, st: u64) -> CmdResult {
    let cap = if model.vport.roce_en {
        RoceCap::FL_RC_QP_WHEN_ROCE_ENABLED
    } else {
        RoceCap::FL_RC_QP_WHEN_ROCE_DISABLED
    };
    // The general capabilities carry `fl_rc_qp_when_roce_disabled` too (rdma-core 56.1 takes
    // either).
    let offered = View::<RoceCap>::new(&model.cur_roce).is_ok_and(|v| v.get(cap) == 1)
        || (!model.vport.roce_en && model.cur(CmdHcaCap::FL_RC_QP_WHEN_ROCE_DISABLED) == 1);
    if st != qp_st::RC || !offered {
        return Err(bad_param(syn::FORCE_LOOPBACK));
    }
    Ok(())
}

/// The `pm_state` encoding no state has (ARMED 0, REARM 1, MIGRATED 3).
const PM_STATE_RESERVED: u64 = 2;

/// PM_STATE: the path migration state software asks for, from the current one. REARM (or ARMED)
/// from MIGRATED or ARMED arms the alternate path the context holds — its RoCE fields checked as
/// the primary path's — and reads back ARMED (the device is armed at once); MIGRATED from ARMED
/// migrates now (the alternate path becomes the primary one); staying is allowed; anything else
/// is BAD_PM_STATE.
fn pm_state_change(model: &Model, dst: &mut ViewMut<'_, Qpc>, want: u64) -> CmdResult {
    let cur = dst.get(Qpc::PM_STATE);
    match (cur, want) {
        (c, w) if c == w && w != pm_state::REARM => Ok(()),
        (pm_state::MIGRATED | pm_state::ARMED, pm_state::REARM | pm_state::ARMED) => {
            roce_path(model, &dst.as_view().nested(Qpc::SECONDARY_ADDRESS_PATH))?;
            encoded(dst.set(Qpc::PM_STATE, pm_state::ARMED).map(drop))
        }
        (pm_state::ARMED, pm_state::MIGRATED) => {
            crate::model::qp::migrate_ctx(dst);
            Ok(())
        }
        _ => Err(bad_param(syn::BAD_PM_STATE)),
    }
}

fn rst2init(
    model: &Model,
    dst: &mut ViewMut<'_, Qpc>,
    src: &View<'_, Qpc>,
    st: u64,
    _: u32,
) -> CmdResult {
    check_port(src)?;
    check_pkey(model, src)?;
    // RST2INIT: with no alternate path loaded there is nothing to arm, so the QP is MIGRATED
    // whatever ARMED or REARM the command says — Linux sends MIGRATED, rdma-core's DevX test
    // (mlx5_base.py, Mlx5DevxRcResources) leaves the field 0 and passes on real cards. The
    // reserved encoding 2 is refused.
    if src.get(Qpc::PM_STATE) == PM_STATE_RESERVED {
        return Err(bad_param(syn::BAD_PM_STATE));
    }
    encoded(dst.set(Qpc::PM_STATE, pm_state::MIGRATED))?;
    copy_path(dst, src, &[Ads::PKEY_INDEX, Ads::VHCA_PORT_NUM])?;
    access(dst, src, st, ACCESS)?;
    if st == qp_st::UD {
        copy(dst, src, &[Qpc::Q_KEY])?;
    }
    Ok(())
}

/// RC and XRC: the reliable connected services (XRC is RC with its receive queue chosen per
/// message).
fn reliable(st: u64) -> bool {
    matches!(st, qp_st::RC | qp_st::XRC)
}

fn init2rtr(
    model: &Model,
    dst: &mut ViewMut<'_, Qpc>,
    src: &View<'_, Qpc>,
    st: u64,
    mask: u32,
) -> CmdResult {
    if matches!(st, qp_st::RC | qp_st::UC | qp_st::XRC) {
        if !(1..=5).contains(&src.get(Qpc::MTU)) {
            return Err(bad_param(syn::BAD_PATH_MTU));
        }
        if src.get(Qpc::LOG_MSG_MAX) > model.cur(CmdHcaCap::LOG_MAX_MSG) {
            return Err(bad_param(syn::MSG_MAX_TOO_BIG));
        }
        if src.get(Qpc::REMOTE_QPN) < 2 {
            return Err(bad_param(syn::BAD_REMOTE_QPN));
        }
        if path(src, Ads::FL) == 1 {
            force_loopback(model, st)?;
        } else {
            roce_path(model, &src.nested(Qpc::PRIMARY_ADDRESS_PATH))?;
        }
        if reliable(st) && src.get(Qpc::LOG_RRA_MAX) > model.cur(CmdHcaCap::LOG_MAX_RA_RES_QP) {
            return Err(bad_param(syn::RRA_MAX_TOO_BIG));
        }
        copy(
            dst,
            src,
            &[
                Qpc::MTU,
                Qpc::LOG_MSG_MAX,
                Qpc::REMOTE_QPN,
                Qpc::NEXT_RCV_PSN,
            ],
        )?;
        copy_path(dst, src, RTR_PATH)?;
        let from = src.nested(Qpc::PRIMARY_ADDRESS_PATH).bytes(Ads::RGID_RIP);
        queue::put(
            dst.nested_mut(Qpc::PRIMARY_ADDRESS_PATH)
                .bytes_mut(Ads::RGID_RIP),
            from,
        );
        if reliable(st) {
            copy(dst, src, &[Qpc::LOG_RRA_MAX, Qpc::MIN_RNR_NAK])?;
        }
    }
    if st == qp_st::DCI {
        // A DCI has no path or remote QP: each WQE names its DCT.
        ud_message(model, dst, src)?;
    }
    optional(model, dst, src, st, mask)
}

fn rtr2rts(
    model: &Model,
    dst: &mut ViewMut<'_, Qpc>,
    src: &View<'_, Qpc>,
    st: u64,
    mask: u32,
) -> CmdResult {
    if reliable(st) || st == qp_st::DCI {
        let limit = if st == qp_st::DCI {
            CmdHcaCap::LOG_MAX_RA_REQ_DC
        } else {
            CmdHcaCap::LOG_MAX_RA_REQ_QP
        };
        if src.get(Qpc::LOG_SRA_MAX) > model.cur(limit) {
            return Err(bad_param(syn::SRA_MAX_TOO_BIG));
        }
        copy(
            dst,
            src,
            &[Qpc::RETRY_COUNT, Qpc::RNR_RETRY, Qpc::LOG_SRA_MAX],
        )?;
        copy_path(dst, src, &[Ads::ACK_TIMEOUT])?;
    }
    copy(dst, src, &[Qpc::NEXT_SEND_PSN])?;
    optional(model, dst, src, st, mask)
}

/// Every UD transition carries the QP's `mtu` (1..=5, BAD_PATH_MTU) and `log_msg_max` (at most
/// `log_max_msg`, MSG_MAX_TOO_BIG): a UD context has no default for either.
fn ud_message(model: &Model, dst: &mut ViewMut<'_, Qpc>, src: &View<'_, Qpc>) -> CmdResult {
    if !(1..=5).contains(&src.get(Qpc::MTU)) {
        return Err(bad_param(syn::BAD_PATH_MTU));
    }
    if src.get(Qpc::LOG_MSG_MAX) > model.cur(CmdHcaCap::LOG_MAX_MSG) {
        return Err(bad_param(syn::MSG_MAX_TOO_BIG));
    }
    copy(dst, src, &[Qpc::MTU, Qpc::LOG_MSG_MAX])
}

/// Runs transition `t` on QP `qpn` with the context `given` and `mask`.
fn modify(
    model: &mut Model,
    t: &Transition,
    qpn: u32,
    mask: u64,
    given: &View<'_, Qpc>,
) -> CmdResult {
    queue::changeable(model, ObjectKind::Qp, qpn, syn::UNKNOWN_QP)?;
    let q = queue::find(model, ObjectKind::Qp, qpn, syn::UNKNOWN_QP)?;
    let mut ctx = q.ctx.clone();
    let mut v = encoded(ViewMut::<Qpc>::new(&mut ctx))?;
    if !t.from.is_empty() && !t.from.contains(&v.get(Qpc::STATE)) {
        return Err(fail(CmdStatus::BadResState, syn::QP_WRONG_STATE));
    }
    let mask = u32::try_from(mask).unwrap_or(u32::MAX);
    if mask & !t.optional != 0 {
        log::info!(
            "mlx5-sim: QP {qpn:#x}: opt_param_mask {mask:#x} has bits {:#x} the transition does not take",
            mask & !t.optional
        );
        return Err(bad_param(syn::BAD_OPT_PARAM_MASK));
    }
    let st = qp_st::transport(v.get(Qpc::ST));
    (t.apply)(model, &mut v, given, st, mask)?;
    if st == qp_st::UD {
        ud_message(model, &mut v, given)?;
    }
    encoded(v.set(Qpc::STATE, t.to))?;
    if let Some(q) = model.objects.queue_mut(ObjectKind::Qp, qpn) {
        q.ctx = ctx;
    }
    Ok(())
}

/// The handler of a modify command with a QP context (`$in` its input layout).
macro_rules! transition {
    ($name:ident, $in:ident, $t:expr) => {
        pub(crate) fn $name(
            model: &mut Model,
            _: &mut Env<'_>,
            req: &Req<'_>,
            _: &mut [u8],
        ) -> CmdResult {
            let i = input::<$in>(req)?;
            let qpc = i.nested($in::QPC);
            modify(
                model,
                &$t,
                i.get32($in::QPN),
                i.get($in::OPT_PARAM_MASK),
                &qpc,
            )
        }
    };
}

transition!(rst2init_qp, Rst2initQpIn, RST2INIT);
transition!(init2init_qp, Init2initQpIn, INIT2INIT);
transition!(init2rtr_qp, Init2rtrQpIn, INIT2RTR);
transition!(rtr2rts_qp, Rtr2rtsQpIn, RTR2RTS);
transition!(rts2rts_qp, Rts2rtsQpIn, RTS2RTS);

/// Moves QP `qpn` to `to` from any state; `reset` also clears its counters.
fn force(model: &mut Model, qpn: u32, to: u64, reset: bool) -> CmdResult {
    queue::changeable(model, ObjectKind::Qp, qpn, syn::UNKNOWN_QP)?;
    let q = model
        .objects
        .queue_mut(ObjectKind::Qp, qpn)
        .ok_or(fail(CmdStatus::BadRes, syn::UNKNOWN_QP))?;
    let mut v = encoded(ViewMut::<Qpc>::new(&mut q.ctx))?;
    if reset {
        for &f in COUNTERS {
            encoded(v.set(f, 0))?;
        }
    }
    encoded(v.set(Qpc::STATE, to))?;
    Ok(())
}

/// 2ERR: the QP's outstanding and posted WQEs complete with WR_FLUSH_ERR
/// ([`crate::events::flush::enter_error`]).
pub(crate) fn qp_2err(
    model: &mut Model,
    env: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let qpn = input::<Qp2errIn>(req)?.get32(Qp2errIn::QPN);
    force(model, qpn, qp_state::ERR, false)?;
    let mut hw = crate::model::Hw {
        model,
        iommu: env.iommu,
        faults: env.dma_faults,
        now: env.now,
    };
    crate::events::flush::enter_error(&mut hw, qpn, None);
    Ok(())
}

pub(crate) fn qp_2rst(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let qpn = input::<Qp2rstIn>(req)?.get32(Qp2rstIn::QPN);
    force(model, qpn, qp_state::RST, true)?;
    model.rt.forget(ObjectKind::Qp, qpn);
    Ok(())
}
