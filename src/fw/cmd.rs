//! The firmware command interface in polling mode (PRM "Command Interface").
//!
//! One 4 KiB command queue page; each command takes entry 0: the first 16 input bytes sit in the
//! entry, the rest in a chain of 576-byte mailbox blocks (1 KiB aligned) carrying the same token;
//! the output comes back the same way. The driver hands the entry over by setting its ownership
//! bit and writing `1 << slot` to the command doorbell, then polls the ownership bit with a
//! deadline. A command that never completes leaves the device unusable rather than hanging.

use mlx5_ifc::consts::{
    CMD_INLINE_BYTES, CMD_TYPE_PCI, MAILBOX_ALIGN, MAILBOX_BYTES, MAILBOX_DATA_BYTES,
};
use mlx5_ifc::prm::cmdif::{CmdIfBox, CmdQueueEntry};
use mlx5_ifc::prm::init_seg::HealthBuffer;
use mlx5_ifc::{
    regs, Be32, CmdInHeader, CmdOutHeader, CmdStatus, DeliveryStatus, HealthSyndrome, View, ViewMut,
};

use crate::error::{DeadCause, Error, Result, Wait};
use crate::fw::quarantine::Quarantine;
use crate::io::{barrier, DmaBuf};
use crate::platform::Platform;

/// Mailbox blocks per direction: commands carry at most `16 + 64 * 512` bytes each way.
pub const MAX_MAILBOX_BLOCKS: usize = 64;
/// The largest command input or output the queue carries.
pub const MAX_CMD_BYTES: usize = CMD_INLINE_BYTES + MAX_MAILBOX_BLOCKS * MAILBOX_DATA_BYTES;
/// Size of a command queue entry.
const ENTRY_BYTES: usize = 64;
/// Offset of the status/ownership byte in an entry.
const STATUS_OWN: usize = 0x3f;
/// Relax iterations between two health-buffer checks while a command is in flight.
const HEALTH_EVERY: u32 = 256;

/// Counters of the command interface.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CmdStats {
    /// Commands that completed (successfully or with a firmware status).
    pub executed: u64,
    /// Commands the firmware refused with a non-OK status.
    pub failed: u64,
}

/// The command queue and its mailboxes.
#[derive(Debug)]
pub struct CmdQueue {
    mem: Option<CmdMem>,
    log_stride: u8,
    token: u8,
    timeout_ns: u64,
    checksum: bool,
    dead: Option<DeadCause>,
    stats: CmdStats,
}

#[derive(Debug)]
struct CmdMem {
    queue: DmaBuf,
    inbox: DmaBuf,
    outbox: DmaBuf,
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

impl CmdQueue {
    /// Allocates the queue page and mailboxes. The caller writes the queue address to the device.
    pub fn new<P: Platform>(p: &P, log_stride: u8, timeout_ms: u64) -> Result<Self> {
        let map = |op| move |source| Error::Platform { op, source };
        let queue = DmaBuf::alloc(p, 4096, 4096).map_err(map("allocate the command queue page"))?;
        let boxes = MAX_MAILBOX_BLOCKS * MAILBOX_ALIGN;
        let inbox = match DmaBuf::alloc(p, boxes, MAILBOX_ALIGN) {
            Ok(b) => b,
            Err(e) => {
                let _ = queue.free(p);
                return Err(map("allocate command input mailboxes")(e));
            }
        };
        let outbox = match DmaBuf::alloc(p, boxes, MAILBOX_ALIGN) {
            Ok(b) => b,
            Err(e) => {
                let _ = queue.free(p);
                let _ = inbox.free(p);
                return Err(map("allocate command output mailboxes")(e));
            }
        };
        Ok(Self {
            mem: Some(CmdMem {
                queue,
                inbox,
                outbox,
            }),
            log_stride,
            token: 0,
            timeout_ns: timeout_ms.saturating_mul(1_000_000),
            checksum: false,
            dead: None,
            stats: CmdStats::default(),
        })
    }

    /// Device address of the queue page (for `cmdq_addr_h` / `cmdq_addr_l_sz`).
    pub fn iova(&self) -> u64 {
        self.mem.as_ref().map_or(0, |m| m.queue.iova())
    }

    /// Sets the per-command timeout.
    pub fn set_timeout_ms(&mut self, ms: u64) {
        self.timeout_ns = ms.saturating_mul(1_000_000);
    }

