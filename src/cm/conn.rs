//! The connection manager: RC connections set up and torn down with CM MADs over QP1, as
//! rdma_cm peers (Linux's `ib_cm` + `rdma_cm`, librdmacm) expect (docs/rdma-cm-facts.md §3).
//!
//! Active side: [`Cm::connect`] moves the QP to INIT and sends a REQ (retransmitted until a REP,
//! REJ or MRA answers, or the retries run out); the REP is reported as
//! [`CmEvent::ConnectResponse`], and [`Cm::establish`] moves the QP to RTR and RTS and sends the
//! RTU. Passive side: [`Cm::listen`] on a port; a REQ is reported as
//! [`CmEvent::ConnectRequest`]; [`Cm::accept`] brings the QP to RTS, then sends the REP
//! (retransmitted until the RTU); [`Cm::reject`] refuses. Either side: [`Cm::disconnect`] moves
//! the QP to ERROR and sends a DREQ (or, after the peer's DREQ, the DREP); the connection then
//! waits out its time-wait. Nothing blocks: [`Cm::poll`] takes in MADs, runs the timers and
//! hands out events. Timers use the platform's clock.

use heapless::{Deque, Vec};
use mlx5_ifc::consts::roce;

use super::gsi::{Gsi, MadAddr};
use super::mad::{self, attr, dreq, ids, msg, reason, rej, rep, req, CmaHdr, Mad};
use super::qp::{ack_timeout, init_qp, mapped};
use crate::error::{Error, Result};
use crate::io::platform::Platform;
// An argument refused before anything was sent: the verbs' error.
use crate::qp::{AhAttr, Mtu, Qp, QpAttr, QpAttrMask as M, QpState, QpType};
use crate::verbs::qp::refuse as wrong;

/// Connections (live or in time-wait) at once.
pub const MAX_CONNS: usize = 16;
/// Ports listened on at once.
pub const MAX_LISTENS: usize = 8;
/// Bytes of user private data in a REQ after rdma_cm's header.
pub(super) const REQ_USER_DATA: usize = 56;
/// Bytes of private data in a REP.
pub(super) const REP_DATA: usize = 196;

/// A connection, named by our local communication ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CmId(pub u32);

/// How a connection is set up: addresses, timers, and what this node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CmConfig {
    /// Our CA GUID (REQ/REP `LocalCAGUID`; REJ-for-timeout ARI).
    pub ca_guid: u64,
    /// The GID table index we send from (1: the IPv4-mapped GID on RoCE v2).
    pub sgid_index: u8,
    /// CM response timeout we advertise (4.096 µs × 2^t; rdma_cm: 20, ~4 s).
    pub cm_response_timeout: u8,
    /// Retransmissions of a REQ, REP or DREQ before giving up (rdma_cm: 15).
    pub max_cm_retries: u8,
    /// Packet life time of the path (rdma_cm on RoCE: 16).
    pub packet_life_time: u8,
    /// Our CA's ACK delay (the device's `local_ca_ack_delay`).
    pub ca_ack_delay: u8,
    /// IP hop limit of our packets.
    pub hop_limit: u8,
    /// Path MTU we offer (the REQ's; a passive takes the smaller of the REQ's and this).
    pub mtu: Mtu,
}

/// The EUI-64 node GUID of a port MAC (the universal/local bit flipped, FF:FE in the middle),
/// as Linux derives one for a RoCE device without a burnt-in GUID.
pub fn guid_of_mac(mac: [u8; 6]) -> u64 {
    u64::from_be_bytes([
        mac[0] ^ 2,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ])
}

impl CmConfig {
    /// The defaults, with `dev`'s identity: its CA GUID (the EUI-64 of its port MAC) and its
    /// `local_ca_ack_delay`.
    pub fn for_device<P: Platform>(dev: &crate::Device<P>) -> Self {
        CmConfig {
            ca_guid: guid_of_mac(dev.vport().mac),
            ca_ack_delay: dev
                .caps()
                .get("local_ca_ack_delay")
                .map_or(16, |v| v.min(31) as u8),
            ..CmConfig::default()
        }
    }
}

impl Default for CmConfig {
    fn default() -> Self {
        CmConfig {
            ca_guid: 0,
            sgid_index: 1,
            cm_response_timeout: 20,
            max_cm_retries: 15,
            packet_life_time: 16,
            ca_ack_delay: 16,
            hop_limit: 64,
            mtu: Mtu::Mtu1024,
        }
    }
}

