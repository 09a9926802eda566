//! The attacker: C's raw QP1 (crafted MADs, from C's address and from addresses C spoofs by
//! putting them in its own GID table) and an external port (raw frames). Each window is one
//! kind of attack on A or B, accounted for on its own: the MADs and frames it sent, against the
//! counters of the CMs, the devices and the port.

use super::common::cm::send as send_mad;
use super::common::wire;
use super::common::Dev;
use super::exposed::{b_regions, Exposed};
use super::frames::{self, pick, Aim, Out};
use super::legit::{Pingpong, Rping};
use super::port::{Ext, Snap};
use super::{buckets, App, Net, Rng, IP_A, IP_B, IP_C};
use super::{PORT_A, PORT_B};
use mlx5::cm::{mapped, CmId, Gsi, MadAddr};
use mlx5::raw::mad::{attr, dreq, hdr, ids, msg, rej, req, Mad};
use mlx5::sim::{DatapathCounters, ObjectKind};
use mlx5::{GidEntry, SimPlatform};

/// The GID indices on C the spoofed addresses go to.
const SPOOFED: std::ops::RangeInclusive<u8> = 2..=5;

/// What the legitimate side has that the attacker aims around or at.
pub struct Victims<'r, 'a> {
    pub rping: &'r Rping<'a>,
    pub pingpong: &'r Pingpong<'a>,
}

/// The counters of one CM and its application that MADs move.
#[derive(Debug, Clone, Copy)]
struct CmSnap {
    dropped: u64,
    unsent: u64,
    evicted: u64,
    taken: u64,
    rejected: u64,
    acted: u64,
}

impl CmSnap {
    fn of(a: &App<'_>) -> Self {
        CmSnap {
            dropped: a.cm.dropped,
            unsent: a.cm.unsent,
            evicted: a.cm.evicted,
            taken: a.taken,
            rejected: a.rejected,
            acted: a.acted,
        }
    }
}

/// `a − b`, field by field, of the counters the soak reads.
fn delta(b: &DatapathCounters, a: &DatapathCounters) -> DatapathCounters {
    let mut d = *a;
    d.rx_frames -= b.rx_frames;
    d.tx_frames -= b.tx_frames;
    d.eth_rx_steering_drops -= b.eth_rx_steering_drops;
    d.eth_rx_out_of_buffer -= b.eth_rx_out_of_buffer;
    d.eth_rx_delivered -= b.eth_rx_delivered;
    d.eth_rx_errors -= b.eth_rx_errors;
    d.eth_rx_self_lb_blocked -= b.eth_rx_self_lb_blocked;
    d.rx_malformed -= b.rx_malformed;
    d.rx_not_ours -= b.rx_not_ours;
    d.rx_icrc_errors -= b.rx_icrc_errors;
    d.rx_dropped -= b.rx_dropped;
    d
}

/// Every MAD `x`'s CM took in (`delivered`), and every one the attack made its application
/// send (REJs of strangers) or the CM send on its own (REJs of evicted REQs), is accounted
/// for: taken as a REQ, acted on, dropped, answered (`answers`: what reached C), or unsent.
fn cm_books(what: &str, app: &App<'_>, b: CmSnap, delivered: u64, answers: u64) {
    let a = CmSnap::of(app);
    let lhs = delivered + (a.evicted - b.evicted) + (a.rejected - b.rejected);
    let rhs = (a.taken - b.taken)
        + (a.acted - b.acted)
        + (a.dropped - b.dropped)
        + (a.unsent - b.unsent)
        + answers;
    assert_eq!(
        lhs, rhs,
        "{what} at {}: {delivered} MADs delivered, {answers} answers reached C; before \
         {b:?}, after {a:?}",
        app.name
    );
}

