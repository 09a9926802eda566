//! The general object commands — CREATE_GENERAL_OBJECT (0xa00), QUERY_GENERAL_OBJECT (0xa02)
//! and DESTROY_GENERAL_OBJECT (0xa03) — by their `obj_type`: SW ICM ([`super::sw_icm`]) and
//! flow samplers ([`super::sampler`]), the types the device offers in `general_obj_types`.
//! Any other type, or one the current capabilities do not offer, is BAD_PARAM
//! GENERAL_OBJ_TYPE.

use mlx5_ifc::consts::{general_obj_type, general_obj_types};
use mlx5_ifc::prm::caps::CmdHcaCap;
use mlx5_ifc::prm::general_obj::GeneralObjInCmdHdr as Hdr;

use super::cmd::{bad_param, input, CmdResult, Env, Failure, Req};
use crate::model::Model;
use crate::syndrome as syn;

/// The general object types the simulator models.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Type {
    SwIcm,
    FlowSampler,
}

/// The command's `obj_type`, if the device offers it.
fn offered(model: &Model, req: &Req<'_>) -> Result<Type, Failure> {
    let ty = input::<Hdr>(req)?.get(Hdr::OBJ_TYPE);
    let types = model.cur(CmdHcaCap::GENERAL_OBJ_TYPES);
    let (t, bit) = match ty {
        general_obj_type::SW_ICM => (Type::SwIcm, general_obj_types::SW_ICM),
        general_obj_type::FLOW_SAMPLER => (Type::FlowSampler, general_obj_types::FLOW_SAMPLER),
        _ => return Err(bad_param(syn::GENERAL_OBJ_TYPE)),
    };
    if types & bit == 0 {
        return Err(bad_param(syn::GENERAL_OBJ_TYPE));
    }
    Ok(t)
}

pub(crate) fn create_general_object(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    match offered(model, req)? {
        Type::SwIcm => super::sw_icm::create(model, req, out),
        Type::FlowSampler => super::sampler::create(model, req, out),
    }
}

pub(crate) fn query_general_object(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    match offered(model, req)? {
        Type::SwIcm => super::sw_icm::query(model, req, out),
        Type::FlowSampler => super::sampler::query(model, req, out),
    }
}

pub(crate) fn destroy_general_object(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    match offered(model, req)? {
        Type::SwIcm => super::sw_icm::destroy(model, req),
        Type::FlowSampler => super::sampler::destroy(model, req),
    }
}
