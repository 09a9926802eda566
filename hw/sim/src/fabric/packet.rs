//! Ordinary Ethernet frames as the device parses and edits them: the L2 header with up to two
//! VLAN tags, IPv4 (with options) or IPv6 (the fixed header), TCP or UDP; the Internet checksum
//! (RFC 1071) with the TCP/UDP pseudo-headers (RFC 793, RFC 768, RFC 8200 §8.1); the checksum
//! offloads of a send WQE; TCP segmentation (TSO) the way a NIC does it (RFC 7414's "what TSO
//! must preserve": every segment gets the headers, its IPv4 total length, a fresh IPv4
//! identification, IPv6 payload length, the TCP sequence number advanced by the bytes before
//! it, FIN and PSH only on the last segment and CWR only on the first, and new checksums).
//!
//! RoCE frames are recognised here too ([`is_roce`]): ethertype 0x8915 (RoCE v1) or UDP to port
//! 4791 (RoCE v2) go to the RDMA transport; every other frame to the receive flow tables.

pub(crate) use super::consts::{ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_ROCE_V1};
use super::consts::{ETH_BYTES, IPV4_BYTES, IPV6_BYTES, ROCE_PORT, UDP_BYTES};
/// C-VLAN (802.1Q) and S-VLAN (802.1ad) tag protocol identifiers.
pub(crate) const TPID_CVLAN: u16 = 0x8100;
pub(crate) const TPID_SVLAN: u16 = 0x88a8;
pub(crate) const IPPROTO_TCP: u8 = 6;
pub(crate) const IPPROTO_UDP: u8 = 17;
const TCP_MIN: usize = 20;
/// TCP flags: FIN, PSH, CWR.
const TCP_FIN: u8 = 0x01;
const TCP_PSH: u8 = 0x08;
const TCP_CWR: u8 = 0x80;

/// The network layer of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum L3 {
    #[default]
    None,
    V4,
    V6,
}

/// The headers of a frame, with the offsets the device works with.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Headers {
    /// The first VLAN tag: `(TPID, TCI)`.
    pub(crate) vlan: Option<(u16, u16)>,
    /// Bytes of VLAN tags (4 or 8 with two).
    pub(crate) vlan_bytes: usize,
    /// The ethertype after the VLAN tags.
    pub(crate) ethertype: u16,
    pub(crate) l3: L3,
    /// Offset of the network header.
    pub(crate) l3_at: usize,
    /// IPv4 header bytes (IHL × 4) or 40.
    pub(crate) l3_len: usize,
    /// The IP protocol or IPv6 next header.
    pub(crate) proto: u8,
    /// A fragment (IPv4 MF or a fragment offset): no L4 header to parse.
    pub(crate) frag: bool,
    /// The IP header's declared end (IPv4 total length, IPv6 40 + payload length), within the
    /// frame.
    pub(crate) ip_end: usize,
    /// The IPv6 payload length runs past the frame: the headers were parsed (steering matches
    /// them), but neither L3 nor L4 is reported OK.
    pub(crate) short: bool,
    pub(crate) tos: u8,
    pub(crate) ttl: u8,
    /// Source and destination addresses (IPv4 in the last four bytes, as flow tables hold them).
    pub(crate) src: [u8; 16],
    pub(crate) dst: [u8; 16],
    /// Offset of the TCP/UDP header, if the frame has a whole one.
    pub(crate) l4_at: Option<usize>,
    pub(crate) sport: u16,
    pub(crate) dport: u16,
    /// TCP flags (9 bits) of a TCP segment.
    pub(crate) tcp_flags: u16,
    /// TCP header bytes (data offset × 4).
    pub(crate) tcp_len: usize,
}

