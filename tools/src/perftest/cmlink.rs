//! perftest's `-R` (`--rdma_cm`, perftest 4.5-0.17 `src/perftest_communication.c`): the
//! exchange runs over an RC QP that rdma_cm connected to the server's port instead of a TCP
//! socket, and the test's own QP is connected with rdma_cm too, on the same port.
//!
//! The control connection: the client posts one receive (56 bytes) and connects (no READs
//! either way, 7 retries, 7 RNR retries); the server, listening, posts its receive and accepts.
//! Each step of the exchange is then one signaled SEND of exactly the item's size into the
//! peer's posted receive, the client first — the same items as over TCP, except that keys
//! travel as perftest's binary `struct pingpong_dest` (56 bytes, big-endian: LID, OUT, QPN,
//! PSN, rkey at 0, 4, 8, 12, 16; the address at 24; the GID at 32; SRQN and GID index at 48 and
//! 52) and there is no closing "done". Around the test QP's connection (REQ with the test's
//! READ depth, 0 unless READ or atomic; the server lowers nothing but sets `min_rnr_timer` 12)
//! both sides exchange keys once before and once after. At the end the client disconnects the
//! test connection (DREQ) and the server answers; the control connection is torn down too.
//!
//! Connection events met while a step waits for something else are set aside ([`Aside`]),
//! bounded (issue #26): only what a later step can want is kept — the events of our own
//! connections, and (a server before the test connection) one REQ from the peer the control
//! connection came from. Any other REQ is refused at once (REJ 28, consumer-defined: a perftest
//! server serves one client, and holding the REQ would hold a slot of the connection manager
//! for nothing), any other event dropped; both are counted and reported at the end.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use mlx5::cm::{mapped, Cm, CmConfig, CmEvent, CmId, ConnParam, Gsi, GsiBufs, Route};
use mlx5::mr::MrAccess;
use mlx5::qp::{QpCap, QpInitAttr, QpType, RecvWr, SendWr, Sge};
use mlx5::{Wc, WcOpcode, WcStatus};
use mlx5_vfio::AnyPlatform;

use super::keys::Keys;
use crate::link::{e, Host};

type Dev = mlx5::Device<AnyPlatform>;
type Cq<'a> = mlx5::cq::Cq<'a, AnyPlatform>;
type Mr<'a> = mlx5::MemoryRegion<'a, AnyPlatform>;
type Qp<'a> = mlx5::qp::Qp<'a, AnyPlatform>;

/// Bytes of perftest 4.5-0.17's `struct pingpong_dest` (and of its control receive).
pub(super) const DEST: usize = 56;
/// The longest wait for the peer's next message or connection event.
const PATIENCE: Duration = Duration::from_secs(300);
/// Events set aside at most (our two connections have a few each).
const ASIDE: usize = 16;
/// REJ reason for a REQ nobody here waits for: consumer-defined, as `rdma_reject` sends.
const REFUSED: u16 = 28;

/// Connection events set aside, bounded (module documentation).
#[derive(Debug, Default)]
pub(super) struct Aside {
    q: VecDeque<CmEvent>,
    /// Our connections: their events are kept.
    ours: Vec<CmId>,
    /// The GID whose REQ a later step waits for (a server before the test connection).
    req_from: Option<[u8; 16]>,
    /// REQs refused at once, and other events dropped.
    pub(super) refused: u64,
    pub(super) dropped: u64,
}

impl Aside {
    /// Keeps `ev` for a later step, or refuses it (a REQ) or drops it.
    fn put(&mut self, cm: &mut Cm<'_, AnyPlatform>, ev: CmEvent) {
        let keep = match ev {
            CmEvent::ConnectRequest(r) => {
                let wanted = self.req_from == Some(r.remote_gid)
                    && !self
                        .q
                        .iter()
                        .any(|e| matches!(e, CmEvent::ConnectRequest(_)));
                if !wanted {
                    self.refused += 1;
                    log::info!(
                        "perftest -R: a REQ from {} refused (none awaited)",
                        std::net::Ipv6Addr::from(r.remote_gid)
                    );
                    if let Err(x) = cm.reject(r.id, REFUSED) {
                        log::debug!("perftest -R: refusing a REQ: {x}");
                    }
                    return;
                }
                true
            }
            other => self.ours.contains(&other.id()),
        };
        if !keep || self.q.len() >= ASIDE {
            self.dropped += 1;
            log::debug!("perftest -R: {ev:?} dropped");
            return;
        }
        self.q.push_back(ev);
    }

