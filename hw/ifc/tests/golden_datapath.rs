//! Golden bytes of the data path: CQEs, EQEs and WQE segments built with the layouts, compared
//! with images worked out by hand from the fact sheet (`mlx5-datapath-sizing.md` §1.2, §1.5,
//! §4.1, §4.3). These cover what `offsetof` cannot: the bits packed inside bytes (owner bit,
//! opcode nibble, header-type bits) and the bytes `mlx5dv.h` leaves unnamed.

use mlx5_ifc::cqe::{self, Cqe64};
use mlx5_ifc::event;
use mlx5_ifc::prm::eqe::{CompEvent, CqError, Eqe, EventAuto, QpEvents};
use mlx5_ifc::wqe::{self, CtrlSeg, DatagramSeg, InlineSeg, SrqNextSeg};
use mlx5_ifc::{Layout, View, ViewMut};

/// A responder CQE: every field a receive completion carries.
fn responder_cqe() -> [u8; 64] {
    let mut b = [0u8; 64];
    b[12..16].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]); // rss_hash_result
    b[16] = 1 << 6 | 1 << 4 | 1 << 2 | 1; // rss_hash_type: TCP and IPv4, both ends
    b[20..22].copy_from_slice(&[0xbe, 0xef]); // check_sum
    b[24..28].copy_from_slice(&[0x15, 0xab, 0xcd, 0xef]); // grh 1, sl 5, rqpn 0xabcdef
    b[28] = 0x06; // L3 and L4 checksums good
    b[29] = 3 << 4 | 2 << 2 | 1; // l4 type 3, l3 type IPv4, VLAN stripped
    b[32..36].copy_from_slice(&[0, 0, 0, 0x42]); // srqn / user index
    b[36..40].copy_from_slice(&[0x11, 0x22, 0x33, 0x44]); // immediate
    b[44..48].copy_from_slice(&[0, 0, 0x10, 0]); // byte_cnt 4096
    b[48..56].copy_from_slice(&[0, 0, 0, 0, 0, 0, 0x12, 0x34]); // timestamp
    b[56..60].copy_from_slice(&[0, 0, 0x01, 0x23]); // qpn 0x123
    b[60..62].copy_from_slice(&[0, 9]); // wqe_counter
    b[63] = 0x3 << 4 | 1 << 1 | 1; // RESP_SEND_IMM, solicited, owner 1
    b
}

#[test]
fn responder_cqe_reads_back() {
    let b = responder_cqe();
    let v = View::<Cqe64>::new(&b).unwrap();
    assert_eq!(v.get(Cqe64::CHECK_SUM), 0xbeef);
    assert_eq!(v.get(Cqe64::FLAGS_RQPN), 0x15ab_cdef);
    assert_eq!(
        (v.get(Cqe64::GRH), v.get(Cqe64::SL), v.get(Cqe64::RQPN)),
        (1, 5, 0xab_cdef)
    );
    assert_eq!(
        (
            v.get(Cqe64::L2_OK),
            v.get(Cqe64::L3_OK),
            v.get(Cqe64::L4_OK)
        ),
        (0, 1, 1)
    );
    assert_eq!(v.get(Cqe64::L3_HDR_TYPE), u64::from(cqe::l3_hdr_type::IPV4));
    assert_eq!(v.get(Cqe64::L4_HDR_TYPE), 3);
    assert_eq!(v.get(Cqe64::CV), 1);
    assert_eq!(
        (v.get(Cqe64::RSS_HASH_RESULT), v.get(Cqe64::RSS_HASH_TYPE)),
        (0xdead_beef, 0x55)
    );
    assert_eq!((v.get(Cqe64::SRQN), v.get(Cqe64::SRQN_UIDX)), (0x42, 0x42));
    assert_eq!(v.get(Cqe64::IMM_INVAL_PKEY), 0x1122_3344);
    assert_eq!(v.get(Cqe64::BYTE_CNT), 4096);
    assert_eq!(v.get(Cqe64::TIMESTAMP), 0x1234);
    assert_eq!((v.get(Cqe64::QPN), v.get(Cqe64::WQE_OPCODE)), (0x123, 0));
    assert_eq!(v.get(Cqe64::WQE_COUNTER), 9);
    assert_eq!(v.get(Cqe64::OPCODE), u64::from(cqe::opcode::RESP_SEND_IMM));
    assert_eq!(
        (v.get(Cqe64::SE), v.get(Cqe64::FORMAT), v.get(Cqe64::OWNER)),
        (1, 0, 1)
    );
}

