//! Steering of Ethernet frames: the NIC receive flow tables, then a TIR, then an RQ; the NIC
//! transmit flow tables a frame from a send queue meets before the wire ([`egress`]).
//!
//! * **Flow tables** (from the root SET_FLOW_TABLE_ROOT made for `table_type` 0): a frame's
//!   match image is built in the `fte_match_param` layout (outer L2–L4 headers; the misc
//!   parameters all zero: no tunnels, own vport). In a table the entries are tried in
//!   `flow_index` order; an entry matches when, over the sections its group's
//!   `match_criteria_enable` names, `frame & criteria == value & criteria` bytewise. A match's
//!   action: FWD_DEST to each destination (a TIR delivers a copy; a flow table of a higher level
//!   is looked up next), DROP, or ALLOW (on to the next table, as a miss). A miss follows the
//!   table's `table_miss_action`: 1 forwards to `table_miss_id`, 0 (default) drops — Linux
//!   chains its tables with explicit miss forwards and leaves the last one's miss to drop.
//!   Lookups stop after 64 tables (a loop of forwards is impossible by the level rule, but the
//!   walk is bounded anyway).
//! * **TIR**: `disp_type` 0 delivers to `inline_rqn`; 1 hashes the fields its
//!   `rx_hash_field_selector_outer` selects (source and destination address, L4 ports) with
//!   `rx_hash_fn` (2 Toeplitz with `rx_hash_toeplitz_key`, 1 XOR8, 0 none) and picks entry
//!   `hash mod rqt_actual_size` of its RQT (`rx_hash_symmetric`: addresses and ports in a
//!   canonical order, so both directions of a flow hash alike).
//!
//! The Toeplitz hash is Microsoft's RSS hash; the unit tests check it against the verification
//! vectors of its specification.

use mlx5_ifc::consts::flow_action::{ALLOW, COUNT, DROP, FWD_DEST, MOD_HDR, PACKET_REFORMAT};
use mlx5_ifc::consts::match_criteria::{MISC_PARAMETERS, OUTER_HEADERS};
use mlx5_ifc::consts::rx_hash_field::{DST_IP, L4_DPORT, L4_SPORT, SRC_IP};
use mlx5_ifc::consts::{flow_dest_type, rx_hash_fn, tir_disp_type};
use mlx5_ifc::prm::flow::{CreateFlowGroupIn, FlowContext, FteMatchSetLyr24 as L24};
use mlx5_ifc::prm::flow::{DestFormatStruct as Dest, SetFteIn};
use mlx5_ifc::prm::flow_counter::FlowCounterList as CounterEntry;
use mlx5_ifc::prm::tir::{RqNum, Rqtc, RxHashFieldSelect as Sel, Tirc};
use mlx5_ifc::{Layout, View, ViewMut};

use super::ste::{self, Fate, Side, SteIcm, Target, STE_BYTES};
use super::ste_key::Meta;
use crate::fabric::packet::{Headers, L3};
use crate::model::icm_map::{self, IcmTarget};
use crate::model::objects::ObjectKind;
use crate::model::Model;

/// Bytes of the match image the device builds: outer headers and misc parameters.
pub(crate) const IMAGE_BYTES: usize = 2 * L24::BYTES;
/// Tables a lookup visits at most.
const MAX_HOPS: usize = 64;
/// How deep sampled copies nest at most (a sample table's frame meeting another sampler).
const MAX_SAMPLE_DEPTH: usize = 2;

/// Why steering dropped a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dropped {
    /// No root table for NIC receive.
    NoRoot,
    /// No entry matched and the table's miss drops.
    Miss,
    /// A matching entry's action is DROP (or a software-steering rule's, or the drop address a
    /// software-owned table's miss leads to).
    Action,
    /// A software-owned table's STE walk ended in an error (logged).
    SwSteering,
}

/// The table types steering walks: NIC receive (0) and NIC transmit (1), the index of their
/// root in [`Model::flow_root`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    Rx = 0,
    Tx = 1,
}

