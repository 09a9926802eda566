//! On-demand paging at the byte level, as Linux 6.1's mlx5_ib drives it (docs/fields.md "ODP"):
//! the ODP capability page (its MAX as a real ConnectX-5 reports it, what mlx5_core raises with
//! SET_HCA_CAP), an MR whose MTT entries carry read/write present bits (absent pages are 0,
//! made present by a UMR WQE that changes entries only), the page-fault EQ (`event_bitmask` bit
//! 0x0c only), PAGE_FAULT events of both sub-types and PAGE_FAULT_RESUME:
//! * a send WQE whose data is absent stops the send queue (a WQE fault of type
//!   REQ_SEND_OR_WRITE naming the QP and the WQE's counter) until it is resumed;
//! * an RDMA WRITE into absent pages is answered with RNR NAKs (one RDMA fault: rkey, address,
//!   length, the WRITE flag, the QP) until it is resumed, then placed;
//! * a SEND into a receive WQE whose buffer is absent (a WQE fault of type RESP), the same;
//! * a fault resumed with `error` fails its WQE; a resume naming no fault is refused;
//! * a retransmission that meets a page invalidated since the first transmission faults the
//!   same way and goes again after the resume; a READ response for a buffer invalidated
//!   meanwhile faults (REQ_READ_OR_ATOMIC), and the READ goes again after the resume;
//! * an implicit parent's absent entity faults naming the parent.

mod common;

use common::datapath::{connected, fill, pair, read, Mr, Node, Qp, Seg};
use common::queues::{with_pas, Step};
use common::{bare, cmd, Poster};
use mlx5_ifc::consts::{cap_mode, cap_type, qp_st};
use mlx5_ifc::prm::eq::{CreateEqIn, CreateEqOut, Eqc};
use mlx5_ifc::prm::hca::EnableHcaIn;
use mlx5_ifc::prm::mr::{CreateMkeyIn, CreateMkeyOut, Mkc};
use mlx5_ifc::prm::odp::{
    OdpCap, OdpPerTransportServiceCap as T, OdpSchemeCap as S, PageFaultResumeIn,
    PageFaultResumeInPageFaultInfoAuto as Auto, TransPageFaultInfo as Info,
};
use mlx5_ifc::prm::qp::Qpc;
use mlx5_ifc::{Layout, Nested, Opcode, View, ViewMut};
use mlx5_sim::{DmaBlock, Mode};

const SEND: u8 = 0x0a;
const WRITE: u8 = 0x08;
const UMR: u8 = 0x25;
const SIGNALED: u8 = 0x08;
const PAGE_FAULT: u8 = 0x0c;
/// UMR `flags`: TRANSLATION_OFFSET_EN | CHECK_FREE ("fail if free"), Linux's entries-only update.
const UMR_UPDATE: u8 = 0x10 | 0x40;
const PAGES: usize = 4;

/// One transport's ODP operations in an `odp_cap` image.
fn ops(cap: &[u8], transport: Nested<S, T>) -> [u64; 6] {
    let v = View::<OdpCap>::new(cap).unwrap();
    let t = v
        .nested(OdpCap::TRANSPORT_PAGE_FAULT_SCHEME_CAP)
        .nested(transport);
    [
        T::SEND,
        T::RECEIVE,
        T::WRITE,
        T::READ,
        T::ATOMIC,
        T::SRQ_RECEIVE,
    ]
    .map(|f| t.get(f))
}

