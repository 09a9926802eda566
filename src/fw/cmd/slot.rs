//! The command queue's entries: laying a command out in a slot (entry and mailbox chains),
//! ringing it, waiting for the device to hand it back, reading the output.
//!
//! Two slots are used, each with mailbox chains of its own: [`Slot::Main`] (entry 0) carries
//! every command, [`Slot::Pages`] (entry 1) only the MANAGE_PAGES the driver sends while a
//! command in entry 0 waits for the firmware pages it needs. Tokens come from one counter, so
//! the two commands in flight never share one.

use mlx5_ifc::consts::{
    CMD_INLINE_BYTES, CMD_TYPE_PCI, MAILBOX_ALIGN, MAILBOX_BYTES, MAILBOX_DATA_BYTES,
};
use mlx5_ifc::prm::cmdif::{CmdIfBox, CmdQueueEntry};
use mlx5_ifc::{regs, Be32, CmdInHeader, CmdOutHeader, CmdStatus, DeliveryStatus, View, ViewMut};

use super::health::check_health;
use crate::error::{DeadCause, Error, Result, Wait};
use crate::fw::quarantine::Quarantine;
use crate::io::platform::Platform;
use crate::io::{barrier, DmaBuf};

/// Mailbox blocks per direction: commands carry at most `16 + 64 * 512` bytes each way.
pub(super) const MAX_MAILBOX_BLOCKS: usize = 64;
/// The largest command input or output the queue carries.
pub(super) const MAX_CMD_BYTES: usize = CMD_INLINE_BYTES + MAX_MAILBOX_BLOCKS * MAILBOX_DATA_BYTES;

/// Pages moved per MANAGE_PAGES command.
pub(crate) const PAGES_PER_CMD: usize = 512;

/// Counters of the command interface.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CmdStats {
    /// Commands that completed (successfully or with a firmware status).
    pub executed: u64,
    /// Commands the firmware refused with a non-OK status.
    pub failed: u64,
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

/// The command queue entries the driver uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    /// Entry 0: every command.
    Main = 0,
    /// Entry 1: MANAGE_PAGES answering a page request while entry 0 waits.
    Pages = 1,
}

impl Slot {
    const ALL: [Slot; 2] = [Slot::Main, Slot::Pages];

    fn blocks(self) -> usize {
        match self {
            Slot::Main => MAX_MAILBOX_BLOCKS,
            Slot::Pages => PAGE_SLOT_BLOCKS,
        }
    }
}

/// The command interface's memory and state, below the firmware-page handling.
#[derive(Debug)]
pub(crate) struct CmdIo {
    mem: Option<CmdMem>,
    log_stride: u8,
    token: u8,
    timeout_ns: u64,
    pub(crate) checksum: bool,
    dead: Option<DeadCause>,
    pub(crate) stats: CmdStats,
}

#[derive(Debug)]
struct CmdMem {
    queue: DmaBuf,
    /// Per slot: input and output mailbox chains.
    boxes: [(DmaBuf, DmaBuf); 2],
}