/// What steering does with a frame: the TIRs to deliver it to (receive), the matching entry's
/// flow tag, the counters it counts in, the reformat context to apply, or why it is dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Steered {
    pub(crate) tirs: Vec<u32>,
    pub(crate) flow_tag: u32,
    pub(crate) counters: Vec<u32>,
    pub(crate) reformat: Option<u32>,
    pub(crate) dropped: Option<Dropped>,
    /// The frame as software-steering actions rewrote it (VLAN pop or push, decapsulation,
    /// modify header), if they did.
    pub(crate) frame: Option<Vec<u8>>,
    /// Copies flow samplers took on the way, each steered through its sampler's sample table
    /// (their counters are in [`Steered::counters`]).
    pub(crate) sampled: Vec<Steered>,
}

/// The frame's match image (`fte_match_param`'s first two sections).
pub(crate) fn image(f: &[u8], h: &Headers) -> [u8; IMAGE_BYTES] {
    let mut img = [0u8; IMAGE_BYTES];
    let r = ViewMut::<L24>::new(&mut img[..L24::BYTES]).and_then(|mut v| {
        v.set(
            L24::DMAC_47_16,
            u32::from_be_bytes([f[0], f[1], f[2], f[3]]).into(),
        )?;
        v.set(L24::DMAC_15_0, u16::from_be_bytes([f[4], f[5]]).into())?;
        v.set(
            L24::SMAC_47_16,
            u32::from_be_bytes([f[6], f[7], f[8], f[9]]).into(),
        )?;
        v.set(L24::SMAC_15_0, u16::from_be_bytes([f[10], f[11]]).into())?;
        v.set(L24::ETHERTYPE, h.ethertype.into())?;
        if let Some((tpid, tci)) = h.vlan {
            let tag = if tpid == crate::fabric::packet::TPID_SVLAN {
                L24::SVLAN_TAG
            } else {
                L24::CVLAN_TAG
            };
            v.set(tag, 1)?;
            v.set(L24::FIRST_PRIO, (tci >> 13).into())?;
            v.set(L24::FIRST_CFI, ((tci >> 12) & 1).into())?;
            v.set(L24::FIRST_VID, (tci & 0xfff).into())?;
        }
        if h.l3 != L3::None {
            v.set(L24::IP_VERSION, if h.l3 == L3::V4 { 4 } else { 6 })?;
            v.set(L24::IP_PROTOCOL, h.proto.into())?;
            v.set(L24::IP_DSCP, (h.tos >> 2).into())?;
            v.set(L24::IP_ECN, (h.tos & 3).into())?;
            v.set(L24::FRAG, h.frag.into())?;
            v.set(L24::TTL_HOPLIMIT, h.ttl.into())?;
            v.set_bytes(L24::SRC_IPV4_SRC_IPV6, &h.src)?;
            v.set_bytes(L24::DST_IPV4_DST_IPV6, &h.dst)?;
        }
        if h.tcp() {
            v.set(L24::TCP_SPORT, h.sport.into())?;
            v.set(L24::TCP_DPORT, h.dport.into())?;
            v.set(L24::TCP_FLAGS, h.tcp_flags.into())?;
        } else if h.udp() {
            v.set(L24::UDP_SPORT, h.sport.into())?;
            v.set(L24::UDP_DPORT, h.dport.into())?;
        }
        Ok(())
    });
    if let Err(e) = r {
        log::error!("mlx5-sim: match image: {e}");
    }
    img
}

/// Whether `frame` matches `value` under `criteria` in the sections `enable` names.
fn matches(frame: &[u8], criteria: &[u8], value: &[u8], enable: u64) -> bool {
    [(OUTER_HEADERS, 0), (MISC_PARAMETERS, L24::BYTES)]
        .iter()
        .filter(|(bit, _)| enable & bit != 0)
        .all(|&(_, at)| {
            (at..at + L24::BYTES).all(|i| {
                let c = criteria.get(i).copied().unwrap_or(0);
                frame[i] & c == value.get(i).copied().unwrap_or(0) & c
            })
        })
}