    /// Whether the firmware verifies signatures (cmd_hca_cap `cmdif_checksum` = 3).
    pub fn set_checksum(&mut self, on: bool) {
        self.checksum = on;
    }

    /// Why the queue no longer issues commands, if it does not.
    pub fn dead(&self) -> Option<DeadCause> {
        self.dead
    }

    /// Stops issuing commands.
    pub fn mark_dead(&mut self, cause: DeadCause) {
        self.dead.get_or_insert(cause);
    }

    /// Counters.
    pub fn stats(&self) -> CmdStats {
        self.stats
    }

    /// Frees the queue memory; the queue issues no command afterwards. Only call once the
    /// device no longer owns any entry (after DISABLE_HCA).
    pub fn release<P: Platform>(&mut self, p: &P) {
        if let Some(m) = self.mem.take() {
            for b in [m.queue, m.inbox, m.outbox] {
                if let Err(e) = b.free(p) {
                    log::warn!("freeing command interface memory: {e}");
                }
            }
        }
        self.mark_dead(DeadCause::Closed);
    }

    /// Leaves the queue memory to the device (it may still own an entry): quarantined, never
    /// freed; the queue issues no command afterwards.
    pub(crate) fn abandon(&mut self, q: &Quarantine) {
        if let Some(m) = self.mem.take() {
            for b in [m.queue, m.inbox, m.outbox] {
                q.keep(b, "command queue of an unusable device");
            }
        }
        self.mark_dead(DeadCause::Closed);
    }

