//! Ethernet send and receive queues and their counters: CREATE/MODIFY/DESTROY/QUERY_SQ,
//! CREATE/MODIFY/DESTROY/QUERY_RQ, ALLOC/DEALLOC/QUERY_Q_COUNTER, QUERY_VPORT_COUNTER.
//!
//! Checks, each with its own syndrome:
//!
//! * both: the context `state` RST at create (BAD_PARAM WQ_STATE); `cqn` a live CQ (BAD_RES
//!   UNKNOWN_CQ); the `wq`: `wq_type` cyclic, or for an RQ striding (linked list or cyclic;
//!   BAD_PARAM STRIDING_RQ when the device does not take its geometry) (else BAD_PARAM
//!   BAD_WQ_TYPE), `pd` 0 or a live PD,
//!   `log_wq_sz` ≤ `log_max_wq_sz` and a stride of 16 B up to `max_wqe_sz_rq` / `max_wqe_sz_sq`
//!   (WQ_SIZE), the doorbell record (4 bytes for an RQ, 8 for an SQ: receive and send counters)
//!   and the buffer ([`super::queue`]); fewer than `2^log_max_rq` / `2^log_max_sq` live (EXCEED_LIM
//!   NET_EXHAUSTED).
//! * RQ: `mem_rq_type` 0 (the WQEs in the RQ's own buffer; BAD_PARAM WQ_TYPE); `counter_set_id` 0
//!   or an allocated Q counter (BAD_RES UNKNOWN_Q_COUNTER). SQ: `reg_umr` only with the
//!   Ethernet cap `reg_umr_sq` (BAD_PARAM BAD_WQ_TYPE); `uar_page` a live UAR, at most
//!   one TIS (`tis_lst_sz` 0 for an internal queue, or 1 and `tis_num_0` a live TIS: BAD_RES
//!   UNKNOWN_TIS), no hairpin, no SWP, no
//!   multi-packet WQEs (BAD_PARAM WQ_TYPE).
//! * MODIFY_RQ/SQ: `rq_state` / `sq_state` is the current state, and the context `state` one it
//!   can move to: RST → RDY, RDY → RDY / ERR / RST, ERR → RST (BAD_RES_STATE WQ_WRONG_STATE).
//!   RQ `modify_bitmask` (Linux's `MLX5_MODIFY_RQ_IN_MODIFY_BITMASK_*`): bit 1 sets `vsd`
//!   (VLAN stripping off), bit 2 `scatter_fcs`, bit 3 `counter_set_id` (an allocated Q counter
//!   or 0); bit 1 meant the counter set here until session 8 (the Ethernet fact sheet found it).
//!   SQ `modify_bitmask` bit 0: `packet_pacing_rate_limit_index`, 0 or a set rate (BAD_PARAM
//!   PP_RATE_INDEX; [`super::pacing`]), checked at CREATE_SQ too.
//! * Q counters: ids 1..=`max_qp_cnt` (none when it is 0: EXCEED_LIM NET_EXHAUSTED); QUERY
//!   answers zeros (the data path keeps no per-queue counters yet), QUERY_VPORT_COUNTER too.

use mlx5_ifc::consts::sq_rq_state::{ERR, RDY, RST};
use mlx5_ifc::consts::wq_type;
use mlx5_ifc::prm::caps::{CmdHcaCap, PerProtocolNetworkingOffloadCaps as Eth};
use mlx5_ifc::prm::sq_rq::{
    AllocQCounterOut, CreateRqIn, CreateRqOut, CreateSqIn, CreateSqOut, DeallocQCounterIn,
    DestroyRqIn, DestroySqIn, ModifyRqIn, ModifySqIn, QueryQCounterIn, QueryRqIn, QueryRqOut,
    QuerySqIn, QuerySqOut, QueryVportCounterIn, Rqc, SetDelayDropParamsIn, Sqc,
};
use mlx5_ifc::prm::srq::Wq;
use mlx5_ifc::{CmdStatus, Field, View, ViewMut};

use super::cmd::{bad_param, encoded, fail, input, output, CmdResult, Env, Failure, Req};
use super::queue;
use crate::model::objects::ObjectKind;
use crate::model::Model;
use crate::syndrome as syn;

