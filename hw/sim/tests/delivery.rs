//! Delivery: what the command interface checks before the firmware sees a command, DMA faults
//! on mailboxes and on the command queue, signatures.

mod common;

use common::{bare, status, Msg, Poster};
use mlx5_ifc::consts::{cap_mode, cap_type};
use mlx5_ifc::prm::caps::CmdHcaCap;
use mlx5_ifc::prm::cmdif::{CmdIfBox, CmdQueueEntry as Entry};
use mlx5_ifc::prm::hca::{EnableHcaIn, QueryHcaCapIn, QueryIssiIn, SetHcaCapIn};
use mlx5_ifc::{regs, Be32, DeliveryStatus, Layout, Opcode, ViewMut};
use mlx5_sim::{DmaFaultKind, Fault, Mode, Profile, SimDevice};

const IN_PTR_LO: usize = Entry::INPUT_MAILBOX_POINTER_31_9.info.byte_offset();
const OUT_PTR_LO: usize = Entry::OUTPUT_MAILBOX_POINTER_31_9.info.byte_offset();
const IN_LEN: usize = Entry::INPUT_LENGTH.info.byte_offset();
const OUT_LEN: usize = Entry::OUTPUT_LENGTH.info.byte_offset();
const BLOCK_NO: u64 = CmdIfBox::BLOCK_NUMBER.info.byte_offset() as u64;
const BLOCK_TOKEN: u64 = CmdIfBox::TOKEN.info.byte_offset() as u64;
const NEXT: u64 = CmdIfBox::NEXT_POINTER_63_32.info.byte_offset() as u64;

fn enabled(mode: Mode) -> Poster {
    let mut p = Poster::cx5(mode);
    p.ok(&bare::<EnableHcaIn>(Opcode::EnableHca, 0), 0x10);
    p
}

/// SET_HCA_CAP general with the current caps: 0x1010 bytes of input, 8 input blocks.
fn set_cap_input(p: &mut Poster) -> Vec<u8> {
    let cur = p.query_cap(cap_type::GENERAL, cap_mode::CUR);
    let mut input = bare::<SetHcaCapIn>(Opcode::SetHcaCap, 0);
    input[0x10..0x110].copy_from_slice(&cur);
    input
}

/// Rings slot 0 and returns the delivery status.
fn deliver(p: &Poster, m: &Msg) -> u8 {
    p.ring(1 << m.slot);
    p.wait(m).expect("no completion")
}

fn health_rfr(dev: &SimDevice) -> bool {
    dev.bar_read32(regs::HEALTH_RFR_SEVERITY.into()).get() >> 31 == 1
}

/// Prepares `input`, corrupts it, rings and checks the delivery status.
fn check(
    p: &mut Poster,
    input: &[u8],
    outlen: usize,
    corrupt: impl Fn(&Poster, &Msg),
    want: DeliveryStatus,
) {
    let m = p.prepare(0, input, outlen);
    corrupt(p, &m);
    assert_eq!(deliver(p, &m), want.raw(), "want {want}");
    p.release(m);
}

#[test]
fn descriptor_type_pointers_and_lengths() {
    let mut p = enabled(Mode::Sync);
    let issi = bare::<QueryIssiIn>(Opcode::QueryIssi, 0);
    let cap = bare::<QueryHcaCapIn>(Opcode::QueryHcaCap, 1);
    check(
        &mut p,
        &issi,
        0x70,
        |p, m| p.poke_entry(m, 0, &[5]),
        DeliveryStatus::CmdDesc,
    );
    let misalign = |p: &Poster, m: &Msg| p.poke_entry(m, OUT_PTR_LO + 3, &[0x40]);
    check(&mut p, &cap, 0x1010, misalign, DeliveryStatus::OutPtrAlign);
    let long_in = |p: &Poster, m: &Msg| p.poke_entry(m, IN_LEN, &0x300u32.to_be_bytes());
    check(&mut p, &issi, 0x70, long_in, DeliveryStatus::InLength);
    let long_out = |p: &Poster, m: &Msg| p.poke_entry(m, OUT_LEN, &0x2000u32.to_be_bytes());
    check(&mut p, &cap, 0x1010, long_out, DeliveryStatus::OutLength);
    let token = |p: &Poster, m: &Msg| {
        p.dev
            .dma_write(m.outbox[5].iova + BLOCK_TOKEN, &[0x99])
            .unwrap()
    };
    check(&mut p, &cap, 0x1010, token, DeliveryStatus::Token);
    let number = |p: &Poster, m: &Msg| {
        p.dev
            .dma_write(m.outbox[2].iova + BLOCK_NO, &[0, 0, 0, 7])
            .unwrap()
    };
    check(&mut p, &cap, 0x1010, number, DeliveryStatus::BadBlock);

    let input = set_cap_input(&mut p);
    let misalign = |p: &Poster, m: &Msg| p.poke_entry(m, IN_PTR_LO + 3, &[0x80]);
    check(&mut p, &input, 0x10, misalign, DeliveryStatus::InPtrAlign);
    let token = |p: &Poster, m: &Msg| {
        p.dev
            .dma_write(m.inbox[7].iova + BLOCK_TOKEN, &[0])
            .unwrap()
    };
    check(&mut p, &input, 0x10, token, DeliveryStatus::Token);
    let number = |p: &Poster, m: &Msg| {
        p.dev
            .dma_write(m.inbox[1].iova + BLOCK_NO, &[0, 0, 0, 0])
            .unwrap()
    };
    check(&mut p, &input, 0x10, number, DeliveryStatus::BadBlock);
    let short = |p: &Poster, m: &Msg| p.dev.dma_write(m.inbox[3].iova + NEXT, &[0; 8]).unwrap();
    check(&mut p, &input, 0x10, short, DeliveryStatus::InLength);
    // Nothing above reached the firmware: only ENABLE_HCA and one QUERY_HCA_CAP executed.
    assert_eq!(p.dev.commands_executed(), 2);
    assert!(p.dev.dma_faults().is_empty());
    assert_eq!(p.dev.health_syndrome(), 0);
}

