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
use mlx5_ifc::cqe::{Cqe64, CQE128_OFFSET, CQE_BYTES};
use mlx5_ifc::event;
use mlx5_ifc::prm::caps::CmdHcaCap;
use mlx5_ifc::prm::cq::Cqc;
use mlx5_ifc::prm::eqe::CqError;
use mlx5_ifc::{LayoutError, View, ViewMut};

use super::eqe::{async_event, completion_data, event_data, post_eqe, write_entry};
use crate::memory::queue::{dma_fault, read_be32};
use crate::model::objects::ObjectKind;
use crate::model::Hw;

/// CQE opcodes (`op_own >> 4`).
pub(crate) use mlx5_ifc::cqe::opcode as op;
/// Error CQE syndromes.
pub(crate) use mlx5_ifc::cqe::syndrome;

/// The CQ_ERROR syndrome of a CQ overrun.
const CQ_OVERRUN: u64 = 1;
/// Vendor error syndrome of error CQEs whose cause is a DMA fault on host memory.
pub(crate) const VENDOR_DMA: u8 = 0x51;

/// The fields of one CQE.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Cqe {
    pub(crate) opcode: u8,
    /// Requester CQEs: the send WQE opcode (`sop_drop_qpn` bits 31:24).
    pub(crate) wqe_opcode: u8,
    pub(crate) qpn: u32,
    pub(crate) wqe_counter: u16,
    /// A striding RQ's receive CQE: the WQE the frame went to (`wqe_counter` is then its first
    /// stride, `byte_cnt` the strides consumed and the bytes).
    pub(crate) wqe_id: u16,
    pub(crate) byte_cnt: u32,
    pub(crate) imm: [u8; 4],
    pub(crate) srqn_uidx: u32,
    pub(crate) flags_rqpn: u32,
    /// `l3_hdr_type` ([`mlx5_ifc::cqe::l3_hdr_type`]).
    pub(crate) l3_hdr_type: u8,
    pub(crate) solicited: bool,
    pub(crate) syndrome: u8,
    pub(crate) vendor: u8,
    /// Ethernet receives: what the device checked and stripped ([`EthRx`]).
    pub(crate) eth: EthRx,
}

/// The fields of an Ethernet receive CQE (all zero otherwise).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct EthRx {
    /// One's complement sum from the IP header to the end of the frame.
    pub(crate) check_sum: u16,
    /// `hds_ip_ext`: L2/L3/L4 OK bits.
    pub(crate) hds_ip_ext: u8,
    /// [`mlx5_ifc::cqe::l4_hdr_type`].
    pub(crate) l4_hdr_type: u8,
    /// The stripped VLAN tag, if one was.
    pub(crate) vlan: Option<u16>,
    pub(crate) rss_hash: u32,
    pub(crate) rss_type: u8,
}

impl Cqe {
    /// The 64-byte image with owner bit `owner`. An error CQE has no byte count, and its
    /// vendor syndrome and syndrome overwrite the last two bytes of the timestamp.
    fn image(&self, owner: u8, timestamp: u64) -> [u8; CQE_BYTES] {
        let mut b = [0u8; CQE_BYTES];
        if let Err(e) = self.fill(&mut b, owner, timestamp) {
            log::error!("mlx5-sim: CQE image: {e}");
        }
        b
    }

    fn fill(&self, b: &mut [u8], owner: u8, timestamp: u64) -> Result<(), LayoutError> {
        let mut v = ViewMut::<Cqe64>::new(b)?;
        v.set(Cqe64::FLAGS_RQPN, self.flags_rqpn.into())?;
        v.set(Cqe64::L3_HDR_TYPE, self.l3_hdr_type.into())?;
        let e = &self.eth;
        v.set(Cqe64::CHECK_SUM, e.check_sum.into())?;
        v.set(Cqe64::HDS_IP_EXT, e.hds_ip_ext.into())?;
        v.set(Cqe64::L4_HDR_TYPE, e.l4_hdr_type.into())?;
        v.set(Cqe64::CV, e.vlan.is_some().into())?;
        v.set(Cqe64::VLAN_INFO, e.vlan.unwrap_or(0).into())?;
        v.set(Cqe64::RSS_HASH_RESULT, e.rss_hash.into())?;
        v.set(Cqe64::RSS_HASH_TYPE, e.rss_type.into())?;
        v.set(Cqe64::SRQN_UIDX, self.srqn_uidx.into())?;
        v.set(Cqe64::IMM_INVAL_PKEY, u32::from_be_bytes(self.imm).into())?;
        v.set(Cqe64::TIMESTAMP, timestamp)?;
        if self.is_error() {
            v.set(Cqe64::VENDOR_ERR_SYND, self.vendor.into())?;
            v.set(Cqe64::SYNDROME, self.syndrome.into())?;
        } else {
            v.set(Cqe64::BYTE_CNT, self.byte_cnt.into())?;
        }
        v.set(Cqe64::WQE_OPCODE, self.wqe_opcode.into())?;
        v.set(Cqe64::QPN, (self.qpn & 0xff_ffff).into())?;
        v.set(Cqe64::WQE_COUNTER, self.wqe_counter.into())?;
        v.set(Cqe64::WQE_ID, self.wqe_id.into())?;
        v.set(Cqe64::OPCODE, (self.opcode & 0xf).into())?;
        v.set(Cqe64::SE, self.solicited.into())?;
        v.set(Cqe64::OWNER, (owner & 1).into())?;
        Ok(())
    }

