//! Work queue entry segments (PRM "Send WQE", "Receive WQE"; `mlx5-datapath-sizing.md` §1, §2).
//!
//! A send WQE is a chain of 16-byte units (DS) in a ring of 64-byte basic blocks (WQEBBs): a
//! [`CtrlSeg`] first, then by operation a [`DatagramSeg`] (UD, 48 bytes), a [`RaddrSeg`] (RDMA
//! WRITE / READ / atomics; after an [`XrcSeg`] on an XRC QP), an [`AtomicSeg`], and [`DataSeg`]s or one inline segment (an
//! [`InlineSeg`] header, then the bytes, padded to 16). A receive WQE of a regular receive
//! queue is data segments only; an SRQ WQE starts with a [`SrqNextSeg`]. A data segment of
//! length 0 and lkey [`INVALID_LKEY`] ends a receive scatter list.
//!
//! Offsets are those of the public `mlx5dv.h` structures (`mlx5_wqe_ctrl_seg`,
//! `mlx5_wqe_raddr_seg`, `mlx5_wqe_atomic_seg`, `mlx5_wqe_data_seg`, `mlx5_wqe_inl_data_seg`,
//! `mlx5_wqe_datagram_seg` / `mlx5_wqe_av`, `mlx5_wqe_srq_next_seg`, `mlx5_wqe_eth_seg`);
//! `tests/mlx5dv.rs` checks every field against the installed header, and the fields packed
//! inside a word against segments the header's own `mlx5dv_set_*_seg` helpers fill.

use crate::layout::{declare_layout, FieldInfo, Layout};

/// Bytes of a send WQE basic block (WQEBB).
pub const WQEBB: usize = 64;
/// Bytes of a WQE unit (DS, an octoword).
pub const DS: usize = 16;
/// The most DS units a control segment can encode (its DS field has 6 bits).
pub const MAX_DS: usize = 63;
/// The flag in an inline segment's `byte_count` that marks it inline.
pub const INLINE_SEG: u32 = 0x8000_0000;
/// The flag in a datagram segment's `dqp_dct` that marks an extended UD address vector.
pub const EXTENDED_UD_AV: u32 = 0x8000_0000;
/// The lkey that, with a zero byte count, ends a receive scatter list.
pub const INVALID_LKEY: u32 = 0x100;

declare_layout! {
    /// The control segment every send WQE starts with (`mlx5dv.h` `struct mlx5_wqe_ctrl_seg`).
    CtrlSeg = "wqe_ctrl_seg", 16;
    /// `opmod_idx_opcode` (byte 0, BE32).
    OPMOD_IDX_OPCODE: Field("opmod_idx_opcode", 0, 32);
    /// `opmod_idx_opcode` bits 31:24: the opcode modifier.
    OPMOD: Field("opmod", 0, 8);
    /// `opmod_idx_opcode` bits 23:8: the WQE index, the producer's WQEBB counter (mod 2^16).
    WQE_INDEX: Field("wqe_index", 8, 16);
    /// `opmod_idx_opcode` bits 7:0: the send opcode ([`opcode`]).
    OPCODE: Field("opcode", 24, 8);
    /// `qpn_ds` (byte 4, BE32).
    QPN_DS: Field("qpn_ds", 8 * 4, 32);
    /// `qpn_ds` bits 31:8: the QP (or SQ) number.
    QPN: Field("qpn", 8 * 4, 24);
    /// `qpn_ds` bits 5:0: the WQE's size in 16-byte units, this segment included.
    DS: Field("ds", 8 * 4 + 26, 6);
    /// `signature` (byte 8): the WQE signature (when WQ signatures are on).
    SIGNATURE: Field("signature", 8 * 8, 8);
    /// `dci_stream_channel_id` (byte 9, BE16); 0 for RC, UC and UD.
    DCI_STREAM_CHANNEL_ID: Field("dci_stream_channel_id", 8 * 9, 16);
    /// `fm_ce_se` (byte 11): fence mode, completion mode and solicited bit ([`fm_ce_se`]).
    FM_CE_SE: Field("fm_ce_se", 8 * 11, 8);
    /// `fm_ce_se` bits 7:5: the fence mode ([`fm`]).
    FM: Field("fm", 8 * 11, 3);
    /// `fm_ce_se` bits 3:2: the completion mode ([`ce`]).
    CE: Field("ce", 8 * 11 + 4, 2);
    /// `fm_ce_se` bit 1: solicited event.
    SE: Field("se", 8 * 11 + 6, 1);
    /// `imm` (byte 12, BE32): the immediate (SEND_IMM, RDMA_WRITE_IMM: as given), the rkey
    /// to invalidate (SEND_INVAL) or the mkey (UMR).
    IMM: Field("imm", 8 * 12, 32);
}