    /// The REQ set aside, if any.
    fn take_request(&mut self) -> Option<mlx5::cm::ConnRequest> {
        let k = self
            .q
            .iter()
            .position(|e| matches!(e, CmEvent::ConnectRequest(_)))?;
        match self.q.remove(k) {
            Some(CmEvent::ConnectRequest(r)) => Some(r),
            _ => None,
        }
    }

    /// Takes the peer's disconnect of `id`, if it arrived.
    fn take_disconnected(&mut self, id: CmId) -> bool {
        let k = self
            .q
            .iter()
            .position(|ev| matches!(ev, CmEvent::Disconnected { id: i } if *i == id));
        k.and_then(|k| self.q.remove(k)).is_some()
    }
}

impl Keys {
    /// perftest's binary `struct pingpong_dest` (as `rdma_write_keys` sends it).
    pub(super) fn to_binary(self, gid_index: u32) -> [u8; DEST] {
        let mut m = [0u8; DEST];
        m[0..4].copy_from_slice(&u32::from(self.lid).to_be_bytes());
        m[4..8].copy_from_slice(&u32::from(self.out).to_be_bytes());
        m[8..12].copy_from_slice(&self.qpn.to_be_bytes());
        m[12..16].copy_from_slice(&self.psn.to_be_bytes());
        m[16..20].copy_from_slice(&self.rkey.to_be_bytes());
        m[24..32].copy_from_slice(&self.vaddr.to_be_bytes());
        m[32..48].copy_from_slice(&self.gid);
        m[48..52].copy_from_slice(&self.srqn.to_be_bytes());
        m[52..56].copy_from_slice(&gid_index.to_be_bytes());
        m
    }

    /// The fields `rdma_read_keys` takes from a binary `struct pingpong_dest`.
    pub(super) fn from_binary(m: &[u8]) -> Result<Keys, String> {
        if m.len() < DEST {
            return Err(format!("the peer's keys are {} bytes, not {DEST}", m.len()));
        }
        let w = |at: usize| u32::from_be_bytes([m[at], m[at + 1], m[at + 2], m[at + 3]]);
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&m[32..48]);
        let mut va = [0u8; 8];
        va.copy_from_slice(&m[24..32]);
        Ok(Keys {
            lid: w(0) as u16,
            out: w(4) as u16,
            qpn: w(8) & 0xff_ffff,
            psn: w(12) & 0xff_ffff,
            rkey: w(16),
            vaddr: u64::from_be_bytes(va),
            gid,
            srqn: w(48),
        })
    }
}

/// The objects the control connection borrows (created first).
pub(super) struct CtrlBufs<'d> {
    gsi: GsiBufs<'d, AnyPlatform>,
    cq: Cq<'d>,
    mr: Mr<'d>,
}

impl<'d> CtrlBufs<'d> {
    pub(super) fn new(dev: &'d Dev) -> Result<Self, String> {
        let pd = dev.pd();
        let local = MrAccess {
            local_write: true,
            ..MrAccess::default()
        };
        Ok(CtrlBufs {
            gsi: GsiBufs::new(dev).map_err(e)?,
            cq: dev.create_cq(8).map_err(e)?,
            // The receive (56 bytes) and the send, apart.
            mr: dev.alloc_mr(pd, 2 * DEST, local).map_err(e)?,
        })
    }
}

/// The control connection and the connection manager (which the test QP's connection uses
/// too).
pub(super) struct CmLink<'a> {
    dev: &'a Dev,
    pub(super) cm: Cm<'a, AnyPlatform>,
    qp: Qp<'a>,
    b: &'a CtrlBufs<'a>,
    id: CmId,
    client: bool,
    /// Connection events met while waiting for something else.
    pub(super) aside: Aside,
    /// Control completions that came before the one being waited for: the peer's next
    /// message can overtake the acknowledgement of ours on a lossy or reordering wire.
    early: VecDeque<Wc>,
    /// The test connection, once made.
    test: Option<CmId>,
    /// The peer's GID and next hop (for the test connection).
    peer: ([u8; 16], [u8; 6]),
    route: Option<Route>,
}

/// perftest's rdma_cm connection parameters: READ depth `out` (0 unless the test reads),
/// 7 retries, 7 RNR retries, `min_rnr_timer` 12 (the server sets it after accepting).
fn param(out: u8) -> ConnParam<'static> {
    ConnParam {
        responder_resources: out,
        initiator_depth: out,
        retry_count: 7,
        rnr_retry_count: 7,
        min_rnr_timer: 12,
        private_data: &[],
    }
}

