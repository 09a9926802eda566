//! The device model of the one function the device has ([`Model`]): its life cycle
//! ([`HcaState`]), current capabilities, firmware pages, objects, vport and flow-table roots, the
//! data path's runtime of its objects, and the injected faults waiting for their event. The
//! command handlers ([`crate::fw`]) and the data path ([`crate::engine`]) both work on it;
//! neither is part of it.

use mlx5_ifc::prm::caps::{AtomicCaps, CmdHcaCap};
use mlx5_ifc::prm::odp::{OdpCap, OdpPerTransportServiceCap, OdpSchemeCap};
use mlx5_ifc::{consts, Field, Layout, View};

use super::objects::{self, ObjectKind};
use super::pages;
use super::runtime::Runtime;
use super::vport;
use crate::fault::Faults;
use crate::Profile;

/// The HCA life cycle as the firmware sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HcaState {
    /// Before ENABLE_HCA, or after DISABLE_HCA.
    Disabled,
    /// After ENABLE_HCA, before INIT_HCA.
    Enabled,
    /// After INIT_HCA.
    Initialized,
    /// After TEARDOWN_HCA (still enabled: pages can be taken back, then DISABLE_HCA).
    TornDown,
}

/// The state of the one function the device has.
pub(crate) struct Model {
    pub(crate) state: HcaState,
    pub(crate) issi: u16,
    pub(crate) cur_general: [u8; CmdHcaCap::BYTES],
    pub(crate) cur_roce: [u8; 256],
    pub(crate) cur_atomic: [u8; 256],
    /// The current `odp_cap` (SET_HCA_CAP turns on what MAX allows).
    pub(crate) cur_odp: [u8; 256],
    pub(crate) pages: pages::Pages,
    pub(crate) objects: objects::ObjectTable,
    pub(crate) vport: vport::Vport,
    pub(crate) driver_version: Option<String>,
    /// The root flow table of the NIC receive (0) and transmit (1) table types.
    pub(crate) flow_root: [Option<u32>; 2],
    /// Multicast groups (ATTACH_TO_MCG).
    pub(crate) mcg: super::mcg::Groups,
    /// DC: the DCT connections, the DCTs armed or draining.
    pub(crate) dc: super::dc::Dc,
    /// Device memory (MEMIC) and its allocations.
    pub(crate) memic: super::memic::Memic,
    /// SW ICM: its regions, the SW ICM objects and their bytes.
    pub(crate) icm: super::icm::Icm,
    /// Delay drop (SET_DELAY_DROP_PARAMS): how long an RQ with `delay_drop_en` holds frames
    /// while it has no WQE; `None` when disarmed (at start, after a timeout, or set to 0).
    pub(crate) delay_drop_ns: Option<u64>,
    /// The packet pacing rate table (SET_PP_RATE_LIMIT): index → rate in kbit/s.
    pub(crate) rates: std::collections::BTreeMap<u16, u32>,
    /// The data path's runtime state.
    pub(crate) rt: Runtime,
    /// The injected faults waiting for their event, and the record of those that acted.
    pub(crate) injected: Faults,
}

impl Model {
    pub(crate) fn new(profile: &Profile) -> Self {
        Self {
            state: HcaState::Disabled,
            issi: 0,
            cur_general: *profile.hca_cap_max(),
            cur_roce: profile.roce_cap_initial(),
            cur_atomic: *profile.atomic_cap(),
            cur_odp: profile.odp_cap_initial(),
            pages: pages::Pages::new(profile.page_policy().clone()),
            objects: objects::ObjectTable::default(),
            vport: vport::Vport::new(profile),
            driver_version: None,
            flow_root: [None; 2],
            mcg: super::mcg::Groups::default(),
            dc: super::dc::Dc::default(),
            rates: std::collections::BTreeMap::new(),
            delay_drop_ns: None,
            memic: super::memic::Memic::new(profile),
            icm: super::icm::Icm::new(profile),
            rt: Runtime::default(),
            injected: Faults::default(),
        }
    }

    /// DISABLE_HCA: the function's settings go back to their reset values. Pages and objects
    /// stay (a driver that leaks them is caught by `pages_held` / `live_objects`).
    pub(crate) fn reset_function(&mut self, profile: &Profile) {
        self.rt.commanded();
        self.state = HcaState::Disabled;
        self.issi = 0;
        self.cur_general = *profile.hca_cap_max();
        self.cur_roce = profile.roce_cap_initial();
        self.cur_atomic = *profile.atomic_cap();
        self.cur_odp = profile.odp_cap_initial();
        self.memic = super::memic::Memic::new(profile);
        self.icm = super::icm::Icm::new(profile);
        self.rates.clear();
        self.delay_drop_ns = None;
        // What the hypervisor set (the assigned MAC, the vport's admin state) outlives the
        // function's reset; what its driver set does not.
        let hv = (self.vport.mac, self.vport.mac_unset, self.vport.hv_admin);
        self.vport = vport::Vport::new(profile);
        (self.vport.mac, self.vport.mac_unset, self.vport.hv_admin) = hv;
        self.driver_version = None;
    }

    /// One field of the current general capabilities.
    pub(crate) fn cur(&self, f: Field<CmdHcaCap>) -> u64 {
        View::<CmdHcaCap>::new(&self.cur_general).map_or(0, |v| v.get(f))
    }

    /// One field of the current atomic capabilities.
    pub(crate) fn cur_atomic(&self, f: Field<AtomicCaps>) -> u64 {
        View::<AtomicCaps>::new(&self.cur_atomic).map_or(0, |v| v.get(f))
    }

    /// Whether an operation `op` of service type `st` may take a page fault: the current
    /// `odp_cap` names it for the transport (RC, UD, XRC, DC — [`qp_st::DCI`] for both ends; UC, QP1 and UMR QPs take none).
    pub(crate) fn odp_allows(&self, st: u64, op: Field<OdpPerTransportServiceCap>) -> bool {
        use consts::qp_st;
        let transport = match st {
            qp_st::RC => OdpSchemeCap::RC_ODP_CAPS,
            qp_st::UD => OdpSchemeCap::UD_ODP_CAPS,
            qp_st::XRC => OdpSchemeCap::XRC_ODP_CAPS,
            qp_st::DCI => OdpSchemeCap::DC_ODP_CAPS,
            _ => return false,
        };
        View::<OdpCap>::new(&self.cur_odp).is_ok_and(|v| {
            v.nested(OdpCap::TRANSPORT_PAGE_FAULT_SCHEME_CAP)
                .nested(transport)
                .get(op)
                == 1
        })
    }

    /// Whether entry and mailbox signatures are checked (CUR `cmdif_checksum` = 3).
    pub(crate) fn checksum_enabled(&self) -> bool {
        self.cur(CmdHcaCap::CMDIF_CHECKSUM) == consts::cmdif_checksum::ENABLED
    }

    /// Removes object `id` of `kind` and forgets the data path's runtime of it: the one place
    /// an object is destroyed. Returns the object (its references are the caller's to release).
    pub(crate) fn remove(&mut self, kind: ObjectKind, id: u32) -> Option<objects::Object> {
        let o = self.objects.remove(kind, id);
        self.rt.forget(kind, id);
        if kind == ObjectKind::Qp {
            self.mcg.forget_qp(id);
        }
        if kind == ObjectKind::Dct {
            let qps = &mut self.rt.qps;
            self.dc.close(id, &mut |key| {
                qps.remove(&key);
            });
            self.dc.armed.remove(&id);
            self.dc.draining.retain(|&d| d != id);
        }
        o
    }
}