declare_layout! {
    /// The remote address segment (`mlx5dv.h` `struct mlx5_wqe_raddr_seg`).
    RaddrSeg = "wqe_raddr_seg", 16;
    /// `raddr` (byte 0, BE64): the remote virtual address.
    RADDR: Field("raddr", 0, 64);
    /// `rkey` (byte 8, BE32): the remote key.
    RKEY: Field("rkey", 8 * 8, 32);
}

declare_layout! {
    /// The atomic segment (`mlx5dv.h` `struct mlx5_wqe_atomic_seg`): compare-and-swap puts the
    /// new value in `swap_add`, fetch-and-add the addend.
    AtomicSeg = "wqe_atomic_seg", 16;
    /// `swap_add` (byte 0, BE64).
    SWAP_ADD: Field("swap_add", 0, 64);
    /// `compare` (byte 8, BE64).
    COMPARE: Field("compare", 8 * 8, 64);
}

declare_layout! {
    /// A data (pointer) segment (`mlx5dv.h` `struct mlx5_wqe_data_seg`).
    DataSeg = "wqe_data_seg", 16;
    /// `byte_count` (byte 0, BE32).
    BYTE_COUNT: Field("byte_count", 0, 32);
    /// `lkey` (byte 4, BE32).
    LKEY: Field("lkey", 8 * 4, 32);
    /// `addr` (byte 8, BE64).
    ADDR: Field("addr", 8 * 8, 64);
}

declare_layout! {
    /// The 4-byte header of an inline data segment (`mlx5dv.h` `struct mlx5_wqe_inl_data_seg`);
    /// the data follows it, and the segment is padded to a multiple of 16 bytes.
    InlineSeg = "wqe_inl_data_seg", 4;
    /// `byte_count` (byte 0, BE32): [`INLINE_SEG`] | the length.
    BYTE_COUNT: Field("byte_count", 0, 32);
    /// `byte_count` bit 31: set in every inline segment ([`INLINE_SEG`]).
    INLINE: Field("inline", 0, 1);
    /// `byte_count` bits 30:0: the length of the inline data.
    LENGTH: Field("length", 1, 31);
}

