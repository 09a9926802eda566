//! The Dynamically Connected transport's state beyond the contexts: a DCI's current
//! destination ([`DciPeer`], in its runtime), the connections a DCT holds — one per initiator
//! (a peer's DCI) that reached it, each with the responder runtime an RC QP would have — and the
//! DCTs armed for, or drained towards, an event.
//!
//! A DCT holds at most [`MAX_CONNECTIONS`] connections for the whole device, and one idle for
//! [`IDLE_NS`] of device time is forgotten when room is needed: a remote initiator can make the
//! device hold no more than that. The connection's runtime lives in [`super::runtime::Runtime`]
//! under a key above every QP number ([`KEY_BASE`]), so the responder code an RC QP runs serves
//! it unchanged.

use std::collections::BTreeMap;

/// The most DCT connections the device holds at once (all DCTs together).
pub(crate) const MAX_CONNECTIONS: usize = 1024;
/// A connection idle this long (device time) may be forgotten when room is needed: 100 ms,
/// far beyond an initiator's retransmission of a message it has not finished.
pub(crate) const IDLE_NS: u64 = 100_000_000;
/// The runtime keys of DCT connections: `KEY_BASE..KEY_BASE + 2^24`, beyond the 24-bit QP
/// numbers.
pub(crate) const KEY_BASE: u32 = 1 << 24;

/// A DCI's destination: the DCT it is connected to, where, and the PSN its connection started
/// at (the packet that carries the connect flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DciPeer {
    pub(crate) dgid: [u8; 16],
    pub(crate) dctn: u32,
    pub(crate) first_psn: u32,
}

/// Who a DCT connection serves: the DCT, the initiator's GID and its DCI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct ConnId {
    pub(crate) dctn: u32,
    pub(crate) sgid: [u8; 16],
    pub(crate) dci: u32,
}

#[derive(Debug, Clone, Copy)]
struct Conn {
    key: u32,
    first_psn: u32,
    used: u64,
}

/// DC state of the device.
#[derive(Debug, Default)]
pub(crate) struct Dc {
    conns: BTreeMap<ConnId, Conn>,
    next_key: u32,
    /// DCTs armed for one DCT_KEY_VIOLATION event (ARM_DCT_FOR_KEY_VIOLATION).
    pub(crate) armed: std::collections::BTreeSet<u32>,
    /// DCTs DRAIN_DCT moved to DRAINING whose DCT_DRAINED event is due after the command.
    pub(crate) draining: Vec<u32>,
}

/// What [`Dc::connect`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// The connection, as it was: its runtime key.
    Existing(u32),
    /// A connection started now (its runtime starts at the packet's PSN): its key.
    New(u32),
    /// No connection and the packet does not start one.
    None,
}

impl Dc {
    /// The connection of `id` for a packet with PSN `psn` (`connect`: the packet carries the
    /// connect flag) at device time `now`. A connect packet with the PSN the connection started
    /// at is a retransmission of its start (the connection as it is); with another PSN it
    /// starts the connection again. `forget` is called with the runtime key of every
    /// connection dropped to make room or restarted.
    pub(crate) fn connect(
        &mut self,
        id: ConnId,
        psn: u32,
        connect: bool,
        now: u64,
        forget: &mut dyn FnMut(u32),
    ) -> Found {
        if let Some(c) = self.conns.get_mut(&id) {
            if !connect || c.first_psn == psn {
                c.used = now;
                return Found::Existing(c.key);
            }
            // The initiator connected again (another message stream): a fresh runtime.
            forget(c.key);
            c.first_psn = psn;
            c.used = now;
            return Found::New(c.key);
        }
        if !connect {
            return Found::None;
        }
        if self.conns.len() >= MAX_CONNECTIONS && !self.evict(now, forget) {
            return Found::None;
        }
        let Some(key) = self.free_key() else {
            return Found::None;
        };
        self.conns.insert(
            id,
            Conn {
                key,
                first_psn: psn,
                used: now,
            },
        );
        Found::New(key)
    }

    /// Drops the least recently used connection if it has been idle [`IDLE_NS`].
    fn evict(&mut self, now: u64, forget: &mut dyn FnMut(u32)) -> bool {
        let Some((&id, c)) = self.conns.iter().min_by_key(|(_, c)| c.used) else {
            return false;
        };
        if now.saturating_sub(c.used) < IDLE_NS {
            return false;
        }
        forget(c.key);
        self.conns.remove(&id);
        true
    }

    fn free_key(&mut self) -> Option<u32> {
        for _ in 0..=MAX_CONNECTIONS {
            let key = KEY_BASE + (self.next_key & 0xff_ffff);
            self.next_key = self.next_key.wrapping_add(1);
            if !self.conns.values().any(|c| c.key == key) {
                return Some(key);
            }
        }
        None
    }

    /// Closes every connection of DCT `dctn` (drained or destroyed); `forget` gets their keys.
    pub(crate) fn close(&mut self, dctn: u32, forget: &mut dyn FnMut(u32)) {
        self.conns.retain(|id, c| {
            let keep = id.dctn != dctn;
            if !keep {
                forget(c.key);
            }
            keep
        });
    }

    /// The connections held now.
    pub(crate) fn connections(&self) -> usize {
        self.conns.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(dci: u32) -> ConnId {
        ConnId {
            dctn: 0x200,
            sgid: [1; 16],
            dci,
        }
    }

    #[test]
    fn connections_start_restart_and_stay_bounded() {
        let mut dc = Dc::default();
        let mut gone = Vec::new();
        let mut f = |k| gone.push(k);
        assert_eq!(dc.connect(id(1), 10, false, 0, &mut f), Found::None);
        let Found::New(k) = dc.connect(id(1), 10, true, 0, &mut f) else {
            panic!("no connection")
        };
        assert!(k >= KEY_BASE);
        assert_eq!(dc.connect(id(1), 11, false, 1, &mut f), Found::Existing(k));
        // The connect packet again (a retransmission): the same connection.
        assert_eq!(dc.connect(id(1), 10, true, 2, &mut f), Found::Existing(k));
        // A new connect: the runtime starts again.
        assert_eq!(dc.connect(id(1), 40, true, 3, &mut f), Found::New(k));
        assert_eq!(gone, vec![k]);
        // Full: nobody idle long enough, no room; then the oldest idle one goes.
        for n in 2..=MAX_CONNECTIONS as u32 {
            assert!(matches!(
                dc.connect(id(n), 0, true, 5, &mut |_| {}),
                Found::New(_)
            ));
        }
        let extra = id(MAX_CONNECTIONS as u32 + 1);
        assert_eq!(dc.connect(extra, 0, true, 6, &mut |_| {}), Found::None);
        let mut evicted = Vec::new();
        let r = dc.connect(extra, 0, true, IDLE_NS + 4, &mut |k| evicted.push(k));
        assert!(matches!(r, Found::New(_)));
        assert_eq!(evicted, vec![k], "the least recently used connection");
        assert_eq!(dc.connections(), MAX_CONNECTIONS);
        let mut closed = 0;
        dc.close(0x200, &mut |_| closed += 1);
        assert_eq!((closed, dc.connections()), (MAX_CONNECTIONS, 0));
    }
}