impl Headers {
    /// TCP.
    pub(crate) fn tcp(&self) -> bool {
        self.l4_at.is_some() && self.proto == IPPROTO_TCP
    }
    /// UDP.
    pub(crate) fn udp(&self) -> bool {
        self.l4_at.is_some() && self.proto == IPPROTO_UDP
    }
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Parses `f`; `None` if it is shorter than an Ethernet header. A truncated or inconsistent IP
/// header leaves `l3` `None` (the frame is then plain L2 to the device).
pub(crate) fn parse(f: &[u8]) -> Option<Headers> {
    if f.len() < ETH_BYTES {
        return None;
    }
    let mut h = Headers::default();
    let mut at = 12;
    let mut et = be16(f, at);
    while (et == TPID_CVLAN || et == TPID_SVLAN) && h.vlan_bytes < 8 && f.len() >= at + 6 {
        if h.vlan.is_none() {
            h.vlan = Some((et, be16(f, at + 2)));
        }
        h.vlan_bytes += 4;
        at += 4;
        et = be16(f, at);
    }
    h.ethertype = et;
    h.l3_at = at + 2;
    let ip = &f[h.l3_at..];
    match et {
        ETHERTYPE_IPV4 if ip.len() >= IPV4_BYTES && ip[0] >> 4 == 4 => {
            let ihl = usize::from(ip[0] & 0xf) * 4;
            let total = usize::from(be16(ip, 2));
            if ihl < IPV4_BYTES || ip.len() < ihl || total < ihl || total > ip.len() {
                return Some(h);
            }
            h.l3 = L3::V4;
            h.l3_len = ihl;
            h.ip_end = h.l3_at + total;
            h.tos = ip[1];
            h.ttl = ip[8];
            h.proto = ip[9];
            h.frag = be16(ip, 6) & 0x3fff != 0;
            h.src[12..].copy_from_slice(&ip[12..16]);
            h.dst[12..].copy_from_slice(&ip[16..20]);
        }
        ETHERTYPE_IPV6 if ip.len() >= IPV6_BYTES && ip[0] >> 4 == 6 => {
            // A payload length past the frame still leaves the fixed header to parse (a
            // ConnectX steers such frames by their addresses: rdma-core's IPv6 flow tests send
            // them); the rest is taken as far as the frame goes.
            let declared = IPV6_BYTES + usize::from(be16(ip, 4));
            h.short = declared > ip.len();
            let total = declared.min(ip.len());
            h.l3 = L3::V6;
            h.l3_len = IPV6_BYTES;
            h.ip_end = h.l3_at + total;
            h.tos = ((be16(ip, 0) >> 4) & 0xff) as u8;
            h.ttl = ip[7];
            h.proto = ip[6];
            h.src.copy_from_slice(&ip[8..24]);
            h.dst.copy_from_slice(&ip[24..40]);
        }
        _ => return Some(h),
    }
    let l4 = h.l3_at + h.l3_len;
    let seg = &f[l4..h.ip_end];
    if h.frag {
        return Some(h);
    }
    match h.proto {
        IPPROTO_TCP if seg.len() >= TCP_MIN => {
            let doff = usize::from(seg[12] >> 4) * 4;
            if doff >= TCP_MIN && doff <= seg.len() {
                h.l4_at = Some(l4);
                h.tcp_len = doff;
                h.tcp_flags = be16(seg, 12) & 0x1ff;
            }
        }
        IPPROTO_UDP if seg.len() >= UDP_BYTES => h.l4_at = Some(l4),
        _ => {}
    }
    if h.l4_at.is_some() {
        h.sport = be16(seg, 0);
        h.dport = be16(seg, 2);
    }
    Some(h)
}

/// Whether `f` is RoCE (v1 by ethertype, v2 by UDP destination port 4791 in a whole IP packet).
pub(crate) fn is_roce(f: &[u8]) -> bool {
    parse(f).is_some_and(|h| {
        h.ethertype == ETHERTYPE_ROCE_V1
            || (h.udp() && h.dport == ROCE_PORT && h.vlan.is_none() && !h.short)
    })
}

/// The 16-bit one's complement sum of `b` (big-endian words, an odd last byte padded) added to
/// `sum`, not yet folded.
pub(crate) fn sum(b: &[u8], mut sum: u64) -> u64 {
    let mut c = b.chunks_exact(2);
    for w in &mut c {
        sum += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = c.remainder() {
        sum += u64::from(*last) << 8;
    }
    sum
}

/// Folds a one's complement sum to 16 bits.
pub(crate) fn fold(mut sum: u64) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The Internet checksum of `b` (0 over a header that holds a correct one).
pub(crate) fn checksum(b: &[u8]) -> u16 {
    !fold(sum(b, 0))
}

/// The TCP/UDP pseudo-header sum of a segment of `len` bytes.
fn pseudo(f: &[u8], h: &Headers, len: usize) -> u64 {
    let ip = &f[h.l3_at..];
    let addrs = match h.l3 {
        L3::V4 => &ip[12..20],
        L3::V6 => &ip[8..40],
        L3::None => &[][..],
    };
    sum(addrs, u64::from(h.proto) + len as u64)
}

/// Whether the IPv4 header checksum is right (IPv6 has none: always).
pub(crate) fn l3_ok(f: &[u8], h: &Headers) -> bool {
    match h.l3 {
        L3::V4 => checksum(&f[h.l3_at..h.l3_at + h.l3_len]) == 0,
        L3::V6 => true,
        L3::None => false,
    }
}

/// Whether the TCP or UDP checksum is right (a UDP checksum of 0 over IPv4: none sent).
pub(crate) fn l4_ok(f: &[u8], h: &Headers) -> bool {
    let Some(at) = h.l4_at else {
        return false;
    };
    let seg = &f[at..h.ip_end];
    if h.udp() && h.l3 == L3::V4 && be16(seg, 6) == 0 {
        return true;
    }
    !fold(sum(seg, pseudo(f, h, seg.len()))) == 0
}

/// The checksum offloads of a send WQE: the IPv4 header checksum (`l3`) and the TCP/UDP
/// checksum (`l4`, computed whole: the pseudo-header and the segment, whatever the field held).
pub(crate) fn fill_checksums(f: &mut [u8], h: &Headers, l3: bool, l4: bool) {
    if l3 && h.l3 == L3::V4 {
        let ip = h.l3_at;
        f[ip + 10..ip + 12].fill(0);
        let c = checksum(&f[ip..ip + h.l3_len]);
        f[ip + 10..ip + 12].copy_from_slice(&c.to_be_bytes());
    }
    if let (true, Some(at)) = (l4, h.l4_at) {
        let field = at + if h.tcp() { 16 } else { 6 };
        f[field..field + 2].fill(0);
        let len = h.ip_end - at;
        let mut c = !fold(sum(&f[at..h.ip_end], pseudo(f, h, len)));
        if h.udp() && c == 0 {
            c = 0xffff;
        }
        f[field..field + 2].copy_from_slice(&c.to_be_bytes());
    }
}

/// TCP segmentation of `f` (whole headers, then the payload) into segments of at most `mss`
/// payload bytes, each with its headers fixed and both checksums computed. `None` if `f` is
/// not a TCP segment over IPv4 or IPv6 or `mss` is 0.
pub(crate) fn segment(f: &[u8], mss: usize) -> Option<Vec<Vec<u8>>> {
    let h = parse(f).filter(|h| h.tcp() && !h.frag)?;
    if mss == 0 {
        return None;
    }
    let at = h.l4_at?;
    let hdrs = at + h.tcp_len;
    let payload = &f[hdrs..h.ip_end];
    let seq = u32::from_be_bytes(f[at + 4..at + 8].try_into().ok()?);
    let n = payload.len().div_ceil(mss).max(1);
    let mut out = Vec::with_capacity(n);
    for (i, chunk) in payload
        .chunks(mss)
        .chain(payload.is_empty().then_some(&[][..]))
        .enumerate()
    {
        let mut s = Vec::with_capacity(hdrs + chunk.len());
        s.extend_from_slice(&f[..hdrs]);
        s.extend_from_slice(chunk);
        let ip = h.l3_at;
        match h.l3 {
            L3::V4 => {
                let total = (s.len() - ip) as u16;
                s[ip + 2..ip + 4].copy_from_slice(&total.to_be_bytes());
                let id = be16(f, ip + 4).wrapping_add(i as u16);
                s[ip + 4..ip + 6].copy_from_slice(&id.to_be_bytes());
            }
            _ => {
                let plen = (s.len() - ip - IPV6_BYTES) as u16;
                s[ip + 4..ip + 6].copy_from_slice(&plen.to_be_bytes());
            }
        }
        let sq = seq.wrapping_add((i * mss) as u32);
        s[at + 4..at + 8].copy_from_slice(&sq.to_be_bytes());
        if i + 1 < n {
            s[at + 13] &= !(TCP_FIN | TCP_PSH);
        }
        if i > 0 {
            s[at + 13] &= !TCP_CWR;
        }
        let sh = parse(&s)?;
        fill_checksums(&mut s, &sh, true, true);
        out.push(s);
    }
    Some(out)
}

/// A frame's addresses for the trace log: `dmac<-smac/ethertype`.
pub(crate) struct Addrs<'a>(pub(crate) &'a [u8]);

impl core::fmt::Display for Addrs<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let mac = |m: &[u8]| {
            m.iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(":")
        };
        match (self.0.get(..6), self.0.get(6..12), self.0.get(12..14)) {
            (Some(d), Some(s), Some(t)) => {
                write!(f, "{}<-{}/{:02x}{:02x}", mac(d), mac(s), t[0], t[1])
            }
            _ => write!(f, "({} bytes)", self.0.len()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// rdma-core's test packets (tests/utils.py `gen_packet`) give IPv6 a payload length that
    /// counts the 40-byte header too, past the frame's end: the headers still parse — a
    /// ConnectX steers these frames by address and port — but the frame is marked short.
    #[test]
    fn an_ipv6_payload_length_past_the_frame_still_parses_its_headers() {
        let mut f = vec![0u8; ETH_BYTES + IPV6_BYTES + TCP_MIN + 10];
        f[..6].copy_from_slice(&[1, 0x50, 0x56, 0x19, 0x20, 0xa7]);
        f[12..14].copy_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
        let ip = &mut f[ETH_BYTES..];
        ip[0] = 0x60;
        let declared = (IPV6_BYTES + TCP_MIN + 10) as u16;
        ip[4..6].copy_from_slice(&declared.to_be_bytes());
        ip[6] = IPPROTO_TCP;
        ip[7] = 64;
        ip[8] = 0xa0;
        ip[24] = 0xb0;
        let t = &mut ip[IPV6_BYTES..];
        t[..2].copy_from_slice(&1234u16.to_be_bytes());
        t[2..4].copy_from_slice(&5678u16.to_be_bytes());
        t[12] = 5 << 4;
        let h = parse(&f).unwrap();
        assert_eq!(
            (h.l3, h.proto, h.src[0], h.dst[0]),
            (L3::V6, IPPROTO_TCP, 0xa0, 0xb0)
        );
        assert_eq!((h.tcp(), h.sport, h.dport), (true, 1234, 5678));
        assert!(h.short);
        assert_eq!(h.ip_end, f.len());
        // With the right length it is whole.
        let right = (TCP_MIN + 10) as u16;
        f[ETH_BYTES + 4..ETH_BYTES + 6].copy_from_slice(&right.to_be_bytes());
        assert!(!parse(&f).unwrap().short);
    }

    /// An IPv4/TCP frame of `payload` bytes (the example addresses of RFC 5737).
    fn tcp4(payload: usize, flags: u8) -> Vec<u8> {
        let mut f = vec![0u8; ETH_BYTES + IPV4_BYTES + TCP_MIN + payload];
        f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        let ip = &mut f[ETH_BYTES..];
        ip[0] = 0x45;
        let total = (IPV4_BYTES + TCP_MIN + payload) as u16;
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        ip[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
        ip[8] = 64;
        ip[9] = IPPROTO_TCP;
        ip[12..16].copy_from_slice(&[192, 0, 2, 1]);
        ip[16..20].copy_from_slice(&[192, 0, 2, 2]);
        let t = &mut ip[IPV4_BYTES..];
        t[..2].copy_from_slice(&40000u16.to_be_bytes());
        t[2..4].copy_from_slice(&80u16.to_be_bytes());
        t[4..8].copy_from_slice(&1000u32.to_be_bytes());
        t[12] = 5 << 4;
        t[13] = flags;
        for (i, b) in t[TCP_MIN..].iter_mut().enumerate() {
            *b = i as u8;
        }
        f
    }

    #[test]
    fn the_internet_checksum_of_rfc_1071s_example() {
        // RFC 1071 §3: the words 0001 f203 f4f5 f6f7 sum to ddf2.
        let b = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(&b, 0)), 0xddf2);
        assert_eq!(checksum(&b), !0xddf2);
    }

    #[test]
    fn offloaded_checksums_verify() {
        let mut f = tcp4(33, 0x18);
        let h = parse(&f).unwrap();
        assert!(h.tcp() && h.sport == 40000 && h.dport == 80 && h.l3 == L3::V4);
        assert!(!l3_ok(&f, &h) && !l4_ok(&f, &h));
        fill_checksums(&mut f, &h, true, true);
        assert!(l3_ok(&f, &h) && l4_ok(&f, &h));
        f[ETH_BYTES + IPV4_BYTES + TCP_MIN + 3] ^= 1;
        assert!(
            !l4_ok(&f, &h),
            "a flipped payload bit fails the TCP checksum"
        );
    }

    #[test]
    fn tso_cuts_the_payload_and_fixes_every_header() {
        let f = tcp4(3000, 0x19); // ACK PSH FIN
        let segs = segment(&f, 1448).unwrap();
        assert_eq!(segs.len(), 3);
        let mut payload = Vec::new();
        for (i, s) in segs.iter().enumerate() {
            let h = parse(s).unwrap();
            assert!(l3_ok(s, &h) && l4_ok(s, &h), "segment {i} checksums");
            let at = h.l4_at.unwrap();
            let seq = u32::from_be_bytes(s[at + 4..at + 8].try_into().unwrap());
            assert_eq!(seq, 1000 + payload.len() as u32);
            assert_eq!(be16(s, ETH_BYTES + 4), 0x1234 + i as u16, "IP ID");
            let last = i == 2;
            assert_eq!(
                s[at + 13] & (TCP_FIN | TCP_PSH) != 0,
                last,
                "FIN/PSH on the last only"
            );
            payload.extend_from_slice(&s[at + TCP_MIN..]);
        }
        assert_eq!(payload, f[ETH_BYTES + IPV4_BYTES + TCP_MIN..]);
    }

    #[test]
    fn roce_is_told_from_other_traffic() {
        let mut f = tcp4(0, 0x10);
        assert!(!is_roce(&f));
        f[ETH_BYTES + 9] = IPPROTO_UDP;
        f[ETH_BYTES + IPV4_BYTES + 2..ETH_BYTES + IPV4_BYTES + 4]
            .copy_from_slice(&ROCE_PORT.to_be_bytes());
        assert!(is_roce(&f));
        f[12..14].copy_from_slice(&ETHERTYPE_ROCE_V1.to_be_bytes());
        assert!(is_roce(&f));
    }
}
