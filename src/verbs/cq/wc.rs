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
    pub fn from_syndrome(s: u8) -> Self {
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
    /// A receive.
    Recv = 128,
    /// A receive consumed by an RDMA WRITE with immediate.
    RecvRdmaWithImm = 129,
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
    /// The source QP (UD receives).
    pub src_qp: u32,
    /// Immediate data, if any.
    pub imm_data: Option<u32>,
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
            src_qp: 0,
            imm_data: None,
        }
    }
}