/// One entry of a table: `(flow index, criteria enable, criteria, flow context + destinations)`.
type Entry = (u64, u64, Vec<u8>, Vec<u8>);

/// The live entries of `table`, by flow index.
fn entries(model: &Model, table: u32) -> Vec<Entry> {
    let ctx_at = SetFteIn::FLOW_CONTEXT.offset();
    let mut out: Vec<Entry> = model
        .objects
        .queues(ObjectKind::FlowEntry)
        .into_iter()
        .filter_map(|e| {
            let q = model.objects.queue(ObjectKind::FlowEntry, e)?;
            let v = View::<SetFteIn>::new(&q.ctx).ok()?;
            if v.get32(SetFteIn::TABLE_ID) != table {
                return None;
            }
            let gid = v
                .nested(SetFteIn::FLOW_CONTEXT)
                .get32(FlowContext::GROUP_ID);
            let g = model.objects.queue(ObjectKind::FlowGroup, gid)?;
            let gv = View::<CreateFlowGroupIn>::new(&g.ctx).ok()?;
            let crit_at = CreateFlowGroupIn::MATCH_CRITERIA.offset();
            Some((
                v.get(SetFteIn::FLOW_INDEX),
                gv.get(CreateFlowGroupIn::MATCH_CRITERIA_ENABLE),
                g.ctx.get(crit_at..crit_at + IMAGE_BYTES)?.to_vec(),
                q.ctx.get(ctx_at..)?.to_vec(),
            ))
        })
        .collect();
    out.sort_by_key(|e| e.0);
    out
}

/// A table's miss: the table it forwards to, or `None` (drop).
fn miss(model: &Model, table: u32) -> Option<u32> {
    use mlx5_ifc::prm::flow::{CreateFlowTableIn as T, FlowTableContext as Ftc};
    let q = model.objects.queue(ObjectKind::FlowTable, table)?;
    let c = View::<T>::new(&q.ctx).ok()?;
    let c = c.nested(T::FLOW_TABLE_CONTEXT);
    (c.get(Ftc::TABLE_MISS_ACTION) == 1).then(|| c.get32(Ftc::TABLE_MISS_ID))
}

/// Steering ICM as the STE walk reads it: the firmware's addresses, SW ICM, the header-modify
/// lists and the packet reformat contexts of the model.
struct ModelIcm<'a>(&'a Model);

impl SteIcm for ModelIcm<'_> {
    fn target(&self, side: Side, addr: u64) -> Target {
        match (icm_map::classify(self.0, addr), side) {
            (IcmTarget::SwIcm, _) => Target::Ste,
            (IcmTarget::RxDrop, Side::Rx) | (IcmTarget::TxDrop, Side::Tx) => Target::Drop,
            (IcmTarget::TxAllow, Side::Tx) => Target::Allow,
            (IcmTarget::Tir(n), Side::Rx) => Target::Tir(n),
            (IcmTarget::FlowTable(n), _) => Target::FlowTable(n),
            (IcmTarget::Sampler(n), Side::Rx) => Target::Sampler(n),
            _ => Target::Unknown,
        }
    }
    fn read_ste(&self, addr: u64, buf: &mut [u8; STE_BYTES]) -> bool {
        self.0.icm.read(addr, buf).is_ok()
    }
    fn read_actions(&self, index: u32, buf: &mut [u8]) -> bool {
        let (start, _) = self.0.icm.header_modify_region();
        self.0
            .icm
            .read(start + STE_BYTES as u64 * u64::from(index), buf)
            .is_ok()
    }
    fn encap(&self, id: u32, f: &[u8]) -> Option<Vec<u8>> {
        let q = self.0.objects.queue(ObjectKind::PacketReformat, id)?;
        Some(encapsulate(&q.ctx, f))
    }
}

