//! The legitimate traffic of the hostile-peer soak: an rping-like connection made with the CM
//! (its info exchanged by SEND, the client's block read by RDMA READ, another written back by
//! RDMA WRITE, every byte checked), a pingpong on a directly connected RC pair, and a smoltcp
//! TCP stream each way between Ethernet ports — each advanced a step per round.

use super::common::{self, wait, Dev};
use super::{attack::Attacker, pattern, App, Net, Rng, IP_A, IP_B, MS, PORT_B, TCP_A, TCP_B};
use mlx5::cm::{CmEvent, CmId, ConnParam, Route};
use mlx5::cq::Cq;
use mlx5::eth::{EthPort, EthPortConfig, EthStats};
use mlx5::mr::MrAccess;
use mlx5::qp::{ConnectOpts, Qp, QpType, RecvWr, SendOp, SendWr, Sge};
use mlx5::{MemoryRegion, SimPlatform, WcOpcode, WcStatus};
use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::socket::tcp;
use smoltcp::time::{Duration, Instant};
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr, Ipv4Address};

type Mr<'a> = MemoryRegion<'a, SimPlatform>;
type SimQp<'a> = Qp<'a, SimPlatform>;
type SimCq<'a> = Cq<'a, SimPlatform>;

/// The largest rping block.
const BLOCK: usize = 32 << 10;
/// Connection attempts before the soak gives up on the legitimate client.
const ATTEMPTS: u32 = 20;

fn mr<'a>(dev: &'a Dev, len: usize) -> Mr<'a> {
    dev.alloc_mr(dev.pd(), len, MrAccess::ALL).unwrap()
}

fn sge(m: &Mr<'_>, off: usize, len: usize) -> [Sge; 1] {
    [Sge {
        addr: m.addr() + off as u64,
        length: len as u32,
        lkey: m.lkey(),
    }]
}

fn post_recv(qp: &mut SimQp<'_>, m: &Mr<'_>, off: usize, len: usize, wr_id: u64) {
    qp.post_recv(&[RecvWr {
        wr_id,
        sg_list: &sge(m, off, len),
    }])
    .unwrap();
}

fn post(qp: &mut SimQp<'_>, op: SendOp, m: &Mr<'_>, off: usize, len: usize, wr_id: u64) {
    let s = sge(m, off, len);
    let wr = SendWr {
        op,
        signaled: true,
        ..SendWr::send(wr_id, &s)
    };
    qp.post_send(&[wr]).unwrap();
}

/// One completion of `cq`, checked: success, `opcode`, `len` bytes (receives).
fn done(cq: &SimCq<'_>, dev: &Dev, opcode: WcOpcode, len: Option<usize>) {
    let w = wait(cq, dev, 1)[0];
    assert_eq!((w.status, w.opcode), (WcStatus::Success, opcode), "{w:?}");
    if let Some(n) = len {
        assert_eq!(w.byte_len as usize, n, "{w:?}");
    }
}

fn fill(m: &Mr<'_>, off: usize, len: usize, seed: u64) {
    let b: Vec<u8> = (0..len).map(|i| pattern(seed, i)).collect();
    m.write(off, &b).unwrap();
}

fn check(m: &Mr<'_>, off: usize, len: usize, seed: u64, what: &str) {
    let mut b = vec![0u8; len];
    m.read(off, &mut b).unwrap();
    if let Some(i) = (0..len).find(|&i| b[i] != pattern(seed, i)) {
        panic!(
            "{what}: byte {i} of {len} is {:#x}, not {:#x}",
            b[i],
            pattern(seed, i)
        );
    }
}

/// A connection made with the CM, and how many more iterations it runs.
pub struct Session<'a> {
    qa: SimQp<'a>,
    qb: SimQp<'a>,
    pub id_a: CmId,
    pub id_b: CmId,
    left: u32,
}

