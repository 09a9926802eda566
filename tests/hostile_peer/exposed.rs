//! B's RC QP connected to the attacker — a server's connection to a hostile client — and the
//! windows of the soak that abuse it: bad PSNs, wrong rkeys, accesses past the region B
//! granted, unaligned atomics, SENDs without a receive, stray acknowledgements. The attacker
//! knows what each does (the PSN B expects, what the region holds), so every window is checked
//! to the byte and to the QP state; B's other QPs and regions are checked untouched.

use super::attack::Victims;
use super::common::wire;
use super::common::Dev;
use super::frames::{pick, Out};
use super::{Net, Rng, ATTACKER_IP, ATTACKER_MAC, IP_B};
use mlx5::cm::mapped;
use mlx5::ifc::consts::qp_state;
use mlx5::mr::MrAccess;
use mlx5::qp::{ConnectOpts, Qp, QpAttr, QpAttrMask, QpEndpoint, QpState, QpType};
use mlx5::sim::ObjectKind;
use mlx5::{MemoryRegion, SimPlatform};

/// The attacker's QP number on the exposed connection.
const ATTACKER_QPN: u32 = 0x66_6666;

/// B's QP connected to the attacker, its region, and what the attacker knows of them: the PSN
/// B expects, whether the connection is still up, what the region holds.
pub struct Exposed<'a> {
    b: &'a Dev,
    qp: Qp<'a, SimPlatform>,
    mr: MemoryRegion<'a, SimPlatform>,
    epsn: u32,
    alive: bool,
    bytes: Vec<u8>,
    pub windows: u64,
    pub resets: u64,
    /// Frames sent with a P_Key that is not the QP's.
    pub bad_pkeys: u64,
}

impl<'a> Exposed<'a> {
    pub fn new(b: &'a Dev, cq: &'a mlx5::cq::Cq<'a, SimPlatform>, rng: &mut Rng) -> Self {
        let qp = super::common::qp(b, cq, QpType::Rc, super::common::cap(4, 4, 1));
        let mr = b.alloc_mr(b.pd(), 4096, MrAccess::ALL).unwrap();
        mr.write(0, &[0; 4096]).unwrap();
        let mut e = Exposed {
            b,
            qp,
            mr,
            epsn: 0,
            alive: false,
            bytes: vec![0; 4096],
            windows: 0,
            resets: 0,
            bad_pkeys: 0,
        };
        e.connect(rng);
        e
    }

    /// (Again) from RESET to RTS towards the attacker, with new PSNs.
    fn connect(&mut self, rng: &mut Rng) {
        if self.qp.state() != QpState::Reset {
            let a = QpAttr {
                qp_state: Some(QpState::Reset),
                ..QpAttr::default()
            };
            self.qp.modify(&a, QpAttrMask::STATE).unwrap();
            self.resets += 1;
        }
        self.epsn = rng.below(1 << 24) as u32;
        let peer = QpEndpoint {
            qpn: ATTACKER_QPN,
            gid: mapped(ATTACKER_IP),
            mac: ATTACKER_MAC,
            psn: self.epsn,
        };
        let o = ConnectOpts {
            gid_index: 1,
            sq_psn: rng.below(1 << 24) as u32,
            ..ConnectOpts::default()
        };
        self.qp.connect(&peer, &o).unwrap();
        self.alive = true;
    }

