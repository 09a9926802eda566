//! mlx5dv direct rules end to end, as rdma-core drives a ConnectX-5 (docs/dr-control-facts.md
//! §2–§6, docs/dr-ste-v0-facts.md §1–§5), written from those facts and not from a driver: a DevX
//! user context (uid) allocates DR's STE pool (a SW ICM object at the steering region's start) and
//! its zero-based key; the send ring — a force-loopback RC QP connected to itself — RDMA-WRITEs the
//! STEs through the key, each write followed by a READ of the same bytes; a DevX CREATE_FLOW_TABLE
//! (`sw_owner` 1, level `max_ft_level` − 1) names the table's start anchor; a kernel root table
//! (SET_FLOW_TABLE_ROOT) forwards to it. Then frames from a raw send queue of the same function
//! meet the STEs:
//! * receive: start anchor (always hit) → a 4-entry hash table on the source MAC (ETHL2_SRC_D,
//!   byte mask of the MAC's 6 bytes) → the rule STE in the slot the MAC hashes to → the TIR's
//!   ICM address with a flow tag (the frame lands in the RQ, the tag in its CQE); a miss
//!   anywhere → the matcher's end anchor → the NIC RX drop address;
//! * transmit: the same on ETHL2_SRC_O, a rule that pushes a VLAN and hits the TX allow address
//!   (the frame on the wire carries the tag), a rule that hits the TX drop address (nothing on
//!   the wire, the send completes), misses → the allow address (the frame as it was);
//! * a rule hitting an ICM address nothing lives at drops the frame and counts
//!   `sw_steering_errors`.
//!
//! The slot of a rule is computed here from the documented hash (dr-ste-v0-facts.md §2.5), not
//! asked of the simulator.

mod common;

use common::cmd;
use common::datapath::{Cqe, Mr, Node};
use common::dr::{
    as_uid, create_sw_icm, create_tir, create_uctx, dr_caps, dr_hash_index, sw_icm_key,
    sw_table_in, DrCaps, SendRing, Ste,
};
use common::eth_node::{frame, posted_rq, send, sender, transport_domain, Eth, BUF};
use common::ethernet::{by_id, made};
use mlx5_ifc::consts::flow_table_type::{NIC_RX, NIC_TX};
use mlx5_ifc::consts::ste_v0::{self, entry_type as et, lu_type as lu};
use mlx5_ifc::consts::{flow_action, flow_dest_type};
use mlx5_ifc::prm::flow::{
    CreateFlowGroupIn, CreateFlowGroupOut, CreateFlowTableIn, CreateFlowTableOut,
    DestFormatStruct as Dest, FlowContext, FlowTableContext as Ftc, SetFlowTableRootIn, SetFteIn,
};
use mlx5_ifc::prm::ste_tag::SteEthL2Src as L2Src;
use mlx5_ifc::prm::tir::DestroyTirIn;
use mlx5_ifc::{Layout, Opcode, ViewMut};
use mlx5_sim::{DatapathCounters, Fabric, Mode};

/// rdma-core's raw traffic (`test_tbl_qp_rule`): to a multicast MAC — the frame goes to the wire
/// and loops back to the port — from SMAC.
const DMAC: [u8; 6] = [0x01, 0x50, 0x56, 0x19, 0x20, 0xa7];
const SMAC: [u8; 6] = [0x24, 0x8a, 0x07, 0xa5, 0x28, 0xc8];
/// One table's chunks as DR's buddy allocator lays them out, as offsets into the key (what the
/// send ring's `raddr` carries): the table's start anchor and the matcher's end anchor (one
/// entry each), the matcher's hash table of [`ENTRIES`], aligned to its 256 bytes.
const ANCHOR: u64 = 0;
const END: u64 = 0x40;
const MATCHER: u64 = 0x100;
const ENTRIES: u64 = 4;
const STE: u64 = 64;
const FLOW_TAG: u32 = 0x00c0_ffee;

/// A DR domain of a DevX context: its uid, the capabilities DR read, the ICM address of the
/// key's offset 0, and the send ring.
struct Domain {
    uid: u16,
    caps: DrCaps,
    icm: u64,
    log_pool: u64,
    ring: SendRing,
}

