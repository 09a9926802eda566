//! Flow counters, NIC transmit tables and packet reformat, byte by byte, as rdma-core's raw
//! packet tests use them through Linux's mlx5_ib (docs/fields.md "Flow counters, NIC transmit
//! tables, packet reformat"): a transmit root table whose entry drops frames of one source MAC
//! (their WQEs complete as sent), a receive entry that drops and counts (`DROP | COUNT`, the
//! counter after the destinations in SET_FLOW_TABLE_ENTRY), QUERY_FLOW_COUNTER right after the
//! send completions (`test_root_tbl_drop_action`); an L2_TO_L2_TUNNEL context on a transmit
//! entry (`ALLOW | PACKET_REFORMAT`) wrapping every frame in a VXLAN header whose IPv4 and UDP
//! lengths and IPv4 checksum the device fills (`test_tx_packet_reformat`); and the refusals.

mod common;

use common::datapath::Node;
use common::eth_node::*;
use common::ethernet::ones;
use common::{cmd, status};
use mlx5_ifc::prm::flow::{
    DestFormatStruct as Dest, FlowContext, FteMatchSetLyr24 as L24, SetFteIn,
};
use mlx5_ifc::prm::flow_counter::{
    AllocFlowCounterIn, AllocFlowCounterOut, DeallocFlowCounterIn, QueryFlowCounterIn,
    QueryFlowCounterOut, TrafficCounter,
};
use mlx5_ifc::prm::reformat::{
    AllocPacketReformatContextIn as ReformatIn, AllocPacketReformatContextOut as ReformatOut,
    PacketReformatContextIn,
};
use mlx5_ifc::{Layout, Opcode, View, ViewMut};
use mlx5_sim::Mode;

const RX: u64 = 0;
const TX: u64 = 1;
const DROP: u64 = 0x2;
const ALLOW: u64 = 0x1;
const FWD: u64 = 0x4;
const COUNT: u64 = 0x8;
const REFORMAT: u64 = 0x10;
const BAD_PARAM: u8 = 0x03;
const BAD_RES: u8 = 0x05;
const RES_BUSY: u8 = 0x06;
/// rdma-core's test packets: to a multicast MAC, from these.
const DMAC: [u8; 6] = [0x01, 0x50, 0x56, 0x19, 0x20, 0xa7];
const SMAC: [u8; 6] = [0x24, 0x8a, 0x07, 0xa5, 0x28, 0xc8];
const OTHER_SMAC: [u8; 6] = [0x88; 6];

/// SET_FLOW_TABLE_ENTRY at index 0 of `(table, group)` of `ty`: `action`, destinations
/// `(type, id)`, then counters at the same 8-byte stride, `reformat`, source MAC `smac` to
/// match. `(status, syndrome)`.
fn entry(
    n: &mut Node,
    ty: u64,
    (table, group): (u32, u32),
    action: u64,
    dests: &[(u64, u32)],
    counters: &[u32],
    (reformat, smac): (u32, Option<[u8; 6]>),
) -> (u8, u32) {
    let mut input = cmd::<SetFteIn>(Opcode::SetFlowTableEntry, 0, |v| {
        v.set(SetFteIn::TABLE_TYPE, ty).unwrap();
        v.set(SetFteIn::TABLE_ID, table.into()).unwrap();
        let mut c = v.nested_mut(SetFteIn::FLOW_CONTEXT);
        c.set(FlowContext::GROUP_ID, group.into()).unwrap();
        c.set(FlowContext::ACTION, action).unwrap();
        c.set(FlowContext::DESTINATION_LIST_SIZE, dests.len() as u64)
            .unwrap();
        c.set(FlowContext::FLOW_COUNTER_LIST_SIZE, counters.len() as u64)
            .unwrap();
        c.set(FlowContext::PACKET_REFORMAT_ID, reformat.into())
            .unwrap();
    });
    if let Some(m) = smac {
        let at = SetFteIn::FLOW_CONTEXT.offset() + FlowContext::MATCH_VALUE.offset();
        let mut v = ViewMut::<L24>::new(&mut input[at..at + L24::BYTES]).unwrap();
        v.set(
            L24::SMAC_47_16,
            u32::from_be_bytes([m[0], m[1], m[2], m[3]]).into(),
        )
        .unwrap();
        v.set(L24::SMAC_15_0, u16::from_be_bytes([m[4], m[5]]).into())
            .unwrap();
    }
    for &(t, id) in dests {
        let mut d = [0u8; Dest::BYTES];
        let mut v = ViewMut::<Dest>::new(&mut d).unwrap();
        v.set(Dest::DESTINATION_TYPE, t).unwrap();
        v.set(Dest::DESTINATION_ID, id.into()).unwrap();
        input.extend_from_slice(&d);
    }
    for &c in counters {
        let mut d = [0u8; Dest::BYTES];
        d[..4].copy_from_slice(&c.to_be_bytes());
        input.extend_from_slice(&d);
    }
    status(&n.fx.p.exec(&input, 0x10))
}