pub struct Attacker<'a> {
    pub ext: Ext,
    gsi: Gsi<'a, SimPlatform>,
    c: &'a Dev,
    exposed: Exposed<'a>,
    /// Comm IDs, addresses: each used once.
    next_id: u32,
    next_addr: u32,
    pub mads: u64,
    /// MADs C's QP1 received (answers).
    c_got: u64,
}

impl<'a> Attacker<'a> {
    pub fn new(
        net: &Net<'a>,
        gsi: Gsi<'a, SimPlatform>,
        cq_b: &'a mlx5::cq::Cq<'a, SimPlatform>,
        rng: &mut Rng,
    ) -> Self {
        let exposed = Exposed::new(net.devs[1], cq_b, rng);
        let mut at = Attacker {
            ext: Ext::new(net.fabric),
            gsi,
            c: net.devs[2],
            exposed,
            next_id: 0x0bad_0000,
            next_addr: 0,
            mads: 0,
            c_got: 0,
        };
        at.spoof(rng);
        at
    }

    fn drain_c(&mut self) {
        while self.gsi.recv().unwrap().is_some() {
            self.c_got += 1;
        }
    }

    fn id(&mut self) -> u32 {
        self.next_id = self.next_id.wrapping_add(1);
        self.next_id
    }

    /// Fresh spoofed addresses in C's GID table (indices 2 to 5; 1 is C's own address).
    fn spoof(&mut self, rng: &mut Rng) {
        let mac = self.c.vport().mac;
        for i in SPOOFED {
            let ip = [10, 66, rng.next() as u8, rng.next() as u8];
            self.c
                .set_gid(u16::from(i), Some(GidEntry::ipv4(ip, mac)))
                .unwrap();
        }
    }

    /// Sends `m` to QP1 of NIC `x` from C's GID `sgid`.
    fn to(&mut self, net: &Net<'_>, x: usize, sgid: u8, m: &Mad) {
        let to = MadAddr {
            gid: mapped([IP_A, IP_B][x]),
            mac: net.mac(x),
            sgid_index: sgid,
            hop_limit: 64,
            traffic_class: 0,
        };
        self.c_got += send_mad(&mut self.gsi, &to, m) as u64;
        self.mads += 1;
    }

    /// A REQ with the longest timers for `x`'s port (or another, or a wrong transport or
    /// MTU), from C or a spoofed address.
    fn greedy(&mut self, x: usize, rng: &mut Rng) -> (Mad, u8) {
        let sgid = if rng.chance(50) {
            1
        } else {
            pick(rng, &[2, 3, 4, 5])
        };
        let from = if sgid == 1 {
            IP_C
        } else {
            let g = self.c.gid(u16::from(sgid)).unwrap().gid;
            [g[12], g[13], g[14], g[15]]
        };
        let port = if rng.chance(85) {
            [PORT_A, PORT_B][x]
        } else {
            rng.below(65536) as u16
        };
        let id = self.id();
        let mut m = super::common::cm::greedy_req(port, id, from);
        m.set(req::LOCAL_CA_GUID, rng.next());
        if rng.chance(30) {
            m.set(req::REMOTE_CM_RESPONSE_TIMEOUT, rng.below(32));
            m.set(req::MAX_CM_RETRIES, rng.below(16));
        }
        match rng.below(20) {
            0 => m.set(req::TRANSPORT, 1 + rng.below(3)),
            1 => m.set(req::PATH_MTU, pick(rng, &[0, 6, 7, 15])),
            _ => {}
        }
        (m, sgid)
    }

    /// A storm of REQs at B's listening CM, unaccounted (it lands in the middle of the
    /// legitimate handshake).
    pub fn storm(&mut self, net: &Net<'_>, x: usize, rng: &mut Rng) {
        self.spoof(rng);
        for _ in 0..8 + rng.below(40) {
            let (m, sgid) = self.greedy(x, rng);
            self.to(net, x, sgid, &m);
        }
    }

