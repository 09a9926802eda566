//! Every command status error the firmware reports, with its syndrome, and that a failed
//! command has no effect.

mod common;

use common::{bare, cmd, status, Poster};
use mlx5_ifc::consts::{cap_mode, cap_type, manage_pages, query_pages, reg};
use mlx5_ifc::prm::caps::CmdHcaCap;
use mlx5_ifc::prm::hca::{
    AccessRegisterIn, DisableHcaIn, EnableHcaIn, InitHcaIn, ManagePagesIn, PaosReg, PmtuReg,
    QueryHcaCapIn, QueryIssiIn, QueryPagesIn, SetHcaCapIn, SetIssiIn, TeardownHcaIn,
};
use mlx5_ifc::prm::uar_pd::{AllocPdIn, AllocPdOut, AllocUarIn, DeallocPdIn, DeallocUarIn};
use mlx5_ifc::prm::vport::{
    ModifyNicVportContextIn as ModIn, ModifyNicVportFieldSelect as Sel, NicVportContext as Ctx,
    QueryNicVportContextIn, QueryRoceAddressIn, QueryVportStateIn, QueryVportStateOut,
    RoceAddrLayout, SetRoceAddressIn,
};
use mlx5_ifc::{CmdInHeader, CmdStatus, Layout, Opcode, View, ViewMut};
use mlx5_sim::syndrome as syn;
use mlx5_sim::{Fault, HcaState, Mode, Profile};

const BAD_OP: u8 = CmdStatus::BadOp.raw();
const BAD_PARAM: u8 = CmdStatus::BadParam.raw();
const BAD_STATE: u8 = CmdStatus::BadSysState.raw();
const BAD_RES: u8 = CmdStatus::BadRes.raw();
const EXCEED_LIM: u8 = CmdStatus::ExceedLim.raw();
const BAD_INLEN: u8 = CmdStatus::BadInputLen.raw();
const BAD_OUTLEN: u8 = CmdStatus::BadOutputLen.raw();

fn expect(p: &mut Poster, input: &[u8], outlen: usize, want: (u8, u32)) {
    let out = p.exec(input, outlen);
    assert_eq!(
        status(&out),
        want,
        "got syndrome {:?}",
        syn::name(status(&out).1)
    );
    assert!(
        out[8..].iter().all(|&b| b == 0),
        "a failed command's output is zero"
    );
}

