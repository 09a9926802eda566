//! The command interface: queue entries, mailbox chains, delivery checks and completion.
//!
//! The queue has `2^log_cmdq_size` entries of `2^log_cmdq_stride` bytes (the init segment
//! publishes [`crate::LOG_CMDQ_SIZE`] = 5 and [`crate::LOG_CMDQ_STRIDE`] = 6: 32 entries of 64
//! bytes). A doorbell write with bit `n` set hands entry `n` (at `cmdq + n * 64`) to the device;
//! every set bit is processed, in slot order, and each entry is executed on its own: one
//! command waiting in a slot does not stop another slot's. Nothing is processed while
//! `initializing` reads 1 or after the firmware has reported a fatal health syndrome (the
//! entries stay owned by the device).
//!
//! A command that needs firmware pages the device does not have ([`crate::PagePolicy`]) is
//! **held** once delivered: nothing executes, its entry stays owned by the device, and the
//! firmware raises a PAGE_REQUEST event (`fw::page_req`). A doorbell for a slot whose command
//! is held is ignored. After every doorbell the held commands the pages now cover execute and
//! complete, oldest first (so a MANAGE_PAGES give rung in another slot releases them); after
//! MANAGE_PAGES op_mod 0 they fail with NO_RESOURCES.
//!
//! Per entry, what firmware checks (delivery status in brackets):
//!
//! 1. the entry is fetched from the programmed command queue address; if that is not mapped the
//!    device reports health syndrome 0xa (ICM fetch PCI error) with `rfr` and completes nothing;
//! 2. `ownership` must be 1 (else the doorbell is ignored); a pending `NeverComplete` for the
//!    opcode swallows the entry here;
//! 3. `type` = 7 (0x10); the entry signature XORs to 0xff when CUR `cmdif_checksum` = 3 (0x1);
//! 4. mailbox pointers 512-byte aligned when blocks are needed (input 0x5, output 0x4);
//! 5. the mailbox chains ([`mailbox`]: block numbers 0x3, tokens 0x2, lengths 0x7/0x8,
//!    signatures 0x1, faulting reads 0x6).
//!
//! Then the firmware executes the command; the device writes the output mailbox data (with the
//! token, and signatures when enabled), the 16 inline output bytes, and last — with release
//! ordering — the status byte `delivery_status << 1` (ownership 0) ([`completion`]).
//!
//! Injected faults act here: `FailCommand` replaces the execution; `CorruptOutput*` change the
//! output after it; `CompleteTwice` writes a completion again at the next doorbell (before or
//! after its entries); `CompleteOutOfOrder` reverses the slot order of one doorbell, or
//! completes an idle slot spuriously when only one entry is rung.

mod completion;
pub(crate) mod held;
mod mailbox;
mod signature;

use held::Held;

use mlx5_ifc::consts::CMD_INLINE_BYTES;
use mlx5_ifc::prm::cmdif::CmdQueueEntry as Entry;
use mlx5_ifc::{opcode_name, CmdInHeader, CmdStatus, DeliveryStatus, Layout, View};

use crate::bar::LOG_CMDQ_STRIDE;
use crate::fault::{DmaFaultKind, Replay};
use crate::fw::cmd::{write_header, Env, Req};
use crate::fw::{self, page_req};
use crate::state::State;
use crate::syndrome as syn;
use crate::trace::TraceRecord;
use crate::Profile;

use completion::note;

/// Processes a doorbell write at device time `now`.
pub(crate) fn ring(st: &mut State, profile: &Profile, now: u64, bits: u32) {
    if st
        .bar
        .initializing_at(now, st.model.injected.stuck_initializing)
    {
        log::warn!(
            "mlx5-sim: command doorbell {bits:#x} while the firmware is initializing; ignored"
        );
        return;
    }
    // Completions armed by `CompleteTwice` before this doorbell.
    let (before, after) = if st.bar.fatal() {
        (Vec::new(), Vec::new())
    } else {
        (
            completion::due(st, Replay::BeforeNextCommand),
            completion::due(st, Replay::AfterNextCommand),
        )
    };
    completion::replay(st, now, before);
    let mut slots: Vec<u32> = (0..32u32).filter(|s| bits & (1 << s) != 0).collect();
    let mut notes = Vec::new();
    let mut spurious = None;
    if !slots.is_empty() && st.model.injected.take_out_of_order() {
        if slots.len() > 1 {
            slots.reverse();
            let what = format!("slots {slots:?} rung together, completed in that order");
            note(st, now, &mut notes, "CompleteOutOfOrder", what);
        } else {
            spurious = Some(slots[0]);
        }
    }
    for &slot in &slots {
        if st.bar.fatal() {
            log::warn!(
                "mlx5-sim: firmware is dead (health syndrome {:#x}); slot {slot} ignored",
                st.bar.health_synd()
            );
            return;
        }
        run_slot(st, profile, now, slot, notes.clone());
    }
    release_held(st, profile, now);
    completion::replay(st, now, after);
    if let (Some(slot), Some(base)) = (spurious, st.bar.cmdq_base()) {
        completion::spurious(st, now, base, slot, bits);
    }
}

