//! Firmware pages (PRM "Page Management"): memory the device borrows from the host.
//!
//! The firmware asks for 4 KiB pages (QUERY_PAGES: boot, init, and at run time) and gets them with
//! MANAGE_PAGES give; after TEARDOWN_HCA it hands them back (MANAGE_PAGES take). The pool
//! allocates DMA memory in chunks of [`CHUNK_PAGES`] pages, keeps a bitmap of the pages the
//! device holds, and frees a chunk once the device has returned all of it. A page address the
//! device returns that the pool never gave is refused, never trusted.

use heapless::Vec;
use mlx5_ifc::consts::{manage_pages, ADAPTER_PAGE_SIZE};
use mlx5_ifc::prm::hca::{ManagePagesIn, ManagePagesOut, QueryPagesIn, QueryPagesOut};
use mlx5_ifc::{Be64, Layout, Opcode, View, ViewMut};

use crate::error::{Error, Result, Wait};
use crate::fw::cmd::CmdQueue;
use crate::fw::quarantine::Quarantine;
use crate::io::DmaBuf;
use crate::platform::Platform;

/// Pages per DMA chunk (one bit each in a `u64`).
pub const CHUNK_PAGES: usize = 64;
/// Chunks the pool can hold: 512 × 64 pages × 4 KiB = 128 MiB lent to the firmware at most.
pub const MAX_CHUNKS: usize = 512;
/// Pages moved per MANAGE_PAGES command.
pub const PAGES_PER_CMD: usize = 512;

#[derive(Debug)]
struct Chunk {
    buf: DmaBuf,
    /// Bit i set: page i is held by the device.
    given: u64,
    /// Bit i set: page i is in use (given) or reserved; pages past the chunk's size stay set.
    used: u64,
}

/// The pages lent to the firmware.
#[derive(Debug, Default)]
pub struct PagePool {
    chunks: Vec<Chunk, MAX_CHUNKS>,
    held: usize,
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
    pub fn held(&self) -> usize {
        self.held
    }

    /// Asks the firmware how many pages it wants (`num_pages` is signed: negative = it has pages
    /// to give back).
    pub fn query<P: Platform>(cmd: &mut CmdQueue, p: &P, which: PageRequest) -> Result<i32> {
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
        cmd.exec(p, &i, &mut o)?;
        Ok(View::<QueryPagesOut>::new(&o)?.get32(QueryPagesOut::NUM_PAGES) as i32)
    }

    /// Queries `which` and gives the firmware what it asks for. Returns the pages given.
    pub fn satisfy<P: Platform>(
        &mut self,
        cmd: &mut CmdQueue,
        p: &P,
        which: PageRequest,
    ) -> Result<usize> {
        let n = Self::query(cmd, p, which)?;
        if n < 0 {
            log::debug!(
                "firmware offers {} pages back on a {which:?} query",
                -(n as i64)
            );
            return Ok(0);
        }
        let n = n as usize;
        let cap = MAX_CHUNKS * CHUNK_PAGES;
        if self.held + n > cap {
            return Err(Error::BadDeviceValue {
                what: "QUERY_PAGES num_pages",
                value: n as u64,
                limit: (cap - self.held) as u64,
            });
        }
        self.give(cmd, p, n)?;
        log::debug!("gave {n} {which:?} pages (device holds {})", self.held);
        Ok(n)
    }

    fn take_free_page<P: Platform>(&mut self, p: &P) -> Result<(usize, usize)> {
        if let Some(ci) = self.chunks.iter().position(|c| c.used != u64::MAX) {
            let c = &mut self.chunks[ci];
            let bit = (!c.used).trailing_zeros() as usize;
            c.used |= 1 << bit;
            return Ok((ci, bit));
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
        };
        if let Err(chunk) = self.chunks.push(chunk) {
            let _ = chunk.buf.free(p);
            return Err(Error::Capacity {
                what: "firmware page pool",
                limit: MAX_CHUNKS * CHUNK_PAGES,
            });
        }
        Ok((self.chunks.len() - 1, 0))
    }

