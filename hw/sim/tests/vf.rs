//! A simulated ConnectX-5 virtual function (`Profile::as_vf`, `mlx5ctl sim --vf`): what a VF may
//! not do, each refused with its syndrome — another function or vport named
//! (`other_function`, `function_id`, `other_vport`), a vport's admin state (the e-switch
//! manager's), e-switch (FDB) flow tables, an MSI-X vector it does not have — and what it may:
//! its own vport, its own unicast address list (the MACs it then receives RoCE for).
//! ../shared/reference/virtual-functions.md §1.2–1.3: Linux's VF driver sends none of the
//! refused ones; its PF's e-switch does (with `other_vport` / `other_function`).

mod common;

use common::queues::Fx;
use common::{bare, cmd, status};
use mlx5_ifc::prm::eq::Eqc;
use mlx5_ifc::prm::flow::{CreateFlowTableIn, FlowTableContext as Ftc};
use mlx5_ifc::prm::hca::{EnableHcaIn, QueryHcaCapIn, SetHcaCapIn};
use mlx5_ifc::prm::vport::{
    ModifyNicVportContextIn as ModIn, ModifyNicVportFieldSelect as Sel, ModifyVportStateIn,
    NicVportContext as Ctx, QueryNicVportContextIn, QueryNicVportContextOut, QueryVportStateIn,
    QueryVportStateOut,
};
use mlx5_ifc::{Layout, Opcode, View};
use mlx5_sim::{Mode, Profile, VportAdmin};

const BAD_PARAM: u8 = 0x03;
const BAD_FUNCTION_ID: u32 = 0x5e03_0001;
const BAD_VPORT: u32 = 0x5e03_0012;
const BAD_EQ_INTR: u32 = 0x5e03_001d;
const FT_UNSUPPORTED_TYPE: u32 = 0x5e03_0057;
const NOT_VPORT_MANAGER: u32 = 0x5e03_007a;
const BAD_ADDRESS_LIST: u32 = 0x5e03_0079;
/// `flow_table_type` of the e-switch's forwarding database.
const FDB: u64 = 4;

fn vf(mac_unset: bool) -> Fx {
    Fx::new(
        common::quiet(Profile::connectx5().as_vf(mac_unset)),
        Mode::Sync,
        1,
    )
}

/// Before INIT_HCA (what the PF does for its VFs then: ENABLE_HCA of each, SET_HCA_CAP
/// `other_function` for their MSI-X): another function is refused.
#[test]
fn a_vf_enables_and_sets_no_other_function() {
    let mut p = common::Poster::sim(common::quiet(Profile::connectx5().as_vf(false)), Mode::Sync);
    let other = cmd::<EnableHcaIn>(Opcode::EnableHca, 0, |v| {
        v.set(EnableHcaIn::FUNCTION_ID, 1).unwrap();
    });
    assert_eq!(status(&p.exec(&other, 0x10)), (BAD_PARAM, BAD_FUNCTION_ID));
    p.ok(&bare::<EnableHcaIn>(Opcode::EnableHca, 0), 0x10);
    let cap = p.query_cap(0, 1);
    let input = cmd::<SetHcaCapIn>(Opcode::SetHcaCap, 0, |v| {
        v.set(SetHcaCapIn::OTHER_FUNCTION, 1).unwrap();
        v.set(SetHcaCapIn::FUNCTION_ID, 1).unwrap();
    });
    let mut input = input;
    let at = SetHcaCapIn::CAPABILITY.offset();
    input[at..at + cap.len()].copy_from_slice(&cap);
    assert_eq!(status(&p.exec(&input, 0x10)), (BAD_PARAM, BAD_FUNCTION_ID));
}

