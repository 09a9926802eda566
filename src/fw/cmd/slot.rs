//! The command queue's entries: laying a command out in a slot (entry and mailbox chains),
//! ringing it, waiting for the device to hand it back, reading the output.
//!
//! Every entry the device offers (`1 << log_cmdq_size`, at most 32) is used, and several
//! commands are in flight at once, one per entry, each claimed by the thread that runs it: the
//! last entry ([`Slot::Pages`]) only carries the MANAGE_PAGES and QUERY_PAGES that answer page
//! requests, so the firmware's requests never wait behind the commands waiting for them; every
//! other command takes any free entry ([`Slot::Main`]). Entry 0 has mailboxes for the largest
//! command ([`MAX_MAILBOX_BLOCKS`] each way); the others [`SMALL_SLOT_BLOCKS`], enough for every
//! fixed-size command and a create with a few hundred page addresses — a longer command waits
//! for entry 0. Tokens come from one counter, so no two commands in flight share one.

use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};

use mlx5_ifc::consts::{
    CMD_INLINE_BYTES, CMD_TYPE_PCI, MAILBOX_ALIGN, MAILBOX_BYTES, MAILBOX_DATA_BYTES, MAX_COMMANDS,
};
use mlx5_ifc::prm::cmdif::{CmdIfBox, CmdQueueEntry};
use mlx5_ifc::{regs, Be32, CmdInHeader, CmdOutHeader, CmdStatus, DeliveryStatus, View, ViewMut};

use super::health::check_health;
use crate::error::{DeadCause, Error, Result, Wait};
use crate::fw::quarantine::Quarantine;
use crate::io::platform::Platform;
use crate::io::{barrier, DmaBuf};

/// Mailbox blocks per direction of entry 0: commands carry at most `16 + 64 * 512` bytes each way.
pub(super) const MAX_MAILBOX_BLOCKS: usize = 64;
/// The largest command input or output the queue carries.
pub(super) const MAX_CMD_BYTES: usize = CMD_INLINE_BYTES + MAX_MAILBOX_BLOCKS * MAILBOX_DATA_BYTES;
/// Mailbox blocks per direction of the entries other than 0 and the pages entry: commands of
/// up to `16 + 4 * 512` bytes each way.
pub(super) const SMALL_SLOT_BLOCKS: usize = 4;

/// Pages moved per MANAGE_PAGES command.
pub(crate) const PAGES_PER_CMD: usize = 512;

/// Counters of the command interface.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CmdStats {
    /// Commands that completed (successfully or with a firmware status).
    pub executed: u64,
    /// Commands the firmware refused with a non-OK status.
    pub failed: u64,
    /// The most commands the driver had in flight at once.
    pub max_in_flight: u32,
    /// Command entries the driver uses (the pages entry included).
    pub slots: u32,
}

/// Size of a command queue entry.
const ENTRY_BYTES: usize = 64;
/// Offset of the status/ownership byte in an entry.
const STATUS_OWN: usize = 0x3f;
/// Relax iterations between two health-buffer checks while a command is in flight.
const HEALTH_EVERY: u32 = 256;
/// Mailbox blocks of the page slot each way: a MANAGE_PAGES of
/// [`PAGES_PER_CMD`] addresses (16 + 512 × 8 bytes).
pub(crate) const PAGE_SLOT_BLOCKS: usize = 8;
const _: () =
    assert!(16 + PAGES_PER_CMD * 8 <= CMD_INLINE_BYTES + PAGE_SLOT_BLOCKS * MAILBOX_DATA_BYTES);

/// Which entries a command may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    /// Any free entry but the last.
    Main,
    /// The last entry: MANAGE_PAGES and QUERY_PAGES answering page requests.
    Pages,
}

/// The command interface's memory and state, below the firmware-page handling. Shared by the
/// threads running commands: each claims a free entry, whose mailboxes are its own until it
/// has read the output.
#[derive(Debug)]
pub(crate) struct CmdIo {
    mem: Option<CmdMem>,
    log_stride: u8,
    /// Entries in use (the pages entry the last one).
    slots: usize,
    /// Bit `i`: entry `i` is claimed by a thread (or lost to a command that never completed).
    busy: AtomicU32,
    token: AtomicU8,
    timeout_ns: AtomicU64,
    checksum: AtomicBool,
    dead: spin::Mutex<Option<DeadCause>>,
    executed: AtomicU64,
    failed: AtomicU64,
    max_in_flight: AtomicU32,
}

