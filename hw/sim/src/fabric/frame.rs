//! RoCE frames as bytes. RoCE v2: Ethernet II, IPv4 or IPv6, UDP to port 4791, the InfiniBand
//! base transport header and its extension headers, the payload, and the invariant CRC. RoCE
//! (v1): Ethernet II with ethertype 0x8915, the InfiniBand GRH (an IPv6-format header whose next
//! header is 0x1b, the BTH), then the same transport and ICRC. A QP's frames are v1 when the
//! source GID its path names (`src_addr_index`) is a RoCE v1 entry of the GID table
//! (SET_ROCE_ADDRESS `roce_version` 0), v2 otherwise.
//!
//! [`encode_into`] builds a whole frame; [`decode`] takes a frame received from the wire apart and
//! refuses anything it cannot vouch for ([`Refused`] says why): a short or malformed header, an IPv4
//! header with options or a bad checksum, a fragment, a UDP port other than 4791, a UDP or IP
//! length that disagrees with the frame, a transport opcode the device does not implement, a
//! pad count larger than the payload, or a bad ICRC.
//!
//! The ICRC is the CRC-32 of the Ethernet polynomial (reflected 0xEDB88320, initial value and
//! final XOR all ones) over eight bytes of 0xff (the masked LRH of the IBTA annex A17), the IP
//! header, the UDP header, the BTH and everything after it up to the ICRC, with the variant fields
//! set to ones: IPv4 TOS, TTL and header checksum; IPv6 traffic class, flow label and hop limit;
//! the UDP checksum; the BTH reserved byte 4 (`resv8a`: FECN, BECN). It is appended least
//! significant byte first ([`super::icrc`]). A v1 frame's ICRC covers the GRH (traffic class,
//! flow label and hop limit masked as IPv6's) and the transport, after the same eight bytes.

pub(crate) use super::bth::{aeth, op, AtomicEth, Dceth, Packet, Reth};
use super::bth::{be16, be32, parse_transport, put_transport, transport_len};
pub(crate) use super::consts::{
    BTH_BYTES, ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_ROCE_V1, ETH_BYTES, IPV4_BYTES,
    IPV6_BYTES, ROCE_PORT, UDP_BYTES,
};
use super::icrc;

const ICRC_BYTES: usize = 4;
/// The GRH's next header for a BTH.
const GRH_NEXT_BTH: u8 = 0x1b;

/// Layer 2 and 3 addressing of a frame. GIDs are 16 bytes; an IPv4 address is the IPv4-mapped
/// GID `::ffff:a.b.c.d`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Route {
    pub(crate) smac: [u8; 6],
    pub(crate) dmac: [u8; 6],
    pub(crate) sgid: [u8; 16],
    pub(crate) dgid: [u8; 16],
    /// IPv4 TOS / IPv6 traffic class.
    pub(crate) tclass: u8,
    pub(crate) flow_label: u32,
    pub(crate) hop_limit: u8,
    pub(crate) sport: u16,
    /// IPv4 identification.
    pub(crate) ip_id: u16,
    /// RoCE (v1) framing: ethertype 0x8915 and a GRH instead of IP and UDP.
    pub(crate) v1: bool,
    /// Force loopback (a QP path's `fl`): the frame never reaches the wire; the function's own
    /// receive side takes it ([`crate::model::runtime::Runtime::send`]). Not on the wire, so a
    /// decoded frame never has it.
    pub(crate) loopback: bool,
}

/// Whether a GID is an IPv4-mapped address.
pub(crate) fn is_ipv4_mapped(gid: &[u8; 16]) -> bool {
    gid[..10].iter().all(|&b| b == 0) && gid[10] == 0xff && gid[11] == 0xff
}

/// A received frame: its addressing, the raw IP header (for the UD GRH) and the packet, the
/// last two borrowed from the frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Received<'a> {
    pub(crate) route: Route,
    pub(crate) ipv4: bool,
    pub(crate) ip_header: &'a [u8],
    pub(crate) packet: Packet<'a>,
}

/// Why a received frame was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Not a well-formed RoCE v2 frame (or an opcode the device does not implement).
    Malformed,
    /// The ICRC does not match.
    Icrc,
}

