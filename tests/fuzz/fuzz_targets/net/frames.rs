//! What the network fuzz targets (`eth_frames`, `external_port`) share: the input cut into
//! Ethernet frames, and the fix-ups the input may ask for so that mutated frames still get past
//! the checks a fuzzer cannot solve by itself (lengths, Internet checksums, RoCE's ICRC).
//!
//! The input is a sequence of records, each a 4-byte header and bytes:
//!
//! ```text
//! ctl: u8   what to do with the frame (bits below; the targets give bits 3-7 their own meaning)
//! pad: u8   pad × the target's unit of zero bytes appended (jumbo frames from a short input)
//! len: u16  big-endian: bytes of the frame taken from the input (fewer if the input ends)
//! ```
//!
//! Fix-ups, in this order: [`FIX_LEN`] sets the IPv4 total length, IPv6 payload length and UDP
//! length to what the frame holds; [`FIX_ICRC`] recomputes the ICRC of a RoCE v1 or v2 packet;
//! [`FIX_CSUM`] the IPv4 header checksum and the TCP, UDP, ICMP or ICMPv6 checksum.
#![allow(dead_code)]

/// Set IP and UDP lengths to the frame's.
pub const FIX_LEN: u8 = 0x01;
/// Set the IPv4 header checksum and the L4 checksum.
pub const FIX_CSUM: u8 = 0x02;
/// Set the ICRC of a RoCE frame.
pub const FIX_ICRC: u8 = 0x04;

/// Records a target takes from one input at most.
pub const MAX_RECORDS: usize = 32;

/// One frame of the input.
#[derive(Debug)]
pub struct Record {
    pub ctl: u8,
    pub pad: u8,
    pub frame: Vec<u8>,
}

/// The records of `data`; `unit` bytes of padding per `pad`, frames capped at `max` bytes.
pub fn records(data: &[u8], unit: usize, max: usize) -> Vec<Record> {
    let mut out = Vec::new();
    let mut rest = data;
    while rest.len() >= 4 && out.len() < MAX_RECORDS {
        let (ctl, pad) = (rest[0], rest[1]);
        let n = usize::from(u16::from_be_bytes([rest[2], rest[3]])).min(rest.len() - 4);
        let mut frame = rest[4..4 + n].to_vec();
        rest = &rest[4 + n..];
        frame.resize((n + usize::from(pad) * unit).min(max), 0);
        out.push(Record { ctl, pad, frame });
    }
    out
}