/// Looks frame `f` up from the root of `dir`'s tables, by its match image. A matching entry
/// counts the frame in its counters (COUNT) and names a reformat (PACKET_REFORMAT), then: DROP
/// drops; ALLOW (or no FWD_DEST) goes on as a miss; FWD_DEST delivers to each TIR and goes on
/// to a flow table destination if it has one. A miss follows the table's miss table; at the
/// end, receive drops and transmit lets the frame go to the wire. A software-owned table
/// (`sw_owner`) is the STE walk from its root ([`ste::walk`]): it ends at a TIR, the drop or
/// allow address, or a firmware table whose entries are looked up next (with the frame as the
/// walk's actions left it), or a flow sampler: the frame goes on to its default table, and
/// when the sampler takes it a copy is steered from its sample table ([`Steered::sampled`]).
pub(crate) fn lookup(model: &mut Model, dir: Direction, f: &[u8], meta: &Meta) -> Steered {
    let mut out = Steered::default();
    if parsed(f).is_none() {
        out.dropped = (dir == Direction::Rx).then_some(Dropped::Miss);
        return out;
    }
    let Some(table) = model.flow_root[dir as usize] else {
        out.dropped = (dir == Direction::Rx).then_some(Dropped::NoRoot);
        return out;
    };
    from_table(model, dir, table, f, meta, 0)
}

/// The match image of frame `f`, if it parses.
fn parsed(f: &[u8]) -> Option<[u8; IMAGE_BYTES]> {
    crate::fabric::packet::parse(f).map(|h| image(f, &h))
}

