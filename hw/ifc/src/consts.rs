//! Enumerated values of command fields (op_mod encodings, states, types).

pub mod ste_v0;

/// `op_mod` of QUERY_HCA_CAP / SET_HCA_CAP: `cap_type << 1 | mode`.
pub mod cap_type {
    /// General device capabilities (`cmd_hca_cap`).
    pub const GENERAL: u16 = 0x0;
    /// Ethernet offloads.
    pub const ETHERNET_OFFLOADS: u16 = 0x1;
    /// On-demand paging.
    pub const ODP: u16 = 0x2;
    /// Atomic operations.
    pub const ATOMIC: u16 = 0x3;
    /// RoCE (`roce_cap`).
    pub const ROCE: u16 = 0x4;
    /// Flow tables (`flow_table_nic_cap`).
    pub const FLOW_TABLE: u16 = 0x7;
    /// QoS: packet pacing, scheduling (`qos_cap`).
    pub const QOS: u16 = 0xc;
    /// Device memory (`device_mem_cap`).
    pub const DEV_MEM: u16 = 0xf;
    /// General capabilities 2.
    pub const GENERAL_2: u16 = 0x20;
}

/// QUERY_HCA_CAP mode (low bit of `op_mod`).
pub mod cap_mode {
    /// The device maximum.
    pub const MAX: u16 = 0;
    /// The current setting.
    pub const CUR: u16 = 1;
}

/// `op_mod` of QUERY_PAGES.
pub mod query_pages {
    /// Pages needed before INIT_HCA can start (boot).
    pub const BOOT: u16 = 1;
    /// Pages needed by INIT_HCA.
    pub const INIT: u16 = 2;
    /// Pages requested at run time.
    pub const REGULAR: u16 = 3;
}

/// `op_mod` of MANAGE_PAGES.
pub mod manage_pages {
    /// The driver could not allocate the pages asked for.
    pub const ALLOC_FAIL: u16 = 0;
    /// Give pages to the device.
    pub const GIVE: u16 = 1;
    /// Take pages back from the device.
    pub const TAKE: u16 = 2;
}

/// `profile` of TEARDOWN_HCA.
pub mod teardown_profile {
    /// Graceful close.
    pub const GRACEFUL: u16 = 0;
    /// Force close.
    pub const FORCE_CLOSE: u16 = 1;
    /// Prepare fast teardown.
    pub const PREPARE_FAST: u16 = 2;
}

/// `type` of a command queue entry: PCI command transport.
pub const CMD_TYPE_PCI: u8 = 7;
/// Bytes of the input and output carried inline in the command queue entry.
pub const CMD_INLINE_BYTES: usize = 16;
/// Data bytes per mailbox block.
pub const MAILBOX_DATA_BYTES: usize = 512;
/// Size of a mailbox block.
pub const MAILBOX_BYTES: usize = 0x240;
/// Alignment of mailbox blocks (the next pointer keeps bits 63..10).
pub const MAILBOX_ALIGN: usize = 1024;
/// The device page size for firmware pages and PAS entries.
pub const ADAPTER_PAGE_SIZE: usize = 4096;
/// Largest command queue the driver supports (`2^log_cmdq_size`).
pub const MAX_COMMANDS: usize = 32;

/// `cmdif_checksum` encodings in `cmd_hca_cap`.
pub mod cmdif_checksum {
    /// Checksums disabled.
    pub const DISABLED: u64 = 0;
    /// Initial state.
    pub const INITIAL: u64 = 1;
    /// Checksums enabled.
    pub const ENABLED: u64 = 3;
}

/// `port_type` in `cmd_hca_cap`.
pub mod port_type {
    /// InfiniBand.
    pub const IB: u64 = 0;
    /// Ethernet.
    pub const ETH: u64 = 1;
}