/// rping's client on A and server on B.
pub struct Rping<'a> {
    a: &'a Dev,
    b: &'a Dev,
    cqa: &'a SimCq<'a>,
    cqb: &'a SimCq<'a>,
    /// A: the block B reads, the one B writes, the messages. B: its block and messages.
    a_src: Mr<'a>,
    a_sink: Mr<'a>,
    a_msg: Mr<'a>,
    b_buf: Mr<'a>,
    b_msg: Mr<'a>,
    pub session: Option<Session<'a>>,
    port: u16,
    pub sessions: u64,
    pub retries: u64,
    pub insider: u64,
    pub iterations: u64,
    pub bytes: u64,
}

impl<'a> Rping<'a> {
    pub fn new(a: &'a Dev, b: &'a Dev, cqa: &'a SimCq<'a>, cqb: &'a SimCq<'a>) -> Self {
        Rping {
            a,
            b,
            cqa,
            cqb,
            a_src: mr(a, BLOCK),
            a_sink: mr(a, BLOCK),
            a_msg: mr(a, 4096),
            b_buf: mr(b, BLOCK),
            b_msg: mr(b, 4096),
            session: None,
            port: 40_000,
            sessions: 0,
            retries: 0,
            insider: 0,
            iterations: 0,
            bytes: 0,
        }
    }

    /// B's regions: nothing the attacker does may change them.
    pub fn b_regions(&self) -> [&Mr<'a>; 2] {
        [&self.b_buf, &self.b_msg]
    }

    /// The QPs of the session on A and on B, if one is up.
    pub fn qpns(&self) -> Option<[u32; 2]> {
        self.session.as_ref().map(|s| [s.qa.qpn(), s.qb.qpn()])
    }