    /// Gives `n` pages to the firmware.
    pub fn give<P: Platform>(&mut self, cmd: &mut CmdQueue, p: &P, n: usize) -> Result<()> {
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
                        return Err(e);
                    }
                };
                let _ = picked.push((ci, bit));
                let addr = self.chunks[ci].buf.iova() + (bit * ADAPTER_PAGE_SIZE) as u64;
                let at = ManagePagesIn::BYTES + k * 8;
                input[at..at + 8].copy_from_slice(&Be64::new(addr).to_bytes());
            }
            let len = ManagePagesIn::BYTES + batch * 8;
            ViewMut::<ManagePagesIn>::new(&mut input)?
                .set(ManagePagesIn::OPCODE, Opcode::ManagePages as u64)?
                .set(ManagePagesIn::OP_MOD, u64::from(manage_pages::GIVE))?
                .set(ManagePagesIn::INPUT_NUM_ENTRIES, batch as u64)?;
            let mut out = [0u8; ManagePagesOut::BYTES];
            if let Err(e) = cmd.exec(p, &input[..len], &mut out) {
                self.unreserve(&picked);
                return Err(e);
            }
            for &(ci, bit) in &picked {
                self.chunks[ci].given |= 1 << bit;
            }
            self.held += batch;
            left -= batch;
        }
        Ok(())
    }

    fn unreserve(&mut self, picked: &[(usize, usize)]) {
        for &(ci, bit) in picked {
            if let Some(c) = self.chunks.get_mut(ci) {
                c.used &= !(1 << bit);
            }
        }
    }

    /// Takes pages back until the firmware holds none, or `timeout_ms` pass without progress.
    pub fn reclaim_all<P: Platform>(
        &mut self,
        cmd: &mut CmdQueue,
        p: &P,
        timeout_ms: u64,
    ) -> Result<()> {
        let mut last_progress = p.now_ns();
        while self.held > 0 {
            let got = self.take(cmd, p, self.held.min(PAGES_PER_CMD))?;
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
        self.free_idle_chunks(p);
        Ok(())
    }

    /// One MANAGE_PAGES take of up to `want` pages; returns how many came back.
    pub fn take<P: Platform>(&mut self, cmd: &mut CmdQueue, p: &P, want: usize) -> Result<usize> {
        let want = want.min(PAGES_PER_CMD);
        let mut input = [0u8; ManagePagesIn::BYTES];
        ViewMut::<ManagePagesIn>::new(&mut input)?
            .set(ManagePagesIn::OPCODE, Opcode::ManagePages as u64)?
            .set(ManagePagesIn::OP_MOD, u64::from(manage_pages::TAKE))?
            .set(ManagePagesIn::INPUT_NUM_ENTRIES, want as u64)?;
        let mut out = [0u8; ManagePagesOut::BYTES + PAGES_PER_CMD * 8];
        let outlen = ManagePagesOut::BYTES + want * 8;
        cmd.exec(p, &input, &mut out[..outlen])?;
        let n = View::<ManagePagesOut>::new(&out)?.get(ManagePagesOut::OUTPUT_NUM_ENTRIES);
        if n > want as u64 {
            return Err(Error::BadDeviceValue {
                what: "MANAGE_PAGES output_num_entries",
                value: n,
                limit: want as u64,
            });
        }
        for k in 0..n as usize {
            let at = ManagePagesOut::BYTES + k * 8;
            let mut b = [0u8; 8];
            b.copy_from_slice(&out[at..at + 8]);
            let addr = Be64::from_bytes(b).get();
            self.returned(addr)?;
        }
        Ok(n as usize)
    }

    fn returned(&mut self, addr: u64) -> Result<()> {
        let chunk_bytes = (CHUNK_PAGES * ADAPTER_PAGE_SIZE) as u64;
        let found = self
            .chunks
            .iter_mut()
            .find(|c| addr >= c.buf.iova() && addr < c.buf.iova() + chunk_bytes);
        let unknown = Error::BadDeviceValue {
            what: "page address returned by MANAGE_PAGES",
            value: addr,
            limit: 0,
        };
        let c = found.ok_or(unknown.clone())?;
        let off = addr - c.buf.iova();
        let bit = (off / ADAPTER_PAGE_SIZE as u64) as usize;
        if off % ADAPTER_PAGE_SIZE as u64 != 0 || c.given & (1 << bit) == 0 {
            return Err(unknown);
        }
        c.given &= !(1 << bit);
        c.used &= !(1 << bit);
        self.held -= 1;
        Ok(())
    }

    /// Frees every chunk the device holds no page of.
    pub fn free_idle_chunks<P: Platform>(&mut self, p: &P) {
        let mut i = 0;
        while i < self.chunks.len() {
            if self.chunks[i].given == 0 {
                let c = self.chunks.swap_remove(i);
                if let Err(e) = c.buf.free(p) {
                    log::warn!("freeing a firmware page chunk: {e}");
                }
            } else {
                i += 1;
            }
        }
    }

    /// Forgets pages the device may still hold, freeing nothing the device could use: called when
    /// the device is unusable and its pages cannot be reclaimed. Returns the pages leaked.
    pub(crate) fn abandon(&mut self, q: &Quarantine) -> usize {
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
        // Dropping a DmaBuf never frees its memory (only `DmaBuf::free` does).
        self.chunks.clear();
        self.held = 0;
        held
    }
}