fn counter(n: &mut Node) -> u32 {
    let out = n.fx.p.ok(
        &cmd::<AllocFlowCounterIn>(Opcode::AllocFlowCounter, 0, |_| {}),
        0x10,
    );
    View::<AllocFlowCounterOut>::new(&out)
        .unwrap()
        .get32(AllocFlowCounterOut::FLOW_COUNTER_ID)
}

/// `(packets, octets)` of counter `id` (`clear`: zeroed after).
fn query(n: &mut Node, id: u32, clear: bool) -> (u64, u64) {
    let input = cmd::<QueryFlowCounterIn>(Opcode::QueryFlowCounter, 0, |v| {
        v.set(QueryFlowCounterIn::FLOW_COUNTER_ID, id.into())
            .unwrap();
        v.set(QueryFlowCounterIn::CLEAR, u64::from(clear)).unwrap();
    });
    let out = n.fx.p.ok(&input, 0x20);
    let at = QueryFlowCounterOut::FLOW_STATISTICS.offset();
    let t = View::<TrafficCounter>::new(&out[at..]).unwrap();
    (
        t.get(TrafficCounter::PACKETS),
        t.get(TrafficCounter::OCTETS),
    )
}

/// ALLOC_PACKET_REFORMAT_CONTEXT of `ty` with `data`: `(status, syndrome, id)`.
fn reformat(n: &mut Node, ty: u64, data: &[u8]) -> (u8, u32, u32) {
    let mut input = cmd::<ReformatIn>(Opcode::AllocPacketReformatContext, 0, |v| {
        let mut c = v.nested_mut(ReformatIn::PACKET_REFORMAT_CONTEXT);
        c.set(PacketReformatContextIn::REFORMAT_TYPE, ty).unwrap();
        c.set(
            PacketReformatContextIn::REFORMAT_DATA_SIZE,
            data.len() as u64,
        )
        .unwrap();
    });
    let at = ReformatIn::PACKET_REFORMAT_CONTEXT.offset()
        + PacketReformatContextIn::REFORMAT_DATA.offset();
    input.resize((at + data.len()).max(input.len()).next_multiple_of(4), 0);
    input[at..at + data.len()].copy_from_slice(data);
    let out = n.fx.p.exec(&input, 0x10);
    let (s, syn) = status(&out);
    (
        s,
        syn,
        View::<ReformatOut>::new(&out)
            .unwrap()
            .get32(ReformatOut::PACKET_REFORMAT_ID),
    )
}

/// The receive CQEs (opcode 2) the node has now.
fn rx_count(n: &mut Node) -> (usize, usize) {
    let c = n.drain();
    (
        c.iter().filter(|c| c.opcode == 0x2).count(),
        c.iter().filter(|c| c.opcode == 0x0).count(),
    )
}