#[derive(Debug)]
struct CmdMem {
    queue: DmaBuf,
    /// Per entry: input and output mailbox chains.
    boxes: heapless::Vec<(DmaBuf, DmaBuf), MAX_COMMANDS>,
}

/// A command handed to the device, not yet collected.
#[derive(Debug)]
struct Posted {
    slot: usize,
    at: usize,
    token: u8,
    opcode: u16,
    op_mod: u16,
    out_blocks: usize,
    start_ns: u64,
    timeout_ns: u64,
}

impl Posted {
    /// Platform time after which the wait for this command gives up.
    fn deadline_ns(&self) -> u64 {
        self.start_ns.saturating_add(self.timeout_ns)
    }
}

/// The next command token: never 0.
fn next_token(t: u8) -> u8 {
    match t.wrapping_add(1) {
        0 => 1,
        n => n,
    }
}

fn xor8(bytes: &[u8]) -> u8 {
    bytes.iter().fold(0, |a, b| a ^ b)
}

fn blocks_for(len: usize) -> usize {
    len.saturating_sub(CMD_INLINE_BYTES)
        .div_ceil(MAILBOX_DATA_BYTES)
}

/// Mailbox blocks of entry `i` of `slots`.
fn slot_blocks(i: usize, slots: usize) -> usize {
    if i + 1 == slots {
        PAGE_SLOT_BLOCKS
    } else if i == 0 {
        MAX_MAILBOX_BLOCKS
    } else {
        SMALL_SLOT_BLOCKS
    }
}

impl CmdIo {
    /// Allocates the queue page and each entry's mailboxes: `slots` entries (2 to 32, the last
    /// one for page requests).
    pub(crate) fn new<P: Platform>(
        p: &P,
        slots: usize,
        log_stride: u8,
        timeout_ms: u64,
    ) -> Result<Self> {
        if !(2..=MAX_COMMANDS).contains(&slots) {
            return Err(Error::InvalidArgument {
                op: "set up the command queue",
                field: "entries",
                requested: slots as u64,
                max: MAX_COMMANDS as u64,
                limit: "2 entries at least (the last answers page requests), 32 at most (PRM)",
            });
        }
        let queue = DmaBuf::alloc(p, 4096, 4096).map_err(|source| Error::Platform {
            op: "allocate the command queue page",
            source,
        })?;
        let mut mem = CmdMem {
            queue,
            boxes: heapless::Vec::new(),
        };
        for i in 0..slots {
            let bytes = slot_blocks(i, slots) * MAILBOX_ALIGN;
            let inbox = match DmaBuf::alloc(p, bytes, MAILBOX_ALIGN) {
                Ok(b) => b,
                Err(source) => {
                    Self::free_mem(p, mem);
                    return Err(Error::Platform {
                        op: "allocate command input mailboxes",
                        source,
                    });
                }
            };
            let outbox = match DmaBuf::alloc(p, bytes, MAILBOX_ALIGN) {
                Ok(b) => b,
                Err(source) => {
                    let _ = inbox.free(p);
                    Self::free_mem(p, mem);
                    return Err(Error::Platform {
                        op: "allocate command output mailboxes",
                        source,
                    });
                }
            };
            // `slots` ≤ MAX_COMMANDS, the vector's capacity.
            let _ = mem.boxes.push((inbox, outbox));
        }
        Ok(Self {
            mem: Some(mem),
            log_stride,
            slots,
            busy: AtomicU32::new(0),
            token: AtomicU8::new(0),
            timeout_ns: AtomicU64::new(timeout_ms.saturating_mul(1_000_000)),
            checksum: AtomicBool::new(false),
            dead: spin::Mutex::new(None),
            executed: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            max_in_flight: AtomicU32::new(0),
        })
    }