#[test]
fn odp_caps_are_a_connectx5s_and_software_raises_srq_receive() {
    let mut p = Poster::cx5(Mode::Sync);
    p.ok(&bare::<EnableHcaIn>(Opcode::EnableHca, 0), 0x10);
    let max = p.query_cap(cap_type::ODP, cap_mode::MAX);
    // real-cx5.md row 34: rc SEND RECV WRITE READ SRQ; ud SEND; xrc SEND WRITE READ SRQ.
    assert_eq!(ops(&max, S::RC_ODP_CAPS), [1, 1, 1, 1, 0, 1]);
    assert_eq!(ops(&max, S::UD_ODP_CAPS), [1, 0, 0, 0, 0, 0]);
    assert_eq!(ops(&max, S::XRC_ODP_CAPS), [1, 0, 1, 1, 0, 1]);
    assert_eq!(ops(&max, S::UC_ODP_CAPS), [0; 6]);
    assert_eq!(ops(&max, S::DC_ODP_CAPS), [0; 6]);
    // CUR lacks what mlx5_core's handle_hca_cap_odp raises: the SRQ receives and XRC.
    let mut cur = p.query_cap(cap_type::ODP, cap_mode::CUR);
    assert_eq!(ops(&cur, S::RC_ODP_CAPS), [1, 1, 1, 1, 0, 0]);
    assert_eq!(ops(&cur, S::XRC_ODP_CAPS), [0; 6]);
    // An operation beyond MAX is refused (BAD_PARAM CAP_EXCEEDS_MAX) and changes nothing.
    let mut beyond = cur.clone();
    set_op(&mut beyond, S::RC_ODP_CAPS, T::ATOMIC);
    assert_eq!(p.set_cap(cap_type::ODP, &beyond).0, 0x03);
    // Raised as Linux raises them.
    set_op(&mut cur, S::RC_ODP_CAPS, T::SRQ_RECEIVE);
    for f in [T::SEND, T::WRITE, T::READ, T::SRQ_RECEIVE] {
        set_op(&mut cur, S::XRC_ODP_CAPS, f);
    }
    assert_eq!(p.set_cap(cap_type::ODP, &cur), (0, 0));
    let now = p.query_cap(cap_type::ODP, cap_mode::CUR);
    assert_eq!(ops(&now, S::RC_ODP_CAPS), [1, 1, 1, 1, 0, 1]);
    assert_eq!(ops(&now, S::XRC_ODP_CAPS), [1, 0, 1, 1, 0, 1]);
}

fn set_op(cap: &mut [u8], transport: Nested<S, T>, f: mlx5_ifc::Field<T>) {
    let mut v = ViewMut::<OdpCap>::new(cap).unwrap();
    let mut s = v.nested_mut(OdpCap::TRANSPORT_PAGE_FAULT_SCHEME_CAP);
    s.nested_mut(transport).set(f, 1).unwrap();
}

/// What a test needs beside a node: the page-fault EQ Linux makes with its first ODP MR, a UMR
/// QP and a buffer for translation entries.
struct Odp {
    eqn: u32,
    eq: DmaBlock,
    ci: u32,
    umr: Qp,
    xlt: Mr,
}

const LOG_PF_EQ: u32 = 4;

impl Odp {
    fn new(n: &mut Node) -> Odp {
        let dev = n.dev();
        let eq = dev.dma_alloc(64 << LOG_PF_EQ, 4096).unwrap();
        for k in 0..1u64 << LOG_PF_EQ {
            dev.dma_write(eq.iova + k * 64 + 63, &[1]).unwrap();
        }
        let uar = n.fx.uar;
        let input = cmd::<CreateEqIn>(Opcode::CreateEq, 0, |v| {
            let mut c = v.nested_mut(CreateEqIn::EQ_CONTEXT_ENTRY);
            c.set(Eqc::LOG_EQ_SIZE, LOG_PF_EQ.into()).unwrap();
            c.set(Eqc::UAR_PAGE, uar.into()).unwrap();
            // event_bitmask[0] = 1 << 0x0c, as mlx5r_odp_create_eq asks.
            v.bytes_mut(CreateEqIn::EVENT_BITMASK)[6] = 0x10;
        });
        let out = n.fx.p.ok(&with_pas(input, &[eq.iova]), CreateEqOut::BYTES);
        let eqn = View::<CreateEqOut>::new(&out)
            .unwrap()
            .get32(CreateEqOut::EQ_NUMBER);
        let umr = n.create_qp(qp_st::REG_UMR);
        for step in [Step::Rst2Init, Step::Init2Rtr, Step::Rtr2Rts] {
            assert_eq!(n.fx.step(step, umr.qpn, qp_st::UD, 0, |_| {}), (0, 0));
        }
        let xlt = n.reg_mr(4096, false, false, false);
        Odp {
            eqn,
            eq,
            ci: 0,
            umr,
            xlt,
        }
    }