/// ACCESS_REG register ids and `op_mod`.
pub mod reg {
    /// `op_mod`: write the register.
    pub const WRITE: u16 = 0;
    /// `op_mod`: read the register.
    pub const READ: u16 = 1;
    /// PMTU: port MTU.
    pub const PMTU: u16 = 0x5003;
    /// PTYS: port type and speed.
    pub const PTYS: u16 = 0x5004;
    /// PAOS: port administrative and operational status.
    pub const PAOS: u16 = 0x5006;
    /// PFCC: port flow control (global pause, per-priority flow control).
    pub const PFCC: u16 = 0x5007;
    /// PPCNT: port performance counters.
    pub const PPCNT: u16 = 0x5008;
    /// PCMR: port capabilities mask.
    pub const PCMR: u16 = 0x5041;
    /// NODE_DESC: the node description string (64 bytes; no `mlx5_ifc` layout).
    pub const NODE_DESC: u16 = 0x6001;
    /// HOST_ENDIANNESS.
    pub const HOST_ENDIANNESS: u16 = 0x7004;
    /// DTOR: default timeouts.
    pub const DTOR: u16 = 0xc00e;
}

/// QP states (`qpc.state`).
pub mod qp_state {
    /// Reset.
    pub const RST: u64 = 0;
    /// Initialized.
    pub const INIT: u64 = 1;
    /// Ready to receive.
    pub const RTR: u64 = 2;
    /// Ready to send.
    pub const RTS: u64 = 3;
    /// Send queue error.
    pub const SQER: u64 = 4;
    /// Error.
    pub const ERR: u64 = 6;
    /// Send queue drained.
    pub const SQD: u64 = 7;
}

/// PCI device ids of mlx5 functions (Linux's `mlx5_pci_table`, where `MLX5_PCI_DEV_IS_VF`
/// marks the virtual functions: a driver knows a VF by its device id alone).
pub mod pci_id {
    /// ConnectX-5.
    pub const CONNECTX5: u16 = 0x1017;
    /// ConnectX-5 virtual function.
    pub const CONNECTX5_VF: u16 = 0x1018;
    /// The device ids of virtual functions: Connect-IB, ConnectX-4, -4 Lx, -5, -5 Ex, -6 VFs,
    /// the mlx5Gen VF, BlueField's.
    pub const VFS: &[u16] = &[
        0x1012, 0x1014, 0x1016, 0x1018, 0x101a, 0x101c, 0x101e, 0xa2d3,
    ];

    /// Whether `device` is a virtual function's id.
    pub fn is_vf(device: u16) -> bool {
        VFS.contains(&device)
    }
}

/// QP service types (`qpc.st`).
pub mod qp_st {
    /// Reliable connected.
    pub const RC: u64 = 0;
    /// Unreliable connected.
    pub const UC: u64 = 1;
    /// Unreliable datagram.
    pub const UD: u64 = 2;
    /// XRC.
    pub const XRC: u64 = 3;
    /// A DC initiator (DCI): reliable, its destination (a DCT and its access key) named by each
    /// send WQE's address vector.
    pub const DCI: u64 = 5;
    /// QP1, the general services (GSI) QP: UD with the well-known number 1 on the wire.
    pub const QP1: u64 = 8;
    /// A send-only QP for UMR WQEs (memory-key updates), never on the wire.
    pub const REG_UMR: u64 = 0xc;

    /// The transport whose rules a service type follows: QP1 is UD on the wire, and a UMR QP
    /// is programmed as UD is (no path, 4096-byte MTU) by Linux's mlx5_ib.
    pub const fn transport(st: u64) -> u64 {
        if st == QP1 || st == REG_UMR {
            UD
        } else {
            st
        }
    }
}

/// Path migration states (`qpc.pm_state`).
pub mod pm_state {
    /// Armed: an alternate path is loaded and migration may happen.
    pub const ARMED: u64 = 0;
    /// Rearm requested.
    pub const REARM: u64 = 1;
    /// Migrated: no alternate path (what every QP without path migration uses).
    pub const MIGRATED: u64 = 3;
}