fn run_slot(st: &mut State, profile: &Profile, now: u64, slot: u32, notes: Vec<String>) {
    if st.held.iter().chain(&st.slow).any(|h| h.slot == slot) {
        log::warn!("mlx5-sim: doorbell for slot {slot}, whose command has not completed; ignored");
        return;
    }
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
    if st.model.injected.take_never_complete(opcode) {
        let what = format!("{} in slot {slot} swallowed", opcode_name(opcode));
        st.model.injected.log.push(now, "NeverComplete", what);
        return;
    }
    let checksum = st.model.checksum_enabled();
    let mut notes = notes;
    let parsed = match mailbox::parse(st, &entry, opcode, checksum) {
        Ok(p) => p,
        Err(ds) => {
            log::info!(
                "mlx5-sim: {} in slot {slot}: delivery status {ds}",
                opcode_name(opcode)
            );
            let done = completion::complete(st, entry_iova, entry, ds, None, checksum, false, now);
            let eqs = crate::events::eqe::cmd_eqs(&st.model);
            crate::events::eqe::command_event(&mut st.hw(now), slot, &eqs);
            completion::arm_replay(st, now, opcode, slot, entry_iova, done, &mut notes);
            return;
        }
    };
    let cmd = Held {
        slot,
        entry_iova,
        entry,
        opcode,
        op_mod,
        checksum,
        parsed,
        notes,
        need: page_req::icm_need(&st.model, opcode),
    };
    if st.model.injected.take_slow(opcode) {
        let what = format!("{} in slot {slot} kept", opcode_name(opcode));
        st.model.injected.log.push(now, "SlowCommand", what);
        st.slow.push(cmd);
        return;
    }
    start(st, profile, now, cmd);
}

/// Ends every command `Fault::SlowCommand` keeps, oldest first: each executes now (or waits
/// for pages first, as any command). Returns how many there were.
pub(crate) fn finish_slow(st: &mut State, profile: &Profile, now: u64) -> usize {
    let slow = std::mem::take(&mut st.slow);
    let n = slow.len();
    for cmd in slow {
        start(st, profile, now, cmd);
    }
    n
}

/// Executes a delivered command, or holds it until the firmware has the pages it needs.
fn start(st: &mut State, profile: &Profile, now: u64, cmd: Held) {
    let slot = cmd.slot;
    let opcode = cmd.opcode;
    if !page_req::may_run(&st.model, profile, cmd.need) {
        log::debug!(
            "mlx5-sim: {} in slot {slot} waits for {} pages",
            opcode_name(opcode),
            cmd.need
        );
        page_req::hold(&mut st.hw(now), profile, cmd.need);
        st.held.push(cmd);
        return;
    }
    execute(st, profile, now, cmd, None);
}

/// Executes the held commands the firmware's pages now cover, oldest first; after MANAGE_PAGES
/// op_mod 0 (the driver cannot give), fails every held command with NO_RESOURCES.
pub(crate) fn release_held(st: &mut State, profile: &Profile, now: u64) {
    while !st.held.is_empty() && !st.bar.fatal() {
        if st.model.pages.req.alloc_failed {
            st.model.pages.req.alloc_failed = false;
            for cmd in std::mem::take(&mut st.held) {
                page_req::unhold(&mut st.model, cmd.need);
                let failed = (CmdStatus::NoResources.raw(), syn::PAGES_ALLOC_FAIL);
                execute(st, profile, now, cmd, Some(failed));
            }
            return;
        }
        let need = st.held[0].need;
        if !page_req::may_release(&st.model, profile, need) {
            return;
        }
        let cmd = st.held.remove(0);
        page_req::unhold(&mut st.model, need);
        log::debug!(
            "mlx5-sim: {} in slot {} has its pages",
            opcode_name(cmd.opcode),
            cmd.slot
        );
        execute(st, profile, now, cmd, None);
    }
}

/// Executes a delivered command (or fails it with `failed` without executing it) and hands
/// its entry back.
fn execute(st: &mut State, profile: &Profile, now: u64, cmd: Held, failed: Option<(u8, u32)>) {
    let Held {
        slot,
        entry_iova,
        entry,
        opcode,
        op_mod,
        checksum,
        parsed,
        mut notes,
        ..
    } = cmd;
    let mut out = vec![0u8; parsed.outlen.max(CMD_INLINE_BYTES)];
    let cmd_eqs = crate::events::eqe::cmd_eqs(&st.model);
    let (status, syndrome) = match failed {
        Some((status, syndrome)) => {
            write_header(&mut out, status, syndrome);
            (status, syndrome)
        }
        None => match st.model.injected.take_fail(opcode) {
            Some((status, syndrome)) => {
                write_header(&mut out, status, syndrome);
                let what = format!("status {status:#x}, syndrome {syndrome:#x}; not executed");
                note(st, now, &mut notes, "FailCommand", what);
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
                fw::execute(&mut st.model, &mut env, &req, &mut out)
            }
        },
    };
    let room = mailbox::room(&parsed);
    let (lies, bad_sig) = completion::lie(st, now, opcode, &mut out, room, &mut notes);
    let ds = match mailbox::write_output(st, &parsed, &out, checksum, opcode, &lies) {
        Ok(()) => DeliveryStatus::Ok,
        Err(()) => DeliveryStatus::FwInternal,
    };
    let inline = out.get(..CMD_INLINE_BYTES);
    let done = completion::complete(st, entry_iova, entry, ds, inline, checksum, bad_sig, now);
    crate::events::eqe::command_event(&mut st.hw(now), slot, &cmd_eqs);
    completion::arm_replay(st, now, opcode, slot, entry_iova, done, &mut notes);
    if ds == DeliveryStatus::Ok {
        let seq = st.commands_executed;
        st.commands_executed += 1;
        out.truncate(parsed.outlen);
        st.trace.push(TraceRecord {
            seq,
            opcode,
            op_mod,
            status,
            syndrome,
            input: parsed.input,
            output: out,
            faults: notes,
        });
        page_req::after_command(&mut st.hw(now), profile, opcode);
        crate::fw::vport::after_command(&mut st.hw(now));
        crate::fw::dct::after_command(&mut st.hw(now));
    }
}
