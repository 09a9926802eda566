//! A mlx5dv direct rules domain as rdma-core builds one on a ConnectX-5, for the tests that drive
//! DR end to end (docs/dr-control-facts.md §2–§6, docs/dr-ste-v0-facts.md §1–§5): a DevX user
//! context, DR's STE pool and its key, the send ring; tables, one source-MAC matcher each, rules;
//! the kernel's root table forwarding to a DR table; a raw send queue whose frames meet the STEs.

use mlx5_ifc::consts::flow_table_type::NIC_RX;
use mlx5_ifc::consts::ste_v0::{entry_type as et, lu_type as lu};
use mlx5_ifc::consts::{flow_action, flow_dest_type};
use mlx5_ifc::prm::flow::{
    CreateFlowGroupIn, CreateFlowGroupOut, CreateFlowTableIn, CreateFlowTableOut,
    DestFormatStruct as Dest, FlowContext, FlowTableContext as Ftc, SetFlowTableRootIn, SetFteIn,
};
use mlx5_ifc::prm::ste_tag::SteEthL2Src as L2Src;
use mlx5_ifc::{Layout, Opcode, ViewMut};
use mlx5_sim::DatapathCounters;

use super::cmd;
use super::datapath::{Cqe, Mr, Node};
use super::dr::{
    as_uid, create_sw_icm, create_uctx, dr_caps, dr_hash_index, sw_icm_key, sw_table_in, DrCaps,
    SendRing, Ste,
};
use super::eth_node::{frame, send, sender, Eth, BUF};
use super::ethernet::made;

/// rdma-core's raw traffic (`test_tbl_qp_rule`): to a multicast MAC — the frame goes to the wire
/// and loops back to the port — from SMAC.
pub const DMAC: [u8; 6] = [0x01, 0x50, 0x56, 0x19, 0x20, 0xa7];
pub const SMAC: [u8; 6] = [0x24, 0x8a, 0x07, 0xa5, 0x28, 0xc8];
/// One table's chunks as DR's buddy allocator lays them out, as offsets into the key (what the
/// send ring's `raddr` carries): the table's start anchor and the matcher's end anchor (one
/// entry each), the matcher's hash table of [`ENTRIES`], aligned to its 256 bytes.
pub const ANCHOR: u64 = 0;
pub const END: u64 = 0x40;
pub const MATCHER: u64 = 0x100;
pub const ENTRIES: u64 = 4;
pub const STE: u64 = 64;
pub const FLOW_TAG: u32 = 0x00c0_ffee;

/// A DR domain of a DevX context: its uid, the capabilities DR read, the ICM address of the
/// key's offset 0, and the send ring.
pub struct Domain {
    pub uid: u16,
    pub caps: DrCaps,
    pub icm: u64,
    pub log_pool: u64,
    pub ring: SendRing,
    /// Where the current table's chunks start in the key ([`Domain::table_at`]).
    pub at: u64,
}

/// `mlx5dv_dr_domain_create` and the first STE chunk: a user context; DR's STE pool of
/// 2^min(20, log size − 9) STEs as one SW ICM object at the steering region's start (aligned to
/// its size: no double-size retry) and its DM MR (zero-based, `lr lw rr rw`); the send ring.
pub fn domain(n: &mut Node) -> Domain {
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
        at: 0,
    }
}

impl Domain {
    /// `mlx5dv_dr_table_create` (level > 0) on side `ty`: the start anchor always-miss to the
    /// side's default address, a force drain, then CREATE_FLOW_TABLE through DevX (the uid):
    /// `sw_owner` 1, level `max_ft_level` − 1, `sw_owner_icm_root_0` the anchor. Its id.
    pub fn table(&mut self, n: &mut Node, ty: u64) -> u32 {
        self.table_at(n, ty, 0)
    }

    /// [`Domain::table`] with its chunks (and those of its matcher and rules, made next) from
    /// key offset `at` on.
    pub fn table_at(&mut self, n: &mut Node, ty: u64, at: u64) -> u32 {
        self.at = at;
        let (entry, default) = self.side(ty);
        let anchor = Ste::new(entry, lu::DONT_CARE, self.caps.gvmi).always_miss(default);
        self.ring.write(n, at + ANCHOR, &anchor.0);
        self.ring.drain(n);
        let level = self.caps.max_ft_level - 1;
        let input = sw_table_in(ty, level, self.icm + at + ANCHOR, 0);
        made::<CreateFlowTableOut>(
            &mut n.fx,
            &as_uid(input, self.uid),
            CreateFlowTableOut::TABLE_ID,
        )
    }