/// Checks a work queue of the given stride limit — cyclic, or for an RQ (`striding_ok`) a
/// striding one ([`striding_rq`]); returns its buffer pages.
fn work_queue(
    model: &Model,
    env: &mut Env<'_>,
    what: &str,
    w: &View<'_, Wq>,
    (max_stride, striding_ok): (u64, bool),
    dbr_bytes: usize,
) -> Result<Vec<u64>, Failure> {
    match w.get(Wq::WQ_TYPE) {
        wq_type::CYCLIC => {}
        wq_type::LINKED_LIST_STRIDING_RQ | wq_type::CYCLIC_STRIDING_RQ if striding_ok => {
            striding_rq(model, w)?;
        }
        _ => return Err(bad_param(syn::BAD_WQ_TYPE)),
    }
    // PD 0 is accepted: Linux's mlx5e creates its drop RQ (a queue of no WQEs it never posts
    // to) without one, which firmware takes.
    let pd = w.get32(Wq::PD);
    if pd != 0 {
        queue::require(model, ObjectKind::Pd, pd, syn::UNKNOWN_PD)?;
    }
    let log_sz = w.get(Wq::LOG_WQ_SZ);
    let stride = 1u64 << w.get(Wq::LOG_WQ_STRIDE).min(31);
    if log_sz > model.cur(CmdHcaCap::LOG_MAX_WQ_SZ) || !(16..=max_stride.max(16)).contains(&stride)
    {
        return Err(bad_param(syn::WQ_SIZE));
    }
    queue::doorbell_record(env, what, w.get(Wq::DBR_ADDR), dbr_bytes)?;
    queue::buffer(
        env,
        what,
        w.bytes(Wq::PAS),
        w.get(Wq::LOG_WQ_PG_SZ),
        w.get(Wq::PAGE_OFFSET),
        stride << log_sz,
    )
}

/// A striding RQ's geometry, checked (BAD_PARAM STRIDING_RQ): the device has `striding_rq`;
/// `log_wqe_num_of_strides` encodes a stride count (the values 0xa..=0xf, 8 to 256 strides,
/// only with `ext_stride_num_range`); a WQE holds its next segment and a data segment (a stride
/// of 32 bytes or more). Every `log_wqe_stride_size` (64 B to 8 KiB) is one.
fn striding_rq(model: &Model, w: &View<'_, Wq>) -> Result<(), Failure> {
    let ext = model.cur(CmdHcaCap::EXT_STRIDE_NUM_RANGE) == 1;
    let strides = crate::engine::eth_mpw::log_num_strides(w.get(Wq::LOG_WQE_NUM_OF_STRIDES), ext);
    if model.cur(CmdHcaCap::STRIDING_RQ) == 0 || strides.is_none() || w.get(Wq::LOG_WQ_STRIDE) < 5 {
        return Err(bad_param(syn::STRIDING_RQ));
    }
    Ok(())
}

/// The PD a work queue holds (none for PD 0).
fn pd_of(w: &View<'_, Wq>) -> Option<(ObjectKind, u32)> {
    let pd = w.get32(Wq::PD);
    (pd != 0).then_some((ObjectKind::Pd, pd))
}

fn insert(
    model: &mut Model,
    kind: ObjectKind,
    log_max: Field<CmdHcaCap>,
    q: crate::model::objects::Queue,
) -> Result<u32, Failure> {
    let log_max = model.cur(log_max);
    // A send doorbell names its queue by a 24-bit number alone, a QP's or an SQ's: SQs take
    // their numbers from the QPs' (and DCTs') space, so that one number is one send queue.
    let shared: &[ObjectKind] = match kind {
        ObjectKind::Sq => &[ObjectKind::Qp, ObjectKind::Dct],
        _ => &[],
    };
    queue::insert_limited_shared(model, kind, shared, log_max, q, syn::NET_EXHAUSTED)
}

/// MODIFY_SQ `modify_bitmask` bit 0: the packet pacing rate index (Linux's
/// `MLX5_MODIFY_SQ_BITMASK_PACKET_PACING_RATE_LIMIT_INDEX`).
const MODIFY_SQ_RATE_LIMIT_INDEX: u64 = 1 << 0;

/// MODIFY_RQ `modify_bitmask` bits (Linux's `MLX5_MODIFY_RQ_IN_MODIFY_BITMASK_*`): VLAN
/// stripping disable, FCS scatter, the counter set.
const MODIFY_RQ_VSD: u64 = 1 << 1;
const MODIFY_RQ_SCATTER_FCS: u64 = 1 << 2;
const MODIFY_RQ_COUNTER_SET_ID: u64 = 1 << 3;

