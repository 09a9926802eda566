//! The STE walk on steering ICM laid out the way rdma-core's direct rules lay it out (STE format
//! v0): a table's start anchor that always hits into a matcher's hash table, a rule STE in the
//! slot its key hashes to, always-miss slots and an end anchor that miss to the drop address;
//! collision chains, actions, and the walks that must end in an error rather than a loop.

use std::collections::HashMap;

use mlx5_ifc::consts::ste_v0::{entry_type as et, lu_type as lu, modify_field as fc};
use mlx5_ifc::consts::ste_v0::{modify_op, tunneling_action, tx_action_type};
use mlx5_ifc::prm::ste::SteSxTransmit as Tx;
use mlx5_ifc::prm::ste::{DrActionHwSet as Set, SteModifyPacket as Mp, SteRxSteeringMult as Rx};
use mlx5_ifc::prm::ste_tag::SteEthL2Src as L2Src;
use mlx5_ifc::ViewMut;

use super::ste::{hash_index, walk, Fate, Side, SteIcm, Target, WalkError, MAX_HOPS, STE_BYTES};
use super::ste_key::{build, Meta};
use crate::fabric::packet;

const ICM: u64 = 0x40_0000_0000 - 0x100_0000; // 16 MiB of steering ICM below 2^38
const ICM_END: u64 = ICM + 0x100_0000;
const DROP: u64 = 0x10_0000_0040;
const ALLOW: u64 = 0x10_0000_0080;
const TIR5: u64 = 0x20_0000_0140;
const TIR6: u64 = 0x20_0000_0180;
const FT9: u64 = 0x30_0000_0000;

#[derive(Default)]
struct Fake {
    stes: HashMap<u64, [u8; STE_BYTES]>,
    actions: HashMap<u32, Vec<u8>>,
}

impl SteIcm for Fake {
    fn target(&self, _side: Side, addr: u64) -> Target {
        match addr {
            DROP => Target::Drop,
            ALLOW => Target::Allow,
            TIR5 => Target::Tir(5),
            TIR6 => Target::Tir(6),
            FT9 => Target::FlowTable(9),
            a if (ICM..ICM_END).contains(&a) => Target::Ste,
            _ => Target::Unknown,
        }
    }
    fn read_ste(&self, addr: u64, buf: &mut [u8; STE_BYTES]) -> bool {
        // Steering ICM never written reads as zeros, like fresh device memory.
        *buf = self.stes.get(&addr).copied().unwrap_or([0; STE_BYTES]);
        true
    }
    fn read_actions(&self, index: u32, buf: &mut [u8]) -> bool {
        match self.actions.get(&index) {
            Some(a) if a.len() >= buf.len() => {
                buf.copy_from_slice(&a[..buf.len()]);
                true
            }
            _ => false,
        }
    }
    fn encap(&self, _id: u32, _f: &[u8]) -> Option<Vec<u8>> {
        None
    }
}

/// An STE as software writes it.
struct Ste([u8; STE_BYTES]);

impl Ste {
    fn new(entry_type: u64, lu: u64) -> Ste {
        let mut s = Ste([0; STE_BYTES]);
        s.rx().set(Rx::ENTRY_TYPE, entry_type).unwrap();
        s.rx().set(Rx::ENTRY_SUB_TYPE, lu).unwrap();
        s
    }
    fn rx(&mut self) -> ViewMut<'_, Rx> {
        ViewMut::new(&mut self.0[..]).unwrap()
    }
    /// Hit: on to a table of `entries` at `addr`, hashed with `next_lu` and `byte_mask`.
    fn hit(mut self, addr: u64, entries: u64, next_lu: u64, byte_mask: u64) -> Ste {
        let index = (addr >> 5) | entries;
        let mut v = self.rx();
        v.set(Rx::NEXT_TABLE_BASE_39_32_SIZE, index >> 27).unwrap();
        v.set(Rx::NEXT_TABLE_BASE_31_5_SIZE, index & ((1 << 27) - 1))
            .unwrap();
        v.set(Rx::NEXT_LU_TYPE, next_lu).unwrap();
        v.set(Rx::BYTE_MASK, byte_mask).unwrap();
        self
    }
    fn to(self, addr: u64) -> Ste {
        self.hit(addr, 1, lu::DONT_CARE, 0)
    }
    fn miss(mut self, addr: u64) -> Ste {
        let index = addr >> 6;
        let mut v = self.rx();
        v.set(Rx::MISS_ADDRESS_39_32, index >> 26).unwrap();
        v.set(Rx::MISS_ADDRESS_31_6, index & ((1 << 26) - 1))
            .unwrap();
        self
    }
    /// Tag and mask: the source MAC, all ones.
    fn smac(mut self, mac: [u8; 6]) -> Ste {
        let m = mac.iter().fold(0u64, |a, &b| a << 8 | u64::from(b));
        for (at, value) in [(32, m), (48, 0xffff_ffff_ffff)] {
            let mut t = ViewMut::<L2Src>::new(&mut self.0[at..at + 16]).unwrap();
            t.set(L2Src::SMAC_47_16, value >> 16).unwrap();
            t.set(L2Src::SMAC_15_0, value & 0xffff).unwrap();
        }
        self
    }
    fn always_miss(self, addr: u64) -> Ste {
        let mut s = self.miss(addr);
        s.0[32] = 0xdc;
        s
    }
    fn flow_tag(mut self, tag: u64) -> Ste {
        self.rx().set(Rx::QP_LIST_POINTER, (1 << 31) | tag).unwrap();
        self
    }
    fn counter(mut self, id: u64) -> Ste {
        let mut v = self.rx();
        v.set(Rx::COUNTER_TRIGGER_15_0, id & 0xffff).unwrap();
        v.set(Rx::COUNTER_TRIGGER_23_16, id >> 16).unwrap();
        self
    }
}