/// [`lookup`] of frame `f` from flow table `table`; `depth` counts the samplers' copies it is
/// inside.
fn from_table(
    model: &mut Model,
    dir: Direction,
    mut table: u32,
    f: &[u8],
    meta: &Meta,
    depth: usize,
) -> Steered {
    let mut out = Steered::default();
    let Some(mut img) = parsed(f) else {
        out.dropped = (dir == Direction::Rx).then_some(Dropped::Miss);
        return out;
    };
    let end = |mut out: Steered| {
        out.dropped = (dir == Direction::Rx).then_some(Dropped::Miss);
        out
    };
    let value_at = FlowContext::MATCH_VALUE.offset();
    let dest_at = FlowContext::DESTINATION.offset();
    for _ in 0..MAX_HOPS {
        if let Some(root) = icm_map::sw_table_root(model, table) {
            let side = match dir {
                Direction::Rx => Side::Rx,
                Direction::Tx => Side::Tx,
            };
            let mut frame = out.frame.take().unwrap_or_else(|| f.to_vec());
            let mut m = *meta;
            let w = ste::walk(&ModelIcm(model), side, root, &mut frame, &mut m);
            out.counters.extend_from_slice(&w.counters);
            if let Some(tag) = w.flow_tag {
                out.flow_tag = tag;
            }
            if frame != f {
                out.frame = Some(frame);
            }
            match w.fate {
                Fate::Tir(n) => {
                    out.tirs.push(n);
                    return out;
                }
                Fate::Allow => return out,
                Fate::Drop => {
                    log::trace!(
                        "mlx5-sim: software steering from {root:#x} (table {table}): dropped after {} STEs",
                        w.hops
                    );
                    out.dropped = Some(Dropped::Action);
                    return out;
                }
                Fate::FlowTable(t) => {
                    table = t;
                    if let Some(i) = out.frame.as_deref().and_then(parsed) {
                        img = i;
                    }
                    continue;
                }
                Fate::Sampler(id) => {
                    let Some((sample, default, take)) = crate::model::sampler::meet(model, id)
                    else {
                        out.dropped = Some(Dropped::SwSteering);
                        return out;
                    };
                    if take && depth < MAX_SAMPLE_DEPTH {
                        let now = out.frame.clone().unwrap_or_else(|| f.to_vec());
                        let mut copy = from_table(model, dir, sample, &now, meta, depth + 1);
                        out.counters.append(&mut copy.counters);
                        if copy.frame.is_none() && now != f {
                            copy.frame = Some(now);
                        }
                        out.sampled.push(copy);
                    }
                    table = default;
                    if let Some(i) = out.frame.as_deref().and_then(parsed) {
                        img = i;
                    }
                    continue;
                }
                Fate::Error(e) => {
                    log::warn!("mlx5-sim: software steering from {root:#x} (table {table}): {e:?}; frame dropped");
                    out.dropped = Some(Dropped::SwSteering);
                    return out;
                }
            }
        }
        let hit = entries(model, table)
            .into_iter()
            .find(|(_, en, crit, ctx)| {
                matches(&img, crit, ctx.get(value_at..).unwrap_or(&[]), *en)
            });
        let Some((_, _, _, ctx)) = hit else {
            match miss(model, table) {
                Some(t) => table = t,
                None => return end(out),
            }
            continue;
        };
        let Ok(c) = View::<FlowContext>::new(&ctx) else {
            return end(out);
        };
        let action = c.get(FlowContext::ACTION);
        out.flow_tag = c.get32(FlowContext::FLOW_TAG);
        let n = c.get(FlowContext::DESTINATION_LIST_SIZE) as usize;
        let list = ctx.get(dest_at..).unwrap_or(&[]);
        if action & COUNT != 0 {
            let m = c.get(FlowContext::FLOW_COUNTER_LIST_SIZE) as usize;
            for e in list.chunks_exact(Dest::BYTES).skip(n).take(m) {
                if let Ok(e) = View::<CounterEntry>::new(e) {
                    out.counters.push(e.get32(CounterEntry::FLOW_COUNTER_ID));
                }
            }
        }
        if action & PACKET_REFORMAT != 0 {
            out.reformat = Some(c.get32(FlowContext::PACKET_REFORMAT_ID));
        }
        // MOD_HDR rewrites the frame; the tables after this one match it as rewritten.
        if action & MOD_HDR != 0 {
            let id = c.get32(FlowContext::MODIFY_HEADER_ID);
            if let Some(q) = model.objects.queue(ObjectKind::ModifyHeader, id) {
                let mut frame = out.frame.take().unwrap_or_else(|| f.to_vec());
                super::mod_hdr::apply(super::mod_hdr::actions(&q.ctx), &mut frame);
                if let Some(i) = parsed(&frame) {
                    img = i;
                }
                out.frame = Some(frame);
            }
        }
        if action & DROP != 0 {
            out.dropped = Some(Dropped::Action);
            return out;
        }
        if action & ALLOW != 0 || action & FWD_DEST == 0 {
            match miss(model, table) {
                Some(t) => table = t,
                None => return end(out),
            }
            continue;
        }
        let mut next = None;
        for d in list.chunks_exact(Dest::BYTES).take(n) {
            let Ok(d) = View::<Dest>::new(d) else {
                continue;
            };
            match d.get(Dest::DESTINATION_TYPE) {
                flow_dest_type::TIR => out.tirs.push(d.get32(Dest::DESTINATION_ID)),
                flow_dest_type::FLOW_TABLE => next = next.or(Some(d.get32(Dest::DESTINATION_ID))),
                _ => {}
            }
        }
        match next {
            Some(t) => table = t,
            None => return out,
        }
    }
    log::warn!("mlx5-sim: steering visited {MAX_HOPS} tables; frame dropped");
    out.dropped = Some(Dropped::Miss);
    out
}

/// Microsoft's RSS Toeplitz hash of `input` under `key` (at least `input.len() + 4` bytes).
pub(crate) fn toeplitz(key: &[u8], input: &[u8]) -> u32 {
    let bit = |i: usize| key.get(i / 8).is_some_and(|b| b & (0x80 >> (i % 8)) != 0);
    let mut window: u32 = (0..32).fold(0, |w, i| w << 1 | u32::from(bit(i)));
    let mut hash = 0;
    for (n, byte) in input.iter().enumerate() {
        for b in 0..8 {
            if byte & (0x80 >> b) != 0 {
                hash ^= window;
            }
            window = window << 1 | u32::from(bit(32 + n * 8 + b));
        }
    }
    hash
}

