//! Issue #10, row 10: an SRQ is created with its limit event disarmed (`lwm` 0, as Linux's
//! mlx5_ib creates it and `ibv_create_srq` ignores `srq_limit`) and armed later with
//! `Srq::modify_limit` (MODIFY_RMP at ISSI 1). The simulated device raises SRQ_RQ_LIMIT once
//! when fewer than `lwm` WQEs are left, then disarms — the hardware behaviour the old
//! arm-at-create ran into (`hw/sim/tests/datapath.rs`, `receives_from_an_rmp_follow_its_linked_list`).

mod common;

use common::*;
use mlx5::ifc::event::SRQ_RQ_LIMIT;
use mlx5::ifc::prm::srq::{CreateRmpIn, ModifyRmpIn, Rmpc, Wq};
use mlx5::ifc::{Opcode, View};
use mlx5::mr::MrAccess;
use mlx5::qp::{ConnectOpts, QpInitAttr, QpType, RecvWr, SendWr, Sge};
use mlx5::sim::{Fabric, Mode};
use mlx5::srq::SrqAttr;
use mlx5::Error;
use mlx5::Event;

fn limit_events(dev: &Dev) -> Vec<u32> {
    let mut out = [Event::default(); 16];
    let n = dev.poll_async_events(&mut out).unwrap();
    out[..n]
        .iter()
        .filter(|e| e.event_type == SRQ_RQ_LIMIT)
        .filter_map(|e| e.qpn())
        .collect()
}

#[test]
fn srq_limit_is_armed_after_creation_and_fires_once() {
    let fabric = Fabric::new();
    let (_sa, a) = nic(&fabric, Mode::Sync);
    let (sb, b) = nic(&fabric, Mode::Sync);
    let (cqa, cqb) = (a.create_cq(64).unwrap(), b.create_cq(64).unwrap());
    let mra = a.alloc_mr(a.pd(), 4096, MrAccess::ALL).unwrap();
    let mrb = b.alloc_mr(b.pd(), 65536, MrAccess::ALL).unwrap();
    let srq = b
        .create_srq(
            b.pd(),
            &SrqAttr {
                max_wr: 16,
                max_sge: 1,
                srq_limit: 10,
            },
        )
        .unwrap();
    let create = sb
        .trace()
        .into_iter()
        .rfind(|r| r.opcode == Opcode::CreateRmp as u16)
        .unwrap();
    let lwm = View::<CreateRmpIn>::new(&create.input)
        .unwrap()
        .nested(CreateRmpIn::CTX)
        .nested(Rmpc::WQ)
        .get(Wq::LWM);
    assert_eq!(lwm, 0, "created disarmed whatever srq_limit says");
    assert_eq!(srq.query().unwrap().limit, 0);

    let mut s = qp(&a, &cqa, QpType::Rc, cap(16, 1, 1));
    let mut attr = QpInitAttr::new(QpType::Rc, &cqb, &cqb, cap(16, 0, 1));
    attr.srq = Some(&srq);
    let mut r = b.create_qp(b.pd(), &attr).unwrap();
    connect(&mut s, &mut r, &ConnectOpts::default());
    let sges: Vec<[Sge; 1]> = (0..8u64)
        .map(|i| {
            [Sge {
                addr: mrb.addr() + 1024 * i,
                length: 1024,
                lkey: mrb.lkey(),
            }]
        })
        .collect();
    let wrs: Vec<RecvWr<'_>> = sges
        .iter()
        .enumerate()
        .map(|(i, s)| RecvWr {
            wr_id: i as u64,
            sg_list: s,
        })
        .collect();
    srq.post_recv(&wrs).unwrap();
    assert!(matches!(
        srq.modify_limit(srq.sized().attr.max_wr + 1),
        Err(Error::InvalidArgument {
            field: "srq_limit",
            ..
        })
    ));
    srq.modify_limit(4).unwrap();
    assert_eq!(srq.query().unwrap().limit, 4);
    let modify = sb
        .trace()
        .into_iter()
        .rfind(|r| r.opcode == Opcode::ModifyRmp as u16)
        .unwrap();
    let v = View::<ModifyRmpIn>::new(&modify.input).unwrap();
    assert_eq!(v.nested(ModifyRmpIn::CTX).nested(Rmpc::WQ).get(Wq::LWM), 4);

    let send = |s: &mut mlx5::qp::Qp<'_, mlx5::SimPlatform>, n: usize| {
        for j in 0..n {
            s.post_send(&[SendWr::send(
                j as u64,
                &[Sge {
                    addr: mra.addr(),
                    length: 64,
                    lkey: mra.lkey(),
                }],
            )])
            .unwrap();
        }
        wait(&cqa, &a, n);
        wait(&cqb, &b, n);
    };
    // 8 posted; after 4 receives 4 are left: not below the limit.
    send(&mut s, 4);
    assert!(limit_events(&b).is_empty());
    // The fifth leaves 3: one event naming the SRQ, and the limit is disarmed.
    send(&mut s, 1);
    assert_eq!(limit_events(&b), [srq.srqn()]);
    assert_eq!(srq.query().unwrap().limit, 0);
    send(&mut s, 2);
    assert!(limit_events(&b).is_empty(), "fires once per arming");
}
