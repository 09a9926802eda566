//! UAR doorbells the firmware acts on (offsets inside a 4 KiB UAR page, `mlx5_ifc::regs::uar`):
//!
//! * 0x40 (update the consumer index and arm) and 0x48 (update only): one 32-bit write of
//!   `eqn << 24 | consumer_index`; the EQ's `consumer_counter` takes the index, 0x40 arms it
//!   (`st` ARMED). 0x48 leaves the arming as it is.
//! * 0x20: one 64-bit write, dword 0 = `arm_sn << 28 | cmd | consumer_index` (cmd `1 << 24` =
//!   solicited completions only), dword 1 = CQN; the CQ's `consumer_counter` takes the index and
//!   the CQ is armed (`st` ARMED or SOLICITED_ARMED).
//!
//! A doorbell that names no live object, names one whose `uar_page` is another page, or has the
//! wrong width is logged and recorded as a [`DmaFaultKind::BadDoorbell`] (its `iova` is the BAR0
//! offset); nothing else happens. Other UAR writes (send doorbells, BlueFlame) are only recorded.

use mlx5_ifc::consts::arm_state;
use mlx5_ifc::prm::cq::Cqc;
use mlx5_ifc::prm::eq::Eqc;
use mlx5_ifc::regs::{uar, UAR_PAGE_SIZE};
use mlx5_ifc::{Layout, ViewMut};

use super::objects::{ObjectKind, Queue};
use super::Firmware;
use crate::fault::{DmaFault, DmaFaultKind};

/// The queue `id` of `kind` whose doorbells go to UAR `page`.
fn target(fw: &mut Firmware, kind: ObjectKind, id: u32, page: u32) -> Result<&mut Queue, String> {
    let q = fw
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

impl Firmware {
    /// Acts on a write of `value` (`width` bits) at BAR0 offset `off` inside a UAR page.
    pub(crate) fn uar_write(
        &mut self,
        off: u64,
        value: u64,
        width: u8,
        faults: &mut Vec<DmaFault>,
    ) {
        let page = u32::try_from(off / UAR_PAGE_SIZE).unwrap_or(u32::MAX);
        let inpage = (off % UAR_PAGE_SIZE) as u32;
        let r = match inpage {
            uar::EQ_DOORBELL_ARM | uar::EQ_DOORBELL_NOARM => {
                self.eq_doorbell(page, inpage == uar::EQ_DOORBELL_ARM, value, width)
            }
            o if (uar::CQ_DOORBELL..uar::CQ_DOORBELL + 8).contains(&o) => {
                self.cq_doorbell(page, value, width)
            }
            _ => Ok(()),
        };
        if let Err(why) = r {
            log::warn!("mlx5-sim: bad doorbell {value:#x} at BAR offset {off:#x}: {why}");
            faults.push(DmaFault {
                iova: off,
                len: usize::from(width / 8),
                kind: DmaFaultKind::BadDoorbell,
                what: why,
            });
        }
    }

    fn eq_doorbell(&mut self, page: u32, arm: bool, value: u64, width: u8) -> Result<(), String> {
        if width != 32 {
            return Err(format!("EQ doorbell written {width} bits wide, not 32"));
        }
        let eqn = ((value >> 24) & 0xff) as u32;
        let q = target(self, ObjectKind::Eq, eqn, page)?;
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

    fn cq_doorbell(&mut self, page: u32, value: u64, width: u8) -> Result<(), String> {
        if width != 64 {
            return Err(format!("CQ arm doorbell written {width} bits wide, not 64"));
        }
        let (dw0, dw1) = (value >> 32, value & 0xffff_ffff);
        let cqn = (dw1 & 0xff_ffff) as u32;
        let q = target(self, ObjectKind::Cq, cqn, page)?;
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
        Ok(())
    }
}
