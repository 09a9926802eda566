//! rdma-core's `ibv_rc_pingpong` inside the image: the same out-of-band exchange (the 52-byte
//! `LLLL:QQQQQQ:PPPPPP:GID` message, then `done`) over a smoltcp TCP connection on the NIC's own
//! Ethernet queues, the same QP attributes, and the same loop — so the real tool on another
//! host is the peer, as server or as client.

use smoltcp::iface::SocketHandle;
use smoltcp::socket::tcp;
use smoltcp::wire::Ipv4Address;

use mlx5::mr::MrAccess;
use mlx5::qp::{
    Access, ConnectOpts, Mtu, QpCap, QpEndpoint, QpInitAttr, QpType, RecvWr, SendWr, Sge,
};
use mlx5::{Platform, Wc, WcStatus};

use super::console::uptime_us;
use super::net::NetError;
use super::stack::Stack;
use crate::exchange::{Dest, MSG};

const RECV_WRID: u64 = 1;
const SEND_WRID: u64 = 2;

/// Reads exactly `buf.len()` bytes from the connection, polling the stack; bounded.
fn read_exact<P: Platform>(
    s: &mut Stack<'_, '_, P>,
    h: SocketHandle,
    buf: &mut [u8],
    deadline: u64,
) -> Result<(), NetError> {
    let mut got = 0;
    while got < buf.len() {
        super::stack::step(&mut [&mut *s]);
        let t = s.sockets.get_mut::<tcp::Socket>(h);
        if t.can_recv() {
            got += t
                .recv_slice(&mut buf[got..])
                .map_err(|_| NetError::Stack("recv"))?;
        } else if !t.may_recv() {
            return Err(NetError::Stack("connection closed during the exchange"));
        }
        if uptime_us() > deadline {
            return Err(NetError::Timeout("the exchange"));
        }
    }
    Ok(())
}

/// Writes all of `data`, polling the stack; bounded.
fn write_all<P: Platform>(
    s: &mut Stack<'_, '_, P>,
    h: SocketHandle,
    data: &[u8],
    deadline: u64,
) -> Result<(), NetError> {
    let mut put = 0;
    while put < data.len() {
        let t = s.sockets.get_mut::<tcp::Socket>(h);
        if t.can_send() {
            put += t
                .send_slice(&data[put..])
                .map_err(|_| NetError::Stack("send"))?;
        } else if !t.may_send() {
            return Err(NetError::Stack("connection closed during the exchange"));
        }
        super::stack::step(&mut [&mut *s]);
        if uptime_us() > deadline {
            return Err(NetError::Timeout("the exchange"));
        }
    }
    Ok(())
}

/// What a session measured.
#[derive(Debug, Clone, Copy)]
pub struct Session {
    /// The peer's address.
    pub remote: Dest,
    /// Iterations each way.
    pub iters: u32,
    /// Microseconds the loop took.
    pub us: u64,
}

/// Which end of the exchange.
#[derive(Debug, Clone, Copy)]
pub enum Role {
    /// Listens on the port; the peer's tool connects.
    Server,
    /// Connects to the peer's tool at this address.
    Client(Ipv4Address),
}