declare_layout! {
    /// The datagram segment of a UD (or DC) send WQE: the 48-byte address vector
    /// (`mlx5dv.h` `struct mlx5_wqe_datagram_seg`, which holds a `struct mlx5_wqe_av`).
    DatagramSeg = "wqe_datagram_seg", 48;
    /// `key.dc_key` (byte 0, BE64): the DC access key (DC only; overlaps `qkey`).
    DC_KEY: Field("dc_key", 0, 64);
    /// `key.qkey.qkey` (byte 0, BE32): the Q_Key (UD).
    QKEY: Field("qkey", 0, 32);
    /// `dqp_dct` (byte 8, BE32).
    DQP_DCT: Field("dqp_dct", 8 * 8, 32);
    /// `dqp_dct` bit 31: extended address vector ([`EXTENDED_UD_AV`]).
    EXT: Field("ext", 8 * 8, 1);
    /// `dqp_dct` bits 23:0: the destination QP (or DCT) number.
    DQPN: Field("dqpn", 8 * 8 + 8, 24);
    /// `stat_rate_sl` (byte 12): static rate (bits 7:4) and service level.
    STAT_RATE_SL: Field("stat_rate_sl", 8 * 12, 8);
    /// `fl_mlid` (byte 13): force loopback and source LID path bits (InfiniBand).
    FL_MLID: Field("fl_mlid", 8 * 13, 8);
    /// `rlid` (byte 14, BE16): the remote LID; on RoCE v2 the UDP source port.
    RLID: Field("rlid", 8 * 14, 16);
    /// `rmac` (byte 20, 6 bytes): the next-hop MAC address.
    RMAC: Bytes("rmac", 8 * 20, 48);
    /// `tclass` (byte 26): traffic class (IPv4 ToS).
    TCLASS: Field("tclass", 8 * 26, 8);
    /// `hop_limit` (byte 27): hop limit (IPv4 TTL).
    HOP_LIMIT: Field("hop_limit", 8 * 27, 8);
    /// `grh_gid_fl` (byte 28, BE32): GRH flag, source GID index and flow label.
    GRH_GID_FL: Field("grh_gid_fl", 8 * 28, 32);
    /// `grh_gid_fl` bit 30: a GRH is present (InfiniBand).
    GRH: Field("grh", 8 * 28 + 1, 1);
    /// `grh_gid_fl` bits 27:20: the source GID index.
    SGID_INDEX: Field("sgid_index", 8 * 28 + 4, 8);
    /// `grh_gid_fl` bits 19:0: the flow label.
    FLOW_LABEL: Field("flow_label", 8 * 28 + 12, 20);
    /// `rgid` (byte 32, 16 bytes): the remote GID (IP address).
    RGID: Bytes("rgid", 8 * 32, 128);
}

declare_layout! {
    /// The XRC segment of an XRC send WQE, right after the control segment (rdma-core
    /// `providers/mlx5/wqe.h` `struct mlx5_wqe_xrc_seg`, which `mlx5dv.h` does not export — so it
    /// is not in [`ALL`], the layouts `tests/mlx5dv.rs` checks): the XRC SRQ at the target.
    XrcSeg = "wqe_xrc_seg", 16;
    /// `xrc_srqn` (byte 0, BE32; the SRQ number in bits 23:0).
    XRC_SRQN: Field("xrc_srqn", 8, 24);
}

declare_layout! {
    /// The first 16 bytes of an SRQ WQE (`mlx5dv.h` `struct mlx5_wqe_srq_next_seg`): the link
    /// of the SRQ's free list.
    SrqNextSeg = "wqe_srq_next_seg", 16;
    /// `next_wqe_index` (byte 2, BE16): the next WQE of the list.
    NEXT_WQE_INDEX: Field("next_wqe_index", 8 * 2, 16);
    /// `signature` (byte 4).
    SIGNATURE: Field("signature", 8 * 4, 8);
}

declare_layout! {
    /// The Ethernet segment of a raw-packet send WQE (`mlx5dv.h` `struct mlx5_wqe_eth_seg`):
    /// checksum offloads, the TSO segment size and the first packet header bytes inline.
    EthSeg = "wqe_eth_seg", 32;
    /// `cs_flags` (byte 4): checksum offloads ([`eth_cs`]).
    CS_FLAGS: Field("cs_flags", 8 * 4, 8);
    /// `cs_flags` bit 7: compute the L4 checksum.
    L4_CSUM: Field("l4_csum", 8 * 4, 1);
    /// `cs_flags` bit 6: compute the L3 checksum.
    L3_CSUM: Field("l3_csum", 8 * 4 + 1, 1);
    /// `mss` (byte 6, BE16): the TSO segment size (0 without TSO).
    MSS: Field("mss", 8 * 6, 16);
    /// `inline_hdr_sz` (byte 12, BE16): bytes of packet header inline.
    INLINE_HDR_SZ: Field("inline_hdr_sz", 8 * 12, 16);
    /// `inline_hdr_start` (byte 14, 2 bytes): the first inline header bytes.
    INLINE_HDR_START: Bytes("inline_hdr_start", 8 * 14, 16);
    /// `inline_hdr` (byte 16, 16 bytes): the next inline header bytes.
    INLINE_HDR: Bytes("inline_hdr", 8 * 16, 128);
}

