//! The port and its vport: NIC vport context, RoCE address (GID) table, vport state, and the
//! port registers behind ACCESS_REG (PAOS, PMTU, PTYS, PPCNT, PCMR, NODE_DESC, HOST_ENDIANNESS).
//!
//! The port starts administratively and operationally up (PAOS 1), MTU 1500 (PMTU admin/oper,
//! NIC vport `mtu`), `roce_en` 0, permanent address = the profile MAC, node/port/system GUIDs
//! its EUI-64. QUERY_VPORT_STATE reports `admin_state` 1 and `state` = 1 while PAOS is up.

use mlx5_ifc::consts::{reg, roce};
use mlx5_ifc::prm::caps::CmdHcaCap;
use mlx5_ifc::prm::hca::{
    AccessRegisterIn, AccessRegisterOut, PaosReg, PcmrReg, PfccReg, PmtuReg, PpcntReg, PtysReg,
};
use mlx5_ifc::prm::vport::{
    ModifyNicVportContextIn as ModIn, ModifyNicVportFieldSelect as Sel, ModifyVportStateIn,
    NicVportContext as Ctx, QueryNicVportContextIn, QueryNicVportContextOut, QueryRoceAddressIn,
    QueryRoceAddressOut, QueryVportStateIn, QueryVportStateOut, RoceAddrLayout, SetRoceAddressIn,
};
use mlx5_ifc::{CmdStatus, Layout};

use super::cmd::{bad_param, encoded, fail, input, output, view, CmdResult, Env, Failure, Req};
use crate::events::eqe::{async_event_sub, EVENT_DATA_BYTES};
use crate::model::vport::{
    Vport, HOST_ENDIANNESS_BYTES, MAX_MTU, PORT_CHANGE_ACTIVE, PORT_CHANGE_DOWN, PORT_DOWN, PORT_UP,
};
use crate::model::{Hw, Model};
use crate::syndrome as syn;

fn own_vport(other_vport: u64, vport_number: u64) -> CmdResult {
    if other_vport != 0 || vport_number != 0 {
        return Err(bad_param(syn::BAD_VPORT));
    }
    Ok(())
}

/// `allowed_list_type` of the unicast address list.
const LIST_UC: u64 = 0;

pub(crate) fn query_nic_vport_context(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let i = input::<QueryNicVportContextIn>(req)?;
    own_vport(
        i.get(QueryNicVportContextIn::OTHER_VPORT),
        i.get(QueryNicVportContextIn::VPORT_NUMBER),
    )?;
    let vp = &model.vport;
    let mut o = output::<QueryNicVportContextOut>(out)?;
    let mut c = o.nested_mut(QueryNicVportContextOut::NIC_VPORT_CONTEXT);
    encoded(c.set(Ctx::ROCE_EN, vp.roce_en.into()))?;
    encoded(c.set(Ctx::MTU, vp.mtu.into()))?;
    encoded(c.set(Ctx::DISABLE_UC_LOCAL_LB, vp.disable_uc_local_lb.into()))?;
    encoded(c.set(Ctx::DISABLE_MC_LOCAL_LB, vp.disable_mc_local_lb.into()))?;
    for f in [Ctx::SYSTEM_IMAGE_GUID, Ctx::PORT_GUID, Ctx::NODE_GUID] {
        encoded(c.set(f, vp.eui64()))?;
    }
    let perm = vp.permanent_address();
    let addr = c.bytes_mut(Ctx::PERMANENT_ADDRESS);
    let n = addr.len();
    addr[n.saturating_sub(6)..].copy_from_slice(&perm[6usize.saturating_sub(n)..]);
    // The unicast address list, when asked for (`allowed_list_type` 0 with a list size
    // Linux's PF reads).
    if i.get(QueryNicVportContextIn::ALLOWED_LIST_TYPE) == LIST_UC {
        encoded(c.set(Ctx::ALLOWED_LIST_SIZE, vp.uc.len() as u64))?;
        let uc = vp.uc.clone();
        let at = QueryNicVportContextOut::NIC_VPORT_CONTEXT.offset()
            + Ctx::CURRENT_UC_MAC_ADDRESS.offset();
        for (k, m) in uc.iter().enumerate() {
            if let Some(slot) = out.get_mut(at + 8 * k..at + 8 * k + 8) {
                slot[2..].copy_from_slice(m);
            }
        }
    }
    Ok(())
}

