//! The ICM address map of software steering: where the firmware keeps what an STE may jump to
//! but software never writes, and what any ICM address names ([`classify`]).
//!
//! * The NIC RX drop, TX drop and TX allow targets (`flow_table_nic_cap`'s
//!   `sw_steering_nic_{rx,tx}_action_drop_icm_address`, `..._tx_action_allow_icm_address`);
//!   DR also uses RX drop as the RX miss and TX allow as the TX miss.
//! * Each TIR (CREATE_TIR's `icm_address_63_40` / `_39_32` / `_31_0`: a raw packet QP's
//!   `tir_icm_addr`, DR's QP and DevX TIR destinations).
//! * Each FW-owned flow table's root (QUERY_FLOW_TABLE's `sw_owner_icm_root_0` and `_1`: DR's
//!   "always hit" tables, its dest arrays and root-table anchors); a software-owned table's
//!   roots are the ones software gave ([`sw_table_roots`]).
//! * Each flow sampler's receive address (QUERY_GENERAL_OBJECT's `sw_steering_icm_address_rx`:
//!   DR's sampler action jumps to it).
//!
//! Every one is 64-byte aligned (a hit address carries bits 39:5, bit 5 doubling as the size
//! bit), below 2^40 (the bits an STE carries), distinct, and in a range of its own
//! ([`FW_ICM_BASE`]) that no SW ICM region ([`super::icm`]) overlaps. Where a real ConnectX-5
//! puts them is not public; these are the simulator's.

use mlx5_ifc::prm::flow::{CreateFlowTableIn, FlowTableContext as Ftc};
use mlx5_ifc::View;

use super::objects::ObjectKind;
use super::Model;

/// The bits of an ICM address an STE carries (39:0).
pub(crate) const ICM_ADDRESS_MASK: u64 = (1 << 40) - 1;

/// The firmware's own ICM: the steering targets below, then the TIRs' and the FW-owned flow
/// tables' addresses.
pub(crate) const FW_ICM_BASE: u64 = 0x20_0000_0000;
/// NIC RX drop (also DR's RX default / miss target).
pub(crate) const NIC_RX_DROP: u64 = FW_ICM_BASE;
/// NIC TX drop.
pub(crate) const NIC_TX_DROP: u64 = FW_ICM_BASE + 0x40;
/// NIC TX allow: the frame goes on to the wire (DR's TX default / miss target).
pub(crate) const NIC_TX_ALLOW: u64 = FW_ICM_BASE + 0x80;
/// TIR `n` is at `TIR_ICM_BASE + 64 n`.
pub(crate) const TIR_ICM_BASE: u64 = FW_ICM_BASE + (1 << 32);
/// The root of FW-owned flow table `id` is at `FT_ICM_BASE + 64 id`.
pub(crate) const FT_ICM_BASE: u64 = FW_ICM_BASE + (2 << 32);
/// The receive address of flow sampler `id` is at `SAMPLER_ICM_BASE + 64 id`.
pub(crate) const SAMPLER_ICM_BASE: u64 = FW_ICM_BASE + (3 << 32);
/// Bytes of one firmware ICM entry (an STE's size: the alignment a hit address needs).
const FW_ENTRY: u64 = 64;

/// The ICM address of TIR `tirn`.
pub(crate) fn tir_icm_address(tirn: u32) -> u64 {
    TIR_ICM_BASE + FW_ENTRY * u64::from(tirn & 0xff_ffff)
}

/// The ICM root address of FW-owned flow table `id`.
pub(crate) fn flow_table_icm_address(id: u32) -> u64 {
    FT_ICM_BASE + FW_ENTRY * u64::from(id & 0xff_ffff)
}

/// The ICM address of flow sampler `id` (receive).
pub(crate) fn sampler_icm_address(id: u32) -> u64 {
    SAMPLER_ICM_BASE + FW_ENTRY * u64::from(id & 0xff_ffff)
}

