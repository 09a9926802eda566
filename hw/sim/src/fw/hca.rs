//! HCA life cycle and capabilities: ENABLE/DISABLE_HCA, QUERY/SET_ISSI, QUERY/SET_HCA_CAP,
//! INIT_HCA, TEARDOWN_HCA, SET_DRIVER_VERSION.

use mlx5_ifc::consts::{cap_mode, cap_type, cmdif_checksum, teardown_profile};
use mlx5_ifc::prm::caps::{AtomicCaps, CmdHcaCap, RoceCap};
use mlx5_ifc::prm::hca::{
    DisableHcaIn, EnableHcaIn, InitHcaIn, QueryHcaCapIn, QueryHcaCapOut, QueryIssiOut,
    SetDriverVersionIn, SetHcaCapIn, SetIssiIn, TeardownHcaIn, TeardownHcaOut,
};
use mlx5_ifc::{FieldKind, Layout, View, ViewMut};

use super::cmd::{bad_param, bad_state, encoded, input, output, view, CmdResult, Env, Req};
use crate::model::HcaState;
use crate::model::Model;
use crate::syndrome as syn;

/// ISSI values the device supports (bit n = ISSI n).
const SUPPORTED_ISSI: u64 = 0b11;

pub(crate) fn enable_hca(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let i = input::<EnableHcaIn>(req)?;
    if i.get(EnableHcaIn::FUNCTION_ID) != 0 || i.get(EnableHcaIn::EMBEDDED_CPU_FUNCTION) != 0 {
        return Err(bad_param(syn::BAD_FUNCTION_ID));
    }
    model.state = HcaState::Enabled;
    Ok(())
}

pub(crate) fn disable_hca(
    model: &mut Model,
    env: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    if model.state == HcaState::Initialized {
        return Err(bad_state(syn::DISABLE_WHILE_INITIALIZED));
    }
    let i = input::<DisableHcaIn>(req)?;
    if i.get(DisableHcaIn::FUNCTION_ID) != 0 || i.get(DisableHcaIn::EMBEDDED_CPU_FUNCTION) != 0 {
        return Err(bad_param(syn::BAD_FUNCTION_ID));
    }
    model.reset_function(env.profile);
    Ok(())
}

pub(crate) fn query_issi(
    model: &mut Model,
    _: &mut Env<'_>,
    _: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let mut o = output::<QueryIssiOut>(out)?;
    encoded(o.set(QueryIssiOut::CURRENT_ISSI, model.issi.into()))?;
    encoded(o.set(QueryIssiOut::SUPPORTED_ISSI_DW0, SUPPORTED_ISSI))?;
    Ok(())
}

pub(crate) fn set_issi(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let issi = input::<SetIssiIn>(req)?.get(SetIssiIn::CURRENT_ISSI);
    if issi >= 64 || SUPPORTED_ISSI & (1 << issi) == 0 {
        return Err(bad_param(syn::BAD_ISSI));
    }
    model.issi = issi as u16;
    Ok(())
}

pub(crate) fn query_hca_cap(
    model: &mut Model,
    env: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let i = input::<QueryHcaCapIn>(req)?;
    if i.get(QueryHcaCapIn::OTHER_FUNCTION) != 0 || i.get(QueryHcaCapIn::FUNCTION_ID) != 0 {
        return Err(bad_param(syn::BAD_FUNCTION_ID));
    }
    let (kind, mode) = (req.op_mod >> 1, req.op_mod & 1);
    let image: &[u8] = match (kind, mode) {
        (cap_type::GENERAL, cap_mode::MAX) => env.profile.hca_cap_max(),
        (cap_type::GENERAL, _) => &model.cur_general,
        (cap_type::ROCE, cap_mode::MAX) => env.profile.roce_cap(),
        (cap_type::ROCE, _) => &model.cur_roce,
        (cap_type::ATOMIC, cap_mode::MAX) => env.profile.atomic_cap(),
        (cap_type::ATOMIC, _) => &model.cur_atomic,
        (cap_type::ODP, cap_mode::MAX) => &env.profile.odp_cap(),
        (cap_type::ODP, _) => &model.cur_odp,
        // Not settable: MAX and CUR are the same.
        (cap_type::QOS, _) => &env.profile.qos_cap(),
        (cap_type::DEV_MEM, _) => &env.profile.dev_mem_cap(),
        // Not settable: MAX and CUR are the same.
        (cap_type::ETHERNET_OFFLOADS, _) => &super::netcaps::eth_caps()[..],
        (cap_type::FLOW_TABLE, _) => &super::netcaps::flow_table_caps()[..],
        _ => return Err(bad_param(syn::BAD_CAP_TYPE)),
    };
    // What fits of the page: the output may end before the layout does (at 2 KiB of it).
    let at = QueryHcaCapOut::CAPABILITY.offset();
    let room = out
        .len()
        .min(req.outlen)
        .saturating_sub(at)
        .min(image.len());
    out[at..at + room].copy_from_slice(&image[..room]);
    Ok(())
}

/// Checks a new general capability against MAX: every `log_max_*` field at most its MAX value,
/// `cmdif_checksum` one of the defined encodings.
fn check_general(new: &View<'_, CmdHcaCap>, max: &View<'_, CmdHcaCap>) -> CmdResult {
    for f in CmdHcaCap::FIELDS
        .iter()
        .filter(|f| f.kind == FieldKind::Value && f.name.starts_with("log_max_"))
    {
        let (n, m) = (
            new.get_by_name(f.name).unwrap_or(0),
            max.get_by_name(f.name).unwrap_or(0),
        );
        if n > m {
            log::info!("mlx5-sim: SET_HCA_CAP {} = {n} exceeds MAX {m}", f.name);
            return Err(bad_param(syn::CAP_EXCEEDS_MAX));
        }
    }
    let checksum = new.get(CmdHcaCap::CMDIF_CHECKSUM);
    if ![
        cmdif_checksum::DISABLED,
        cmdif_checksum::INITIAL,
        cmdif_checksum::ENABLED,
    ]
    .contains(&checksum)
    {
        return Err(bad_param(syn::BAD_CMDIF_CHECKSUM));
    }
    Ok(())
}

