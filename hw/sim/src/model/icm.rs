//! ICM as software steering (mlx5dv direct rules) sees it: the device's own memory, addressed
//! by 40-bit ICM addresses (what an STE carries).
//!
//! * **SW ICM**: the regions `device_mem_cap` offers software — steering
//!   (`steering_sw_icm_start_address`, `2^log_steering_sw_icm_size` bytes) and header modify
//!   (`header_modify_sw_icm_start_address`, `2^log_header_modify_sw_icm_size`) — of which
//!   CREATE_GENERAL_OBJECT type SW_ICM takes ranges the driver chose (Linux's `lib/dm.c` keeps
//!   the bitmap; the firmware checks). Their bytes are a sparse store: a 4 KiB page exists only
//!   once something other than zeros was written to it, at most [`MAX_ICM_PAGES`] of them, and
//!   is dropped with its object. The data path reaches them through SW_ICM keys (access mode 4,
//!   zero-based: [`super::translation`]) with addresses of their own space ([`ICM_SPACE`]);
//!   the STE walker reads them with [`Icm::read`].

use std::collections::BTreeMap;

use mlx5_ifc::prm::memic::DeviceMemCap as D;

use crate::Profile;

/// The tag of an ICM address in the data path's address space (bit 62; device memory is bit
/// 63, [`super::memic::DM_SPACE`]): the rest is the ICM address. Host IOVAs stay below it
/// (keys of the other modes refuse anything above).
pub(crate) const ICM_SPACE: u64 = 1 << 62;

/// The pages of the sparse store.
const ICM_PAGE: u64 = 4096;

/// The most 4 KiB pages of SW ICM the store backs (64 MiB): a bound on what a guest makes the
/// simulator keep. A write that would need more fails (the data path sees unmapped memory).
pub(crate) const MAX_ICM_PAGES: usize = 1 << 14;

/// Why a SW ICM range is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IcmError {
    /// Not a power of two of at least the granularity, not aligned to it, or not inside one
    /// region.
    Param,
    /// It overlaps a live SW ICM object.
    Overlap,
}

/// SW ICM accounts, for tests and tools.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SwIcmAccounts {
    /// Live SW ICM objects (CREATE_GENERAL_OBJECT type SW_ICM not yet destroyed).
    pub objects: usize,
    /// Bytes they cover.
    pub bytes: u64,
    /// 4 KiB pages the store backs now (written with something other than zeros).
    pub backed_pages: usize,
}

/// The SW ICM regions, the live objects in them and their bytes.
#[derive(Debug, Default)]
pub(crate) struct Icm {
    /// `(start, bytes)` of the steering and the header-modify regions (0 bytes: none).
    regions: [(u64, u64); 2],
    /// `2^log_sw_icm_alloc_granularity`.
    granularity: u64,
    /// Live objects: start → (bytes, object id).
    objects: BTreeMap<u64, (u64, u32)>,
    /// The pages written: ICM page number → its bytes.
    pages: BTreeMap<u64, Box<[u8]>>,
}

impl Icm {
    /// The regions the profile's `device_mem_cap` offers (none without `device_memory`).
    pub(crate) fn new(profile: &Profile) -> Icm {
        let region = |start, log| {
            let log = profile.dev_mem_field(log);
            let start = profile.dev_mem_field(start);
            if start == 0 || log == 0 || log >= 40 {
                (0, 0)
            } else {
                (start, 1u64 << log)
            }
        };
        Icm {
            regions: [
                region(
                    D::STEERING_SW_ICM_START_ADDRESS,
                    D::LOG_STEERING_SW_ICM_SIZE,
                ),
                region(
                    D::HEADER_MODIFY_SW_ICM_START_ADDRESS,
                    D::LOG_HEADER_MODIFY_SW_ICM_SIZE,
                ),
            ],
            granularity: 1
                << profile
                    .dev_mem_field(D::LOG_SW_ICM_ALLOC_GRANULARITY)
                    .min(30),
            objects: BTreeMap::new(),
            pages: BTreeMap::new(),
        }
    }

