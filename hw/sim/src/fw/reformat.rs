//! Packet reformat contexts: ALLOC_PACKET_REFORMAT_CONTEXT, DEALLOC_PACKET_REFORMAT_CONTEXT. A
//! flow table entry with the PACKET_REFORMAT action names one (`packet_reformat_id`,
//! [`super::flow`]); the frames it takes are reformatted ([`crate::engine::steering`]).
//!
//! * ALLOC: `reformat_type` L2_TO_L2_TUNNEL (2), the one the profile offers
//!   (`encap_general_header`; Linux's mlx5_ib allows it on NIC transmit tables) — any other type
//!   is BAD_PARAM BAD_REFORMAT, as is `reformat_data_size` 0, above `max_encap_header_size`, or
//!   beyond the input; fewer than `2^log_max_packet_reformat_context` live (EXCEED_LIM
//!   PACKET_REFORMAT_EXHAUSTED). The context keeps the header (the data from byte 0x22).
//! * DEALLOC: a live context (BAD_RES UNKNOWN_PACKET_REFORMAT) no entry uses (RES_BUSY
//!   PACKET_REFORMAT_IN_USE).
//!
//! What the context does to a frame: [`crate::engine::steering`].

use mlx5_ifc::consts::reformat_type;
use mlx5_ifc::prm::caps::FlowTableNicCap;
use mlx5_ifc::prm::reformat::{
    AllocPacketReformatContextIn as In, AllocPacketReformatContextOut as Out,
    DeallocPacketReformatContextIn, PacketReformatContextIn as Ctx,
};
use mlx5_ifc::View;

use super::cmd::{bad_param, encoded, input, output, CmdResult, Env, Req};
use super::queue;
use crate::model::objects::ObjectKind;
use crate::model::Model;
use crate::syndrome as syn;

/// Where the reformat data starts in the command input (the context's `reformat_data`).
fn data_at() -> usize {
    In::PACKET_REFORMAT_CONTEXT.offset() + Ctx::REFORMAT_DATA.offset()
}

/// One field of the NIC flow table capabilities.
fn cap(f: mlx5_ifc::Field<FlowTableNicCap>) -> u64 {
    let caps = super::netcaps::flow_table_caps();
    View::<FlowTableNicCap>::new(&caps).map_or(0, |v| v.get(f))
}

pub(crate) fn alloc_packet_reformat_context(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let i = input::<In>(req)?;
    let c = i.nested(In::PACKET_REFORMAT_CONTEXT);
    let size = c.get(Ctx::REFORMAT_DATA_SIZE) as usize;
    let supported = c.get(Ctx::REFORMAT_TYPE) == reformat_type::L2_TO_L2_TUNNEL
        && cap(FlowTableNicCap::ENCAP_GENERAL_HEADER) == 1;
    let max = cap(FlowTableNicCap::MAX_ENCAP_HEADER_SIZE) as usize;
    let Some(data) = req.input.get(data_at()..data_at() + size) else {
        return Err(bad_param(syn::BAD_REFORMAT));
    };
    if !supported || size == 0 || size > max {
        return Err(bad_param(syn::BAD_REFORMAT));
    }
    let log_max = cap(FlowTableNicCap::LOG_MAX_PACKET_REFORMAT_CONTEXT);
    let q = queue::new_queue(data.to_vec(), Vec::new(), None);
    let id = queue::insert_limited(
        model,
        ObjectKind::PacketReformat,
        log_max,
        q,
        syn::PACKET_REFORMAT_EXHAUSTED,
    )?;
    encoded(output::<Out>(out)?.set(Out::PACKET_REFORMAT_ID, id.into()))?;
    Ok(())
}

pub(crate) fn dealloc_packet_reformat_context(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let id = input::<DeallocPacketReformatContextIn>(req)?
        .get32(DeallocPacketReformatContextIn::PACKET_REFORMAT_ID);
    queue::destroy(
        model,
        ObjectKind::PacketReformat,
        id,
        syn::UNKNOWN_PACKET_REFORMAT,
        syn::PACKET_REFORMAT_IN_USE,
    )
}
