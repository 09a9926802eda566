//! Host memory from the process heap, for platforms that have one (feature `std`): memory no
//! IOMMU maps and no simulated device translates, where the driver keeps its bookkeeping.

extern crate std;

use core::ptr::NonNull;
use std::alloc::{alloc_zeroed, dealloc, Layout};

use crate::io::platform::PlatformError;

fn layout(len: usize, align: usize) -> Result<Layout, PlatformError> {
    Layout::from_size_align(len.max(1), align.max(8))
        .map_err(|_| PlatformError::OutOfHostMemory { len, align })
}

/// [`Platform::host_alloc`](crate::Platform::host_alloc) from the process heap.
pub fn heap_alloc(len: usize, align: usize) -> Result<NonNull<u8>, PlatformError> {
    let l = layout(len, align)?;
    // SAFETY: `l` has a non-zero size (`len.max(1)`).
    NonNull::new(unsafe { alloc_zeroed(l) }).ok_or(PlatformError::OutOfHostMemory { len, align })
}

/// [`Platform::host_free`](crate::Platform::host_free) to the process heap.
///
/// # Safety
///
/// `ptr`, `len` and `align` are those of one earlier [`heap_alloc`] not freed yet, and nothing
/// uses the memory any more.
pub unsafe fn heap_free(ptr: NonNull<u8>, len: usize, align: usize) {
    if let Ok(l) = layout(len, align) {
        // SAFETY: the caller passes what `heap_alloc` allocated with this very layout.
        unsafe { dealloc(ptr.as_ptr(), l) }
    }
}
