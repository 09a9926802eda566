//! Modify header contexts: ALLOC_MODIFY_HEADER_CONTEXT, DEALLOC_MODIFY_HEADER_CONTEXT. A flow
//! table entry with the MOD_HDR action (0x40) names one (`modify_header_id`, [`super::flow`]);
//! the frames it takes are rewritten ([`crate::engine::mod_hdr`]).
//!
//! * ALLOC: `table_type` NIC RX (0) or NIC TX (1); `num_of_actions` from 1 to the type's
//!   `max_modify_header_actions`, the actions (8 bytes each) from byte 0x10 within the input
//!   (BAD_INPUT_LEN); each a SET, ADD or COPY of fields the device rewrites, offset + length
//!   (0: 32 bits) within the field — else BAD_PARAM BAD_MODIFY_HEADER. Fewer than
//!   `2^log_max_modify_header_context` live (EXCEED_LIM MODIFY_HEADER_EXHAUSTED). The context
//!   keeps the table type and the actions; the command's uid owns it.
//! * DEALLOC: a live context the command's uid may change (BAD_RES UNKNOWN_MODIFY_HEADER) no
//!   entry uses (RES_BUSY MODIFY_HEADER_IN_USE).

use mlx5_ifc::consts::flow_table_type::{NIC_RX, NIC_TX};
use mlx5_ifc::prm::caps::FlowTablePropLayout as Prop;
use mlx5_ifc::prm::modify_header::{
    AllocModifyHeaderContextIn as In, AllocModifyHeaderContextOut as Out,
    DeallocModifyHeaderContextIn,
};
use mlx5_ifc::CmdStatus;

use super::cmd::{bad_param, encoded, fail, input, output, CmdResult, Env, Req};
use super::flow::{prop, props};
use super::queue;
use crate::engine::mod_hdr::{self, ACTION_BYTES};
use crate::model::objects::ObjectKind;
use crate::model::Model;
use crate::syndrome as syn;

pub(crate) fn alloc_modify_header_context(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let i = input::<In>(req)?;
    let ty = i.get(In::TABLE_TYPE);
    if ty != NIC_RX && ty != NIC_TX {
        return Err(bad_param(syn::BAD_MODIFY_HEADER));
    }
    let p = props(ty).map_err(|_| bad_param(syn::BAD_MODIFY_HEADER))?;
    let n = i.get(In::NUM_OF_ACTIONS) as usize;
    if n == 0 || n as u64 > prop(&p, Prop::MAX_MODIFY_HEADER_ACTIONS) {
        return Err(bad_param(syn::BAD_MODIFY_HEADER));
    }
    let at = In::ACTIONS.offset();
    let list = req
        .input
        .get(at..at + n * ACTION_BYTES)
        .ok_or(fail(CmdStatus::BadInputLen, syn::INLEN_BELOW_LAYOUT))?;
    if !list.chunks_exact(ACTION_BYTES).all(mod_hdr::valid) {
        return Err(bad_param(syn::BAD_MODIFY_HEADER));
    }
    let mut ctx = vec![ty as u8];
    ctx.extend_from_slice(list);
    let log_max = prop(&p, Prop::LOG_MAX_MODIFY_HEADER_CONTEXT);
    let q = queue::new_queue(ctx, Vec::new(), None);
    let id = queue::insert_limited(
        model,
        ObjectKind::ModifyHeader,
        log_max,
        q,
        syn::MODIFY_HEADER_EXHAUSTED,
    )?;
    encoded(output::<Out>(out)?.set(Out::MODIFY_HEADER_ID, id.into()))?;
    Ok(())
}

pub(crate) fn dealloc_modify_header_context(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let id = input::<DeallocModifyHeaderContextIn>(req)?
        .get32(DeallocModifyHeaderContextIn::MODIFY_HEADER_ID);
    queue::destroy(
        model,
        ObjectKind::ModifyHeader,
        id,
        syn::UNKNOWN_MODIFY_HEADER,
        syn::MODIFY_HEADER_IN_USE,
    )
}