/// `mlx5dv_dr_domain_create` and the first STE chunk: a user context; DR's STE pool of
/// 2^min(20, log size − 9) STEs as one SW ICM object at the steering region's start (aligned to
/// its size: no double-size retry) and its DM MR (zero-based, `lr lw rr rw`); the send ring.
fn domain(n: &mut Node) -> Domain {
    let uid = create_uctx(&mut n.fx);
    let caps = dr_caps(n);
    let log_pool = (caps.log_steering_size - 9).min(20) + 6;
    let start = caps.steering_start;
    let (st, _) = create_sw_icm(&mut n.fx, uid, start, log_pool);
    assert_eq!(st, (0, 0));
    let pd = n.fx.pd;
    let (st, key) = sw_icm_key(&mut n.fx, pd, start, 1 << log_pool);
    assert_eq!(st, (0, 0));
    let ring = SendRing::new(n, key);
    Domain {
        uid,
        caps,
        icm: start,
        log_pool,
        ring,
    }
}

impl Domain {
    /// `mlx5dv_dr_table_create` (level > 0) on side `ty`: the start anchor always-miss to the
    /// side's default address, a force drain, then CREATE_FLOW_TABLE through DevX (the uid):
    /// `sw_owner` 1, level `max_ft_level` − 1, `sw_owner_icm_root_0` the anchor. Its id.
    fn table(&mut self, n: &mut Node, ty: u64) -> u32 {
        let (entry, default) = self.side(ty);
        let anchor = Ste::new(entry, lu::DONT_CARE, self.caps.gvmi).always_miss(default);
        self.ring.write(n, ANCHOR, &anchor.0);
        self.ring.drain(n);
        let level = self.caps.max_ft_level - 1;
        let input = sw_table_in(ty, level, self.icm + ANCHOR, 0);
        made::<CreateFlowTableOut>(
            &mut n.fx,
            &as_uid(input, self.uid),
            CreateFlowTableOut::TABLE_ID,
        )
    }

    /// The entry type of side `ty`'s STEs and its default (miss) address: RX drop, TX allow.
    fn side(&self, ty: u64) -> (u64, u64) {
        match ty {
            NIC_RX => (et::RX, self.caps.rx_drop),
            _ => (et::TX, self.caps.tx_allow),
        }
    }

    /// `mlx5dv_dr_matcher_create` over the outer source MAC (lookup `l`), connected as the
    /// table's only matcher (`dr_matcher_connect`), in DR's 3 postsends: the end anchor
    /// always-miss to the default address, the hash table (its [`ENTRIES`] always-miss to the end
    /// anchor, one write by pointer), the start anchor always-hit to the hash table with the
    /// next lookup `l` and the MAC's byte mask.
    fn matcher(&mut self, n: &mut Node, ty: u64, l: u64) {
        let (entry, default) = self.side(ty);
        let gvmi = self.caps.gvmi;
        let end = Ste::new(entry, lu::DONT_CARE, gvmi).always_miss(default);
        self.ring.write(n, END, &end.0);
        let slots: Vec<u8> = (0..ENTRIES)
            .flat_map(|_| Ste::new(entry, l, gvmi).always_miss(self.icm + END).0)
            .collect();
        self.ring.write(n, MATCHER, &slots);
        let byte_mask = smac_ste(entry, l, gvmi, SMAC).byte_mask();
        assert_eq!(byte_mask, 0xfc00, "key bytes 0..5");
        let anchor =
            Ste::new(entry, lu::DONT_CARE, gvmi).hit(self.icm + MATCHER, ENTRIES, l, byte_mask);
        self.ring.write(n, ANCHOR, &anchor.0);
    }

    /// `mlx5dv_dr_rule_create`: `rule` (a source MAC STE), missing to the end anchor, into the
    /// slot its tag hashes to. The slot.
    fn rule(&mut self, n: &mut Node, rule: Ste) -> u64 {
        let slot = slot_of(&rule);
        let rule = rule.miss(self.icm + END);
        self.ring.write(n, MATCHER + STE * slot, &rule.0);
        slot
    }
}

/// An STE of lookup `l` (ETHL2_SRC) matching source MAC `mac` exactly: the MAC in the tag,
/// all ones over it in the mask (`dr_ste_v0_build_eth_l2_src_tag`).
fn smac_ste(entry: u64, l: u64, gvmi: u64, mac: [u8; 6]) -> Ste {
    let m = mac.iter().fold(0u64, |a, &b| a << 8 | u64::from(b));
    Ste::new(entry, l, gvmi).tag_mask::<L2Src>(|v, mask| {
        let m = if mask { (1 << 48) - 1 } else { m };
        v.set(L2Src::SMAC_47_16, m >> 16).unwrap();
        v.set(L2Src::SMAC_15_0, m & 0xffff).unwrap();
    })
}

/// The hash table slot of a rule STE (`dr_ste_calc_hash_index` over its tag).
fn slot_of(rule: &Ste) -> u64 {
    dr_hash_index(&rule.tag(), rule.byte_mask(), ENTRIES)
}

