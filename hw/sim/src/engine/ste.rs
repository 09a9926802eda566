//! Software steering (STE format v0, a ConnectX-5): the walk of steering entries that software
//! wrote into steering ICM (rdma-core's mlx5dv direct rules, by RDMA WRITE through an SW ICM
//! key), from the root address of an `sw_owner` flow table to the packet's fate.
//!
//! An STE is 64 bytes: 32 of control (entry type, lookup type, the next table's hash byte mask
//! and lookup type, the hit pointer, the miss address, the actions), a 16-byte tag at byte 32
//! and a 16-byte mask at byte 48. The walk, from one STE:
//! * **match**: the key of the STE's lookup type ([`super::ste_key`]) masked equals the tag
//!   (an all-zero mask needs no key: the STE hits when its tag is all zero — anchors and action
//!   STEs — and misses otherwise — the "always miss" entries, tag byte 0 0xdc);
//! * **miss**: on to the single STE at the miss address (collision chains, the matcher's end
//!   anchor); no action of a missed STE runs;
//! * **hit**: the STE's actions run (counter, VLAN pop / push, modify-header list, flow tag,
//!   [`super::ste_action`]), then the hit pointer `(address >> 5) | entries` is decoded (its
//!   lowest set bit is the next table's entry count); in a table of more than one entry the
//!   entry is `bswap32(crc32(masked key)) mod entries`, the key of the STE's `next_lu_type` with
//!   the bytes its `byte_mask` leaves out zeroed, and the CRC the reflected 0xedb88320 from 0
//!   without a final XOR.
//!
//! The walk ends at an address the firmware handed out ([`Target`]): the drop address, the
//! transmit allow address (the wire), a TIR, or a firmware flow table (whose entries the
//! caller looks up). Only address bits 39:5 are compared (the STE carries no more; bits 63:48
//! travel as a gvmi). An address that is none of these nor steering ICM, an unreadable STE, a
//! lookup or action this model does not have, and more than [`MAX_HOPS`] STEs end the walk in
//! [`Fate::Error`]: the packet is dropped and the reason kept for the accounts.

use mlx5_ifc::consts::ste_v0::{
    self, entry_type as et, tunneling_action as tun, tx_action_type as tx,
};
use mlx5_ifc::prm::ste::{SteModifyPacket as Mp, SteRxSteeringMult as Rx, SteSxTransmit as Tx};
use mlx5_ifc::{Layout, View};

use super::ste_action::{self, ActionError, ACTION_BYTES};
use super::ste_key::{self, KeyError, Meta, KEY_BYTES};

/// Bytes of an STE.
pub(crate) const STE_BYTES: usize = ste_v0::SIZE;
const TAG_AT: usize = ste_v0::TAG_OFFSET;
const MASK_AT: usize = ste_v0::MASK_OFFSET;
/// STEs a walk reads at most (a loop of hit pointers is software's mistake; it must not hang
/// the device).
pub(crate) const MAX_HOPS: usize = 4096;
/// Modify-header entries one STE may name at most (rdma-core's lists stay far below it).
const MAX_ACTIONS: usize = 512;

/// Which pipeline the walk runs in: STEs of the other side's entry type are an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Rx,
    Tx,
}

/// What an ICM address is, as the firmware knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// Steering ICM of a live SW ICM object: an STE to read.
    Ste,
    /// The drop address of the side.
    Drop,
    /// The transmit allow address: on to the wire.
    Allow,
    /// A TIR's ICM address.
    Tir(u32),
    /// The root of a firmware-owned flow table.
    FlowTable(u32),
    /// A flow sampler's address.
    Sampler(u32),
    /// Nothing the firmware handed out.
    Unknown,
}

/// The device state a walk reads.
pub(crate) trait SteIcm {
    /// What `addr` (bits 39:0; 64-byte aligned) is.
    fn target(&self, side: Side, addr: u64) -> Target;
    /// Reads steering ICM.
    fn read_ste(&self, addr: u64, buf: &mut [u8; STE_BYTES]) -> bool;
    /// Reads `buf.len()` bytes of the modify-header action list at `index` (64-byte units from
    /// `header_modify_sw_icm_start_address`).
    fn read_actions(&self, index: u32, buf: &mut [u8]) -> bool;
    /// Frame `f` encapsulated with the header of packet reformat context `id` (`None`: no
    /// such context).
    fn encap(&self, id: u32, f: &[u8]) -> Option<Vec<u8>>;
}

/// Why a walk ended in an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WalkError {
    /// An address that is neither steering ICM nor a firmware object's.
    Address(u64),
    /// Steering ICM that could not be read (no live SW ICM object there).
    Unreadable(u64),
    /// An STE whose entry type is not the side's (or modify-packet).
    EntryType { addr: u64, entry_type: u64 },
    /// A lookup type this model does not build keys for.
    Lookup { addr: u64, lu: u64 },
    /// A modify-header entry or an action this model does not run.
    Action { addr: u64, err: ActionError },
    /// More than [`MAX_HOPS`] STEs.
    Hops,
}

