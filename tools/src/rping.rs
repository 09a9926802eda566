//! `mlx5ctl rping`: rdma-core's `rping` (librdmacm/examples) on this driver and its connection
//! manager, wire-compatible with it (issue #12 item 3): either side can be the real one.
//!
//! The connection is made with CM MADs over QP1 as rdma_cm makes it (`mlx5::cm`): the client
//! sends a REQ for ServiceID 0x01060000 + port (default 7174) with rdma_cm's address header,
//! the server answers REP, the client RTU; the client ends with DREQ, the server answers DREP.
//! Then rping's protocol, per ping (docs/rdma-cm-facts.md §4): the client fills its start
//! buffer ("rdma-ping-N: " then letters 'A'..'z' cycling from a start that moves one each ping,
//! a NUL last) and SENDs {address, rkey, size} (16 bytes, big-endian); the server RDMA-READs it
//! and SENDs a go-ahead; the client SENDs the {address, rkey, size} of its second buffer; the
//! server RDMA-WRITEs what it read there and SENDs a go-ahead; `-V` compares the two buffers.
//! QP: RC, 16 sends, 2 receives, one READ outstanding each way, 7 retries, 7 RNR retries.
//!
//! Connection events met while waiting for completions are set aside only if they are about
//! our connection (at most `ASIDE`); a REQ met then is refused at once (REJ 28: rping serves
//! one client) and other events dropped, both counted (issue #26: a stream of REQs during a
//! run must not pile up).

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use clap::Args as ClapArgs;
use mlx5::cm::{mapped, Cm, CmConfig, CmEvent, CmId, ConnParam, Gsi, GsiBufs, Route};
use mlx5::mr::{MemoryRegion, MrAccess};
use mlx5::qp::{Payload, Qp, QpCap, QpInitAttr, QpType, RecvWr, SendOp, SendWr, Sge};
use mlx5::{Wc, WcOpcode, WcStatus};
use mlx5_vfio::AnyPlatform;

use crate::link::{e, with_host, Host, LinkArgs};

/// `mlx5ctl rping` arguments (rping's own letters).
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Server: wait for a client.
    #[arg(short = 's', conflicts_with = "client")]
    server: bool,
    /// Client: connect to the server at `-a`.
    #[arg(short = 'c')]
    client: bool,
    /// The server's address (client); the address to listen on (server: `--ip` is used).
    #[arg(short = 'a')]
    addr: Option<Ipv4Addr>,
    /// Port.
    #[arg(short = 'p', default_value_t = 7174)]
    port: u16,
    /// Pings (0: until the peer disconnects, the server's way).
    #[arg(short = 'C', default_value_t = 0)]
    count: u32,
    /// Bytes of each ping buffer.
    #[arg(short = 'S', default_value_t = 64)]
    size: u32,
    /// Print each ping's data.
    #[arg(short = 'v')]
    verbose: bool,
    /// Check each ping's data came back intact.
    #[arg(short = 'V')]
    validate: bool,
    #[command(flatten)]
    host: LinkArgs,
}

/// Bytes of rping's `struct rping_rdma_info`: buf (u64), rkey (u32), size (u32), big-endian.
const INFO: usize = 16;
/// rping's smallest buffer (`sizeof(stringify(INT_MAX)) + sizeof("rdma-ping-%d: ")`, as the
/// 56.1 build computes it).
const MIN_SIZE: u32 = 23;
/// How long any one step may take.
const STEP: Duration = Duration::from_secs(30);

type Dev = mlx5::Device<AnyPlatform>;
type Mr<'d> = MemoryRegion<'d, AnyPlatform>;

/// Runs `mlx5ctl rping`.
pub fn run(a: &Args) -> Result<(), String> {
    if a.server == a.client {
        return Err("one of -s (server) or -c (client)".into());
    }
    if !(MIN_SIZE..=65535).contains(&a.size) {
        return Err(format!("-S {}: {MIN_SIZE} to 65535 bytes", a.size));
    }
    if a.client && a.addr.is_none() {
        return Err("the client needs the server's address: -a".into());
    }
    with_host(&a.host, |h| session(a, h))
}

/// The ping buffers and the 16-byte messages.
struct Bufs<'d> {
    recv: Mr<'d>,
    send: Mr<'d>,
    rdma: Mr<'d>,
    start: Mr<'d>,
}

