//! The raw frames of each kind of window the attacker writes into the external port, with
//! what the port must do with each (answer it, learn an address from it).

use super::common::wire::{self, RoceV2, BROADCAST, ETH};
use super::{Rng, ATTACKER_IP, ATTACKER_MAC, IP_A, IP_B, IP_C, TCP_A, TCP_B};
use mlx5::cm::{mapped, QP1_QKEY};

/// A frame, and what the port does with it besides forwarding it.
pub struct Out {
    pub f: Vec<u8>,
    /// The responder answers it (and does not forward it).
    pub answered: bool,
    /// Addresses the port learns from it.
    pub learns: Vec<([u8; 16], [u8; 6])>,
}

impl Out {
    pub fn plain(f: Vec<u8>) -> Out {
        Out {
            f,
            answered: false,
            learns: Vec::new(),
        }
    }
}

/// What the attacker aims at: NIC `x` (0 A, 1 B) among the three.
pub struct Aim<'v> {
    pub x: usize,
    pub macs: [[u8; 6]; 3],
    pub gid0s: [[u8; 16]; 3],
    /// Every QP `x` has, and its legitimate RC QPs.
    pub live: &'v [u32],
    pub rc: &'v [u32],
}

impl Aim<'_> {
    pub fn mac(&self) -> [u8; 6] {
        self.macs[self.x]
    }
    pub fn ip(&self) -> [u8; 4] {
        [IP_A, IP_B][self.x]
    }
    pub fn tcp_ip(&self) -> [u8; 4] {
        [TCP_A, TCP_B][self.x]
    }
    /// A QPN `x` does not have (nor QP0 or QP1).
    pub fn stranger_qpn(&self, rng: &mut Rng) -> u32 {
        loop {
            let q = rng.below(1 << 24) as u32;
            if q > 1 && !self.live.contains(&q) {
                return q;
            }
        }
    }
    /// A unicast MAC nobody on the fabric has.
    pub fn nobodys_mac(&self, rng: &mut Rng) -> [u8; 6] {
        loop {
            let mut m = [0u8; 6];
            m.copy_from_slice(&rng.bytes(6));
            m[0] = (m[0] & 0xfe) | 0x02;
            if !self.macs.contains(&m) && m != ATTACKER_MAC {
                return m;
            }
        }
    }
}

/// Opcodes the device implements: RC, UC, UD.
const RC_OPS: &[u8] = &[
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
    0x10, 0x11, 0x12, 0x13, 0x14, 0x16, 0x17,
];
const UC_OPS: &[u8] = &[
    0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x29, 0x2a, 0x2b,
];
const UD_OPS: &[u8] = &[0x64, 0x65];
/// Opcodes it does not: reserved RC codes (not 0x18 and 0x19, the simulator's masked atomics,
/// docs/fields.md "Masked atomics"), UC READ and atomics, UD other than SEND, reserved
/// XRC codes, a reserved code of the simulator's DC service (0xc0, docs/fields.md "DC"), the
/// reserved services.
const UNKNOWN_OPS: &[u8] = &[
    0x15, 0x1a, 0x1c, 0x1f, 0x2c, 0x33, 0x40, 0x44, 0x60, 0x66, 0x6a, 0x80, 0xba, 0xd5, 0xe0, 0xff,
];

pub fn pick<T: Copy>(rng: &mut Rng, xs: &[T]) -> T {
    xs[rng.below(xs.len() as u64) as usize]
}

/// Extension headers and payload that fit opcode `op`.
pub fn shaped(op: u8, rng: &mut Rng) -> (Vec<u8>, Vec<u8>) {
    let data = |rng: &mut Rng| {
        let n = rng.below(300) as usize;
        rng.bytes(n)
    };
    let reth = |rng: &mut Rng| wire::reth(rng.next(), rng.next() as u32, rng.below(4096) as u32);
    if op & 0xe0 == 0x60 {
        let mut ext = wire::deth(rng.next() as u32, rng.below(1 << 24) as u32);
        if op == 0x65 {
            ext.extend_from_slice(&rng.bytes(4));
        }
        return (ext, data(rng));
    }
    match op & 0x1f {
        0x00..=0x02 | 0x04 | 0x07 | 0x08 | 0x0e => (Vec::new(), data(rng)),
        0x03 | 0x05 | 0x09 | 0x16 | 0x17 => (rng.bytes(4), data(rng)),
        0x06 | 0x0a => (reth(rng), data(rng)),
        0x0b => ([reth(rng), rng.bytes(4)].concat(), data(rng)),
        0x0c => (reth(rng), Vec::new()),
        0x0d | 0x0f | 0x10 => (wire::aeth(rng.next() as u8, 0), data(rng)),
        0x11 => (wire::aeth(rng.next() as u8, 0), Vec::new()),
        0x12 => ([wire::aeth(0, 0), rng.bytes(8)].concat(), Vec::new()),
        _ => (
            wire::atomic_eth(rng.next(), rng.next() as u32, rng.next(), rng.next()),
            Vec::new(),
        ),
    }
}

