//! Device profiles: the capability images, firmware version, page demand and MAC a simulated
//! device reports.
//!
//! Built-in profiles ([`Profile::names`]): `cx5` (a ConnectX-5 PF, values derived from public
//! capability dumps, see `mlx5-datapath-sizing.md` §5.4/§6), `cx5-tight` (small queues and object
//! counts, for limit tests), `cx5-sq512` (`max_wqe_sz_sq` 512) and `cx5-vf` (the ConnectX-5's
//! virtual function: PCI 15b3:1018, 11 MSI-X vectors, no e-switch; [`Profile::as_vf`]). Each asks for pages at run
//! time as a PF's firmware does (a page of ICM per created object, spare pages offered back after
//! a destroy, seeded requests now and then); [`Profile::with_page_policy`] changes that.
//!
//! A JSON profile is an object whose keys are `cmd_hca_cap` field names (values: integers),
//! `roce_cap.<field>` for RoCE capability fields, `atomic_caps.<field>` for atomic capability
//! fields, and the profile settings `name` (string;
//! default `"custom"`), `base` (a built-in profile to start from instead of `cx5`),
//! `_boot_pages`, `_init_pages` (integers), `_mac` (`"02:c5:5a:00:00:01"`), `_vf` (1: a
//! virtual function) and `_mac_unset` (1: the hypervisor assigned no MAC). For example
//! `{"name": "small", "log_max_qp": 4, "roce_cap.roce_address_table_size": 8}`.

use std::path::Path;

use mlx5_ifc::prm::caps::{AtomicCaps as A, CmdHcaCap as C, RoceCap as R};
use mlx5_ifc::prm::memic::DeviceMemCap as D;
use mlx5_ifc::prm::odp::{OdpCap, OdpPerTransportServiceCap as T, OdpSchemeCap as S};
use mlx5_ifc::prm::pacing::QosCap as Q;
use mlx5_ifc::{Field, Layout, LayoutError, Nested, View, ViewMut};

use crate::model::pages::{PagePolicy, RandomPages};
use crate::SimError;

/// MSI-X vectors a physical function has (an EQ's `intr` must be below the function's
/// [`Profile::msix_vectors`]).
pub const MSIX_VECTORS: u64 = 64;

/// MSI-X vectors of a virtual function. Firmware gives each VF `NUM_VF_MSIX` vectors
/// (mlxconfig; 11 is the default we recall for ConnectX-5, not verified in the reference): a
/// VF has far fewer than its PF's 64, and Linux sizes its completion EQs by them.
const VF_MSIX_VECTORS: u16 = 11;

/// A simulated device model.
#[derive(Clone, Debug)]
pub struct Profile {
    name: String,
    hca_cap: [u8; C::BYTES],
    roce_cap: [u8; R::BYTES],
    atomic_cap: [u8; A::BYTES],
    odp_cap: [u8; OdpCap::BYTES],
    qos_cap: [u8; Q::BYTES],
    dev_mem_cap: [u8; D::BYTES],
    fw: (u16, u16, u16),
    boot_pages: u32,
    init_pages: u32,
    mac: [u8; 6],
    page_policy: PagePolicy,
    /// A virtual function (PCI device 0x1018) rather than the physical one (0x1017).
    vf: bool,
    /// The hypervisor assigned no MAC: QUERY_NIC_VPORT_CONTEXT reports `permanent_address`
    /// zero (Linux then picks a random one and programs it into the vport's address list).
    mac_unset: bool,
}

