//! The connection manager's receive side and timers: each MAD taken in is matched to its
//! connection by communication IDs as Linux's CM matches them (docs/rdma-cm-facts.md §3.2) and
//! moves it along; unanswered REQs, REPs and DREQs are retransmitted on their timers. What a
//! peer can make us hold, and for how long, is bounded as `limits.rs` says.

use super::conn::{Cm, CmEvent, CmId, Conn, ConnRequest, State, REP_DATA, REQ_USER_DATA};
use super::gsi::{MadAddr, Received};
use super::limits;
use super::mad::{self, attr, dreq, ids, msg, reason, rej, rep, req, CmaHdr, Mad};
use super::qp::{ack_timeout, mtu_of};
use crate::error::Result;
use crate::io::platform::Platform;

impl<P: Platform> Cm<'_, P> {
    /// Takes in MADs, runs the timers, and returns the next event, if any. Only the device
    /// failing is an error: nothing a peer sends makes this fail (`limits.rs`).
    pub fn poll(&mut self) -> Result<Option<CmEvent>> {
        // Receives QP1 dropped (not a whole MAD) were not for us either.
        let torn = self.gsi.recv_dropped();
        for _ in 0..16 {
            // A MAD raises at most two events (an eviction and a REQ): without room for them
            // it waits in QP1's receive queue rather than push out an event we owe.
            if !self.room_for_events(2) {
                break;
            }
            match self.gsi.recv()? {
                Some(r) => self.handle(&r)?,
                None => break,
            }
        }
        self.dropped += self.gsi.recv_dropped() - torn;
        self.timers()?;
        Ok(self.events.pop_front())
    }

    fn timers(&mut self) -> Result<()> {
        let now = self.gsi.now_ns();
        let mut i = 0;
        while i < self.conns.len() {
            let c = self.conns[i];
            // Without room for its event, an expired connection waits for the next poll.
            if c.deadline_ns == 0 || now < c.deadline_ns || !self.room_for_events(1) {
                i += 1;
                continue;
            }
            let id = CmId(c.local_id);
            if c.state == State::TimeWait {
                self.conns.swap_remove(i);
                continue;
            }
            if c.state == State::ReqRcvd {
                log::warn!("CM {:#x}: a REQ left unanswered, forgotten", c.local_id);
                self.conns.swap_remove(i);
                self.event(CmEvent::Unreachable {
                    id,
                    waiting_for: c.waiting_for,
                });
                continue;
            }
            if c.retries_left == 0 {
                log::warn!(
                    "CM {:#x}: no answer waiting for {}",
                    c.local_id,
                    c.waiting_for
                );
                if c.state == State::DreqSent {
                    self.time_wait(c.local_id, now);
                    self.event(CmEvent::Disconnected { id });
                } else {
                    self.conns.swap_remove(i);
                    self.event(CmEvent::Unreachable {
                        id,
                        waiting_for: c.waiting_for,
                    });
                    continue;
                }
            } else {
                log::debug!(
                    "CM {:#x}: retransmitting, waiting for {}",
                    c.local_id,
                    c.waiting_for
                );
                // Not sent for want of a send slot: as if lost on the wire, one try spent.
                self.send_mad(&c.to, &c.last)?;
                let cm = &mut self.conns[i];
                cm.retries_left -= 1;
                cm.deadline_ns = now + cm.timeout_ms * 1_000_000;
            }
            i += 1;
        }
        Ok(())
    }

    fn find(&mut self, local: u32, remote: Option<u32>) -> Option<usize> {
        self.conns
            .iter()
            .position(|c| c.local_id == local && remote.is_none_or(|r| c.remote_id == r))
    }

    fn handle(&mut self, r: &Received) -> Result<()> {
        let m = &r.mad;
        if !m.is_cm() || r.src_qp != 1 {
            self.dropped += 1;
            return Ok(());
        }
        let local = m.get(ids::REMOTE_COMM_ID) as u32;
        let remote = m.get(ids::LOCAL_COMM_ID) as u32;
        let now = self.gsi.now_ns();
        match m.attr_id() {
            attr::REQ => self.on_req(r)?,
            attr::REP => {
                let Some(i) = self.find(local, None) else {
                    self.dropped += 1;
                    return Ok(());
                };
                let c = &mut self.conns[i];
                match c.state {
                    State::ReqSent => {
                        c.remote_id = remote;
                        c.remote_qpn = m.get(rep::LOCAL_QPN) as u32;
                        c.sq_psn = m.get(rep::STARTING_PSN) as u32;
                        c.remote_ca_guid = m.get(rep::LOCAL_CA_GUID);
                        // As librdmacm programs the active QP: we take in what the passive
                        // side keeps outstanding, and keep out what it takes in.
                        c.responder_resources = m.get(rep::INITIATOR_DEPTH) as u8;
                        c.initiator_depth = m.get(rep::RESPONDER_RESOURCES) as u8;
                        c.rnr_retry = m.get(rep::RNR_RETRY) as u8;
                        c.ack_timeout =
                            ack_timeout(m.get(rep::TARGET_ACK_DELAY) as u8, c.ack_timeout - 1);
                        c.state = State::RepRcvd;
                        c.deadline_ns = 0;
                        let mut pd = [0u8; REP_DATA];
                        pd.copy_from_slice(&m.0[rep::PRIVATE..rep::PRIVATE + REP_DATA]);
                        let id = CmId(c.local_id);
                        self.event(CmEvent::ConnectResponse {
                            id,
                            private_data: pd,
                        });
                    }
                    State::Established if c.remote_id == remote => {
                        // Our RTU was lost: the REP came again.
                        let (to, last) = (c.to, c.last);
                        self.send_mad(&to, &last)?;
                    }
                    // Another peer's REP naming our comm ID: not for us. (Ours again, in
                    // another state: a retransmission, nothing to do.)
                    _ if c.remote_id != remote => self.dropped += 1,
                    _ => {}
                }
            }
            attr::RTU => match self.find(local, Some(remote)) {
                Some(i) => {
                    let c = &mut self.conns[i];
                    if c.state == State::RepSent {
                        c.state = State::Established;
                        c.deadline_ns = 0;
                        let id = CmId(c.local_id);
                        self.event(CmEvent::Established { id });
                    }
                }
                // No connection of ours: not for us.
                None => self.dropped += 1,
            },
            attr::MRA => {
                let i = if m.get(mad::mra::MESSAGE_MRAED) == msg::REQ {
                    self.find(local, None)
                } else {
                    self.find(local, Some(remote))
                };
                if let Some(i) = i {
                    let c = self.conns[i];
                    // One MRA per message, its wait capped (`limits.rs`).
                    if matches!(c.state, State::ReqSent | State::RepSent) && !c.mra_taken {
                        let t = m.get(mad::mra::SERVICE_TIMEOUT);
                        let extra = limits::mra_wait_ms(&self.cfg, t, c.ack_timeout);
                        let c = &mut self.conns[i];
                        c.deadline_ns = now + extra * 1_000_000;
                        c.mra_taken = true;
                    } else {
                        self.dropped += 1;
                    }
                } else {
                    self.dropped += 1;
                }
            }
            attr::REJ => self.on_rej(m, local, remote, now),
            attr::DREQ => {
                let qpn = m.get(dreq::REMOTE_QPN) as u32;
                let mut drep = Mad::cm(attr::DREP, m.tid());
                drep.set(ids::LOCAL_COMM_ID, u64::from(local));
                drep.set(ids::REMOTE_COMM_ID, u64::from(remote));
                match self.find(local, Some(remote)) {
                    Some(i) if self.conns[i].local_qpn == qpn => {
                        let c = &mut self.conns[i];
                        match c.state {
                            State::Established
                            | State::RepSent
                            | State::RepRcvd
                            | State::DreqSent => {
                                let was = c.state;
                                c.state = State::DreqRcvd;
                                c.last = drep;
                                c.deadline_ns = 0;
                                let id = CmId(c.local_id);
                                if was == State::DreqSent {
                                    // Both sides disconnected at once: answer and wait.
                                    let to = c.to;
                                    self.send_mad(&to, &drep)?;
                                    self.time_wait(id.0, now);
                                }
                                self.event(CmEvent::Disconnected { id });
                            }
                            State::TimeWait => {
                                let to = c.to;
                                self.send_mad(&to, &drep)?;
                            }
                            _ => {}
                        }
                    }
                    Some(_) => self.dropped += 1,
                    None => {
                        // No such connection (any more): answer anyway, as Linux's CM does.
                        let to = self.reply_addr(r);
                        self.send_mad(&to, &drep)?;
                    }
                }
            }
            attr::DREP => match self.find(local, Some(remote)) {
                Some(i) => {
                    if self.conns[i].state == State::DreqSent {
                        let id = CmId(self.conns[i].local_id);
                        self.time_wait(id.0, now);
                        self.event(CmEvent::Disconnected { id });
                    }
                }
                None => self.dropped += 1,
            },
            _ => self.dropped += 1,
        }
        Ok(())
    }

    /// A REJ. It is matched as Linux's `cm_acquire_rejected_id` matches it: reason 4
    /// (timeout, sent by an active side giving up) by the sender's comm ID and the CA GUID in
    /// its ARI; a REJ of a REQ by our comm ID, and only while our REQ waits for its answer (our
    /// connection knows no remote ID yet); any other REJ by both comm IDs. So a stranger must
    /// name both 32-bit random IDs — as for a DREQ — to end a connection that is past its REQ.
    ///
    /// What it ends follows `cm_rej_handler`: before the connection is up on our side (REQ
    /// sent or received, REP sent) it is forgotten; once we took the REP, or are established
    /// or disconnecting, it enters time-wait — an established connection too: Linux does the
    /// same (ESTABLISHED → `cm_enter_timewait`, `RDMA_CM_EVENT_REJECTED`), and a peer that
    /// rejects a connection it had accepted has given it up. Either way the caller hears
    /// [`CmEvent::Rejected`] and moves its QP to ERROR (as rdma_cm's `cma_modify_qp_err`).
    fn on_rej(&mut self, m: &Mad, local: u32, remote: u32, now: u64) {
        let why = m.get(rej::REASON) as u16;
        let i = if why == reason::TIMEOUT {
            let mut g = [0u8; 8];
            g.copy_from_slice(&m.0[rej::ARI..rej::ARI + 8]);
            let guid = u64::from_be_bytes(g);
            self.conns.iter().position(|c| {
                c.remote_id == remote && c.remote_ca_guid == guid && c.state != State::ReqSent
            })
        } else if m.get(rej::MESSAGE_REJECTED) == msg::REQ {
            self.find(local, None)
                .filter(|&i| self.conns[i].state == State::ReqSent)
        } else {
            self.find(local, Some(remote))
        };
        let Some(i) = i else {
            self.dropped += 1;
            return;
        };
        let c = self.conns[i];
        match c.state {
            State::ReqSent | State::ReqRcvd | State::RepSent => {
                self.conns.swap_remove(i);
            }
            State::RepRcvd | State::Established | State::DreqSent => {
                self.time_wait(c.local_id, now);
            }
            State::DreqRcvd | State::TimeWait => {
                self.dropped += 1;
                return;
            }
        }
        log::info!("CM {:#x}: rejected, reason {why}", c.local_id);
        self.event(CmEvent::Rejected {
            id: CmId(c.local_id),
            reason: why,
        });
    }

    /// Where to answer a MAD from a node we have no connection with: a connection of ours to
    /// the same GID knows its next hop; else one learnt, if any, is found when it is sent
    /// (`send_mad`: without one the answer is not sent, and counted).
    fn reply_addr(&self, r: &Received) -> MadAddr {
        let mac = self
            .conns
            .iter()
            .find(|c| c.to.gid == r.src_gid && c.to.mac != [0; 6])
            .map_or([0; 6], |c| c.to.mac);
        MadAddr {
            gid: r.src_gid,
            mac,
            sgid_index: self.cfg.sgid_index,
            hop_limit: self.cfg.hop_limit,
            traffic_class: 0,
        }
    }

    fn on_req(&mut self, r: &Received) -> Result<()> {
        let m = &r.mad;
        let remote = m.get(req::LOCAL_COMM_ID) as u32;
        let guid = m.get(req::LOCAL_CA_GUID);
        if let Some(c) = self
            .conns
            .iter()
            .find(|c| c.remote_id == remote && c.remote_ca_guid == guid)
        {
            // A retransmitted REQ: still deciding, say so with an MRA; else our REP or its
            // timer answers.
            if c.state == State::ReqRcvd && c.to.mac != [0; 6] {
                let mut a = Mad::cm(attr::MRA, c.tid);
                a.set(ids::LOCAL_COMM_ID, u64::from(c.local_id));
                a.set(ids::REMOTE_COMM_ID, u64::from(remote));
                a.set(mad::mra::MESSAGE_MRAED, msg::REQ);
                a.set(
                    mad::mra::SERVICE_TIMEOUT,
                    u64::from(self.cfg.cm_response_timeout),
                );
                let to = c.to;
                self.send_mad(&to, &a)?;
            }
            return Ok(());
        }
        let sid = m.get(req::SERVICE_ID);
        let port = (sid & 0xffff) as u16;
        let to = MadAddr {
            gid: m.gid(req::PRIMARY_LOCAL_GID),
            mac: [0; 6],
            sgid_index: self.cfg.sgid_index,
            hop_limit: self.cfg.hop_limit,
            traffic_class: m.get(req::TRAFFIC_CLASS) as u8,
        };
        let refuse = |why: u16| {
            let mut j = Mad::cm(attr::REJ, m.tid());
            j.set(rej::REMOTE_COMM_ID, u64::from(remote));
            j.set(rej::MESSAGE_REJECTED, msg::REQ);
            j.set(rej::REASON, u64::from(why));
            j
        };
        let why = if sid >> 16 != 0x0106 || !self.listens.contains(&port) {
            Some(reason::INVALID_SERVICE_ID)
        } else if m.get(req::TRANSPORT) != 0 {
            Some(reason::INVALID_TRANSPORT)
        } else if self.conns.is_full()
            && !self.conns.iter().any(|c| {
                // Room is made by time-wait or eviction (`free_slot`).
                matches!(c.state, State::TimeWait | State::ReqRcvd | State::RepSent)
            })
        {
            Some(reason::NO_RESOURCES)
        } else {
            None
        };
        let Some(mtu) = mtu_of(m.get(req::PATH_MTU)) else {
            self.dropped += 1;
            return Ok(());
        };
        if let Some(why) = why {
            log::info!("CM: REQ for service {sid:#x} refused, reason {why}");
            let to = self.reply_addr(r);
            self.send_mad(&to, &refuse(why))?;
            return Ok(());
        }
        self.free_slot()?;
        let id = self.new_id();
        let mut pd = [0u8; REQ_USER_DATA];
        pd.copy_from_slice(&m.0[req::PRIVATE + mad::CMA_HDR_LEN..][..REQ_USER_DATA]);
        let cma = CmaHdr::parse(&m.0[req::PRIVATE..]);
        let now = self.gsi.now_ns();
        let c = Conn {
            local_id: id,
            remote_id: remote,
            state: State::ReqRcvd,
            tid: m.tid(),
            local_qpn: 0,
            remote_qpn: m.get(req::LOCAL_QPN) as u32,
            rq_psn: 0,
            sq_psn: m.get(req::STARTING_PSN) as u32,
            remote_ca_guid: guid,
            to,
            mtu: if (mtu as u8) < (self.cfg.mtu as u8) {
                mtu
            } else {
                self.cfg.mtu
            },
            // Until accept: the REQ's offer.
            responder_resources: m.get(req::RESPONDER_RESOURCES) as u8,
            initiator_depth: m.get(req::INITIATOR_DEPTH) as u8,
            retry_count: m.get(req::RETRY_COUNT) as u8,
            rnr_retry: m.get(req::RNR_RETRY) as u8,
            min_rnr_timer: 12,
            ack_timeout: (m.get(req::LOCAL_ACK_TIMEOUT) as u8).max(1),
            last: Mad::default(),
            // A REQ nobody answers is forgotten once the active side has surely given up on
            // it, on our clock: the REQ's timers capped at ours (`limits.rs`).
            deadline_ns: now.saturating_add(
                limits::req_wait_ms(
                    &self.cfg,
                    m.get(req::REMOTE_CM_RESPONSE_TIMEOUT),
                    m.get(req::MAX_CM_RETRIES),
                ) * 1_000_000,
            ),
            // For our REP: the REQ's retransmission timer and count, capped at ours.
            retries_left: limits::cap_retries(&self.cfg, m.get(req::MAX_CM_RETRIES)),
            timeout_ms: mad::timeout_ms(limits::cap_timeout(
                &self.cfg,
                m.get(req::LOCAL_CM_RESPONSE_TIMEOUT),
            )),
            waiting_for: "our accept or reject of its REQ",
            born: self.born(),
            mra_taken: false,
        };
        let _ = self.conns.push(c);
        self.event(CmEvent::ConnectRequest(ConnRequest {
            id: CmId(id),
            port,
            remote_qpn: c.remote_qpn,
            remote_gid: to.gid,
            cma,
            responder_resources: c.responder_resources,
            initiator_depth: c.initiator_depth,
            private_data: pd,
        }));
        Ok(())
    }
}