/// Writes a record (the inverse of [`records`], for seeds and tests).
pub fn record(out: &mut Vec<u8>, ctl: u8, pad: u8, frame: &[u8]) {
    out.extend_from_slice(&[ctl, pad]);
    out.extend_from_slice(&(frame.len() as u16).to_be_bytes());
    out.extend_from_slice(frame);
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// The offset of the L3 header and the ethertype after up to two VLAN tags.
pub fn l2(f: &[u8]) -> Option<(usize, u16)> {
    let mut at = 12;
    let mut et = be16(f.get(..14)?, 12);
    for _ in 0..2 {
        if (et == 0x8100 || et == 0x88a8) && f.len() >= at + 6 {
            at += 4;
            et = be16(f, at);
        }
    }
    Some((at + 2, et))
}

/// The ones'-complement sum of `b` onto `s`, not folded.
pub fn sum(b: &[u8], mut s: u64) -> u64 {
    let mut c = b.chunks_exact(2);
    for w in &mut c {
        s += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = c.remainder() {
        s += u64::from(*last) << 8;
    }
    s
}

pub fn fold(mut s: u64) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// Applies the fix-ups `ctl` asks for.
pub fn fix(f: &mut [u8], ctl: u8) {
    if ctl & FIX_LEN != 0 {
        fix_len(f);
    }
    if ctl & FIX_ICRC != 0 {
        fix_icrc(f);
    }
    if ctl & FIX_CSUM != 0 {
        fix_csum(f);
    }
}

fn fix_len(f: &mut [u8]) {
    let Some((l3, et)) = l2(f) else { return };
    let (ip_len, hlen, proto) = match et {
        0x0800 if f.len() >= l3 + 20 => {
            let n = (f.len() - l3).min(0xffff);
            put16(f, l3 + 2, n as u16);
            (n, usize::from(f[l3] & 0xf) * 4, f[l3 + 9])
        }
        0x86dd | 0x8915 if f.len() >= l3 + 40 => {
            let n = (f.len() - l3 - 40).min(0xffff);
            put16(f, l3 + 4, n as u16);
            (n + 40, 40, f[l3 + 6])
        }
        _ => return,
    };
    if proto == 17 && hlen >= 20 && ip_len >= hlen + 8 {
        put16(f, l3 + hlen + 4, (ip_len - hlen).min(0xffff) as u16);
    }
}

/// CRC-32 (IEEE 802.3, reflected): the ICRC's, bit by bit (frames are short).
pub fn crc32(init: u32, bytes: &[u8]) -> u32 {
    let mut c = !init;
    for &b in bytes {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = (c >> 1) ^ (0xedb8_8320 & (c & 1).wrapping_neg());
        }
    }
    !c
}

/// The ICRC of a RoCE packet `pkt` (from the L3 header up to the ICRC): eight bytes of ones
/// (the masked LRH), then the packet with its variant fields (IPv4 TOS, TTL and checksum; IPv6
/// or GRH traffic class, flow label, hop limit; the UDP checksum; the BTH's resv8a) as ones.
pub fn icrc(pkt: &[u8], ipv4: bool, udp: bool) -> u32 {
    let l3 = if ipv4 { 20 } else { 40 };
    let mut masks: Vec<(usize, u8)> = if ipv4 {
        vec![(1, 0xff), (8, 0xff), (10, 0xff), (11, 0xff)]
    } else {
        vec![(0, 0x0f), (1, 0xff), (2, 0xff), (3, 0xff), (7, 0xff)]
    };
    if udp {
        masks.extend([(l3 + 6, 0xff), (l3 + 7, 0xff)]);
    }
    masks.push((l3 + if udp { 8 } else { 0 } + 4, 0xff));
    let mut p = pkt.to_vec();
    for (at, m) in masks {
        if let Some(b) = p.get_mut(at) {
            *b |= m;
        }
    }
    crc32(crc32(0, &[0xff; 8]), &p)
}

/// Recomputes the ICRC of a RoCE v1 frame (ethertype 0x8915, a GRH) or v2 (UDP to 4791 over
/// IPv4 or IPv6): the four bytes before the IP datagram's declared end.
fn fix_icrc(f: &mut [u8]) {
    let Some((l3, et)) = l2(f) else { return };
    let (ipv4, udp, end) = match et {
        0x8915 if f.len() >= l3 + 40 => (false, false, l3 + 40 + usize::from(be16(f, l3 + 4))),
        0x86dd if f.len() >= l3 + 48 && f[l3 + 6] == 17 && be16(f, l3 + 42) == 4791 => {
            (false, true, l3 + 40 + usize::from(be16(f, l3 + 4)))
        }
        0x0800 if f.len() >= l3 + 28 && f[l3 + 9] == 17 && be16(f, l3 + 22) == 4791 => {
            (true, true, l3 + usize::from(be16(f, l3 + 2)))
        }
        _ => return,
    };
    if end > f.len() || end < l3 + 4 {
        return;
    }
    let c = icrc(&f[l3..end - 4], ipv4, udp);
    f[end - 4..end].copy_from_slice(&c.to_le_bytes());
}

fn fix_csum(f: &mut [u8]) {
    let Some((l3, et)) = l2(f) else { return };
    match et {
        0x0800 if f.len() >= l3 + 20 => {
            let ihl = usize::from(f[l3] & 0xf) * 4;
            if ihl < 20 || f.len() < l3 + ihl {
                return;
            }
            put16(f, l3 + 10, 0);
            let c = !fold(sum(&f[l3..l3 + ihl], 0));
            put16(f, l3 + 10, c);
            let end = (l3 + usize::from(be16(f, l3 + 2))).min(f.len());
            if be16(f, l3 + 6) & 0x3fff != 0 || end < l3 + ihl {
                return;
            }
            let pseudo = sum(&f[l3 + 12..l3 + 20], 0);
            let proto = f[l3 + 9];
            l4(&mut f[l3 + ihl..end], proto, pseudo, proto != 1);
        }
        0x86dd if f.len() >= l3 + 40 => {
            let end = (l3 + 40 + usize::from(be16(f, l3 + 4))).min(f.len());
            let pseudo = sum(&f[l3 + 8..l3 + 40], 0);
            let proto = f[l3 + 6];
            l4(&mut f[l3 + 40..end], proto, pseudo, true);
        }
        _ => {}
    }
}

/// Sets the checksum of TCP (6), UDP (17), ICMP (1) or ICMPv6 (58) segment `seg`; `pseudo` is
/// the sum of the addresses, added (with the protocol and length) if `with_pseudo`.
fn l4(seg: &mut [u8], proto: u8, pseudo: u64, with_pseudo: bool) {
    let at = match proto {
        6 => 16,
        17 => 6,
        1 | 58 => 2,
        _ => return,
    };
    if seg.len() < at + 2 {
        return;
    }
    put16(seg, at, 0);
    let start = if with_pseudo {
        pseudo + u64::from(proto) + seg.len() as u64
    } else {
        0
    };
    let mut c = !fold(sum(seg, start));
    if c == 0 && proto == 17 {
        c = 0xffff;
    }
    put16(seg, at, c);
}

/// A target's rig of this thread: made once, reused by every input, dropped by [`drop_rig`].
pub type RigSlot<R> = std::thread::LocalKey<&'static std::cell::RefCell<Option<R>>>;

/// Runs `f` on this thread's rig, made by `new` the first time.
pub fn with_rig<R: 'static, S>(
    slot: &'static RigSlot<R>,
    new: fn() -> R,
    f: impl FnOnce(&mut R) -> S,
) -> S {
    slot.with(|rig| f(rig.borrow_mut().get_or_insert_with(new)))
}

/// Drops this thread's rig (a test's end).
pub fn drop_rig<R: 'static>(slot: &'static RigSlot<R>) {
    slot.with(|rig| drop(rig.borrow_mut().take()));
}
