//! What Linux's mlx5_ib creates on every device beyond the verbs objects, at the byte level:
//! XRC domains and an XRC SRQ (DEVICE_RESOURCES), QP1 (the GSI QP) and the UMR QP, the P_Key
//! table and the node description — each with its refusals and a clean teardown.

mod common;

use common::cmd;
use common::queues::*;
use mlx5_ifc::consts::{qp_st, reg};
use mlx5_ifc::prm::cq::DestroyCqIn;
use mlx5_ifc::prm::eq::DestroyEqIn;
use mlx5_ifc::prm::hca::{AccessRegisterIn, AccessRegisterOut};
use mlx5_ifc::prm::qp::{CreateQpOut, DestroyQpIn, Qpc};
use mlx5_ifc::prm::srq::{CreateXrcSrqIn, CreateXrcSrqOut, DestroyXrcSrqIn, XrcSrqc};
use mlx5_ifc::prm::uar_pd::{AllocXrcdIn, AllocXrcdOut, DeallocXrcdIn};
use mlx5_ifc::prm::vport::{MadIfcIn, MadIfcOut, QueryHcaVportPkeyIn, QueryHcaVportPkeyOut};
use mlx5_ifc::{CmdStatus, Layout, Opcode, View};
use mlx5_sim::syndrome as syn;
use mlx5_sim::Mode;

fn xrc_srq_in(fx: &Fx, xrcd: u32, cqn: u32) -> Vec<u8> {
    let (pd, dbr) = (fx.pd, fx.dbr(5));
    let input = cmd::<CreateXrcSrqIn>(Opcode::CreateXrcSrq, 0, |v| {
        let mut c = v.nested_mut(CreateXrcSrqIn::XRC_SRQ_CONTEXT_ENTRY);
        c.set(XrcSrqc::LOG_XRC_SRQ_SIZE, 2).unwrap();
        c.set(XrcSrqc::LOG_RQ_STRIDE, 1).unwrap();
        c.set(XrcSrqc::XRCD, xrcd.into()).unwrap();
        c.set(XrcSrqc::CQN, cqn.into()).unwrap();
        c.set(XrcSrqc::PD, pd.into()).unwrap();
        c.set(XrcSrqc::DB_RECORD_ADDR_H, dbr >> 32).unwrap();
        c.set(XrcSrqc::DB_RECORD_ADDR_L, (dbr & 0xffff_ffff) >> 2)
            .unwrap();
    });
    with_pas(input, &fx.pages(1))
}

fn pkey_query(index: u64) -> Vec<u8> {
    cmd::<QueryHcaVportPkeyIn>(Opcode::QueryHcaVportPkey, 0, |v| {
        v.set(QueryHcaVportPkeyIn::PKEY_INDEX, index).unwrap();
    })
}

