//! The port and its vport as the model holds them ([`Vport`]: NIC vport context, RoCE address
//! (GID) table, port registers). The commands on them are [`crate::fw`]'s `vport`.

use crate::fabric::Addresses;
use mlx5_ifc::prm::caps::RoceCap;
use mlx5_ifc::prm::hca::RegisterHostEndianness;
use mlx5_ifc::prm::vport::RoceAddrLayout;
use mlx5_ifc::Layout;

use crate::Profile;

/// The largest port MTU (PMTU `max_mtu`).
pub const MAX_MTU: u16 = 9216;
/// The MTU the port starts with.
pub const DEFAULT_MTU: u16 = 1500;
/// Size of the HOST_ENDIANNESS register (`mlx5_ifc` has no layout for it in `mlx5-ifc` yet).
pub(crate) const HOST_ENDIANNESS_BYTES: usize = 16;
/// PAOS status values: up.
pub(crate) const PORT_UP: u64 = 1;
/// PAOS status values: down.
pub(crate) const PORT_DOWN: u64 = 2;

/// Port and vport state.
pub(crate) struct Vport {
    pub(crate) roce_en: bool,
    pub(crate) mtu: u16,
    pub(crate) mac: [u8; 6],
    /// The hypervisor assigned this function no MAC: `permanent_address` reads zero until
    /// one is set.
    pub(crate) mac_unset: bool,
    /// The unicast addresses the function's driver put in its vport's address list
    /// (MODIFY_NIC_VPORT_CONTEXT `addresses_list`, list type UC): the function receives RoCE
    /// for them as for its permanent address.
    pub(crate) uc: Vec<[u8; 6]>,
    /// The unicast addresses the function owns besides its permanent one (UC list, GIDs'
    /// MACs), kept current by [`Vport::relearn`]: what [`Vport::owns`] looks up per frame.
    owned: Vec<[u8; 6]>,
    /// The first of them, as many as a fabric port learns ([`Vport::learned`]).
    learned: Addresses,
    pub(crate) disable_uc_local_lb: bool,
    pub(crate) disable_mc_local_lb: bool,
    pub(crate) gids: Vec<[u8; RoceAddrLayout::BYTES]>,
    pub(crate) paos_admin: u64,
    /// The vport's administrative state as the hypervisor's e-switch sets it
    /// (`MODIFY_VPORT_STATE` on the PF; `ip link set … vf N state`): QUERY_VPORT_STATE's
    /// `admin_state`. The link is up when the function's own PAOS says so and this is not DOWN.
    pub(crate) hv_admin: u64,
    /// A PORT_CHANGE event the port owes the driver (its sub-type): the operational state
    /// followed an administrative change; raised when the command that made it completes.
    pub(crate) port_event: Option<u8>,
    pub(crate) pmtu_admin: u16,
    /// PFCC: global pause `(tx, rx)` and per-priority flow control `(tx, rx)` bit masks.
    pub(crate) pause: (bool, bool),
    pub(crate) pfc: (u8, u8),
    pub(crate) host_endianness: [u8; HOST_ENDIANNESS_BYTES],
}

/// Vport administrative states (`query_vport_state_out.admin_state`, Linux's
/// `MLX5_VPORT_ADMIN_STATE_*`): down, up, follow the uplink.
pub(crate) const VPORT_ADMIN_DOWN: u64 = 0;
/// The hypervisor holds the vport up.
pub(crate) const VPORT_ADMIN_UP: u64 = 1;
/// The vport follows the uplink (the default).
pub(crate) const VPORT_ADMIN_AUTO: u64 = 2;

/// PORT_CHANGE sub-type (the EQE's `event_sub_type`): the port went down.
pub(crate) const PORT_CHANGE_DOWN: u8 = 1;
/// PORT_CHANGE sub-type: the port became active.
pub(crate) const PORT_CHANGE_ACTIVE: u8 = 4;

impl Vport {
    pub(crate) fn new(profile: &Profile) -> Self {
        let gids = profile.roce_field(RoceCap::ROCE_ADDRESS_TABLE_SIZE) as usize;
        Self {
            roce_en: false,
            mtu: DEFAULT_MTU,
            mac: profile.mac(),
            mac_unset: profile.mac_unset(),
            uc: Vec::new(),
            owned: Vec::new(),
            learned: Addresses::new(),
            disable_uc_local_lb: false,
            disable_mc_local_lb: false,
            gids: vec![[0; RoceAddrLayout::BYTES]; gids],
            paos_admin: PORT_UP,
            // A VF's vport follows the uplink unless the hypervisor says otherwise (Linux's
            // legacy e-switch default); a PF's own vport is up.
            hv_admin: if profile.is_vf() {
                VPORT_ADMIN_AUTO
            } else {
                VPORT_ADMIN_UP
            },
            port_event: None,
            pmtu_admin: DEFAULT_MTU,
            // Global pause on both ways, no PFC: a ConnectX-5 port's defaults (`ethtool -a`).
            pause: (true, true),
            pfc: (0, 0),
            host_endianness: [0; HOST_ENDIANNESS_BYTES],
        }
    }

