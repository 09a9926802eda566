//! Handing entries back: the completion write, and the ways a faulty device gets it wrong —
//! outputs that lie after a correct execution, completions written twice, a slot nobody rang
//! completed spuriously.
//!
//! A completion writes the 16 inline output bytes (two whole 64-bit words, 0x20..0x30), then
//! bytes 0x3d..0x40 — signature, reserved, `status << 1 | ownership` — with one release
//! compare-and-swap on the entry's last 64-bit word (see the `iommu` module for why one).

use mlx5_ifc::consts::CMD_INLINE_BYTES;
use mlx5_ifc::prm::cmdif::CmdQueueEntry as Entry;
use mlx5_ifc::{opcode_name, DeliveryStatus, Layout, ViewMut};

use super::mailbox::BlockLies;
use super::signature::xor;
use crate::bar::{LOG_CMDQ_SIZE, LOG_CMDQ_STRIDE};
use crate::fault::{ArmedReplay, DmaFaultKind, Fault, Replay, SPURIOUS_STATUS};
use crate::state::State;

const ENTRY_SIG_OFF: usize = Entry::SIGNATURE.info.byte_offset();
const ENTRY_STATUS_OFF: usize = Entry::STATUS.info.byte_offset();
const OUT_OFF: usize = Entry::COMMAND_OUTPUT_INLINE_DATA.offset();

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Records a fault that acted on a command: in the fault log and in the command's notes.
pub(super) fn note(
    st: &mut State,
    now: u64,
    notes: &mut Vec<String>,
    fault: &'static str,
    what: String,
) {
    notes.push(format!("{fault}: {what}"));
    st.model.injected.log.push(now, fault, what);
}

/// Applies the pending output faults of a command to its output `out` (the firmware's, room
/// for `room` bytes); returns what they change in the mailbox blocks and whether the entry
/// signature must be wrong.
pub(super) fn lie(
    st: &mut State,
    now: u64,
    opcode: u16,
    out: &mut Vec<u8>,
    room: usize,
    notes: &mut Vec<String>,
) -> (BlockLies, bool) {
    let (mut lies, mut bad_entry_sig) = (BlockLies::default(), false);
    let blocks = room.saturating_sub(CMD_INLINE_BYTES).div_ceil(512);
    for f in st.model.injected.take_output(opcode) {
        let name = f.name();
        let what = match f {
            Fault::CorruptOutput { offset, bytes, .. } => {
                let end = offset.saturating_add(bytes.len()).min(room);
                if offset >= end {
                    format!("output bytes at {offset:#x} are beyond its {room:#x}: nothing changed")
                } else {
                    if out.len() < end {
                        out.resize(end, 0);
                    }
                    let was = hex(&out[offset..end]);
                    out[offset..end].copy_from_slice(&bytes[..end - offset]);
                    format!(
                        "output[{offset:#x}..{end:#x}] {was} -> {}",
                        hex(&out[offset..end])
                    )
                }
            }
            Fault::CorruptOutputToken { block, token, .. } if block < blocks => {
                lies.tokens.push((block, token));
                format!("output mailbox block {block} carries token {token:#04x}")
            }
            Fault::CorruptOutputSignature { block: None, .. } => {
                bad_entry_sig = true;
                "entry signature wrong".to_string()
            }
            Fault::CorruptOutputSignature {
                block: Some(block), ..
            } if block < blocks => {
                lies.bad_signatures.push(block);
                format!("output mailbox block {block} signature wrong")
            }
            other => format!("{other:?}: the command has {blocks} output blocks; nothing changed"),
        };
        note(st, now, notes, name, what);
    }
    (lies, bad_entry_sig)
}

