//! Device capabilities (QUERY_HCA_CAP) and the verbs attributes derived from them.
//!
//! [`Caps`] keeps the raw `cmd_hca_cap` and `roce_cap` images the firmware returned (current
//! values, after SET_HCA_CAP and INIT_HCA) and exposes the limits under their PRM names.
//! [`DeviceAttr`] is what `ibv_query_device` reports for the device, derived as the mlx5 verbs
//! stack derives it.

use mlx5_ifc::consts::{atomic_caps as ac, atomic_mode};
use mlx5_ifc::prm::caps::{AtomicCaps, CmdHcaCap, PerProtocolNetworkingOffloadCaps, RoceCap};
use mlx5_ifc::{Field, View};

/// Size of a capability image (`cmd_hca_cap`, `roce_cap`, `atomic_caps`).
pub(crate) const CAP_BYTES: usize = 256;

/// The capabilities of an initialized device.
#[derive(Clone, PartialEq, Eq)]
pub struct Caps {
    general: [u8; CAP_BYTES],
    general_max: [u8; CAP_BYTES],
    roce: [u8; CAP_BYTES],
    atomic: [u8; CAP_BYTES],
    /// `per_protocol_networking_offload_caps` (current), zeros without `eth_net_offloads`.
    eth: [u8; CAP_BYTES],
}

impl core::fmt::Debug for Caps {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Caps")
            .field("log_max_qp", &self.log_max_qp())
            .field("log_max_qp_sz", &self.log_max_qp_sz())
            .field("max_wqe_sz_sq", &self.max_wqe_sz_sq())
            .field("max_wqe_sz_rq", &self.max_wqe_sz_rq())
            .finish_non_exhaustive()
    }
}