/// `cmd_hca_cap` (MAX) of the ConnectX-5 profile.
const CX5_GENERAL: &[(Field<C>, u64)] = &[
    (C::LOG_MAX_SRQ_SZ, 15),
    (C::LOG_MAX_QP_SZ, 15),
    (C::LOG_MAX_QP, 18),
    (C::LOG_MAX_SRQ, 23),
    (C::LOG_MAX_CQ_SZ, 22),
    (C::LOG_MAX_CQ, 24),
    (C::LOG_MAX_EQ_SZ, 22),
    (C::LOG_MAX_MKEY, 24),
    (C::FAST_TEARDOWN, 1),
    (C::LOG_MAX_EQ, 7),
    (C::LOG_MAX_MRW_SZ, 64),
    (C::FORCE_TEARDOWN, 1),
    (C::NULL_MKEY, 1),
    // On-demand paging (`pg`): MTT entries' read/write bits name the present pages; a WQE or an
    // RDMA access that meets an absent one raises a PAGE_FAULT event and waits for
    // PAGE_FAULT_RESUME (issue #28; the operations per transport are `CX5_ODP`).
    (C::PG, 1),
    // Implicit ODP (mlx5_ib reports ODP_SUPPORT_IMPLICIT with `fixed_buffer_size`, `null_mkey`
    // and `umr_extended_translation_offset`): KSM parent keys over the whole address space,
    // their entities made present by UMR, an absent one a fault naming the parent.
    (C::FIXED_BUFFER_SIZE, 1),
    (C::UMR_EXTENDED_TRANSLATION_OFFSET, 1),
    (C::LOG_MAX_KLM_LIST_SIZE, 16),
    (C::LOG_MAX_RA_REQ_DC, 4),
    (C::LOG_MAX_RA_RES_DC, 4),
    (C::RELEASE_ALL_PAGES, 1),
    (C::LOG_MAX_RA_REQ_QP, 4),
    (C::LOG_MAX_RA_RES_QP, 4),
    (C::GID_TABLE_SIZE, 0),
    (C::PKEY_TABLE_SIZE, 0),
    (C::LOCAL_CA_ACK_DELAY, 16),
    (C::PORT_TYPE, 1),
    (C::NUM_PORTS, 1),
    (C::LOG_MAX_MSG, 30),
    (C::MAX_TC, 8),
    (C::STAT_RATE_SUPPORT, 0),
    (C::CQE_VERSION, 1),
    (C::CMDIF_CHECKSUM, 1),
    // Dynamically Connected transport (DCIs: CREATE_QP `st` 5; DCTs: CREATE_DCT and the rest),
    // as a ConnectX-5 has it (real-cx5.md row 64); its wire format is the simulator's own
    // (fabric::bth, docs/fields.md "DC").
    (C::DCT, 1),
    (C::ETH_NET_OFFLOADS, 1),
    (C::NIC_FLOW_TABLE, 1),
    // Flow counters (ALLOC_FLOW_COUNTER, an entry's COUNT): 65 535 single counters, no bulks
    // (`flow_counter_bulk_alloc` 0: Linux then allocates its counters one by one).
    (C::MAX_FLOW_COUNTER_15_0, 0xffff),
    (C::ROCE, 1),
    (C::ATOMIC, 1),
    (C::CQ_OI, 1),
    // Device memory (MEMIC, `ibv_alloc_dm`): `device_mem_cap` is CX5_DEV_MEM.
    (C::DEVICE_MEMORY, 1),
    // QoS: packet pacing only (`qos_cap`: CX5_QOS) — rate-limited send queues, the rate kept on
    // the simulated wire.
    (C::QOS, 1),
    // P_Key and Q_Key violation counters: a packet whose BTH P_Key does not match the QP's, a
    // datagram with another Q_Key, is dropped and counted (DatapathCounters::pkey_violations,
    // qkey_violations); mlx5_ib reports BAD_PKEY_CNTR and BAD_QKEY_CNTR (real-cx5.md).
    // PCI write end padding (`wq.end_padding_mode` 1: whole 64-byte lines at a receive's end);
    // mlx5_ib reports PCI_WRITE_END_PADDING (real-cx5.md row 38).
    (C::END_PAD, 1),
    // Delay drop (`rq_delay_drop`, with the general events that carry its timeout): an RQ with
    // `delay_drop_en` and no WQE holds frames until one is posted or the timeout; mlx5_ib
    // reports the raw packet cap DELAY_DROP (real-cx5.md row 37).
    (C::RQ_DELAY_DROP, 1),
    (C::GENERAL_NOTIFICATION_EVENT, 1),
    (C::PKV, 1),
    (C::QKV, 1),
    // Automatic path migration: an ARMED QP moves to its alternate path when its retries run
    // out on the primary one (a PATH_MIG event), or when software asks for MIGRATED;
    // mlx5_ib reports AUTO_PATH_MIG (real-cx5.md).
    (C::APM, 1),
    (C::CQ_RESIZE, 1),
    // Striding (multi-packet) RQs: mlx5e's MPWQE RQ, its pages mapped by UMR WQEs from a send
    // queue (`umr_ptr_rlky`: a UMR's translations may come through the reserved lkey), 8 to
    // 2^16 strides per WQE (`ext_stride_num_range`: a real ConnectX-5's mlx5e uses 128 strides
    // of 2048 bytes, "StrdRq(1) RqSz(8) StrdSz(2048)", real-cx5.md row 60).
    (C::STRIDING_RQ, 1),
    // CQE compression (`cqc.cqe_comp_en`): an Ethernet RQ's receive completions made together
    // are written as sessions of mini CQEs (events::zip); at most 64 per session, the mini CQE
    // formats HASH, CSUM and CSUM_STRIDX, 64- and 128-byte CQEs (mlx5dv's sample device in
    // rdma-core's pyverbs documentation shows these; docs/fields.md).
    (C::CQE_COMPRESSION, 1),
    (C::CQE_COMPRESSION_128, 1),
    (C::MINI_CQE_RESP_STRIDE_INDEX, 1),
    (C::CQE_COMPRESSION_MAX_NUM, 64),
    (C::UMR_PTR_RLKY, 1),
    (C::EXT_STRIDE_NUM_RANGE, 1),
    // Memory windows (type 1 and 2B: KLM keys bound by UMR WQEs); mlx5_ib reports MEM_WINDOW,
    // MEM_WINDOW_TYPE_2B and `max_mw` = 2^log_max_mkey from it (real-cx5.md rows 12, 24).
    (C::IMAICL, 1),
    // Multicast loopback blocking per QP (`IBV_QP_CREATE_BLOCK_SELF_MCAST_LB`).
    (C::BLOCK_LB_MC, 1),
    (C::CQ_MODERATION, 1),
    (C::XRC, 1),
    (C::UD, 1),
    (C::UC, 1),
    (C::RC, 1),
    (C::UAR_SZ, 13),
    (C::LOG_PG_SZ, 12),
    (C::BF, 1),
    (C::DRIVER_VERSION, 1),
    (C::LOG_BF_REG_SIZE, 9),
    (C::MAX_WQE_SZ_SQ, 1024),
    (C::MAX_WQE_SZ_RQ, 512),
    (C::MAX_WQE_SZ_SQ_DC, 512),
    (C::MAX_QP_MCG, 240),
    (C::LOG_MAX_MCG, 21),
    (C::LOG_MAX_TRANSPORT_DOMAIN, 20),
    // 2^23, as firmware 16.31 and later report it (16.23 reported 2^24; real-cx5.md row 18).
    (C::LOG_MAX_PD, 23),
    (C::LOG_MAX_XRCD, 24),
    (C::LOG_MAX_RQ, 23),
    (C::LOG_MAX_SQ, 23),
    (C::LOG_MAX_TIR, 16),
    (C::LOG_MAX_TIS, 16),
    (C::LOG_MAX_RMP, 23),
    // 2^20 RQ tables (`max_rwq_indirection_tables` 1048576 on firmware 16.31 and 16.32,
    // real-cx5.md row 40; older stacks showed 65536).
    (C::LOG_MAX_RQT, 20),
    // 2048 entries per RQ table (`max_rwq_indirection_table_size` on every ConnectX-5 dump,
    // real-cx5.md row 41; QUERY_ADAPTER's `rss_ind_tbl_cap` 11 says the same).
    (C::LOG_MAX_RQT_SIZE, 11),
    // Queue counter sets (ALLOC_Q_COUNTER): mlx5e takes two, mlx5_ib one per port.
    (C::MAX_QP_CNT, 128),
    (C::ROCE_RW_SUPPORTED, 1),
    (C::LOG_MAX_WQ_SZ, 20),
    (C::LOG_MAX_VLAN_LIST, 12),
    (C::LOG_MAX_CURRENT_MC_LIST, 12),
    (C::LOG_MAX_CURRENT_UC_LIST, 9),
    (C::MAX_NUM_EQS, 0),
    (C::LOG_MAX_L2_TABLE, 15),
    (C::LOG_UAR_PAGE_SZ, 0),
    (C::DEVICE_FREQUENCY_KHZ, 156_250),
    (C::NUM_OF_UARS_PER_PAGE, 1),
    (C::NUM_VHCA_PORTS, 1),
    (C::SW_OWNER_ID, 1),
    // DevX: user contexts (CREATE_UCTX; their uids on every command, objects owned by the uid
    // that made them) and user memory (CREATE_UMEM; DevX CQs and QPs in umems). How many a real
    // ConnectX-5 allows is not in any public dump: 2^10 contexts, 2^20 umems here. No
    // `uctx_cap` bits (their firmware meaning is unknown).
    (C::LOG_MAX_UCTX, 10),
    // Force-loopback RC QPs with RoCE disabled (rdma-core 56.1 reads it here too; `roce_cap`).
    (C::FL_RC_QP_WHEN_ROCE_DISABLED, 1),
    // General objects: SW ICM (type 8, `device_mem_cap`'s regions; Linux's DM verbs and SW ICM
    // allocator need it) and flow samplers (type 0x20: rdma-core's DR samples on a ConnectX-5,
    // with a restore table in the FDB for its format v0).
    (
        C::GENERAL_OBJ_TYPES,
        mlx5_ifc::consts::general_obj_types::SW_ICM
            | mlx5_ifc::consts::general_obj_types::FLOW_SAMPLER,
    ),
    (C::LOG_MAX_UMEM, 20),
];

