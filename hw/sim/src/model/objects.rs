//! The firmware object table: every live object by kind and handle, with its reference count.
//!
//! Handles are allocated from a per-kind range with a rotating cursor (the next free handle
//! after the last one handed out), so a freed handle is not reused at once and a driver that
//! keeps using a stale handle gets BAD_RES instead of someone else's object. SRQs and RMPs share
//! one number space (a QP names either with `srqn_rmpn_xrqn`).
//!
//! An object that another one uses (the EQ of a CQ, the CQs / SRQ / PD / UAR of a QP...) is held:
//! its reference count is raised when the user is created and dropped when it is destroyed. The
//! holder remembers what it holds ([`Queue::holds`]).

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;

/// The kinds of firmware objects the device tracks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ObjectKind {
    /// A UAR page (ALLOC_UAR).
    Uar,
    /// A protection domain (ALLOC_PD).
    Pd,
    /// An event queue (CREATE_EQ).
    Eq,
    /// A completion queue (CREATE_CQ).
    Cq,
    /// A shared receive queue (CREATE_SRQ, ISSI 0).
    Srq,
    /// A receive memory pool, the SRQ of ISSI ≥ 1 (CREATE_RMP).
    Rmp,
    /// A queue pair (CREATE_QP).
    Qp,
    /// A memory key (CREATE_MKEY); its handle is the mkey index (the key without its variant
    /// byte).
    Mkey,
    /// A transport domain (ALLOC_TRANSPORT_DOMAIN).
    TransportDomain,
    /// A transport interface send object (CREATE_TIS).
    Tis,
    /// A transport interface receive object (CREATE_TIR).
    Tir,
    /// An RQ table (CREATE_RQT).
    Rqt,
    /// An Ethernet receive queue (CREATE_RQ).
    Rq,
    /// An Ethernet send queue (CREATE_SQ).
    Sq,
    /// A queue counter set (ALLOC_Q_COUNTER).
    QCounter,
    /// A flow table (CREATE_FLOW_TABLE).
    FlowTable,
    /// A flow group (CREATE_FLOW_GROUP).
    FlowGroup,
    /// A flow table entry (SET_FLOW_TABLE_ENTRY); its handle is the simulator's own.
    FlowEntry,
    /// An XRC domain (ALLOC_XRCD).
    Xrcd,
    /// An XRC SRQ (CREATE_XRC_SRQ), numbered with the SRQs and RMPs.
    XrcSrq,
    /// A user context (CREATE_UCTX, DevX); its handle is its uid.
    Uctx,
    /// User memory registered for DevX objects (CREATE_UMEM).
    Umem,
    /// A DC target (CREATE_DCT), numbered with the QPs (a BTH names either).
    Dct,
    /// A flow counter (ALLOC_FLOW_COUNTER); its context is its packets and octets (BE64 each).
    FlowCounter,
    /// A packet reformat context (ALLOC_PACKET_REFORMAT_CONTEXT); its context is the command's.
    PacketReformat,
    /// A modify header context (ALLOC_MODIFY_HEADER_CONTEXT); its context is the table type
    /// byte, then the actions (8 bytes each).
    ModifyHeader,
    /// A SW ICM range (CREATE_GENERAL_OBJECT, `obj_type` SW_ICM): software steering's memory.
    SwIcm,
    /// A flow sampler (CREATE_GENERAL_OBJECT, `obj_type` FLOW_SAMPLER); its context is the
    /// `flow_sampler` it was created with.
    FlowSampler,
}

/// The uid of resources shared by every user context (Linux's `MLX5_SHARED_RESOURCE_UID`):
/// completion EQs, Q counters, shared packet pacing entries.
pub(crate) const SHARED_UID: u16 = 0xffff;

/// What the device keeps about a queue object (EQ, CQ, SRQ, RMP, QP).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Queue {
    /// The context image as the firmware holds it (eqc, cqc, srqc, rmpc without its PAS, qpc).
    pub(crate) ctx: Vec<u8>,
    /// The buffer pages (IOVAs), in queue order (shared: the data path takes it per operation
    /// without copying it).
    pub(crate) pas: std::sync::Arc<[u64]>,
    /// The UAR page the object's doorbells must target, if it has one.
    pub(crate) uar: Option<u32>,
    /// Armed for an event (EQ) or a completion event (CQ).
    pub(crate) armed: bool,
    /// EQ: the 256-bit `event_bitmask` as given (zero for other kinds).
    pub(crate) event_bitmask: [u8; 32],
    /// The objects this one holds a reference on (released when it is destroyed).
    pub(crate) holds: Vec<(ObjectKind, u32)>,
}

