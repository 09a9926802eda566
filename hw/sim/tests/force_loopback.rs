//! Force-loopback RC QPs (the primary path's `fl`), as mlx5dv direct rules' send ring uses
//! them (notes: dr-control.md §3): a QP connected to itself with no MAC and no GID, RDMA WRITE
//! then READ of the same bytes, every fourth pair signalled — the requests, responses and ACKs
//! never reach the wire, and every signalled completion is there when the doorbell returns.

mod common;

use common::datapath::{fill, pair, read, Node, Seg};
use common::dr::connect_fl;
use mlx5_ifc::consts::{cap_mode, cap_type, qp_st};
use mlx5_ifc::prm::caps::{CmdHcaCap, RoceCap};
use mlx5_ifc::View;
use mlx5_sim::syndrome as syn;
use mlx5_sim::{Mode, Profile};

const SEND: u8 = 0x0a;
const WRITE: u8 = 0x08;
const READ: u8 = 0x10;
const SIGNALED: u8 = 0x08;

#[test]
fn the_profile_offers_force_loopback_whatever_roce_en() {
    let (_fabric, mut a, _b) = pair(Mode::Sync);
    let roce = a.fx.p.query_cap(cap_type::ROCE, cap_mode::CUR);
    let r = View::<RoceCap>::new(&roce).unwrap();
    assert_eq!(
        [
            r.get(RoceCap::FL_RC_QP_WHEN_ROCE_ENABLED),
            r.get(RoceCap::FL_RC_QP_WHEN_ROCE_DISABLED)
        ],
        [1, 1]
    );
    let general = a.fx.p.query_cap(cap_type::GENERAL, cap_mode::CUR);
    let g = View::<CmdHcaCap>::new(&general).unwrap();
    assert_eq!(g.get(CmdHcaCap::FL_RC_QP_WHEN_ROCE_DISABLED), 1);
}

/// The DR send ring's traffic: 12 WRITE (64 bytes inline, two WQEBBs — some straddling the
/// ring's end) + READ (a pointer to the sync buffer) pairs on a 16-WQEBB send queue, the READ
/// of every fourth pair signalled; then a WRITE and READ of 4 KiB by pointer (4 packets each).
fn write_then_read(mode: Mode) {
    let (_fabric, mut a, b) = pair(mode);
    let mut qp = a.create_qp(qp_st::RC);
    assert_eq!(connect_fl(&mut a, &qp, qp.qpn, 1), [(0, 0); 3]);
    let icm = a.reg_mr(8192, true, true, false);
    let ring = a.reg_mr(8192, false, false, false);
    let sync = a.reg_mr(8192, false, false, false);
    let dev = a.dev();
    let before = (
        dev.datapath_counters(),
        b.dev().datapath_counters().rx_frames,
    );
    for k in 0..12u64 {
        let data: Vec<u8> = (0..64).map(|i| (k as u8).wrapping_mul(7) ^ i).collect();
        let at = icm.va(64 * k);
        a.post_send(
            &mut qp,
            WRITE,
            0,
            [0; 4],
            &[Seg::Raddr(at, icm.key), Seg::Inline(data.clone())],
        );
        let signal = if k % 4 == 3 { SIGNALED } else { 0 };
        let read_idx = a.post_send(
            &mut qp,
            READ,
            signal,
            [0; 4],
            &[
                Seg::Raddr(at, icm.key),
                Seg::Data(64, sync.key, sync.va(64 * k)),
            ],
        );
        // A signalled READ's completion is there when the doorbell returns (Sync), or soon.
        if signal != 0 {
            let c = a
                .wait(common::TIMEOUT_NS)
                .expect("the signalled READ completes");
            assert_eq!(
                (c.opcode, c.wqe_opcode, c.wqe_counter, c.qpn),
                (0, READ, read_idx, qp.qpn)
            );
            // It proves the four pairs before it done, in order.
            for j in k - 3..=k {
                let data: Vec<u8> = (0..64).map(|i| (j as u8).wrapping_mul(7) ^ i).collect();
                assert_eq!(read(&dev, &icm, 64 * j, 64), data, "WRITE {j} landed");
                assert_eq!(read(&dev, &sync, 64 * j, 64), data, "READ {j} came back");
            }
        }
    }
    assert!(a.poll().is_none(), "unsignalled WQEs write no CQE");

    // Longer messages by pointer: several packets each way.
    let data = fill(&dev, &ring, 9);
    a.post_send(
        &mut qp,
        WRITE,
        0,
        [0; 4],
        &[
            Seg::Raddr(icm.va(4096), icm.key),
            Seg::Data(4096, ring.key, ring.va(0)),
        ],
    );
    let idx = a.post_send(
        &mut qp,
        READ,
        SIGNALED,
        [0; 4],
        &[
            Seg::Raddr(icm.va(4096), icm.key),
            Seg::Data(4096, sync.key, sync.va(4096)),
        ],
    );
    let c = a.wait(common::TIMEOUT_NS).expect("the READ completes");
    assert_eq!((c.opcode, c.wqe_counter, c.byte_cnt), (0, idx, 4096));
    assert_eq!(read(&dev, &sync, 4096, 4096), &data[..4096]);

    // Nothing went to the wire; the peer on the fabric saw nothing.
    let after = dev.datapath_counters();
    assert_eq!(after.tx_frames, before.0.tx_frames);
    assert_eq!(after.rx_frames, before.0.rx_frames);
    assert_eq!(b.dev().datapath_counters().rx_frames, before.1);
    // 12 × (WRITE, ACK, READ, response) + 4 + 1 (4 KiB WRITE at 1024, an ACK) + 1 + 4 (READ).
    assert!(
        after.fl_frames - before.0.fl_frames >= 12 * 3 + 5 + 5,
        "{after:?}"
    );
    assert_eq!(after.retransmits, before.0.retransmits);
    assert_eq!(after.error_cqes, before.0.error_cqes);
}