/// Send opcodes ([`CtrlSeg::OPCODE`]).
pub mod opcode {
    /// No operation (cancels a posted WQE).
    pub const NOP: u8 = 0x00;
    /// SEND with invalidate.
    pub const SEND_INVAL: u8 = 0x01;
    /// RDMA WRITE.
    pub const RDMA_WRITE: u8 = 0x08;
    /// RDMA WRITE with immediate.
    pub const RDMA_WRITE_IMM: u8 = 0x09;
    /// SEND.
    pub const SEND: u8 = 0x0a;
    /// SEND with immediate.
    pub const SEND_IMM: u8 = 0x0b;
    /// TCP segmentation offload (Ethernet).
    pub const TSO: u8 = 0x0e;
    /// RDMA READ.
    pub const RDMA_READ: u8 = 0x10;
    /// Atomic compare and swap.
    pub const ATOMIC_CS: u8 = 0x11;
    /// Atomic fetch and add.
    pub const ATOMIC_FA: u8 = 0x12;
    /// Masked atomic compare and swap.
    pub const ATOMIC_MASKED_CS: u8 = 0x14;
    /// Masked atomic fetch and add.
    pub const ATOMIC_MASKED_FA: u8 = 0x15;
    /// Fast memory registration (legacy).
    pub const FMR: u8 = 0x19;
    /// Local invalidate.
    pub const LOCAL_INVAL: u8 = 0x1b;
    /// Configuration command.
    pub const CONFIG_CMD: u8 = 0x1f;
    /// Set PSV (signature offload).
    pub const SET_PSV: u8 = 0x20;
    /// User memory registration (also local invalidate and memory window bind).
    pub const UMR: u8 = 0x25;
    /// Tag matching.
    pub const TAG_MATCHING: u8 = 0x28;
    /// Enhanced multi-packet send (Ethernet): one Ethernet segment, then one packet per data
    /// segment (a pointer, or inline data).
    pub const ENHANCED_MPSW: u8 = 0x29;
    /// Flow table access.
    pub const FLOW_TBL_ACCESS: u8 = 0x2c;
    /// Memory-to-memory offload.
    pub const MMO: u8 = 0x2f;
}

/// A masked (extended) atomic's control segment `opmod` (ATOMIC_MASKED_CS / ATOMIC_MASKED_FA)
/// and its argument block, which follows the remote address segment (MLNX_OFED's libmlx5,
/// UCX's and NVSHMEM's WQE builders; docs/fields.md "Masked atomics"). Every operand is an
/// N-byte big-endian value; the block is padded to 16 bytes; a data segment for the N-byte
/// original value follows it.
pub mod ext_atomic {
    /// `opmod` bit 3: an extended atomic, its arguments inline in the WQE.
    pub const OPMOD_EXT: u8 = 0x08;
    /// `opmod` bits 2:0: log2 of the argument size in bytes, less 2 (0: 4 bytes .. 3: 32).
    pub const OPMOD_LOG_SIZE: u8 = 0x07;
    /// That field's value for arguments behind a pointer: a form whose layout is not public.
    pub const INDIRECT: u8 = 7;

    /// Bytes of the argument block of a masked compare-and-swap of `n`-byte arguments: swap,
    /// compare, swap mask, compare mask.
    pub const fn cmp_swap_block(n: usize) -> usize {
        4 * n
    }

    /// Bytes of the argument block of a masked fetch-and-add of `n`-byte arguments: the addend
    /// and the field boundary mask (padded to 16 in the WQE).
    pub const fn fetch_add_block(n: usize) -> usize {
        2 * n
    }
}

/// Values of the whole `fm_ce_se` byte ([`CtrlSeg::FM_CE_SE`]), to be ORed together.
pub mod fm_ce_se {
    /// Solicited event (SE = 1).
    pub const SOLICITED: u8 = 0x02;
    /// Always write a CQE (CE = [`super::ce::ALWAYS`]).
    pub const CQ_UPDATE: u8 = 0x08;
    /// Initiator small fence (FM = [`super::fm::INITIATOR_SMALL`]).
    pub const INITIATOR_SMALL_FENCE: u8 = 0x20;
    /// Fence: wait for earlier RDMA READs and atomics (FM = [`super::fm::SMALL_AND_FENCE`]).
    pub const FENCE: u8 = 0x80;
}