/// Hands the entry back: inline output (if delivered), signature, then the status byte.
/// Returns the entry as completed.
#[allow(clippy::too_many_arguments)]
pub(super) fn complete(
    st: &mut State,
    iova: u64,
    mut entry: [u8; Entry::BYTES],
    ds: DeliveryStatus,
    inline: Option<&[u8]>,
    checksum: bool,
    bad_sig: bool,
    now: u64,
) -> [u8; Entry::BYTES] {
    let Ok(mut e) = ViewMut::<Entry>::new(&mut entry) else {
        return entry;
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
    if checksum || bad_sig {
        entry[ENTRY_SIG_OFF] = 0;
        entry[ENTRY_SIG_OFF] = !xor(&entry);
    }
    if bad_sig {
        entry[ENTRY_SIG_OFF] = !entry[ENTRY_SIG_OFF];
    }
    if !write_completion(st, iova, &entry, inline.is_some()) {
        st.device_fault(
            iova,
            Entry::BYTES,
            DmaFaultKind::Write,
            "complete command entry".to_string(),
            now,
        );
    }
    entry
}

/// Writes a completed entry's inline output (when `with_output`) and its last bytes.
fn write_completion(st: &State, iova: u64, entry: &[u8; Entry::BYTES], with_output: bool) -> bool {
    (!with_output
        || st
            .iommu
            .write(
                iova + OUT_OFF as u64,
                &entry[OUT_OFF..OUT_OFF + CMD_INLINE_BYTES],
            )
            .is_ok())
        && st
            .iommu
            .write_release(
                iova + ENTRY_SIG_OFF as u64,
                &entry[ENTRY_SIG_OFF..=ENTRY_STATUS_OFF],
            )
            .is_ok()
}

/// `Fault::CompleteTwice`: remembers the completion of `slot` to write it again.
pub(super) fn arm_replay(
    st: &mut State,
    now: u64,
    opcode: u16,
    slot: u32,
    iova: u64,
    entry: [u8; Entry::BYTES],
    notes: &mut Vec<String>,
) {
    let Some(when) = st.model.injected.take_twice(opcode) else {
        return;
    };
    st.model.injected.replays.push(ArmedReplay {
        opcode,
        slot,
        iova,
        entry,
        when,
    });
    let what = format!("slot {slot} will be completed again ({when:?})");
    note(st, now, notes, "CompleteTwice", what);
}

/// Writes the completions armed by `Fault::CompleteTwice` due `when`.
pub(super) fn replay(st: &mut State, now: u64, due: Vec<ArmedReplay>) {
    for r in due {
        let ok = write_completion(st, r.iova, &r.entry, true);
        let what = format!(
            "slot {} completion of {} written again ({:?}): status byte {:#04x}, inline output {}{}",
            r.slot,
            opcode_name(r.opcode),
            r.when,
            r.entry[ENTRY_STATUS_OFF],
            hex(&r.entry[OUT_OFF..OUT_OFF + CMD_INLINE_BYTES]),
            if ok { "" } else { " (unmapped: not written)" }
        );
        st.model.injected.log.push(now, "CompleteTwice", what);
    }
}

/// The armed replays due `when`.
pub(super) fn due(st: &mut State, when: Replay) -> Vec<ArmedReplay> {
    st.model.injected.take_replays(when)
}

/// `Fault::CompleteOutOfOrder` with one entry rung: completes the next idle slot above `slot`
/// (ownership 0, not rung) with a garbage delivery status.
pub(super) fn spurious(st: &mut State, now: u64, base: u64, slot: u32, rung: u32) {
    let slots = 1u32 << LOG_CMDQ_SIZE;
    for d in 1..slots {
        let s = (slot + d) % slots;
        if rung & (1 << s) != 0 {
            continue;
        }
        let at = base.wrapping_add(u64::from(s) << LOG_CMDQ_STRIDE) + ENTRY_STATUS_OFF as u64;
        let mut own = [0u8; 1];
        if st.iommu.read(at, &mut own).is_err() || own[0] & 1 != 0 {
            continue;
        }
        let byte = SPURIOUS_STATUS << 1;
        let ok = st.iommu.write_release(at, &[byte]).is_ok();
        let what = format!(
            "slot {s}, never rung, completed with status byte {byte:#04x} (was {:#04x}){}",
            own[0],
            if ok { "" } else { " (unmapped: not written)" }
        );
        st.model.injected.log.push(now, "CompleteOutOfOrder", what);
        return;
    }
    let what = format!("no idle slot besides {slot} to complete spuriously");
    st.model.injected.log.push(now, "CompleteOutOfOrder", what);
}