impl<'a> CmLink<'a> {
    /// The control connection: the client connects to `server:port`, the server accepts the
    /// first REQ for `port`.
    pub(super) fn open(
        h: &'a Host<'a>,
        b: &'a CtrlBufs<'a>,
        server: Option<&str>,
        port: u16,
    ) -> Result<CmLink<'a>, String> {
        let dev = h.dev;
        let (_, own_gid) = h.gid(Some(1))?;
        let own_ip: [u8; 4] = own_gid[12..].try_into().unwrap_or_default();
        let gsi = Gsi::open(dev, &b.gsi, 1).map_err(e)?;
        let cfg = CmConfig::for_device(dev);
        let cm = Cm::new(gsi, cfg);
        let pd = dev.pd();
        let cap = QpCap {
            max_send_wr: 1,
            max_recv_wr: 1,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        let mut qp = dev
            .create_qp(pd, &QpInitAttr::new(QpType::Rc, &b.cq, &b.cq, cap))
            .map_err(e)?;
        mlx5::cm::init_qp(&mut qp, 0).map_err(e)?;
        let mut link = CmLink {
            dev,
            cm,
            qp,
            b,
            id: mlx5::cm::CmId(0),
            client: server.is_some(),
            aside: Aside::default(),
            early: VecDeque::new(),
            test: None,
            peer: ([0; 16], [0; 6]),
            route: None,
        };
        link.post_recv()?;
        match server {
            Some(s) => {
                let ip: std::net::Ipv4Addr = s
                    .parse()
                    .map_err(|_| format!("-R needs the server's IPv4 address, not {s:?}"))?;
                let gid = mapped(ip.octets());
                let mac = h.peer_mac(&gid, &own_gid)?;
                // An ephemeral port, as rdma_cm binds one.
                let src_port = 32768 + (std::process::id() % 28232) as u16;
                let route = Route {
                    src_ip: own_ip,
                    src_port,
                    dst_ip: ip.octets(),
                    dst_port: port,
                    dmac: mac,
                };
                link.peer = (gid, mac);
                link.route = Some(route);
                link.id = connect_qp(&mut link.cm, &mut link.aside, dev, &mut link.qp, route, 0)?;
                link.aside.ours.push(link.id);
            }
            None => {
                link.cm.listen(port).map_err(e)?;
                // The control connection: the first REQ, from anyone.
                let r = link.request(None)?;
                let mac = h.peer_mac(&r.remote_gid, &own_gid)?;
                link.peer = (r.remote_gid, mac);
                link.cm
                    .accept(r.id, &mut link.qp, mac, &param(0))
                    .map_err(e)?;
                link.id = r.id;
                link.aside.ours.push(r.id);
                // The test connection's REQ comes from the same peer.
                link.aside.req_from = Some(r.remote_gid);
                log::info!(
                    "perftest -R: control connection from {} accepted",
                    std::net::Ipv6Addr::from(r.remote_gid)
                );
            }
        }
        Ok(link)
    }

    fn relax(&self) {
        mlx5::Platform::relax(self.dev.platform());
    }

    /// The next REQ (from `from`, if given; other events are set aside, other REQs refused).
    fn request(&mut self, from: Option<[u8; 16]>) -> Result<mlx5::cm::ConnRequest, String> {
        if let Some(r) = self.aside.take_request() {
            return Ok(r);
        }
        let deadline = Instant::now() + PATIENCE;
        loop {
            match next_event(&mut self.cm, self.dev, deadline)? {
                CmEvent::ConnectRequest(r) if from.is_none_or(|g| g == r.remote_gid) => {
                    return Ok(r)
                }
                other => self.aside.put(&mut self.cm, other),
            }
        }
    }

    /// The test QP's connection (between the two handshakes around it).
    pub(super) fn connect_test(&mut self, qp: &mut Qp<'_>, out: u8) -> Result<(), String> {
        mlx5::cm::init_qp(qp, out).map_err(e)?;
        if self.client {
            let route = self.route.ok_or("no route")?;
            let id = connect_qp(&mut self.cm, &mut self.aside, self.dev, qp, route, out)?;
            self.test = Some(id);
            self.aside.ours.push(id);
        } else {
            let r = self.request(Some(self.peer.0))?;
            let mac = self.peer.1;
            self.cm.accept(r.id, qp, mac, &param(out)).map_err(e)?;
            self.test = Some(r.id);
            self.aside.ours.push(r.id);
            // No more REQs are awaited: any other is refused.
            self.aside.req_from = None;
        }
        Ok(())
    }