    fn blocks_for(len: usize) -> usize {
        len.saturating_sub(CMD_INLINE_BYTES)
            .div_ceil(MAILBOX_DATA_BYTES)
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

    /// Executes one command: `input` (opcode, op_mod, fields) in, `output` filled. The firmware's
    /// status is checked; a non-OK status is [`Error::Cmd`].
    pub fn exec<P: Platform>(&mut self, p: &P, input: &[u8], output: &mut [u8]) -> Result<()> {
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
        for (len, field) in [
            (input.len(), "input length"),
            (output.len(), "output length"),
        ] {
            if !(8..=MAX_CMD_BYTES).contains(&len) {
                return Err(Error::InvalidArgument {
                    op: "command",
                    field,
                    requested: len as u64,
                    max: MAX_CMD_BYTES as u64,
                    limit: "64 mailbox blocks (8 bytes at least)",
                });
            }
        }
        self.token = next_token(self.token);
        let token = self.token;
        let in_blocks = Self::blocks_for(input.len());
        let out_blocks = Self::blocks_for(output.len());
        let tail = input.get(CMD_INLINE_BYTES..).unwrap_or(&[]);
        Self::write_chain(self.checksum, &mem.inbox, tail, in_blocks, token)?;
        Self::write_chain(self.checksum, &mem.outbox, &[], out_blocks, token)?;

        let mut entry = [0u8; ENTRY_BYTES];
        let mut e = ViewMut::<CmdQueueEntry>::new(&mut entry)?;
        e.set(CmdQueueEntry::TYPE, u64::from(CMD_TYPE_PCI))?;
        e.set(CmdQueueEntry::INPUT_LENGTH, input.len() as u64)?;
        e.set(CmdQueueEntry::OUTPUT_LENGTH, output.len() as u64)?;
        if in_blocks > 0 {
            let a = mem.inbox.iova();
            e.set(CmdQueueEntry::INPUT_MAILBOX_POINTER_63_32, a >> 32)?;
            e.set(
                CmdQueueEntry::INPUT_MAILBOX_POINTER_31_9,
                (a & 0xffff_ffff) >> 9,
            )?;
        }
        if out_blocks > 0 {
            let a = mem.outbox.iova();
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

        let slot = 0usize;
        let at = slot << self.log_stride;
        mem.queue.write_bytes(at, &entry)?;
        barrier::dma_wmb();
        p.bar_write32(u64::from(regs::CMD_DBELL), Be32::new(1 << slot));

        if let Err(e) = Self::wait_owned_back(&mem.queue, self.timeout_ns, p, at, opcode) {
            self.mark_dead(match e {
                Error::Health { synd, .. } => DeadCause::Fatal { synd },
                Error::Timeout { .. } => DeadCause::CommandTimeout { opcode },
                _ => DeadCause::Gone,
            });
            return Err(e);
        }
        barrier::dma_rmb();
        let status_own = mem.queue.read_u8(at + STATUS_OWN)?;
        let delivery = DeliveryStatus::from_raw(status_own >> 1);
        if delivery != DeliveryStatus::Ok {
            return Err(Error::Delivery {
                opcode,
                status: delivery,
            });
        }
        let mut back = [0u8; ENTRY_BYTES];
        mem.queue.read_bytes(at, &mut back)?;
        let eview = View::<CmdQueueEntry>::new(&back)?;
        let out_inline = eview.bytes(CmdQueueEntry::COMMAND_OUTPUT_INLINE_DATA);
        let n = output.len().min(CMD_INLINE_BYTES);
        output[..n].copy_from_slice(&out_inline[..n]);
        for k in 0..out_blocks {
            let start = CMD_INLINE_BYTES + k * MAILBOX_DATA_BYTES;
            let end = output.len().min(start + MAILBOX_DATA_BYTES);
            let mut trailer = [0u8; 8];
            mem.outbox
                .read_bytes(k * MAILBOX_ALIGN + 0x238, &mut trailer)?;
            let block_token = trailer[5];
            if block_token != token {
                return Err(Error::BadDeviceValue {
                    what: "output mailbox token",
                    value: u64::from(block_token),
                    limit: u64::from(token),
                });
            }
            if let Some(dst) = output.get_mut(start..end) {
                mem.outbox.read_bytes(k * MAILBOX_ALIGN, dst)?;
            }
        }
        self.stats.executed += 1;
        let out = View::<CmdOutHeader>::new(output)?;
        let status = CmdStatus::from_raw(out.get(CmdOutHeader::STATUS) as u8);
        if status != CmdStatus::Ok {
            self.stats.failed += 1;
            let syndrome = out.get32(CmdOutHeader::SYNDROME);
            log::debug!(
                "{}({opcode:#x}) op_mod {op_mod:#x}: status {status}, syndrome {syndrome:#x}",
                mlx5_ifc::opcode_name(opcode)
            );
            return Err(Error::Cmd {
                opcode,
                op_mod,
                status,
                syndrome,
            });
        }
        Ok(())
    }

    fn wait_owned_back<P: Platform>(
        queue: &DmaBuf,
        timeout_ns: u64,
        p: &P,
        at: usize,
        opcode: u16,
    ) -> Result<()> {
        let start = p.now_ns();
        let mut spins = 0u32;
        loop {
            // The entry's last 8 bytes in one acquire load (the device writes that word whole;
            // the status/ownership byte is its last byte).
            let last = queue.read_u64_acquire(at + STATUS_OWN - 7)?;
            if last[7] & 1 == 0 {
                return Ok(());
            }
            spins = spins.wrapping_add(1);
            if spins % HEALTH_EVERY == 0 {
                check_health(p)?;
            }
            let now = p.now_ns();
            if now.saturating_sub(start) > timeout_ns {
                log::error!(
                    "{}({opcode:#x}) did not complete; the device is now unusable",
                    mlx5_ifc::opcode_name(opcode)
                );
                return Err(Error::Timeout {
                    waiting_for: Wait::Command { opcode },
                    waited_ms: now.saturating_sub(start) / 1_000_000,
                });
            }
            p.relax();
        }
    }
}

/// Reads the health buffer: a fatal syndrome (with `rfr`), or a device that reads all-ones, is an
/// error.
pub fn check_health<P: Platform + ?Sized>(p: &P) -> Result<()> {
    let fw_ver = p.bar_read32(u64::from(regs::HEALTH_FW_VER)).get();
    let init = p.bar_read32(u64::from(regs::INITIALIZING)).get();
    if fw_ver == u32::MAX && init == u32::MAX {
        return Err(Error::BadDeviceValue {
            what: "health buffer (device gone?)",
            value: u64::from(fw_ver),
            limit: 0,
        });
    }
    let mut hb = [0u8; 64];
    for w in [0x38usize, 0x3c] {
        let v = p.bar_read32(u64::from(regs::HEALTH_BUFFER) + w as u64);
        hb[w..w + 4].copy_from_slice(&v.to_bytes());
    }
    let v = View::<HealthBuffer>::new(&hb)?;
    let synd = v.get(HealthBuffer::SYND) as u8;
    if synd != 0 {
        let ext = v.get(HealthBuffer::EXT_SYND) as u16;
        if v.get(HealthBuffer::RFR) == 1 {
            return Err(Error::Health {
                synd: HealthSyndrome::from_raw(synd),
                ext_synd: ext,
            });
        }
        log::warn!(
            "firmware health syndrome {} (ext {ext:#x}) without reset request",
            HealthSyndrome::from_raw(synd)
        );
    }
    Ok(())
}

/// Buffer size of [`run`]: covers every fixed-size command layout of the control path.
pub const SMALL_CMD_BYTES: usize = 0x200;

/// The output of [`run`], viewable as layout `O`.
pub struct Output<O> {
    buf: [u8; SMALL_CMD_BYTES],
    _o: core::marker::PhantomData<fn() -> O>,
}

impl<O: mlx5_ifc::Layout> core::fmt::Debug for Output<O> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.view() {
            Ok(v) => v.fmt(f),
            Err(_) => f.write_str(O::NAME),
        }
    }
}

impl<O: mlx5_ifc::Layout> Output<O> {
    /// The output as its layout.
    pub fn view(&self) -> Result<View<'_, O>> {
        Ok(View::new(&self.buf)?)
    }
    /// One integer field of the output.
    pub fn get(&self, f: mlx5_ifc::Field<O>) -> u64 {
        self.view().map_or(0, |v| v.get(f))
    }
}

