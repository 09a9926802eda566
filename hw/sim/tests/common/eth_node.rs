//! A node's Ethernet send side at the byte level, shared by the Ethernet data path tests: a
//! transport domain, a TIS and an RDY SQ (`sender`), a SEND or TSO WQE of a frame (`send`),
//! and the IPv4 frames they carry (`frame`).

use mlx5_ifc::prm::flow::{
    CreateFlowGroupIn, CreateFlowGroupOut, CreateFlowTableIn, CreateFlowTableOut,
    FlowTableContext as Ftc, FteMatchSetLyr24 as L24, SetFlowTableRootIn,
};
use mlx5_ifc::prm::sq_rq::{CreateRqOut, CreateSqOut, ModifyRqIn, ModifySqIn, Rqc, Sqc};
use mlx5_ifc::prm::srq::Wq;
use mlx5_ifc::prm::tir::{
    AllocTransportDomainIn, AllocTransportDomainOut, CreateTirIn, CreateTirOut, CreateTisIn,
    CreateTisOut, Tirc, Tisc,
};
use mlx5_ifc::{Be64, Layout, Opcode, View, ViewMut};
use mlx5_sim::DmaBlock;

use super::datapath::{Cqe, Mr, Node};
use super::ethernet::{self as eth, made, Ring};
use super::{bare, cmd};

/// Its first vector: 66.9.149.187:2794 -> 161.142.100.80:1766, hash of addresses and ports.
pub const SRC: [u8; 4] = [66, 9, 149, 187];
pub const DST: [u8; 4] = [161, 142, 100, 80];
pub const SPORT: u16 = 2794;
pub const DPORT: u16 = 1766;

/// An Ethernet/IPv4 frame from A to `dmac` of protocol `proto` (17 UDP, 6 TCP) carrying
/// `payload`, checksums zero (the SQ computes them).
pub fn frame(dmac: [u8; 6], smac: [u8; 6], proto: u8, payload: &[u8]) -> Vec<u8> {
    let l4 = if proto == 6 { 20 } else { 8 };
    let mut f = Vec::new();
    f.extend_from_slice(&dmac);
    f.extend_from_slice(&smac);
    f.extend_from_slice(&[0x08, 0x00]);
    let total = (20 + l4 + payload.len()) as u16;
    f.extend_from_slice(&[0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, proto, 0, 0]);
    f[16..18].copy_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&SRC);
    f.extend_from_slice(&DST);
    f.extend_from_slice(&SPORT.to_be_bytes());
    f.extend_from_slice(&DPORT.to_be_bytes());
    if proto == 6 {
        f.extend_from_slice(&7000u32.to_be_bytes()); // seq
        f.extend_from_slice(&0u32.to_be_bytes()); // ack
        f.extend_from_slice(&[5 << 4, 0x18, 0xff, 0xff, 0, 0, 0, 0]); // PSH ACK
    } else {
        f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        f.extend_from_slice(&[0, 0]);
    }
    f.extend_from_slice(payload);
    f
}

/// One NIC's Ethernet queues: a transport domain, a TIS and SQ (A), or RQs, an RQT, a TIR and
/// steering (B).
pub struct Eth {
    /// The sender's transport domain (0 for a receiver).
    pub td: u32,
    pub sqn: u32,
    pub sq: DmaBlock,
    pub sq_dbr: DmaBlock,
    pub sq_pi: u16,
    pub rqs: Vec<(u32, DmaBlock, DmaBlock)>,
}

pub fn ring(n: &Node, pages: usize) -> (Ring, DmaBlock, DmaBlock) {
    let dev = n.dev();
    let buf = dev.dma_alloc(pages * 4096, 4096).unwrap();
    let dbr = dev.dma_alloc(64, 64).unwrap();
    let r = Ring {
        pd: n.fx.pd,
        uar: n.fx.uar,
        dbr: dbr.iova,
        pas: (0..pages as u64).map(|k| buf.iova + k * 4096).collect(),
    };
    (r, buf, dbr)
}

pub fn transport_domain(n: &mut Node) -> u32 {
    let out = n.fx.p.ok(
        &bare::<AllocTransportDomainIn>(Opcode::AllocTransportDomain, 0),
        0x10,
    );
    View::<AllocTransportDomainOut>::new(&out)
        .unwrap()
        .get32(AllocTransportDomainOut::TRANSPORT_DOMAIN)
}