#[test]
fn a_vf_is_refused_what_only_its_pf_may_do() {
    let mut fx = vf(false);
    let refused = |fx: &mut Fx, input: &[u8], want: u32, what: &str| {
        assert_eq!(
            status(&fx.p.exec(input, 0x1010)),
            (BAD_PARAM, want),
            "{what}"
        );
    };
    refused(
        &mut fx,
        &cmd::<QueryHcaCapIn>(Opcode::QueryHcaCap, 1, |v| {
            v.set(QueryHcaCapIn::OTHER_FUNCTION, 1).unwrap();
            v.set(QueryHcaCapIn::FUNCTION_ID, 2).unwrap();
        }),
        BAD_FUNCTION_ID,
        "QUERY_HCA_CAP of another function",
    );
    refused(
        &mut fx,
        &cmd::<QueryNicVportContextIn>(Opcode::QueryNicVportContext, 0, |v| {
            v.set(QueryNicVportContextIn::OTHER_VPORT, 1).unwrap();
            v.set(QueryNicVportContextIn::VPORT_NUMBER, 1).unwrap();
        }),
        BAD_VPORT,
        "another vport's context",
    );
    refused(
        &mut fx,
        &cmd::<ModIn>(Opcode::ModifyNicVportContext, 0, |v| {
            v.set(ModIn::OTHER_VPORT, 1).unwrap();
            v.set(ModIn::VPORT_NUMBER, 2).unwrap();
            v.nested_mut(ModIn::FIELD_SELECT)
                .set(Sel::PERMANENT_ADDRESS, 1)
                .unwrap();
        }),
        BAD_VPORT,
        "another VF's MAC",
    );
    refused(
        &mut fx,
        &cmd::<QueryVportStateIn>(Opcode::QueryVportState, 0, |v| {
            v.set(QueryVportStateIn::OTHER_VPORT, 1).unwrap();
            v.set(QueryVportStateIn::VPORT_NUMBER, 1).unwrap();
        }),
        BAD_VPORT,
        "another vport's state",
    );
    for (other, want) in [(1, BAD_VPORT), (0, NOT_VPORT_MANAGER)] {
        refused(
            &mut fx,
            &cmd::<ModifyVportStateIn>(Opcode::ModifyVportState, 0, |v| {
                v.set(ModifyVportStateIn::OTHER_VPORT, other).unwrap();
                v.set(ModifyVportStateIn::VPORT_NUMBER, other).unwrap();
                v.set(ModifyVportStateIn::ADMIN_STATE, 0).unwrap();
            }),
            want,
            "a vport's admin state",
        );
    }
    refused(
        &mut fx,
        &cmd::<CreateFlowTableIn>(Opcode::CreateFlowTable, 0, |v| {
            v.set(CreateFlowTableIn::TABLE_TYPE, FDB).unwrap();
            v.nested_mut(CreateFlowTableIn::FLOW_TABLE_CONTEXT)
                .set(Ftc::LOG_SIZE, 4)
                .unwrap();
        }),
        FT_UNSUPPORTED_TYPE,
        "an e-switch (FDB) flow table",
    );
    // 11 MSI-X vectors: an EQ on vector 11 does not exist.
    let input = fx.eq_in(4, |c| {
        c.set(Eqc::INTR, 11).unwrap();
    });
    refused(&mut fx, &input, BAD_EQ_INTR, "MSI-X vector 11 of 11");
    let input = fx.eq_in(4, |c| {
        c.set(Eqc::INTR, 10).unwrap();
    });
    assert_eq!(status(&fx.p.exec(&input, 0x10)).0, 0, "vector 10 exists");
    let caps = fx.p.query_cap(0, 1);
    let c = View::<mlx5_ifc::prm::caps::CmdHcaCap>::new(&caps).unwrap();
    assert_eq!(
        (
            c.get(mlx5_ifc::prm::caps::CmdHcaCap::VPORT_GROUP_MANAGER),
            c.get(mlx5_ifc::prm::caps::CmdHcaCap::ESWITCH_MANAGER)
        ),
        (0, 0)
    );
}

