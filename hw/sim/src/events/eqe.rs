//! Event queue entries, EQ arming, completion, command and asynchronous events.
//!
//! A COMPLETION EQE comes from an armed CQ ([`super::cqe`]). An EQE goes to slot `producer &
//! (size - 1)` of its EQ unless the EQ holds `size` EQEs past its consumer counter (the EQ
//! doorbell), in which case it is dropped and counted. An armed EQ fires (its interrupt) and
//! is disarmed. EQEs are the [`Eqe`] layout, their event data [`CompEvent`],
//! [`mlx5_ifc::prm::eqe::CqError`] or [`QpEvents`]; they are written as CQEs are (the owner
//! word last, [`write_entry`]).
//!
//! EQE layouts ([`mlx5_ifc::prm::eqe`]: 64 bytes; byte 1 event type, byte 3 sub-type, event
//! data at 0x20..0x3b, owner bit 0 of byte 0x3f = `(producer >> log_eq_size) & 1`):
//!
//! | event | data |
//! |---|---|
//! | COMPLETION 0x00 | CQN, BE32 at 0x38 (low 24 bits) |
//! | CQ_ERROR 0x04 | CQN, BE32 at 0x20; syndrome at 0x2b (1 = overrun) |
//! | WQ_CATAS_ERROR 0x05, WQ_INVAL_REQ_ERROR 0x10, WQ_ACCESS_ERROR 0x11 | resource type at 0x34 (0 = QP), QPN BE32 at 0x38 |
//!
//! Completion events go to the CQ's EQ; asynchronous events to every EQ whose `event_bitmask`
//! has the event's bit (bit n of the 256-bit mask read as big-endian 64-bit words).

use mlx5_ifc::consts::arm_state;
use mlx5_ifc::cqe::Cqe64;
use mlx5_ifc::event;
use mlx5_ifc::prm::eq::Eqc;
use mlx5_ifc::prm::eqe::{CmdInterCompEvent, CompEvent, Eqe, EventAuto, QpEvents};
use mlx5_ifc::{Layout, LayoutError, View, ViewMut};

use crate::memory::queue::{dma_fault, write_queue};
use crate::model::objects::ObjectKind;
use crate::model::Hw;

/// Bytes of the event data of an EQE.
pub(crate) const EVENT_DATA_BYTES: usize = EventAuto::BYTES;
/// `qp_events.type` of an event about a QP.
const QP_EVENT_TYPE_QP: u64 = 0;
/// `qp_events.type` of an SRQ / RMP event.
const QP_EVENT_TYPE_SRQ: u64 = 1;