/// `roce_cap` (MAX) of the ConnectX-5 profile.
const CX5_ROCE: &[(Field<R>, u64)] = &[
    (R::L3_TYPE, 0x6),
    (R::ROCE_VERSION, 0x5),
    (R::R_ROCE_DEST_UDP_PORT, 4791),
    (R::R_ROCE_MAX_SRC_UDP_PORT, 0xffff),
    (R::R_ROCE_MIN_SRC_UDP_PORT, 0xc000),
    // 255 GIDs (`gid_tbl_len` of the ConnectX-5 dumps, real-cx5.md row 55).
    (R::ROCE_ADDRESS_TABLE_SIZE, 255),
    (R::SW_R_ROCE_SRC_UDP_PORT, 1),
    // Force-loopback RC QPs (path `fl`: requests to `remote_qpn` of the same function, never
    // the wire), whatever `roce_en`: what mlx5dv direct rules' send ring needs (rdma-core's
    // `dr_send_allow_fl`).
    (R::FL_RC_QP_WHEN_ROCE_ENABLED, 1),
    (R::FL_RC_QP_WHEN_ROCE_DISABLED, 1),
];

/// `atomic_caps` (MAX) of the ConnectX-5 profile: 8-byte compare-and-swap and fetch-and-add,
/// masked (extended) compare-and-swap and fetch-and-add of 4, 8, 16 and 32 bytes
/// (`engine/masked_atomic.rs`), and the host-order requester mode. A ConnectX-5's MLNX_OFED
/// dump shows "masked_log_atomic_arg_sizes (mask) 0x3c" — the AND of `atomic_size_qp` and
/// `atomic_size_dc` — and EXT_ATOMICS / EXP_MASKED_ATOMICS, which need all four operation
/// bits (real-cx5.md row 23; docs/fields.md "Masked atomics"). Linux then gives RC QPs with
/// remote atomics `atomic_mode` 5 (up to 32 bytes).
const CX5_ATOMIC: &[(Field<A>, u64)] = &[
    (A::SUPPORTED_ATOMIC_REQ_8B_ENDIANNESS_MODE_1, 1),
    (A::ATOMIC_OPERATIONS, 0xf),
    (A::ATOMIC_SIZE_QP, 0x3c),
    (A::ATOMIC_SIZE_DC, 0x3c),
];