    fn is_error(&self) -> bool {
        self.opcode == op::REQ_ERR || self.opcode == op::RESP_ERR
    }
}

/// `srqn_uidx` of a completion of QP `user_index` (CQE version 1), or `srqn` (version 0).
pub(crate) fn srqn_uidx(hw: &Hw<'_>, user_index: u32, srqn: Option<u32>) -> u32 {
    if hw.model.cur(CmdHcaCap::CQE_VERSION) >= 1 {
        user_index & 0xff_ffff
    } else {
        srqn.unwrap_or(0) & 0xff_ffff
    }
}

/// Writes `cqe` to CQ `cqn` (see the module documentation).
pub(crate) fn post(hw: &mut Hw<'_>, cqn: u32, cqe: &Cqe) {
    let Some(q) = hw.model.objects.queue(ObjectKind::Cq, cqn) else {
        log::warn!("mlx5-sim: CQE for CQ {cqn:#x}, which does not exist");
        hw.model.rt.counters.cqes_dropped += 1;
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
        hw.model.rt.counters.cqes_dropped += 1;
        return;
    }
    let ci = read_be32(hw.iommu, dbr).unwrap_or(0) & 0xff_ffff;
    if (rt.pi.wrapping_sub(ci) & 0xff_ffff) >= size {
        log::warn!(
            "mlx5-sim: CQ {cqn:#x} overflow (producer {}, consumer {ci})",
            rt.pi
        );
        hw.model.rt.counters.cqes_dropped += 1;
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
    let off = u64::from(rt.pi & (size - 1)) * stride + at;
    let owner = ((rt.pi >> log_size) & 1) as u8;
    let mut img = cqe.image(owner, hw.now);
    if let Some((field, value)) = hw.model.injected.take_cqe() {
        field.apply(&mut img, value);
        let what = format!("CQE {} of CQ {cqn:#x}: {field:?} := {value:#x}", rt.pi);
        hw.model.injected.log.push(hw.now, "CorruptCqe", what);
    }
    if let Err(iova) = write_entry(hw, &pas, page, start + off, &img) {
        dma_fault(
            hw.faults,
            iova,
            CQE_BYTES,
            true,
            format!("CQE {} of CQ {cqn:#x}", rt.pi),
        );
        return;
    }
    let counters = &mut hw.model.rt.counters;
    counters.cqes += 1;
    if cqe.is_error() {
        counters.error_cqes += 1;
    }
    if let Some(r) = hw.model.rt.cqs.get_mut(&cqn) {
        r.pi = (r.pi + 1) & 0xff_ffff;
        r.written += 1;
    }
    let fire = armed
        && (st == arm_state::ARMED
            || (st == arm_state::SOLICITED_ARMED && (cqe.solicited || cqe.is_error())));
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

    #[test]
    fn error_cqe_image() {
        let c = Cqe {
            opcode: op::RESP_ERR,
            qpn: 0x45,
            wqe_counter: 3,
            byte_cnt: 99,
            srqn_uidx: 0x12,
            flags_rqpn: 0x1000_0007,
            l3_hdr_type: mlx5_ifc::cqe::l3_hdr_type::IPV4,
            imm: [1, 2, 3, 4],
            solicited: true,
            syndrome: syndrome::WR_FLUSH_ERR,
            vendor: VENDOR_DMA,
            ..Cqe::default()
        };
        let b = c.image(0, 0x0102_0304_0506_0708);
        assert_eq!(&b[..24], &[0; 24]);
        assert_eq!(&b[24..30], &[0x10, 0, 0, 7, 0, 2 << 2]);
        assert_eq!(&b[32..40], &[0, 0, 0, 0x12, 1, 2, 3, 4]);
        assert_eq!(&b[44..48], &[0; 4], "an error CQE has no byte count");
        assert_eq!(&b[48..56], &[1, 2, 3, 4, 5, 6, VENDOR_DMA, 0x05]);
        assert_eq!(&b[56..64], &[0, 0, 0, 0x45, 0, 3, 0, 0xe2]);
    }

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