    /// Whether `2^log_size` bytes at `start` may become a SW ICM object: a power of two of at
    /// least the granularity, `start` aligned to the granularity, the range inside one region,
    /// on no live object.
    pub(crate) fn check(&self, start: u64, log_size: u64) -> Result<u64, IcmError> {
        let size = 1u64.checked_shl(log_size as u32).filter(|_| log_size < 40);
        let Some(size) = size.filter(|&s| s >= self.granularity) else {
            return Err(IcmError::Param);
        };
        let end = start.checked_add(size).ok_or(IcmError::Param)?;
        let inside = self
            .regions
            .iter()
            .any(|&(s, n)| n > 0 && start >= s && end <= s + n);
        if start % self.granularity != 0 || !inside {
            return Err(IcmError::Param);
        }
        if self.overlapping(start, size) {
            return Err(IcmError::Overlap);
        }
        Ok(size)
    }

    /// Whether a live object overlaps `[start, start + size)`.
    fn overlapping(&self, start: u64, size: u64) -> bool {
        self.objects
            .range(..start + size)
            .next_back()
            .is_some_and(|(&a, &(n, _))| a + n > start)
    }

    /// Records object `id`: `size` bytes at `start` ([`Icm::check`]ed). Its bytes read zero.
    pub(crate) fn insert(&mut self, start: u64, size: u64, id: u32) {
        self.objects.insert(start, (size, id));
    }

    /// Forgets the object at `start` and drops its bytes.
    pub(crate) fn remove(&mut self, start: u64) {
        if let Some((size, _)) = self.objects.remove(&start) {
            let pages = start / ICM_PAGE..(start + size).div_ceil(ICM_PAGE);
            let gone: Vec<u64> = self.pages.range(pages).map(|(&p, _)| p).collect();
            for p in gone {
                self.pages.remove(&p);
            }
        }
    }

    /// The live object holding `[addr, addr + len)` whole: `(start, bytes, id)`.
    pub(crate) fn object_at(&self, addr: u64, len: u64) -> Option<(u64, u64, u32)> {
        let end = addr.checked_add(len)?;
        let (&start, &(size, id)) = self.objects.range(..=addr).next_back()?;
        (end <= start + size).then_some((start, size, id))
    }