/// What the device keeps about one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Object {
    /// A UAR page.
    Uar,
    /// A protection domain.
    Pd,
    /// A queue object.
    Queue(Box<Queue>),
    /// A memory key.
    Mkey(Box<super::mkey::Mkey>),
    /// A user context (its uid is its handle).
    Uctx,
    /// Registered user memory.
    Umem(Box<Umem>),
    /// A SW ICM object: `size` bytes of ICM at `start` ([`super::icm`]).
    SwIcm { start: u64, size: u64 },
}

/// A registered umem: its pages (IOVAs), their size, and where the region starts in the first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Umem {
    pub(crate) pages: std::sync::Arc<[u64]>,
    pub(crate) page: u64,
    pub(crate) offset: u64,
}

impl Umem {
    /// The IOVA of byte `at` of the region, if it lies in it.
    pub(crate) fn iova(&self, at: u64) -> Option<u64> {
        let at = at.checked_add(self.offset)?;
        let page = *self.pages.get(usize::try_from(at / self.page).ok()?)?;
        Some(page + at % self.page)
    }

    /// Bytes of the region.
    pub(crate) fn len(&self) -> u64 {
        (self.pages.len() as u64 * self.page).saturating_sub(self.offset)
    }
}

#[derive(Debug)]
struct Slot {
    obj: Object,
    refs: u32,
    /// The uid of the command that made it (0: the kernel's; [`SHARED_UID`]; a user context's).
    uid: u16,
}

#[derive(Debug, Default)]
struct Table {
    live: BTreeMap<u32, Slot>,
    cursor: u32,
}

/// Every live object.
#[derive(Debug, Default)]
pub(crate) struct ObjectTable {
    tables: BTreeMap<ObjectKind, Table>,
    /// Translation entries the live mkeys hold (MTT entries and KSM entries), against
    /// [`TRANSLATION_BUDGET`].
    translations: u64,
    /// The uid of the command running (0 between commands): what an object made now is owned
    /// by, and who may change or destroy one ([`ObjectTable::may_change`]).
    pub(crate) actor: u16,
}

/// The most translation entries the simulator keeps for all of a device's mkeys together
/// (16 Mi: 128 MiB of MTT entries): a driver — a guest — that would make it hold more through
/// UMR WQEs is refused (the WQE fails with LOCAL_LENGTH_ERR). Linux's largest tables are an
/// implicit ODP child's 2^18 entries.
pub(crate) const TRANSLATION_BUDGET: u64 = 1 << 24;

impl ObjectTable {
    /// Allocates a handle in `first..end` for `obj`; `None` when the range is full.
    pub(crate) fn alloc(
        &mut self,
        kind: ObjectKind,
        first: u32,
        end: u32,
        obj: Object,
    ) -> Option<u32> {
        self.alloc_shared(kind, &[], first, end, obj)
    }

    /// Like [`ObjectTable::alloc`], with a handle that is also not live in any of `shared`.
    pub(crate) fn alloc_shared(
        &mut self,
        kind: ObjectKind,
        shared: &[ObjectKind],
        first: u32,
        end: u32,
        obj: Object,
    ) -> Option<u32> {
        let span = end.checked_sub(first).filter(|&s| s > 0)?;
        let held = match &obj {
            Object::Mkey(m) => m.translations(),
            _ => 0,
        };
        let taken = |tables: &BTreeMap<ObjectKind, Table>, id: u32| {
            shared
                .iter()
                .any(|k| tables.get(k).is_some_and(|t| t.live.contains_key(&id)))
        };
        let cursor = self.tables.get(&kind).map_or(first, |t| t.cursor);
        let mut id = if (first..end).contains(&cursor) {
            cursor
        } else {
            first
        };
        for _ in 0..span {
            if !taken(&self.tables, id) {
                let t = self.tables.entry(kind).or_default();
                if let Entry::Vacant(slot) = t.live.entry(id) {
                    slot.insert(Slot {
                        obj,
                        refs: 0,
                        uid: self.actor,
                    });
                    self.translations += held;
                    t.cursor = id.wrapping_add(1);
                    return Some(id);
                }
            }
            id = if id + 1 >= end { first } else { id + 1 };
        }
        None
    }

