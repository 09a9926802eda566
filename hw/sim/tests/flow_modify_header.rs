//! Modify header contexts, byte by byte, as Linux's mlx5_ib allocates them for a flow action
//! (docs/fields.md "Flow counters, NIC transmit tables, packet reformat"):
//! ALLOC_MODIFY_HEADER_CONTEXT (`table_type`, `num_of_actions`, 8-byte `set_action_in` /
//! `add_action_in` / `copy_action_in` from byte 0x10) and DEALLOC; an entry's MOD_HDR (0x40)
//! with `modify_header_id`. rdma-core's `test_tbl_modify_header_rule` rewrites the source MAC
//! of its frames on the NIC transmit root table (SET OUT_SMAC_47_16 = 0x88888888, 32 bits; SET
//! OUT_SMAC_15_0 = 0x8888, 16 bits); a receive entry rewrites before the TIR delivers.

mod common;

use common::datapath::Node;
use common::dr::{as_uid, create_uctx};
use common::eth_node::*;
use common::ethernet::ones;
use common::{cmd, status};
use mlx5_ifc::prm::caps::{FlowTableNicCap as Nic, FlowTablePropLayout as Prop};
use mlx5_ifc::prm::flow::{DestFormatStruct as Dest, FlowContext, SetFteIn};
use mlx5_ifc::prm::modify_header::{
    AllocModifyHeaderContextIn as AllocIn, AllocModifyHeaderContextOut as AllocOut,
    DeallocModifyHeaderContextIn as DeallocIn,
};
use mlx5_ifc::{Layout, Opcode, View};
use mlx5_sim::Mode;

const RX: u64 = 0;
const TX: u64 = 1;
const ALLOW: u64 = 0x1;
const DROP: u64 = 0x2;
const FWD: u64 = 0x4;
const MOD_HDR: u64 = 0x40;
const BAD_PARAM: u8 = 0x03;
const BAD_RES: u8 = 0x05;
const RES_BUSY: u8 = 0x06;
const BAD_MODIFY_HEADER: u32 = 0x5e03_0081;
const UNKNOWN_MODIFY_HEADER: u32 = 0x5e05_0019;
const MODIFY_HEADER_IN_USE: u32 = 0x5e06_0015;
const DMAC: [u8; 6] = [0x01, 0x50, 0x56, 0x19, 0x20, 0xa7];
const SMAC: [u8; 6] = [0x24, 0x8a, 0x07, 0xa5, 0x28, 0xc8];

/// `MLX5_ACTION_IN_FIELD_OUT_*` (Linux's mlx5_ifc.h).
const SMAC_47_16: u64 = 0x1;
const SMAC_15_0: u64 = 0x2;
const DMAC_47_16: u64 = 0x4;
const IP_TTL: u64 = 0xa;
const UDP_DPORT: u64 = 0xc;
const DIPV4: u64 = 0x16;
const FIRST_VID: u64 = 0x17;

/// One action: `action_type` (1 SET, 2 ADD, 3 COPY) in bits 31..28, `field` 27..16, `offset`
/// 12..8, `length` 4..0; `data` (or COPY's destination field and offset) in the second dword.
fn action(ty: u64, field: u64, offset: u64, length: u64, data: u32) -> [u8; 8] {
    let w = (ty << 28) | (field << 16) | (offset << 8) | length;
    let mut a = [0u8; 8];
    a[..4].copy_from_slice(&(w as u32).to_be_bytes());
    a[4..].copy_from_slice(&data.to_be_bytes());
    a
}

fn set(field: u64, offset: u64, length: u64, data: u32) -> [u8; 8] {
    action(1, field, offset, length, data)
}

/// ALLOC_MODIFY_HEADER_CONTEXT of `ty` with `actions` (`num_of_actions` their count) under
/// `uid`: `(status, syndrome, id)`.
fn alloc(n: &mut Node, uid: u16, ty: u64, actions: &[[u8; 8]]) -> (u8, u32, u32) {
    let mut input = cmd::<AllocIn>(Opcode::AllocModifyHeaderContext, 0, |v| {
        v.set(AllocIn::TABLE_TYPE, ty).unwrap();
        v.set(AllocIn::NUM_OF_ACTIONS, actions.len() as u64)
            .unwrap();
    });
    for a in actions {
        input.extend_from_slice(a);
    }
    let out = n.fx.p.exec(&as_uid(input, uid), 0x10);
    let (s, syn) = status(&out);
    let id = View::<AllocOut>::new(&out)
        .unwrap()
        .get32(AllocOut::MODIFY_HEADER_ID);
    (s, syn, id)
}

fn dealloc(n: &mut Node, uid: u16, id: u32) -> (u8, u32) {
    let input = cmd::<DeallocIn>(Opcode::DeallocModifyHeaderContext, 0, |v| {
        v.set(DeallocIn::MODIFY_HEADER_ID, id.into()).unwrap();
    });
    status(&n.fx.p.exec(&as_uid(input, uid), 0x10))
}