/// What one side offers for a connection (`struct rdma_conn_param`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnParam<'p> {
    /// RDMA READs and atomics we take in at once from the peer.
    pub responder_resources: u8,
    /// RDMA READs and atomics we keep outstanding towards the peer.
    pub initiator_depth: u8,
    /// Transport retries (≤ 7).
    pub retry_count: u8,
    /// RNR retries (7: for ever).
    pub rnr_retry_count: u8,
    /// Our RNR NAK timer code.
    pub min_rnr_timer: u8,
    /// Private data (REQ: after rdma_cm's 36-byte header, ≤ 56 bytes; REP: ≤ 196).
    pub private_data: &'p [u8],
}

impl Default for ConnParam<'_> {
    fn default() -> Self {
        ConnParam {
            responder_resources: 1,
            initiator_depth: 1,
            retry_count: 7,
            rnr_retry_count: 7,
            min_rnr_timer: 12,
            private_data: &[],
        }
    }
}

/// The active side's addresses (what `rdma_resolve_addr`/`rdma_resolve_route` find).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// Our IPv4 address.
    pub src_ip: [u8; 4],
    /// Our port (rdma_cm binds an ephemeral one).
    pub src_port: u16,
    /// The passive side's IPv4 address.
    pub dst_ip: [u8; 4],
    /// The port it listens on.
    pub dst_port: u16,
    /// The next hop's MAC.
    pub dmac: [u8; 6],
}

/// A REQ that arrived for a port we listen on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnRequest {
    /// The connection.
    pub id: CmId,
    /// The port it asked for.
    pub port: u16,
    /// The active side's QP.
    pub remote_qpn: u32,
    /// The active side's GID.
    pub remote_gid: [u8; 16],
    /// rdma_cm's header (addresses and the active side's port), when it carried one.
    pub cma: Option<CmaHdr>,
    /// READs/atomics the active side takes in (its responder resources).
    pub responder_resources: u8,
    /// READs/atomics the active side keeps outstanding (its initiator depth).
    pub initiator_depth: u8,
    /// The user's private data after rdma_cm's header.
    pub private_data: [u8; REQ_USER_DATA],
}

/// What [`Cm::poll`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmEvent {
    /// Passive: a REQ for a port we listen on; [`Cm::accept`] or [`Cm::reject`] it.
    ConnectRequest(ConnRequest),
    /// Active: the REP arrived; [`Cm::establish`] finishes the connection.
    ConnectResponse {
        /// The connection.
        id: CmId,
        /// The REP's private data.
        private_data: [u8; REP_DATA],
    },
    /// The connection is up (passive: the RTU arrived).
    Established {
        /// The connection.
        id: CmId,
    },
    /// The peer refused (REJ).
    Rejected {
        /// The connection.
        id: CmId,
        /// The REJ's reason (IBTA table 112; rdma_cm reports it as the event status).
        reason: u16,
    },
    /// A REQ, REP or DREQ went unanswered through every retry.
    Unreachable {
        /// The connection.
        id: CmId,
        /// What went unanswered.
        waiting_for: &'static str,
    },
    /// The peer disconnected (its DREQ), or our DREQ was answered or given up on.
    Disconnected {
        /// The connection.
        id: CmId,
    },
}

