//! Host memory for DMA: [`HostMemory`] (anonymous, pre-faulted, hugepage-backed where the
//! system has hugepages reserved), and what pinning it costs: RLIMIT_MEMLOCK, CAP_IPC_LOCK and
//! the IOMMU mapping errors that come from them.
//!
//! Below both the IOMMU ([`crate::iommu`], which maps it) and the DMA pool ([`crate::dma`], which
//! carves allocations out of it).
#![allow(unsafe_code)] // mmap/munmap/madvise/getrlimit and volatile accesses to the mapping.

use std::io;
use std::ptr::NonNull;

use mlx5::io::OutOfBounds;

use crate::error::VfioError;

/// Size (and IOVA alignment) of a DMA pool chunk: one 2 MiB hugepage.
pub const CHUNK: usize = 2 << 20;
const PAGE: usize = 4096;
const MAP_HUGE_2MB: libc::c_int = 21 << libc::MAP_HUGE_SHIFT;

/// Anonymous host memory meant for DMA: page aligned, zeroed, pre-faulted, `MADV_DONTFORK`.
/// It hands out only raw pointers and volatile accessors, never references, so it may be mapped
/// for device access while the CPU uses it.
#[derive(Debug)]
pub struct HostMemory {
    ptr: NonNull<u8>,
    len: usize,
    huge: bool,
}

// SAFETY: the mapping is owned by this value alone and is only reached through raw pointers with
// volatile accesses, so moving or sharing the handle between threads cannot create a data race
// the device does not already create.
unsafe impl Send for HostMemory {}
// SAFETY: as above.
unsafe impl Sync for HostMemory {}

impl HostMemory {
    /// Maps `len` bytes (rounded up to 4 KiB, or to 2 MiB for hugepages). With `huge`, tries a
    /// 2 MiB hugepage mapping first and falls back to normal pages.
    pub fn new(len: usize, huge: bool) -> io::Result<Self> {
        let len = len.max(1);
        if huge {
            let hlen = len.div_ceil(CHUNK) * CHUNK;
            if let Ok(mut m) = Self::map(hlen, libc::MAP_HUGETLB | MAP_HUGE_2MB) {
                m.huge = true;
                return Ok(m);
            }
        }
        Self::map(len.div_ceil(PAGE) * PAGE, 0)
    }

    fn map(len: usize, extra: libc::c_int) -> io::Result<Self> {
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE | extra;
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing touches no
        // existing memory; the result is checked before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave 0"))?;
        // SAFETY: `ptr..ptr+len` is the mapping just created; madvise only changes its flags.
        if unsafe { libc::madvise(p, len, libc::MADV_DONTFORK) } != 0 {
            log::debug!("MADV_DONTFORK: {}", io::Error::last_os_error());
        }
        Ok(Self {
            ptr,
            len,
            huge: false,
        })
    }

    /// Length in bytes (after rounding).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty (never: at least one page).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether it is backed by 2 MiB hugepages.
    pub fn is_huge(&self) -> bool {
        self.huge
    }

    /// The first byte.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    fn check(&self, off: usize, len: usize) -> Result<(), OutOfBounds> {
        match off.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(OutOfBounds {
                offset: off,
                len,
                size: self.len,
            }),
        }
    }

    /// Volatile byte reads (the device may write concurrently).
    pub fn read(&self, off: usize, dst: &mut [u8]) -> Result<(), OutOfBounds> {
        self.check(off, dst.len())?;
        for (i, d) in dst.iter_mut().enumerate() {
            // SAFETY: in bounds (checked); the mapping lives as long as `self`.
            *d = unsafe { self.ptr.as_ptr().add(off + i).read_volatile() };
        }
        Ok(())
    }

    /// Volatile byte writes.
    pub fn write(&self, off: usize, src: &[u8]) -> Result<(), OutOfBounds> {
        self.check(off, src.len())?;
        for (i, s) in src.iter().enumerate() {
            // SAFETY: in bounds (checked); the mapping lives as long as `self`.
            unsafe { self.ptr.as_ptr().add(off + i).write_volatile(*s) };
        }
        Ok(())
    }

    /// Fills `len` bytes at `off` with `byte` (volatile).
    pub fn fill(&self, off: usize, len: usize, byte: u8) -> Result<(), OutOfBounds> {
        self.check(off, len)?;
        for i in 0..len {
            // SAFETY: in bounds (checked); the mapping lives as long as `self`.
            unsafe { self.ptr.as_ptr().add(off + i).write_volatile(byte) };
        }
        Ok(())
    }
}

