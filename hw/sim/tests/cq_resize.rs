//! CQ resize (MODIFY_CQ op_mod 1), checked against what its consumers do: rdma-core's
//! `ibv_resize_cq` (mlx5 provider) and mlx5_ib's resize of kernel CQs give the device a new buffer,
//! then copy the CQEs they have not polled from the old buffer into the new one — each one slot
//! further on — until they meet the RESIZE_CQ CQE (opcode 5) the device wrote to the old buffer,
//! and poll on from the new buffer with the producer index counting on (docs/fields.md).

mod common;

use common::datapath::*;
use common::queues::with_pas;
use common::{cmd, status};
use mlx5_ifc::consts::modify_cq;
use mlx5_ifc::consts::qp_st::RC;
use mlx5_ifc::prm::cq::{Cqc, ModifyCqIn, QueryCqIn, QueryCqOut};
use mlx5_ifc::{Layout, Opcode, View};
use mlx5_sim::{DmaBlock, Mode, SimDevice};

const SIGNALED: u8 = 0x08;
const SEND: u8 = 0x0a;
const RESP_SEND: u8 = 0x2;
const REQ: u8 = 0x0;
const RESIZE_CQ: u8 = 0x5;
const INVALID_OP_OWN: u8 = 0xf0;

const BAD_PARAM: u8 = 0x03;
const BAD_RES: u8 = 0x05;
const CQ_MODIFY_FIELD: u32 = 0x5e03_0066;
const CQ_RESIZE_TOO_SMALL: u32 = 0x5e03_0067;
const CQ_TOO_BIG: u32 = 0x5e03_001e;
const UNKNOWN_CQ: u32 = 0x5e05_0004;

/// A CQ buffer of `2^log` 64-byte CQEs, every entry invalid (as software hands it over).
fn cq_buffer(dev: &SimDevice, log: u32) -> DmaBlock {
    let b = dev.dma_alloc(64 << log, 4096).unwrap();
    for k in 0..1u64 << log {
        dev.dma_write(b.iova + k * 64 + 63, &[INVALID_OP_OWN])
            .unwrap();
    }
    b
}

fn entry(dev: &SimDevice, buf: &DmaBlock, log: u32, i: u32) -> [u8; 64] {
    let mut b = [0u8; 64];
    let slot = u64::from(i & ((1 << log) - 1));
    dev.dma_read(buf.iova + slot * 64, &mut b).unwrap();
    b
}

/// The CQE at index `i` if the device has handed it to software (owner bit of that pass).
fn sw_owned(dev: &SimDevice, buf: &DmaBlock, log: u32, i: u32) -> Option<[u8; 64]> {
    let b = entry(dev, buf, log, i);
    let owner = (i >> log) & 1;
    (b[63] >> 4 != 0xf && u32::from(b[63] & 1) == owner).then_some(b)
}

fn resize_in(cqn: u32, select: u64, log: u64, pas: &[u64]) -> Vec<u8> {
    let input = cmd::<ModifyCqIn>(Opcode::ModifyCq, modify_cq::RESIZE, |v| {
        v.set(ModifyCqIn::CQN, cqn.into()).unwrap();
        v.bytes_mut(ModifyCqIn::MODIFY_FIELD_SELECT_RESIZE_FIELD_SELECT)
            .copy_from_slice(&(select as u32).to_be_bytes());
        let mut c = v.nested_mut(ModifyCqIn::CQ_CONTEXT);
        c.set(Cqc::LOG_CQ_SIZE, log).unwrap();
    });
    with_pas(input, pas)
}

fn pages(buf: &DmaBlock) -> Vec<u64> {
    (0..buf.len.div_ceil(4096) as u64)
        .map(|k| buf.iova + k * 4096)
        .collect()
}

/// One SEND between two looped-back RC QPs: two CQEs (the receive's, the send's).
fn exchange(n: &mut Node, qa: &mut Qp, qb: &mut Qp, mr: &Mr) {
    n.post_recv(qb, &[(64, mr.key, mr.va(0))]);
    n.post_send(
        qa,
        SEND,
        SIGNALED,
        [0; 4],
        &[Seg::Data(32, mr.key, mr.va(64))],
    );
}