/// The RQ a TIR gives the frame, with the RSS hash and the CQE's `rss_hash_type`.
pub(crate) fn select_rq(model: &Model, tirn: u32, h: &Headers) -> Option<(u32, u32, u8)> {
    let q = model.objects.queue(ObjectKind::Tir, tirn)?;
    let c = View::<Tirc>::new(&q.ctx).ok()?;
    match c.get(Tirc::DISP_TYPE) {
        tir_disp_type::DIRECT => Some((c.get32(Tirc::INLINE_RQN), 0, 0)),
        tir_disp_type::INDIRECT => {
            let sel = c.nested(Tirc::RX_HASH_FIELD_SELECTOR_OUTER);
            let (input, ty) = hash_input(h, &sel, c.get(Tirc::RX_HASH_SYMMETRIC) == 1);
            let hash = match c.get(Tirc::RX_HASH_FN) {
                rx_hash_fn::TOEPLITZ => toeplitz(c.bytes(Tirc::RX_HASH_TOEPLITZ_KEY), &input),
                rx_hash_fn::INVERTED_XOR8 => u32::from(input.iter().fold(0u8, |a, b| a ^ b)),
                _ => 0,
            };
            let rqt = model
                .objects
                .queue(ObjectKind::Rqt, c.get32(Tirc::INDIRECT_TABLE))?;
            let r = View::<Rqtc>::new(&rqt.ctx).ok()?;
            let n = r.get(Rqtc::RQT_ACTUAL_SIZE).max(1) as usize;
            let at = Rqtc::BYTES + (hash as usize % n) * RqNum::BYTES;
            let e = View::<RqNum>::new(rqt.ctx.get(at..at + RqNum::BYTES)?).ok()?;
            Some((e.get32(RqNum::RQ_NUM), hash, ty))
        }
        _ => None,
    }
}

/// The bytes a TIR's selector hashes, and the CQE's `rss_hash_type` for them. Fields of a
/// protocol the frame does not have (IPv6 to an IPv4 selector, ports of a non-TCP/UDP frame)
/// are left out.
fn hash_input(h: &Headers, sel: &View<'_, Sel>, symmetric: bool) -> (Vec<u8>, u8) {
    let fields = sel.get(Sel::SELECTED_FIELDS);
    let want_v6 = sel.get(Sel::L3_PROT_TYPE) == 1;
    let want_udp = sel.get(Sel::L4_PROT_TYPE) == 1;
    let l3_ok = (h.l3 == L3::V6) == want_v6 && h.l3 != L3::None;
    let l4_ok = l3_ok && if want_udp { h.udp() } else { h.tcp() };
    let alen = if h.l3 == L3::V6 { 16 } else { 4 };
    let (mut src, mut dst) = (&h.src[16 - alen..], &h.dst[16 - alen..]);
    let (mut sp, mut dp) = (h.sport, h.dport);
    if symmetric && (src, sp) > (dst, dp) {
        std::mem::swap(&mut src, &mut dst);
        std::mem::swap(&mut sp, &mut dp);
    }
    let (l3_code, l4_code) = (if want_v6 { 2 } else { 1 }, if want_udp { 2 } else { 1 });
    let mut input = Vec::with_capacity(36);
    let mut ty = 0u8;
    if l3_ok && fields & SRC_IP != 0 {
        input.extend_from_slice(src);
        ty |= l3_code;
    }
    if l3_ok && fields & DST_IP != 0 {
        input.extend_from_slice(dst);
        ty |= l3_code << 2;
    }
    if l4_ok && fields & L4_SPORT != 0 {
        input.extend_from_slice(&sp.to_be_bytes());
        ty |= l4_code << 4;
    }
    if l4_ok && fields & L4_DPORT != 0 {
        input.extend_from_slice(&dp.to_be_bytes());
        ty |= l4_code << 6;
    }
    (input, ty)
}