/// A well-formed RoCE v2 packet from the attacker to `x`'s QP `dqpn`.
pub fn packet(aim: &Aim<'_>, rng: &mut Rng, op: u8, dqpn: u32) -> RoceV2 {
    let (ext, payload) = shaped(op, rng);
    RoceV2 {
        dmac: aim.mac(),
        smac: ATTACKER_MAC,
        src: ATTACKER_IP,
        dst: aim.ip(),
        sport: 0xc000 | rng.below(0x4000) as u16,
        opcode: op,
        pad: 0,
        dqpn,
        ack_req: rng.chance(50),
        psn: rng.below(1 << 24) as u32,
        pkey: None,
        ext,
        payload,
    }
}

/// Rewrites the ICRC of `f` after an edit.
pub fn re_icrc(f: &mut [u8]) {
    let n = f.len();
    let crc = wire::icrc_v4(&f[ETH..n - 4]);
    f[n - 4..].copy_from_slice(&crc.to_le_bytes());
}

/// ARP requests and gratuitous replies, each from an address never used before: for the
/// NICs' RoCE addresses (the responder answers), smoltcp's, or anyone's.
pub fn arp(aim: &Aim<'_>, rng: &mut Rng, next: &mut u32) -> Vec<Out> {
    (0..1 + rng.below(200))
        .map(|_| {
            *next += 1;
            let k = next.to_be_bytes();
            let smac = [0x02, 0xaa, k[0], k[1], k[2], k[3]];
            let sip = if rng.chance(30) {
                [192, 168, 7, 10 + (*next % 240) as u8]
            } else {
                [100, 64 + (k[1] & 63), k[2], k[3]]
            };
            let tip = match rng.below(100) {
                0..=24 => pick(rng, &[IP_A, IP_B, IP_C]),
                25..=59 => aim.tcp_ip(),
                _ => [rng.next() as u8, 1, 2, 3],
            };
            let request = rng.chance(80);
            let f = if request {
                wire::arp(1, smac, sip, [0; 6], tip)
            } else {
                let mut f = wire::arp(2, smac, sip, BROADCAST, sip);
                f[..6].copy_from_slice(&BROADCAST);
                f
            };
            Out {
                f,
                answered: request && [IP_A, IP_B, IP_C].contains(&tip),
                learns: vec![(mapped(sip), smac)],
            }
        })
        .collect()
}

/// Neighbour solicitations (for the NICs' link-local GIDs, answered; or for nobody's) and
/// unsolicited advertisements, each about an address never used before; now and then a
/// duplicate address detection probe (from `::`, learned from and answered never).
pub fn nd(aim: &Aim<'_>, rng: &mut Rng, next: &mut u32) -> Vec<Out> {
    (0..1 + rng.below(100))
        .map(|_| {
            *next += 1;
            let k = next.to_be_bytes();
            let smac = [0x02, 0xbb, k[0], k[1], k[2], k[3]];
            let mut addr = [0u8; 16];
            addr[..2].copy_from_slice(&[0xfd, 0x00]);
            addr[12..].copy_from_slice(&k);
            if rng.chance(60) {
                let dad = rng.chance(10);
                let src = if dad { [0; 16] } else { addr };
                let ours = rng.chance(40);
                let target = if ours {
                    aim.gid0s[rng.below(3) as usize]
                } else {
                    let mut t = addr;
                    t[1] = 1;
                    t
                };
                Out {
                    f: wire::neighbour(135, smac, src, target),
                    answered: ours && !dad,
                    learns: if dad { Vec::new() } else { vec![(src, smac)] },
                }
            } else {
                addr[1] = 2;
                Out {
                    f: wire::neighbour(136, smac, addr, addr),
                    answered: false,
                    learns: vec![(addr, smac)],
                }
            }
        })
        .collect()
}