/// Copies the unpolled CQEs from `ci` up to the resize CQE into the new buffer, one slot
/// further on, as rdma-core's mlx5 provider does; returns the consumer index to poll on from.
fn copy_to_new(dev: &SimDevice, old: (&DmaBlock, u32), new: (&DmaBlock, u32), ci: u32) -> u32 {
    let mut i = ci;
    loop {
        let e = sw_owned(dev, old.0, old.1, i).expect("the old buffer ends with a resize CQE");
        if e[63] >> 4 == RESIZE_CQ {
            return ci + 1;
        }
        let mut d = e;
        d[63] = (d[63] & !1) | (((i + 1) >> new.1) & 1) as u8;
        let slot = u64::from((i + 1) & ((1 << new.1) - 1));
        dev.dma_write(new.0.iova + slot * 64, &d).unwrap();
        i += 1;
    }
}

/// A node with two RC QPs connected to each other on it, and a 4 KiB MR.
fn looped_pair() -> (Node, Qp, Qp, Mr) {
    let mut n = Node::new(Mode::Sync, 1);
    let (qa, qb) = (n.create_qp(RC), n.create_qp(RC));
    n.connect(&qa, 1, qb.qpn, |_| {});
    n.connect(&qb, 1, qa.qpn, |_| {});
    let mr = n.reg_mr(4096, false, false, false);
    (n, qa, qb, mr)
}

#[test]
fn a_resized_cq_ends_its_old_buffer_with_a_resize_cqe_and_counts_on_in_the_new_one() {
    let (mut n, mut qa, mut qb, mr) = looped_pair();
    let dev = n.dev();
    for _ in 0..5 {
        exchange(&mut n, &mut qa, &mut qb, &mr);
    }
    // Three of the ten CQEs polled; seven left in the old buffer (64 entries).
    for _ in 0..3 {
        n.poll().unwrap();
    }
    let (old_log, new_log) = (LOG_CQ, 8u32);
    let new = cq_buffer(&dev, new_log);
    let out =
        n.fx.p
            .exec(&resize_in(n.cqn, 0x7, new_log.into(), &pages(&new)), 0x10);
    assert_eq!(status(&out), (0, 0));
    // The resize CQE is the device's last entry in the old buffer, at producer index 10.
    let r = sw_owned(&dev, &n.cq, old_log, 10).expect("resize CQE at index 10");
    assert_eq!(r[63] >> 4, RESIZE_CQ);
    assert!(sw_owned(&dev, &n.cq, old_log, 11).is_none());
    // Nothing in the new buffer yet; QUERY_CQ reports the new size and buffer.
    assert!((0..1 << new_log).all(|i| entry(&dev, &new, new_log, i)[63] == INVALID_OP_OWN));
    let out = n.fx.p.ok(
        &cmd::<QueryCqIn>(Opcode::QueryCq, 0, |v| {
            v.set(QueryCqIn::CQN, n.cqn.into()).unwrap();
        }),
        QueryCqOut::BYTES + 8 * 4,
    );
    let q = View::<QueryCqOut>::new(&out).unwrap();
    assert_eq!(q.nested(QueryCqOut::CQ_CONTEXT).get(Cqc::LOG_CQ_SIZE), 8);
    assert_eq!(
        q.bytes(QueryCqOut::PAS)[..8],
        new.iova.to_be_bytes(),
        "QUERY_CQ's first PAS entry"
    );

    // Software copies the seven, and polls on in the new buffer from index 4.
    let mut ci = copy_to_new(&dev, (&n.cq, old_log), (&new, new_log), n.cq_ci);
    assert_eq!(ci, 4);
    dev.dma_write(n.cq_dbr.iova, &ci.to_be_bytes()).unwrap();
    // New completions go to the new buffer at 11 and 12, and on through a wrap of it.
    let mut seen = Vec::new();
    for round in 0..140 {
        exchange(&mut n, &mut qa, &mut qb, &mr);
        while let Some(e) = sw_owned(&dev, &new, new_log, ci) {
            seen.push((ci, e[63] >> 4, u16::from_be_bytes([e[60], e[61]])));
            ci += 1;
            dev.dma_write(n.cq_dbr.iova, &ci.to_be_bytes()).unwrap();
        }
        assert_eq!(seen.len(), 7 + 2 * (round + 1), "round {round}");
    }
    // The seven copied ones first (four sends, three receives), then the new ones.
    assert_eq!(seen[0].0, 4);
    assert_eq!(
        seen.iter().filter(|s| s.1 == REQ).count(),
        4 + 140,
        "every send completed once"
    );
    assert!(seen.iter().all(|s| s.1 == REQ || s.1 == RESP_SEND));
    let new_ones: Vec<u16> = seen[7..]
        .iter()
        .filter(|s| s.1 == REQ)
        .map(|s| s.2)
        .collect();
    assert_eq!(new_ones, (5..145).collect::<Vec<u16>>());
    assert!(ci > 1 << new_log, "the new buffer wrapped ({ci})");
    assert_eq!(dev.datapath_counters().cqes_dropped, 0);
}

