//! [`Slots`]: a fixed number of `Option<T>` in host memory from [`Platform::host_alloc`], for
//! driver tables whose size is known only at run time (a CQ's map of the queues completing on
//! it) in a crate without a heap.
//!
//! The memory is the driver's only (the device cannot reach it). A `Slots` dropped without
//! [`Slots::free`] leaks its memory and whatever the slots held — never the other way round.

use core::marker::PhantomData;
use core::mem::{align_of, size_of};
use core::ptr::NonNull;

use crate::io::platform::{Platform, PlatformError};

/// `len` slots of `Option<T>` in host memory.
#[derive(Debug)]
pub(crate) struct Slots<T> {
    base: NonNull<Option<T>>,
    len: usize,
    _own: PhantomData<T>,
}

// SAFETY: `Slots` owns its `T`s like a `Box<[Option<T>]>`: sending it sends them.
unsafe impl<T: Send> Send for Slots<T> {}
// SAFETY: shared access gives only `&T` (as `Box<[Option<T>]>`).
unsafe impl<T: Sync> Sync for Slots<T> {}

impl<T> Slots<T> {
    /// No slots (allocates nothing).
    pub(crate) const fn empty() -> Self {
        Self {
            base: NonNull::dangling(),
            len: 0,
            _own: PhantomData,
        }
    }

    /// `len` empty slots.
    pub(crate) fn alloc<P: Platform + ?Sized>(p: &P, len: usize) -> Result<Self, PlatformError> {
        if len == 0 || size_of::<Option<T>>() == 0 {
            return Ok(Self::empty());
        }
        let align = align_of::<Option<T>>().max(8);
        let bytes = len
            .checked_mul(size_of::<Option<T>>())
            .filter(|&b| b <= isize::MAX as usize)
            .ok_or(PlatformError::OutOfHostMemory {
                len: usize::MAX,
                align,
            })?;
        let raw = p.host_alloc(bytes, align)?;
        if raw.as_ptr() as usize % align != 0 {
            log::error!("platform returned misaligned host memory {raw:?} for {bytes} bytes");
            // SAFETY: exactly what `host_alloc` returned, unused.
            unsafe { p.host_free(raw, bytes, align) };
            return Err(PlatformError::OutOfHostMemory { len: bytes, align });
        }
        let base = raw.cast::<Option<T>>();
        for i in 0..len {
            // SAFETY: `i < len` is inside the allocation of `len` slots, aligned (checked
            // above); writing initializes it without reading or dropping what was there.
            unsafe { base.as_ptr().add(i).write(None) };
        }
        Ok(Self {
            base,
            len,
            _own: PhantomData,
        })
    }

    /// Number of slots.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Slot `i`; `None` when empty or out of range.
    #[inline]
    pub(crate) fn get(&self, i: usize) -> Option<&T> {
        if i >= self.len {
            return None;
        }
        // SAFETY: `i < len`, every slot initialized at `alloc`; the borrow of `self` keeps the
        // memory (freed only by `free`, which takes `self`) and excludes `&mut` access.
        unsafe { (*self.base.as_ptr().add(i)).as_ref() }
    }