/// SET_FLOW_TABLE_ENTRY at index 0: `action`, `modify_header_id` `mh`, a TIR destination.
fn entry(
    n: &mut Node,
    ty: u64,
    (table, group): (u32, u32),
    action: u64,
    mh: u32,
    tir: Option<u32>,
) -> (u8, u32) {
    let mut input = cmd::<SetFteIn>(Opcode::SetFlowTableEntry, 0, |v| {
        v.set(SetFteIn::TABLE_TYPE, ty).unwrap();
        v.set(SetFteIn::TABLE_ID, table.into()).unwrap();
        let mut c = v.nested_mut(SetFteIn::FLOW_CONTEXT);
        c.set(FlowContext::GROUP_ID, group.into()).unwrap();
        c.set(FlowContext::ACTION, action).unwrap();
        c.set(FlowContext::MODIFY_HEADER_ID, mh.into()).unwrap();
        c.set(FlowContext::DESTINATION_LIST_SIZE, u64::from(tir.is_some()))
            .unwrap();
    });
    if let Some(t) = tir {
        let mut d = [0u8; Dest::BYTES];
        d[0] = 2; // TIR
        d[1..4].copy_from_slice(&t.to_be_bytes()[1..]);
        input.extend_from_slice(&d);
    }
    status(&n.fx.p.exec(&input, 0x10))
}

/// The frames received (their byte counts) since the last drain.
fn received(n: &mut Node) -> Vec<u32> {
    n.drain()
        .iter()
        .filter(|c| c.opcode == 0x2)
        .map(|c| c.byte_cnt)
        .collect()
}

#[test]
fn the_capability_is_offered_on_both_nic_table_types() {
    let mut n = Node::new(Mode::Sync, 1);
    let caps = common::dr::nic_caps(&mut n);
    let v = View::<Nic>::new(&caps).unwrap();
    for half in [
        Nic::FLOW_TABLE_PROPERTIES_NIC_RECEIVE,
        Nic::FLOW_TABLE_PROPERTIES_NIC_TRANSMIT,
    ] {
        let p = v.nested(half);
        assert_eq!(p.get(Prop::MAX_MODIFY_HEADER_ACTIONS), 32);
        assert!(p.get(Prop::LOG_MAX_MODIFY_HEADER_CONTEXT) > 0);
    }
}

#[test]
fn alloc_validates_and_dealloc_is_held_and_owned() {
    let mut n = Node::new(Mode::Sync, 1);
    let smac = [
        set(SMAC_47_16, 0, 32, 0x8888_8888),
        set(SMAC_15_0, 0, 16, 0x8888),
    ];
    // Table types other than NIC RX/TX; no actions; more than max_modify_header_actions.
    let bad = |n: &mut Node, ty: u64, a: &[[u8; 8]]| {
        let (s, syn, _) = alloc(n, 0, ty, a);
        (s, syn)
    };
    assert_eq!(bad(&mut n, 2, &smac), (BAD_PARAM, BAD_MODIFY_HEADER), "FDB");
    assert_eq!(bad(&mut n, TX, &[]), (BAD_PARAM, BAD_MODIFY_HEADER), "none");
    assert_eq!(
        bad(&mut n, TX, &[set(IP_TTL, 0, 8, 1); 33]),
        (BAD_PARAM, BAD_MODIFY_HEADER),
        "33 actions"
    );
    // An action type, a field, a range the device does not take.
    let refused = [
        action(4, IP_TTL, 0, 8, 1),
        set(FIRST_VID, 0, 12, 1),
        set(0x49, 0, 0, 1),
        set(SMAC_15_0, 0, 0, 0x8888), // 32 bits of a 16-bit field
        set(IP_TTL, 4, 8, 1),
        action(3, SMAC_47_16, 0, 0, (IP_TTL as u32) << 16), // COPY 32 bits into TTL
    ];
    for a in refused {
        assert_eq!(
            bad(&mut n, RX, &[a]),
            (BAD_PARAM, BAD_MODIFY_HEADER),
            "{a:x?}"
        );
    }
    assert_eq!(
        bad(&mut n, TX, &[set(IP_TTL, 0, 8, 1); 32]),
        (0, 0),
        "32 actions"
    );
    let (s, _, id) = alloc(&mut n, 0, TX, &smac);
    assert_eq!(s, 0);
    // A receive table cannot use a transmit context; an unknown one; not with DROP.
    let rx = root(&mut n, RX, false);
    assert_eq!(
        entry(&mut n, RX, rx, ALLOW | MOD_HDR, id, None),
        (BAD_RES, UNKNOWN_MODIFY_HEADER)
    );
    let tx = root(&mut n, TX, false);
    assert_eq!(
        entry(&mut n, TX, tx, ALLOW | MOD_HDR, id + 100, None),
        (BAD_RES, UNKNOWN_MODIFY_HEADER)
    );
    assert_eq!(entry(&mut n, TX, tx, DROP | MOD_HDR, id, None).0, BAD_PARAM);
    assert_eq!(entry(&mut n, TX, tx, ALLOW | MOD_HDR, id, None), (0, 0));
    // Held by the entry.
    assert_eq!(dealloc(&mut n, 0, id), (RES_BUSY, MODIFY_HEADER_IN_USE));
    // A user context's context: another context cannot free it; its own can.
    let (a, b) = (create_uctx(&mut n.fx), create_uctx(&mut n.fx));
    let (s, _, mine) = alloc(&mut n, a, RX, &[set(DMAC_47_16, 0, 0, 1)]);
    assert_eq!(s, 0);
    assert_eq!(dealloc(&mut n, b, mine), (BAD_RES, UNKNOWN_MODIFY_HEADER));
    assert_eq!(dealloc(&mut n, a, mine), (0, 0));
    assert_eq!(dealloc(&mut n, a, mine), (BAD_RES, UNKNOWN_MODIFY_HEADER));
}

