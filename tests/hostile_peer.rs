//! The hostile-peer soak of issue #26 (item 4): while legitimate traffic runs between two
//! simulated ConnectX-5s A and B driven by this driver, a third party floods the fabric with
//! random and abusive traffic, round after round, from one seed (printed, so a failure is
//! reproduced with `MLX5_HOSTILE_SEED=<seed> cargo test --test hostile_peer`;
//! `MLX5_HOSTILE_ROUNDS` sets the length, CI runs a long one).
//!
//! Legitimate (`legit.rs`): an rping-like connection A → B made with the connection manager
//! (SENDs, RDMA READ and WRITE, every byte checked, a new session every few rounds), a pingpong
//! on a directly connected RC pair, and a smoltcp TCP stream between Ethernet ports on A and B,
//! every byte checked each way.
//!
//! The attacker (`attack.rs`) has a third simulated NIC C, whose raw QP1 sends crafted MADs
//! (REQ storms with the longest timers, from C's address and from addresses C spoofs; DREQs,
//! REJs and random MADs for unknown IDs and for half of the legitimate connection's IDs), and
//! an external port on the fabric (a unix datagram link), through which it writes raw frames:
//! ARP and neighbour discovery floods announcing a new address each, RoCE v2 with a bad ICRC,
//! truncated or inconsistent headers, unknown opcodes, the wrong service, QPs that do not exist,
//! MADs to QP1 of every length and with the wrong Q_Key, random bytes, TCP/UDP/ICMP junk for
//! the smoltcp stacks, and bad PSNs, wrong rkeys and out-of-bounds accesses on an RC QP of B's
//! that is connected to the attacker (a server's connection to a hostile client).
//!
//! What the attacker does not do: send well-formed transport packets to the legitimate QPs, or
//! a REJ/DREQ naming both of their comm IDs (RoCE and the CM authenticate nothing; whoever
//! knows a QPN and PSN, or both comm IDs, can end a connection — the one spoofed REJ with both
//! IDs, at the end of a session, checks the documented outcome instead), spoof the legitimate
//! hosts' IP or MAC addresses, or guess their rkeys.
//!
//! Pass: the legitimate traffic completes with every byte checked; no panic; each attack is
//! accounted for exactly, window by window (every frame the attacker wrote reached the port,
//! the responder, or a device counter; every MAD reached a CM that took it, answered it,
//! dropped it or counted it unsent, or a device counted it dropped); memory stays bounded (the
//! CM tables within their capacity, the port's neighbour table within MAX_NEIGHBOURS, every
//! half-open REQ forgotten on our clock; the process's high-water mark is printed).

#[path = "hostile_peer/attack.rs"]
mod attack;
mod common;
#[path = "hostile_peer/exposed.rs"]
mod exposed;
#[path = "hostile_peer/frames.rs"]
mod frames;
#[path = "hostile_peer/legit.rs"]
mod legit;
#[path = "hostile_peer/port.rs"]
mod port;

use std::collections::HashMap;
use std::time::Instant;

use common::Dev;
use mlx5::cm::{mapped, Cm, CmConfig, CmEvent, CmId};
use mlx5::sim::{DatapathCounters, Fabric, Mode, SimDevice};
use mlx5::SimPlatform;

pub const IP_A: [u8; 4] = [10, 0, 0, 1];
pub const IP_B: [u8; 4] = [10, 0, 0, 2];
pub const IP_C: [u8; 4] = [10, 0, 0, 3];
/// The attacker's own address on the external link, and its MAC.
pub const ATTACKER_IP: [u8; 4] = [10, 0, 0, 66];
pub const ATTACKER_MAC: [u8; 6] = [0x02, 0x66, 0x66, 0x66, 0x66, 0x66];
/// smoltcp's addresses (another subnet than the RoCE GIDs').
pub const TCP_A: [u8; 4] = [192, 168, 7, 1];
pub const TCP_B: [u8; 4] = [192, 168, 7, 2];
/// The ports B's (rping) and A's CMs listen on.
pub const PORT_B: u16 = 7174;
pub const PORT_A: u16 = 7175;
/// One step of device time in the handshakes' loops.
pub const MS: u64 = 1_000_000;

