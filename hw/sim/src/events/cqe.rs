//! Completion queue entries and CQ arming.
//!
//! A CQE (§4.1 of `mlx5-datapath-sizing.md`; the [`Cqe64`] layout) goes to slot `producer & (size - 1)` of the CQ
//! buffer (the second 64 bytes of a 128-byte CQE), its owner bit `(producer >> log_size) & 1`,
//! written last: bytes 0..56, then the 64-bit word holding `op_own` with one release store
//! (the driver reads that word with one acquire load); EQEs are written the same way. Before
//! writing, the device compares the producer counter with the consumer counter in the CQ
//! doorbell record (word 0): a CQ that
//! would hold more than `size` unpolled CQEs overflows — the CQE is dropped, the CQ is in error
//! from then on (every later CQE is dropped too) and a CQ_ERROR event (syndrome 1) goes to the
//! asynchronous EQs.
//!
//! When the CQ is armed (the CQ doorbell) and a CQE is written — any CQE when armed for every
//! completion, a solicited or error one when armed for solicited completions — the device
//! writes a COMPLETION EQE to the CQ's EQ ([`super::eqe`]) and disarms the CQ.

use mlx5_ifc::consts::{arm_state, cqe_sz};
use mlx5_ifc::cqe::{CQE128_OFFSET, CQE_BYTES};
use mlx5_ifc::event;
use mlx5_ifc::prm::caps::CmdHcaCap;
use mlx5_ifc::prm::cq::Cqc;
use mlx5_ifc::prm::eqe::CqError;
use mlx5_ifc::{View, ViewMut};

use super::eqe::{async_event, completion_data, event_data, post_eqe, write_entry};
use super::zip;
use crate::memory::queue::{dma_fault, read_be32};
use crate::model::completion::Session;
use crate::model::objects::ObjectKind;
use crate::model::Hw;

/// CQE opcodes (`op_own >> 4`).
pub(crate) use mlx5_ifc::cqe::opcode as op;
/// Error CQE syndromes.
pub(crate) use mlx5_ifc::cqe::syndrome;

/// The CQ_ERROR syndrome of a CQ overrun.
const CQ_OVERRUN: u64 = 1;
/// Vendor error syndrome of error CQEs whose cause is a DMA fault on host memory.
pub(crate) use crate::model::completion::VENDOR_DMA;
/// The fields of one CQE.
pub(crate) use crate::model::completion::{Cqe, EthRx};

/// `srqn_uidx` of a completion of QP `user_index` (CQE version 1), or `srqn` (version 0).
pub(crate) fn srqn_uidx(hw: &Hw<'_>, user_index: u32, srqn: Option<u32>) -> u32 {
    if hw.model.cur(CmdHcaCap::CQE_VERSION) >= 1 {
        user_index & 0xff_ffff
    } else {
        srqn.unwrap_or(0) & 0xff_ffff
    }
}

/// Writes `cqe` to CQ `cqn` (see the module documentation). A compression session open on the
/// CQ is written first: CQEs land in the order the device made them.
pub(crate) fn post(hw: &mut Hw<'_>, cqn: u32, cqe: &Cqe) {
    close(hw, cqn);
    write(
        hw,
        cqn,
        1,
        (cqe.solicited, cqe.is_error()),
        |hw, owner, slot| {
            let mut img = cqe.image(owner, hw.now);
            if let Some((field, value)) = hw.model.injected.take_cqe() {
                field.apply(&mut img, value);
                let what = format!("CQE {slot} of CQ {cqn:#x}: {field:?} := {value:#x}");
                hw.model.injected.log.push(hw.now, "CorruptCqe", what);
            }
            vec![(0, img)]
        },
    );
}

/// The compression of CQ `cqn` (`mini_cqe_res_format`, and the most completions a session
/// holds), if it compresses.
fn compression(hw: &Hw<'_>, cqn: u32) -> Option<(u64, usize)> {
    let q = hw.model.objects.queue(ObjectKind::Cq, cqn)?;
    let c = View::<Cqc>::new(&q.ctx).ok()?;
    let max = (hw.model.cur(CmdHcaCap::CQE_COMPRESSION_MAX_NUM) as usize).min(zip::MAX_SESSION);
    (c.get(Cqc::CQE_COMP_EN) == 1 && max >= 2).then(|| (c.get(Cqc::MINI_CQE_RES_FORMAT), max))
}

