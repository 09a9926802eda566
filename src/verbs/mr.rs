//! Memory registration (PRM "Memory Key"): CREATE_MKEY with an MTT built from DMA pages.
//!
//! A memory region is a range of device addresses (IOVAs) the device may touch on the driver's
//! behalf, in a PD, with access rights. Its address space is the IOVA space: the `addr()` of a
//! region is the IOVA of its first byte, and SGEs and remote addresses name IOVAs. The key is
//! `mkey_index << 8 | variant`; the same key serves as lkey and rkey.

use core::sync::atomic::{AtomicU8, Ordering};

use mlx5_ifc::consts::mkey_access_mode;
use mlx5_ifc::prm::mr::{CreateMkeyIn, CreateMkeyOut, DestroyMkeyIn, DestroyMkeyOut, Mkc};
use mlx5_ifc::Opcode;

use crate::device::Device;
use crate::error::{Error, Result};
use crate::fw::cmd::{run, run_create};
use crate::fw::queue::{Pages, PasList, QueueBuf};
use crate::io::platform::Platform;
use crate::io::DmaBuf;
use crate::verbs::pd::Pd;

/// The variant byte of the next key (keys of reused indices differ).
static VARIANT: AtomicU8 = AtomicU8::new(0x5a);

/// Access rights of a memory region (`ibv_access_flags`). Local read is always granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MrAccess {
    /// The device may write the memory for local operations (receives, READ responses).
    pub local_write: bool,
    /// Remote RDMA WRITE.
    pub remote_write: bool,
    /// Remote RDMA READ.
    pub remote_read: bool,
    /// Remote atomics.
    pub remote_atomic: bool,
    /// A peer's SEND with invalidate may invalidate the key (mkc `en_rinval`). Not a verbs
    /// access flag: Linux sets `en_rinval` only on the keys meant to be invalidated remotely
    /// (fast-registration MRs through UMR, type 2 memory windows), never on `ibv_reg_mr`
    /// regions, whose keys a SEND with invalidate cannot invalidate. After the invalidation
    /// every access through the key fails; the region stays registered until `dereg`.
    pub remote_invalidate: bool,
}

impl MrAccess {
    /// Every verbs access right (remote invalidation, an mlx5 key property, stays off).
    pub const ALL: Self = Self {
        local_write: true,
        remote_write: true,
        remote_read: true,
        remote_atomic: true,
        remote_invalidate: false,
    };
    /// Local read and write only.
    pub const LOCAL: Self = Self {
        local_write: true,
        remote_write: false,
        remote_read: false,
        remote_atomic: false,
        remote_invalidate: false,
    };
}

/// A registered memory region of device `'d`, backed by DMA memory it owns.
#[derive(Debug)]
pub struct MemoryRegion<'d, P: Platform> {
    dev: &'d Device<P>,
    key: u32,
    len: usize,
    access: MrAccess,
    backing: Option<Backing>,
}

/// The memory behind a region. The region holds it for as long as its key exists: nobody can
/// free memory a live key lets the device (and remote peers) reach.
#[derive(Debug)]
enum Backing {
    /// Allocated by `alloc_mr`, freed with the region.
    Owned(QueueBuf),
    /// The caller's DMA memory (`reg_mr`), handed back by `dereg` once the key is gone.
    Caller(DmaBuf),
}

impl Backing {
    fn dma(&self) -> &DmaBuf {
        match self {
            Backing::Owned(q) => q.buf(),
            Backing::Caller(b) => b,
        }
    }

    fn into_dma(self) -> DmaBuf {
        match self {
            Backing::Owned(q) => q.into_dma(),
            Backing::Caller(b) => b,
        }
    }
}

