//! UAR doorbells (writes to a UAR page) decoded against the model (offsets inside a 4 KiB UAR page, `mlx5_ifc::regs::uar`):
//!
//! * 0x40 (update the consumer index and arm) and 0x48 (update only): one 32-bit write of
//!   `eqn << 24 | consumer_index`; the EQ's `consumer_counter` takes the index, 0x40 arms it
//!   (`st` ARMED). 0x48 leaves the arming as it is.
//! * 0x20: one 64-bit write, dword 0 = `arm_sn << 28 | cmd | consumer_index` (cmd `1 << 24` =
//!   solicited completions only), dword 1 = CQN; the CQ's `consumer_counter` takes the index and
//!   the CQ is armed (`st` ARMED or SOLICITED_ARMED).
//!
//! * 0x800 + k·2^`log_bf_reg_size` (k = 0..3; each register has two halves of half its size):
//!   a 64-bit write at the start of a half is a send doorbell — the first 8 bytes of the
//!   control segment of the last WQE posted, `opmod_idx_opcode` in the high dword (WQE counter
//!   in bits 23:8), `qpn_ds` in the low one (QPN in bits 31:8); the QP's `uar_page` must be this
//!   page. Further 64-bit writes into the same half are BlueFlame: the rest of that WQE, which
//!   the data path compares with the send queue ([`super`]).
//!
//! A doorbell that names no live object, names one whose `uar_page` is another page, or has the
//! wrong width is logged and recorded as a [`DmaFaultKind::BadDoorbell`] (its `iova` is the BAR0
//! offset); nothing else happens. Other UAR writes are only recorded.

use mlx5_ifc::consts::arm_state;
use mlx5_ifc::prm::caps::CmdHcaCap;
use mlx5_ifc::prm::cq::Cqc;
use mlx5_ifc::prm::eq::Eqc;
use mlx5_ifc::prm::qp::Qpc;
use mlx5_ifc::prm::sq_rq::Sqc;
use mlx5_ifc::prm::srq::Wq;
use mlx5_ifc::regs::{uar, UAR_PAGE_SIZE};
use mlx5_ifc::{Layout, View, ViewMut};

use crate::fault::{DmaFault, DmaFaultKind};
use crate::model::objects::{ObjectKind, Queue};
use crate::model::Model;

/// What a UAR write asks the data path to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UarAction {
    /// Nothing (an EQ doorbell, an ignored or bad write).
    None,
    /// CQ `cqn` was armed with consumer counter `ci`.
    CqArmed { cqn: u32, ci: u32 },
    /// EQ `eqn` was armed with consumer counter `ci`.
    EqArmed { eqn: u32, ci: u32 },
    /// A send doorbell for `qpn`, WQE counter `wqe`, in the BlueFlame half at BAR offset `half`.
    Send { qpn: u32, wqe: u16, half: u64 },
    /// A BlueFlame word at byte `at` of the half at BAR offset `half`.
    BlueFlame { half: u64, at: u64 },
    /// A send doorbell for Ethernet SQ `sqn`, WQE counter `wqe`.
    EthSend { sqn: u32, wqe: u16 },
}

/// The queue `id` of `kind` whose doorbells go to UAR `page`.
fn target(model: &mut Model, kind: ObjectKind, id: u32, page: u32) -> Result<&mut Queue, String> {
    let q = model
        .objects
        .queue_mut(kind, id)
        .ok_or_else(|| format!("{kind:?} {id:#x} does not exist"))?;
    match q.uar {
        Some(u) if u == page => Ok(q),
        other => Err(format!(
            "{kind:?} {id:#x} uses UAR {other:?}, not UAR page {page:#x}"
        )),
    }
}

/// Sets the arming state and consumer counter of a context image of layout `L`.
fn update<L: Layout>(
    ctx: &mut [u8],
    st: mlx5_ifc::Field<L>,
    cc: mlx5_ifc::Field<L>,
    state: Option<u64>,
    ci: u64,
) -> Result<(), String> {
    let mut v = ViewMut::<L>::new(ctx).map_err(|e| e.to_string())?;
    if let Some(state) = state {
        v.set(st, state).map_err(|e| e.to_string())?;
    }
    v.set(cc, ci).map_err(|e| e.to_string())?;
    Ok(())
}