    /// The RoCE address (GID) entry `index` as SET_ROCE_ADDRESS wrote it (all zero = unset);
    /// `None` beyond the table.
    pub(crate) fn gid(&self, index: usize) -> Option<&[u8; RoceAddrLayout::BYTES]> {
        self.gids.get(index)
    }

    /// The source addresses of the GID entries that are set.
    pub(crate) fn gid_addresses(&self) -> Vec<[u8; 16]> {
        self.gids
            .iter()
            .filter(|g| g.iter().any(|&b| b != 0))
            .filter_map(|g| {
                let v = mlx5_ifc::View::<RoceAddrLayout>::new(g).ok()?;
                v.bytes(RoceAddrLayout::SOURCE_L3_ADDRESS).try_into().ok()
            })
            .collect()
    }

    /// Whether the link is up: the function's PAOS admin state up, and its vport not held down
    /// by the hypervisor (the simulated uplink is always up).
    pub(crate) fn oper_up(&self) -> bool {
        self.paos_admin == PORT_UP && self.hv_admin != VPORT_ADMIN_DOWN
    }

    /// Sets the hypervisor's administrative state of the vport; the PORT_CHANGE the link
    /// owes if its operational state changed.
    pub(crate) fn set_hv_admin(&mut self, state: u64) {
        let before = self.oper_up();
        self.hv_admin = state;
        if self.oper_up() != before {
            self.port_event = Some(if self.oper_up() {
                PORT_CHANGE_ACTIVE
            } else {
                PORT_CHANGE_DOWN
            });
        }
    }

    /// The port's MAC address: the function's identity on the fabric.
    pub(crate) fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// The `permanent_address` QUERY_NIC_VPORT_CONTEXT reports: zero when the hypervisor left
    /// it unassigned.
    pub(crate) fn permanent_address(&self) -> [u8; 6] {
        if self.mac_unset {
            [0; 6]
        } else {
            self.mac
        }
    }

    /// Whether unicast `mac` is one of the function's own: its permanent address, an address
    /// of its UC list, or the source MAC of a RoCE address (GID) it set.
    pub(crate) fn owns(&self, mac: &[u8]) -> bool {
        mac == self.mac || self.owned.iter().any(|m| m[..] == *mac)
    }

    /// The unicast addresses the function owns besides its permanent one (its UC list, its
    /// GIDs' MACs), as many as a fabric port learns: where the switch forwards them.
    pub(crate) fn learned(&self) -> Addresses {
        self.learned.clone()
    }

    /// Recomputes [`Vport::learned`] after the UC list or a GID changed.
    pub(crate) fn relearn(&mut self) {
        let mut owned: Vec<[u8; 6]> = Vec::new();
        let gid_macs = (0..self.gids.len()).filter_map(|i| self.gid_mac(i));
        for m in self.uc.iter().copied().chain(gid_macs) {
            if m != self.mac && m[0] & 1 == 0 && !owned.contains(&m) {
                owned.push(m);
            }
        }
        self.learned = owned.iter().copied().take(crate::fabric::LEARNED).collect();
        self.owned = owned;
    }

    /// The source MAC of RoCE address `index`, if it is set with one.
    fn gid_mac(&self, index: usize) -> Option<[u8; 6]> {
        let v = mlx5_ifc::View::<RoceAddrLayout>::new(self.gids.get(index)?).ok()?;
        let hi = (v.get(RoceAddrLayout::SOURCE_MAC_47_32) as u16).to_be_bytes();
        let lo = (v.get(RoceAddrLayout::SOURCE_MAC_31_0) as u32).to_be_bytes();
        let m = [hi[0], hi[1], lo[0], lo[1], lo[2], lo[3]];
        (m != [0; 6]).then_some(m)
    }

    /// The source MAC of RoCE packets sent from address `index`: the GID entry's (the
    /// function's driver names the MAC its GIDs belong to), else the permanent one.
    pub(crate) fn source_mac(&self, index: usize) -> [u8; 6] {
        self.gid_mac(index).unwrap_or(self.mac)
    }

    /// Whether the host declared itself big-endian (HOST_ENDIANNESS `he` = 1); little-endian
    /// (0) until it says otherwise.
    pub(crate) fn host_big_endian(&self) -> bool {
        mlx5_ifc::View::<RegisterHostEndianness>::new(&self.host_endianness)
            .is_ok_and(|v| v.get(RegisterHostEndianness::HE) == 1)
    }

    /// The port MTU (NIC vport `mtu`).
    pub(crate) fn mtu(&self) -> u16 {
        self.mtu
    }

    pub(crate) fn eui64(&self) -> u64 {
        let m = self.mac;
        u64::from_be_bytes([m[0] ^ 0x02, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]])
    }
}
