//! Flow steering: flow tables, flow groups and flow table entries (FTEs), and the root table of
//! each table type — CREATE/DESTROY/MODIFY_FLOW_TABLE, SET_FLOW_TABLE_ROOT, CREATE/DESTROY_FLOW_GROUP,
//! SET/DELETE_FLOW_TABLE_ENTRY.
//!
//! The rules, from the FLOW_TABLE capabilities of the table type (`flow_table_nic_cap`, NIC
//! receive = `table_type` 0, NIC transmit = 1) and from how Linux's `fs_cmd.c` uses them:
//!
//! * every command: `other_vport` 0 and `vport_number` 0 (BAD_PARAM BAD_VPORT); the table type
//!   has `ft_support` (BAD_PARAM FT_UNSUPPORTED_TYPE).
//! * CREATE_FLOW_TABLE: `level` ≤ `max_ft_level` (FT_LEVEL); `log_size` ≤ `log_max_ft_size`
//!   (FT_SIZE); `table_miss_action` 0 (default: the next priority, or drop) or 1 (forward to
//!   `table_miss_id`, a live table of the same type at a higher level; else FT_MISS_ACTION or
//!   BAD_RES UNKNOWN_FLOW_TABLE); no decap tables, and `reformat_en` and `termination_table`
//!   only where the type offers `reformat` and `termination_table` (NIC RX: a flow sampler's
//!   sample table, [`super::sampler`]) (FT_UNSUPPORTED_TYPE);
//!   fewer than `2^log_max_ft_num` tables live (EXCEED_LIM FLOW_TABLE_EXHAUSTED). A
//!   software-owned table (`sw_owner` 1, mlx5dv direct rules' DevX table): its
//!   `sw_owner_icm_root_0` — and `_root_1` unless 0 — 64-byte aligned inside a live SW ICM
//!   object (BAD_PARAM FT_SW_OWNER_ROOT); a frame forwarded to it is the STE walk's from that
//!   root ([`crate::model::icm_map::sw_table_root`]). Taken whatever the type's `sw_owner` cap
//!   says (it stays clear until the walk serves such tables end to end). The output's
//!   `icm_address_*` is the table's root.
//! * QUERY_FLOW_TABLE: a live table of that type the command's uid sees (BAD_RES
//!   UNKNOWN_FLOW_TABLE); its context as created, with `sw_owner_icm_root_0` and `_1` its ICM
//!   roots — a FW-owned table's firmware address in both (rdma-core 56.1 reads root 0, 44.0
//!   root 1 for NIC TX) ([`crate::model::icm_map::table_roots`]).
//! * MODIFY_FLOW_TABLE: `modify_field_select` bit 0 (miss table) only, checked as at create.
//! * SET_FLOW_TABLE_ROOT: needs `modify_root`; op_mod 0 makes `table_id` (a live table of the
//!   type) the root, op_mod 1 disconnects the root. Destroying the root table leaves the type
//!   with none (Linux's unload destroys its anchor table, the root, without disconnecting it).
//! * CREATE_FLOW_GROUP: a live FW-owned table (BAD_RES UNKNOWN_FLOW_TABLE; a software-owned one's
//!   entries are STEs in ICM: BAD_PARAM FT_SW_OWNED); `start_flow_index` ≤
//!   `end_flow_index` < the table size, not overlapping another group of the table (FG_RANGE);
//!   `match_criteria_enable` only outer headers (bit 0) and misc parameters (bit 1) (FG_CRITERIA).
//! * SET_FLOW_TABLE_ENTRY: op_mod 0 (a new entry; FTE_EXISTS if the index is taken) or 1 (modify:
//!   needs `flow_modify_en`); `flow_index` inside the group `group_id` of that table (FTE_INDEX);
//!   `action` one of ALLOW (1), DROP (2) and FWD_DEST (4), with FWD_DEST iff destinations are
//!   listed, COUNT (8) iff counters are listed, PACKET_REFORMAT (0x10) where the type offers
//!   `reformat` and not with DROP (FTE_ACTION); at most `2^log_max_destination` destinations,
//!   each a live TIR (type 2) or a live flow table of the type at a higher level (type 1; a
//!   software-owned table at any level), at
//!   most `2^log_max_flow_counter` counters after them at the same 8-byte stride, each a live
//!   flow counter, no extended destinations (FTE_DEST / BAD_RES UNKNOWN_TIR,
//!   UNKNOWN_FLOW_TABLE, UNKNOWN_FLOW_COUNTER); `packet_reformat_id` a live context
//!   (UNKNOWN_PACKET_REFORMAT); MOD_HDR (0x40) where the type offers `max_modify_header_actions`
//!   and not with DROP, `modify_header_id` a live context of the table's type
//!   (UNKNOWN_MODIFY_HEADER). The entry holds all of them.
//! * DELETE_FLOW_TABLE_ENTRY: a live entry at (`table_id`, `flow_index`) (BAD_RES UNKNOWN_FTE).
//! * A table with groups, entries forwarding to it or a table missing to it, and a group with
//!   entries, are RES_BUSY on destroy (FLOW_TABLE_IN_USE, FLOW_GROUP_IN_USE).
//!
//! Each object keeps its command input as its context image; an entry holds its group and its
//! destinations, a group its table, a table its miss table.

