//! Flow samplers as mlx5dv direct rules uses them (`mlx5dv_dr_action_create_flow_sampler`,
//! rdma-core's `test_flow_sampler`; docs/dr-control-facts.md "Flow sampler"), written from those
//! facts and not from a driver: a termination table made through DevX as the sample table, a
//! FLOW_SAMPLER general object over it and a DR default table, its ICM address (QUERY) as a
//! rule's hit address; what the device refuses, and what the sampler holds.

mod common;

use common::cmd;
use common::datapath::Node;
use common::dr::{as_uid, create_tir, create_uctx, destroy_general};
use common::dr_domain::{domain, received, root_to, smac_ste, Raw, DMAC, FLOW_TAG, SMAC};
use common::eth_node::{posted_rq, transport_domain, BUF};
use common::ethernet::{fte_in, group_in, made, table_in};
use mlx5_ifc::consts::flow_table_type::{NIC_RX, NIC_TX};
use mlx5_ifc::consts::ste_v0::{entry_type as et, lu_type as lu};
use mlx5_ifc::consts::{flow_action, flow_dest_type, general_obj_type};
use mlx5_ifc::prm::flow::{
    CreateFlowGroupOut, CreateFlowTableIn, CreateFlowTableOut, DeleteFteIn,
    DestFormatStruct as Dest, DestroyFlowTableIn, FlowContext, FlowTableContext as Ftc, SetFteIn,
};
use mlx5_ifc::prm::flow_counter::{
    AllocFlowCounterIn, AllocFlowCounterOut, FlowCounterList, QueryFlowCounterIn,
    QueryFlowCounterOut, TrafficCounter,
};
use mlx5_ifc::prm::general_obj::{FlowSampler, GeneralObjInCmdHdr, GeneralObjOutCmdHdr};
use mlx5_ifc::{Layout, Opcode, View, ViewMut};
use mlx5_sim::Mode;

/// A flow counter of the kernel's (ALLOC_FLOW_COUNTER).
fn counter(n: &mut Node) -> u32 {
    let input = cmd::<AllocFlowCounterIn>(Opcode::AllocFlowCounter, 0, |_| {});
    made::<AllocFlowCounterOut>(&mut n.fx, &input, AllocFlowCounterOut::FLOW_COUNTER_ID)
}

/// The packets counter `id` counted.
fn packets(n: &mut Node, id: u32) -> u64 {
    let input = cmd::<QueryFlowCounterIn>(Opcode::QueryFlowCounter, 0, |v| {
        v.set(QueryFlowCounterIn::FLOW_COUNTER_ID, id.into())
            .unwrap();
    });
    let out = n.fx.p.ok(&input, 0x20);
    let at = QueryFlowCounterOut::FLOW_STATISTICS.offset();
    View::<TrafficCounter>::new(&out[at..])
        .unwrap()
        .get(TrafficCounter::PACKETS)
}

