//! `mlx5ctl net`: TCP/IP through the driver's Ethernet queues and smoltcp (issue #13 item 4).
//!
//! Without a link: two simulated ConnectX-5s on one simulated wire, each an [`EthPort`] under a
//! smoltcp interface (10.0.0.1 and 10.0.0.2): ARP, ICMP echo (`--pings`), a TCP stream of
//! `--mib` MiB each way with every byte checked, and `--udp` datagrams from 16 source ports,
//! each checked; packet rates printed, the wire written to `--pcap`.
//!
//! With `--link`, `--tap` or `--vfio` and `--peer ADDR`: one NIC (the simulated one on the real
//! link, or the real one) holding `--ip`, pinging the peer `--pings` times, then serving TCP echo
//! on `--echo PORT` until `--echo-bytes` came back, answering ARP and pings all along.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use clap::Args as ClapArgs;
use mlx5::eth::{EthPort, EthPortConfig};
use mlx5::sim::{Fabric, Mode, SimDevice};
use mlx5::{Device, DeviceConfig, SimPlatform};
use mlx5_vfio::AnyPlatform;
use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::socket::{icmp, tcp, udp};
use smoltcp::time::Instant as SmolInstant;
use smoltcp::wire::{
    EthernetAddress, HardwareAddress, Icmpv4Packet, Icmpv4Repr, IpAddress, IpCidr, IpEndpoint,
};

use crate::link::{e, with_host, LinkArgs};
use crate::target::profile;

/// `mlx5ctl net`'s arguments.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// ICMP echo requests to the peer.
    #[arg(long, default_value_t = 5)]
    pub pings: u32,
    /// MiB of TCP each way (two simulated NICs), every byte checked.
    #[arg(long, default_value_t = 8)]
    pub mib: usize,
    /// UDP datagrams of 1024 bytes (two simulated NICs), from 16 source ports.
    #[arg(long, default_value_t = 4096)]
    pub udp: u32,
    /// Receive queues of the second simulated NIC, spread by RSS (a power of two, 1..=16).
    #[arg(long, default_value_t = 4)]
    pub rss: usize,
    /// The peer's IPv4 address on the link (with --link, --tap or --vfio).
    #[arg(long)]
    pub peer: Option<Ipv4Addr>,
    /// Serve TCP echo on this port (with --peer).
    #[arg(long)]
    pub echo: Option<u16>,
    /// Connect to the peer's TCP echo service on this port, send `--echo-bytes` bytes and
    /// check that every one comes back (with --peer).
    #[arg(long = "echo-to", conflicts_with = "echo")]
    pub echo_to: Option<u16>,
    /// Bytes the echo service returns before it closes the connection and exits.
    #[arg(long = "echo-bytes", default_value_t = 1 << 20)]
    pub echo_bytes: usize,
    /// Seconds to go on answering ARP and pings after the rest is done (with --peer).
    #[arg(long, default_value_t = 0)]
    pub linger: u64,
    /// Seconds to wait for the peer at most (with --peer).
    #[arg(long = "wait-secs", default_value_t = 60)]
    pub wait_secs: u64,
    #[command(flatten)]
    pub host: LinkArgs,
}

/// A port, its interface and its sockets.
struct Side<'a> {
    port: EthPort<'a, AnyPlatform>,
    iface: Interface,
    sockets: SocketSet<'static>,
}

impl<'a> Side<'a> {
    fn new(mut port: EthPort<'a, AnyPlatform>, ip: Ipv4Addr, now: SmolInstant) -> Self {
        let cfg = Config::new(HardwareAddress::Ethernet(EthernetAddress(port.mac())));
        let mut iface = Interface::new(cfg, &mut port, now);
        iface.update_ip_addrs(|a| {
            let _ = a.push(IpCidr::new(IpAddress::Ipv4(ip), 24));
        });
        Side {
            port,
            iface,
            sockets: SocketSet::new(vec![]),
        }
    }

    fn poll(&mut self, now: SmolInstant) {
        self.iface.poll(now, &mut self.port, &mut self.sockets);
    }
}

/// smoltcp's clock: real time since `t0`.
fn now(t0: Instant) -> SmolInstant {
    SmolInstant::from_micros(t0.elapsed().as_micros() as i64)
}