use mlx5_ifc::consts::flow_action::{ALLOW, COUNT, DROP, FWD_DEST, MOD_HDR, PACKET_REFORMAT};
use mlx5_ifc::consts::flow_table_type::{NIC_RX, NIC_TX};
use mlx5_ifc::consts::{flow_dest_type, match_criteria, set_flow_table_root, table_miss_action};
use mlx5_ifc::prm::caps::{FlowTableNicCap, FlowTablePropLayout as Prop};
use mlx5_ifc::prm::flow::{
    CreateFlowGroupIn, CreateFlowGroupOut, CreateFlowTableIn, CreateFlowTableOut, DeleteFteIn,
    DestFormatStruct as Dest, DestroyFlowGroupIn, DestroyFlowTableIn, FlowContext,
    FlowTableContext as Ftc, ModifyFlowTableIn, QueryFlowTableIn, QueryFlowTableOut,
    SetFlowTableRootIn, SetFteIn,
};
use mlx5_ifc::prm::flow_counter::FlowCounterList as CounterEntry;
use mlx5_ifc::{CmdStatus, Field, Layout, View};

use super::cmd::{bad_param, encoded, fail, input, output, view, CmdResult, Env, Failure, Req};
use super::queue;
use crate::model::icm_map;
use crate::model::objects::ObjectKind;
use crate::model::Model;
use crate::syndrome as syn;

/// `match_criteria_enable` bits supported: outer headers, misc parameters.
const CRITERIA_SUPPORTED: u64 = match_criteria::OUTER_HEADERS | match_criteria::MISC_PARAMETERS;
/// Byte offset of the destination list in SET_FLOW_TABLE_ENTRY's input.
const DEST_LIST: usize =
    SetFteIn::FLOW_CONTEXT.info.bit as usize / 8 + FlowContext::DESTINATION.info.bit as usize / 8;

/// The flow-table properties of `table_type`, or FT_UNSUPPORTED_TYPE.
pub(crate) fn props(table_type: u64) -> Result<Vec<u8>, Failure> {
    let caps = super::netcaps::flow_table_caps();
    let v = View::<FlowTableNicCap>::new(&caps).map_err(|_| bad_param(syn::FT_UNSUPPORTED_TYPE))?;
    let half = match table_type {
        NIC_RX => FlowTableNicCap::FLOW_TABLE_PROPERTIES_NIC_RECEIVE,
        NIC_TX => FlowTableNicCap::FLOW_TABLE_PROPERTIES_NIC_TRANSMIT,
        _ => return Err(bad_param(syn::FT_UNSUPPORTED_TYPE)),
    };
    let p = v.nested(half).as_bytes()[..Prop::BYTES].to_vec();
    if prop(&p, Prop::FT_SUPPORT) == 0 {
        return Err(bad_param(syn::FT_UNSUPPORTED_TYPE));
    }
    Ok(p)
}