    /// One round: a new session (through whatever storm the attacker sends meanwhile), one
    /// iteration, or the end of the session.
    pub fn step(
        &mut self,
        net: &Net<'a>,
        apps: &mut [App<'a>; 2],
        attacker: &mut Attacker<'a>,
        rng: &mut Rng,
    ) {
        match self.session.as_ref().map(|s| s.left) {
            None => {
                let storm = rng.chance(30);
                let s = self.connect(net, apps, attacker, rng, storm);
                self.session = Some(s);
                self.sessions += 1;
            }
            Some(0) => {
                let insider = rng.chance(20);
                self.end(net, apps, attacker, insider);
            }
            Some(_) => {
                self.iteration(rng);
                if let Some(s) = self.session.as_mut() {
                    s.left -= 1;
                }
            }
        }
    }

    fn connect(
        &mut self,
        net: &Net<'a>,
        apps: &mut [App<'a>; 2],
        attacker: &mut Attacker<'a>,
        rng: &mut Rng,
        storm: bool,
    ) -> Session<'a> {
        let (a, b) = (self.a, self.b);
        for attempt in 0..ATTEMPTS {
            let mut qa = common::qp(a, self.cqa, QpType::Rc, common::cap(16, 16, 1));
            let mut qb = common::qp(b, self.cqb, QpType::Rc, common::cap(16, 16, 1));
            self.port = self.port.wrapping_add(1).max(40_000);
            let route = Route {
                src_ip: IP_A,
                src_port: self.port,
                dst_ip: IP_B,
                dst_port: PORT_B,
                dmac: b.vport().mac,
            };
            apps[1].legit_port = Some(self.port);
            let p = ConnParam {
                private_data: b"rping",
                ..ConnParam::default()
            };
            let id_a = apps[0].cm.connect(&mut qa, &route, &p).unwrap();
            apps[0].legit_ids = vec![id_a];
            if storm && attempt == 0 {
                // The REQ is on its way; a storm of REQs lands right behind it.
                attacker.storm(net, 1, rng);
            }
            let mut id_b = None;
            let (mut up_a, mut up_b) = (false, false);
            let mut failed = None;
            let start = net.now();
            while failed.is_none() && !(up_a && up_b) {
                let mut ev = Vec::new();
                apps[1].pump(net.now(), &mut ev);
                for e in ev {
                    match e {
                        CmEvent::ConnectRequest(r) => {
                            match apps[1].cm.accept(r.id, &mut qb, a.vport().mac, &p) {
                                Ok(()) => {
                                    id_b = Some(r.id);
                                    apps[1].legit_ids = vec![r.id];
                                }
                                Err(e) => failed = Some(format!("B accepts: {e}")),
                            }
                        }
                        CmEvent::Established { id } if Some(id) == id_b => up_b = true,
                        e => failed = Some(format!("B: {e:?}")),
                    }
                }
                let mut ev = Vec::new();
                apps[0].pump(net.now(), &mut ev);
                for e in ev {
                    match e {
                        CmEvent::ConnectResponse { id, .. } if id == id_a => {
                            apps[0].cm.establish(id_a, &mut qa).unwrap();
                            up_a = true;
                        }
                        e => failed = Some(format!("A: {e:?}")),
                    }
                }
                if failed.is_none() && !(up_a && up_b) {
                    assert!(
                        net.now() - start < 60_000 * MS,
                        "no connection after a minute of device time"
                    );
                    net.fabric.advance(MS);
                }
            }
            apps[1].legit_port = None;
            if failed.is_none() {
                return Session {
                    qa,
                    qb,
                    id_a,
                    id_b: id_b.unwrap(),
                    left: 2 + rng.below(6) as u32,
                };
            }
            // Refused for want of room (a storm evicted our REQ before B's application saw
            // it), or lost: the client tries again, as a TCP client re-sends its SYN.
            self.retries += 1;
            println!("rping: connection attempt {attempt} failed: {failed:?}");
            apps[0].cm.destroy_id(id_a);
            if let Some(id) = id_b {
                apps[1].cm.destroy_id(id);
            }
            for app in apps.iter_mut() {
                let ids = std::mem::take(&mut app.legit_ids);
                app.retired.extend(ids);
            }
            qa.destroy().unwrap();
            qb.destroy().unwrap();
        }
        panic!("the legitimate client could not connect in {ATTEMPTS} attempts");
    }

    /// rping's exchange: A tells B where its blocks are; B reads one, writes the other back,
    /// says it is done; both check every byte.
    fn iteration(&mut self, rng: &mut Rng) {
        let s = self.session.as_mut().expect("a session");
        let (a, b) = (self.a, self.b);
        let len = 1 + rng.below(BLOCK as u64) as usize;
        let (seed, back) = (rng.next(), rng.next());
        fill(&self.a_src, 0, len, seed);
        self.a_sink.write(0, &vec![0; len]).unwrap();
        post_recv(&mut s.qb, &self.b_msg, 0, 64, 1);
        post_recv(&mut s.qa, &self.a_msg, 64, 64, 2);
        let mut info = Vec::new();
        for v in [self.a_src.addr(), self.a_sink.addr()] {
            info.extend_from_slice(&v.to_be_bytes());
        }
        for v in [self.a_src.rkey(), self.a_sink.rkey(), len as u32] {
            info.extend_from_slice(&v.to_be_bytes());
        }
        self.a_msg.write(0, &info).unwrap();
        post(&mut s.qa, SendOp::Send, &self.a_msg, 0, info.len(), 3);
        done(self.cqa, a, WcOpcode::Send, None);
        done(self.cqb, b, WcOpcode::Recv, Some(info.len()));
        let mut got = vec![0u8; info.len()];
        self.b_msg.read(0, &mut got).unwrap();
        assert_eq!(got, info, "the info message");
        let word = |i: usize| u64::from_be_bytes(got[i..i + 8].try_into().unwrap());
        let half = |i: usize| u32::from_be_bytes(got[i..i + 4].try_into().unwrap());
        let (src, sink) = (word(0), word(8));
        let (src_key, sink_key, n) = (half(16), half(20), half(24) as usize);
        let read = SendOp::Read {
            remote_addr: src,
            rkey: src_key,
        };
        post(&mut s.qb, read, &self.b_buf, 0, n, 4);
        done(self.cqb, b, WcOpcode::RdmaRead, Some(n));
        check(&self.b_buf, 0, n, seed, "the block B read from A");
        fill(&self.b_buf, 0, n, back);
        let write = SendOp::Write {
            remote_addr: sink,
            rkey: sink_key,
        };
        post(&mut s.qb, write, &self.b_buf, 0, n, 5);
        done(self.cqb, b, WcOpcode::RdmaWrite, None);
        self.b_msg.write(128, &(n as u64).to_be_bytes()).unwrap();
        post(&mut s.qb, SendOp::Send, &self.b_msg, 128, 8, 6);
        done(self.cqb, b, WcOpcode::Send, None);
        done(self.cqa, a, WcOpcode::Recv, Some(8));
        check(&self.a_sink, 0, n, back, "the block B wrote to A");
        self.iterations += 1;
        self.bytes += 2 * n as u64;
    }

    /// Ends the session: A disconnects — after, when `insider`, a REJ naming both comm IDs
    /// (as one who read them off the wire can send) has ended B's side, as documented.
    fn end(
        &mut self,
        net: &Net<'a>,
        apps: &mut [App<'a>; 2],
        attacker: &mut Attacker<'a>,
        insider: bool,
    ) {
        let mut s = self.session.take().expect("a session");
        let mut ev = Vec::new();
        if insider {
            attacker.rej_both_ids(net, s.id_a, s.id_b);
            apps[1].pump(net.now(), &mut ev);
            assert_eq!(
                ev,
                [CmEvent::Rejected {
                    id: s.id_b,
                    reason: 28
                }],
                "a REJ naming both comm IDs ends B's side (Linux's cm_rej_handler)"
            );
            ev.clear();
            apps[0].pump(net.now(), &mut ev);
            assert!(ev.is_empty(), "A's side is untouched: {ev:?}");
            self.insider += 1;
        }
        apps[0].cm.disconnect(s.id_a, &mut s.qa).unwrap();
        let (mut down_a, mut down_b) = (false, insider);
        let start = net.now();
        while !(down_a && down_b) {
            ev.clear();
            apps[1].pump(net.now(), &mut ev);
            for e in ev.drain(..) {
                assert_eq!(e, CmEvent::Disconnected { id: s.id_b });
                apps[1].cm.disconnect(s.id_b, &mut s.qb).unwrap();
                down_b = true;
            }
            apps[0].pump(net.now(), &mut ev);
            for e in ev.drain(..) {
                assert_eq!(e, CmEvent::Disconnected { id: s.id_a });
                down_a = true;
            }
            if !(down_a && down_b) {
                assert!(net.now() - start < 60_000 * MS, "no disconnection");
                net.fabric.advance(MS);
            }
        }
        apps[0].legit_ids.clear();
        apps[1].legit_ids.clear();
        s.qa.destroy().unwrap();
        s.qb.destroy().unwrap();
    }

    /// The last session ends cleanly.
    pub fn finish(&mut self, net: &Net<'a>, apps: &mut [App<'a>; 2]) {
        if let Some(mut s) = self.session.take() {
            apps[0].cm.disconnect(s.id_a, &mut s.qa).unwrap();
            let mut ev = Vec::new();
            for _ in 0..1000 {
                apps[1].pump(net.now(), &mut ev);
                if ev.contains(&CmEvent::Disconnected { id: s.id_b }) {
                    apps[1].cm.disconnect(s.id_b, &mut s.qb).unwrap();
                }
                apps[0].pump(net.now(), &mut ev);
                if ev.contains(&CmEvent::Disconnected { id: s.id_a }) {
                    break;
                }
                net.fabric.advance(MS);
            }
            assert!(ev.contains(&CmEvent::Disconnected { id: s.id_a }), "{ev:?}");
            apps[0].legit_ids.clear();
            apps[1].legit_ids.clear();
            s.qa.destroy().unwrap();
            s.qb.destroy().unwrap();
        }
        assert!(self.iterations > 0 || self.sessions <= 1, "rping ran");
    }
}

/// A pingpong on an RC pair connected directly (no CM): A sends, B checks and answers.
pub struct Pingpong<'a> {
    a: &'a Dev,
    b: &'a Dev,
    cqa: &'a SimCq<'a>,
    cqb: &'a SimCq<'a>,
    qa: SimQp<'a>,
    qb: SimQp<'a>,
    ma: Mr<'a>,
    mb: Mr<'a>,
    pub exchanges: u64,
    pub bytes: u64,
}