/// Responder atomic modes (`qpc.atomic_mode`); 0 is not a defined mode.
pub mod atomic_mode {
    /// IB-spec atomics (8-byte compare-and-swap and fetch-and-add).
    pub const IB_SPEC: u64 = 1;
    /// ConnectX-compatible atomics.
    pub const CX: u64 = 2;
    /// Extended atomics up to 8 bytes; 4..=8 are up to 16 .. 256 bytes (log2 of the size).
    pub const UP_TO_8B: u64 = 3;
    /// Extended atomics up to 256 bytes: the largest defined mode.
    pub const UP_TO_256B: u64 = 8;
}

/// `atomic_caps` values (HCA_CAP cap_type 3).
pub mod atomic_caps {
    /// `atomic_operations`: 8-byte compare-and-swap.
    pub const OPS_CMP_SWAP: u64 = 1 << 0;
    /// `atomic_operations`: 8-byte fetch-and-add.
    pub const OPS_FETCH_ADD: u64 = 1 << 1;
    /// `atomic_operations`: masked (extended) compare-and-swap.
    pub const OPS_EXTENDED_CMP_SWAP: u64 = 1 << 2;
    /// `atomic_operations`: masked (extended) fetch-and-add.
    pub const OPS_EXTENDED_FETCH_ADD: u64 = 1 << 3;
    /// `atomic_size_qp` / `atomic_size_dc`: bit n set = operand of 2^n bytes supported.
    pub const SIZE_8_BYTES: u64 = 1 << 3;
    /// `atomic_size_qp` / `atomic_size_dc`: 4-byte operands (masked atomics).
    pub const SIZE_4_BYTES: u64 = 1 << 2;
    /// `atomic_size_qp` / `atomic_size_dc`: 16-byte operands (masked atomics).
    pub const SIZE_16_BYTES: u64 = 1 << 4;
    /// `atomic_size_qp` / `atomic_size_dc`: 32-byte operands (masked atomics).
    pub const SIZE_32_BYTES: u64 = 1 << 5;
    /// `atomic_req_8B_endianness_mode`: the requester writes the returned value big-endian.
    pub const REQ_ENDIANNESS_BIG: u64 = 0;
    /// `atomic_req_8B_endianness_mode`: the requester writes the returned value in host order.
    pub const REQ_ENDIANNESS_HOST: u64 = 1;
}

/// Receive queue types (`qpc.rq_type`).
pub mod rq_type {
    /// A regular receive queue of the QP's own.
    pub const REGULAR: u64 = 0;
    /// Receives come from an SRQ / RMP.
    pub const SRQ: u64 = 1;
    /// Zero-length receive queue (no RQ).
    pub const ZERO_LEN: u64 = 3;
}

/// RoCE address entry encodings.
pub mod roce {
    /// `roce_version` 2 (RoCE v2, UDP/IP).
    pub const VERSION_2: u64 = 2;
    /// `roce_l3_type` IPv4.
    pub const L3_IPV4: u64 = 0;
    /// `roce_l3_type` IPv6.
    pub const L3_IPV6: u64 = 1;
    /// UDP destination port of RoCE v2.
    pub const UDP_DPORT: u16 = 4791;
    /// The default P_Key (full membership of the default partition): entry 0 of a RoCE port's
    /// P_Key table, the BTH P_Key a device sends, the P_Key of a CM path.
    pub const DEFAULT_PKEY: u16 = 0xffff;
}