/// The whole frame of packet `p` on route `r` (IPv4 when both GIDs are IPv4-mapped).
#[cfg(test)]
pub(crate) fn encode(r: &Route, p: &Packet<'_>) -> Vec<u8> {
    let mut f = Vec::new();
    encode_into(&mut f, r, p);
    f
}

/// The whole frame of packet `p` on route `r` into `f` (cleared first; its allocation is
/// reused).
pub(crate) fn encode_into(f: &mut Vec<u8>, r: &Route, p: &Packet<'_>) {
    f.clear();
    if r.v1 {
        return encode_v1(f, r, p);
    }
    let ipv4 = is_ipv4_mapped(&r.sgid) && is_ipv4_mapped(&r.dgid);
    let t_len = transport_len(p);
    let udp_len = UDP_BYTES + t_len + ICRC_BYTES;
    f.reserve(ETH_BYTES + IPV6_BYTES + udp_len);
    f.extend_from_slice(&r.dmac);
    f.extend_from_slice(&r.smac);
    let hop = if r.hop_limit == 0 { 64 } else { r.hop_limit };
    if ipv4 {
        f.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        let total = (IPV4_BYTES + udp_len) as u16;
        let mut h = [0u8; IPV4_BYTES];
        h[0] = 0x45;
        h[1] = r.tclass;
        h[2..4].copy_from_slice(&total.to_be_bytes());
        h[4..6].copy_from_slice(&r.ip_id.to_be_bytes());
        h[6] = 0x40;
        h[8] = hop;
        h[9] = 17;
        h[12..16].copy_from_slice(&r.sgid[12..]);
        h[16..20].copy_from_slice(&r.dgid[12..]);
        let sum = super::packet::checksum(&h);
        h[10..12].copy_from_slice(&sum.to_be_bytes());
        f.extend_from_slice(&h);
    } else {
        f.extend_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
        put_ipv6(f, r, udp_len, 17);
    }
    f.extend_from_slice(&r.sport.to_be_bytes());
    f.extend_from_slice(&ROCE_PORT.to_be_bytes());
    f.extend_from_slice(&(udp_len as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    put_transport(f, p);
    let crc = icrc::icrc(&f[ETH_BYTES..], ipv4);
    f.extend_from_slice(&crc.to_le_bytes());
}

/// The RoCE (v1) frame of packet `p` on route `r` into `f`: Ethernet, GRH, transport, ICRC.
fn encode_v1(f: &mut Vec<u8>, r: &Route, p: &Packet<'_>) {
    let t_len = transport_len(p);
    f.reserve(ETH_BYTES + IPV6_BYTES + t_len + ICRC_BYTES);
    f.extend_from_slice(&r.dmac);
    f.extend_from_slice(&r.smac);
    f.extend_from_slice(&ETHERTYPE_ROCE_V1.to_be_bytes());
    put_ipv6(f, r, t_len + ICRC_BYTES, GRH_NEXT_BTH);
    put_transport(f, p);
    let crc = icrc::icrc_v1(&f[ETH_BYTES..]);
    f.extend_from_slice(&crc.to_le_bytes());
}

/// An IPv6 header, or the InfiniBand GRH of the same layout, of `r` (hop limit 64 when `r` has
/// none) in front of `payload` bytes whose header is `next`.
fn put_ipv6(f: &mut Vec<u8>, r: &Route, payload: usize, next: u8) {
    let w = (6u32 << 28) | (u32::from(r.tclass) << 20) | (r.flow_label & 0xf_ffff);
    f.extend_from_slice(&w.to_be_bytes());
    f.extend_from_slice(&(payload as u16).to_be_bytes());
    f.push(next);
    f.push(if r.hop_limit == 0 { 64 } else { r.hop_limit });
    f.extend_from_slice(&r.sgid);
    f.extend_from_slice(&r.dgid);
}

/// The traffic class, flow label, hop limit and GIDs of an IPv6 header or GRH `h` into `r`.
fn take_ipv6(h: &[u8], r: &mut Route) {
    let w = be32(h, 0);
    r.tclass = ((w >> 20) & 0xff) as u8;
    r.flow_label = w & 0xf_ffff;
    r.hop_limit = h[7];
    r.sgid.copy_from_slice(&h[8..24]);
    r.dgid.copy_from_slice(&h[24..40]);
}

/// The GRH of a RoCE (v1) frame: `(route, GRH and transport bytes incl. ICRC)`.
fn grh(f: &[u8]) -> Result<(Route, &[u8]), Refused> {
    use Refused::Malformed;
    let g = &f[ETH_BYTES..];
    if g.len() < IPV6_BYTES + BTH_BYTES + ICRC_BYTES || g[0] >> 4 != 6 || g[6] != GRH_NEXT_BTH {
        return Err(Malformed);
    }
    let total = IPV6_BYTES + usize::from(be16(g, 4));
    if total > g.len() || total < IPV6_BYTES + BTH_BYTES + ICRC_BYTES {
        return Err(Malformed);
    }
    let mut r = Route {
        v1: true,
        ..Route::default()
    };
    r.dmac.copy_from_slice(&f[..6]);
    r.smac.copy_from_slice(&f[6..12]);
    take_ipv6(g, &mut r);
    Ok((r, &g[..total]))
}

/// The IP layer of a frame: `(ipv4, header bytes, route, transport bytes incl. ICRC)`.
fn l3(f: &[u8]) -> Result<(bool, usize, Route, &[u8]), Refused> {
    use Refused::Malformed;
    if f.len() < ETH_BYTES + IPV4_BYTES + UDP_BYTES + BTH_BYTES + ICRC_BYTES {
        return Err(Malformed);
    }
    let mut r = Route::default();
    r.dmac.copy_from_slice(&f[..6]);
    r.smac.copy_from_slice(&f[6..12]);
    let ip = &f[ETH_BYTES..];
    let (ipv4, hlen, total) = match be16(f, 12) {
        ETHERTYPE_IPV4 => {
            if ip[0] != 0x45 || ip[9] != 17 || super::packet::checksum(&ip[..IPV4_BYTES]) != 0 {
                return Err(Malformed);
            }
            if be16(ip, 6) & 0x3fff != 0 {
                return Err(Malformed);
            }
            r.tclass = ip[1];
            r.ip_id = be16(ip, 4);
            r.hop_limit = ip[8];
            r.sgid[10..12].fill(0xff);
            r.dgid[10..12].fill(0xff);
            r.sgid[12..].copy_from_slice(&ip[12..16]);
            r.dgid[12..].copy_from_slice(&ip[16..20]);
            (true, IPV4_BYTES, usize::from(be16(ip, 2)))
        }
        ETHERTYPE_IPV6 => {
            if ip.len() < IPV6_BYTES + UDP_BYTES || ip[0] >> 4 != 6 || ip[6] != 17 {
                return Err(Malformed);
            }
            take_ipv6(ip, &mut r);
            (false, IPV6_BYTES, IPV6_BYTES + usize::from(be16(ip, 4)))
        }
        _ => return Err(Malformed),
    };
    if total > ip.len() || total < hlen + UDP_BYTES + BTH_BYTES + ICRC_BYTES {
        return Err(Malformed);
    }
    let udp = &ip[hlen..total];
    if be16(udp, 2) != ROCE_PORT || usize::from(be16(udp, 4)) != udp.len() {
        return Err(Malformed);
    }
    r.sport = be16(udp, 0);
    Ok((ipv4, hlen, r, &ip[..total]))
}

/// Takes a frame from the wire apart (see the module documentation for what is refused).
pub(crate) fn decode(f: &[u8]) -> Result<Received<'_>, Refused> {
    if f.len() >= ETH_BYTES && be16(f, 12) == ETHERTYPE_ROCE_V1 {
        let (route, g) = grh(f)?;
        let body = g.len() - ICRC_BYTES;
        let mut crc = [0u8; 4];
        crc.copy_from_slice(&g[body..]);
        if u32::from_le_bytes(crc) != icrc::icrc_v1(&g[..body]) {
            return Err(Refused::Icrc);
        }
        let packet = parse_transport(&g[IPV6_BYTES..body]).ok_or(Refused::Malformed)?;
        return Ok(Received {
            route,
            ipv4: false,
            ip_header: &g[..IPV6_BYTES],
            packet,
        });
    }
    let (ipv4, hlen, route, ip) = l3(f)?;
    let body = ip.len() - ICRC_BYTES;
    let mut crc = [0u8; 4];
    crc.copy_from_slice(&ip[body..]);
    if u32::from_le_bytes(crc) != icrc::icrc(&ip[..body], ipv4) {
        return Err(Refused::Icrc);
    }
    let t = &ip[hlen + UDP_BYTES..body];
    let packet = parse_transport(t).ok_or(Refused::Malformed)?;
    Ok(Received {
        route,
        ipv4,
        ip_header: &ip[..hlen],
        packet,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corruption() {
        let mut route = Route {
            smac: [2, 0, 0, 0, 0, 1],
            dmac: [2, 0, 0, 0, 0, 2],
            tclass: 0x68,
            flow_label: 0x12345,
            hop_limit: 9,
            sport: 0xc123,
            ..Route::default()
        };
        route.sgid = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
        route.dgid = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 9, 9, 9, 9, 9, 9, 9, 9];
        let p = Packet {
            opcode: op::RC | op::WRITE_ONLY_IMM,
            se: true,
            dqpn: 0x123,
            ack_req: true,
            psn: 0xff_fffe,
            reth: Some(Reth {
                va: 0x1234_5678_9abc,
                rkey: 0x4567,
                len: 5,
            }),
            imm: Some([1, 2, 3, 4]),
            payload: &[9, 8, 7, 6, 5],
            ..Packet::default()
        };
        let f = encode(&route, &p);
        let got = decode(&f).unwrap();
        assert_eq!(got.packet, p);
        assert!(!got.ipv4);
        assert_eq!(got.route.sgid, route.sgid);
        assert_eq!(got.route.flow_label, 0x12345);
        for at in [ETH_BYTES + 30, f.len() - 9, f.len() - 1] {
            let mut bad = f.clone();
            bad[at] ^= 0x10;
            assert_eq!(decode(&bad), Err(Refused::Icrc), "byte {at}");
        }
        // Variant fields may change in flight.
        let mut hop = f.clone();
        hop[ETH_BYTES + 7] = 1;
        assert!(decode(&hop).is_ok());
        assert_eq!(decode(&f[..f.len() - 1]), Err(Refused::Malformed));
    }

    /// XRC: a request carries its XRC SRQ in an XRCETH between the BTH and the RETH; a
    /// response does not.
    #[test]
    fn xrc_requests_carry_an_xrceth() {
        let route = Route::default();
        let write = Packet {
            opcode: op::XRC | op::WRITE_ONLY,
            dqpn: 0x321,
            psn: 7,
            xrc_srqn: Some(0xab_cdef),
            reth: Some(Reth {
                va: 0x1000,
                rkey: 0x99,
                len: 3,
            }),
            payload: &[1, 2, 3],
            ..Packet::default()
        };
        let f = encode(&route, &write);
        let t = &f[ETH_BYTES + IPV6_BYTES + UDP_BYTES..];
        assert_eq!(t[0], 0xaa, "XRC RDMA WRITE only");
        assert_eq!(&t[BTH_BYTES..BTH_BYTES + 4], &[0, 0xab, 0xcd, 0xef]);
        assert_eq!(&t[BTH_BYTES + 4..BTH_BYTES + 12], &0x1000u64.to_be_bytes());
        assert_eq!(decode(&f).unwrap().packet, write);
        let ack = Packet {
            opcode: op::XRC | op::ACK,
            dqpn: 0x123,
            psn: 7,
            aeth: Some((aeth::ACK | aeth::NO_CREDITS, 1)),
            ..Packet::default()
        };
        let f = encode(&route, &ack);
        assert_eq!(
            f.len(),
            ETH_BYTES + IPV6_BYTES + UDP_BYTES + BTH_BYTES + 4 + ICRC_BYTES
        );
        assert_eq!(decode(&f).unwrap().packet, ack);
    }

    /// DC (the simulator's encoding): a request carries a 12-byte DCETH (key, connect flag,
    /// DCI) after the BTH; a response none.
    #[test]
    fn dc_requests_carry_a_dceth() {
        let route = Route::default();
        let send = Packet {
            opcode: op::DC | op::SEND_ONLY,
            dqpn: 0x300,
            psn: 9,
            dceth: Some(Dceth {
                key: 0xbadc0de,
                connect: true,
                dci: 0x12_3456,
            }),
            payload: &[7; 5],
            ..Packet::default()
        };
        let f = encode(&route, &send);
        let t = &f[ETH_BYTES + IPV6_BYTES + UDP_BYTES..];
        assert_eq!(t[0], 0xc4, "DC SEND only");
        assert_eq!(&t[BTH_BYTES..BTH_BYTES + 8], &0xbadc0deu64.to_be_bytes());
        assert_eq!(&t[BTH_BYTES + 8..BTH_BYTES + 12], &[0x80, 0x12, 0x34, 0x56]);
        assert_eq!(decode(&f).unwrap().packet, send);
        let ack = Packet {
            opcode: op::DC | op::ACK,
            dqpn: 0x12_3456,
            psn: 9,
            aeth: Some((aeth::ACK | aeth::NO_CREDITS, 1)),
            ..Packet::default()
        };
        let f = encode(&route, &ack);
        assert_eq!(
            f.len(),
            ETH_BYTES + IPV6_BYTES + UDP_BYTES + BTH_BYTES + 4 + ICRC_BYTES
        );
        assert_eq!(decode(&f).unwrap().packet, ack);
    }

    /// A RoCE (v1) frame: ethertype 0x8915, a GRH with next header 0x1b, the BTH right after
    /// it, no UDP; it decodes to the same packet and route, its ICRC covers the GRH and the
    /// transport with the GRH's traffic class, flow label and hop limit masked.
    #[test]
    fn roce_v1_round_trip_and_corruption() {
        let mut route = Route {
            smac: [2, 0, 0, 0, 0, 1],
            dmac: [2, 0, 0, 0, 0, 2],
            tclass: 0x20,
            flow_label: 0x54321,
            hop_limit: 1,
            v1: true,
            ..Route::default()
        };
        route.sgid = [
            0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0xc5, 0x5a, 0xff, 0xfe, 0, 1, 0,
        ];
        route.dgid = [
            0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0xc5, 0x5a, 0xff, 0xfe, 0, 1, 1,
        ];
        let p = Packet {
            opcode: op::RC | op::SEND_ONLY,
            dqpn: 0x103,
            ack_req: true,
            psn: 0x7b_a09e,
            payload: &[1; 37],
            ..Packet::default()
        };
        let f = encode(&route, &p);
        assert_eq!(&f[12..14], &[0x89, 0x15], "ethertype");
        assert_eq!(f[ETH_BYTES] >> 4, 6, "GRH IP version");
        assert_eq!(f[ETH_BYTES + 6], 0x1b, "next header: BTH");
        assert_eq!(
            usize::from(u16::from_be_bytes([f[ETH_BYTES + 4], f[ETH_BYTES + 5]])),
            f.len() - ETH_BYTES - IPV6_BYTES,
            "GRH payload length: transport and ICRC"
        );
        assert_eq!(
            f[ETH_BYTES + IPV6_BYTES],
            op::RC | op::SEND_ONLY,
            "BTH after the GRH"
        );
        assert_eq!(
            f.len(),
            ETH_BYTES + IPV6_BYTES + BTH_BYTES + 40 + ICRC_BYTES
        );
        let got = decode(&f).unwrap();
        assert_eq!(got.packet, p);
        assert!(got.route.v1 && !got.ipv4);
        assert_eq!((got.route.sgid, got.route.dgid), (route.sgid, route.dgid));
        assert_eq!(got.ip_header, f[ETH_BYTES..ETH_BYTES + IPV6_BYTES].to_vec());
        // Any covered byte flipped: refused; the masked GRH fields may change in flight.
        for at in [
            ETH_BYTES + 8,
            ETH_BYTES + IPV6_BYTES + 5,
            f.len() - 6,
            f.len() - 1,
        ] {
            let mut bad = f.clone();
            bad[at] ^= 0x04;
            assert_eq!(decode(&bad), Err(Refused::Icrc), "byte {at}");
        }
        for at in [
            ETH_BYTES + 1,
            ETH_BYTES + 3,
            ETH_BYTES + 7,
            ETH_BYTES + IPV6_BYTES + 4,
        ] {
            let mut variant = f.clone();
            variant[at] ^= 0x5a;
            assert!(decode(&variant).is_ok(), "masked byte {at}");
        }
        let mut next = f.clone();
        next[ETH_BYTES + 6] = 17;
        assert_eq!(decode(&next), Err(Refused::Malformed));
        // The same packet as RoCE v2 is another frame with another ICRC.
        let v2 = encode(&Route { v1: false, ..route }, &p);
        assert_ne!(v2[12..14], f[12..14]);
        assert_eq!(decode(&v2).unwrap().packet, p);
    }
}
