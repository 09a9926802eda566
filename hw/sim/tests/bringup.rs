//! The full PF bring-up and teardown, at the byte level, in both modes.

mod common;

use common::{assert_clean, bare, cmd, status, Poster};
use mlx5_ifc::consts::{cap_mode, cap_type, query_pages, reg};
use mlx5_ifc::prm::caps::{CmdHcaCap, RoceCap};
use mlx5_ifc::prm::hca::{
    AccessRegisterIn, DisableHcaIn, EnableHcaIn, InitHcaIn, PaosReg, PfccReg, PmtuReg, QueryIssiIn,
    QueryIssiOut, SetDriverVersionIn, SetIssiIn, TeardownHcaIn, TeardownHcaOut,
};
use mlx5_ifc::prm::uar_pd::{
    AllocPdIn, AllocPdOut, AllocUarIn, AllocUarOut, DeallocPdIn, DeallocUarIn,
    QuerySpecialContextsIn, QuerySpecialContextsOut,
};
use mlx5_ifc::prm::vport::{
    ModifyNicVportContextIn as ModIn, ModifyNicVportFieldSelect as Sel, NicVportContext as Ctx,
    QueryNicVportContextIn, QueryNicVportContextOut as QOut, QueryRoceAddressIn, QueryVportStateIn,
    QueryVportStateOut, RoceAddrLayout, SetRoceAddressIn,
};
use mlx5_ifc::{Layout, Opcode, View, ViewMut};
use mlx5_sim::{HcaState, Mode, ObjectKind, Profile, FIRST_UAR_INDEX, NULL_MKEY, RESD_LKEY};

