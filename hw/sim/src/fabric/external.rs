//! A port of the fabric on a real Ethernet link (issue #12): QEMU's `-netdev dgram` over unix
//! sockets — one datagram per frame, no preamble, no FCS — so a guest's NIC (an e1000 under
//! Linux's soft-RoCE, say) shares the wire with simulated ConnectX-5s; or a Linux TAP device
//! (one `read`/`write` per frame, no packet information), which the host's own network stack,
//! a bridge, or a QEMU `-netdev tap` on the same bridge can be at the other end of
//! ([`Fabric::attach_tap`]).
//!
//! QEMU binds its own socket (`local.path`) and sends to ours (`remote.path`); the port binds
//! ours and sends to QEMU's. Frames from the link enter the fabric from this port (its MAC
//! learned from their source address, so unicast frames to the guest come back here);
//! frames the fabric routes to the port, and every broadcast and multicast, go out on the link.
//! A frame QEMU is not there to take (its socket not bound yet, or gone) is dropped and
//! counted, as on an unplugged cable; a full queue blocks the sender (the kernel's backpressure
//! on datagram sockets), never drops.
//!
//! **The address responder.** A simulated NIC has no network stack of its own when this
//! project's driver runs it, yet a peer resolves the MAC of a RoCE v2 GID by ARP (IPv4-mapped
//! GIDs) or neighbour discovery (IPv6 GIDs) before its first packet — in `modify_qp` to RTR,
//! on its own schedule. With the responder on, the port answers, at any time, ARP requests and
//! neighbour solicitations for an address that some simulated NIC on the fabric holds as a GID,
//! with that NIC's MAC (a reply padded to 60 bytes; the advertisement solicited, overriding,
//! with the target link-layer address option). Requests for other addresses go on to the
//! fabric like any frame (a Linux driving a simulated NIC answers for its own addresses).

use std::collections::{HashMap, VecDeque};
use std::io;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use super::packet::{self, L3};
use super::pool;
use super::{Fabric, Station};
use crate::mode::Mode;
use crate::work::Work;

const ETHERTYPE_ARP: u16 = 0x0806;
const ICMPV6: u8 = 58;
const ND_SOLICIT: u8 = 135;
const ND_ADVERT: u8 = 136;
/// The largest frame taken from the link (a jumbo frame and then some).
const MAX_FRAME: usize = 65536;
/// How often the threads look at their stop flag.
const POLL: Duration = Duration::from_millis(50);
/// Neighbours an external port remembers at most: the link's peer chooses how many addresses
/// it announces (one ARP per address is enough), so the table is bounded and the oldest entry
/// goes first — a real switch's or host's neighbour table is bounded likewise.
pub const MAX_NEIGHBOURS: usize = 1024;

/// What an external port has seen.
#[derive(Debug, Default)]
pub struct ExternalCounters {
    /// Frames taken from the link into the fabric.
    pub rx_frames: AtomicU64,
    /// Frames from the link shorter than an Ethernet header, dropped.
    pub rx_runts: AtomicU64,
    /// Frames put on the link.
    pub tx_frames: AtomicU64,
    /// Frames the link's other end was not there to take.
    pub tx_dropped: AtomicU64,
    /// Neighbours forgotten to make room for newer ones ([`MAX_NEIGHBOURS`]).
    pub neighbours_evicted: AtomicU64,
    /// ARP replies and neighbour advertisements the responder sent.
    pub answered: AtomicU64,
}

/// What frames travel over.
enum Wire {
    /// A unix datagram socket and the peer's socket path.
    Dgram { sock: UnixDatagram, theirs: PathBuf },
    /// A TAP device (non-blocking).
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    Tap(tun_tap::Iface),
}

/// The link side of the port: the wire, and the neighbours it has heard of.
struct Link {
    wire: Wire,
    counters: Arc<ExternalCounters>,
    /// Addresses (IPv4 as IPv4-mapped) → MAC, learned from every ARP and neighbour discovery
    /// frame that came in from the link; at most [`MAX_NEIGHBOURS`].
    neighbours: Mutex<Neighbours>,
}

/// The neighbour table: address → MAC, oldest first out when full.
#[derive(Debug, Default)]
struct Neighbours {
    map: HashMap<[u8; 16], [u8; 6]>,
    /// Addresses in the order they were first learned.
    order: VecDeque<[u8; 16]>,
}

