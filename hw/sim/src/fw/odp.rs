//! On-demand paging: PAGE_FAULT_RESUME (0x204), the driver's answer to a PAGE_FAULT event
//! ([`crate::events::page_fault`]).
//!
//! The input's `trans_page_fault_info` names the fault as the event did: `page_fault_type`
//! (a WQE fault's type, an RDMA fault's flags), `wq_number` (the QP, or the SRQ of an SRQ
//! receive WQE; an RDMA fault's token) and `fault_token`; `error` says the driver could not
//! make the pages present. Checks, each with its syndrome:
//!
//! * a page fault with that queue, type and token is outstanding (BAD_PARAM
//!   PAGE_FAULT_UNKNOWN) — a fault the device forgot because its QP was reset or destroyed
//!   counts as unknown.
//!
//! Then: a send queue's fault ends and the queue runs again from the WQE that faulted (at the
//! command's device time, [`crate::engine`]'s timer tick); a responder's fault ends, so the
//! requester's next retransmission (after the RNR NAK it got) is served. With `error` the WQE
//! or request that faulted completes in error instead: the send WQE with LOCAL_PROT_ERR, the
//! receive WQE with LOCAL_PROT_ERR and a NAK remote operational error, an RDMA access with a
//! NAK remote access error — each moving the QP to ERR.

use mlx5_ifc::prm::odp::{
    PageFaultResumeIn, PageFaultResumeInPageFaultInfoAuto, TransPageFaultInfo,
};

use super::cmd::{bad_param, input, CmdResult, Env, Req};
use crate::model::runtime::{FaultState, PageFault};
use crate::model::Model;
use crate::syndrome as syn;

pub(crate) fn page_fault_resume(
    model: &mut Model,
    env: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let i = input::<PageFaultResumeIn>(req)?;
    let info = i
        .nested(PageFaultResumeIn::PAGE_FAULT_INFO)
        .nested(PageFaultResumeInPageFaultInfoAuto::TRANS_PAGE_FAULT_INFO);
    let error = info.get(TransPageFaultInfo::ERROR) == 1;
    let kind = info.get(TransPageFaultInfo::PAGE_FAULT_TYPE) as u8;
    let wq = info.get32(TransPageFaultInfo::WQ_NUMBER);
    let token = info.get32(TransPageFaultInfo::FAULT_TOKEN);
    let names = |f: &PageFault| {
        f.state == FaultState::Pending && f.kind == kind && f.wq == wq && f.token == token
    };
    let now = env.now;
    let counters = &mut model.rt.counters;
    for (&key, q) in model.rt.qps.iter_mut() {
        if let Some(f) = q.sq_fault.as_mut().filter(|f| names(f)) {
            if error {
                f.state = FaultState::Failed;
            } else {
                q.sq_fault = None;
            }
            q.resume_at = Some(now);
            model.rt.timed.insert(key);
        } else if let Some(f) = q.rq_fault.as_mut().filter(|f| names(f)) {
            if error {
                f.state = FaultState::Failed;
            } else {
                q.rq_fault = None;
            }
        } else {
            continue;
        }
        if error {
            counters.page_faults_failed += 1;
        } else {
            counters.page_faults_resolved += 1;
        }
        return Ok(());
    }
    log::info!(
        "mlx5-sim: PAGE_FAULT_RESUME: no page fault of type {kind} on queue {wq:#x} with token {token:#x}"
    );
    Err(bad_param(syn::PAGE_FAULT_UNKNOWN))
}