pub(crate) fn prop(p: &[u8], f: Field<Prop>) -> u64 {
    View::<Prop>::new(p).map_or(0, |v| v.get(f))
}

/// The vport fields every flow command carries: only the function's own vport.
fn own_vport(other_vport: u64, vport_number: u64) -> CmdResult {
    if other_vport != 0 || vport_number != 0 {
        return Err(bad_param(syn::BAD_VPORT));
    }
    Ok(())
}

/// A live flow table's type, level and `log_size`.
fn table(model: &Model, id: u32) -> Result<(u64, u64, u64), Failure> {
    let q = queue::find(model, ObjectKind::FlowTable, id, syn::UNKNOWN_FLOW_TABLE)?;
    let v = View::<CreateFlowTableIn>::new(&q.ctx)
        .map_err(|_| fail(CmdStatus::InternalErr, syn::INTERNAL))?;
    let c = v.nested(CreateFlowTableIn::FLOW_TABLE_CONTEXT);
    Ok((
        v.get(CreateFlowTableIn::TABLE_TYPE),
        c.get(Ftc::LEVEL),
        c.get(Ftc::LOG_SIZE),
    ))
}

/// Checks a table's miss action against its type and level; returns the table it holds.
fn miss(model: &Model, ty: u64, level: u64, c: &View<'_, Ftc>) -> Result<Option<u32>, Failure> {
    match c.get(Ftc::TABLE_MISS_ACTION) {
        table_miss_action::DEFAULT => Ok(None),
        table_miss_action::FORWARD => {
            let id = c.get32(Ftc::TABLE_MISS_ID);
            let (t, l, _) = table(model, id)?;
            if t != ty || l <= level {
                return Err(bad_param(syn::FT_MISS_ACTION));
            }
            Ok(Some(id))
        }
        _ => Err(bad_param(syn::FT_MISS_ACTION)),
    }
}

pub(crate) fn create_flow_table(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let i = input::<CreateFlowTableIn>(req)?;
    own_vport(
        i.get(CreateFlowTableIn::OTHER_VPORT),
        i.get(CreateFlowTableIn::VPORT_NUMBER),
    )?;
    let ty = i.get(CreateFlowTableIn::TABLE_TYPE);
    let p = props(ty)?;
    let c = i.nested(CreateFlowTableIn::FLOW_TABLE_CONTEXT);
    // A table may reformat (its entries' PACKET_REFORMAT) where the type offers `reformat`, be
    // a termination table where it offers `termination_table`.
    if c.get(Ftc::DECAP_EN) != 0
        || (c.get(Ftc::REFORMAT_EN) == 1 && prop(&p, Prop::REFORMAT) == 0)
        || (c.get(Ftc::TERMINATION_TABLE) == 1 && prop(&p, Prop::TERMINATION_TABLE) == 0)
    {
        return Err(bad_param(syn::FT_UNSUPPORTED_TYPE));
    }
    let level = c.get(Ftc::LEVEL);
    if level > prop(&p, Prop::MAX_FT_LEVEL) {
        return Err(bad_param(syn::FT_LEVEL));
    }
    if c.get(Ftc::LOG_SIZE) > prop(&p, Prop::LOG_MAX_FT_SIZE) {
        return Err(bad_param(syn::FT_SIZE));
    }
    let held = miss(model, ty, level, &c)?;
    if c.get(Ftc::SW_OWNER) == 1 {
        sw_roots(model, &c)?;
    }
    let log_max = prop(&p, Prop::LOG_MAX_FT_NUM).min(24);
    if !queue::below_limit(model.objects.count(ObjectKind::FlowTable), log_max) {
        return Err(fail(CmdStatus::ExceedLim, syn::FLOW_TABLE_EXHAUSTED));
    }
    let mut q = queue::new_queue(queue::image(&i)?, Vec::new(), None);
    q.holds.extend(held.map(|t| (ObjectKind::FlowTable, t)));
    let id = queue::insert(
        model,
        ObjectKind::FlowTable,
        &[],
        (1, queue::span(24)),
        q,
        syn::FLOW_TABLE_EXHAUSTED,
    )?;
    let icm = icm_map::table_roots(model, id).0;
    let mut o = output::<CreateFlowTableOut>(out)?;
    encoded(o.set(CreateFlowTableOut::TABLE_ID, id.into()))?;
    encoded(o.set(CreateFlowTableOut::ICM_ADDRESS_63_40, icm >> 40))?;
    encoded(o.set(CreateFlowTableOut::ICM_ADDRESS_39_32, (icm >> 32) & 0xff))?;
    encoded(o.set(CreateFlowTableOut::ICM_ADDRESS_31_0, icm & 0xffff_ffff))?;
    Ok(())
}

