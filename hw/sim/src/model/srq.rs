//! The limit (`lwm`) of an SRQ, RMP or XRC SRQ: read by the data path as it consumes WQEs (the limit
//! event disarms it) and set by ARM_RQ / MODIFY_RMP.

use mlx5_ifc::prm::srq::{Rmpc, Srqc, Wq, XrcSrqc};
use mlx5_ifc::{CmdStatus, View, ViewMut};

use super::objects::ObjectKind;
use super::status::{encoded, fail, CmdResult};
use super::Model;
use crate::syndrome as syn;

/// The armed limit (`lwm`) of SRQ / RMP `n` and its size in WQEs.
pub(crate) fn limit(model: &Model, kind: ObjectKind, n: u32) -> Option<(u32, u32)> {
    let q = model.objects.queue(kind, n)?;
    match kind {
        ObjectKind::Srq => {
            let c = View::<Srqc>::new(&q.ctx).ok()?;
            Some((c.get32(Srqc::LWM), 1 << c.get(Srqc::LOG_SRQ_SIZE).min(24)))
        }
        ObjectKind::XrcSrq => {
            let c = View::<XrcSrqc>::new(&q.ctx).ok()?;
            Some((
                c.get32(XrcSrqc::LWM),
                1 << c.get(XrcSrqc::LOG_XRC_SRQ_SIZE).min(24),
            ))
        }
        _ => {
            let c = View::<Rmpc>::new(&q.ctx).ok()?;
            let w = c.nested(Rmpc::WQ);
            Some((w.get32(Wq::LWM), 1 << w.get(Wq::LOG_WQ_SZ).min(24)))
        }
    }
}

/// Sets the limit (`lwm`) of SRQ / RMP `n` (0 disarms).
pub(crate) fn set_limit(model: &mut Model, kind: ObjectKind, n: u32, lwm: u32) -> CmdResult {
    let q = model
        .objects
        .queue_mut(kind, n)
        .ok_or(fail(CmdStatus::BadRes, syn::UNKNOWN_SRQ))?;
    match kind {
        ObjectKind::Srq => encoded(
            ViewMut::<Srqc>::new(&mut q.ctx)
                .and_then(|mut c| c.set(Srqc::LWM, lwm.into()).map(drop)),
        ),
        ObjectKind::XrcSrq => encoded(
            ViewMut::<XrcSrqc>::new(&mut q.ctx)
                .and_then(|mut c| c.set(XrcSrqc::LWM, lwm.into()).map(drop)),
        ),
        _ => encoded(
            ViewMut::<Rmpc>::new(&mut q.ctx)
                .and_then(|mut c| c.nested_mut(Rmpc::WQ).set(Wq::LWM, lwm.into()).map(drop)),
        ),
    }
}