/// Well-formed packets to `x` (its QPs, QP1, or none), then one byte of the transport or of
/// the ICRC changed: the ICRC no longer matches.
pub fn bad_icrc(aim: &Aim<'_>, rng: &mut Rng) -> Vec<Out> {
    (0..1 + rng.below(40))
        .map(|_| {
            let op = pick(rng, &[RC_OPS, UC_OPS, UD_OPS].concat());
            let dqpn = match rng.below(3) {
                0 => pick(rng, aim.live),
                1 => 1,
                _ => rng.below(1 << 24) as u32,
            };
            let mut f = packet(aim, rng, op, dqpn).frame();
            let at = loop {
                let at = wire::BTH_AT + rng.below((f.len() - wire::BTH_AT) as u64) as usize;
                if at != wire::BTH_AT + 4 {
                    break at;
                }
            };
            f[at] ^= 1 << rng.below(8);
            Out::plain(f)
        })
        .collect()
}

/// RoCE v2 frames the device recognises (UDP to 4791) and refuses as malformed: a bad IPv4
/// checksum, IPv4 options, a wrong UDP length, an opcode it does not implement, a nonzero
/// transport version, the transport cut short, an extension header cut short, a pad count
/// past the payload, data after a header-only opcode. Aimed at `x`'s own QPs too.
pub fn malformed(aim: &Aim<'_>, rng: &mut Rng) -> Vec<Out> {
    (0..1 + rng.below(40))
        .map(|_| {
            let dqpn = if rng.chance(50) {
                pick(rng, aim.live)
            } else {
                rng.below(1 << 24) as u32
            };
            let op = pick(rng, RC_OPS);
            let mut p = packet(aim, rng, op, dqpn);
            let f = match rng.below(9) {
                0 => {
                    let mut f = p.frame();
                    f[ETH + 10] ^= 0x40;
                    f
                }
                1 => {
                    let mut f = p.frame();
                    f.splice(ETH + 20..ETH + 20, [1, 1, 1, 0]);
                    f[ETH] = 0x46;
                    let total = u16::from_be_bytes([f[ETH + 2], f[ETH + 3]]) + 4;
                    f[ETH + 2..ETH + 4].copy_from_slice(&total.to_be_bytes());
                    f
                }
                2 => {
                    let mut f = p.frame();
                    let at = ETH + 20 + 4;
                    let len = u16::from_be_bytes([f[at], f[at + 1]]);
                    let wrong = len.wrapping_add(1 + rng.below(8) as u16);
                    f[at..at + 2].copy_from_slice(&wrong.to_be_bytes());
                    f
                }
                3 => {
                    p.opcode = pick(rng, UNKNOWN_OPS);
                    p.frame()
                }
                4 => {
                    let mut f = p.frame();
                    f[wire::BTH_AT + 1] |= 1 + rng.below(15) as u8;
                    re_icrc(&mut f);
                    f
                }
                5 => {
                    // IPv4 and UDP agree on a transport of 0..11 bytes, no ICRC.
                    let k = rng.below(12) as usize;
                    let mut f = p.frame();
                    f.truncate(wire::BTH_AT + k);
                    let ip = (20 + 8 + k) as u16;
                    f[ETH + 2..ETH + 4].copy_from_slice(&ip.to_be_bytes());
                    f[ETH + 10..ETH + 12].fill(0);
                    let c = !wire::fold(wire::ones_sum(&f[ETH..ETH + 20], 0));
                    f[ETH + 10..ETH + 12].copy_from_slice(&c.to_be_bytes());
                    f[ETH + 24..ETH + 26].copy_from_slice(&(8 + k as u16).to_be_bytes());
                    f
                }
                6 => {
                    p.opcode = pick(rng, &[0x06, 0x0a, 0x0c]);
                    p.ext.truncate(8);
                    p.payload.clear();
                    p.frame()
                }
                7 => {
                    p.opcode = 0x04;
                    p.ext.clear();
                    let n = 1 + rng.below(2) as usize;
                    p.payload = rng.bytes(n);
                    let mut f = p.frame();
                    f[wire::BTH_AT + 1] |= 3 << 4;
                    re_icrc(&mut f);
                    f
                }
                _ => {
                    p.opcode = pick(rng, &[0x11, 0x0c, 0x13]);
                    let (ext, _) = shaped(p.opcode, rng);
                    p.ext = ext;
                    let n = 1 + rng.below(64) as usize;
                    p.payload = rng.bytes(n);
                    p.frame()
                }
            };
            Out::plain(f)
        })
        .collect()
}