/// `qos_cap` of the ConnectX-5 profile: packet pacing with a table of 128 rates (Linux: "Rate
/// limit: 127 rates are supported"), 1 kbit/s to the port's 100 Gbit/s (real-cx5.md rows 44 and
/// 63: a 100 GbE ConnectX-5 reports `qp_rate_limit_max` 100000000 kbps, min 1). No burst bound
/// or typical packet size, no scheduling elements (eswitch or NIC SQ scheduling).
const CX5_QOS: &[(Field<Q>, u64)] = &[
    (Q::PACKET_PACING, 1),
    (Q::PACKET_PACING_MAX_RATE, 100_000_000),
    (Q::PACKET_PACING_MIN_RATE, 1),
    (Q::PACKET_PACING_RATE_TABLE_SIZE, 128),
];

/// Size of BAR0 (a ConnectX-5's is 32 MiB).
pub const BAR_SIZE: u64 = 32 << 20;

/// The size of the MEMIC window and of the device memory a ConnectX-5 offers: 128 KiB
/// (`max_dm_size` 131072 on every dump, real-cx5.md row 47).
pub(crate) const MEMIC_BYTES: u64 = 128 << 10;

/// `device_mem_cap` of the ConnectX-5 profile: MEMIC (no MEMIC operations), a window of
/// [`MEMIC_BYTES`] at the top of BAR0 (where no UAR page is handed out), allocations aligned
/// up to 4 KiB (64 << 6); and SW ICM for software steering (`model/icm.rs`): 128 MiB of
/// steering ICM and 1 MiB of header-modify ICM, each aligned to its size, below 2^40 and above
/// the firmware's own ICM, allocated in 4 KiB blocks. Where the real card puts any of it, and
/// its sizes, are not public; these satisfy every check of rdma-core 44/56 and Linux 6.1
/// (steering ≥ 2^26, header modify ≥ 2^15).
const CX5_DEV_MEM: &[(Field<D>, u64)] = &[
    (D::MEMIC, 1),
    (D::LOG_MAX_MEMIC_ADDR_ALIGNMENT, 6),
    (D::MEMIC_BAR_START_ADDR, BAR_SIZE - MEMIC_BYTES),
    (D::MEMIC_BAR_SIZE, MEMIC_BYTES),
    (D::MAX_MEMIC_SIZE, MEMIC_BYTES),
    (D::STEERING_SW_ICM_START_ADDRESS, 0x40_0000_0000),
    (D::LOG_STEERING_SW_ICM_SIZE, 27),
    (D::HEADER_MODIFY_SW_ICM_START_ADDRESS, 0x48_0000_0000),
    (D::LOG_HEADER_MODIFY_SW_ICM_SIZE, 20),
    (D::LOG_SW_ICM_ALLOC_GRANULARITY, 12),
];