#[test]
fn transmit_drop_completes_the_send_and_a_receive_drop_counts() {
    let (mut n, _, src, mut a, tir) = loop_node();
    let (rx_c, tx_c) = (counter(&mut n), counter(&mut n));
    assert_eq!((rx_c % 4, tx_c % 4), (0, 0), "4-aligned ids");
    // Receive: frames from SMAC and OTHER_SMAC are dropped and counted; transmit: frames from
    // SMAC are dropped (and counted).
    let rx = root(&mut n, RX, false);
    assert_eq!(
        entry(&mut n, RX, rx, DROP | COUNT, &[], &[rx_c], (0, None)),
        (0, 0)
    );
    let tx = root(&mut n, TX, true);
    let r = entry(&mut n, TX, tx, DROP | COUNT, &[], &[tx_c], (0, Some(SMAC)));
    assert_eq!(r, (0, 0));
    let f = frame(DMAC, SMAC, 17, &[7; 100]);
    for _ in 0..5 {
        send(&n, &mut a, &src, &f, 14, None);
    }
    assert_eq!(
        rx_count(&mut n),
        (0, 5),
        "five sends complete, nothing received"
    );
    assert_eq!(
        n.dev().datapath_counters().tx_frames,
        0,
        "nothing on the wire"
    );
    assert_eq!(query(&mut n, tx_c, false), (5, 5 * f.len() as u64));
    assert_eq!(query(&mut n, rx_c, false), (0, 0));
    // Another source MAC misses the transmit table: to the wire, and back to the port (a
    // multicast frame), where the receive entry drops and counts it before the send's
    // completion can be polled.
    let g = frame(DMAC, OTHER_SMAC, 17, &[8; 60]);
    for _ in 0..5 {
        send(&n, &mut a, &src, &g, 14, None);
    }
    assert_eq!(rx_count(&mut n), (0, 5));
    assert_eq!(
        query(&mut n, rx_c, true),
        (5, 5 * g.len() as u64),
        "read and cleared"
    );
    assert_eq!(query(&mut n, rx_c, false), (0, 0));
    assert_eq!(query(&mut n, tx_c, false).0, 5);
    assert_eq!(n.dev().datapath_counters().tx_frames, 5);
    // The receive entry forwarding to the TIR instead: the next frames arrive, counted.
    let (t, g2) = rx;
    n.fx.p.ok(
        &cmd::<mlx5_ifc::prm::flow::DeleteFteIn>(Opcode::DeleteFlowTableEntry, 0, |v| {
            v.set(mlx5_ifc::prm::flow::DeleteFteIn::TABLE_ID, t.into())
                .unwrap();
        }),
        0x10,
    );
    let r = entry(
        &mut n,
        RX,
        (t, g2),
        FWD | COUNT,
        &[(2, tir)],
        &[rx_c],
        (0, None),
    );
    assert_eq!(r, (0, 0));
    send(&n, &mut a, &src, &g, 14, None);
    assert_eq!(rx_count(&mut n), (1, 1));
    assert_eq!(query(&mut n, rx_c, false).0, 1);
}

/// rdma-core's VXLAN outer header for a 1024-byte inner frame (`gen_outer_headers`): Ethernet
/// to DMAC, IPv4 1.1.1.1 → 2.2.2.2 (total length set, checksum 0), UDP 1234 → 4789, VXLAN.
fn outer(inner: usize) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend_from_slice(&DMAC);
    h.extend_from_slice(&SMAC);
    h.extend_from_slice(&[0x08, 0x00]);
    let total = (inner + 8 + 20 + 8) as u16;
    h.extend_from_slice(&[0x45, 0]);
    h.extend_from_slice(&total.to_be_bytes());
    h.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]);
    h.extend_from_slice(&1234u16.to_be_bytes());
    h.extend_from_slice(&4789u16.to_be_bytes());
    h.extend_from_slice(&((inner + 16) as u16).to_be_bytes());
    h.extend_from_slice(&[0, 0]);
    h.extend_from_slice(&[0x08, 0, 0, 0, 0, 0, 0x7b, 0]);
    h
}