impl Neighbours {
    /// Learns `addr` → `mac`; returns how many entries were evicted for it (0 or 1).
    fn learn(&mut self, addr: [u8; 16], mac: [u8; 6]) -> u64 {
        if let Some(m) = self.map.get_mut(&addr) {
            *m = mac;
            return 0;
        }
        let mut evicted = 0;
        while self.map.len() >= MAX_NEIGHBOURS {
            match self.order.pop_front() {
                Some(old) => {
                    self.map.remove(&old);
                    evicted += 1;
                }
                None => break,
            }
        }
        self.map.insert(addr, mac);
        self.order.push_back(addr);
        evicted
    }
}

impl Link {
    fn send(&self, frame: &[u8]) {
        // A signal may interrupt the write (see `reader`): it is made again.
        let sent = loop {
            let r = match &self.wire {
                Wire::Dgram { sock, theirs } => sock.send_to(frame, theirs),
                #[cfg(all(target_os = "linux", target_env = "gnu"))]
                Wire::Tap(t) => t.send(frame),
            };
            if !matches!(&r, Err(e) if e.kind() == io::ErrorKind::Interrupted) {
                break r;
            }
        };
        match sent {
            Ok(_) => {
                self.counters.tx_frames.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                log::debug!("mlx5-sim: external port: frame dropped: {e}");
                self.counters.tx_dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

impl Link {
    /// The next frame from the wire into `buf`; `WouldBlock`/`TimedOut` when none came for a
    /// while (the reader then looks at its stop flag).
    #[cfg_attr(
        not(all(target_os = "linux", target_env = "gnu")),
        allow(unused_variables)
    )]
    fn recv(&self, buf: &mut [u8], idle: &mut u32) -> io::Result<usize> {
        match &self.wire {
            Wire::Dgram { sock, .. } => sock.recv(buf),
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            Wire::Tap(t) => {
                let r = t.recv(buf);
                if matches!(&r, Err(e) if e.kind() == io::ErrorKind::WouldBlock) {
                    // Nothing there: spin a little (a frame often follows), then nap.
                    *idle = idle.saturating_add(1);
                    if *idle < 200 {
                        std::thread::yield_now();
                    } else {
                        std::thread::sleep(Duration::from_micros(100));
                    }
                } else {
                    *idle = 0;
                }
                r
            }
        }
    }
}

impl Station for Link {
    fn deliver(&self, frames: &[Vec<u8>]) {
        for f in frames {
            self.send(f);
        }
    }
    fn timers_due(&self) -> bool {
        false
    }
    fn service_timers(&self) {}
    fn deadline(&self) -> Option<u64> {
        None
    }
}

/// A fabric port on a unix datagram link ([`Fabric::attach_unix_dgram`]) or a TAP device
/// ([`Fabric::attach_tap`]); detached when dropped.
pub struct ExternalPort {
    fabric: Fabric,
    port: usize,
    counters: Arc<ExternalCounters>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    link: Arc<Link>,
    // The fabric holds the link weakly: the port owns it.
    _station: Arc<dyn Station>,
}

impl std::fmt::Debug for ExternalPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExternalPort")
            .field("port", &self.port)
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

impl ExternalPort {
    /// Its counters.
    pub fn counters(&self) -> &ExternalCounters {
        &self.counters
    }

    /// The MAC of the host on the link that holds `addr` (an IPv6 address, or IPv4-mapped):
    /// learned from its ARP or neighbour discovery traffic, else asked for — an ARP request
    /// (or a neighbour solicitation) from `mac`/`own` (the asking NIC's MAC and address of the
    /// same family), again every 200 ms — until `timeout`. `None` if no answer came.
    pub fn resolve(
        &self,
        addr: &[u8; 16],
        mac: [u8; 6],
        own: &[u8; 16],
        timeout: Duration,
    ) -> Option<[u8; 6]> {
        let deadline = std::time::Instant::now() + timeout;
        let mut next_ask = std::time::Instant::now();
        loop {
            if let Some(m) = self.neighbour(addr) {
                return Some(m);
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return None;
            }
            if now >= next_ask {
                let ask = if is_v4(addr) {
                    arp_request(mac, own, addr)
                } else {
                    solicitation(mac, own, addr)
                };
                self.link.send(&ask);
                next_ask = now + Duration::from_millis(200);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// A neighbour learned from the link.
    pub fn neighbour(&self, addr: &[u8; 16]) -> Option<[u8; 6]> {
        self.link
            .neighbours
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .map
            .get(addr)
            .copied()
    }

    /// How many neighbours the port remembers (at most [`MAX_NEIGHBOURS`]).
    pub fn neighbours_held(&self) -> usize {
        self.link
            .neighbours
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .map
            .len()
    }
}

/// An IPv4-mapped address (`::ffff:a.b.c.d`).
fn is_v4(a: &[u8; 16]) -> bool {
    a[..10] == [0; 10] && a[10..12] == [0xff, 0xff]
}

/// An ARP request from `mac`/`own` for `target` (both IPv4-mapped).
fn arp_request(mac: [u8; 6], own: &[u8; 16], target: &[u8; 16]) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&mac);
    f.extend_from_slice(&ETHERTYPE_ARP.to_be_bytes());
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&mac);
    f.extend_from_slice(&own[12..]);
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&target[12..]);
    f.resize(60, 0);
    f
}

/// A neighbour discovery message (`kind`, `flags`) about `target` with a link-layer address
/// option (`option` 1 source, 2 target) of `mac`, from `src` to `dst`: Ethernet, IPv6 with hop
/// limit 255 (RFC 4861 §7.1.2), ICMPv6 with its checksum.
#[allow(clippy::too_many_arguments)]
fn nd_frame(
    dmac: [u8; 6],
    mac: [u8; 6],
    src: &[u8; 16],
    dst: &[u8; 16],
    kind: u8,
    flags: u8,
    target: &[u8; 16],
    option: u8,
) -> Vec<u8> {
    let mut f = Vec::with_capacity(86);
    f.extend_from_slice(&dmac);
    f.extend_from_slice(&mac);
    f.extend_from_slice(&[0x86, 0xdd]);
    let mut v6 = [0u8; 40];
    v6[0] = 0x60;
    v6[4..6].copy_from_slice(&32u16.to_be_bytes());
    v6[6] = ICMPV6;
    v6[7] = 255;
    v6[8..24].copy_from_slice(src);
    v6[24..40].copy_from_slice(dst);
    f.extend_from_slice(&v6);
    let mut icmp = [0u8; 32];
    icmp[0] = kind;
    icmp[4] = flags;
    icmp[8..24].copy_from_slice(target);
    icmp[24] = option; // 8 bytes
    icmp[25] = 1;
    icmp[26..32].copy_from_slice(&mac);
    let pseudo = packet::sum(&v6[8..40], u64::from(ICMPV6) + icmp.len() as u64);
    let c = !packet::fold(packet::sum(&icmp, pseudo));
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&icmp);
    f
}

