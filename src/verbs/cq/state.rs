//! What a CQ knows of the queues completing on it, and the state polling changes (under the
//! CQ's lock).

use crate::error::{Error, Result};
use crate::io::platform::Platform;
use crate::io::{SharedTable, Slots};

/// The receive side of an attached QP.
#[derive(Debug)]
pub(crate) enum RecvTable {
    /// The QP's own RQ with `cnt` WQEs.
    Rq {
        /// Table.
        table: SharedTable,
        /// WQEs in the RQ.
        cnt: u32,
    },
    /// An SRQ with `cnt` WQEs.
    Srq {
        /// Table.
        table: SharedTable,
        /// WQEs in the SRQ.
        cnt: u32,
    },
    /// A striding (multi-packet) Ethernet RQ with `cnt` WQEs of `2^log_strides` strides of
    /// `2^log_stride` bytes each; its table holds the strides used of the WQE at TAIL
    /// ([`rq_table::used`](crate::verbs::wr_table::rq_table::used)).
    Striding {
        /// Table.
        table: SharedTable,
        /// WQEs in the RQ.
        cnt: u32,
        /// log2 of a stride's bytes.
        log_stride: u32,
        /// log2 of the strides of a WQE.
        log_strides: u32,
    },
}

/// One QP attached to a CQ.
#[derive(Debug)]
pub(crate) struct Attached {
    /// QP number.
    pub qpn: u32,
    /// Send queue table and its WQEBBs, when this CQ is the QP's send CQ.
    pub sq: Option<(SharedTable, u32)>,
    /// Receive table, when this CQ is the QP's receive CQ.
    pub rq: Option<RecvTable>,
    /// An Ethernet RQ: its receive CQEs carry the flow tag where a QP's carry the QPN, so the
    /// CQ serves no other receive queue and its receive CQEs are this queue's.
    pub flow_tag_rq: bool,
}

impl Attached {
    /// Gives back the handles to the QP's tables (host memory; the last handle frees it).
    pub(crate) fn release<P: Platform + ?Sized>(self, p: &P) {
        if let Some((t, _)) = self.sq {
            t.release(p);
        }
        if let Some(
            RecvTable::Rq { table, .. }
            | RecvTable::Srq { table, .. }
            | RecvTable::Striding { table, .. },
        ) = self.rq
        {
            table.release(p);
        }
    }
}

/// The CQ state polling changes.
#[derive(Debug, Default)]
pub(crate) struct CqShared {
    pub(crate) ci: u32,
    pub(crate) arm_sn: u32,
    /// Slot in `queues` of the queue the last CQE named (a hint; checked before use).
    pub(crate) hint: usize,
    /// The Ethernet RQ attached (its receive CQEs do not name it), if any.
    pub(crate) flow_tag_rq: Option<u32>,
    pub(crate) queues: QueueMap,
    /// A CQ made to compress: its mini CQE format and largest session.
    pub(crate) compression: Option<super::zip::Compression>,
    /// The compressed session being given out, across polls.
    pub(crate) session: Option<super::zip::Session>,
}

/// The queues attached to a CQ by number: an open-addressing table (linear probing, kept at
/// most half full, grown by doubling on attach), so a CQE finds its queue in constant time
/// however many queues share the CQ. Its memory is host memory from the platform.
#[derive(Debug)]
pub(crate) struct QueueMap {
    slots: Slots<Attached>,
    len: usize,
    /// Attached queues with a receive side.
    with_rq: usize,
}

impl Default for QueueMap {
    fn default() -> Self {
        Self {
            slots: Slots::empty(),
            len: 0,
            with_rq: 0,
        }
    }
}

/// Slots of the first table (grown as queues attach).
const FIRST_SLOTS: usize = 16;

impl QueueMap {
    /// Queues attached.
    #[cfg(all(test, feature = "std"))]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether a queue with a receive side is attached.
    pub(crate) fn any_rq(&self) -> bool {
        self.with_rq > 0
    }

    #[inline(always)]
    fn home(&self, qpn: u32) -> usize {
        // Fibonacci hashing of the 24-bit number over a power-of-two table.
        let h = u64::from(qpn).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let bits = self.slots.len().trailing_zeros();
        if bits == 0 {
            0
        } else {
            (h >> (64 - bits)) as usize
        }
    }

    /// The slot of queue `qpn`.
    #[inline(always)]
    fn slot_of(&self, qpn: u32) -> Option<usize> {
        let n = self.slots.len();
        if n == 0 {
            return None;
        }
        let mut i = self.home(qpn);
        // At most half full: an empty slot ends every probe.
        for _ in 0..n {
            match self.slots.get(i) {
                Some(e) if e.qpn == qpn => return Some(i),
                Some(_) => i = (i + 1) & (n - 1),
                None => return None,
            }
        }
        None
    }

    /// Queue `qpn`; `hint` (a slot, checked) is tried first and updated.
    #[inline(always)]
    pub(crate) fn find(&self, qpn: u32, hint: &mut usize) -> Option<&Attached> {
        if let Some(q) = self.slots.get(*hint).filter(|e| e.qpn == qpn) {
            return Some(q);
        }
        let i = self.slot_of(qpn)?;
        *hint = i;
        self.slots.get(i)
    }

    /// Queue `qpn`.
    pub(crate) fn get(&self, qpn: u32) -> Option<&Attached> {
        self.slots.get(self.slot_of(qpn)?)
    }

    /// Queue `qpn`, mutably.
    pub(crate) fn get_mut(&mut self, qpn: u32) -> Option<&mut Attached> {
        let i = self.slot_of(qpn)?;
        self.slots.get_mut(i)
    }