/// A transport's operations in `odp_cap`'s transport page-fault scheme.
type OdpOp = (Nested<S, T>, Field<T>);

/// `odp_cap` (MAX) of the ConnectX-5 profile: the operations that may take a page fault, as
/// every ConnectX-5 dump reports them (real-cx5.md row 34) — RC: SEND, RECV, WRITE, READ, SRQ;
/// UD: SEND; XRC: SEND, WRITE, READ, SRQ. No atomics (no dump shows them), nothing for UC or DC.
const CX5_ODP: &[OdpOp] = &[
    (S::RC_ODP_CAPS, T::SEND),
    (S::RC_ODP_CAPS, T::RECEIVE),
    (S::RC_ODP_CAPS, T::WRITE),
    (S::RC_ODP_CAPS, T::READ),
    (S::RC_ODP_CAPS, T::SRQ_RECEIVE),
    (S::UD_ODP_CAPS, T::SEND),
    (S::XRC_ODP_CAPS, T::SEND),
    (S::XRC_ODP_CAPS, T::WRITE),
    (S::XRC_ODP_CAPS, T::READ),
    (S::XRC_ODP_CAPS, T::SRQ_RECEIVE),
];

/// The `odp_cap` operations software turns on with SET_HCA_CAP (what Linux's mlx5_core raises
/// to MAX at load, `handle_hca_cap_odp`): CUR starts without them.
const ODP_SETTABLE: &[OdpOp] = &[
    (S::UD_ODP_CAPS, T::SRQ_RECEIVE),
    (S::RC_ODP_CAPS, T::SRQ_RECEIVE),
    (S::XRC_ODP_CAPS, T::SRQ_RECEIVE),
    (S::XRC_ODP_CAPS, T::SEND),
    (S::XRC_ODP_CAPS, T::RECEIVE),
    (S::XRC_ODP_CAPS, T::WRITE),
    (S::XRC_ODP_CAPS, T::READ),
    (S::XRC_ODP_CAPS, T::ATOMIC),
    (S::DC_ODP_CAPS, T::SRQ_RECEIVE),
];

/// Sets (or clears) each operation of `ops` in the `odp_cap` image `buf`.
fn odp_ops(buf: &mut [u8], ops: &[OdpOp], on: bool) -> Result<(), LayoutError> {
    let mut v = ViewMut::<OdpCap>::new(buf)?;
    let mut scheme = v.nested_mut(OdpCap::TRANSPORT_PAGE_FAULT_SCHEME_CAP);
    for &(transport, op) in ops {
        scheme.nested_mut(transport).set(op, u64::from(on))?;
    }
    Ok(())
}

/// How a PF's firmware asks for pages at run time, which every built-in profile does: each
/// CQ, QP, SRQ/RMP and memory key needs a page of ICM the driver must give while the create
/// waits; after a destroy the firmware offers back what it holds beyond 32 spare pages; and
/// about one command in fifty is followed by a seeded request to give or take up to 8 pages.
fn pf_pages() -> PagePolicy {
    PagePolicy {
        icm_pages_per_object: 1,
        spare_pages: Some(32),
        random: Some(RandomPages {
            seed: 0x5eed_c0de,
            per_mille: 20,
            max_pages: 8,
        }),
    }
}

/// The `cx5-tight` overrides.
const TIGHT: &[(Field<C>, u64)] = &[
    (C::LOG_MAX_QP_SZ, 10),
    (C::LOG_MAX_CQ_SZ, 10),
    (C::LOG_MAX_SRQ_SZ, 10),
    (C::LOG_MAX_QP, 8),
    (C::LOG_MAX_CQ, 8),
    (C::LOG_MAX_PD, 4),
    (C::LOG_MAX_MKEY, 8),
    (C::LOG_MAX_SRQ, 4),
];