impl<P: Platform> Device<P> {
    /// Allocates `len` bytes of DMA memory and registers them in `pd` (`ibv_reg_mr` on memory the
    /// driver allocates through the platform).
    pub fn alloc_mr(&self, pd: &Pd, len: usize, access: MrAccess) -> Result<MemoryRegion<'_, P>> {
        let max = 1u64 << self.caps().get("log_max_mrw_sz").unwrap_or(32).min(63);
        if len == 0 || len as u64 > max {
            return Err(Error::InvalidArgument {
                op: "reg_mr",
                field: "length",
                requested: len as u64,
                max,
                limit: "log_max_mrw_sz (at least 1 byte)",
            });
        }
        Self::check_access(access)?;
        let p = self.platform();
        let buf = QueueBuf::alloc(p, len, "allocate memory to register")?;
        match self.create_mkey(pd, &buf, buf.buf().iova(), len, buf.log_page_size(), access) {
            Ok(key) => Ok(MemoryRegion {
                dev: self,
                key,
                len,
                access,
                backing: Some(Backing::Owned(buf)),
            }),
            Err(e) => {
                let done = !e.device_may_hold_memory();
                buf.retire(
                    self.quarantine(),
                    p,
                    done,
                    "CREATE_MKEY failed with its outcome unknown",
                );
                Err(e)
            }
        }
    }

    /// Registers DMA memory the caller allocated through the platform (`ibv_reg_mr` on the
    /// caller's buffer): the region covers all of `buf`, which must start on a 4 KiB boundary
    /// and is described page by page (at most 512 pages, 2 MiB).
    ///
    /// The region takes `buf` for as long as its key exists ([`MemoryRegion::dereg`] gives it
    /// back), so it cannot be freed while the device may reach it. If registration fails, `buf`
    /// is freed — or, when the device may have made a key for it after all (a timeout),
    /// quarantined ([`Device::quarantined`]).
    pub fn reg_mr(&self, pd: &Pd, buf: DmaBuf, access: MrAccess) -> Result<MemoryRegion<'_, P>> {
        let p = self.platform();
        let page = mlx5_ifc::consts::ADAPTER_PAGE_SIZE;
        let len = buf.len();
        let n = len.div_ceil(page);
        if buf.iova() % page as u64 != 0 || len == 0 || n > crate::fw::queue::MAX_PAS {
            let _ = buf.free(p);
            return Err(Error::InvalidArgument {
                op: "reg_mr",
                field: "buffer",
                requested: len as u64,
                max: (crate::fw::queue::MAX_PAS * page) as u64,
                limit: "a 4 KiB-aligned DMA buffer of 1 byte to 512 pages",
            });
        }
        if let Err(e) = Self::check_access(access) {
            let _ = buf.free(p);
            return Err(e);
        }
        let pages = Pages {
            base: buf.iova(),
            page,
            n,
        };
        match self.create_mkey(pd, &pages, buf.iova(), len, 0, access) {
            Ok(key) => Ok(MemoryRegion {
                dev: self,
                key,
                len,
                access,
                backing: Some(Backing::Caller(buf)),
            }),
            Err(e) => {
                let done = !e.device_may_hold_memory();
                self.quarantine().retire(
                    p,
                    buf,
                    done,
                    "CREATE_MKEY failed with its outcome unknown",
                );
                Err(e)
            }
        }
    }

    fn check_access(access: MrAccess) -> Result<()> {
        if (access.remote_write || access.remote_atomic) && !access.local_write {
            return Err(Error::InvalidArgument {
                op: "reg_mr",
                field: "access",
                requested: 0,
                max: 0,
                limit: "remote write and remote atomic need local write (as in verbs)",
            });
        }
        Ok(())
    }

    fn create_mkey<Q: PasList>(
        &self,
        pd: &Pd,
        pas: &Q,
        start: u64,
        len: usize,
        log_page: u8,
        access: MrAccess,
    ) -> Result<u32> {
        let variant = VARIANT.fetch_add(1, Ordering::Relaxed);
        // The MTT goes as whole octwords: an odd page count gets a zero entry after it.
        let mtt = EvenPas(pas);
        let out = self.with_cmd(|cmd, p| {
            run_create::<CreateMkeyIn, CreateMkeyOut, _, _, _>(
                cmd,
                p,
                Opcode::CreateMkey,
                Some(&mtt),
                |v| {
                    let octwords = pas.npages().div_ceil(2) as u64;
                    v.set(CreateMkeyIn::TRANSLATIONS_OCTWORD_ACTUAL_SIZE, octwords)?;
                    let mut m = v.nested_mut(CreateMkeyIn::MEMORY_KEY_MKEY_ENTRY);
                    m.set(Mkc::ACCESS_MODE_1_0, mkey_access_mode::MTT)?;
                    m.set(Mkc::LR, 1)?;
                    m.set(Mkc::LW, u64::from(access.local_write))?;
                    m.set(Mkc::RR, u64::from(access.remote_read))?;
                    m.set(Mkc::RW, u64::from(access.remote_write))?;
                    m.set(Mkc::A, u64::from(access.remote_atomic))?;
                    m.set(Mkc::EN_RINVAL, u64::from(access.remote_invalidate))?;
                    m.set(Mkc::QPN, 0xff_ffff)?;
                    m.set(Mkc::MKEY_7_0, u64::from(variant))?;
                    m.set(Mkc::PD, u64::from(pd.pdn()))?;
                    m.set(Mkc::START_ADDR, start)?;
                    m.set(Mkc::LEN, len as u64)?;
                    m.set(Mkc::TRANSLATIONS_OCTWORD_SIZE, octwords)?;
                    // Absolute log2 of the page size (12 for 4 KiB), unlike the queue
                    // contexts' sizes relative to 4 KiB: what Linux (mlx5_ib, vfio/mlx5) and
                    // rdma-core's mlx5_vfio write (docs/fields.md).
                    m.set(Mkc::LOG_PAGE_SIZE, 12 + u64::from(log_page))?;
                    Ok(())
                },
            )
        })?;
        Ok((out.get(CreateMkeyOut::MKEY_INDEX) as u32) << 8 | u32::from(variant))
    }
}