/// `opt_param_mask` bits of the QP modify commands (`MLX5_QP_OPTPAR_*`): which optional QP
/// context fields a transition applies.
pub mod qp_opt_param {
    /// Alternate address path.
    pub const ALT_ADDR_PATH: u32 = 1 << 0;
    /// `rre` (remote read enable).
    pub const RRE: u32 = 1 << 1;
    /// `rae` (remote atomic enable).
    pub const RAE: u32 = 1 << 2;
    /// `rwe` (remote write enable).
    pub const RWE: u32 = 1 << 3;
    /// Primary path `pkey_index`.
    pub const PKEY_INDEX: u32 = 1 << 4;
    /// `q_key`.
    pub const Q_KEY: u32 = 1 << 5;
    /// `min_rnr_nak` (RNR NAK timer).
    pub const RNR_TIMEOUT: u32 = 1 << 6;
    /// The primary address path.
    pub const PRIMARY_ADDR_PATH: u32 = 1 << 7;
    /// `log_sra_max`.
    pub const SRA_MAX: u32 = 1 << 8;
    /// `log_rra_max`.
    pub const RRA_MAX: u32 = 1 << 9;
    /// `pm_state`.
    pub const PM_STATE: u32 = 1 << 10;
    /// `retry_count`.
    pub const RETRY_COUNT: u32 = 1 << 12;
    /// `rnr_retry`.
    pub const RNR_RETRY: u32 = 1 << 13;
    /// Primary path `ack_timeout`.
    pub const ACK_TIMEOUT: u32 = 1 << 14;
    /// `lag_tx_port_affinity`.
    pub const LAG_TX_AFF: u32 = 1 << 15;
    /// Primary path `vhca_port_num`.
    pub const PRI_PORT: u32 = 1 << 16;
    /// `srqn_rmpn_xrqn`.
    pub const SRQN: u32 = 1 << 18;
    /// `cqn_rcv`.
    pub const CQN_RCV: u32 = 1 << 19;
    /// `counter_set_id`.
    pub const COUNTER_SET_ID: u32 = 1 << 25;
}

/// `cqc.cqe_sz`.
pub mod cqe_sz {
    /// 64-byte CQEs.
    pub const BYTES_64: u64 = 0;
    /// 128-byte CQEs.
    pub const BYTES_128: u64 = 1;
}

/// `per_protocol_networking_offload_caps.wqe_inline_mode`: what a send WQE must carry inline.
pub mod wqe_inline_mode {
    /// The L2 header.
    pub const L2: u64 = 0;
    /// What the vport context's `min_wqe_inline_mode` says.
    pub const VPORT_CONTEXT: u64 = 1;
    /// Nothing: the frame may come wholly from data segments.
    pub const NOT_REQUIRED: u64 = 2;
}

/// `tirc.self_lb_block`: which of its own transport domain's looped-back packets a TIR refuses.
pub mod self_lb_block {
    /// Unicast.
    pub const UNICAST: u64 = 1 << 0;
    /// Multicast and broadcast.
    pub const MULTICAST: u64 = 1 << 1;
}

/// `mkc.access_mode` (`access_mode_4_2 << 2 | access_mode_1_0`): how a memory key translates.
pub mod mkey_access_mode {
    /// Physical addresses (IOVAs) as given.
    pub const PA: u64 = 0;
    /// Through a list of page addresses (MTT entries).
    pub const MTT: u64 = 1;
    /// Indirect: through a list of (byte count, key, address) entries (KLMs); memory windows.
    pub const KLMS: u64 = 2;
    /// Indirect with fixed-size entities: entry n (key, address) maps bytes `[n << log_page_size,
    /// (n + 1) << log_page_size)` of the key's range; Linux's implicit ODP parent keys.
    pub const KSM: u64 = 3;
    /// Device memory (MEMIC): `start_addr` is a BAR0 offset in the MEMIC window and the key is
    /// zero-based — an access at address `a` reaches `start_addr + a`.
    pub const MEMIC: u64 = 5;
    /// SW ICM: `start_addr` is an address in a SW ICM object (steering or header-modify memory),
    /// which the software's RDMA writes fill.
    pub const SW_ICM: u64 = 4;
}

/// `general_obj_in_cmd_hdr.obj_type`: the general objects (`MLX5_OBJ_TYPE_*`).
pub mod general_obj_type {
    /// SW ICM (`sw_icm`): steering memory the software writes.
    pub const SW_ICM: u64 = 0x8;
    /// A flow sampler (`flow_sampler`): one frame in `sample_ratio` to a sample table, every
    /// frame on to a default table.
    pub const FLOW_SAMPLER: u64 = 0x20;
}