#[test]
fn a_transmit_entry_rewrites_the_source_mac_on_the_wire() {
    let (mut n, mr, src, mut a, tir) = loop_node();
    let smac = [
        set(SMAC_47_16, 0, 32, 0x8888_8888),
        set(SMAC_15_0, 0, 16, 0x8888),
    ];
    let (s, _, id) = alloc(&mut n, 0, TX, &smac);
    assert_eq!(s, 0);
    let tx = root(&mut n, TX, false);
    assert_eq!(entry(&mut n, TX, tx, ALLOW | MOD_HDR, id, None), (0, 0));
    let rx = root(&mut n, RX, false);
    assert_eq!(entry(&mut n, RX, rx, FWD, 0, Some(tir)), (0, 0));
    // A multicast frame goes to the wire and back to the port's receive tables.
    let f = frame(DMAC, SMAC, 17, &[5; 100]);
    send(&n, &mut a, &src, &f, 14, None);
    assert_eq!(received(&mut n), [f.len() as u32]);
    let mut got = vec![0u8; f.len()];
    n.dev().dma_read(mr.buf.iova, &mut got).unwrap();
    assert_eq!(got[..6], DMAC);
    assert_eq!(got[6..12], [0x88; 6], "from 88:88:88:88:88:88");
    assert_eq!(got[14..24], f[14..24], "the IPv4 header untouched");
    assert_eq!(got[26..34], f[26..34]);
    assert_eq!(got[42..], f[42..]);
}

#[test]
fn a_receive_entry_rewrites_before_delivery_and_fixes_checksums() {
    let (mut n, mr, src, mut a, tir) = loop_node();
    // TTL − 1 (ADD 0xff to 8 bits), destination 10.0.0.9, UDP destination port 4000.
    let acts = [
        action(2, IP_TTL, 0, 0, 0xff),
        set(DIPV4, 0, 0, 0x0a00_0009),
        set(UDP_DPORT, 0, 16, 4000),
    ];
    let (s, _, id) = alloc(&mut n, 0, RX, &acts);
    assert_eq!(s, 0);
    let rx = root(&mut n, RX, false);
    assert_eq!(entry(&mut n, RX, rx, FWD | MOD_HDR, id, Some(tir)), (0, 0));
    // A UDP checksum computed over the frame as sent, so the device must recompute it.
    let mut f = frame(DMAC, SMAC, 17, &[3; 64]);
    let ip = |f: &[u8]| ones(&f[14..34], 0);
    let c = !ip(&f);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    let pseudo = |f: &[u8]| {
        let len = (f.len() - 34) as u64;
        let mut s = 17 + len;
        for c in f[26..34].chunks(2) {
            s += u64::from(u16::from_be_bytes([c[0], c[1]]));
        }
        s
    };
    let c = !ones(&f[34..], pseudo(&f));
    f[40..42].copy_from_slice(&c.to_be_bytes());
    send(&n, &mut a, &src, &f, 14, None);
    assert_eq!(received(&mut n), [f.len() as u32]);
    let mut got = vec![0u8; f.len()];
    n.dev().dma_read(mr.buf.iova, &mut got).unwrap();
    assert_eq!(got[22], 63, "TTL 64 − 1");
    assert_eq!(got[30..34], [10, 0, 0, 9]);
    assert_eq!(got[36..38], 4000u16.to_be_bytes());
    assert_eq!(ip(&got), 0xffff, "a valid IPv4 header checksum");
    assert_eq!(
        ones(&got[34..], pseudo(&got)),
        0xffff,
        "a valid UDP checksum"
    );
    assert_eq!(got[..14], f[..14]);
    assert_eq!(got[42..], f[42..]);
    // Held while its entry is there.
    assert_eq!(dealloc(&mut n, 0, id), (RES_BUSY, MODIFY_HEADER_IN_USE));
}