const MAC_A: [u8; 6] = [0x24, 0x8a, 0x07, 0xa5, 0x28, 0xc8];
const MAC_B: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x01];

/// An Ethernet / IPv4 / UDP frame from `smac`, with an optional VLAN tag.
fn frame(smac: [u8; 6], vlan: Option<u16>) -> Vec<u8> {
    let mut f = vec![0x01, 0x50, 0x56, 0x19, 0x20, 0xa7];
    f.extend_from_slice(&smac);
    if let Some(tci) = vlan {
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&tci.to_be_bytes());
    }
    f.extend_from_slice(&[0x08, 0x00]);
    let ip = [
        0x45, 0, 0, 36, 0, 0, 0x40, 0, 64, 17, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2,
    ];
    f.extend_from_slice(&ip);
    f.extend_from_slice(&[0x04, 0xd2, 0x16, 0x2e, 0, 16, 0, 0]);
    f.extend_from_slice(b"payload!");
    let h = packet::parse(&f).unwrap();
    packet::fill_checksums(&mut f, &h, true, true);
    f
}

const START: u64 = ICM;
const TABLE: u64 = ICM + 0x1000; // 4 entries, aligned to their 256 bytes
const END: u64 = ICM + 0x2000;
const COLLISION: u64 = ICM + 0x3000;

/// The slot of table TABLE (4 entries) the source MAC of `f` hashes to.
fn slot(f: &[u8], byte_mask: u64) -> u64 {
    let key = build(lu::ETHL2_SRC_D, f, &Meta::default()).unwrap();
    hash_index(&key, byte_mask as u16, 4)
}

/// A NIC RX table as rdma-core writes it: anchor → matcher table of 4 → rule for MAC_A → TIR5
/// (flow tag 0x1234, counter 7); the other slots and the end anchor miss to DROP.
fn table() -> (Fake, u64) {
    let byte_mask = 0xfc00; // key bytes 0..5: the source MAC
    let mut icm = Fake::default();
    let f = frame(MAC_A, None);
    let idx = slot(&f, byte_mask);
    icm.stes.insert(
        START,
        Ste::new(et::RX, lu::DONT_CARE)
            .hit(TABLE, 4, lu::ETHL2_SRC_D, byte_mask)
            .0,
    );
    for i in 0..4 {
        let s = Ste::new(et::RX, lu::ETHL2_SRC_D).always_miss(END);
        icm.stes.insert(TABLE + 64 * i, s.0);
    }
    let rule = Ste::new(et::RX, lu::ETHL2_SRC_D)
        .smac(MAC_A)
        .flow_tag(0x1234)
        .counter(7)
        .to(TIR5)
        .miss(END);
    icm.stes.insert(TABLE + 64 * idx, rule.0);
    icm.stes
        .insert(END, Ste::new(et::RX, lu::DONT_CARE).always_miss(DROP).0);
    (icm, idx)
}

#[test]
fn a_matching_packet_reaches_its_tir_with_the_rule_s_tag_and_counter() {
    let (icm, _) = table();
    let mut f = frame(MAC_A, None);
    let before = f.clone();
    let w = walk(&icm, Side::Rx, START, &mut f, &mut Meta::default());
    assert_eq!(w.fate, Fate::Tir(5), "{w:?}");
    assert_eq!(
        (w.flow_tag, w.counters.as_slice(), w.hops),
        (Some(0x1234), &[7][..], 2)
    );
    assert_eq!(f, before, "no action rewrote it");
}

#[test]
fn a_packet_no_rule_matches_misses_to_the_end_anchor_and_the_drop_address() {
    let (icm, _) = table();
    let mut f = frame(MAC_B, None);
    let w = walk(&icm, Side::Rx, START, &mut f, &mut Meta::default());
    assert_eq!(w.fate, Fate::Drop, "{w:?}");
    assert_eq!((w.flow_tag, w.counters.len()), (None, 0));
    // Anchor, the slot (the rule or an always-miss one), then the end anchor.
    assert_eq!(w.hops, 3);
}

