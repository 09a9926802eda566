//! The capability types a Linux host asks for beyond the RDMA ones, and the adapter's identity:
//! ETHERNET_OFFLOADS (cap type 1) and FLOW_TABLE (cap type 7) for QUERY_HCA_CAP, and
//! QUERY_ADAPTER (0x101). Values for a ConnectX-5 PF with the features Linux's mlx5e needs and
//! no optional ones (`linux-mlx5-probe.md` §9.1): checksum and VLAN offloads, LSO, an RSS
//! indirection table, self-loopback control; enhanced multi-packet send WQEs and UMR on an SQ;
//! no tunnels, LRO, legacy multi-packet WQEs or SWP. NIC
//! receive flow tables with a root that can be set, 64 levels of 2^16 entries; the outer L2–L4
//! match fields. These capabilities are not settable (SET_HCA_CAP refuses them as any other
//! type it does not take): MAX and CUR are the same.

use mlx5_ifc::consts::wqe_inline_mode;
use mlx5_ifc::prm::caps::{
    FlowTableFieldsSupported as Fields, FlowTableNicCap, FlowTablePropLayout as Prop,
    PerProtocolNetworkingOffloadCaps as Eth,
};
use mlx5_ifc::prm::hca::{QueryAdapterOut, QueryAdapterParamBlock};
use mlx5_ifc::{Field, Layout, LayoutError, ViewMut};

use super::cmd::{encoded, output, CmdResult, Env, Req};
use crate::model::icm_map;
use crate::model::Model;

/// The Ethernet offload capabilities (`per_protocol_networking_offload_caps`).
pub(crate) fn eth_caps() -> [u8; Eth::BYTES] {
    let mut img = [0u8; Eth::BYTES];
    let r = ViewMut::<Eth>::new(&mut img).and_then(|mut v| {
        v.set(Eth::CSUM_CAP, 1)?;
        v.set(Eth::VLAN_CAP, 1)?;
        v.set(Eth::SELF_LB_EN_MODIFIABLE, 1)?;
        // 2^18 bytes of LSO; an RSS indirection table of 2^11 entries.
        v.set(Eth::MAX_LSO_CAP, 18)?;
        v.set(Eth::RSS_IND_TBL_CAP, 11)?;
        // 2, not required: a ConnectX-5 takes the whole frame from data segments ("ConnectX-5
        // and later HW generations will report min inline mode == MLX5_INLINE_MODE_NONE",
        // Linux commit a6f402e4; real-cx5.md row 59), so mlx5e stops inlining headers.
        v.set(Eth::WQE_INLINE_MODE, wqe_inline_mode::NOT_REQUIRED)?;
        // A received frame's FCS scattered after it (`rqc.scatter_fcs`): raw packet QPs'
        // IBV_QP_CREATE_SCATTER_FCS, mlx5e's rx-fcs (real-cx5.md rows 37, 38).
        v.set(Eth::SCATTER_FCS, 1)?;
        // Send queues that execute UMR WQEs (`sqc.reg_umr`): mlx5e's ICOSQ maps its striding
        // RQs' pages with them (`mlx5e_check_fragmented_striding_rq_cap`).
        v.set(Eth::REG_UMR_SQ, 1)?;
        // Enhanced multi-packet send WQEs (opcode 0x29), as ConnectX-5 introduced them (DPDK's
        // "net/mlx5: add enhanced multi-packet send for ConnectX-5"): mlx5e then sends skbs
        // and XDP frames several to a WQE. (The legacy `multi_pkt_send_wqe`, a ConnectX-4 Lx
        // format, stays 0, and with it `sqc.allow_multi_pkt_send_wqe`.)
        v.set(Eth::ENHANCED_MULTI_PKT_SEND_WQE, 1)?;
        Ok(())
    });
    if let Err(e) = r {
        log::error!("mlx5-sim: Ethernet caps: {e}");
    }
    img
}

/// One field of [`eth_caps`].
pub(crate) fn eth_cap(f: Field<Eth>) -> u64 {
    let img = eth_caps();
    mlx5_ifc::View::<Eth>::new(&img).map_or(0, |v| v.get(f))
}

/// The outer header fields a NIC flow table can match.
const MATCH: &[Field<Fields>] = &[
    Fields::OUTER_DMAC,
    Fields::OUTER_SMAC,
    Fields::OUTER_ETHER_TYPE,
    Fields::OUTER_IP_VERSION,
    Fields::OUTER_FIRST_VID,
    Fields::OUTER_SIP,
    Fields::OUTER_DIP,
    Fields::OUTER_IP_PROTOCOL,
    Fields::OUTER_UDP_SPORT,
    Fields::OUTER_UDP_DPORT,
    Fields::OUTER_TCP_SPORT,
    Fields::OUTER_TCP_DPORT,
];