    fn free_mem<P: Platform>(p: &P, m: CmdMem) {
        let bufs = core::iter::once(m.queue).chain(m.boxes.into_iter().flat_map(|(i, o)| [i, o]));
        for b in bufs {
            if let Err(e) = b.free(p) {
                log::warn!("freeing command interface memory: {e}");
            }
        }
    }

    pub(crate) fn iova(&self) -> u64 {
        self.mem.as_ref().map_or(0, |m| m.queue.iova())
    }

    pub(crate) fn set_timeout_ms(&self, ms: u64) {
        self.timeout_ns
            .store(ms.saturating_mul(1_000_000), Ordering::Relaxed);
    }

    /// Whether the firmware verifies signatures (cmd_hca_cap `cmdif_checksum` = 3).
    pub(crate) fn set_checksum(&self, on: bool) {
        self.checksum.store(on, Ordering::Relaxed);
    }

    /// Counters.
    pub(crate) fn stats(&self) -> CmdStats {
        CmdStats {
            executed: self.executed.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            max_in_flight: self.max_in_flight.load(Ordering::Relaxed),
            slots: self.slots as u32,
        }
    }

    /// Why the queue no longer issues commands, if it does not.
    pub(crate) fn dead(&self) -> Option<DeadCause> {
        *self.dead.lock()
    }

    pub(crate) fn mark_dead(&self, cause: DeadCause) {
        self.dead.lock().get_or_insert(cause);
    }

    pub(crate) fn release<P: Platform>(&mut self, p: &P) {
        if let Some(m) = self.mem.take() {
            Self::free_mem(p, m);
        }
        self.mark_dead(DeadCause::Closed);
    }

    pub(crate) fn abandon(&mut self, q: &Quarantine) {
        if let Some(m) = self.mem.take() {
            q.keep(m.queue, "command queue of an unusable device");
            for (i, o) in m.boxes {
                q.keep(i, "command mailboxes of an unusable device");
                q.keep(o, "command mailboxes of an unusable device");
            }
        }
        self.mark_dead(DeadCause::Closed);
    }

    /// Claims a free entry of `kind` with room for `blocks` mailbox blocks each way, waiting
    /// (until `deadline_ns`) while every such entry is in use.
    fn claim<P: Platform>(
        &self,
        p: &P,
        kind: Slot,
        blocks: usize,
        opcode: u16,
        start_ns: u64,
        timeout_ns: u64,
    ) -> Result<usize> {
        let pages = self.slots - 1;
        // Small commands try the small entries first, keeping entry 0 for long ones.
        let order = |k: usize| match kind {
            Slot::Pages => (k == 0).then_some(pages),
            Slot::Main if k < pages => Some(if k + 1 < pages { k + 1 } else { 0 }),
            Slot::Main => None,
        };
        let mut spins = 0u32;
        loop {
            for k in 0..self.slots {
                let Some(i) = order(k) else { break };
                if blocks > slot_blocks(i, self.slots) {
                    continue;
                }
                let bit = 1u32 << i;
                let prev = self.busy.fetch_or(bit, Ordering::Acquire);
                if prev & bit == 0 {
                    self.max_in_flight
                        .fetch_max((prev | bit).count_ones(), Ordering::Relaxed);
                    return Ok(i);
                }
            }
            if let Some(cause) = self.dead() {
                return Err(Error::Unusable { opcode, cause });
            }
            let waited = p.now_ns().saturating_sub(start_ns);
            if waited > timeout_ns {
                return Err(Error::Timeout {
                    waiting_for: Wait::CommandSlot { opcode },
                    waited_ms: waited / 1_000_000,
                });
            }
            spins = spins.wrapping_add(1);
            if spins % HEALTH_EVERY == 0 {
                self.check_health(p)?;
            }
            p.relax();
        }
    }

    /// The health buffer, read while waiting: a fatal state (or a device gone from the bus)
    /// leaves the queue unusable.
    fn check_health<P: Platform>(&self, p: &P) -> Result<()> {
        check_health(p).inspect_err(|e| {
            self.mark_dead(match *e {
                Error::Health { synd, .. } => DeadCause::Fatal { synd },
                _ => DeadCause::Gone,
            });
        })
    }

    /// Gives entry `slot` back to the other threads.
    fn unclaim(&self, slot: usize) {
        self.busy.fetch_and(!(1u32 << slot), Ordering::Release);
    }