/// A software-owned table's roots: `sw_owner_icm_root_0`, and `_root_1` unless 0, each
/// 64-byte aligned (an STE) inside a live SW ICM object (BAD_PARAM FT_SW_OWNER_ROOT).
fn sw_roots(model: &Model, c: &View<'_, Ftc>) -> CmdResult {
    let ste = |a: u64| a % 64 == 0 && model.icm.object_at(a, 64).is_some();
    let (root0, root1) = (
        c.get(Ftc::SWS_SW_OWNER_ICM_ROOT_0),
        c.get(Ftc::SWS_SW_OWNER_ICM_ROOT_1),
    );
    if !ste(root0) || (root1 != 0 && !ste(root1)) {
        return Err(bad_param(syn::FT_SW_OWNER_ROOT));
    }
    Ok(())
}

pub(crate) fn query_flow_table(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let i = input::<QueryFlowTableIn>(req)?;
    let ty = i.get(QueryFlowTableIn::TABLE_TYPE);
    props(ty)?;
    let id = i.get32(QueryFlowTableIn::TABLE_ID);
    let q = queue::find_visible(model, ObjectKind::FlowTable, id, syn::UNKNOWN_FLOW_TABLE)?;
    let v = view::<CreateFlowTableIn>(&q.ctx)?;
    if v.get(CreateFlowTableIn::TABLE_TYPE) != ty {
        return Err(fail(CmdStatus::BadRes, syn::UNKNOWN_FLOW_TABLE));
    }
    let ctx = v.nested(CreateFlowTableIn::FLOW_TABLE_CONTEXT);
    let (root0, root1) = icm_map::table_roots(model, id);
    let mut o = output::<QueryFlowTableOut>(out)?;
    let mut c = o.nested_mut(QueryFlowTableOut::FLOW_TABLE_CONTEXT);
    queue::put(c.as_bytes(), ctx.as_bytes());
    encoded(c.set(Ftc::SWS_SW_OWNER_ICM_ROOT_0, root0))?;
    encoded(c.set(Ftc::SWS_SW_OWNER_ICM_ROOT_1, root1))?;
    Ok(())
}

pub(crate) fn destroy_flow_table(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let i = input::<DestroyFlowTableIn>(req)?;
    own_vport(
        i.get(DestroyFlowTableIn::OTHER_VPORT),
        i.get(DestroyFlowTableIn::VPORT_NUMBER),
    )?;
    let id = i.get32(DestroyFlowTableIn::TABLE_ID);
    let (ty, _, _) = table(model, id)?;
    if ty != i.get(DestroyFlowTableIn::TABLE_TYPE) {
        return Err(fail(CmdStatus::BadRes, syn::UNKNOWN_FLOW_TABLE));
    }
    queue::destroy(
        model,
        ObjectKind::FlowTable,
        id,
        syn::UNKNOWN_FLOW_TABLE,
        syn::FLOW_TABLE_IN_USE,
    )?;
    // Destroying the root leaves the type without one (Linux destroys its anchor table, the
    // root, at unload without disconnecting it first).
    for root in model.flow_root.iter_mut().filter(|r| **r == Some(id)) {
        *root = None;
    }
    Ok(())
}