pub(crate) fn set_hca_cap(
    model: &mut Model,
    env: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    if model.state == HcaState::Initialized {
        return Err(bad_state(syn::SET_CAP_AFTER_INIT));
    }
    let i = input::<SetHcaCapIn>(req)?;
    if i.get(SetHcaCapIn::OTHER_FUNCTION) != 0 || i.get(SetHcaCapIn::FUNCTION_ID) != 0 {
        return Err(bad_param(syn::BAD_FUNCTION_ID));
    }
    if req.op_mod & 1 != 0 {
        return Err(bad_param(syn::BAD_OP_MOD));
    }
    let cap = i.bytes(SetHcaCapIn::CAPABILITY);
    match req.op_mod >> 1 {
        cap_type::GENERAL => {
            let new = view::<CmdHcaCap>(cap)?;
            let max = view::<CmdHcaCap>(env.profile.hca_cap_max())?;
            check_general(&new, &max)?;
            // `roce` is writable only where the current `roce_rw_supported` says so.
            let cur = view::<CmdHcaCap>(&model.cur_general)?;
            if cur.get(CmdHcaCap::ROCE_RW_SUPPORTED) == 0
                && new.get(CmdHcaCap::ROCE) != cur.get(CmdHcaCap::ROCE)
            {
                return Err(bad_param(syn::ROCE_NOT_WRITABLE));
            }
            model.cur_general.copy_from_slice(&cap[..CmdHcaCap::BYTES]);
        }
        cap_type::ROCE => model.cur_roce.copy_from_slice(&cap[..RoceCap::BYTES]),
        cap_type::ATOMIC => {
            // Only the requester endianness mode is writable: 0 (big-endian) or, where
            // supported, 1 (host order).
            let mode = view::<AtomicCaps>(cap)?.get(AtomicCaps::ATOMIC_REQ_8B_ENDIANNESS_MODE);
            let supported = view::<AtomicCaps>(env.profile.atomic_cap())?
                .get(AtomicCaps::SUPPORTED_ATOMIC_REQ_8B_ENDIANNESS_MODE_1);
            if mode > 1 || (mode == 1 && supported != 1) {
                return Err(bad_param(syn::BAD_ATOMIC_ENDIANNESS));
            }
            encoded(
                ViewMut::<AtomicCaps>::new(&mut model.cur_atomic).and_then(|mut v| {
                    v.set(AtomicCaps::ATOMIC_REQ_8B_ENDIANNESS_MODE, mode)
                        .map(drop)
                }),
            )?;
        }
        cap_type::ODP => {
            // Any operation MAX offers may be turned on or off; none beyond it.
            let max = env.profile.odp_cap();
            let new = &cap[..max.len()];
            if new.iter().zip(max.iter()).any(|(n, m)| n & !m != 0) {
                log::info!("mlx5-sim: SET_HCA_CAP ODP: an operation beyond MAX");
                return Err(bad_param(syn::CAP_EXCEEDS_MAX));
            }
            model.cur_odp.copy_from_slice(new);
        }
        _ => return Err(bad_param(syn::BAD_CAP_TYPE)),
    }
    Ok(())
}

pub(crate) fn init_hca(
    model: &mut Model,
    env: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    if model.state == HcaState::Initialized {
        return Err(bad_state(syn::ALREADY_INITIALIZED));
    }
    let owner = input::<InitHcaIn>(req)?;
    if model.cur(CmdHcaCap::SW_OWNER_ID) == 0
        && owner.bytes(InitHcaIn::SW_OWNER_ID).iter().any(|&b| b != 0)
    {
        return Err(bad_param(syn::SW_OWNER_ID_NOT_SUPPORTED));
    }
    let needed = u64::from(env.profile.boot_pages()) + u64::from(env.profile.init_pages());
    if (model.pages.held() as u64) < needed {
        log::info!(
            "mlx5-sim: INIT_HCA with {} pages held, {needed} needed",
            model.pages.held()
        );
        return Err(bad_state(syn::INSUFFICIENT_PAGES));
    }
    model.state = HcaState::Initialized;
    Ok(())
}

pub(crate) fn teardown_hca(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let profile = input::<TeardownHcaIn>(req)?.get(TeardownHcaIn::PROFILE) as u16;
    let supported = match profile {
        teardown_profile::GRACEFUL | teardown_profile::FORCE_CLOSE => true,
        teardown_profile::PREPARE_FAST => model.cur(CmdHcaCap::FAST_TEARDOWN) == 1,
        _ => false,
    };
    if !supported {
        return Err(bad_param(syn::BAD_TEARDOWN_PROFILE));
    }
    encoded(output::<TeardownHcaOut>(out)?.set(TeardownHcaOut::STATE, 0))?;
    model.state = HcaState::TornDown;
    Ok(())
}

pub(crate) fn set_driver_version(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let raw = input::<SetDriverVersionIn>(req)?.bytes(SetDriverVersionIn::DRIVER_VERSION);
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    let version = String::from_utf8_lossy(&raw[..end]).into_owned();
    log::debug!("mlx5-sim: driver version \"{version}\"");
    model.driver_version = Some(version);
    Ok(())
}