pub type SimCm<'a> = Cm<'a, SimPlatform>;

/// splitmix64: small, fast, reproducible (as tests/soak.rs).
pub(crate) struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// The byte at `i` of a block drawn from `seed`.
pub fn pattern(seed: u64, i: usize) -> u8 {
    ((i as u64).wrapping_mul(0x9e37_79b9).wrapping_add(seed) >> 11) as u8
}

/// The CM timers of both legitimate sides: a REQ we took waits at most 2 × 2^(14−8) ms × 6 =
/// 768 ms for our answer, whatever it asks for.
pub fn cm_config(dev: &Dev) -> CmConfig {
    CmConfig {
        cm_response_timeout: 14,
        packet_life_time: 8,
        max_cm_retries: 5,
        ..CmConfig::for_device(dev)
    }
}

/// The three NICs on the fabric: A and B legitimate, C the attacker's.
pub(crate) struct Net<'a> {
    pub fabric: &'a Fabric,
    pub sims: [&'a SimDevice; 3],
    pub devs: [&'a Dev; 3],
}

impl Net<'_> {
    pub fn now(&self) -> u64 {
        self.fabric.now_ns()
    }
    pub fn dp(&self) -> [DatapathCounters; 3] {
        self.sims.map(|s| s.datapath_counters())
    }
    pub fn mac(&self, i: usize) -> [u8; 6] {
        self.devs[i].vport().mac
    }
}

/// Every counter a device drops or delivers a received frame under (the rest were taken by a
/// RoCE QP); its own multicast looped back and blocked by its TIRs among them.
pub fn buckets(c: &DatapathCounters) -> u64 {
    c.eth_rx_steering_drops
        + c.eth_rx_out_of_buffer
        + c.eth_rx_delivered
        + c.eth_rx_errors
        + c.eth_rx_self_lb_blocked
        + c.rx_malformed
        + c.rx_not_ours
        + c.rx_icrc_errors
        + c.rx_dropped
}

/// The number of connections in a CM's table (its `Debug` says it).
pub fn occupancy(cm: &SimCm<'_>) -> usize {
    let s = format!("{cm:?}");
    s.split("connections: ")
        .nth(1)
        .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no connection count in {s}"))
}

/// A listening CM and what its application does with what is not its own connection's: REQs
/// from strangers are rejected at once or left to expire (this round's policy), and counted.
pub(crate) struct App<'a> {
    pub cm: SimCm<'a>,
    pub name: &'static str,
    pub reject_strangers: bool,
    /// The legitimate client's source port while a connection to us is being made.
    pub legit_port: Option<u16>,
    /// The legitimate connection's IDs on this side, and those of attempts given up (their
    /// late events are ignored).
    pub legit_ids: Vec<CmId>,
    pub retired: Vec<CmId>,
    /// Strangers' REQs taken (ConnectRequest), rejected by us (REJ attempted), ended by their
    /// peer (a REJ that named them), forgotten (Unreachable: expired or evicted).
    pub taken: u64,
    pub rejected: u64,
    pub acted: u64,
    pub forgotten: u64,
    strangers: HashMap<u32, u64>,
    /// The longest a stranger's REQ was held, and the table's high-water mark.
    pub held_max_ns: u64,
    pub table_hwm: usize,
    cap_ns: u64,
    last_poll_ns: u64,
}

impl<'a> App<'a> {
    pub fn new(cm: SimCm<'a>, name: &'static str) -> Self {
        let cap_ns = mlx5::raw::req_wait_ms(cm.config(), 31, 15) * MS;
        App {
            cm,
            name,
            reject_strangers: false,
            legit_port: None,
            legit_ids: Vec::new(),
            retired: Vec::new(),
            taken: 0,
            rejected: 0,
            acted: 0,
            forgotten: 0,
            strangers: HashMap::new(),
            held_max_ns: 0,
            table_hwm: 0,
            cap_ns,
            last_poll_ns: 0,
        }
    }