fn tcp_socket() -> tcp::Socket<'static> {
    let mut s = tcp::Socket::new(
        tcp::SocketBuffer::new(vec![0; 256 * 1024]),
        tcp::SocketBuffer::new(vec![0; 256 * 1024]),
    );
    s.set_ack_delay(None);
    s.set_nagle_enabled(false);
    s
}

fn icmp_socket() -> icmp::Socket<'static> {
    icmp::Socket::new(
        icmp::PacketBuffer::new(vec![icmp::PacketMetadata::EMPTY; 4], vec![0; 4096]),
        icmp::PacketBuffer::new(vec![icmp::PacketMetadata::EMPTY; 4], vec![0; 4096]),
    )
}

/// The byte at `i` of a checked stream.
fn pattern(i: usize) -> u8 {
    (i as u8).wrapping_mul(31) ^ (i >> 9) as u8
}

/// Queues as much of the [`pattern`] stream from byte `*sent` up to `total` as `sock` takes.
fn send_pattern(sock: &mut tcp::Socket<'_>, sent: &mut usize, total: usize) -> Result<(), String> {
    while *sent < total && sock.can_send() {
        let at = *sent;
        let n = sock
            .send(|b| {
                let n = b.len().min(total - at);
                for (k, v) in b[..n].iter_mut().enumerate() {
                    *v = pattern(at + k);
                }
                (n, n)
            })
            .map_err(e)?;
        *sent += n;
        if n == 0 {
            break;
        }
    }
    Ok(())
}

/// Takes what arrived on `sock`, checked against the [`pattern`] stream from byte `*got`; the
/// offset of the first wrong byte, if one is.
fn recv_pattern(sock: &mut tcp::Socket<'_>, got: &mut usize) -> Result<Option<usize>, String> {
    while sock.can_recv() {
        let at = *got;
        let bad = sock
            .recv(|b| {
                let bad = b.iter().enumerate().find(|(k, &v)| v != pattern(at + k));
                (b.len(), (b.len(), bad.map(|(k, _)| at + k)))
            })
            .map_err(e)?;
        *got += bad.0;
        if bad.1.is_some() {
            return Ok(bad.1);
        }
    }
    Ok(None)
}

/// Runs `net`.
pub fn run(a: &Args) -> Result<(), String> {
    let h = &a.host;
    if h.link.is_some() || h.tap.is_some() || h.target.vfio.is_some() {
        let peer = a.peer.ok_or("--peer ADDR: the host to ping and serve")?;
        let ip = h.ip.ok_or("--ip ADDR: our address on the link")?;
        return with_host(h, |host| {
            let r = with_peer(a, host.dev, ip, peer);
            if let Some(l) = host.link {
                let c = l.counters();
                let n =
                    |x: &std::sync::atomic::AtomicU64| x.load(std::sync::atomic::Ordering::Relaxed);
                println!(
                    "link: {} frames in, {} out ({} the other end did not take), {} ARP/ND answers",
                    n(&c.rx_frames),
                    n(&c.tx_frames),
                    n(&c.tx_dropped),
                    n(&c.answered)
                );
            }
            r
        });
    }
    two_nics(a)
}

