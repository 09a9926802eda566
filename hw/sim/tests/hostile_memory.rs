//! A device that writes wrong things into host memory: corrupted EQEs (any field, a flipped
//! owner bit), stray DMA writes at a chosen IOVA, random stray writes into live allocations.

mod common;

use common::datapath::*;
use common::{bare, Poster};
use mlx5_ifc::consts::qp_st::RC;
use mlx5_ifc::event;
use mlx5_ifc::prm::hca::EnableHcaIn;
use mlx5_ifc::{Be64, Opcode};
use mlx5_sim::{DmaFaultKind, EqeField, Fault, Mode, SimDevice, MAX_SCRIBBLE_BYTES};

const SIGNALED: u8 = 0x08;
const WRITE: u8 = 0x08;

/// A node with a looped-back RC QP and a region to write to.
fn node() -> (Node, Qp, Mr) {
    let mut n = Node::new(Mode::Sync, 1);
    let qp = n.create_qp(RC);
    n.connect(&qp, 1, qp.qpn, |_| {});
    let mr = n.reg_mr(4096, false, true, false);
    (n, qp, mr)
}

/// Arms the CQ and completes one signaled WRITE: the device writes a COMPLETION EQE. Returns
/// the EQ slot it went to.
fn fire(n: &mut Node, qp: &mut Qp, mr: &Mr) -> u64 {
    let dev = n.dev();
    let uar = u64::from(n.fx.uar) * 4096;
    let slot = dev.eqe_count(n.eqn).unwrap() % (1 << LOG_EQ);
    let arm = (u64::from(n.cq_ci & 0xff_ffff) << 32) | u64::from(n.cqn);
    dev.bar_write64(uar + 0x20, Be64::new(arm));
    let segs = [Seg::Raddr(mr.va(0), mr.key), Seg::Inline(vec![1; 4])];
    n.post_send(qp, WRITE, SIGNALED, [0; 4], &segs);
    assert_eq!(n.drain().len(), 1);
    slot
}

fn raw_eqe(n: &Node, slot: u64) -> [u8; 64] {
    let mut b = [0u8; 64];
    n.dev().dma_read(n.eq.iova + slot * 64, &mut b).unwrap();
    b
}

#[test]
fn a_corrupted_eqe_carries_the_wrong_field() {
    let (mut n, mut qp, mr) = node();
    let dev = n.dev();
    let cqn = n.cqn.to_be_bytes();
    fire(&mut n, &mut qp, &mr);
    assert_eq!(n.poll_eq(), Some((event::COMPLETION, honest(&cqn))));
    let cases: [(Option<u32>, EqeField, u32); 5] = [
        (Some(n.eqn), EqeField::Cqn, 0xab_0bad),
        (None, EqeField::EventType, 0x3f),
        (None, EqeField::SubType, 0x7),
        (Some(n.eqn), EqeField::Data(0), 0xdead_beef),
        (None, EqeField::Byte(0x3e), 0x5a),
    ];
    for (eqn, field, value) in cases {
        dev.inject(Fault::CorruptEqe { eqn, field, value });
        let slot = fire(&mut n, &mut qp, &mr);
        let raw = raw_eqe(&n, slot);
        let (etype, data) = n.poll_eq().expect("the EQE is there");
        match field {
            EqeField::Cqn => assert_eq!(&data[0x18..0x1c], &[0, 0xab, 0x0b, 0xad]),
            EqeField::EventType => assert_eq!(etype, 0x3f),
            EqeField::SubType => assert_eq!(raw[3], 7),
            EqeField::Data(0) => {
                assert_eq!(&data[..4], &[0xde, 0xad, 0xbe, 0xef]);
                assert_eq!(&data[0x18..0x1c], &cqn, "the rest is true");
            }
            _ => assert_eq!(raw[0x3e], 0x5a),
        }
        if field != EqeField::EventType {
            assert_eq!(etype, event::COMPLETION, "{field:?}");
        }
    }
    // Each was one-shot.
    fire(&mut n, &mut qp, &mr);
    assert_eq!(n.poll_eq(), Some((event::COMPLETION, honest(&cqn))));
    let ev: Vec<_> = dev
        .fault_events()
        .into_iter()
        .filter(|e| e.fault == "CorruptEqe")
        .collect();
    assert_eq!(ev.len(), 5);
    assert!(
        ev[0]
            .what
            .contains(&format!("of EQ {:#x} (event 0x0): Cqn := 0xab0bad", n.eqn)),
        "{}",
        ev[0].what
    );
}

fn honest(cqn: &[u8; 4]) -> [u8; 32] {
    let mut d = [0u8; 32];
    d[0x18..0x1c].copy_from_slice(cqn);
    d
}

#[test]
fn an_eqe_for_another_eq_waits_for_it() {
    let (mut n, mut qp, mr) = node();
    let dev = n.dev();
    dev.inject(Fault::CorruptEqe {
        eqn: Some(n.eqn + 1),
        field: EqeField::EventType,
        value: 0x3f,
    });
    fire(&mut n, &mut qp, &mr);
    assert_eq!(n.poll_eq().map(|e| e.0), Some(event::COMPLETION));
    dev.clear_faults();
    fire(&mut n, &mut qp, &mr);
    assert_eq!(n.poll_eq().map(|e| e.0), Some(event::COMPLETION));
    assert!(dev.fault_events().is_empty());
}