/// What an ICM address names, as the firmware knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IcmTarget {
    /// NIC RX drop (DR's RX miss too).
    RxDrop,
    /// NIC TX drop.
    TxDrop,
    /// NIC TX allow: on to the wire (DR's TX miss too).
    TxAllow,
    /// Live TIR `n`.
    Tir(u32),
    /// The root of live FW-owned flow table `id`: steering goes on in its entries.
    FlowTable(u32),
    /// Live flow sampler `id`.
    Sampler(u32),
    /// Inside a live SW ICM object: bytes software wrote (an STE, a rewrite action list), read
    /// with [`super::icm::Icm::read`].
    SwIcm,
    /// Nothing the device handed out (or an object no longer live).
    Unknown,
}

/// What ICM address `addr` names (bits 39:0 are looked at: an STE carries no more).
pub(crate) fn classify(model: &Model, addr: u64) -> IcmTarget {
    let a = addr & ICM_ADDRESS_MASK;
    match a {
        NIC_RX_DROP => return IcmTarget::RxDrop,
        NIC_TX_DROP => return IcmTarget::TxDrop,
        NIC_TX_ALLOW => return IcmTarget::TxAllow,
        _ => {}
    }
    if model.icm.object_at(a, 1).is_some() {
        return IcmTarget::SwIcm;
    }
    let entry = |base: u64| {
        a.checked_sub(base)
            .filter(|off| off % FW_ENTRY == 0 && off / FW_ENTRY < 1 << 24)
            .map(|off| (off / FW_ENTRY) as u32)
    };
    if let Some(n) = entry(TIR_ICM_BASE).filter(|&n| model.objects.contains(ObjectKind::Tir, n)) {
        return IcmTarget::Tir(n);
    }
    if let Some(n) =
        entry(SAMPLER_ICM_BASE).filter(|&n| model.objects.contains(ObjectKind::FlowSampler, n))
    {
        return IcmTarget::Sampler(n);
    }
    match entry(FT_ICM_BASE) {
        Some(id)
            if model.objects.contains(ObjectKind::FlowTable, id)
                && sw_table_roots(model, id).is_none() =>
        {
            IcmTarget::FlowTable(id)
        }
        _ => IcmTarget::Unknown,
    }
}

/// The roots software gave software-owned flow table `id` (`sw_owner` 1):
/// `(sw_owner_icm_root_0, sw_owner_icm_root_1)`; `None` for a FW-owned table or no table.
pub(crate) fn sw_table_roots(model: &Model, id: u32) -> Option<(u64, u64)> {
    let q = model.objects.queue(ObjectKind::FlowTable, id)?;
    let v = View::<CreateFlowTableIn>::new(&q.ctx).ok()?;
    let c = v.nested(CreateFlowTableIn::FLOW_TABLE_CONTEXT);
    (c.get(Ftc::SW_OWNER) == 1).then(|| {
        (
            c.get(Ftc::SWS_SW_OWNER_ICM_ROOT_0),
            c.get(Ftc::SWS_SW_OWNER_ICM_ROOT_1),
        )
    })
}

/// Where the STE walk of software-owned flow table `id` starts when a flow table entry
/// forwards to it: its `sw_owner_icm_root_0` (DR's start anchor, NIC RX and NIC TX alike).
/// `None` for a FW-owned table (its entries are the firmware's to look up) or no table.
pub(crate) fn sw_table_root(model: &Model, id: u32) -> Option<u64> {
    sw_table_roots(model, id).map(|(root0, _)| root0)
}

/// The ICM addresses QUERY_FLOW_TABLE reports for table `id` as `(root_0, root_1)`: a
/// software-owned table's own, a FW-owned table's [`flow_table_icm_address`] in both (rdma-core
/// 56.1 reads root 0, 44.0 root 1 for NIC TX).
pub(crate) fn table_roots(model: &Model, id: u32) -> (u64, u64) {
    sw_table_roots(model, id).unwrap_or_else(|| {
        let a = flow_table_icm_address(id);
        (a, a)
    })
}

