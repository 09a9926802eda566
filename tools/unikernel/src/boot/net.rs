//! TCP/IP between the two NICs, each with its own smoltcp over an [`EthPort`] on its Ethernet
//! queues: ARP, ten pings from A to B (B's interface answers), and a TCP stream from A through
//! B's echo and back — 1 MiB each way, every byte checked on both sides.

use core::fmt;

use smoltcp::iface::SocketStorage;
use smoltcp::socket::{icmp, tcp};
use smoltcp::wire::{Icmpv4Packet, Icmpv4Repr, IpAddress, Ipv4Address};

use mlx5::eth::{EthPort, EthPortConfig};
use mlx5::Platform;

use super::console::uptime_us;
use super::demo::Nic;
use super::stack::{step, Stack};
use super::verdict::check;

/// A's and B's addresses.
pub const IP_A: [u8; 4] = [198, 18, 0, 1];
/// B's address.
pub const IP_B: [u8; 4] = [198, 18, 0, 2];
/// The stream's length.
const STREAM: usize = 1 << 20;
/// The echo's port.
const ECHO_PORT: u16 = 5001;

/// Why the TCP/IP run failed.
#[derive(Debug)]
pub enum NetError {
    /// The driver failed.
    Driver(&'static str, mlx5::Error),
    /// A step did not finish in time.
    Timeout(&'static str),
    /// smoltcp refused.
    Stack(&'static str),
    /// Static memory ran out.
    Memory,
}

impl fmt::Display for NetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Driver(s, e) => write!(f, "{s}: {e}"),
            Self::Timeout(s) => write!(f, "{s}: timed out"),
            Self::Stack(s) => write!(f, "{s}: refused by smoltcp"),
            Self::Memory => write!(f, "the static socket memory is used up or taken"),
        }
    }
}

/// The byte at `i` of the checked stream.
pub fn pattern(i: usize) -> u8 {
    (i as u8).wrapping_mul(31) ^ (i >> 9) as u8
}

/// Carves `len` bytes off `mem`.
pub fn carve<'m>(mem: &mut &'m mut [u8], len: usize) -> Result<&'m mut [u8], NetError> {
    if mem.len() < len {
        return Err(NetError::Memory);
    }
    let (a, b) = core::mem::take(mem).split_at_mut(len);
    *mem = b;
    Ok(a)
}

/// A TCP socket over `rx` and `tx` bytes of `mem`.
pub fn tcp_socket<'m>(
    mem: &mut &'m mut [u8],
    rx: usize,
    tx: usize,
) -> Result<tcp::Socket<'m>, NetError> {
    let r = carve(mem, rx)?;
    let t = carve(mem, tx)?;
    let mut s = tcp::Socket::new(tcp::SocketBuffer::new(r), tcp::SocketBuffer::new(t));
    s.set_ack_delay(None);
    s.set_nagle_enabled(false);
    Ok(s)
}

/// Runs ping and the TCP stream between `a` and `b`.
pub fn run<P: Platform>(a: &Nic<'_, P>, b: &Nic<'_, P>) -> Result<(), NetError> {
    let mut mem = crate::metal::x86::net_memory().ok_or(NetError::Memory)?;
    let (txa, rxa) = (cq(a.dev)?, cq(a.dev)?);
    let (txb, rxb) = (cq(b.dev)?, cq(b.dev)?);
    let r = ports(a, b, [&txa, &rxa, &txb, &rxb], &mut mem);
    for c in [txa, rxa, txb, rxb] {
        c.destroy().map_err(|e| NetError::Driver("destroy CQ", e))?;
    }
    r
}

fn cq<P: Platform>(d: &mlx5::Device<P>) -> Result<mlx5::cq::Cq<'_, P>, NetError> {
    d.create_cq(512)
        .map_err(|e| NetError::Driver("create_cq", e))
}

