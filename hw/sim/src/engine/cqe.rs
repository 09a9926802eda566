//! Completion queue entries, event queue entries, CQ arming and asynchronous events.
//!
//! A CQE (§4.1 of `mlx5-datapath-sizing.md`) goes to slot `producer & (size - 1)` of the CQ
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
//! writes a COMPLETION EQE to the CQ's EQ and disarms the CQ. An EQE goes to slot `producer &
//! (size - 1)` of its EQ unless the EQ holds `size` EQEs past its consumer counter (the EQ
//! doorbell), in which case it is dropped and counted. An armed EQ fires (its interrupt) and
//! is disarmed.

use mlx5_ifc::consts::{arm_state, cqe_sz};
use mlx5_ifc::event;
use mlx5_ifc::prm::caps::CmdHcaCap;
use mlx5_ifc::prm::cq::Cqc;
use mlx5_ifc::prm::eq::Eqc;
use mlx5_ifc::{View, ViewMut};

use super::wqe::{dma_fault, read_be32, write_queue};
use super::Hw;
use crate::fw::objects::ObjectKind;

/// CQE opcodes (`op_own >> 4`).
pub(crate) mod op {
    pub(crate) const REQ: u8 = 0x0;
    pub(crate) const RESP_WR_IMM: u8 = 0x1;
    pub(crate) const RESP_SEND: u8 = 0x2;
    pub(crate) const RESP_SEND_IMM: u8 = 0x3;
    pub(crate) const RESP_SEND_INV: u8 = 0x4;
    pub(crate) const REQ_ERR: u8 = 0xd;
    pub(crate) const RESP_ERR: u8 = 0xe;
}

/// Error CQE syndromes (byte 55).
pub(crate) mod syndrome {
    pub(crate) const LOCAL_LENGTH_ERR: u8 = 0x01;
    pub(crate) const LOCAL_QP_OP_ERR: u8 = 0x02;
    pub(crate) const LOCAL_PROT_ERR: u8 = 0x04;
    pub(crate) const WR_FLUSH_ERR: u8 = 0x05;
    pub(crate) const BAD_RESP_ERR: u8 = 0x10;
    pub(crate) const REMOTE_INVAL_REQ_ERR: u8 = 0x12;
    pub(crate) const REMOTE_ACCESS_ERR: u8 = 0x13;
    pub(crate) const REMOTE_OP_ERR: u8 = 0x14;
    pub(crate) const TRANSPORT_RETRY_EXC_ERR: u8 = 0x15;
    pub(crate) const RNR_RETRY_EXC_ERR: u8 = 0x16;
}

/// Vendor error byte (54) of error CQEs whose cause is a DMA fault on host memory.
pub(crate) const VENDOR_DMA: u8 = 0x51;

/// The fields of one CQE.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Cqe {
    pub(crate) opcode: u8,
    /// Requester CQEs: the send WQE opcode (`sop_drop_qpn` bits 31:24).
    pub(crate) wqe_opcode: u8,
    pub(crate) qpn: u32,
    pub(crate) wqe_counter: u16,
    pub(crate) byte_cnt: u32,
    pub(crate) imm: [u8; 4],
    pub(crate) srqn_uidx: u32,
    pub(crate) flags_rqpn: u32,
    /// Byte 29 (`l4_l3_hdr_type`).
    pub(crate) l3: u8,
    pub(crate) solicited: bool,
    pub(crate) syndrome: u8,
    pub(crate) vendor: u8,
}

impl Cqe {
    /// The 64-byte image with owner bit `owner`.
    fn image(&self, owner: u8, timestamp: u64) -> [u8; 64] {
        let mut b = [0u8; 64];
        b[24..28].copy_from_slice(&self.flags_rqpn.to_be_bytes());
        b[29] = self.l3;
        b[32..36].copy_from_slice(&self.srqn_uidx.to_be_bytes());
        b[36..40].copy_from_slice(&self.imm);
        b[44..48].copy_from_slice(&self.byte_cnt.to_be_bytes());
        b[48..56].copy_from_slice(&timestamp.to_be_bytes());
        if self.opcode == op::REQ_ERR || self.opcode == op::RESP_ERR {
            b[44..48].fill(0);
            b[54] = self.vendor;
            b[55] = self.syndrome;
        }
        let sop = (u32::from(self.wqe_opcode) << 24) | (self.qpn & 0xff_ffff);
        b[56..60].copy_from_slice(&sop.to_be_bytes());
        b[60..62].copy_from_slice(&self.wqe_counter.to_be_bytes());
        b[63] = (self.opcode << 4) | (u8::from(self.solicited) << 1) | (owner & 1);
        b
    }