/// The first MAC 02:00:00:00:00:k whose slot `want` accepts (the slot of a source MAC rule:
/// the same on either side, the tag layouts of ETHL2_SRC_D and _O being one).
fn mac_where(want: impl Fn(u64) -> bool) -> [u8; 6] {
    (1..=255u8)
        .map(|k| [0x02, 0, 0, 0, 0, k])
        .find(|&m| want(slot_of(&smac_ste(et::RX, lu::ETHL2_SRC_D, 0, m))))
        .expect("a MAC in such a slot")
}

/// The kernel's root table of `ty` as Linux makes it for a root rule (level 1, made the root
/// with SET_FLOW_TABLE_ROOT), whose one entry forwards every frame (no match criteria) to flow
/// table `to`, a FLOW_TABLE destination.
fn root_to(n: &mut Node, ty: u64, to: u32) {
    let table_in = cmd::<CreateFlowTableIn>(Opcode::CreateFlowTable, 0, |v| {
        v.set(CreateFlowTableIn::TABLE_TYPE, ty).unwrap();
        let mut c = v.nested_mut(CreateFlowTableIn::FLOW_TABLE_CONTEXT);
        c.set(Ftc::LEVEL, 1).unwrap();
        c.set(Ftc::LOG_SIZE, 4).unwrap();
    });
    let table = made::<CreateFlowTableOut>(&mut n.fx, &table_in, CreateFlowTableOut::TABLE_ID);
    let group_in = cmd::<CreateFlowGroupIn>(Opcode::CreateFlowGroup, 0, |v| {
        v.set(CreateFlowGroupIn::TABLE_TYPE, ty).unwrap();
        v.set(CreateFlowGroupIn::TABLE_ID, table.into()).unwrap();
    });
    let group = made::<CreateFlowGroupOut>(&mut n.fx, &group_in, CreateFlowGroupOut::GROUP_ID);
    let mut fte = cmd::<SetFteIn>(Opcode::SetFlowTableEntry, 0, |v| {
        v.set(SetFteIn::TABLE_TYPE, ty).unwrap();
        v.set(SetFteIn::TABLE_ID, table.into()).unwrap();
        let mut c = v.nested_mut(SetFteIn::FLOW_CONTEXT);
        c.set(FlowContext::GROUP_ID, group.into()).unwrap();
        c.set(FlowContext::ACTION, flow_action::FWD_DEST).unwrap();
        c.set(FlowContext::DESTINATION_LIST_SIZE, 1).unwrap();
    });
    let mut d = [0u8; Dest::BYTES];
    let mut v = ViewMut::<Dest>::new(&mut d).unwrap();
    v.set(Dest::DESTINATION_TYPE, flow_dest_type::FLOW_TABLE)
        .unwrap();
    v.set(Dest::DESTINATION_ID, to.into()).unwrap();
    fte.extend_from_slice(&d);
    n.fx.p.ok(&fte, 0x10);
    let root = cmd::<SetFlowTableRootIn>(Opcode::SetFlowTableRoot, 0, |v| {
        v.set(SetFlowTableRootIn::TABLE_TYPE, ty).unwrap();
        v.set(SetFlowTableRootIn::TABLE_ID, table.into()).unwrap();
    });
    n.fx.p.ok(&root, 0x10);
}

/// The raw packet QP of the traffic: a send queue (its own transport domain) and a buffer of
/// frames to send.
struct Raw {
    tx: Eth,
    src: Mr,
}

impl Raw {
    fn new(n: &mut Node) -> Raw {
        let src = n.reg_mr(4096, false, false, false);
        Raw { tx: sender(n), src }
    }

    /// Sends a frame from `smac` (the SQ computes its checksums) and takes every completion:
    /// the frame, the receive CQEs, and the counters' change as
    /// `(steering drops, software steering errors)`.
    fn send(&mut self, n: &mut Node, smac: [u8; 6]) -> (Vec<u8>, Vec<Cqe>, (u64, u64)) {
        let f = frame(DMAC, smac, 17, &[0x5a; 100]);
        let before = n.dev().datapath_counters();
        send(n, &mut self.tx, &self.src, &f, 14, None);
        let c = n.drain();
        let sent = c.iter().filter(|c| c.opcode == 0 && c.qpn == self.tx.sqn);
        assert_eq!(sent.count(), 1, "the send completes: {c:?}");
        let after: DatapathCounters = n.dev().datapath_counters();
        let delta = (
            after.eth_rx_steering_drops - before.eth_rx_steering_drops,
            after.sw_steering_errors - before.sw_steering_errors,
        );
        (f, c.into_iter().filter(|c| c.opcode == 2).collect(), delta)
    }
}