macro_rules! cap_getters {
    ($($(#[$m:meta])* $vis:vis $name:ident: $field:ident as $ty:ty;)*) => {
        $(
            $(#[$m])*
            #[doc = concat!("`cmd_hca_cap.", stringify!($name), "` (current).")]
            $vis fn $name(&self) -> $ty {
                self.gen(CmdHcaCap::$field) as $ty
            }
        )*
    };
}

impl Caps {
    /// Capabilities from raw images: general current, general maximum, RoCE current, atomic
    /// current (all zeros when the device has no `atomic` capability).
    pub fn from_raw(
        general: [u8; CAP_BYTES],
        general_max: [u8; CAP_BYTES],
        roce: [u8; CAP_BYTES],
        atomic: [u8; CAP_BYTES],
    ) -> Self {
        Self {
            general,
            general_max,
            roce,
            atomic,
            eth: [0; CAP_BYTES],
        }
    }

    /// The same capabilities with the Ethernet offload capabilities `eth` (current).
    pub(crate) fn with_eth(mut self, eth: [u8; CAP_BYTES]) -> Self {
        self.eth = eth;
        self
    }

    /// An Ethernet offload capability (`per_protocol_networking_offload_caps`, current) by its
    /// `mlx5_ifc` field name; zero when the device has none (`eth_net_offloads` 0).
    pub fn eth(&self, name: &str) -> Option<u64> {
        View::<PerProtocolNetworkingOffloadCaps>::new(&self.eth)
            .ok()?
            .get_by_name(name)
    }

    /// An atomic capability field (`atomic_caps`, current).
    pub(crate) fn atomic_field(&self, f: Field<AtomicCaps>) -> u64 {
        View::<AtomicCaps>::new(&self.atomic).map_or(0, |v| v.get(f))
    }

    /// The `vhca_port_num` SET_ROCE_ADDRESS carries: port 1 when the device counts vHCA ports
    /// (`num_vhca_ports` > 0), else 0 — the field left unset (Linux `mlx5_core_roce_gid_set`).
    pub(crate) fn roce_port(&self) -> u8 {
        u8::from(self.num_vhca_ports() > 0)
    }

    /// The responder atomic mode an RC QP with remote atomics gets (`qpc.atomic_mode`), or `None`
    /// when the device does no atomics. Linux's rule (mlx5_ib `get_atomic_mode`): with extended
    /// atomics, the mode naming the largest operand `atomic_size_qp` allows (3 for 8 bytes, 4..=8
    /// for 16..=256 bytes); otherwise 1 (IB-spec) when compare-and-swap and fetch-and-add are
    /// both there.
    pub fn atomic_mode(&self) -> Option<u8> {
        if self.atomic() == 0 {
            return None;
        }
        let ops = self.atomic_field(AtomicCaps::ATOMIC_OPERATIONS);
        let sizes = self.atomic_field(AtomicCaps::ATOMIC_SIZE_QP) & 0x1ff;
        if ops & (ac::OPS_EXTENDED_CMP_SWAP | ac::OPS_EXTENDED_FETCH_ADD) != 0 && sizes != 0 {
            let log_max = 63 - u64::from(sizes.leading_zeros());
            return Some(log_max.max(atomic_mode::UP_TO_8B) as u8);
        }
        let both = ac::OPS_CMP_SWAP | ac::OPS_FETCH_ADD;
        (ops & both == both).then_some(atomic_mode::IB_SPEC as u8)
    }

    /// Whether 8-byte atomics are usable as `IBV_ATOMIC_HCA`: compare-and-swap and fetch-and-add
    /// of 8 bytes, and the value they return written in host order — the requester endianness
    /// mode is host (`atomic_req_8B_endianness_mode` = 1), or the host is big-endian anyway.
    /// Linux (mlx5_ib `get_atomic_caps`) reports `IB_ATOMIC_NONE` otherwise.
    pub(crate) fn atomics_host_ordered(&self) -> bool {
        let both = ac::OPS_CMP_SWAP | ac::OPS_FETCH_ADD;
        self.atomic() == 1
            && self.atomic_field(AtomicCaps::ATOMIC_OPERATIONS) & both == both
            && self.atomic_field(AtomicCaps::ATOMIC_SIZE_QP) & ac::SIZE_8_BYTES != 0
            && (self.atomic_field(AtomicCaps::ATOMIC_REQ_8B_ENDIANNESS_MODE)
                == ac::REQ_ENDIANNESS_HOST
                || cfg!(target_endian = "big"))
    }

    fn gen(&self, f: Field<CmdHcaCap>) -> u64 {
        View::<CmdHcaCap>::new(&self.general).map_or(0, |v| v.get(f))
    }

    /// A RoCE capability field.
    pub(crate) fn roce_field(&self, f: Field<RoceCap>) -> u64 {
        View::<RoceCap>::new(&self.roce).map_or(0, |v| v.get(f))
    }

    /// Any general capability by its `mlx5_ifc` field name (current value).
    pub fn get(&self, name: &str) -> Option<u64> {
        View::<CmdHcaCap>::new(&self.general)
            .ok()?
            .get_by_name(name)
    }

    cap_getters! {
        pub log_max_qp_sz: LOG_MAX_QP_SZ as u8;
        pub log_max_qp: LOG_MAX_QP as u8;
        pub log_max_srq_sz: LOG_MAX_SRQ_SZ as u8;
        pub log_max_srq: LOG_MAX_SRQ as u8;
        pub log_max_cq_sz: LOG_MAX_CQ_SZ as u8;
        pub log_max_cq: LOG_MAX_CQ as u8;
        pub log_max_eq_sz: LOG_MAX_EQ_SZ as u8;
        pub log_max_eq: LOG_MAX_EQ as u8;
        pub log_max_mkey: LOG_MAX_MKEY as u8;
        pub log_max_pd: LOG_MAX_PD as u8;
        pub log_max_ra_req_qp: LOG_MAX_RA_REQ_QP as u8;
        pub log_max_ra_res_qp: LOG_MAX_RA_RES_QP as u8;
        pub log_max_msg: LOG_MAX_MSG as u8;
        pub(crate) log_max_klm_list_size: LOG_MAX_KLM_LIST_SIZE as u8;
        pub(crate) log_max_mcg: LOG_MAX_MCG as u8;
        pub(crate) max_qp_mcg: MAX_QP_MCG as u32;
        pub log_pg_sz: LOG_PG_SZ as u8;
        pub max_wqe_sz_sq: MAX_WQE_SZ_SQ as u32;
        pub max_wqe_sz_rq: MAX_WQE_SZ_RQ as u32;
        pub max_wqe_sz_sq_dc: MAX_WQE_SZ_SQ_DC as u32;
        pub bf: BF as u8;
        pub log_bf_reg_size: LOG_BF_REG_SIZE as u8;
        pub cqe_version: CQE_VERSION as u8;
        pub(crate) port_type: PORT_TYPE as u8;
        pub(crate) num_ports: NUM_PORTS as u8;
        pub roce: ROCE as u8;
        pub rc: RC as u8;
        pub uc: UC as u8;
        pub ud: UD as u8;
        pub xrc: XRC as u8;
        pub atomic: ATOMIC as u8;
        pub cmdif_checksum: CMDIF_CHECKSUM as u8;
        pub(crate) driver_version: DRIVER_VERSION as u8;
        pub(crate) device_frequency_khz: DEVICE_FREQUENCY_KHZ as u32;
        pub(crate) imaicl: IMAICL as u8;
        pub num_vhca_ports: NUM_VHCA_PORTS as u8;
        pub sw_owner_id: SW_OWNER_ID as u8;
        pub roce_rw_supported: ROCE_RW_SUPPORTED as u8;
    }

    /// The RoCE GID table size (`roce_cap.roce_address_table_size`).
    pub(crate) fn roce_address_table_size(&self) -> u32 {
        self.roce_field(RoceCap::ROCE_ADDRESS_TABLE_SIZE) as u32
    }

    /// The verbs view of the device, as `ibv_query_device` reports it on mlx5.
    pub fn device_attr(&self) -> DeviceAttr {
        let max_send_sge = (self.max_wqe_sz_sq().min(512).saturating_sub(32)) / 16;
        let max_recv_sge = self.max_wqe_sz_rq() / 16;
        let max_qp = p2(self.log_max_qp());
        let max_qp_rd_atom = p2(self.log_max_ra_req_qp());
        DeviceAttr {
            max_qp,
            max_qp_wr: p2(self.log_max_qp_sz()),
            max_send_sge,
            max_recv_sge,
            max_sge: max_send_sge.min(max_recv_sge),
            max_sge_rd: 30,
            max_cq: p2(self.log_max_cq()),
            max_cqe: p2(self.log_max_cq_sz()).saturating_sub(1),
            max_mr: p2(self.log_max_mkey()),
            max_mw: if self.imaicl() != 0 {
                p2(self.log_max_mkey())
            } else {
                0
            },
            max_pd: p2(self.log_max_pd()),
            max_qp_rd_atom,
            max_qp_init_rd_atom: p2(self.log_max_ra_res_qp()),
            max_res_rd_atom: max_qp_rd_atom.saturating_mul(max_qp),
            max_srq: p2(self.log_max_srq()),
            max_srq_wr: p2(self.log_max_srq_sz()).saturating_sub(1),
            max_srq_sge: (self.max_wqe_sz_rq() / 16).saturating_sub(1),
            max_mr_size: u64::MAX,
            page_size_cap: !(p2(self.log_pg_sz()).wrapping_sub(1)),
            max_fast_reg_page_list_len: p2(self.log_max_klm_list_size()),
            max_mcast_grp: p2(self.log_max_mcg()),
            max_mcast_qp_attach: self.max_qp_mcg(),
            max_ah: i32::MAX as u64,
            hca_core_clock_khz: self.device_frequency_khz(),
            phys_port_cnt: self.num_ports(),
            atomic_cap: if self.atomics_host_ordered() {
                AtomicCap::Hca
            } else {
                AtomicCap::None
            },
        }
    }
}

/// Device attributes in verbs terms (`struct ibv_device_attr`), derived from the capabilities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceAttr {
    /// `1 << log_max_qp`.
    pub max_qp: u64,
    /// `1 << log_max_qp_sz`: the most WQEs of any work queue (not reachable by every QP type).
    pub max_qp_wr: u64,
    /// `(min(max_wqe_sz_sq, 512) - 32) / 16`.
    pub max_send_sge: u32,
    /// `max_wqe_sz_rq / 16`.
    pub max_recv_sge: u32,
    /// `min(max_send_sge, max_recv_sge)`.
    pub max_sge: u32,
    /// Constant 30 on mlx5.
    pub max_sge_rd: u32,
    /// `1 << log_max_cq`.
    pub max_cq: u64,
    /// `(1 << log_max_cq_sz) - 1`.
    pub max_cqe: u64,
    /// `1 << log_max_mkey`.
    pub max_mr: u64,
    /// `1 << log_max_mkey` when memory windows are supported (`imaicl`), else 0.
    pub max_mw: u64,
    /// `1 << log_max_pd`.
    pub max_pd: u64,
    /// `1 << log_max_ra_req_qp`.
    pub max_qp_rd_atom: u64,
    /// `1 << log_max_ra_res_qp`.
    pub max_qp_init_rd_atom: u64,
    /// `max_qp_rd_atom * max_qp`.
    pub max_res_rd_atom: u64,
    /// `1 << log_max_srq`.
    pub max_srq: u64,
    /// `(1 << log_max_srq_sz) - 1`.
    pub max_srq_wr: u64,
    /// `max_wqe_sz_rq / 16 - 1`.
    pub max_srq_sge: u32,
    /// `~0`.
    pub max_mr_size: u64,
    /// `~((1 << log_pg_sz) - 1)`.
    pub page_size_cap: u64,
    /// `1 << log_max_klm_list_size`.
    pub max_fast_reg_page_list_len: u64,
    /// `1 << log_max_mcg`.
    pub max_mcast_grp: u64,
    /// `max_qp_mcg`.
    pub max_mcast_qp_attach: u32,
    /// `INT_MAX`.
    pub max_ah: u64,
    /// `device_frequency_khz`.
    pub hca_core_clock_khz: u32,
    /// `num_ports`.
    pub phys_port_cnt: u8,
    /// Whether 8-byte atomics work with host-ordered results (`cmd_hca_cap.atomic` and the atomic caps' host-ordered bit).
    pub atomic_cap: AtomicCap,
}

/// `enum ibv_atomic_cap` as mlx5 reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicCap {
    /// `IBV_ATOMIC_NONE`: no atomics, or results the host would read byte-swapped.
    None,
    /// `IBV_ATOMIC_HCA`: atomic among the operations of this device.
    Hca,
}
/// `2^log` of a device-reported exponent, saturating at `u64::MAX` (an 8-bit field can hold
/// exponents past 63: no shift overflows, in debug or release).
pub(crate) const fn p2(log: u8) -> u64 {
    if log >= 64 {
        u64::MAX
    } else {
        1u64 << log
    }
}
