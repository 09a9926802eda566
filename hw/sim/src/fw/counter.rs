//! Flow counters: ALLOC_FLOW_COUNTER, DEALLOC_FLOW_COUNTER, QUERY_FLOW_COUNTER. A flow table
//! entry with the COUNT action names counters after its destinations ([`super::flow`]); every
//! frame it takes adds one packet and its bytes to each ([`crate::engine::steering`]); how the
//! device keeps them: [`crate::model::flow_counter`].
//!
//! * ALLOC_FLOW_COUNTER: one counter (`flow_counter_bulk` and `flow_counter_bulk_log_size` 0;
//!   a bulk is BAD_PARAM COUNTER_BULK: the profile's `flow_counter_bulk_alloc` is 0, so Linux
//!   asks for single counters); fewer than `max_flow_counter` live (EXCEED_LIM
//!   FLOW_COUNTER_EXHAUSTED). Ids are 4-aligned (Linux's bulk query rounds a range's first id
//!   down to a multiple of 4), from 4 on; the counter starts at zero.
//! * DEALLOC_FLOW_COUNTER: a live counter (BAD_RES UNKNOWN_FLOW_COUNTER) that no entry counts in
//!   (RES_BUSY FLOW_COUNTER_IN_USE).
//! * QUERY_FLOW_COUNTER: `num_of_counters` 0 is one counter, which must be live (and another
//!   context's is not visible: UNKNOWN_FLOW_COUNTER); N > 0 reads the N ids from
//!   `flow_counter_id` (ids not allocated read 0), as many as the output holds (BAD_OUTPUT_LEN
//!   below one). `clear` zeroes what it read.

use mlx5_ifc::prm::caps::CmdHcaCap;
use mlx5_ifc::prm::flow_counter::{
    AllocFlowCounterIn, AllocFlowCounterOut, DeallocFlowCounterIn, QueryFlowCounterIn,
    QueryFlowCounterOut, TrafficCounter,
};
use mlx5_ifc::{CmdStatus, Layout, ViewMut};

use super::cmd::{bad_param, encoded, fail, input, output, CmdResult, Env, Req};
use super::queue;
use crate::model::flow_counter::{slot, values, zero, ID_ALIGN};
use crate::model::objects::{Object, ObjectKind};
use crate::model::Model;
use crate::syndrome as syn;

/// The most counters the device holds: `max_flow_counter_31_16 << 16 | max_flow_counter_15_0`.
fn max_counters(model: &Model) -> u64 {
    model.cur(CmdHcaCap::MAX_FLOW_COUNTER_31_16) << 16 | model.cur(CmdHcaCap::MAX_FLOW_COUNTER_15_0)
}

pub(crate) fn alloc_flow_counter(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let i = input::<AllocFlowCounterIn>(req)?;
    if i.get(AllocFlowCounterIn::FLOW_COUNTER_BULK) != 0
        || i.get(AllocFlowCounterIn::FLOW_COUNTER_BULK_LOG_SIZE) != 0
    {
        return Err(bad_param(syn::COUNTER_BULK));
    }
    let max = max_counters(model);
    if model.objects.count(ObjectKind::FlowCounter) as u64 >= max {
        return Err(fail(CmdStatus::ExceedLim, syn::FLOW_COUNTER_EXHAUSTED));
    }
    // Slots of ID_ALIGN ids: the object table hands out slot numbers, the id is the slot's
    // first.
    let slots = u32::try_from(max.saturating_add(1)).unwrap_or(u32::MAX / ID_ALIGN);
    let q = queue::new_queue(zero(), Vec::new(), None);
    let slot = model
        .objects
        .alloc(
            ObjectKind::FlowCounter,
            1,
            slots.min(u32::MAX / ID_ALIGN),
            Object::Queue(Box::new(q)),
        )
        .ok_or(fail(CmdStatus::ExceedLim, syn::FLOW_COUNTER_EXHAUSTED))?;
    encoded(output::<AllocFlowCounterOut>(out)?.set(
        AllocFlowCounterOut::FLOW_COUNTER_ID,
        (slot * ID_ALIGN).into(),
    ))?;
    Ok(())
}

pub(crate) fn dealloc_flow_counter(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let id = input::<DeallocFlowCounterIn>(req)?.get32(DeallocFlowCounterIn::FLOW_COUNTER_ID);
    let s = slot(id).ok_or(fail(CmdStatus::BadRes, syn::UNKNOWN_FLOW_COUNTER))?;
    queue::destroy(
        model,
        ObjectKind::FlowCounter,
        s,
        syn::UNKNOWN_FLOW_COUNTER,
        syn::FLOW_COUNTER_IN_USE,
    )
}

pub(crate) fn query_flow_counter(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let i = input::<QueryFlowCounterIn>(req)?;
    let first = i.get32(QueryFlowCounterIn::FLOW_COUNTER_ID);
    let n = i.get32(QueryFlowCounterIn::NUM_OF_COUNTERS);
    let clear = i.get(QueryFlowCounterIn::CLEAR) == 1;
    let at = QueryFlowCounterOut::FLOW_STATISTICS.offset();
    let room = out.len().saturating_sub(at) / TrafficCounter::BYTES;
    if room == 0 {
        return Err(fail(CmdStatus::BadOutputLen, syn::OUTLEN_BELOW_LAYOUT));
    }
    if n == 0 {
        let s = slot(first).ok_or(fail(CmdStatus::BadRes, syn::UNKNOWN_FLOW_COUNTER))?;
        queue::find_visible(model, ObjectKind::FlowCounter, s, syn::UNKNOWN_FLOW_COUNTER)?;
    }
    output::<QueryFlowCounterOut>(out)?;
    for k in 0..(n.max(1) as usize).min(room) {
        let id = first.wrapping_add(k as u32);
        let live = slot(id).and_then(|s| model.objects.queue_mut(ObjectKind::FlowCounter, s));
        let (p, o) = match live {
            Some(q) => {
                let v = values(&q.ctx);
                if clear {
                    q.ctx = zero();
                }
                v
            }
            None => (0, 0),
        };
        let e = at + k * TrafficCounter::BYTES;
        let mut t = encoded(ViewMut::<TrafficCounter>::new(&mut out[e..]))?;
        encoded(t.set(TrafficCounter::PACKETS, p))?;
        encoded(t.set(TrafficCounter::OCTETS, o))?;
    }
    Ok(())
}