/// A PAS list padded to an even number of entries (whole 16-byte octwords), as CREATE_MKEY's
/// `translations_octword_actual_size` announces them (Linux and rdma-core pad the same way).
struct EvenPas<'a, Q: PasList>(&'a Q);

impl<Q: PasList> PasList for EvenPas<'_, Q> {
    fn npages(&self) -> usize {
        self.0.npages().next_multiple_of(2)
    }
    fn write_pas(&self, dst: &mut [u8]) -> Result<()> {
        let n = self.0.npages();
        let (list, pad) = dst.split_at_mut(n.saturating_mul(8).min(dst.len()));
        self.0.write_pas(list)?;
        pad.fill(0);
        Ok(())
    }
}

impl<'d, P: Platform> MemoryRegion<'d, P> {
    /// The local key (SGEs).
    pub fn lkey(&self) -> u32 {
        self.key
    }

    /// The remote key (RDMA and atomics from the peer).
    pub fn rkey(&self) -> u32 {
        self.key
    }

    /// The address of the first byte in the region's address space (its IOVA).
    pub fn addr(&self) -> u64 {
        self.backing.as_ref().map_or(0, |b| b.dma().iova())
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region is empty (never: registration needs a byte).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Its access rights.
    pub fn access(&self) -> MrAccess {
        self.access
    }

    fn check(&self, offset: usize, n: usize) -> Result<()> {
        if offset.checked_add(n).is_none_or(|end| end > self.len) {
            return Err(Error::InvalidArgument {
                op: "memory region access",
                field: "offset + length",
                requested: (offset as u64).saturating_add(n as u64),
                max: self.len as u64,
                limit: "region length",
            });
        }
        Ok(())
    }

    /// Copies `src` into the region at `offset`.
    pub fn write(&self, offset: usize, src: &[u8]) -> Result<()> {
        self.check(offset, src.len())?;
        match &self.backing {
            Some(b) => Ok(b.dma().write_bytes(offset, src)?),
            None => Ok(()),
        }
    }

    /// Copies from the region at `offset` into `dst`.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.check(offset, dst.len())?;
        match &self.backing {
            Some(b) => Ok(b.dma().read_bytes(offset, dst)?),
            None => Ok(()),
        }
    }

    /// Destroys the key (`ibv_dereg_mr`) and frees the memory `alloc_mr` allocated, or hands
    /// back the caller's buffer of `reg_mr` (`Some`). If DESTROY_MKEY fails, the key may still
    /// let the device (and remote peers) reach the memory: it is quarantined
    /// ([`Device::quarantined`]), never freed or handed back.
    pub fn dereg(mut self) -> Result<Option<DmaBuf>> {
        self.dereg_inner()
    }

    fn dereg_inner(&mut self) -> Result<Option<DmaBuf>> {
        let Some(backing) = self.backing.take() else {
            return Ok(None);
        };
        let index = u64::from(self.key >> 8);
        let r = self.dev.with_cmd(|cmd, p| {
            run::<DestroyMkeyIn, DestroyMkeyOut, _, _>(cmd, p, Opcode::DestroyMkey, 0, |v| {
                v.set(DestroyMkeyIn::MKEY_INDEX, index)?;
                Ok(())
            })
        });
        if let Err(e) = r {
            self.dev.quarantine().keep(
                backing.into_dma(),
                "DESTROY_MKEY failed: the key may still be live",
            );
            return Err(e);
        }
        match backing {
            Backing::Owned(buf) => {
                buf.free(self.dev.platform());
                Ok(None)
            }
            Backing::Caller(buf) => Ok(Some(buf)),
        }
    }
}

impl<P: Platform> Drop for MemoryRegion<'_, P> {
    fn drop(&mut self) {
        match self.dereg_inner() {
            Err(e) => log::error!("deregistering key {:#x} on drop: {e}", self.key),
            // The caller's buffer, dropped with the region: freed, the key being gone.
            Ok(Some(buf)) => {
                if let Err(e) = buf.free(self.dev.platform()) {
                    log::warn!("freeing the buffer of key {:#x}: {e}", self.key);
                }
            }
            Ok(None) => {}
        }
    }
}