pub(crate) fn modify_nic_vport_context(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let i = input::<ModIn>(req)?;
    own_vport(i.get(ModIn::OTHER_VPORT), i.get(ModIn::VPORT_NUMBER))?;
    let sel = i.nested(ModIn::FIELD_SELECT);
    let c = i.nested(ModIn::NIC_VPORT_CONTEXT);
    let mtu = c.get(Ctx::MTU);
    if sel.get(Sel::MTU) == 1 && (mtu == 0 || mtu > u64::from(MAX_MTU)) {
        return Err(bad_param(syn::BAD_MTU));
    }
    let vp = &mut model.vport;
    if sel.get(Sel::ROCE_EN) == 1 {
        vp.roce_en = c.get(Ctx::ROCE_EN) == 1;
    }
    if sel.get(Sel::MTU) == 1 {
        vp.mtu = mtu as u16;
    }
    if sel.get(Sel::DISABLE_UC_LOCAL_LB) == 1 {
        vp.disable_uc_local_lb = c.get(Ctx::DISABLE_UC_LOCAL_LB) == 1;
    }
    if sel.get(Sel::DISABLE_MC_LOCAL_LB) == 1 {
        vp.disable_mc_local_lb = c.get(Ctx::DISABLE_MC_LOCAL_LB) == 1;
    }
    if sel.get(Sel::PERMANENT_ADDRESS) == 1 {
        let addr = c.bytes(Ctx::PERMANENT_ADDRESS);
        if let Some(mac) = addr.get(addr.len().saturating_sub(6)..) {
            vp.mac.copy_from_slice(mac);
            vp.mac_unset = false;
        }
    }
    // The address lists: the unicast one is kept (the function receives RoCE for it); the
    // multicast one reaches the flow tables' business only.
    if sel.get(Sel::ADDRESSES_LIST) == 1 && c.get(Ctx::ALLOWED_LIST_TYPE) == LIST_UC {
        let n = c.get(Ctx::ALLOWED_LIST_SIZE) as usize;
        let max = 1usize << model.cur(CmdHcaCap::LOG_MAX_CURRENT_UC_LIST).min(16);
        if n > max {
            return Err(bad_param(syn::BAD_ADDRESS_LIST));
        }
        let at = ModIn::NIC_VPORT_CONTEXT.offset() + Ctx::CURRENT_UC_MAC_ADDRESS.offset();
        let list = req
            .input
            .get(at..at + 8 * n)
            .ok_or(fail(CmdStatus::BadInputLen, syn::INLEN_BELOW_LAYOUT))?;
        model.vport.uc = list
            .chunks_exact(8)
            .map(|e| [e[2], e[3], e[4], e[5], e[6], e[7]])
            .collect();
        model.vport.relearn();
    }
    Ok(())
}

fn gid_slot(
    model: &mut Model,
    index: u64,
    port: u64,
) -> Result<&mut [u8; RoceAddrLayout::BYTES], Failure> {
    if port > 1 {
        return Err(bad_param(syn::BAD_VHCA_PORT));
    }
    // The port is named only on firmware that counts vHCA ports (Linux writes it only then).
    if port != 0 && model.cur(CmdHcaCap::NUM_VHCA_PORTS) == 0 {
        return Err(bad_param(syn::VHCA_PORT_NOT_SUPPORTED));
    }
    model
        .vport
        .gids
        .get_mut(index as usize)
        .ok_or(bad_param(syn::BAD_GID_INDEX))
}

pub(crate) fn set_roce_address(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let i = input::<SetRoceAddressIn>(req)?;
    let a = i.nested(SetRoceAddressIn::ROCE_ADDRESS);
    let version = a.get(RoceAddrLayout::ROCE_VERSION);
    let l3 = a.get(RoceAddrLayout::ROCE_L3_TYPE);
    let slot = gid_slot(
        model,
        i.get(SetRoceAddressIn::ROCE_ADDRESS_INDEX),
        i.get(SetRoceAddressIn::VHCA_PORT_NUM),
    )?;
    if !(version == 0 || version == roce::VERSION_2)
        || !(l3 == roce::L3_IPV4 || l3 == roce::L3_IPV6)
    {
        return Err(bad_param(syn::BAD_ROCE_ADDRESS));
    }
    slot.copy_from_slice(&a.as_bytes()[..RoceAddrLayout::BYTES]);
    model.vport.relearn();
    Ok(())
}

