//! The body of the fuzz target `eth_frames` (issue #26): Ethernet frames from a peer into the
//! driver's receive path — an [`EthPort`] on simulated NIC B under a smoltcp `Interface`
//! (10.0.0.2/24, a TCP listener on port 5000 that echoes, a UDP socket on port 7 that echoes,
//! an ICMP socket, automatic echo replies). Each record of the input (see `frames.rs`) is a frame
//! NIC A puts on the wire through its own `EthPort` (checksums filled by the device for IPv4
//! TCP/UDP) or through a raw Ethernet SQ (bytes as given, checksum offloads or a VLAN tag as
//! the record asks); B's stack is polled after each.
//!
//! Must hold: nothing panics, the port's calls never fail, and the port accounts for every frame
//! B's device took: each frame off the wire went to the RoCE transport or to the flow tables,
//! where it was dropped by steering or written to the RQ (a completion, good or in error); every
//! completion was passed up, refused for its checksum or counted as an error; no completion was
//! lost (CQ overrun) and no frame found the RQ without a buffer (every buffer goes back).
//!
//! The NICs, their ports and queues are made once per process (a thread's first input), so an
//! input costs its frames; B's smoltcp interface and sockets are made afresh for every input.
//!
//! Record `ctl` bits past the fix-ups: 0x08 the destination MAC is B's; 0x10 the source MAC is
//! A's; 0x20/0x40 the path: A's port, raw, raw with both checksum offloads, raw with VLAN tag
//! 100 inserted by the device; 0x80 three seconds pass on B's clock (smoltcp's timers).

#![allow(dead_code)]

use std::cell::RefCell;

use mlx5::cq::Cq;
use mlx5::eth::{EthPort, EthPortConfig};
use mlx5::mr::MemoryRegion;
use mlx5::qp::Sge;
use mlx5::raw::eth::{Checksum, EthSq, EthWr, Tis, TransportDomain, L2_INLINE};
use mlx5::sim::{DatapathCounters, Fabric, Mode, Profile, SimDevice};
use mlx5::{Device, DeviceConfig, MrAccess, SimPlatform, Wc};
use smoltcp::iface::{Config, Interface, SocketSet};
use smoltcp::socket::{icmp, tcp, udp};
use smoltcp::time::{Duration, Instant};
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr, Ipv4Address};

use crate::frames::{self, Record};

type Dev = Device<SimPlatform>;

const MAC_A: [u8; 6] = [2, 0xc5, 0x5a, 0, 0x26, 0x0a];
pub const MAC_B: [u8; 6] = [2, 0xc5, 0x5a, 0, 0x26, 0x0b];
pub const IP_B: [u8; 4] = [10, 0, 0, 2];
pub const TCP_PORT: u16 = 5000;
pub const UDP_PORT: u16 = 7;
/// A's MTU: jumbo frames (and B's RQ meets frames longer than its 1500-byte buffers).
const MTU_A: u16 = 9216;
const FRAME_MAX_A: usize = MTU_A as usize + 14;
/// Bytes of padding per `pad` of a record.
const PAD_UNIT: usize = 64;

/// The destination MAC is B's.
pub const DST_B: u8 = 0x08;
/// The source MAC is A's.
pub const SRC_A: u8 = 0x10;
/// The path (bits 5-6).
pub const VIA_PORT: u8 = 0x00;
pub const VIA_RAW: u8 = 0x20;
pub const VIA_RAW_CSUM: u8 = 0x40;
pub const VIA_RAW_VLAN: u8 = 0x60;
/// Three seconds pass.
pub const LATER: u8 = 0x80;

/// Both NICs and everything on them, made once.
struct Rig {
    fabric: Fabric,
    sa: SimDevice,
    sb: SimDevice,
    /// A's port: its sends, and it takes in what B's stack answers.
    pa: EthPort<'static, SimPlatform>,
    /// A's raw SQ, its CQ and the region its frames go out of.
    raw: EthSq<'static, SimPlatform>,
    raw_cq: &'static Cq<'static, SimPlatform>,
    raw_mr: MemoryRegion<'static, SimPlatform>,
    raw_posted: u64,
    _tis: Tis<'static, SimPlatform>,
    _td: TransportDomain<'static, SimPlatform>,
    pb: EthPort<'static, SimPlatform>,
}

