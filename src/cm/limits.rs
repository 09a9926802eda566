//! What a remote party can make the connection manager hold, and for how long (issue #26).
//!
//! Every REQ a peer sends takes one of [`MAX_CONNS`] slots, and every timer it names runs on
//! our clock only as long as our own configuration would ask of a peer:
//!
//! - A REQ we took waits for our accept or reject at most `2 × 2^(t − 8) ms × (r + 1)`, where
//!   `t` is the smaller of the REQ's `RemoteCMResponseTimeout` and our `cm_response_timeout`,
//!   and `r` the smaller of its `MaxCMRetries` and our `max_cm_retries`: with the defaults (20,
//!   15) 2 × 4096 ms × 16 ≈ 131 s — however long the REQ asks (31 and 15 would be 2^23 ms × 16,
//!   about 74 h, twice over). Linux's CM puts no timer on a passive REQ at all
//!   (`cm_req_handler` leaves it in REQ_RCVD / MRA_REQ_SENT until the consumer answers); what
//!   bounds it there is the listener's backlog (`ucma_connect_event_handler`:
//!   `atomic_add_unless(&listen_ctx->backlog, -1, 0)`, else `-ENOMEM` and the new ID is
//!   destroyed) — it refuses newcomers when full, which is what we no longer do.
//! - After our REP, the retransmission timer and count are capped the same way (Linux takes
//!   the REQ's `LocalCMResponseTimeout` and `MaxCMRetries` as they are).
//! - An MRA extends the wait for an answer once per message sent (as Linux's `cm_mra_handler`
//!   takes one MRA in REQ_SENT / REP_SENT and ignores the next in MRA_REQ_RCVD /
//!   MRA_REP_RCVD), by at most [`MRA_MAX_SERVICE_TIMEOUT`] plus the ACK timeout.
//! - When the table is full, a new connection (a REQ, or our own [`Cm::connect`]) first takes
//!   the slot of a connection in time-wait, else evicts the oldest half-open one a peer
//!   started (REQ received or REP sent, not yet established; a REQ our caller has not
//!   accepted before one it has): as a TCP stack without SYN cookies drops its oldest
//!   embryonic connection rather than refuse every newcomer. The evicted peer is sent REJ 3
//!   "no resources" (when its next hop is known) and the caller hears
//!   [`CmEvent::Unreachable`]; [`Cm::evicted`] counts them. Established connections and our
//!   own connection attempts are never evicted; with only those in the table a REQ is refused
//!   with REJ 3 as before.
//! - A MAD for which no GSI send slot is free (a burst of MADs that each want an answer), or
//!   no next hop is known (an answer to a node never learnt — [`Cm::learn`] — nor connected
//!   with, such as one whose source address a peer spoofed), is not sent but counted in
//!   [`Cm::unsent`]: an answer to an unsolicited MAD is simply dropped (the peer retransmits,
//!   or gives up, as after a loss on the wire), and a message of our own handshake is left to
//!   its retransmission timer. It is never an error of [`Cm::poll`].
//! - Events wait in a queue of [`MAX_CONNS`]: [`Cm::poll`] takes in a MAD only while the
//!   queue has room for what it may raise, so that a storm of MADs delays the others (they
//!   wait in QP1's receive queue, and beyond it are lost as on the wire) instead of pushing
//!   out an event of a connection we have.

use super::conn::{Cm, CmConfig, CmEvent, CmId, State, MAX_CONNS};
use super::gsi::MadAddr;
use super::mad::{self, attr, ids, msg, reason, rej, Mad};
use crate::error::{Error, Result};
use crate::io::platform::Platform;

/// The longest MRA service timeout we wait out (code 24: 2^16 ms ≈ 68.7 s — what rdma_cm
/// itself sends, `CMA_CM_MRA_SETTING`), unless our own CM response timeout is longer.
pub(crate) const MRA_MAX_SERVICE_TIMEOUT: u8 = 24;

/// A CM response timeout code a peer named, capped at ours.
pub(crate) fn cap_timeout(cfg: &CmConfig, t: u64) -> u8 {
    (t.min(31) as u8).min(cfg.cm_response_timeout)
}

/// A CM retry count a peer named, capped at ours.
pub(crate) fn cap_retries(cfg: &CmConfig, r: u64) -> u8 {
    (r.min(15) as u8).min(cfg.max_cm_retries)
}

/// How long a REQ we took waits for our accept or reject, in ms, given the REQ's
/// `RemoteCMResponseTimeout` and `MaxCMRetries`: until the active side has surely given up on
/// it (twice its response timeout over every try), both capped at ours.
pub fn req_wait_ms(cfg: &CmConfig, remote_timeout: u64, retries: u64) -> u64 {
    let t = mad::timeout_ms(cap_timeout(cfg, remote_timeout));
    2 * t * (u64::from(cap_retries(cfg, retries)) + 1)
}

/// How much longer an MRA with `service_timeout` lets us wait for an answer, in ms (the
/// connection's ACK timeout code `ack_timeout` added, as Linux adds the path's).
pub(crate) fn mra_wait_ms(cfg: &CmConfig, service_timeout: u64, ack_timeout: u8) -> u64 {
    let cap = MRA_MAX_SERVICE_TIMEOUT.max(cfg.cm_response_timeout);
    let t = (service_timeout.min(31) as u8).min(cap);
    mad::timeout_ms(t) + mad::timeout_ms(ack_timeout.min(cap))
}