/// The receive side as `test_tbl_qp_rule` sets it up: a domain, the RQ of a raw packet QP
/// behind a TIR (another transport domain than the sender's, made with the uid), a DR table on
/// NIC RX with the kernel's root table forwarding to it. `(domain, raw QP, RQ buffers, RQ,
/// TIR ICM address)`.
fn rx_setup(n: &mut Node) -> (Domain, Raw, Mr, u32, u64) {
    let mut d = domain(n);
    let raw = Raw::new(n);
    let rq_mr = n.reg_mr(16 * BUF as usize, false, false, false);
    let (rqn, _, _) = posted_rq(n, &rq_mr, 0, 16);
    let td = transport_domain(n);
    let (_, tir_icm) = create_tir(n, d.uid, rqn, td);
    let table = d.table(n, NIC_RX);
    root_to(n, NIC_RX, table);
    (d, raw, rq_mr, rqn, tir_icm)
}

/// The rule of the receive tests: SMAC → the TIR at `to`, with the flow tag.
fn rx_rule(d: &Domain, to: u64) -> Ste {
    smac_ste(et::RX, lu::ETHL2_SRC_D, d.caps.gvmi, SMAC)
        .flow_tag(FLOW_TAG)
        .to(to)
}

/// Receive buffer `k`'s first `len` bytes.
fn received(n: &Node, mr: &Mr, k: u64, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    n.dev().dma_read(mr.buf.iova + k * BUF, &mut b).unwrap();
    b
}

#[test]
fn the_hash_is_the_documented_one() {
    // dr-ste-v0-facts.md §2.5's vectors, computed with rdma-core's own CRC code.
    let seq: [u8; 16] = std::array::from_fn(|i| i as u8);
    assert_eq!(dr_hash_index(&seq, 0xffff, 16), 2);
    assert_eq!(dr_hash_index(&seq, 0xffff, 1024), 290);
    let mut dmac = [0u8; 16];
    dmac[..8].copy_from_slice(&[0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x12, 0x34]);
    assert_eq!(
        dr_hash_index(&dmac, 0xfc00, 16),
        1,
        "bytes 6.. are left out"
    );
    assert_eq!(dr_hash_index(&dmac, 0xfc00, 1024), 81);
    assert_eq!(dr_hash_index(&[0; 16], 0xffff, 1024), 0);
}

#[test]
fn a_receive_rule_on_the_source_mac_reaches_its_tir_with_the_flow_tag() {
    let mut n = Node::new(Mode::Sync, 1);
    let (mut d, mut raw, rq_mr, _, tir_icm) = rx_setup(&mut n);
    // A table without a matcher: its anchor misses to the drop address.
    let (_, rx, drops) = raw.send(&mut n, SMAC);
    assert_eq!((rx.len(), drops), (0, (1, 0)), "dropped by the anchor");

    d.matcher(&mut n, NIC_RX, lu::ETHL2_SRC_D);
    let (_, rx, drops) = raw.send(&mut n, SMAC);
    assert_eq!((rx.len(), drops), (0, (1, 0)), "an empty slot misses");

    let slot = d.rule(&mut n, rx_rule(&d, tir_icm));
    let (f, rx, drops) = raw.send(&mut n, SMAC);
    assert_eq!(drops, (0, 0));
    assert_eq!(rx.len(), 1, "delivered through the TIR");
    assert_eq!(
        (rx[0].qpn, rx[0].byte_cnt),
        (FLOW_TAG, f.len() as u32),
        "the rule's flow tag in the CQE"
    );
    let got = received(&n, &rq_mr, 0, f.len());
    assert_eq!(got[..14], f[..14]);
    assert_eq!(got[42..], f[42..], "the payload");

    // Another source MAC in the rule's slot: the rule misses to the end anchor; in another
    // slot: the slot's always-miss to the end anchor. Both on to the drop address.
    let same = mac_where(|s| s == slot);
    let other = mac_where(|s| s != slot);
    for mac in [same, other] {
        let (_, rx, drops) = raw.send(&mut n, mac);
        assert_eq!((rx.len(), drops), (0, (1, 0)), "{mac:02x?} dropped");
    }
    let (_, rx, _) = raw.send(&mut n, SMAC);
    assert_eq!(rx.len(), 1, "SMAC still arrives");
}