#[test]
fn a_collision_chain_is_followed_by_miss_addresses() {
    let (mut icm, idx) = table();
    // Another MAC that lands on the same slot: software chains it behind the rule.
    let other = (0u8..=255)
        .map(|b| [0x02, 0, 0, 0, 0x11, b])
        .find(|m| slot(&frame(*m, None), 0xfc00) == idx)
        .expect("some MAC shares the slot");
    let mut rule = icm.stes[&(TABLE + 64 * idx)];
    let relinked = {
        let mut s = Ste(rule);
        s = s.miss(COLLISION);
        s.0
    };
    rule.copy_from_slice(&relinked);
    icm.stes.insert(TABLE + 64 * idx, rule);
    let chained = Ste::new(et::RX, lu::ETHL2_SRC_D)
        .smac(other)
        .to(TIR6)
        .miss(END);
    icm.stes.insert(COLLISION, chained.0);
    let mut f = frame(other, None);
    let w = walk(&icm, Side::Rx, START, &mut f, &mut Meta::default());
    assert_eq!(
        (w.fate, w.hops, w.flow_tag),
        (Fate::Tir(6), 3, None),
        "{w:?}"
    );
    let mut f = frame(MAC_A, None);
    assert_eq!(
        walk(&icm, Side::Rx, START, &mut f, &mut Meta::default()).fate,
        Fate::Tir(5)
    );
}

#[test]
fn pop_vlan_and_a_modify_header_list_rewrite_the_packet() {
    let mut icm = Fake::default();
    // One always-hit modify-packet STE: pop the VLAN, then SET the source MAC and ADD -1 to
    // the TTL (as 0xff over 8 bits), with a NOP between (software pads like that).
    let mut s = Ste::new(et::MODIFY_PKT, lu::DONT_CARE).to(TIR5);
    {
        let mut v = ViewMut::<Mp>::new(&mut s.0[..]).unwrap();
        v.set(Mp::NUMBER_OF_RE_WRITE_ACTIONS, 3).unwrap();
        v.set(Mp::HEADER_RE_WRITE_ACTIONS_POINTER, 2).unwrap();
        v.set(Mp::TUNNELING_ACTION, tunneling_action::POP_VLAN)
            .unwrap();
    }
    icm.stes.insert(START, s.0);
    let mut list = vec![0u8; 24];
    let mut e = |at: usize, opcode, field, shift, len, data| {
        let mut a = ViewMut::<Set>::new(&mut list[at..at + 8]).unwrap();
        a.set(Set::OPCODE, opcode).unwrap();
        a.set(Set::DESTINATION_FIELD_CODE, field).unwrap();
        a.set(Set::DESTINATION_LEFT_SHIFTER, shift).unwrap();
        a.set(Set::DESTINATION_LENGTH, len).unwrap();
        a.set(Set::INLINE_DATA, data).unwrap();
    };
    e(0, modify_op::SET, fc::L2_1, 16, 0, 0x1122_3344); // smac bits 47:16
    e(16, modify_op::ADD, fc::L3_1, 8, 8, 0xff); // TTL - 1
    icm.actions.insert(2, list);
    let mut f = frame(MAC_A, Some(0x0064));
    let w = walk(&icm, Side::Rx, START, &mut f, &mut Meta::default());
    assert_eq!(w.fate, Fate::Tir(5), "{w:?}");
    assert_eq!(f.len(), frame(MAC_A, None).len(), "the tag is gone");
    assert_eq!(&f[6..12], &[0x11, 0x22, 0x33, 0x44, 0x28, 0xc8]);
    let h = packet::parse(&f).unwrap();
    assert_eq!(h.ttl, 63);
    assert!(
        packet::l3_ok(&f, &h) && packet::l4_ok(&f, &h),
        "checksums computed anew"
    );
}

#[test]
fn push_vlan_on_transmit_goes_to_the_wire_with_the_tag() {
    let mut icm = Fake::default();
    let mut s = Ste::new(et::TX, lu::DONT_CARE).to(ALLOW);
    {
        let mut v = ViewMut::<Tx>::new(&mut s.0[..]).unwrap();
        v.set(Tx::ACTION_TYPE, tx_action_type::PUSH_VLAN).unwrap();
        v.set(Tx::ENCAP_POINTER_VLAN_DATA, 0x8100_2005).unwrap();
    }
    icm.stes.insert(START, s.0);
    let mut f = frame(MAC_A, None);
    let w = walk(&icm, Side::Tx, START, &mut f, &mut Meta::default());
    assert_eq!(w.fate, Fate::Allow);
    assert_eq!(packet::parse(&f).unwrap().vlan, Some((0x8100, 0x2005)));
    // An RX entry in the transmit pipeline is refused.
    let mut f = frame(MAC_A, None);
    let (icm, _) = table();
    let w = walk(&icm, Side::Tx, START, &mut f, &mut Meta::default());
    assert!(
        matches!(w.fate, Fate::Error(WalkError::EntryType { .. })),
        "{w:?}"
    );
}