/// Completion modes ([`CtrlSeg::CE`]).
pub mod ce {
    /// A CQE only if the WQE fails.
    pub const ON_ERROR: u8 = 0;
    /// Always a CQE.
    pub const ALWAYS: u8 = 2;
    /// Always a CQE, and an EQE.
    pub const ALWAYS_AND_EQE: u8 = 3;
}

/// Fence modes ([`CtrlSeg::FM`]).
pub mod fm {
    /// No fence.
    pub const NONE: u8 = 0;
    /// Initiator small fence.
    pub const INITIATOR_SMALL: u8 = 1;
    /// Fence.
    pub const FENCE: u8 = 2;
    /// Strong ordering.
    pub const STRONG_ORDERING: u8 = 3;
    /// Small fence and fence (what `IBV_SEND_FENCE` maps to).
    pub const SMALL_AND_FENCE: u8 = 4;
}

/// Checksum offload flags of [`EthSeg::CS_FLAGS`].
pub mod eth_cs {
    /// Compute the L3 (IPv4 header) checksum.
    pub const L3_CSUM: u8 = 0x40;
    /// Compute the L4 (TCP/UDP) checksum.
    pub const L4_CSUM: u8 = 0x80;
}

/// Every WQE segment layout: `(name, size in bytes, fields)`.
pub const ALL: &[(&str, usize, &[FieldInfo])] = &[
    (CtrlSeg::NAME, CtrlSeg::BYTES, CtrlSeg::FIELDS),
    (RaddrSeg::NAME, RaddrSeg::BYTES, RaddrSeg::FIELDS),
    (AtomicSeg::NAME, AtomicSeg::BYTES, AtomicSeg::FIELDS),
    (DataSeg::NAME, DataSeg::BYTES, DataSeg::FIELDS),
    (InlineSeg::NAME, InlineSeg::BYTES, InlineSeg::FIELDS),
    (DatagramSeg::NAME, DatagramSeg::BYTES, DatagramSeg::FIELDS),
    (SrqNextSeg::NAME, SrqNextSeg::BYTES, SrqNextSeg::FIELDS),
    (EthSeg::NAME, EthSeg::BYTES, EthSeg::FIELDS),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ViewMut;

    #[test]
    fn xrc_seg_holds_the_srq_number_in_its_first_word() {
        let mut b = [0xffu8; 16];
        b[..4].copy_from_slice(&0x0012_3456u32.to_be_bytes());
        let v = crate::View::<XrcSeg>::new(&b).unwrap();
        assert_eq!(v.get(XrcSeg::XRC_SRQN), 0x12_3456);
        assert_eq!(XrcSeg::BYTES, 16);
    }

    #[test]
    fn fm_ce_se_fields_make_the_byte_values() {
        let mut b = [0u8; 16];
        let mut v = ViewMut::<CtrlSeg>::new(&mut b).unwrap();
        v.set(CtrlSeg::CE, ce::ALWAYS.into()).unwrap();
        assert_eq!(b[11], fm_ce_se::CQ_UPDATE);
        let mut v = ViewMut::<CtrlSeg>::new(&mut b).unwrap();
        v.set(CtrlSeg::CE, 0).unwrap().set(CtrlSeg::SE, 1).unwrap();
        assert_eq!(b[11], fm_ce_se::SOLICITED);
        let mut v = ViewMut::<CtrlSeg>::new(&mut b).unwrap();
        v.set(CtrlSeg::SE, 0).unwrap();
        v.set(CtrlSeg::FM, fm::SMALL_AND_FENCE.into()).unwrap();
        assert_eq!(b[11], fm_ce_se::FENCE);
        let mut v = ViewMut::<CtrlSeg>::new(&mut b).unwrap();
        v.set(CtrlSeg::FM, fm::INITIATOR_SMALL.into()).unwrap();
        assert_eq!(b[11], fm_ce_se::INITIATOR_SMALL_FENCE);
    }
}
