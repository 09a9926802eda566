//! What a firmware modify header context (ALLOC_MODIFY_HEADER_CONTEXT, [`crate::fw::modify_header`])
//! does to a frame: its 8-byte actions (`set_action_in`, `add_action_in`, `copy_action_in`) over
//! the PRM's `MLX5_ACTION_IN_FIELD_OUT_*` fields, in order, then the IPv4 header checksum and the
//! TCP/UDP checksum computed anew when a field at or past the network header changed (a UDP
//! checksum of 0 over IPv4 stays 0: none was sent).
//!
//! These are the PRM's field ids, not software steering's hardware field codes
//! ([`super::ste_action`]): Linux and rdma-core hand them to the firmware, which maps them.
//! A field the frame does not have (a TCP port of a UDP datagram) is left alone.

use mlx5_ifc::prm::modify_header::{AddActionIn, CopyActionIn, SetActionIn};
use mlx5_ifc::View;

use crate::fabric::packet::{self, Headers, L3};

/// Bytes of one action.
pub(crate) const ACTION_BYTES: usize = 8;
/// `action_type`s (`MLX5_ACTION_TYPE_*`).
pub(crate) const SET: u64 = 1;
pub(crate) const ADD: u64 = 2;
pub(crate) const COPY: u64 = 3;

/// A context's actions (its image: the table type byte, then the actions).
pub(crate) fn actions(ctx: &[u8]) -> &[u8] {
    ctx.get(1..).unwrap_or(&[])
}

/// A context's table type.
pub(crate) fn table_type(ctx: &[u8]) -> u64 {
    ctx.first().copied().map_or(u64::MAX, u64::from)
}

/// The header a field is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layer {
    /// Ethernet, from the frame's start.
    Eth,
    /// The EtherType after the VLAN tags (two bytes before the network header).
    EtherType,
    V4,
    V6,
    /// IPv4 or IPv6 (DSCP: the IPv4 TOS byte or the IPv6 traffic class).
    Dscp,
    Tcp,
    Udp,
}

/// A field: `bytes` big-endian bytes at `at` in its header, the field `width` bits of them from
/// bit `shift` (LSB 0).
#[derive(Debug, Clone, Copy)]
struct Fld {
    layer: Layer,
    at: usize,
    bytes: usize,
    width: u32,
    shift: u32,
}

const fn f(layer: Layer, at: usize, bytes: usize, width: u32, shift: u32) -> Fld {
    Fld {
        layer,
        at,
        bytes,
        width,
        shift,
    }
}

/// The fields the device rewrites, by `MLX5_ACTION_IN_FIELD_OUT_*` id (Linux's mlx5_ifc.h).
fn field(id: u64) -> Option<Fld> {
    use Layer::*;
    Some(match id {
        0x1 => f(Eth, 6, 4, 32, 0),                                 // SMAC_47_16
        0x2 => f(Eth, 10, 2, 16, 0),                                // SMAC_15_0
        0x3 => f(EtherType, 0, 2, 16, 0),                           // ETHERTYPE
        0x4 => f(Eth, 0, 4, 32, 0),                                 // DMAC_47_16
        0x5 => f(Eth, 4, 2, 16, 0),                                 // DMAC_15_0
        0x6 => f(Dscp, 0, 2, 6, 0), // IP_DSCP (placed per IP version in `locate`)
        0x7 => f(Tcp, 12, 2, 9, 0), // TCP_FLAGS
        0x8 => f(Tcp, 0, 2, 16, 0), // TCP_SPORT
        0x9 => f(Tcp, 2, 2, 16, 0), // TCP_DPORT
        0xa => f(V4, 8, 1, 8, 0),   // IP_TTL
        0xb => f(Udp, 0, 2, 16, 0), // UDP_SPORT
        0xc => f(Udp, 2, 2, 16, 0), // UDP_DPORT
        0xd..=0x10 => f(V6, 8 + 4 * (id as usize - 0xd), 4, 32, 0), // SIPV6_127_96 .. _31_0
        0x11..=0x14 => f(V6, 24 + 4 * (id as usize - 0x11), 4, 32, 0), // DIPV6_127_96 .. _31_0
        0x15 => f(V4, 12, 4, 32, 0), // SIPV4
        0x16 => f(V4, 16, 4, 32, 0), // DIPV4
        0x47 => f(V6, 7, 1, 8, 0),  // IPV6_HOPLIMIT
        _ => return None,
    })
}