impl CmEvent {
    /// The connection the event is about.
    pub fn id(&self) -> CmId {
        match *self {
            CmEvent::ConnectRequest(r) => r.id,
            CmEvent::ConnectResponse { id, .. }
            | CmEvent::Established { id }
            | CmEvent::Rejected { id, .. }
            | CmEvent::Unreachable { id, .. }
            | CmEvent::Disconnected { id } => id,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    ReqSent,
    RepRcvd,
    ReqRcvd,
    RepSent,
    Established,
    DreqSent,
    DreqRcvd,
    TimeWait,
}

/// What a connection knows of the path and the peer's offer.
#[derive(Debug, Clone, Copy)]
pub(super) struct Conn {
    pub(super) local_id: u32,
    pub(super) remote_id: u32,
    pub(super) state: State,
    /// The handshake's transaction ID (REQ's), reused by REP, RTU, MRA and REJ.
    pub(super) tid: u64,
    pub(super) local_qpn: u32,
    pub(super) remote_qpn: u32,
    /// The PSN we expect first (our REQ/REP StartingPSN).
    pub(super) rq_psn: u32,
    /// The PSN the peer expects first (theirs).
    pub(super) sq_psn: u32,
    pub(super) remote_ca_guid: u64,
    pub(super) to: MadAddr,
    pub(super) mtu: Mtu,
    /// Ours (from our ConnParam) and the peer's offer.
    pub(super) responder_resources: u8,
    pub(super) initiator_depth: u8,
    pub(super) retry_count: u8,
    pub(super) rnr_retry: u8,
    pub(super) min_rnr_timer: u8,
    pub(super) ack_timeout: u8,
    /// The message the timer retransmits, when it deadline passes.
    pub(super) last: Mad,
    pub(super) deadline_ns: u64,
    pub(super) retries_left: u8,
    pub(super) timeout_ms: u64,
    pub(super) waiting_for: &'static str,
    /// The order in which connections took their slots (the oldest half-open one is evicted
    /// first).
    pub(super) born: u64,
    /// An MRA extended the wait for the answer to `last` already (one is taken per message).
    pub(super) mra_taken: bool,
}

/// INIT → RTR → RTS with the connection's path and the two sides' numbers.
fn to_rts<P: Platform>(qp: &mut Qp<'_, P>, c: &Conn) -> Result<()> {
    let rtr = QpAttr {
        qp_state: Some(QpState::Rtr),
        ah_attr: AhAttr {
            sgid_index: c.to.sgid_index,
            dgid: c.to.gid,
            dmac: c.to.mac,
            hop_limit: c.to.hop_limit,
            traffic_class: c.to.traffic_class,
            ..AhAttr::default()
        },
        path_mtu: c.mtu,
        dest_qp_num: c.remote_qpn,
        rq_psn: c.rq_psn,
        max_dest_rd_atomic: c.responder_resources,
        min_rnr_timer: c.min_rnr_timer,
        ..QpAttr::default()
    };
    qp.modify(
        &rtr,
        M::STATE
            | M::AV
            | M::PATH_MTU
            | M::DEST_QPN
            | M::RQ_PSN
            | M::MAX_DEST_RD_ATOMIC
            | M::MIN_RNR_TIMER,
    )?;
    let rts = QpAttr {
        qp_state: Some(QpState::Rts),
        sq_psn: c.sq_psn,
        timeout: c.ack_timeout,
        retry_cnt: c.retry_count,
        rnr_retry: c.rnr_retry,
        max_rd_atomic: c.initiator_depth,
        ..QpAttr::default()
    };
    qp.modify(
        &rts,
        M::STATE | M::SQ_PSN | M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::MAX_QP_RD_ATOMIC,
    )
}

/// The connection manager over one device's QP1.
pub struct Cm<'a, P: Platform> {
    pub(super) gsi: Gsi<'a, P>,
    pub(super) cfg: CmConfig,
    pub(super) conns: Vec<Conn, MAX_CONNS>,
    pub(super) listens: Vec<u16, MAX_LISTENS>,
    /// Next hops learnt ([`Cm::learn`], and every connection's), for answers to nodes we
    /// have no connection with (REJ, DREP).
    pub(super) neighbours: Vec<([u8; 16], [u8; 6]), MAX_CONNS>,
    pub(super) events: Deque<CmEvent, MAX_CONNS>,
    pub(super) next_id: u32,
    /// Connections made so far (each one's [`Conn::born`]).
    pub(super) made: u64,
    pub(super) rand: u64,
    /// MADs that were not for us or made no sense (counted, then dropped): another class's,
    /// for a connection we do not have, out of place; receives on QP1 that were not a whole
    /// MAD among them.
    pub dropped: u64,
    /// MADs not sent because every GSI send slot was in flight, or because no next hop is known
    /// for the node they are for: answers to unsolicited MADs dropped, messages of our
    /// handshakes left to their retransmission (`limits.rs`).
    pub unsent: u64,
    /// Half-open connections a peer started that were evicted to make room for a new one.
    pub evicted: u64,
    /// Events lost because the caller let [`Cm::poll`]'s queue fill.
    pub events_lost: u64,
}

impl<P: Platform> core::fmt::Debug for Cm<'_, P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Cm")
            .field("gsi_qpn", &self.gsi.qpn())
            .field("connections", &self.conns.len())
            .field("listens", &self.listens)
            .field("dropped", &self.dropped)
            .field("unsent", &self.unsent)
            .field("evicted", &self.evicted)
            .finish()
    }
}