    /// A REJ naming both comm IDs of the legitimate connection (an insider's, or one who read
    /// them off the wire), to B.
    pub fn rej_both_ids(&mut self, net: &Net<'_>, id_a: CmId, id_b: CmId) {
        let mut j = Mad::cm(attr::REJ, 0x1357);
        j.set(rej::LOCAL_COMM_ID, u64::from(id_a.0));
        j.set(rej::REMOTE_COMM_ID, u64::from(id_b.0));
        j.set(rej::MESSAGE_REJECTED, msg::OTHER);
        j.set(rej::REASON, 28);
        self.to(net, 1, 1, &j);
    }

    /// The MADs of one CM window at `x`; `ours` the legitimate connection's IDs at `x` (ours,
    /// the peer's) if one is up.
    fn mads_for(
        &mut self,
        kind: &str,
        x: usize,
        ours: Option<(CmId, CmId)>,
        rng: &mut Rng,
    ) -> Vec<(Mad, u8)> {
        let n = 1 + rng.below(48);
        let mut out = Vec::new();
        for _ in 0..n {
            let sgid = if rng.chance(60) {
                1
            } else {
                pick(rng, &[2, 3, 4, 5])
            };
            let (local, remote) = (self.id(), rng.next() as u32);
            // Half the IDs of the legitimate connection: our ID, a wrong one for the peer.
            let half = ours.filter(|_| rng.chance(30)).map(|(o, _)| o.0);
            let m = match kind {
                "req storm" => {
                    out.push(self.greedy(x, rng));
                    continue;
                }
                "dreq" => {
                    let mut m = Mad::cm(attr::DREQ, rng.next());
                    m.set(ids::LOCAL_COMM_ID, u64::from(local));
                    m.set(ids::REMOTE_COMM_ID, u64::from(half.unwrap_or(remote)));
                    if let Some((o, p)) = ours.filter(|_| rng.chance(10)) {
                        // Both IDs, but not the QP: dropped.
                        m.set(ids::LOCAL_COMM_ID, u64::from(p.0));
                        m.set(ids::REMOTE_COMM_ID, u64::from(o.0));
                    }
                    m.set(dreq::REMOTE_QPN, rng.below(1 << 24) | 1 << 23);
                    m
                }
                "rej" => {
                    let mut m = Mad::cm(attr::REJ, rng.next());
                    m.set(ids::LOCAL_COMM_ID, u64::from(local));
                    m.set(ids::REMOTE_COMM_ID, u64::from(half.unwrap_or(remote)));
                    m.set(rej::MESSAGE_REJECTED, rng.below(4));
                    let any = rng.below(65536);
                    m.set(rej::REASON, pick(rng, &[1, 3, 4, 8, 28, any]));
                    m.set(rej::REJECT_INFO_LEN, 8);
                    m.0[rej::ARI..][..8].copy_from_slice(&rng.bytes(8));
                    m
                }
                _ => {
                    // Junk: a CM attribute (or not) with a random body; now and then a header
                    // that is not the CM's; RTUs, DREPs, MRAs and REPs for nobody.
                    let a = pick(rng, &[0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x19]);
                    let mut m = Mad::cm(a, rng.next());
                    m.0[24..].copy_from_slice(&rng.bytes(232));
                    if a == attr::REQ && rng.chance(50) {
                        m.set(
                            req::SERVICE_ID,
                            mlx5::raw::mad::service_id([PORT_A, PORT_B][x]),
                        );
                    }
                    if let Some(h) = half {
                        m.set(ids::REMOTE_COMM_ID, u64::from(h));
                    }
                    match rng.below(10) {
                        0 => m.set(hdr::CLASS_VERSION, rng.below(256)),
                        1 => m.set(hdr::MGMT_CLASS, rng.below(256)),
                        2 => m.set(hdr::METHOD, rng.below(256)),
                        _ => {}
                    }
                    m
                }
            };
            out.push((m, sgid));
        }
        out
    }