/// `cmd_hca_cap.general_obj_types`: bit n set when objects of type n can be created
/// (`MLX5_GENERAL_OBJ_TYPES_CAP_*`).
pub mod general_obj_types {
    /// SW ICM objects ([`super::general_obj_type::SW_ICM`]).
    pub const SW_ICM: u64 = 1 << super::general_obj_type::SW_ICM;
    /// Flow samplers ([`super::general_obj_type::FLOW_SAMPLER`]).
    pub const FLOW_SAMPLER: u64 = 1 << super::general_obj_type::FLOW_SAMPLER;
}

/// On-demand paging: the flag bits of an MTT entry, the sub-types of a PAGE_FAULT event and the
/// fault types of its data and of PAGE_FAULT_RESUME (docs/fields.md "ODP").
pub mod odp {
    /// MTT entry bit 0: the page may be read (present for reads). Honoured on entries written by
    /// UMR and on CREATE_MKEY's list when `pg_access` is set; without `pg_access` the list's
    /// pages are present for every access.
    pub const MTT_READ: u64 = 1 << 0;
    /// MTT entry bit 1: the page may be written.
    pub const MTT_WRITE: u64 = 1 << 1;
    /// PAGE_FAULT sub-type (EQE byte 3): the data segments of a WQE (send, receive, SRQ).
    pub const SUBTYPE_WQE: u8 = 0;
    /// PAGE_FAULT sub-type: a responder's RDMA access (WRITE, READ, atomic) through an rkey.
    pub const SUBTYPE_RDMA: u8 = 1;
    /// WQE fault type: a receive WQE of an SRQ / RMP (the event's queue is the SRQ).
    pub const WQE_RMP: u8 = 0;
    /// WQE fault type: a SEND or RDMA WRITE WQE of a send queue (its data is read).
    pub const WQE_REQ_SEND_OR_WRITE: u8 = 1;
    /// WQE fault type: a receive WQE of a QP's receive queue.
    pub const WQE_RESP: u8 = 2;
    /// WQE fault type: an RDMA READ or atomic WQE of a send queue (its local buffer is written).
    pub const WQE_REQ_READ_OR_ATOMIC: u8 = 3;
    /// RDMA fault flag: the faulting side is the requester.
    pub const RDMA_REQUESTOR: u8 = 1 << 0;
    /// RDMA fault flag: the access writes (RDMA WRITE, atomic).
    pub const RDMA_WRITE: u8 = 1 << 1;
    /// RDMA fault flag: an RDMA access (always set on an RDMA fault).
    pub const RDMA_RDMA: u8 = 1 << 2;
    /// CQE `syndrome` of an SRQ receive WQE given back because of a page fault (REMOTE_ABORTED):
    /// rdma-core's mlx5 provider reposts the WQE and never shows the CQE.
    pub const SRQ_FAULT_SYNDROME: u8 = 0x22;
    /// CQE `vendor_err_synd` of that CQE (ODP page fault).
    pub const SRQ_FAULT_VENDOR: u8 = 0x93;
}

/// MODIFY_CQ: its `op_mod`s and the bits of `modify_field_select_resize_field_select`.
pub mod modify_cq {
    /// `op_mod`: change the moderation (`modify_field_select`).
    pub const MODERATION: u16 = 0;
    /// `op_mod`: resize (`resize_field_select`, the new buffer's PAS after the context).
    pub const RESIZE: u16 = 1;
    /// Moderation: `cq_period`.
    pub const PERIOD: u64 = 1 << 0;
    /// Moderation: `cq_max_count`.
    pub const MAX_COUNT: u64 = 1 << 1;
    /// Resize: `log_cq_size`.
    pub const LOG_SIZE: u64 = 1 << 0;
    /// Resize: `page_offset`.
    pub const PAGE_OFFSET: u64 = 1 << 1;
    /// Resize: `log_page_size`.
    pub const LOG_PAGE_SIZE: u64 = 1 << 2;
}

