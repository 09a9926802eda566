//! Firmware pages (PRM "Page Management"): memory the device borrows from the host.
//!
//! The firmware asks for 4 KiB pages (QUERY_PAGES at boot and init, PAGE_REQUEST events at run
//! time, `crate::fw::page_req`) and gets them with MANAGE_PAGES give; it hands them back with
//! MANAGE_PAGES take — when it offers them (a PAGE_REQUEST with `num_pages` < 0) and after
//! TEARDOWN_HCA. The pool allocates DMA memory in chunks of [`CHUNK_PAGES`] pages, keeps a
//! bitmap of the pages the device holds, and frees a chunk once the device has returned all of
//! it.
//!
//! Nothing the device returns is trusted: every address of a take's output must be a page of
//! the pool that the device holds, and name it once. An output that breaks this made no sense:
//! its pages that the device did hold are **lost** — no longer the device's by its own word,
//! but not known to be unused either — so their chunk is never reused nor freed, and is
//! quarantined when the pool retires ([`PagePool::retire`]); the pages it did not name stay
//! the device's. A PAGE_REQUEST with `release_all` loses every page the same way. After
//! TEARDOWN_HCA, once the device holds none of the pages it admits to, the driver asks for the
//! lost ones too: those a take names cleanly are freed, the rest quarantined.

use heapless::Vec;

use crate::io::HostVec;
use mlx5_ifc::consts::{manage_pages, ADAPTER_PAGE_SIZE};
use mlx5_ifc::prm::hca::{ManagePagesIn, ManagePagesOut, QueryPagesIn, QueryPagesOut};
use mlx5_ifc::{Be64, Layout, Opcode, View, ViewMut};

use crate::error::{Error, Result, Wait};
use crate::fw::cmd::{CmdIo, Slot, PAGES_PER_CMD};
use crate::fw::quarantine::Quarantine;
use crate::io::platform::Platform;
use crate::io::DmaBuf;

/// Pages per DMA chunk (one bit each in a `u64`).
pub(crate) const CHUNK_PAGES: usize = 64;
/// Pages the pool lends at most unless configured otherwise (`DeviceConfig::fw_pages_max`):
/// 2 GiB, a page of ICM for each of `max_qp` = 2^18 QPs and as many other objects.
pub(crate) const DEFAULT_MAX_PAGES: usize = 1 << 19;

/// A page of the pool a take named.
#[derive(Debug, Clone, Copy)]
struct Page {
    chunk: usize,
    bit: usize,
    /// The device held it (otherwise it was lost).
    given: bool,
}

impl Page {
    fn at(&self) -> (usize, usize) {
        (self.chunk, self.bit)
    }
}

#[derive(Debug)]
struct Chunk {
    buf: DmaBuf,
    /// Bit i set: page i is held by the device.
    given: u64,
    /// Bit i set: page i is in use (given, lost) or reserved.
    used: u64,
    /// Bit i set: page i is lost — it came back in an output that made no sense, or the
    /// firmware said it released it without a take (never reused).
    lost: u64,
}

/// Counters of the firmware pages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageStats {
    /// Pages the device holds now.
    pub held: usize,
    /// PAGE_REQUEST events answered (given, taken or refused).
    pub requests: u64,
    /// Pages given (boot, init and run time).
    pub given: u64,
    /// Pages taken back.
    pub taken: u64,
    /// Requests that could not be answered (the pool full, no DMA memory, a refused command,
    /// a take output that made no sense, a request for another function).
    pub failures: u64,
    /// Pages lost now: returned by a take output that made no sense, or released by the
    /// firmware's word alone (`release_all`). Their chunks are never reused, and quarantined
    /// at close unless the device gives them back then.
    pub lost: u64,
    /// Lost pages a take after TEARDOWN_HCA named cleanly: the device's by its word no longer,
    /// freed with their chunks.
    pub recovered: u64,
}

/// The pages lent to the firmware. The chunk table is host memory from the platform, grown
/// as the firmware asks for more, up to `max_pages`.
#[derive(Debug)]
pub(crate) struct PagePool {
    chunks: HostVec<Chunk>,
    held: usize,
    max_pages: usize,
    /// A chunk that had a free page last time one was looked for or freed (checked first).
    hint: usize,
    pub(crate) stats: PageStats,
}

impl Default for PagePool {
    fn default() -> Self {
        Self {
            chunks: HostVec::default(),
            held: 0,
            max_pages: DEFAULT_MAX_PAGES,
            hint: 0,
            stats: PageStats::default(),
        }
    }
}

