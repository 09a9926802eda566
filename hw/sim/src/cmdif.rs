//! The command interface: queue entries, mailbox chains, delivery checks and completion.
//!
//! A doorbell write of `1 << n` hands entry `n` (at `cmdq + n * 64`) to the device; set bits
//! are processed in slot order. Nothing is processed while `initializing` reads 1 or after the
//! firmware has reported a fatal health syndrome (the entries stay owned by the device).
//!
//! Per entry, what firmware checks (delivery status in brackets):
//!
//! 1. the entry is fetched from the programmed command queue address; if that is not mapped the
//!    device reports health syndrome 0xa (ICM fetch PCI error) with `rfr` and completes nothing;
//! 2. `ownership` must be 1 (else the doorbell is ignored); a pending `NeverComplete` for the
//!    opcode swallows the entry here;
//! 3. `type` = 7 (0x10); the entry signature XORs to 0xff when CUR `cmdif_checksum` = 3 (0x1);
//! 4. mailbox pointers 512-byte aligned when blocks are needed (input 0x5, output 0x4);
//! 5. each chain has `ceil((len - 16) / 512)` blocks numbered 0, 1, 2… (0x3), every block
//!    carries the entry's token (0x2), the chain does not end early (input 0x7, output 0x8),
//!    block signatures hold when checksums are enabled (0x1); a block read that faults
//!    (unmapped, or `Fault::DmaFault` on the input chain) gives 0x6 and a `DmaFault` record.
//!
//! Then the firmware executes the command; the device writes the output mailbox data (with the
//! token, and signatures when enabled), the 16 inline output bytes, and last — with release
//! ordering — the status byte `delivery_status << 1` (ownership 0).

use mlx5_ifc::consts::{CMD_INLINE_BYTES, CMD_TYPE_PCI, MAILBOX_DATA_BYTES};
use mlx5_ifc::prm::cmdif::{CmdIfBox, CmdQueueEntry as Entry};
use mlx5_ifc::{
    opcode_name, CmdInHeader, DeliveryStatus, Field, HealthSyndrome, Layout, View, ViewMut,
};

use crate::bar::{Bar, LOG_CMDQ_STRIDE};
use crate::device::State;
use crate::fault::{DmaFault, DmaFaultKind};
use crate::fw::{self, Env, Req};
use crate::trace::TraceRecord;
use crate::Profile;

/// Processes a doorbell write at device time `now`.
pub(crate) fn ring(st: &mut State, profile: &Profile, now: u64, bits: u32) {
    if Bar::initializing_at(now, st.faults.stuck_initializing) {
        log::warn!(
            "mlx5-sim: command doorbell {bits:#x} while the firmware is initializing; ignored"
        );
        return;
    }
    for slot in (0..32u32).filter(|s| bits & (1 << s) != 0) {
        if st.bar.fatal() {
            log::warn!(
                "mlx5-sim: firmware is dead (health syndrome {:#x}); slot {slot} ignored",
                st.bar.health_synd()
            );
            return;
        }
        run_slot(st, profile, now, slot);
    }
}

fn xor(bytes: &[u8]) -> u8 {
    bytes.iter().fold(0, |a, b| a ^ b)
}

/// A 64-bit pointer split in a high dword and a low field whose address bits start at bit
/// `32 - shift`: `(address, low reserved bits)`.
fn pointer<L: Layout>(v: &View<'_, L>, hi: Field<L>, lo: Field<L>) -> (u64, u64) {
    let shift = 32u32.saturating_sub(lo.info.bit % 32 + lo.info.width);
    let off = lo.info.byte_offset();
    let raw = v
        .as_bytes()
        .get(off..off + 4)
        .map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    (
        (v.get(hi) << 32) | (v.get(lo) << shift),
        u64::from(raw) & ((1u64 << shift) - 1),
    )
}

fn blocks_for(len: usize) -> usize {
    (len - len.min(CMD_INLINE_BYTES)).div_ceil(MAILBOX_DATA_BYTES)
}