/// `permanent_address` is zero when the hypervisor assigned none; the VF lists its own
/// address (as mlx5e does with the random one it picks) and reads it back; a list longer than
/// `2^log_max_current_uc_list` is refused. The hypervisor's admin state shows in its own
/// QUERY_VPORT_STATE.
#[test]
fn a_vfs_own_vport_its_address_list_and_the_hypervisors_state() {
    let mut fx = vf(true);
    let query = |fx: &mut Fx| {
        let input = cmd::<QueryNicVportContextIn>(Opcode::QueryNicVportContext, 0, |v| {
            v.set(QueryNicVportContextIn::ALLOWED_LIST_TYPE, 0).unwrap();
        });
        fx.p.ok(&input, QueryNicVportContextOut::BYTES + 8)
    };
    let out = query(&mut fx);
    let v = View::<QueryNicVportContextOut>::new(&out).unwrap();
    let c = v.nested(QueryNicVportContextOut::NIC_VPORT_CONTEXT);
    assert_eq!(
        c.bytes(Ctx::PERMANENT_ADDRESS)[2..],
        [0; 6],
        "no MAC assigned"
    );
    assert_eq!(c.get(Ctx::ALLOWED_LIST_SIZE), 0);
    let mac = [0x3e, 0x1d, 0x49, 0x7f, 0xca, 0xfa];
    let list = |n: u64| {
        let mut input = cmd::<ModIn>(Opcode::ModifyNicVportContext, 0, |v| {
            v.nested_mut(ModIn::FIELD_SELECT)
                .set(Sel::ADDRESSES_LIST, 1)
                .unwrap();
            let mut c = v.nested_mut(ModIn::NIC_VPORT_CONTEXT);
            c.set(Ctx::ALLOWED_LIST_TYPE, 0).unwrap();
            c.set(Ctx::ALLOWED_LIST_SIZE, n).unwrap();
        });
        for _ in 0..n {
            input.extend_from_slice(&[0, 0]);
            input.extend_from_slice(&mac);
        }
        input
    };
    assert_eq!(status(&fx.p.exec(&list(1), 0x10)), (0, 0));
    assert_eq!(
        status(&fx.p.exec(&list(513), 0x10)),
        (BAD_PARAM, BAD_ADDRESS_LIST),
        "more than 2^9 addresses"
    );
    let out = query(&mut fx);
    let at =
        QueryNicVportContextOut::NIC_VPORT_CONTEXT.offset() + Ctx::CURRENT_UC_MAC_ADDRESS.offset();
    assert_eq!(out[at + 2..at + 8], mac, "the listed address reads back");
    // The hypervisor holds the vport down, then lets it follow the uplink.
    let state = |fx: &mut Fx| {
        let out =
            fx.p.ok(&bare::<QueryVportStateIn>(Opcode::QueryVportState, 0), 0x10);
        let v = View::<QueryVportStateOut>::new(&out).unwrap();
        (
            v.get(QueryVportStateOut::ADMIN_STATE),
            v.get(QueryVportStateOut::STATE),
        )
    };
    assert_eq!(state(&mut fx), (2, 1), "AUTO, up");
    assert!(!fx.p.dev.set_vport_admin(VportAdmin::Down));
    assert_eq!(state(&mut fx), (0, 0));
    assert!(fx.p.dev.set_vport_admin(VportAdmin::Auto));
    assert_eq!(state(&mut fx), (2, 1));
    // A function-level reset (the hypervisor's, or the guest's) wipes what the function's
    // driver set, not what the hypervisor did.
    fx.p.dev.set_vport_admin(VportAdmin::Down);
    fx.p.dev
        .set_assigned_mac(Some([0x02, 0x11, 0x22, 0x33, 0x44, 0x55]));
    fx.p.dev.function_level_reset();
    let mut p = common::Poster::new(fx.p.dev.clone());
    p.init();
    let out = p.ok(&bare::<QueryVportStateIn>(Opcode::QueryVportState, 0), 0x10);
    let v = View::<QueryVportStateOut>::new(&out).unwrap();
    assert_eq!(v.get(QueryVportStateOut::ADMIN_STATE), 0, "still held down");
    let out = p.ok(
        &bare::<QueryNicVportContextIn>(Opcode::QueryNicVportContext, 0),
        QueryNicVportContextOut::BYTES,
    );
    let v = View::<QueryNicVportContextOut>::new(&out).unwrap();
    let c = v.nested(QueryNicVportContextOut::NIC_VPORT_CONTEXT);
    assert_eq!(
        c.bytes(Ctx::PERMANENT_ADDRESS)[2..],
        [0x02, 0x11, 0x22, 0x33, 0x44, 0x55]
    );
    assert_eq!(c.get(Ctx::ALLOWED_LIST_SIZE), 0);
}