/// Which QUERY_PAGES request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageRequest {
    /// Pages needed before INIT_HCA's own request (op_mod 1).
    Boot,
    /// Pages INIT_HCA needs (op_mod 2).
    Init,
    /// Pages needed at run time (op_mod 3).
    Regular,
}

impl PagePool {
    /// Pages the device holds now.
    pub(crate) fn held(&self) -> usize {
        self.held
    }

    /// The counters.
    pub(crate) fn stats(&self) -> PageStats {
        PageStats {
            held: self.held,
            ..self.stats
        }
    }

    /// Pages the pool can still lend.
    pub(crate) fn room(&self) -> usize {
        self.max_pages
            .saturating_sub(self.held.saturating_add(self.stats.lost as usize))
    }

    /// The most pages the pool lends (rounded up to whole chunks).
    pub(crate) fn set_max_pages(&mut self, n: usize) {
        self.max_pages = n;
    }

    /// Asks the firmware how many pages it wants (`num_pages` is signed: negative = it has pages
    /// to give back).
    pub(crate) fn query<P: Platform>(
        io: &CmdIo,
        p: &P,
        slot: Slot,
        which: PageRequest,
    ) -> Result<i32> {
        let op_mod = match which {
            PageRequest::Boot => 1,
            PageRequest::Init => 2,
            PageRequest::Regular => 3,
        };
        let mut i = [0u8; QueryPagesIn::BYTES];
        let mut o = [0u8; QueryPagesOut::BYTES];
        ViewMut::<QueryPagesIn>::new(&mut i)?
            .set(QueryPagesIn::OPCODE, Opcode::QueryPages as u64)?
            .set(QueryPagesIn::OP_MOD, op_mod)?;
        io.exec(p, slot, &i, &mut o)?;
        Ok(View::<QueryPagesOut>::new(&o)?.get32(QueryPagesOut::NUM_PAGES) as i32)
    }

    /// Queries `which` and gives the firmware what it asks for (at run time, takes back what it
    /// offers). Returns the pages given.
    pub(crate) fn satisfy<P: Platform>(
        &mut self,
        io: &CmdIo,
        p: &P,
        which: PageRequest,
    ) -> Result<usize> {
        let n = Self::query(io, p, Slot::Main, which)?;
        if n < 0 {
            if which != PageRequest::Regular {
                log::debug!(
                    "firmware offers {} pages back on a {which:?} query",
                    n.unsigned_abs()
                );
                return Ok(0);
            }
            let got = self.reclaim(io, p, Slot::Main, n.unsigned_abs() as usize)?;
            log::debug!("took back {got} pages the firmware offered");
            return Ok(0);
        }
        let n = n as usize;
        if n > self.room() {
            return Err(Error::BadDeviceValue {
                what: "QUERY_PAGES num_pages",
                value: n as u64,
                limit: self.room() as u64,
            });
        }
        self.give(io, p, Slot::Main, n)?;
        log::debug!("gave {n} {which:?} pages (device holds {})", self.held);
        Ok(n)
    }

    fn take_free_page<P: Platform>(&mut self, p: &P) -> Result<(usize, usize)> {
        // The hint first: with thousands of chunks a scan per page would make every object's
        // creation cost grow with the objects alive.
        let hinted = self
            .chunks
            .get(self.hint)
            .is_some_and(|c| c.used != u64::MAX);
        let free = if hinted {
            Some(self.hint)
        } else {
            self.chunks.iter().position(|c| c.used != u64::MAX)
        };
        if let Some(ci) = free {
            if let Some(c) = self.chunks.get_mut(ci) {
                self.hint = ci;
                let bit = (!c.used).trailing_zeros() as usize;
                c.used |= 1 << bit;
                return Ok((ci, bit));
            }
        }
        if self.chunks.len() * CHUNK_PAGES >= self.max_pages {
            return Err(Error::Capacity {
                what: "firmware page pool",
                limit: self.max_pages,
            });
        }
        let buf = DmaBuf::alloc(p, CHUNK_PAGES * ADAPTER_PAGE_SIZE, ADAPTER_PAGE_SIZE).map_err(
            |source| Error::Platform {
                op: "allocate firmware pages",
                source,
            },
        )?;
        let chunk = Chunk {
            buf,
            given: 0,
            used: 1,
            lost: 0,
        };
        if let Err((source, chunk)) = self.chunks.push(p, chunk) {
            let _ = chunk.buf.free(p);
            return Err(Error::Platform {
                op: "grow the firmware page table",
                source,
            });
        }
        Ok((self.chunks.len() - 1, 0))
    }