#[test]
fn responder_cqe_builds() {
    let mut b = [0u8; 64];
    let mut v = ViewMut::<Cqe64>::new(&mut b).unwrap();
    v.set(Cqe64::RSS_HASH_RESULT, 0xdead_beef).unwrap();
    v.set(Cqe64::RSS_HASH_TYPE, 0x55).unwrap();
    v.set(Cqe64::CHECK_SUM, 0xbeef).unwrap();
    v.set(Cqe64::GRH, 1).unwrap().set(Cqe64::SL, 5).unwrap();
    v.set(Cqe64::RQPN, 0xab_cdef).unwrap();
    v.set(Cqe64::L3_OK, 1)
        .unwrap()
        .set(Cqe64::L4_OK, 1)
        .unwrap();
    v.set(Cqe64::L4_HDR_TYPE, 3).unwrap();
    v.set(Cqe64::CV, 1).unwrap();
    v.set(Cqe64::L3_HDR_TYPE, cqe::l3_hdr_type::IPV4.into())
        .unwrap();
    v.set(Cqe64::SRQN, 0x42).unwrap();
    v.set(Cqe64::IMM_INVAL_PKEY, 0x1122_3344).unwrap();
    v.set(Cqe64::BYTE_CNT, 4096).unwrap();
    v.set(Cqe64::TIMESTAMP, 0x1234).unwrap();
    v.set(Cqe64::QPN, 0x123).unwrap();
    v.set(Cqe64::WQE_COUNTER, 9).unwrap();
    v.set(Cqe64::OPCODE, cqe::opcode::RESP_SEND_IMM.into())
        .unwrap();
    v.set(Cqe64::SE, 1).unwrap().set(Cqe64::OWNER, 1).unwrap();
    assert_eq!(b, responder_cqe());
}

#[test]
fn error_cqe() {
    // A requester error: syndrome in byte 55, vendor syndrome in 54, the failed WQE's opcode
    // in the top byte of the QPN word, no byte count.
    let mut b = [0u8; 64];
    b[54] = 0x51;
    b[55] = cqe::syndrome::REMOTE_ACCESS_ERR;
    b[56..60].copy_from_slice(&[wqe::opcode::RDMA_WRITE, 0x12, 0x34, 0x56]);
    b[60..62].copy_from_slice(&[0xff, 0xfe]);
    b[63] = cqe::opcode::REQ_ERR << 4;
    let v = View::<Cqe64>::new(&b).unwrap();
    assert_eq!(v.get(Cqe64::VENDOR_ERR_SYND), 0x51);
    assert_eq!(v.get(Cqe64::SYNDROME), 0x13);
    assert_eq!(v.get(Cqe64::WQE_OPCODE), 0x08);
    assert_eq!(v.get(Cqe64::QPN), 0x12_3456);
    assert_eq!(v.get(Cqe64::SOP_DROP_QPN), 0x0812_3456);
    assert_eq!(v.get(Cqe64::WQE_COUNTER), 0xfffe);
    assert_eq!((v.get(Cqe64::OPCODE), v.get(Cqe64::OWNER)), (0xd, 0));
}

#[test]
fn fresh_cq_entry_is_invalid_and_owner_0() {
    let mut b = [0u8; cqe::CQE_BYTES];
    b[cqe::CQE_BYTES - 1] = cqe::INVALID_OP_OWN;
    let v = View::<Cqe64>::new(&b).unwrap();
    assert_eq!(v.get(Cqe64::OPCODE), u64::from(cqe::opcode::INVALID));
    assert_eq!(v.get(Cqe64::OWNER), 0);
    assert_eq!(Cqe64::OP_OWN.info.byte_offset(), cqe::CQE_BYTES - 1);
    assert_eq!(cqe::CQE128_OFFSET + Cqe64::BYTES, 128);
}

#[test]
fn completion_eqe() {
    let mut b = [0u8; 64];
    let mut v = ViewMut::<Eqe>::new(&mut b).unwrap();
    v.set(Eqe::EVENT_TYPE, event::COMPLETION.into()).unwrap();
    v.set(Eqe::OWNER, 1).unwrap();
    v.nested_mut(Eqe::EVENT_DATA)
        .nested_mut(EventAuto::COMP_EVENT)
        .set(CompEvent::CQ_NUMBER, 0x12_3456)
        .unwrap();
    // Event type at byte 1, the CQN in the low 24 bits of the word at 0x38, owner bit 0 of 0x3f.
    let mut want = [0u8; 64];
    want[1] = 0x00;
    want[0x39..0x3c].copy_from_slice(&[0x12, 0x34, 0x56]);
    want[0x3f] = 1;
    assert_eq!(b, want);
    assert_eq!(Eqe::BYTES, event::EQE_BYTES);
    assert_eq!(Eqe::OWNER.info.byte_offset(), event::EQE_OWNER);
    assert_eq!(Eqe::EVENT_DATA.offset(), 0x20);
}