/// `eqc.st` / `cqc.st`: the arming state of an EQ or CQ.
pub mod arm_state {
    /// CQ armed for solicited completions only.
    pub const SOLICITED_ARMED: u64 = 0x6;
    /// Armed: the next event (completion) generates an interrupt (event).
    pub const ARMED: u64 = 0x9;
    /// Fired: not armed.
    pub const FIRED: u64 = 0xa;
}

/// ARM_RQ `op_mod`.
pub mod arm_rq {
    /// `op_mod`: the number names an SRQ (ISSI 0).
    pub const SRQ: u16 = 1;
}

/// DCT states (`dctc.state`, QUERY_DCT).
pub mod dct_state {
    /// Active: takes requests.
    pub const ACTIVE: u64 = 0;
    /// Draining (DRAIN_DCT): takes no new connection; DCT_DRAINED comes when none is left.
    pub const DRAINING: u64 = 1;
    /// Drained: ready for DESTROY_DCT.
    pub const DRAINED: u64 = 2;
}

/// `rmp_state` / `rmpc.state`.
pub mod rmp_state {
    /// Ready.
    pub const RDY: u64 = 1;
    /// Error.
    pub const ERR: u64 = 3;
}

/// `wq.wq_type`.
pub mod wq_type {
    /// Linked list (SRQ / RMP).
    pub const LINKED_LIST: u64 = 0;
    /// Cyclic.
    pub const CYCLIC: u64 = 1;
    /// Linked list of multi-packet WQEs (a striding RQ; mlx5e's MPWQE RQ).
    pub const LINKED_LIST_STRIDING_RQ: u64 = 2;
    /// Cyclic ring of multi-packet WQEs (a striding RQ; mlx5_ib's striding WQs, DPDK's MPRQ).
    pub const CYCLIC_STRIDING_RQ: u64 = 3;
}

/// The striding RQ's encodings (`wq.log_wqe_num_of_strides`, `wq.log_wqe_stride_size`).
pub mod striding {
    /// `log_wqe_num_of_strides` 0..=7 is 2^(9 + value) strides per WQE.
    pub const LOG_NUM_STRIDES_BASE: u64 = 9;
    /// With `ext_stride_num_range`, values 0xa..=0xf are 2^3..2^8 strides (the value is
    /// `log - 9` in four bits).
    pub const EXT_MIN_LOG_NUM_STRIDES: u64 = 3;
    /// `log_wqe_stride_size` is 2^(6 + value) bytes per stride (64 B to 8 KiB).
    pub const LOG_STRIDE_SIZE_BASE: u64 = 6;
    /// A receive CQE's `byte_cnt` on a striding RQ: bit 31 a filler CQE (strides skipped, no
    /// packet), bits 30:16 the strides consumed, bits 15:0 the packet's bytes.
    pub const CQE_FILLER: u32 = 1 << 31;
    /// The shift of the strides consumed in `byte_cnt`.
    pub const CQE_STRIDES_SHIFT: u32 = 16;
}

/// `sqc.state` / `rqc.state` and the `sq_state` / `rq_state` of MODIFY_SQ / MODIFY_RQ
/// (`MLX5_SQC_STATE_*`, `MLX5_RQC_STATE_*`).
pub mod sq_rq_state {
    /// Reset.
    pub const RST: u64 = 0;
    /// Ready.
    pub const RDY: u64 = 1;
    /// Error.
    pub const ERR: u64 = 3;
}

/// `tirc.disp_type`: where a TIR delivers.
pub mod tir_disp_type {
    /// To one RQ (`inline_rqn`).
    pub const DIRECT: u64 = 0;
    /// Over an RQ table (`indirect_table`) by a hash of the packet.
    pub const INDIRECT: u64 = 1;
}