#[test]
fn xrc_gsi_umr_pkey_and_node_description() {
    let mut fx = Fx::cx5(Mode::Sync);
    let eqn = fx.create_eq();
    let cqn = fx.create_cq(eqn);

    // XRC domain and SRQ: the SRQ holds its domain.
    let out =
        fx.p.ok(&common::bare::<AllocXrcdIn>(Opcode::AllocXrcd, 0), 0x10);
    let xrcd = View::<AllocXrcdOut>::new(&out)
        .unwrap()
        .get32(AllocXrcdOut::XRCD);
    let dealloc = cmd::<DeallocXrcdIn>(Opcode::DeallocXrcd, 0, |v| {
        v.set(DeallocXrcdIn::XRCD, xrcd.into()).unwrap();
    });
    fx.expect(
        &xrc_srq_in(&fx, xrcd + 3, cqn),
        0x10,
        (CmdStatus::BadRes.raw(), syn::UNKNOWN_XRCD),
    );
    let out = fx.p.ok(&xrc_srq_in(&fx, xrcd, cqn), CreateXrcSrqOut::BYTES);
    let srqn = View::<CreateXrcSrqOut>::new(&out)
        .unwrap()
        .get32(CreateXrcSrqOut::XRC_SRQN);
    fx.expect(&dealloc, 0x10, (CmdStatus::ResBusy.raw(), syn::XRCD_IN_USE));

    // QP1 once; a UMR QP without a PD.
    let gsi_in = fx.qp_in(qp_st::QP1, cqn, |_| {});
    let out = fx.p.ok(&gsi_in, CreateQpOut::BYTES);
    let gsi = View::<CreateQpOut>::new(&out)
        .unwrap()
        .get32(CreateQpOut::QPN);
    fx.expect(
        &gsi_in,
        0x10,
        (CmdStatus::ResBusy.raw(), syn::GSI_QP_EXISTS),
    );
    let umr_in = fx.qp_in(qp_st::REG_UMR, cqn, |c| {
        c.set(Qpc::PD, 0).unwrap();
        c.set(Qpc::RQ_TYPE, 3).unwrap();
        c.set(Qpc::LOG_RQ_SIZE, 0).unwrap();
    });
    let out = fx.p.ok(&umr_in, CreateQpOut::BYTES);
    let umr = View::<CreateQpOut>::new(&out)
        .unwrap()
        .get32(CreateQpOut::QPN);
    let plain = fx.qp_in(qp_st::UD, cqn, |c| c.set(Qpc::PD, 0).map(drop).unwrap());
    fx.expect(&plain, 0x10, (CmdStatus::BadRes.raw(), syn::UNKNOWN_PD));

    // The P_Key table of a RoCE port: the default partition at 0.
    let out = fx.p.ok(&pkey_query(0), QueryHcaVportPkeyOut::BYTES + 4);
    assert_eq!(out[QueryHcaVportPkeyOut::BYTES + 2..][..2], [0xff, 0xff]);
    let out =
        fx.p.ok(&pkey_query(0xffff), QueryHcaVportPkeyOut::BYTES + 8);
    assert_eq!(
        out[QueryHcaVportPkeyOut::BYTES..],
        [0, 0, 0xff, 0xff, 0, 0, 0, 0]
    );
    fx.expect(
        &pkey_query(128),
        0x14,
        (CmdStatus::BadParam.raw(), syn::BAD_GID_INDEX),
    );

    // NODE_DESC: a 64-byte string, read only.
    let mut read = cmd::<AccessRegisterIn>(Opcode::AccessReg, reg::READ, |v| {
        v.set(AccessRegisterIn::REGISTER_ID, reg::NODE_DESC.into())
            .unwrap();
    });
    read.extend_from_slice(&[0; 64]);
    let out = fx.p.ok(&read, AccessRegisterOut::BYTES + 64);
    assert!(out[AccessRegisterOut::BYTES..].starts_with(b"MT4119 ConnectX5"));
    let mut write = read.clone();
    write[6..8].copy_from_slice(&reg::WRITE.to_be_bytes());
    fx.expect(
        &write,
        AccessRegisterOut::BYTES + 64,
        (CmdStatus::BadParam.raw(), syn::BAD_REGISTER_FIELD),
    );

    // MAD_IFC: PMA ClassPortInfo answered; another attribute answered "unsupported".
    let mad = |class: u8, attr: u16| {
        let mut m = [0u8; 256];
        m[..4].copy_from_slice(&[1, class, 1, 1]);
        m[16..18].copy_from_slice(&attr.to_be_bytes());
        cmd::<MadIfcIn>(Opcode::MadIfc, 3, |v| {
            v.set(MadIfcIn::PORT, 1).unwrap();
            v.set_bytes(MadIfcIn::MAD, &m).unwrap();
        })
    };
    let resp = |fx: &mut Fx, input: &[u8]| {
        let out = fx.p.ok(input, MadIfcOut::BYTES);
        View::<MadIfcOut>::new(&out)
            .unwrap()
            .bytes(MadIfcOut::RESPONSE_MAD_PACKET)
            .to_vec()
    };
    let r = resp(&mut fx, &mad(0x04, 0x0001));
    assert_eq!((r[3], &r[4..6], r[64], r[65]), (0x81, &[0u8, 0][..], 1, 1));
    let r = resp(&mut fx, &mad(0x04, 0x0012));
    assert_eq!((r[3], &r[4..6]), (0x81, &[0u8, 0x0c][..]));
    let r = resp(&mut fx, &mad(0x01, 0x0015));
    assert_eq!(
        &r[4..6],
        &[0u8, 0x04][..],
        "no subnet management agent on a RoCE port"
    );

    for qpn in [gsi, umr] {
        fx.p.ok(
            &cmd::<DestroyQpIn>(Opcode::DestroyQp, 0, |v| {
                v.set(DestroyQpIn::QPN, qpn.into()).unwrap();
            }),
            0x10,
        );
    }
    fx.p.ok(
        &cmd::<DestroyXrcSrqIn>(Opcode::DestroyXrcSrq, 0, |v| {
            v.set(DestroyXrcSrqIn::XRC_SRQN, srqn.into()).unwrap();
        }),
        0x10,
    );
    fx.p.ok(&dealloc, 0x10);
    fx.p.ok(
        &cmd::<DestroyCqIn>(Opcode::DestroyCq, 0, |v| {
            v.set(DestroyCqIn::CQN, cqn.into()).unwrap();
        }),
        0x10,
    );
    fx.p.ok(
        &cmd::<DestroyEqIn>(Opcode::DestroyEq, 0, |v| {
            v.set(DestroyEqIn::EQ_NUMBER, eqn.into()).unwrap();
        }),
        0x10,
    );
    fx.finish_clean();
}