    /// Frees `id` whatever its reference count; `false` if it is not a live object of `kind`.
    #[cfg(test)]
    fn free(&mut self, kind: ObjectKind, id: u32) -> bool {
        self.remove(kind, id).is_some()
    }

    /// The uid that owns object `id` of `kind`, if it is live.
    pub(crate) fn uid_of(&self, kind: ObjectKind, id: u32) -> Option<u16> {
        self.tables
            .get(&kind)
            .and_then(|t| t.live.get(&id))
            .map(|s| s.uid)
    }

    /// Whether the command running may change or destroy object `id` of `kind`: a command of
    /// uid 0 (the kernel's) any; one of another uid only its own (the firmware keeps user
    /// contexts apart by uid: to it, another context's object is not there). Queries and the
    /// references a new object makes are not limited: Linux queries user objects with uid 0
    /// and makes user objects that point at kernel and shared ones.
    pub(crate) fn may_change(&self, kind: ObjectKind, id: u32) -> bool {
        self.actor == 0 || self.uid_of(kind, id) == Some(self.actor)
    }

    /// Live objects owned by `uid`.
    pub(crate) fn owned_by(&self, uid: u16) -> usize {
        self.tables
            .values()
            .map(|t| t.live.values().filter(|s| s.uid == uid).count())
            .sum()
    }

    /// Removes `id` and returns it (only through [`super::Model::remove`], which also forgets its
    /// runtime); `None` if it is not live or the command running may not destroy it.
    pub(super) fn remove(&mut self, kind: ObjectKind, id: u32) -> Option<Object> {
        if !self.may_change(kind, id) {
            return None;
        }
        let o = self
            .tables
            .get_mut(&kind)
            .and_then(|t| t.live.remove(&id))
            .map(|s| s.obj);
        if let Some(Object::Mkey(m)) = &o {
            self.translations = self.translations.saturating_sub(m.translations());
        }
        o
    }

    /// Translation entries the live mkeys hold.
    pub(crate) fn translations(&self) -> u64 {
        self.translations
    }

    /// Mkey `index`'s table changed from `before` entries to what it holds now.
    pub(crate) fn translations_changed(&mut self, index: u32, before: u64) {
        let now = self.mkey(index).map_or(0, |m| m.translations());
        self.translations = (self.translations + now).saturating_sub(before);
    }

    /// The object `id` of `kind`, if live.
    pub(crate) fn get(&self, kind: ObjectKind, id: u32) -> Option<&Object> {
        self.tables
            .get(&kind)
            .and_then(|t| t.live.get(&id))
            .map(|s| &s.obj)
    }

    /// Whether `id` is a live object of `kind`.
    pub(crate) fn contains(&self, kind: ObjectKind, id: u32) -> bool {
        self.get(kind, id).is_some()
    }

    /// The queue object `id` of `kind`, if live.
    pub(crate) fn queue(&self, kind: ObjectKind, id: u32) -> Option<&Queue> {
        match self.get(kind, id) {
            Some(Object::Queue(q)) => Some(q),
            _ => None,
        }
    }

    /// The memory key with index `index`, if live.
    pub(crate) fn mkey(&self, index: u32) -> Option<&super::mkey::Mkey> {
        match self.get(ObjectKind::Mkey, index) {
            Some(Object::Mkey(m)) => Some(m),
            _ => None,
        }
    }

    /// Every live memory key.
    pub(crate) fn mkeys(&self) -> impl Iterator<Item = &super::mkey::Mkey> {
        self.tables
            .get(&ObjectKind::Mkey)
            .into_iter()
            .flat_map(|t| t.live.values())
            .filter_map(|s| match &s.obj {
                Object::Mkey(m) => Some(&**m),
                _ => None,
            })
    }

    /// The memory key with index `index`, if live, writable.
    pub(crate) fn mkey_mut(&mut self, index: u32) -> Option<&mut super::mkey::Mkey> {
        match self
            .tables
            .get_mut(&ObjectKind::Mkey)
            .and_then(|t| t.live.get_mut(&index))
            .map(|s| &mut s.obj)
        {
            Some(Object::Mkey(m)) => Some(m),
            _ => None,
        }
    }