/// Well-formed packets of every implemented opcode, bad PSNs and keys included, to QPs `x`
/// does not have.
pub fn no_such_qp(aim: &Aim<'_>, rng: &mut Rng) -> Vec<Out> {
    (0..1 + rng.below(40))
        .map(|_| {
            let op = pick(rng, &[RC_OPS, UC_OPS, UD_OPS].concat());
            let q = aim.stranger_qpn(rng);
            Out::plain(packet(aim, rng, op, q).frame())
        })
        .collect()
}

/// UC and UD packets to `x`'s RC QPs, RC and UC packets to its QP1: the wrong service.
pub fn wrong_service(aim: &Aim<'_>, rng: &mut Rng) -> Vec<Out> {
    (0..1 + rng.below(40))
        .map(|_| {
            let f = if rng.chance(60) && !aim.rc.is_empty() {
                let op = pick(rng, &[UC_OPS, UD_OPS].concat());
                let q = pick(rng, aim.rc);
                packet(aim, rng, op, q).frame()
            } else {
                let op = pick(rng, &[RC_OPS, UC_OPS].concat());
                packet(aim, rng, op, 1).frame()
            };
            Out::plain(f)
        })
        .collect()
}

/// RoCE to a unicast MAC nobody has: flooded to every NIC, refused by each.
pub fn not_ours(aim: &Aim<'_>, rng: &mut Rng) -> Vec<Out> {
    (0..1 + rng.below(40))
        .map(|_| {
            let op = pick(rng, RC_OPS);
            let q = pick(rng, aim.live);
            let mut p = packet(aim, rng, op, q);
            p.dmac = aim.nobodys_mac(rng);
            Out::plain(p.frame())
        })
        .collect()
}

/// Random bytes of random lengths (runts among them) to the NICs, to broadcast, to groups and
/// to nobody; never an ARP or IPv6 frame (the port would learn from a lucky one).
pub fn random_bytes(aim: &Aim<'_>, rng: &mut Rng) -> Vec<Out> {
    (0..1 + rng.below(100))
        .map(|_| {
            let len = if rng.chance(10) {
                rng.below(14) as usize
            } else {
                14 + rng.below(1600) as usize
            };
            let mut f = rng.bytes(len);
            if len >= 14 {
                let dmac = match rng.below(6) {
                    0..=2 => aim.macs[rng.below(3) as usize],
                    3 => BROADCAST,
                    4 => [0x01, 0x00, 0x5e, 1, 2, 3],
                    _ => aim.nobodys_mac(rng),
                };
                f[..6].copy_from_slice(&dmac);
                f[6] &= 0xfe;
                if f[6..12] == f[..6] {
                    f[11] ^= 1;
                }
                let et = u16::from_be_bytes([f[12], f[13]]);
                if et == wire::ETHERTYPE_ARP || et == wire::ETHERTYPE_IPV6 {
                    f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
                }
                if rng.chance(20) && len >= 60 {
                    // Looks like RoCE v2 up to the UDP header; random after.
                    f[12..14].copy_from_slice(&wire::ETHERTYPE_IPV4.to_be_bytes());
                    let ip = wire::ipv4(ATTACKER_IP, aim.ip(), 17, 7, len - ETH - 20);
                    f[ETH..ETH + 20].copy_from_slice(&ip);
                    f[ETH + 22..ETH + 24].copy_from_slice(&wire::ROCE_PORT.to_be_bytes());
                    f[ETH + 24..ETH + 26].copy_from_slice(&((len - ETH - 20) as u16).to_be_bytes());
                }
            }
            Out::plain(f)
        })
        .collect()
}

/// An IPv4 frame to `x`'s smoltcp address from `src`, `l4` of protocol `proto` after the
/// header, its TCP or UDP checksum right.
fn ip_frame(aim: &Aim<'_>, src: [u8; 4], proto: u8, mut l4: Vec<u8>) -> Vec<u8> {
    let dst = aim.tcp_ip();
    let at = match proto {
        6 => Some(16),
        17 => Some(6),
        _ => None,
    };
    if let Some(at) = at {
        l4[at..at + 2].fill(0);
        let mut pseudo = wire::ones_sum(&src, 0);
        pseudo = wire::ones_sum(&dst, pseudo) + u64::from(proto) + l4.len() as u64;
        let c = !wire::fold(wire::ones_sum(&l4, pseudo));
        l4[at..at + 2].copy_from_slice(&c.to_be_bytes());
    }
    let mut f = wire::eth(aim.mac(), ATTACKER_MAC, wire::ETHERTYPE_IPV4);
    f.extend_from_slice(&wire::ipv4(src, dst, proto, 9, l4.len()));
    f.extend_from_slice(&l4);
    f
}