/// Byte offsets inside a mailbox block, from the layout.
const DATA_END: usize = CmdIfBox::MAILBOX_DATA.offset() + MAILBOX_DATA_BYTES;
const TOKEN_OFF: usize = CmdIfBox::TOKEN.info.byte_offset();
const CTRL_SIG_OFF: usize = CmdIfBox::CTRL_SIGNATURE.info.byte_offset();
const SIG_OFF: usize = CmdIfBox::SIGNATURE.info.byte_offset();
const ENTRY_SIG_OFF: usize = Entry::SIGNATURE.info.byte_offset();
const ENTRY_STATUS_OFF: usize = Entry::STATUS.info.byte_offset();

fn block_signed(b: &[u8; CmdIfBox::BYTES]) -> bool {
    xor(&b[DATA_END..=CTRL_SIG_OFF]) == 0xff && xor(&b[..=SIG_OFF]) == 0xff
}

fn sign_block(b: &mut [u8; CmdIfBox::BYTES]) {
    b[CTRL_SIG_OFF] = !xor(&b[DATA_END..CTRL_SIG_OFF]);
    b[SIG_OFF] = !xor(&b[..SIG_OFF]);
}

struct Block {
    iova: u64,
    image: [u8; CmdIfBox::BYTES],
}

struct Parsed {
    token: u8,
    outlen: usize,
    input: Vec<u8>,
    out_chain: Vec<Block>,
}

/// Which mailbox chain of a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    Input,
    Output,
}

struct Ctx {
    opcode: u16,
    token: u8,
    checksum: bool,
    dir: Dir,
}

fn run_slot(st: &mut State, profile: &Profile, now: u64, slot: u32) {
    let Some(base) = st.bar.cmdq_base() else {
        st.device_fault(
            0,
            Entry::BYTES,
            DmaFaultKind::Read,
            format!("fetch command entry {slot}: no command queue address"),
            now,
        );
        return;
    };
    let entry_iova = base.wrapping_add(u64::from(slot) << LOG_CMDQ_STRIDE);
    let mut entry = [0u8; Entry::BYTES];
    if st.iommu.read(entry_iova, &mut entry).is_err() {
        st.device_fault(
            entry_iova,
            Entry::BYTES,
            DmaFaultKind::Read,
            format!("fetch command entry {slot}"),
            now,
        );
        return;
    }
    let Ok(e) = View::<Entry>::new(&entry) else {
        return;
    };
    if e.get(Entry::OWNERSHIP) != 1 {
        log::warn!(
            "mlx5-sim: doorbell for slot {slot}, but the entry is owned by software; ignored"
        );
        return;
    }
    let Ok(hdr) = View::<CmdInHeader>::new(e.bytes(Entry::COMMAND_INPUT_INLINE_DATA)) else {
        return;
    };
    let (opcode, op_mod) = (
        hdr.get(CmdInHeader::OPCODE) as u16,
        hdr.get(CmdInHeader::OP_MOD) as u16,
    );
    if st.faults.take_never_complete(opcode) {
        log::info!(
            "mlx5-sim: NeverComplete: {} in slot {slot} swallowed",
            opcode_name(opcode)
        );
        return;
    }
    let checksum = st.fw.checksum_enabled();
    let parsed = match parse(st, &entry, opcode, checksum) {
        Ok(p) => p,
        Err(ds) => {
            log::info!(
                "mlx5-sim: {} in slot {slot}: delivery status {ds}",
                opcode_name(opcode)
            );
            complete(st, entry_iova, entry, ds, None, checksum, now);
            return;
        }
    };
    let mut out = vec![0u8; parsed.outlen.max(CMD_INLINE_BYTES)];
    let (status, syndrome) = match st.faults.take_fail(opcode) {
        Some((status, syndrome)) => {
            fw::write_header(&mut out, status, syndrome);
            (status, syndrome)
        }
        None => {
            let req = Req {
                opcode,
                op_mod,
                input: &parsed.input,
                outlen: parsed.outlen,
            };
            let mut env = Env {
                profile,
                iommu: &st.iommu,
                dma_faults: &mut st.dma_faults,
                now,
            };
            st.fw.execute(&mut env, &req, &mut out)
        }
    };
    let ds = match write_output(st, &parsed, &out, checksum, opcode) {
        Ok(()) => DeliveryStatus::Ok,
        Err(()) => DeliveryStatus::FwInternal,
    };
    if ds == DeliveryStatus::Ok {
        let seq = st.commands_executed;
        st.commands_executed += 1;
        let mut output = out.clone();
        output.truncate(parsed.outlen);
        st.trace.push(TraceRecord {
            seq,
            opcode,
            op_mod,
            status,
            syndrome,
            input: parsed.input,
            output,
        });
    }
    let inline = out.get(..CMD_INLINE_BYTES);
    complete(st, entry_iova, entry, ds, inline, checksum, now);
}

