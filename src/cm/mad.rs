//! The connection manager's MADs (IBTA vol. 1 ch. 12 "Communication Management"; the 256-byte
//! management datagram of ch. 13.4): the common MAD header and the fields of REQ, MRA, REJ,
//! REP, RTU, DREQ and DREP, each as (MAD byte, first bit counted from that byte's most
//! significant bit, width), big-endian as on the wire. Offsets are the ones
//! docs/rdma-cm-facts.md §2 tabulates (Linux's `ibta_vol1_c12.h` gives the same fields relative
//! to MAD byte 24); the tests below build each message from those tables byte by byte.

/// Bytes of a MAD.
pub const MAD_LEN: usize = 256;
/// `BaseVersion` of every MAD.
pub const BASE_VERSION: u8 = 1;
/// `MgmtClass` of the communication manager.
pub const CLASS_CM: u8 = 0x07;
/// `ClassVersion` of the CM (IBTA 1.2; the only one Linux's CM agent registers).
pub const CM_CLASS_VERSION: u8 = 2;
/// `Method` of every CM message.
pub const METHOD_SEND: u8 = 0x03;

/// `AttributeID`s of the CM messages.
pub mod attr {
    /// Connect request.
    pub const REQ: u16 = 0x0010;
    /// Message receipt acknowledgement.
    pub const MRA: u16 = 0x0011;
    /// Reject.
    pub const REJ: u16 = 0x0012;
    /// Connect reply.
    pub const REP: u16 = 0x0013;
    /// Ready to use.
    pub const RTU: u16 = 0x0014;
    /// Disconnect request.
    pub const DREQ: u16 = 0x0015;
    /// Disconnect reply.
    pub const DREP: u16 = 0x0016;
}

/// A field of a MAD: byte offset, first bit from that byte's MSB, width in bits (≤ 64).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct F(pub usize, pub u32, pub u32);

/// The common MAD header (IBTA 13.4.3), 24 bytes.
pub mod hdr {
    use super::F;
    /// BaseVersion.
    pub const BASE_VERSION: F = F(0, 0, 8);
    /// MgmtClass.
    pub const MGMT_CLASS: F = F(1, 0, 8);
    /// ClassVersion.
    pub const CLASS_VERSION: F = F(2, 0, 8);
    /// Method (R bit included).
    pub const METHOD: F = F(3, 0, 8);
    /// Status.
    pub const STATUS: F = F(4, 0, 16);
    /// TransactionID.
    pub const TID: F = F(8, 0, 64);
    /// AttributeID.
    pub const ATTR_ID: F = F(16, 0, 16);
    /// AttributeModifier.
    pub const ATTR_MOD: F = F(20, 0, 32);
}

/// Local and remote communication IDs: the first two words of every CM message.
pub mod ids {
    use super::F;
    /// The sender's communication ID.
    pub const LOCAL_COMM_ID: F = F(24, 0, 32);
    /// The receiver's communication ID (REQ: reserved).
    pub const REMOTE_COMM_ID: F = F(28, 0, 32);
}