    /// Waits (relaxing `n`, which completes nothing meanwhile) for a WQE page fault: its
    /// `(sub-type, type, queue, WQE index, token)`.
    fn wait_fault(&mut self, n: &mut Node) -> (u8, u8, u32, u16, u32) {
        for _ in 0..100 {
            if let Some(e) = self.poll(n) {
                return wqe_fault(&e);
            }
            assert!(
                n.wait(100_000).is_none(),
                "nothing completes while the page is gone"
            );
        }
        panic!("no page fault");
    }

    /// The next page-fault EQE, whole.
    fn poll(&mut self, n: &Node) -> Option<[u8; 64]> {
        let dev = n.dev();
        let slot = u64::from(self.ci & ((1 << LOG_PF_EQ) - 1));
        let mut b = [0u8; 64];
        dev.dma_read(self.eq.iova + slot * 64, &mut b).unwrap();
        if u32::from(b[63] & 1) != (self.ci >> LOG_PF_EQ) & 1 {
            return None;
        }
        self.ci += 1;
        let uar = u64::from(n.fx.uar) * 4096;
        dev.bar_write32(uar + 0x48, mlx5_ifc::Be32::new(self.eqn << 24 | self.ci));
        Some(b)
    }

    /// Makes every page of `mr` present (read and write) with one UMR WQE that changes the
    /// entries only (mkey_mask 0), as mlx5_ib's fault handler does; waits for its completion.
    fn map(&mut self, n: &mut Node, mr: &Mr) {
        let mut list = Vec::new();
        for k in 0..8u64 {
            let e = if k < PAGES as u64 {
                (mr.buf.iova + k * 4096) | 3
            } else {
                0
            };
            list.extend_from_slice(&e.to_be_bytes());
        }
        self.write_entries(n, mr.key, &list);
    }

    /// Writes 64 bytes of translation entries (8 MTT or 4 KSM entries) at the start of `key`'s
    /// table with one UMR WQE (TRANSLATION_OFFSET_EN | CHECK_FREE, mkey_mask 0, the entries
    /// behind a data segment); waits for its completion.
    fn write_entries(&mut self, n: &mut Node, key: u32, entries: &[u8]) {
        n.dev().dma_write(self.xlt.buf.iova, entries).unwrap();
        let mut body = vec![0u8; 48 + 64];
        body[0] = UMR_UPDATE;
        body[4..6].copy_from_slice(&4u16.to_be_bytes());
        body.extend_from_slice(&64u32.to_be_bytes());
        body.extend_from_slice(&self.xlt.key.to_be_bytes());
        body.extend_from_slice(&self.xlt.va.to_be_bytes());
        let r = [Seg::Raw(body)];
        n.post_send(&mut self.umr, UMR, SIGNALED, key.to_be_bytes(), &r);
        let c = n.poll().expect("the UMR's completion");
        assert_eq!((c.opcode, c.qpn), (0, self.umr.qpn), "UMR {c:?}");
    }
}