pub(crate) fn modify_flow_table(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let i = input::<ModifyFlowTableIn>(req)?;
    own_vport(
        i.get(ModifyFlowTableIn::OTHER_VPORT),
        i.get(ModifyFlowTableIn::VPORT_NUMBER),
    )?;
    let id = i.get32(ModifyFlowTableIn::TABLE_ID);
    let (ty, level, _) = table(model, id)?;
    if ty != i.get(ModifyFlowTableIn::TABLE_TYPE) {
        return Err(fail(CmdStatus::BadRes, syn::UNKNOWN_FLOW_TABLE));
    }
    // Bit 0: the miss action and table. Nothing else is modifiable here.
    if i.get(ModifyFlowTableIn::MODIFY_FIELD_SELECT) != 1 {
        return Err(bad_param(syn::FT_MISS_ACTION));
    }
    let c = i.nested(ModifyFlowTableIn::FLOW_TABLE_CONTEXT);
    let held = miss(model, ty, level, &c)?;
    let Some(q) = model.objects.queue_mut(ObjectKind::FlowTable, id) else {
        return Err(fail(CmdStatus::BadRes, syn::UNKNOWN_FLOW_TABLE));
    };
    let mut v = encoded(mlx5_ifc::ViewMut::<CreateFlowTableIn>::new(&mut q.ctx))?;
    let mut ctx = v.nested_mut(CreateFlowTableIn::FLOW_TABLE_CONTEXT);
    encoded(ctx.set(Ftc::TABLE_MISS_ACTION, c.get(Ftc::TABLE_MISS_ACTION)))?;
    encoded(ctx.set(Ftc::TABLE_MISS_ID, c.get(Ftc::TABLE_MISS_ID)))?;
    let holds = held
        .map(|t| (ObjectKind::FlowTable, t))
        .into_iter()
        .collect();
    queue::rehold(model, ObjectKind::FlowTable, id, holds);
    Ok(())
}

pub(crate) fn set_flow_table_root(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let i = input::<SetFlowTableRootIn>(req)?;
    own_vport(
        i.get(SetFlowTableRootIn::OTHER_VPORT),
        i.get(SetFlowTableRootIn::VPORT_NUMBER),
    )?;
    if i.get(SetFlowTableRootIn::TABLE_OF_OTHER_VPORT) != 0 {
        return Err(bad_param(syn::BAD_VPORT));
    }
    let ty = i.get(SetFlowTableRootIn::TABLE_TYPE);
    if prop(&props(ty)?, Prop::MODIFY_ROOT) == 0 {
        return Err(bad_param(syn::FT_UNSUPPORTED_TYPE));
    }
    let slot = usize::from(ty == NIC_TX);
    let new = match req.op_mod {
        set_flow_table_root::CONNECT => {
            let id = i.get32(SetFlowTableRootIn::TABLE_ID);
            if table(model, id)?.0 != ty {
                return Err(fail(CmdStatus::BadRes, syn::UNKNOWN_FLOW_TABLE));
            }
            Some(id)
        }
        set_flow_table_root::DISCONNECT => None,
        _ => return Err(bad_param(syn::BAD_OP_MOD)),
    };
    model.flow_root[slot] = new;
    Ok(())
}

/// A live group's table and index range.
fn group(model: &Model, id: u32) -> Option<(u32, u64, u64)> {
    let q = model.objects.queue(ObjectKind::FlowGroup, id)?;
    let v = View::<CreateFlowGroupIn>::new(&q.ctx).ok()?;
    Some((
        v.get32(CreateFlowGroupIn::TABLE_ID),
        v.get(CreateFlowGroupIn::START_FLOW_INDEX),
        v.get(CreateFlowGroupIn::END_FLOW_INDEX),
    ))
}