/// A neighbour solicitation from `mac`/`own` for `target`, to its solicited-node group.
fn solicitation(mac: [u8; 6], own: &[u8; 16], target: &[u8; 16]) -> Vec<u8> {
    let mut group = [0u8; 16];
    group[..2].copy_from_slice(&[0xff, 0x02]);
    group[11..13].copy_from_slice(&[1, 0xff]);
    group[13..].copy_from_slice(&target[13..]);
    let dmac = [0x33, 0x33, 0xff, target[13], target[14], target[15]];
    nd_frame(dmac, mac, own, &group, ND_SOLICIT, 0, target, 1)
}

/// Learns the sender of an ARP frame, or the source (or target) of a neighbour discovery frame
/// with a link-layer address option.
fn learn(link: &Link, f: &[u8]) {
    let mut learned = Vec::new();
    if u16::from_be_bytes([f[12], f[13]]) == ETHERTYPE_ARP {
        if let Some(a) = f.get(14..42) {
            if a[0..8] == [0, 1, 8, 0, 6, 4, 0, 1] || a[0..8] == [0, 1, 8, 0, 6, 4, 0, 2] {
                let mut ip = [0u8; 16];
                ip[10..12].fill(0xff);
                ip[12..].copy_from_slice(&a[14..18]);
                let mut mac = [0u8; 6];
                mac.copy_from_slice(&a[8..14]);
                learned.push((ip, mac));
            }
        }
    } else if let Some(h) = packet::parse(f).filter(|h| h.l3 == L3::V6 && h.proto == ICMPV6) {
        let icmp = f.get(h.l3_at + h.l3_len..h.ip_end).unwrap_or(&[]);
        if icmp.len() >= 32 && matches!(icmp[0], ND_SOLICIT | ND_ADVERT) && icmp[25] == 1 {
            let mut mac = [0u8; 6];
            mac.copy_from_slice(&icmp[26..32]);
            // A solicitation names its sender (the IPv6 source); an advertisement its target.
            let who = if icmp[0] == ND_SOLICIT {
                h.src
            } else {
                icmp[8..24].try_into().unwrap_or([0; 16])
            };
            if who != [0; 16] {
                learned.push((who, mac));
            }
        }
    }
    if !learned.is_empty() {
        let mut n = link.neighbours.lock().unwrap_or_else(|e| e.into_inner());
        let evicted: u64 = learned.into_iter().map(|(a, m)| n.learn(a, m)).sum();
        if evicted > 0 {
            link.counters
                .neighbours_evicted
                .fetch_add(evicted, Ordering::Relaxed);
        }
    }
}

