//! The Ethernet port as RoCE sees it: NIC vport context (RoCE enable, MAC, MTU), the RoCE
//! address (GID) table, the vport state and the PAOS/PMTU port registers.

use mlx5_ifc::consts::{reg, roce};
use mlx5_ifc::prm::hca::PaosReg;
use mlx5_ifc::prm::vport::{
    ModifyNicVportContextIn, ModifyNicVportContextOut, ModifyNicVportFieldSelect, NicVportContext,
    QueryNicVportContextIn, QueryNicVportContextOut, QueryVportStateIn, QueryVportStateOut,
    RoceAddrLayout, SetRoceAddressIn, SetRoceAddressOut,
};
use mlx5_ifc::{Layout, Opcode, View, ViewMut};

use crate::error::Result;
use crate::fw::cmd::run;
use crate::fw::cmdq::CmdQueue;
use crate::fw::hca::access_reg;
use crate::io::platform::Platform;

/// What the NIC vport context says about the port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VportInfo {
    /// The function's MAC address: the permanent one, or — on a virtual function whose
    /// hypervisor assigned none — the random one the driver chose and put in the vport's
    /// address list.
    pub mac: [u8; 6],
    /// The MAC is the driver's random choice (the vport's `permanent_address` reads zero).
    pub random_mac: bool,
    /// The vport's node GUID.
    pub node_guid: u64,
    /// The vport MTU (Ethernet payload bytes).
    pub mtu: u16,
    /// Whether RoCE is enabled on the vport.
    pub roce_en: bool,
}

/// MODIFY_NIC_VPORT_CONTEXT: RoCE on or off.
pub(crate) fn set_roce_en<P: Platform>(cmd: &CmdQueue, p: &P, on: bool) -> Result<()> {
    run::<ModifyNicVportContextIn, ModifyNicVportContextOut, _, _>(
        cmd,
        p,
        Opcode::ModifyNicVportContext,
        0,
        |v| {
            v.nested_mut(ModifyNicVportContextIn::FIELD_SELECT)
                .set(ModifyNicVportFieldSelect::ROCE_EN, 1)?;
            v.nested_mut(ModifyNicVportContextIn::NIC_VPORT_CONTEXT)
                .set(NicVportContext::ROCE_EN, u64::from(on))?;
            Ok(())
        },
    )
    .map(drop)
}

/// QUERY_NIC_VPORT_CONTEXT of the function's own vport.
pub(crate) fn query_nic_vport<P: Platform>(cmd: &CmdQueue, p: &P) -> Result<VportInfo> {
    let out = run::<QueryNicVportContextIn, QueryNicVportContextOut, _, _>(
        cmd,
        p,
        Opcode::QueryNicVportContext,
        0,
        |_| Ok(()),
    )?;
    let view = out.view()?;
    let ctx = view.nested(QueryNicVportContextOut::NIC_VPORT_CONTEXT);
    let perm = ctx.bytes(NicVportContext::PERMANENT_ADDRESS);
    let mut mac = [0u8; 6];
    if perm.len() == 8 {
        mac.copy_from_slice(&perm[2..8]);
    }
    Ok(VportInfo {
        mac,
        random_mac: false,
        node_guid: ctx.get(NicVportContext::NODE_GUID),
        mtu: ctx.get(NicVportContext::MTU) as u16,
        roce_en: ctx.get(NicVportContext::ROCE_EN) == 1,
    })
}

/// A random locally administered unicast MAC (a VF's when its hypervisor assigned none, as
/// Linux's `eth_hw_addr_random`): the Platform has no random source, so it is mixed (splitmix64)
/// from `seed` — the platform's clock, the vport's node GUID (unique per function) and a DMA
/// address of this driver instance.
pub(crate) fn random_mac(seed: u64) -> [u8; 6] {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    let b = z.to_be_bytes();
    // Locally administered (bit 1), unicast (bit 0 clear).
    [(b[2] & 0xfc) | 0x02, b[3], b[4], b[5], b[6], b[7]]
}

/// MODIFY_NIC_VPORT_CONTEXT `addresses_list`: the vport's unicast address list becomes `mac`
/// (or empty), as mlx5e programs it (list type 0).
pub(crate) fn set_uc_list<P: Platform>(cmd: &CmdQueue, p: &P, mac: Option<[u8; 6]>) -> Result<()> {
    const LIST_UC: u64 = 0;
    let at = ModifyNicVportContextIn::NIC_VPORT_CONTEXT.offset()
        + NicVportContext::CURRENT_UC_MAC_ADDRESS.offset();
    let mut input = [0u8; ModifyNicVportContextIn::BYTES + 8];
    {
        let mut v = ViewMut::<ModifyNicVportContextIn>::new(&mut input)?;
        v.set(
            ModifyNicVportContextIn::OPCODE,
            Opcode::ModifyNicVportContext as u64,
        )?;
        v.nested_mut(ModifyNicVportContextIn::FIELD_SELECT)
            .set(ModifyNicVportFieldSelect::ADDRESSES_LIST, 1)?;
        v.nested_mut(ModifyNicVportContextIn::NIC_VPORT_CONTEXT)
            .set(NicVportContext::ALLOWED_LIST_TYPE, LIST_UC)?
            .set(NicVportContext::ALLOWED_LIST_SIZE, u64::from(mac.is_some()))?;
    }
    let len = match mac {
        Some(m) => {
            input[at + 2..at + 8].copy_from_slice(&m);
            at + 8
        }
        None => ModifyNicVportContextIn::BYTES,
    };
    let mut out = [0u8; ModifyNicVportContextOut::BYTES];
    cmd.exec(
        p,
        &input[..len.max(ModifyNicVportContextIn::BYTES)],
        &mut out,
    )
}