#[test]
fn cq_error_and_qp_event_data() {
    // CQ_ERROR: the CQN in the low 24 bits of data word 0, the syndrome at data byte 0xb.
    let mut d = [0u8; 28];
    let mut v = ViewMut::<CqError>::new(&mut d).unwrap();
    v.set(CqError::CQN, 0x400)
        .unwrap()
        .set(CqError::SYNDROME, 1)
        .unwrap();
    assert_eq!(&d[..4], &[0, 0, 0x04, 0]);
    assert_eq!(d[0x0b], 1);
    // QP events: the resource type at data byte 0x14 (0 = QP), the number at 0x19..0x1c.
    let mut d = [0u8; 28];
    let mut v = ViewMut::<QpEvents>::new(&mut d).unwrap();
    v.set(QpEvents::TYPE, 1).unwrap();
    v.set(QpEvents::QPN_RQN_SQN, 0xab_cdef).unwrap();
    assert_eq!(d[0x14], 1);
    assert_eq!(&d[0x18..0x1c], &[0, 0xab, 0xcd, 0xef]);
}

#[test]
fn control_segment() {
    // SEND, WQE index 0x1234, QPN 0x56, 3 DS, CQE always + solicited, immediate 0xdeadbeef.
    let mut b = [0u8; 16];
    let mut v = ViewMut::<CtrlSeg>::new(&mut b).unwrap();
    v.set(CtrlSeg::OPCODE, wqe::opcode::SEND.into()).unwrap();
    v.set(CtrlSeg::WQE_INDEX, 0x1234).unwrap();
    v.set(CtrlSeg::QPN, 0x56)
        .unwrap()
        .set(CtrlSeg::DS, 3)
        .unwrap();
    let flags = wqe::fm_ce_se::CQ_UPDATE | wqe::fm_ce_se::SOLICITED;
    v.set(CtrlSeg::FM_CE_SE, flags.into()).unwrap();
    v.set(CtrlSeg::IMM, 0xdead_beef).unwrap();
    assert_eq!(
        b,
        [0, 0x12, 0x34, 0x0a, 0, 0, 0x56, 3, 0, 0, 0, 0x0a, 0xde, 0xad, 0xbe, 0xef]
    );
    assert!(ViewMut::<CtrlSeg>::new(&mut b)
        .unwrap()
        .set(CtrlSeg::DS, wqe::MAX_DS as u64 + 1)
        .is_err());
}

#[test]
fn datagram_segment_for_roce_v2() {
    // Q_Key, remote QPN with the extended-AV bit, UDP source port in `rlid`, MAC, traffic
    // class, hop limit, GID index 3 and flow label 0xabcde, remote GID.
    let mut b = [0u8; 48];
    let mut v = ViewMut::<DatagramSeg>::new(&mut b).unwrap();
    v.set(DatagramSeg::QKEY, 0x1111_1111).unwrap();
    v.set(DatagramSeg::DQP_DCT, u64::from(wqe::EXTENDED_UD_AV | 0x77))
        .unwrap();
    v.set(DatagramSeg::RLID, 0xc000).unwrap();
    v.set_bytes(DatagramSeg::RMAC, &[2, 0, 0, 0, 0, 9]).unwrap();
    v.set(DatagramSeg::TCLASS, 0x10).unwrap();
    v.set(DatagramSeg::HOP_LIMIT, 64).unwrap();
    v.set(DatagramSeg::SGID_INDEX, 3).unwrap();
    v.set(DatagramSeg::FLOW_LABEL, 0xa_bcde).unwrap();
    v.bytes_mut(DatagramSeg::RGID)[15] = 0x99;
    let mut want = [0u8; 48];
    want[0..4].copy_from_slice(&[0x11; 4]);
    want[8..12].copy_from_slice(&[0x80, 0, 0, 0x77]);
    want[14..16].copy_from_slice(&[0xc0, 0]);
    want[20..26].copy_from_slice(&[2, 0, 0, 0, 0, 9]);
    want[26] = 0x10;
    want[27] = 64;
    want[28..32].copy_from_slice(&[0x00, 0x3a, 0xbc, 0xde]);
    want[47] = 0x99;
    assert_eq!(b, want);
    let v = View::<DatagramSeg>::new(&b).unwrap();
    assert_eq!(
        (v.get(DatagramSeg::EXT), v.get(DatagramSeg::DQPN)),
        (1, 0x77)
    );
}

#[test]
fn inline_and_srq_next_segments() {
    let b = (wqe::INLINE_SEG | 5).to_be_bytes();
    let v = View::<InlineSeg>::new(&b).unwrap();
    assert_eq!((v.get(InlineSeg::INLINE), v.get(InlineSeg::LENGTH)), (1, 5));
    let mut n = [0u8; 16];
    n[2..4].copy_from_slice(&[0x01, 0x02]);
    n[4] = 0x5a;
    let v = View::<SrqNextSeg>::new(&n).unwrap();
    assert_eq!(v.get(SrqNextSeg::NEXT_WQE_INDEX), 0x0102);
    assert_eq!(v.get(SrqNextSeg::SIGNATURE), 0x5a);
}
