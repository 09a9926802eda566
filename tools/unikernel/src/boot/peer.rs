//! `mlx5.mode=peer`: one NIC, and a peer on the fabric that is not ours — a Linux guest with
//! mlx5_core, mlx5_ib and Debian's rdma-core on the other NIC (tests/unikernel-qemu). The image
//! takes `mlx5.ip=A.B.C.D/N` (its GID index 1 becomes that IPv4-mapped GID) and `mlx5.peer=`,
//! answers pings and ARP through smoltcp, then:
//! 1. serves `ibv_rc_pingpong -g 1` on TCP 18515 (the peer's tool is the client);
//! 2. connects to the peer's `ibv_rc_pingpong -g 1 -p 18516` (the peer's tool is the server);
//! 3. echoes one TCP connection on port 5001 until the peer closes it.

use smoltcp::iface::SocketStorage;
use smoltcp::socket::tcp;
use smoltcp::wire::Ipv4Address;

use mlx5::eth::{EthPort, EthPortConfig};
use mlx5::{GidEntry, Platform};

use super::console::uptime_us;
use super::demo::Nic;
use super::net::{tcp_socket, NetError};
use super::pingpong::{session, Role};
use super::stack::{step, Stack};
use super::verdict::{check, fail};

/// What the command line asked of peer mode.
#[derive(Debug, Clone, Copy)]
pub struct PeerArgs {
    /// This NIC's address and prefix length.
    pub ip: ([u8; 4], u8),
    /// The peer's address.
    pub peer: [u8; 4],
    /// Pingpong iterations and message size (the tool's -n and -s).
    pub iters: u32,
    /// Bytes per message.
    pub size: u32,
    /// Bytes the peer's TCP stream is expected to carry.
    pub stream: usize,
}

/// Parses `a.b.c.d` or `a.b.c.d/n`.
pub fn parse_ip(s: &str) -> Option<([u8; 4], u8)> {
    let (addr, prefix) = match s.split_once('/') {
        Some((a, p)) => (a, p.parse::<u8>().ok().filter(|&p| p <= 32)?),
        None => (s, 24),
    };
    let mut ip = [0u8; 4];
    let mut parts = addr.split('.');
    for b in &mut ip {
        *b = parts.next()?.parse().ok()?;
    }
    parts.next().is_none().then_some((ip, prefix))
}

const SERVER_PORT: u16 = 18515;
const CLIENT_PORT: u16 = 18516;
const ECHO_PORT: u16 = 5001;

/// Runs peer mode on `nic`.
pub fn run<P: Platform>(nic: &Nic<'_, P>, a: &PeerArgs) -> Result<(), NetError> {
    let dev = nic.dev;
    let drv = |what| move |e| NetError::Driver(what, e);
    let mac = dev.vport().mac;
    dev.set_gid(1, Some(GidEntry::ipv4(a.ip.0, mac)))
        .map_err(drv("set GID 1"))?;
    let mem = crate::metal::x86::net_memory().ok_or(NetError::Memory)?;
    let (tx, rx) = (
        dev.create_cq(512).map_err(drv("create_cq"))?,
        dev.create_cq(512).map_err(drv("create_cq"))?,
    );
    let r = (|| {
        let port =
            EthPort::open(dev, &tx, &rx, &EthPortConfig::default()).map_err(drv("open port"))?;
        let mut store = [SocketStorage::EMPTY; 4];
        let mut s = Stack::new(dev, nic.vector, &rx, port, a.ip.0, a.ip.1, &mut store);
        let mut m: &mut [u8] = &mut *mem;
        let pp = s.sockets.add(tcp_socket(&mut m, 64 << 10, 64 << 10)?);
        let echo = s.sockets.add(tcp_socket(&mut m, 256 << 10, 256 << 10)?);
        crate::say!(
            "peer mode: {}.{}.{}.{}/{} (GID 1 ::ffff:{0}.{1}.{2}.{3}), MAC {:02x?}; waiting for the peer at {}.{}.{}.{}",
            a.ip.0[0], a.ip.0[1], a.ip.0[2], a.ip.0[3], a.ip.1, mac, a.peer[0], a.peer[1], a.peer[2], a.peer[3]
        );
        let r = steps(&mut s, pp, echo, a);
        let st = s.port.inner.stats();
        log::info!(
            "port: {} frames sent, {} received, {} checksum drops; {} echo requests answered",
            st.tx_frames,
            st.rx_frames,
            st.rx_checksum_drops,
            s.port.neighbours.echo_requests
        );
        let pings = s.port.neighbours.echo_requests;
        check(
            "peer-pinged",
            pings > 0,
            format_args!("the peer's ping: {pings} echo requests answered by smoltcp"),
        );
        let Stack { port, .. } = s;
        let closed = port.inner.close().map_err(drv("close port"));
        r.and(closed)
    })();
    tx.destroy().map_err(drv("destroy CQ"))?;
    rx.destroy().map_err(drv("destroy CQ"))?;
    r
}