/// Pings `dst` from `s` `n` times (each answered within 2 s, or an error); RTTs in µs.
fn ping(
    s: &mut Side<'_>,
    mut other: Option<&mut Side<'_>>,
    t0: Instant,
    dst: Ipv4Addr,
    n: u32,
) -> Result<Vec<f64>, String> {
    let h = s.sockets.add(icmp_socket());
    let ident = 0x4d58;
    s.sockets
        .get_mut::<icmp::Socket>(h)
        .bind(icmp::Endpoint::Ident(ident))
        .map_err(e)?;
    let payload: Vec<u8> = (0..56u8).collect();
    let mut rtts = Vec::new();
    for seq in 0..n {
        let start = Instant::now();
        let mut sent = false;
        loop {
            let t = now(t0);
            s.poll(t);
            if let Some(o) = other.as_deref_mut() {
                o.poll(t);
            }
            let sock = s.sockets.get_mut::<icmp::Socket>(h);
            if !sent && sock.can_send() {
                let req = Icmpv4Repr::EchoRequest {
                    ident,
                    seq_no: seq as u16,
                    data: &payload,
                };
                let buf = sock
                    .send(req.buffer_len(), IpAddress::Ipv4(dst))
                    .map_err(e)?;
                req.emit(&mut Icmpv4Packet::new_unchecked(buf), &Default::default());
                sent = true;
            }
            if sock.can_recv() {
                let (data, _) = sock.recv().map_err(e)?;
                let p = Icmpv4Packet::new_checked(data).map_err(e)?;
                if let Ok(Icmpv4Repr::EchoReply {
                    ident: i,
                    seq_no,
                    data,
                }) = Icmpv4Repr::parse(&p, &Default::default())
                {
                    if i == ident && seq_no == seq as u16 {
                        if data != payload.as_slice() {
                            return Err(format!("echo reply {seq}: payload differs"));
                        }
                        rtts.push(start.elapsed().as_secs_f64() * 1e6);
                        break;
                    }
                }
            }
            if start.elapsed() > Duration::from_secs(2) {
                return Err(format!("no echo reply from {dst} to request {seq}"));
            }
        }
    }
    s.sockets.remove(h);
    Ok(rtts)
}

fn print_pings(dst: Ipv4Addr, rtts: &[f64]) {
    let mut v = rtts.to_vec();
    v.sort_by(f64::total_cmp);
    if let (Some(min), Some(max)) = (v.first(), v.last()) {
        println!(
            "ping {dst}: {} echo replies, payload intact; rtt min/median/max {min:.1}/{:.1}/{max:.1} us",
            v.len(),
            v[v.len() / 2]
        );
    }
}

/// Two simulated NICs, each with smoltcp.
fn two_nics(a: &Args) -> Result<(), String> {
    let prof = profile(&a.host.target.sim)?;
    let fabric = Fabric::new();
    let sa = SimDevice::new(
        prof.clone().with_mac([2, 0xc5, 0x5a, 0, 0, 0x0a]),
        Mode::Sync,
    );
    let sb = SimDevice::new(prof.with_mac([2, 0xc5, 0x5a, 0, 0, 0x0b]), Mode::Sync);
    fabric.attach(&sa).map_err(e)?;
    fabric.attach(&sb).map_err(e)?;
    if let Some(p) = &a.host.pcap {
        let f = std::fs::File::create(p).map_err(|x| format!("--pcap {}: {x}", p.display()))?;
        fabric
            .pcap_to(Box::new(std::io::BufWriter::new(f)))
            .map_err(|x| format!("--pcap {}: {x}", p.display()))?;
    }
    let open = |s: &SimDevice| {
        Device::open(
            AnyPlatform::Sim(SimPlatform::new(s.clone())),
            DeviceConfig::default(),
        )
        .map_err(e)
    };
    let (da, db) = (open(&sa)?, open(&sb)?);
    let r = two_ports(a, &da, &db);
    da.close().map_err(e)?;
    db.close().map_err(e)?;
    for s in [&sa, &sb] {
        if !s.live_objects().is_empty() {
            return Err(format!(
                "objects left on the device: {:?}",
                s.live_objects()
            ));
        }
    }
    if let Some(p) = &a.host.pcap {
        let n = fabric.pcap_finish().map_err(e)?;
        println!("pcap: {n} frames in {}", p.display());
    }
    r
}