    /// Executes one command in an entry of `kind` and waits for it, running `between` after
    /// every poll that found it still the device's (the platform clock's deadline of the
    /// command passed to it). A timeout or a fatal health state leaves the device unusable and
    /// the entry lost (the device may still own it).
    pub(crate) fn exec_with<P: Platform>(
        &self,
        p: &P,
        kind: Slot,
        input: &[u8],
        output: &mut [u8],
        mut between: impl FnMut(&P, u64) -> Result<()>,
    ) -> Result<()> {
        let head = View::<CmdInHeader>::new(input)?;
        let opcode = head.get(CmdInHeader::OPCODE) as u16;
        let op_mod = head.get(CmdInHeader::OP_MOD) as u16;
        if let Some(cause) = self.dead() {
            return Err(Error::Unusable { opcode, cause });
        }
        let max = match kind {
            Slot::Main => MAX_CMD_BYTES,
            Slot::Pages => CMD_INLINE_BYTES + PAGE_SLOT_BLOCKS * MAILBOX_DATA_BYTES,
        };
        for (len, field) in [
            (input.len(), "input length"),
            (output.len(), "output length"),
        ] {
            if !(8..=max).contains(&len) {
                return Err(Error::InvalidArgument {
                    op: "command",
                    field,
                    requested: len as u64,
                    max: max as u64,
                    limit: "the command entry's mailbox blocks (8 bytes at least)",
                });
            }
        }
        let timeout_ns = self.timeout_ns.load(Ordering::Relaxed);
        let start_ns = p.now_ns();
        let blocks = blocks_for(input.len()).max(blocks_for(output.len()));
        let slot = self.claim(p, kind, blocks, opcode, start_ns, timeout_ns)?;
        let mut posted = Posted {
            slot,
            at: slot << self.log_stride,
            token: 0,
            opcode,
            op_mod,
            out_blocks: blocks_for(output.len()),
            start_ns,
            timeout_ns,
        };
        if let Err(e) = self.post(p, &mut posted, input, output.len()) {
            self.unclaim(slot);
            return Err(e);
        }
        let deadline = posted.deadline_ns();
        match self.wait(p, &posted, |p| between(p, deadline)) {
            Ok(()) => {
                let r = self.collect(&posted, output);
                self.unclaim(slot);
                r
            }
            // The entry is the device's still (timeout, fatal health): never reused. Any
            // other error (`between` failed) also leaves it to the device, which is unusable.
            Err(e) => Err(e),
        }
    }

    /// Executes one command in an entry of `kind` and waits for it, answering nothing
    /// meanwhile (the page pool's own commands: bring-up, teardown, and the answers to page
    /// requests).
    pub(crate) fn exec<P: Platform>(
        &self,
        p: &P,
        kind: Slot,
        input: &[u8],
        output: &mut [u8],
    ) -> Result<()> {
        self.exec_with(p, kind, input, output, |_, _| Ok(()))
    }

    /// Lays out a mailbox chain in `bufs`: block `k` carries `data[k]` (may be empty for output).
    fn write_chain(
        checksum: bool,
        bufs: &DmaBuf,
        data: &[u8],
        blocks: usize,
        token: u8,
    ) -> Result<()> {
        for k in 0..blocks {
            let mut block = [0u8; MAILBOX_BYTES];
            let start = k * MAILBOX_DATA_BYTES;
            let chunk = data
                .get(start..data.len().min(start + MAILBOX_DATA_BYTES))
                .unwrap_or(&[]);
            block[..chunk.len()].copy_from_slice(chunk);
            let next = if k + 1 < blocks {
                bufs.iova() + ((k + 1) * MAILBOX_ALIGN) as u64
            } else {
                0
            };
            let mut v = ViewMut::<CmdIfBox>::new(&mut block)?;
            v.set(CmdIfBox::NEXT_POINTER_63_32, next >> 32)?;
            v.set(CmdIfBox::NEXT_POINTER_31_10, (next & 0xffff_ffff) >> 10)?;
            v.set(CmdIfBox::BLOCK_NUMBER, k as u64)?;
            v.set(CmdIfBox::TOKEN, u64::from(token))?;
            if checksum {
                let ctrl = !xor8(&block[0x200..0x23e]);
                block[0x23e] = ctrl;
                block[0x23f] = !xor8(&block[..0x23f]);
            }
            bufs.write_bytes(k * MAILBOX_ALIGN, &block)?;
        }
        Ok(())
    }