/// A 64-bit xorshift step (PSNs and communication IDs need only be unpredictable enough not
/// to collide with a previous incarnation's).
fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

impl<'a, P: Platform> Cm<'a, P> {
    /// A connection manager over `gsi`; its timers run on the platform's clock.
    pub fn new(gsi: Gsi<'a, P>, cfg: CmConfig) -> Self {
        let seed = gsi.now_ns() ^ cfg.ca_guid.rotate_left(17) ^ 0x9e37_79b9_7f4a_7c15;
        let mut rand = seed | 1;
        let next_id = xorshift(&mut rand) as u32;
        Cm {
            gsi,
            cfg,
            conns: Vec::new(),
            listens: Vec::new(),
            neighbours: Vec::new(),
            events: Deque::new(),
            next_id,
            made: 0,
            rand,
            dropped: 0,
            unsent: 0,
            evicted: 0,
            events_lost: 0,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &CmConfig {
        &self.cfg
    }

    /// Gives QP1 back (all connections forgotten).
    pub fn into_gsi(self) -> Gsi<'a, P> {
        self.gsi
    }

    /// Records the next hop of a GID (what ARP found), so that MADs from that node can be
    /// answered before any connection with it exists (a REJ for a port nobody listens on).
    pub fn learn(&mut self, gid: [u8; 16], mac: [u8; 6]) {
        if let Some(n) = self.neighbours.iter_mut().find(|n| n.0 == gid) {
            n.1 = mac;
        } else if self.neighbours.is_full() {
            self.neighbours[0] = (gid, mac);
            self.neighbours.rotate_left(1);
        } else {
            let _ = self.neighbours.push((gid, mac));
        }
    }

    /// Accept REQs for `port` (rdma_cm's TCP port space: ServiceID 0x01060000 + port).
    pub fn listen(&mut self, port: u16) -> Result<()> {
        if !self.listens.contains(&port) {
            self.listens.push(port).map_err(|_| Error::Capacity {
                what: "CM listens",
                limit: MAX_LISTENS,
            })?;
        }
        Ok(())
    }

    fn conn(&mut self, id: CmId, op: &'static str) -> Result<&mut Conn> {
        self.conns
            .iter_mut()
            .find(|c| c.local_id == id.0)
            .ok_or(wrong(op, "id", u64::from(id.0), 0, "no such connection"))
    }

    pub(super) fn new_id(&mut self) -> u32 {
        loop {
            self.next_id = self.next_id.wrapping_add(1);
            let id = self.next_id ^ (self.rand as u32);
            if id != 0 && !self.conns.iter().any(|c| c.local_id == id) {
                return id;
            }
        }
    }

    /// The next connection's place in the order they are made.
    pub(super) fn born(&mut self) -> u64 {
        self.made += 1;
        self.made
    }

    fn psn(&mut self) -> u32 {
        (xorshift(&mut self.rand) & 0xff_ffff) as u32
    }

    /// Active side: moves `qp` (an RC QP in RESET) to INIT and sends a REQ for `route`.
    pub fn connect(
        &mut self,
        qp: &mut Qp<'_, P>,
        route: &Route,
        p: &ConnParam<'_>,
    ) -> Result<CmId> {
        if qp.qp_type() != QpType::Rc {
            return Err(wrong(
                "cm connect",
                "qp_type",
                0,
                0,
                "the CM connects RC QPs",
            ));
        }
        if p.private_data.len() > REQ_USER_DATA {
            return Err(wrong(
                "cm connect",
                "private_data",
                p.private_data.len() as u64,
                REQ_USER_DATA as u64,
                "REQ private data after rdma_cm's header",
            ));
        }
        if p.retry_count > 7 || p.rnr_retry_count > 7 {
            return Err(wrong("cm connect", "retry_count", 8, 7, "3-bit fields"));
        }
        self.free_slot()?;
        init_qp(qp, p.responder_resources)?;
        let id = self.new_id();
        let psn = self.psn();
        let c = &self.cfg;
        let to = MadAddr {
            gid: mapped(route.dst_ip),
            mac: route.dmac,
            sgid_index: c.sgid_index,
            hop_limit: c.hop_limit,
            traffic_class: 0,
        };
        let tid = TID_HI | u64::from(id);
        let mut m = Mad::cm(attr::REQ, tid);
        m.set(req::LOCAL_COMM_ID, u64::from(id));
        m.set(req::SERVICE_ID, mad::service_id(route.dst_port));
        m.set(req::LOCAL_CA_GUID, c.ca_guid);
        m.set(req::LOCAL_QPN, u64::from(qp.qpn()));
        m.set(req::RESPONDER_RESOURCES, u64::from(p.responder_resources));
        m.set(req::INITIATOR_DEPTH, u64::from(p.initiator_depth));
        m.set(
            req::REMOTE_CM_RESPONSE_TIMEOUT,
            u64::from(c.cm_response_timeout),
        );
        m.set(req::STARTING_PSN, u64::from(psn));
        m.set(
            req::LOCAL_CM_RESPONSE_TIMEOUT,
            u64::from(c.cm_response_timeout),
        );
        m.set(req::RETRY_COUNT, u64::from(p.retry_count));
        m.set(req::PKEY, roce::DEFAULT_PKEY.into());
        m.set(req::PATH_MTU, c.mtu as u64);
        m.set(req::RNR_RETRY, u64::from(p.rnr_retry_count));
        m.set(req::MAX_CM_RETRIES, u64::from(c.max_cm_retries));
        m.set(req::PRIMARY_LOCAL_LID, 0xffff);
        m.set(req::PRIMARY_REMOTE_LID, 0xffff);
        m.0[req::PRIMARY_LOCAL_GID..][..16].copy_from_slice(&mapped(route.src_ip));
        m.0[req::PRIMARY_REMOTE_GID..][..16].copy_from_slice(&to.gid);
        // rdma_cm's flow label for IPv4: (src port × 31 + dst port) & 0xFFFFF.
        let fl = (u32::from(route.src_port) * 31 + u32::from(route.dst_port)) & 0xf_ffff;
        m.set(req::FLOW_LABEL, u64::from(fl));
        m.set(req::HOP_LIMIT, u64::from(c.hop_limit));
        let ack = ack_timeout(c.ca_ack_delay, c.packet_life_time);
        m.set(req::LOCAL_ACK_TIMEOUT, u64::from(ack));
        let h = CmaHdr {
            src_port: route.src_port,
            src_ip: route.src_ip,
            dst_ip: route.dst_ip,
        };
        m.0[req::PRIVATE..][..mad::CMA_HDR_LEN].copy_from_slice(&h.to_bytes());
        m.0[req::PRIVATE + mad::CMA_HDR_LEN..][..p.private_data.len()]
            .copy_from_slice(p.private_data);
        let timeout_ms =
            2 * mad::timeout_ms(c.packet_life_time) + mad::timeout_ms(c.cm_response_timeout);
        let conn = Conn {
            local_id: id,
            remote_id: 0,
            state: State::ReqSent,
            tid,
            local_qpn: qp.qpn(),
            remote_qpn: 0,
            rq_psn: psn,
            sq_psn: 0,
            remote_ca_guid: 0,
            to,
            mtu: c.mtu,
            responder_resources: p.responder_resources,
            initiator_depth: p.initiator_depth,
            retry_count: p.retry_count,
            rnr_retry: 0,
            min_rnr_timer: p.min_rnr_timer,
            ack_timeout: ack,
            last: m,
            deadline_ns: 0,
            retries_left: c.max_cm_retries,
            timeout_ms,
            waiting_for: "a REP to our REQ",
            born: self.born(),
            mra_taken: false,
        };
        // Not sent for want of a send slot: the timer sends it again.
        self.send_mad(&to, &m)?;
        self.learn(to.gid, to.mac);
        let now = self.gsi.now_ns();
        let mut conn = conn;
        conn.deadline_ns = now + timeout_ms * 1_000_000;
        // free_slot made room.
        let _ = self.conns.push(conn);
        Ok(CmId(id))
    }

    /// Active side, after [`CmEvent::ConnectResponse`]: moves `qp` to RTR and RTS with what
    /// the REP said, and sends the RTU.
    pub fn establish(&mut self, id: CmId, qp: &mut Qp<'_, P>) -> Result<()> {
        let c = *self.conn(id, "cm establish")?;
        if c.state != State::RepRcvd {
            return Err(wrong(
                "cm establish",
                "state",
                0,
                0,
                "no REP to establish from",
            ));
        }
        if qp.qpn() != c.local_qpn {
            return Err(wrong(
                "cm establish",
                "qp",
                u64::from(qp.qpn()),
                u64::from(c.local_qpn),
                "the QP the REQ named",
            ));
        }
        to_rts(qp, &c)?;
        let mut m = Mad::cm(attr::RTU, c.tid);
        m.set(ids::LOCAL_COMM_ID, u64::from(c.local_id));
        m.set(ids::REMOTE_COMM_ID, u64::from(c.remote_id));
        // A lost RTU is sent again when the REP comes again.
        self.send_mad(&c.to, &m)?;
        let cm = self.conn(id, "cm establish")?;
        cm.state = State::Established;
        cm.last = m;
        cm.deadline_ns = 0;
        Ok(())
    }

    /// Passive side, after [`CmEvent::ConnectRequest`]: brings `qp` (RC, in RESET) to RTS
    /// towards the active side through next hop `dmac`, then sends the REP.
    pub fn accept(
        &mut self,
        id: CmId,
        qp: &mut Qp<'_, P>,
        dmac: [u8; 6],
        p: &ConnParam<'_>,
    ) -> Result<()> {
        if qp.qp_type() != QpType::Rc {
            return Err(wrong(
                "cm accept",
                "qp_type",
                0,
                0,
                "the CM connects RC QPs",
            ));
        }
        if p.private_data.len() > REP_DATA {
            return Err(wrong(
                "cm accept",
                "private_data",
                p.private_data.len() as u64,
                REP_DATA as u64,
                "REP private data",
            ));
        }
        let cfg = self.cfg;
        let psn = self.psn();
        let c = self.conn(id, "cm accept")?;
        if c.state != State::ReqRcvd {
            return Err(wrong(
                "cm accept",
                "state",
                0,
                0,
                "no REQ waiting to be accepted",
            ));
        }
        c.to.mac = dmac;
        c.local_qpn = qp.qpn();
        c.rq_psn = psn;
        // Until now these held the REQ's offer. We take in no more READs than the active
        // side keeps outstanding, and keep out no more than it takes in.
        let (their_rr, their_id) = (c.responder_resources, c.initiator_depth);
        c.responder_resources = p.responder_resources.min(their_id);
        c.initiator_depth = p.initiator_depth.min(their_rr);
        c.min_rnr_timer = p.min_rnr_timer;
        let c = *c;
        self.learn(c.to.gid, dmac);
        init_qp(qp, c.responder_resources)?;
        to_rts(qp, &c)?;
        let mut m = Mad::cm(attr::REP, c.tid);
        m.set(rep::LOCAL_COMM_ID, u64::from(c.local_id));
        m.set(rep::REMOTE_COMM_ID, u64::from(c.remote_id));
        m.set(rep::LOCAL_QPN, u64::from(c.local_qpn));
        m.set(rep::STARTING_PSN, u64::from(psn));
        m.set(rep::RESPONDER_RESOURCES, u64::from(c.responder_resources));
        m.set(rep::INITIATOR_DEPTH, u64::from(c.initiator_depth));
        m.set(rep::TARGET_ACK_DELAY, u64::from(cfg.ca_ack_delay));
        m.set(rep::RNR_RETRY, u64::from(p.rnr_retry_count.min(7)));
        m.set(rep::LOCAL_CA_GUID, cfg.ca_guid);
        m.0[rep::PRIVATE..][..p.private_data.len()].copy_from_slice(p.private_data);
        // Not sent for want of a send slot: the timer sends it again.
        self.send_mad(&c.to, &m)?;
        let now = self.gsi.now_ns();
        let cm = self.conn(id, "cm accept")?;
        cm.state = State::RepSent;
        cm.last = m;
        cm.deadline_ns = now + cm.timeout_ms * 1_000_000;
        cm.waiting_for = "an RTU to our REP";
        cm.mra_taken = false;
        Ok(())
    }

    /// Passive side: refuses a REQ (REJ, "consumer defined" unless `reason` says otherwise).
    pub fn reject(&mut self, id: CmId, reason: u16) -> Result<()> {
        let c = *self.conn(id, "cm reject")?;
        if c.state != State::ReqRcvd {
            return Err(wrong(
                "cm reject",
                "state",
                0,
                0,
                "no REQ waiting to be answered",
            ));
        }
        let mut m = Mad::cm(attr::REJ, c.tid);
        m.set(rej::REMOTE_COMM_ID, u64::from(c.remote_id));
        m.set(rej::MESSAGE_REJECTED, msg::REQ);
        m.set(rej::REASON, u64::from(reason));
        // Before accept the next hop is known only if learnt; without it the REJ is not
        // sent (counted in `unsent`; the active side times out).
        self.send_mad(&c.to, &m)?;
        self.conns.retain(|x| x.local_id != id.0);
        Ok(())
    }

    /// Moves `qp` to ERROR and ends the connection: a DREQ (retransmitted until the DREP), or
    /// the DREP when the peer's DREQ came first.
    pub fn disconnect(&mut self, id: CmId, qp: &mut Qp<'_, P>) -> Result<()> {
        let c = *self.conn(id, "cm disconnect")?;
        if qp.qpn() == c.local_qpn && qp.state() != QpState::Reset {
            let a = QpAttr {
                qp_state: Some(QpState::Err),
                ..QpAttr::default()
            };
            qp.modify(&a, M::STATE)?;
        }
        let now = self.gsi.now_ns();
        match c.state {
            State::Established | State::RepSent | State::RepRcvd => {
                let tid = TID_HI | u64::from(c.local_id) | 1 << 31;
                let mut m = Mad::cm(attr::DREQ, tid);
                m.set(ids::LOCAL_COMM_ID, u64::from(c.local_id));
                m.set(ids::REMOTE_COMM_ID, u64::from(c.remote_id));
                m.set(dreq::REMOTE_QPN, u64::from(c.remote_qpn));
                self.send_mad(&c.to, &m)?;
                let timeout = 2 * mad::timeout_ms(self.cfg.packet_life_time)
                    + mad::timeout_ms(self.cfg.cm_response_timeout);
                let retries = self.cfg.max_cm_retries;
                let cm = self.conn(id, "cm disconnect")?;
                cm.state = State::DreqSent;
                cm.last = m;
                cm.timeout_ms = timeout;
                cm.retries_left = retries;
                cm.deadline_ns = now + timeout * 1_000_000;
                cm.waiting_for = "a DREP to our DREQ";
                cm.mra_taken = false;
            }
            State::DreqRcvd => {
                let m = self.conn(id, "cm disconnect")?.last;
                self.send_mad(&c.to, &m)?;
                self.time_wait(id.0, now);
            }
            State::ReqSent | State::ReqRcvd => {
                // Not yet connected: a REJ ends it (timeout as Linux's cm_destroy_id says it
                // for an active side; consumer-defined for a passive one).
                let mut m = Mad::cm(attr::REJ, c.tid);
                m.set(rej::LOCAL_COMM_ID, u64::from(c.local_id));
                m.set(rej::REMOTE_COMM_ID, u64::from(c.remote_id));
                m.set(rej::MESSAGE_REJECTED, msg::REQ);
                if c.state == State::ReqSent {
                    m.set(rej::REASON, u64::from(reason::TIMEOUT));
                    m.set(rej::REJECT_INFO_LEN, 8);
                    m.0[rej::ARI..][..8].copy_from_slice(&self.cfg.ca_guid.to_be_bytes());
                } else {
                    m.set(rej::REASON, u64::from(reason::CONSUMER));
                }
                self.send_mad(&c.to, &m)?;
                self.conns.retain(|x| x.local_id != id.0);
            }
            State::DreqSent | State::TimeWait => {}
        }
        Ok(())
    }

    /// Forgets a connection at once (after [`CmEvent::Disconnected`], or to abandon one).
    pub fn destroy_id(&mut self, id: CmId) {
        self.conns.retain(|x| x.local_id != id.0);
    }

    pub(super) fn time_wait(&mut self, local_id: u32, now: u64) {
        if let Some(c) = self.conns.iter_mut().find(|c| c.local_id == local_id) {
            c.state = State::TimeWait;
            c.deadline_ns = now + mad::timeout_ms(c.ack_timeout) * 1_000_000;
            c.waiting_for = "";
        }
    }
}

/// The high half of our transaction IDs (Linux puts its MAD agent's number there).
const TID_HI: u64 = 0x4d4c_3578 << 32;
