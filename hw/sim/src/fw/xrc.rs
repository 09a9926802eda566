//! XRC domains and XRC SRQs, the resources Linux's mlx5_ib allocates for every device
//! (DEVICE_RESOURCES stage): ALLOC/DEALLOC_XRCD, CREATE/DESTROY_XRC_SRQ; and the P_Key table
//! query every RDMA device registration makes (QUERY_HCA_VPORT_PKEY).
//!
//! * ALLOC_XRCD needs CUR `xrc` (BAD_OP otherwise, as firmware without the feature); fewer than
//!   `2^log_max_xrcd` live (EXCEED_LIM NET_EXHAUSTED). DEALLOC of one an XRC SRQ uses: RES_BUSY
//!   XRCD_IN_USE; of an unknown one: BAD_RES UNKNOWN_XRCD.
//! * CREATE_XRC_SRQ: `log_xrc_srq_size` ≤ `log_max_srq_sz` (SRQ_TOO_BIG), a stride of 16 B <<
//!   `log_rq_stride` up to `max_wqe_sz_rq` (BAD_SRQ_STRIDE), a live `xrcd`, `pd` and `cqn`, the
//!   doorbell record (`db_record_addr_h/l`) and the buffer ([`super::queue`]). Its number comes
//!   from the SRQ/RMP number space; it holds its XRCD, PD and CQ. XRC target QPs of its domain
//!   take receive WQEs from it for the requests that name it ([`crate::engine::responder`]).
//! * QUERY_HCA_VPORT_PKEY: `other_vport` 0, `port_num` 0 or 1, `pkey_index` below the table size
//!   (`128 << pkey_table_size`) or 0xffff (all that fit the output): entry 0 is the default P_Key
//!   0xffff, the rest 0 (a RoCE port has only the default partition).

use mlx5_ifc::consts::roce::DEFAULT_PKEY;
use mlx5_ifc::prm::caps::CmdHcaCap;
use mlx5_ifc::prm::srq::{CreateXrcSrqIn, CreateXrcSrqOut, DestroyXrcSrqIn, XrcSrqc};
use mlx5_ifc::prm::uar_pd::{AllocXrcdOut, DeallocXrcdIn};
use mlx5_ifc::prm::vport::{QueryHcaVportPkeyIn, QueryHcaVportPkeyOut};
use mlx5_ifc::{CmdStatus, Layout};

use super::cmd::{bad_param, encoded, fail, input, output, CmdResult, Env, Req};
use super::queue;
use crate::model::objects::ObjectKind;
use crate::model::Model;
use crate::syndrome as syn;

/// Bytes of an SRQ doorbell record.
const SRQ_DBR_BYTES: usize = 4;

pub(crate) fn alloc_xrcd(
    model: &mut Model,
    _: &mut Env<'_>,
    _: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    if model.cur(CmdHcaCap::XRC) == 0 {
        return Err(fail(CmdStatus::BadOp, syn::UNKNOWN_OPCODE));
    }
    let log_max = queue::log_max(model, CmdHcaCap::LOG_MAX_XRCD);
    let q = queue::new_queue(Vec::new(), Vec::new(), None);
    let xrcd = queue::insert_limited(model, ObjectKind::Xrcd, log_max, q, syn::NET_EXHAUSTED)?;
    encoded(output::<AllocXrcdOut>(out)?.set(AllocXrcdOut::XRCD, xrcd.into()))?;
    Ok(())
}

pub(crate) fn dealloc_xrcd(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let xrcd = input::<DeallocXrcdIn>(req)?.get32(DeallocXrcdIn::XRCD);
    queue::destroy(
        model,
        ObjectKind::Xrcd,
        xrcd,
        syn::UNKNOWN_XRCD,
        syn::XRCD_IN_USE,
    )
}