    /// One window of a random kind; its name.
    pub fn window(
        &mut self,
        net: &Net<'a>,
        apps: &mut [App<'a>; 2],
        v: &Victims<'_, 'a>,
        rng: &mut Rng,
    ) -> &'static str {
        const KINDS: &[&str] = &[
            "req storm",
            "dreq",
            "rej",
            "junk mads",
            "arp",
            "nd",
            "bad icrc",
            "malformed roce",
            "no such qp",
            "wrong service",
            "not ours",
            "random bytes",
            "ip junk",
            "qp1 raw",
            "exposed",
        ];
        let kind = pick(rng, KINDS);
        let x = rng.below(2) as usize;
        match kind {
            "req storm" | "dreq" | "rej" | "junk mads" => {
                self.cm_window(kind, net, apps, v, x, rng)
            }
            _ => self.raw_window(
                kind,
                net,
                apps,
                v,
                if kind == "exposed" { 1 } else { x },
                rng,
            ),
        }
        kind
    }

    fn ours(v: &Victims<'_, '_>, x: usize) -> Option<(CmId, CmId)> {
        v.rping.session.as_ref().map(|s| {
            if x == 0 {
                (s.id_a, s.id_b)
            } else {
                (s.id_b, s.id_a)
            }
        })
    }

    fn cm_window(
        &mut self,
        kind: &str,
        net: &Net<'a>,
        apps: &mut [App<'a>; 2],
        v: &Victims<'_, 'a>,
        x: usize,
        rng: &mut Rng,
    ) {
        self.drain_c();
        self.spoof(rng);
        let mads = self.mads_for(kind, x, Self::ours(v, x), rng);
        let before = net.dp();
        let cm0 = CmSnap::of(&apps[x]);
        let c0 = self.c_got;
        for (m, sgid) in &mads {
            self.to(net, x, *sgid, m);
        }
        let mut legit = Vec::new();
        apps[x].pump(net.now(), &mut legit);
        assert!(
            legit.is_empty(),
            "{kind}: the legitimate connection heard {legit:?}"
        );
        self.drain_c();
        let after = net.dp();
        let d = |i: usize| delta(&before[i], &after[i]);
        let (dx, dy, dc) = (d(x), d(1 - x), d(2));
        let n = mads.len() as u64;
        assert_eq!(dx.rx_frames, n, "{kind}: every MAD reached the NIC");
        assert_eq!(
            buckets(&dx),
            dx.rx_dropped,
            "{kind}: only QP1's full receive queue drops a MAD"
        );
        assert_eq!(dy.rx_frames, 0, "{kind}: the other NIC heard nothing");
        assert_eq!(
            dc.rx_frames,
            self.c_got - c0 + dc.rx_dropped,
            "{kind}: every answer reached C's QP1, or C's NIC counted it"
        );
        cm_books(kind, &apps[x], cm0, n - dx.rx_dropped, dc.rx_frames);
    }

    /// Where the fabric takes a frame: to the NIC with its destination MAC, else (a group, or
    /// nobody's) to every NIC.
    fn route(net: &Net<'_>, f: &[u8]) -> Vec<usize> {
        (0..3)
            .find(|&i| f[..6] == net.mac(i))
            .map_or(vec![0, 1, 2], |i| vec![i])
    }

    fn raw_window(
        &mut self,
        kind: &str,
        net: &Net<'a>,
        apps: &mut [App<'a>; 2],
        v: &Victims<'_, 'a>,
        x: usize,
        rng: &mut Rng,
    ) {
        let live: Vec<u32> = net.sims[x]
            .live_objects()
            .into_iter()
            .filter(|(k, _)| *k == ObjectKind::Qp)
            .map(|(_, q)| q)
            .collect();
        let mut rc: Vec<u32> = v.rping.qpns().map(|q| q[x]).into_iter().collect();
        rc.push(v.pingpong.qpns()[x]);
        let aim = Aim {
            x,
            macs: [net.mac(0), net.mac(1), net.mac(2)],
            gid0s: net.devs.map(|d| d.gid0().unwrap().gid),
            live: &live,
            rc: &rc,
        };
        let outs: Vec<Out> = match kind {
            "arp" => frames::arp(&aim, rng, &mut self.next_addr),
            "nd" => frames::nd(&aim, rng, &mut self.next_addr),
            "bad icrc" => frames::bad_icrc(&aim, rng),
            "malformed roce" => frames::malformed(&aim, rng),
            "no such qp" => frames::no_such_qp(&aim, rng),
            "wrong service" => frames::wrong_service(&aim, rng),
            "not ours" => frames::not_ours(&aim, rng),
            "random bytes" => frames::random_bytes(&aim, rng),
            "ip junk" => frames::ip_junk(&aim, rng),
            "qp1 raw" => {
                let ours = Self::ours(v, x);
                frames::qp1(&aim, rng, |rng| {
                    let k = pick(rng, &["req storm", "dreq", "rej", "junk mads"]);
                    let (m, _) = self.mads_for(k, x, ours, rng).swap_remove(0);
                    m.0.to_vec()
                })
            }
            _ => self.exposed.frames(net, rng),
        };
        self.drain_c();
        // What came out of the port since the last window (the legitimate traffic's
        // broadcasts, answers to earlier junk) is not this window's.
        self.ext.fence();
        let regions = (kind == "exposed").then(|| b_regions(v));
        let (before, e0, cm0, c0) = (net.dp(), self.ext.snap(), CmSnap::of(&apps[x]), self.c_got);
        for o in &outs {
            self.ext.send(&o.f, o.answered);
            for &(a, m) in &o.learns {
                self.ext.model.learn(a, m);
            }
        }
        let back = self.ext.fence();
        let (after, e1) = (net.dp(), self.ext.snap());
        let aimed = matches!(kind, "exposed" | "qp1 raw").then_some(x);
        self.books(kind, net, &outs, &back, aimed, (&before, &after), (e0, e1));
        if kind == "qp1 raw" {
            // QP1 of `x` holds what the device took; its CM takes it in now.
            let processed =
                after[x].rx_frames - before[x].rx_frames - buckets(&delta(&before[x], &after[x]));
            let mut legit = Vec::new();
            apps[x].pump(net.now(), &mut legit);
            assert!(
                legit.is_empty(),
                "{kind}: the legitimate connection heard {legit:?}"
            );
            self.drain_c();
            let answers = net.dp()[2].rx_frames - after[2].rx_frames;
            assert_eq!(answers, self.c_got - c0, "{kind}: C took every answer");
            cm_books(kind, &apps[x], cm0, processed, answers);
        }
        if let Some(r) = regions {
            assert!(
                r == b_regions(v),
                "the exposed QP reached B's other regions"
            );
            self.exposed.after(net, v);
        }
    }

    /// The accounts of a raw window: the port took every frame, answered what it had to, and
    /// learned every address into a bounded table; the fabric delivered every other frame to
    /// the NICs its destination names; each NIC counted each frame under a drop, a refusal or
    /// its Ethernet queues — except at NIC `aimed`, whose QP the window aims at (the exposed
    /// one, QP1), which takes some.
    #[allow(clippy::too_many_arguments)]
    fn books(
        &self,
        kind: &str,
        net: &Net<'_>,
        outs: &[Out],
        back: &[Vec<u8>],
        aimed: Option<usize>,
        (before, after): (&[DatapathCounters; 3], &[DatapathCounters; 3]),
        (e0, e1): (Snap, Snap),
    ) {
        let whole: Vec<&Out> = outs.iter().filter(|o| o.f.len() >= wire::ETH).collect();
        let answered = outs.iter().filter(|o| o.answered).count() as u64;
        assert_eq!(
            e1.rx - e0.rx,
            whole.len() as u64 + 1,
            "{kind}: the port took every frame"
        );
        let runts = (outs.len() - whole.len()) as u64;
        assert_eq!(e1.runts - e0.runts, runts, "{kind}: and counted every runt");
        assert_eq!(e1.answered - e0.answered, answered + 1, "{kind}: answers");
        let replies = back.iter().filter(|f| is_reply(f)).count() as u64;
        assert_eq!(
            replies, answered,
            "{kind}: the responder's answers came back"
        );
        let held = self.ext.port.neighbours_held();
        assert_eq!(held, self.ext.model.len(), "{kind}: neighbours held");
        assert_eq!(
            e1.evicted, self.ext.model.evicted,
            "{kind}: neighbours evicted"
        );
        assert!(held <= mlx5::sim::MAX_NEIGHBOURS);
        let mut expect = [0u64; 3];
        for o in whole.iter().filter(|o| !o.answered) {
            for i in Self::route(net, &o.f) {
                expect[i] += 1;
            }
        }
        let mut sent = 0;
        for i in 0..3 {
            let d = delta(&before[i], &after[i]);
            sent += d.tx_frames;
            assert_eq!(
                d.rx_frames, expect[i],
                "{kind}: frames delivered to NIC {i}"
            );
            let counted = buckets(&d);
            assert!(
                counted <= d.rx_frames,
                "{kind}: NIC {i} counted {counted} of {d:?}"
            );
            let taken = d.rx_frames - counted;
            if aimed != Some(i) {
                assert_eq!(taken, 0, "{kind}: NIC {i} took frames no QP should: {d:?}");
            }
            let n = whole
                .iter()
                .filter(|o| Self::route(net, &o.f).contains(&i))
                .count() as u64;
            let exact = match kind {
                "bad icrc" => Some(d.rx_icrc_errors),
                "malformed roce" => Some(d.rx_malformed),
                "no such qp" | "wrong service" => Some(d.rx_dropped),
                "not ours" => Some(d.rx_not_ours),
                _ => None,
            };
            if let Some(c) = exact {
                assert_eq!(c, n, "{kind}: NIC {i}: {d:?}");
            }
        }
        assert_eq!(
            sent,
            back.len() as u64 - replies,
            "{kind}: what the NICs sent came out of the port"
        );
    }

    /// Called at the end of each round: C's QP1 drained (answers to the storms and to the
    /// strangers the applications rejected).
    pub fn after_round(&mut self) {
        self.drain_c();
    }

    /// The port's counters, checked once more, for the summary.
    pub fn finish(&mut self, net: &Net<'_>) -> String {
        self.ext.fence();
        let s = self.ext.snap();
        let c = self.ext.port.counters();
        let dropped = c.tx_dropped.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(
            dropped, 0,
            "the attacker's socket took every frame the port sent"
        );
        assert_eq!(s.evicted, self.ext.model.evicted);
        let pkv = net.sims[1].datapath_counters().pkey_violations;
        assert!(
            pkv >= self.exposed.bad_pkeys,
            "every frame with a P_Key not the QP's counted: {pkv} of {}",
            self.exposed.bad_pkeys
        );
        format!(
            "rx {} runts {} answered {} tx {} neighbours held {} (high-water {}/{}) evicted {}; \
             exposed QP: {} windows, reset {} times, {} frames with another P_Key",
            s.rx,
            s.runts,
            s.answered,
            s.tx,
            self.ext.port.neighbours_held(),
            self.ext.model.hwm,
            mlx5::sim::MAX_NEIGHBOURS,
            s.evicted,
            self.exposed.windows,
            self.exposed.resets,
            self.exposed.bad_pkeys
        )
    }
}

/// An ARP reply or a neighbour advertisement (what the responder sends).
fn is_reply(f: &[u8]) -> bool {
    let et = u16::from_be_bytes([f[12], f[13]]);
    (et == wire::ETHERTYPE_ARP && f.get(20..22) == Some(&[0, 2]))
        || (et == wire::ETHERTYPE_IPV6 && f.get(54) == Some(&136))
}