fn ports<'a, P: Platform>(
    a: &Nic<'a, P>,
    b: &Nic<'a, P>,
    [txa, rxa, txb, rxb]: [&'a mlx5::cq::Cq<'a, P>; 4],
    mem: &mut &mut [u8],
) -> Result<(), NetError> {
    let cfg = EthPortConfig::default();
    let pa =
        EthPort::open(a.dev, txa, rxa, &cfg).map_err(|e| NetError::Driver("open port A", e))?;
    let pb =
        EthPort::open(b.dev, txb, rxb, &cfg).map_err(|e| NetError::Driver("open port B", e))?;
    let mut sa_store = [SocketStorage::EMPTY; 4];
    let mut sb_store = [SocketStorage::EMPTY; 4];
    let mut meta = [icmp::PacketMetadata::EMPTY; 8];
    let mut sa = Stack::new(a.dev, a.vector, rxa, pa, IP_A, 24, &mut sa_store);
    let mut sb = Stack::new(b.dev, b.vector, rxb, pb, IP_B, 24, &mut sb_store);
    let mut mem: &mut [u8] = mem;
    let r = body(&mut sa, &mut sb, &mut mem, &mut meta);
    let (ta, tb) = (sa.port.inner.stats(), sb.port.inner.stats());
    log::info!(
        "ports: A sent {} frames, received {}; B sent {}, received {}; checksum drops {} / {}",
        ta.tx_frames,
        ta.rx_frames,
        tb.tx_frames,
        tb.rx_frames,
        ta.rx_checksum_drops,
        tb.rx_checksum_drops
    );
    let closed = sa.port.inner.close().and(sb.port.inner.close());
    r?;
    closed.map_err(|e| NetError::Driver("close ports", e))
}