#[test]
fn loops_unknown_addresses_and_unmodelled_lookups_end_in_errors() {
    let mut icm = Fake::default();
    icm.stes
        .insert(START, Ste::new(et::RX, lu::DONT_CARE).to(START).0);
    let mut f = frame(MAC_A, None);
    let w = walk(&icm, Side::Rx, START, &mut f, &mut Meta::default());
    assert_eq!((w.fate, w.hops), (Fate::Error(WalkError::Hops), MAX_HOPS));
    icm.stes
        .insert(START, Ste::new(et::RX, lu::DONT_CARE).to(0x77_0000_0000).0);
    let w = walk(&icm, Side::Rx, START, &mut f, &mut Meta::default());
    assert_eq!(w.fate, Fate::Error(WalkError::Address(0x77_0000_0000)));
    // An MPLS lookup with a mask: not modelled, never matched on a made-up key.
    let mut s = Ste::new(et::RX, lu::MPLS_FIRST_D).to(TIR5);
    s.0[48] = 0xff;
    icm.stes.insert(START, s.0);
    let w = walk(&icm, Side::Rx, START, &mut f, &mut Meta::default());
    assert!(matches!(
        w.fate,
        Fate::Error(WalkError::Lookup {
            lu: lu::MPLS_FIRST_D,
            ..
        })
    ));
    // A walk into a firmware table ends there (its entries are the caller's).
    icm.stes
        .insert(START, Ste::new(et::RX, lu::DONT_CARE).to(FT9).0);
    assert_eq!(
        walk(&icm, Side::Rx, START, &mut f, &mut Meta::default()).fate,
        Fate::FlowTable(9)
    );
}

#[test]
fn lookup_type_0x0f_is_dont_care_without_a_mask_and_ipv6_source_with_one() {
    let mut icm = Fake::default();
    // tag 0 / mask 0: always hit.
    icm.stes
        .insert(START, Ste::new(et::TX, lu::DONT_CARE).to(ALLOW).0);
    let mut f = frame(MAC_A, None);
    assert_eq!(
        walk(&icm, Side::Tx, START, &mut f, &mut Meta::default()).fate,
        Fate::Allow
    );
    // With a mask it is the IPv6 source lookup: an IPv4 packet's key is zero there.
    let mut s = Ste::new(et::TX, lu::ETHL3_IPV6_SRC_O).to(ALLOW).miss(DROP);
    s.0[48..64].fill(0xff);
    s.0[47] = 1;
    icm.stes.insert(START, s.0);
    assert_eq!(
        walk(&icm, Side::Tx, START, &mut f, &mut Meta::default()).fate,
        Fate::Drop
    );
}

#[test]
fn an_l2_decap_leaves_the_inner_frame_and_refuses_what_is_no_tunnel() {
    let mut icm = Fake::default();
    let mut s = Ste::new(et::RX, lu::DONT_CARE).to(TIR5);
    s.rx()
        .set(Rx::TUNNELING_ACTION, tunneling_action::DECAP)
        .unwrap();
    icm.stes.insert(START, s.0);
    let inner = frame(MAC_A, None);
    // Outer Ethernet / IPv4 / UDP to 4789 / VXLAN (VNI 7) around it, and a trailer.
    let mut f = frame(MAC_B, None)[..14].to_vec();
    let total = (20 + 8 + 8 + inner.len()) as u16;
    let mut ip = vec![
        0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 9, 9, 9, 9, 8, 8, 8, 8,
    ];
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&[0xc0, 0x00, 0x12, 0xb5]);
    f.extend_from_slice(&(total - 20).to_be_bytes());
    f.extend_from_slice(&[0, 0, 0x08, 0, 0, 0, 0, 0, 7, 0]);
    f.extend_from_slice(&inner);
    f.extend_from_slice(&[0xee; 6]);
    let w = walk(&icm, Side::Rx, START, &mut f, &mut Meta::default());
    assert_eq!(w.fate, Fate::Tir(5), "{w:?}");
    assert_eq!(f, inner);
    // A plain frame is no tunnel: the walk ends in an error, the frame is not delivered.
    let mut f = frame(MAC_A, None);
    let w = walk(&icm, Side::Rx, START, &mut f, &mut Meta::default());
    assert!(
        matches!(w.fate, Fate::Error(WalkError::Action { .. })),
        "{w:?}"
    );
}