    /// The frames of a window on the exposed QP, in order, with what B must make of each: in
    /// sequence, a WRITE within the region lands and a READ is answered; a SEND finds no
    /// receive (RNR); a PSN ahead is NAKed, one behind acknowledged again; a stray ACK is
    /// ignored; a wrong rkey, an access past the region's end or an unaligned atomic ends the
    /// connection (and everything after it is dropped).
    pub fn frames(&mut self, net: &Net<'_>, rng: &mut Rng) -> Vec<Out> {
        self.windows += 1;
        let (base, key) = (self.mr.addr(), self.mr.rkey());
        let live_keys: Vec<u32> = net.sims[1]
            .live_objects()
            .into_iter()
            .filter(|(k, _)| *k == ObjectKind::Mkey)
            .map(|(_, i)| i)
            .collect();
        let mut out = Vec::new();
        for _ in 0..1 + rng.below(30) {
            let mut p = wire::RoceV2 {
                dmac: net.mac(1),
                smac: ATTACKER_MAC,
                src: ATTACKER_IP,
                dst: IP_B,
                sport: 0xc000 | rng.below(0x4000) as u16,
                dqpn: self.qp.qpn(),
                ack_req: true,
                psn: self.epsn,
                ..wire::RoceV2::default()
            };
            let len = 1 + rng.below(256) as usize;
            let off = rng.below((4096 - len) as u64) as usize;
            let write = |p: &mut wire::RoceV2, va: u64, rkey: u32, data: Vec<u8>| {
                p.opcode = 0x0a;
                p.ext = wire::reth(va, rkey, data.len() as u32);
                p.payload = data;
            };
            match rng.below(100) {
                0..=4 => {
                    // In sequence, in bounds, with a P_Key of another partition (0x7fff, a
                    // limited member of the default one, would match the QP's full-member
                    // 0xffff): dropped and counted as a P_Key violation; nothing changes.
                    let data = rng.bytes(len);
                    write(&mut p, base + off as u64, key, data);
                    p.pkey = Some(pick(rng, &[0x7ffe, 0x8001, 0x1234, 0x0000]));
                    self.bad_pkeys += 1;
                }
                5..=34 => {
                    let data = rng.bytes(len);
                    if self.alive {
                        self.bytes[off..off + len].copy_from_slice(&data);
                        self.epsn = (self.epsn + 1) & 0xff_ffff;
                    }
                    write(&mut p, base + off as u64, key, data);
                }
                35..=44 => {
                    let n = 1 + rng.below(1024);
                    p.opcode = 0x0c;
                    p.ext = wire::reth(base + rng.below(4096 - n), key, n as u32);
                    if self.alive {
                        self.epsn = (self.epsn + 1) & 0xff_ffff;
                    }
                }
                45..=54 => {
                    p.opcode = 0x04;
                    p.payload = rng.bytes(len);
                }
                55..=64 => {
                    write(&mut p, base + off as u64, key, rng.bytes(len));
                    p.psn = (self.epsn + 1 + rng.below(1000) as u32) & 0xff_ffff;
                }
                65..=74 => {
                    write(&mut p, base + off as u64, key, rng.bytes(len));
                    p.psn = (self.epsn + (1 << 24) - 1 - rng.below(100) as u32) & 0xff_ffff;
                }
                75..=79 => {
                    p.opcode = 0x11;
                    p.ext = wire::aeth(0x1f, rng.below(1 << 24) as u32);
                    p.psn = rng.below(1 << 24) as u32;
                }
                _ => {
                    let wrong = loop {
                        let k = rng.next() as u32;
                        if !live_keys.contains(&(k >> 8)) {
                            break k;
                        }
                    };
                    match rng.below(4) {
                        0 => write(&mut p, base + off as u64, wrong, rng.bytes(len)),
                        1 => write(&mut p, base + 4096 - len as u64 / 2, key, rng.bytes(len)),
                        2 => {
                            p.opcode = 0x0c;
                            p.ext = wire::reth(base + 4000, key, 200);
                        }
                        _ => {
                            p.opcode = 0x13;
                            let va = base + 8 * rng.below(500) + 1 + rng.below(7);
                            p.ext = wire::atomic_eth(va, key, 1, 2);
                        }
                    }
                    self.alive = false;
                }
            }
            out.push(Out::plain(p.frame()));
        }
        out
    }

    /// After a window on the exposed QP: B's legitimate QPs run on; the exposed QP is alive
    /// or in ERR exactly as the attacker's frames said, its region holds exactly what the
    /// attacker was allowed to write; a dead one was reported on B's async EQ and is
    /// connected again.
    pub fn after(&mut self, net: &Net<'_>, v: &Victims<'_, '_>) {
        let state = net.sims[1].qp_state(self.qp.qpn());
        let want = if self.alive {
            qp_state::RTS
        } else {
            qp_state::ERR
        };
        assert_eq!(state, Some(want as u8), "the exposed QP");
        let mut held = vec![0u8; 4096];
        self.mr.read(0, &mut held).unwrap();
        assert!(
            held == self.bytes,
            "the exposed region holds the attacker's writes, only them"
        );
        let mut rc: Vec<[u32; 2]> = v.rping.qpns().into_iter().collect();
        rc.push(v.pingpong.qpns());
        for (i, q) in rc.into_iter().flat_map(|q| q.into_iter().enumerate()) {
            let s = net.sims[i].qp_state(q);
            assert_eq!(
                s,
                Some(qp_state::RTS as u8),
                "legitimate QP {q:#x} of NIC {i}"
            );
        }
        if !self.alive {
            let mut ev = [mlx5::Event::default(); 8];
            let n = self.b.poll_async_events(&mut ev).unwrap();
            assert!(
                ev[..n].iter().any(|x| x.qpn() == Some(self.qp.qpn())),
                "B's async EQ reported the exposed QP: {:?}",
                &ev[..n]
            );
            for x in &ev[..n] {
                assert_eq!(
                    x.qpn(),
                    Some(self.qp.qpn()),
                    "an event of no QP attacked: {x:?}"
                );
            }
            let mut rng = Rng(u64::from(self.epsn) ^ 0x5eed);
            self.connect(&mut rng);
        }
    }
}

/// B's legitimate regions, byte for byte.
pub fn b_regions(v: &Victims<'_, '_>) -> Vec<Vec<u8>> {
    let mut rs: Vec<&MemoryRegion<'_, SimPlatform>> = v.rping.b_regions().to_vec();
    rs.push(v.pingpong.b_region());
    rs.iter()
        .map(|m| {
            let mut b = vec![0u8; m.len()];
            m.read(0, &mut b).unwrap();
            b
        })
        .collect()
}