/// ConnectRequest (REQ) fields.
pub mod req {
    pub use super::ids::LOCAL_COMM_ID;
    use super::F;
    /// ServiceID: rdma_cm's port space in bits 31:16, the port in 15:0.
    pub const SERVICE_ID: F = F(32, 0, 64);
    /// Local CA GUID.
    pub const LOCAL_CA_GUID: F = F(40, 0, 64);
    /// Local Q_Key (UD/RD only).
    pub const LOCAL_QKEY: F = F(52, 0, 32);
    /// Local QPN.
    pub const LOCAL_QPN: F = F(56, 0, 24);
    /// Responder resources: RDMA READs/atomics the sender takes in at once.
    pub const RESPONDER_RESOURCES: F = F(59, 0, 8);
    /// Local EECN.
    pub const LOCAL_EECN: F = F(60, 0, 24);
    /// Initiator depth: RDMA READs/atomics the sender keeps outstanding.
    pub const INITIATOR_DEPTH: F = F(63, 0, 8);
    /// Remote EECN.
    pub const REMOTE_EECN: F = F(64, 0, 24);
    /// Remote CM response timeout (4.096 µs × 2^t).
    pub const REMOTE_CM_RESPONSE_TIMEOUT: F = F(67, 0, 5);
    /// Transport service type (0 RC, 1 UC, 3 XRC).
    pub const TRANSPORT: F = F(67, 5, 2);
    /// End-to-end flow control.
    pub const FLOW_CONTROL: F = F(67, 7, 1);
    /// Starting PSN: the PSN the sender expects to receive first.
    pub const STARTING_PSN: F = F(68, 0, 24);
    /// Local CM response timeout.
    pub const LOCAL_CM_RESPONSE_TIMEOUT: F = F(71, 0, 5);
    /// Retry count.
    pub const RETRY_COUNT: F = F(71, 5, 3);
    /// Partition key.
    pub const PKEY: F = F(72, 0, 16);
    /// Path MTU (IB enum: 1 = 256 … 5 = 4096).
    pub const PATH_MTU: F = F(74, 0, 4);
    /// RDC exists.
    pub const RDC_EXISTS: F = F(74, 4, 1);
    /// RNR retry count.
    pub const RNR_RETRY: F = F(74, 5, 3);
    /// Max CM retries.
    pub const MAX_CM_RETRIES: F = F(75, 0, 4);
    /// The sender's QP receives from an SRQ.
    pub const SRQ: F = F(75, 4, 1);
    /// Extended transport type.
    pub const EXT_TRANSPORT: F = F(75, 5, 3);
    /// Primary local port LID (0xFFFF on routed RoCE).
    pub const PRIMARY_LOCAL_LID: F = F(76, 0, 16);
    /// Primary remote port LID.
    pub const PRIMARY_REMOTE_LID: F = F(78, 0, 16);
    /// Primary local port GID (16 bytes).
    pub const PRIMARY_LOCAL_GID: usize = 80;
    /// Primary remote port GID (16 bytes).
    pub const PRIMARY_REMOTE_GID: usize = 96;
    /// Primary flow label.
    pub const FLOW_LABEL: F = F(112, 0, 20);
    /// Primary packet rate.
    pub const PACKET_RATE: F = F(115, 2, 6);
    /// Primary traffic class.
    pub const TRAFFIC_CLASS: F = F(116, 0, 8);
    /// Primary hop limit.
    pub const HOP_LIMIT: F = F(117, 0, 8);
    /// Primary SL.
    pub const SL: F = F(118, 0, 4);
    /// Primary subnet local.
    pub const SUBNET_LOCAL: F = F(118, 4, 1);
    /// Primary local ACK timeout.
    pub const LOCAL_ACK_TIMEOUT: F = F(119, 0, 5);
    /// Alternate local LID (non-zero means an alternate path).
    pub const ALT_LOCAL_LID: F = F(120, 0, 16);
    /// Private data (92 bytes).
    pub const PRIVATE: usize = 164;
}

/// MessageReceiptAcknowledgement (MRA) fields.
pub mod mra {
    pub use super::ids::{LOCAL_COMM_ID, REMOTE_COMM_ID};
    use super::F;
    /// Which message is acknowledged (0 REQ, 1 REP, 2 other).
    pub const MESSAGE_MRAED: F = F(32, 0, 2);
    /// Service timeout (4.096 µs × 2^t).
    pub const SERVICE_TIMEOUT: F = F(33, 0, 5);
}

/// ConnectReject (REJ) fields.
pub mod rej {
    pub use super::ids::{LOCAL_COMM_ID, REMOTE_COMM_ID};
    use super::F;
    /// Which message is rejected (0 REQ, 1 REP, 2 other).
    pub const MESSAGE_REJECTED: F = F(32, 0, 2);
    /// Bytes of ARI used.
    pub const REJECT_INFO_LEN: F = F(33, 0, 7);
    /// Reason.
    pub const REASON: F = F(34, 0, 16);
    /// Additional rejection information (72 bytes).
    pub const ARI: usize = 36;
}