/// CREATE_MKEY of a key with `umr_en`, local and remote read/write, key byte `variant`, in the
/// node's PD, and `pas` zero entries after the context; `edit` sets the rest. Returns the key.
fn create_key(
    n: &mut Node,
    variant: u8,
    edit: impl FnOnce(&mut ViewMut<'_, CreateMkeyIn>),
    pas: usize,
) -> u32 {
    let pd = n.fx.pd;
    let input = cmd::<CreateMkeyIn>(Opcode::CreateMkey, 0, |v| {
        let mut c = v.nested_mut(CreateMkeyIn::MEMORY_KEY_MKEY_ENTRY);
        for f in [Mkc::UMR_EN, Mkc::LR, Mkc::LW, Mkc::RR, Mkc::RW] {
            c.set(f, 1).unwrap();
        }
        c.set(Mkc::QPN, 0xff_ffff).unwrap();
        c.set(Mkc::MKEY_7_0, variant.into()).unwrap();
        c.set(Mkc::PD, pd.into()).unwrap();
        edit(v);
    });
    let out =
        n.fx.p
            .ok(&with_pas(input, &vec![0; pas]), CreateMkeyOut::BYTES);
    View::<CreateMkeyOut>::new(&out)
        .unwrap()
        .get32(CreateMkeyOut::MKEY_INDEX)
        << 8
        | u32::from(variant)
}

/// An ODP MR as `reg_create` makes one with `pg_access`: its MTT entries' read/write bits say
/// which pages are present; every page starts absent (entry 0). `umr_en` for the fault handler.
fn odp_mr(n: &mut Node) -> Mr {
    let buf = n.dev().dma_alloc(PAGES * 4096, 4096).unwrap();
    let va = n.next_va;
    n.next_va += (PAGES as u64 + 1) * 4096;
    let edit = |v: &mut ViewMut<'_, CreateMkeyIn>| {
        v.set(CreateMkeyIn::PG_ACCESS, 1).unwrap();
        v.set(CreateMkeyIn::TRANSLATIONS_OCTWORD_ACTUAL_SIZE, 2)
            .unwrap();
        let mut c = v.nested_mut(CreateMkeyIn::MEMORY_KEY_MKEY_ENTRY);
        c.set(Mkc::ACCESS_MODE_1_0, 1).unwrap();
        c.set(Mkc::LOG_PAGE_SIZE, 12).unwrap();
        c.set(Mkc::START_ADDR, va).unwrap();
        c.set(Mkc::LEN, (PAGES * 4096) as u64).unwrap();
        c.set(Mkc::TRANSLATIONS_OCTWORD_SIZE, 2).unwrap();
    };
    let key = create_key(n, 0x0d, edit, PAGES);
    Mr { key, buf, va }
}

/// Two connected RC QPs with the RNR timers rdma-core's tests use (rnr_retry 7: an RNR NAK is
/// retried for ever; min_rnr_timer 12: 0.64 ms).
fn rc_pair(a: &mut Node, b: &mut Node) -> (Qp, Qp) {
    connected(a, b, qp_st::RC, |c| {
        c.set(Qpc::RNR_RETRY, 7).unwrap();
        c.set(Qpc::MIN_RNR_NAK, 12).unwrap();
    })
}

/// Two connected RC QPs whose lost requests go again after an ack timeout of about 1 ms
/// (`ack_timeout` 8), seven times at most; remote reads allowed.
fn timed_pair(a: &mut Node, b: &mut Node) -> (Qp, Qp) {
    connected(a, b, qp_st::RC, |c| {
        c.set(Qpc::RETRY_COUNT, 7).unwrap();
        c.set(Qpc::RRE, 1).unwrap();
        c.nested_mut(Qpc::PRIMARY_ADDRESS_PATH)
            .set(mlx5_ifc::prm::qp::Ads::ACK_TIMEOUT, 8)
            .unwrap();
    })
}

