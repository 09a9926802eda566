//! Completion queue entries (PRM "Completion Queue Entry"; `mlx5-datapath-sizing.md` §4).
//!
//! [`Cqe64`] is the 64-byte CQE the device writes into a CQ ring. With 128-byte CQEs the same
//! 64 bytes sit in the second half of each slot ([`CQE128_OFFSET`]); the first half then holds
//! data scattered into the CQE. A successful CQE and an error CQE share the last 8 bytes
//! (QP number, WQE counter, signature, `op_own`) and the `srqn` word; an error CQE
//! ([`opcode::REQ_ERR`], [`opcode::RESP_ERR`]) carries [`Cqe64::VENDOR_ERR_SYND`] and
//! [`Cqe64::SYNDROME`] in bytes the success CQE uses for its timestamp, and no byte count.
//!
//! Offsets are those of the public `mlx5dv.h` structures `mlx5_cqe64` and `mlx5_err_cqe`
//! (`tests/mlx5dv.rs` checks every field against the installed header and the bits inside
//! bytes against the header's own accessors). Fields narrower than the word that holds them
//! (the QP number in `sop_drop_qpn`, the opcode nibble and owner bit of `op_own`...) are
//! separate constants overlapping their word.

use crate::layout::{declare_layout, FieldInfo, Layout};

/// Bytes of a CQE.
pub const CQE_BYTES: usize = 64;
/// Where the 64-byte CQE sits inside a 128-byte CQE slot.
pub const CQE128_OFFSET: usize = 64;
/// `op_own` of an entry the device has not written yet: opcode [`opcode::INVALID`], owner 0.
/// A CQ buffer starts with every entry set to this.
pub const INVALID_OP_OWN: u8 = 0xf0;

