//! What software steering (mlx5dv direct rules) reads of the firmware's own ICM, byte by byte
//! (notes: dr-control.md §1.2 b, §4): the NIC drop and allow addresses of `flow_table_nic_cap`,
//! the TIRs' ICM addresses (CREATE_TIR's `icm_address_*`), the roots QUERY_FLOW_TABLE reports
//! for a FW-owned table, and software-owned tables (`sw_owner`) whose roots point into SW ICM —
//! with the capabilities that would make Linux and rdma-core use SW steering still clear.

mod common;

use common::cmd;
use common::datapath::{pair, Node};
use common::dr::{as_uid, create_sw_icm, create_tir, create_uctx, nic_caps, sw_table_in};
use common::eth_node::posted_rq;
use common::ethernet::{by_id, fte_in, group_in, made, table_in};
use mlx5_ifc::consts::{cap_mode, cap_type, flow_dest_type, flow_table_type};
use mlx5_ifc::prm::caps::{FlowTableNicCap as Nic, FlowTablePropLayout as Prop};
use mlx5_ifc::prm::flow::{
    CreateFlowGroupOut, CreateFlowTableOut, DeleteFteIn, DestroyFlowTableIn,
    FlowTableContext as Ftc, QueryFlowTableIn, QueryFlowTableOut,
};
use mlx5_ifc::prm::memic::DeviceMemCap as D;
use mlx5_ifc::{Layout, Opcode, View};
use mlx5_sim::syndrome as syn;
use mlx5_sim::Mode;

/// The SW ICM regions: `[(start, end)]`.
fn sw_icm_regions(n: &mut Node) -> [(u64, u64); 2] {
    let caps = n.fx.p.query_cap(cap_type::DEV_MEM, cap_mode::CUR);
    let c = View::<D>::new(&caps).unwrap();
    let region = |s, l| (c.get(s), c.get(s) + (1u64 << c.get(l)));
    [
        region(
            D::STEERING_SW_ICM_START_ADDRESS,
            D::LOG_STEERING_SW_ICM_SIZE,
        ),
        region(
            D::HEADER_MODIFY_SW_ICM_START_ADDRESS,
            D::LOG_HEADER_MODIFY_SW_ICM_SIZE,
        ),
    ]
}

/// What a firmware ICM address must be: non-zero, 64-byte aligned, below 2^40, in no SW ICM
/// region.
fn fw_address(a: u64, regions: &[(u64, u64)]) {
    assert!(a != 0 && a % 64 == 0 && a < 1 << 40, "{a:#x}");
    assert!(!regions.iter().any(|&(s, e)| (s..e).contains(&a)), "{a:#x}");
}

/// A direct TIR (transport domain 0) to a new RQ, made by `uid`: its number and ICM address.
fn tir(n: &mut Node, uid: u16) -> (u32, u64) {
    let mr = n.reg_mr(16 * 2048, false, false, false);
    let (rqn, _, _) = posted_rq(n, &mr, 0, 0);
    create_tir(n, uid, rqn, 0)
}

/// QUERY_FLOW_TABLE of NIC RX table `id` for `uid`: the status and
/// `(sw_owner, level, root_0, root_1)`.
fn query(n: &mut Node, uid: u16, ty: u64, id: u32) -> ((u8, u32), (u64, u64, u64, u64)) {
    let input = cmd::<QueryFlowTableIn>(Opcode::QueryFlowTable, 0, |v| {
        v.set(QueryFlowTableIn::TABLE_TYPE, ty).unwrap();
        v.set(QueryFlowTableIn::TABLE_ID, id.into()).unwrap();
    });
    let (st, out) = n.fx.run(&as_uid(input, uid), QueryFlowTableOut::BYTES);
    let o = View::<QueryFlowTableOut>::new(&out).unwrap();
    let c = o.nested(QueryFlowTableOut::FLOW_TABLE_CONTEXT);
    (
        st,
        (
            c.get(Ftc::SW_OWNER),
            c.get(Ftc::LEVEL),
            c.get(Ftc::SWS_SW_OWNER_ICM_ROOT_0),
            c.get(Ftc::SWS_SW_OWNER_ICM_ROOT_1),
        ),
    )
}

/// DR's table (dr_devx_create_flow_table): NIC RX, `level`, `sw_owner` 1, `root_0`.
fn dr_table_in(level: u64, root0: u64, root1: u64) -> Vec<u8> {
    sw_table_in(flow_table_type::NIC_RX, level, root0, root1)
}

#[test]
fn the_nic_caps_carry_drop_and_allow_addresses_and_offer_sw_owner() {
    let (_fabric, mut a, _b) = pair(Mode::Sync);
    let caps = nic_caps(&mut a);
    let c = View::<Nic>::new(&caps).unwrap();
    let regions = sw_icm_regions(&mut a);
    let addrs = [
        c.get(Nic::SW_STEERING_NIC_RX_ACTION_DROP_ICM_ADDRESS),
        c.get(Nic::SW_STEERING_NIC_TX_ACTION_DROP_ICM_ADDRESS),
        c.get(Nic::SW_STEERING_NIC_TX_ACTION_ALLOW_ICM_ADDRESS),
    ];
    for a in addrs {
        fw_address(a, &regions);
    }
    assert!(addrs[0] != addrs[1] && addrs[1] != addrs[2] && addrs[0] != addrs[2]);
    for half in [
        Nic::FLOW_TABLE_PROPERTIES_NIC_RECEIVE,
        Nic::FLOW_TABLE_PROPERTIES_NIC_TRANSMIT,
    ] {
        let p = c.nested(half);
        // STE format v0 (a ConnectX-5): sw_owner; sw_owner_v2 is for later formats.
        assert_eq!([p.get(Prop::SW_OWNER), p.get(Prop::SW_OWNER_V2)], [1, 0]);
        // Linux's BYPASS namespace needs max_ft_level ≥ 53; its table pool log_max_ft_size ≥ 16.
        assert!(p.get(Prop::MAX_FT_LEVEL) >= 53 && p.get(Prop::LOG_MAX_FT_SIZE) >= 16);
    }
}