    /// The entry type of side `ty`'s STEs and its default (miss) address: RX drop, TX allow.
    pub fn side(&self, ty: u64) -> (u64, u64) {
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
    pub fn matcher(&mut self, n: &mut Node, ty: u64, l: u64) {
        let (entry, default) = self.side(ty);
        let gvmi = self.caps.gvmi;
        let at = self.at;
        let end = Ste::new(entry, lu::DONT_CARE, gvmi).always_miss(default);
        self.ring.write(n, at + END, &end.0);
        let slots: Vec<u8> = (0..ENTRIES)
            .flat_map(|_| Ste::new(entry, l, gvmi).always_miss(self.icm + at + END).0)
            .collect();
        self.ring.write(n, at + MATCHER, &slots);
        let byte_mask = smac_ste(entry, l, gvmi, SMAC).byte_mask();
        assert_eq!(byte_mask, 0xfc00, "key bytes 0..5");
        let anchor = Ste::new(entry, lu::DONT_CARE, gvmi).hit(
            self.icm + at + MATCHER,
            ENTRIES,
            l,
            byte_mask,
        );
        self.ring.write(n, at + ANCHOR, &anchor.0);
    }

    /// `mlx5dv_dr_rule_create`: `rule` (a source MAC STE), missing to the end anchor, into the
    /// slot its tag hashes to. The slot.
    pub fn rule(&mut self, n: &mut Node, rule: Ste) -> u64 {
        let slot = slot_of(&rule);
        let rule = rule.miss(self.icm + self.at + END);
        self.ring.write(n, self.at + MATCHER + STE * slot, &rule.0);
        slot
    }
}

/// An STE of lookup `l` (ETHL2_SRC) matching source MAC `mac` exactly: the MAC in the tag,
/// all ones over it in the mask (`dr_ste_v0_build_eth_l2_src_tag`).
pub fn smac_ste(entry: u64, l: u64, gvmi: u64, mac: [u8; 6]) -> Ste {
    let m = mac.iter().fold(0u64, |a, &b| a << 8 | u64::from(b));
    Ste::new(entry, l, gvmi).tag_mask::<L2Src>(|v, mask| {
        let m = if mask { (1 << 48) - 1 } else { m };
        v.set(L2Src::SMAC_47_16, m >> 16).unwrap();
        v.set(L2Src::SMAC_15_0, m & 0xffff).unwrap();
    })
}

/// The hash table slot of a rule STE (`dr_ste_calc_hash_index` over its tag).
pub fn slot_of(rule: &Ste) -> u64 {
    dr_hash_index(&rule.tag(), rule.byte_mask(), ENTRIES)
}

/// The first MAC 02:00:00:00:00:k whose slot `want` accepts (the slot of a source MAC rule:
/// the same on either side, the tag layouts of ETHL2_SRC_D and _O being one).
pub fn mac_where(want: impl Fn(u64) -> bool) -> [u8; 6] {
    (1..=255u8)
        .map(|k| [0x02, 0, 0, 0, 0, k])
        .find(|&m| want(slot_of(&smac_ste(et::RX, lu::ETHL2_SRC_D, 0, m))))
        .expect("a MAC in such a slot")
}

/// The kernel's root table of `ty` as Linux makes it for a root rule (level 1, made the root
/// with SET_FLOW_TABLE_ROOT), whose one entry forwards every frame (no match criteria) to flow
/// table `to`, a FLOW_TABLE destination.
pub fn root_to(n: &mut Node, ty: u64, to: u32) {
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
pub struct Raw {
    pub tx: Eth,
    pub src: Mr,
}

impl Raw {
    pub fn new(n: &mut Node) -> Raw {
        let src = n.reg_mr(4096, false, false, false);
        Raw { tx: sender(n), src }
    }

    /// Sends a frame from `smac` (the SQ computes its checksums) and takes every completion:
    /// the frame, the receive CQEs, and the counters' change as
    /// `(steering drops, software steering errors)`.
    pub fn send(&mut self, n: &mut Node, smac: [u8; 6]) -> (Vec<u8>, Vec<Cqe>, (u64, u64)) {
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

/// Receive buffer `k`'s first `len` bytes.
pub fn received(n: &Node, mr: &Mr, k: u64, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    n.dev().dma_read(mr.buf.iova + k * BUF, &mut b).unwrap();
    b
}
