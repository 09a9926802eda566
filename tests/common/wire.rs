//! Frames written by hand, as a party on the link would write them (issue #26's hostile
//! tests, which put them on a simulated fabric through an external port): ARP (RFC 826), IPv6
//! neighbour discovery (RFC 4861), IPv4 headers, and RoCE v2 packets with the ICRC a receiver
//! checks (IBTA vol. 1 annex A17) — or a wrong one, on purpose.

/// Ethernet header bytes.
pub const ETH: usize = 14;
/// Where the BTH of a RoCE v2 frame over IPv4 starts (Ethernet, IPv4, UDP).
pub const BTH_AT: usize = ETH + 20 + 8;
pub const ETHERTYPE_IPV4: u16 = 0x0800;
pub const ETHERTYPE_ARP: u16 = 0x0806;
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
/// The RoCE v2 UDP destination port.
pub const ROCE_PORT: u16 = 4791;
pub const BROADCAST: [u8; 6] = [0xff; 6];

/// The 16-bit one's complement sum of `b` (big-endian words, an odd byte padded) plus `sum`.
pub fn ones_sum(b: &[u8], mut sum: u64) -> u64 {
    let mut c = b.chunks_exact(2);
    for w in &mut c {
        sum += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = c.remainder() {
        sum += u64::from(*last) << 8;
    }
    sum
}

/// A one's complement sum folded to 16 bits.
pub fn fold(mut sum: u64) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// An Ethernet II header.
pub fn eth(dmac: [u8; 6], smac: [u8; 6], ethertype: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(128);
    f.extend_from_slice(&dmac);
    f.extend_from_slice(&smac);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

/// An IPv4 header without options (don't-fragment set), its checksum right, announcing
/// `payload` bytes after it.
pub fn ipv4(src: [u8; 4], dst: [u8; 4], proto: u8, id: u16, payload: usize) -> [u8; 20] {
    let mut h = [0u8; 20];
    h[0] = 0x45;
    h[2..4].copy_from_slice(&((20 + payload) as u16).to_be_bytes());
    h[4..6].copy_from_slice(&id.to_be_bytes());
    h[6] = 0x40;
    h[8] = 64;
    h[9] = proto;
    h[12..16].copy_from_slice(&src);
    h[16..20].copy_from_slice(&dst);
    let c = !fold(ones_sum(&h, 0));
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h
}

/// An ARP frame (`op` 1 request, 2 reply) from `smac`/`sip` about `tip` (`tmac` the target
/// hardware address field); a request is broadcast, a reply goes to `tmac`. Padded to 60.
pub fn arp(op: u16, smac: [u8; 6], sip: [u8; 4], tmac: [u8; 6], tip: [u8; 4]) -> Vec<u8> {
    let dst = if op == 1 { BROADCAST } else { tmac };
    let mut f = eth(dst, smac, ETHERTYPE_ARP);
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4]);
    f.extend_from_slice(&op.to_be_bytes());
    f.extend_from_slice(&smac);
    f.extend_from_slice(&sip);
    f.extend_from_slice(&tmac);
    f.extend_from_slice(&tip);
    f.resize(60, 0);
    f
}

/// A neighbour solicitation (135, to `target`'s solicited-node group, with a source
/// link-layer option) or an unsolicited advertisement (136, to all nodes, with a target
/// link-layer option) from `smac`/`src` about `target`; the ICMPv6 checksum right.
pub fn neighbour(kind: u8, smac: [u8; 6], src: [u8; 16], target: [u8; 16]) -> Vec<u8> {
    let (dmac, dst, option, flags) = if kind == 135 {
        let mut g = [0u8; 16];
        g[..2].copy_from_slice(&[0xff, 0x02]);
        g[11..13].copy_from_slice(&[1, 0xff]);
        g[13..].copy_from_slice(&target[13..]);
        (
            [0x33, 0x33, 0xff, target[13], target[14], target[15]],
            g,
            1,
            0,
        )
    } else {
        let mut g = [0u8; 16];
        g[..2].copy_from_slice(&[0xff, 0x02]);
        g[15] = 1;
        ([0x33, 0x33, 0, 0, 0, 1], g, 2, 0x20)
    };
    let mut f = eth(dmac, smac, ETHERTYPE_IPV6);
    let mut v6 = [0u8; 40];
    v6[0] = 0x60;
    v6[4..6].copy_from_slice(&32u16.to_be_bytes());
    v6[6] = 58;
    v6[7] = 255;
    v6[8..24].copy_from_slice(&src);
    v6[24..40].copy_from_slice(&dst);
    let mut icmp = [0u8; 32];
    icmp[0] = kind;
    icmp[4] = flags;
    icmp[8..24].copy_from_slice(&target);
    icmp[24] = option;
    icmp[25] = 1;
    icmp[26..32].copy_from_slice(&smac);
    let pseudo = ones_sum(&v6[8..40], 58 + icmp.len() as u64);
    let c = !fold(ones_sum(&icmp, pseudo));
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&v6);
    f.extend_from_slice(&icmp);
    f
}