impl<P: Platform> Cm<'_, P> {
    /// Sends `m` to `to`; `Ok(false)` when it was not sent: no next hop known, or every GSI
    /// send slot in flight (either counted in [`Cm::unsent`]). Other errors are the device's.
    pub(super) fn send_mad(&mut self, to: &MadAddr, m: &Mad) -> Result<bool> {
        let Some(to) = self.next_hop(*to) else {
            self.unsent += 1;
            log::debug!("CM: no next hop for {:02x?}; MAD not sent", &to.gid[10..]);
            return Ok(false);
        };
        match self.gsi.send(&to, m) {
            Ok(()) => Ok(true),
            Err(Error::QueueFull { .. }) => {
                self.unsent += 1;
                log::debug!(
                    "CM: every GSI send slot in flight; MAD {:#x} not sent",
                    m.attr_id()
                );
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// `to` with its next hop: its own, or (a passive connection before accept) one learnt.
    pub(super) fn next_hop(&self, to: MadAddr) -> Option<MadAddr> {
        if to.mac != [0; 6] {
            return Some(to);
        }
        let mac = self.neighbours.iter().find(|n| n.0 == to.gid)?.1;
        Some(MadAddr { mac, ..to })
    }

    /// Whether the event queue has room for `n` more.
    pub(super) fn room_for_events(&self, n: usize) -> bool {
        self.events.capacity() - self.events.len() >= n
    }

    /// Queues an event for [`Cm::poll`] (counted in [`Cm::events_lost`] if the queue is full).
    pub(super) fn event(&mut self, e: CmEvent) {
        if self.events.push_back(e).is_err() {
            self.events_lost += 1;
            log::warn!("CM event queue full; {e:?} lost");
        }
    }

    /// Makes room for one more connection: a connection in time-wait goes early, else the
    /// oldest half-open one a peer started is evicted (module documentation); with neither,
    /// [`Error::Capacity`].
    pub(super) fn free_slot(&mut self) -> Result<()> {
        if !self.conns.is_full() {
            return Ok(());
        }
        if let Some(i) = self.conns.iter().position(|c| c.state == State::TimeWait) {
            self.conns.swap_remove(i);
            return Ok(());
        }
        let victim = self
            .conns
            .iter()
            .enumerate()
            .filter(|(_, c)| matches!(c.state, State::ReqRcvd | State::RepSent))
            // A REQ not yet accepted goes before one our caller accepted (its QP committed,
            // its RTU a round trip away): a storm of REQs evicts its own first.
            .min_by_key(|(_, c)| (c.state == State::RepSent, c.born))
            .map(|(i, _)| i);
        let Some(i) = victim else {
            return Err(Error::Capacity {
                what: "CM connections",
                limit: MAX_CONNS,
            });
        };
        let c = self.conns.swap_remove(i);
        log::warn!(
            "CM {:#x}: table full, the oldest half-open connection evicted ({})",
            c.local_id,
            c.waiting_for
        );
        self.evicted += 1;
        let mut j = Mad::cm(attr::REJ, c.tid);
        j.set(ids::REMOTE_COMM_ID, u64::from(c.remote_id));
        if c.state == State::RepSent {
            // As Linux's cm_format_rej words it after a REP: our ID, "other".
            j.set(ids::LOCAL_COMM_ID, u64::from(c.local_id));
            j.set(rej::MESSAGE_REJECTED, msg::OTHER);
        } else {
            j.set(rej::MESSAGE_REJECTED, msg::REQ);
        }
        j.set(rej::REASON, u64::from(reason::NO_RESOURCES));
        self.send_mad(&c.to, &j)?;
        self.event(CmEvent::Unreachable {
            id: CmId(c.local_id),
            waiting_for: c.waiting_for,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_asks_for_at_most_what_we_would_ask_of_it() {
        let cfg = CmConfig::default();
        // rdma_cm's own REQ (timeouts 20, 15 retries): 2 × 4096 ms × 16.
        assert_eq!(req_wait_ms(&cfg, 20, 15), 131_072);
        // The longest the fields can say (2^23 ms, 15 retries: about 74 h twice) is cut there.
        assert_eq!(req_wait_ms(&cfg, 31, 15), 131_072);
        // Shorter asks are taken as they are.
        assert_eq!(req_wait_ms(&cfg, 12, 2), 2 * 16 * 3);
        let fast = CmConfig {
            cm_response_timeout: 12,
            max_cm_retries: 5,
            ..cfg
        };
        assert_eq!(req_wait_ms(&fast, 31, 15), 2 * 16 * 6);
        assert_eq!((cap_timeout(&fast, 31), cap_retries(&fast, 15)), (12, 5));
        // An MRA: at most rdma_cm's own 24 (2^16 ms) plus the ACK timeout, itself capped.
        assert_eq!(mra_wait_ms(&cfg, 31, 18), 65_536 + 1_024);
        assert_eq!(mra_wait_ms(&cfg, 31, 31), 2 * 65_536);
        assert_eq!(mra_wait_ms(&cfg, 20, 18), 4_096 + 1_024);
    }
}