pub(crate) fn create_flow_group(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let i = input::<CreateFlowGroupIn>(req)?;
    own_vport(
        i.get(CreateFlowGroupIn::OTHER_VPORT),
        i.get(CreateFlowGroupIn::VPORT_NUMBER),
    )?;
    let tid = i.get32(CreateFlowGroupIn::TABLE_ID);
    let (ty, _, log_size) = table(model, tid)?;
    if ty != i.get(CreateFlowGroupIn::TABLE_TYPE) {
        return Err(fail(CmdStatus::BadRes, syn::UNKNOWN_FLOW_TABLE));
    }
    if icm_map::sw_table_root(model, tid).is_some() {
        return Err(bad_param(syn::FT_SW_OWNED));
    }
    let (start, end) = (
        i.get(CreateFlowGroupIn::START_FLOW_INDEX),
        i.get(CreateFlowGroupIn::END_FLOW_INDEX),
    );
    let overlaps = model
        .objects
        .queues(ObjectKind::FlowGroup)
        .into_iter()
        .filter_map(|g| group(model, g))
        .any(|(t, s, e)| t == tid && s <= end && start <= e);
    if start > end || end >= 1u64 << log_size || overlaps {
        return Err(bad_param(syn::FG_RANGE));
    }
    if i.get(CreateFlowGroupIn::MATCH_CRITERIA_ENABLE) & !CRITERIA_SUPPORTED != 0
        || i.get(CreateFlowGroupIn::GROUP_TYPE) != 0
    {
        return Err(bad_param(syn::FG_CRITERIA));
    }
    let mut q = queue::new_queue(queue::image(&i)?, Vec::new(), None);
    q.holds.push((ObjectKind::FlowTable, tid));
    let id = queue::insert(
        model,
        ObjectKind::FlowGroup,
        &[],
        (1, queue::span(24)),
        q,
        syn::FLOW_TABLE_EXHAUSTED,
    )?;
    encoded(output::<CreateFlowGroupOut>(out)?.set(CreateFlowGroupOut::GROUP_ID, id.into()))?;
    Ok(())
}

pub(crate) fn destroy_flow_group(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let i = input::<DestroyFlowGroupIn>(req)?;
    own_vport(
        i.get(DestroyFlowGroupIn::OTHER_VPORT),
        i.get(DestroyFlowGroupIn::VPORT_NUMBER),
    )?;
    let id = i.get32(DestroyFlowGroupIn::GROUP_ID);
    match group(model, id) {
        Some((t, _, _)) if t == i.get32(DestroyFlowGroupIn::TABLE_ID) => {}
        _ => return Err(fail(CmdStatus::BadRes, syn::UNKNOWN_FLOW_GROUP)),
    }
    queue::destroy(
        model,
        ObjectKind::FlowGroup,
        id,
        syn::UNKNOWN_FLOW_GROUP,
        syn::FLOW_GROUP_IN_USE,
    )
}

/// The live entry at (`table`, `index`), if any.
pub(crate) fn entry_at(model: &Model, table: u32, index: u64) -> Option<u32> {
    model
        .objects
        .queues(ObjectKind::FlowEntry)
        .into_iter()
        .find(|&e| {
            model
                .objects
                .queue(ObjectKind::FlowEntry, e)
                .and_then(|q| View::<SetFteIn>::new(&q.ctx).ok())
                .is_some_and(|v| {
                    v.get32(SetFteIn::TABLE_ID) == table && v.get(SetFteIn::FLOW_INDEX) == index
                })
        })
}