fn body<'a, 's, P: Platform>(
    sa: &mut Stack<'a, 's, P>,
    sb: &mut Stack<'a, 's, P>,
    mem: &mut &'s mut [u8],
    meta: &'s mut [icmp::PacketMetadata; 8],
) -> Result<(), NetError> {
    // --- ping ---
    let icmp_rx = carve(mem, 4096)?;
    let icmp_tx = carve(mem, 4096)?;
    let (meta_rx, meta_tx) = meta.split_at_mut(4);
    let sock = icmp::Socket::new(
        icmp::PacketBuffer::new(meta_rx, icmp_rx),
        icmp::PacketBuffer::new(meta_tx, icmp_tx),
    );
    let h = sa.sockets.add(sock);
    let ident = 0x4d58;
    sa.sockets
        .get_mut::<icmp::Socket>(h)
        .bind(icmp::Endpoint::Ident(ident))
        .map_err(|_| NetError::Stack("icmp bind"))?;
    let payload: [u8; 56] = core::array::from_fn(|i| i as u8);
    let mut rtts = heapless::Vec::<u64, 16>::new();
    for seq in 0..10u16 {
        let start = uptime_us();
        let mut sent = false;
        loop {
            step(&mut [&mut *sa, &mut *sb]);
            let s = sa.sockets.get_mut::<icmp::Socket>(h);
            if !sent && s.can_send() {
                let req = Icmpv4Repr::EchoRequest {
                    ident,
                    seq_no: seq,
                    data: &payload,
                };
                let buf = s
                    .send(req.buffer_len(), IpAddress::Ipv4(Ipv4Address::from(IP_B)))
                    .map_err(|_| NetError::Stack("icmp send"))?;
                req.emit(&mut Icmpv4Packet::new_unchecked(buf), &Default::default());
                sent = true;
            }
            if s.can_recv() {
                let (data, _) = s.recv().map_err(|_| NetError::Stack("icmp recv"))?;
                let p =
                    Icmpv4Packet::new_checked(data).map_err(|_| NetError::Stack("icmp parse"))?;
                if let Ok(Icmpv4Repr::EchoReply {
                    ident: i,
                    seq_no,
                    data,
                }) = Icmpv4Repr::parse(&p, &Default::default())
                {
                    if i == ident && seq_no == seq && data == payload {
                        let _ = rtts.push(uptime_us() - start);
                        break;
                    }
                }
            }
            if uptime_us() - start > 5_000_000 {
                return Err(NetError::Timeout("echo reply"));
            }
        }
    }
    rtts.sort_unstable();
    check(
        "net-ping",
        rtts.len() == 10,
        format_args!(
            "10 echo requests A -> B answered (ARP first), payload checked; RTT median {} us, max {} us",
            rtts[5],
            rtts[9]
        ),
    );
    sa.sockets.remove(h);

    // --- TCP: A sends the pattern, B echoes it, both check every byte ---
    let hb = {
        let mut s = tcp_socket(mem, 256 << 10, 256 << 10)?;
        s.listen(ECHO_PORT).map_err(|_| NetError::Stack("listen"))?;
        sb.sockets.add(s)
    };
    let ha = {
        let s = tcp_socket(mem, 256 << 10, 256 << 10)?;
        sa.sockets.add(s)
    };
    sa.sockets
        .get_mut::<tcp::Socket>(ha)
        .connect(
            sa.iface.context(),
            (Ipv4Address::from(IP_B), ECHO_PORT),
            49152,
        )
        .map_err(|_| NetError::Stack("connect"))?;
    let (mut sent, mut echoed_in, mut echoed_out, mut back) = (0usize, 0usize, 0usize, 0usize);
    let (mut bad_b, mut bad_a) = (0usize, 0usize);
    let mut hold = [0u8; 16384];
    let (mut held, mut held_at) = (0usize, 0usize);
    let t0 = uptime_us();
    while back < STREAM {
        step(&mut [&mut *sa, &mut *sb]);
        let s = sa.sockets.get_mut::<tcp::Socket>(ha);
        while sent < STREAM && s.can_send() {
            let at = sent;
            let n = s
                .send(|b| {
                    let n = b.len().min(STREAM - at);
                    for (k, v) in b[..n].iter_mut().enumerate() {
                        *v = pattern(at + k);
                    }
                    (n, n)
                })
                .map_err(|_| NetError::Stack("send"))?;
            sent += n;
            if n == 0 {
                break;
            }
        }
        while s.can_recv() {
            let at = back;
            let n = s
                .recv(|b| {
                    for (k, &v) in b.iter().enumerate() {
                        if v != pattern(at + k) {
                            bad_a += 1;
                        }
                    }
                    (b.len(), b.len())
                })
                .map_err(|_| NetError::Stack("recv"))?;
            back += n;
            if n == 0 {
                break;
            }
        }
        // B: what it holds goes back first, then it takes more.
        let e = sb.sockets.get_mut::<tcp::Socket>(hb);
        if held > held_at && e.can_send() {
            let n = e
                .send_slice(&hold[held_at..held])
                .map_err(|_| NetError::Stack("echo send"))?;
            held_at += n;
            echoed_out += n;
        }
        if held_at == held && e.can_recv() {
            let n = e
                .recv_slice(&mut hold)
                .map_err(|_| NetError::Stack("echo recv"))?;
            for (k, &v) in hold[..n].iter().enumerate() {
                if v != pattern(echoed_in + k) {
                    bad_b += 1;
                }
            }
            echoed_in += n;
            (held, held_at) = (n, 0);
        }
        if uptime_us() - t0 > 120_000_000 {
            return Err(NetError::Timeout("TCP stream"));
        }
    }
    let us = (uptime_us() - t0).max(1);
    sa.sockets.get_mut::<tcp::Socket>(ha).close();
    for _ in 0..200 {
        step(&mut [&mut *sa, &mut *sb]);
        if sb.sockets.get_mut::<tcp::Socket>(hb).may_recv() {
            continue;
        }
        break;
    }
    check(
        "net-tcp-echo",
        bad_a == 0 && bad_b == 0 && back == STREAM && echoed_out == STREAM,
        format_args!(
            "{STREAM} bytes A -> B -> A over TCP, every byte checked on both sides ({bad_b} / {bad_a} wrong), {} KB/s",
            (2 * STREAM as u64) * 1000 / us
        ),
    );
    Ok(())
}