/// How a walk ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fate {
    Drop,
    /// Transmit: to the wire.
    Allow,
    Tir(u32),
    FlowTable(u32),
    /// A flow sampler: the frame goes on to its default table, now and then a copy to its
    /// sample table.
    Sampler(u32),
    Error(WalkError),
}

/// A walk's result: the fate and what the actions on the way recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Walk {
    pub(crate) fate: Fate,
    /// The flow tag of the last STE that set one.
    pub(crate) flow_tag: Option<u32>,
    /// Flow counters to count the packet in (in the order met).
    pub(crate) counters: Vec<u32>,
    /// STEs read.
    pub(crate) hops: usize,
}

/// Address bits the STE carries.
const ADDR_MASK: u64 = (1 << 40) - 1;

/// The hit pointer of an STE: `(address, entries)`, `None` when it is zero.
fn hit_pointer(v: &View<'_, Rx>) -> Option<(u64, u64)> {
    let hi = v.get(Rx::NEXT_TABLE_BASE_39_32_SIZE);
    let lo = v.get(Rx::NEXT_TABLE_BASE_31_5_SIZE);
    let index = hi << 27 | lo;
    if index == 0 {
        return None;
    }
    let entries = index & index.wrapping_neg();
    Some(((index & !entries) << 5, entries))
}

/// The miss address of an STE (the same place in every entry type).
fn miss_address(v: &View<'_, Rx>) -> u64 {
    (v.get(Rx::MISS_ADDRESS_39_32) << 26 | v.get(Rx::MISS_ADDRESS_31_6)) << 6
}

/// CRC-32 (reflected 0xedb88320), from 0, no final XOR — the hash of v0 hash tables.
pub(crate) fn crc32(data: &[u8]) -> u32 {
    let mut c = 0u32;
    for &b in data {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = (c >> 1) ^ if c & 1 != 0 { 0xedb8_8320 } else { 0 };
        }
    }
    c
}

/// The entry of a table of `entries` a key lands on, with the hash byte mask of the STE that
/// points there (bit 15 is key byte 0).
pub(crate) fn hash_index(key: &[u8; KEY_BYTES], byte_mask: u16, entries: u64) -> u64 {
    let mut m = [0u8; KEY_BYTES];
    for (i, b) in m.iter_mut().enumerate() {
        if byte_mask & (1 << (15 - i)) != 0 {
            *b = key[i];
        }
    }
    u64::from(crc32(&m).swap_bytes()) % entries.max(1)
}

/// Whether an STE's tag matches the packet.
fn matches(ste: &[u8; STE_BYTES], lu: u64, f: &[u8], meta: &Meta) -> Result<bool, KeyError> {
    let tag = &ste[TAG_AT..MASK_AT];
    let mask = &ste[MASK_AT..STE_BYTES];
    if mask.iter().all(|&b| b == 0) {
        return Ok(tag.iter().all(|&b| b == 0));
    }
    let key = ste_key::build(lu, f, meta)?;
    Ok(key.iter().zip(mask).zip(tag).all(|((k, m), t)| k & m == *t))
}

/// Walks from `start` (the root of an `sw_owner` flow table, or any STE address) with frame
/// `f` (rewritten by the actions on the way) and its metadata.
pub(crate) fn walk(
    icm: &impl SteIcm,
    side: Side,
    start: u64,
    f: &mut Vec<u8>,
    meta: &mut Meta,
) -> Walk {
    let mut w = Walk {
        fate: Fate::Drop,
        flow_tag: None,
        counters: Vec::new(),
        hops: 0,
    };
    let mut cur = start & ADDR_MASK;
    w.fate = loop {
        match icm.target(side, cur) {
            Target::Ste => {}
            Target::Drop => break Fate::Drop,
            Target::Allow => break Fate::Allow,
            Target::Tir(n) => break Fate::Tir(n),
            Target::FlowTable(n) => break Fate::FlowTable(n),
            Target::Sampler(n) => break Fate::Sampler(n),
            Target::Unknown => break Fate::Error(WalkError::Address(cur)),
        }
        if w.hops >= MAX_HOPS {
            break Fate::Error(WalkError::Hops);
        }
        w.hops += 1;
        let mut ste = [0u8; STE_BYTES];
        if !icm.read_ste(cur, &mut ste) {
            break Fate::Error(WalkError::Unreadable(cur));
        }
        let Ok(v) = View::<Rx>::new(&ste) else {
            break Fate::Error(WalkError::Unreadable(cur));
        };
        let entry_type = v.get(Rx::ENTRY_TYPE);
        let side_type = match side {
            Side::Rx => et::RX,
            Side::Tx => et::TX,
        };
        if entry_type != side_type && entry_type != et::MODIFY_PKT {
            break Fate::Error(WalkError::EntryType {
                addr: cur,
                entry_type,
            });
        }
        let lu = v.get(Rx::ENTRY_SUB_TYPE);
        match matches(&ste, lu, f, meta) {
            Ok(true) => {}
            Ok(false) => {
                cur = miss_address(&v) & ADDR_MASK;
                continue;
            }
            Err(KeyError::Unsupported(lu)) => {
                break Fate::Error(WalkError::Lookup { addr: cur, lu });
            }
        }
        if let Err(err) = act(icm, &ste, entry_type, side, f, meta, &mut w) {
            break Fate::Error(WalkError::Action { addr: cur, err });
        }
        let Some((base, entries)) = hit_pointer(&v) else {
            // A hit with no pointer leads nowhere: software never writes one.
            break Fate::Error(WalkError::Address(0));
        };
        let base = base & ADDR_MASK;
        let byte_mask = v.get(Rx::BYTE_MASK) as u16;
        if entries <= 1 || byte_mask == 0 || icm.target(side, base) != Target::Ste {
            cur = base;
            continue;
        }
        let next_lu = v.get(Rx::NEXT_LU_TYPE);
        match ste_key::build(next_lu, f, meta) {
            Ok(key) => cur = base + STE_BYTES as u64 * hash_index(&key, byte_mask, entries),
            Err(KeyError::Unsupported(lu)) => {
                break Fate::Error(WalkError::Lookup { addr: cur, lu });
            }
        }
    };
    w
}