/// Checks an entry's action and destinations; returns what it holds.
fn entry_holds(
    model: &Model,
    req: &Req<'_>,
    ty: u64,
    level: u64,
    c: &View<'_, FlowContext>,
) -> Result<Vec<(ObjectKind, u32)>, Failure> {
    let action = c.get(FlowContext::ACTION);
    let dests = c.get(FlowContext::DESTINATION_LIST_SIZE);
    let counters = c.get(FlowContext::FLOW_COUNTER_LIST_SIZE);
    let p = props(ty)?;
    // One of ALLOW, DROP, FWD_DEST (FWD_DEST iff destinations are listed); COUNT iff counters
    // are listed; PACKET_REFORMAT where the type offers `reformat`, not with DROP.
    let primary = action & (ALLOW | DROP | FWD_DEST);
    if action & !(ALLOW | DROP | FWD_DEST | COUNT | PACKET_REFORMAT | MOD_HDR) != 0
        || primary.count_ones() != 1
        || (action & FWD_DEST != 0) != (dests > 0)
        || (action & COUNT != 0) != (counters > 0)
        || (action & PACKET_REFORMAT != 0 && (action & DROP != 0 || prop(&p, Prop::REFORMAT) == 0))
        || (action & MOD_HDR != 0
            && (action & DROP != 0 || prop(&p, Prop::MAX_MODIFY_HEADER_ACTIONS) == 0))
    {
        return Err(bad_param(syn::FTE_ACTION));
    }
    if c.get(FlowContext::EXTENDED_DESTINATION) != 0
        || dests > 1u64 << prop(&p, Prop::LOG_MAX_DESTINATION).min(24)
        || counters > 1u64 << prop(&p, Prop::LOG_MAX_FLOW_COUNTER).min(24)
    {
        return Err(bad_param(syn::FTE_DEST));
    }
    let list = req
        .input
        .get(DEST_LIST..DEST_LIST + (dests + counters) as usize * Dest::BYTES)
        .ok_or(fail(CmdStatus::BadInputLen, syn::INLEN_BELOW_LAYOUT))?;
    let mut holds = Vec::new();
    for d in list.chunks_exact(Dest::BYTES).take(dests as usize) {
        let d = view::<Dest>(d)?;
        let id = d.get32(Dest::DESTINATION_ID);
        match d.get(Dest::DESTINATION_TYPE) {
            flow_dest_type::TIR => {
                queue::require(model, ObjectKind::Tir, id, syn::UNKNOWN_TIR)?;
                holds.push((ObjectKind::Tir, id));
            }
            flow_dest_type::FLOW_TABLE => {
                let (t, l, _) = table(model, id)?;
                // A software-owned table is entered at its root in ICM, whatever its level:
                // direct rules' firmware tables (a destination array at level 63, an FDB one
                // at max_ft_level − 1) forward to software tables at max_ft_level − 1.
                let sw = crate::model::icm_map::sw_table_root(model, id).is_some();
                if t != ty || (l <= level && !sw) {
                    return Err(bad_param(syn::FTE_DEST));
                }
                holds.push((ObjectKind::FlowTable, id));
            }
            _ => return Err(bad_param(syn::FTE_DEST)),
        }
    }
    // Counters follow the destinations at their stride; an entry of the kernel's may count in a
    // user context's counter (mlx5_ib's DevX flows do), so any live one is taken.
    for e in list.chunks_exact(Dest::BYTES).skip(dests as usize) {
        let id = view::<CounterEntry>(e)?.get32(CounterEntry::FLOW_COUNTER_ID);
        let s = crate::model::flow_counter::slot(id)
            .filter(|&s| model.objects.contains(ObjectKind::FlowCounter, s))
            .ok_or(fail(CmdStatus::BadRes, syn::UNKNOWN_FLOW_COUNTER))?;
        holds.push((ObjectKind::FlowCounter, s));
    }
    if action & PACKET_REFORMAT != 0 {
        let id = c.get32(FlowContext::PACKET_REFORMAT_ID);
        queue::require(
            model,
            ObjectKind::PacketReformat,
            id,
            syn::UNKNOWN_PACKET_REFORMAT,
        )?;
        holds.push((ObjectKind::PacketReformat, id));
    }
    // A live modify header context of the table's type.
    if action & MOD_HDR != 0 {
        let id = c.get32(FlowContext::MODIFY_HEADER_ID);
        let same = model
            .objects
            .queue(ObjectKind::ModifyHeader, id)
            .is_some_and(|q| crate::engine::mod_hdr::table_type(&q.ctx) == ty);
        if !same {
            return Err(fail(CmdStatus::BadRes, syn::UNKNOWN_MODIFY_HEADER));
        }
        holds.push((ObjectKind::ModifyHeader, id));
    }
    Ok(holds)
}

