//! Ethernet objects at the byte level (the commands Linux's mlx5e sends): work queues, RQ, SQ,
//! RQT, flow tables, groups and entries.

use mlx5_ifc::consts::wq_type;
use mlx5_ifc::prm::flow::{
    CreateFlowGroupIn, CreateFlowTableIn, DestFormatStruct as Dest, FlowContext,
    FlowTableContext as Ftc, SetFteIn,
};
use mlx5_ifc::prm::sq_rq::{CreateRqIn, CreateSqIn, Rqc, Sqc};
use mlx5_ifc::prm::srq::Wq;
use mlx5_ifc::prm::tir::{CreateRqtIn, Rqtc};
use mlx5_ifc::{Field, Layout, Opcode, View, ViewMut};

use super::cmd;
use super::queues::{with_pas, Fx};

/// Where a work queue lives: PD, UAR, doorbell record, buffer pages; 16 entries of 64 bytes.
pub struct Ring {
    pub pd: u32,
    pub uar: u32,
    pub dbr: u64,
    pub pas: Vec<u64>,
}

impl Ring {
    /// One page of `fx`'s arena and its doorbell record `k`.
    pub fn in_arena(fx: &Fx, k: u64) -> Ring {
        Ring {
            pd: fx.pd,
            uar: fx.uar,
            dbr: fx.dbr(k),
            pas: fx.pages(1),
        }
    }
}

/// Runs a create command and reads the new object's number.
pub fn made<O: Layout>(fx: &mut Fx, input: &[u8], f: Field<O>) -> u32 {
    let out = fx.p.ok(input, O::BYTES);
    View::<O>::new(&out).unwrap().get32(f)
}

/// A cyclic work queue of 16 entries of 64 bytes.
pub fn wq(r: &Ring, w: &mut ViewMut<'_, Wq>) {
    w.set(Wq::WQ_TYPE, wq_type::CYCLIC).unwrap();
    w.set(Wq::PD, r.pd.into()).unwrap();
    w.set(Wq::UAR_PAGE, r.uar.into()).unwrap();
    w.set(Wq::DBR_ADDR, r.dbr).unwrap();
    w.set(Wq::LOG_WQ_STRIDE, 6).unwrap();
    w.set(Wq::LOG_WQ_SZ, 4).unwrap();
}