/// Runs the actions of an STE that hit.
fn act(
    icm: &impl SteIcm,
    ste: &[u8; STE_BYTES],
    entry_type: u64,
    side: Side,
    f: &mut Vec<u8>,
    meta: &mut Meta,
    w: &mut Walk,
) -> Result<(), ActionError> {
    let rx = View::<Rx>::new(ste).map_err(|_| ActionError::Opcode(0))?;
    let counter = rx.get(Rx::COUNTER_TRIGGER_23_16) << 16 | rx.get(Rx::COUNTER_TRIGGER_15_0);
    if counter != 0 {
        w.counters.push(counter as u32);
    }
    if entry_type == et::TX {
        let t = View::<Tx>::new(ste).map_err(|_| ActionError::Opcode(0))?;
        let data = t.get(Tx::ENCAP_POINTER_VLAN_DATA) as u32;
        match t.get(Tx::ACTION_TYPE) {
            tx::NONE => {}
            tx::PUSH_VLAN => ste_action::push_vlan(f, data),
            tx::ENCAP => match icm.encap(data, f) {
                Some(framed) => *f = framed,
                None => return Err(ActionError::Field(0)),
            },
            other => return Err(ActionError::Opcode(other)),
        }
        return Ok(());
    }
    let tunneling = rx.get(Rx::TUNNELING_ACTION);
    match tunneling {
        tun::NONE => {}
        tun::POP_VLAN => ste_action::pop_vlan(f),
        tun::DECAP => ste_action::decap_l2(f)?,
        other => return Err(ActionError::Opcode(other)),
    }
    if entry_type == et::MODIFY_PKT {
        let m = View::<Mp>::new(ste).map_err(|_| ActionError::Opcode(0))?;
        let n = (m.get(Mp::NUMBER_OF_RE_WRITE_ACTIONS) as usize).min(MAX_ACTIONS);
        let index = m.get(Mp::HEADER_RE_WRITE_ACTIONS_POINTER) as u32;
        let mut list = vec![0u8; n * ACTION_BYTES];
        if !icm.read_actions(index, &mut list) {
            return Err(ActionError::Field(0));
        }
        ste_action::modify(&list, f, meta)?;
    } else if side == Side::Rx {
        let q = rx.get(Rx::QP_LIST_POINTER);
        if q & ste_v0::FLOW_TAG_VALID != 0 {
            w.flow_tag = Some((q & 0xff_ffff) as u32);
        }
    }
    debug_assert_eq!(Rx::BYTES, STE_BYTES / 2);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crc_is_the_one_software_hashes_with() {
        // Vectors computed with rdma-core's own CRC code and a bytewise reference.
        let seq: Vec<u8> = (0..16).collect();
        let key = |b: &[u8]| {
            let mut k = [0u8; KEY_BYTES];
            k[..b.len()].copy_from_slice(b);
            k
        };
        assert_eq!(crc32(&[0; 16]).swap_bytes(), 0);
        assert_eq!(crc32(&seq).swap_bytes(), 0xdda9_7522);
        assert_eq!(hash_index(&key(&seq), 0xffff, 16), 2);
        assert_eq!(hash_index(&key(&seq), 0xffff, 1024), 290);
        let dmac = key(&[0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x12, 0x34]);
        // byte_mask 0xfc00: the six MAC bytes; the rest is zeroed before hashing.
        assert_eq!(hash_index(&dmac, 0xfc00, 16), 1);
        assert_eq!(hash_index(&dmac, 0xfc00, 1024), 81);
    }
}