    /// Reads ICM bytes at ICM address `addr` (bits 39:0; an STE's 64 bytes, a rewrite action's
    /// 8): they must lie in one live SW ICM object. Bytes never written read zero.
    pub(crate) fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), ()> {
        self.object_at(addr, buf.len() as u64).ok_or(())?;
        let mut done = 0usize;
        while done < buf.len() {
            let at = addr + done as u64;
            let (page, off) = (at / ICM_PAGE, (at % ICM_PAGE) as usize);
            let n = (ICM_PAGE as usize - off).min(buf.len() - done);
            match self.pages.get(&page) {
                Some(p) => buf[done..done + n].copy_from_slice(&p[off..off + n]),
                None => buf[done..done + n].fill(0),
            }
            done += n;
        }
        Ok(())
    }

    /// Writes ICM bytes at `addr`: they must lie in one live SW ICM object, and a page not yet
    /// backed is taken only for bytes other than zeros, while fewer than [`MAX_ICM_PAGES`] are.
    pub(crate) fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), ()> {
        self.object_at(addr, data.len() as u64).ok_or(())?;
        // Every page it needs first, so that a refused write changes nothing.
        let mut fresh = 0usize;
        for (page, chunk) in Self::chunks(addr, data.len()) {
            let zeros = data[chunk].iter().all(|&b| b == 0);
            if !self.pages.contains_key(&page) && !zeros {
                fresh += 1;
            }
        }
        if self.pages.len() + fresh > MAX_ICM_PAGES {
            log::warn!("mlx5-sim: SW ICM write at {addr:#x}: the store is full");
            return Err(());
        }
        for (page, chunk) in Self::chunks(addr, data.len()) {
            let off = ((addr + chunk.start as u64) % ICM_PAGE) as usize;
            let src = &data[chunk];
            match self.pages.get_mut(&page) {
                Some(p) => p[off..off + src.len()].copy_from_slice(src),
                None if src.iter().all(|&b| b == 0) => {}
                None => {
                    let mut p = vec![0u8; ICM_PAGE as usize].into_boxed_slice();
                    p[off..off + src.len()].copy_from_slice(src);
                    self.pages.insert(page, p);
                }
            }
        }
        Ok(())
    }

    /// The pieces of `[addr, addr + len)` per page: `(page number, range of the data)`.
    fn chunks(addr: u64, len: usize) -> impl Iterator<Item = (u64, std::ops::Range<usize>)> {
        let mut done = 0usize;
        std::iter::from_fn(move || {
            if done >= len {
                return None;
            }
            let at = addr + done as u64;
            let n = (ICM_PAGE - at % ICM_PAGE).min((len - done) as u64) as usize;
            let r = done..done + n;
            done += n;
            Some((at / ICM_PAGE, r))
        })
    }

    /// The header-modify region: `(start, bytes)` (`header_modify_sw_icm_start_address`, the
    /// base of an STE's `header_re_write_actions_pointer`); 0 bytes: none.
    pub(crate) fn header_modify_region(&self) -> (u64, u64) {
        self.regions[1]
    }

    /// The accounts.
    pub(crate) fn accounts(&self) -> SwIcmAccounts {
        SwIcmAccounts {
            objects: self.objects.len(),
            bytes: self.objects.values().map(|&(n, _)| n).sum(),
            backed_pages: self.pages.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn icm() -> Icm {
        Icm {
            regions: [(0x40_0000_0000, 1 << 27), (0x48_0000_0000, 1 << 20)],
            granularity: 4096,
            ..Icm::default()
        }
    }

    #[test]
    fn ranges_are_checked_and_the_store_is_sparse() {
        let mut m = icm();
        let base = 0x40_0000_0000;
        assert_eq!(m.check(base, 16), Ok(1 << 16));
        m.insert(base, 1 << 16, 1);
        assert_eq!(m.check(base + 0x8000, 12), Err(IcmError::Overlap));
        assert_eq!(m.check(base + 0x1_0000, 12), Ok(4096));
        for (start, log) in [
            (base + 0x1_0800, 12),  // not on a block
            (base, 11),             // below the granularity
            (base + (1 << 27), 12), // past the region
            (0x48_0000_0000, 21),   // bigger than the header-modify region
            (0x30_0000_0000, 12),   // in no region
        ] {
            assert_eq!(
                m.check(start, log),
                Err(IcmError::Param),
                "{start:#x} {log}"
            );
        }
        let mut b = [0xffu8; 64];
        m.read(base + 64, &mut b).unwrap();
        assert_eq!(b, [0; 64], "never written: zeros");
        m.write(base + 4090, &[0; 64]).unwrap();
        assert_eq!(m.accounts().backed_pages, 0, "zeros take no page");
        m.write(base + 4090, &[7; 12]).unwrap();
        assert_eq!(m.accounts().backed_pages, 2);
        m.read(base + 4088, &mut b[..16]).unwrap();
        assert_eq!(&b[..16], &[0, 0, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 0, 0]);
        assert!(
            m.write(base + (1 << 16) - 8, &[1; 16]).is_err(),
            "past the object"
        );
        assert!(m.read(base + (1 << 16), &mut b).is_err(), "no object there");
        m.remove(base);
        assert_eq!(m.accounts(), SwIcmAccounts::default());
        assert!(m.read(base, &mut b).is_err());
    }
}