/// Bits a SET or COPY `length` names (0: 32).
fn bits(length: u64) -> u32 {
    if length == 0 {
        32
    } else {
        length as u32
    }
}

/// Whether one action is one the device takes: its type, its fields, offset + length within
/// each field.
pub(crate) fn valid(a: &[u8]) -> bool {
    let (Ok(s), Ok(c)) = (View::<SetActionIn>::new(a), View::<CopyActionIn>::new(a)) else {
        return false;
    };
    let within =
        |id: u64, offset: u64, len: u32| field(id).is_some_and(|f| offset as u32 + len <= f.width);
    match s.get(SetActionIn::ACTION_TYPE) {
        SET => within(
            s.get(SetActionIn::FIELD),
            s.get(SetActionIn::OFFSET),
            bits(s.get(SetActionIn::LENGTH)),
        ),
        ADD => field(s.get(SetActionIn::FIELD)).is_some(),
        COPY => {
            let len = bits(c.get(CopyActionIn::LENGTH));
            within(
                c.get(CopyActionIn::SRC_FIELD),
                c.get(CopyActionIn::SRC_OFFSET),
                len,
            ) && within(
                c.get(CopyActionIn::DST_FIELD),
                c.get(CopyActionIn::DST_OFFSET),
                len,
            )
        }
        _ => false,
    }
}

/// Where field `fl` is in frame `fr` with headers `h` (`None`: the frame has no such header):
/// the byte offset and the field as placed there.
fn locate(fl: Fld, fr: &[u8], h: &Headers) -> Option<(usize, Fld)> {
    let base = match (fl.layer, h.l3) {
        (Layer::Eth, _) => 0,
        (Layer::EtherType, _) => h.l3_at.checked_sub(2)?,
        (Layer::V4, L3::V4) | (Layer::V6, L3::V6) => h.l3_at,
        // IPv4: DSCP is the TOS byte's upper 6 bits; IPv6: bits 11..6 of the first 16 bits.
        (Layer::Dscp, L3::V4) => return Some((h.l3_at + 1, f(Layer::Dscp, 0, 1, 6, 2))),
        (Layer::Dscp, L3::V6) => return Some((h.l3_at, f(Layer::Dscp, 0, 2, 6, 6))),
        (Layer::Tcp, _) if h.tcp() && !h.frag => h.l4_at?,
        (Layer::Udp, _) if h.udp() && !h.frag => h.l4_at?,
        _ => return None,
    };
    let at = base + fl.at;
    (at + fl.bytes <= fr.len()).then_some((at, fl))
}

fn mask(width: u32) -> u64 {
    (1u64 << width) - 1
}

/// Field `id`'s value in `fr`, or `None` if the frame lacks its header.
fn read(fr: &[u8], h: &Headers, id: u64) -> Option<u64> {
    let (at, fl) = locate(field(id)?, fr, h)?;
    let raw = fr[at..at + fl.bytes]
        .iter()
        .fold(0u64, |v, &b| (v << 8) | u64::from(b));
    Some((raw >> fl.shift) & mask(fl.width))
}

/// Writes `value` into field `id` of `fr` (nothing if the frame lacks its header).
fn write(fr: &mut [u8], h: &Headers, id: u64, value: u64) {
    let Some((at, fl)) = field(id).and_then(|fl| locate(fl, fr, h)) else {
        return;
    };
    let raw = fr[at..at + fl.bytes]
        .iter()
        .fold(0u64, |v, &b| (v << 8) | u64::from(b));
    let m = mask(fl.width) << fl.shift;
    let raw = (raw & !m) | ((value << fl.shift) & m);
    for (i, b) in fr[at..at + fl.bytes].iter_mut().enumerate() {
        *b = (raw >> (8 * (fl.bytes - 1 - i))) as u8;
    }
}

