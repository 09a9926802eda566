//! The invariant CRC of RoCE v2 (see [`super::frame`] for the fields it covers and masks): the
//! IEEE 802.3 CRC-32, computed by `crc32fast` (carry-less multiplication where the CPU has it,
//! a sliced table otherwise) — the ICRC is computed over every frame the fabric carries, twice.

use super::consts::{BTH_BYTES, IPV4_BYTES, IPV6_BYTES, UDP_BYTES};

/// CRC-32 (IEEE 802.3) of `bytes`: an Ethernet frame's FCS, too.
pub(crate) fn crc32(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// The ICRC of a RoCE v2 packet `ip` (from the first byte of the IP header up to, not
/// including, the ICRC).
pub(crate) fn icrc(ip: &[u8], ipv4: bool) -> u32 {
    masked_crc(ip, if ipv4 { L3::Ipv4 } else { L3::Ipv6 }, true)
}

/// The ICRC of a RoCE (v1) packet `grh` (from the first byte of the GRH up to, not including,
/// the ICRC): as RoCE v2's over IPv6, the GRH having IPv6's layout and masks, with no UDP
/// header.
pub(crate) fn icrc_v1(grh: &[u8]) -> u32 {
    masked_crc(grh, L3::Ipv6, false)
}

/// The layer-3 header in front of the transport: its length and variant fields.
#[derive(Clone, Copy)]
enum L3 {
    Ipv4,
    /// An IPv6 header or an InfiniBand GRH.
    Ipv6,
}

/// The CRC-32 state after eight bytes of ones, the masked LRH every ICRC starts with
/// (`crc32fast::hash(&[0xff; 8])`; a test checks it).
const AFTER_MASKED_LRH: u32 = 0x2144_df1c;

impl L3 {
    const fn len(self) -> usize {
        match self {
            L3::Ipv4 => IPV4_BYTES,
            L3::Ipv6 => IPV6_BYTES,
        }
    }
}

/// The masks of the ICRC's variant fields over the first 64 bytes of a packet: layer 3 (IPv4
/// TOS, TTL, checksum; IPv6/GRH traffic class, flow label, hop limit), the UDP checksum when
/// there is one, and the BTH's `resv8a`. Every variant bit is replaced by a one, so masking is
/// an OR — bytewise, or in 16-byte lanes.
struct Masks {
    bytes: [u8; 64],
    lanes: [u128; 4],
}

impl Masks {
    const fn new(l3: L3, udp: bool) -> Masks {
        let mut m = [0u8; 64];
        match l3 {
            L3::Ipv4 => {
                m[1] = 0xff;
                m[8] = 0xff;
                m[10] = 0xff;
                m[11] = 0xff;
            }
            L3::Ipv6 => {
                m[0] = 0x0f;
                m[1] = 0xff;
                m[2] = 0xff;
                m[3] = 0xff;
                m[7] = 0xff;
            }
        }
        if udp {
            m[l3.len() + 6] = 0xff;
            m[l3.len() + 7] = 0xff;
        }
        let bth = l3.len() + if udp { UDP_BYTES } else { 0 };
        m[bth + 4] = 0xff;
        let mut lanes = [0u128; 4];
        let mut i = 0;
        while i < 64 {
            lanes[i / 16] |= (m[i] as u128) << (8 * (i % 16));
            i += 1;
        }
        Masks { bytes: m, lanes }
    }
}

const MASKS_V4: Masks = Masks::new(L3::Ipv4, true);
const MASKS_V6: Masks = Masks::new(L3::Ipv6, true);
const MASKS_V1: Masks = Masks::new(L3::Ipv6, false);

/// The CRC over eight bytes of ones (the masked LRH), `pkt` with the variant fields of its
/// layer-3 header (IPv4 TOS, TTL, checksum; IPv6/GRH traffic class, flow label, hop limit), of
/// its UDP header (the checksum) when it has one, and the BTH's `resv8a` set to ones.
///
/// The masked head is built in whole 16-byte lanes (3 for IPv4, 4 for IPv6 and the GRH: the
/// headers and the first bytes after them), each loaded, ORed with its mask and stored whole,
/// so that the CRC's 16-byte loads of it are forwarded from those stores; byte stores into the
/// head stalled every load that covered them and cost as much as the CRC of a 1 KiB payload.
/// A packet shorter than its lanes (an ACK) takes the byte path.
fn masked_crc(pkt: &[u8], l3: L3, udp: bool) -> u32 {
    let bth = l3.len() + if udp { UDP_BYTES } else { 0 };
    let lanes = (bth + BTH_BYTES).div_ceil(16);
    let masks = match (l3, udp) {
        (L3::Ipv4, _) => &MASKS_V4,
        (L3::Ipv6, true) => &MASKS_V6,
        (L3::Ipv6, false) => &MASKS_V1,
    };
    let mut crc = crc32fast::Hasher::new_with_initial(AFTER_MASKED_LRH);
    let mut head = [0u8; 64];
    let n = lanes * 16;
    if let (Some(front), Some(rest)) = (pkt.get(..n), pkt.get(n..)) {
        for ((dst, src), mask) in head
            .chunks_exact_mut(16)
            .zip(front.chunks_exact(16))
            .zip(&masks.lanes)
        {
            let mut w = [0u8; 16];
            w.copy_from_slice(src);
            dst.copy_from_slice(&(u128::from_le_bytes(w) | mask).to_le_bytes());
        }
        crc.update(&head[..n]);
        crc.update(rest);
        return crc.finalize();
    }
    let n = (bth + BTH_BYTES).min(pkt.len());
    head[..n].copy_from_slice(&pkt[..n]);
    for (h, m) in head[..n].iter_mut().zip(&masks.bytes) {
        *h |= m;
    }
    crc.update(&head[..n]);
    crc.update(pkt.get(n..).unwrap_or(&[]));
    crc.finalize()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::frame::{encode, op, Packet, Route, ETH_BYTES};

    fn hex(s: &str) -> Vec<u8> {
        let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
        digits
            .chunks(2)
            .map(|c| u8::from_str_radix(std::str::from_utf8(c).unwrap(), 16).unwrap())
            .collect()
    }

    #[test]
    fn crc32_check_value() {
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
    }

    #[test]
    fn the_state_after_the_masked_lrh() {
        assert_eq!(crc32(&[0xff; 8]), AFTER_MASKED_LRH);
    }

    /// The ICRC as the RoCE v2 annex defines it, byte by byte: the variant fields set to ones
    /// in a copy of the whole packet, eight bytes of ones in front, one CRC-32.
    fn reference(pkt: &[u8], l3: L3, udp: bool) -> u32 {
        let mut m = vec![0xff; 8];
        m.extend_from_slice(pkt);
        let p = &mut m[8..];
        let l3_len = l3.len();
        let mut ones = |i: usize, v: u8| {
            if let Some(b) = p.get_mut(i) {
                *b |= v;
            }
        };
        match l3 {
            L3::Ipv4 => [1, 8, 10, 11].into_iter().for_each(|i| ones(i, 0xff)),
            L3::Ipv6 => {
                ones(0, 0x0f);
                [1, 2, 3, 7].into_iter().for_each(|i| ones(i, 0xff));
            }
        }
        if udp {
            ones(l3_len + 6, 0xff);
            ones(l3_len + 7, 0xff);
        }
        ones(l3_len + if udp { UDP_BYTES } else { 0 } + 4, 0xff);
        crc32(&m)
    }

    /// The lane path and the byte path agree with the definition for every kind of packet and
    /// every length from a bare BTH to past a 4 KiB payload (across the lanes' edge, where the
    /// path changes, and the CRC engine's own edges).
    #[test]
    fn every_length_and_kind_agrees_with_the_definition() {
        let pkt: Vec<u8> = (0..4300u32)
            .map(|i| (i.wrapping_mul(0x9e37) >> 5) as u8)
            .collect();
        for (l3, udp) in [(L3::Ipv4, true), (L3::Ipv6, true), (L3::Ipv6, false)] {
            let min = l3.len() + if udp { UDP_BYTES } else { 0 } + BTH_BYTES;
            let lens = (min..400)
                .chain((400..pkt.len()).step_by(37))
                .chain([4096 + 60, 4300]);
            for len in lens {
                let p = &pkt[..len];
                assert_eq!(
                    masked_crc(p, l3, udp),
                    reference(p, l3, udp),
                    "length {len}"
                );
            }
        }
    }

    /// A CNP captured on a ConnectX-4 Lx (published with the Scapy RoCE layer's tests): the
    /// device's own ICRC is `82 fd 00 2a` on the wire.
    #[test]
    fn icrc_of_a_captured_connectx_frame() {
        let f = hex(
            "e41d2dab2bc2 7cfe90643b32 0800 45c2 003c 718c 4000 4011 9161 0a001101 0a001201
             0000 12b7 0028 0000 8100ffff 40000118 00000000 00000000 00000000 00000000 00000000
             82fd002a",
        );
        let ip = &f[ETH_BYTES..f.len() - 4];
        assert_eq!(icrc(ip, true).to_le_bytes(), [0x82, 0xfd, 0x00, 0x2a]);
    }

    /// The UC SEND_ONLY example of the Scapy RoCE tests, whose ICRC bytes are `78 f3 53 f3`.
    #[test]
    fn icrc_of_the_scapy_uc_example() {
        let mut route = Route {
            smac: [0x24, 0x8a, 0x07, 0xa8, 0xfa, 0x22],
            dmac: [0x24, 0x8a, 0x07, 0xa8, 0xfa, 0x22],
            tclass: 1,
            hop_limit: 64,
            sport: 49152,
            ip_id: 1144,
            ..Route::default()
        };
        for g in [&mut route.sgid, &mut route.dgid] {
            g[10..].copy_from_slice(&[0xff, 0xff, 192, 168, 0, 7]);
        }
        let payload = b"F0\x81\x8b\xe2\x895\xd9\x0e\x9a\x95PT\x01\xbe\x88^P".to_vec();
        let p = Packet {
            opcode: op::UC | op::SEND_ONLY,
            dqpn: 211,
            psn: 13_571_856,
            payload: &payload,
            ..Packet::default()
        };
        let mut f = encode(&route, &p);
        // The example sets the migration bit, which the device never does.
        f[ETH_BYTES + IPV4_BYTES + UDP_BYTES + 1] |= 0x40;
        let n = f.len();
        let crc = icrc(&f[ETH_BYTES..n - 4], true);
        assert_eq!(crc.to_le_bytes(), [0x78, 0xf3, 0x53, 0xf3]);
        assert_eq!(
            &f[ETH_BYTES + 2..ETH_BYTES + 4],
            &[0, 64],
            "IP total length"
        );
    }
}
