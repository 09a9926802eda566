//! Guest memory the client shares with DMA_MAP (a memfd and an offset): mapped into this
//! process and lent to the simulator as [`ExternalMemory`]. The one module of this crate with
//! `unsafe` code.
//!
//! A shared mapping faults (SIGBUS, which kills the process and every NIC it serves) where it
//! reaches past the end of its file — so no map is made past the end, and no file is mapped that
//! the client could shrink afterwards: it must be a memfd sealed against shrinking
//! (`F_SEAL_SHRINK`, which QEMU's `memory-backend-memfd` applies by default), or one that lets us
//! add that seal. Anything else (a file that cannot be sealed, a hugetlbfs file whose pages can
//! fail to come back after a hole is punched) is refused.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;

use mlx5_sim::ExternalMemory;

/// `statfs` type of hugetlbfs (linux/magic.h).
const HUGETLBFS_MAGIC: i64 = 0x9584_58f6;

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

fn invalid(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what)
}

/// Makes sure `fd` can never shrink: it carries `F_SEAL_SHRINK`, or we add it. Refused for a
/// file that takes no seals (not a memfd) or no more seals (`F_SEAL_SEAL`, as a memfd made
/// without `MFD_ALLOW_SEALING` is).
fn seal_against_shrinking(fd: &File) -> io::Result<()> {
    let why = "a file the client can shrink would fault this process (SIGBUS) on a DMA access; \
               share guest RAM as a memfd (QEMU: memory-backend-memfd, seal=on)";
    // SAFETY: fcntl on a descriptor we hold; F_GET_SEALS takes no argument and changes nothing.
    let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
    if seals < 0 {
        let e = io::Error::last_os_error();
        return Err(invalid(format!(
            "DMA map: F_GET_SEALS: {e} (not a memfd); {why}"
        )));
    }
    if seals & libc::F_SEAL_SHRINK != 0 {
        return Ok(());
    }
    // SAFETY: fcntl on a descriptor we hold; F_ADD_SEALS takes an int of seal bits.
    let r = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_SHRINK) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return Err(invalid(format!(
            "DMA map: F_ADD_SEALS F_SEAL_SHRINK on a memfd with seals {seals:#x}: {e}; {why}"
        )));
    }
    Ok(())
}

/// Refuses a file of hugetlbfs: a page punched out of it comes back only if the huge page pool
/// has one, else the access faults (SIGBUS) whatever the seals.
fn refuse_hugetlbfs(fd: &File) -> io::Result<()> {
    // SAFETY: `statfs` is plain data, for which all zeros is a valid value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: fstatfs on a descriptor we hold, writing into `st`, which we own.
    let r = unsafe { libc::fstatfs(fd.as_raw_fd(), &mut st) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return Err(invalid(format!("DMA map: fstatfs: {e}")));
    }
    #[allow(clippy::unnecessary_cast)] // f_type is i64 on some targets, u32 or i32 on others
    if st.f_type as i64 == HUGETLBFS_MAGIC {
        return Err(invalid(
            "DMA map: a hugetlbfs file: a huge page the client punches out may not come back, \
             and the access would fault this process (SIGBUS); share guest RAM as a memfd \
             without hugetlb"
                .to_string(),
        ));
    }
    Ok(())
}

impl GuestRegion {
    /// Maps `len` bytes of `fd` from `offset` (both as the client gave them). Refused: no
    /// bytes, a length that is not a whole number of 8-byte words, a range that wraps or ends
    /// past the file's end, a file that is not a regular file, one that could shrink later
    /// (see the module), an offset the kernel refuses (not page-aligned), or any error of
    /// `mmap`. Seals the file against shrinking if it was not (the client's file, for good).
    pub fn map(fd: &File, offset: u64, len: u64) -> io::Result<Self> {
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| l != 0 && l % 8 == 0)
            .ok_or_else(|| invalid(format!("DMA map: length {len:#x}: not a multiple of 8 > 0")))?;
        let end = offset.checked_add(len as u64).ok_or_else(|| {
            invalid(format!(
                "DMA map: file offset {offset:#x} + length {len:#x} does not fit below 2^64"
            ))
        })?;
        let off = libc::off_t::try_from(offset)
            .map_err(|_| invalid(format!("DMA map: file offset {offset:#x} past off_t")))?;
        let kind = fd.metadata()?.file_type();
        if !kind.is_file() {
            return Err(invalid(format!(
                "DMA map: the descriptor is not a regular file ({kind:?})"
            )));
        }
        refuse_hugetlbfs(fd)?;
        // Sealed first, measured after: the size cannot drop between the check and the map.
        seal_against_shrinking(fd)?;
        let size = fd.metadata()?.len();
        if end > size {
            return Err(invalid(format!(
                "DMA map: file offset {offset:#x} + length {len:#x} = {end:#x} past the file's \
                 {size:#x} bytes"
            )));
        }
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
    use std::os::fd::FromRawFd;
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

    #[test]
    fn a_map_past_the_end_or_of_an_unsealable_file_is_refused_and_a_mapped_file_cannot_shrink() {
        let f = tempfile();
        f.set_len(1 << 16).unwrap();
        let e = GuestRegion::map(&f, 0, 2 << 20).unwrap_err();
        assert!(
            e.to_string().contains("past the file's 0x10000 bytes"),
            "{e}"
        );
        let e = GuestRegion::map(&f, u64::MAX - 0xfff, 0x2000).unwrap_err();
        assert!(e.to_string().contains("does not fit below 2^64"), "{e}");
        let r = GuestRegion::map(&f, 0x8000, 0x8000).unwrap();
        assert!(f.set_len(0x1000).is_err(), "a mapped memfd was truncated");
        drop(r);
        // A memfd that takes no seals, and a file that is not a memfd.
        // SAFETY: memfd_create with a valid C string; checked below.
        let fd = unsafe { libc::memfd_create(c"mlx5-vfu-unsealable".as_ptr(), 0) };
        assert!(fd >= 0);
        // SAFETY: a fresh descriptor nobody else owns.
        let unsealable = unsafe { File::from_raw_fd(fd) };
        unsealable.set_len(4096).unwrap();
        let e = GuestRegion::map(&unsealable, 0, 4096).unwrap_err();
        assert!(e.to_string().contains("F_ADD_SEALS F_SEAL_SHRINK"), "{e}");
        let p = std::env::temp_dir().join(format!("mlx5-vfu-plain-{}", std::process::id()));
        let plain = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&p)
            .unwrap();
        let _ = std::fs::remove_file(&p);
        plain.set_len(4096).unwrap();
        let e = GuestRegion::map(&plain, 0, 4096).unwrap_err();
        assert!(e.to_string().contains("F_GET_SEALS"), "{e}");
    }

    /// A memfd that takes seals, as QEMU's guest RAM is.
    fn tempfile() -> File {
        // SAFETY: memfd_create with a valid C string; checked below.
        let fd = unsafe { libc::memfd_create(c"mlx5-vfu-test".as_ptr(), libc::MFD_ALLOW_SEALING) };
        assert!(fd >= 0, "memfd_create: {}", io::Error::last_os_error());
        // SAFETY: a fresh descriptor nobody else owns.
        unsafe { File::from_raw_fd(fd) }
    }
}