pub fn rq_in(r: &Ring, cqn: u32, f: impl FnOnce(&mut ViewMut<'_, Rqc>)) -> Vec<u8> {
    let input = cmd::<CreateRqIn>(Opcode::CreateRq, 0, |v| {
        let mut c = v.nested_mut(CreateRqIn::CTX);
        c.set(Rqc::CQN, cqn.into()).unwrap();
        wq(r, &mut c.nested_mut(Rqc::WQ));
        f(&mut c);
    });
    with_pas(input, &r.pas)
}

pub fn sq_in(r: &Ring, cqn: u32, tis: u32, f: impl FnOnce(&mut ViewMut<'_, Sqc>)) -> Vec<u8> {
    let input = cmd::<CreateSqIn>(Opcode::CreateSq, 0, |v| {
        let mut c = v.nested_mut(CreateSqIn::CTX);
        c.set(Sqc::CQN, cqn.into()).unwrap();
        c.set(Sqc::TIS_LST_SZ, 1).unwrap();
        c.set(Sqc::TIS_NUM_0, tis.into()).unwrap();
        wq(r, &mut c.nested_mut(Sqc::WQ));
        f(&mut c);
    });
    with_pas(input, &r.pas)
}

pub fn rqt_in(rqns: &[u32], max: u64) -> Vec<u8> {
    let mut input = cmd::<CreateRqtIn>(Opcode::CreateRqt, 0, |v| {
        let mut c = v.nested_mut(CreateRqtIn::RQT_CONTEXT);
        c.set(Rqtc::RQT_MAX_SIZE, max).unwrap();
        c.set(Rqtc::RQT_ACTUAL_SIZE, rqns.len() as u64).unwrap();
    });
    for r in rqns {
        input.extend_from_slice(&r.to_be_bytes());
    }
    input
}

pub fn table_in(level: u64, miss: Option<u32>) -> Vec<u8> {
    cmd::<CreateFlowTableIn>(Opcode::CreateFlowTable, 0, |v| {
        let mut c = v.nested_mut(CreateFlowTableIn::FLOW_TABLE_CONTEXT);
        c.set(Ftc::LEVEL, level).unwrap();
        c.set(Ftc::LOG_SIZE, 4).unwrap();
        if let Some(t) = miss {
            c.set(Ftc::TABLE_MISS_ACTION, 1).unwrap();
            c.set(Ftc::TABLE_MISS_ID, t.into()).unwrap();
        }
    })
}

pub fn group_in(table: u32, start: u64, end: u64) -> Vec<u8> {
    cmd::<CreateFlowGroupIn>(Opcode::CreateFlowGroup, 0, |v| {
        v.set(CreateFlowGroupIn::TABLE_ID, table.into()).unwrap();
        v.set(CreateFlowGroupIn::START_FLOW_INDEX, start).unwrap();
        v.set(CreateFlowGroupIn::END_FLOW_INDEX, end).unwrap();
        v.set(CreateFlowGroupIn::MATCH_CRITERIA_ENABLE, 1).unwrap();
    })
}

/// An entry at `index` of `group` forwarding to `(type, id)` destinations.
pub fn fte_in(table: u32, group: u32, index: u64, dests: &[(u64, u32)]) -> Vec<u8> {
    let mut input = cmd::<SetFteIn>(Opcode::SetFlowTableEntry, 0, |v| {
        v.set(SetFteIn::TABLE_ID, table.into()).unwrap();
        v.set(SetFteIn::FLOW_INDEX, index).unwrap();
        let mut c = v.nested_mut(SetFteIn::FLOW_CONTEXT);
        c.set(FlowContext::GROUP_ID, group.into()).unwrap();
        c.set(FlowContext::ACTION, 0x4).unwrap();
        c.set(FlowContext::DESTINATION_LIST_SIZE, dests.len() as u64)
            .unwrap();
    });
    for &(ty, id) in dests {
        let mut d = [0u8; Dest::BYTES];
        let mut v = ViewMut::<Dest>::new(&mut d).unwrap();
        v.set(Dest::DESTINATION_TYPE, ty).unwrap();
        v.set(Dest::DESTINATION_ID, id.into()).unwrap();
        input.extend_from_slice(&d);
    }
    input
}

pub fn by_id<L: Layout>(op: Opcode, f: Field<L>, id: u32) -> Vec<u8> {
    cmd::<L>(op, 0, |v| {
        v.set(f, id.into()).unwrap();
    })
}

/// A group of `table` (`start..=end`) matching the outer destination MAC exactly.
pub fn dmac_group_in(table: u32, start: u64, end: u64) -> Vec<u8> {
    use mlx5_ifc::prm::flow::FteMatchSetLyr24 as L24;
    let mut input = group_in(table, start, end);
    let at = CreateFlowGroupIn::MATCH_CRITERIA.offset();
    let mut v = ViewMut::<L24>::new(&mut input[at..at + L24::BYTES]).unwrap();
    v.set(L24::DMAC_47_16, 0xffff_ffff).unwrap();
    v.set(L24::DMAC_15_0, 0xffff).unwrap();
    input
}

/// An entry of a [`dmac_group_in`] group matching `mac`, forwarding to `dests`.
pub fn dmac_fte_in(
    table: u32,
    group: u32,
    index: u64,
    mac: [u8; 6],
    dests: &[(u64, u32)],
) -> Vec<u8> {
    use mlx5_ifc::prm::flow::FteMatchSetLyr24 as L24;
    let mut input = fte_in(table, group, index, dests);
    let at = SetFteIn::FLOW_CONTEXT.offset() + FlowContext::MATCH_VALUE.offset();
    let mut v = ViewMut::<L24>::new(&mut input[at..at + L24::BYTES]).unwrap();
    v.set(
        L24::DMAC_47_16,
        u32::from_be_bytes([mac[0], mac[1], mac[2], mac[3]]).into(),
    )
    .unwrap();
    v.set(L24::DMAC_15_0, u16::from_be_bytes([mac[4], mac[5]]).into())
        .unwrap();
    input
}

/// The RFC 1071 one's complement sum of `b` added to `s`, folded to 16 bits, not inverted: a
/// correct header or segment with its checksum sums to 0xffff.
pub fn ones(b: &[u8], mut s: u64) -> u16 {
    for c in b.chunks(2) {
        s += u64::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}