/// `tirc.rx_hash_fn`.
pub mod rx_hash_fn {
    /// No hash.
    pub const NONE: u64 = 0;
    /// Inverted XOR8.
    pub const INVERTED_XOR8: u64 = 1;
    /// Toeplitz (the largest defined function).
    pub const TOEPLITZ: u64 = 2;
}

/// `rx_hash_field_select.selected_fields` bits: what an RSS TIR hashes.
pub mod rx_hash_field {
    /// The source IP address.
    pub const SRC_IP: u64 = 1 << 0;
    /// The destination IP address.
    pub const DST_IP: u64 = 1 << 1;
    /// The L4 source port.
    pub const L4_SPORT: u64 = 1 << 2;
    /// The L4 destination port.
    pub const L4_DPORT: u64 = 1 << 3;
}

/// `table_type` of the flow-table commands (`FS_FT_NIC_RX`, `FS_FT_NIC_TX`).
pub mod flow_table_type {
    /// NIC receive.
    pub const NIC_RX: u64 = 0;
    /// NIC transmit.
    pub const NIC_TX: u64 = 1;
}

/// `flow_table_context.table_miss_action`.
pub mod table_miss_action {
    /// The default miss action (NIC receive: drop at the end of the chain).
    pub const DEFAULT: u64 = 0;
    /// Forward to `table_miss_id`.
    pub const FORWARD: u64 = 1;
}

/// `op_mod` of SET_FLOW_TABLE_ROOT.
pub mod set_flow_table_root {
    /// Make `table_id` the root.
    pub const CONNECT: u16 = 0;
    /// Disconnect the root.
    pub const DISCONNECT: u16 = 1;
}

/// `match_criteria_enable` bits of a flow group (`MLX5_MATCH_*`).
pub mod match_criteria {
    /// Outer headers (`outer_headers`).
    pub const OUTER_HEADERS: u64 = 1 << 0;
    /// Miscellaneous parameters (`misc_parameters`).
    pub const MISC_PARAMETERS: u64 = 1 << 1;
}

/// `flow_context.action` bits (`MLX5_FLOW_CONTEXT_ACTION_*`).
pub mod flow_action {
    /// Allow (continue to the table's miss behaviour).
    pub const ALLOW: u64 = 0x1;
    /// Drop.
    pub const DROP: u64 = 0x2;
    /// Forward to the destination list.
    pub const FWD_DEST: u64 = 0x4;
    /// Count in the counters listed after the destinations.
    pub const COUNT: u64 = 0x8;
    /// Reformat the packet with the context `packet_reformat_id` names.
    pub const PACKET_REFORMAT: u64 = 0x10;
    /// Rewrite header fields with the context `modify_header_id` names.
    pub const MOD_HDR: u64 = 0x40;
}

/// `packet_reformat_context_in.reformat_type` (`MLX5_REFORMAT_TYPE_*`).
pub mod reformat_type {
    /// Encapsulate an L2 frame in VXLAN (the header given).
    pub const L2_TO_VXLAN: u64 = 0x0;
    /// Encapsulate an L2 frame in NVGRE.
    pub const L2_TO_NVGRE: u64 = 0x1;
    /// Encapsulate an L2 frame in a general L2 tunnel header (the header given).
    pub const L2_TO_L2_TUNNEL: u64 = 0x2;
    /// Decapsulate an L3 tunnel to L2.
    pub const L3_TUNNEL_TO_L2: u64 = 0x3;
    /// Encapsulate an L2 frame in an L3 tunnel.
    pub const L2_TO_L3_TUNNEL: u64 = 0x4;
}

/// `dest_format_struct.destination_type` (`MLX5_FLOW_DESTINATION_TYPE_*`).
pub mod flow_dest_type {
    /// A vport.
    pub const VPORT: u64 = 0;
    /// A flow table (of a higher level).
    pub const FLOW_TABLE: u64 = 1;
    /// A TIR.
    pub const TIR: u64 = 2;
}
