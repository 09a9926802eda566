//! The simulated firmware's command handlers: the HCA state machine and command dispatch.
//!
//! [`execute`] runs one delivered command. Its checks, in order, each with its own
//! status and syndrome ([`crate::syndrome`]):
//!
//! 1. `input_length` < 8 → BAD_INPUT_LEN;
//! 2. an opcode without a row in the command table → BAD_OP;
//! 3. `input_length` < the `*_in` layout size → BAD_INPUT_LEN; `output_length` < the `*_out`
//!    layout size → BAD_OUTPUT_LEN;
//! 4. the state gate → BAD_SYS_STATE: before ENABLE_HCA only ENABLE_HCA runs; between
//!    ENABLE_HCA and INIT_HCA (and after TEARDOWN_HCA) only the bring-up commands (ISSI, pages,
//!    caps, ACCESS_REG, INIT_HCA, DISABLE_HCA, SET_DRIVER_VERSION); after INIT_HCA everything;
//! 5. a `uid` that is not 0, the shared 0xffff or a live user context ([`devx`]) → BAD_PARAM;
//!    the handler then runs as that uid: what it makes is that uid's, and it may change or
//!    destroy only that uid's objects (uid 0 any);
//! 6. the command's handler (in the module of its object), which checks its fields and acts.
//!
//! Objects: UAR pages and PDs ([`resources`]), EQs ([`eq`]), CQs ([`cq`]), SRQs and RMPs
//! ([`srq`]), QPs ([`qp`], state machine in [`qp_modify`]); what queue objects share (buffers,
//! doorbell records, references, limits) is in [`queue`].
//!
//! A failed command has no effect; its output is zero apart from status and syndrome.
//!
//! Floors: the handlers work on the model ([`crate::model`]: the object table, keys, pages,
//! vport, the runtime of each object), host memory and the events ([`crate::events`]: a QP
//! moved to ERR is flushed there, PAGE_REQUEST and PORT_CHANGE are posted there); they never
//! import the data path ([`crate::engine`]), which sits beside them. Destroying an object goes
//! through [`crate::model::Model::remove`], which also forgets its runtime.
//!
//! Adding a command = a row in `SPECS` and a handler `fn(&mut Model, &mut Env, &Req, &mut
//! [u8]) -> CmdResult` ([`cmd`]) in the module of its object, and, if it creates a new kind of
//! object, its state in the model; objects live in the model's object table keyed by
//! [`crate::ObjectKind`].

pub(crate) mod cmd;
pub(crate) mod counter;
pub(crate) mod cq;
pub(crate) mod dct;
pub(crate) mod devx;
pub(crate) mod eq;
pub(crate) mod flow;
pub(crate) mod general_object;
pub(crate) mod hca;
pub(crate) mod mad;
pub(crate) mod mcg;
pub(crate) mod memic;
pub(crate) mod mkey;
pub(crate) mod modify_header;
pub(crate) mod netcaps;
pub(crate) mod odp;
pub(crate) mod pacing;
pub(crate) mod page_req;
pub(crate) mod pages;
pub(crate) mod qp;
pub(crate) mod qp_modify;
pub(crate) mod queue;
pub(crate) mod reformat;
pub(crate) mod resources;
pub(crate) mod sampler;
pub(crate) mod sq_rq;
pub(crate) mod srq;
pub(crate) mod sw_icm;
pub(crate) mod tir;
pub(crate) mod vport;
pub(crate) mod xrc;

use mlx5_ifc::prm::{
    cq as c, dct as dc, devx as dx, eq as e, flow as f, flow_counter as fc, general_obj as go,
    hca as h, memic as dm, modify_header as mh, mr as m, odp as pf, pacing as pp, qp as q,
    reformat as rf, sq_rq as w, srq as s, sw_icm as si, tir as t, uar_pd as u, vport as v,
};
use mlx5_ifc::{CmdInHeader, CmdStatus, Layout, Opcode};

use cmd::{bad_param, bad_state, fail, input, write_header, CmdResult, Env, Req};

use crate::model::{HcaState, Model};
use crate::syndrome as syn;