/// One `ibv_rc_pingpong` session with `-g gid_index -s size -n iters` on TCP `port`; `tcp` is a
/// socket of the stack to make the connection with. Waits up to `wait_us` for the peer.
#[allow(clippy::too_many_arguments)]
pub fn session<P: Platform>(
    s: &mut Stack<'_, '_, P>,
    tcp_h: SocketHandle,
    role: Role,
    port: u16,
    gid_index: u8,
    size: u32,
    iters: u32,
    wait_us: u64,
) -> Result<Session, NetError> {
    let dev = s.dev;
    let drv = |what| move |e| NetError::Driver(what, e);
    let gid = dev
        .gid(u16::from(gid_index))
        .ok_or(NetError::Stack("no GID at that index"))?
        .gid;
    let pd = dev.pd();
    let rx_depth = 500u32;
    let mr = dev
        .alloc_mr(
            pd,
            size as usize,
            MrAccess {
                local_write: true,
                ..MrAccess::default()
            },
        )
        .map_err(drv("alloc_mr"))?;
    let cq = dev.create_cq(rx_depth + 1).map_err(drv("create_cq"))?;
    let cap = QpCap {
        max_send_wr: 1,
        max_recv_wr: rx_depth,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let mut qp = dev
        .create_qp(pd, &QpInitAttr::new(QpType::Rc, &cq, &cq, cap))
        .map_err(drv("create_qp"))?;
    let sge = [Sge {
        addr: mr.addr(),
        length: size,
        lkey: mr.lkey(),
    }];
    let me = Dest {
        lid: 0,
        qpn: qp.qpn(),
        psn: (crate::metal::x86::rdtsc() as u32 >> 4) & 0xff_ffff,
        gid,
    };
    let deadline = uptime_us() + wait_us;
    // The connection: listen and wait, or connect again until the peer's tool listens.
    loop {
        let t = s.sockets.get_mut::<tcp::Socket>(tcp_h);
        if !t.is_open() {
            match role {
                Role::Server => t.listen(port).map_err(|_| NetError::Stack("listen"))?,
                Role::Client(ip) => {
                    let local = 49152 + (uptime_us() % 8192) as u16;
                    t.connect(s.iface.context(), (ip, port), local)
                        .map_err(|_| NetError::Stack("connect"))?;
                }
            }
        }
        let t = s.sockets.get_mut::<tcp::Socket>(tcp_h);
        if t.may_send() {
            break;
        }
        if uptime_us() > deadline {
            return Err(NetError::Timeout("waiting for the peer's pingpong"));
        }
        super::stack::step(&mut [&mut *s]);
    }
    log::info!(
        "pingpong: connected ({role:?}, port {port}); local address {:?}",
        me
    );
    let mut m = [0u8; MSG];
    let ex_deadline = uptime_us() + 60_000_000;
    let opts = ConnectOpts {
        mtu: Mtu::Mtu1024,
        gid_index,
        access: Access::default(),
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        min_rnr_timer: 12,
        max_rd_atomic: 1,
        qkey: 0x1111_1111,
        hop_limit: 64,
        traffic_class: 0,
        sq_psn: me.psn,
    };
    let post_recvs = |qp: &mut mlx5::qp::Qp<'_, P>, n: u32| -> Result<u32, NetError> {
        for _ in 0..n {
            qp.post_recv(&[RecvWr {
                wr_id: RECV_WRID,
                sg_list: &sge,
            }])
            .map_err(drv("post_recv"))?;
        }
        Ok(n)
    };
    let connect = |s: &mut Stack<'_, '_, P>,
                   qp: &mut mlx5::qp::Qp<'_, P>,
                   rem: &Dest|
     -> Result<(), NetError> {
        let ip: [u8; 4] = rem.gid[12..]
            .try_into()
            .map_err(|_| NetError::Stack("GID"))?;
        let mac = s
            .port
            .neighbours
            .mac_of(ip)
            .ok_or(NetError::Stack("the peer's MAC was never seen"))?;
        qp.connect(
            &QpEndpoint {
                qpn: rem.qpn,
                gid: rem.gid,
                mac,
                psn: rem.psn,
            },
            &opts,
        )
        .map_err(drv("connect"))
    };
    let (rem, mut routs) = match role {
        Role::Client(_) => {
            write_all(s, tcp_h, &me.to_wire(), ex_deadline)?;
            read_exact(s, tcp_h, &mut m, ex_deadline)?;
            let rem = Dest::from_wire(&m)
                .ok_or(NetError::Stack("the peer's address is not LID:QPN:PSN:GID"))?;
            write_all(s, tcp_h, b"done\0", ex_deadline)?;
            connect(s, &mut qp, &rem)?;
            (rem, post_recvs(&mut qp, rx_depth)?)
        }
        Role::Server => {
            read_exact(s, tcp_h, &mut m, ex_deadline)?;
            let rem = Dest::from_wire(&m)
                .ok_or(NetError::Stack("the peer's address is not LID:QPN:PSN:GID"))?;
            connect(s, &mut qp, &rem)?;
            let r = post_recvs(&mut qp, rx_depth)?;
            write_all(s, tcp_h, &me.to_wire(), ex_deadline)?;
            let mut done = [0u8; 5];
            read_exact(s, tcp_h, &mut done, ex_deadline)?;
            (rem, r)
        }
    };
    log::info!("pingpong: remote QPN {:#08x} PSN {:#08x}", rem.qpn, rem.psn);
    let send = |qp: &mut mlx5::qp::Qp<'_, P>| {
        qp.post_send(&[SendWr::send(SEND_WRID, &sge)])
            .map_err(drv("post_send"))
    };
    let mut pending = RECV_WRID;
    if matches!(role, Role::Client(_)) {
        send(&mut qp)?;
        pending |= SEND_WRID;
    }
    let (mut scnt, mut rcnt) = (0u32, 0u32);
    let t0 = uptime_us();
    let mut quiet = t0;
    let mut wc = [Wc::default(); 2];
    let (mut armed, mut seen) = (false, 0);
    while rcnt < iters || scnt < iters {
        let n = cq.poll(&mut wc).map_err(drv("poll"))?;
        if n == 0 {
            if uptime_us() - quiet > 30_000_000 {
                return Err(NetError::Timeout("pingpong completions (none for 30 s)"));
            }
            // Keep the stack answering (ARP) while the loop waits. When both are idle: take
            // the events, arm the CQ and the port, look once more, then sleep until the NIC's
            // interrupt (or the 1 ms timer).
            if s.poll() {
                continue;
            }
            if !armed {
                seen = super::irq::count(s.vector);
                super::events::service_events(dev, Some(&cq)).map_err(drv("events"))?;
                cq.req_notify(false).map_err(drv("req_notify"))?;
                s.arm();
                armed = true;
                continue;
            }
            if super::irq::count(s.vector) == seen {
                super::irq::halt();
            }
            armed = false;
            continue;
        }
        armed = false;
        quiet = uptime_us();
        for w in &wc[..n] {
            if w.status != WcStatus::Success {
                log::error!("pingpong: wr_id {} completed with {:?}", w.wr_id, w.status);
                return Err(NetError::Stack("a completion with an error status"));
            }
            match w.wr_id {
                SEND_WRID => scnt += 1,
                RECV_WRID => {
                    routs -= 1;
                    if routs <= 1 {
                        routs += post_recvs(&mut qp, rx_depth - routs)?;
                    }
                    rcnt += 1;
                }
                _ => return Err(NetError::Stack("a completion for an unknown wr_id")),
            }
            pending &= !w.wr_id;
            if scnt < iters && pending == 0 {
                send(&mut qp)?;
                pending = RECV_WRID | SEND_WRID;
            }
        }
    }
    let us = uptime_us() - t0;
    // The tool closes its socket after the loop; close ours and let the FINs pass.
    s.sockets.get_mut::<tcp::Socket>(tcp_h).close();
    for _ in 0..50 {
        super::stack::step(&mut [&mut *s]);
    }
    s.sockets.get_mut::<tcp::Socket>(tcp_h).abort();
    super::stack::step(&mut [&mut *s]);
    drop(qp);
    cq.destroy().map_err(drv("destroy CQ"))?;
    drop(mr);
    Ok(Session {
        remote: rem,
        iters,
        us,
    })
}