pub(crate) fn create_rq(
    model: &mut Model,
    env: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let i = input::<CreateRqIn>(req)?;
    let c = i.nested(CreateRqIn::CTX);
    if c.get(Rqc::STATE) != RST {
        return Err(bad_param(syn::WQ_STATE));
    }
    if c.get(Rqc::MEM_RQ_TYPE) != 0 || c.get(Rqc::HAIRPIN) != 0 {
        return Err(bad_param(syn::BAD_WQ_TYPE));
    }
    let cqn = c.get32(Rqc::CQN);
    queue::require(model, ObjectKind::Cq, cqn, syn::UNKNOWN_CQ)?;
    let counter = c.get32(Rqc::COUNTER_SET_ID);
    if counter != 0 {
        queue::require(model, ObjectKind::QCounter, counter, syn::UNKNOWN_Q_COUNTER)?;
    }
    let max = model.cur(CmdHcaCap::MAX_WQE_SZ_RQ);
    let pas = work_queue(model, env, "CREATE_RQ", &c.nested(Rqc::WQ), (max, true), 4)?;
    let mut q = queue::new_queue(queue::image(&c)?, pas, None);
    q.holds.push((ObjectKind::Cq, cqn));
    q.holds.extend(pd_of(&c.nested(Rqc::WQ)));
    let rqn = insert(model, ObjectKind::Rq, CmdHcaCap::LOG_MAX_RQ, q)?;
    encoded(output::<CreateRqOut>(out)?.set(CreateRqOut::RQN, rqn.into()))?;
    Ok(())
}

pub(crate) fn create_sq(
    model: &mut Model,
    env: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let i = input::<CreateSqIn>(req)?;
    let c = i.nested(CreateSqIn::CTX);
    if c.get(Sqc::STATE) != RST {
        return Err(bad_param(syn::WQ_STATE));
    }
    if [
        Sqc::HAIRPIN,
        Sqc::ALLOW_SWP,
        Sqc::ALLOW_MULTI_PKT_SEND_WQE,
        Sqc::NON_WIRE,
    ]
    .iter()
    .any(|&f| c.get(f) != 0)
    {
        return Err(bad_param(syn::BAD_WQ_TYPE));
    }
    // A send queue that executes UMR WQEs (mlx5e's ICOSQ maps a striding RQ's pages with
    // them) needs the Ethernet capability `reg_umr_sq`.
    if c.get(Sqc::REG_UMR) == 1 && super::netcaps::eth_cap(Eth::REG_UMR_SQ) == 0 {
        return Err(bad_param(syn::BAD_WQ_TYPE));
    }
    super::pacing::check_index(model, c.get(Sqc::PACKET_PACING_RATE_LIMIT_INDEX))?;
    let cqn = c.get32(Sqc::CQN);
    queue::require(model, ObjectKind::Cq, cqn, syn::UNKNOWN_CQ)?;
    // A send queue to the wire names its TIS; an internal one (mlx5e's ICOSQs) names none.
    let tis = match c.get(Sqc::TIS_LST_SZ) {
        0 => None,
        1 => {
            let t = c.get32(Sqc::TIS_NUM_0);
            queue::require(model, ObjectKind::Tis, t, syn::UNKNOWN_TIS)?;
            Some(t)
        }
        _ => return Err(bad_param(syn::BAD_WQ_TYPE)),
    };
    let w = c.nested(Sqc::WQ);
    let uar = w.get32(Wq::UAR_PAGE);
    queue::require(model, ObjectKind::Uar, uar, syn::UNKNOWN_UAR)?;
    let max = model.cur(CmdHcaCap::MAX_WQE_SZ_SQ);
    let pas = work_queue(model, env, "CREATE_SQ", &w, (max, false), 8)?;
    let mut q = queue::new_queue(queue::image(&c)?, pas, Some(uar));
    q.holds.push((ObjectKind::Cq, cqn));
    q.holds.extend(tis.map(|t| (ObjectKind::Tis, t)));
    q.holds.extend(pd_of(&w));
    let sqn = insert(model, ObjectKind::Sq, CmdHcaCap::LOG_MAX_SQ, q)?;
    encoded(output::<CreateSqOut>(out)?.set(CreateSqOut::SQN, sqn.into()))?;
    Ok(())
}