declare_layout! {
    /// A 64-byte CQE (`mlx5dv.h` `struct mlx5_cqe64`, error fields from `struct mlx5_err_cqe`).
    Cqe64 = "cqe64", CQE_BYTES;
    /// `wqe_id` (byte 2, BE16): the WQE of a striding receive queue.
    WQE_ID: Field("wqe_id", 8 * 2, 16);
    /// `rss_hash_result` (byte 12, BE32): the RSS hash of an Ethernet receive (reserved in
    /// `mlx5dv.h`; Linux `include/linux/mlx5/device.h` `struct mlx5_cqe64`).
    RSS_HASH_RESULT: Field("rss_hash_result", 8 * 12, 32);
    /// `rss_hash_type` (byte 16): which fields the RSS hash covered — bits 3:2 the IP
    /// destination (1 IPv4, 2 IPv6), 7:6 the L4 destination (1 TCP, 2 UDP); bits 1:0 and 5:4
    /// the sources likewise (Linux `CQE_RSS_HTYPE_IP`, `CQE_RSS_HTYPE_L4`).
    RSS_HASH_TYPE: Field("rss_hash_type", 8 * 16, 8);
    /// `ml_path` (byte 17): the destination LID path bits (low 7 bits).
    ML_PATH: Field("ml_path", 8 * 17, 8);
    /// `check_sum` (byte 20, BE16): the payload checksum of an Ethernet receive (unnamed in
    /// `mlx5dv.h`; from the fact sheet).
    CHECK_SUM: Field("check_sum", 8 * 20, 16);
    /// `slid` (byte 22, BE16): the source LID (InfiniBand).
    SLID: Field("slid", 8 * 22, 16);
    /// `flags_rqpn` (byte 24, BE32): GRH flag, SL and source QP of a receive.
    FLAGS_RQPN: Field("flags_rqpn", 8 * 24, 32);
    /// `flags_rqpn` bits 29:28: nonzero when the receive buffer starts with a GRH.
    GRH: Field("grh", 8 * 24 + 2, 2);
    /// `flags_rqpn` bits 27:24: the service level of the packet.
    SL: Field("sl", 8 * 24 + 4, 4);
    /// `flags_rqpn` bits 25:24 of a receive on an Ethernet (RoCE) port: the packet's L3
    /// header ([`roce_l3_hdr_type`]); Linux's mlx5_ib `handle_responder` reads them into
    /// `ib_wc.network_hdr_type`, and ib_core takes an IPv4 RoCE v2 MAD for RoCE v1 without them.
    ROCE_L3_HDR_TYPE: Field("roce_l3_hdr_type", 8 * 24 + 6, 2);
    /// `flags_rqpn` bits 23:0: the source QP of a UD receive.
    RQPN: Field("rqpn", 8 * 24 + 8, 24);
    /// `hds_ip_ext` (byte 28): header status bits ([`Cqe64::L2_OK`], `L3_OK`, `L4_OK`).
    HDS_IP_EXT: Field("hds_ip_ext", 8 * 28, 8);
    /// `hds_ip_ext` bit 2: the L4 checksum was good.
    L4_OK: Field("l4_ok", 8 * 28 + 5, 1);
    /// `hds_ip_ext` bit 1: the L3 checksum was good.
    L3_OK: Field("l3_ok", 8 * 28 + 6, 1);
    /// `hds_ip_ext` bit 0: the L2 header was good.
    L2_OK: Field("l2_ok", 8 * 28 + 7, 1);
    /// `l4_hdr_type_etc` (byte 29; the fact sheet's `l4_l3_hdr_type`): header types.
    L4_HDR_TYPE_ETC: Field("l4_hdr_type_etc", 8 * 29, 8);
    /// `l4_hdr_type_etc` bits 6:4: the L4 header type.
    L4_HDR_TYPE: Field("l4_hdr_type", 8 * 29 + 1, 3);
    /// `l4_hdr_type_etc` bits 3:2: the L3 header type ([`l3_hdr_type`]).
    L3_HDR_TYPE: Field("l3_hdr_type", 8 * 29 + 4, 2);
    /// `l4_hdr_type_etc` bit 0: the receive had a VLAN tag, stripped into `vlan_info` (Linux
    /// `cqe_has_vlan`).
    CV: Field("cv", 8 * 29 + 7, 1);
    /// `vlan_info` (byte 30, BE16): the stripped VLAN tag.
    VLAN_INFO: Field("vlan_info", 8 * 30, 16);
    /// `srqn_uidx` (byte 32, BE32).
    SRQN_UIDX: Field("srqn_uidx", 8 * 32, 32);
    /// `srqn_uidx` bits 23:0: the SRQ number, or with CQE version 1 the user index of the QP
    /// (or SRQ) the completion belongs to.
    SRQN: Field("srqn", 8 * 32 + 8, 24);
    /// `imm_inval_pkey` (byte 36, BE32): the immediate of a `*_IMM` receive (as the sender
    /// wrote it), the invalidated rkey of RESP_SEND_INV, or, in bits 15:0 of a UD receive
    /// without an immediate, the packet's BTH P_Key (Linux's mlx5_ib looks it up in the P_Key
    /// table for QP1's `ib_wc.pkey_index`).
    IMM_INVAL_PKEY: Field("imm_inval_pkey", 8 * 36, 32);
    /// `app` (byte 40): tag-matching application context.
    APP: Field("app", 8 * 40, 8);
    /// `app_op` (byte 41).
    APP_OP: Field("app_op", 8 * 41, 8);
    /// `app_info` (byte 42, BE16).
    APP_INFO: Field("app_info", 8 * 42, 16);
    /// `byte_cnt` (byte 44, BE32): bytes received; on a requester CQE the bytes an RDMA READ
    /// or atomic brought back.
    BYTE_CNT: Field("byte_cnt", 8 * 44, 32);
    /// `timestamp` (byte 48, BE64): completion time (success CQEs only).
    TIMESTAMP: Field("timestamp", 8 * 48, 64);
    /// `vendor_err_synd` (byte 54, error CQEs): the device-specific cause.
    VENDOR_ERR_SYND: Field("vendor_err_synd", 8 * 54, 8);
    /// `syndrome` (byte 55, error CQEs): the cause ([`syndrome`]).
    SYNDROME: Field("syndrome", 8 * 55, 8);
    /// `sop_drop_qpn` (byte 56, BE32; `s_wqe_opcode_qpn` in an error CQE).
    SOP_DROP_QPN: Field("sop_drop_qpn", 8 * 56, 32);
    /// `sop_drop_qpn` bits 31:24: on a requester CQE, the opcode of the completed send WQE.
    WQE_OPCODE: Field("wqe_opcode", 8 * 56, 8);
    /// `sop_drop_qpn` bits 23:0: the QP number.
    QPN: Field("qpn", 8 * 56 + 8, 24);
    /// `wqe_counter` (byte 60, BE16): requester: the WQEBB counter of the completed WQE;
    /// responder: the receive queue slot or the SRQ WQE index.
    WQE_COUNTER: Field("wqe_counter", 8 * 60, 16);
    /// `signature` (byte 62).
    SIGNATURE: Field("signature", 8 * 62, 8);
    /// `op_own` (byte 63): opcode, format, solicited and owner bits together.
    OP_OWN: Field("op_own", 8 * 63, 8);
    /// `op_own` bits 7:4: the CQE opcode ([`opcode`]).
    OPCODE: Field("opcode", 8 * 63, 4);
    /// `op_own` bits 3:2: the CQE format ([`format`]).
    FORMAT: Field("format", 8 * 63 + 4, 2);
    /// `op_own` bit 1: the completion was for a solicited event.
    SE: Field("se", 8 * 63 + 6, 1);
    /// `op_own` bit 0: the owner bit; the entry at consumer index `ci` of a ring of `n`
    /// entries is software's once it equals `(ci / n) & 1`.
    OWNER: Field("owner", 8 * 63 + 7, 1);
}