fn two_ports(a: &Args, da: &Device<AnyPlatform>, db: &Device<AnyPlatform>) -> Result<(), String> {
    let (txa, rxa) = (
        da.create_cq(1024).map_err(e)?,
        da.create_cq(1024).map_err(e)?,
    );
    let txb = db.create_cq(1024).map_err(e)?;
    let rxb = (0..a.rss.max(1))
        .map(|_| db.create_cq(1024).map_err(e))
        .collect::<Result<Vec<_>, _>>()?;
    let cfg = EthPortConfig {
        tx_depth: 256,
        rx_depth: 512,
        ..EthPortConfig::default()
    };
    let r = (|| {
        let t0 = Instant::now();
        let (ipa, ipb) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let mut x = Side::new(
            EthPort::open(da, &txa, &rxa, &cfg).map_err(e)?,
            ipa,
            now(t0),
        );
        let pb = EthPort::open_rss(db, &txb, &rxb, &cfg).map_err(e)?;
        let mut y = Side::new(pb, ipb, now(t0));
        println!(
            "two simulated ConnectX-5s, an Ethernet port each (MTU {}, checksums by the device; {} receive queue(s) by RSS on {ipb}), smoltcp {ipa} and {ipb}",
            x.port.mtu(),
            rxb.len()
        );
        let rtts = ping(&mut x, Some(&mut y), t0, ipb, a.pings.max(1))?;
        print_pings(ipb, &rtts);
        tcp_both_ways(&mut x, &mut y, t0, a.mib << 20)?;
        udp_burst(&mut x, &mut y, t0, a.udp)?;
        let (sx, sy) = (x.port.stats(), y.port.stats());
        println!(
            "ports: {} frames sent, {} received, {} checksum drops, {} errors",
            sx.tx_frames + sy.tx_frames,
            sx.rx_frames + sy.rx_frames,
            sx.rx_checksum_drops + sy.rx_checksum_drops,
            sx.tx_errors + sy.tx_errors + sx.rx_errors + sy.rx_errors
        );
        x.port.close().map_err(e)?;
        y.port.close().map_err(e)?;
        Ok(())
    })();
    for cq in [txa, rxa, txb].into_iter().chain(rxb) {
        cq.destroy().map_err(e)?;
    }
    r
}

/// `bytes` from x to y, then from y to x, over one connection; every byte checked.
fn tcp_both_ways(
    x: &mut Side<'_>,
    y: &mut Side<'_>,
    t0: Instant,
    bytes: usize,
) -> Result<(), String> {
    let hy = y.sockets.add(tcp_socket());
    y.sockets
        .get_mut::<tcp::Socket>(hy)
        .listen(5000)
        .map_err(e)?;
    let hx = x.sockets.add(tcp_socket());
    let to = (IpAddress::v4(10, 0, 0, 2), 5000);
    x.sockets
        .get_mut::<tcp::Socket>(hx)
        .connect(x.iface.context(), to, 49152)
        .map_err(e)?;
    for (dir, from_x) in [
        ("10.0.0.1 -> 10.0.0.2", true),
        ("10.0.0.2 -> 10.0.0.1", false),
    ] {
        let before = (x.port.stats(), y.port.stats());
        let start = Instant::now();
        let (mut sent, mut got) = (0usize, 0usize);
        while got < bytes {
            let t = now(t0);
            x.poll(t);
            y.poll(t);
            let (tx, rx) = if from_x {
                (
                    x.sockets.get_mut::<tcp::Socket>(hx),
                    y.sockets.get_mut::<tcp::Socket>(hy),
                )
            } else {
                (
                    y.sockets.get_mut::<tcp::Socket>(hy),
                    x.sockets.get_mut::<tcp::Socket>(hx),
                )
            };
            send_pattern(tx, &mut sent, bytes)?;
            if let Some(at) = recv_pattern(rx, &mut got)? {
                return Err(format!("TCP {dir}: byte {at} differs"));
            }
            if start.elapsed() > Duration::from_secs(120) {
                return Err(format!("TCP {dir}: {got} of {bytes} bytes after 120 s"));
            }
        }
        let secs = start.elapsed().as_secs_f64();
        let frames = (x.port.stats().tx_frames - before.0.tx_frames)
            + (y.port.stats().tx_frames - before.1.tx_frames);
        println!(
            "tcp {dir}: {} MiB, every byte checked, in {:.3} s: {:.0} MB/s, {:.0} frames/s (both ways)",
            bytes >> 20,
            secs,
            bytes as f64 / secs / 1e6,
            frames as f64 / secs
        );
    }
    x.sockets.get_mut::<tcp::Socket>(hx).close();
    y.sockets.get_mut::<tcp::Socket>(hy).close();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(2) {
        let t = now(t0);
        x.poll(t);
        y.poll(t);
        let (sx, sy) = (
            x.sockets.get::<tcp::Socket>(hx).state(),
            y.sockets.get::<tcp::Socket>(hy).state(),
        );
        let gone = |st| matches!(st, tcp::State::TimeWait | tcp::State::Closed);
        if gone(sx) && gone(sy) {
            break;
        }
    }
    Ok(())
}