impl Drop for ExternalPort {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        self.fabric.detach(self.port);
    }
}

impl Fabric {
    /// Attaches a real link: binds `ours` (QEMU's `remote.path`; an old socket file there is
    /// replaced) and sends to `theirs` (QEMU's `local.path`). `responder`: answer ARP and
    /// neighbour solicitations for the simulated NICs' GID addresses (see the module
    /// documentation).
    pub fn attach_unix_dgram(
        &self,
        ours: &Path,
        theirs: &Path,
        responder: bool,
    ) -> io::Result<ExternalPort> {
        let _ = std::fs::remove_file(ours);
        let sock = UnixDatagram::bind(ours)?;
        sock.set_read_timeout(Some(POLL))?;
        let wire = Wire::Dgram {
            sock,
            theirs: theirs.to_path_buf(),
        };
        self.attach_link(wire, responder)
    }

    /// Attaches the TAP device `name` (created if absent; an existing persistent one, made by
    /// `ip tuntap add dev NAME mode tap`, is taken over — which needs the right to, root or
    /// its owner). Frames are whole Ethernet frames without packet information. `responder`
    /// as for [`Fabric::attach_unix_dgram`].
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    pub fn attach_tap(&self, name: &str, responder: bool) -> io::Result<ExternalPort> {
        let tap = tun_tap::Iface::without_packet_info(name, tun_tap::Mode::Tap)?;
        tap.set_non_blocking()?;
        self.attach_link(Wire::Tap(tap), responder)
    }

    /// [`Fabric::attach_tap`] where it is not built (only glibc Linux has it): always
    /// `Unsupported`.
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    pub fn attach_tap(&self, name: &str, _responder: bool) -> io::Result<ExternalPort> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("TAP device {name}: this build has no TAP support (glibc Linux only)"),
        ))
    }

    /// The port of an external link: its threads, in and out.
    fn attach_link(&self, wire: Wire, responder: bool) -> io::Result<ExternalPort> {
        let counters = Arc::new(ExternalCounters::default());
        let link = Arc::new(Link {
            wire,
            counters: counters.clone(),
            neighbours: Mutex::new(Neighbours::default()),
        });
        let station: Arc<dyn Station> = link.clone();
        let (kick, kicked) = mpsc::channel();
        let mode = *self.inner.mode.get_or_init(|| Mode::Threaded);
        let port = self.add_port(
            Arc::downgrade(&station),
            [0; 6],
            (mode == Mode::Threaded).then_some(kick),
        );
        let stop = Arc::new(AtomicBool::new(false));
        // Frames the fabric queued for the port (threaded mode; in sync mode whoever runs the
        // fabric delivers them).
        let out = {
            let (fabric, stop, link) = (self.clone(), stop.clone(), Arc::downgrade(&station));
            std::thread::Builder::new()
                .name("mlx5-sim external tx".into())
                .spawn(move || writer(&fabric, port, &link, &kicked, &stop))?
        };
        let inp = {
            let (fabric, stop, link) = (self.clone(), stop.clone(), link.clone());
            std::thread::Builder::new()
                .name("mlx5-sim external rx".into())
                .spawn(move || reader(&fabric, port, &link, responder, &stop))?
        };
        Ok(ExternalPort {
            fabric: self.clone(),
            port,
            counters,
            stop,
            threads: vec![out, inp],
            link,
            _station: station,
        })
    }

    /// The MAC of the simulated NIC holding `addr` as a GID.
    fn owner_of(&self, addr: &[u8; 16]) -> Option<[u8; 6]> {
        let ports: Vec<_> = self
            .wire()
            .ports
            .iter()
            .filter_map(|p| p.station().map(|s| (s, p.mac)))
            .collect();
        ports
            .into_iter()
            .find(|(s, _)| s.gids().contains(addr))
            .map(|(_, mac)| mac)
    }
}