/// ConnectReply (REP) fields.
pub mod rep {
    pub use super::ids::{LOCAL_COMM_ID, REMOTE_COMM_ID};
    use super::F;
    /// Local Q_Key.
    pub const LOCAL_QKEY: F = F(32, 0, 32);
    /// Local QPN.
    pub const LOCAL_QPN: F = F(36, 0, 24);
    /// Local EECN.
    pub const LOCAL_EECN: F = F(40, 0, 24);
    /// Starting PSN: the PSN the sender expects to receive first.
    pub const STARTING_PSN: F = F(44, 0, 24);
    /// Responder resources.
    pub const RESPONDER_RESOURCES: F = F(48, 0, 8);
    /// Initiator depth.
    pub const INITIATOR_DEPTH: F = F(49, 0, 8);
    /// Target ACK delay.
    pub const TARGET_ACK_DELAY: F = F(50, 0, 5);
    /// Failover accepted.
    pub const FAILOVER: F = F(50, 5, 2);
    /// End-to-end flow control.
    pub const FLOW_CONTROL: F = F(50, 7, 1);
    /// RNR retry count.
    pub const RNR_RETRY: F = F(51, 0, 3);
    /// SRQ.
    pub const SRQ: F = F(51, 3, 1);
    /// Local CA GUID.
    pub const LOCAL_CA_GUID: F = F(52, 0, 64);
    /// Private data (196 bytes).
    pub const PRIVATE: usize = 60;
}

/// DisconnectRequest (DREQ) fields.
pub mod dreq {
    pub use super::ids::{LOCAL_COMM_ID, REMOTE_COMM_ID};
    use super::F;
    /// The receiver's QPN.
    pub const REMOTE_QPN: F = F(32, 0, 24);
}

/// Message kinds named by MRA's and REJ's 2-bit field.
pub mod msg {
    /// The REQ.
    pub const REQ: u64 = 0;
    /// The REP.
    pub const REP: u64 = 1;
    /// Any other.
    pub const OTHER: u64 = 2;
}

/// REJ reasons (IBTA table 112) this CM sends or acts on.
pub mod reason {
    /// No QP available.
    pub const NO_QP: u16 = 1;
    /// No resources.
    pub const NO_RESOURCES: u16 = 3;
    /// Timeout (ARI: the sender's CA GUID).
    pub const TIMEOUT: u16 = 4;
    /// Invalid ServiceID: nobody listens.
    pub const INVALID_SERVICE_ID: u16 = 8;
    /// Invalid transport service type.
    pub const INVALID_TRANSPORT: u16 = 9;
    /// Stale connection.
    pub const STALE_CONN: u16 = 10;
    /// Invalid GID.
    pub const INVALID_GID: u16 = 12;
    /// Consumer defined.
    pub const CONSUMER: u16 = 28;
}

/// One MAD's bytes, read and written field by field.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Mad(pub [u8; MAD_LEN]);

impl core::fmt::Debug for Mad {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "Mad {{ class {:#x}, method {:#x}, attr {:#06x}, tid {:#x} }}",
            self.get(hdr::MGMT_CLASS),
            self.get(hdr::METHOD),
            self.get(hdr::ATTR_ID),
            self.get(hdr::TID)
        )
    }
}

impl Default for Mad {
    fn default() -> Self {
        Mad([0; MAD_LEN])
    }
}