    fn is_legit(&self, e: &CmEvent) -> bool {
        match e {
            CmEvent::ConnectRequest(r) => {
                self.legit_port.is_some()
                    && r.remote_gid == mapped(IP_A)
                    && r.cma.map(|h| (h.src_ip, h.dst_ip, h.src_port))
                        == Some((IP_A, IP_B, self.legit_port.unwrap_or(0)))
            }
            e => self.legit_ids.contains(&e.id()),
        }
    }

    /// Polls until the CM is idle (device time standing still) or has an event of the
    /// legitimate connection's (returned in `out`); strangers' events handled meanwhile.
    pub fn pump(&mut self, now: u64, out: &mut Vec<CmEvent>) {
        // A stranger forgotten now expired at most this long before (our clock ran meanwhile
        // without a poll that ran every timer to notice).
        let gap = now.saturating_sub(self.last_poll_ns);
        let mut idle = 0;
        while idle < 6 {
            self.table_hwm = self.table_hwm.max(occupancy(&self.cm));
            let Some(e) = self
                .cm
                .poll()
                .expect("Cm::poll fails on nothing a peer sends")
            else {
                idle += 1;
                continue;
            };
            idle = 0;
            if self.is_legit(&e) {
                // The application acts on it at once (an rping server accepts the REQ before
                // it polls again: an accepted connection is not evicted by a storm).
                out.push(e);
                return;
            }
            if self.retired.contains(&e.id()) {
                continue;
            }
            match e {
                CmEvent::ConnectRequest(r) => {
                    self.taken += 1;
                    if self.reject_strangers {
                        // Gone already if a later REQ of the same poll evicted it.
                        if self.cm.reject(r.id, 28).is_ok() {
                            self.rejected += 1;
                        } else {
                            self.strangers.insert(r.id.0, now);
                        }
                    } else {
                        self.strangers.insert(r.id.0, now);
                    }
                }
                CmEvent::Unreachable { id, .. } => {
                    let born = self.strangers.remove(&id.0).unwrap_or_else(|| {
                        panic!(
                            "{}: Unreachable for a connection nobody made: {e:?}",
                            self.name
                        )
                    });
                    let held = now - born;
                    assert!(
                        held <= self.cap_ns + gap + MS,
                        "{}: a stranger's REQ held {held} ns, past our cap of {} ns (+ {gap} ns \
                         since the last poll)",
                        self.name,
                        self.cap_ns
                    );
                    self.held_max_ns = self.held_max_ns.max(held);
                    self.forgotten += 1;
                }
                CmEvent::Rejected { id, .. } if self.strangers.remove(&id.0).is_some() => {
                    self.acted += 1;
                }
                e => panic!("{}: an event of no connection of ours: {e:?}", self.name),
            }
        }
        self.last_poll_ns = now;
    }

    /// Strangers' REQs still held.
    pub fn strangers(&self) -> usize {
        self.strangers.len()
    }
}

/// What the run did, for the summary line.
#[derive(Default)]
struct Tally {
    windows: std::collections::BTreeMap<&'static str, u64>,
}

/// VmHWM / VmRSS of this process in KiB.
fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|n| n.parse().ok()))
        })
        .unwrap_or(0)
}

#[test]
fn a_hostile_peer_floods_the_fabric_and_the_legitimate_traffic_completes() {
    // smoltcp's interfaces and sockets are large values; a debug build keeps every temporary.
    std::thread::Builder::new()
        .stack_size(32 << 20)
        .spawn(soak)
        .unwrap()
        .join()
        .unwrap();
}