fn reg_cmd<R: Layout>(id: u16, op_mod: u16, f: impl FnOnce(&mut ViewMut<'_, R>)) -> Vec<u8> {
    let mut input = cmd::<AccessRegisterIn>(Opcode::AccessReg, op_mod, |v| {
        v.set(AccessRegisterIn::REGISTER_ID, id.into()).unwrap();
    });
    let mut data = vec![0u8; R::BYTES];
    f(&mut ViewMut::<R>::new(&mut data).unwrap());
    input.extend_from_slice(&data);
    input
}

fn bring_up_and_tear_down(mode: Mode) {
    let mut p = Poster::cx5(mode);
    let dev = p.dev.clone();
    assert_eq!(dev.hca_state(), HcaState::Disabled);
    p.ok(&bare::<EnableHcaIn>(Opcode::EnableHca, 0), 0x10);
    let out = p.ok(
        &bare::<QueryIssiIn>(Opcode::QueryIssi, 0),
        QueryIssiOut::BYTES,
    );
    let issi = View::<QueryIssiOut>::new(&out).unwrap();
    assert_eq!(
        (
            issi.get(QueryIssiOut::CURRENT_ISSI),
            issi.get(QueryIssiOut::SUPPORTED_ISSI_DW0)
        ),
        (0, 0b11)
    );
    p.ok(
        &cmd::<SetIssiIn>(Opcode::SetIssi, 0, |v| {
            drop(v.set(SetIssiIn::CURRENT_ISSI, 1))
        }),
        0x10,
    );
    let out = p.ok(
        &bare::<QueryIssiIn>(Opcode::QueryIssi, 0),
        QueryIssiOut::BYTES,
    );
    assert_eq!(
        View::<QueryIssiOut>::new(&out)
            .unwrap()
            .get(QueryIssiOut::CURRENT_ISSI),
        1
    );

    assert_eq!(p.query_pages(query_pages::BOOT), 16);
    p.give(16);
    assert_eq!(p.query_pages(query_pages::BOOT), 0);
    p.ok(
        &reg_cmd::<PaosReg>(reg::HOST_ENDIANNESS, reg::WRITE, |_| {}),
        0x20,
    );
    let max = p.query_cap(cap_type::GENERAL, cap_mode::MAX);
    assert_eq!(
        &max[..],
        &dev.profile().hca_cap_max()[..],
        "8-block output mailbox chain carries the MAX caps"
    );
    let mut cur = p.query_cap(cap_type::GENERAL, cap_mode::CUR);
    ViewMut::<CmdHcaCap>::new(&mut cur)
        .unwrap()
        .set(CmdHcaCap::CMDIF_CHECKSUM, 0)
        .unwrap()
        .set(CmdHcaCap::LOG_MAX_QP, 17)
        .unwrap();
    assert_eq!(p.set_cap(cap_type::GENERAL, &cur), (0, 0));
    assert_eq!(
        p.query_cap(cap_type::GENERAL, cap_mode::CUR),
        cur,
        "SET_HCA_CAP stored CUR"
    );
    let roce = p.query_cap(cap_type::ROCE, cap_mode::MAX);
    assert_eq!(
        View::<RoceCap>::new(&roce)
            .unwrap()
            .get(RoceCap::ROCE_ADDRESS_TABLE_SIZE),
        255,
        "gid_tbl_len 255, as every ConnectX-5 dump shows"
    );
    assert_eq!(p.set_cap(cap_type::ROCE, &roce), (0, 0));
    assert_eq!(p.query_pages(query_pages::INIT), 64);
    p.give(64);
    assert_eq!(p.query_pages(query_pages::INIT), 0);
    assert_eq!(p.query_pages(query_pages::REGULAR), 0);
    p.ok(&bare::<InitHcaIn>(Opcode::InitHca, 0), 0x10);
    assert_eq!(dev.hca_state(), HcaState::Initialized);
    let version = cmd::<SetDriverVersionIn>(Opcode::SetDriverVersion, 0, |v| {
        v.bytes_mut(SetDriverVersionIn::DRIVER_VERSION)[..11].copy_from_slice(b"sim,test,1\0");
    });
    p.ok(&version, 0x10);
    assert_eq!(dev.driver_version().as_deref(), Some("sim,test,1"));

    let out = p.ok(&bare::<AllocUarIn>(Opcode::AllocUar, 0), 0x10);
    let uar = View::<AllocUarOut>::new(&out)
        .unwrap()
        .get(AllocUarOut::UAR);
    assert_eq!(uar, u64::from(FIRST_UAR_INDEX));
    let out = p.ok(&bare::<AllocPdIn>(Opcode::AllocPd, 0), 0x10);
    let pd = View::<AllocPdOut>::new(&out).unwrap().get(AllocPdOut::PD);
    assert_eq!(
        dev.live_objects(),
        vec![(ObjectKind::Uar, uar as u32), (ObjectKind::Pd, pd as u32)]
    );
    let out = p.ok(
        &bare::<QuerySpecialContextsIn>(Opcode::QuerySpecialContexts, 0),
        0x20,
    );
    let sc = View::<QuerySpecialContextsOut>::new(&out).unwrap();
    assert_eq!(sc.get32(QuerySpecialContextsOut::RESD_LKEY), RESD_LKEY);
    assert_eq!(sc.get32(QuerySpecialContextsOut::NULL_MKEY), NULL_MKEY);

    // RoCE on, MTU, GID 0, port registers.
    let modify = cmd::<ModIn>(Opcode::ModifyNicVportContext, 0, |v| {
        v.nested_mut(ModIn::FIELD_SELECT)
            .set(Sel::ROCE_EN, 1)
            .unwrap()
            .set(Sel::MTU, 1)
            .unwrap();
        v.nested_mut(ModIn::NIC_VPORT_CONTEXT)
            .set(Ctx::ROCE_EN, 1)
            .unwrap()
            .set(Ctx::MTU, 4096)
            .unwrap();
    });
    p.ok(&modify, 0x10);
    let out = p.ok(
        &bare::<QueryNicVportContextIn>(Opcode::QueryNicVportContext, 0),
        QOut::BYTES,
    );
    let ctx = View::<QOut>::new(&out)
        .unwrap()
        .nested(QOut::NIC_VPORT_CONTEXT);
    assert_eq!((ctx.get(Ctx::ROCE_EN), ctx.get(Ctx::MTU)), (1, 4096));
    assert_eq!(
        ctx.bytes(Ctx::PERMANENT_ADDRESS),
        &[0, 0, 0x02, 0xc5, 0x5a, 0, 0, 1]
    );
    let gid = cmd::<SetRoceAddressIn>(Opcode::SetRoceAddress, 0, |v| {
        v.set(SetRoceAddressIn::VHCA_PORT_NUM, 1).unwrap();
        let mut a = v.nested_mut(SetRoceAddressIn::ROCE_ADDRESS);
        a.set(RoceAddrLayout::ROCE_VERSION, 2)
            .unwrap()
            .set(RoceAddrLayout::SOURCE_MAC_31_0, 0x5a00_0001)
            .unwrap();
        a.bytes_mut(RoceAddrLayout::SOURCE_L3_ADDRESS)[10..]
            .copy_from_slice(&[0xff, 0xff, 10, 0, 0, 1]);
    });
    p.ok(&gid, 0x10);
    let out = p.ok(
        &bare::<QueryRoceAddressIn>(Opcode::QueryRoceAddress, 0),
        0x30,
    );
    assert_eq!(&out[0x10..0x30], &gid[0x10..0x30], "GID 0 reads back");
    let out = p.ok(
        &reg_cmd::<PaosReg>(reg::PAOS, reg::READ, |r| {
            drop(r.set(PaosReg::LOCAL_PORT, 1))
        }),
        0x20,
    );
    let paos = View::<PaosReg>::new(&out[0x10..]).unwrap();
    assert_eq!(
        (
            paos.get(PaosReg::ADMIN_STATUS),
            paos.get(PaosReg::OPER_STATUS)
        ),
        (1, 1)
    );
    let out = p.ok(
        &reg_cmd::<PmtuReg>(reg::PMTU, reg::READ, |r| {
            drop(r.set(PmtuReg::LOCAL_PORT, 1))
        }),
        0x20,
    );
    let pmtu = View::<PmtuReg>::new(&out[0x10..]).unwrap();
    assert_eq!(
        (
            pmtu.get(PmtuReg::MAX_MTU),
            pmtu.get(PmtuReg::ADMIN_MTU),
            pmtu.get(PmtuReg::OPER_MTU)
        ),
        (9216, 1500, 1500)
    );
    // PFCC as mlx5e reads it (pause and PFC statistics) and writes it (ethtool -A, DCB): the
    // defaults, then PFC on priorities 3 and 5 with global pause off, read back.
    let pfcc = |p: &mut Poster, op, f: &dyn Fn(&mut ViewMut<'_, PfccReg>)| {
        let out = p.ok(
            &reg_cmd::<PfccReg>(reg::PFCC, op, |r| {
                r.set(PfccReg::LOCAL_PORT, 1).unwrap();
                f(r);
            }),
            0x10 + PfccReg::BYTES,
        );
        let v = View::<PfccReg>::new(&out[0x10..]).unwrap();
        [PfccReg::PPTX, PfccReg::PPRX, PfccReg::PFCTX, PfccReg::PFCRX].map(|f| v.get(f))
    };
    assert_eq!(pfcc(&mut p, reg::READ, &|_| {}), [1, 1, 0, 0]);
    let set = |r: &mut ViewMut<'_, PfccReg>| {
        for (f, x) in [
            (PfccReg::PRIO_MASK_TX, 0xff),
            (PfccReg::PRIO_MASK_RX, 0xff),
            (PfccReg::PFCTX, 0x28),
            (PfccReg::PFCRX, 0x28),
        ] {
            r.set(f, x).unwrap();
        }
    };
    assert_eq!(pfcc(&mut p, reg::WRITE, &set), [0, 0, 0x28, 0x28]);
    assert_eq!(pfcc(&mut p, reg::READ, &|_| {}), [0, 0, 0x28, 0x28]);
    let out = p.ok(&bare::<QueryVportStateIn>(Opcode::QueryVportState, 0), 0x10);
    let vs = View::<QueryVportStateOut>::new(&out).unwrap();
    assert_eq!(
        (
            vs.get(QueryVportStateOut::STATE),
            vs.get(QueryVportStateOut::ADMIN_STATE)
        ),
        (1, 1)
    );

    // Teardown: objects, TEARDOWN_HCA, page reclaim, DISABLE_HCA.
    p.ok(
        &cmd::<DeallocPdIn>(Opcode::DeallocPd, 0, |v| drop(v.set(DeallocPdIn::PD, pd))),
        0x10,
    );
    p.ok(
        &cmd::<DeallocUarIn>(Opcode::DeallocUar, 0, |v| {
            drop(v.set(DeallocUarIn::UAR, uar))
        }),
        0x10,
    );
    let out = p.ok(&bare::<TeardownHcaIn>(Opcode::TeardownHca, 0), 0x10);
    assert_eq!(
        View::<TeardownHcaOut>::new(&out)
            .unwrap()
            .get(TeardownHcaOut::STATE),
        0
    );
    assert_eq!(dev.hca_state(), HcaState::TornDown);
    p.take_all();
    assert_eq!(dev.pages_held(), 0);
    p.ok(&bare::<DisableHcaIn>(Opcode::DisableHca, 0), 0x10);
    assert_eq!(dev.hca_state(), HcaState::Disabled);

    let trace = dev.trace();
    assert_eq!(trace.len() as u64, dev.commands_executed());
    assert!(trace.iter().all(|t| t.status == 0));
    assert!(trace.iter().enumerate().all(|(i, t)| t.seq == i as u64));
    assert_eq!(trace[0].opcode, Opcode::EnableHca as u16);
    assert_eq!(trace.last().unwrap().opcode, Opcode::DisableHca as u16);
    let cap = trace
        .iter()
        .find(|t| t.opcode == Opcode::QueryHcaCap as u16)
        .unwrap();
    assert_eq!((cap.input.len(), cap.output.len()), (0x10, 0x1010));
    assert_eq!(dev.health_syndrome(), 0);
    let dev = p.finish();
    assert_clean(&dev);
}