#[cfg(test)]
mod tests {
    use mlx5_ifc::{Layout, ViewMut};

    use super::*;
    use crate::model::objects::{Object, Queue};
    use crate::Profile;

    /// A flow table object whose context is `f`'s CREATE_FLOW_TABLE input.
    fn table(f: impl FnOnce(&mut ViewMut<'_, Ftc>)) -> Object {
        let mut ctx = vec![0u8; CreateFlowTableIn::BYTES];
        let mut v = ViewMut::<CreateFlowTableIn>::new(&mut ctx).unwrap();
        f(&mut v.nested_mut(CreateFlowTableIn::FLOW_TABLE_CONTEXT));
        Object::Queue(Box::new(Queue {
            ctx,
            pas: Vec::new().into(),
            uar: None,
            armed: false,
            event_bitmask: [0; 32],
            holds: Vec::new(),
        }))
    }

    #[test]
    fn addresses_are_classified() {
        let mut m = Model::new(&Profile::connectx5());
        let steer = 0x40_0000_0000;
        m.icm.insert(steer, 1 << 16, 1);
        let tir = m.objects.alloc(ObjectKind::Tir, 7, 8, Object::Pd).unwrap();
        let fw = m
            .objects
            .alloc(ObjectKind::FlowTable, 3, 4, table(|_| {}))
            .unwrap();
        let sw = table(|c| {
            c.set(Ftc::SW_OWNER, 1).unwrap();
            c.set(Ftc::SWS_SW_OWNER_ICM_ROOT_0, steer + 0x40).unwrap();
        });
        let sw = m.objects.alloc(ObjectKind::FlowTable, 4, 5, sw).unwrap();
        let sampler = m
            .objects
            .alloc(ObjectKind::FlowSampler, 2, 3, table(|_| {}))
            .unwrap();
        // The gvmi an STE keeps in bits 63:48 does not matter.
        let gvmi = 0x1234u64 << 48;
        for (addr, want) in [
            (NIC_RX_DROP | gvmi, IcmTarget::RxDrop),
            (NIC_TX_DROP, IcmTarget::TxDrop),
            (NIC_TX_ALLOW, IcmTarget::TxAllow),
            (tir_icm_address(tir), IcmTarget::Tir(7)),
            (tir_icm_address(8), IcmTarget::Unknown),
            (tir_icm_address(7) + 32, IcmTarget::Unknown),
            (flow_table_icm_address(fw), IcmTarget::FlowTable(3)),
            (flow_table_icm_address(sw), IcmTarget::Unknown),
            (steer + 0x40, IcmTarget::SwIcm),
            (steer + (1 << 16), IcmTarget::Unknown),
            (sampler_icm_address(sampler), IcmTarget::Sampler(sampler)),
            (sampler_icm_address(sampler + 1), IcmTarget::Unknown),
        ] {
            assert_eq!(classify(&m, addr), want, "{addr:#x}");
        }
        assert_eq!(sw_table_root(&m, sw), Some(steer + 0x40));
        assert_eq!(sw_table_root(&m, fw), None);
        let fw_root = flow_table_icm_address(fw);
        assert_eq!(table_roots(&m, fw), (fw_root, fw_root));
        // Distinct, aligned, below 2^40, outside the SW ICM regions.
        let all = [
            NIC_RX_DROP,
            NIC_TX_DROP,
            NIC_TX_ALLOW,
            tir_icm_address(0xff_ffff),
            flow_table_icm_address(0xff_ffff),
            sampler_icm_address(0xff_ffff),
        ];
        for a in all {
            assert!(a % 64 == 0 && a < 1 << 40 && !(steer..0x48_0010_0000).contains(&a));
        }
    }
}
