//! A hostile command interface: outputs that lie after a correct execution (object numbers,
//! status and syndrome, mailbox data, tokens, signatures), completions written twice, entries
//! completed out of order, a slot nobody rang completed.

mod common;

use common::{assert_clean, bare, cmd, status, Msg, Poster};
use mlx5_ifc::consts::{cap_mode, cap_type};
use mlx5_ifc::prm::caps::CmdHcaCap;
use mlx5_ifc::prm::cmdif::{CmdIfBox, CmdQueueEntry as Entry};
use mlx5_ifc::prm::hca::{EnableHcaIn, QueryHcaCapIn, QueryIssiIn};
use mlx5_ifc::prm::uar_pd::{AllocPdIn, AllocPdOut, DeallocPdIn};
use mlx5_ifc::{Layout, Opcode, View, ViewMut};
use mlx5_sim::{Fault, FaultEvent, Mode, ObjectKind, Replay, SimDevice, SPURIOUS_STATUS};

const ALLOC_PD: u16 = Opcode::AllocPd as u16;
const QUERY_HCA_CAP: u16 = Opcode::QueryHcaCap as u16;
const TOKEN: usize = Entry::TOKEN.info.byte_offset();
const BLOCK_TOKEN: usize = CmdIfBox::TOKEN.info.byte_offset();
const STATUS_OWN: usize = Entry::STATUS.info.byte_offset();

fn initialized(mode: Mode) -> Poster {
    let mut p = Poster::cx5(mode);
    p.init();
    p
}

fn alloc_pd() -> Vec<u8> {
    bare::<AllocPdIn>(Opcode::AllocPd, 0)
}

fn pd_of(out: &[u8]) -> u32 {
    View::<AllocPdOut>::new(out).unwrap().get32(AllocPdOut::PD)
}

fn dealloc_pds(p: &mut Poster, pds: impl IntoIterator<Item = u32>) {
    for pd in pds {
        p.ok(
            &cmd::<DeallocPdIn>(Opcode::DeallocPd, 0, |v| {
                v.set(DeallocPdIn::PD, pd.into()).unwrap();
            }),
            0x10,
        );
    }
}

fn events(dev: &SimDevice, fault: &str) -> Vec<FaultEvent> {
    dev.fault_events()
        .into_iter()
        .filter(|e| e.fault == fault)
        .collect()
}

fn xor(b: &[u8]) -> u8 {
    b.iter().fold(0, |a, x| a ^ x)
}

fn block(p: &Poster, m: &Msg, k: usize) -> [u8; CmdIfBox::BYTES] {
    let mut img = [0u8; CmdIfBox::BYTES];
    p.dev.dma_read(m.outbox[k].iova, &mut img).unwrap();
    img
}

/// QUERY_HCA_CAP general/current: 0x1010 bytes of output, 8 output blocks.
fn query_cap() -> Vec<u8> {
    bare::<QueryHcaCapIn>(Opcode::QueryHcaCap, cap_type::GENERAL << 1 | cap_mode::CUR)
}