impl<'a> Pingpong<'a> {
    pub fn new(a: &'a Dev, b: &'a Dev, cqa: &'a SimCq<'a>, cqb: &'a SimCq<'a>) -> Self {
        let mut qa = common::qp(a, cqa, QpType::Rc, common::cap(16, 16, 1));
        let mut qb = common::qp(b, cqb, QpType::Rc, common::cap(16, 16, 1));
        common::connect(&mut qa, &mut qb, &ConnectOpts::default());
        Pingpong {
            a,
            b,
            cqa,
            cqb,
            qa,
            qb,
            ma: mr(a, 8192),
            mb: mr(b, 8192),
            exchanges: 0,
            bytes: 0,
        }
    }

    pub fn qpns(&self) -> [u32; 2] {
        [self.qa.qpn(), self.qb.qpn()]
    }

    pub fn b_region(&self) -> &Mr<'a> {
        &self.mb
    }

    pub fn round(&mut self, rng: &mut Rng) {
        for _ in 0..1 + rng.below(6) {
            let len = 1 + rng.below(4096) as usize;
            let (ping, pong) = (rng.next(), rng.next());
            post_recv(&mut self.qb, &self.mb, 0, 4096, 1);
            post_recv(&mut self.qa, &self.ma, 4096, 4096, 2);
            fill(&self.ma, 0, len, ping);
            post(&mut self.qa, SendOp::Send, &self.ma, 0, len, 3);
            done(self.cqa, self.a, WcOpcode::Send, None);
            done(self.cqb, self.b, WcOpcode::Recv, Some(len));
            check(&self.mb, 0, len, ping, "ping");
            fill(&self.mb, 4096, len, pong);
            post(&mut self.qb, SendOp::Send, &self.mb, 4096, len, 4);
            done(self.cqb, self.b, WcOpcode::Send, None);
            done(self.cqa, self.a, WcOpcode::Recv, Some(len));
            check(&self.ma, 4096, len, pong, "pong");
            self.exchanges += 1;
            self.bytes += 2 * len as u64;
        }
    }
}