#[test]
fn a_rule_hitting_an_address_nothing_lives_at_drops_and_counts_an_error() {
    let mut n = Node::new(Mode::Sync, 1);
    let (mut d, mut raw, _, rqn, tir_icm) = rx_setup(&mut n);
    // The ring as the guest's rdma-core 44.0 posts: no write inline, every one by pointer.
    d.ring.max_inline = 0;
    d.matcher(&mut n, NIC_RX, lu::ETHL2_SRC_D);
    let slot = d.rule(&mut n, rx_rule(&d, tir_icm));
    assert_eq!(raw.send(&mut n, SMAC).1.len(), 1);
    // A TIR that is gone, and steering ICM past the SW ICM object; the rule relinked by a
    // write of its 32 control bytes, as DR updates a live STE.
    let (gone, gone_icm) = create_tir(&mut n, d.uid, rqn, 0);
    let destroy = by_id::<DestroyTirIn>(Opcode::DestroyTir, DestroyTirIn::TIRN, gone);
    n.fx.p.ok(&as_uid(destroy, d.uid), 0x10);
    let past = d.icm + (1 << d.log_pool);
    let relink = |d: &mut Domain, n: &mut Node, to| {
        let rule = rx_rule(d, to).miss(d.icm + END);
        d.ring
            .write(n, MATCHER + STE * slot, &rule.0[..ste_v0::CTRL_SIZE]);
    };
    for to in [gone_icm, past] {
        relink(&mut d, &mut n, to);
        let (_, rx, drops) = raw.send(&mut n, SMAC);
        assert_eq!((rx.len(), drops), (0, (1, 1)), "{to:#x}: an error");
    }
    // Relinked to the live TIR: delivered again.
    relink(&mut d, &mut n, tir_icm);
    let (_, rx, drops) = raw.send(&mut n, SMAC);
    assert_eq!((rx.len(), drops), (1, (0, 0)));
    assert_eq!(rx[0].qpn, FLOW_TAG);
}

#[test]
fn transmit_rules_push_a_vlan_onto_the_wire_and_drop_before_it() {
    let fabric = Fabric::new();
    let mut n = Node::new(Mode::Sync, 1);
    fabric.attach(&n.dev()).unwrap();
    fabric.keep_frames(16);
    let mut d = domain(&mut n);
    let mut raw = Raw::new(&mut n);
    let table = d.table(&mut n, NIC_TX);
    root_to(&mut n, NIC_TX, table);
    let wire = |n: &mut Node, raw: &mut Raw, mac| {
        let before = n.dev().datapath_counters().tx_frames;
        raw.send(n, mac);
        fabric.run_until_idle();
        let sent = n.dev().datapath_counters().tx_frames - before;
        (sent, fabric.captured().last().map(|(_, f)| f.clone()))
    };
    // A table without a matcher: its anchor misses to the allow address — the frame as it is.
    let (sent, plain) = wire(&mut n, &mut raw, SMAC);
    assert_eq!(sent, 1);
    let plain = plain.expect("on the wire");

    d.matcher(&mut n, NIC_TX, lu::ETHL2_SRC_O);
    let tci = 0x6000 | 0x123; // PCP 3, VID 0x123
    let rule = smac_ste(et::TX, lu::ETHL2_SRC_O, d.caps.gvmi, SMAC)
        .push_vlan(0x8100, tci)
        .to(d.caps.tx_allow);
    let slot = d.rule(&mut n, rule);
    let dropped = mac_where(|s| s != slot);
    let drop_rule = smac_ste(et::TX, lu::ETHL2_SRC_O, d.caps.gvmi, dropped).to(d.caps.tx_drop);
    d.rule(&mut n, drop_rule);

    let (sent, tagged) = wire(&mut n, &mut raw, SMAC);
    let mut want = plain.clone();
    want.splice(12..12, [0x81, 0x00, (tci >> 8) as u8, tci as u8]);
    assert_eq!(
        (sent, tagged),
        (1, Some(want)),
        "the VLAN after the source MAC"
    );

    let (sent, last) = wire(&mut n, &mut raw, dropped);
    assert_eq!(sent, 0, "dropped before the wire; the send completed");
    assert_eq!(fabric.captured().len(), 2);
    assert_ne!(last.map(|f| f[6..12].to_vec()), Some(dropped.to_vec()));

    // No rule for this one: the end anchor misses to the allow address.
    let other = mac_where(|s| s == slot);
    let (sent, f) = wire(&mut n, &mut raw, other);
    let f = f.unwrap();
    assert_eq!(
        (sent, &f[6..12], &f[12..14]),
        (1, &other[..], &[0x08, 0x00][..])
    );
}
