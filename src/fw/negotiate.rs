//! Capability negotiation before INIT_HCA (PRM "HCA Capabilities", QUERY/SET_HCA_CAP), and the
//! current capabilities read back after it.
//!
//! The values follow what Linux's mlx5_core writes in the same step (`handle_hca_cap`,
//! `handle_hca_cap_atomic`, `handle_hca_cap_roce` in `main.c`); docs/fields.md lists each field
//! with its rule. The decisions are pure functions of the images, so tests can check them
//! without a device.

use mlx5_ifc::consts::{atomic_caps as ac, cap_type, cmdif_checksum};
use mlx5_ifc::prm::caps::{AtomicCaps, CmdHcaCap, RoceCap};
use mlx5_ifc::{View, ViewMut};

use crate::error::Result;
use crate::fw::caps::{Caps, CAP_BYTES};
use crate::fw::cmdq::CmdQueue;
use crate::fw::hca;
use crate::io::platform::Platform;

/// A capability image.
pub(crate) type Image = [u8; CAP_BYTES];

/// The general capabilities to set: the current image with the driver's choices.
///
/// * `cmdif_checksum` 0 (disabled), `pkey_table_size` 0 (one P_Key on Ethernet), `uar_4k` 0 and
///   `log_uar_page_sz` 0 (4 KiB UAR pages, one per system page);
/// * `log_max_qp`: the configured bound, at most MAX;
/// * `roce` 1 only when the current `roce_rw_supported` says the field is writable and MAX has
///   RoCE; otherwise the current value is sent back unchanged (Linux `handle_hca_cap`);
/// * `num_vhca_ports` and `release_all_pages`: MAX (Linux sets both when MAX has them).
pub(crate) fn general(cur: &Image, max: &Image, log_max_qp: u8) -> Result<Image> {
    let mut out = *cur;
    let maxv = View::<CmdHcaCap>::new(max)?;
    let curv = View::<CmdHcaCap>::new(cur)?;
    let mut v = ViewMut::<CmdHcaCap>::new(&mut out)?;
    v.set(CmdHcaCap::CMDIF_CHECKSUM, cmdif_checksum::DISABLED)?;
    v.set(CmdHcaCap::PKEY_TABLE_SIZE, 0)?;
    v.set(
        CmdHcaCap::LOG_MAX_QP,
        u64::from(log_max_qp).min(maxv.get(CmdHcaCap::LOG_MAX_QP)),
    )?;
    v.set(CmdHcaCap::UAR_4K, 0)?;
    v.set(CmdHcaCap::LOG_UAR_PAGE_SZ, 0)?;
    if curv.get(CmdHcaCap::ROCE_RW_SUPPORTED) == 1 && maxv.get(CmdHcaCap::ROCE) == 1 {
        v.set(CmdHcaCap::ROCE, 1)?;
    }
    if maxv.get(CmdHcaCap::NUM_VHCA_PORTS) != 0 {
        v.set(
            CmdHcaCap::NUM_VHCA_PORTS,
            maxv.get(CmdHcaCap::NUM_VHCA_PORTS),
        )?;
    }
    if maxv.get(CmdHcaCap::RELEASE_ALL_PAGES) != 0 {
        v.set(CmdHcaCap::RELEASE_ALL_PAGES, 1)?;
    }
    Ok(out)
}

/// The atomic capabilities to set, if any: requester endianness mode 1 (the value an atomic
/// returns is written in host order) when the device supports it, as Linux's
/// `handle_hca_cap_atomic` does. Only that field is set; the rest of the image is zero.
pub(crate) fn atomic(max: &Image) -> Result<Option<Image>> {
    let maxv = View::<AtomicCaps>::new(max)?;
    if maxv.get(AtomicCaps::SUPPORTED_ATOMIC_REQ_8B_ENDIANNESS_MODE_1) != 1 {
        return Ok(None);
    }
    let mut out = [0u8; CAP_BYTES];
    ViewMut::<AtomicCaps>::new(&mut out)?.set(
        AtomicCaps::ATOMIC_REQ_8B_ENDIANNESS_MODE,
        ac::REQ_ENDIANNESS_HOST,
    )?;
    Ok(Some(out))
}

/// The RoCE capabilities to set, if any: `sw_r_roce_src_udp_port` 1 when MAX has it, so the
/// UDP source port the driver writes (`ads.udp_sport`, the UD address vector) is the one on the
/// wire (Linux `handle_hca_cap_roce`; rdma-core's `mlx5_vfio` does the same).
pub(crate) fn roce(cur: &Image, max: &Image) -> Result<Option<Image>> {
    let maxv = View::<RoceCap>::new(max)?;
    let curv = View::<RoceCap>::new(cur)?;
    if maxv.get(RoceCap::SW_R_ROCE_SRC_UDP_PORT) != 1
        || curv.get(RoceCap::SW_R_ROCE_SRC_UDP_PORT) == 1
    {
        return Ok(None);
    }
    let mut out = *cur;
    ViewMut::<RoceCap>::new(&mut out)?.set(RoceCap::SW_R_ROCE_SRC_UDP_PORT, 1)?;
    Ok(Some(out))
}

/// What negotiation leaves for after INIT_HCA.
pub(crate) struct Negotiated {
    /// General capabilities, MAX.
    pub general_max: Image,
    /// Whether INIT_HCA may carry a software owner id (current `sw_owner_id`).
    pub sw_owner_id: bool,
}