/// What the NIC transmit tables do to frame `f` of a send queue: `None` drops it (DROP; the
/// WQE completes as sent), else the frame to put on the wire — reformatted if an entry says so.
/// Counters count the frame as it was sent. No transmit root: the frame as it is.
pub(crate) fn egress(model: &mut Model, f: Vec<u8>) -> Option<Vec<u8>> {
    if model.flow_root[Direction::Tx as usize].is_none() {
        return Some(f);
    }
    if crate::fabric::packet::parse(&f).is_none() {
        return Some(f);
    }
    let s = lookup(model, Direction::Tx, &f, &Meta::default());
    for &c in &s.counters {
        crate::model::flow_counter::count(model, c, f.len());
    }
    if s.dropped == Some(Dropped::SwSteering) {
        model.rt.counters.sw_steering_errors += 1;
    }
    if s.dropped.is_some() {
        return None;
    }
    let f = s.frame.unwrap_or(f);
    match s
        .reformat
        .and_then(|r| model.objects.queue(ObjectKind::PacketReformat, r))
    {
        Some(q) => Some(encapsulate(&q.ctx, &f)),
        None => Some(f),
    }
}

/// Bytes of an Ethernet header without a VLAN tag, of an IPv4 header without options, of UDP's.
const ETH: usize = 14;
const IPV4: usize = 20;