#[test]
fn an_entry_owned_by_software_is_ignored() {
    let mut p = enabled(Mode::Sync);
    let m = p.prepare(3, &bare::<QueryIssiIn>(Opcode::QueryIssi, 0), 0x70);
    p.poke_entry(&m, 0x3f, &[0]);
    p.ring(1 << 3);
    assert_eq!(p.entry(&m)[0x3f], 0, "untouched");
    assert_eq!(p.dev.commands_executed(), 1);
    p.release(m);
}

#[test]
fn an_unmapped_mailbox_is_a_fw_internal_error_and_a_dma_fault() {
    for mode in [Mode::Sync, Mode::Threaded] {
        let mut p = enabled(mode);
        let input = set_cap_input(&mut p);
        let m = p.prepare(0, &input, 0x10);
        let gone = m.inbox[2].iova;
        p.dev.dma_free(gone).unwrap();
        assert_eq!(
            deliver(&p, &m),
            DeliveryStatus::FwInternal.raw(),
            "{mode:?}"
        );
        let faults = p.dev.dma_faults();
        assert_eq!(faults.len(), 1);
        assert_eq!((faults[0].iova, faults[0].kind), (gone, DmaFaultKind::Read));
        assert!(
            faults[0]
                .what
                .contains("input mailbox block 2 of SET_HCA_CAP"),
            "{}",
            faults[0].what
        );
        assert_eq!(
            p.dev.health_syndrome(),
            0,
            "a mailbox fault does not kill the firmware"
        );
        p.ok(&bare::<QueryIssiIn>(Opcode::QueryIssi, 0), 0x70);
    }
}

#[test]
fn an_injected_dma_fault_hits_the_next_input_mailbox_once() {
    let mut p = enabled(Mode::Sync);
    let input = set_cap_input(&mut p);
    p.dev.inject(Fault::DmaFault {
        opcode: Opcode::SetHcaCap as u16,
    });
    assert_eq!(
        p.exec_raw(&input, 0x10),
        Err(DeliveryStatus::FwInternal.raw())
    );
    let faults = p.dev.dma_faults();
    assert_eq!(faults.len(), 1);
    assert_eq!(faults[0].kind, DmaFaultKind::Injected);
    assert_eq!(status(&p.exec(&input, 0x10)), (0, 0), "one-shot");
    let traced = p
        .dev
        .trace()
        .iter()
        .filter(|t| t.opcode == Opcode::SetHcaCap as u16)
        .count();
    assert_eq!(traced, 1, "an undelivered command is not traced");
}

#[test]
fn an_unmapped_command_queue_kills_the_firmware() {
    for mode in [Mode::Sync, Mode::Threaded] {
        let mut p = enabled(mode);
        let m = p.prepare(1, &bare::<QueryIssiIn>(Opcode::QueryIssi, 0), 0x70);
        p.dev.dma_free(p.cmdq.iova).unwrap();
        p.ring(1 << 1);
        let start = p.dev.now_ns();
        while p.dev.health_syndrome() == 0 && p.dev.now_ns() - start < common::TIMEOUT_NS {
            p.dev.relax();
        }
        assert_eq!(
            p.dev.health_syndrome(),
            0xa,
            "{mode:?}: ICM fetch PCI error"
        );
        assert!(health_rfr(&p.dev));
        let faults = p.dev.dma_faults();
        assert_eq!(faults.len(), 1);
        assert_eq!(
            (faults[0].iova, faults[0].kind),
            (m.entry, DmaFaultKind::Read)
        );
        let c0 = p.dev.bar_read32(regs::HEALTH_COUNTER.into()).get();
        for _ in 0..1000 {
            p.dev.relax();
        }
        std::thread::sleep(std::time::Duration::from_micros(300));
        assert_eq!(
            p.dev.bar_read32(regs::HEALTH_COUNTER.into()).get(),
            c0,
            "heartbeat stopped"
        );
        assert_eq!(p.dev.commands_executed(), 1);
    }
}