/// Whether a work queue may move from `cur` to `next`. RST → RST is a transition firmware
/// takes: Linux's mlx5_ib moves a raw packet QP's SQ that way when the QP goes to INIT (the SQ
/// becomes RDY only at RTS) and to RESET from INIT; rdma-core's test suite does both on real
/// cards (its raw packet tests failed here with BAD_RES_STATE before).
fn transition_ok(cur: u64, next: u64) -> bool {
    matches!(
        (cur, next),
        (RST, RST | RDY) | (RDY, RDY | ERR | RST) | (ERR, RST)
    )
}

/// Moves the state field `state` of queue `id` of `kind` from `cur` to `next`.
fn transition<L: mlx5_ifc::Layout>(
    model: &mut Model,
    kind: ObjectKind,
    id: u32,
    unknown: u32,
    state: Field<L>,
    (cur, next): (u64, u64),
) -> Result<&mut crate::model::objects::Queue, Failure> {
    queue::changeable(model, kind, id, unknown)?;
    let q = model
        .objects
        .queue_mut(kind, id)
        .ok_or(fail(CmdStatus::BadRes, unknown))?;
    let now = View::<L>::new(&q.ctx).map_or(u64::MAX, |v| v.get(state));
    if now != cur || !transition_ok(cur, next) {
        return Err(fail(CmdStatus::BadResState, syn::WQ_WRONG_STATE));
    }
    encoded(ViewMut::<L>::new(&mut q.ctx).and_then(|mut v| v.set(state, next).map(drop)))?;
    Ok(q)
}

pub(crate) fn modify_rq(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let i = input::<ModifyRqIn>(req)?;
    let c = i.nested(ModifyRqIn::CTX);
    let mask = i.get(ModifyRqIn::MODIFY_BITMASK);
    let counter = c.get32(Rqc::COUNTER_SET_ID);
    if mask & MODIFY_RQ_COUNTER_SET_ID != 0 && counter != 0 {
        queue::require(model, ObjectKind::QCounter, counter, syn::UNKNOWN_Q_COUNTER)?;
    }
    let rqn = i.get32(ModifyRqIn::RQN);
    let states = (i.get(ModifyRqIn::RQ_STATE), c.get(Rqc::STATE));
    let q = transition(
        model,
        ObjectKind::Rq,
        rqn,
        syn::UNKNOWN_RQ,
        Rqc::STATE,
        states,
    )?;
    // The fields the bitmask names, from the command's context into the RQ's.
    let mut fields = heapless::Vec::<(Field<Rqc>, u64), 3>::new();
    for (bit, f) in [
        (MODIFY_RQ_VSD, Rqc::VSD),
        (MODIFY_RQ_SCATTER_FCS, Rqc::SCATTER_FCS),
        (MODIFY_RQ_COUNTER_SET_ID, Rqc::COUNTER_SET_ID),
    ] {
        if mask & bit != 0 {
            let _ = fields.push((f, c.get(f)));
        }
    }
    encoded(ViewMut::<Rqc>::new(&mut q.ctx).and_then(|mut v| {
        for (f, x) in fields {
            v.set(f, x)?;
        }
        Ok(())
    }))?;
    if states.1 == RST {
        // Back to empty: the device's count of WQEs used (and a striding RQ's place) starts
        // over.
        model.rt.forget(ObjectKind::Rq, rqn);
    }
    Ok(())
}

pub(crate) fn modify_sq(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let i = input::<ModifySqIn>(req)?;
    let c = i.nested(ModifySqIn::CTX);
    let sqn = i.get32(ModifySqIn::SQN);
    let states = (i.get(ModifySqIn::SQ_STATE), c.get(Sqc::STATE));
    let rate = (i.get(ModifySqIn::MODIFY_BITMASK) & MODIFY_SQ_RATE_LIMIT_INDEX != 0)
        .then(|| c.get(Sqc::PACKET_PACING_RATE_LIMIT_INDEX));
    if let Some(index) = rate {
        super::pacing::check_index(model, index)?;
    }
    let q = transition(
        model,
        ObjectKind::Sq,
        sqn,
        syn::UNKNOWN_SQ,
        Sqc::STATE,
        states,
    )?;
    if let Some(index) = rate {
        encoded(
            ViewMut::<Sqc>::new(&mut q.ctx)
                .and_then(|mut v| v.set(Sqc::PACKET_PACING_RATE_LIMIT_INDEX, index).map(drop)),
        )?;
    }
    if states.1 == RST {
        // Back to empty: the device's WQE counter starts over.
        model.rt.forget(ObjectKind::Sq, sqn);
    }
    Ok(())
}