fn bufs(dev: &Dev, size: usize) -> Result<Bufs<'_>, String> {
    let pd = dev.pd();
    let local = MrAccess {
        local_write: true,
        ..MrAccess::default()
    };
    let remote = MrAccess {
        local_write: true,
        remote_read: true,
        remote_write: true,
        ..MrAccess::default()
    };
    Ok(Bufs {
        recv: dev.alloc_mr(pd, INFO, local).map_err(e)?,
        send: dev.alloc_mr(pd, INFO, MrAccess::default()).map_err(e)?,
        rdma: dev.alloc_mr(pd, size, remote).map_err(e)?,
        start: dev.alloc_mr(pd, size, remote).map_err(e)?,
    })
}

/// Connection events set aside at most.
const ASIDE: usize = 16;

/// The moving parts of one connection: CM, QP, CQ, buffers.
struct Conn<'a, 'd> {
    h: &'a Host<'d>,
    cm: Cm<'a, AnyPlatform>,
    qp: Qp<'a, AnyPlatform>,
    cq: &'a mlx5::cq::Cq<'a, AnyPlatform>,
    b: &'a Bufs<'a>,
    id: Option<CmId>,
    /// CM events of our connection met while waiting for completions.
    pending: std::collections::VecDeque<CmEvent>,
    /// REQs refused and other events dropped while a connection ran.
    refused: u64,
    dropped: u64,
}

impl<'a, 'd> Conn<'a, 'd> {
    fn relax(&self) {
        mlx5::Platform::relax(self.h.dev.platform());
    }

    /// Keeps `ev` for later if it is about our connection; refuses a REQ; drops the rest.
    fn set_aside(&mut self, ev: CmEvent) {
        if let CmEvent::ConnectRequest(r) = ev {
            self.refused += 1;
            log::info!("rping: a REQ refused while a connection runs");
            if let Err(x) = self.cm.reject(r.id, 28) {
                log::debug!("rping: refusing a REQ: {x}");
            }
        } else if Some(ev.id()) == self.id && self.pending.len() < ASIDE {
            self.pending.push_back(ev);
        } else {
            self.dropped += 1;
            log::debug!("rping: {ev:?} dropped");
        }
    }

    /// The next CM event (completions are not looked at meanwhile).
    fn event(&mut self) -> Result<CmEvent, String> {
        if let Some(ev) = self.pending.pop_front() {
            return Ok(ev);
        }
        let deadline = Instant::now() + STEP;
        loop {
            if let Some(ev) = self.cm.poll().map_err(e)? {
                return Ok(ev);
            }
            if Instant::now() > deadline {
                return Err("no connection event within 30 s".into());
            }
            self.relax();
        }
    }

    /// The next completion, the CM running meanwhile; `Ok(None)` if the peer disconnected.
    fn completion(&mut self) -> Result<Option<Wc>, String> {
        let deadline = Instant::now() + STEP;
        let mut wc = [Wc::default()];
        loop {
            if self.cq.poll(&mut wc).map_err(e)? == 1 {
                let w = wc[0];
                if w.status == WcStatus::WrFlushErr {
                    return Ok(None);
                }
                if w.status != WcStatus::Success {
                    return Err(format!("cq completion failed status {:?}", w.status));
                }
                return Ok(Some(w));
            }
            if let Some(ev) = self.cm.poll().map_err(e)? {
                match ev {
                    CmEvent::Disconnected { id } if Some(id) == self.id => {
                        self.pending.push_back(ev);
                        return Ok(None);
                    }
                    CmEvent::Established { id } if Some(id) == self.id => {}
                    other => self.set_aside(other),
                }
            }
            if Instant::now() > deadline {
                return Err("no completion within 30 s".into());
            }
            self.relax();
        }
    }

    fn post_recv(&mut self) -> Result<(), String> {
        let sge = [Sge {
            addr: self.b.recv.addr(),
            length: INFO as u32,
            lkey: self.b.recv.lkey(),
        }];
        self.qp
            .post_recv(&[RecvWr {
                wr_id: 1,
                sg_list: &sge,
            }])
            .map_err(e)
    }

    fn post(&mut self, op: SendOp, mr: &Mr<'_>, len: u32) -> Result<(), String> {
        let sge = [Sge {
            addr: mr.addr(),
            length: len,
            lkey: mr.lkey(),
        }];
        let wr = SendWr {
            op,
            payload: Payload::Sges(&sge),
            ..SendWr::send(2, &sge)
        };
        self.qp.post_send(&[wr]).map_err(e)
    }

    /// SENDs {addr, rkey, size} of `mr` (or 16 zero bytes: the server's go-ahead).
    fn send_info(&mut self, mr: Option<&Mr<'_>>, size: u32) -> Result<(), String> {
        let mut m = [0u8; INFO];
        if let Some(mr) = mr {
            m[..8].copy_from_slice(&mr.addr().to_be_bytes());
            m[8..12].copy_from_slice(&mr.rkey().to_be_bytes());
            m[12..].copy_from_slice(&size.to_be_bytes());
        }
        self.b.send.write(0, &m).map_err(e)?;
        let send = &self.b.send;
        self.post(SendOp::Send, send, INFO as u32)
    }