/// `n` datagrams of 1024 bytes from x's ports 40000..40016 to y's port 9; each checked.
fn udp_burst(x: &mut Side<'_>, y: &mut Side<'_>, t0: Instant, n: u32) -> Result<(), String> {
    let sock = |slots| {
        udp::Socket::new(
            udp::PacketBuffer::new(
                vec![udp::PacketMetadata::EMPTY; slots],
                vec![0; slots * 1100],
            ),
            udp::PacketBuffer::new(
                vec![udp::PacketMetadata::EMPTY; slots],
                vec![0; slots * 1100],
            ),
        )
    };
    let hy = y.sockets.add(sock(512));
    y.sockets.get_mut::<udp::Socket>(hy).bind(9).map_err(e)?;
    let hs: Vec<SocketHandle> = (0..16u16)
        .map(|k| {
            let h = x.sockets.add(sock(64));
            let _ = x.sockets.get_mut::<udp::Socket>(h).bind(40000 + k);
            h
        })
        .collect();
    let to = IpEndpoint::new(IpAddress::v4(10, 0, 0, 2), 9);
    let queues_before = y.port.queue_frames().to_vec();
    let start = Instant::now();
    let (mut sent, mut got) = (0u32, 0u32);
    let mut seen = vec![false; n as usize];
    while got < n {
        for (k, h) in hs.iter().enumerate() {
            let s = x.sockets.get_mut::<udp::Socket>(*h);
            while sent < n && s.can_send() && sent as usize % hs.len() == k {
                let mut d = [0u8; 1024];
                d[..4].copy_from_slice(&sent.to_be_bytes());
                for (i, v) in d[4..].iter_mut().enumerate() {
                    *v = pattern(sent as usize + i);
                }
                s.send_slice(&d, to).map_err(e)?;
                sent += 1;
            }
        }
        let t = now(t0);
        x.poll(t);
        y.poll(t);
        let r = y.sockets.get_mut::<udp::Socket>(hy);
        while let Ok((d, meta)) = r.recv() {
            let seq = u32::from_be_bytes(d[..4].try_into().map_err(e)?);
            let ok = d.len() == 1024
                && (seq as usize) < seen.len()
                && d[4..]
                    .iter()
                    .enumerate()
                    .all(|(i, &v)| v == pattern(seq as usize + i))
                && meta.endpoint.port == 40000 + (seq % 16) as u16;
            if !ok || std::mem::replace(&mut seen[seq as usize], true) {
                return Err(format!(
                    "UDP datagram {seq} from {} is wrong or twice",
                    meta.endpoint
                ));
            }
            got += 1;
        }
        if start.elapsed() > Duration::from_secs(60) {
            return Err(format!("UDP: {got} of {n} datagrams after 60 s"));
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let per_queue: Vec<u64> = y
        .port
        .queue_frames()
        .iter()
        .zip(&queues_before)
        .map(|(a, b)| a - b)
        .collect();
    println!(
        "udp: {n} datagrams of 1024 bytes from 16 source ports, each checked, in {secs:.3} s: {:.0} datagrams/s; per receive queue {per_queue:?}",
        f64::from(n) / secs
    );
    Ok(())
}

/// One NIC on a real link: ping the peer, then serve TCP echo.
fn with_peer(
    a: &Args,
    dev: &Device<AnyPlatform>,
    ip: Ipv4Addr,
    peer: Ipv4Addr,
) -> Result<(), String> {
    let (tx, rx) = (
        dev.create_cq(512).map_err(e)?,
        dev.create_cq(512).map_err(e)?,
    );
    let r = (|| {
        let t0 = Instant::now();
        let port = EthPort::open(dev, &tx, &rx, &EthPortConfig::default()).map_err(e)?;
        let mut s = Side::new(port, ip, now(t0));
        println!(
            "Ethernet port {:02x?} (SQ/RQ {:?}), smoltcp {ip}/24; peer {peer}",
            s.port.mac(),
            s.port.queues()
        );
        // The peer may still be coming up: the first echo request is retried.
        let deadline = Instant::now() + Duration::from_secs(a.wait_secs);
        let rtts = loop {
            match ping(&mut s, None, t0, peer, a.pings.max(1)) {
                Ok(r) => break r,
                Err(x) if Instant::now() > deadline => return Err(x),
                Err(_) => {}
            }
        };
        print_pings(peer, &rtts);
        if let Some(p) = a.echo {
            echo(&mut s, t0, p, a.echo_bytes, deadline)?;
        }
        if let Some(p) = a.echo_to {
            echo_client(&mut s, t0, (peer, p), a.echo_bytes, deadline)?;
        }
        let until = Instant::now() + Duration::from_secs(a.linger);
        while Instant::now() < until {
            s.poll(now(t0));
            std::thread::sleep(Duration::from_micros(100));
        }
        let st = s.port.stats();
        println!(
            "port: {} frames sent, {} received, {} checksum drops, {} errors",
            st.tx_frames,
            st.rx_frames,
            st.rx_checksum_drops,
            st.tx_errors + st.rx_errors
        );
        s.port.close().map_err(e)
    })();
    tx.destroy().map_err(e)?;
    rx.destroy().map_err(e)?;
    r
}

/// TCP echo on `port` for one connection: what arrives goes back, until `bytes` went back;
/// then the connection is closed.
fn echo(
    s: &mut Side<'_>,
    t0: Instant,
    port: u16,
    bytes: usize,
    deadline: Instant,
) -> Result<(), String> {
    let h = s.sockets.add(tcp_socket());
    s.sockets
        .get_mut::<tcp::Socket>(h)
        .listen(port)
        .map_err(e)?;
    println!("tcp echo: listening on port {port}");
    let (mut back, mut pending) = (0usize, Vec::<u8>::new());
    let start = Instant::now();
    loop {
        s.poll(now(t0));
        let sock = s.sockets.get_mut::<tcp::Socket>(h);
        while sock.can_recv() && pending.len() < 1 << 20 {
            sock.recv(|b| {
                pending.extend_from_slice(b);
                (b.len(), ())
            })
            .map_err(e)?;
        }
        if !pending.is_empty() && sock.can_send() {
            let n = sock.send_slice(&pending).map_err(e)?;
            pending.drain(..n);
            back += n;
        }
        if back >= bytes && pending.is_empty() && sock.send_queue() == 0 {
            sock.close();
        }
        if back > 0 && matches!(sock.state(), tcp::State::Closed | tcp::State::TimeWait) {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!(
                "tcp echo: {back} of {bytes} bytes echoed before the deadline"
            ));
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!("tcp echo: {back} bytes echoed and the connection closed ({secs:.2} s)");
    Ok(())
}

/// Sends `bytes` of [`pattern`] to the echo service at `to` and checks every byte that comes
/// back; then closes.
fn echo_client(
    s: &mut Side<'_>,
    t0: Instant,
    to: (Ipv4Addr, u16),
    bytes: usize,
    deadline: Instant,
) -> Result<(), String> {
    let h = s.sockets.add(tcp_socket());
    let start = Instant::now();
    let (mut sent, mut got, mut connected) = (0usize, 0usize, false);
    while got < bytes {
        s.poll(now(t0));
        let sock = s.sockets.get_mut::<tcp::Socket>(h);
        if !sock.is_open() {
            if connected {
                return Err(format!(
                    "tcp echo to {}:{}: closed after {got} of {bytes} bytes",
                    to.0, to.1
                ));
            }
            // Not listening yet (or refused): try again.
            sock.connect(s.iface.context(), (IpAddress::Ipv4(to.0), to.1), 49152)
                .map_err(e)?;
        }
        connected |= sock.may_send();
        send_pattern(sock, &mut sent, bytes)?;
        if let Some(at) = recv_pattern(sock, &mut got)? {
            return Err(format!("tcp echo: byte {at} came back wrong"));
        }
        if Instant::now() > deadline {
            return Err(format!(
                "tcp echo to {}:{}: {got} of {bytes} bytes back before the deadline",
                to.0, to.1
            ));
        }
    }
    s.sockets.get_mut::<tcp::Socket>(h).close();
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until && s.sockets.get::<tcp::Socket>(h).is_open() {
        s.poll(now(t0));
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "tcp echo to {}:{}: {bytes} bytes sent and every one back ({secs:.2} s)",
        to.0, to.1
    );
    Ok(())
}