/// Runs a fixed-size command: input layout `I` (opcode and op_mod set here, the rest by `fill`),
/// output layout `O`.
pub fn run<I, O, P, F>(
    cmd: &mut CmdQueue,
    p: &P,
    opcode: mlx5_ifc::Opcode,
    op_mod: u16,
    fill: F,
) -> Result<Output<O>>
where
    I: mlx5_ifc::Layout,
    O: mlx5_ifc::Layout,
    P: Platform,
    F: FnOnce(&mut ViewMut<'_, I>) -> Result<()>,
{
    if I::BYTES > SMALL_CMD_BYTES || O::BYTES > SMALL_CMD_BYTES {
        return Err(Error::InvalidArgument {
            op: "command",
            field: "layout size",
            requested: I::BYTES.max(O::BYTES) as u64,
            max: SMALL_CMD_BYTES as u64,
            limit: "fixed-size command buffer",
        });
    }
    let mut input = [0u8; SMALL_CMD_BYTES];
    {
        let mut h = ViewMut::<CmdInHeader>::new(&mut input)?;
        h.set(CmdInHeader::OPCODE, opcode as u64)?
            .set(CmdInHeader::OP_MOD, u64::from(op_mod))?;
    }
    fill(&mut ViewMut::<I>::new(&mut input)?)?;
    let mut out = Output {
        buf: [0u8; SMALL_CMD_BYTES],
        _o: core::marker::PhantomData,
    };
    cmd.exec(p, &input[..I::BYTES], &mut out.buf[..O::BYTES])?;
    Ok(out)
}

/// Buffer size of [`run_create`]: a 0x110-byte create command and up to 512 PAS entries.
pub const CREATE_CMD_BYTES: usize = 0x110 + crate::fw::queue::MAX_PAS * 8;

/// Runs a create command whose fixed part (layout `I`, 0x110 bytes for every CREATE_* with a
/// buffer) is followed by the PAS list of `pas`.
pub fn run_create<I, O, P, F, Q>(
    cmd: &mut CmdQueue,
    p: &P,
    opcode: mlx5_ifc::Opcode,
    pas: Option<&Q>,
    fill: F,
) -> Result<Output<O>>
where
    Q: crate::fw::queue::PasList + ?Sized,
    I: mlx5_ifc::Layout,
    O: mlx5_ifc::Layout,
    P: Platform,
    F: FnOnce(&mut ViewMut<'_, I>) -> Result<()>,
{
    let npas = pas.map_or(0, |q| q.npages());
    let len = I::BYTES + npas * 8;
    if len > CREATE_CMD_BYTES || O::BYTES > SMALL_CMD_BYTES {
        return Err(Error::Capacity {
            what: "create command buffer",
            limit: CREATE_CMD_BYTES,
        });
    }
    let mut input = [0u8; CREATE_CMD_BYTES];
    ViewMut::<CmdInHeader>::new(&mut input)?.set(CmdInHeader::OPCODE, opcode as u64)?;
    fill(&mut ViewMut::<I>::new(&mut input)?)?;
    if let Some(q) = pas {
        q.write_pas(&mut input[I::BYTES..len])?;
    }
    let mut out = Output {
        buf: [0u8; SMALL_CMD_BYTES],
        _o: core::marker::PhantomData,
    };
    cmd.exec(p, &input[..len], &mut out.buf[..O::BYTES])?;
    Ok(out)
}