/// PAGE_FAULT_RESUME naming `(type, queue, token)`; its status and syndrome.
fn resume(n: &mut Node, (kind, wq, token): (u8, u32, u32), error: bool) -> (u8, u32) {
    let input = cmd::<PageFaultResumeIn>(Opcode::PageFaultResume, 0, |v| {
        let mut i = v.nested_mut(PageFaultResumeIn::PAGE_FAULT_INFO);
        let mut t = i.nested_mut(Auto::TRANS_PAGE_FAULT_INFO);
        t.set(Info::ERROR, error.into()).unwrap();
        t.set(Info::PAGE_FAULT_TYPE, kind.into()).unwrap();
        t.set(Info::WQ_NUMBER, wq.into()).unwrap();
        t.set(Info::FAULT_TOKEN, token.into()).unwrap();
    });
    n.fx.run(&input, 0x10).0
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

/// A WQE fault's `(sub-type, type, queue, WQE index, token)` as mlx5_ib decodes it.
fn wqe_fault(e: &[u8; 64]) -> (u8, u8, u32, u16, u32) {
    assert_eq!(e[1], PAGE_FAULT, "a PAGE_FAULT EQE");
    (
        e[3],
        e[0x38] & 7,
        be32(e, 0x38) & 0xff_ffff,
        u16::from_be_bytes([e[0x26], e[0x27]]),
        be32(e, 0x2c),
    )
}

#[test]
fn a_send_from_absent_pages_waits_for_page_fault_resume() {
    let (_fabric, mut a, mut b) = pair(Mode::Sync);
    let (mut qa, mut qb) = rc_pair(&mut a, &mut b);
    let mut odp = Odp::new(&mut a);
    let src = odp_mr(&mut a);
    let sent = fill(&a.dev(), &src, 7);
    let dst = b.reg_mr(PAGES * 4096, false, false, false);
    b.post_recv(&mut qb, &[(8192, dst.key, dst.va(0))]);
    b.post_recv(&mut qb, &[(64, dst.key, dst.va(8192))]);

    let first = a.post_send(
        &mut qa,
        SEND,
        SIGNALED,
        [0; 4],
        &[Seg::Data(5000, src.key, src.va(100))],
    );
    // A second WQE behind it (inline data, nothing to fault) waits with it.
    a.post_send(&mut qa, SEND, SIGNALED, [0; 4], &[Seg::Inline(vec![9; 16])]);
    let e = odp.poll(&a).expect("a page fault");
    let (sub, kind, wq, index, token) = wqe_fault(&e);
    assert_eq!(
        (sub, kind, wq, index),
        (0, 1, qa.qpn, first),
        "WQE fault, REQ_SEND_OR_WRITE"
    );
    assert!(odp.poll(&a).is_none(), "one fault");
    assert!(a.poll().is_none() && b.poll().is_none(), "nothing sent yet");
    assert_eq!(a.dev().datapath_counters().page_faults, 1);

    odp.map(&mut a, &src);
    assert_eq!(resume(&mut a, (kind, wq, token), false), (0, 0));
    assert_eq!(
        resume(&mut a, (kind, wq, token), false).0,
        0x03,
        "resumed already"
    );
    let done: Vec<_> = std::iter::from_fn(|| a.wait(1_000_000)).take(2).collect();
    assert_eq!(
        done.iter()
            .map(|c| (c.opcode, c.wqe_counter))
            .collect::<Vec<_>>(),
        [(0, first), (0, first + 1)],
        "both SENDs complete, in order"
    );
    let got: Vec<_> = std::iter::from_fn(|| b.poll()).collect();
    assert_eq!(
        got.iter().map(|c| c.byte_cnt).collect::<Vec<_>>(),
        [5000, 16]
    );
    assert_eq!(read(&b.dev(), &dst, 0, 5000), &sent[100..5100]);
    let c = a.dev().datapath_counters();
    assert_eq!(
        (c.page_faults, c.page_faults_resolved, c.page_faults_failed),
        (1, 1, 0)
    );
}

#[test]
fn an_rdma_write_into_absent_pages_is_answered_rnr_until_resumed() {
    let (_fabric, mut a, mut b) = pair(Mode::Sync);
    let (mut qa, qb) = rc_pair(&mut a, &mut b);
    let mut odp = Odp::new(&mut b);
    let dst = odp_mr(&mut b);
    let src = a.reg_mr(PAGES * 4096, false, false, false);
    let data = fill(&a.dev(), &src, 3);

    a.post_send(
        &mut qa,
        WRITE,
        SIGNALED,
        [0; 4],
        &[
            Seg::Raddr(dst.va(4000), dst.key),
            Seg::Data(9000, src.key, src.va(0)),
        ],
    );
    let e = odp.poll(&b).expect("an RDMA page fault");
    assert_eq!((e[1], e[3]), (PAGE_FAULT, 1), "PAGE_FAULT, sub-type RDMA");
    assert_eq!(be32(&e, 0x24), dst.key, "r_key");
    assert_eq!(be32(&e, 0x2c), 9000, "rdma_op_len");
    assert_eq!(
        u64::from_be_bytes(e[0x30..0x38].try_into().unwrap()),
        dst.va(4000),
        "rdma_va"
    );
    assert_eq!(e[0x38], 0x06, "flags: RDMA | WRITE");
    assert_eq!(be32(&e, 0x38) & 0xff_ffff, qb.qpn, "the token: the QP");
    assert!(b.dev().datapath_counters().rnr_naks_sent >= 1, "RNR NAK");
    // The requester retries after its RNR timer; until the resume each try gets an RNR NAK and
    // raises nothing new.
    let early = a.wait(2_000_000);
    assert!(
        early.is_none(),
        "no completion while the fault waits: {early:?}"
    );
    assert!(odp.poll(&b).is_none());
    assert!(b.dev().datapath_counters().rnr_naks_sent >= 2, "retried");

    odp.map(&mut b, &dst);
    assert_eq!(resume(&mut b, (0x06, qb.qpn, qb.qpn), false), (0, 0));
    let c = a.wait(100_000_000).expect("the WRITE completes");
    assert_eq!(c.opcode, 0, "{c:?}");
    assert_eq!(read(&b.dev(), &dst, 4000, 9000), &data[..9000]);
}

#[test]
fn a_send_into_an_absent_receive_buffer_waits_for_page_fault_resume() {
    let (_fabric, mut a, mut b) = pair(Mode::Sync);
    let (mut qa, mut qb) = rc_pair(&mut a, &mut b);
    let mut odp = Odp::new(&mut b);
    let dst = odp_mr(&mut b);
    b.post_recv(&mut qb, &[(PAGES as u32 * 4096, dst.key, dst.va(0))]);
    let src = a.reg_mr(4096, false, false, false);
    let data = fill(&a.dev(), &src, 5);

    a.post_send(
        &mut qa,
        SEND,
        SIGNALED,
        [0; 4],
        &[Seg::Data(3000, src.key, src.va(0))],
    );
    let e = odp.poll(&b).expect("a page fault");
    let (sub, kind, wq, index, token) = wqe_fault(&e);
    assert_eq!(
        (sub, kind, wq, index),
        (0, 2, qb.qpn, 0),
        "WQE fault, RESP, receive WQE 0"
    );
    assert!(b.poll().is_none(), "the receive WQE is kept");

    odp.map(&mut b, &dst);
    assert_eq!(resume(&mut b, (kind, wq, token), false), (0, 0));
    assert_eq!(
        a.wait(100_000_000).map(|c| c.opcode),
        Some(0),
        "the SEND completes"
    );
    let c = b.poll().expect("the receive completion");
    assert_eq!((c.opcode, c.wqe_counter, c.byte_cnt), (2, 0, 3000));
    assert_eq!(read(&b.dev(), &dst, 0, 3000), &data[..3000]);
}

#[test]
fn a_fault_resumed_with_error_fails_its_wqe_and_an_unknown_resume_is_refused() {
    let (_fabric, mut a, mut b) = pair(Mode::Sync);
    let (mut qa, _qb) = rc_pair(&mut a, &mut b);
    let mut odp = Odp::new(&mut a);
    let src = odp_mr(&mut a);
    assert_eq!(
        resume(&mut a, (1, qa.qpn, 1), false),
        (0x03, 0x5e03_006b),
        "no such fault"
    );

    let first = a.post_send(
        &mut qa,
        SEND,
        SIGNALED,
        [0; 4],
        &[Seg::Data(64, src.key, src.va(0))],
    );
    a.post_send(&mut qa, SEND, SIGNALED, [0; 4], &[Seg::Inline(vec![1; 8])]);
    let (_, kind, wq, _, token) = wqe_fault(&odp.poll(&a).expect("a page fault"));
    assert_eq!(
        resume(&mut a, (kind, wq, token + 1), false).0,
        0x03,
        "a wrong token"
    );
    assert_eq!(resume(&mut a, (kind, wq, token), true), (0, 0));
    let c = a.wait(1_000_000).expect("the faulted WQE's completion");
    assert_eq!(
        (c.opcode, c.syndrome, c.wqe_counter),
        (0xd, 0x04, first),
        "LOCAL_PROT_ERR"
    );
    let c = a.wait(1_000_000).expect("the next WQE, flushed");
    assert_eq!((c.opcode, c.syndrome), (0xd, 0x05), "WR_FLUSH_ERR");
    let c = a.dev().datapath_counters();
    assert_eq!((c.page_faults, c.page_faults_failed), (1, 1));
}

/// An implicit ODP parent as mlx5_ib makes one: a KSM key over the whole address space
/// (`length64`, start 0) of 1 GiB entities, `n` entries, all absent (the null mkey's).
fn implicit_parent(n: &mut Node, entries: u64) -> u32 {
    let edit = |v: &mut ViewMut<'_, CreateMkeyIn>| {
        let mut c = v.nested_mut(CreateMkeyIn::MEMORY_KEY_MKEY_ENTRY);
        c.set(Mkc::ACCESS_MODE_1_0, 3).unwrap();
        c.set(Mkc::LENGTH64, 1).unwrap();
        c.set(Mkc::LOG_PAGE_SIZE, 30).unwrap();
        c.set(Mkc::TRANSLATIONS_OCTWORD_SIZE, entries).unwrap();
    };
    create_key(n, 0x1e, edit, 0)
}

