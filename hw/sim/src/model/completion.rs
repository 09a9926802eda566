//! The fields of one completion queue entry as the device makes it ([`Cqe`]), and its 64-byte
//! image (the [`Cqe64`] layout): what the data path fills in and [`crate::events::cqe`] writes,
//! plainly or in a compressed session ([`crate::events::zip`]).

use mlx5_ifc::cqe::{Cqe64, CQE_BYTES};
use mlx5_ifc::{LayoutError, ViewMut};

use mlx5_ifc::cqe::opcode as op;

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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
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
    pub(crate) fn image(&self, owner: u8, timestamp: u64) -> [u8; CQE_BYTES] {
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

    pub(crate) fn is_error(&self) -> bool {
        self.opcode == op::REQ_ERR || self.opcode == op::RESP_ERR
    }
}

/// A CQE compression session a CQ has open: the receive completions that will be written as
/// one title and its mini CQEs, and whether their RQ is a striding one.
#[derive(Debug, Clone, Default)]
pub(crate) struct Session {
    pub(crate) cqes: Vec<Cqe>,
    pub(crate) striding: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use mlx5_ifc::cqe::syndrome;

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
}