/// CREATE_GENERAL_OBJECT FLOW_SAMPLER for `uid`, `f` setting its fields: the status and id.
fn sampler_in(uid: u16, f: impl FnOnce(&mut ViewMut<'_, FlowSampler>)) -> Vec<u8> {
    let mut input = cmd::<GeneralObjInCmdHdr>(Opcode::CreateGeneralObject, 0, |v| {
        v.set(GeneralObjInCmdHdr::OBJ_TYPE, general_obj_type::FLOW_SAMPLER)
            .unwrap();
    });
    let mut body = [0u8; FlowSampler::BYTES];
    f(&mut ViewMut::new(&mut body[..]).unwrap());
    input.extend_from_slice(&body);
    as_uid(input, uid)
}

/// QUERY_GENERAL_OBJECT of flow sampler `id` for `uid`: the sampler as the device reports it.
fn query_sampler(n: &mut Node, uid: u16, id: u32) -> Vec<u8> {
    let input = cmd::<GeneralObjInCmdHdr>(Opcode::QueryGeneralObject, 0, |v| {
        v.set(GeneralObjInCmdHdr::OBJ_TYPE, general_obj_type::FLOW_SAMPLER)
            .unwrap();
        v.set(GeneralObjInCmdHdr::OBJ_ID, id.into()).unwrap();
    });
    let out = n.fx.p.ok(
        &as_uid(input, uid),
        GeneralObjOutCmdHdr::BYTES + FlowSampler::BYTES,
    );
    out[GeneralObjOutCmdHdr::BYTES..].to_vec()
}

/// rdma-core's `test_flow_sampler` (44.0) on one function, as DR builds it
/// (`mlx5dv_dr_action_create_flow_sampler`, dr-control-facts.md): the sample table is an
/// "always hit" termination table made through DevX at level `max_ft_level` − 1, its one entry
/// counting (counter 1), tagging and forwarding to the TIR; the sampler (ratio 4,
/// `ignore_flow_level`) over it and the default table, a DR table whose SMAC rule counts
/// (counter 2) and drops; the table the kernel's root forwards to has an SMAC rule hitting the
/// sampler's ICM address. Of 40 frames all 40 are counted on the default table and dropped
/// there, every fourth lands in the RQ with the termination entry's flow tag.
#[test]
fn a_flow_sampler_sends_every_frame_to_its_default_table_and_one_in_its_ratio_to_its_sample_table()
{
    const RATIO: u64 = 4;
    const FRAMES: u64 = 40;
    let mut n = Node::new(Mode::Sync, 1);
    let mut d = domain(&mut n);
    let mut raw = Raw::new(&mut n);
    let rq_mr = n.reg_mr(16 * BUF as usize, false, false, false);
    let (rqn, _, _) = posted_rq(&mut n, &rq_mr, 0, 16);
    let td = transport_domain(&mut n);
    let (tirn, _) = create_tir(&mut n, d.uid, rqn, td);
    let (sampled_ctr, default_ctr) = (counter(&mut n), counter(&mut n));

    // The default table: SMAC → count, drop.
    let default = d.table_at(&mut n, NIC_RX, 0x400);
    d.matcher(&mut n, NIC_RX, lu::ETHL2_SRC_D);
    let rule = smac_ste(et::RX, lu::ETHL2_SRC_D, d.caps.gvmi, SMAC)
        .counter(default_ctr)
        .to(d.caps.rx_drop);
    d.rule(&mut n, rule);
    // The sample table: a termination table, always hit.
    let level = d.caps.max_ft_level - 1;
    let mut term_in = table_in(level, None);
    {
        let mut v = ViewMut::<CreateFlowTableIn>::new(&mut term_in[..]).unwrap();
        let mut c = v.nested_mut(CreateFlowTableIn::FLOW_TABLE_CONTEXT);
        c.set(Ftc::TERMINATION_TABLE, 1).unwrap();
    }
    let term = made::<CreateFlowTableOut>(
        &mut n.fx,
        &as_uid(term_in.clone(), d.uid),
        CreateFlowTableOut::TABLE_ID,
    );
    let group = made::<CreateFlowGroupOut>(
        &mut n.fx,
        &as_uid(group_in(term, 0, 0), d.uid),
        CreateFlowGroupOut::GROUP_ID,
    );
    let mut fte = fte_in(term, group, 0, &[(flow_dest_type::TIR, tirn)]);
    {
        let mut v = ViewMut::<SetFteIn>::new(&mut fte[..]).unwrap();
        let mut c = v.nested_mut(SetFteIn::FLOW_CONTEXT);
        c.set(
            FlowContext::ACTION,
            flow_action::FWD_DEST | flow_action::COUNT,
        )
        .unwrap();
        c.set(FlowContext::FLOW_COUNTER_LIST_SIZE, 1).unwrap();
        c.set(FlowContext::FLOW_TAG, FLOW_TAG.into()).unwrap();
    }
    let mut e = [0u8; Dest::BYTES];
    ViewMut::<FlowCounterList>::new(&mut e[..])
        .unwrap()
        .set(FlowCounterList::FLOW_COUNTER_ID, sampled_ctr.into())
        .unwrap();
    fte.extend_from_slice(&e);
    n.fx.p.ok(&as_uid(fte, d.uid), 0x10);

    // What the device refuses: a termination table on NIC TX, a sampler on NIC TX, of ratio
    // 0, over a table that is not there, or (minding levels) above its default table.
    let mut tx_term = term_in;
    ViewMut::<CreateFlowTableIn>::new(&mut tx_term[..])
        .unwrap()
        .set(CreateFlowTableIn::TABLE_TYPE, NIC_TX)
        .unwrap();
    n.fx.expect(&as_uid(tx_term, d.uid), 0x10, (3, 0x5e03_0057));
    let sampler = |v: &mut ViewMut<'_, FlowSampler>| {
        v.set(FlowSampler::TABLE_TYPE, NIC_RX).unwrap();
        v.set(FlowSampler::LEVEL, level).unwrap();
        v.set(FlowSampler::IGNORE_FLOW_LEVEL, 1).unwrap();
        v.set(FlowSampler::SAMPLE_RATIO, RATIO).unwrap();
        v.set(FlowSampler::SAMPLE_TABLE_ID, term.into()).unwrap();
        v.set(FlowSampler::DEFAULT_TABLE_ID, default.into())
            .unwrap();
    };
    let bad_param = (3, 0x5e03_0082);
    type Spoil = fn(&mut ViewMut<'_, FlowSampler>);
    let cases: [(Spoil, (u8, u32)); 4] = [
        (
            |v| v.set(FlowSampler::TABLE_TYPE, NIC_TX).map(drop).unwrap(),
            bad_param,
        ),
        (
            |v| v.set(FlowSampler::SAMPLE_RATIO, 0).map(drop).unwrap(),
            bad_param,
        ),
        (
            |v| v.set(FlowSampler::IGNORE_FLOW_LEVEL, 0).map(drop).unwrap(),
            bad_param,
        ),
        (
            |v| {
                v.set(FlowSampler::DEFAULT_TABLE_ID, 0xffff)
                    .map(drop)
                    .unwrap()
            },
            (5, 0x5e05_000e),
        ),
    ];
    for (spoil, want) in cases {
        let input = sampler_in(d.uid, |v| {
            sampler(v);
            spoil(v);
        });
        n.fx.expect(&input, GeneralObjOutCmdHdr::BYTES, want);
    }
    let id = made::<GeneralObjOutCmdHdr>(
        &mut n.fx,
        &sampler_in(d.uid, sampler),
        GeneralObjOutCmdHdr::OBJ_ID,
    );
    let q = query_sampler(&mut n, d.uid, id);
    let q = View::<FlowSampler>::new(&q).unwrap();
    assert_eq!(
        (
            q.get(FlowSampler::SAMPLE_RATIO),
            q.get32(FlowSampler::SAMPLE_TABLE_ID)
        ),
        (RATIO, term)
    );
    let at = q.get(FlowSampler::SW_STEERING_ICM_ADDRESS_RX);
    assert!(at != 0 && at % 64 == 0 && at < 1 << 40, "{at:#x}");

    // The table the root forwards to: SMAC → the sampler.
    let table = d.table_at(&mut n, NIC_RX, 0);
    d.matcher(&mut n, NIC_RX, lu::ETHL2_SRC_D);
    d.rule(
        &mut n,
        smac_ste(et::RX, lu::ETHL2_SRC_D, d.caps.gvmi, SMAC).to(at),
    );
    d.ring.drain(&mut n);
    root_to(&mut n, NIC_RX, table);
    n.drain();

    let before = n.dev().datapath_counters();
    let mut landed = Vec::new();
    for k in 0..FRAMES {
        let (f, rx, _) = raw.send(&mut n, SMAC);
        for c in rx {
            assert_eq!((c.qpn, c.byte_cnt), (FLOW_TAG, f.len() as u32), "frame {k}");
            landed.push(k);
        }
    }
    let want: Vec<u64> = (0..FRAMES).filter(|k| (k + 1) % RATIO == 0).collect();
    assert_eq!(landed, want, "every fourth frame sampled");
    let got = received(&n, &rq_mr, 0, 14);
    assert_eq!(got[..12], [DMAC, SMAC].concat());
    let after = n.dev().datapath_counters();
    assert_eq!(
        (
            packets(&mut n, sampled_ctr),
            packets(&mut n, default_ctr),
            after.eth_rx_sampled - before.eth_rx_sampled,
            after.eth_rx_steering_drops - before.eth_rx_steering_drops,
            after.sw_steering_errors - before.sw_steering_errors,
        ),
        (FRAMES / RATIO, FRAMES, FRAMES / RATIO, FRAMES, 0)
    );

    // The sampler holds its tables; gone, it holds nothing and its address is nobody's.
    let destroy_term = cmd::<DestroyFlowTableIn>(Opcode::DestroyFlowTable, 0, |v| {
        v.set(DestroyFlowTableIn::TABLE_ID, term.into()).unwrap();
    });
    n.fx.expect(&as_uid(destroy_term.clone(), d.uid), 0x10, (6, 0x5e06_000b));
    let other = create_uctx(&mut n.fx);
    assert_eq!(
        destroy_general(&mut n.fx, other, general_obj_type::FLOW_SAMPLER, id),
        (5, 0x5e05_0018),
        "another context's sampler"
    );
    assert_eq!(
        destroy_general(&mut n.fx, d.uid, general_obj_type::FLOW_SAMPLER, id),
        (0, 0)
    );
    let (_, rx, drops) = raw.send(&mut n, SMAC);
    assert_eq!(
        (rx.len(), drops),
        (0, (1, 1)),
        "a jump to a sampler gone: an error"
    );
    let fte_gone = cmd::<DeleteFteIn>(Opcode::DeleteFlowTableEntry, 0, |v| {
        v.set(DeleteFteIn::TABLE_ID, term.into()).unwrap();
    });
    n.fx.p.ok(&as_uid(fte_gone, d.uid), 0x10);
}