/// The flow table capabilities (`flow_table_nic_cap`): NIC receive and NIC transmit tables,
/// chained as Linux's fs_core needs (entries modified in place, a table's miss sent to a named
/// table, MODIFY_FLOW_TABLE, a settable root), flow counters in entries (COUNT) and packet
/// reformat (L2_TO_L2_TUNNEL: `encap_general_header`, headers up to 128 bytes), modify header
/// contexts (up to 32 actions), and the ICM
/// addresses of software steering's drop and allow targets.
pub(crate) fn flow_table_caps() -> Vec<u8> {
    let mut img = vec![0u8; FlowTableNicCap::BYTES];
    let r = ViewMut::<FlowTableNicCap>::new(&mut img).and_then(|mut v| {
        v.set(FlowTableNicCap::ENCAP_GENERAL_HEADER, 1)?;
        v.set(FlowTableNicCap::LOG_MAX_PACKET_REFORMAT_CONTEXT, 16)?;
        v.set(FlowTableNicCap::MAX_ENCAP_HEADER_SIZE, MAX_ENCAP_HEADER)?;
        // Software steering's firmware targets (`model/icm_map.rs`).
        v.set(
            FlowTableNicCap::SW_STEERING_NIC_RX_ACTION_DROP_ICM_ADDRESS,
            icm_map::NIC_RX_DROP,
        )?;
        v.set(
            FlowTableNicCap::SW_STEERING_NIC_TX_ACTION_DROP_ICM_ADDRESS,
            icm_map::NIC_TX_DROP,
        )?;
        v.set(
            FlowTableNicCap::SW_STEERING_NIC_TX_ACTION_ALLOW_ICM_ADDRESS,
            icm_map::NIC_TX_ALLOW,
        )?;
        for (ty, receive) in [
            (FlowTableNicCap::FLOW_TABLE_PROPERTIES_NIC_RECEIVE, true),
            (FlowTableNicCap::FLOW_TABLE_PROPERTIES_NIC_TRANSMIT, false),
        ] {
            let mut p = v.nested_mut(ty);
            // Termination tables on receive: a flow sampler's sample table
            // (`fw/sampler.rs`); rdma-core offers samplers on NIC RX, not TX.
            if receive {
                p.set(Prop::TERMINATION_TABLE, 1)?;
            }
            p.set(Prop::FT_SUPPORT, 1)?;
            p.set(Prop::MODIFY_ROOT, 1)?;
            p.set(Prop::FLOW_MODIFY_EN, 1)?;
            p.set(Prop::IDENTIFIED_MISS_TABLE_MODE, 1)?;
            p.set(Prop::FLOW_TABLE_MODIFY, 1)?;
            p.set(Prop::REFORMAT, 1)?;
            // Modify header contexts (MOD_HDR, `fw/modify_header.rs`): the count and list
            // length are the simulator's choice, not read from a ConnectX-5.
            p.set(Prop::LOG_MAX_MODIFY_HEADER_CONTEXT, 16)?;
            p.set(Prop::MAX_MODIFY_HEADER_ACTIONS, MAX_MODIFY_HEADER_ACTIONS)?;
            // Software steering, STE format v0 (`engine/ste.rs`): tables owned by software,
            // walked from their root in SW ICM.
            p.set(Prop::SW_OWNER, 1)?;
            p.set(Prop::MAX_FT_LEVEL, 63)?;
            p.set(Prop::LOG_MAX_FT_SIZE, 16)?;
            p.set(Prop::LOG_MAX_FT_NUM, 8)?;
            p.set(Prop::LOG_MAX_DESTINATION, 8)?;
            p.set(Prop::LOG_MAX_FLOW_COUNTER, 8)?;
            p.set(Prop::LOG_MAX_FLOW, 16)?;
            for half in [Prop::FT_FIELD_SUPPORT, Prop::FT_FIELD_BITMASK_SUPPORT] {
                let mut f = p.nested_mut(half);
                for &m in MATCH {
                    f.set(m, 1)?;
                }
            }
        }
        Ok::<(), LayoutError>(())
    });
    if let Err(e) = r {
        log::error!("mlx5-sim: flow table caps: {e}");
    }
    img
}

/// The most actions a modify header context takes (`max_modify_header_actions`).
const MAX_MODIFY_HEADER_ACTIONS: u64 = 32;

/// The longest header a packet reformat context takes (`max_encap_header_size`).
const MAX_ENCAP_HEADER: u64 = 128;

/// The PSID a ConnectX-5 EN card reports (16 bytes, zero-padded); Linux shows it as the board
/// id.
pub(crate) const PSID: &[u8] = b"MT_0000000080";

/// QUERY_ADAPTER (0x101): the vendor IDs and the board's PSID.
pub(crate) fn query_adapter(
    _fw: &mut Model,
    _env: &mut Env<'_>,
    _req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let mut o = output::<QueryAdapterOut>(out)?;
    let mut a = o.nested_mut(QueryAdapterOut::QUERY_ADAPTER_STRUCT);
    // Mellanox's IEEE OUI (00:02:c9) and PCI vendor ID.
    encoded(a.set(QueryAdapterParamBlock::IEEE_VENDOR_ID, 0x0002c9))?;
    encoded(a.set(QueryAdapterParamBlock::VSD_VENDOR_ID, 0x15b3))?;
    let mut psid = [0u8; 16];
    psid[..PSID.len()].copy_from_slice(PSID);
    encoded(a.set_bytes(QueryAdapterParamBlock::VSD_CONTD_PSID, &psid))?;
    Ok(())
}