/// A: an SQ of 16 WQEBBs on the node's CQ, RDY.
pub fn sender(n: &mut Node) -> Eth {
    let td = transport_domain(n);
    let tis_in = cmd::<CreateTisIn>(Opcode::CreateTis, 0, |v| {
        v.nested_mut(CreateTisIn::CTX)
            .set(Tisc::TRANSPORT_DOMAIN, td.into())
            .unwrap();
    });
    let tis = made::<CreateTisOut>(&mut n.fx, &tis_in, CreateTisOut::TISN);
    let mut e = rdy_sq(n, tis, |_| {});
    e.td = td;
    e
}

/// An SQ of 16 WQEBBs on the node's CQ over TIS `tis` (`edit` applied to its context at
/// creation), RDY.
pub fn rdy_sq(n: &mut Node, tis: u32, edit: impl FnOnce(&mut ViewMut<'_, Sqc>)) -> Eth {
    let cqn = n.cqn;
    rdy_sq_on(n, cqn, tis, edit)
}

/// Like `rdy_sq`, on CQ `cqn`.
pub fn rdy_sq_on(
    n: &mut Node,
    cqn: u32,
    tis: u32,
    edit: impl FnOnce(&mut ViewMut<'_, Sqc>),
) -> Eth {
    let (r, sq, sq_dbr) = ring(n, 1);
    let sqn = made::<CreateSqOut>(&mut n.fx, &eth::sq_in(&r, cqn, tis, edit), CreateSqOut::SQN);
    n.fx.p.ok(
        &cmd::<ModifySqIn>(Opcode::ModifySq, 0, |v| {
            v.set(ModifySqIn::SQN, sqn.into()).unwrap();
            v.nested_mut(ModifySqIn::CTX).set(Sqc::STATE, 1).unwrap();
        }),
        0x10,
    );
    Eth {
        td: 0,
        sqn,
        sq,
        sq_dbr,
        sq_pi: 0,
        rqs: Vec::new(),
    }
}

/// A root receive flow table whose one entry sends frames to `dmac` to the TIRs `tirs`.
pub fn steer_mac_to(n: &mut Node, dmac: [u8; 6], tirs: &[u32]) {
    let table = made::<CreateFlowTableOut>(
        &mut n.fx,
        &eth::table_in(0, None),
        CreateFlowTableOut::TABLE_ID,
    );
    let group = made::<CreateFlowGroupOut>(
        &mut n.fx,
        &eth::dmac_group_in(table, 0, 0),
        CreateFlowGroupOut::GROUP_ID,
    );
    let dests: Vec<(u64, u32)> = tirs.iter().map(|&t| (2, t)).collect();
    n.fx.p
        .ok(&eth::dmac_fte_in(table, group, 0, dmac, &dests), 0x10);
    n.fx.p.ok(
        &cmd::<SetFlowTableRootIn>(Opcode::SetFlowTableRoot, 0, |v| {
            v.set(SetFlowTableRootIn::TABLE_ID, table.into()).unwrap();
        }),
        0x10,
    );
}

/// Posts a SEND (`tso`: TSO with `mss`) of `f` from A: the first `inline` bytes in the WQE,
/// the rest from `mr`; checksum offloads on; rings the doorbell.
pub fn send(n: &Node, e: &mut Eth, mr: &Mr, f: &[u8], inline: usize, mss: Option<u16>) -> u16 {
    n.dev().dma_write(mr.buf.iova, &f[inline..]).unwrap();
    let mut w = vec![0u8; 32];
    w[16 + 4] = 0xc0; // L3 and L4 checksums
    if let Some(m) = mss {
        w[16 + 6..16 + 8].copy_from_slice(&m.to_be_bytes());
    }
    w[16 + 12..16 + 14].copy_from_slice(&(inline as u16).to_be_bytes());
    w.extend_from_slice(&[0; 16 * 8]);
    w[30..30 + inline].copy_from_slice(&f[..inline]);
    let data_at = 32 + 16 * (inline.saturating_sub(2)).div_ceil(16);
    w.truncate(data_at);
    w.extend_from_slice(&((f.len() - inline) as u32).to_be_bytes());
    w.extend_from_slice(&mr.key.to_be_bytes());
    w.extend_from_slice(&mr.va.to_be_bytes());
    let opcode = if mss.is_some() { 0x0e } else { 0x0a };
    post_wqe(n, e, opcode, w)
}

/// Posts WQE `w` (its control segment's first 8 bytes and CQ_UPDATE are filled in here: the
/// SQ's next counter, `opcode`, the SQN, DS from its length) on `e` and rings the doorbell
/// with its first 8 bytes. Returns its counter.
pub fn post_wqe(n: &Node, e: &mut Eth, opcode: u32, mut w: Vec<u8>) -> u16 {
    let dev = n.dev();
    let ds = (w.len().div_ceil(16)) as u32;
    let idx = e.sq_pi;
    w[0..4].copy_from_slice(&((u32::from(idx) << 8) | opcode).to_be_bytes());
    w[4..8].copy_from_slice(&((e.sqn << 8) | ds).to_be_bytes());
    w[11] |= 0x08; // CQ_UPDATE
    w.resize(w.len().next_multiple_of(64), 0);
    for (k, bb) in w.chunks(64).enumerate() {
        let slot = (u64::from(idx) + k as u64) & 15;
        dev.dma_write(e.sq.iova + slot * 64, bb).unwrap();
    }
    e.sq_pi = e.sq_pi.wrapping_add((w.len() / 64) as u16);
    dev.dma_write(e.sq_dbr.iova + 4, &u32::from(e.sq_pi).to_be_bytes())
        .unwrap();
    let first = u64::from_be_bytes(w[..8].try_into().unwrap());
    dev.bar_write64(u64::from(n.fx.uar) * 4096 + 0x800, Be64::new(first));
    idx
}

/// Receive buffers per WQE.
pub const BUF: u64 = 2048;

/// A RDY RQ of 16 WQEs, WQE `k` one 2 KiB buffer at `mr` + `(16 * slot + k) * BUF`, `posted` of
/// them posted: `(rqn, ring, doorbell record)`.
pub fn posted_rq(n: &mut Node, mr: &Mr, slot: u64, posted: u16) -> (u32, DmaBlock, DmaBlock) {
    posted_rq_with(n, mr, slot, posted, |_| {})
}

/// Like `posted_rq`, with `edit` applied to the RQ context at creation.
pub fn posted_rq_with(
    n: &mut Node,
    mr: &Mr,
    slot: u64,
    posted: u16,
    edit: impl Fn(&mut ViewMut<'_, Rqc>),
) -> (u32, DmaBlock, DmaBlock) {
    let cqn = n.cqn;
    posted_rq_on(n, cqn, mr, slot, posted, edit)
}

/// Like `posted_rq_with`, on CQ `cqn`.
pub fn posted_rq_on(
    n: &mut Node,
    cqn: u32,
    mr: &Mr,
    slot: u64,
    posted: u16,
    edit: impl Fn(&mut ViewMut<'_, Rqc>),
) -> (u32, DmaBlock, DmaBlock) {
    let (r, buf, dbr) = ring(n, 1);
    let rqn = made::<CreateRqOut>(&mut n.fx, &eth::rq_in(&r, cqn, &edit), CreateRqOut::RQN);
    n.fx.p.ok(
        &cmd::<ModifyRqIn>(Opcode::ModifyRq, 0, |v| {
            v.set(ModifyRqIn::RQN, rqn.into()).unwrap();
            v.nested_mut(ModifyRqIn::CTX).set(Rqc::STATE, 1).unwrap();
        }),
        0x10,
    );
    let dev = n.dev();
    for k in 0..16u64 {
        let mut w = [0u8; 64];
        w[..4].copy_from_slice(&(BUF as u32).to_be_bytes());
        w[4..8].copy_from_slice(&mr.key.to_be_bytes());
        w[8..16].copy_from_slice(&mr.va((slot * 16 + k) * BUF).to_be_bytes());
        w[20..24].copy_from_slice(&0x100u32.to_be_bytes()); // terminator
        dev.dma_write(buf.iova + k * 64, &w).unwrap();
    }
    dev.dma_write(dbr.iova, &u32::from(posted).to_be_bytes())
        .unwrap();
    (rqn, buf, dbr)
}

/// Posts a SEND of each of `frames` from `e` (frame `k`'s first 14 bytes inline, the rest from
/// `mr` at `k × BUF`; checksum offloads on) and rings the doorbell once, for the last: the
/// device executes them in one pass.
pub fn send_burst(n: &Node, e: &mut Eth, mr: &Mr, frames: &[Vec<u8>]) {
    let dev = n.dev();
    let mut last = [0u8; 8];
    for (k, f) in frames.iter().enumerate() {
        let at = k as u64 * BUF;
        dev.dma_write(mr.buf.iova + at, &f[14..]).unwrap();
        let mut w = vec![0u8; 64];
        let idx = e.sq_pi;
        w[0..4].copy_from_slice(&((u32::from(idx) << 8) | 0x0a).to_be_bytes());
        w[4..8].copy_from_slice(&((e.sqn << 8) | 4).to_be_bytes());
        w[11] = 0x08; // CQ_UPDATE
        w[16 + 4] = 0xc0; // L3 and L4 checksums
        w[16 + 12..16 + 14].copy_from_slice(&14u16.to_be_bytes());
        w[30..44].copy_from_slice(&f[..14]);
        w[48..52].copy_from_slice(&((f.len() - 14) as u32).to_be_bytes());
        w[52..56].copy_from_slice(&mr.key.to_be_bytes());
        w[56..64].copy_from_slice(&mr.va(at).to_be_bytes());
        dev.dma_write(e.sq.iova + u64::from(idx & 15) * 64, &w)
            .unwrap();
        e.sq_pi = e.sq_pi.wrapping_add(1);
        last.copy_from_slice(&w[..8]);
    }
    dev.dma_write(e.sq_dbr.iova + 4, &u32::from(e.sq_pi).to_be_bytes())
        .unwrap();
    dev.bar_write64(
        u64::from(n.fx.uar) * 4096 + 0x800,
        Be64::new(u64::from_be_bytes(last)),
    );
}

/// Bytes per stride and strides per WQE of the tests' RQs: a WQE is two 4 KiB pages.
pub const STRIDE: u64 = 1024;
pub const STRIDES: u32 = 8;
pub const WQE_BYTES: u64 = STRIDE * STRIDES as u64;
/// `log_wqe_num_of_strides` for 8 strides (log 3, extended range: (3 − 9) & 0xf) and
/// `log_wqe_stride_size` for 1 KiB (log 10 − 6).
pub const LOG_STRIDES_FIELD: u64 = 0xa;
pub const LOG_STRIDE_FIELD: u64 = 4;

/// A striding RQ of four 32-byte WQEs (`kind`: linked list or cyclic; `edit` applied to its
/// work queue), RDY: `(rqn, ring, doorbell record)`.
pub fn striding_rq(
    n: &mut Node,
    kind: u64,
    edit: impl Fn(&mut ViewMut<'_, Wq>),
) -> (u32, DmaBlock, DmaBlock) {
    let (r, buf, dbr) = ring(n, 1);
    let input = eth::rq_in(&r, n.cqn, |c| {
        let mut w = c.nested_mut(Rqc::WQ);
        w.set(Wq::WQ_TYPE, kind).unwrap();
        w.set(Wq::LOG_WQ_STRIDE, 5).unwrap();
        w.set(Wq::LOG_WQ_SZ, 2).unwrap();
        w.set(Wq::LOG_WQE_NUM_OF_STRIDES, LOG_STRIDES_FIELD)
            .unwrap();
        w.set(Wq::LOG_WQE_STRIDE_SIZE, LOG_STRIDE_FIELD).unwrap();
        edit(&mut w);
    });
    let rqn = made::<CreateRqOut>(&mut n.fx, &input, CreateRqOut::RQN);
    n.fx.p.ok(
        &cmd::<ModifyRqIn>(Opcode::ModifyRq, 0, |v| {
            v.set(ModifyRqIn::RQN, rqn.into()).unwrap();
            v.nested_mut(ModifyRqIn::CTX).set(Rqc::STATE, 1).unwrap();
        }),
        0x10,
    );
    (rqn, buf, dbr)
}

/// Writes WQE `index` of a striding RQ: next index `next`, one data segment (`lkey`, `addr`).
pub fn write_striding_wqe(n: &Node, buf: &DmaBlock, index: u64, next: u16, lkey: u32, addr: u64) {
    let mut w = [0u8; 32];
    w[2..4].copy_from_slice(&next.to_be_bytes());
    w[16..20].copy_from_slice(&(WQE_BYTES as u32).to_be_bytes());
    w[20..24].copy_from_slice(&lkey.to_be_bytes());
    w[24..32].copy_from_slice(&addr.to_be_bytes());
    n.dev().dma_write(buf.iova + index * 32, &w).unwrap();
}

/// A direct TIR over `rqn` and a root flow table sending the node's own MAC to it (frames an
/// SQ of the node sends to itself loop back inside the device).
pub fn steer_own_mac_to(n: &mut Node, rqn: u32) {
    let td = transport_domain(n);
    let tir_in = cmd::<CreateTirIn>(Opcode::CreateTir, 0, |v| {
        let mut c = v.nested_mut(CreateTirIn::CTX);
        c.set(Tirc::INLINE_RQN, rqn.into()).unwrap();
        c.set(Tirc::TRANSPORT_DOMAIN, td.into()).unwrap();
    });
    let tir = made::<CreateTirOut>(&mut n.fx, &tir_in, CreateTirOut::TIRN);
    let mac = n.mac();
    steer_mac_to(n, mac, &[tir]);
}

/// A frame to the node's own MAC with a UDP payload of `len - 42` bytes of `seed`.
pub fn own_frame(n: &Node, len: usize, seed: u8) -> Vec<u8> {
    let payload: Vec<u8> = (0..len - 42).map(|k| seed.wrapping_add(k as u8)).collect();
    frame(n.mac(), n.mac(), 17, &payload)
}

/// The receive CQEs among `cqes` (the SQs' completions are opcode 0).
pub fn receives(cqes: &[Cqe]) -> Vec<(u16, u16, u32)> {
    cqes.iter()
        .filter(|c| c.opcode == 2)
        .map(|c| (c.wqe_id, c.wqe_counter, c.byte_cnt))
        .collect()
}

/// A root table of `ty` (level 0) with one group `0..=0` whose criteria are `smac` (outer source
/// MAC) or nothing (every frame): `(table, group)`.
pub fn root(n: &mut Node, ty: u64, by_smac: bool) -> (u32, u32) {
    let table_in = cmd::<CreateFlowTableIn>(Opcode::CreateFlowTable, 0, |v| {
        v.set(CreateFlowTableIn::TABLE_TYPE, ty).unwrap();
        let mut c = v.nested_mut(CreateFlowTableIn::FLOW_TABLE_CONTEXT);
        c.set(Ftc::LOG_SIZE, 4).unwrap();
        c.set(Ftc::REFORMAT_EN, u64::from(ty == 1)).unwrap(); // NIC TX
    });
    let table = made::<CreateFlowTableOut>(&mut n.fx, &table_in, CreateFlowTableOut::TABLE_ID);
    let mut group_in = cmd::<CreateFlowGroupIn>(Opcode::CreateFlowGroup, 0, |v| {
        v.set(CreateFlowGroupIn::TABLE_TYPE, ty).unwrap();
        v.set(CreateFlowGroupIn::TABLE_ID, table.into()).unwrap();
        v.set(CreateFlowGroupIn::MATCH_CRITERIA_ENABLE, u64::from(by_smac))
            .unwrap();
    });
    if by_smac {
        let at = CreateFlowGroupIn::MATCH_CRITERIA.offset();
        let mut c = ViewMut::<L24>::new(&mut group_in[at..at + L24::BYTES]).unwrap();
        c.set(L24::SMAC_47_16, 0xffff_ffff).unwrap();
        c.set(L24::SMAC_15_0, 0xffff).unwrap();
    }
    let group = made::<CreateFlowGroupOut>(&mut n.fx, &group_in, CreateFlowGroupOut::GROUP_ID);
    n.fx.p.ok(
        &cmd::<SetFlowTableRootIn>(Opcode::SetFlowTableRoot, 0, |v| {
            v.set(SetFlowTableRootIn::TABLE_TYPE, ty).unwrap();
            v.set(SetFlowTableRootIn::TABLE_ID, table.into()).unwrap();
        }),
        0x10,
    );
    (table, group)
}

/// A TIR straight to a fresh RQ of 16 posted 2 KiB buffers at `mr` (transport domain `td`).
pub fn rx_tir(n: &mut Node, mr: &Mr, td: u32) -> u32 {
    let (rqn, _, _) = posted_rq(n, mr, 0, 16);
    let tir_in = cmd::<CreateTirIn>(Opcode::CreateTir, 0, |v| {
        let mut c = v.nested_mut(CreateTirIn::CTX);
        c.set(Tirc::INLINE_RQN, rqn.into()).unwrap();
        c.set(Tirc::TRANSPORT_DOMAIN, td.into()).unwrap();
    });
    made::<CreateTirOut>(&mut n.fx, &tir_in, CreateTirOut::TIRN)
}

/// A node (synchronous) with a 64 KiB receive region, a 4 KiB send region, an Ethernet sender
/// and a TIR (of another transport domain, so the sender's own frames reach it) straight to a
/// fresh RQ at the receive region: `(node, receive, send, sender, tir)`.
pub fn loop_node() -> (Node, Mr, Mr, Eth, u32) {
    let mut n = Node::new(mlx5_sim::Mode::Sync, 1);
    let mr = n.reg_mr(64 * 1024, false, false, false);
    let src = n.reg_mr(4096, false, false, false);
    let a = sender(&mut n);
    let other = transport_domain(&mut n);
    let tir = rx_tir(&mut n, &mr, other);
    (n, mr, src, a, tir)
}