    /// Writes `input` into the claimed entry of `posted` (entry, input chain, empty output
    /// chain for `outlen` bytes; lengths checked by the caller), takes its token, hands the
    /// entry to the device and rings its doorbell.
    fn post<P: Platform>(
        &self,
        p: &P,
        posted: &mut Posted,
        input: &[u8],
        outlen: usize,
    ) -> Result<()> {
        let Some((mem, (inbox, outbox))) = self
            .mem
            .as_ref()
            .and_then(|m| m.boxes.get(posted.slot).map(|b| (m, b)))
        else {
            return Err(Error::Unusable {
                opcode: posted.opcode,
                cause: DeadCause::Closed,
            });
        };
        // Ok always (the closure never refuses); the token is the successor of the old value.
        let (Ok(prev) | Err(prev)) =
            self.token
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                    Some(next_token(t))
                });
        let token = next_token(prev);
        posted.token = token;
        let in_blocks = blocks_for(input.len());
        let out_blocks = posted.out_blocks;
        let tail = input.get(CMD_INLINE_BYTES..).unwrap_or(&[]);
        let checksum = self.checksum.load(Ordering::Relaxed);
        Self::write_chain(checksum, inbox, tail, in_blocks, token)?;
        Self::write_chain(checksum, outbox, &[], out_blocks, token)?;

        let mut entry = [0u8; ENTRY_BYTES];
        let mut e = ViewMut::<CmdQueueEntry>::new(&mut entry)?;
        e.set(CmdQueueEntry::TYPE, u64::from(CMD_TYPE_PCI))?;
        e.set(CmdQueueEntry::INPUT_LENGTH, input.len() as u64)?;
        e.set(CmdQueueEntry::OUTPUT_LENGTH, outlen as u64)?;
        if in_blocks > 0 {
            let a = inbox.iova();
            e.set(CmdQueueEntry::INPUT_MAILBOX_POINTER_63_32, a >> 32)?;
            e.set(
                CmdQueueEntry::INPUT_MAILBOX_POINTER_31_9,
                (a & 0xffff_ffff) >> 9,
            )?;
        }
        if out_blocks > 0 {
            let a = outbox.iova();
            e.set(CmdQueueEntry::OUTPUT_MAILBOX_POINTER_63_32, a >> 32)?;
            e.set(
                CmdQueueEntry::OUTPUT_MAILBOX_POINTER_31_9,
                (a & 0xffff_ffff) >> 9,
            )?;
        }
        let inline = input.len().min(CMD_INLINE_BYTES);
        e.bytes_mut(CmdQueueEntry::COMMAND_INPUT_INLINE_DATA)[..inline]
            .copy_from_slice(&input[..inline]);
        e.set(CmdQueueEntry::TOKEN, u64::from(token))?;
        e.set(CmdQueueEntry::OWNERSHIP, 1)?;
        entry[0x3d] = !xor8(&entry);

        mem.queue.write_bytes(posted.at, &entry)?;
        barrier::dma_wmb();
        p.bar_write32(u64::from(regs::CMD_DBELL), Be32::new(1 << posted.slot));
        Ok(())
    }

    /// Waits for the device to hand `posted` back: health checked every [`HEALTH_EVERY`]
    /// polls, the platform clock against the command timeout, `between` run after every poll
    /// that found the entry still the device's. A timeout or a fatal health state leaves the
    /// device unusable (the entry may still be the device's).
    fn wait<P: Platform>(
        &self,
        p: &P,
        posted: &Posted,
        mut between: impl FnMut(&P) -> Result<()>,
    ) -> Result<()> {
        let mut spins = 0u32;
        loop {
            if self.owned_back(posted)? {
                return Ok(());
            }
            spins = spins.wrapping_add(1);
            if spins % HEALTH_EVERY == 0 {
                self.check_health(p)?;
            }
            let waited = p.now_ns().saturating_sub(posted.start_ns);
            if waited > posted.timeout_ns {
                log::error!(
                    "{}({:#x}) in command slot {} did not complete; the device is now unusable",
                    mlx5_ifc::opcode_name(posted.opcode),
                    posted.opcode,
                    posted.slot
                );
                self.mark_dead(DeadCause::CommandTimeout {
                    opcode: posted.opcode,
                });
                return Err(Error::Timeout {
                    waiting_for: Wait::Command {
                        opcode: posted.opcode,
                    },
                    waited_ms: waited / 1_000_000,
                });
            }
            between(p)?;
            p.relax();
        }
    }

    /// Whether the device has handed the entry back (ownership bit 0).
    fn owned_back(&self, posted: &Posted) -> Result<bool> {
        let Some(mem) = self.mem.as_ref() else {
            return Err(Error::Unusable {
                opcode: posted.opcode,
                cause: DeadCause::Closed,
            });
        };
        // The entry's last 8 bytes in one acquire load (the device writes that word whole;
        // the status/ownership byte is its last byte).
        let last = mem.queue.read_u64_acquire(posted.at + STATUS_OWN - 7)?;
        Ok(last[7] & 1 == 0)
    }

    /// Reads the output of a command the device handed back: delivery status, the inline
    /// output and the output mailboxes (each block's token checked), then the firmware status
    /// ([`Error::Cmd`] when not OK).
    fn collect(&self, posted: &Posted, output: &mut [u8]) -> Result<()> {
        let opcode = posted.opcode;
        let Some(mem) = self.mem.as_ref() else {
            return Err(Error::Unusable {
                opcode,
                cause: DeadCause::Closed,
            });
        };
        let Some((_, outbox)) = mem.boxes.get(posted.slot) else {
            return Err(Error::Unusable {
                opcode,
                cause: DeadCause::Closed,
            });
        };
        barrier::dma_rmb();
        let status_own = mem.queue.read_u8(posted.at + STATUS_OWN)?;
        let delivery = DeliveryStatus::from_raw(status_own >> 1);
        if delivery != DeliveryStatus::Ok {
            return Err(Error::Delivery {
                opcode,
                status: delivery,
            });
        }
        let mut back = [0u8; ENTRY_BYTES];
        mem.queue.read_bytes(posted.at, &mut back)?;
        let eview = View::<CmdQueueEntry>::new(&back)?;
        let out_inline = eview.bytes(CmdQueueEntry::COMMAND_OUTPUT_INLINE_DATA);
        let n = output.len().min(CMD_INLINE_BYTES);
        output[..n].copy_from_slice(&out_inline[..n]);
        for k in 0..posted.out_blocks {
            let start = CMD_INLINE_BYTES + k * MAILBOX_DATA_BYTES;
            let end = output.len().min(start + MAILBOX_DATA_BYTES);
            let mut trailer = [0u8; 8];
            outbox.read_bytes(k * MAILBOX_ALIGN + 0x238, &mut trailer)?;
            let block_token = trailer[5];
            if block_token != posted.token {
                return Err(Error::BadDeviceValue {
                    what: "output mailbox token",
                    value: u64::from(block_token),
                    limit: u64::from(posted.token),
                });
            }
            if let Some(dst) = output.get_mut(start..end) {
                outbox.read_bytes(k * MAILBOX_ALIGN, dst)?;
            }
        }
        self.executed.fetch_add(1, Ordering::Relaxed);
        let out = View::<CmdOutHeader>::new(output)?;
        let status = CmdStatus::from_raw(out.get(CmdOutHeader::STATUS) as u8);
        if status != CmdStatus::Ok {
            self.failed.fetch_add(1, Ordering::Relaxed);
            let syndrome = out.get32(CmdOutHeader::SYNDROME);
            log::debug!(
                "{}({opcode:#x}) op_mod {:#x}: status {status}, syndrome {syndrome:#x}",
                mlx5_ifc::opcode_name(opcode),
                posted.op_mod
            );
            return Err(Error::Cmd {
                opcode,
                op_mod: posted.op_mod,
                status,
                syndrome,
            });
        }
        Ok(())
    }
}