/// Posts the receive completion `cqe` of an Ethernet RQ (`striding`: a striding one) to CQ
/// `cqn`. On a CQ that compresses ([`super::zip`]) it joins the CQ's open session when it may,
/// else starts a new one (the open one written first); the sessions are written when the
/// data path's pass ends ([`close_all`]) or when another CQE comes for the CQ.
pub(crate) fn post_rx(hw: &mut Hw<'_>, cqn: u32, cqe: &Cqe, striding: bool) {
    let Some((fmt, max)) = compression(hw, cqn).filter(|_| zip::compressible(cqe)) else {
        post(hw, cqn, cqe);
        return;
    };
    let joins =
        hw.model.rt.zip.get(&cqn).is_some_and(|s| {
            s.striding == striding && zip::joins(&s.cqes, cqe, fmt, striding, max)
        });
    if !joins {
        close(hw, cqn);
    }
    let s = hw.model.rt.zip.entry(cqn).or_insert_with(|| Session {
        cqes: Vec::new(),
        striding,
    });
    s.cqes.push(*cqe);
    if s.cqes.len() >= max {
        close(hw, cqn);
    }
}

/// Writes the open session of CQ `cqn`, if it has one: as a session of two or more
/// completions the CQ has room for, else as plain CQEs.
pub(crate) fn close(hw: &mut Hw<'_>, cqn: u32) {
    let Some(s) = hw.model.rt.zip.remove(&cqn) else {
        return;
    };
    let n = s.cqes.len() as u32;
    let fmt = compression(hw, cqn).map_or(zip::res_format::CSUM, |(f, _)| f);
    if n < 2 || room(hw, cqn).is_none_or(|room| room < n) {
        for c in &s.cqes {
            write(hw, cqn, 1, (false, false), |hw, owner, _| {
                vec![(0, c.image(owner, hw.now))]
            });
        }
        return;
    }
    write(hw, cqn, n, (false, false), |hw, owner, _| {
        zip::session(&s.cqes, fmt, owner, hw.now)
    });
    hw.model.rt.counters.cqes_compressed += u64::from(n);
    hw.model.rt.counters.cqe_sessions += 1;
}

/// Writes every open session (the end of a pass of the data path).
pub(crate) fn close_all(hw: &mut Hw<'_>) {
    let open: Vec<u32> = hw.model.rt.zip.keys().copied().collect();
    for cqn in open {
        close(hw, cqn);
    }
}

/// Room CQ `cqn` has for CQEs now (its size less what it holds unpolled); `None` for a CQ
/// that is gone or in error.
pub(super) fn room(hw: &Hw<'_>, cqn: u32) -> Option<u32> {
    let q = hw.model.objects.queue(ObjectKind::Cq, cqn)?;
    let size = 1u32 << View::<Cqc>::new(&q.ctx).ok()?.get(Cqc::LOG_CQ_SIZE).min(24);
    if hw.model.rt.cqs.get(&cqn).is_some_and(|r| r.error) {
        return None;
    }
    Some(size.saturating_sub(unpolled(hw, cqn)?))
}