/// QUERY_HCA_CAP and SET_HCA_CAP of the general, atomic and RoCE capabilities.
pub(crate) fn negotiate<P: Platform>(cmd: &CmdQueue, p: &P, log_max_qp: u8) -> Result<Negotiated> {
    let max = hca::query_hca_cap(cmd, p, cap_type::GENERAL, false)?;
    let cur = hca::query_hca_cap(cmd, p, cap_type::GENERAL, true)?;
    hca::set_hca_cap(cmd, p, cap_type::GENERAL, &general(&cur, &max, log_max_qp)?)?;
    // Atomic and RoCE settings only where the current capabilities have them (Linux
    // `handle_hca_cap_atomic` and rdma-core's mlx5_vfio read CUR).
    let curv = View::<CmdHcaCap>::new(&cur)?;
    if curv.get(CmdHcaCap::ATOMIC) == 1 {
        let amax = hca::query_hca_cap(cmd, p, cap_type::ATOMIC, false)?;
        if let Some(set) = atomic(&amax)? {
            hca::set_hca_cap(cmd, p, cap_type::ATOMIC, &set)?;
        }
    }
    if curv.get(CmdHcaCap::ROCE) == 1 {
        let rmax = hca::query_hca_cap(cmd, p, cap_type::ROCE, false)?;
        let rcur = hca::query_hca_cap(cmd, p, cap_type::ROCE, true)?;
        if let Some(set) = roce(&rcur, &rmax)? {
            hca::set_hca_cap(cmd, p, cap_type::ROCE, &set)?;
        }
    }
    let sw_owner_id = View::<CmdHcaCap>::new(&cur)?.get(CmdHcaCap::SW_OWNER_ID) == 1;
    Ok(Negotiated {
        general_max: max,
        sw_owner_id,
    })
}

/// The current capabilities after INIT_HCA: general, RoCE (when `roce`), atomic (when
/// `atomic`) and Ethernet offloads (when `eth_net_offloads`).
pub(crate) fn current<P: Platform>(cmd: &CmdQueue, p: &P, general_max: Image) -> Result<Caps> {
    let general = hca::query_hca_cap(cmd, p, cap_type::GENERAL, true)?;
    let view = View::<CmdHcaCap>::new(&general)?;
    let roce = if view.get(CmdHcaCap::ROCE) == 1 {
        hca::query_hca_cap(cmd, p, cap_type::ROCE, true)?
    } else {
        [0; CAP_BYTES]
    };
    let atomic = if view.get(CmdHcaCap::ATOMIC) == 1 {
        hca::query_hca_cap(cmd, p, cap_type::ATOMIC, true)?
    } else {
        [0; CAP_BYTES]
    };
    // Ethernet offloads (checksums, LSO, inline mode, RSS table size) where the device has
    // them, as Linux's `mlx5_query_hca_caps` reads them.
    let eth = if view.get(CmdHcaCap::ETH_NET_OFFLOADS) == 1 {
        hca::query_hca_cap(cmd, p, cap_type::ETHERNET_OFFLOADS, true)?
    } else {
        [0; CAP_BYTES]
    };
    Ok(Caps::from_raw(general, general_max, roce, atomic).with_eth(eth))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(set: &[(mlx5_ifc::Field<CmdHcaCap>, u64)]) -> Image {
        let mut i = [0u8; CAP_BYTES];
        let mut v = ViewMut::<CmdHcaCap>::new(&mut i).unwrap();
        for &(f, x) in set {
            v.set(f, x).unwrap();
        }
        i
    }

    fn get(i: &Image, f: mlx5_ifc::Field<CmdHcaCap>) -> u64 {
        View::<CmdHcaCap>::new(i).unwrap().get(f)
    }

    #[test]
    fn roce_written_only_when_writable() {
        let max = image(&[(CmdHcaCap::ROCE, 1), (CmdHcaCap::ROCE_RW_SUPPORTED, 1)]);
        // Writable: set to 1.
        let cur = image(&[(CmdHcaCap::ROCE_RW_SUPPORTED, 1)]);
        assert_eq!(get(&general(&cur, &max, 10).unwrap(), CmdHcaCap::ROCE), 1);
        // Not writable: the current value goes back unchanged, 0 or 1.
        for now in [0, 1] {
            let cur = image(&[(CmdHcaCap::ROCE, now)]);
            assert_eq!(get(&general(&cur, &max, 10).unwrap(), CmdHcaCap::ROCE), now);
        }
    }

    #[test]
    fn atomic_endianness_only_when_supported() {
        let mut max = [0u8; CAP_BYTES];
        assert!(atomic(&max).unwrap().is_none());
        ViewMut::<AtomicCaps>::new(&mut max)
            .unwrap()
            .set(AtomicCaps::SUPPORTED_ATOMIC_REQ_8B_ENDIANNESS_MODE_1, 1)
            .unwrap();
        let set = atomic(&max).unwrap().unwrap();
        let v = View::<AtomicCaps>::new(&set).unwrap();
        assert_eq!(v.get(AtomicCaps::ATOMIC_REQ_8B_ENDIANNESS_MODE), 1);
        assert_eq!(set.iter().filter(|&&b| b != 0).count(), 1);
    }
}