pub(crate) fn create_xrc_srq(
    model: &mut Model,
    env: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let i = input::<CreateXrcSrqIn>(req)?;
    let c = i.nested(CreateXrcSrqIn::XRC_SRQ_CONTEXT_ENTRY);
    let log_size = c.get(XrcSrqc::LOG_XRC_SRQ_SIZE);
    if log_size > model.cur(CmdHcaCap::LOG_MAX_SRQ_SZ) {
        return Err(bad_param(syn::SRQ_TOO_BIG));
    }
    let stride = 16u64 << c.get(XrcSrqc::LOG_RQ_STRIDE);
    if stride > model.cur(CmdHcaCap::MAX_WQE_SZ_RQ) {
        return Err(bad_param(syn::BAD_SRQ_STRIDE));
    }
    let (xrcd, pd, cqn) = (
        c.get32(XrcSrqc::XRCD),
        c.get32(XrcSrqc::PD),
        c.get32(XrcSrqc::CQN),
    );
    queue::require(model, ObjectKind::Xrcd, xrcd, syn::UNKNOWN_XRCD)?;
    queue::require(model, ObjectKind::Pd, pd, syn::UNKNOWN_PD)?;
    queue::require(model, ObjectKind::Cq, cqn, syn::UNKNOWN_CQ)?;
    let dbr = (c.get(XrcSrqc::DB_RECORD_ADDR_H) << 32) | (c.get(XrcSrqc::DB_RECORD_ADDR_L) << 2);
    queue::doorbell_record(env, "CREATE_XRC_SRQ", dbr, SRQ_DBR_BYTES)?;
    let pas = queue::buffer(
        env,
        "CREATE_XRC_SRQ",
        i.bytes(CreateXrcSrqIn::PAS),
        c.get(XrcSrqc::LOG_PAGE_SIZE),
        c.get(XrcSrqc::PAGE_OFFSET),
        stride << log_size,
    )?;
    let log_srq = queue::log_max(model, CmdHcaCap::LOG_MAX_SRQ);
    let live = model.objects.count(ObjectKind::Srq)
        + model.objects.count(ObjectKind::Rmp)
        + model.objects.count(ObjectKind::XrcSrq);
    if !queue::below_limit(live, log_srq) {
        return Err(fail(CmdStatus::ExceedLim, syn::SRQ_EXHAUSTED));
    }
    let mut q = queue::new_queue(queue::image(&c)?, pas, None);
    q.holds = vec![
        (ObjectKind::Xrcd, xrcd),
        (ObjectKind::Pd, pd),
        (ObjectKind::Cq, cqn),
    ];
    let n = queue::insert(
        model,
        ObjectKind::XrcSrq,
        &[ObjectKind::Srq, ObjectKind::Rmp],
        (1, queue::span(log_srq)),
        q,
        syn::SRQ_EXHAUSTED,
    )?;
    encoded(output::<CreateXrcSrqOut>(out)?.set(CreateXrcSrqOut::XRC_SRQN, n.into()))?;
    Ok(())
}

pub(crate) fn destroy_xrc_srq(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let n = input::<DestroyXrcSrqIn>(req)?.get32(DestroyXrcSrqIn::XRC_SRQN);
    queue::destroy(
        model,
        ObjectKind::XrcSrq,
        n,
        syn::UNKNOWN_SRQ,
        syn::SRQ_IN_USE,
    )
}

pub(crate) fn query_hca_vport_pkey(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let i = input::<QueryHcaVportPkeyIn>(req)?;
    if i.get(QueryHcaVportPkeyIn::OTHER_VPORT) != 0 || i.get(QueryHcaVportPkeyIn::VPORT_NUMBER) != 0
    {
        return Err(bad_param(syn::BAD_VPORT));
    }
    if i.get(QueryHcaVportPkeyIn::PORT_NUM) > 1 {
        return Err(bad_param(syn::BAD_VHCA_PORT));
    }
    let size = 128u64 << model.cur(CmdHcaCap::PKEY_TABLE_SIZE).min(8);
    let index = i.get(QueryHcaVportPkeyIn::PKEY_INDEX);
    let room = req.outlen.saturating_sub(QueryHcaVportPkeyOut::BYTES) / 4;
    let (first, count) = match index {
        0xffff => (0, (size as usize).min(room)),
        n if n < size => (n, 1),
        _ => return Err(bad_param(syn::BAD_GID_INDEX)),
    };
    if count == 0 || room < count {
        return Err(fail(CmdStatus::BadOutputLen, syn::OUTLEN_BELOW_LAYOUT));
    }
    output::<QueryHcaVportPkeyOut>(out)?;
    let start = QueryHcaVportPkeyOut::BYTES;
    for k in 0..count {
        let pkey = if first + k as u64 == 0 {
            DEFAULT_PKEY
        } else {
            0
        };
        let at = start + 4 * k + 2;
        out[at..at + 2].copy_from_slice(&pkey.to_be_bytes());
    }
    Ok(())
}