    /// Gives `n` pages to the firmware through `slot`.
    pub(crate) fn give<P: Platform>(
        &mut self,
        io: &CmdIo,
        p: &P,
        slot: Slot,
        n: usize,
    ) -> Result<()> {
        let mut left = n;
        while left > 0 {
            let batch = left.min(PAGES_PER_CMD);
            let mut input = [0u8; ManagePagesIn::BYTES + PAGES_PER_CMD * 8];
            let mut picked: Vec<(usize, usize), PAGES_PER_CMD> = Vec::new();
            for k in 0..batch {
                let (ci, bit) = match self.take_free_page(p) {
                    Ok(x) => x,
                    Err(e) => {
                        self.unreserve(&picked);
                        self.free_idle_chunks(p);
                        return Err(e);
                    }
                };
                let _ = picked.push((ci, bit));
                let base = self.chunks.get(ci).map_or(0, |c| c.buf.iova());
                let addr = base + (bit * ADAPTER_PAGE_SIZE) as u64;
                let at = ManagePagesIn::BYTES + k * 8;
                input[at..at + 8].copy_from_slice(&Be64::new(addr).to_bytes());
            }
            let len = ManagePagesIn::BYTES + batch * 8;
            ViewMut::<ManagePagesIn>::new(&mut input)?
                .set(ManagePagesIn::OPCODE, Opcode::ManagePages as u64)?
                .set(ManagePagesIn::OP_MOD, u64::from(manage_pages::GIVE))?
                .set(ManagePagesIn::INPUT_NUM_ENTRIES, batch as u64)?;
            let mut out = [0u8; ManagePagesOut::BYTES];
            if let Err(e) = io.exec(p, slot, &input[..len], &mut out) {
                if e.device_may_hold_memory() {
                    // The device may have taken the pages: they stay its, as far as the pool
                    // knows (reclaimed at teardown, or quarantined with the chunk).
                    self.mark_given(&picked);
                    self.held += batch;
                } else {
                    self.unreserve(&picked);
                    self.free_idle_chunks(p);
                }
                return Err(e);
            }
            self.mark_given(&picked);
            self.held += batch;
            self.stats.given += batch as u64;
            left -= batch;
        }
        Ok(())
    }

    /// MANAGE_PAGES op_mod 0 through `slot`: the driver cannot give the pages asked for.
    pub(crate) fn cannot_give<P: Platform>(io: &CmdIo, p: &P, slot: Slot) -> Result<()> {
        let mut input = [0u8; ManagePagesIn::BYTES];
        ViewMut::<ManagePagesIn>::new(&mut input)?
            .set(ManagePagesIn::OPCODE, Opcode::ManagePages as u64)?
            .set(ManagePagesIn::OP_MOD, u64::from(manage_pages::ALLOC_FAIL))?;
        let mut out = [0u8; ManagePagesOut::BYTES];
        io.exec(p, slot, &input, &mut out)
    }

    fn mark_given(&mut self, picked: &[(usize, usize)]) {
        for &(ci, bit) in picked {
            if let Some(c) = self.chunks.get_mut(ci) {
                c.given |= 1 << bit;
            }
        }
    }

    fn unreserve(&mut self, picked: &[(usize, usize)]) {
        for &(ci, bit) in picked {
            if let Some(c) = self.chunks.get_mut(ci) {
                c.used &= !(1 << bit);
            }
        }
    }

    /// Takes pages back until the firmware holds none, or `timeout_ms` pass without progress.
    pub(crate) fn reclaim_all<P: Platform>(
        &mut self,
        io: &CmdIo,
        p: &P,
        timeout_ms: u64,
    ) -> Result<()> {
        let mut last_progress = p.now_ns();
        while self.held > 0 {
            let got = self.take(io, p, Slot::Main, self.held.min(PAGES_PER_CMD), false)?;
            let now = p.now_ns();
            if got > 0 {
                last_progress = now;
            } else if now.saturating_sub(last_progress) > timeout_ms.saturating_mul(1_000_000) {
                return Err(Error::Timeout {
                    waiting_for: Wait::PageReclaim {
                        outstanding: self.held,
                    },
                    waited_ms: timeout_ms,
                });
            } else {
                p.relax();
            }
        }
        self.recover_lost(io, p);
        self.free_every_idle_chunk(p);
        Ok(())
    }

