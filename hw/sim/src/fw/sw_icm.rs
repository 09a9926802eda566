//! SW ICM, software steering's memory: CREATE_GENERAL_OBJECT (0xa00), QUERY_GENERAL_OBJECT
//! (0xa02) and DESTROY_GENERAL_OBJECT (0xa03) of `obj_type` SW_ICM (8) (reached through
//! [`super::general_object`]), and SYNC_STEERING (0xb00) — as
//! Linux 6.1's `lib/dm.c` (`mlx5_dm_sw_icm_alloc`, for `mlx5dv_alloc_dm` of type STEERING_SW_ICM
//! or HEADER_MODIFY_SW_ICM) and mlx5dv direct rules send them (notes: dr-control.md §2, §5.2).
//! The regions, the objects and their bytes are the model's ([`crate::model::icm`]).
//!
//! * CREATE_GENERAL_OBJECT: the input holds `create_sw_icm_in`
//!   (BAD_INPUT_LEN); `2^log_sw_icm_size` bytes at `sw_icm_start_addr`, at least the
//!   granularity (`2^log_sw_icm_alloc_granularity`), the start aligned to it, inside the
//!   steering or the header-modify region (BAD_PARAM SW_ICM_PARAM) — Linux picks the range
//!   with its own bitmap, the firmware checks it —, on no live object (BAD_PARAM
//!   SW_ICM_OVERLAP). The object belongs to the command's uid (the user context's, for DevX).
//!   Output: `obj_id`. Its bytes read zero.
//! * QUERY_GENERAL_OBJECT: a live object the command's uid sees (BAD_RES
//!   UNKNOWN_GENERAL_OBJECT); the output header, then its `sw_icm` (start and log size).
//! * DESTROY_GENERAL_OBJECT: a live object of that type, the command's uid's (or uid 0's)
//!   (BAD_RES UNKNOWN_GENERAL_OBJECT); refused while a SW_ICM key reaches it (RES_BUSY
//!   SW_ICM_IN_USE: Linux deregisters the DM MR first). Its bytes are gone.
//! * SYNC_STEERING: the device drops what it cached of software-written ICM; the simulator
//!   caches nothing, so it only succeeds (its uid checked as every command's).

use mlx5_ifc::prm::general_obj::{GeneralObjInCmdHdr as Hdr, GeneralObjOutCmdHdr as Out};
use mlx5_ifc::prm::sw_icm::{CreateSwIcmIn, SwIcm};
use mlx5_ifc::{CmdStatus, Layout};

use super::cmd::{bad_param, encoded, fail, input, output, CmdResult, Env, Req};
use crate::model::icm::IcmError;
use crate::model::objects::{Object, ObjectKind};
use crate::model::Model;
use crate::syndrome as syn;

/// The handles general objects get (24 bits, as Linux's `obj_id` users keep them).
pub(super) const OBJ_IDS: (u32, u32) = (1, 1 << 24);

pub(super) fn create(model: &mut Model, req: &Req<'_>, out: &mut [u8]) -> CmdResult {
    let i = input::<CreateSwIcmIn>(req)?;
    let c = i.nested(CreateSwIcmIn::SW_ICM);
    let (start, log) = (
        c.get(SwIcm::SW_ICM_START_ADDR),
        c.get(SwIcm::LOG_SW_ICM_SIZE),
    );
    let size = model.icm.check(start, log).map_err(|e| match e {
        IcmError::Param => bad_param(syn::SW_ICM_PARAM),
        IcmError::Overlap => bad_param(syn::SW_ICM_OVERLAP),
    })?;
    let id = model
        .objects
        .alloc(
            ObjectKind::SwIcm,
            OBJ_IDS.0,
            OBJ_IDS.1,
            Object::SwIcm { start, size },
        )
        .ok_or(fail(CmdStatus::ExceedLim, syn::SW_ICM_EXHAUSTED))?;
    model.icm.insert(start, size, id);
    encoded(output::<Out>(out)?.set(Out::OBJ_ID, id.into()))?;
    Ok(())
}

pub(super) fn query(model: &Model, req: &Req<'_>, out: &mut [u8]) -> CmdResult {
    let id = input::<Hdr>(req)?.get32(Hdr::OBJ_ID);
    super::queue::changeable(model, ObjectKind::SwIcm, id, syn::UNKNOWN_GENERAL_OBJECT)?;
    let Some(&Object::SwIcm { start, size }) = model.objects.get(ObjectKind::SwIcm, id) else {
        return Err(fail(CmdStatus::BadRes, syn::UNKNOWN_GENERAL_OBJECT));
    };
    let mut o = output::<SwIcm>(out.get_mut(Out::BYTES..).unwrap_or_default())?;
    encoded(o.set(SwIcm::SW_ICM_START_ADDR, start))?;
    encoded(o.set(SwIcm::LOG_SW_ICM_SIZE, u64::from(size.trailing_zeros())))?;
    Ok(())
}

pub(super) fn destroy(model: &mut Model, req: &Req<'_>) -> CmdResult {
    let id = input::<Hdr>(req)?.get32(Hdr::OBJ_ID);
    super::queue::changeable(model, ObjectKind::SwIcm, id, syn::UNKNOWN_GENERAL_OBJECT)?;
    let Some(&Object::SwIcm { start, size }) = model.objects.get(ObjectKind::SwIcm, id) else {
        return Err(fail(CmdStatus::BadRes, syn::UNKNOWN_GENERAL_OBJECT));
    };
    if super::mkey::sw_icm_in_use(model, start, size) {
        return Err(fail(CmdStatus::ResBusy, syn::SW_ICM_IN_USE));
    }
    model.remove(ObjectKind::SwIcm, id);
    model.icm.remove(start);
    Ok(())
}

pub(crate) fn sync_steering(
    _: &mut Model,
    _: &mut Env<'_>,
    _: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    Ok(())
}
