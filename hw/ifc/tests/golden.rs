//! Golden bytes: commands and contexts built with the layouts, compared with byte images worked
//! out by hand from the PRM field tables (mlx5-control.md §3, §6).

use mlx5_ifc::prm::caps::CmdHcaCap;
use mlx5_ifc::prm::cmdif::CmdQueueEntry;
use mlx5_ifc::prm::cq::Cqc;
use mlx5_ifc::prm::hca::{EnableHcaIn, ManagePagesIn, QueryHcaCapIn};
use mlx5_ifc::prm::qp::{Ads, CreateQpIn, Qpc};
use mlx5_ifc::prm::uar_pd::DeallocPdIn;
use mlx5_ifc::{Be64, Layout, Opcode, View, ViewMut};

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn enable_hca() {
    let mut b = [0u8; EnableHcaIn::BYTES];
    ViewMut::<EnableHcaIn>::new(&mut b)
        .unwrap()
        .set(EnableHcaIn::OPCODE, Opcode::EnableHca as u64)
        .unwrap()
        .set(EnableHcaIn::FUNCTION_ID, 0x1234)
        .unwrap()
        .set(EnableHcaIn::EMBEDDED_CPU_FUNCTION, 1)
        .unwrap();
    // opcode 0x0104 at byte 0; bit 0x40 = MSB of byte 8; function_id at byte 0xa.
    assert_eq!(hex(&b), "01040000000000008000123400000000");
}

#[test]
fn query_hca_cap_roce_current() {
    let mut b = [0u8; QueryHcaCapIn::BYTES];
    let mut v = ViewMut::<QueryHcaCapIn>::new(&mut b).unwrap();
    v.set(QueryHcaCapIn::OPCODE, 0x100).unwrap();
    v.set(QueryHcaCapIn::OP_MOD, 4 << 1 | 1).unwrap();
    assert_eq!(hex(&b), "01000000000000090000000000000000");
}

#[test]
fn manage_pages_give_two() {
    let mut b = [0u8; ManagePagesIn::BYTES + 16];
    let mut v = ViewMut::<ManagePagesIn>::new(&mut b).unwrap();
    v.set(ManagePagesIn::OPCODE, 0x108)
        .unwrap()
        .set(ManagePagesIn::OP_MOD, 1)
        .unwrap();
    v.set(ManagePagesIn::INPUT_NUM_ENTRIES, 2).unwrap();
    let pas = v.bytes_mut(ManagePagesIn::PAS);
    assert_eq!(pas.len(), 16, "flexible tail runs to the end of the buffer");
    pas[..8].copy_from_slice(&Be64::new(0x1_0000_2000).to_bytes());
    pas[8..].copy_from_slice(&Be64::new(0x1_0000_3000).to_bytes());
    assert_eq!(
        hex(&b),
        "01080000000000010000000000000002".to_owned() + "0000000100002000" + "0000000100003000"
    );
}

#[test]
fn command_entry() {
    let mut e = [0u8; 64];
    let mut v = ViewMut::<CmdQueueEntry>::new(&mut e).unwrap();
    v.set(CmdQueueEntry::TYPE, 7).unwrap();
    v.set(CmdQueueEntry::INPUT_LENGTH, 0x1010).unwrap();
    v.set(CmdQueueEntry::INPUT_MAILBOX_POINTER_63_32, 0x1)
        .unwrap();
    v.set(CmdQueueEntry::INPUT_MAILBOX_POINTER_31_9, 0x8000_0400 >> 9)
        .unwrap();
    v.set(CmdQueueEntry::OUTPUT_LENGTH, 0x10).unwrap();
    v.set(CmdQueueEntry::TOKEN, 0x5a).unwrap();
    v.set(CmdQueueEntry::OWNERSHIP, 1).unwrap();
    assert_eq!(e[0], 7);
    assert_eq!(&e[4..8], &[0, 0, 0x10, 0x10]);
    assert_eq!(&e[8..16], &[0, 0, 0, 1, 0x80, 0, 0x04, 0]);
    assert_eq!(&e[0x38..0x3c], &[0, 0, 0, 0x10]);
    assert_eq!(e[0x3c], 0x5a);
    assert_eq!(
        e[0x3f], 0x01,
        "ownership is bit 0 of byte 0x3f; status sits above it"
    );
    let r = View::<CmdQueueEntry>::new(&e).unwrap();
    assert_eq!(r.get(CmdQueueEntry::STATUS), 0);
}