/// CQE opcodes ([`Cqe64::OPCODE`], `op_own >> 4`).
pub mod opcode {
    /// Requester: a send WQE completed.
    pub const REQ: u8 = 0x0;
    /// Responder: RDMA WRITE with immediate (consumed a receive WQE).
    pub const RESP_WR_IMM: u8 = 0x1;
    /// Responder: SEND.
    pub const RESP_SEND: u8 = 0x2;
    /// Responder: SEND with immediate.
    pub const RESP_SEND_IMM: u8 = 0x3;
    /// Responder: SEND with invalidate.
    pub const RESP_SEND_INV: u8 = 0x4;
    /// A CQ resize completed.
    pub const RESIZE_CQ: u8 = 0x5;
    /// Tag matching: no packet.
    pub const NO_PACKET: u8 = 0x6;
    /// Signature error.
    pub const SIG_ERR: u8 = 0xc;
    /// Requester error (error CQE).
    pub const REQ_ERR: u8 = 0xd;
    /// Responder error (error CQE).
    pub const RESP_ERR: u8 = 0xe;
    /// Not written by the device ([`super::INVALID_OP_OWN`]).
    pub const INVALID: u8 = 0xf;
}

/// CQE formats ([`Cqe64::FORMAT`]).
pub mod format {
    /// No data in the CQE.
    pub const PLAIN: u8 = 0;
    /// Up to 32 bytes of received data at the start of the CQE.
    pub const SCATTER_32: u8 = 1;
    /// Up to 64 bytes of received data in the first half of a 128-byte CQE.
    pub const SCATTER_64: u8 = 2;
    /// A block of compressed mini-CQEs.
    pub const COMPRESSED: u8 = 3;
}

/// CQE compression (`cqc.cqe_comp_en`; docs/fields.md "CQE compression"): a session is a title
/// CQE of [`format::COMPRESSED`] whose `byte_cnt` is the number of completions N, its other
/// fields common to all of them, then arrays of [`mini_cqe::PER_ARRAY`] mini CQEs at slots
/// title + 1, title + 8, title + 16, …; the session takes N slots, and only the title carries an
/// owner bit (Linux `mlx5e_decompress_cqes_start` / `_cont`, `struct mlx5_mini_cqe8`).
pub mod mini_cqe {
    /// `cqc.mini_cqe_res_format`: the RSS hash and the byte count.
    pub const FORMAT_HASH: u64 = 0;
    /// `cqc.mini_cqe_res_format`: the checksum and the byte count.
    pub const FORMAT_CSUM: u64 = 1;
    /// `cqc.mini_cqe_res_format`: the checksum, the stride index and the byte count (needs
    /// `mini_cqe_resp_stride_index`).
    pub const FORMAT_CSUM_STRIDX: u64 = 3;
    /// Bytes of a mini CQE.
    pub const BYTES: usize = 8;
    /// Mini CQEs in an array (one 64-byte CQE slot).
    pub const PER_ARRAY: usize = 8;
    /// Where the RSS hash (BE32; format HASH) is in a mini CQE.
    pub const RX_HASH_AT: usize = 0;
    /// Where the checksum (BE16; formats CSUM, CSUM_STRIDX) is in a mini CQE.
    pub const CHECKSUM_AT: usize = 0;
    /// Where the stride index (BE16; format CSUM_STRIDX) is in a mini CQE.
    pub const STRIDX_AT: usize = 2;
    /// Where the byte count (BE32) is in a mini CQE.
    pub const BYTE_CNT_AT: usize = 4;
}