/// The `cx5-sq512` overrides.
const SQ512: &[(Field<C>, u64)] = &[(C::MAX_WQE_SZ_SQ, 512)];

const NAMES: &[&str] = &["cx5", "cx5-tight", "cx5-sq512", "cx5-vf"];

fn apply<L: Layout>(buf: &mut [u8], values: &[(Field<L>, u64)]) -> Result<(), LayoutError> {
    let mut v = ViewMut::<L>::new(buf)?;
    for &(f, value) in values {
        v.set(f, value)?;
    }
    Ok(())
}

fn set_named<L: Layout>(
    buf: &mut [u8],
    key: &str,
    field: &str,
    value: u64,
) -> Result<(), SimError> {
    let unknown = || SimError::UnknownProfileKey {
        key: key.to_string(),
    };
    let mut v = ViewMut::<L>::new(buf).map_err(|_| unknown())?;
    match v.set_by_name(field, value) {
        Ok(true) => Ok(()),
        Ok(false) => Err(unknown()),
        Err(LayoutError::Overflow { width, .. }) => Err(SimError::ProfileValueTooWide {
            key: key.to_string(),
            value,
            width,
        }),
        Err(_) => Err(unknown()),
    }
}

fn integer(key: &str, v: &serde_json::Value) -> Result<u64, SimError> {
    v.as_u64().ok_or_else(|| SimError::ProfileValueType {
        key: key.to_string(),
        expected: "a non-negative integer",
    })
}

fn parse_mac(key: &str, v: &serde_json::Value) -> Result<[u8; 6], SimError> {
    let bad = || SimError::ProfileValueType {
        key: key.to_string(),
        expected: "a MAC address \"xx:xx:xx:xx:xx:xx\"",
    };
    let s = v.as_str().ok_or_else(bad)?;
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut mac {
        *b = u8::from_str_radix(parts.next().ok_or_else(bad)?, 16).map_err(|_| bad())?;
    }
    if parts.next().is_some() {
        return Err(bad());
    }
    Ok(mac)
}

impl Profile {
    fn build(name: &str, general: &[&[(Field<C>, u64)]]) -> Profile {
        let mut p = Profile {
            name: name.to_string(),
            hca_cap: [0; C::BYTES],
            roce_cap: [0; R::BYTES],
            atomic_cap: [0; A::BYTES],
            odp_cap: [0; OdpCap::BYTES],
            qos_cap: [0; Q::BYTES],
            dev_mem_cap: [0; D::BYTES],
            fw: (16, 35, 2000),
            boot_pages: 16,
            init_pages: 64,
            mac: [0x02, 0xc5, 0x5a, 0x00, 0x00, 0x01],
            page_policy: pf_pages(),
            vf: false,
            mac_unset: false,
        };
        for values in general {
            if let Err(e) = apply::<C>(&mut p.hca_cap, values) {
                log::error!("mlx5-sim: built-in profile {name}: {e}");
            }
        }
        if let Err(e) = apply::<R>(&mut p.roce_cap, CX5_ROCE) {
            log::error!("mlx5-sim: built-in profile {name}: {e}");
        }
        if let Err(e) = apply::<A>(&mut p.atomic_cap, CX5_ATOMIC) {
            log::error!("mlx5-sim: built-in profile {name}: {e}");
        }
        if let Err(e) = odp_ops(&mut p.odp_cap, CX5_ODP, true) {
            log::error!("mlx5-sim: built-in profile {name}: {e}");
        }
        if let Err(e) = apply::<Q>(&mut p.qos_cap, CX5_QOS) {
            log::error!("mlx5-sim: built-in profile {name}: {e}");
        }
        if let Err(e) = apply::<D>(&mut p.dev_mem_cap, CX5_DEV_MEM) {
            log::error!("mlx5-sim: built-in profile {name}: {e}");
        }
        p
    }

    /// A ConnectX-5 PF (`cx5`): FW 16.35.2000, 16 boot + 64 init pages, MAC 02:c5:5a:00:00:01.
    pub fn connectx5() -> Profile {
        Self::build("cx5", &[CX5_GENERAL])
    }