pub(crate) fn set_fte(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let i = input::<SetFteIn>(req)?;
    own_vport(i.get(SetFteIn::OTHER_VPORT), i.get(SetFteIn::VPORT_NUMBER))?;
    let tid = i.get32(SetFteIn::TABLE_ID);
    let (ty, level, _) = table(model, tid)?;
    if ty != i.get(SetFteIn::TABLE_TYPE) {
        return Err(fail(CmdStatus::BadRes, syn::UNKNOWN_FLOW_TABLE));
    }
    let index = i.get(SetFteIn::FLOW_INDEX);
    let c = i.nested(SetFteIn::FLOW_CONTEXT);
    let gid = c.get32(FlowContext::GROUP_ID);
    match group(model, gid) {
        Some((t, s, e)) if t == tid && (s..=e).contains(&index) => {}
        _ => return Err(bad_param(syn::FTE_INDEX)),
    }
    let existing = entry_at(model, tid, index);
    match (req.op_mod, existing) {
        (0, None) => {}
        (0, Some(_)) => return Err(bad_param(syn::FTE_EXISTS)),
        (1, Some(_)) if prop(&props(ty)?, Prop::FLOW_MODIFY_EN) == 1 => {}
        (1, Some(_)) => return Err(bad_param(syn::FT_UNSUPPORTED_TYPE)),
        (1, None) => return Err(fail(CmdStatus::BadRes, syn::UNKNOWN_FTE)),
        _ => return Err(bad_param(syn::BAD_OP_MOD)),
    }
    let mut holds = entry_holds(model, req, ty, level, &c)?;
    holds.push((ObjectKind::FlowGroup, gid));
    // The entry keeps its input through its lists: destinations, then counters.
    let listed = (c.get(FlowContext::DESTINATION_LIST_SIZE)
        + c.get(FlowContext::FLOW_COUNTER_LIST_SIZE)) as usize;
    let image = req
        .input
        .get(..DEST_LIST + listed * Dest::BYTES)
        .ok_or(fail(CmdStatus::BadInputLen, syn::INLEN_BELOW_LAYOUT))?
        .to_vec();
    if let Some(old) = existing {
        queue::destroy(
            model,
            ObjectKind::FlowEntry,
            old,
            syn::UNKNOWN_FTE,
            syn::UNKNOWN_FTE,
        )?;
    }
    let mut q = queue::new_queue(image, Vec::new(), None);
    q.holds = holds;
    queue::insert(
        model,
        ObjectKind::FlowEntry,
        &[],
        (1, queue::span(24)),
        q,
        syn::FLOW_TABLE_EXHAUSTED,
    )?;
    Ok(())
}

pub(crate) fn delete_fte(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let i = input::<DeleteFteIn>(req)?;
    own_vport(
        i.get(DeleteFteIn::OTHER_VPORT),
        i.get(DeleteFteIn::VPORT_NUMBER),
    )?;
    let tid = i.get32(DeleteFteIn::TABLE_ID);
    let e = entry_at(model, tid, i.get(DeleteFteIn::FLOW_INDEX))
        .ok_or(fail(CmdStatus::BadRes, syn::UNKNOWN_FTE))?;
    queue::destroy(
        model,
        ObjectKind::FlowEntry,
        e,
        syn::UNKNOWN_FTE,
        syn::UNKNOWN_FTE,
    )
}