/// Error CQE syndromes ([`Cqe64::SYNDROME`]).
pub mod syndrome {
    /// Local length error.
    pub const LOCAL_LENGTH_ERR: u8 = 0x01;
    /// Local QP operation error.
    pub const LOCAL_QP_OP_ERR: u8 = 0x02;
    /// Local protection error.
    pub const LOCAL_PROT_ERR: u8 = 0x04;
    /// Work request flushed (the QP is in error).
    pub const WR_FLUSH_ERR: u8 = 0x05;
    /// Memory window bind error.
    pub const MW_BIND_ERR: u8 = 0x06;
    /// Bad response.
    pub const BAD_RESP_ERR: u8 = 0x10;
    /// Local access error.
    pub const LOCAL_ACCESS_ERR: u8 = 0x11;
    /// Remote invalid request.
    pub const REMOTE_INVAL_REQ_ERR: u8 = 0x12;
    /// Remote access error.
    pub const REMOTE_ACCESS_ERR: u8 = 0x13;
    /// Remote operation error.
    pub const REMOTE_OP_ERR: u8 = 0x14;
    /// Transport retries exceeded.
    pub const TRANSPORT_RETRY_EXC_ERR: u8 = 0x15;
    /// RNR retries exceeded.
    pub const RNR_RETRY_EXC_ERR: u8 = 0x16;
    /// Remote aborted.
    pub const REMOTE_ABORTED_ERR: u8 = 0x22;
}

/// `l4_hdr_type` values ([`Cqe64::L4_HDR_TYPE`]; Linux `CQE_L4_HDR_TYPE_*`).
pub mod l4_hdr_type {
    /// Not TCP or UDP (or a fragment).
    pub const NONE: u8 = 0x0;
    /// TCP without an ACK.
    pub const TCP_NO_ACK: u8 = 0x1;
    /// UDP.
    pub const UDP: u8 = 0x2;
    /// TCP with an ACK and no data.
    pub const TCP_ACK_NO_DATA: u8 = 0x3;
    /// TCP with an ACK and data.
    pub const TCP_ACK_AND_DATA: u8 = 0x4;
}

/// The RoCE L3 header types of `flags_rqpn` bits 25:24 ([`Cqe64::ROCE_L3_HDR_TYPE`]).
pub mod roce_l3_hdr_type {
    /// A GRH: RoCE v1 (Linux `MLX5_CQE_ROCE_L3_HEADER_TYPE_GRH`).
    pub const GRH: u8 = 0x0;
    /// IPv6: RoCE v2 over IPv6 (`MLX5_CQE_ROCE_L3_HEADER_TYPE_IPV6`).
    pub const IPV6: u8 = 0x1;
    /// IPv4: RoCE v2 over IPv4 (`MLX5_CQE_ROCE_L3_HEADER_TYPE_IPV4`).
    pub const IPV4: u8 = 0x2;
}

/// The L3 header types of `l4_hdr_type_etc` bits 3:2 ([`Cqe64::L3_HDR_TYPE`]).
pub mod l3_hdr_type {
    /// No L3 header recognised.
    pub const NONE: u8 = 0x0;
    /// IPv6.
    pub const IPV6: u8 = 0x1;
    /// IPv4.
    pub const IPV4: u8 = 0x2;
}

/// Every CQE layout: `(name, size in bytes, fields)`.
pub const ALL: &[(&str, usize, &[FieldInfo])] = &[(Cqe64::NAME, Cqe64::BYTES, Cqe64::FIELDS)];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{View, ViewMut};

    #[test]
    fn op_own_nibbles() {
        let mut b = [0u8; CQE_BYTES];
        b[63] = INVALID_OP_OWN;
        let v = View::<Cqe64>::new(&b).unwrap();
        assert_eq!(v.get(Cqe64::OPCODE), u64::from(opcode::INVALID));
        assert_eq!(v.get(Cqe64::OWNER), 0);
        let mut w = ViewMut::<Cqe64>::new(&mut b).unwrap();
        w.set(Cqe64::OPCODE, u64::from(opcode::REQ_ERR)).unwrap();
        w.set(Cqe64::SE, 1).unwrap().set(Cqe64::OWNER, 1).unwrap();
        assert_eq!(b[63], 0xd3);
    }
}