    /// A built-in profile by name (see [`Profile::names`]).
    pub fn by_name(name: &str) -> Option<Profile> {
        match name {
            "cx5" => Some(Self::connectx5()),
            "cx5-tight" => Some(Self::build("cx5-tight", &[CX5_GENERAL, TIGHT])),
            "cx5-sq512" => Some(Self::build("cx5-sq512", &[CX5_GENERAL, SQ512])),
            "cx5-vf" => {
                let mut p = Self::connectx5().as_vf(false);
                p.name = "cx5-vf".to_string();
                Some(p)
            }
            _ => None,
        }
    }

    /// The names of the built-in profiles.
    pub fn names() -> &'static [&'static str] {
        NAMES
    }

    /// A profile from JSON (see the module documentation); absent keys keep the base values.
    pub fn from_json_str(s: &str) -> Result<Profile, SimError> {
        let v: serde_json::Value = serde_json::from_str(s).map_err(|e| SimError::ProfileJson {
            reason: e.to_string(),
        })?;
        let obj = v.as_object().ok_or_else(|| SimError::ProfileJson {
            reason: "not an object".to_string(),
        })?;
        let mut p = match obj.get("base") {
            None => Self::connectx5(),
            Some(b) => {
                let name = b.as_str().ok_or_else(|| SimError::ProfileValueType {
                    key: "base".to_string(),
                    expected: "a built-in profile name",
                })?;
                Self::by_name(name).ok_or_else(|| SimError::UnknownProfile {
                    name: name.to_string(),
                })?
            }
        };
        p.name = "custom".to_string();
        for (key, val) in obj {
            match key.as_str() {
                "base" => {}
                "name" => {
                    p.name = val
                        .as_str()
                        .ok_or_else(|| SimError::ProfileValueType {
                            key: key.clone(),
                            expected: "a string",
                        })?
                        .to_string();
                }
                "_boot_pages" | "_init_pages" => {
                    let value = integer(key, val)?;
                    let n = u32::try_from(value).map_err(|_| SimError::ProfileValueTooWide {
                        key: key.clone(),
                        value,
                        width: 32,
                    })?;
                    if key == "_boot_pages" {
                        p.boot_pages = n;
                    } else {
                        p.init_pages = n;
                    }
                }
                "_mac" => p.mac = parse_mac(key, val)?,
                "_vf" => p.vf = integer(key, val)? != 0,
                "_mac_unset" => p.mac_unset = integer(key, val)? != 0,
                k => {
                    let value = integer(k, val)?;
                    if let Some(field) = k.strip_prefix("roce_cap.") {
                        set_named::<R>(&mut p.roce_cap, k, field, value)?
                    } else if let Some(field) = k.strip_prefix("atomic_caps.") {
                        set_named::<A>(&mut p.atomic_cap, k, field, value)?
                    } else {
                        set_named::<C>(&mut p.hca_cap, k, k, value)?
                    }
                }
            }
        }
        Ok(p)
    }

    /// A profile from a JSON file.
    pub fn from_json_file(path: &Path) -> Result<Profile, SimError> {
        let text = std::fs::read_to_string(path).map_err(|e| SimError::ProfileFile {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        Self::from_json_str(&text)
    }

    /// The profile's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The `cmd_hca_cap` image QUERY_HCA_CAP returns for MAX (and the initial CUR).
    pub fn hca_cap_max(&self) -> &[u8; 256] {
        &self.hca_cap
    }

    /// The `roce_cap` image (MAX; CUR starts from [`Profile::roce_cap_initial`]).
    pub fn roce_cap(&self) -> &[u8; 256] {
        &self.roce_cap
    }

    /// The `roce_cap` image CUR starts from: MAX with the settings software turns on cleared
    /// (`sw_r_roce_src_udp_port`: until it is set, the firmware picks UDP source ports).
    pub fn roce_cap_initial(&self) -> [u8; 256] {
        let mut i = self.roce_cap;
        if let Ok(mut v) = ViewMut::<R>::new(&mut i) {
            let _ = v.set(R::SW_R_ROCE_SRC_UDP_PORT, 0);
        }
        i
    }

    /// The `atomic_caps` image (MAX, and the initial CUR).
    pub fn atomic_cap(&self) -> &[u8; 256] {
        &self.atomic_cap
    }

    /// The `odp_cap` image (MAX; all zero without `pg`).
    pub fn odp_cap(&self) -> [u8; 256] {
        if self.general_cap(C::PG) == 0 {
            return [0; 256];
        }
        self.odp_cap
    }

    /// The `odp_cap` image CUR starts from: MAX without the operations software turns on.
    pub fn odp_cap_initial(&self) -> [u8; 256] {
        let mut i = self.odp_cap();
        if let Err(e) = odp_ops(&mut i, ODP_SETTABLE, false) {
            log::error!("mlx5-sim: odp_cap: {e}");
        }
        i
    }

    /// The `qos_cap` image (MAX and CUR; all zero without `qos`).
    pub fn qos_cap(&self) -> [u8; 256] {
        if self.general_cap(C::QOS) == 0 {
            return [0; 256];
        }
        self.qos_cap
    }

    /// The `device_mem_cap` image (MAX and CUR; all zero without `device_memory`).
    pub fn dev_mem_cap(&self) -> [u8; 256] {
        if self.general_cap(C::DEVICE_MEMORY) == 0 {
            return [0; 256];
        }
        self.dev_mem_cap
    }

    /// One `device_mem_cap` field.
    pub fn dev_mem_field(&self, f: Field<D>) -> u64 {
        View::<D>::new(&self.dev_mem_cap()).map_or(0, |v| v.get(f))
    }

    /// One `qos_cap` field.
    pub fn qos_field(&self, f: Field<Q>) -> u64 {
        View::<Q>::new(&self.qos_cap()).map_or(0, |v| v.get(f))
    }

    /// One `cmd_hca_cap` (MAX) field.
    pub fn general_cap(&self, f: Field<C>) -> u64 {
        View::<C>::new(&self.hca_cap).map_or(0, |v| v.get(f))
    }

    /// One `roce_cap` (MAX) field.
    pub fn roce_field(&self, f: Field<R>) -> u64 {
        View::<R>::new(&self.roce_cap).map_or(0, |v| v.get(f))
    }

    /// Firmware version: major, minor, subminor.
    pub fn fw_version(&self) -> (u16, u16, u16) {
        self.fw
    }

    /// Pages QUERY_PAGES asks for at boot (op_mod 1).
    pub fn boot_pages(&self) -> u32 {
        self.boot_pages
    }

    /// Further pages QUERY_PAGES asks for before INIT_HCA (op_mod 2).
    pub fn init_pages(&self) -> u32 {
        self.init_pages
    }

    /// The port's permanent MAC address.
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// The same profile with another permanent MAC (each NIC on a fabric needs its own).
    pub fn with_mac(mut self, mac: [u8; 6]) -> Self {
        self.mac = mac;
        self
    }

    /// The same profile as a virtual function (PCI 15b3:1018, 11 MSI-X vectors); `mac_unset`: the hypervisor assigned it no MAC (`permanent_address` reads
    /// zero; the profile's MAC stays the port's identity on the fabric).
    pub fn as_vf(mut self, mac_unset: bool) -> Self {
        self.vf = true;
        self.mac_unset = mac_unset;
        self
    }

    /// Whether the device is a virtual function.
    pub fn is_vf(&self) -> bool {
        self.vf
    }

    /// Whether the hypervisor left the function's MAC unassigned.
    pub fn mac_unset(&self) -> bool {
        self.mac_unset
    }

    /// The PCI device ID: 0x1017 (ConnectX-5), 0x1018 (its virtual function).
    pub fn pci_device_id(&self) -> u16 {
        if self.vf {
            0x1018
        } else {
            0x1017
        }
    }

    /// The MSI-X vectors of the function.
    pub fn msix_vectors(&self) -> u16 {
        if self.vf {
            VF_MSIX_VECTORS
        } else {
            MSIX_VECTORS as u16
        }
    }

    /// How the firmware asks for pages at run time (default: never; see [`PagePolicy`]).
    pub fn page_policy(&self) -> &PagePolicy {
        &self.page_policy
    }

    /// The same profile with another run-time page policy.
    pub fn with_page_policy(mut self, policy: PagePolicy) -> Self {
        self.page_policy = policy;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_tables_fit_their_fields() {
        for table in [CX5_GENERAL, TIGHT, SQ512] {
            apply::<C>(&mut [0; C::BYTES], table).unwrap();
        }
        apply::<R>(&mut [0; R::BYTES], CX5_ROCE).unwrap();
        for name in Profile::names() {
            assert_eq!(Profile::by_name(name).unwrap().name(), *name);
        }
        let p = Profile::connectx5();
        for &(f, v) in CX5_GENERAL {
            assert_eq!(p.general_cap(f), v, "{}", f.info.name);
        }
        assert_eq!(
            Profile::by_name("cx5-tight")
                .unwrap()
                .general_cap(C::LOG_MAX_PD),
            4
        );
        assert_eq!(
            Profile::by_name("cx5-sq512")
                .unwrap()
                .general_cap(C::MAX_WQE_SZ_SQ),
            512
        );
    }
}