impl Mad {
    /// A CM message of attribute `attr_id` with transaction `tid`: the header Linux's CM
    /// writes (base version 1, class CM, class version 2, method SEND), the rest zero.
    pub fn cm(attr_id: u16, tid: u64) -> Self {
        let mut m = Mad::default();
        m.set(hdr::BASE_VERSION, u64::from(BASE_VERSION));
        m.set(hdr::MGMT_CLASS, u64::from(CLASS_CM));
        m.set(hdr::CLASS_VERSION, u64::from(CM_CLASS_VERSION));
        m.set(hdr::METHOD, u64::from(METHOD_SEND));
        m.set(hdr::TID, tid);
        m.set(hdr::ATTR_ID, u64::from(attr_id));
        m
    }

    /// A field's value (0 for a field that does not fit in a MAD: at most 64 bits, inside the
    /// 256 bytes).
    pub fn get(&self, f: F) -> u64 {
        let F(byte, bit, width) = f;
        let n = (bit + width).div_ceil(8) as usize;
        if !valid(f) {
            return 0;
        }
        let mut v: u128 = 0;
        for b in &self.0[byte..byte + n] {
            v = v << 8 | u128::from(*b);
        }
        let shift = n as u32 * 8 - bit - width;
        ((v >> shift) & mask(width)) as u64
    }

    /// Sets a field (bits of `v` above its width are dropped; a field that does not fit in a
    /// MAD is ignored).
    pub fn set(&mut self, f: F, v: u64) {
        let F(byte, bit, width) = f;
        let n = (bit + width).div_ceil(8) as usize;
        if !valid(f) {
            return;
        }
        let shift = n as u32 * 8 - bit - width;
        let m = mask(width) << shift;
        let mut cur: u128 = 0;
        for b in &self.0[byte..byte + n] {
            cur = cur << 8 | u128::from(*b);
        }
        cur = (cur & !m) | ((u128::from(v) << shift) & m);
        for (i, b) in self.0[byte..byte + n].iter_mut().enumerate() {
            *b = (cur >> ((n - 1 - i) * 8)) as u8;
        }
    }

    /// 16 bytes at `at` (a GID).
    pub fn gid(&self, at: usize) -> [u8; 16] {
        let mut g = [0; 16];
        g.copy_from_slice(&self.0[at..at + 16]);
        g
    }

    /// Whether this is a CM message Linux's CM agent would take (base version 1, class CM,
    /// class version 2, method SEND).
    pub fn is_cm(&self) -> bool {
        self.get(hdr::BASE_VERSION) == u64::from(BASE_VERSION)
            && self.get(hdr::MGMT_CLASS) == u64::from(CLASS_CM)
            && self.get(hdr::CLASS_VERSION) == u64::from(CM_CLASS_VERSION)
            && self.get(hdr::METHOD) == u64::from(METHOD_SEND)
    }

    /// The attribute ID.
    pub fn attr_id(&self) -> u16 {
        self.get(hdr::ATTR_ID) as u16
    }

    /// The transaction ID.
    pub fn tid(&self) -> u64 {
        self.get(hdr::TID)
    }
}

/// Whether a field fits: 1..=64 bits starting in its byte's 8 bits, inside the MAD.
fn valid(F(byte, bit, width): F) -> bool {
    (1..=64).contains(&width) && bit < 8 && byte + (bit + width).div_ceil(8) as usize <= MAD_LEN
}

fn mask(width: u32) -> u128 {
    (1u128 << width) - 1
}

/// rdma_cm's header at the start of a REQ's private data (36 bytes; docs/rdma-cm-facts.md
/// §3.7): version 0, IP version in the high nibble, the active side's source port, then the
/// source and destination addresses (IPv4 in the last 4 bytes of each 16).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CmaHdr {
    /// The active side's port.
    pub src_port: u16,
    /// The active side's IPv4 address.
    pub src_ip: [u8; 4],
    /// The passive side's IPv4 address.
    pub dst_ip: [u8; 4],
}

/// Bytes of [`CmaHdr`].
pub const CMA_HDR_LEN: usize = 36;