/// Writes `count` CQE slots of CQ `cqn` from its producer counter on: `build(hw, owner, pi)`
/// gives the 64-byte images to write and their slots relative to the producer counter, in the
/// order to write them (the one whose owner bit the driver polls last). A CQ that cannot take
/// `count` more overflows (see the module documentation). `(solicited, error)`: what an arming
/// for solicited completions fires on.
pub(super) fn write(
    hw: &mut Hw<'_>,
    cqn: u32,
    count: u32,
    (solicited, error): (bool, bool),
    build: impl FnOnce(&mut Hw<'_>, u8, u32) -> Vec<(u32, [u8; CQE_BYTES])>,
) {
    let Some(q) = hw.model.objects.queue(ObjectKind::Cq, cqn) else {
        log::warn!("mlx5-sim: CQE for CQ {cqn:#x}, which does not exist");
        hw.model.rt.counters.cqes_dropped += u64::from(count);
        return;
    };
    let Ok(c) = View::<Cqc>::new(&q.ctx) else {
        return;
    };
    let log_size = c.get(Cqc::LOG_CQ_SIZE).min(24) as u32;
    let (size, big) = (1u32 << log_size, c.get(Cqc::CQE_SZ) == cqe_sz::BYTES_128);
    let (dbr, eqn, page) = (
        c.get(Cqc::DBR_ADDR),
        c.get32(Cqc::C_EQN_OR_APU_ELEMENT),
        4096u64 << c.get(Cqc::LOG_PAGE_SIZE).min(20),
    );
    let start = crate::memory::queue::queue_start(page, c.get(Cqc::PAGE_OFFSET));
    let (armed, st) = (q.armed, c.get(Cqc::ST));
    let pas = q.pas.clone();
    let rt = *hw.model.rt.cqs.entry(cqn).or_default();
    if rt.error {
        hw.model.rt.counters.cqes_dropped += u64::from(count);
        return;
    }
    let ci = read_be32(hw.iommu, dbr).unwrap_or(0) & 0xff_ffff;
    if (rt.pi.wrapping_sub(ci) & 0xff_ffff) + count > size {
        log::warn!(
            "mlx5-sim: CQ {cqn:#x} overflow (producer {}, consumer {ci})",
            rt.pi
        );
        hw.model.rt.counters.cqes_dropped += u64::from(count);
        if let Some(r) = hw.model.rt.cqs.get_mut(&cqn) {
            r.error = true;
        }
        let data = event_data::<CqError>(|v| {
            v.set(CqError::CQN, (cqn & 0xff_ffff).into())?
                .set(CqError::SYNDROME, CQ_OVERRUN)
                .map(drop)
        });
        async_event(hw, event::CQ_ERROR, &data);
        return;
    }
    let (stride, at) = if big {
        (2 * CQE_BYTES as u64, CQE128_OFFSET as u64)
    } else {
        (CQE_BYTES as u64, 0)
    };
    let owner = ((rt.pi >> log_size) & 1) as u8;
    for (rel, img) in build(hw, owner, rt.pi) {
        let n = rt.pi.wrapping_add(rel);
        let off = u64::from(n & (size - 1)) * stride + at;
        if let Err(iova) = write_entry(hw, &pas, page, start + off, &img) {
            dma_fault(
                hw.faults,
                iova,
                CQE_BYTES,
                true,
                format!("CQE {n} of CQ {cqn:#x}"),
            );
            return;
        }
    }
    let counters = &mut hw.model.rt.counters;
    counters.cqes += u64::from(count);
    if error {
        counters.error_cqes += 1;
    }
    if let Some(r) = hw.model.rt.cqs.get_mut(&cqn) {
        r.pi = (r.pi + count) & 0xff_ffff;
        r.written += u64::from(count);
    }
    let fire = armed
        && (st == arm_state::ARMED || (st == arm_state::SOLICITED_ARMED && (solicited || error)));
    set_cq(hw, cqn, fire);
    if fire {
        post_eqe(hw, eqn, event::COMPLETION, &completion_data(cqn));
    }
}

/// The new buffer of a CQ resize (MODIFY_CQ op_mod 1), as the command checked it.
pub(crate) struct NewBuffer {
    pub(crate) log_size: u64,
    pub(crate) log_page_size: u64,
    pub(crate) page_offset: u64,
    pub(crate) pas: Vec<u64>,
}

/// The CQEs CQ `cqn` holds unpolled: its producer counter against the consumer counter in its
/// doorbell record.
pub(crate) fn unpolled(hw: &Hw<'_>, cqn: u32) -> Option<u32> {
    let q = hw.model.objects.queue(ObjectKind::Cq, cqn)?;
    let dbr = View::<Cqc>::new(&q.ctx).ok()?.get(Cqc::DBR_ADDR);
    let pi = hw.model.rt.cqs.get(&cqn).map_or(0, |r| r.pi);
    let ci = read_be32(hw.iommu, dbr).unwrap_or(0) & 0xff_ffff;
    Some(pi.wrapping_sub(ci) & 0xff_ffff)
}

/// Resizes CQ `cqn`: a RESIZE_CQ CQE goes to the old buffer at the producer index (the last
/// entry the device writes there), and every later CQE to the new buffer, the producer index
/// counting on — so the consumer copies what it has not polled up to the resize CQE into the
/// new buffer one slot further on, and polls on from there. The CQE size is kept.
pub(crate) fn resize(hw: &mut Hw<'_>, cqn: u32, new: NewBuffer) {
    let resize_cqe = Cqe {
        opcode: op::RESIZE_CQ,
        ..Cqe::default()
    };
    post(hw, cqn, &resize_cqe);
    let Some(q) = hw.model.objects.queue_mut(ObjectKind::Cq, cqn) else {
        return;
    };
    let r = ViewMut::<Cqc>::new(&mut q.ctx).and_then(|mut v| {
        v.set(Cqc::LOG_CQ_SIZE, new.log_size)?;
        v.set(Cqc::LOG_PAGE_SIZE, new.log_page_size)?;
        v.set(Cqc::PAGE_OFFSET, new.page_offset).map(drop)
    });
    if let Err(e) = r {
        log::error!("mlx5-sim: CQ {cqn:#x} resize: {e}");
        return;
    }
    q.pas = new.pas.into();
}

/// Updates the CQ context after a CQE: producer counter, and the arming when it fired.
fn set_cq(hw: &mut Hw<'_>, cqn: u32, fired: bool) {
    let pi = hw.model.rt.cqs.get(&cqn).map_or(0, |r| r.pi);
    if let Some(q) = hw.model.objects.queue_mut(ObjectKind::Cq, cqn) {
        if fired {
            q.armed = false;
        }
        if let Ok(mut v) = ViewMut::<Cqc>::new(&mut q.ctx) {
            let mut r = v.set(Cqc::PRODUCER_COUNTER, pi.into()).map(|_| ());
            if fired {
                r = r.and_then(|()| v.set(Cqc::ST, arm_state::FIRED).map(|_| ()));
            }
            if let Err(e) = r {
                log::error!("mlx5-sim: CQ {cqn:#x}: {e}");
            }
        }
    }
}

/// Fires the completion event of CQ `cqn` if it is armed with CQEs beyond `ci` (called after
/// an arm doorbell).
pub(crate) fn arm_check(hw: &mut Hw<'_>, cqn: u32, ci: u32) {
    let pi = hw.model.rt.cqs.get(&cqn).map_or(0, |r| r.pi);
    let Some(q) = hw.model.objects.queue(ObjectKind::Cq, cqn) else {
        return;
    };
    let Ok(c) = View::<Cqc>::new(&q.ctx) else {
        return;
    };
    let size = 1u32 << c.get(Cqc::LOG_CQ_SIZE).min(24);
    let unpolled = pi.wrapping_sub(ci) & 0xff_ffff;
    if !q.armed || unpolled == 0 || unpolled > size {
        return;
    }
    let eqn = c.get32(Cqc::C_EQN_OR_APU_ELEMENT);
    set_cq(hw, cqn, true);
    post_eqe(hw, eqn, event::COMPLETION, &completion_data(cqn));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::eqe::eqe_image;

    #[test]
    fn eqe_images() {
        let e = eqe_image(event::COMPLETION, 0, &completion_data(0x12_3456), 1);
        let mut want = [0u8; 64];
        want[0x39..0x3c].copy_from_slice(&[0x12, 0x34, 0x56]);
        want[0x3f] = 1;
        assert_eq!(e, want);
        let d = event_data::<CqError>(|v| {
            v.set(CqError::CQN, 0x400)?
                .set(CqError::SYNDROME, CQ_OVERRUN)
                .map(drop)
        });
        let e = eqe_image(event::CQ_ERROR, 0, &d, 0);
        let mut want = [0u8; 64];
        want[1] = event::CQ_ERROR;
        want[0x20..0x24].copy_from_slice(&[0, 0, 4, 0]);
        want[0x2b] = 1;
        assert_eq!(e, want);
    }
}