#[test]
fn a_cq_shrinks_when_its_unpolled_cqes_and_the_resize_cqe_fit() {
    let (mut n, mut qa, mut qb, mr) = looped_pair();
    let dev = n.dev();
    for _ in 0..4 {
        exchange(&mut n, &mut qa, &mut qb, &mr);
    }
    // Eight unpolled: a CQ of 8 cannot take them and the resize CQE; one of 16 can.
    let small = cq_buffer(&dev, 3);
    let out = n.fx.p.exec(&resize_in(n.cqn, 0x7, 3, &pages(&small)), 0x10);
    assert_eq!(status(&out), (BAD_PARAM, CQ_RESIZE_TOO_SMALL));
    assert!(
        sw_owned(&dev, &n.cq, LOG_CQ, 8).is_none(),
        "a refused resize writes no CQE"
    );
    let ok = cq_buffer(&dev, 4);
    let out = n.fx.p.exec(&resize_in(n.cqn, 0x7, 4, &pages(&ok)), 0x10);
    assert_eq!(status(&out), (0, 0));
    let mut ci = copy_to_new(&dev, (&n.cq, LOG_CQ), (&ok, 4), 0);
    dev.dma_write(n.cq_dbr.iova, &ci.to_be_bytes()).unwrap();
    let mut got = 0;
    for _ in 0..20 {
        exchange(&mut n, &mut qa, &mut qb, &mr);
        while sw_owned(&dev, &ok, 4, ci).is_some() {
            ci += 1;
            got += 1;
            dev.dma_write(n.cq_dbr.iova, &ci.to_be_bytes()).unwrap();
        }
    }
    assert_eq!(got, 8 + 40);
    assert_eq!(dev.datapath_counters().cqes_dropped, 0);
}

#[test]
fn resize_refusals_name_their_reason() {
    let mut n = Node::new(Mode::Sync, 1);
    let dev = n.dev();
    let buf = cq_buffer(&dev, 8);
    let p = pages(&buf);
    let cqn = n.cqn;
    for (what, input, want) in [
        (
            "an op_mod MODIFY_CQ does not define",
            {
                let mut i = resize_in(cqn, 0x7, 8, &p);
                i[6..8].copy_from_slice(&2u16.to_be_bytes());
                i
            },
            (BAD_PARAM, CQ_MODIFY_FIELD),
        ),
        (
            "a select bit beyond the three",
            resize_in(cqn, 0xf, 8, &p),
            (BAD_PARAM, CQ_MODIFY_FIELD),
        ),
        (
            "no log size selected",
            resize_in(cqn, 0x6, 8, &p),
            (BAD_PARAM, CQ_MODIFY_FIELD),
        ),
        (
            "above log_max_cq_sz",
            resize_in(cqn, 0x7, 23, &p),
            (BAD_PARAM, CQ_TOO_BIG),
        ),
        (
            "a CQ that does not exist",
            resize_in(cqn + 100, 0x7, 8, &p),
            (BAD_RES, UNKNOWN_CQ),
        ),
    ] {
        let out = n.fx.p.exec(&input, 0x10);
        assert_eq!(status(&out), want, "{what}");
    }
    // Too few PAS entries for the new buffer: the input is short.
    let out = n.fx.p.exec(&resize_in(cqn, 0x7, 8, &p[..1]), 0x10);
    assert_eq!(status(&out).0, 0x50, "BAD_INPUT_LEN");
    // A device without `cq_resize` refuses the op_mod.
    let profile = common::quiet(mlx5_sim::Profile::from_json_str(r#"{"cq_resize": 0}"#).unwrap());
    let mut fx = common::queues::Fx::new(profile, Mode::Sync, 1);
    let eqn = fx.create_eq();
    let cqn = fx.create_cq(eqn);
    let dev = fx.dev();
    let buf = cq_buffer(&dev, 8);
    let out = fx.p.exec(&resize_in(cqn, 0x7, 8, &pages(&buf)), 0x10);
    assert_eq!(status(&out), (BAD_PARAM, CQ_MODIFY_FIELD));
}