#[test]
fn tirs_have_distinct_icm_addresses() {
    let (_fabric, mut a, _b) = pair(Mode::Sync);
    let regions = sw_icm_regions(&mut a);
    let uid = create_uctx(&mut a.fx);
    let (t1, i1) = tir(&mut a, uid);
    let (t2, i2) = tir(&mut a, 0);
    assert_ne!(t1, t2);
    fw_address(i1, &regions);
    fw_address(i2, &regions);
    assert_ne!(i1, i2);
}

#[test]
fn fw_and_software_owned_tables_report_their_roots() {
    let (_fabric, mut a, _b) = pair(Mode::Sync);
    let regions = sw_icm_regions(&mut a);
    let uid = create_uctx(&mut a.fx);
    let other = create_uctx(&mut a.fx);
    let max_level = View::<Nic>::new(&nic_caps(&mut a))
        .unwrap()
        .nested(Nic::FLOW_TABLE_PROPERTIES_NIC_RECEIVE)
        .get(Prop::MAX_FT_LEVEL);

    // DR's "always hit" FW table and a second one: their roots, in both root fields.
    let fw = made::<CreateFlowTableOut>(
        &mut a.fx,
        &as_uid(table_in(max_level - 1, None), uid),
        CreateFlowTableOut::TABLE_ID,
    );
    let fw2 = made::<CreateFlowTableOut>(
        &mut a.fx,
        &as_uid(table_in(max_level - 1, None), uid),
        CreateFlowTableOut::TABLE_ID,
    );
    let (st, (sw_owner, level, r0, r1)) = query(&mut a, uid, 0, fw);
    assert_eq!((st, sw_owner, level), ((0, 0), 0, max_level - 1));
    fw_address(r0, &regions);
    assert_eq!(r1, r0, "rdma-core 44 reads root_1, 56 root_0");
    assert_ne!(query(&mut a, uid, 0, fw2).1 .2, r0);
    // Another context does not see it; nor does a query of the other type.
    assert_eq!(
        query(&mut a, other, 0, fw).0,
        (0x05, syn::UNKNOWN_FLOW_TABLE)
    );
    assert_eq!(query(&mut a, uid, 1, fw).0, (0x05, syn::UNKNOWN_FLOW_TABLE));

    // A software-owned table: its start anchor in the context's SW ICM.
    let steer = regions[0].0;
    let (st, _) = create_sw_icm(&mut a.fx, uid, steer, 23);
    assert_eq!(st, (0, 0));
    let anchor = steer + 64 * 5;
    for (r0, r1, what) in [
        (anchor + 32, 0, "not an STE's address"),
        (steer + (1 << 23), 0, "past the object"),
        (regions[1].0, 0, "no object there"),
        (anchor, anchor + 8, "root_1 not aligned"),
    ] {
        let (st, _) = a.fx.run(
            &as_uid(dr_table_in(max_level - 1, r0, r1), uid),
            CreateFlowTableOut::BYTES,
        );
        assert_eq!(st, (0x03, syn::FT_SW_OWNER_ROOT), "{what}");
    }
    let dr = made::<CreateFlowTableOut>(
        &mut a.fx,
        &as_uid(dr_table_in(max_level - 1, anchor, 0), uid),
        CreateFlowTableOut::TABLE_ID,
    );
    assert_eq!(
        query(&mut a, uid, 0, dr),
        ((0, 0), (1, max_level - 1, anchor, 0))
    );
    // Its entries are STEs: no flow groups.
    let (st, _) = a.fx.run(&as_uid(group_in(dr, 0, 0), uid), 0x10);
    assert_eq!(st, (0x03, syn::FT_SW_OWNED));

    // A kernel table (Linux's BYPASS table of the root rule, level 1) forwards to it; the DR
    // table is held while the entry lives.
    let root =
        made::<CreateFlowTableOut>(&mut a.fx, &table_in(1, None), CreateFlowTableOut::TABLE_ID);
    let g = made::<CreateFlowGroupOut>(
        &mut a.fx,
        &group_in(root, 0, 0),
        CreateFlowGroupOut::GROUP_ID,
    );
    a.fx.p.ok(
        &fte_in(root, g, 0, &[(flow_dest_type::FLOW_TABLE, dr)]),
        0x10,
    );
    let destroy = |id| {
        as_uid(
            by_id::<DestroyFlowTableIn>(Opcode::DestroyFlowTable, DestroyFlowTableIn::TABLE_ID, id),
            uid,
        )
    };
    assert_eq!(
        a.fx.run(&destroy(dr), 0x10).0,
        (0x06, syn::FLOW_TABLE_IN_USE)
    );
    let del = cmd::<DeleteFteIn>(Opcode::DeleteFlowTableEntry, 0, |v| {
        v.set(DeleteFteIn::TABLE_ID, root.into()).unwrap();
    });
    a.fx.p.ok(&del, 0x10);
    for t in [dr, fw, fw2] {
        assert_eq!(a.fx.run(&destroy(t), 0x10).0, (0, 0));
    }
}
