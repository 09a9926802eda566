//! The checksum rules of an [`EthPort`](super::EthPort): which offloads a frame to send asks
//! of the device, and whether a received frame may go up to the stack.

use super::sq::Checksum;
use crate::WcFlags;

/// Ethernet header bytes (no VLAN tag).
const ETH_HLEN: usize = 14;

/// The checksums the device is to fill for `frame`: IPv4's header checksum, and the TCP/UDP
/// checksum of an unfragmented TCP or UDP datagram.
pub(crate) fn offloads(frame: &[u8]) -> Checksum {
    let Some(ip) = ipv4(frame) else {
        return Checksum::NONE;
    };
    let frag = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0;
    Checksum {
        l3: true,
        l4: !frag && matches!(ip[9], 6 | 17),
    }
}

/// The IPv4 header of `frame`, if it is an untagged IPv4 frame with a whole header.
fn ipv4(frame: &[u8]) -> Option<&[u8]> {
    if frame.get(12..14)? != [0x08, 0x00] {
        return None;
    }
    let ip = frame.get(ETH_HLEN..)?;
    let ihl = usize::from(ip.first()? & 0x0f) * 4;
    (ip[0] >> 4 == 4 && ihl >= 20).then_some(())?;
    ip.get(..ihl)
}

/// Whether a received `frame` may go up: an IPv4 TCP/UDP frame needs the device's
/// [`WcFlags::IP_CSUM_OK`]; another IPv4 frame a good header checksum; the rest pass.
/// An IPv6 TCP/UDP frame (next header 6 or 17 straight after the IPv6 header) its checksum,
/// verified here; the rest pass.
pub(crate) fn checksum_ok(frame: &[u8], flags: WcFlags) -> bool {
    match frame.get(12..14) {
        Some([0x08, 0x00]) => {}
        Some([0x86, 0xdd]) => return ipv6_l4_ok(frame),
        _ => return true,
    }
    let Some(ip) = ipv4(frame) else {
        return false;
    };
    let frag = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0;
    if !frag && matches!(ip[9], 6 | 17) {
        return flags.contains(WcFlags::IP_CSUM_OK);
    }
    fold(sum(ip, 0)) == 0xffff
}

/// The TCP or UDP checksum of an IPv6 frame (the device's flag covers IPv4 only).
fn ipv6_l4_ok(frame: &[u8]) -> bool {
    let Some(ip) = frame.get(ETH_HLEN..ETH_HLEN + 40) else {
        return false;
    };
    let next = ip[6];
    if !matches!(next, 6 | 17) {
        return true;
    }
    let len = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
    let Some(seg) = frame.get(ETH_HLEN + 40..ETH_HLEN + 40 + len) else {
        return false;
    };
    let pseudo = sum(&ip[8..40], len as u32 + u32::from(next));
    fold(sum(seg, pseudo)) == 0xffff
}

/// The ones'-complement sum of `b` (big-endian 16-bit words, an odd byte padded) onto `s`.
fn sum(b: &[u8], s: u32) -> u32 {
    b.chunks(2).fold(s, |s, c| {
        let w = u32::from(u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or(0)]));
        let t = s + w;
        (t & 0xffff) + (t >> 16)
    })
}

fn fold(mut s: u32) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}
