//! The invariant CRC of RoCE v2 (see [`super::frame`] for the fields it covers and masks): the
//! IEEE 802.3 CRC-32, computed by `crc32fast` (carry-less multiplication where the CPU has it,
//! a sliced table otherwise) — the ICRC is computed over every frame the fabric carries, twice.

use super::frame::{BTH_BYTES, IPV4_BYTES, IPV6_BYTES, UDP_BYTES};

/// CRC-32 (IEEE 802.3) of `bytes`.
#[cfg(test)]
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

/// The CRC over eight bytes of ones (the masked LRH), `pkt` with the variant fields of its
/// layer-3 header (IPv4 TOS, TTL, checksum; IPv6/GRH traffic class, flow label, hop limit), of
/// its UDP header (the checksum) when it has one, and the BTH's `resv8a` set to ones.
fn masked_crc(pkt: &[u8], l3: L3, udp: bool) -> u32 {
    let l3_len = match l3 {
        L3::Ipv4 => IPV4_BYTES,
        L3::Ipv6 => IPV6_BYTES,
    };
    let bth = l3_len + if udp { UDP_BYTES } else { 0 };
    let mut head = [0u8; IPV6_BYTES + UDP_BYTES + BTH_BYTES];
    let n = (bth + BTH_BYTES).min(pkt.len());
    head[..n].copy_from_slice(&pkt[..n]);
    match l3 {
        L3::Ipv4 => {
            head[1] = 0xff;
            head[8] = 0xff;
            head[10] = 0xff;
            head[11] = 0xff;
        }
        L3::Ipv6 => {
            head[0] |= 0x0f;
            head[1..4].fill(0xff);
            head[7] = 0xff;
        }
    }
    if udp {
        head[l3_len + 6] = 0xff;
        head[l3_len + 7] = 0xff;
    }
    head[bth + 4] = 0xff;
    let mut crc = crc32fast::Hasher::new();
    crc.update(&[0xff; 8]);
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