/// Frame `f` wrapped in `header` (an L2_TO_L2_TUNNEL context's): the header's IPv4 total length
/// and checksum and its UDP length set for the frame, when it has them.
/// L2_TO_L2_TUNNEL puts the header in front of the frame; where the header is Ethernet + IPv4
/// (+ UDP), the device writes the IPv4 total length and header checksum and the UDP length for
/// the frame it wraps (rdma-core's `test_tx_packet_reformat` leaves the IPv4 id, checksum and
/// the UDP source port to the device).
pub(crate) fn encapsulate(header: &[u8], f: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(header.len() + f.len());
    out.extend_from_slice(header);
    out.extend_from_slice(f);
    let ipv4 = header.len() >= ETH + IPV4 && header[12..14] == [0x08, 0x00] && header[ETH] == 0x45;
    if !ipv4 {
        return out;
    }
    let total = u16::try_from(out.len() - ETH).unwrap_or(u16::MAX);
    out[ETH + 2..ETH + 4].copy_from_slice(&total.to_be_bytes());
    if header[ETH + 9] == 17 && header.len() >= ETH + IPV4 + 8 {
        let udp = total.saturating_sub(IPV4 as u16);
        out[ETH + IPV4 + 4..ETH + IPV4 + 6].copy_from_slice(&udp.to_be_bytes());
    }
    out[ETH + 10..ETH + 12].copy_from_slice(&[0, 0]);
    let sum = crate::fabric::packet::checksum(&out[ETH..ETH + IPV4]);
    out[ETH + 10..ETH + 12].copy_from_slice(&sum.to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key of Microsoft's "Verifying the RSS Hash Calculation".
    const KEY: [u8; 40] = [
        0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f,
        0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30,
        0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
    ];

    fn v4(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> (Vec<u8>, Vec<u8>) {
        let ip = [src, dst].concat();
        let mut l4 = ip.clone();
        l4.extend_from_slice(&sport.to_be_bytes());
        l4.extend_from_slice(&dport.to_be_bytes());
        (ip, l4)
    }

    #[test]
    fn toeplitz_matches_the_published_ipv4_vectors() {
        // (source, destination, IPv4 hash, IPv4 with TCP hash)
        let cases = [
            (
                [66, 9, 149, 187],
                2794,
                [161, 142, 100, 80],
                1766,
                0x323e_8fc2,
                0x51cc_c178,
            ),
            (
                [199, 92, 111, 2],
                14230,
                [65, 69, 140, 83],
                4739,
                0xd718_262a,
                0xc626_b0ea,
            ),
            (
                [24, 19, 198, 95],
                12898,
                [12, 22, 207, 184],
                38024,
                0xd2d0_a5de,
                0x5c2b_394a,
            ),
            (
                [38, 27, 205, 30],
                48228,
                [209, 142, 163, 6],
                2217,
                0x8298_9176,
                0xafc7_327f,
            ),
            (
                [153, 39, 163, 191],
                44251,
                [202, 188, 127, 2],
                1303,
                0x5d18_09c5,
                0x10e8_28a2,
            ),
        ];
        for (src, sp, dst, dp, ip_hash, tcp_hash) in cases {
            let (ip, l4) = v4(src, dst, sp, dp);
            assert_eq!(toeplitz(&KEY, &ip), ip_hash, "{src:?} -> {dst:?}");
            assert_eq!(
                toeplitz(&KEY, &l4),
                tcp_hash,
                "{src:?}:{sp} -> {dst:?}:{dp}"
            );
        }
    }

    #[test]
    fn toeplitz_matches_the_published_ipv6_vectors() {
        // Source 3ffe:2501:200:1fff::7 :2794, destination 3ffe:2501:200:3::1 :1766.
        let src = [
            0x3f, 0xfe, 0x25, 0x01, 0x02, 0x00, 0x1f, 0xff, 0, 0, 0, 0, 0, 0, 0, 7,
        ];
        let dst = [
            0x3f, 0xfe, 0x25, 0x01, 0x02, 0x00, 0x00, 0x03, 0, 0, 0, 0, 0, 0, 0, 1,
        ];
        let mut input = [src, dst].concat();
        assert_eq!(toeplitz(&KEY, &input), 0x2cc1_8cd5);
        input.extend_from_slice(&2794u16.to_be_bytes());
        input.extend_from_slice(&1766u16.to_be_bytes());
        assert_eq!(toeplitz(&KEY, &input), 0x4020_7d3d);
    }

    #[test]
    fn a_criteria_byte_masks_the_frame_and_the_value() {
        let mut frame = [0u8; IMAGE_BYTES];
        let (mut crit, mut value) = (vec![0u8; IMAGE_BYTES], vec![0u8; IMAGE_BYTES]);
        frame[8] = 0xab;
        crit[8] = 0xf0;
        value[8] = 0xa0;
        assert!(matches(&frame, &crit, &value, OUTER_HEADERS));
        value[8] = 0xb0;
        assert!(!matches(&frame, &crit, &value, OUTER_HEADERS));
        assert!(
            matches(&frame, &crit, &value, MISC_PARAMETERS),
            "outer not enabled"
        );
    }

    #[test]
    fn the_outer_ipv4_and_udp_lengths_and_checksum_fit_the_frame() {
        // Ethernet, IPv4 (UDP, lengths and checksum 0), UDP, 8 bytes of VXLAN.
        let mut h = vec![0u8; 50];
        h[12..14].copy_from_slice(&[0x08, 0x00]);
        h[14] = 0x45;
        h[22] = 64;
        h[23] = 17;
        h[26..30].copy_from_slice(&[1, 1, 1, 1]);
        h[30..34].copy_from_slice(&[2, 2, 2, 2]);
        let inner = vec![0xab; 100];
        let f = encapsulate(&h, &inner);
        assert_eq!(f.len(), 150);
        assert_eq!(u16::from_be_bytes([f[16], f[17]]), 136, "IPv4 total length");
        assert_eq!(u16::from_be_bytes([f[38], f[39]]), 116, "UDP length");
        assert_eq!(
            crate::fabric::packet::checksum(&f[14..34]),
            0,
            "a valid checksum"
        );
        assert_eq!(&f[50..], &inner[..]);
    }
}
