//! mlx5dv direct rules' control path, byte by byte (notes: dr-control.md): uids, the send
//! ring's force-loopback connection, SW ICM objects and their keys.

use mlx5_ifc::consts::{general_obj_type, mkey_access_mode};
use mlx5_ifc::prm::devx::{CreateUctxIn, CreateUctxOut};
use mlx5_ifc::prm::general_obj::{GeneralObjInCmdHdr, GeneralObjOutCmdHdr};
use mlx5_ifc::prm::mr::{CreateMkeyIn, CreateMkeyOut, Mkc};
use mlx5_ifc::prm::qp::{Ads, Qpc};
use mlx5_ifc::prm::sw_icm::{CreateSwIcmIn, SwIcm};
use mlx5_ifc::{CmdInHeader, Layout, Opcode, View, ViewMut};

use super::cmd;
use super::datapath::{Node, Qp};
use super::queues::{Fx, Step};

/// `input` with `uid` in its header.
pub fn as_uid(mut input: Vec<u8>, uid: u16) -> Vec<u8> {
    ViewMut::<CmdInHeader>::new(&mut input)
        .unwrap()
        .set(CmdInHeader::UID, uid.into())
        .unwrap();
    input
}

/// A user context (CREATE_UCTX, no caps): its uid.
pub fn create_uctx(fx: &mut Fx) -> u16 {
    let input = cmd::<CreateUctxIn>(Opcode::CreateUctx, 0, |_| {});
    let out = fx.p.ok(&input, CreateUctxOut::BYTES);
    View::<CreateUctxOut>::new(&out)
        .unwrap()
        .get(CreateUctxOut::UID) as u16
}

/// RST2INIT, INIT2RTR and RTR2RTS as rdma-core's `dr_devx_modify_qp_*` send them: port 1,
/// `rre`/`rwe`; MTU 1024, `log_msg_max` 24, `remote_qpn`, the path's `fl` and `min_rnr_nak` 1
/// (no `rmac`, no GID); retry and RNR retry 7, `ack_timeout` 8. The statuses of the three.
pub fn connect_fl(n: &mut Node, qp: &Qp, remote: u32, fl: u64) -> [(u8, u32); 3] {
    let port = |c: &mut ViewMut<'_, Qpc>| {
        c.nested_mut(Qpc::PRIMARY_ADDRESS_PATH)
            .set(Ads::VHCA_PORT_NUM, 1)
            .unwrap();
    };
    let rc = qp.st == mlx5_ifc::consts::qp_st::RC;
    let init = n.modify(Step::Rst2Init, qp.qpn, |c| {
        port(c);
        c.set(Qpc::PM_STATE, 3).unwrap();
        c.set(Qpc::RRE, rc.into()).unwrap();
        c.set(Qpc::RWE, 1).unwrap();
    });
    let rtr = n.modify(Step::Init2Rtr, qp.qpn, |c| {
        port(c);
        c.set(Qpc::MTU, 3).unwrap();
        c.set(Qpc::LOG_MSG_MAX, 24).unwrap();
        c.set(Qpc::REMOTE_QPN, remote.into()).unwrap();
        c.set(Qpc::MIN_RNR_NAK, 1).unwrap();
        c.nested_mut(Qpc::PRIMARY_ADDRESS_PATH)
            .set(Ads::FL, fl)
            .unwrap();
    });
    let rts = n.modify(Step::Rtr2Rts, qp.qpn, |c| {
        c.set(Qpc::RETRY_COUNT, 7).unwrap();
        c.set(Qpc::RNR_RETRY, 7).unwrap();
        c.nested_mut(Qpc::PRIMARY_ADDRESS_PATH)
            .set(Ads::ACK_TIMEOUT, 8)
            .unwrap();
    });
    [init, rtr, rts]
}

/// CREATE_GENERAL_OBJECT SW_ICM as Linux's `mlx5_dm_sw_icm_alloc` sends it: `2^log_size`
/// bytes at ICM address `start`, for `uid`. The status and the object id.
pub fn create_sw_icm(fx: &mut Fx, uid: u16, start: u64, log_size: u64) -> ((u8, u32), u32) {
    let input = cmd::<CreateSwIcmIn>(Opcode::CreateGeneralObject, 0, |v| {
        let mut h = v.nested_mut(CreateSwIcmIn::HDR);
        h.set(GeneralObjInCmdHdr::OBJ_TYPE, general_obj_type::SW_ICM)
            .unwrap();
        let mut c = v.nested_mut(CreateSwIcmIn::SW_ICM);
        c.set(SwIcm::LOG_SW_ICM_SIZE, log_size).unwrap();
        c.set(SwIcm::SW_ICM_START_ADDR, start).unwrap();
    });
    let (st, out) = fx.run(&as_uid(input, uid), GeneralObjOutCmdHdr::BYTES);
    let id = View::<GeneralObjOutCmdHdr>::new(&out)
        .unwrap()
        .get32(GeneralObjOutCmdHdr::OBJ_ID);
    (st, id)
}

/// DESTROY_GENERAL_OBJECT of `obj_type` `ty`, id `id`, for `uid`: the status.
pub fn destroy_general(fx: &mut Fx, uid: u16, ty: u64, id: u32) -> (u8, u32) {
    let input = cmd::<GeneralObjInCmdHdr>(Opcode::DestroyGeneralObject, 0, |v| {
        v.set(GeneralObjInCmdHdr::OBJ_TYPE, ty).unwrap();
        v.set(GeneralObjInCmdHdr::OBJ_ID, id.into()).unwrap();
    });
    fx.run(&as_uid(input, uid), GeneralObjOutCmdHdr::BYTES).0
}

/// A SW ICM key as `mlx5_ib_get_dm_mr` makes one: access mode SW_ICM (4), `lr`, `lw`, `rr`,
/// `rw`, `qpn` 0xffffff, PD `pd`, `start_addr` the ICM address, `len`. The status and the key.
pub fn sw_icm_key(fx: &mut Fx, pd: u32, start: u64, len: u64) -> ((u8, u32), u32) {
    let input = cmd::<CreateMkeyIn>(Opcode::CreateMkey, 0, |v| {
        let mut c = v.nested_mut(CreateMkeyIn::MEMORY_KEY_MKEY_ENTRY);
        c.set(Mkc::ACCESS_MODE_1_0, mkey_access_mode::SW_ICM & 3)
            .unwrap();
        c.set(Mkc::ACCESS_MODE_4_2, mkey_access_mode::SW_ICM >> 2)
            .unwrap();
        for f in [Mkc::LR, Mkc::LW, Mkc::RR, Mkc::RW] {
            c.set(f, 1).unwrap();
        }
        c.set(Mkc::QPN, 0xff_ffff).unwrap();
        c.set(Mkc::MKEY_7_0, 0x5a).unwrap();
        c.set(Mkc::PD, pd.into()).unwrap();
        c.set(Mkc::START_ADDR, start).unwrap();
        c.set(Mkc::LEN, len).unwrap();
    });
    let (st, out) = fx.run(&input, CreateMkeyOut::BYTES);
    let index = View::<CreateMkeyOut>::new(&out)
        .unwrap()
        .get32(CreateMkeyOut::MKEY_INDEX);
    (st, index << 8 | 0x5a)
}
