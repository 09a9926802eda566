//! The firmware object table: every live object by kind and handle.
//!
//! Handles are allocated from a per-kind range with a rotating cursor (the next free handle
//! after the last one handed out), so a freed handle is not reused at once and a driver that
//! keeps using a stale handle gets BAD_RES instead of someone else's object.

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
}

/// What the device keeps about one object (grows with the object kinds: queue contexts...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Object {
    /// A UAR page.
    Uar,
    /// A protection domain.
    Pd,
}

#[derive(Debug, Default)]
struct Table {
    live: BTreeMap<u32, Object>,
    cursor: u32,
}

/// Every live object.
#[derive(Debug, Default)]
pub(crate) struct ObjectTable {
    tables: BTreeMap<ObjectKind, Table>,
}

impl ObjectTable {
    /// Allocates a handle in `first..end` for `obj`; `None` when the range is full.
    pub(crate) fn alloc(
        &mut self,
        kind: ObjectKind,
        first: u32,
        end: u32,
        obj: Object,
    ) -> Option<u32> {
        let t = self.tables.entry(kind).or_default();
        let span = end.checked_sub(first).filter(|&s| s > 0)?;
        let mut id = if (first..end).contains(&t.cursor) {
            t.cursor
        } else {
            first
        };
        for _ in 0..span {
            if let Entry::Vacant(slot) = t.live.entry(id) {
                slot.insert(obj);
                t.cursor = id.wrapping_add(1);
                return Some(id);
            }
            id = if id + 1 >= end { first } else { id + 1 };
        }
        None
    }

    /// Frees `id`; `false` if it is not a live object of `kind`.
    pub(crate) fn free(&mut self, kind: ObjectKind, id: u32) -> bool {
        self.tables
            .get_mut(&kind)
            .is_some_and(|t| t.live.remove(&id).is_some())
    }

    /// The object `id` of `kind`, if live.
    #[allow(dead_code)]
    pub(crate) fn get(&self, kind: ObjectKind, id: u32) -> Option<&Object> {
        self.tables.get(&kind).and_then(|t| t.live.get(&id))
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
}