#[test]
fn an_implicit_parents_absent_entity_faults_naming_the_parent_until_a_child_maps_it() {
    let (_fabric, mut a, mut b) = pair(Mode::Sync);
    let (mut qa, mut qb) = rc_pair(&mut a, &mut b);
    let mut odp = Odp::new(&mut a);
    let parent = implicit_parent(&mut a, 8);
    // The child for entity 1 ([1 GiB, 2 GiB)): an MTT key at 1 GiB whose pages are present.
    let child = odp_mr(&mut a);
    let slot = 1u64 << 30;
    let dst = b.reg_mr(4096, false, false, false);
    b.post_recv(&mut qb, &[(4096, dst.key, dst.va(0))]);

    let sent = fill(&a.dev(), &child, 11);
    let idx = a.post_send(
        &mut qa,
        SEND,
        SIGNALED,
        [0; 4],
        &[Seg::Data(2000, parent, slot + 300)],
    );
    let (sub, kind, wq, index, token) = wqe_fault(&odp.poll(&a).expect("a page fault"));
    assert_eq!((sub, kind, wq, index), (0, 1, qa.qpn, idx));

    // mlx5_ib's answer: the child, its pages, then the parent's entry 1 naming it (a UMR of KSM
    // entries, mkey_mask 0), then the resume.
    odp.map(&mut a, &child);
    let mut entries = Vec::new();
    for k in 0..4u64 {
        let (key, va) = if k == 1 {
            (child.key, child.va)
        } else {
            (mlx5_sim::NULL_MKEY, 0)
        };
        entries.extend_from_slice(&(1u32 << 30).to_be_bytes());
        entries.extend_from_slice(&key.to_be_bytes());
        entries.extend_from_slice(&va.to_be_bytes());
    }
    odp.write_entries(&mut a, parent, &entries);
    assert_eq!(resume(&mut a, (kind, wq, token), false), (0, 0));

    assert_eq!(
        a.wait(1_000_000).map(|c| (c.opcode, c.wqe_counter)),
        Some((0, idx))
    );
    assert_eq!(b.poll().map(|c| c.byte_cnt), Some(2000));
    // Entity 1 at offset 300 is the child's byte 300 (the child's range starts at its own VA).
    assert_eq!(read(&b.dev(), &dst, 0, 2000), &sent[300..2300]);
}