pub(crate) fn query_roce_address(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let i = input::<QueryRoceAddressIn>(req)?;
    let slot = *gid_slot(
        model,
        i.get(QueryRoceAddressIn::ROCE_ADDRESS_INDEX),
        i.get(QueryRoceAddressIn::VHCA_PORT_NUM),
    )?;
    let mut o = output::<QueryRoceAddressOut>(out)?;
    o.nested_mut(QueryRoceAddressOut::ROCE_ADDRESS).as_bytes()[..RoceAddrLayout::BYTES]
        .copy_from_slice(&slot);
    Ok(())
}

pub(crate) fn query_vport_state(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let i = input::<QueryVportStateIn>(req)?;
    own_vport(
        i.get(QueryVportStateIn::OTHER_VPORT),
        i.get(QueryVportStateIn::VPORT_NUMBER),
    )?;
    let mut o = output::<QueryVportStateOut>(out)?;
    encoded(o.set(QueryVportStateOut::ADMIN_STATE, model.vport.hv_admin))?;
    encoded(o.set(QueryVportStateOut::STATE, u64::from(model.vport.oper_up())))?;
    Ok(())
}

/// MODIFY_VPORT_STATE: only an e-switch (vport group) manager sets a vport's admin state —
/// Linux sends it from the PF's e-switch for its VFs (`mlx5_modify_vport_admin_state`,
/// `other_vport` 1); a function that manages none (a VF, and the simulated PF, which has no
/// e-switch) is refused (BAD_PARAM NOT_VPORT_MANAGER), another vport first (BAD_VPORT).
pub(crate) fn modify_vport_state(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let i = input::<ModifyVportStateIn>(req)?;
    own_vport(
        i.get(ModifyVportStateIn::OTHER_VPORT),
        i.get(ModifyVportStateIn::VPORT_NUMBER),
    )?;
    if model.cur(CmdHcaCap::VPORT_GROUP_MANAGER) == 0 && model.cur(CmdHcaCap::ESWITCH_MANAGER) == 0
    {
        return Err(bad_param(syn::NOT_VPORT_MANAGER));
    }
    model
        .vport
        .set_hv_admin(i.get(ModifyVportStateIn::ADMIN_STATE));
    Ok(())
}

