//! Mailbox chains: reading and checking a command's entry and input chain (delivery status),
//! and writing its output chain.
//!
//! Each chain has `ceil((len - 16) / 512)` blocks numbered 0, 1, 2… (else 0x3), every block
//! carries the entry's token (0x2), the chain does not end early (input 0x7, output 0x8),
//! block signatures hold when checksums are enabled (0x1); a block read that faults
//! (unmapped, or `Fault::DmaFault` on the input chain) gives 0x6 and a `DmaFault` record.
//!
//! An output block is written as its 512 data bytes, then its last 8 bytes (block number,
//! token, signatures) with one 64-bit store: the word the driver reads to check the token.

use mlx5_ifc::consts::{CMD_INLINE_BYTES, CMD_TYPE_PCI, MAILBOX_DATA_BYTES};
use mlx5_ifc::prm::cmdif::{CmdIfBox, CmdQueueEntry as Entry};
use mlx5_ifc::{opcode_name, DeliveryStatus, Field, Layout, View};

use super::held::{Block, Parsed};
use super::signature::xor;
use crate::fault::{DmaFault, DmaFaultKind};
use crate::state::State;

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
pub(super) const DATA_END: usize = CmdIfBox::MAILBOX_DATA.offset() + MAILBOX_DATA_BYTES;
/// The last 8-byte word of a block: block number, reserved, token, signatures.
const TRAILER_OFF: usize = CmdIfBox::BLOCK_NUMBER.info.byte_offset();
const TOKEN_OFF: usize = CmdIfBox::TOKEN.info.byte_offset();
const CTRL_SIG_OFF: usize = CmdIfBox::CTRL_SIGNATURE.info.byte_offset();
const SIG_OFF: usize = CmdIfBox::SIGNATURE.info.byte_offset();

fn block_signed(b: &[u8; CmdIfBox::BYTES]) -> bool {
    xor(&b[DATA_END..=CTRL_SIG_OFF]) == 0xff && xor(&b[..=SIG_OFF]) == 0xff
}

fn sign_block(b: &mut [u8; CmdIfBox::BYTES]) {
    b[CTRL_SIG_OFF] = !xor(&b[DATA_END..CTRL_SIG_OFF]);
    b[SIG_OFF] = !xor(&b[..SIG_OFF]);
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

/// Checks the entry and reads its mailbox chains: the command, or the delivery status.
pub(super) fn parse(
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
        let kind = if ctx.dir == Dir::Input && k == 0 && st.model.injected.take_dma(ctx.opcode) {
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

/// What injected faults change in the output chain: `(block, token)` and the blocks whose
/// signature is made wrong.
#[derive(Debug, Default)]
pub(super) struct BlockLies {
    pub(super) tokens: Vec<(usize, u8)>,
    pub(super) bad_signatures: Vec<usize>,
}

/// Writes the output mailbox blocks (data, token, signatures).
pub(super) fn write_output(
    st: &mut State,
    p: &Parsed,
    out: &[u8],
    checksum: bool,
    opcode: u16,
    lies: &BlockLies,
) -> Result<(), ()> {
    for (k, blk) in p.out_chain.iter().enumerate() {
        let mut img = blk.image;
        let start = (CMD_INLINE_BYTES + k * MAILBOX_DATA_BYTES).min(out.len());
        let end = (start + MAILBOX_DATA_BYTES).min(out.len());
        img[..DATA_END].fill(0);
        img[..end - start].copy_from_slice(&out[start..end]);
        img[TOKEN_OFF] = p.token;
        if let Some(&(_, token)) = lies.tokens.iter().rev().find(|t| t.0 == k) {
            img[TOKEN_OFF] = token;
        }
        if checksum {
            sign_block(&mut img);
        }
        if lies.bad_signatures.contains(&k) {
            sign_block(&mut img);
            img[SIG_OFF] = !img[SIG_OFF];
        }
        let ok = st.iommu.write(blk.iova, &img[..DATA_END]).is_ok()
            && st
                .iommu
                .write_release(blk.iova + TRAILER_OFF as u64, &img[TRAILER_OFF..])
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

/// How many output bytes the command has room for: the inline 16 and its output blocks.
pub(super) fn room(p: &Parsed) -> usize {
    CMD_INLINE_BYTES + p.out_chain.len() * MAILBOX_DATA_BYTES
}