/// A command handed to the device, not yet collected.
#[derive(Debug)]
pub(crate) struct Posted {
    slot: Slot,
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
    pub(crate) fn deadline_ns(&self) -> u64 {
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

impl CmdIo {
    /// Allocates the queue page and each slot's mailboxes.
    pub(crate) fn new<P: Platform>(p: &P, log_stride: u8, timeout_ms: u64) -> Result<Self> {
        let mut bufs: heapless::Vec<DmaBuf, 5> = heapless::Vec::new();
        let mut wants: heapless::Vec<(usize, usize, &'static str), 5> = heapless::Vec::new();
        let _ = wants.push((4096, 4096, "allocate the command queue page"));
        for s in Slot::ALL {
            let bytes = s.blocks() * MAILBOX_ALIGN;
            let _ = wants.push((bytes, MAILBOX_ALIGN, "allocate command input mailboxes"));
            let _ = wants.push((bytes, MAILBOX_ALIGN, "allocate command output mailboxes"));
        }
        for &(len, align, op) in &wants {
            match DmaBuf::alloc(p, len, align) {
                Ok(b) => {
                    let _ = bufs.push(b);
                }
                Err(source) => {
                    for b in bufs {
                        let _ = b.free(p);
                    }
                    return Err(Error::Platform { op, source });
                }
            }
        }
        let mut it = bufs.into_iter();
        let (Some(queue), Some(i0), Some(o0), Some(i1), Some(o1)) =
            (it.next(), it.next(), it.next(), it.next(), it.next())
        else {
            return Err(Error::Capacity {
                what: "command interface buffers",
                limit: 5,
            });
        };
        Ok(Self {
            mem: Some(CmdMem {
                queue,
                boxes: [(i0, o0), (i1, o1)],
            }),
            log_stride,
            token: 0,
            timeout_ns: timeout_ms.saturating_mul(1_000_000),
            checksum: false,
            dead: None,
            stats: CmdStats::default(),
        })
    }

    pub(crate) fn iova(&self) -> u64 {
        self.mem.as_ref().map_or(0, |m| m.queue.iova())
    }

    pub(crate) fn set_timeout_ms(&mut self, ms: u64) {
        self.timeout_ns = ms.saturating_mul(1_000_000);
    }

    /// Why the queue no longer issues commands, if it does not.
    pub(crate) fn dead(&self) -> Option<DeadCause> {
        self.dead
    }

    pub(crate) fn mark_dead(&mut self, cause: DeadCause) {
        self.dead.get_or_insert(cause);
    }

    pub(crate) fn release<P: Platform>(&mut self, p: &P) {
        if let Some(m) = self.mem.take() {
            let [(i0, o0), (i1, o1)] = m.boxes;
            for b in [m.queue, i0, o0, i1, o1] {
                if let Err(e) = b.free(p) {
                    log::warn!("freeing command interface memory: {e}");
                }
            }
        }
        self.mark_dead(DeadCause::Closed);
    }

    pub(crate) fn abandon(&mut self, q: &Quarantine) {
        if let Some(m) = self.mem.take() {
            let [(i0, o0), (i1, o1)] = m.boxes;
            for b in [m.queue, i0, o0, i1, o1] {
                q.keep(b, "command queue of an unusable device");
            }
        }
        self.mark_dead(DeadCause::Closed);
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

    /// Writes `input` into `slot` (entry, input chain, empty output chain of `outlen` bytes),
    /// hands the entry to the device and rings its doorbell.
    pub(crate) fn post<P: Platform>(
        &mut self,
        p: &P,
        slot: Slot,
        input: &[u8],
        outlen: usize,
    ) -> Result<Posted> {
        let head = View::<CmdInHeader>::new(input)?;
        let opcode = head.get(CmdInHeader::OPCODE) as u16;
        let op_mod = head.get(CmdInHeader::OP_MOD) as u16;
        if let Some(cause) = self.dead {
            return Err(Error::Unusable { opcode, cause });
        }
        let Some(mem) = self.mem.as_ref() else {
            return Err(Error::Unusable {
                opcode,
                cause: DeadCause::Closed,
            });
        };
        let max = (CMD_INLINE_BYTES + slot.blocks() * MAILBOX_DATA_BYTES).min(MAX_CMD_BYTES);
        for (len, field) in [(input.len(), "input length"), (outlen, "output length")] {
            if !(8..=max).contains(&len) {
                return Err(Error::InvalidArgument {
                    op: "command",
                    field,
                    requested: len as u64,
                    max: max as u64,
                    limit: "the slot's mailbox blocks (8 bytes at least)",
                });
            }
        }
        self.token = next_token(self.token);
        let token = self.token;
        let (inbox, outbox) = &mem.boxes[slot as usize];
        let in_blocks = blocks_for(input.len());
        let out_blocks = blocks_for(outlen);
        let tail = input.get(CMD_INLINE_BYTES..).unwrap_or(&[]);
        Self::write_chain(self.checksum, inbox, tail, in_blocks, token)?;
        Self::write_chain(self.checksum, outbox, &[], out_blocks, token)?;

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

        let at = (slot as usize) << self.log_stride;
        mem.queue.write_bytes(at, &entry)?;
        barrier::dma_wmb();
        p.bar_write32(u64::from(regs::CMD_DBELL), Be32::new(1 << slot as u32));
        Ok(Posted {
            slot,
            at,
            token,
            opcode,
            op_mod,
            out_blocks,
            start_ns: p.now_ns(),
            timeout_ns: self.timeout_ns,
        })
    }

    /// Waits for the device to hand `posted` back: health checked every [`HEALTH_EVERY`]
    /// polls, the platform clock against the command timeout, `between` run after every poll
    /// that found the entry still the device's. A timeout or a fatal health state leaves the
    /// device unusable (the entry may still be the device's).
    pub(crate) fn wait<P: Platform>(
        &mut self,
        p: &P,
        posted: &Posted,
        mut between: impl FnMut(&mut Self, &P) -> Result<()>,
    ) -> Result<()> {
        let mut spins = 0u32;
        loop {
            if self.owned_back(posted)? {
                return Ok(());
            }
            spins = spins.wrapping_add(1);
            if spins % HEALTH_EVERY == 0 {
                if let Err(e) = check_health(p) {
                    self.mark_dead(match e {
                        Error::Health { synd, .. } => DeadCause::Fatal { synd },
                        _ => DeadCause::Gone,
                    });
                    return Err(e);
                }
            }
            let waited = p.now_ns().saturating_sub(posted.start_ns);
            if waited > posted.timeout_ns {
                log::error!(
                    "{}({:#x}) in command slot {} did not complete; the device is now unusable",
                    mlx5_ifc::opcode_name(posted.opcode),
                    posted.opcode,
                    posted.slot as u8
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
            between(self, p)?;
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
    pub(crate) fn collect(&mut self, posted: &Posted, output: &mut [u8]) -> Result<()> {
        let opcode = posted.opcode;
        let Some(mem) = self.mem.as_ref() else {
            return Err(Error::Unusable {
                opcode,
                cause: DeadCause::Closed,
            });
        };
        let (_, outbox) = &mem.boxes[posted.slot as usize];
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
        self.stats.executed += 1;
        let out = View::<CmdOutHeader>::new(output)?;
        let status = CmdStatus::from_raw(out.get(CmdOutHeader::STATUS) as u8);
        if status != CmdStatus::Ok {
            self.stats.failed += 1;
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

    /// Executes one command in `slot` and waits for it, answering nothing meanwhile (the page
    /// pool's own commands: bring-up, teardown, and the answers to page requests).
    pub(crate) fn exec<P: Platform>(
        &mut self,
        p: &P,
        slot: Slot,
        input: &[u8],
        output: &mut [u8],
    ) -> Result<()> {
        let posted = self.post(p, slot, input, output.len())?;
        self.wait(p, &posted, |_, _| Ok(()))?;
        self.collect(&posted, output)
    }
}
