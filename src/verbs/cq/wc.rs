//! Work completions (`struct ibv_wc`), their status and opcode.

/// Completion status (`enum ibv_wc_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum WcStatus {
    /// Success.
    Success,
    /// Local length error (a message longer than the receive buffer).
    LocLenErr,
    /// Local QP operation error.
    LocQpOpErr,
    /// Local protection error (bad lkey, or no right).
    LocProtErr,
    /// Flushed: the QP went to the error state before the work request ran.
    WrFlushErr,
    /// Memory window bind error.
    MwBindErr,
    /// Bad response.
    BadRespErr,
    /// Local access error.
    LocAccessErr,
    /// Remote invalid request.
    RemInvReqErr,
    /// Remote access error (bad rkey, no right, out of bounds).
    RemAccessErr,
    /// Remote operation error.
    RemOpErr,
    /// Transport retries exhausted.
    RetryExcErr,
    /// RNR retries exhausted.
    RnrRetryExcErr,
    /// Remote aborted.
    RemAbortErr,
    /// Any other syndrome.
    GeneralErr(u8),
}

impl WcStatus {
    /// The status of a CQE syndrome (mlx5-datapath-sizing.md §4.3).
    pub(crate) fn from_syndrome(s: u8) -> Self {
        match s {
            0x01 => WcStatus::LocLenErr,
            0x02 => WcStatus::LocQpOpErr,
            0x04 => WcStatus::LocProtErr,
            0x05 => WcStatus::WrFlushErr,
            0x06 => WcStatus::MwBindErr,
            0x10 => WcStatus::BadRespErr,
            0x11 => WcStatus::LocAccessErr,
            0x12 => WcStatus::RemInvReqErr,
            0x13 => WcStatus::RemAccessErr,
            0x14 => WcStatus::RemOpErr,
            0x15 => WcStatus::RetryExcErr,
            0x16 => WcStatus::RnrRetryExcErr,
            0x22 => WcStatus::RemAbortErr,
            other => WcStatus::GeneralErr(other),
        }
    }
}

/// What completed (`enum ibv_wc_opcode`, with its values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum WcOpcode {
    /// A SEND (with or without immediate or invalidate).
    Send = 0,
    /// An RDMA WRITE.
    RdmaWrite = 1,
    /// An RDMA READ.
    RdmaRead = 2,
    /// An atomic compare-and-swap.
    CompSwap = 3,
    /// An atomic fetch-and-add.
    FetchAdd = 4,
    /// A TCP segmentation offload send of an Ethernet SQ (`IBV_WC_TSO`).
    Tso = 6,
    /// A receive.
    Recv = 128,
    /// A receive consumed by an RDMA WRITE with immediate.
    RecvRdmaWithImm = 129,
}

/// Work completion flags (`enum ibv_wc_flags`, with its values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct WcFlags(u8);

impl WcFlags {
    /// A GRH is in the first 40 bytes of the receive buffer (UD receives).
    pub const GRH: Self = Self(1 << 0);
    /// The message carried immediate data: on a receive the value is in [`Wc::imm_data`]; on a
    /// send completion of SEND_IMM or RDMA_WRITE_IMM only the flag is set (a requester CQE
    /// carries no immediate), as rdma-core's `ibv_poll_cq` sets it.
    pub const WITH_IMM: Self = Self(1 << 1);
    /// An Ethernet frame received with its IPv4 header and TCP/UDP checksums verified good by
    /// the device (`IBV_WC_IP_CSUM_OK`; Ethernet receive queues).
    pub const IP_CSUM_OK: Self = Self(1 << 2);
    /// The message was a SEND with invalidate: the key the peer named was invalidated, and it is
    /// in [`Wc::invalidated_rkey`] (receives).
    pub const WITH_INV: Self = Self(1 << 3);
    /// The last completion of a striding (multi-packet) receive WQE: the device is done with the
    /// buffer of [`Wc::wr_id`] and no later completion names it, so it may be posted again once
    /// its frames are read. Not an `ibv_wc_flags` bit (verbs has no striding receive); a
    /// completion with only this flag and no bytes is the device's filler for the strides a
    /// frame did not fit in.
    pub const RECV_BUFFER_DONE: Self = Self(1 << 7);

    /// No flag.
    pub const fn empty() -> Self {
        Self(0)
    }

    /// Whether every flag of `o` is set.
    pub const fn contains(self, o: Self) -> bool {
        self.0 & o.0 == o.0
    }

    /// Union.
    pub const fn union(self, o: Self) -> Self {
        Self(self.0 | o.0)
    }

    /// Whether no flag is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The bits (`ibv_wc_flags`' where verbs has the flag).
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// The flags of `bits` this type knows (others dropped).
    pub const fn from_bits_truncate(bits: u8) -> Self {
        Self(
            bits & (Self::GRH.0
                | Self::WITH_IMM.0
                | Self::IP_CSUM_OK.0
                | Self::WITH_INV.0
                | Self::RECV_BUFFER_DONE.0),
        )
    }
}

/// A work completion (`struct ibv_wc`).
///
/// `repr(C)` with the fields a successful send completion does not set side by side, so that
/// `poll` writes them with few stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct Wc {
    /// The work request's id.
    pub wr_id: u64,
    /// Bytes transferred (receives, READs, atomics).
    pub byte_len: u32,
    /// The local QP.
    pub qp_num: u32,
    /// What completed (for errors: what the work request was).
    pub opcode: WcOpcode,
    /// Success or what went wrong.
    pub status: WcStatus,
    /// Whether a GRH is in the first 40 bytes of the receive buffer (UD).
    pub grh: bool,
    /// The device's vendor syndrome (errors).
    pub vendor_err: u8,
    /// `ibv_wc_flags` of a successful completion (none for an error).
    pub wc_flags: WcFlags,
    /// The source QP (UD receives).
    pub src_qp: u32,
    /// Where the frame starts in the receive buffer: its first stride's offset on a striding
    /// Ethernet RQ (`EthRq::create_striding`), else 0.
    pub offset: u32,
    /// The immediate data of a receive (SEND or RDMA WRITE with immediate), with
    /// [`WcFlags::WITH_IMM`]; `None` otherwise, send completions included.
    pub imm_data: Option<u32>,
    /// The rkey a received SEND with invalidate invalidated (`ibv_wc`'s `invalidated_rkey`,
    /// which shares a union with `imm_data`), with [`WcFlags::WITH_INV`]; `None` otherwise.
    pub invalidated_rkey: Option<u32>,
    /// The VLAN tag (TCI) the RQ stripped from a received Ethernet frame (`cv` and
    /// `vlan_info` of the CQE; rdma-core's `ibv_wc_read_cvlan`); `None` otherwise.
    pub vlan_tci: Option<u16>,
    /// The RSS hash of a received Ethernet frame that went through an RSS TIR
    /// (`rss_hash_result`, with a nonzero `rss_hash_type`); `None` otherwise.
    pub rss_hash: Option<u32>,
}

impl Default for Wc {
    /// An empty completion (what a `wc` array is filled with before polling into it).
    fn default() -> Self {
        Wc {
            wr_id: 0,
            byte_len: 0,
            qp_num: 0,
            opcode: WcOpcode::Send,
            status: WcStatus::Success,
            grh: false,
            vendor_err: 0,
            wc_flags: WcFlags::empty(),
            src_qp: 0,
            offset: 0,
            imm_data: None,
            invalidated_rkey: None,
            vlan_tci: None,
            rss_hash: None,
        }
    }
}
