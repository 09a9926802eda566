//! Guest memory the client shares with DMA_MAP (a memfd and an offset): mapped into this
//! process and lent to the simulator as [`ExternalMemory`]. The one module of this crate with
//! `unsafe` code.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;

use mlx5_sim::ExternalMemory;

/// `len` bytes of a file mapped shared, read-write, for as long as this lives.
#[derive(Debug)]
pub struct GuestRegion {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; every access the simulator makes through it is
// atomic (`ExternalMemory::words`), and the pointer is only unmapped on drop.
unsafe impl Send for GuestRegion {}
// SAFETY: as above.
unsafe impl Sync for GuestRegion {}

impl GuestRegion {
    /// Maps `len` bytes of `fd` from `offset` (both as the client gave them). Refused: no
    /// bytes, a length that is not a whole number of 8-byte words, an offset the kernel
    /// refuses (not page-aligned), or any error of `mmap`.
    pub fn map(fd: &File, offset: u64, len: u64) -> io::Result<Self> {
        let bad = || io::Error::new(io::ErrorKind::InvalidInput, "DMA map: bad length");
        let len = usize::try_from(len).map_err(|_| bad())?;
        if len == 0 || len % 8 != 0 {
            return Err(bad());
        }
        let off = libc::off_t::try_from(offset)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "DMA map: bad offset"))?;
        // SAFETY: a fresh shared mapping of a file descriptor we hold, at an address the
        // kernel chooses; nothing of ours is overwritten. The result is checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                off,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(p.cast::<u8>()).ok_or_else(io::Error::last_os_error)?;
        Ok(GuestRegion { base, len })
    }

    /// Bytes mapped.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it maps nothing (never: `map` refuses that).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl ExternalMemory for GuestRegion {
    fn words(&self) -> &[AtomicU64] {
        // SAFETY: `base` is page-aligned (mmap) and the mapping holds `len` bytes (a multiple
        // of 8: `map`), valid until drop, which needs `&mut self`, so never while this borrow
        // lives. `AtomicU64` has the size and alignment of `u64`, and every access through the
        // slice is atomic, so the guest changing the bytes concurrently is not a data race on
        // our side.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr().cast::<AtomicU64>(), self.len / 8) }
    }
}

impl Drop for GuestRegion {
    fn drop(&mut self) {
        // SAFETY: exactly the mapping `map` made; no borrow of it outlives `self`.
        let r = unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
        if r != 0 {
            log::warn!(
                "mlx5-vfio-user: munmap of {:#x} bytes: {}",
                self.len,
                io::Error::last_os_error()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek, SeekFrom, Write};
    use std::sync::atomic::Ordering;

    #[test]
    fn a_mapped_file_is_the_same_bytes_both_ways() {
        let mut f = tempfile();
        f.write_all(&[0u8; 8192]).unwrap();
        let r = GuestRegion::map(&f, 4096, 4096).unwrap();
        r.words()[1].store(u64::from_ne_bytes(*b"mlx5-sim"), Ordering::Relaxed);
        let mut b = [0u8; 8];
        f.seek(SeekFrom::Start(4096 + 8)).unwrap();
        f.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"mlx5-sim");
        assert!(GuestRegion::map(&f, 0, 0).is_err());
        assert!(GuestRegion::map(&f, 0, 12).is_err());
        assert!(GuestRegion::map(&f, 100, 4096).is_err(), "unaligned offset");
    }

    fn tempfile() -> File {
        let p = std::env::temp_dir().join(format!("mlx5-vfu-{}", std::process::id()));
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&p)
            .unwrap();
        let _ = std::fs::remove_file(&p);
        f
    }
}