    /// Slot `i`, mutably; `None` when empty or out of range.
    #[inline]
    pub(crate) fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        if i >= self.len {
            return None;
        }
        // SAFETY: as `get`, with `&mut self` excluding any other access.
        unsafe { (*self.base.as_ptr().add(i)).as_mut() }
    }

    /// Empties slot `i`, returning what it held.
    pub(crate) fn take(&mut self, i: usize) -> Option<T> {
        if i >= self.len {
            return None;
        }
        // SAFETY: as `get_mut`.
        unsafe { (*self.base.as_ptr().add(i)).take() }
    }

    /// Puts `v` in slot `i`, returning what it held; `Err(v)` when out of range.
    pub(crate) fn put(&mut self, i: usize, v: T) -> Result<Option<T>, T> {
        if i >= self.len {
            return Err(v);
        }
        // SAFETY: as `get_mut`.
        Ok(unsafe { (*self.base.as_ptr().add(i)).replace(v) })
    }

    /// Frees the memory. Every slot must be empty (what is left in one is leaked, as if
    /// forgotten).
    pub(crate) fn free<P: Platform + ?Sized>(self, p: &P) {
        if self.len == 0 || size_of::<Option<T>>() == 0 {
            return;
        }
        let align = align_of::<Option<T>>().max(8);
        let bytes = self.len * size_of::<Option<T>>();
        // SAFETY: `base`, `bytes` and `align` are those of the `host_alloc` in `alloc` (the
        // same arithmetic, which did not overflow there); `self` is consumed, so nothing uses
        // the memory any more. The slots' contents are not dropped (leaked if any).
        unsafe { p.host_free(self.base.cast(), bytes, align) };
    }
}

/// A growable list in host memory ([`Slots`] underneath, doubled when full), for driver tables
/// that grow at run time on the control path.
#[derive(Debug)]
pub(crate) struct HostVec<T> {
    slots: Slots<T>,
    len: usize,
}

impl<T> Default for HostVec<T> {
    fn default() -> Self {
        Self {
            slots: Slots::empty(),
            len: 0,
        }
    }
}

impl<T> HostVec<T> {
    /// Entries.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Entry `i`.
    pub(crate) fn get(&self, i: usize) -> Option<&T> {
        if i < self.len {
            self.slots.get(i)
        } else {
            None
        }
    }

    /// Entry `i`, mutably.
    pub(crate) fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        if i < self.len {
            self.slots.get_mut(i)
        } else {
            None
        }
    }

    /// The entries in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        (0..self.len).filter_map(|i| self.slots.get(i))
    }

    /// Calls `f` on every entry, mutably.
    pub(crate) fn for_each_mut(&mut self, mut f: impl FnMut(&mut T)) {
        for i in 0..self.len {
            if let Some(v) = self.slots.get_mut(i) {
                f(v);
            }
        }
    }

    /// Appends `v`, doubling the memory when full; on failure `v` comes back.
    pub(crate) fn push<P: Platform + ?Sized>(
        &mut self,
        p: &P,
        v: T,
    ) -> Result<(), (PlatformError, T)> {
        if self.len == self.slots.len() {
            let want = (self.slots.len() * 2).max(8);
            let mut new = match Slots::alloc(p, want) {
                Ok(s) => s,
                Err(e) => return Err((e, v)),
            };
            for i in 0..self.len {
                if let Some(x) = self.slots.take(i) {
                    // In range and empty: cannot fail.
                    let _ = new.put(i, x);
                }
            }
            core::mem::replace(&mut self.slots, new).free(p);
        }
        match self.slots.put(self.len, v) {
            Ok(_) => {
                self.len += 1;
                Ok(())
            }
            Err(v) => Err((PlatformError::OutOfHostMemory { len: 0, align: 8 }, v)),
        }
    }

    /// Removes entry `i`, the last one taking its place.
    pub(crate) fn swap_remove(&mut self, i: usize) -> Option<T> {
        if i >= self.len {
            return None;
        }
        let out = self.slots.take(i)?;
        self.len -= 1;
        if i != self.len {
            if let Some(last) = self.slots.take(self.len) {
                let _ = self.slots.put(i, last);
            }
        }
        Some(out)
    }

    /// Removes every entry, giving each to `f`; the memory stays for reuse.
    pub(crate) fn drain_each(&mut self, mut f: impl FnMut(T)) {
        for i in 0..self.len {
            if let Some(v) = self.slots.take(i) {
                f(v);
            }
        }
        self.len = 0;
    }

    /// Frees the memory (entries left are leaked, as if forgotten).
    pub(crate) fn free<P: Platform + ?Sized>(&mut self, p: &P) {
        self.len = 0;
        core::mem::replace(&mut self.slots, Slots::empty()).free(p);
    }
}