    /// Adds a queue whose number is not attached yet (the table grows first when it would be
    /// more than half full); on failure the queue's table handles are given back.
    pub(crate) fn insert<P: Platform + ?Sized>(&mut self, p: &P, a: Attached) -> Result<()> {
        if (self.len + 1) * 2 > self.slots.len() {
            if let Err(e) = self.grow(p) {
                a.release(p);
                return Err(e);
            }
        }
        let n = self.slots.len();
        let mut i = self.home(a.qpn);
        while self.slots.get(i).is_some() {
            i = (i + 1) & (n - 1);
        }
        let rq = a.rq.is_some();
        match self.slots.put(i, a) {
            Ok(_) => {
                self.len += 1;
                self.with_rq += usize::from(rq);
                Ok(())
            }
            Err(a) => {
                a.release(p);
                Err(Error::Capacity {
                    what: "queues attached to one CQ",
                    limit: n,
                })
            }
        }
    }

    /// Marks that a queue already attached gained its receive side.
    pub(crate) fn rq_added(&mut self) {
        self.with_rq += 1;
    }

    fn grow<P: Platform + ?Sized>(&mut self, p: &P) -> Result<()> {
        let want = (self.slots.len() * 2).max(FIRST_SLOTS);
        let new = Slots::alloc(p, want).map_err(|source| Error::Platform {
            op: "grow the table of the queues attached to a CQ",
            source,
        })?;
        let old = core::mem::replace(&mut self.slots, new);
        let mut old = old;
        let mask = want - 1;
        for j in 0..old.len() {
            if let Some(a) = old.take(j) {
                let mut i = self.home(a.qpn);
                while self.slots.get(i).is_some() {
                    i = (i + 1) & mask;
                }
                // In range and empty: cannot fail.
                let _ = self.slots.put(i, a);
            }
        }
        old.free(p);
        Ok(())
    }

    /// Removes queue `qpn` (backward-shift deletion keeps every probe chain unbroken).
    pub(crate) fn remove(&mut self, qpn: u32) -> Option<Attached> {
        let mut hole = self.slot_of(qpn)?;
        let out = self.slots.take(hole)?;
        self.len -= 1;
        self.with_rq -= usize::from(out.rq.is_some());
        let mask = self.slots.len() - 1;
        let mut j = (hole + 1) & mask;
        while let Some(e) = self.slots.get(j) {
            let home = self.home(e.qpn);
            // `e` may move into the hole when its home is not cyclically in (hole, j].
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                if let Some(e) = self.slots.take(j) {
                    let _ = self.slots.put(hole, e);
                }
                hole = j;
            }
            j = (j + 1) & mask;
        }
        Some(out)
    }

    /// Empties the table, giving every queue's table handles back, and frees its memory.
    pub(crate) fn clear<P: Platform + ?Sized>(&mut self, p: &P, mut each: impl FnMut(&Attached)) {
        let mut slots = core::mem::replace(&mut self.slots, Slots::empty());
        for j in 0..slots.len() {
            if let Some(a) = slots.take(j) {
                each(&a);
                a.release(p);
            }
        }
        slots.free(p);
        (self.len, self.with_rq) = (0, 0);
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    extern crate std;
    use std::collections::BTreeMap;

    use super::*;
    use crate::io::tests::Heap;

    fn queue(h: &Heap, qpn: u32, rq: bool) -> Attached {
        Attached {
            qpn,
            sq: None,
            rq: rq.then(|| RecvTable::Rq {
                table: SharedTable::alloc(h, 1).expect("host memory"),
                cnt: 1,
            }),
            flow_tag_rq: false,
        }
    }

    /// Inserts and removes in a pseudo-random order against a model: every queue is found at
    /// every step, removed ones never are, and the memory is all given back.
    #[test]
    fn the_map_finds_every_queue_through_growth_and_removal() {
        let h = Heap::default();
        let mut m = QueueMap::default();
        let mut model = BTreeMap::new();
        let mut x = 0x2545_f491_u32;
        let mut step = || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        // Miri runs the crate's unit tests: a smaller run there.
        let (rounds, most) = if cfg!(miri) {
            (300, 80)
        } else {
            (40_000, 12_000)
        };
        for round in 0..rounds {
            // Numbers clustered (consecutive QPNs, as the device hands them out) and scattered.
            let r = step();
            let qpn = if r & 1 == 0 {
                r >> 8 & 0x3fff
            } else {
                r >> 8 & 0xff_ffff
            };
            let remove = round > rounds / 2 && r & 6 == 0 || model.len() > most;
            if remove {
                let k = model
                    .keys()
                    .nth((r as usize >> 3) % model.len().max(1))
                    .copied();
                if let Some(k) = k {
                    let a = m.remove(k).expect("present");
                    assert_eq!(a.qpn, k);
                    assert_eq!(a.rq.is_some(), model.remove(&k).unwrap_or(false));
                    a.release(&h);
                    assert!(m.get(k).is_none());
                }
            } else if let std::collections::btree_map::Entry::Vacant(v) = model.entry(qpn) {
                let rq = r & 0x10 != 0;
                assert!(m.insert(&h, queue(&h, qpn, rq)).is_ok());
                v.insert(rq);
            }
            assert_eq!(m.len(), model.len());
            assert_eq!(m.any_rq(), model.values().any(|&r| r));
            if round % 97 == 0 {
                let mut hint = 0;
                for (&k, &rq) in &model {
                    let a = m.find(k, &mut hint).expect("found");
                    assert_eq!((a.qpn, a.rq.is_some()), (k, rq));
                }
            }
        }
        assert_eq!(m.len(), model.len());
        let mut seen = 0;
        m.clear(&h, |_| seen += 1);
        assert_eq!(seen, model.len());
        assert_eq!(h.host_live(), 0, "slots and tables freed");
    }
}