#[test]
fn a_retransmission_that_meets_an_invalidated_page_faults_and_goes_again_after_resume() {
    let (fabric, mut a, mut b) = pair(Mode::Sync);
    let (mut qa, mut qb) = timed_pair(&mut a, &mut b);
    let mut odp = Odp::new(&mut a);
    let src = odp_mr(&mut a);
    odp.map(&mut a, &src);
    let sent = fill(&a.dev(), &src, 9);
    let dst = b.reg_mr(4096, false, false, false);
    b.post_recv(&mut qb, &[(4096, dst.key, dst.va(0))]);

    // The SEND (one packet: no later packet draws a sequence NAK) is lost; then the driver
    // invalidates the pages (a UMR that zaps the entries) before the ack timeout sends it again.
    fabric.inject(mlx5_sim::WireFault::Drop { count: 1 });
    let first = a.post_send(
        &mut qa,
        SEND,
        SIGNALED,
        [0; 4],
        &[Seg::Data(1000, src.key, src.va(0))],
    );
    odp.write_entries(&mut a, src.key, &[0; 64]);
    let (sub, kind, wq, index, token) = odp.wait_fault(&mut a);
    assert_eq!((sub, kind, wq, index), (0, 1, qa.qpn, first));
    odp.map(&mut a, &src);
    assert_eq!(resume(&mut a, (kind, wq, token), false), (0, 0));
    let c = a.wait(100_000_000).expect("the SEND completes");
    assert_eq!((c.opcode, c.wqe_counter), (0, first));
    assert_eq!(b.poll().map(|c| c.byte_cnt), Some(1000));
    assert_eq!(read(&b.dev(), &dst, 0, 1000), &sent[..1000]);
}