#[test]
fn cq_context_dword3() {
    // log_cq_size = 10, uar_page = 0x123456: dword 3 = 0x0a123456.
    let mut c = [0u8; Cqc::BYTES];
    ViewMut::<Cqc>::new(&mut c)
        .unwrap()
        .set(Cqc::LOG_CQ_SIZE, 10)
        .unwrap()
        .set(Cqc::UAR_PAGE, 0x12_3456)
        .unwrap();
    assert_eq!(&c[12..16], &[0x0a, 0x12, 0x34, 0x56]);
    assert!(ViewMut::<Cqc>::new(&mut c)
        .unwrap()
        .set(Cqc::UAR_PAGE, 0x1ff_ffff)
        .is_err());
}

#[test]
fn create_qp_context_lands_at_byte_0x18() {
    let mut b = [0u8; CreateQpIn::BYTES];
    let mut v = ViewMut::<CreateQpIn>::new(&mut b).unwrap();
    v.set(CreateQpIn::OPCODE, 0x500).unwrap();
    let mut q = v.nested_mut(CreateQpIn::QPC);
    q.set(Qpc::ST, 2).unwrap(); // UD
    q.set(Qpc::PD, 0xabcdef).unwrap();
    q.set(Qpc::LOG_RQ_SIZE, 5)
        .unwrap()
        .set(Qpc::LOG_RQ_STRIDE, 2)
        .unwrap();
    q.set(Qpc::LOG_SQ_SIZE, 7).unwrap();
    q.set(Qpc::DBR_ADDR, 0x1122_3344_5566_7788).unwrap();
    q.nested_mut(Qpc::PRIMARY_ADDRESS_PATH)
        .set(Ads::VHCA_PORT_NUM, 1)
        .unwrap();
    // qpc byte 1 = st; bytes 5..8 = pd; byte 9 = log_rq_size<<3 | log_rq_stride; byte 0xa =
    // no_sq<<7 | log_sq_size<<3 ...; dbr_addr at qpc byte 0xa0; ads.vhca_port_num at ads byte 0x25.
    assert_eq!(b[0x18 + 1], 0x02);
    assert_eq!(&b[0x18 + 5..0x18 + 8], &[0xab, 0xcd, 0xef]);
    assert_eq!(b[0x18 + 9], 5 << 3 | 2);
    assert_eq!(b[0x18 + 0xa], 7 << 3);
    assert_eq!(
        &b[0x18 + 0xa0..0x18 + 0xa8],
        &[0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88]
    );
    assert_eq!(b[0x18 + 0x18 + 0x25], 1);
}

#[test]
fn hca_cap_limits_and_lookup_by_name() {
    let mut c = [0u8; CmdHcaCap::BYTES];
    let mut v = ViewMut::<CmdHcaCap>::new(&mut c).unwrap();
    v.set(CmdHcaCap::LOG_MAX_QP_SZ, 15).unwrap();
    v.set(CmdHcaCap::LOG_MAX_QP, 18).unwrap();
    v.set(CmdHcaCap::MAX_WQE_SZ_SQ, 1024).unwrap();
    assert!(v.set_by_name("max_wqe_sz_rq", 512).unwrap());
    assert!(!v.set_by_name("no_such_field", 1).unwrap());
    // dw4: log_max_srq_sz[31:24] log_max_qp_sz[23:16] ... log_max_qp[4:0]; max_wqe_sz_sq at 0x52.
    assert_eq!(&c[0x10..0x14], &[0, 15, 0, 18]);
    assert_eq!(&c[0x52..0x54], &[0x04, 0x00]);
    assert_eq!(&c[0x56..0x58], &[0x02, 0x00]);
    assert_eq!(
        View::<CmdHcaCap>::new(&c)
            .unwrap()
            .get_by_name("log_max_qp_sz"),
        Some(15)
    );
}

#[test]
fn dealloc_pd_refuses_a_25_bit_pd() {
    let mut b = [0u8; DeallocPdIn::BYTES];
    let e = ViewMut::<DeallocPdIn>::new(&mut b)
        .unwrap()
        .set(DeallocPdIn::PD, 1 << 24)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "dealloc_pd_in.pd: value 0x1000000 does not fit in 24 bits"
    );
    assert_eq!(b, [0; 16]);
}