fn steps<P: Platform>(
    s: &mut Stack<'_, '_, P>,
    pp: smoltcp::iface::SocketHandle,
    echo: smoltcp::iface::SocketHandle,
    a: &PeerArgs,
) -> Result<(), NetError> {
    let show = |name: &str, r: Result<super::pingpong::Session, NetError>| match r {
        Ok(x) => {
            let bytes = 2 * u64::from(a.size) * u64::from(x.iters);
            check(
                name,
                true,
                format_args!(
                    "{} iters of {} bytes with QP {:#x}: {} bytes in {}.{:03} s, {} usec/iter",
                    x.iters,
                    a.size,
                    x.remote.qpn,
                    bytes,
                    x.us / 1_000_000,
                    x.us / 1000 % 1000,
                    x.us / u64::from(x.iters.max(1))
                ),
            );
        }
        Err(e) => fail(name, format_args!("{e}")),
    };
    show(
        "peer-pingpong-server",
        session(
            s,
            pp,
            Role::Server,
            SERVER_PORT,
            1,
            a.size,
            a.iters,
            600_000_000,
        ),
    );
    show(
        "peer-pingpong-client",
        session(
            s,
            pp,
            Role::Client(Ipv4Address::from(a.peer)),
            CLIENT_PORT,
            1,
            a.size,
            a.iters,
            300_000_000,
        ),
    );
    // The echo: everything that arrives goes back, until the peer closes.
    s.sockets
        .get_mut::<tcp::Socket>(echo)
        .listen(ECHO_PORT)
        .map_err(|_| NetError::Stack("listen"))?;
    let mut hold = [0u8; 16384];
    let (mut held, mut at, mut total, mut started) = (0usize, 0usize, 0usize, false);
    let deadline = uptime_us() + 300_000_000;
    loop {
        step(&mut [&mut *s]);
        let t = s.sockets.get_mut::<tcp::Socket>(echo);
        // Established once (SynReceived is active but cannot receive yet).
        started |= t.may_recv();
        if held > at && t.can_send() {
            at += t
                .send_slice(&hold[at..held])
                .map_err(|_| NetError::Stack("echo send"))?;
        }
        if held == at && t.can_recv() {
            held = t
                .recv_slice(&mut hold)
                .map_err(|_| NetError::Stack("echo recv"))?;
            at = 0;
            total += held;
        }
        if started && held == at && !t.may_recv() {
            t.close();
            break;
        }
        if uptime_us() > deadline {
            return Err(NetError::Timeout("the peer's TCP stream"));
        }
    }
    for _ in 0..100 {
        step(&mut [&mut *s]);
    }
    check(
        "peer-tcp-echo",
        total == a.stream,
        format_args!(
            "the peer's TCP stream echoed: {total} bytes (expected {})",
            a.stream
        ),
    );
    Ok(())
}