fn nic(fabric: &Fabric, mac: [u8; 6]) -> (SimDevice, &'static Dev) {
    let sim = SimDevice::new(Profile::connectx5().with_mac(mac), Mode::Sync);
    fabric.attach(&sim).expect("attach");
    let dev = Device::open(SimPlatform::new(sim.clone()), DeviceConfig::default())
        .expect("a fault-free bring-up");
    (sim, Box::leak(Box::new(dev)))
}

fn leak<T>(t: T) -> &'static T {
    Box::leak(Box::new(t))
}

impl Rig {
    fn new() -> Rig {
        let fabric = Fabric::new();
        let (sa, a) = nic(&fabric, MAC_A);
        let (sb, b) = nic(&fabric, MAC_B);
        let cq = |d: &'static Dev, n| leak(d.create_cq(n).expect("CQ"));
        let cfg_a = EthPortConfig {
            mtu: MTU_A,
            tx_depth: 16,
            rx_depth: 64,
            ..EthPortConfig::default()
        };
        let pa = EthPort::open(a, cq(a, 64), cq(a, 128), &cfg_a).expect("A's port");
        let td = TransportDomain::alloc(a).expect("TD");
        let tis = Tis::create(a, &td).expect("TIS");
        let raw_cq = cq(a, 64);
        let raw = EthSq::create(a, raw_cq, &tis, 16).expect("raw SQ");
        let pd = a.pd();
        let raw_mr = a
            .alloc_mr(pd, FRAME_MAX_A, MrAccess::default())
            .expect("MR");
        // B: the defaults (MTU 1500, broadcast, checksum offload) and a multicast group.
        let cfg_b = EthPortConfig {
            extra_macs: &[[1, 0, 0x5e, 0, 0, 1]],
            ..EthPortConfig::default()
        };
        let pb = EthPort::open(b, cq(b, 64), cq(b, 128), &cfg_b).expect("B's port");
        Rig {
            fabric,
            sa,
            sb,
            pa,
            raw,
            raw_cq,
            raw_mr,
            raw_posted: 0,
            _tis: tis,
            _td: td,
            pb,
        }
    }

    /// Sends `r` from A; whether a frame went on the wire.
    fn send(&mut self, r: &Record) -> bool {
        let f = &r.frame;
        let via = r.ctl & 0x60;
        if via == VIA_PORT {
            // Its own refusals (a frame under 14 bytes) are the caller's, typed.
            let sent = matches!(self.pa.send(f), Ok(true));
            // Completions taken in (the next send reclaims them too).
            let _ = self.pa.can_send();
            return sent;
        }
        let mut head = [0u8; L2_INLINE];
        let n = f.len().min(L2_INLINE);
        head[..n].copy_from_slice(&f[..n]);
        let rest = f.get(L2_INLINE..).unwrap_or(&[]);
        if !rest.is_empty() {
            self.raw_mr.write(0, rest).expect("raw frame into its MR");
        }
        let sge = [Sge {
            addr: self.raw_mr.addr(),
            length: rest.len() as u32,
            lkey: self.raw_mr.lkey(),
        }];
        let wr = EthWr {
            wr_id: self.raw_posted,
            headers: &head,
            payload: if rest.is_empty() { &[] } else { &sge },
            checksum: if via == VIA_RAW_CSUM {
                Checksum { l3: true, l4: true }
            } else {
                Checksum::NONE
            },
            vlan: (via == VIA_RAW_VLAN).then_some(100),
            tso_mss: None,
            signaled: true,
        };
        self.raw.post_send(&[wr]).expect("raw post_send");
        self.raw_posted += 1;
        // The simulator runs the send inside the doorbell: its completion is there.
        let mut wc = [Wc::default(); 4];
        let got = self.raw_cq.poll(&mut wc).expect("raw CQ poll");
        assert_eq!(got, 1, "the raw send's completion");
        assert_eq!(wc[0].status, mlx5::WcStatus::Success, "{:?}", wc[0]);
        true
    }

    /// A takes in (and drops) what B's stack answered.
    fn drain_a(&mut self) {
        while self.pa.recv().expect("A's port recv").is_some() {}
    }
}

thread_local! {
    /// Never dropped: at the process's exit, tearing the rig down from a thread-local's
    /// destructor would meet other thread-locals already gone ([`finish`] drops it).
    static RIG: &'static RefCell<Option<Rig>> = Box::leak(Box::new(RefCell::new(None)));
}

