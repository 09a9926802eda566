//! The queue entry fields a fault can overwrite: CQE fields ([`CqeField`]) and EQE fields
//! ([`EqeField`]).

use mlx5_ifc::event;

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
    /// Overwrites this field of the 64-byte CQE image `cqe` with `value`.
    pub(crate) fn apply(self, cqe: &mut [u8; 64], value: u32) {
        match self {
            CqeField::Qpn => cqe[57..60].copy_from_slice(&value.to_be_bytes()[1..]),
            CqeField::WqeCounter => cqe[60..62].copy_from_slice(&(value as u16).to_be_bytes()),
            CqeField::ByteCnt => cqe[44..48].copy_from_slice(&value.to_be_bytes()),
            CqeField::Opcode => cqe[63] = (cqe[63] & 0x0f) | ((value as u8 & 0xf) << 4),
        }
    }
}

/// Bytes of event data in an EQE (0x20..0x3c): seven big-endian 32-bit words.
pub const EQE_DATA_WORDS: u8 = 7;

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
        let low24 = |eqe: &mut [u8; 64], at: usize| {
            eqe[at + 1..at + 4].copy_from_slice(&value.to_be_bytes()[1..]);
        };
        match self {
            EqeField::EventType => eqe[1] = value as u8,
            EqeField::SubType => eqe[3] = value as u8,
            EqeField::Cqn if eqe[1] == event::CQ_ERROR => low24(eqe, 0x20),
            EqeField::Cqn | EqeField::Qpn => low24(eqe, 0x38),
            EqeField::Data(n) if n < EQE_DATA_WORDS => {
                let at = 0x20 + 4 * usize::from(n);
                eqe[at..at + 4].copy_from_slice(&value.to_be_bytes());
            }
            EqeField::Byte(n) if n < 64 => eqe[usize::from(n)] = value as u8,
            EqeField::OwnerFlipped => eqe[0x3f] ^= 1,
            EqeField::Data(_) | EqeField::Byte(_) => {
                log::warn!("mlx5-sim: CorruptEqe {self:?} names no EQE field; nothing changed");
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