/// Event data of layout `L` (an [`EventAuto`] member) filled by `f`.
pub(super) fn event_data<L: Layout>(
    f: impl FnOnce(&mut ViewMut<'_, L>) -> Result<(), LayoutError>,
) -> [u8; EVENT_DATA_BYTES] {
    let mut data = [0u8; EVENT_DATA_BYTES];
    if let Err(e) = ViewMut::<L>::new(&mut data).and_then(|mut v| f(&mut v)) {
        log::error!("mlx5-sim: {} event data: {e}", L::NAME);
    }
    data
}

/// The event data of CQ `cqn`'s COMPLETION event.
pub(super) fn completion_data(cqn: u32) -> [u8; EVENT_DATA_BYTES] {
    event_data::<CompEvent>(|v| {
        v.set(CompEvent::CQ_NUMBER, (cqn & 0xff_ffff).into())
            .map(drop)
    })
}

/// The byte of a 64-byte entry from which the last 8, holding the owner bit, are written.
const LAST_WORD: usize = 56;
const _: () = assert!(Cqe64::OP_OWN.info.byte_offset() >= LAST_WORD);
const _: () = assert!(Eqe::OWNER.info.byte_offset() >= LAST_WORD);

/// Writes a 64-byte CQE or EQE image at offset `off` of a queue buffer: the first 56 bytes,
/// then the last 8 (the word holding the owner bit) with one 64-bit release store, as the
/// driver reads a CQE's last word with one 64-bit acquire load.
pub(super) fn write_entry(
    hw: &Hw<'_>,
    pas: &[u64],
    page: u64,
    off: u64,
    img: &[u8; 64],
) -> Result<(), u64> {
    let (head, last) = img.split_at(LAST_WORD);
    write_queue(hw.iommu, pas, page, off, head)
        .and_then(|()| write_queue(hw.iommu, pas, page, off + LAST_WORD as u64, last))
}

/// The EQE image of an event of `etype` with `data`, owner bit `owner`.
pub(super) fn eqe_image(etype: u8, sub: u8, data: &[u8; EVENT_DATA_BYTES], owner: u8) -> [u8; 64] {
    let mut img = [0u8; Eqe::BYTES];
    let d = Eqe::EVENT_DATA.offset();
    img[d..d + EVENT_DATA_BYTES].copy_from_slice(data);
    let r = ViewMut::<Eqe>::new(&mut img).and_then(|mut v| {
        v.set(Eqe::EVENT_TYPE, etype.into())?
            .set(Eqe::EVENT_SUB_TYPE, sub.into())?
            .set(Eqe::OWNER, (owner & 1).into())
            .map(drop)
    });
    if let Err(e) = r {
        log::error!("mlx5-sim: EQE image: {e}");
    }
    img
}

/// EQ `eqn` was just armed with consumer counter `ci`: if EQEs the driver has not consumed are
/// already there (written while the EQ was not armed — between the driver's last look and its
/// arming), the EQ fires at once, as the hardware does; otherwise the interrupt for them would
/// never come.
pub(crate) fn eq_arm_check(hw: &mut Hw<'_>, eqn: u32, ci: u32) {
    let pi = hw.model.rt.eqs.get(&eqn).copied().unwrap_or(0);
    let Some(q) = hw.model.objects.queue_mut(ObjectKind::Eq, eqn) else {
        return;
    };
    let Ok(mut c) = ViewMut::<Eqc>::new(&mut q.ctx) else {
        return;
    };
    let size = 1u32 << c.get(Eqc::LOG_EQ_SIZE).min(24);
    let pending = pi.wrapping_sub(ci) & 0xff_ffff;
    if !q.armed || pending == 0 || pending > size {
        return;
    }
    let vector = c.get(Eqc::INTR) as u16;
    if let Err(e) = c.set(Eqc::ST, arm_state::FIRED) {
        log::error!("mlx5-sim: EQ {eqn:#x}: {e}");
    }
    q.armed = false;
    hw.model.rt.irqs.push(vector);
}

/// Writes an EQE of `etype` with event data `data` to EQ `eqn`.
pub(crate) fn post_eqe(hw: &mut Hw<'_>, eqn: u32, etype: u8, data: &[u8; EVENT_DATA_BYTES]) {
    post_eqe_sub(hw, eqn, etype, 0, data);
}

/// Writes an EQE of `etype`, sub-type `sub`, with event data `data` to EQ `eqn`.
pub(crate) fn post_eqe_sub(
    hw: &mut Hw<'_>,
    eqn: u32,
    etype: u8,
    sub: u8,
    data: &[u8; EVENT_DATA_BYTES],
) {
    let Some(q) = hw.model.objects.queue(ObjectKind::Eq, eqn) else {
        hw.model.rt.counters.eqes_dropped += 1;
        return;
    };
    let Ok(c) = View::<Eqc>::new(&q.ctx) else {
        return;
    };
    let log_size = c.get(Eqc::LOG_EQ_SIZE).min(24) as u32;
    let size = 1u32 << log_size;
    let ci = c.get32(Eqc::CONSUMER_COUNTER);
    // An armed EQ raises its MSI-X vector with the EQE it is given (then it is fired).
    let irq = q.armed.then(|| c.get(Eqc::INTR) as u16);
    let page = 4096u64 << c.get(Eqc::LOG_PAGE_SIZE).min(20);
    let start = crate::memory::queue::queue_start(page, c.get(Eqc::PAGE_OFFSET));
    let pas = q.pas.clone();
    let pi = hw.model.rt.eqs.get(&eqn).copied().unwrap_or(0);
    if (pi.wrapping_sub(ci) & 0xff_ffff) >= size {
        log::warn!("mlx5-sim: EQ {eqn:#x} overrun; event {etype:#x} dropped");
        hw.model.rt.counters.eqes_dropped += 1;
        return;
    }
    let mut img = eqe_image(etype, sub, data, ((pi >> log_size) & 1) as u8);
    if let Some((field, value)) = hw.model.injected.take_eqe(eqn) {
        let before = img;
        field.apply(&mut img, value);
        let changed: Vec<String> = (0..Eqe::BYTES)
            .filter(|&i| img[i] != before[i])
            .map(|i| format!("[{i:#04x}] {:#04x}->{:#04x}", before[i], img[i]))
            .collect();
        let what = format!(
            "EQE {pi} of EQ {eqn:#x} (event {etype:#x}): {field:?} := {value:#x}: {}",
            if changed.is_empty() {
                "nothing changed".to_string()
            } else {
                changed.join(", ")
            }
        );
        hw.model.injected.log.push(hw.now, "CorruptEqe", what);
    }
    let off = u64::from(pi & (size - 1)) * Eqe::BYTES as u64;
    if let Err(iova) = write_entry(hw, &pas, page, start + off, &img) {
        dma_fault(
            hw.faults,
            iova,
            Eqe::BYTES,
            true,
            format!("EQE {pi} of EQ {eqn:#x}"),
        );
        return;
    }
    hw.model.rt.counters.eqes += 1;
    let pi = (pi + 1) & 0xff_ffff;
    hw.model.rt.eqs.insert(eqn, pi);
    if let Some(v) = irq {
        hw.model.rt.irqs.push(v);
    }
    if let Some(q) = hw.model.objects.queue_mut(ObjectKind::Eq, eqn) {
        q.armed = false;
        if let Ok(mut v) = ViewMut::<Eqc>::new(&mut q.ctx) {
            let r = v
                .set(Eqc::PRODUCER_COUNTER, pi.into())
                .and_then(|v| v.set(Eqc::ST, arm_state::FIRED));
            if let Err(e) = r {
                log::error!("mlx5-sim: EQ {eqn:#x}: {e}");
            }
        }
    }
}

/// Whether bit `etype` is set in a 256-bit `event_bitmask` (big-endian 64-bit words).
pub(crate) fn subscribed(mask: &[u8; 32], etype: u8) -> bool {
    let n = usize::from(etype);
    let byte = 8 * (n / 64) + 7 - (n % 64) / 8;
    mask[byte] & (1 << (n % 8)) != 0
}

/// The EQs subscribed to command completion events (CMD, 0x0a).
pub(crate) fn cmd_eqs(model: &crate::model::Model) -> Vec<u32> {
    model
        .objects
        .queues(ObjectKind::Eq)
        .into_iter()
        .filter(|&n| {
            model
                .objects
                .queue(ObjectKind::Eq, n)
                .is_some_and(|q| subscribed(&q.event_bitmask, event::CMD))
        })
        .collect()
}

/// A command completion event (CMD, 0x0a): the bit of the completed entry `slot` in
/// `command_completion_vector`, to each of `eqs` — the EQs subscribed to CMD events when the
/// command was delivered ([`cmd_eqs`]; not the EQ the command itself created: that command
/// completes by polling), still alive. None while the driver polls (as ours always does; Linux
/// subscribes its command EQ and then waits for these). The entry and its mailboxes are final
/// before it is written.
pub(crate) fn command_event(hw: &mut Hw<'_>, slot: u32, eqs: &[u32]) {
    let subscribed_eqs: Vec<u32> = eqs
        .iter()
        .copied()
        .filter(|&n| hw.model.objects.queue(ObjectKind::Eq, n).is_some())
        .collect();
    if subscribed_eqs.is_empty() || slot >= 32 {
        return;
    }
    let data = event_data::<CmdInterCompEvent>(|v| {
        v.set(CmdInterCompEvent::COMMAND_COMPLETION_VECTOR, 1u64 << slot)?;
        Ok(())
    });
    for eqn in subscribed_eqs {
        post_eqe(hw, eqn, event::CMD, &data);
    }
}

/// Posts an asynchronous event to every EQ subscribed to it.
pub(crate) fn async_event(hw: &mut Hw<'_>, etype: u8, data: &[u8; EVENT_DATA_BYTES]) {
    async_event_sub(hw, etype, 0, data);
}

/// As [`async_event`], with the EQE's sub-type `sub` (PORT_CHANGE: what changed).
pub(crate) fn async_event_sub(hw: &mut Hw<'_>, etype: u8, sub: u8, data: &[u8; EVENT_DATA_BYTES]) {
    let eqs: Vec<u32> = hw
        .model
        .objects
        .queues(ObjectKind::Eq)
        .into_iter()
        .filter(|&n| {
            hw.model
                .objects
                .queue(ObjectKind::Eq, n)
                .is_some_and(|q| subscribed(&q.event_bitmask, etype))
        })
        .collect();
    if eqs.is_empty() {
        log::info!("mlx5-sim: event {etype:#x} with no EQ subscribed");
    }
    for eqn in eqs {
        post_eqe_sub(hw, eqn, etype, sub, data);
    }
}

/// The GENERAL_EVENT of sub-type DELAY_DROP_TIMEOUT, naming port 1 (bits 7:4 of data byte 8,
/// where mlx5_ib reads the port of a general event).
pub(crate) fn delay_drop_timeout(hw: &mut Hw<'_>) {
    let data = event_data::<mlx5_ifc::prm::eqe::PortStateChangeEvent>(|v| {
        v.set(mlx5_ifc::prm::eqe::PortStateChangeEvent::PORT_NUM, 1)
            .map(drop)
    });
    async_event_sub(hw, event::GENERAL_EVENT, event::DELAY_DROP_TIMEOUT, &data);
}

/// The DCT event `etype` naming `dctn`, to every EQ subscribed to it.
pub(crate) fn dct_event(hw: &mut Hw<'_>, etype: u8, dctn: u32) {
    let data = event_data::<mlx5_ifc::prm::eqe::DctEvents>(|v| {
        v.set(
            mlx5_ifc::prm::eqe::DctEvents::DCT_NUMBER,
            (dctn & 0xff_ffff).into(),
        )
        .map(drop)
    });
    async_event(hw, etype, &data);
}

/// Posts a QP event (`WQ_CATAS_ERROR`, `WQ_INVAL_REQ_ERROR`, `WQ_ACCESS_ERROR`...) for `qpn`.
pub(crate) fn qp_event(hw: &mut Hw<'_>, etype: u8, qpn: u32) {
    let data = event_data::<QpEvents>(|v| {
        v.set(QpEvents::TYPE, QP_EVENT_TYPE_QP)?
            .set(QpEvents::QPN_RQN_SQN, (qpn & 0xff_ffff).into())
            .map(drop)
    });
    async_event(hw, etype, &data);
}

/// A work-queue event of SRQ / RMP `srqn` (queue type 1: SRQ).
pub(crate) fn srq_event(hw: &mut Hw<'_>, etype: u8, srqn: u32) {
    let data = event_data::<QpEvents>(|v| {
        v.set(QpEvents::TYPE, QP_EVENT_TYPE_SRQ)?
            .set(QpEvents::QPN_RQN_SQN, (srqn & 0xff_ffff).into())
            .map(drop)
    });
    async_event(hw, etype, &data);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_mask_bits() {
        let mut m = [0u8; 32];
        m[7] = 0x3f;
        assert!(subscribed(&m, 0) && subscribed(&m, 5) && !subscribed(&m, 6));
        m[5] = 0x02;
        assert!(subscribed(&m, 0x11));
    }
}
