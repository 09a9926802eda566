//! The simulator's own DMA allocations, made and freed without the device's lock.
//!
//! `dma_alloc` and `dma_free` come from any thread at any time — a driver creating objects on
//! two threads allocates while the other thread's command executes. They hand out IOVAs and
//! keep the account here, under a lock of their own (a leaf), and leave the change to the
//! translation table as a staged operation; the device applies the staged operations the next
//! time it takes its lock, before it touches any memory ([`Staged::take`], [`Iommu::apply`]).
//! Nothing is lost by the delay: an IOVA reaches the device only in a command or a doorbell,
//! which the driver sends after `dma_alloc` returned, and the device takes its lock to execute
//! it; a freed allocation is gone from the table before the device's next access.

use std::collections::HashMap;

use super::{Backing, DmaBlock, Iommu, Mapping, Zeroed, IOVA_BASE, IOVA_PAGE, MAX_DMA_BYTES};
use crate::SimError;

/// A change to the translation table, made without the device's lock.
enum Op {
    /// A new allocation at this IOVA.
    Map(u64, Mapping),
    /// The allocation at this IOVA is freed.
    Unmap(u64),
}

/// Changes for [`Iommu::apply`], oldest first.
pub(crate) struct Ops(Vec<Op>);

/// The IOVA allocator, the account of the simulator's own allocations, and the changes the
/// translation table has not seen yet.
pub(crate) struct Staged {
    /// The next IOVA (a bump allocator: freed ranges are never handed out again).
    next: u64,
    /// Bytes allocated and not freed.
    mapped: usize,
    /// Every live allocation: IOVA → length.
    live: HashMap<u64, usize>,
    ops: Vec<Op>,
}

impl Staged {
    pub(crate) fn new() -> Self {
        Self {
            next: IOVA_BASE,
            mapped: 0,
            live: HashMap::new(),
            ops: Vec::new(),
        }
    }

    /// Maps memory [`Zeroed::new`] made at an IOVA aligned to `max(align, 4 KiB)`, with an
    /// unmapped guard page after it.
    pub(crate) fn alloc(&mut self, z: Zeroed) -> Result<DmaBlock, SimError> {
        let Zeroed {
            words,
            host,
            skip,
            len,
            align,
        } = z;
        if len > MAX_DMA_BYTES - self.mapped {
            return Err(SimError::DmaExhausted {
                len,
                mapped: self.mapped,
                limit: MAX_DMA_BYTES,
            });
        }
        let align = (align as u64).max(IOVA_PAGE);
        let iova = self.next.next_multiple_of(align);
        let pages = (len as u64).div_ceil(IOVA_PAGE);
        // One unmapped guard page after every allocation catches overruns into a neighbour.
        self.next = iova + (pages + 1) * IOVA_PAGE;
        self.mapped += len;
        self.live.insert(iova, len);
        self.ops.push(Op::Map(
            iova,
            Mapping {
                len,
                backing: Backing::Owned(words),
                skip,
            },
        ));
        Ok(DmaBlock { iova, len, host })
    }

    /// Frees the allocation starting at `iova`; its length. Only the simulator's own
    /// allocations are known here (external mappings are their owner's).
    pub(crate) fn free(&mut self, iova: u64) -> Result<usize, SimError> {
        let len = self
            .live
            .remove(&iova)
            .ok_or(SimError::DmaUnknownIova { iova })?;
        self.mapped -= len;
        self.ops.push(Op::Unmap(iova));
        Ok(len)
    }

    /// Bytes allocated and not freed.
    pub(crate) fn mapped_bytes(&self) -> usize {
        self.mapped
    }

    /// The changes the translation table has not seen, oldest first.
    pub(crate) fn take(&mut self) -> Ops {
        Ops(std::mem::take(&mut self.ops))
    }
}

impl Iommu {
    /// Applies staged changes in order; the `(iova, len)` of each allocation unmapped, and
    /// their memory, for the caller to drop after it has let go of the device's lock.
    pub(crate) fn apply(&mut self, ops: Ops) -> (Vec<(u64, usize)>, Vec<super::Freed>) {
        let mut gone = Vec::new();
        let mut freed = Vec::new();
        for op in ops.0 {
            match op {
                Op::Map(iova, m) => {
                    self.maps.insert(iova, m);
                }
                Op::Unmap(iova) => {
                    let owned = matches!(
                        self.maps.get(&iova),
                        Some(Mapping {
                            backing: Backing::Owned(_),
                            ..
                        })
                    );
                    if let Some(m) = owned.then(|| self.maps.remove(&iova)).flatten() {
                        gone.push((iova, m.len));
                        freed.push(super::Freed(m.backing));
                    }
                }
            }
        }
        (gone, freed)
    }
}
