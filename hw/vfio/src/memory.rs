//! Host memory for DMA: [`HostMemory`] (anonymous, pre-faulted, hugepage-backed where the
//! system has hugepages reserved), and what pinning it costs: RLIMIT_MEMLOCK, CAP_IPC_LOCK and
//! the IOMMU mapping errors that come from them.
//!
//! Below both the IOMMU ([`crate::iommu`], which maps it) and the DMA pool ([`crate::dma`], which
//! carves allocations out of it). The type itself, its mapping and its accessors are
//! in the crate's unsafe room (`sys`); the sizing policy is here.

use std::io;

use crate::error::VfioError;
pub use crate::sys::HostMemory;

/// Size (and IOVA alignment) of a DMA pool chunk: one 2 MiB hugepage.
pub const CHUNK: usize = 2 << 20;
const PAGE: usize = 4096;

impl HostMemory {
    /// Maps `len` bytes (rounded up to 4 KiB, or to 2 MiB for hugepages). With `huge`, tries a
    /// 2 MiB hugepage mapping first and falls back to normal pages.
    pub fn new(len: usize, huge: bool) -> io::Result<Self> {
        let len = len.max(1);
        if huge {
            let hlen = len.div_ceil(CHUNK) * CHUNK;
            if let Ok(m) = Self::anonymous(hlen, true) {
                return Ok(m);
            }
        }
        Self::anonymous(len.div_ceil(PAGE) * PAGE, false)
    }
}

/// The soft RLIMIT_MEMLOCK in bytes (`u64::MAX` = unlimited).
pub fn memlock_limit() -> u64 {
    crate::sys::fd::memlock_rlimit().unwrap_or(0)
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