fn parse(
    st: &mut State,
    entry: &[u8; Entry::BYTES],
    opcode: u16,
    checksum: bool,
) -> Result<Parsed, DeliveryStatus> {
    let e = View::<Entry>::new(entry).map_err(|_| DeliveryStatus::FwInternal)?;
    if e.get(Entry::TYPE) != u64::from(CMD_TYPE_PCI) {
        return Err(DeliveryStatus::CmdDesc);
    }
    if checksum && xor(entry) != 0xff {
        return Err(DeliveryStatus::Signature);
    }
    let token = e.get(Entry::TOKEN) as u8;
    let inlen = usize::try_from(e.get(Entry::INPUT_LENGTH)).unwrap_or(usize::MAX);
    let outlen = usize::try_from(e.get(Entry::OUTPUT_LENGTH)).unwrap_or(usize::MAX);
    let (in_ptr, in_low) = pointer(
        &e,
        Entry::INPUT_MAILBOX_POINTER_63_32,
        Entry::INPUT_MAILBOX_POINTER_31_9,
    );
    let (out_ptr, out_low) = pointer(
        &e,
        Entry::OUTPUT_MAILBOX_POINTER_63_32,
        Entry::OUTPUT_MAILBOX_POINTER_31_9,
    );
    let (in_blocks, out_blocks) = (blocks_for(inlen), blocks_for(outlen));
    if in_blocks > 0 && in_low != 0 {
        return Err(DeliveryStatus::InPtrAlign);
    }
    if out_blocks > 0 && out_low != 0 {
        return Err(DeliveryStatus::OutPtrAlign);
    }
    let ctx = Ctx {
        opcode,
        token,
        checksum,
        dir: Dir::Input,
    };
    let in_chain = walk(st, &ctx, in_ptr, in_blocks, DeliveryStatus::InLength)?;
    let ctx = Ctx {
        dir: Dir::Output,
        ..ctx
    };
    let out_chain = walk(st, &ctx, out_ptr, out_blocks, DeliveryStatus::OutLength)?;
    let mut input = e.bytes(Entry::COMMAND_INPUT_INLINE_DATA).to_vec();
    for b in &in_chain {
        input.extend_from_slice(&b.image[..DATA_END]);
    }
    input.truncate(inlen);
    Ok(Parsed {
        token,
        outlen,
        input,
        out_chain,
    })
}

fn walk(
    st: &mut State,
    ctx: &Ctx,
    first: u64,
    n: usize,
    short: DeliveryStatus,
) -> Result<Vec<Block>, DeliveryStatus> {
    let mut chain = Vec::with_capacity(n.min(64));
    let mut ptr = first;
    for k in 0..n {
        if ptr == 0 {
            return Err(short);
        }
        let what = || {
            format!(
                "read {} mailbox block {k} of {}",
                if ctx.dir == Dir::Input {
                    "input"
                } else {
                    "output"
                },
                opcode_name(ctx.opcode)
            )
        };
        let mut image = [0u8; CmdIfBox::BYTES];
        let kind = if ctx.dir == Dir::Input && k == 0 && st.faults.take_dma(ctx.opcode) {
            Some(DmaFaultKind::Injected)
        } else {
            st.iommu
                .read(ptr, &mut image)
                .err()
                .map(|_| DmaFaultKind::Read)
        };
        if let Some(kind) = kind {
            st.dma_faults.push(DmaFault {
                iova: ptr,
                len: CmdIfBox::BYTES,
                kind,
                what: what(),
            });
            return Err(DeliveryStatus::FwInternal);
        }
        let b = View::<CmdIfBox>::new(&image).map_err(|_| DeliveryStatus::FwInternal)?;
        if b.get(CmdIfBox::BLOCK_NUMBER) != k as u64 {
            return Err(DeliveryStatus::BadBlock);
        }
        if b.get(CmdIfBox::TOKEN) != u64::from(ctx.token) {
            return Err(DeliveryStatus::Token);
        }
        if ctx.checksum && !block_signed(&image) {
            return Err(DeliveryStatus::Signature);
        }
        let (next, _) = pointer(
            &b,
            CmdIfBox::NEXT_POINTER_63_32,
            CmdIfBox::NEXT_POINTER_31_10,
        );
        chain.push(Block { iova: ptr, image });
        ptr = next;
    }
    Ok(chain)
}