    /// Every live queue object of `kind` with its handle.
    pub(crate) fn queues(&self, kind: ObjectKind) -> Vec<u32> {
        self.tables
            .get(&kind)
            .map(|t| t.live.keys().copied().collect())
            .unwrap_or_default()
    }

    /// The queue object `id` of `kind`, writable.
    pub(crate) fn queue_mut(&mut self, kind: ObjectKind, id: u32) -> Option<&mut Queue> {
        match self
            .tables
            .get_mut(&kind)
            .and_then(|t| t.live.get_mut(&id))
            .map(|s| &mut s.obj)
        {
            Some(Object::Queue(q)) => Some(q),
            _ => None,
        }
    }

    /// How many objects of `kind` are live.
    pub(crate) fn count(&self, kind: ObjectKind) -> usize {
        self.tables.get(&kind).map_or(0, |t| t.live.len())
    }

    /// How many holders `id` has (0 if it is not live).
    pub(crate) fn refs(&self, kind: ObjectKind, id: u32) -> u32 {
        self.tables
            .get(&kind)
            .and_then(|t| t.live.get(&id))
            .map_or(0, |s| s.refs)
    }

    /// Raises the reference count of every object in `held`.
    pub(crate) fn hold(&mut self, held: &[(ObjectKind, u32)]) {
        for &(kind, id) in held {
            if let Some(s) = self.tables.get_mut(&kind).and_then(|t| t.live.get_mut(&id)) {
                s.refs += 1;
            }
        }
    }

    /// Drops the reference count of every object in `held`.
    pub(crate) fn release(&mut self, held: &[(ObjectKind, u32)]) {
        for &(kind, id) in held {
            if let Some(s) = self.tables.get_mut(&kind).and_then(|t| t.live.get_mut(&id)) {
                s.refs = s.refs.saturating_sub(1);
            }
        }
    }

    /// Every live object, by kind then handle.
    pub(crate) fn live(&self) -> Vec<(ObjectKind, u32)> {
        self.tables
            .iter()
            .flat_map(|(&k, t)| t.live.keys().map(move |&id| (k, id)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_rotate_and_exhaust() {
        let mut t = ObjectTable::default();
        assert_eq!(t.alloc(ObjectKind::Pd, 1, 4, Object::Pd), Some(1));
        assert_eq!(t.alloc(ObjectKind::Pd, 1, 4, Object::Pd), Some(2));
        assert!(t.free(ObjectKind::Pd, 1));
        assert_eq!(t.alloc(ObjectKind::Pd, 1, 4, Object::Pd), Some(3));
        assert_eq!(t.alloc(ObjectKind::Pd, 1, 4, Object::Pd), Some(1));
        assert_eq!(t.alloc(ObjectKind::Pd, 1, 4, Object::Pd), None);
        assert!(!t.free(ObjectKind::Uar, 1));
        assert_eq!(
            t.live(),
            vec![
                (ObjectKind::Pd, 1),
                (ObjectKind::Pd, 2),
                (ObjectKind::Pd, 3)
            ]
        );
        assert_eq!(t.alloc(ObjectKind::Uar, 5, 5, Object::Uar), None);
    }

    #[test]
    fn shared_number_spaces_and_references() {
        let mut t = ObjectTable::default();
        assert_eq!(t.alloc(ObjectKind::Srq, 1, 4, Object::Pd), Some(1));
        let rmp = t.alloc_shared(ObjectKind::Rmp, &[ObjectKind::Srq], 1, 4, Object::Pd);
        assert_eq!(rmp, Some(2));
        assert_eq!(t.count(ObjectKind::Rmp), 1);
        t.hold(&[
            (ObjectKind::Srq, 1),
            (ObjectKind::Srq, 1),
            (ObjectKind::Pd, 9),
        ]);
        assert_eq!(t.refs(ObjectKind::Srq, 1), 2);
        t.release(&[(ObjectKind::Srq, 1)]);
        assert_eq!(t.refs(ObjectKind::Srq, 1), 1);
        assert!(t.queue(ObjectKind::Srq, 1).is_none());
    }
}