    fn post_recv(&mut self) -> Result<(), String> {
        let sge = [Sge {
            addr: self.b.mr.addr(),
            length: DEST as u32,
            lkey: self.b.mr.lkey(),
        }];
        self.qp
            .post_recv(&[RecvWr {
                wr_id: 1,
                sg_list: &sge,
            }])
            .map_err(e)
    }

    /// The next control completion of `op`, the CM running meanwhile.
    fn completion(&mut self, op: WcOpcode, what: &str) -> Result<Wc, String> {
        if let Some(i) = self.early.iter().position(|w| w.opcode == op) {
            if let Some(w) = self.early.remove(i) {
                return Ok(w);
            }
        }
        let deadline = Instant::now() + PATIENCE;
        let mut wc = [Wc::default()];
        loop {
            if self.b.cq.poll(&mut wc).map_err(e)? == 1 {
                let w = wc[0];
                if w.status != WcStatus::Success {
                    return Err(format!("{what}: control completion {:?}", w.status));
                }
                if w.opcode == op {
                    return Ok(w);
                }
                // The other kind, early (a receive before our send's acknowledgement, or the
                // reverse): kept for the step that waits for it.
                self.early.push_back(w);
                continue;
            }
            if let Some(ev) = self.cm.poll().map_err(e)? {
                match ev {
                    CmEvent::Established { .. } => {}
                    CmEvent::Disconnected { id } if id == self.id => {
                        return Err(format!("{what}: the peer disconnected"))
                    }
                    other => self.aside.put(&mut self.cm, other),
                }
            }
            if Instant::now() > deadline {
                return Err(format!("{what}: nothing from the peer within 300 s"));
            }
            self.relax();
        }
    }

    fn send(&mut self, mine: &[u8], what: &str) -> Result<(), String> {
        self.b.mr.write(DEST, mine).map_err(e)?;
        let sge = [Sge {
            addr: self.b.mr.addr() + DEST as u64,
            length: mine.len() as u32,
            lkey: self.b.mr.lkey(),
        }];
        self.qp.post_send(&[SendWr::send(2, &sge)]).map_err(e)?;
        self.completion(WcOpcode::Send, what).map(drop)
    }

    fn recv(&mut self, len: usize, what: &str) -> Result<Vec<u8>, String> {
        let w = self.completion(WcOpcode::Recv, what)?;
        if w.byte_len as usize != len {
            return Err(format!(
                "{what}: the peer sent {} bytes, not {len}",
                w.byte_len
            ));
        }
        let mut m = vec![0u8; len];
        self.b.mr.read(0, &mut m).map_err(e)?;
        self.post_recv()?;
        Ok(m)
    }

    /// One step of the exchange: the client sends then receives, the server the other way.
    pub(super) fn step(&mut self, mine: &[u8], what: &str) -> Result<Vec<u8>, String> {
        if self.client {
            self.send(mine, what)?;
            self.recv(mine.len(), what)
        } else {
            let theirs = self.recv(mine.len(), what)?;
            self.send(mine, what)?;
            Ok(theirs)
        }
    }

    /// The end: the test connection and the control connection disconnected (the client
    /// sends the DREQs; the server answers them, or after a while sends its own), each
    /// waited for at most a few seconds.
    pub(super) fn close(mut self, mut test_qp: Option<&mut Qp<'_>>) {
        let ids: Vec<CmId> = self.test.into_iter().collect();
        for id in ids {
            if !self.client {
                // The client disconnects first (3 s at most); its DREQ is answered by our
                // disconnect. Its event stays set aside for `end`.
                let until = Instant::now() + Duration::from_secs(3);
                while Instant::now() < until && !self.has_disconnected(id) {
                    match self.cm.poll() {
                        Ok(Some(ev)) => self.aside.put(&mut self.cm, ev),
                        Ok(None) => self.relax(),
                        Err(x) => {
                            log::warn!("perftest -R: {x}");
                            break;
                        }
                    }
                }
            }
            self.end(id, test_qp.as_deref_mut());
        }
        let id = self.id;
        self.end(id, None);
        let a = &self.aside;
        if a.refused + a.dropped + self.cm.unsent + self.cm.evicted > 0 {
            log::warn!(
                "perftest -R: {} REQs refused, {} connection events dropped; the CM left {} \
                 MADs unsent and evicted {} half-open connections",
                a.refused,
                a.dropped,
                self.cm.unsent,
                self.cm.evicted
            );
        }
        let CmLink { cm, qp, .. } = self;
        drop(qp.destroy());
        drop(cm.into_gsi().close());
    }