#[test]
fn a_transmit_reformat_wraps_every_frame_in_its_header() {
    let (mut n, mr, src, mut a, tir) = loop_node();
    let f = frame(DMAC, SMAC, 17, &[9; 200]);
    let h = outer(f.len());
    let (s, _, id) = reformat(&mut n, 2, &h);
    assert_eq!(s, 0);
    let tx = root(&mut n, TX, false);
    assert_eq!(
        entry(&mut n, TX, tx, ALLOW | REFORMAT, &[], &[], (id, None)),
        (0, 0)
    );
    let rx = root(&mut n, RX, false);
    assert_eq!(
        entry(&mut n, RX, rx, FWD, &[(2, tir)], &[], (0, None)),
        (0, 0)
    );
    send(&n, &mut a, &src, &f, 14, None);
    let c = n.drain();
    let recv: Vec<u32> = c
        .iter()
        .filter(|c| c.opcode == 0x2)
        .map(|c| c.byte_cnt)
        .collect();
    assert_eq!(recv, [(h.len() + f.len()) as u32]);
    let mut got = vec![0u8; h.len() + f.len()];
    n.dev().dma_read(mr.buf.iova, &mut got).unwrap();
    // The header as given but the IPv4 checksum the device computed; the frame after it as
    // the SQ sent it (its own checksums computed by the offloads).
    assert_eq!(got[..24], h[..24]);
    assert_eq!(got[26..h.len()], h[26..]);
    assert_eq!(ones(&got[14..34], 0), 0xffff, "a valid outer IPv4 checksum");
    assert_eq!(got[h.len()..h.len() + 14], f[..14]);
    assert_eq!(got[h.len() + 42..], f[42..]);
}

#[test]
fn counters_and_reformats_are_checked_and_held() {
    let mut n = Node::new(Mode::Sync, 1);
    let c = counter(&mut n);
    let rx = root(&mut n, RX, false);
    // An unknown counter; a counter without COUNT; COUNT without a counter.
    let r = entry(&mut n, RX, rx, DROP | COUNT, &[], &[c + 4], (0, None));
    assert_eq!(r, (BAD_RES, 0x5e05_0016), "UNKNOWN_FLOW_COUNTER");
    let r = entry(&mut n, RX, rx, DROP, &[], &[c], (0, None));
    assert_eq!(r.0, BAD_PARAM);
    let r = entry(&mut n, RX, rx, DROP | COUNT, &[], &[], (0, None));
    assert_eq!(r.0, BAD_PARAM);
    assert_eq!(
        entry(&mut n, RX, rx, DROP | COUNT, &[], &[c], (0, None)),
        (0, 0)
    );
    // Held by the entry.
    let dealloc = cmd::<DeallocFlowCounterIn>(Opcode::DeallocFlowCounter, 0, |v| {
        v.set(DeallocFlowCounterIn::FLOW_COUNTER_ID, c.into())
            .unwrap();
    });
    assert_eq!(
        status(&n.fx.p.exec(&dealloc, 0x10)),
        (RES_BUSY, 0x5e06_0012)
    );
    // Bulks are not offered; a query of a counter nobody allocated.
    let bulk = cmd::<AllocFlowCounterIn>(Opcode::AllocFlowCounter, 0, |v| {
        v.set(AllocFlowCounterIn::FLOW_COUNTER_BULK, 1).unwrap();
    });
    assert_eq!(status(&n.fx.p.exec(&bulk, 0x10)), (BAD_PARAM, 0x5e03_0077));
    let q = cmd::<QueryFlowCounterIn>(Opcode::QueryFlowCounter, 0, |v| {
        v.set(QueryFlowCounterIn::FLOW_COUNTER_ID, 0x400).unwrap();
    });
    assert_eq!(status(&n.fx.p.exec(&q, 0x20)), (BAD_RES, 0x5e05_0016));
    // Reformat: only L2_TO_L2_TUNNEL, 1..=128 bytes.
    assert_eq!(reformat(&mut n, 0, &[1; 50]).0, BAD_PARAM, "L2_TO_VXLAN");
    assert_eq!(reformat(&mut n, 2, &[1; 129]).0, BAD_PARAM, "too long");
    let tx = root(&mut n, TX, false);
    let r = entry(&mut n, TX, tx, ALLOW | REFORMAT, &[], &[], (77, None));
    assert_eq!(r, (BAD_RES, 0x5e05_0017), "UNKNOWN_PACKET_REFORMAT");
    let (_, _, id) = reformat(&mut n, 2, &[1; 50]);
    let r = entry(&mut n, TX, tx, DROP | REFORMAT, &[], &[], (id, None));
    assert_eq!(r.0, BAD_PARAM, "DROP with a reformat");
}