/// CRC-32 (IEEE 802.3: reflected 0xEDB88320, initial value and final XOR all ones).
pub fn crc32(bytes: &[u8]) -> u32 {
    static TABLE: std::sync::OnceLock<[u32; 256]> = std::sync::OnceLock::new();
    let t = TABLE.get_or_init(|| {
        let mut t = [0u32; 256];
        for (i, e) in t.iter_mut().enumerate() {
            let mut c = i as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0xedb8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
            *e = c;
        }
        t
    });
    !bytes
        .iter()
        .fold(!0u32, |c, &b| t[usize::from((c as u8) ^ b)] ^ (c >> 8))
}

/// The ICRC of a RoCE v2 packet over IPv4: `ip` runs from the IP header to the end of the
/// transport (pad included, ICRC not). Eight bytes of ones (the masked LRH) go first; IPv4
/// TOS, TTL and checksum, the UDP checksum and the BTH's reserved byte count as ones.
pub fn icrc_v4(ip: &[u8]) -> u32 {
    let mut m = vec![0xff; 8];
    m.extend_from_slice(ip);
    for at in [1, 8, 10, 11, 20 + 6, 20 + 7, 28 + 4] {
        if let Some(b) = m.get_mut(8 + at) {
            *b = 0xff;
        }
    }
    crc32(&m)
}

/// A RoCE v2 packet over IPv4, field by field; [`RoceV2::frame`] writes it with its ICRC.
#[derive(Debug, Clone, Default)]
pub struct RoceV2 {
    pub dmac: [u8; 6],
    pub smac: [u8; 6],
    pub src: [u8; 4],
    pub dst: [u8; 4],
    pub sport: u16,
    pub opcode: u8,
    /// Pad count (BTH), the pad bytes appended after the payload.
    pub pad: u8,
    pub dqpn: u32,
    pub ack_req: bool,
    pub psn: u32,
    /// The BTH P_Key; `None`: the default, 0xffff.
    pub pkey: Option<u16>,
    /// Extension headers (RETH, DETH, AETH...), as bytes.
    pub ext: Vec<u8>,
    pub payload: Vec<u8>,
}