/// Junk for the smoltcp stacks, never on the legitimate connection's addresses: SYNs and
/// RSTs with random sequence numbers, UDP to random ports, ICMP echo requests, a segment
/// with a wrong checksum, a fragment, a bad IPv4 header checksum.
pub fn ip_junk(aim: &Aim<'_>, rng: &mut Rng) -> Vec<Out> {
    (0..1 + rng.below(60))
        .map(|_| {
            let src = if rng.chance(50) {
                [192, 168, 7, 10 + rng.below(240) as u8]
            } else {
                [100, 70, rng.next() as u8, rng.next() as u8]
            };
            let sport = 1024 + rng.below(40_000) as u16;
            let tcp = |rng: &mut Rng, flags: u8, dport: u16| {
                let mut t = vec![0u8; 20];
                t[..2].copy_from_slice(&sport.to_be_bytes());
                t[2..4].copy_from_slice(&dport.to_be_bytes());
                t[4..12].copy_from_slice(&rng.bytes(8));
                t[12] = 0x50;
                t[13] = flags;
                t[14..16].copy_from_slice(&8192u16.to_be_bytes());
                t
            };
            let f = match rng.below(7) {
                0 => ip_frame(aim, src, 6, tcp(rng, 0x02, 5000)),
                1 => {
                    let port = rng.below(65536) as u16;
                    let flags = pick(rng, &[0x04, 0x10, 0x14, 0x11]);
                    ip_frame(aim, src, 6, tcp(rng, flags, port))
                }
                2 => {
                    let mut u = vec![0u8; 8 + rng.below(200) as usize];
                    u[..2].copy_from_slice(&sport.to_be_bytes());
                    u[2..4].copy_from_slice(&(rng.below(65536) as u16).to_be_bytes());
                    let n = u.len() as u16;
                    u[4..6].copy_from_slice(&n.to_be_bytes());
                    ip_frame(aim, src, 17, u)
                }
                3 => {
                    let mut i = vec![8, 0, 0, 0, 0x12, 0x34, 0, 1];
                    i.extend_from_slice(&rng.bytes(32));
                    let c = !wire::fold(wire::ones_sum(&i, 0));
                    i[2..4].copy_from_slice(&c.to_be_bytes());
                    ip_frame(aim, src, 1, i)
                }
                4 => {
                    let mut f = ip_frame(aim, src, 6, tcp(rng, 0x02, 5000));
                    f[ETH + 20 + 16] ^= 0x55;
                    f
                }
                5 => {
                    let mut f = ip_frame(aim, src, 17, rng.bytes(64));
                    f[ETH + 6] = 0x20;
                    f[ETH + 10..ETH + 12].fill(0);
                    let c = !wire::fold(wire::ones_sum(&f[ETH..ETH + 20], 0));
                    f[ETH + 10..ETH + 12].copy_from_slice(&c.to_be_bytes());
                    f
                }
                _ => {
                    let mut f = ip_frame(aim, src, 6, tcp(rng, 0x02, 5000));
                    f[ETH + 11] ^= 0x33;
                    f
                }
            };
            Out::plain(f)
        })
        .collect()
}

/// UD SENDs to `x`'s QP1: a 256-byte MAD (`mads` makes it), one shorter, one longer than QP1
/// takes, or with the wrong Q_Key; from C's address (answers reach C) or the attacker's (no
/// next hop is known for it).
pub fn qp1(aim: &Aim<'_>, rng: &mut Rng, mut mad: impl FnMut(&mut Rng) -> Vec<u8>) -> Vec<Out> {
    (0..1 + rng.below(40))
        .map(|_| {
            let mut p = packet(aim, rng, 0x64, 1);
            p.src = if rng.chance(40) { IP_C } else { ATTACKER_IP };
            let qkey = if rng.chance(15) {
                QP1_QKEY ^ (1 + rng.below(0xffff) as u32)
            } else {
                QP1_QKEY
            };
            p.ext = wire::deth(qkey, 1);
            p.payload = match rng.below(100) {
                0..=14 => {
                    let n = rng.below(256) as usize;
                    rng.bytes(n)
                }
                15..=29 => {
                    let n = 257 + rng.below(700) as usize;
                    rng.bytes(n)
                }
                _ => mad(rng),
            };
            Out::plain(p.frame())
        })
        .collect()
}