impl CmaHdr {
    /// The 36 bytes.
    pub fn to_bytes(&self) -> [u8; CMA_HDR_LEN] {
        let mut b = [0u8; CMA_HDR_LEN];
        b[1] = 0x40;
        b[2..4].copy_from_slice(&self.src_port.to_be_bytes());
        b[16..20].copy_from_slice(&self.src_ip);
        b[32..36].copy_from_slice(&self.dst_ip);
        b
    }

    /// Parses an IPv4 header; `None` for another version (rdma_cm's `cma_save_ip_info`
    /// refuses anything but version 0).
    pub fn parse(b: &[u8]) -> Option<Self> {
        if b.len() < CMA_HDR_LEN || b[0] != 0 || b[1] >> 4 != 4 {
            return None;
        }
        let ip = |at: usize| [b[at], b[at + 1], b[at + 2], b[at + 3]];
        Some(CmaHdr {
            src_port: u16::from_be_bytes([b[2], b[3]]),
            src_ip: ip(16),
            dst_ip: ip(32),
        })
    }
}

/// rdma_cm's ServiceID for a TCP-port-space port (`RDMA_PS_TCP` 0x0106).
pub const fn service_id(port: u16) -> u64 {
    0x0106_0000 | port as u64
}

/// `4.096 µs × 2^t` in milliseconds as Linux's CM rounds it (`1 << max(t − 8, 0)`).
pub const fn timeout_ms(t: u8) -> u64 {
    // The fields are 5 bits: at most 2^23 ms.
    1u64 << (if t > 31 { 31 } else { t }).saturating_sub(8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_land_where_the_tables_put_them() {
        let mut m = Mad::cm(attr::REQ, 0x0000_0001_2345_6789);
        // Header: 01 07 02 03, TID at 8, attribute at 16.
        assert_eq!(&m.0[..4], &[1, 7, 2, 3]);
        assert_eq!(&m.0[8..16], &[0, 0, 0, 1, 0x23, 0x45, 0x67, 0x89]);
        assert_eq!(&m.0[16..18], &[0x00, 0x10]);
        m.set(req::LOCAL_COMM_ID, 0xdead_beef);
        m.set(req::SERVICE_ID, service_id(7174));
        m.set(req::LOCAL_QPN, 0x12_3456);
        m.set(req::RESPONDER_RESOURCES, 1);
        m.set(req::INITIATOR_DEPTH, 1);
        m.set(req::REMOTE_CM_RESPONSE_TIMEOUT, 20);
        m.set(req::TRANSPORT, 0);
        m.set(req::FLOW_CONTROL, 1);
        m.set(req::STARTING_PSN, 0xab_cdef);
        m.set(req::LOCAL_CM_RESPONSE_TIMEOUT, 20);
        m.set(req::RETRY_COUNT, 7);
        m.set(req::PKEY, mlx5_ifc::consts::roce::DEFAULT_PKEY.into());
        m.set(req::PATH_MTU, 3);
        m.set(req::RNR_RETRY, 7);
        m.set(req::MAX_CM_RETRIES, 15);
        m.set(req::FLOW_LABEL, 0xf_1234);
        m.set(req::PACKET_RATE, 0x3f);
        m.set(req::LOCAL_ACK_TIMEOUT, 18);
        m.set(req::SUBNET_LOCAL, 1);
        assert_eq!(&m.0[24..28], &[0xde, 0xad, 0xbe, 0xef]);
        // rping's ServiceID: 0x0000000001061C06.
        assert_eq!(&m.0[32..40], &[0, 0, 0, 0, 0x01, 0x06, 0x1c, 0x06]);
        assert_eq!(&m.0[56..60], &[0x12, 0x34, 0x56, 1]);
        assert_eq!(m.0[63], 1);
        // 20 << 3 | RC << 1 | flow control.
        assert_eq!(m.0[67], 20 << 3 | 1);
        assert_eq!(&m.0[68..71], &[0xab, 0xcd, 0xef]);
        assert_eq!(m.0[71], 20 << 3 | 7);
        assert_eq!(&m.0[72..74], &[0xff, 0xff]);
        assert_eq!(m.0[74], 3 << 4 | 7);
        assert_eq!(m.0[75], 15 << 4);
        // Flow label in the top 20 bits of the word at 112, rate in the low 6 bits of 115.
        assert_eq!(&m.0[112..116], &[0xf1, 0x23, 0x40, 0x3f]);
        assert_eq!(m.0[118], 1 << 3);
        assert_eq!(m.0[119], 18 << 3);
        assert_eq!(m.get(req::STARTING_PSN), 0xab_cdef);
        assert_eq!(m.get(req::FLOW_LABEL), 0xf_1234);
        assert_eq!(m.get(req::PACKET_RATE), 0x3f);
        assert_eq!(m.get(req::RETRY_COUNT), 7);
        assert!(m.is_cm());
    }

    #[test]
    fn rep_rej_mra_dreq_fields() {
        let mut m = Mad::cm(attr::REP, 1);
        m.set(rep::REMOTE_COMM_ID, 0x0102_0304);
        m.set(rep::LOCAL_QPN, 0x11);
        m.set(rep::STARTING_PSN, 0x22);
        m.set(rep::RESPONDER_RESOURCES, 3);
        m.set(rep::INITIATOR_DEPTH, 4);
        m.set(rep::TARGET_ACK_DELAY, 16);
        m.set(rep::RNR_RETRY, 7);
        m.set(rep::LOCAL_CA_GUID, 0x0011_2233_4455_6677);
        assert_eq!(&m.0[28..32], &[1, 2, 3, 4]);
        assert_eq!(&m.0[36..40], &[0, 0, 0x11, 0]);
        assert_eq!(&m.0[44..47], &[0, 0, 0x22]);
        assert_eq!(&m.0[48..52], &[3, 4, 16 << 3, 7 << 5]);
        assert_eq!(&m.0[52..60], &[0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77]);
        let mut r = Mad::cm(attr::REJ, 1);
        r.set(rej::MESSAGE_REJECTED, msg::REP);
        r.set(rej::REJECT_INFO_LEN, 8);
        r.set(rej::REASON, u64::from(reason::CONSUMER));
        assert_eq!(&r.0[32..36], &[1 << 6, 8 << 1, 0, 28]);
        let mut a = Mad::cm(attr::MRA, 1);
        a.set(mra::MESSAGE_MRAED, msg::REQ);
        a.set(mra::SERVICE_TIMEOUT, 24);
        assert_eq!(&a.0[32..34], &[0, 24 << 3]);
        let mut d = Mad::cm(attr::DREQ, 1);
        d.set(dreq::REMOTE_QPN, 0xab_cdef);
        assert_eq!(&d.0[32..36], &[0xab, 0xcd, 0xef, 0]);
    }

    #[test]
    fn cma_header_round_trip() {
        let h = CmaHdr {
            src_port: 0x9abc,
            src_ip: [10, 0, 0, 1],
            dst_ip: [10, 0, 0, 2],
        };
        let b = h.to_bytes();
        assert_eq!(&b[..4], &[0, 0x40, 0x9a, 0xbc]);
        assert_eq!(&b[16..20], &[10, 0, 0, 1]);
        assert_eq!(&b[32..36], &[10, 0, 0, 2]);
        assert_eq!(b.iter().filter(|&&x| x != 0).count(), 7);
        assert_eq!(CmaHdr::parse(&b), Some(h));
        let mut v6 = b;
        v6[1] = 0x60;
        assert_eq!(CmaHdr::parse(&v6), None);
        assert_eq!(timeout_ms(20), 4096);
        assert_eq!(timeout_ms(3), 1);
        assert_eq!(timeout_ms(255), 1 << 23);
        // A field outside the MAD reads 0 and is not written.
        let mut m = Mad::default();
        m.set(F(250, 0, 64), u64::MAX);
        assert_eq!(m.get(F(250, 0, 64)), 0);
        assert_eq!(m, Mad::default());
    }
}