fn writer(
    fabric: &Fabric,
    port: usize,
    link: &Weak<dyn Station>,
    kicked: &mpsc::Receiver<Work>,
    stop: &AtomicBool,
) {
    while !stop.load(Ordering::Acquire) {
        match kicked.recv_timeout(POLL) {
            Ok(_) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        let Some(l) = link.upgrade() else { return };
        fabric.service(port, &*l);
    }
}

fn reader(fabric: &Fabric, port: usize, link: &Link, responder: bool, stop: &AtomicBool) {
    let mut buf = vec![0u8; MAX_FRAME];
    let mut idle = 0;
    while !stop.load(Ordering::Acquire) {
        let n = match link.recv(&mut buf, &mut idle) {
            Ok(n) => n,
            // Interrupted: a signal, or the process stopped and continued (Ctrl-Z and `fg`, a
            // debugger attaching, a leak checker stopping the world) — a socket with a receive
            // timeout is not restarted then (signal(7)). It once ended this thread, and the port
            // went deaf for good.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                continue;
            }
            Err(e) => {
                log::warn!("mlx5-sim: external port: {e}");
                return;
            }
        };
        let frame = &buf[..n];
        if frame.len() < 14 {
            link.counters.rx_runts.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        link.counters.rx_frames.fetch_add(1, Ordering::Relaxed);
        learn(link, frame);
        if responder {
            if let Some(reply) = answer(fabric, frame) {
                link.send(&reply);
                link.counters.answered.fetch_add(1, Ordering::Relaxed);
                continue;
            }
        }
        let mut smac = [0u8; 6];
        smac.copy_from_slice(&frame[6..12]);
        let none = super::wire::Addresses::new();
        fabric.transmit(port, (smac, &none), &mut vec![pool::copy(frame)]);
        if fabric.mode() == Mode::Sync {
            fabric.run_until_idle();
        }
    }
}

/// The reply to an ARP request or neighbour solicitation for a simulated NIC's address.
fn answer(fabric: &Fabric, f: &[u8]) -> Option<Vec<u8>> {
    let et = u16::from_be_bytes([f[12], f[13]]);
    if et == ETHERTYPE_ARP {
        return arp_reply(fabric, f);
    }
    let h = packet::parse(f)?;
    if h.l3 != L3::V6 || h.proto != ICMPV6 {
        return None;
    }
    let icmp = f.get(h.l3_at + h.l3_len..h.ip_end)?;
    // Not duplicate address detection (from the unspecified address): no one to answer to.
    if icmp.len() < 24 || icmp[0] != ND_SOLICIT || h.src == [0; 16] {
        return None;
    }
    let mut target = [0u8; 16];
    target.copy_from_slice(&icmp[8..24]);
    let mac = fabric.owner_of(&target)?;
    Some(neighbour_advert(f, &h, &target, mac))
}

fn arp_reply(fabric: &Fabric, f: &[u8]) -> Option<Vec<u8>> {
    let a = f.get(14..42)?;
    // Ethernet/IPv4 request.
    if a[0..2] != [0, 1] || a[2..4] != [8, 0] || a[4] != 6 || a[5] != 4 || a[6..8] != [0, 1] {
        return None;
    }
    let mut gid = [0u8; 16];
    gid[10..12].fill(0xff);
    gid[12..].copy_from_slice(&a[24..28]);
    let mac = fabric.owner_of(&gid)?;
    let mut r = Vec::with_capacity(60);
    r.extend_from_slice(&a[8..14]); // to the sender
    r.extend_from_slice(&mac);
    r.extend_from_slice(&ETHERTYPE_ARP.to_be_bytes());
    r.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 2]);
    r.extend_from_slice(&mac);
    r.extend_from_slice(&a[24..28]);
    r.extend_from_slice(&a[8..18]); // sender MAC and IP become the target
    r.resize(60, 0);
    Some(r)
}

fn neighbour_advert(f: &[u8], h: &packet::Headers, target: &[u8; 16], mac: [u8; 6]) -> Vec<u8> {
    let mut to = [0u8; 6];
    to.copy_from_slice(&f[6..12]);
    // From the target to the solicitor: solicited, override, the target link-layer address.
    nd_frame(to, mac, target, &h.src, ND_ADVERT, 0x60, target, 2)
}