#[test]
fn a_read_response_for_an_invalidated_buffer_faults_and_the_read_goes_again() {
    let (fabric, mut a, mut b) = pair(Mode::Sync);
    let (mut qa, _qb) = timed_pair(&mut a, &mut b);
    let mut odp = Odp::new(&mut a);
    let local = odp_mr(&mut a);
    odp.map(&mut a, &local);
    let remote = b.reg_mr(4096, true, false, false);
    let data = fill(&b.dev(), &remote, 4);

    // The READ request is lost; the driver invalidates the local buffer before the ack timeout
    // sends the request again; its response then meets the absent page.
    fabric.inject(mlx5_sim::WireFault::Drop { count: 1 });
    let read_op = 0x10;
    let idx = a.post_send(
        &mut qa,
        read_op,
        SIGNALED,
        [0; 4],
        &[
            Seg::Raddr(remote.va(0), remote.key),
            Seg::Data(512, local.key, local.va(0)),
        ],
    );
    odp.write_entries(&mut a, local.key, &[0; 64]);
    let (sub, kind, wq, index, token) = odp.wait_fault(&mut a);
    assert_eq!(
        (sub, kind, wq, index),
        (0, 3, qa.qpn, idx),
        "REQ_READ_OR_ATOMIC"
    );
    odp.map(&mut a, &local);
    assert_eq!(resume(&mut a, (kind, wq, token), false), (0, 0));
    let c = a.wait(100_000_000).expect("the READ completes");
    assert_eq!((c.opcode, c.wqe_counter), (0, idx));
    assert_eq!(read(&a.dev(), &local, 0, 512), &data[..512]);
}
