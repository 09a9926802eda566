//! The queue entry fields a fault can overwrite: CQE fields ([`CqeField`], in the
//! [`mlx5_ifc::cqe::Cqe64`] layout) and EQE fields ([`EqeField`], in the
//! [`mlx5_ifc::prm::eqe::Eqe`] layout and its event data).

use mlx5_ifc::cqe::Cqe64;
use mlx5_ifc::event;
use mlx5_ifc::prm::eqe::{CompEvent, CqError, Eqe, EventAuto, QpEvents};
use mlx5_ifc::{Layout, LayoutError, ViewMut};

/// A CQE field [`crate::Fault::CorruptCqe`] can overwrite (`mlx5-datapath-sizing.md` §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CqeField {
    /// `sop_drop_qpn` bits 23:0: the QP number (bytes 57..60).
    Qpn,
    /// `wqe_counter` (bytes 60..62): the WQE completed, or the SRQ WQE index.
    WqeCounter,
    /// `byte_cnt` (bytes 44..48).
    ByteCnt,
    /// The opcode, `op_own` bits 7:4 (byte 63; the owner bit is kept).
    Opcode,
}

impl CqeField {
    /// Overwrites this field of the 64-byte CQE image `cqe` with `value` (the low bits that
    /// fit the field).
    pub(crate) fn apply(self, cqe: &mut [u8; 64], value: u32) {
        let r = ViewMut::<Cqe64>::new(cqe).and_then(|mut v| {
            match self {
                CqeField::Qpn => v.set(Cqe64::QPN, u64::from(value & 0xff_ffff)),
                CqeField::WqeCounter => v.set(Cqe64::WQE_COUNTER, u64::from(value as u16)),
                CqeField::ByteCnt => v.set(Cqe64::BYTE_CNT, value.into()),
                CqeField::Opcode => v.set(Cqe64::OPCODE, u64::from(value & 0xf)),
            }
            .map(drop)
        });
        if let Err(e) = r {
            log::error!("mlx5-sim: CorruptCqe {self:?}: {e}");
        }
    }
}

/// Bytes of event data in an EQE (0x20..0x3c): seven big-endian 32-bit words.
pub const EQE_DATA_WORDS: u8 = (EventAuto::BYTES / 4) as u8;

/// An EQE field [`crate::Fault::CorruptEqe`] can overwrite. The EQE layout (64 bytes): byte 1
/// event type, byte 3 sub-type, event data at 0x20..0x3c, signature at 0x3e, owner bit 0 of
/// byte 0x3f (see the `engine` module for the data of each event).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EqeField {
    /// `event_type` (byte 1; low 8 bits of the value).
    EventType,
    /// `event_sub_type` (byte 3; low 8 bits of the value).
    SubType,
    /// The CQ number the event names: bits 23:0 of the big-endian word at 0x20 for a CQ_ERROR
    /// event, at 0x38 for every other event (COMPLETION's CQN). Bits 31:24 are kept.
    Cqn,
    /// The QP number of a QP event (WQ_CATAS_ERROR, WQ_INVAL_REQ_ERROR, WQ_ACCESS_ERROR...):
    /// bits 23:0 of the big-endian word at 0x38. Bits 31:24 are kept.
    Qpn,
    /// Event data word `n` (`n` < [`EQE_DATA_WORDS`]): the whole big-endian 32-bit word at
    /// `0x20 + 4n`. A larger `n` changes nothing.
    Data(u8),
    /// Any byte `n` (< 64) of the EQE (low 8 bits of the value). A larger `n` changes nothing.
    Byte(u8),
    /// The owner bit (byte 0x3f, bit 0) inverted, so the EQE reads as not yet written (or as
    /// the previous pass's). The value is ignored.
    OwnerFlipped,
}

impl EqeField {
    /// Overwrites this field of the 64-byte EQE image `eqe` with `value`.
    pub(crate) fn apply(self, eqe: &mut [u8; 64], value: u32) {
        if let Err(e) = self.set(eqe, value) {
            log::error!("mlx5-sim: CorruptEqe {self:?}: {e}");
        }
    }

    fn set(self, eqe: &mut [u8; 64], value: u32) -> Result<(), LayoutError> {
        let mut v = ViewMut::<Eqe>::new(eqe)?;
        let low24 = u64::from(value & 0xff_ffff);
        let cq_error = v.get(Eqe::EVENT_TYPE) == u64::from(event::CQ_ERROR);
        let mut data = v.nested_mut(Eqe::EVENT_DATA);
        match self {
            EqeField::EventType => v.set(Eqe::EVENT_TYPE, u64::from(value as u8)).map(drop),
            EqeField::SubType => v.set(Eqe::EVENT_SUB_TYPE, u64::from(value as u8)).map(drop),
            EqeField::Cqn if cq_error => data
                .nested_mut(EventAuto::CQ_ERROR)
                .set(CqError::CQN, low24)
                .map(drop),
            EqeField::Cqn => data
                .nested_mut(EventAuto::COMP_EVENT)
                .set(CompEvent::CQ_NUMBER, low24)
                .map(drop),
            EqeField::Qpn => data
                .nested_mut(EventAuto::QP_EVENTS)
                .set(QpEvents::QPN_RQN_SQN, low24)
                .map(drop),
            EqeField::Data(n) if n < EQE_DATA_WORDS => {
                let at = 4 * usize::from(n);
                data.as_bytes()[at..at + 4].copy_from_slice(&value.to_be_bytes());
                Ok(())
            }
            EqeField::Byte(n) if usize::from(n) < Eqe::BYTES => {
                v.as_bytes()[usize::from(n)] = value as u8;
                Ok(())
            }
            EqeField::OwnerFlipped => {
                let owner = v.get(Eqe::OWNER);
                v.set(Eqe::OWNER, owner ^ 1).map(drop)
            }
            EqeField::Data(_) | EqeField::Byte(_) => {
                log::warn!("mlx5-sim: CorruptEqe {self:?} names no EQE field; nothing changed");
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eqe_fields() {
        let mut e = [0u8; 64];
        e[1] = event::COMPLETION;
        e[0x38..0x3c].copy_from_slice(&[0xaa, 0, 0, 5]);
        EqeField::Cqn.apply(&mut e, 0x12_3456);
        assert_eq!(&e[0x38..0x3c], &[0xaa, 0x12, 0x34, 0x56]);
        e[1] = event::CQ_ERROR;
        EqeField::Cqn.apply(&mut e, 7);
        assert_eq!(&e[0x20..0x24], &[0, 0, 0, 7]);
        EqeField::Data(6).apply(&mut e, 0x0102_0304);
        assert_eq!(&e[0x38..0x3c], &[1, 2, 3, 4]);
        EqeField::OwnerFlipped.apply(&mut e, 0);
        assert_eq!(e[0x3f], 1);
        let before = e;
        EqeField::Data(7).apply(&mut e, 9);
        EqeField::Byte(64).apply(&mut e, 9);
        assert_eq!(e, before);
        EqeField::Byte(0x3e).apply(&mut e, 0x1ff);
        assert_eq!(e[0x3e], 0xff);
    }
}