/// Writes the output mailbox blocks (data, token, signatures).
fn write_output(
    st: &mut State,
    p: &Parsed,
    out: &[u8],
    checksum: bool,
    opcode: u16,
) -> Result<(), ()> {
    for (k, blk) in p.out_chain.iter().enumerate() {
        let mut img = blk.image;
        let start = (CMD_INLINE_BYTES + k * MAILBOX_DATA_BYTES).min(out.len());
        let end = (start + MAILBOX_DATA_BYTES).min(out.len());
        img[..DATA_END].fill(0);
        img[..end - start].copy_from_slice(&out[start..end]);
        img[TOKEN_OFF] = p.token;
        if checksum {
            sign_block(&mut img);
        }
        let ok = st.iommu.write(blk.iova, &img[..DATA_END]).is_ok()
            && st
                .iommu
                .write(blk.iova + TOKEN_OFF as u64, &img[TOKEN_OFF..])
                .is_ok();
        if !ok {
            st.dma_faults.push(DmaFault {
                iova: blk.iova,
                len: CmdIfBox::BYTES,
                kind: DmaFaultKind::Write,
                what: format!("write output mailbox block {k} of {}", opcode_name(opcode)),
            });
            return Err(());
        }
    }
    Ok(())
}

/// Hands the entry back: inline output (if delivered), signature, then the status byte.
fn complete(
    st: &mut State,
    iova: u64,
    mut entry: [u8; Entry::BYTES],
    ds: DeliveryStatus,
    inline: Option<&[u8]>,
    checksum: bool,
    now: u64,
) {
    let Ok(mut e) = ViewMut::<Entry>::new(&mut entry) else {
        return;
    };
    if let Some(inline) = inline {
        if let Err(err) = e.set_bytes(Entry::COMMAND_OUTPUT_INLINE_DATA, inline) {
            log::error!("mlx5-sim: {err}");
        }
    }
    let r = e
        .set(Entry::STATUS, ds.raw().into())
        .and_then(|e| e.set(Entry::OWNERSHIP, 0));
    if let Err(err) = r {
        log::error!("mlx5-sim: {err}");
    }
    if checksum {
        entry[ENTRY_SIG_OFF] = 0;
        entry[ENTRY_SIG_OFF] = !xor(&entry);
    }
    let out_off = Entry::COMMAND_OUTPUT_INLINE_DATA.offset();
    let ok = (inline.is_none()
        || st
            .iommu
            .write(
                iova + out_off as u64,
                &entry[out_off..out_off + CMD_INLINE_BYTES],
            )
            .is_ok())
        && (!checksum
            || st
                .iommu
                .write(
                    iova + ENTRY_SIG_OFF as u64,
                    &entry[ENTRY_SIG_OFF..=ENTRY_SIG_OFF],
                )
                .is_ok())
        && st
            .iommu
            .write_release(
                iova + ENTRY_STATUS_OFF as u64,
                &entry[ENTRY_STATUS_OFF..=ENTRY_STATUS_OFF],
            )
            .is_ok();
    if !ok {
        st.device_fault(
            iova,
            Entry::BYTES,
            DmaFaultKind::Write,
            "complete command entry".to_string(),
            now,
        );
    }
}

/// The health syndrome the device reports when it cannot fetch or complete an entry.
pub(crate) const FETCH_ERROR: HealthSyndrome = HealthSyndrome::FetchPciErr;