/// What B's device counted during one input.
#[derive(Debug)]
struct Delta {
    rx_frames: u64,
    eth_rx_frames: u64,
    eth_rx_delivered: u64,
    eth_rx_steering_drops: u64,
    eth_rx_out_of_buffer: u64,
    eth_rx_errors: u64,
    eth_rx_self_lb_blocked: u64,
    cqes_dropped: u64,
}

fn delta(after: &DatapathCounters, before: &DatapathCounters) -> Delta {
    Delta {
        rx_frames: after.rx_frames - before.rx_frames,
        eth_rx_frames: after.eth_rx_frames - before.eth_rx_frames,
        eth_rx_delivered: after.eth_rx_delivered - before.eth_rx_delivered,
        eth_rx_steering_drops: after.eth_rx_steering_drops - before.eth_rx_steering_drops,
        eth_rx_out_of_buffer: after.eth_rx_out_of_buffer - before.eth_rx_out_of_buffer,
        eth_rx_errors: after.eth_rx_errors - before.eth_rx_errors,
        eth_rx_self_lb_blocked: after.eth_rx_self_lb_blocked - before.eth_rx_self_lb_blocked,
        cqes_dropped: after.cqes_dropped - before.cqes_dropped,
    }
}

/// B's stack: an interface and its sockets, made for each input.
struct Stack {
    iface: Interface,
    sockets: SocketSet<'static>,
    tcp: smoltcp::iface::SocketHandle,
    udp: smoltcp::iface::SocketHandle,
    icmp: smoltcp::iface::SocketHandle,
}

impl Stack {
    fn new(port: &mut EthPort<'static, SimPlatform>) -> Stack {
        let cfg = Config::new(HardwareAddress::Ethernet(EthernetAddress(port.mac())));
        let mut iface = Interface::new(cfg, port, Instant::ZERO);
        iface.update_ip_addrs(|a| {
            a.push(IpCidr::new(IpAddress::Ipv4(Ipv4Address::from(IP_B)), 24))
                .expect("an address");
        });
        let mut sockets = SocketSet::new(vec![]);
        let mut t = tcp::Socket::new(
            tcp::SocketBuffer::new(vec![0; 4096]),
            tcp::SocketBuffer::new(vec![0; 4096]),
        );
        t.listen(TCP_PORT).expect("listen");
        let tcp = sockets.add(t);
        let mut u = udp::Socket::new(
            udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; 4], vec![0; 4096]),
            udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; 4], vec![0; 4096]),
        );
        u.bind(UDP_PORT).expect("bind");
        let udp = sockets.add(u);
        let mut i = icmp::Socket::new(
            icmp::PacketBuffer::new(vec![icmp::PacketMetadata::EMPTY; 4], vec![0; 4096]),
            icmp::PacketBuffer::new(vec![icmp::PacketMetadata::EMPTY; 4], vec![0; 4096]),
        );
        i.bind(icmp::Endpoint::Ident(0x4d58)).expect("bind");
        let icmp = sockets.add(i);
        Stack {
            iface,
            sockets,
            tcp,
            udp,
            icmp,
        }
    }

    /// Polls the interface and serves the sockets: TCP and UDP echo what they get, the ICMP
    /// socket's packets are dropped, a closed TCP socket listens again.
    fn poll(&mut self, now: Instant, port: &mut EthPort<'static, SimPlatform>) {
        for _ in 0..4 {
            self.iface.poll(now, port, &mut self.sockets);
            let t = self.sockets.get_mut::<tcp::Socket>(self.tcp);
            let mut buf = [0u8; 512];
            while t.can_recv() && t.can_send() {
                let Ok(n) = t.recv_slice(&mut buf) else { break };
                if n == 0 {
                    break;
                }
                let _ = t.send_slice(&buf[..n]);
            }
            if !t.is_open() {
                let _ = t.listen(TCP_PORT);
            }
            let u = self.sockets.get_mut::<udp::Socket>(self.udp);
            while let Ok((n, meta)) = u.recv_slice(&mut buf) {
                let _ = u.send_slice(&buf[..n], meta.endpoint);
            }
            let i = self.sockets.get_mut::<icmp::Socket>(self.icmp);
            while i.recv().is_ok() {}
        }
    }
}