/// One end of the TCP stream: its port, interface and socket.
struct Side<'a> {
    port: EthPort<'a, SimPlatform>,
    iface: Interface,
    sockets: SocketSet<'static>,
    h: SocketHandle,
}

impl<'a> Side<'a> {
    fn new(dev: &'a Dev, tx: &'a SimCq<'a>, rx: &'a SimCq<'a>, ip: [u8; 4]) -> Self {
        let mut port = EthPort::open(dev, tx, rx, &EthPortConfig::default()).unwrap();
        let cfg = Config::new(HardwareAddress::Ethernet(EthernetAddress(port.mac())));
        let mut iface = Interface::new(cfg, &mut port, Instant::ZERO);
        iface.update_ip_addrs(|a| {
            a.push(IpCidr::new(IpAddress::Ipv4(Ipv4Address::from(ip)), 24))
                .unwrap();
        });
        let mut sockets = SocketSet::new(vec![]);
        let h = sockets.add(tcp::Socket::new(
            tcp::SocketBuffer::new(vec![0; 64 << 10]),
            tcp::SocketBuffer::new(vec![0; 64 << 10]),
        ));
        Side {
            port,
            iface,
            sockets,
            h,
        }
    }

    fn poll(&mut self, now: Instant) {
        self.iface.poll(now, &mut self.port, &mut self.sockets);
    }

    fn socket(&mut self) -> &mut tcp::Socket<'static> {
        self.sockets.get_mut::<tcp::Socket>(self.h)
    }
}