/// A RoCE v2 GID table entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GidEntry {
    /// The GID (an IPv6 address, or IPv4-mapped `::ffff:a.b.c.d`).
    pub gid: [u8; 16],
    /// The source MAC for packets sent with this GID.
    pub mac: [u8; 6],
    /// VLAN id, if tagged.
    pub vlan: Option<u16>,
}

impl GidEntry {
    /// The link-local IPv6 GID derived from a MAC (fe80::/64 + modified EUI-64).
    pub fn link_local(mac: [u8; 6]) -> Self {
        let mut gid = [0u8; 16];
        gid[0] = 0xfe;
        gid[1] = 0x80;
        gid[8] = mac[0] ^ 0x02;
        gid[9] = mac[1];
        gid[10] = mac[2];
        gid[11] = 0xff;
        gid[12] = 0xfe;
        gid[13] = mac[3];
        gid[14] = mac[4];
        gid[15] = mac[5];
        Self {
            gid,
            mac,
            vlan: None,
        }
    }

    /// An IPv4 GID (`::ffff:a.b.c.d`).
    pub fn ipv4(addr: [u8; 4], mac: [u8; 6]) -> Self {
        let mut gid = [0u8; 16];
        gid[10] = 0xff;
        gid[11] = 0xff;
        gid[12..].copy_from_slice(&addr);
        Self {
            gid,
            mac,
            vlan: None,
        }
    }

    /// Whether the GID is IPv4-mapped.
    pub fn is_ipv4(&self) -> bool {
        self.gid[..10].iter().all(|&b| b == 0) && self.gid[10] == 0xff && self.gid[11] == 0xff
    }
}

/// SET_ROCE_ADDRESS: writes GID table entry `index` of port 1 (`None` clears it).
pub(crate) fn set_roce_address<P: Platform>(
    cmd: &CmdQueue,
    p: &P,
    index: u16,
    entry: Option<&GidEntry>,
    vhca_port_num: u8,
) -> Result<()> {
    run::<SetRoceAddressIn, SetRoceAddressOut, _, _>(cmd, p, Opcode::SetRoceAddress, 0, |v| {
        v.set(SetRoceAddressIn::ROCE_ADDRESS_INDEX, u64::from(index))?;
        // 0 leaves the field unset: firmware without `num_vhca_ports` has no port to name.
        v.set(SetRoceAddressIn::VHCA_PORT_NUM, u64::from(vhca_port_num))?;
        if let Some(e) = entry {
            let mut a = v.nested_mut(SetRoceAddressIn::ROCE_ADDRESS);
            a.set_bytes(RoceAddrLayout::SOURCE_L3_ADDRESS, &e.gid)?;
            let mac = e.mac;
            a.set(
                RoceAddrLayout::SOURCE_MAC_47_32,
                u64::from(u16::from_be_bytes([mac[0], mac[1]])),
            )?;
            a.set(
                RoceAddrLayout::SOURCE_MAC_31_0,
                u64::from(u32::from_be_bytes([mac[2], mac[3], mac[4], mac[5]])),
            )?;
            if let Some(vlan) = e.vlan {
                a.set(RoceAddrLayout::VLAN_VALID, 1)?
                    .set(RoceAddrLayout::VLAN_ID, u64::from(vlan))?;
            }
            let l3 = if e.is_ipv4() {
                roce::L3_IPV4
            } else {
                roce::L3_IPV6
            };
            a.set(RoceAddrLayout::ROCE_L3_TYPE, l3)?
                .set(RoceAddrLayout::ROCE_VERSION, roce::VERSION_2)?;
        }
        Ok(())
    })
    .map(drop)
}

/// Port state: administrative and operational (1 = up).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortState {
    /// Administrative state (PAOS `admin_status`: 1 up, 2 down).
    pub admin: u8,
    /// Operational state (QUERY_VPORT_STATE `state`: 1 up, 0 down).
    pub oper: u8,
}

/// QUERY_VPORT_STATE.
pub(crate) fn query_vport_state<P: Platform>(cmd: &CmdQueue, p: &P) -> Result<PortState> {
    let out = run::<QueryVportStateIn, QueryVportStateOut, _, _>(
        cmd,
        p,
        Opcode::QueryVportState,
        0,
        |_| Ok(()),
    )?;
    Ok(PortState {
        admin: out.get(QueryVportStateOut::ADMIN_STATE) as u8,
        oper: out.get(QueryVportStateOut::STATE) as u8,
    })
}

/// Reads PAOS for port 1 and raises the port if it is administratively down (a RoCE-only driver
/// has no Ethernet driver to do it). Returns the administrative status after the call.
pub(crate) fn ensure_port_up<P: Platform>(cmd: &CmdQueue, p: &P) -> Result<u8> {
    let mut img = [0u8; PaosReg::BYTES];
    ViewMut::<PaosReg>::new(&mut img)?.set(PaosReg::LOCAL_PORT, 1)?;
    access_reg(cmd, p, reg::PAOS, 0, false, &mut img)?;
    let admin = View::<PaosReg>::new(&img)?.get(PaosReg::ADMIN_STATUS) as u8;
    if admin == 1 {
        return Ok(admin);
    }
    log::info!("port 1 is administratively down (PAOS admin_status {admin}); raising it");
    let mut w = [0u8; PaosReg::BYTES];
    ViewMut::<PaosReg>::new(&mut w)?
        .set(PaosReg::LOCAL_PORT, 1)?
        .set(PaosReg::ADMIN_STATUS, 1)?
        .set(PaosReg::ASE, 1)?;
    access_reg(cmd, p, reg::PAOS, 0, true, &mut w)?;
    Ok(1)
}