    /// Waits for the completion of `op` (receives and other completions may come first and
    /// are returned to the caller through `recv`); `Ok(false)`: the peer disconnected.
    fn wait_for(
        &mut self,
        want: WcOpcode,
        recv: &mut Vec<(u64, u32, u32)>,
    ) -> Result<bool, String> {
        loop {
            let Some(w) = self.completion()? else {
                return Ok(false);
            };
            if w.opcode == WcOpcode::Recv {
                if w.byte_len as usize != INFO {
                    return Err(format!("Received bogus data, size {}", w.byte_len));
                }
                let mut m = [0u8; INFO];
                self.b.recv.read(0, &mut m).map_err(e)?;
                self.post_recv()?;
                recv.push((
                    u64::from_be_bytes(m[..8].try_into().unwrap_or_default()),
                    u32::from_be_bytes(m[8..12].try_into().unwrap_or_default()),
                    u32::from_be_bytes(m[12..].try_into().unwrap_or_default()),
                ));
            }
            if w.opcode == want {
                return Ok(true);
            }
        }
    }
}

fn session(a: &Args, h: &Host<'_>) -> Result<(), String> {
    let dev = h.dev;
    let (_, own_gid) = h.gid(Some(1))?;
    let own_ip: [u8; 4] = own_gid[12..].try_into().unwrap_or_default();
    let gbufs = GsiBufs::new(dev).map_err(e)?;
    let gsi = Gsi::open(dev, &gbufs, 1).map_err(e)?;
    let cfg = CmConfig::for_device(dev);
    let mut cm = Cm::new(gsi, cfg);
    let cq = dev.create_cq(32).map_err(e)?;
    let cap = QpCap {
        max_send_wr: 16,
        max_recv_wr: 2,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let pd = dev.pd();
    let qp = dev
        .create_qp(pd, &QpInitAttr::new(QpType::Rc, &cq, &cq, cap))
        .map_err(e)?;
    let b = bufs(dev, a.size as usize)?;
    let param = ConnParam {
        responder_resources: 1,
        initiator_depth: 1,
        retry_count: 7,
        rnr_retry_count: 7,
        ..ConnParam::default()
    };
    if a.server {
        cm.listen(a.port).map_err(e)?;
        println!(
            "rping server: listening on {}:{}",
            Ipv4Addr::from(own_ip),
            a.port
        );
    }
    let mut c = Conn {
        h,
        cm,
        qp,
        cq: &cq,
        b: &b,
        id: None,
        pending: Default::default(),
        refused: 0,
        dropped: 0,
    };
    // As rdma_create_qp leaves it: INIT, so that the first receive can be posted now.
    mlx5::cm::init_qp(&mut c.qp, 1).map_err(e)?;
    c.post_recv()?;
    let r = if a.server {
        server(a, &mut c, &own_gid, &param)
    } else {
        client(a, &mut c, own_ip, &own_gid, &param)
    };
    if c.refused + c.dropped + c.cm.unsent + c.cm.evicted > 0 {
        log::warn!(
            "rping: {} REQs refused, {} connection events dropped; the CM left {} MADs \
             unsent and evicted {} half-open connections",
            c.refused,
            c.dropped,
            c.cm.unsent,
            c.cm.evicted
        );
    }
    let Conn { cm, qp, .. } = c;
    drop(qp.destroy());
    drop(cm.into_gsi().close());

    r
}

fn server(
    a: &Args,
    c: &mut Conn<'_, '_>,
    own_gid: &[u8; 16],
    p: &ConnParam<'_>,
) -> Result<(), String> {
    let req = loop {
        match c.event()? {
            CmEvent::ConnectRequest(r) => break r,
            other => log::info!("rping server: {other:?} before any REQ"),
        }
    };
    let mac = c.h.peer_mac(&req.remote_gid, own_gid)?;
    c.cm.accept(req.id, &mut c.qp, mac, p).map_err(e)?;
    c.id = Some(req.id);
    let mut recv = Vec::new();
    let mut pings = 0u32;
    loop {
        // The client's first buffer: read it.
        if recv.is_empty() && !c.wait_for(WcOpcode::Recv, &mut recv)? {
            break;
        }
        let (addr, rkey, len) = recv.remove(0);
        if len > a.size {
            return Err(format!(
                "the client's buffer ({len} bytes) exceeds -S {}",
                a.size
            ));
        }
        let rdma = &c.b.rdma;
        c.post(
            SendOp::Read {
                remote_addr: addr,
                rkey,
            },
            rdma,
            len,
        )?;
        if !c.wait_for(WcOpcode::RdmaRead, &mut recv)? {
            break;
        }
        if a.verbose {
            let mut d = vec![0u8; len as usize];
            c.b.rdma.read(0, &mut d).map_err(e)?;
            let s = d.split(|&x| x == 0).next().unwrap_or(&[]);
            println!("server ping data: {}", String::from_utf8_lossy(s));
        }
        c.send_info(None, 0)?;
        // The client's second buffer: write what was read into it.
        if recv.is_empty() && !c.wait_for(WcOpcode::Recv, &mut recv)? {
            break;
        }
        let (addr, rkey, wlen) = recv.remove(0);
        let mut d = vec![0u8; len as usize];
        c.b.rdma.read(0, &mut d).map_err(e)?;
        let n = d.iter().position(|&x| x == 0).map_or(len, |i| i as u32 + 1);
        let rdma = &c.b.rdma;
        c.post(
            SendOp::Write {
                remote_addr: addr,
                rkey,
            },
            rdma,
            n.min(wlen),
        )?;
        if !c.wait_for(WcOpcode::RdmaWrite, &mut recv)? {
            break;
        }
        c.send_info(None, 0)?;
        pings += 1;
    }
    // The client's DREQ: answer it.
    if let Some(id) = c.id {
        c.cm.disconnect(id, &mut c.qp).map_err(e)?;
    }
    println!("rping server: {pings} pings, client disconnected");
    Ok(())
}

fn client(
    a: &Args,
    c: &mut Conn<'_, '_>,
    own_ip: [u8; 4],
    own_gid: &[u8; 16],
    p: &ConnParam<'_>,
) -> Result<(), String> {
    let server = a.addr.ok_or("-a")?.octets();
    let mac = c.h.peer_mac(&mapped(server), own_gid)?;
    // An ephemeral port, as rdma_cm binds one.
    let src_port = 32768 + (std::process::id() % 28232) as u16;
    let route = Route {
        src_ip: own_ip,
        src_port,
        dst_ip: server,
        dst_port: a.port,
        dmac: mac,
    };
    let id = c.cm.connect(&mut c.qp, &route, p).map_err(e)?;
    c.id = Some(id);
    match c.event()? {
        CmEvent::ConnectResponse { .. } => c.cm.establish(id, &mut c.qp).map_err(e)?,
        CmEvent::Rejected { reason, .. } => {
            return Err(format!("cma event RDMA_CM_EVENT_REJECTED, error {reason}"))
        }
        CmEvent::Unreachable { .. } => {
            return Err("cma event RDMA_CM_EVENT_UNREACHABLE, error -110".into())
        }
        other => return Err(format!("unexpected connection event {other:?}")),
    }
    let size = a.size as usize;
    let mut start = b'A';
    let mut recv = Vec::new();
    let mut ping = 0u32;
    while a.count == 0 || ping < a.count {
        let mut buf = format!("rdma-ping-{ping}: ").into_bytes();
        buf.truncate(size);
        let mut ch = start;
        while buf.len() < size {
            buf.push(ch);
            ch = if ch >= b'z' { b'A' } else { ch + 1 };
        }
        start = if start >= b'z' { b'A' } else { start + 1 };
        buf[size - 1] = 0;
        c.b.start.write(0, &buf).map_err(e)?;
        let start_mr = &c.b.start;
        c.send_info(Some(start_mr), a.size)?;
        while recv.is_empty() {
            if !c.wait_for(WcOpcode::Recv, &mut recv)? {
                return Err("the server disconnected".into());
            }
        }
        recv.clear();
        let rdma_mr = &c.b.rdma;
        c.send_info(Some(rdma_mr), a.size)?;
        while recv.is_empty() {
            if !c.wait_for(WcOpcode::Recv, &mut recv)? {
                return Err("the server disconnected".into());
            }
        }
        recv.clear();
        let mut got = vec![0u8; size];
        c.b.rdma.read(0, &mut got).map_err(e)?;
        if a.validate && got != buf {
            return Err(format!("data mismatch! (ping {ping})"));
        }
        if a.verbose {
            let s = got.split(|&x| x == 0).next().unwrap_or(&[]);
            println!("ping data: {}", String::from_utf8_lossy(s));
        }
        ping += 1;
    }
    c.cm.disconnect(id, &mut c.qp).map_err(e)?;
    loop {
        match c.event()? {
            CmEvent::Disconnected { .. } => break,
            other => log::info!("rping client: {other:?} while disconnecting"),
        }
    }
    println!(
        "rping client: {ping} pings{}",
        if a.validate {
            ", all data verified"
        } else {
            ""
        }
    );
    Ok(())
}
