//! Flow samplers: CREATE, QUERY and DESTROY_GENERAL_OBJECT of `obj_type` FLOW_SAMPLER (0x20),
//! as mlx5dv direct rules makes one for `mlx5dv_dr_action_create_flow_sampler` (rdma-core's
//! `dr_action_create_sampler`, docs/dr-control-facts.md "Flow sampler"): the sample table is
//! an "always hit" termination table whose one entry carries the sample actions (a counter, a
//! TIR, a flow tag), the default table the DR table every frame goes on to.
//!
//! * CREATE: the input holds `general_obj_in_cmd_hdr` and `flow_sampler` (BAD_INPUT_LEN);
//!   `table_type` NIC RX (0) — DR makes samplers on NIC RX and FDB only, and the simulated
//!   function has no FDB — and `sample_ratio` at least 1 (BAD_PARAM BAD_SAMPLER);
//!   `sample_table_id` and `default_table_id` live flow tables of that type the command's uid
//!   sees (BAD_RES UNKNOWN_FLOW_TABLE); without `ignore_flow_level` the default table's level
//!   above the sampler's `level` (BAD_SAMPLER), as a forward between FW tables must go up. The
//!   sampler holds both tables (DESTROY_FLOW_TABLE is RES_BUSY FLOW_TABLE_IN_USE while it
//!   lives) and belongs to the command's uid. Output: `obj_id`.
//! * QUERY: a live sampler the command's uid sees (BAD_RES UNKNOWN_GENERAL_OBJECT): the output
//!   header, then its `flow_sampler` as created with `sw_steering_icm_address_rx` the address an
//!   STE jumps to ([`icm_map::sampler_icm_address`]) and `_tx` 0 (no transmit side).
//! * DESTROY: a live sampler the command's uid may change (BAD_RES UNKNOWN_GENERAL_OBJECT);
//!   its tables are released.
//!
//! What a sampler does with a frame: [`crate::model::sampler::meet`], for the data path's
//! steering ([`crate::engine::steering`]).

use mlx5_ifc::consts::flow_table_type::NIC_RX;
use mlx5_ifc::prm::flow::{CreateFlowTableIn, FlowTableContext as Ftc};
use mlx5_ifc::prm::general_obj::{
    FlowSampler as Fs, GeneralObjInCmdHdr as Hdr, GeneralObjOutCmdHdr as Out,
};
use mlx5_ifc::Layout;

use super::cmd::{bad_param, encoded, fail, output, view, CmdResult, Failure, Req};
use super::queue;
use crate::model::icm_map;
use crate::model::objects::ObjectKind;
use crate::model::Model;
use crate::syndrome as syn;

/// The type and level of flow table `id`, if it is live and the command's uid sees it.
fn table(model: &Model, id: u32) -> Result<(u64, u64), Failure> {
    let q = queue::find_visible(model, ObjectKind::FlowTable, id, syn::UNKNOWN_FLOW_TABLE)?;
    let v = view::<CreateFlowTableIn>(&q.ctx)?;
    let level = v
        .nested(CreateFlowTableIn::FLOW_TABLE_CONTEXT)
        .get(Ftc::LEVEL);
    Ok((v.get(CreateFlowTableIn::TABLE_TYPE), level))
}

pub(super) fn create(model: &mut Model, req: &Req<'_>, out: &mut [u8]) -> CmdResult {
    let body = req.input.get(Hdr::BYTES..).unwrap_or_default();
    let s = view::<Fs>(body)?;
    let ty = s.get(Fs::TABLE_TYPE);
    if ty != NIC_RX || s.get(Fs::SAMPLE_RATIO) == 0 {
        return Err(bad_param(syn::BAD_SAMPLER));
    }
    let (sample, default) = (s.get32(Fs::SAMPLE_TABLE_ID), s.get32(Fs::DEFAULT_TABLE_ID));
    let mut holds = Vec::with_capacity(2);
    for id in [sample, default] {
        if table(model, id)?.0 != ty {
            return Err(fail(mlx5_ifc::CmdStatus::BadRes, syn::UNKNOWN_FLOW_TABLE));
        }
        holds.push((ObjectKind::FlowTable, id));
    }
    if s.get(Fs::IGNORE_FLOW_LEVEL) == 0 && table(model, default)?.1 <= s.get(Fs::LEVEL) {
        return Err(bad_param(syn::BAD_SAMPLER));
    }
    let mut q = queue::new_queue(body[..Fs::BYTES].to_vec(), Vec::new(), None);
    q.holds = holds;
    let id = queue::insert(
        model,
        ObjectKind::FlowSampler,
        &[],
        super::sw_icm::OBJ_IDS,
        q,
        syn::FLOW_SAMPLER_EXHAUSTED,
    )?;
    encoded(output::<Out>(out)?.set(Out::OBJ_ID, id.into()))?;
    Ok(())
}

pub(super) fn query(model: &Model, req: &Req<'_>, out: &mut [u8]) -> CmdResult {
    let id = view::<Hdr>(req.input)?.get32(Hdr::OBJ_ID);
    let q = queue::find_visible(
        model,
        ObjectKind::FlowSampler,
        id,
        syn::UNKNOWN_GENERAL_OBJECT,
    )?;
    let mut o = output::<Fs>(out.get_mut(Out::BYTES..).unwrap_or_default())?;
    queue::put(o.as_bytes(), &q.ctx);
    encoded(o.set(
        Fs::SW_STEERING_ICM_ADDRESS_RX,
        icm_map::sampler_icm_address(id),
    ))?;
    encoded(o.set(Fs::SW_STEERING_ICM_ADDRESS_TX, 0))?;
    Ok(())
}

pub(super) fn destroy(model: &mut Model, req: &Req<'_>) -> CmdResult {
    let id = view::<Hdr>(req.input)?.get32(Hdr::OBJ_ID);
    // Nothing holds a sampler (an STE's jump to it is software's to take away first), so the
    // busy syndrome is never given.
    queue::destroy(
        model,
        ObjectKind::FlowSampler,
        id,
        syn::UNKNOWN_GENERAL_OBJECT,
        syn::UNKNOWN_GENERAL_OBJECT,
    )
}