fn reg_cmd<R: Layout>(id: u16, op_mod: u16, f: impl FnOnce(&mut ViewMut<'_, R>)) -> Vec<u8> {
    let mut input = cmd::<AccessRegisterIn>(Opcode::AccessReg, op_mod, |v| {
        v.set(AccessRegisterIn::REGISTER_ID, id.into()).unwrap();
    });
    let mut data = vec![0u8; R::BYTES];
    f(&mut ViewMut::<R>::new(&mut data).unwrap());
    input.extend_from_slice(&data);
    input
}

fn initialized() -> Poster {
    let mut p = Poster::cx5(Mode::Sync);
    p.init();
    p
}

#[test]
fn lengths_and_unknown_opcodes() {
    let mut p = Poster::cx5(Mode::Sync);
    let enable = bare::<EnableHcaIn>(Opcode::EnableHca, 0);
    expect(
        &mut p,
        &enable[..4],
        0x10,
        (BAD_INLEN, syn::INLEN_BELOW_HEADER),
    );
    expect(
        &mut p,
        &enable[..8],
        0x10,
        (BAD_INLEN, syn::INLEN_BELOW_LAYOUT),
    );
    expect(&mut p, &enable, 8, (BAD_OUTLEN, syn::OUTLEN_BELOW_LAYOUT));
    p.ok(&enable, 0x10);
    let set_cap = bare::<SetHcaCapIn>(Opcode::SetHcaCap, 0);
    expect(
        &mut p,
        &set_cap[..0x110],
        0x10,
        (BAD_INLEN, syn::INLEN_BELOW_LAYOUT),
    );
    expect(
        &mut p,
        &bare::<QueryHcaCapIn>(Opcode::QueryHcaCap, 1),
        0x110,
        (BAD_OUTLEN, syn::OUTLEN_BELOW_LAYOUT),
    );
    let mut unknown = bare::<QueryIssiIn>(Opcode::QueryIssi, 0);
    ViewMut::<CmdInHeader>::new(&mut unknown)
        .unwrap()
        .set(CmdInHeader::OPCODE, 0x7777)
        .unwrap();
    expect(&mut p, &unknown, 0x10, (BAD_OP, syn::UNKNOWN_OPCODE));
    // A named opcode the device does not implement.
    let gen_eqe = bare::<QueryIssiIn>(Opcode::GenEqe, 0);
    expect(&mut p, &gen_eqe, 0x10, (BAD_OP, syn::UNKNOWN_OPCODE));
    assert_eq!(
        p.dev.commands_executed(),
        8,
        "failed commands are executed commands"
    );
}

#[test]
fn the_state_machine() {
    let mut p = Poster::cx5(Mode::Sync);
    expect(
        &mut p,
        &bare::<QueryIssiIn>(Opcode::QueryIssi, 0),
        0x70,
        (BAD_STATE, syn::NOT_ENABLED),
    );
    expect(
        &mut p,
        &bare::<AllocPdIn>(Opcode::AllocPd, 0),
        0x10,
        (BAD_STATE, syn::NOT_ENABLED),
    );
    expect(
        &mut p,
        &bare::<DisableHcaIn>(Opcode::DisableHca, 0),
        0x10,
        (BAD_STATE, syn::NOT_ENABLED),
    );
    let enable = bare::<EnableHcaIn>(Opcode::EnableHca, 0);
    p.ok(&enable, 0x10);
    expect(&mut p, &enable, 0x10, (BAD_STATE, syn::ALREADY_ENABLED));
    expect(
        &mut p,
        &bare::<AllocPdIn>(Opcode::AllocPd, 0),
        0x10,
        (BAD_STATE, syn::NOT_INITIALIZED),
    );
    expect(
        &mut p,
        &bare::<TeardownHcaIn>(Opcode::TeardownHca, 0),
        0x10,
        (BAD_STATE, syn::NOT_INITIALIZED),
    );
    let init = bare::<InitHcaIn>(Opcode::InitHca, 0);
    expect(&mut p, &init, 0x10, (BAD_STATE, syn::INSUFFICIENT_PAGES));
    p.give(79);
    expect(&mut p, &init, 0x10, (BAD_STATE, syn::INSUFFICIENT_PAGES));
    p.give(1);
    p.ok(&init, 0x10);
    expect(&mut p, &init, 0x10, (BAD_STATE, syn::ALREADY_INITIALIZED));
    let cur = p.query_cap(cap_type::GENERAL, cap_mode::CUR);
    assert_eq!(
        p.set_cap(cap_type::GENERAL, &cur),
        (BAD_STATE, syn::SET_CAP_AFTER_INIT)
    );
    expect(
        &mut p,
        &bare::<DisableHcaIn>(Opcode::DisableHca, 0),
        0x10,
        (BAD_STATE, syn::DISABLE_WHILE_INITIALIZED),
    );
    expect(&mut p, &enable, 0x10, (BAD_STATE, syn::ALREADY_ENABLED));
    p.ok(&bare::<TeardownHcaIn>(Opcode::TeardownHca, 0), 0x10);
    assert_eq!(p.dev.hca_state(), HcaState::TornDown);
    expect(
        &mut p,
        &bare::<AllocPdIn>(Opcode::AllocPd, 0),
        0x10,
        (BAD_STATE, syn::NOT_INITIALIZED),
    );
    p.take_all();
    p.ok(&bare::<DisableHcaIn>(Opcode::DisableHca, 0), 0x10);
    common::assert_clean(&p.finish());
}

#[test]
fn bad_parameters_of_the_hca_commands() {
    let mut p = Poster::cx5(Mode::Sync);
    let f1 = |v: &mut ViewMut<'_, EnableHcaIn>| drop(v.set(EnableHcaIn::FUNCTION_ID, 1));
    expect(
        &mut p,
        &cmd::<EnableHcaIn>(Opcode::EnableHca, 0, f1),
        0x10,
        (BAD_PARAM, syn::BAD_FUNCTION_ID),
    );
    p.ok(&bare::<EnableHcaIn>(Opcode::EnableHca, 0), 0x10);
    let d1 = cmd::<DisableHcaIn>(Opcode::DisableHca, 0, |v| {
        drop(v.set(DisableHcaIn::FUNCTION_ID, 1))
    });
    expect(&mut p, &d1, 0x10, (BAD_PARAM, syn::BAD_FUNCTION_ID));
    let issi = cmd::<SetIssiIn>(Opcode::SetIssi, 0, |v| {
        drop(v.set(SetIssiIn::CURRENT_ISSI, 2))
    });
    expect(&mut p, &issi, 0x10, (BAD_PARAM, syn::BAD_ISSI));
    expect(
        &mut p,
        &bare::<QueryPagesIn>(Opcode::QueryPages, 4),
        0x10,
        (BAD_PARAM, syn::BAD_OP_MOD),
    );
    let qp1 = cmd::<QueryPagesIn>(Opcode::QueryPages, query_pages::BOOT, |v| {
        drop(v.set(QueryPagesIn::FUNCTION_ID, 1))
    });
    expect(&mut p, &qp1, 0x10, (BAD_PARAM, syn::BAD_FUNCTION_ID));
    expect(
        &mut p,
        &bare::<ManagePagesIn>(Opcode::ManagePages, 3),
        0x10,
        (BAD_PARAM, syn::BAD_OP_MOD),
    );
    p.ok(
        &bare::<ManagePagesIn>(Opcode::ManagePages, manage_pages::ALLOC_FAIL),
        0x10,
    );
    // A capability type this device does not have (DEBUG, 0x0d); ETHERNET_OFFLOADS and
    // FLOW_TABLE are answered but, as every type but GENERAL, ROCE and ATOMIC, not settable.
    let debug_caps = bare::<QueryHcaCapIn>(Opcode::QueryHcaCap, 0x0d << 1);
    expect(&mut p, &debug_caps, 0x1010, (BAD_PARAM, syn::BAD_CAP_TYPE));
    let cur = p.query_cap(cap_type::GENERAL, cap_mode::CUR);
    let with = |f: &dyn Fn(&mut ViewMut<'_, CmdHcaCap>)| {
        let mut c = cur.clone();
        f(&mut ViewMut::<CmdHcaCap>::new(&mut c).unwrap());
        c
    };
    let too_many_qps = with(&|v| drop(v.set(CmdHcaCap::LOG_MAX_QP, 19)));
    assert_eq!(
        p.set_cap(cap_type::GENERAL, &too_many_qps),
        (BAD_PARAM, syn::CAP_EXCEEDS_MAX)
    );
    let bad_checksum = with(&|v| drop(v.set(CmdHcaCap::CMDIF_CHECKSUM, 2)));
    assert_eq!(
        p.set_cap(cap_type::GENERAL, &bad_checksum),
        (BAD_PARAM, syn::BAD_CMDIF_CHECKSUM)
    );
    assert_eq!(
        p.set_cap(cap_type::ETHERNET_OFFLOADS, &cur),
        (BAD_PARAM, syn::BAD_CAP_TYPE)
    );
    let mode_bit = cmd::<SetHcaCapIn>(Opcode::SetHcaCap, 1, |v| {
        v.bytes_mut(SetHcaCapIn::CAPABILITY)[..256].copy_from_slice(&cur);
    });
    expect(&mut p, &mode_bit, 0x10, (BAD_PARAM, syn::BAD_OP_MOD));
    assert_eq!(
        p.query_cap(cap_type::GENERAL, cap_mode::CUR),
        cur,
        "refused SET_HCA_CAPs changed nothing"
    );
    let uid = cmd::<QueryIssiIn>(Opcode::QueryIssi, 0, |v| {
        let _ = v;
    });
    let mut uid = uid;
    ViewMut::<CmdInHeader>::new(&mut uid)
        .unwrap()
        .set(CmdInHeader::UID, 5)
        .unwrap();
    expect(&mut p, &uid, 0x70, (BAD_PARAM, syn::BAD_UID));
}

#[test]
fn teardown_profiles() {
    let teardown = |profile: u64| {
        cmd::<TeardownHcaIn>(Opcode::TeardownHca, 0, |v| {
            drop(v.set(TeardownHcaIn::PROFILE, profile))
        })
    };
    let mut p = initialized();
    expect(
        &mut p,
        &teardown(3),
        0x10,
        (BAD_PARAM, syn::BAD_TEARDOWN_PROFILE),
    );
    p.ok(&teardown(2), 0x10);
    assert_eq!(p.dev.hca_state(), HcaState::TornDown);

    let slow = common::quiet(Profile::from_json_str(r#"{"fast_teardown": 0}"#).unwrap());
    let mut p = Poster::sim(slow, Mode::Sync);
    p.init();
    expect(
        &mut p,
        &teardown(2),
        0x10,
        (BAD_PARAM, syn::BAD_TEARDOWN_PROFILE),
    );
    p.ok(&teardown(1), 0x10);
}

#[test]
fn resources_unknown_and_exhausted() {
    let mut p = Poster::sim(common::quiet_by_name("cx5-tight").unwrap(), Mode::Sync);
    p.init();
    let dealloc_pd =
        |pd: u64| cmd::<DeallocPdIn>(Opcode::DeallocPd, 0, |v| drop(v.set(DeallocPdIn::PD, pd)));
    expect(&mut p, &dealloc_pd(99), 0x10, (BAD_RES, syn::UNKNOWN_PD));
    let dealloc_uar =
        cmd::<DeallocUarIn>(Opcode::DeallocUar, 0, |v| drop(v.set(DeallocUarIn::UAR, 3)));
    expect(&mut p, &dealloc_uar, 0x10, (BAD_RES, syn::UNKNOWN_UAR));
    // log_max_pd 4: PDs 1..15.
    let mut pds = Vec::new();
    for _ in 0..15 {
        let out = p.ok(&bare::<AllocPdIn>(Opcode::AllocPd, 0), 0x10);
        pds.push(View::<AllocPdOut>::new(&out).unwrap().get(AllocPdOut::PD));
    }
    assert!(pds.iter().all(|&pd| pd > 0 && pd < 16));
    expect(
        &mut p,
        &bare::<AllocPdIn>(Opcode::AllocPd, 0),
        0x10,
        (EXCEED_LIM, syn::PD_EXHAUSTED),
    );
    p.ok(&dealloc_pd(pds[3]), 0x10);
    expect(
        &mut p,
        &dealloc_pd(pds[3]),
        0x10,
        (BAD_RES, syn::UNKNOWN_PD),
    );
    let out = p.ok(&bare::<AllocPdIn>(Opcode::AllocPd, 0), 0x10);
    assert_eq!(
        View::<AllocPdOut>::new(&out).unwrap().get(AllocPdOut::PD),
        pds[3],
        "the only free number"
    );
    assert_eq!(p.dev.live_objects().len(), 15);
}

#[test]
fn uars_run_out_where_the_memic_window_begins() {
    let mut p = initialized();
    // The top 128 KiB of BAR0 are device memory (device_mem_cap.memic_bar_start_addr).
    let caps = p.query_cap(mlx5_ifc::consts::cap_type::DEV_MEM, 1);
    let window = mlx5_ifc::View::<mlx5_ifc::prm::memic::DeviceMemCap>::new(&caps)
        .unwrap()
        .get(mlx5_ifc::prm::memic::DeviceMemCap::MEMIC_BAR_START_ADDR);
    assert_eq!(window, mlx5_sim::BAR_SIZE - (128 << 10));
    let n = (window / 4096) as u32 - mlx5_sim::FIRST_UAR_INDEX;
    for _ in 0..n {
        p.ok(&bare::<AllocUarIn>(Opcode::AllocUar, 0), 0x10);
    }
    expect(
        &mut p,
        &bare::<AllocUarIn>(Opcode::AllocUar, 0),
        0x10,
        (EXCEED_LIM, syn::UAR_EXHAUSTED),
    );
}

#[test]
fn vport_and_register_parameters() {
    let mut p = initialized();
    let other = cmd::<QueryNicVportContextIn>(Opcode::QueryNicVportContext, 0, |v| {
        v.set(QueryNicVportContextIn::OTHER_VPORT, 1).unwrap();
    });
    expect(&mut p, &other, 0x110, (BAD_PARAM, syn::BAD_VPORT));
    let mtu0 = cmd::<ModIn>(Opcode::ModifyNicVportContext, 0, |v| {
        drop(v.nested_mut(ModIn::FIELD_SELECT).set(Sel::MTU, 1))
    });
    expect(&mut p, &mtu0, 0x10, (BAD_PARAM, syn::BAD_MTU));
    let gid = |index: u64, port: u64, version: u64| {
        cmd::<SetRoceAddressIn>(Opcode::SetRoceAddress, 0, |v| {
            v.set(SetRoceAddressIn::ROCE_ADDRESS_INDEX, index).unwrap();
            v.set(SetRoceAddressIn::VHCA_PORT_NUM, port).unwrap();
            v.nested_mut(SetRoceAddressIn::ROCE_ADDRESS)
                .set(RoceAddrLayout::ROCE_VERSION, version)
                .unwrap();
        })
    };
    // A table of 255 GIDs (0..=254), as a real ConnectX-5 reports.
    expect(
        &mut p,
        &gid(255, 1, 2),
        0x10,
        (BAD_PARAM, syn::BAD_GID_INDEX),
    );
    expect(
        &mut p,
        &gid(254, 2, 2),
        0x10,
        (BAD_PARAM, syn::BAD_VHCA_PORT),
    );
    expect(
        &mut p,
        &gid(254, 1, 1),
        0x10,
        (BAD_PARAM, syn::BAD_ROCE_ADDRESS),
    );
    p.ok(&gid(254, 1, 2), 0x10);
    let q = cmd::<QueryRoceAddressIn>(Opcode::QueryRoceAddress, 0, |v| {
        drop(v.set(QueryRoceAddressIn::ROCE_ADDRESS_INDEX, 255))
    });
    expect(&mut p, &q, 0x30, (BAD_PARAM, syn::BAD_GID_INDEX));

    let port1 = |r: &mut ViewMut<'_, PaosReg>| drop(r.set(PaosReg::LOCAL_PORT, 1));
    expect(
        &mut p,
        &reg_cmd::<PaosReg>(reg::DTOR, reg::READ, |_| {}),
        0x20,
        (BAD_PARAM, syn::BAD_REGISTER_ID),
    );
    expect(
        &mut p,
        &reg_cmd::<PaosReg>(reg::PAOS, 2, port1),
        0x20,
        (BAD_PARAM, syn::BAD_OP_MOD),
    );
    expect(
        &mut p,
        &reg_cmd::<PaosReg>(reg::PAOS, reg::READ, |_| {}),
        0x20,
        (BAD_PARAM, syn::BAD_LOCAL_PORT),
    );
    let short = bare::<AccessRegisterIn>(Opcode::AccessReg, reg::READ);
    let mut short = short;
    ViewMut::<AccessRegisterIn>::new(&mut short)
        .unwrap()
        .set(AccessRegisterIn::REGISTER_ID, reg::PAOS.into())
        .unwrap();
    expect(&mut p, &short, 0x20, (BAD_INLEN, syn::INLEN_REGISTER));
    expect(
        &mut p,
        &reg_cmd::<PaosReg>(reg::PAOS, reg::READ, port1),
        0x10,
        (BAD_OUTLEN, syn::OUTLEN_REGISTER),
    );
    let admin = |status: u64| {
        reg_cmd::<PaosReg>(reg::PAOS, reg::WRITE, move |r| {
            r.set(PaosReg::LOCAL_PORT, 1)
                .unwrap()
                .set(PaosReg::ASE, 1)
                .unwrap()
                .set(PaosReg::ADMIN_STATUS, status)
                .unwrap();
        })
    };
    expect(
        &mut p,
        &admin(3),
        0x20,
        (BAD_PARAM, syn::BAD_REGISTER_FIELD),
    );
    let state = |p: &mut Poster| {
        let out = p.ok(&bare::<QueryVportStateIn>(Opcode::QueryVportState, 0), 0x10);
        View::<QueryVportStateOut>::new(&out)
            .unwrap()
            .get(QueryVportStateOut::STATE)
    };
    p.ok(&admin(2), 0x20);
    assert_eq!(state(&mut p), 0, "port administratively down");
    p.ok(&admin(1), 0x20);
    assert_eq!(state(&mut p), 1);
    let mtu = |m: u64| {
        reg_cmd::<PmtuReg>(reg::PMTU, reg::WRITE, move |r| {
            drop(
                r.set(PmtuReg::LOCAL_PORT, 1)
                    .unwrap()
                    .set(PmtuReg::ADMIN_MTU, m),
            )
        })
    };
    expect(
        &mut p,
        &mtu(10_000),
        0x20,
        (BAD_PARAM, syn::BAD_REGISTER_FIELD),
    );
    let out = p.ok(&mtu(4096), 0x20);
    assert_eq!(
        View::<PmtuReg>::new(&out[0x10..])
            .unwrap()
            .get(PmtuReg::OPER_MTU),
        4096
    );
    let roce_en = cmd::<ModIn>(Opcode::ModifyNicVportContext, 0, |v| {
        v.nested_mut(ModIn::FIELD_SELECT)
            .set(Sel::ROCE_EN, 1)
            .unwrap();
        v.nested_mut(ModIn::NIC_VPORT_CONTEXT)
            .set(Ctx::ROCE_EN, 1)
            .unwrap()
            .set(Ctx::MTU, 0)
            .unwrap();
    });
    p.ok(&roce_en, 0x10);
}

#[test]
fn fail_command_overrides_once_and_has_no_effect() {
    let mut p = initialized();
    p.dev.inject(Fault::FailCommand {
        opcode: Opcode::AllocPd as u16,
        status: 0x0f,
        syndrome: 0xdead_beef,
    });
    let alloc = bare::<AllocPdIn>(Opcode::AllocPd, 0);
    expect(&mut p, &alloc, 0x10, (0x0f, 0xdead_beef));
    assert!(
        p.dev.live_objects().is_empty(),
        "the failed ALLOC_PD allocated nothing"
    );
    let out = p.ok(&alloc, 0x10);
    assert_eq!(
        View::<AllocPdOut>::new(&out).unwrap().get(AllocPdOut::PD),
        1
    );
    // Two injections fail twice; clear_faults drops what is pending.
    for _ in 0..3 {
        p.dev.inject(Fault::FailCommand {
            opcode: Opcode::QueryIssi as u16,
            status: 0x01,
            syndrome: 7,
        });
    }
    expect(
        &mut p,
        &bare::<QueryIssiIn>(Opcode::QueryIssi, 0),
        0x70,
        (0x01, 7),
    );
    expect(
        &mut p,
        &bare::<QueryIssiIn>(Opcode::QueryIssi, 0),
        0x70,
        (0x01, 7),
    );
    p.dev.clear_faults();
    p.ok(&bare::<QueryIssiIn>(Opcode::QueryIssi, 0), 0x70);
    let t = p.dev.trace();
    let failed: Vec<_> = t
        .iter()
        .filter(|r| r.status != 0)
        .map(|r| (r.opcode, r.status, r.syndrome))
        .collect();
    assert_eq!(
        failed,
        vec![(0x800, 0x0f, 0xdead_beef), (0x10a, 1, 7), (0x10a, 1, 7)]
    );
}