impl Drop for HostMemory {
    fn drop(&mut self) {
        // SAFETY: this value owns the mapping; nothing refers into it once it is dropped (the
        // IOMMU mapping, if any, was removed first: see the module docs).
        if unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) } != 0 {
            log::error!("munmap of DMA memory: {}", io::Error::last_os_error());
        }
    }
}

/// The soft RLIMIT_MEMLOCK in bytes (`u64::MAX` = unlimited).
pub fn memlock_limit() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid, writable rlimit for the duration of the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut r) } != 0 {
        return 0;
    }
    if r.rlim_cur == libc::RLIM_INFINITY {
        u64::MAX
    } else {
        r.rlim_cur
    }
}

/// Whether a `/proc/<pid>/status` text grants CAP_IPC_LOCK (no memlock limit) in `CapEff`.
pub fn status_has_ipc_lock(status: &str) -> bool {
    const CAP_IPC_LOCK: u32 = 14;
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << CAP_IPC_LOCK) != 0)
}

/// Whether this process may pin `needed` bytes: CAP_IPC_LOCK, or a high enough RLIMIT_MEMLOCK.
pub fn check_memlock(needed: u64) -> Result<(), VfioError> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let limit = memlock_limit();
    if status_has_ipc_lock(&status) || limit >= needed {
        return Ok(());
    }
    Err(VfioError::MemlockTooLow { limit, needed })
}

/// A failed VFIO_IOMMU_MAP_DMA explained: ENOMEM there nearly always means the memlock limit.
pub(crate) fn map_error(len: usize, code: i32) -> VfioError {
    let limit = memlock_limit();
    if code == libc::ENOMEM && limit != u64::MAX {
        return VfioError::MemlockTooLow {
            limit,
            needed: len as u64,
        };
    }
    let hint = match code {
        libc::ENOSPC => " (the container's DMA mapping limit, vfio_iommu_type1 dma_entry_limit)",
        libc::EEXIST => " (the IOVA is mapped already)",
        _ => "",
    };
    VfioError::io(
        format!("IOMMU mapping of {len} bytes{hint}"),
        io::Error::from_raw_os_error(code),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_memory_is_zeroed_aligned_and_bounds_checked() {
        let m = HostMemory::new(5000, false).unwrap();
        assert_eq!(m.len(), 8192);
        assert_eq!(m.as_ptr() as usize % PAGE, 0);
        let mut b = [0xffu8; 16];
        m.read(8192 - 16, &mut b).unwrap();
        assert_eq!(b, [0; 16]);
        m.write(100, b"hello").unwrap();
        let mut h = [0u8; 5];
        m.read(100, &mut h).unwrap();
        assert_eq!(&h, b"hello");
        m.fill(0, 8192, 0xa5).unwrap();
        m.read(8190, &mut h[..2]).unwrap();
        assert_eq!(&h[..2], &[0xa5, 0xa5]);
        assert!(m.read(8190, &mut h).is_err());
        assert!(m.write(usize::MAX, b"x").is_err());
    }

    #[test]
    fn hugepage_request_falls_back_to_normal_pages() {
        // Whether or not this machine has hugepages reserved, the memory is usable and 2 MiB.
        let m = HostMemory::new(1, true).unwrap();
        if m.is_huge() {
            assert_eq!(m.len(), CHUNK);
            assert_eq!(m.as_ptr() as usize % CHUNK, 0);
        } else {
            assert_eq!(m.len(), PAGE);
        }
        // The mapping is still there once `new` returned (a hugepage mapping once got unmapped
        // on its way out; the QEMU test caught it as EFAULT from the IOMMU map).
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let start = format!("{:x}-", m.as_ptr() as usize);
        assert!(
            maps.lines().any(|l| l.starts_with(&start)),
            "{start} not in maps"
        );
        m.write(0, &[1]).unwrap();
    }

    #[test]
    fn capability_parsing() {
        let root = "Name:\tx\nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\n";
        assert!(status_has_ipc_lock(root));
        let user = "CapEff:\t0000000000000000\n";
        assert!(!status_has_ipc_lock(user));
        assert!(!status_has_ipc_lock("garbage"));
        assert!(status_has_ipc_lock("CapEff:\t0000000000004000"));
    }

    #[test]
    fn map_errors_explain_memlock() {
        let e = map_error(CHUNK, libc::ENOSPC).to_string();
        assert!(e.contains("dma_entry_limit"), "{e}");
        if memlock_limit() != u64::MAX {
            assert!(matches!(
                map_error(CHUNK, libc::ENOMEM),
                VfioError::MemlockTooLow { .. }
            ));
        }
    }
}