    /// After TEARDOWN_HCA, when the device holds none of the pages it admits to: asks it for
    /// the lost pages too. A page it names cleanly is known to be done with (the same word every
    /// take rests on) and is freed with its chunk; the rest stay lost and are quarantined. Best
    /// effort: the firmware that released them in earnest has nothing to return, and a refused
    /// take only leaves them quarantined.
    fn recover_lost<P: Platform>(&mut self, io: &CmdIo, p: &P) {
        // Every successful take names at least one lost page, so this ends.
        while self.stats.lost > 0 {
            let want = (self.stats.lost as usize).min(PAGES_PER_CMD);
            match self.take(io, p, Slot::Main, want, true) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => {
                    log::warn!(
                        "taking back {want} lost pages at close: {e}; they stay quarantined"
                    );
                    break;
                }
            }
        }
        if self.stats.lost > 0 {
            log::info!(
                "{} firmware pages were not given back; their chunks are quarantined",
                self.stats.lost
            );
        }
    }

    /// Takes back up to `want` pages the firmware offered, through `slot`; frees the chunks it
    /// no longer holds any page of. Returns the pages taken.
    pub(crate) fn reclaim<P: Platform>(
        &mut self,
        io: &CmdIo,
        p: &P,
        slot: Slot,
        want: usize,
    ) -> Result<usize> {
        let mut left = want.min(self.held);
        let mut got = 0;
        let r = loop {
            if left == 0 {
                break Ok(());
            }
            match self.take(io, p, slot, left.min(PAGES_PER_CMD), false) {
                Ok(0) => break Ok(()),
                Ok(n) => {
                    got += n;
                    left = left.saturating_sub(n);
                }
                Err(e) => break Err(e),
            }
        };
        self.free_idle_chunks(p);
        r.map(|()| got)
    }

    /// One MANAGE_PAGES take of up to `want` pages through `slot`; returns how many came back.
    /// With `lost_too`, the output may also name lost pages (they are recovered).
    pub(crate) fn take<P: Platform>(
        &mut self,
        io: &CmdIo,
        p: &P,
        slot: Slot,
        want: usize,
        lost_too: bool,
    ) -> Result<usize> {
        let want = want.min(PAGES_PER_CMD);
        let mut input = [0u8; ManagePagesIn::BYTES];
        ViewMut::<ManagePagesIn>::new(&mut input)?
            .set(ManagePagesIn::OPCODE, Opcode::ManagePages as u64)?
            .set(ManagePagesIn::OP_MOD, u64::from(manage_pages::TAKE))?
            .set(ManagePagesIn::INPUT_NUM_ENTRIES, want as u64)?;
        let mut out = [0u8; ManagePagesOut::BYTES + PAGES_PER_CMD * 8];
        let outlen = ManagePagesOut::BYTES + want * 8;
        io.exec(p, slot, &input, &mut out[..outlen])?;
        let n = View::<ManagePagesOut>::new(&out)?.get(ManagePagesOut::OUTPUT_NUM_ENTRIES);
        if n > want as u64 {
            return Err(Error::BadDeviceValue {
                what: "MANAGE_PAGES output_num_entries",
                value: n,
                limit: want as u64,
            });
        }
        let mut found: Vec<Page, PAGES_PER_CMD> = Vec::new();
        let mut bad = None;
        for k in 0..n as usize {
            let at = ManagePagesOut::BYTES + k * 8;
            let mut b = [0u8; 8];
            b.copy_from_slice(&out[at..at + 8]);
            let addr = Be64::from_bytes(b).get();
            match self.locate(addr, lost_too) {
                Some(page) if !found.iter().any(|f| f.at() == page.at()) => {
                    let _ = found.push(page);
                }
                _ => {
                    bad.get_or_insert(addr);
                }
            }
        }
        let count = found.iter().filter(|f| f.given).count();
        let recovered = found.len() - count;
        for f in &found {
            let Some(c) = self.chunks.get_mut(f.chunk) else {
                continue;
            };
            let m = 1u64 << f.bit;
            if bad.is_some() {
                // A given page becomes lost; a lost one stays so.
                c.given &= !m;
                c.lost |= m;
            } else {
                c.given &= !m;
                c.lost &= !m;
                c.used &= !m;
                self.hint = f.chunk;
            }
        }
        self.held -= count;
        if bad.is_none() {
            self.stats.lost -= recovered as u64;
            self.stats.recovered += recovered as u64;
        }
        if let Some(addr) = bad {
            self.stats.lost += count as u64;
            log::error!(
                "MANAGE_PAGES take returned {addr:#x}, not a page the device holds; the {count} \
                 pages of that output are kept from reuse"
            );
            return Err(Error::BadDeviceValue {
                what: "page address returned by MANAGE_PAGES",
                value: addr,
                limit: 0,
            });
        }
        self.stats.taken += count as u64;
        Ok(found.len())
    }

    /// The chunk and page of `addr`, if it is a page the device holds (or, with `lost_too`, a
    /// lost page).
    fn locate(&self, addr: u64, lost_too: bool) -> Option<Page> {
        let chunk_bytes = (CHUNK_PAGES * ADAPTER_PAGE_SIZE) as u64;
        let inside = |c: &Chunk| addr >= c.buf.iova() && addr - c.buf.iova() < chunk_bytes;
        // The chunk pages were last given from first (a page given back is often that one).
        let ci = if self.chunks.get(self.hint).is_some_and(inside) {
            self.hint
        } else {
            self.chunks.iter().position(inside)?
        };
        let c = self.chunks.get(ci)?;
        let off = addr - c.buf.iova();
        let bit = (off / ADAPTER_PAGE_SIZE as u64) as usize;
        let given = c.given & (1 << bit) != 0;
        let lost = lost_too && c.lost & (1 << bit) != 0;
        (off % ADAPTER_PAGE_SIZE as u64 == 0 && (given || lost)).then_some(Page {
            chunk: ci,
            bit,
            given,
        })
    }

    /// The firmware said it released every page (`release_all` in a PAGE_REQUEST) without a
    /// MANAGE_PAGES take: the pages are lost — not the device's by its word, not known to be
    /// unused — and their chunks are quarantined when the pool retires.
    pub(crate) fn forget_all(&mut self) {
        self.chunks.for_each_mut(|c| {
            c.lost |= c.given;
            c.given = 0;
        });
        self.stats.lost += self.held as u64;
        self.held = 0;
    }

    /// Frees every chunk the device holds no page of and none of whose pages was lost — when
    /// the pool has at least two chunks more than the pages in use need (so a device that
    /// gives a page back and asks for it again does not make a chunk go and come, and the
    /// chunks are not scanned after every page).
    pub(crate) fn free_idle_chunks<P: Platform>(&mut self, p: &P) {
        let in_use = self.held.saturating_add(self.stats.lost as usize);
        if self.chunks.len() * CHUNK_PAGES >= in_use + 2 * CHUNK_PAGES {
            self.free_every_idle_chunk(p);
        }
    }

    /// Frees every chunk the device holds no page of and none of whose pages was lost.
    fn free_every_idle_chunk<P: Platform>(&mut self, p: &P) {
        let mut i = 0;
        while let Some(c) = self.chunks.get(i) {
            if c.given == 0 && c.lost == 0 && c.used == 0 {
                if let Some(c) = self.chunks.swap_remove(i) {
                    if let Err(e) = c.buf.free(p) {
                        log::warn!("freeing a firmware page chunk: {e}");
                    }
                }
            } else {
                i += 1;
            }
        }
    }

    /// After the device returned its pages: frees the idle chunks and quarantines those with
    /// lost pages.
    pub(crate) fn retire<P: Platform>(&mut self, p: &P, q: &Quarantine) {
        self.free_every_idle_chunk(p);
        let mut i = 0;
        while let Some(c) = self.chunks.get(i) {
            if c.given == 0 {
                if let Some(c) = self.chunks.swap_remove(i) {
                    q.keep(
                        c.buf,
                        "firmware pages returned by a MANAGE_PAGES output that made no sense",
                    );
                }
            } else {
                i += 1;
            }
        }
        if self.chunks.len() == 0 {
            self.chunks.free(p);
        }
    }

    /// Forgets pages the device may still hold, freeing nothing the device could use: called when
    /// the device is unusable and its pages cannot be reclaimed. Returns the pages leaked.
    pub(crate) fn abandon<P: Platform>(&mut self, p: &P, q: &Quarantine) -> usize {
        let held = self.held;
        if held > 0 {
            log::error!("abandoning {held} firmware pages on an unusable device");
        }
        // Every chunk stays mapped and is never reused: the device may still write any page.
        for c in self.chunks.iter() {
            q.count(
                c.buf.len() as u64,
                1,
                "firmware pages of an unusable device",
            );
        }
        // Dropping a DmaBuf never frees its memory (only `DmaBuf::free` does). The table itself
        // is host memory the device never reaches: freed.
        self.chunks.drain_each(drop);
        self.chunks.free(p);
        self.held = 0;
        held
    }
}