/// The states a command may run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gate {
    /// Only before ENABLE_HCA (ENABLE_HCA itself).
    Disabled,
    /// Any time after ENABLE_HCA.
    Enabled,
    /// Only after INIT_HCA, before TEARDOWN_HCA.
    Initialized,
}

type Handler = fn(&mut Model, &mut Env<'_>, &Req<'_>, &mut [u8]) -> CmdResult;

struct Spec {
    opcode: Opcode,
    in_bytes: usize,
    out_bytes: usize,
    gate: Gate,
    handler: Handler,
}

const fn spec<I: Layout, O: Layout>(opcode: Opcode, gate: Gate, handler: Handler) -> Spec {
    Spec {
        opcode,
        in_bytes: I::BYTES,
        out_bytes: O::BYTES,
        gate,
        handler,
    }
}

/// As [`spec`], for a command whose output may stop at `out_bytes`, before the end of its
/// layout (the handler writes what fits).
const fn spec_out<I: Layout>(
    opcode: Opcode,
    gate: Gate,
    handler: Handler,
    out_bytes: usize,
) -> Spec {
    Spec {
        opcode,
        in_bytes: I::BYTES,
        out_bytes,
        gate,
        handler,
    }
}

/// Every implemented command.
const SPECS: &[Spec] = &[
    spec::<h::EnableHcaIn, h::EnableHcaOut>(Opcode::EnableHca, Gate::Disabled, hca::enable_hca),
    spec::<h::DisableHcaIn, h::DisableHcaOut>(Opcode::DisableHca, Gate::Enabled, hca::disable_hca),
    spec::<h::QueryIssiIn, h::QueryIssiOut>(Opcode::QueryIssi, Gate::Enabled, hca::query_issi),
    spec::<h::SetIssiIn, h::SetIssiOut>(Opcode::SetIssi, Gate::Enabled, hca::set_issi),
    spec::<h::QueryPagesIn, h::QueryPagesOut>(
        Opcode::QueryPages,
        Gate::Enabled,
        pages::query_pages,
    ),
    spec::<h::ManagePagesIn, h::ManagePagesOut>(
        Opcode::ManagePages,
        Gate::Enabled,
        pages::manage_pages,
    ),
    // The capability page is cut to the output's room: rdma-core's DevX tests read the
    // general capabilities into a 2064-byte output (the page padded to 2048 bytes).
    spec_out::<h::QueryHcaCapIn>(
        Opcode::QueryHcaCap,
        Gate::Enabled,
        hca::query_hca_cap,
        h::QueryHcaCapOut::BYTES - 0x1000 + 0x800,
    ),
    spec::<h::SetHcaCapIn, h::SetHcaCapOut>(Opcode::SetHcaCap, Gate::Enabled, hca::set_hca_cap),
    spec::<h::QueryAdapterIn, h::QueryAdapterOut>(
        Opcode::QueryAdapter,
        Gate::Enabled,
        netcaps::query_adapter,
    ),
    spec::<h::AccessRegisterIn, h::AccessRegisterOut>(
        Opcode::AccessReg,
        Gate::Enabled,
        vport::access_reg,
    ),
    spec::<h::InitHcaIn, h::InitHcaOut>(Opcode::InitHca, Gate::Enabled, hca::init_hca),
    spec::<h::SetDriverVersionIn, h::SetDriverVersionOut>(
        Opcode::SetDriverVersion,
        Gate::Enabled,
        hca::set_driver_version,
    ),
    spec::<h::TeardownHcaIn, h::TeardownHcaOut>(
        Opcode::TeardownHca,
        Gate::Initialized,
        hca::teardown_hca,
    ),
    spec::<u::AllocUarIn, u::AllocUarOut>(
        Opcode::AllocUar,
        Gate::Initialized,
        resources::alloc_uar,
    ),
    spec::<u::DeallocUarIn, u::DeallocUarOut>(
        Opcode::DeallocUar,
        Gate::Initialized,
        resources::dealloc_uar,
    ),
    spec::<u::AllocPdIn, u::AllocPdOut>(Opcode::AllocPd, Gate::Initialized, resources::alloc_pd),
    spec::<u::DeallocPdIn, u::DeallocPdOut>(
        Opcode::DeallocPd,
        Gate::Initialized,
        resources::dealloc_pd,
    ),
    spec::<u::QuerySpecialContextsIn, u::QuerySpecialContextsOut>(
        Opcode::QuerySpecialContexts,
        Gate::Initialized,
        resources::query_special_contexts,
    ),
    spec::<v::QueryNicVportContextIn, v::QueryNicVportContextOut>(
        Opcode::QueryNicVportContext,
        Gate::Initialized,
        vport::query_nic_vport_context,
    ),
    spec::<v::ModifyNicVportContextIn, v::ModifyNicVportContextOut>(
        Opcode::ModifyNicVportContext,
        Gate::Initialized,
        vport::modify_nic_vport_context,
    ),
    spec::<v::SetRoceAddressIn, v::SetRoceAddressOut>(
        Opcode::SetRoceAddress,
        Gate::Initialized,
        vport::set_roce_address,
    ),
    spec::<v::QueryRoceAddressIn, v::QueryRoceAddressOut>(
        Opcode::QueryRoceAddress,
        Gate::Initialized,
        vport::query_roce_address,
    ),
    spec::<v::ModifyVportStateIn, v::ModifyVportStateOut>(
        Opcode::ModifyVportState,
        Gate::Initialized,
        vport::modify_vport_state,
    ),
    spec::<v::QueryVportStateIn, v::QueryVportStateOut>(
        Opcode::QueryVportState,
        Gate::Initialized,
        vport::query_vport_state,
    ),
    spec::<m::CreateMkeyIn, m::CreateMkeyOut>(
        Opcode::CreateMkey,
        Gate::Initialized,
        mkey::create_mkey,
    ),
    spec::<m::DestroyMkeyIn, m::DestroyMkeyOut>(
        Opcode::DestroyMkey,
        Gate::Initialized,
        mkey::destroy_mkey,
    ),
    spec::<m::QueryMkeyIn, m::QueryMkeyOut>(Opcode::QueryMkey, Gate::Initialized, mkey::query_mkey),
    spec::<dm::AllocMemicIn, dm::AllocMemicOut>(
        Opcode::AllocMemic,
        Gate::Initialized,
        memic::alloc_memic,
    ),
    spec::<dm::DeallocMemicIn, dm::DeallocMemicOut>(
        Opcode::DeallocMemic,
        Gate::Initialized,
        memic::dealloc_memic,
    ),
    spec::<go::GeneralObjInCmdHdr, go::GeneralObjOutCmdHdr>(
        Opcode::CreateGeneralObject,
        Gate::Initialized,
        general_object::create_general_object,
    ),
    spec::<go::GeneralObjInCmdHdr, go::GeneralObjOutCmdHdr>(
        Opcode::QueryGeneralObject,
        Gate::Initialized,
        general_object::query_general_object,
    ),
    spec::<go::GeneralObjInCmdHdr, go::GeneralObjOutCmdHdr>(
        Opcode::DestroyGeneralObject,
        Gate::Initialized,
        general_object::destroy_general_object,
    ),
    spec::<si::SyncSteeringIn, si::SyncSteeringOut>(
        Opcode::SyncSteering,
        Gate::Initialized,
        sw_icm::sync_steering,
    ),
    spec::<w::SetDelayDropParamsIn, w::SetDelayDropParamsOut>(
        Opcode::SetDelayDropParams,
        Gate::Initialized,
        sq_rq::set_delay_drop_params,
    ),
    spec::<pp::SetPpRateLimitIn, pp::SetPpRateLimitOut>(
        Opcode::SetPpRateLimit,
        Gate::Initialized,
        pacing::set_pp_rate_limit,
    ),
    spec::<pf::PageFaultResumeIn, pf::PageFaultResumeOut>(
        Opcode::PageFaultResume,
        Gate::Initialized,
        odp::page_fault_resume,
    ),
    spec::<e::CreateEqIn, e::CreateEqOut>(Opcode::CreateEq, Gate::Initialized, eq::create_eq),
    spec::<e::DestroyEqIn, e::DestroyEqOut>(Opcode::DestroyEq, Gate::Initialized, eq::destroy_eq),
    spec::<e::QueryEqIn, e::QueryEqOut>(Opcode::QueryEq, Gate::Initialized, eq::query_eq),
    spec::<c::CreateCqIn, c::CreateCqOut>(Opcode::CreateCq, Gate::Initialized, cq::create_cq),
    spec::<c::DestroyCqIn, c::DestroyCqOut>(Opcode::DestroyCq, Gate::Initialized, cq::destroy_cq),
    spec::<c::QueryCqIn, c::QueryCqOut>(Opcode::QueryCq, Gate::Initialized, cq::query_cq),
    spec::<c::ModifyCqIn, c::ModifyCqOut>(Opcode::ModifyCq, Gate::Initialized, cq::modify_cq),
    spec::<s::CreateSrqIn, s::CreateSrqOut>(Opcode::CreateSrq, Gate::Initialized, srq::create_srq),
    spec::<s::DestroySrqIn, s::DestroySrqOut>(
        Opcode::DestroySrq,
        Gate::Initialized,
        srq::destroy_srq,
    ),
    spec::<s::QuerySrqIn, s::QuerySrqOut>(Opcode::QuerySrq, Gate::Initialized, srq::query_srq),
    spec::<s::CreateRmpIn, s::CreateRmpOut>(Opcode::CreateRmp, Gate::Initialized, srq::create_rmp),
    spec::<s::DestroyRmpIn, s::DestroyRmpOut>(
        Opcode::DestroyRmp,
        Gate::Initialized,
        srq::destroy_rmp,
    ),
    spec::<s::QueryRmpIn, s::QueryRmpOut>(Opcode::QueryRmp, Gate::Initialized, srq::query_rmp),
    spec::<s::ModifyRmpIn, s::ModifyRmpOut>(Opcode::ModifyRmp, Gate::Initialized, srq::modify_rmp),
    spec::<s::ArmRqIn, s::ArmRqOut>(Opcode::ArmRq, Gate::Initialized, srq::arm_rq),
    spec::<s::CreateXrcSrqIn, s::CreateXrcSrqOut>(
        Opcode::CreateXrcSrq,
        Gate::Initialized,
        xrc::create_xrc_srq,
    ),
    spec::<s::DestroyXrcSrqIn, s::DestroyXrcSrqOut>(
        Opcode::DestroyXrcSrq,
        Gate::Initialized,
        xrc::destroy_xrc_srq,
    ),
    spec::<u::AllocXrcdIn, u::AllocXrcdOut>(Opcode::AllocXrcd, Gate::Initialized, xrc::alloc_xrcd),
    spec::<u::DeallocXrcdIn, u::DeallocXrcdOut>(
        Opcode::DeallocXrcd,
        Gate::Initialized,
        xrc::dealloc_xrcd,
    ),
    spec::<v::QueryHcaVportPkeyIn, v::QueryHcaVportPkeyOut>(
        Opcode::QueryHcaVportPkey,
        Gate::Initialized,
        xrc::query_hca_vport_pkey,
    ),
    spec::<q::CreateQpIn, q::CreateQpOut>(Opcode::CreateQp, Gate::Initialized, qp::create_qp),
    spec::<dc::CreateDctIn, dc::CreateDctOut>(
        Opcode::CreateDct,
        Gate::Initialized,
        dct::create_dct,
    ),
    spec::<dc::DestroyDctIn, dc::DestroyDctOut>(
        Opcode::DestroyDct,
        Gate::Initialized,
        dct::destroy_dct,
    ),
    spec::<dc::DrainDctIn, dc::DrainDctOut>(Opcode::DrainDct, Gate::Initialized, dct::drain_dct),
    spec::<dc::QueryDctIn, dc::QueryDctOut>(Opcode::QueryDct, Gate::Initialized, dct::query_dct),
    spec::<dc::ArmDctIn, dc::ArmDctOut>(
        Opcode::ArmDctForKeyViolation,
        Gate::Initialized,
        dct::arm_dct,
    ),
    spec::<q::AttachToMcgIn, q::AttachToMcgOut>(
        Opcode::AttachToMcg,
        Gate::Initialized,
        mcg::attach_to_mcg,
    ),
    spec::<q::DetachFromMcgIn, q::DetachFromMcgOut>(
        Opcode::DetachFromMcg,
        Gate::Initialized,
        mcg::detach_from_mcg,
    ),
    spec::<q::DestroyQpIn, q::DestroyQpOut>(Opcode::DestroyQp, Gate::Initialized, qp::destroy_qp),
    // Linux 6.1 reads QUERY_QP through the QP context and the reserved words after it (0x110
    // bytes), without the QPC extension and PAS union newer layouts end with.
    spec_out::<q::QueryQpIn>(
        Opcode::QueryQp,
        Gate::Initialized,
        qp::query_qp,
        q::QueryQpOut::QP_PAS_OR_QPC_EXT_AND_PAS.offset(),
    ),
    spec::<v::MadIfcIn, v::MadIfcOut>(Opcode::MadIfc, Gate::Initialized, mad::mad_ifc),
    spec::<q::Rst2initQpIn, q::Rst2initQpOut>(
        Opcode::Rst2InitQp,
        Gate::Initialized,
        qp_modify::rst2init_qp,
    ),
    spec::<q::Init2initQpIn, q::Init2initQpOut>(
        Opcode::Init2InitQp,
        Gate::Initialized,
        qp_modify::init2init_qp,
    ),
    spec::<q::Init2rtrQpIn, q::Init2rtrQpOut>(
        Opcode::Init2RtrQp,
        Gate::Initialized,
        qp_modify::init2rtr_qp,
    ),
    spec::<q::Rtr2rtsQpIn, q::Rtr2rtsQpOut>(
        Opcode::Rtr2RtsQp,
        Gate::Initialized,
        qp_modify::rtr2rts_qp,
    ),
    spec::<q::Rts2rtsQpIn, q::Rts2rtsQpOut>(
        Opcode::Rts2RtsQp,
        Gate::Initialized,
        qp_modify::rts2rts_qp,
    ),
    spec::<q::Qp2errIn, q::Qp2errOut>(Opcode::Qp2Err, Gate::Initialized, qp_modify::qp_2err),
    spec::<q::Qp2rstIn, q::Qp2rstOut>(Opcode::Qp2Rst, Gate::Initialized, qp_modify::qp_2rst),
    spec::<t::AllocTransportDomainIn, t::AllocTransportDomainOut>(
        Opcode::AllocTransportDomain,
        Gate::Initialized,
        tir::alloc_transport_domain,
    ),
    spec::<t::DeallocTransportDomainIn, t::DeallocTransportDomainOut>(
        Opcode::DeallocTransportDomain,
        Gate::Initialized,
        tir::dealloc_transport_domain,
    ),
    spec::<t::CreateTisIn, t::CreateTisOut>(Opcode::CreateTis, Gate::Initialized, tir::create_tis),
    spec::<t::ModifyTisIn, t::ModifyTisOut>(Opcode::ModifyTis, Gate::Initialized, tir::modify_tis),
    spec::<t::DestroyTisIn, t::DestroyTisOut>(
        Opcode::DestroyTis,
        Gate::Initialized,
        tir::destroy_tis,
    ),
    spec::<t::CreateTirIn, t::CreateTirOut>(Opcode::CreateTir, Gate::Initialized, tir::create_tir),
    spec::<t::ModifyTirIn, t::ModifyTirOut>(Opcode::ModifyTir, Gate::Initialized, tir::modify_tir),
    spec::<t::DestroyTirIn, t::DestroyTirOut>(
        Opcode::DestroyTir,
        Gate::Initialized,
        tir::destroy_tir,
    ),
    spec::<t::CreateRqtIn, t::CreateRqtOut>(Opcode::CreateRqt, Gate::Initialized, tir::create_rqt),
    spec::<t::ModifyRqtIn, t::ModifyRqtOut>(Opcode::ModifyRqt, Gate::Initialized, tir::modify_rqt),
    spec::<t::DestroyRqtIn, t::DestroyRqtOut>(
        Opcode::DestroyRqt,
        Gate::Initialized,
        tir::destroy_rqt,
    ),
    spec::<w::CreateRqIn, w::CreateRqOut>(Opcode::CreateRq, Gate::Initialized, sq_rq::create_rq),
    spec::<w::ModifyRqIn, w::ModifyRqOut>(Opcode::ModifyRq, Gate::Initialized, sq_rq::modify_rq),
    spec::<w::DestroyRqIn, w::DestroyRqOut>(
        Opcode::DestroyRq,
        Gate::Initialized,
        sq_rq::destroy_rq,
    ),
    spec::<w::QueryRqIn, w::QueryRqOut>(Opcode::QueryRq, Gate::Initialized, sq_rq::query_rq),
    spec::<w::CreateSqIn, w::CreateSqOut>(Opcode::CreateSq, Gate::Initialized, sq_rq::create_sq),
    spec::<w::ModifySqIn, w::ModifySqOut>(Opcode::ModifySq, Gate::Initialized, sq_rq::modify_sq),
    spec::<w::DestroySqIn, w::DestroySqOut>(
        Opcode::DestroySq,
        Gate::Initialized,
        sq_rq::destroy_sq,
    ),
    spec::<w::QuerySqIn, w::QuerySqOut>(Opcode::QuerySq, Gate::Initialized, sq_rq::query_sq),
    spec::<w::AllocQCounterIn, w::AllocQCounterOut>(
        Opcode::AllocQCounter,
        Gate::Initialized,
        sq_rq::alloc_q_counter,
    ),
    spec::<w::DeallocQCounterIn, w::DeallocQCounterOut>(
        Opcode::DeallocQCounter,
        Gate::Initialized,
        sq_rq::dealloc_q_counter,
    ),
    spec::<w::QueryQCounterIn, w::QueryQCounterOut>(
        Opcode::QueryQCounter,
        Gate::Initialized,
        sq_rq::query_q_counter,
    ),
    spec::<w::QueryVportCounterIn, w::QueryVportCounterOut>(
        Opcode::QueryVportCounter,
        Gate::Initialized,
        sq_rq::query_vport_counter,
    ),
    spec::<dx::CreateUctxIn, dx::CreateUctxOut>(
        Opcode::CreateUctx,
        Gate::Initialized,
        devx::create_uctx,
    ),
    spec::<dx::DestroyUctxIn, dx::DestroyUctxOut>(
        Opcode::DestroyUctx,
        Gate::Initialized,
        devx::destroy_uctx,
    ),
    spec::<dx::CreateUmemIn, dx::CreateUmemOut>(
        Opcode::CreateUmem,
        Gate::Initialized,
        devx::create_umem,
    ),
    spec::<dx::DestroyUmemIn, dx::DestroyUmemOut>(
        Opcode::DestroyUmem,
        Gate::Initialized,
        devx::destroy_umem,
    ),
    spec::<f::CreateFlowTableIn, f::CreateFlowTableOut>(
        Opcode::CreateFlowTable,
        Gate::Initialized,
        flow::create_flow_table,
    ),
    spec::<f::DestroyFlowTableIn, f::DestroyFlowTableOut>(
        Opcode::DestroyFlowTable,
        Gate::Initialized,
        flow::destroy_flow_table,
    ),
    spec::<f::QueryFlowTableIn, f::QueryFlowTableOut>(
        Opcode::QueryFlowTable,
        Gate::Initialized,
        flow::query_flow_table,
    ),
    spec::<f::ModifyFlowTableIn, f::ModifyFlowTableOut>(
        Opcode::ModifyFlowTable,
        Gate::Initialized,
        flow::modify_flow_table,
    ),
    spec::<f::SetFlowTableRootIn, f::SetFlowTableRootOut>(
        Opcode::SetFlowTableRoot,
        Gate::Initialized,
        flow::set_flow_table_root,
    ),
    spec::<f::CreateFlowGroupIn, f::CreateFlowGroupOut>(
        Opcode::CreateFlowGroup,
        Gate::Initialized,
        flow::create_flow_group,
    ),
    spec::<f::DestroyFlowGroupIn, f::DestroyFlowGroupOut>(
        Opcode::DestroyFlowGroup,
        Gate::Initialized,
        flow::destroy_flow_group,
    ),
    spec::<f::SetFteIn, f::SetFteOut>(Opcode::SetFlowTableEntry, Gate::Initialized, flow::set_fte),
    spec::<f::DeleteFteIn, f::DeleteFteOut>(
        Opcode::DeleteFlowTableEntry,
        Gate::Initialized,
        flow::delete_fte,
    ),
    spec::<fc::AllocFlowCounterIn, fc::AllocFlowCounterOut>(
        Opcode::AllocFlowCounter,
        Gate::Initialized,
        counter::alloc_flow_counter,
    ),
    spec::<fc::DeallocFlowCounterIn, fc::DeallocFlowCounterOut>(
        Opcode::DeallocFlowCounter,
        Gate::Initialized,
        counter::dealloc_flow_counter,
    ),
    spec_out::<fc::QueryFlowCounterIn>(
        Opcode::QueryFlowCounter,
        Gate::Initialized,
        counter::query_flow_counter,
        fc::QueryFlowCounterOut::BYTES + fc::TrafficCounter::BYTES,
    ),
    spec::<rf::AllocPacketReformatContextIn, rf::AllocPacketReformatContextOut>(
        Opcode::AllocPacketReformatContext,
        Gate::Initialized,
        reformat::alloc_packet_reformat_context,
    ),
    spec::<rf::DeallocPacketReformatContextIn, rf::DeallocPacketReformatContextOut>(
        Opcode::DeallocPacketReformatContext,
        Gate::Initialized,
        reformat::dealloc_packet_reformat_context,
    ),
    spec::<mh::AllocModifyHeaderContextIn, mh::AllocModifyHeaderContextOut>(
        Opcode::AllocModifyHeaderContext,
        Gate::Initialized,
        modify_header::alloc_modify_header_context,
    ),
    spec::<mh::DeallocModifyHeaderContextIn, mh::DeallocModifyHeaderContextOut>(
        Opcode::DeallocModifyHeaderContext,
        Gate::Initialized,
        modify_header::dealloc_modify_header_context,
    ),
];