#[test]
fn bring_up_and_tear_down_sync() {
    bring_up_and_tear_down(Mode::Sync);
}

#[test]
fn bring_up_and_tear_down_threaded() {
    bring_up_and_tear_down(Mode::Threaded);
}

#[test]
fn a_function_can_be_brought_up_again_after_disable() {
    let mut p = Poster::cx5(Mode::Sync);
    p.init();
    p.shutdown();
    p.init();
    assert_eq!(p.dev.pages_held(), 80);
    p.shutdown();
    assert_clean(&p.finish());
}

#[test]
fn several_slots_in_one_doorbell_complete_in_slot_order() {
    for mode in [Mode::Sync, Mode::Threaded] {
        let mut p = Poster::cx5(mode);
        p.init();
        let msgs: Vec<_> = (0..4)
            .map(|s| p.prepare(s, &bare::<AllocPdIn>(Opcode::AllocPd, 0), 0x10))
            .collect();
        p.ring(0b1111);
        let mut pds = Vec::new();
        for m in msgs {
            assert_eq!(p.wait(&m), Some(0));
            let out = p.output(&m);
            assert_eq!(status(&out), (0, 0));
            pds.push(View::<AllocPdOut>::new(&out).unwrap().get(AllocPdOut::PD));
            p.release(m);
        }
        assert_eq!(pds, vec![1, 2, 3, 4], "{mode:?}");
        for pd in pds {
            p.ok(
                &cmd::<DeallocPdIn>(Opcode::DeallocPd, 0, |v| drop(v.set(DeallocPdIn::PD, pd))),
                0x10,
            );
        }
        p.shutdown();
        assert_clean(&p.finish());
    }
}

#[test]
fn the_trace_is_json_lines() {
    let mut p = Poster::sim(common::quiet(Profile::connectx5()), Mode::Sync);
    p.ok(&bare::<EnableHcaIn>(Opcode::EnableHca, 0), 0x10);
    let _ = p.exec(&bare::<EnableHcaIn>(Opcode::EnableHca, 0), 0x10);
    let mut buf = Vec::new();
    p.dev.write_trace_jsonl(&mut buf).unwrap();
    let text = String::from_utf8(buf).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(
        lines[0],
        concat!(
            r#"{"seq":0,"opcode":"0x0104","name":"ENABLE_HCA","op_mod":0,"status":0,"syndrome":"0x00000000","#,
            r#""input":"01040000000000000000000000000000","output":"00000000000000000000000000000000"}"#
        )
    );
    let v: serde_json::Value = serde_json::from_str(lines[1]).unwrap();
    assert_eq!(v["seq"], 1);
    assert_eq!(v["status"], 4);
    assert_eq!(
        v["syndrome"],
        format!("{:#010x}", mlx5_sim::syndrome::ALREADY_ENABLED)
    );
    assert_eq!(v["output"].as_str().unwrap().len(), 32);
}