#[test]
fn a_doorbell_before_the_queue_address_is_a_fetch_error() {
    let dev = SimDevice::new(common::quiet(Profile::connectx5()), Mode::Sync);
    for _ in 0..3000 {
        dev.relax();
    }
    dev.bar_write32(regs::CMD_DBELL.into(), Be32::new(1));
    assert_eq!(dev.health_syndrome(), 0xa);
    assert_eq!(dev.dma_faults().len(), 1);
}

#[test]
fn a_doorbell_while_initializing_is_ignored() {
    let dev = SimDevice::new(common::quiet(Profile::connectx5()), Mode::Sync);
    let cmdq = dev.dma_alloc(4096, 4096).unwrap();
    dev.bar_write32(
        regs::CMDQ_ADDR_H.into(),
        Be32::new((cmdq.iova >> 32) as u32),
    );
    dev.bar_write32(regs::CMDQ_ADDR_L_SZ.into(), Be32::new(cmdq.iova as u32));
    let mut e = [0u8; Entry::BYTES];
    let mut v = ViewMut::<Entry>::new(&mut e).unwrap();
    v.set(Entry::TYPE, 7)
        .unwrap()
        .set(Entry::INPUT_LENGTH, 16)
        .unwrap()
        .set(Entry::OUTPUT_LENGTH, 16)
        .unwrap();
    v.set(Entry::OWNERSHIP, 1).unwrap();
    v.bytes_mut(Entry::COMMAND_INPUT_INLINE_DATA)[..2].copy_from_slice(&[0x01, 0x04]);
    dev.dma_write(cmdq.iova, &e).unwrap();
    dev.bar_write32(regs::CMD_DBELL.into(), Be32::new(1));
    let mut b = [0u8; 1];
    dev.dma_read(cmdq.iova + 0x3f, &mut b).unwrap();
    assert_eq!(b[0], 1, "still owned by the device");
    assert_eq!(dev.commands_executed(), 0);
}

#[test]
fn signatures_are_checked_and_produced_when_enabled() {
    let mut p = enabled(Mode::Sync);
    let mut cur = p.query_cap(cap_type::GENERAL, cap_mode::CUR);
    ViewMut::<CmdHcaCap>::new(&mut cur)
        .unwrap()
        .set(CmdHcaCap::CMDIF_CHECKSUM, 3)
        .unwrap();
    assert_eq!(p.set_cap(cap_type::GENERAL, &cur), (0, 0));
    // The poster signs entries and blocks: a signed command goes through, and the device signs
    // what it hands back.
    let m = p.prepare(0, &bare::<QueryHcaCapIn>(Opcode::QueryHcaCap, 1), 0x1010);
    assert_eq!(deliver(&p, &m), 0);
    let e = p.entry(&m);
    assert_eq!(
        e.iter().fold(0u8, |a, b| a ^ b),
        0xff,
        "completed entry signature"
    );
    for b in &m.outbox {
        let mut img = [0u8; CmdIfBox::BYTES];
        p.dev.dma_read(b.iova, &mut img).unwrap();
        assert_eq!(
            img[0x200..0x23f].iter().fold(0u8, |a, b| a ^ b),
            0xff,
            "ctrl signature"
        );
        assert_eq!(img.iter().fold(0u8, |a, b| a ^ b), 0xff, "block signature");
    }
    assert_eq!(&p.output(&m)[0x10..0x110], &cur[..]);
    p.release(m);
    let input = set_cap_input(&mut p);
    let m = p.prepare(0, &input, 0x10);
    p.poke_entry(&m, Entry::SIGNATURE.info.byte_offset(), &[0x5a]);
    assert_eq!(
        deliver(&p, &m),
        DeliveryStatus::Signature.raw(),
        "entry signature"
    );
    p.release(m);
    let m = p.prepare(0, &input, 0x10);
    p.dev.dma_write(m.inbox[4].iova + 100, &[0x42]).unwrap();
    assert_eq!(
        deliver(&p, &m),
        DeliveryStatus::Signature.raw(),
        "block signature"
    );
    p.release(m);
}