#[test]
fn a_lying_output_follows_a_real_execution() {
    for mode in [Mode::Sync, Mode::Threaded] {
        let mut p = initialized(mode);
        // A wrong object number: PD 1 exists, the output names PD 0x123456.
        p.dev.inject(Fault::CorruptOutput {
            opcode: ALLOC_PD,
            offset: 8,
            bytes: vec![0, 0x12, 0x34, 0x56],
        });
        let out = p.ok(&alloc_pd(), AllocPdOut::BYTES);
        assert_eq!(pd_of(&out), 0x12_3456, "{mode:?}");
        assert!(p.dev.live_objects().contains(&(ObjectKind::Pd, 1)));
        let t = p.dev.trace().last().unwrap().clone();
        assert_eq!((t.opcode, t.status), (ALLOC_PD, 0));
        assert_eq!(
            pd_of(&t.output),
            0x12_3456,
            "the trace shows what was written"
        );
        assert_eq!(
            t.faults,
            vec!["CorruptOutput: output[0x8..0xc] 00000001 -> 00123456".to_string()]
        );
        assert!(t.to_json_line().contains(r#""faults":["CorruptOutput: "#));
        // A wrong status and syndrome, and a wrong PD, on one completion: PD 2 exists.
        p.dev.inject(Fault::CorruptOutput {
            opcode: ALLOC_PD,
            offset: 0,
            bytes: vec![0x03, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef],
        });
        p.dev.inject(Fault::CorruptOutput {
            opcode: ALLOC_PD,
            offset: 11,
            bytes: vec![0x77],
        });
        let out = p.exec(&alloc_pd(), AllocPdOut::BYTES);
        assert_eq!(status(&out), (0x03, 0xdead_beef));
        assert_eq!(pd_of(&out), 0x77);
        assert!(p.dev.live_objects().contains(&(ObjectKind::Pd, 2)));
        let t = p.dev.trace().last().unwrap().clone();
        assert_eq!((t.status, t.syndrome, t.faults.len()), (0, 0, 2));
        // One-shot: the next ALLOC_PD tells the truth.
        assert_eq!(pd_of(&p.ok(&alloc_pd(), AllocPdOut::BYTES)), 3);
        assert_eq!(events(&p.dev, "CorruptOutput").len(), 3);
        dealloc_pds(&mut p, 1..=3);
        p.shutdown();
        assert_clean(&p.finish());
    }
}

#[test]
fn a_lying_output_reaches_the_mailboxes_up_to_the_commands_room() {
    let mut p = Poster::cx5(Mode::Sync);
    p.ok(&bare::<EnableHcaIn>(Opcode::EnableHca, 0), 0x10);
    let honest = p.ok(&query_cap(), 0x1010);
    let at = 16 + 512 + 7; // byte 7 of output block 1
    p.dev.inject(Fault::CorruptOutput {
        opcode: QUERY_HCA_CAP,
        offset: at,
        bytes: vec![0xa5; 3],
    });
    let lying = p.ok(&query_cap(), 0x1010);
    let differ: Vec<usize> = (0..honest.len())
        .filter(|&i| honest[i] != lying[i])
        .collect();
    assert!(differ.iter().all(|i| (at..at + 3).contains(i)) && !differ.is_empty());
    assert_eq!(&lying[at..at + 3], &[0xa5; 3]);
    // QUERY_ISSI with 0x70 bytes of output has one block: room for 16 + 512 bytes. A write
    // across the end is cut there; one past it changes nothing.
    let issi = bare::<QueryIssiIn>(Opcode::QueryIssi, 0);
    let honest = p.ok(&issi, 0x70);
    p.dev.inject(Fault::CorruptOutput {
        opcode: Opcode::QueryIssi as u16,
        offset: 526,
        bytes: vec![1, 2, 3, 4],
    });
    p.dev.inject(Fault::CorruptOutput {
        opcode: Opcode::QueryIssi as u16,
        offset: 600,
        bytes: vec![9],
    });
    let m = p.prepare(0, &issi, 0x70);
    p.ring(1);
    assert_eq!(p.wait(&m), Some(0));
    assert_eq!(p.output(&m), honest, "beyond output_length: unseen");
    assert_eq!(
        &block(&p, &m, 0)[510..512],
        &[1, 2],
        "cut at the end of the block"
    );
    p.release(m);
    let ev = events(&p.dev, "CorruptOutput");
    assert_eq!(ev.len(), 3);
    assert!(ev[2].what.contains("nothing changed"), "{}", ev[2].what);
}

#[test]
fn wrong_output_tokens_and_signatures() {
    let mut p = Poster::cx5(Mode::Sync);
    p.ok(&bare::<EnableHcaIn>(Opcode::EnableHca, 0), 0x10);
    let mut cur = p.query_cap(cap_type::GENERAL, cap_mode::CUR);
    ViewMut::<CmdHcaCap>::new(&mut cur)
        .unwrap()
        .set(CmdHcaCap::CMDIF_CHECKSUM, 3)
        .unwrap();
    assert_eq!(p.set_cap(cap_type::GENERAL, &cur), (0, 0));
    let run = |p: &mut Poster, f: Option<Fault>| {
        if let Some(f) = f {
            p.dev.inject(f);
        }
        let m = p.prepare(0, &query_cap(), 0x1010);
        p.ring(1);
        assert_eq!(p.wait(&m), Some(0), "delivered");
        m
    };
    // Block 2 carries token 0x77 — signed as written, so only the token is wrong.
    let m = run(
        &mut p,
        Some(Fault::CorruptOutputToken {
            opcode: QUERY_HCA_CAP,
            block: 2,
            token: 0x77,
        }),
    );
    let token = p.entry(&m)[TOKEN];
    for k in 0..m.outbox.len() {
        let img = block(&p, &m, k);
        let want = if k == 2 { 0x77 } else { token };
        assert_eq!(img[BLOCK_TOKEN], want, "block {k}");
        assert_eq!(xor(&img), 0xff, "block {k} signature");
    }
    p.release(m);
    // Block 1's signature is wrong; the entry's and the other blocks' hold.
    let m = run(
        &mut p,
        Some(Fault::CorruptOutputSignature {
            opcode: QUERY_HCA_CAP,
            block: Some(1),
        }),
    );
    for k in 0..m.outbox.len() {
        assert_eq!(xor(&block(&p, &m, k)) == 0xff, k != 1, "block {k}");
    }
    assert_eq!(xor(&p.entry(&m)), 0xff);
    p.release(m);
    // The entry's signature is wrong.
    let m = run(
        &mut p,
        Some(Fault::CorruptOutputSignature {
            opcode: QUERY_HCA_CAP,
            block: None,
        }),
    );
    assert_ne!(xor(&p.entry(&m)), 0xff);
    assert!((0..8).all(|k| xor(&block(&p, &m, k)) == 0xff));
    p.release(m);
    // A block the command does not have: nothing changes, the fault is spent.
    let m = run(
        &mut p,
        Some(Fault::CorruptOutputToken {
            opcode: QUERY_HCA_CAP,
            block: 8,
            token: 0x77,
        }),
    );
    assert!((0..8).all(|k| block(&p, &m, k)[BLOCK_TOKEN] == p.entry(&m)[TOKEN]));
    p.release(m);
    let m = run(&mut p, None);
    assert_eq!(xor(&p.entry(&m)), 0xff);
    p.release(m);
    let faults: Vec<Vec<String>> = p.dev.trace().iter().map(|t| t.faults.clone()).collect();
    let n = faults.len();
    assert!(faults[n - 5][0].starts_with("CorruptOutputToken: output mailbox block 2"));
    assert!(faults[n - 4][0].starts_with("CorruptOutputSignature: output mailbox block 1"));
    assert!(faults[n - 3][0].starts_with("CorruptOutputSignature: entry"));
    assert!(faults[n - 2][0].contains("nothing changed"));
    assert!(faults[n - 1].is_empty());
}

#[test]
fn a_completion_written_again_before_the_next_command() {
    for mode in [Mode::Sync, Mode::Threaded] {
        let mut p = initialized(mode);
        p.dev.inject(Fault::CompleteTwice {
            opcode: ALLOC_PD,
            when: Replay::BeforeNextCommand,
        });
        let first = p.ok(&alloc_pd(), AllocPdOut::BYTES);
        assert_eq!(pd_of(&first), 1);
        let t = p.dev.trace().last().unwrap().clone();
        assert_eq!(
            t.faults,
            vec!["CompleteTwice: slot 0 will be completed again (BeforeNextCommand)".to_string()]
        );
        // The driver reuses slot 0: the old completion lands on the new entry before the
        // device looks at it, which then finds the entry owned by software and skips it.
        let executed = p.dev.commands_executed();
        let m = p.prepare(0, &bare::<QueryIssiIn>(Opcode::QueryIssi, 0), 0x70);
        p.ring(1);
        assert_eq!(p.wait(&m), Some(0), "{mode:?}");
        assert_eq!(&p.output(&m)[..16], &first[..16], "ALLOC_PD's output");
        assert_eq!(p.dev.commands_executed(), executed, "QUERY_ISSI never ran");
        p.release(m);
        let ev = events(&p.dev, "CompleteTwice");
        assert_eq!(ev.len(), 2);
        assert!(ev[1]
            .what
            .starts_with("slot 0 completion of ALLOC_PD written again"));
        // One-shot.
        p.ok(&bare::<QueryIssiIn>(Opcode::QueryIssi, 0), 0x70);
        assert_eq!(p.dev.commands_executed(), executed + 1);
        dealloc_pds(&mut p, [1]);
        p.shutdown();
        assert_clean(&p.finish());
    }
}

#[test]
fn a_completion_written_again_after_the_next_command() {
    for mode in [Mode::Sync, Mode::Threaded] {
        let mut p = initialized(mode);
        p.dev.inject(Fault::CompleteTwice {
            opcode: ALLOC_PD,
            when: Replay::AfterNextCommand,
        });
        assert_eq!(pd_of(&p.ok(&alloc_pd(), AllocPdOut::BYTES)), 1);
        // The next ALLOC_PD runs (PD 2 exists), then the first one's completion overwrites it.
        let second = p.ok(&alloc_pd(), AllocPdOut::BYTES);
        assert_eq!(pd_of(&second), 1, "{mode:?}");
        assert!(p.dev.live_objects().contains(&(ObjectKind::Pd, 2)));
        assert_eq!(pd_of(&p.dev.trace().last().unwrap().output), 2);
        assert_eq!(pd_of(&p.ok(&alloc_pd(), AllocPdOut::BYTES)), 3, "one-shot");
        dealloc_pds(&mut p, 1..=3);
        p.shutdown();
        assert_clean(&p.finish());
    }
}

#[test]
fn entries_rung_together_complete_the_later_one_first() {
    for mode in [Mode::Sync, Mode::Threaded] {
        let mut p = initialized(mode);
        p.dev.inject(Fault::CompleteOutOfOrder);
        let ring4 = |p: &mut Poster| -> Vec<u32> {
            let msgs: Vec<Msg> = (0..4).map(|s| p.prepare(s, &alloc_pd(), 0x10)).collect();
            p.ring(0b1111);
            msgs.into_iter()
                .map(|m| {
                    assert_eq!(p.wait(&m), Some(0));
                    let pd = pd_of(&p.output(&m));
                    p.release(m);
                    pd
                })
                .collect()
        };
        assert_eq!(
            ring4(&mut p),
            vec![4, 3, 2, 1],
            "{mode:?}: slot 3 ran first"
        );
        let trace = p.dev.trace();
        let last4 = &trace[trace.len() - 4..];
        assert!(last4
            .iter()
            .all(|t| t.faults[0].starts_with("CompleteOutOfOrder: slots [3, 2, 1, 0]")));
        assert_eq!(ring4(&mut p), vec![5, 6, 7, 8], "{mode:?}: one-shot");
        dealloc_pds(&mut p, 1..=8);
        p.shutdown();
        assert_clean(&p.finish());
    }
}

#[test]
fn a_lone_entry_comes_with_a_spurious_completion_of_an_idle_slot() {
    let mut p = initialized(Mode::Sync);
    // Slot 1 holds an entry the driver has not rung yet (owned by the device): not idle.
    let held = p.prepare(1, &bare::<QueryIssiIn>(Opcode::QueryIssi, 0), 0x70);
    p.dev.inject(Fault::CompleteOutOfOrder);
    assert_eq!(pd_of(&p.ok(&alloc_pd(), AllocPdOut::BYTES)), 1);
    let own = |s: u64| {
        let mut b = [0u8; 1];
        p.dev
            .dma_read(p.cmdq.iova + s * 64 + STATUS_OWN as u64, &mut b)
            .unwrap();
        b[0]
    };
    assert_eq!(own(1), 1, "slot 1 untouched");
    assert_eq!(own(2), SPURIOUS_STATUS << 1, "slot 2: done, garbage status");
    assert_eq!(own(3), 0);
    let ev = events(&p.dev, "CompleteOutOfOrder");
    assert_eq!(ev.len(), 1);
    assert!(
        ev[0].what.starts_with("slot 2, never rung"),
        "{}",
        ev[0].what
    );
    // The held entry still runs when rung.
    p.ring(1 << 1);
    assert_eq!(p.wait(&held), Some(0));
    assert_eq!(status(&p.output(&held)), (0, 0));
    p.release(held);
    dealloc_pds(&mut p, [1]);
    p.shutdown();
    assert_clean(&p.finish());
}

#[test]
fn clear_faults_drops_pending_and_armed_command_faults() {
    let mut p = initialized(Mode::Sync);
    p.dev.inject(Fault::CorruptOutput {
        opcode: ALLOC_PD,
        offset: 8,
        bytes: vec![0xff; 4],
    });
    p.dev.inject(Fault::CompleteTwice {
        opcode: Opcode::QueryIssi as u16,
        when: Replay::BeforeNextCommand,
    });
    p.dev.inject(Fault::CompleteOutOfOrder);
    p.ok(&bare::<QueryIssiIn>(Opcode::QueryIssi, 0), 0x70); // arms the replay, spends OutOfOrder
    let before = p.dev.fault_events().len();
    p.dev.clear_faults();
    assert_eq!(pd_of(&p.ok(&alloc_pd(), AllocPdOut::BYTES)), 1);
    assert_eq!(p.dev.fault_events().len(), before, "nothing more happened");
    assert!(p.dev.trace().last().unwrap().faults.is_empty());
    dealloc_pds(&mut p, [1]);
    p.shutdown();
    assert_clean(&p.finish());
}
