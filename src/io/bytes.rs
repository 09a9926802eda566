//! [`HostBytes`]: a byte buffer of the driver's own in host memory the device cannot reach
//! ([`Platform::host_alloc`]), owned by one object — a staging buffer that ordinary Rust code
//! (a network stack) may borrow as a slice, which device-visible memory never may be.

use core::ptr::NonNull;

use crate::io::platform::{Platform, PlatformError};

const ALIGN: usize = 64;

/// An exclusively owned, zeroed byte buffer in host memory. [`HostBytes::release`] frees it;
/// dropped without it, the memory leaks (never freed while borrowed: borrows end first).
#[derive(Debug)]
pub(crate) struct HostBytes {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the buffer is owned by this value alone; moving it to another thread moves the only
// access with it.
unsafe impl Send for HostBytes {}
// SAFETY: shared access is `&[u8]` only (reads); writes need `&mut self`.
unsafe impl Sync for HostBytes {}

impl HostBytes {
    /// Allocates `len` zeroed bytes (at least one).
    pub(crate) fn alloc<P: Platform + ?Sized>(p: &P, len: usize) -> Result<Self, PlatformError> {
        let len = len.max(1);
        if len > isize::MAX as usize {
            return Err(PlatformError::OutOfHostMemory { len, align: ALIGN });
        }
        let base = p.host_alloc(len, ALIGN)?;
        // SAFETY: `host_alloc` returned `len` writable bytes at `base`, owned by nobody else;
        // zeroing them initialises the buffer before any slice of it exists.
        unsafe { core::ptr::write_bytes(base.as_ptr(), 0, len) };
        Ok(Self { base, len })
    }

    /// The bytes.
    pub(crate) fn as_slice(&self) -> &[u8] {
        // SAFETY: `base` is valid for `len` bytes until `release` (which takes `self`), host
        // memory the device cannot write, initialised at allocation; `&self` excludes writers.
        unsafe { core::slice::from_raw_parts(self.base.as_ptr(), self.len) }
    }

    /// The bytes, to write.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as `as_slice`; `&mut self` makes this the only access.
        unsafe { core::slice::from_raw_parts_mut(self.base.as_ptr(), self.len) }
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Frees the buffer.
    pub(crate) fn release<P: Platform + ?Sized>(self, p: &P) {
        // SAFETY: `base`/`len`/`ALIGN` are those of `host_alloc` in `alloc`; `self` is the only
        // owner and is consumed, so nothing uses the memory any more.
        unsafe { p.host_free(self.base, self.len, ALIGN) };
    }
}

/// `words` (8-byte groups, each a big-endian word's bytes as the device reads them) as
/// [`Be64`](mlx5_ifc::Be64) words, without a copy.
#[inline(always)]
pub(crate) fn be64_words(words: &[[u8; 8]]) -> &[mlx5_ifc::Be64] {
    // SAFETY: `Be64` is `#[repr(transparent)]` over `[u8; 8]`, so a slice of one is a valid
    // slice of the other with the same length, alignment (1) and lifetime; both are plain
    // bytes with no invalid values.
    unsafe { core::slice::from_raw_parts(words.as_ptr().cast(), words.len()) }
}