/// A TCP connection A → B:5000 carrying a stream each way.
pub struct Tcp<'a> {
    a: Side<'a>,
    b: Side<'a>,
    now: Instant,
    /// Bytes sent and checked, A → B and B → A.
    sent: [usize; 2],
    got: [usize; 2],
}

impl<'a> Tcp<'a> {
    pub fn new(a: &'a Dev, b: &'a Dev, ta: [&'a SimCq<'a>; 2], tb: [&'a SimCq<'a>; 2]) -> Self {
        let mut t = Tcp {
            a: Side::new(a, ta[0], ta[1], TCP_A),
            b: Side::new(b, tb[0], tb[1], TCP_B),
            now: Instant::ZERO,
            sent: [0; 2],
            got: [0; 2],
        };
        t.b.socket().listen(5000).unwrap();
        let cx = t.a.iface.context();
        let ha = t.a.h;
        t.a.sockets
            .get_mut::<tcp::Socket>(ha)
            .connect(cx, (IpAddress::Ipv4(Ipv4Address::from(TCP_B)), 5000), 49152)
            .unwrap();
        t.run(|t| t.a.socket().may_send() && t.b.socket().may_recv());
        t
    }

    /// Both sides polled, the clock a millisecond on, until `done` (bounded: the attacker may
    /// have pushed our peer out of the ARP cache, or filled a receive queue, and TCP then
    /// waits out its retransmission timer).
    fn run(&mut self, mut done: impl FnMut(&mut Self) -> bool) {
        for _ in 0..300_000 {
            self.a.poll(self.now);
            self.b.poll(self.now);
            if done(self) {
                return;
            }
            self.now += Duration::from_millis(1);
        }
        panic!(
            "TCP stuck: sent {:?}, got {:?}; A {:?}, B {:?}",
            self.sent,
            self.got,
            self.a.port.stats(),
            self.b.port.stats()
        );
    }

    /// Moves both streams on until `total` bytes went each way, every byte checked.
    pub fn step(&mut self, total: usize) {
        self.run(|t| {
            for dir in 0..2 {
                let (tx, rx) = if dir == 0 {
                    (&mut t.a, &mut t.b)
                } else {
                    (&mut t.b, &mut t.a)
                };
                let seed = dir as u64 + 0x7c9;
                let sent = &mut t.sent[dir];
                let s = tx.socket();
                while *sent < total && s.can_send() {
                    let n = s
                        .send(|buf| {
                            let n = buf.len().min(total - *sent);
                            for (k, x) in buf[..n].iter_mut().enumerate() {
                                *x = pattern(seed, *sent + k);
                            }
                            (n, n)
                        })
                        .unwrap();
                    *sent += n;
                    if n == 0 {
                        break;
                    }
                }
                let got = &mut t.got[dir];
                let r = rx.socket();
                while r.can_recv() {
                    r.recv(|buf| {
                        for (k, &x) in buf.iter().enumerate() {
                            assert_eq!(x, pattern(seed, *got + k), "TCP byte {}", *got + k);
                        }
                        *got += buf.len();
                        (buf.len(), ())
                    })
                    .unwrap();
                }
            }
            t.got[0] >= total && t.got[1] >= total
        });
    }

    /// Closes the connection (every byte went each way); drains the ports' receive queues.
    /// The bytes each way, and the ports' counters.
    pub fn finish(mut self) -> (usize, [EthStats; 2]) {
        self.a.socket().close();
        self.run(|t| {
            let b = t.b.socket();
            if !b.may_recv() && b.is_open() {
                b.close();
            }
            !t.a.socket().is_open() || t.a.socket().state() == tcp::State::TimeWait
        });
        assert_eq!(self.got, self.sent);
        let st = |s: &mut Side<'_>| -> EthStats {
            while s.port.recv().unwrap().is_some() {}
            s.port.stats()
        };
        let stats = [st(&mut self.a), st(&mut self.b)];
        let total = self.got[0];
        let (a, b) = (self.a, self.b);
        a.port.close().unwrap();
        b.port.close().unwrap();
        (total, stats)
    }
}