/// `len` bits of field `id` from bit `offset` set to `data`'s low bits.
fn put_bits(fr: &mut [u8], h: &Headers, id: u64, offset: u32, len: u32, data: u64) {
    if let Some(v) = read(fr, h, id) {
        let m = mask(len) << offset;
        write(fr, h, id, (v & !m) | ((data << offset) & m));
    }
}

/// Applies the actions of `list` (8 bytes each, checked at ALLOC by [`valid`]) to frame `fr`,
/// then recomputes the checksums the rewrite touched.
pub(crate) fn apply(list: &[u8], fr: &mut [u8]) {
    let Some(h) = packet::parse(fr) else {
        return;
    };
    let before = fr.to_vec();
    for a in list.chunks_exact(ACTION_BYTES) {
        let (Ok(s), Ok(ad), Ok(c)) = (
            View::<SetActionIn>::new(a),
            View::<AddActionIn>::new(a),
            View::<CopyActionIn>::new(a),
        ) else {
            continue;
        };
        match s.get(SetActionIn::ACTION_TYPE) {
            SET => put_bits(
                fr,
                &h,
                s.get(SetActionIn::FIELD),
                s.get(SetActionIn::OFFSET) as u32,
                bits(s.get(SetActionIn::LENGTH)),
                s.get(SetActionIn::DATA),
            ),
            ADD => {
                let id = ad.get(AddActionIn::FIELD);
                if let (Some(v), Some(fl)) = (read(fr, &h, id), field(id)) {
                    let sum = v.wrapping_add(ad.get(AddActionIn::DATA)) & mask(fl.width);
                    write(fr, &h, id, sum);
                }
            }
            COPY => {
                let len = bits(c.get(CopyActionIn::LENGTH));
                let src = c.get(CopyActionIn::SRC_FIELD);
                if let Some(v) = read(fr, &h, src) {
                    let v = (v >> c.get(CopyActionIn::SRC_OFFSET)) & mask(len);
                    put_bits(
                        fr,
                        &h,
                        c.get(CopyActionIn::DST_FIELD),
                        c.get(CopyActionIn::DST_OFFSET) as u32,
                        len,
                        v,
                    );
                }
            }
            _ => {}
        }
    }
    // Only a rewrite at or past the network header changes a checksum; a frame whose L2
    // header alone changed keeps the checksums it came with.
    if h.l3 == L3::None || fr.get(h.l3_at..) == before.get(h.l3_at..) {
        return;
    }
    // The headers as rewritten (an EtherType rewrite may leave none to checksum).
    let Some(h) = packet::parse(fr) else {
        return;
    };
    let l3 = h.l3 == L3::V4 && h.l3_at + h.l3_len <= fr.len();
    let udp_none = h.udp()
        && h.l3 == L3::V4
        && h.l4_at
            .is_some_and(|at| fr.get(at + 6..at + 8) == Some(&[0, 0][..]));
    let l4 = h.l4_at.is_some() && !h.frag && !h.short && h.ip_end <= fr.len() && !udp_none;
    packet::fill_checksums(fr, &h, l3, l4);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(field: u64, offset: u64, length: u64, data: u32) -> [u8; 8] {
        let w = (SET << 28) | (field << 16) | (offset << 8) | length;
        let mut a = [0u8; 8];
        a[..4].copy_from_slice(&(w as u32).to_be_bytes());
        a[4..].copy_from_slice(&data.to_be_bytes());
        a
    }

    #[test]
    fn set_smac_and_validate() {
        assert!(valid(&set(1, 0, 0, 0x8888_8888)));
        assert!(valid(&set(2, 0, 16, 0x8888)));
        assert!(!valid(&set(2, 0, 0, 0x8888)), "32 bits of a 16-bit field");
        assert!(!valid(&set(2, 8, 16, 0)));
        assert!(!valid(&set(0x17, 0, 16, 0)), "FIRST_VID is not offered");
        let mut fr = vec![0u8; 60];
        fr[12..14].copy_from_slice(&[0x88, 0xb5]);
        let mut list = set(1, 0, 0, 0x8888_8888).to_vec();
        list.extend_from_slice(&set(2, 0, 16, 0x8888));
        apply(&list, &mut fr);
        assert_eq!(fr[6..12], [0x88; 6]);
    }
}
