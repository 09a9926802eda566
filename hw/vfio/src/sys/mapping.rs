//! Owned memory mappings: [`Mapping`] (any mmap of ours) and [`HostMemory`] (anonymous memory
//! meant for DMA).

use std::io;
use std::mem::ManuallyDrop;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

use mlx5::io::OutOfBounds;
use vfio_ioctls::VfioDevice;

const MAP_HUGE_2MB: libc::c_int = 21 << libc::MAP_HUGE_SHIFT;

/// An mmap this value owns: `len` bytes at `ptr`, unmapped on drop. It hands out only raw
/// pointers and bounds-checked byte accesses (relaxed atomics, as the driver's `DmaBuf` uses:
/// concurrent calls from several threads do not race), never references, so the memory may be
/// shared with a device (or another mapping of the same file) while the CPU uses it.
#[derive(Debug)]
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
    /// What it maps, for the munmap error message.
    what: &'static str,
}

// SAFETY: the mapping is owned by this value alone (munmapped once, by its drop) and is only
// reached through raw pointers with atomic byte accesses, so moving the handle to another thread
// moves nothing the thread could misuse.
unsafe impl Send for Mapping {}
// SAFETY: `&Mapping` permits only bounds-checked atomic byte accesses of the mapping (and
// raw pointers, whose use is the user's unsafe business), no references into it.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// A private anonymous mapping of `len` bytes (zeroed, pre-faulted, `MADV_DONTFORK`); with
    /// `huge`, of 2 MiB hugepages (failing if none are free).
    pub(crate) fn anonymous(len: usize, huge: bool) -> io::Result<Self> {
        let mut flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE;
        if huge {
            flags |= libc::MAP_HUGETLB | MAP_HUGE_2MB;
        }
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing (no
        // MAP_FIXED) touches no existing memory; the result is checked before use.
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
        let m = Self::from_mmap(p, len, "DMA memory")?;
        // SAFETY: `p..p+len` is the mapping just created, owned by `m`; madvise only changes
        // its flags.
        if unsafe { libc::madvise(p, len, libc::MADV_DONTFORK) } != 0 {
            log::debug!("MADV_DONTFORK: {}", io::Error::last_os_error());
        }
        Ok(m)
    }

    /// A shared mapping of `len` bytes of the VFIO device's file at `file_offset` (a region of
    /// the device, e.g. part of a BAR).
    pub(crate) fn device(dev: &VfioDevice, file_offset: u64, len: usize) -> io::Result<Self> {
        let off =
            libc::off_t::try_from(file_offset).map_err(|_| io::Error::other("offset too large"))?;
        // SAFETY: a fresh shared mapping of the device file at an address of the kernel's
        // choosing (no MAP_FIXED) overlaps no existing memory; `dev` keeps the fd open during
        // the call (the mapping holds its own reference to the file afterwards); the result is
        // checked before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                dev.as_raw_fd(),
                off,
            )
        };
        Self::from_mmap(p, len, "a BAR")
    }

    fn from_mmap(p: *mut libc::c_void, len: usize, what: &'static str) -> io::Result<Self> {
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave 0"))?;
        Ok(Self { ptr, len, what })
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The first byte.
    pub(crate) fn as_non_null(&self) -> NonNull<u8> {
        self.ptr
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

    /// Byte reads, each one relaxed atomic load (a device, or another thread, may write
    /// concurrently).
    pub(crate) fn read(&self, off: usize, dst: &mut [u8]) -> Result<(), OutOfBounds> {
        self.check(off, dst.len())?;
        let base = self.ptr.as_ptr().wrapping_add(off);
        for (i, d) in dst.iter_mut().enumerate() {
            // SAFETY: `off + i < off + dst.len() <= len` (checked), so the byte is inside the
            // mapping, which lives as long as `self`; every CPU access this type makes is a
            // byte-wide atomic, so concurrent calls do not race; the `&AtomicU8` lives for this
            // one load (interior mutability: the byte may change under it).
            *d = unsafe { AtomicU8::from_ptr(base.add(i)) }.load(Ordering::Relaxed);
        }
        Ok(())
    }

    /// Byte writes, each one relaxed atomic store.
    pub(crate) fn write(&self, off: usize, src: &[u8]) -> Result<(), OutOfBounds> {
        self.check(off, src.len())?;
        let base = self.ptr.as_ptr().wrapping_add(off);
        for (i, s) in src.iter().enumerate() {
            // SAFETY: in bounds (checked, as in `read`); the mapping is writable and lives as
            // long as `self`; byte-wide atomics only, as in `read`.
            unsafe { AtomicU8::from_ptr(base.add(i)) }.store(*s, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Fills `len` bytes at `off` with `byte`, each one relaxed atomic store.
    pub(crate) fn fill(&self, off: usize, len: usize, byte: u8) -> Result<(), OutOfBounds> {
        self.check(off, len)?;
        let base = self.ptr.as_ptr().wrapping_add(off);
        for i in 0..len {
            // SAFETY: `i < len`: in bounds (checked, as in `read`); writable; byte-wide atomics.
            unsafe { AtomicU8::from_ptr(base.add(i)) }.store(byte, Ordering::Relaxed);
        }
        Ok(())
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: this value owns the mapping and is its only handle; nothing reaches it after
        // the drop (owners that lend it out — `MmioArea`, `HostMemory` — drop their borrowers
        // first or leak the mapping instead of dropping it).
        if unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) } != 0 {
            log::error!("munmap of {}: {}", self.what, io::Error::last_os_error());
        }
    }
}

/// Anonymous host memory meant for DMA: page aligned, zeroed, pre-faulted, `MADV_DONTFORK`.
/// It hands out only raw pointers and atomic byte accessors, never references, so it may be mapped
/// for device access while the CPU uses it. It counts the IOMMU mappings made of it (by this
/// crate's `DmaChunk` and `Iommu::map_memory`); dropped while one may still be live, it is
/// leaked rather than freed, so the device can never reach memory the process reuses.
#[derive(Debug)]
pub struct HostMemory {
    map: ManuallyDrop<Mapping>,
    huge: bool,
    /// IOMMU mappings of this memory that were not (successfully) removed.
    iommu_maps: AtomicUsize,
}

impl HostMemory {
    /// Exactly `len` bytes (a multiple of the page size, or of 2 MiB with `huge`).
    pub(crate) fn anonymous(len: usize, huge: bool) -> io::Result<Self> {
        Ok(Self {
            map: ManuallyDrop::new(Mapping::anonymous(len, huge)?),
            huge,
            iommu_maps: AtomicUsize::new(0),
        })
    }

    /// Length in bytes (after rounding).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether it is empty (never: at least one page).
    pub fn is_empty(&self) -> bool {
        self.map.len() == 0
    }

    /// Whether it is backed by 2 MiB hugepages.
    pub fn is_huge(&self) -> bool {
        self.huge
    }

    /// The first byte.
    pub fn as_ptr(&self) -> *mut u8 {
        self.map.as_non_null().as_ptr()
    }

    /// Byte reads, each a relaxed atomic load (the device may write concurrently).
    pub fn read(&self, off: usize, dst: &mut [u8]) -> Result<(), OutOfBounds> {
        self.map.read(off, dst)
    }

    /// Byte writes, each a relaxed atomic store.
    pub fn write(&self, off: usize, src: &[u8]) -> Result<(), OutOfBounds> {
        self.map.write(off, src)
    }

    /// Fills `len` bytes at `off` with `byte` (relaxed atomic byte stores).
    pub fn fill(&self, off: usize, len: usize, byte: u8) -> Result<(), OutOfBounds> {
        self.map.fill(off, len, byte)
    }

    /// An IOMMU mapping of this memory is about to be made.
    pub(super) fn iommu_mapped(&self) {
        self.iommu_maps.fetch_add(1, Ordering::SeqCst);
    }

    /// An IOMMU mapping of this memory was removed (or never made).
    pub(super) fn iommu_unmapped(&self) {
        self.iommu_maps.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for HostMemory {
    fn drop(&mut self) {
        if *self.iommu_maps.get_mut() != 0 {
            log::error!(
                "DMA memory of {} bytes dropped while the IOMMU may still map it; leaking it",
                self.map.len()
            );
            return;
        }
        // SAFETY: dropped once, here; nothing maps the memory in an IOMMU any more.
        unsafe { ManuallyDrop::drop(&mut self.map) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_covers_unaligned_heads_and_tails() {
        let m = Mapping::anonymous(4096, false).unwrap();
        for (off, len) in [(0, 4096), (3, 0), (3, 5), (5, 30), (4000, 96), (1, 4095)] {
            m.fill(0, 4096, 0).unwrap();
            m.fill(off, len, 0xa5).unwrap();
            let mut b = vec![0u8; 4096];
            m.read(0, &mut b).unwrap();
            for (i, &x) in b.iter().enumerate() {
                let inside = i >= off && i < off + len;
                assert_eq!(x, if inside { 0xa5 } else { 0 }, "{off}+{len} at {i}");
            }
        }
        assert!(m.fill(4095, 2, 0).is_err());
        assert!(m.fill(usize::MAX, 2, 0).is_err());
    }

    #[test]
    fn memory_still_mapped_in_an_iommu_is_leaked() {
        let m = HostMemory::anonymous(4096, false).unwrap();
        let at = m.as_ptr() as usize;
        m.iommu_mapped();
        drop(m);
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let mapped = maps.lines().any(|l| {
            let range = l.split(' ').next().unwrap_or("");
            let (s, e) = range.split_once('-').unwrap_or(("0", "0"));
            let s = usize::from_str_radix(s, 16).unwrap_or(0);
            let e = usize::from_str_radix(e, 16).unwrap_or(0);
            s <= at && at < e
        });
        assert!(mapped, "{at:#x} was unmapped");
    }
}
