//! The Toeplitz hash of receive-side scaling, as the device computes `rss_hash_result` for a
//! TIR with `rx_hash_fn` Toeplitz (docs/ethernet-facts.md §4): the 40-byte key read as a bit
//! string, a 32-bit window sliding one bit per input bit, XORed into the result for every set
//! input bit. The input is the selected fields in network order — source address, destination
//! address, source port, destination port. Checked against Microsoft's published RSS
//! verification vectors. With it a dataplane predicts which receive queue a flow lands on.

/// Microsoft's RSS verification key (the one its published vectors use).
pub const MS_RSS_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

/// The longest hash input: IPv6 addresses and ports, 36 bytes.
pub const MAX_INPUT: usize = 36;

/// The Toeplitz hash of `input` under `key`; `None` for an input longer than [`MAX_INPUT`]
/// (the key has bits for 36 bytes).
pub fn toeplitz(key: &[u8; 40], input: &[u8]) -> Option<u32> {
    if input.len() > MAX_INPUT {
        return None;
    }
    let mut window = u32::from_be_bytes([key[0], key[1], key[2], key[3]]);
    let mut result = 0u32;
    let mut next = 32usize;
    for &byte in input {
        for bit in (0..8).rev() {
            if byte >> bit & 1 == 1 {
                result ^= window;
            }
            let k = key[next / 8] >> (7 - next % 8) & 1;
            window = window << 1 | u32::from(k);
            next += 1;
        }
    }
    Some(result)
}

/// The hash input of an IPv4 flow: source and destination addresses, then the ports if given
/// (8 or 12 bytes, in `buf`); the slice used.
pub fn ipv4_input(
    buf: &mut [u8; MAX_INPUT],
    src: [u8; 4],
    dst: [u8; 4],
    ports: Option<(u16, u16)>,
) -> &[u8] {
    buf[..4].copy_from_slice(&src);
    buf[4..8].copy_from_slice(&dst);
    match ports {
        Some((s, d)) => {
            buf[8..10].copy_from_slice(&s.to_be_bytes());
            buf[10..12].copy_from_slice(&d.to_be_bytes());
            &buf[..12]
        }
        None => &buf[..8],
    }
}

/// The hash input of an IPv6 flow (32 or 36 bytes, in `buf`).
pub fn ipv6_input(
    buf: &mut [u8; MAX_INPUT],
    src: [u8; 16],
    dst: [u8; 16],
    ports: Option<(u16, u16)>,
) -> &[u8] {
    buf[..16].copy_from_slice(&src);
    buf[16..32].copy_from_slice(&dst);
    match ports {
        Some((s, d)) => {
            buf[32..34].copy_from_slice(&s.to_be_bytes());
            buf[34..36].copy_from_slice(&d.to_be_bytes());
            &buf[..36]
        }
        None => &buf[..32],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (source, sport, destination, dport, IPv4 only, IPv4 with TCP)
    type V4Row = ([u8; 4], u16, [u8; 4], u16, u32, u32);

    #[test]
    fn microsofts_ipv4_vectors() {
        let rows: [V4Row; 5] = [
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
        let mut b = [0u8; MAX_INPUT];
        for (s, sp, d, dp, only, tcp) in rows {
            assert_eq!(
                toeplitz(&MS_RSS_KEY, ipv4_input(&mut b, s, d, None)),
                Some(only)
            );
            assert_eq!(
                toeplitz(&MS_RSS_KEY, ipv4_input(&mut b, s, d, Some((sp, dp)))),
                Some(tcp)
            );
        }
        // The worked input of row 1.
        assert_eq!(
            ipv4_input(
                &mut b,
                [66, 9, 149, 187],
                [161, 142, 100, 80],
                Some((2794, 1766))
            ),
            &[0x42, 0x09, 0x95, 0xbb, 0xa1, 0x8e, 0x64, 0x50, 0x0a, 0xea, 0x06, 0xe6]
        );
        assert_eq!(toeplitz(&MS_RSS_KEY, &[0; 37]), None);
    }

    #[test]
    fn microsofts_ipv6_vectors() {
        let a = |s: &str| -> [u8; 16] { s.parse::<core::net::Ipv6Addr>().unwrap().octets() };
        let rows = [
            (
                "3ffe:2501:200:1fff::7",
                2794,
                "3ffe:2501:200:3::1",
                1766,
                0x2cc1_8cd5,
                0x4020_7d3d,
            ),
            (
                "3ffe:501:8::260:97ff:fe40:efab",
                14230,
                "ff02::1",
                4739,
                0x0f0c_461c,
                0xdde5_1bbf,
            ),
            (
                "3ffe:1900:4545:3:200:f8ff:fe21:67cf",
                44251,
                "fe80::200:f8ff:fe21:67cf",
                38024,
                0x4b61_e985,
                0x02d1_feef,
            ),
        ];
        let mut b = [0u8; MAX_INPUT];
        for (s, sp, d, dp, only, tcp) in rows {
            assert_eq!(
                toeplitz(&MS_RSS_KEY, ipv6_input(&mut b, a(s), a(d), None)),
                Some(only)
            );
            assert_eq!(
                toeplitz(&MS_RSS_KEY, ipv6_input(&mut b, a(s), a(d), Some((sp, dp)))),
                Some(tcp)
            );
        }
    }
}