    /// Whether the peer's disconnect of `id` has arrived (its event set aside).
    fn has_disconnected(&self, id: CmId) -> bool {
        self.aside
            .q
            .iter()
            .any(|ev| matches!(ev, CmEvent::Disconnected { id: i } if *i == id))
    }

    /// Disconnects one connection and waits (3 s at most) for it to end — not at all when the
    /// peer disconnected first: our disconnect then answers its DREQ, and that ends it. Other
    /// connections' events are set aside, not lost (the other connection's `end` looks for
    /// them).
    fn end(&mut self, id: CmId, qp: Option<&mut Qp<'_>>) {
        let peer_first = self.aside.take_disconnected(id);
        let r = match qp {
            Some(q) => self.cm.disconnect(id, q),
            None => self.cm.disconnect(id, &mut self.qp),
        };
        if let Err(x) = r {
            log::warn!("perftest -R: disconnect: {x}");
            return;
        }
        if peer_first {
            return;
        }
        let until = Instant::now() + Duration::from_secs(3);
        while Instant::now() < until {
            match self.cm.poll() {
                Ok(Some(CmEvent::Disconnected { id: i })) if i == id => return,
                Ok(Some(other)) => self.aside.put(&mut self.cm, other),
                Ok(None) => self.relax(),
                Err(_) => return,
            }
        }
    }
}

/// The next connection event from the connection manager, by `deadline`.
fn next_event(
    cm: &mut Cm<'_, AnyPlatform>,
    dev: &Dev,
    deadline: Instant,
) -> Result<CmEvent, String> {
    loop {
        if let Some(ev) = cm.poll().map_err(e)? {
            return Ok(ev);
        }
        if Instant::now() > deadline {
            return Err("no connection event within 300 s".into());
        }
        mlx5::Platform::relax(dev.platform());
    }
}

/// Connects `qp` as the client, retrying a rejected REQ up to 10 times 100 ms apart
/// (perftest's client does: the server may not listen yet). Other events are set aside.
fn connect_qp(
    cm: &mut Cm<'_, AnyPlatform>,
    aside: &mut Aside,
    dev: &Dev,
    qp: &mut Qp<'_>,
    route: Route,
    out: u8,
) -> Result<CmId, String> {
    for _ in 0..10 {
        let id = cm.connect(qp, &route, &param(out)).map_err(e)?;
        let deadline = Instant::now() + PATIENCE;
        let outcome = loop {
            match next_event(cm, dev, deadline)? {
                CmEvent::ConnectResponse { id: i, .. } if i == id => break Ok(()),
                CmEvent::Rejected { id: i, reason } if i == id => break Err(reason),
                CmEvent::Unreachable { id: i, .. } if i == id => {
                    return Err("RDMA_CM_EVENT_UNREACHABLE: no answer to our REQ".into())
                }
                other => aside.put(cm, other),
            }
        };
        match outcome {
            Ok(()) => {
                cm.establish(id, qp).map_err(e)?;
                return Ok(id);
            }
            Err(reason) => {
                log::info!("perftest -R: REQ rejected (reason {reason}); retrying");
                // The QP stayed in INIT: connect again from there.
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    Err("Failed to connect RDMA CM client, tried 10 times.".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_keys_are_perftests_struct() {
        let mut gid = [0u8; 16];
        gid[10..].copy_from_slice(&[0xff, 0xff, 198, 18, 0, 2]);
        let k = Keys {
            lid: 0,
            out: 16,
            qpn: 0x11,
            psn: 0xabcdef,
            rkey: 0x1234,
            vaddr: 0x5555_0000_1000,
            gid,
            srqn: 0,
        };
        let b = k.to_binary(1);
        assert_eq!(&b[4..8], &[0, 0, 0, 16]);
        assert_eq!(&b[8..12], &[0, 0, 0, 0x11]);
        assert_eq!(&b[16..24], &[0, 0, 0x12, 0x34, 0, 0, 0, 0]);
        assert_eq!(&b[24..32], &[0, 0, 0x55, 0x55, 0, 0, 0x10, 0]);
        assert_eq!(&b[42..48], &[0xff, 0xff, 198, 18, 0, 2]);
        assert_eq!(&b[52..56], &[0, 0, 0, 1]);
        assert_eq!(Keys::from_binary(&b).unwrap(), k);
        assert!(Keys::from_binary(&b[..40]).is_err());
    }
}