    fn is_error(&self) -> bool {
        self.opcode == op::REQ_ERR || self.opcode == op::RESP_ERR
    }
}

/// `srqn_uidx` of a completion of QP `user_index` (CQE version 1), or `srqn` (version 0).
pub(crate) fn srqn_uidx(hw: &Hw<'_>, user_index: u32, srqn: Option<u32>) -> u32 {
    if hw.fw.cur(CmdHcaCap::CQE_VERSION) >= 1 {
        user_index & 0xff_ffff
    } else {
        srqn.unwrap_or(0) & 0xff_ffff
    }
}

/// Writes `cqe` to CQ `cqn` (see the module documentation).
pub(crate) fn post(hw: &mut Hw<'_>, cqn: u32, cqe: &Cqe) {
    let Some(q) = hw.fw.objects.queue(ObjectKind::Cq, cqn) else {
        log::warn!("mlx5-sim: CQE for CQ {cqn:#x}, which does not exist");
        hw.fw.engine.counters.cqes_dropped += 1;
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
    let (armed, st) = (q.armed, c.get(Cqc::ST));
    let pas = q.pas.clone();
    let rt = *hw.fw.engine.cqs.entry(cqn).or_default();
    if rt.error {
        hw.fw.engine.counters.cqes_dropped += 1;
        return;
    }
    let ci = read_be32(hw.iommu, dbr).unwrap_or(0) & 0xff_ffff;
    if (rt.pi.wrapping_sub(ci) & 0xff_ffff) >= size {
        log::warn!(
            "mlx5-sim: CQ {cqn:#x} overflow (producer {}, consumer {ci})",
            rt.pi
        );
        hw.fw.engine.counters.cqes_dropped += 1;
        if let Some(r) = hw.fw.engine.cqs.get_mut(&cqn) {
            r.error = true;
        }
        let mut data = [0u8; 28];
        data[..4].copy_from_slice(&cqn.to_be_bytes());
        data[0x0b] = 1;
        async_event(hw, event::CQ_ERROR, &data);
        return;
    }
    let stride: u64 = if big { 128 } else { 64 };
    let off = u64::from(rt.pi & (size - 1)) * stride + if big { 64 } else { 0 };
    let owner = ((rt.pi >> log_size) & 1) as u8;
    let mut img = cqe.image(owner, hw.now);
    if let Some((field, value)) = hw.fw.injected.take_cqe() {
        field.apply(&mut img, value);
        let what = format!("CQE {} of CQ {cqn:#x}: {field:?} := {value:#x}", rt.pi);
        hw.fw.injected.log.push(hw.now, "CorruptCqe", what);
    }
    if let Err(iova) = write_entry(hw, &pas, page, off, &img) {
        dma_fault(
            hw.faults,
            iova,
            64,
            true,
            format!("CQE {} of CQ {cqn:#x}", rt.pi),
        );
        return;
    }
    let counters = &mut hw.fw.engine.counters;
    counters.cqes += 1;
    if cqe.is_error() {
        counters.error_cqes += 1;
    }
    if let Some(r) = hw.fw.engine.cqs.get_mut(&cqn) {
        r.pi = (r.pi + 1) & 0xff_ffff;
        r.written += 1;
    }
    let fire = armed
        && (st == arm_state::ARMED
            || (st == arm_state::SOLICITED_ARMED && (cqe.solicited || cqe.is_error())));
    set_cq(hw, cqn, fire);
    if fire {
        let mut data = [0u8; 28];
        data[24..28].copy_from_slice(&(cqn & 0xff_ffff).to_be_bytes());
        post_eqe(hw, eqn, event::COMPLETION, &data);
    }
}

/// Writes a 64-byte CQE or EQE image at offset `off` of a queue buffer: the first 56 bytes,
/// then the last 8 (the word holding the owner bit) with one 64-bit release store, as the
/// driver reads a CQE's last word with one 64-bit acquire load.
fn write_entry(hw: &Hw<'_>, pas: &[u64], page: u64, off: u64, img: &[u8; 64]) -> Result<(), u64> {
    write_queue(hw.iommu, pas, page, off, &img[..56])
        .and_then(|()| write_queue(hw.iommu, pas, page, off + 56, &img[56..]))
}

/// Updates the CQ context after a CQE: producer counter, and the arming when it fired.
fn set_cq(hw: &mut Hw<'_>, cqn: u32, fired: bool) {
    let pi = hw.fw.engine.cqs.get(&cqn).map_or(0, |r| r.pi);
    if let Some(q) = hw.fw.objects.queue_mut(ObjectKind::Cq, cqn) {
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
    let pi = hw.fw.engine.cqs.get(&cqn).map_or(0, |r| r.pi);
    let Some(q) = hw.fw.objects.queue(ObjectKind::Cq, cqn) else {
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
    let mut data = [0u8; 28];
    data[24..28].copy_from_slice(&(cqn & 0xff_ffff).to_be_bytes());
    post_eqe(hw, eqn, event::COMPLETION, &data);
}

/// Writes an EQE of `etype` with event data `data` (EQE bytes 0x20..0x3c) to EQ `eqn`.
pub(crate) fn post_eqe(hw: &mut Hw<'_>, eqn: u32, etype: u8, data: &[u8; 28]) {
    let Some(q) = hw.fw.objects.queue(ObjectKind::Eq, eqn) else {
        hw.fw.engine.counters.eqes_dropped += 1;
        return;
    };
    let Ok(c) = View::<Eqc>::new(&q.ctx) else {
        return;
    };
    let log_size = c.get(Eqc::LOG_EQ_SIZE).min(24) as u32;
    let size = 1u32 << log_size;
    let ci = c.get32(Eqc::CONSUMER_COUNTER);
    let page = 4096u64 << c.get(Eqc::LOG_PAGE_SIZE).min(20);
    let pas = q.pas.clone();
    let pi = hw.fw.engine.eqs.get(&eqn).copied().unwrap_or(0);
    if (pi.wrapping_sub(ci) & 0xff_ffff) >= size {
        log::warn!("mlx5-sim: EQ {eqn:#x} overrun; event {etype:#x} dropped");
        hw.fw.engine.counters.eqes_dropped += 1;
        return;
    }
    let mut img = [0u8; 64];
    img[1] = etype;
    img[0x20..0x3c].copy_from_slice(data);
    img[0x3f] = ((pi >> log_size) & 1) as u8;
    if let Some((field, value)) = hw.fw.injected.take_eqe(eqn) {
        let before = img;
        field.apply(&mut img, value);
        let changed: Vec<String> = (0..64)
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
        hw.fw.injected.log.push(hw.now, "CorruptEqe", what);
    }
    let off = u64::from(pi & (size - 1)) * 64;
    if let Err(iova) = write_entry(hw, &pas, page, off, &img) {
        dma_fault(
            hw.faults,
            iova,
            64,
            true,
            format!("EQE {pi} of EQ {eqn:#x}"),
        );
        return;
    }
    hw.fw.engine.counters.eqes += 1;
    let pi = (pi + 1) & 0xff_ffff;
    hw.fw.engine.eqs.insert(eqn, pi);
    if let Some(q) = hw.fw.objects.queue_mut(ObjectKind::Eq, eqn) {
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

/// Posts an asynchronous event to every EQ subscribed to it.
pub(crate) fn async_event(hw: &mut Hw<'_>, etype: u8, data: &[u8; 28]) {
    let eqs: Vec<u32> = hw
        .fw
        .objects
        .queues(ObjectKind::Eq)
        .into_iter()
        .filter(|&n| {
            hw.fw
                .objects
                .queue(ObjectKind::Eq, n)
                .is_some_and(|q| subscribed(&q.event_bitmask, etype))
        })
        .collect();
    if eqs.is_empty() {
        log::info!("mlx5-sim: event {etype:#x} with no EQ subscribed");
    }
    for eqn in eqs {
        post_eqe(hw, eqn, etype, data);
    }
}

/// Posts a QP event (`WQ_CATAS_ERROR`, `WQ_INVAL_REQ_ERROR`, `WQ_ACCESS_ERROR`...) for `qpn`.
pub(crate) fn qp_event(hw: &mut Hw<'_>, etype: u8, qpn: u32) {
    let mut data = [0u8; 28];
    data[0x14] = 0;
    data[0x18..0x1c].copy_from_slice(&(qpn & 0xff_ffff).to_be_bytes());
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

    #[test]
    fn cqe_image() {
        let c = Cqe {
            opcode: op::REQ,
            wqe_opcode: 0x0a,
            qpn: 0x123,
            wqe_counter: 7,
            byte_cnt: 16,
            ..Cqe::default()
        };
        let b = c.image(1, 5);
        assert_eq!(&b[56..60], &[0x0a, 0, 0x01, 0x23]);
        assert_eq!(&b[60..62], &[0, 7]);
        assert_eq!(b[63], 0x01);
        assert_eq!(&b[44..48], &[0, 0, 0, 16]);
    }
}