#[test]
fn a_qp_connected_to_itself_writes_and_reads_back_without_the_wire() {
    write_then_read(Mode::Sync);
}

#[test]
fn a_qp_connected_to_itself_writes_and_reads_back_threaded() {
    write_then_read(Mode::Threaded);
}

#[test]
fn force_loopback_reaches_another_qp_of_the_function() {
    let (_fabric, mut a, _b) = pair(Mode::Sync);
    let (mut q1, mut q2) = (a.create_qp(qp_st::RC), a.create_qp(qp_st::RC));
    assert_eq!(connect_fl(&mut a, &q1, q2.qpn, 1), [(0, 0); 3]);
    assert_eq!(connect_fl(&mut a, &q2, q1.qpn, 1), [(0, 0); 3]);
    let src = a.reg_mr(4096, false, false, false);
    let dst = a.reg_mr(4096, false, true, false);
    let data = fill(&a.dev(), &src, 3);
    a.post_recv(&mut q2, &[(4096, dst.key, dst.va(0))]);
    a.post_send(
        &mut q1,
        SEND,
        SIGNALED,
        [0; 4],
        &[Seg::Data(3000, src.key, src.va(0))],
    );
    let mut got: Vec<_> = a.drain().iter().map(|c| (c.qpn, c.opcode)).collect();
    got.sort();
    let mut want = vec![(q1.qpn, 0), (q2.qpn, 2)];
    want.sort();
    assert_eq!(got, want, "the requester's and the responder's completions");
    assert_eq!(read(&a.dev(), &dst, 0, 3000), &data[..3000]);
    // No receive WQE on the other side: RNR NAKs until one is posted (rnr_retry 7: forever).
    a.post_send(
        &mut q2,
        SEND,
        SIGNALED,
        [0; 4],
        &[Seg::Data(8, src.key, src.va(0))],
    );
    assert!(a.poll().is_none());
    let dst2 = a.reg_mr(4096, false, true, false);
    a.post_recv(&mut q1, &[(64, dst2.key, dst2.va(0))]);
    let mut got: Vec<_> = std::iter::from_fn(|| a.wait(common::TIMEOUT_NS))
        .take(2)
        .map(|c| (c.qpn, c.opcode))
        .collect();
    got.sort();
    let mut want = vec![(q2.qpn, 0), (q1.qpn, 2)];
    want.sort();
    assert_eq!(got, want, "the SEND went after the RNR wait");
    assert_eq!(a.dev().datapath_counters().tx_frames, 0);
}

#[test]
fn force_loopback_is_refused_off_rc_and_where_not_offered() {
    let (_fabric, mut a, _b) = pair(Mode::Sync);
    let uc = a.create_qp(qp_st::UC);
    let [_, rtr, _] = connect_fl(&mut a, &uc, uc.qpn, 1);
    assert_eq!(rtr, (0x03, syn::FORCE_LOOPBACK), "UC");
    // Without `fl`, an RC path needs its remote MAC.
    let rc = a.create_qp(qp_st::RC);
    let [_, rtr, _] = connect_fl(&mut a, &rc, rc.qpn, 0);
    assert_eq!(rtr, (0x03, syn::MISSING_RMAC));

    // A device that does not offer it.
    let json = r#"{"_mac": "02:c5:5a:00:00:07", "fl_rc_qp_when_roce_disabled": 0,
        "roce_cap.fl_rc_qp_when_roce_disabled": 0, "roce_cap.fl_rc_qp_when_roce_enabled": 0}"#;
    let profile = common::quiet(Profile::from_json_str(json).unwrap());
    let mut n = Node::with_profile(profile, Mode::Sync, 7);
    let qp = n.create_qp(qp_st::RC);
    let [_, rtr, _] = connect_fl(&mut n, &qp, qp.qpn, 1);
    assert_eq!(rtr, (0x03, syn::FORCE_LOOPBACK), "not offered");
}