fn soak() {
    let (seed, rounds) = common::seed_and_rounds("MLX5_HOSTILE_SEED", "MLX5_HOSTILE_ROUNDS", 200);
    println!("hostile-peer seed {seed} ({rounds} rounds): MLX5_HOSTILE_SEED={seed} reproduces it");
    let started = Instant::now();
    let mut rng = Rng(seed);
    let fabric = Fabric::new();
    let nodes: Vec<(SimDevice, Dev)> = [IP_A, IP_B, IP_C]
        .iter()
        .map(|&ip| {
            let (s, d) = common::nic(&fabric, Mode::Sync);
            common::cm::with_ip(&d, ip);
            (s, d)
        })
        .collect();
    let net = Net {
        fabric: &fabric,
        sims: [&nodes[0].0, &nodes[1].0, &nodes[2].0],
        devs: [&nodes[0].1, &nodes[1].1, &nodes[2].1],
    };
    let [a, b, _] = net.devs;
    let gsi_bufs: Vec<_> = net
        .devs
        .iter()
        .map(|d| mlx5::cm::GsiBufs::new(d).unwrap())
        .collect();
    let cqs: Vec<_> = (0..10)
        .map(|i| net.devs[i % 2].create_cq(256).unwrap())
        .collect();
    let gsi = |i: usize| mlx5::cm::Gsi::open(net.devs[i], &gsi_bufs[i], 1).unwrap();
    let mut apps = [
        App::new(Cm::new(gsi(0), cm_config(a)), "A"),
        App::new(Cm::new(gsi(1), cm_config(b)), "B"),
    ];
    apps[0].cm.listen(PORT_A).unwrap();
    apps[1].cm.listen(PORT_B).unwrap();
    // Every node knows the others' next hops (as ARP found them), the attacker's C among them.
    for (i, app) in apps.iter_mut().enumerate() {
        for (j, ip) in [IP_A, IP_B, IP_C].into_iter().enumerate() {
            if i != j {
                app.cm.learn(mapped(ip), net.mac(j));
            }
        }
    }
    let mut rping = legit::Rping::new(a, b, &cqs[0], &cqs[1]);
    let mut pingpong = legit::Pingpong::new(a, b, &cqs[2], &cqs[3]);
    let mut tcp = legit::Tcp::new(a, b, [&cqs[4], &cqs[6]], [&cqs[5], &cqs[7]]);
    let mut attacker = attack::Attacker::new(&net, gsi(2), &cqs[9], &mut rng);
    let mut tally = Tally::default();
    const CHUNK: usize = 16 << 10;
    for r in 0..rounds {
        for app in apps.iter_mut() {
            app.reject_strangers = rng.chance(50);
        }
        // The attack: a few windows, each accounted for on its own.
        for _ in 0..1 + rng.below(3) {
            let ctx = attack::Victims {
                rping: &rping,
                pingpong: &pingpong,
            };
            let kind = attacker.window(&net, &mut apps, &ctx, &mut rng);
            *tally.windows.entry(kind).or_default() += 1;
        }
        // The legitimate traffic, one step of each.
        rping.step(&net, &mut apps, &mut attacker, &mut rng);
        pingpong.round(&mut rng);
        tcp.step((r as usize + 1) * CHUNK);
        for (i, app) in apps.iter_mut().enumerate() {
            let mut legit_events = Vec::new();
            app.pump(net.now(), &mut legit_events);
            assert!(legit_events.is_empty(), "{i}: {legit_events:?}");
        }
        attacker.after_round();
        fabric.advance(rng.below(40) * MS);
    }
    rping.finish(&net, &mut apps);
    // Every stranger's REQ runs out on our clock (polled every 10 ms meanwhile).
    for _ in 0..2 * apps[0].cap_ns / (10 * MS) {
        fabric.advance(10 * MS);
        for app in apps.iter_mut() {
            let mut legit_events = Vec::new();
            app.pump(net.now(), &mut legit_events);
            assert!(legit_events.is_empty(), "{legit_events:?}");
        }
    }
    for app in apps.iter_mut() {
        let mut legit_events = Vec::new();
        app.pump(net.now(), &mut legit_events);
        assert!(legit_events.is_empty(), "{legit_events:?}");
        assert_eq!(
            app.strangers(),
            0,
            "{}: strangers' REQs outlived our cap",
            app.name
        );
        assert_eq!(app.cm.events_lost, 0, "{}: events lost", app.name);
        assert!(app.table_hwm <= mlx5::cm::MAX_CONNS);
    }
    let (tcp_bytes, ports) = tcp.finish();
    // Every frame a NIC put in its Ethernet receive queue was passed up by the port, or
    // refused and counted by it.
    let now = net.dp();
    for (i, p) in ports.iter().enumerate() {
        assert_eq!(
            now[i].eth_rx_delivered + now[i].eth_rx_errors,
            p.rx_frames + p.rx_checksum_drops + p.rx_errors,
            "NIC {i}: {p:?}"
        );
    }
    let eth = format!(
        "ports: A passed up {} frames, refused {} for their checksums; B {} and {}",
        ports[0].rx_frames,
        ports[0].rx_checksum_drops,
        ports[1].rx_frames,
        ports[1].rx_checksum_drops
    );
    let ext = attacker.finish(&net);
    let hwm = status_kib("VmHWM:");
    // Most of what the process holds is the simulator's command traces (each command's input
    // and output, TRACE_CAPACITY a device, the oldest forgotten): a few hundred bytes a
    // command, until they are full.
    let traced: u64 = net
        .sims
        .iter()
        .map(|s| s.commands_executed().min(mlx5::sim::TRACE_CAPACITY as u64))
        .sum();
    let [da, db, dc] = net.dp();
    let dev = |d: &DatapathCounters| {
        format!(
            "icrc {} malformed {} not-ours {} dropped {} steering {} out-of-buffer {}",
            d.rx_icrc_errors,
            d.rx_malformed,
            d.rx_not_ours,
            d.rx_dropped,
            d.eth_rx_steering_drops,
            d.eth_rx_out_of_buffer
        )
    };
    let cm = |a: &App<'_>| {
        format!(
            "dropped {} unsent {} evicted {} events-lost {} strangers taken {} rejected {} \
             forgotten {} table-hwm {}/{} held-max {} ms (cap {} ms + time between polls)",
            a.cm.dropped,
            a.cm.unsent,
            a.cm.evicted,
            a.cm.events_lost,
            a.taken,
            a.rejected,
            a.forgotten,
            a.table_hwm,
            mlx5::cm::MAX_CONNS,
            a.held_max_ns / MS,
            a.cap_ns / MS
        )
    };
    println!(
        "hostile-peer seed {seed}: {rounds} rounds in {:.1} s; attacker: {} frames ({} runts) \
         and {} MADs in {:?}; port: {ext}; A: {}; B: {}; C: {}; CM A: {}; CM B: {}; \
         legitimate: {} rping sessions ({} retried, {} ended by a spoofed REJ naming both IDs), \
         {} iterations, {} bytes; pingpong {} exchanges, {} bytes; TCP {} bytes each way ({eth}); \
         memory: VmHWM {} MiB ({traced} commands in the simulator's traces)",
        started.elapsed().as_secs_f64(),
        attacker.ext.sent,
        attacker.ext.runts,
        attacker.mads,
        tally.windows,
        dev(&da),
        dev(&db),
        dev(&dc),
        cm(&apps[0]),
        cm(&apps[1]),
        rping.sessions,
        rping.retries,
        rping.insider,
        rping.iterations,
        rping.bytes,
        pingpong.exchanges,
        pingpong.bytes,
        tcp_bytes,
        hwm / 1024,
    );
    // Generous: a few tens of MiB, and the traces' 3 × 65536 records of a few hundred bytes
    // when they are full. What a peer could grow is bounded above, structure by structure.
    assert!(hwm < 512 << 10, "VmHWM {hwm} KiB");
    drop(attacker);
    drop((rping, pingpong));
    for app in apps {
        app.cm.into_gsi().close().unwrap();
    }
    for cq in cqs {
        cq.destroy().unwrap();
    }
    for g in gsi_bufs {
        g.destroy().unwrap();
    }
}