/// What became of one input's frames at B.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    /// Frames B's device took off the wire.
    pub received: u64,
    /// Frames the flow tables dropped.
    pub steering_drops: u64,
    /// Frames the port passed up to the stack.
    pub passed: u64,
    /// Frames the port refused for their checksums.
    pub refused: u64,
    /// Receive completions in error (a frame too long for the buffers).
    pub errors: u64,
    /// Frames B's stack sent (answers).
    pub answered: u64,
}

/// Runs one input (see the module documentation).
pub fn run(data: &[u8]) -> Summary {
    frames::with_rig(&RIG, Rig::new, |rig| run_on(rig, data))
}

/// Drops this thread's rig (a test's end).
pub fn finish() {
    frames::drop_rig(&RIG);
}

fn run_on(rig: &mut Rig, data: &[u8]) -> Summary {
    let before = rig.sb.datapath_counters();
    let stats0 = rig.pb.stats();
    let mut stack = Stack::new(&mut rig.pb);
    let mut now = Instant::ZERO;
    let mut to_b = 0u64;
    for mut r in frames::records(data, PAD_UNIT, FRAME_MAX_A) {
        if r.frame.len() >= 12 {
            if r.ctl & DST_B != 0 {
                r.frame[..6].copy_from_slice(&MAC_B);
            }
            if r.ctl & SRC_A != 0 {
                r.frame[6..12].copy_from_slice(&MAC_A);
            }
        }
        frames::fix(&mut r.frame, r.ctl);
        // A frame to A's own MAC comes back to A; every other one reaches B (unicast to B, or
        // flooded: B is the only other port).
        if rig.send(&r) && r.frame.get(..6) != Some(&MAC_A[..]) {
            to_b += 1;
        }
        if r.ctl & LATER != 0 {
            now += Duration::from_secs(3);
        } else {
            now += Duration::from_millis(1);
        }
        stack.poll(now, &mut rig.pb);
        rig.drain_a();
    }
    // Whatever the stack still has to say, then every frame left in B's RQ (the stack takes
    // none while B's send queue has no room).
    for _ in 0..4 {
        now += Duration::from_secs(1);
        stack.poll(now, &mut rig.pb);
        rig.drain_a();
    }
    drop(stack);
    let mut budget = 4096;
    while rig.pb.recv().expect("B's port recv").is_some() && budget > 0 {
        budget -= 1;
    }
    rig.drain_a();
    rig.fabric.run_until_idle();

    let d = delta(&rig.sb.datapath_counters(), &before);
    let s = rig.pb.stats();
    let passed = s.rx_frames - stats0.rx_frames;
    let refused = s.rx_checksum_drops - stats0.rx_checksum_drops;
    let errors = s.rx_errors - stats0.rx_errors;
    // What B's stack sent to B's own MAC (an ARP naming it as the asker's) came back to B too.
    let b_sent = s.tx_frames - stats0.tx_frames;
    assert!(
        (to_b..=to_b + b_sent).contains(&d.rx_frames),
        "B took every frame sent to it ({to_b} from A, {b_sent} of its own): {d:?}"
    );
    assert_eq!(
        d.eth_rx_frames,
        d.eth_rx_steering_drops
            + d.eth_rx_out_of_buffer
            + d.eth_rx_delivered
            + d.eth_rx_errors
            + d.eth_rx_self_lb_blocked,
        "every Ethernet frame dropped by steering, written to the RQ, or its own looped back and blocked: {d:?}"
    );
    assert_eq!(
        d.eth_rx_delivered + d.eth_rx_errors,
        passed + refused + errors,
        "every completion passed up, refused or counted: {d:?}, port {s:?}"
    );
    assert_eq!(d.cqes_dropped, 0, "no completion lost: {d:?}");
    assert_eq!(
        d.eth_rx_out_of_buffer, 0,
        "the RQ always had its buffers back: {d:?}"
    );
    assert_eq!(s.tx_errors, 0, "B's sends: {s:?}");
    assert_eq!(rig.pa.stats().tx_errors, 0, "A's sends");
    assert!(rig.sb.dma_faults().is_empty(), "{:?}", rig.sb.dma_faults());
    assert!(rig.sa.dma_faults().is_empty(), "{:?}", rig.sa.dma_faults());
    Summary {
        received: d.rx_frames,
        steering_drops: d.eth_rx_steering_drops,
        passed,
        refused,
        errors,
        answered: b_sent,
    }
}