#[test]
fn a_flipped_owner_bit_hides_the_eqe_and_stalls_the_ring() {
    let (mut n, mut qp, mr) = node();
    let dev = n.dev();
    dev.inject(Fault::CorruptEqe {
        eqn: None,
        field: EqeField::OwnerFlipped,
        value: 0,
    });
    let slot = fire(&mut n, &mut qp, &mr);
    assert_eq!(
        dev.eqe_count(n.eqn),
        Some(1),
        "written, as far as the device knows"
    );
    assert_eq!(dev.eq_armed(n.eqn), Some(false), "and the EQ fired");
    let raw = raw_eqe(&n, slot);
    assert_eq!(raw[0x3f] & 1, 1, "owner says: not written in this pass");
    assert_eq!(&raw[0x38..0x3c], &n.cqn.to_be_bytes(), "the rest is true");
    assert_eq!(n.poll_eq(), None);
    // The next EQE is written correctly one slot further; a driver waiting on the hidden one
    // never gets there.
    let next = fire(&mut n, &mut qp, &mr);
    assert_eq!(next, slot + 1);
    assert_eq!(raw_eqe(&n, next)[0x3f] & 1, 0);
    assert_eq!(n.poll_eq(), None);
    assert_eq!(dev.eqe_count(n.eqn), Some(2));
}

#[test]
fn a_stray_write_lands_where_it_is_aimed_and_the_iommu_blocks_the_rest() {
    let mut p = Poster::cx5(Mode::Sync);
    p.ok(&bare::<EnableHcaIn>(Opcode::EnableHca, 0), 0x10);
    let dev = p.dev.clone();
    assert_eq!(dev.dma_allocations(), vec![(p.cmdq.iova, 4096)]);
    let buf = dev.dma_alloc(100, 8).unwrap();
    assert_eq!(
        dev.dma_allocations(),
        vec![(p.cmdq.iova, 4096), (buf.iova, 100)]
    );
    // Into the command queue, across a word boundary.
    let at = p.cmdq.iova + 5 * 64 + 6;
    dev.inject(Fault::DmaScribble {
        iova: at,
        bytes: vec![1, 2, 3, 4],
    });
    let mut got = [0u8; 4];
    dev.dma_read(at, &mut got).unwrap();
    assert_eq!(got, [1, 2, 3, 4]);
    // The last bytes of a block, and past its end (the guard page): blocked, recorded.
    dev.inject(Fault::DmaScribble {
        iova: buf.iova + 98,
        bytes: vec![9, 9],
    });
    dev.inject(Fault::DmaScribble {
        iova: buf.iova + 99,
        bytes: vec![7, 7],
    });
    let mut tail = [0u8; 2];
    dev.dma_read(buf.iova + 98, &mut tail).unwrap();
    assert_eq!(tail, [9, 9], "the blocked write wrote nothing");
    let faults = dev.dma_faults();
    assert_eq!(faults.len(), 1);
    assert_eq!(
        (faults[0].iova, faults[0].len, faults[0].kind),
        (buf.iova + 99, 2, DmaFaultKind::Write)
    );
    let ev = dev.fault_events();
    assert_eq!(ev.len(), 3);
    assert!(ev.iter().all(|e| e.fault == "DmaScribble"));
    assert!(
        ev[2].what.ends_with("not mapped, blocked"),
        "{}",
        ev[2].what
    );
    dev.dma_free(buf.iova).unwrap();
    assert_eq!(dev.dma_allocations(), vec![(p.cmdq.iova, 4096)]);
}

/// A device with the same allocations every time: `(device, live blocks)`.
fn scribble_target() -> (SimDevice, Vec<(u64, usize)>) {
    let dev = SimDevice::new(common::quiet(mlx5_sim::Profile::connectx5()), Mode::Sync);
    let a = dev.dma_alloc(64, 64).unwrap();
    let b = dev.dma_alloc(3000, 4096).unwrap();
    let c = dev.dma_alloc(9, 8).unwrap();
    dev.dma_write(b.iova, &[0x11; 3000]).unwrap();
    dev.dma_free(b.iova).unwrap();
    let live = vec![(a.iova, a.len), (c.iova, c.len)];
    assert_eq!(dev.dma_allocations(), live);
    (dev, live)
}

#[test]
fn random_stray_writes_hit_live_allocations_reproducibly() {
    let (dev, live) = scribble_target();
    let writes = dev.dma_scribble(42, 300);
    assert_eq!(writes.len(), 300);
    // Replaying them on a shadow copy gives what the device holds: each `old` is what was there.
    let mut shadow: Vec<Vec<u8>> = live.iter().map(|&(_, len)| vec![0u8; len]).collect();
    for w in &writes {
        assert!((1..=MAX_SCRIBBLE_BYTES).contains(&w.new.len()));
        let k = live
            .iter()
            .position(|&(iova, len)| {
                w.iova >= iova && w.iova + w.new.len() as u64 <= iova + len as u64
            })
            .unwrap_or_else(|| panic!("{w:?} outside every live allocation"));
        let off = (w.iova - live[k].0) as usize;
        assert_eq!(&shadow[k][off..off + w.old.len()], &w.old[..]);
        shadow[k][off..off + w.new.len()].copy_from_slice(&w.new);
    }
    for (k, &(iova, len)) in live.iter().enumerate() {
        let mut now = vec![0u8; len];
        dev.dma_read(iova, &mut now).unwrap();
        assert_eq!(now, shadow[k]);
    }
    assert!(live
        .iter()
        .all(|&(iova, _)| writes.iter().any(|w| w.iova >= iova && w.iova < iova + 64)));
    let (again, _) = scribble_target();
    assert_eq!(
        again.dma_scribble(42, 300),
        writes,
        "same seed, same writes"
    );
    let (other, _) = scribble_target();
    assert_ne!(other.dma_scribble(43, 300), writes);
    assert_eq!(dev.fault_events().len(), 300);
    assert!(dev.dma_faults().is_empty());
    let empty = SimDevice::new(common::quiet(mlx5_sim::Profile::connectx5()), Mode::Sync);
    assert!(empty.dma_scribble(1, 10).is_empty());
}