/// Runs one command on `model`, writing its output (status and syndrome included) into `out`
/// (`out.len() >= 16`); returns `(status, syndrome)`.
pub(crate) fn execute(
    model: &mut Model,
    env: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> (u8, u32) {
    out.fill(0);
    model.rt.commanded();
    let (status, syndrome) = match dispatch(model, env, req, out) {
        Ok(()) => (0, 0),
        Err(f) => {
            out.fill(0);
            (f.status.raw(), f.syndrome)
        }
    };
    // Before and after: a handler may have decoded a QP before it changed it.
    model.rt.commanded();
    write_header(out, status, syndrome);
    (status, syndrome)
}

fn dispatch(model: &mut Model, env: &mut Env<'_>, req: &Req<'_>, out: &mut [u8]) -> CmdResult {
    if req.input.len() < CmdInHeader::BYTES {
        return Err(fail(CmdStatus::BadInputLen, syn::INLEN_BELOW_HEADER));
    }
    let spec = SPECS
        .iter()
        .find(|s| s.opcode as u16 == req.opcode)
        .ok_or(fail(CmdStatus::BadOp, syn::UNKNOWN_OPCODE))?;
    if req.input.len() < spec.in_bytes {
        return Err(fail(CmdStatus::BadInputLen, syn::INLEN_BELOW_LAYOUT));
    }
    if req.outlen < spec.out_bytes {
        return Err(fail(CmdStatus::BadOutputLen, syn::OUTLEN_BELOW_LAYOUT));
    }
    match (spec.gate, model.state) {
        (Gate::Disabled, HcaState::Disabled) => {}
        (Gate::Disabled, _) => return Err(bad_state(syn::ALREADY_ENABLED)),
        (_, HcaState::Disabled) => return Err(bad_state(syn::NOT_ENABLED)),
        (Gate::Enabled, _) | (Gate::Initialized, HcaState::Initialized) => {}
        (Gate::Initialized, _) => return Err(bad_state(syn::NOT_INITIALIZED)),
    }
    let uid = input::<CmdInHeader>(req)?.get(CmdInHeader::UID) as u16;
    // CREATE_UCTX and DESTROY_UCTX have no uid in the header (bits 0x10–0x1f are reserved).
    let uid = if matches!(spec.opcode, Opcode::CreateUctx | Opcode::DestroyUctx) {
        0
    } else {
        uid
    };
    if !devx::uid_ok(model, uid) {
        return Err(bad_param(syn::BAD_UID));
    }
    model.objects.actor = uid;
    let r = (spec.handler)(model, env, req, out);
    model.objects.actor = 0;
    r
}