/// Acts on a write of `value` (`width` bits) at BAR0 offset `off` inside a UAR page.
pub(crate) fn uar_write(
    model: &mut Model,
    off: u64,
    value: u64,
    width: u8,
    faults: &mut Vec<DmaFault>,
) -> UarAction {
    let page = u32::try_from(off / UAR_PAGE_SIZE).unwrap_or(u32::MAX);
    let inpage = (off % UAR_PAGE_SIZE) as u32;
    let r = match inpage {
        uar::EQ_DOORBELL_ARM | uar::EQ_DOORBELL_NOARM => {
            let arm = inpage == uar::EQ_DOORBELL_ARM;
            eq_doorbell(model, page, arm, value, width).map(|()| {
                if arm {
                    UarAction::EqArmed {
                        eqn: ((value >> 24) & 0xff) as u32,
                        ci: (value & 0xff_ffff) as u32,
                    }
                } else {
                    UarAction::None
                }
            })
        }
        o if (uar::CQ_DOORBELL..uar::CQ_DOORBELL + 8).contains(&o) => {
            cq_doorbell(model, page, value, width)
        }
        o if o >= uar::BF_OFFSET => send_doorbell(model, off, page, o, value, width),
        _ => Ok(UarAction::None),
    };
    match r {
        Ok(a) => a,
        Err(why) => {
            bad_doorbell(faults, off, value, width, why);
            UarAction::None
        }
    }
}

fn bad_doorbell(faults: &mut Vec<DmaFault>, off: u64, value: u64, width: u8, why: String) {
    log::warn!("mlx5-sim: bad doorbell {value:#x} at BAR offset {off:#x}: {why}");
    faults.push(DmaFault {
        iova: off,
        len: usize::from(width / 8),
        kind: DmaFaultKind::BadDoorbell,
        what: why,
    });
}

fn send_doorbell(
    model: &mut Model,
    off: u64,
    page: u32,
    inpage: u32,
    value: u64,
    width: u8,
) -> Result<UarAction, String> {
    let reg = 1u64 << model.cur(CmdHcaCap::LOG_BF_REG_SIZE).clamp(6, 10);
    let r = u64::from(inpage - uar::BF_OFFSET);
    let halfsz = reg / 2;
    let at = r % halfsz;
    let half = off - at;
    if width != 64 {
        return Err(format!("send doorbell written {width} bits wide, not 64"));
    }
    if at != 0 {
        return Ok(UarAction::BlueFlame { half, at });
    }
    let qpn = ((value >> 8) & 0xff_ffff) as u32;
    let wqe = ((value >> 40) & 0xffff) as u16;
    if let Some(sq) = model.objects.queue(ObjectKind::Sq, qpn) {
        let uar =
            View::<Sqc>::new(&sq.ctx).map_or(u32::MAX, |c| c.nested(Sqc::WQ).get32(Wq::UAR_PAGE));
        if uar != page {
            return Err(format!(
                "SQ {qpn:#x} uses UAR {uar:#x}, not UAR page {page:#x}"
            ));
        }
        return Ok(UarAction::EthSend { sqn: qpn, wqe });
    }
    let q = model
        .objects
        .queue(ObjectKind::Qp, qpn)
        .ok_or_else(|| format!("send doorbell for QP {qpn:#x}, which does not exist"))?;
    let uar = View::<Qpc>::new(&q.ctx).map_or(u32::MAX, |c| c.get32(Qpc::UAR_PAGE));
    if uar != page {
        return Err(format!(
            "QP {qpn:#x} uses UAR {uar:#x}, not UAR page {page:#x}"
        ));
    }
    Ok(UarAction::Send { qpn, wqe, half })
}

fn eq_doorbell(
    model: &mut Model,
    page: u32,
    arm: bool,
    value: u64,
    width: u8,
) -> Result<(), String> {
    if width != 32 {
        return Err(format!("EQ doorbell written {width} bits wide, not 32"));
    }
    let eqn = ((value >> 24) & 0xff) as u32;
    let q = target(model, ObjectKind::Eq, eqn, page)?;
    let state = arm.then_some(arm_state::ARMED);
    update::<Eqc>(
        &mut q.ctx,
        Eqc::ST,
        Eqc::CONSUMER_COUNTER,
        state,
        value & 0xff_ffff,
    )?;
    q.armed |= arm;
    Ok(())
}

fn cq_doorbell(model: &mut Model, page: u32, value: u64, width: u8) -> Result<UarAction, String> {
    if width != 64 {
        return Err(format!("CQ arm doorbell written {width} bits wide, not 64"));
    }
    let (dw0, dw1) = (value >> 32, value & 0xffff_ffff);
    let cqn = (dw1 & 0xff_ffff) as u32;
    let q = target(model, ObjectKind::Cq, cqn, page)?;
    let state = if (dw0 >> 24) & 1 == 1 {
        arm_state::SOLICITED_ARMED
    } else {
        arm_state::ARMED
    };
    update::<Cqc>(
        &mut q.ctx,
        Cqc::ST,
        Cqc::CONSUMER_COUNTER,
        Some(state),
        dw0 & 0xff_ffff,
    )?;
    q.armed = true;
    Ok(UarAction::CqArmed {
        cqn,
        ci: (dw0 & 0xff_ffff) as u32,
    })
}