impl RoceV2 {
    /// The frame: Ethernet, IPv4, UDP (no checksum), BTH, extension headers, payload, pad,
    /// ICRC.
    pub fn frame(&self) -> Vec<u8> {
        let t_len = 12 + self.ext.len() + self.payload.len() + usize::from(self.pad & 3);
        let udp_len = 8 + t_len + 4;
        let mut f = eth(self.dmac, self.smac, ETHERTYPE_IPV4);
        f.extend_from_slice(&ipv4(self.src, self.dst, 17, self.psn as u16, udp_len));
        f.extend_from_slice(&self.sport.to_be_bytes());
        f.extend_from_slice(&ROCE_PORT.to_be_bytes());
        f.extend_from_slice(&(udp_len as u16).to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.push(self.opcode);
        f.push((self.pad & 3) << 4);
        f.extend_from_slice(&self.pkey.unwrap_or(0xffff).to_be_bytes());
        f.push(0);
        f.extend_from_slice(&self.dqpn.to_be_bytes()[1..]);
        f.push(if self.ack_req { 0x80 } else { 0 });
        f.extend_from_slice(&self.psn.to_be_bytes()[1..]);
        f.extend_from_slice(&self.ext);
        f.extend_from_slice(&self.payload);
        f.resize(f.len() + usize::from(self.pad & 3), 0);
        let crc = icrc_v4(&f[ETH..]);
        f.extend_from_slice(&crc.to_le_bytes());
        f
    }
}

/// RETH: remote address, rkey, length.
pub fn reth(va: u64, rkey: u32, len: u32) -> Vec<u8> {
    [
        &va.to_be_bytes()[..],
        &rkey.to_be_bytes(),
        &len.to_be_bytes(),
    ]
    .concat()
}

/// DETH: Q_Key and source QP.
pub fn deth(qkey: u32, sqpn: u32) -> Vec<u8> {
    [&qkey.to_be_bytes()[..], &sqpn.to_be_bytes()].concat()
}

/// AETH: syndrome and MSN.
pub fn aeth(syndrome: u8, msn: u32) -> Vec<u8> {
    [&[syndrome][..], &msn.to_be_bytes()[1..]].concat()
}

/// AtomicETH: remote address, rkey, swap (or add) and compare operands.
pub fn atomic_eth(va: u64, rkey: u32, swap_add: u64, compare: u64) -> Vec<u8> {
    [
        &va.to_be_bytes()[..],
        &rkey.to_be_bytes(),
        &swap_add.to_be_bytes(),
        &compare.to_be_bytes(),
    ]
    .concat()
}

/// Sends `frames` raw (no offload: the bytes as given) from `dev` through an SQ of its own,
/// one doorbell each.
pub fn send_raw(dev: &super::Dev, frames: &[Vec<u8>]) {
    send_with(dev, frames, false)
}

/// Sends `frames` (at most 16) from `dev` through an SQ of its own behind one doorbell, the
/// device filling their IPv4 and L4 checksums: a burst, as a peer's NIC puts one on the wire.
pub fn send_burst(dev: &super::Dev, frames: &[Vec<u8>]) {
    send_with(dev, frames, true)
}

fn send_with(dev: &super::Dev, frames: &[Vec<u8>], burst: bool) {
    use mlx5::mr::MrAccess;
    use mlx5::qp::Sge;
    use mlx5::raw::eth::{Checksum, EthSq, EthWr, Tis, TransportDomain, L2_INLINE};
    let td = TransportDomain::alloc(dev).unwrap();
    let tis = Tis::create(dev, &td).unwrap();
    let cq = dev.create_cq(64).unwrap();
    let mut sq = EthSq::create(dev, &cq, &tis, 16).unwrap();
    let mr = dev
        .alloc_mr(dev.pd(), 16 * 2048, MrAccess::default())
        .unwrap();
    let sges: Vec<[Sge; 1]> = frames
        .iter()
        .enumerate()
        .map(|(k, f)| {
            mr.write(k * 2048, &f[L2_INLINE..]).unwrap();
            [Sge {
                addr: mr.addr() + (k * 2048) as u64,
                length: (f.len() - L2_INLINE) as u32,
                lkey: mr.lkey(),
            }]
        })
        .collect();
    let wrs: Vec<EthWr<'_>> = frames
        .iter()
        .zip(&sges)
        .enumerate()
        .map(|(k, (f, sge))| EthWr {
            wr_id: k as u64,
            headers: &f[..L2_INLINE],
            payload: sge,
            checksum: if burst { Checksum::ALL } else { Checksum::NONE },
            vlan: None,
            tso_mss: None,
            signaled: !burst || k + 1 == frames.len(),
        })
        .collect();
    if burst {
        sq.post_send(&wrs).unwrap();
        super::wait(&cq, dev, 1);
    } else {
        for wr in &wrs {
            sq.post_send(std::slice::from_ref(wr)).unwrap();
            super::wait(&cq, dev, 1);
        }
    }
    sq.destroy().unwrap();
    tis.destroy().unwrap();
    td.dealloc().unwrap();
    mr.dereg().unwrap();
    cq.destroy().unwrap();
}

/// An IPv4 frame from 10.0.0.9 to 10.0.0.1 of protocol `proto` with `l4` after the header,
/// its header checksum right.
pub fn ipv4_frame(dst: [u8; 6], src: [u8; 6], proto: u8, l4: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&[8, 0]);
    let total = (20 + l4.len()) as u16;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0, 1, 0x40, 0, 64, proto, 0, 0, 10, 0, 0, 9, 10, 0, 0, 1]);
    let mut s: u32 = f[14..34]
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    f[24..26].copy_from_slice(&(!(s as u16)).to_be_bytes());
    f.extend_from_slice(l4);
    f
}