pub(crate) fn destroy_rq(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let rqn = input::<DestroyRqIn>(req)?.get32(DestroyRqIn::RQN);
    queue::destroy(model, ObjectKind::Rq, rqn, syn::UNKNOWN_RQ, syn::WQ_IN_USE)
}

pub(crate) fn destroy_sq(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let sqn = input::<DestroySqIn>(req)?.get32(DestroySqIn::SQN);
    queue::destroy(model, ObjectKind::Sq, sqn, syn::UNKNOWN_SQ, syn::WQ_IN_USE)
}

pub(crate) fn query_rq(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let rqn = input::<QueryRqIn>(req)?.get32(QueryRqIn::RQN);
    let q = queue::find_visible(model, ObjectKind::Rq, rqn, syn::UNKNOWN_RQ)?;
    let mut o = output::<QueryRqOut>(out)?;
    queue::put(o.nested_mut(QueryRqOut::RQ_CONTEXT).as_bytes(), &q.ctx);
    Ok(())
}

pub(crate) fn query_sq(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let sqn = input::<QuerySqIn>(req)?.get32(QuerySqIn::SQN);
    let q = queue::find_visible(model, ObjectKind::Sq, sqn, syn::UNKNOWN_SQ)?;
    let mut o = output::<QuerySqOut>(out)?;
    queue::put(o.nested_mut(QuerySqOut::SQ_CONTEXT).as_bytes(), &q.ctx);
    Ok(())
}

pub(crate) fn alloc_q_counter(
    model: &mut Model,
    _: &mut Env<'_>,
    _: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let max = model.cur(CmdHcaCap::MAX_QP_CNT) as u32;
    let q = queue::new_queue(Vec::new(), Vec::new(), None);
    let id = queue::insert(
        model,
        ObjectKind::QCounter,
        &[],
        (1, max + 1),
        q,
        syn::NET_EXHAUSTED,
    )?;
    encoded(output::<AllocQCounterOut>(out)?.set(AllocQCounterOut::COUNTER_SET_ID, id.into()))?;
    Ok(())
}

pub(crate) fn dealloc_q_counter(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let id = input::<DeallocQCounterIn>(req)?.get32(DeallocQCounterIn::COUNTER_SET_ID);
    queue::destroy(
        model,
        ObjectKind::QCounter,
        id,
        syn::UNKNOWN_Q_COUNTER,
        syn::WQ_IN_USE,
    )
}

pub(crate) fn query_q_counter(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let id = input::<QueryQCounterIn>(req)?.get32(QueryQCounterIn::COUNTER_SET_ID);
    queue::require(model, ObjectKind::QCounter, id, syn::UNKNOWN_Q_COUNTER)
}

pub(crate) fn query_vport_counter(
    _: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let i = input::<QueryVportCounterIn>(req)?;
    if i.get(QueryVportCounterIn::OTHER_VPORT) != 0 || i.get(QueryVportCounterIn::VPORT_NUMBER) != 0
    {
        return Err(bad_param(syn::BAD_VPORT));
    }
    Ok(())
}

/// SET_DELAY_DROP_PARAMS (0x910): arms delay drop for `delay_drop_timeout` × 100 µs (0
/// disarms it) — what mlx5_ib sends when the first RQ with delay drop is made and again after
/// each DELAY_DROP_TIMEOUT event. Without `rq_delay_drop`: BAD_PARAM DELAY_DROP_NOT_SUPPORTED.
pub(crate) fn set_delay_drop_params(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    if model.cur(CmdHcaCap::RQ_DELAY_DROP) == 0 {
        return Err(bad_param(syn::DELAY_DROP_NOT_SUPPORTED));
    }
    let t = input::<SetDelayDropParamsIn>(req)?.get(SetDelayDropParamsIn::DELAY_DROP_TIMEOUT);
    model.delay_drop_ns = (t != 0).then_some(t * 100_000);
    Ok(())
}
