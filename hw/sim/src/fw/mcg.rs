//! Multicast groups: ATTACH_TO_MCG and DETACH_FROM_MCG.
//!
//! * The QP (`qpn`) must be live (BAD_RES UNKNOWN_QP) and UD, not QP1 or a UMR QP — the only
//!   QPs ib_core lets join (`ib_attach_mcast`; a raw packet QP's multicast is flow steering) —
//!   else BAD_PARAM MCG_QP_TYPE.
//! * `multicast_gid` must be a multicast address as ib_core's `rdma_is_multicast_addr` reads it:
//!   first byte 0xff, or IPv4-mapped (`::ffff:a.b.c.d`) with `a.b.c.d` in 224.0.0.0/4 (RoCE v2
//!   over IPv4: rdma_cm's group of `230.x.y.z`) — else BAD_PARAM MCG_GID.
//! * Attach: at most `2^log_max_mcg` groups and `max_qp_mcg` QPs in one (EXCEED_LIM
//!   MCG_EXHAUSTED); a QP already in the group stays in it once. Detach of a QP that is not
//!   in the group: BAD_PARAM MCG_NOT_ATTACHED.
//!
//! A UD packet to QPN 0xffffff whose destination GID is a group's goes to every QP of the group
//! ([`crate::engine::responder`]); a destroyed QP leaves its groups.

use mlx5_ifc::consts::qp_st;
use mlx5_ifc::prm::caps::CmdHcaCap;
use mlx5_ifc::prm::qp::{AttachToMcgIn, DetachFromMcgIn};
use mlx5_ifc::CmdStatus;

use super::cmd::{bad_param, fail, input, CmdResult, Env, Req};
use crate::model::mcg::Full;
use crate::model::qp_info::QpInfo;
use crate::model::Model;
use crate::syndrome as syn;

/// Whether `gid` is a multicast GID (IPv6 multicast, or IPv4-mapped 224.0.0.0/4).
pub(crate) fn is_multicast(gid: &[u8; 16]) -> bool {
    let v4_mapped = gid[..10].iter().all(|&b| b == 0) && gid[10] == 0xff && gid[11] == 0xff;
    if v4_mapped {
        gid[12] & 0xf0 == 0xe0
    } else {
        gid[0] == 0xff
    }
}

/// The live UD QP `qpn` may join a group with `gid`.
fn check(model: &mut Model, qpn: u32, gid: &[u8; 16]) -> CmdResult {
    let info = QpInfo::load(model, qpn).ok_or(fail(CmdStatus::BadRes, syn::UNKNOWN_QP))?;
    if info.st != qp_st::UD || info.gsi || info.umr {
        return Err(bad_param(syn::MCG_QP_TYPE));
    }
    if !is_multicast(gid) {
        return Err(bad_param(syn::MCG_GID));
    }
    Ok(())
}

pub(crate) fn attach_to_mcg(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let i = input::<AttachToMcgIn>(req)?;
    let qpn = i.get32(AttachToMcgIn::QPN);
    let mut gid = [0u8; 16];
    gid.copy_from_slice(i.bytes(AttachToMcgIn::MULTICAST_GID));
    check(model, qpn, &gid)?;
    let groups = 1u64 << model.cur(CmdHcaCap::LOG_MAX_MCG).min(32);
    let members = model.cur(CmdHcaCap::MAX_QP_MCG);
    model.mcg.attach(gid, qpn, groups, members).map_err(|full| {
        let what = match full {
            Full::Groups => "every group in use",
            Full::Members => "the group has max_qp_mcg QPs",
        };
        log::info!("mlx5-sim: ATTACH_TO_MCG of QP {qpn:#x}: {what}");
        fail(CmdStatus::ExceedLim, syn::MCG_EXHAUSTED)
    })
}

pub(crate) fn detach_from_mcg(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let i = input::<DetachFromMcgIn>(req)?;
    let qpn = i.get32(DetachFromMcgIn::QPN);
    let mut gid = [0u8; 16];
    gid.copy_from_slice(i.bytes(DetachFromMcgIn::MULTICAST_GID));
    check(model, qpn, &gid)?;
    if !model.mcg.detach(&gid, qpn) {
        return Err(bad_param(syn::MCG_NOT_ATTACHED));
    }
    Ok(())
}