pub(crate) fn access_reg(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let i = input::<AccessRegisterIn>(req)?;
    let id = i.get(AccessRegisterIn::REGISTER_ID) as u16;
    let write = match req.op_mod {
        reg::WRITE => true,
        reg::READ => false,
        _ => return Err(bad_param(syn::BAD_OP_MOD)),
    };
    let size = match id {
        reg::PAOS => PaosReg::BYTES,
        reg::PMTU => PmtuReg::BYTES,
        reg::HOST_ENDIANNESS => HOST_ENDIANNESS_BYTES,
        reg::PTYS => PtysReg::BYTES,
        reg::PPCNT => PpcntReg::BYTES,
        reg::PFCC => PfccReg::BYTES,
        reg::PCMR => PcmrReg::BYTES,
        reg::NODE_DESC => NODE_DESC_BYTES,
        _ => return Err(bad_param(syn::BAD_REGISTER_ID)),
    };
    let data = i.bytes(AccessRegisterIn::REGISTER_DATA);
    let data = data
        .get(..size)
        .ok_or(fail(CmdStatus::BadInputLen, syn::INLEN_REGISTER))?;
    if req.outlen < AccessRegisterOut::BYTES + size {
        return Err(fail(CmdStatus::BadOutputLen, syn::OUTLEN_REGISTER));
    }
    let mut o = output::<AccessRegisterOut>(out)?;
    let reg_out = &mut o.bytes_mut(AccessRegisterOut::REGISTER_DATA)[..size];
    let vp = &mut model.vport;
    match id {
        reg::PAOS => {
            let r = view::<PaosReg>(data)?;
            if r.get(PaosReg::LOCAL_PORT) != 1 {
                return Err(bad_param(syn::BAD_LOCAL_PORT));
            }
            if write && r.get(PaosReg::ASE) == 1 {
                let admin = r.get(PaosReg::ADMIN_STATUS);
                if admin != PORT_UP && admin != PORT_DOWN {
                    return Err(bad_param(syn::BAD_REGISTER_FIELD));
                }
                // The link follows at once (the simulated fabric is always there): if the
                // operational state changes, the port says so with a PORT_CHANGE event, as a
                // real link coming up or going down does.
                let before = vp.oper_up();
                vp.paos_admin = admin;
                if vp.oper_up() != before {
                    vp.port_event = Some(if vp.oper_up() {
                        PORT_CHANGE_ACTIVE
                    } else {
                        PORT_CHANGE_DOWN
                    });
                }
            }
            let mut w = output::<PaosReg>(reg_out)?;
            encoded(w.set(PaosReg::LOCAL_PORT, 1))?;
            encoded(w.set(PaosReg::ADMIN_STATUS, vp.paos_admin))?;
            let oper = if vp.oper_up() { PORT_UP } else { PORT_DOWN };
            encoded(w.set(PaosReg::OPER_STATUS, oper))?;
        }
        reg::PMTU => {
            let r = view::<PmtuReg>(data)?;
            if r.get(PmtuReg::LOCAL_PORT) != 1 {
                return Err(bad_param(syn::BAD_LOCAL_PORT));
            }
            if write {
                let mtu = r.get(PmtuReg::ADMIN_MTU);
                if mtu == 0 || mtu > u64::from(MAX_MTU) {
                    return Err(bad_param(syn::BAD_REGISTER_FIELD));
                }
                vp.pmtu_admin = mtu as u16;
            }
            let mut w = output::<PmtuReg>(reg_out)?;
            encoded(w.set(PmtuReg::LOCAL_PORT, 1))?;
            encoded(w.set(PmtuReg::MAX_MTU, MAX_MTU.into()))?;
            encoded(w.set(PmtuReg::ADMIN_MTU, vp.pmtu_admin.into()))?;
            encoded(w.set(PmtuReg::OPER_MTU, vp.pmtu_admin.into()))?;
        }
        reg::PTYS => ptys(data, reg_out, write)?,
        reg::PPCNT => {
            // Counter groups read as zeros: the simulated port counts no Ethernet traffic yet.
            let r = view::<PpcntReg>(data)?;
            if r.get(PpcntReg::LOCAL_PORT) != 1 {
                return Err(bad_param(syn::BAD_LOCAL_PORT));
            }
            if write && r.get(PpcntReg::CLR) == 0 {
                return Err(bad_param(syn::BAD_REGISTER_FIELD));
            }
            let mut w = output::<PpcntReg>(reg_out)?;
            encoded(w.set(PpcntReg::LOCAL_PORT, 1))?;
            encoded(w.set(PpcntReg::GRP, r.get(PpcntReg::GRP)))?;
            encoded(w.set(PpcntReg::PRIO_TC, r.get(PpcntReg::PRIO_TC)))?;
        }
        reg::PFCC => pfcc(vp, data, reg_out, write)?,
        reg::NODE_DESC => {
            // Read-only here: the description a ConnectX-5 reports, marked as simulated.
            if write {
                return Err(bad_param(syn::BAD_REGISTER_FIELD));
            }
            reg_out[..NODE_DESC.len()].copy_from_slice(NODE_DESC);
        }
        reg::PCMR => {
            // No FCS check or entropy control to offer: every capability bit 0, writes refused.
            let r = view::<PcmrReg>(data)?;
            if r.get(PcmrReg::LOCAL_PORT) != 1 {
                return Err(bad_param(syn::BAD_LOCAL_PORT));
            }
            if write {
                return Err(bad_param(syn::BAD_REGISTER_FIELD));
            }
            encoded(output::<PcmrReg>(reg_out)?.set(PcmrReg::LOCAL_PORT, 1))?;
        }
        _ => {
            if write {
                vp.host_endianness.copy_from_slice(data);
            }
            reg_out.copy_from_slice(&vp.host_endianness);
        }
    }
    Ok(())
}

/// PFCC (0x5007): the port's flow control as Linux's `mlx5_query_port_pause` /
/// `mlx5_query_port_pfc` read it (mlx5e's ethtool pause and per-priority statistics) and
/// `mlx5_set_port_pause` / `mlx5_set_port_pfc` write it. A write sets global pause each way
/// (unless its `pptx_mask_n` / `pprx_mask_n` says to leave it) and the PFC bits of the
/// priorities `prio_mask_tx` / `prio_mask_rx` select. The port keeps what is written: the
/// simulated wire has no congestion to pause for.
fn pfcc(vp: &mut Vport, data: &[u8], reg_out: &mut [u8], write: bool) -> CmdResult {
    let r = view::<PfccReg>(data)?;
    if r.get(PfccReg::LOCAL_PORT) != 1 {
        return Err(bad_param(syn::BAD_LOCAL_PORT));
    }
    if write {
        if r.get(PfccReg::PPTX_MASK_N) == 0 {
            vp.pause.0 = r.get(PfccReg::PPTX) == 1;
        }
        if r.get(PfccReg::PPRX_MASK_N) == 0 {
            vp.pause.1 = r.get(PfccReg::PPRX) == 1;
        }
        let (mtx, mrx) = (
            r.get(PfccReg::PRIO_MASK_TX) as u8,
            r.get(PfccReg::PRIO_MASK_RX) as u8,
        );
        vp.pfc.0 = (vp.pfc.0 & !mtx) | (r.get(PfccReg::PFCTX) as u8 & mtx);
        vp.pfc.1 = (vp.pfc.1 & !mrx) | (r.get(PfccReg::PFCRX) as u8 & mrx);
    }
    let mut w = output::<PfccReg>(reg_out)?;
    encoded(w.set(PfccReg::LOCAL_PORT, 1))?;
    encoded(w.set(PfccReg::PPTX, vp.pause.0.into()))?;
    encoded(w.set(PfccReg::PPRX, vp.pause.1.into()))?;
    encoded(w.set(PfccReg::PFCTX, vp.pfc.0.into()))?;
    encoded(w.set(PfccReg::PFCRX, vp.pfc.1.into()))?;
    Ok(())
}

/// NODE_DESC register size: a 64-byte string.
const NODE_DESC_BYTES: usize = 64;
/// The node description (NUL-padded to 64 bytes).
const NODE_DESC: &[u8] = b"MT4119 ConnectX5 (mlx5-sim)";

/// The one Ethernet protocol the simulated port runs: 100GBASE-CR4 (`eth_proto_*` bit 20).
const ETH_100GBASE_CR4: u64 = 1 << 20;
/// PTYS `proto_mask` bit for Ethernet.
const PROTO_ETH: u64 = 1 << 2;

/// PTYS: Ethernet only; capability, admin and operational protocol 100GBASE-CR4. A write may
/// set admin to that protocol only.
fn ptys(data: &[u8], reg_out: &mut [u8], write: bool) -> CmdResult {
    let r = view::<PtysReg>(data)?;
    if r.get(PtysReg::LOCAL_PORT) != 1 {
        return Err(bad_param(syn::BAD_LOCAL_PORT));
    }
    if r.get(PtysReg::PROTO_MASK) & PROTO_ETH == 0 {
        return Err(bad_param(syn::BAD_REGISTER_FIELD));
    }
    if write && r.get(PtysReg::ETH_PROTO_ADMIN) & !ETH_100GBASE_CR4 != 0 {
        return Err(bad_param(syn::BAD_REGISTER_FIELD));
    }
    let mut w = output::<PtysReg>(reg_out)?;
    encoded(w.set(PtysReg::LOCAL_PORT, 1))?;
    encoded(w.set(PtysReg::PROTO_MASK, PROTO_ETH))?;
    for f in [
        PtysReg::ETH_PROTO_CAPABILITY,
        PtysReg::ETH_PROTO_ADMIN,
        PtysReg::ETH_PROTO_OPER,
    ] {
        encoded(w.set(f, ETH_100GBASE_CR4))?;
    }
    Ok(())
}

/// What the port does after a command: a PORT_CHANGE event (port 1) for an operational state
/// the command changed, to every EQ subscribed to it.
pub(crate) fn after_command(hw: &mut Hw<'_>) {
    let Some(sub) = hw.model.vport.port_event.take() else {
        return;
    };
    let mut data = [0u8; EVENT_DATA_BYTES];
    let r = mlx5_ifc::ViewMut::<mlx5_ifc::prm::eqe::PortStateChangeEvent>::new(&mut data).and_then(
        |mut v| {
            v.set(mlx5_ifc::prm::eqe::PortStateChangeEvent::PORT_NUM, 1)
                .map(drop)
        },
    );
    if let Err(e) = r {
        log::error!("mlx5-sim: PORT_CHANGE event data: {e}");
    }
    log::debug!("mlx5-sim: PORT_CHANGE sub-type {sub}");
    async_event_sub(hw, mlx5_ifc::event::PORT_CHANGE, sub, &data);
}
