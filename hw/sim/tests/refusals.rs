//! Refusals of CREATE_EQ/CQ/SRQ/RMP with their status and syndrome: sizes, references, the
//! buffer (page size and offset, PAS list short, zero, unaligned, unmapped), the doorbell record.

mod common;

use common::queues::*;
use mlx5_ifc::consts::wq_type;
use mlx5_ifc::prm::cq::{Cqc, CreateCqIn};
use mlx5_ifc::prm::eq::{CreateEqIn, CreateEqOut, Eqc};
use mlx5_ifc::prm::srq::{CreateRmpIn, CreateSrqIn, Rmpc, Srqc, Wq};
use mlx5_ifc::{View, ViewMut};
use mlx5_sim::syndrome as syn;
use mlx5_sim::{DmaFaultKind, Mode};

#[test]
fn queue_parameter_refusals() {
    let mut fx = Fx::cx5(Mode::Sync);
    let dev = fx.dev();
    const PAS: usize = CreateEqIn::PAS.offset();
    let eq = |fx: &Fx, f: fn(&mut ViewMut<'_, Eqc>)| fx.eq_in(4, f);
    // (`log_page_size` has no refusal to test: any value of its 5 bits is a page size Linux
    // may pick.)
    let cases: [(Edit<Eqc>, u32); 3] = [
        (|c| drop(c.set(Eqc::LOG_EQ_SIZE, 23)), syn::EQ_TOO_BIG),
        (|c| drop(c.set(Eqc::INTR, 64)), syn::BAD_EQ_INTR),
        (|c| drop(c.set(Eqc::UAR_PAGE, 3)), syn::UNKNOWN_UAR),
    ];
    for (f, want) in cases {
        let status = if want == syn::UNKNOWN_UAR {
            BAD_RES
        } else {
            BAD_PARAM
        };
        let input = eq(&fx, f);
        fx.expect(&input, 0x10, (status, want));
    }
    // The PAS list: short, zero, unaligned, unmapped.
    let good = eq(&fx, |_| {});
    fx.expect(&good[..PAS], 0x10, (BAD_INLEN, syn::INLEN_QUEUE_PAS));
    let zero = patch_pas(good.clone(), PAS, 0, 0);
    fx.expect(&zero, 0x10, (BAD_PARAM, syn::QUEUE_PAS_MISSING));
    let odd = patch_pas(good.clone(), PAS, 0, fx.arena.iova + 8);
    fx.expect(&odd, 0x10, (BAD_PARAM, syn::QUEUE_PAS_UNALIGNED));
    let guard = fx.arena.iova + fx.arena.len as u64;
    let unmapped = patch_pas(good.clone(), PAS, 0, guard);
    fx.expect(&unmapped, 0x10, (BAD_PARAM, syn::QUEUE_PAS_UNMAPPED));
    assert_eq!(faults_of(&dev, DmaFaultKind::QueueNotMapped), 1);
    // 8 KiB pages must be 8 KiB aligned.
    let a = fx.arena.iova;
    let odd8k = if a % 8192 == 0 { a + 4096 } else { a };
    let big_pages = fx.eq_in(4, |c| drop(c.set(Eqc::LOG_PAGE_SIZE, 1)));
    let big_pages = patch_pas(big_pages, PAS, 0, odd8k);
    fx.expect(&big_pages, 0x10, (BAD_PARAM, syn::QUEUE_PAS_UNALIGNED));
    // Only the part of a page the queue uses must be mapped: 256 bytes fit a 256-byte block,
    // 512 do not.
    let small = dev.dma_alloc(256, 4096).unwrap();
    let eq4 = patch_pas(fx.eq_in(2, |_| {}), PAS, 0, small.iova);
    let eqn = View::<CreateEqOut>::new(&fx.p.ok(&eq4, 0x10))
        .unwrap()
        .get32(CreateEqOut::EQ_NUMBER);
    let eq8 = patch_pas(fx.eq_in(3, |_| {}), PAS, 0, small.iova);
    fx.expect(&eq8, 0x10, (BAD_PARAM, syn::QUEUE_PAS_UNMAPPED));

    // CQs.
    let cases: [(Edit<Cqc>, (u8, u32)); 6] = [
        (
            |c| drop(c.set(Cqc::LOG_CQ_SIZE, 23)),
            (BAD_PARAM, syn::CQ_TOO_BIG),
        ),
        (
            |c| drop(c.set(Cqc::CQE_SZ, 2)),
            (BAD_PARAM, syn::BAD_CQE_SIZE),
        ),
        (
            |c| drop(c.set(Cqc::C_EQN_OR_APU_ELEMENT, 9)),
            (BAD_RES, syn::UNKNOWN_EQ),
        ),
        (
            |c| drop(c.set(Cqc::UAR_PAGE, 3)),
            (BAD_RES, syn::UNKNOWN_UAR),
        ),
        (
            |c| drop(c.set(Cqc::DBR_ADDR, c.get(Cqc::DBR_ADDR) + 4)),
            (BAD_PARAM, syn::DBR_UNALIGNED),
        ),
        (
            |c| drop(c.set(Cqc::DBR_ADDR, 0)),
            (BAD_PARAM, syn::DBR_UNMAPPED),
        ),
    ];
    for (f, want) in cases {
        let input = fx.cq_in(eqn, 4, f);
        fx.expect(&input, 0x10, want);
    }
    let guard_dbr = fx.dbrs.iova + 4096;
    let input = fx.cq_in(eqn, 4, |c| drop(c.set(Cqc::DBR_ADDR, guard_dbr)));
    fx.expect(&input, 0x10, (BAD_PARAM, syn::DBR_UNMAPPED));
    let short = fx.cq_in(eqn, 4, |_| {});
    fx.expect(
        &short[..CreateCqIn::PAS.offset()],
        0x10,
        (BAD_INLEN, syn::INLEN_QUEUE_PAS),
    );
    assert_eq!(faults_of(&dev, DmaFaultKind::QueueNotMapped), 4);

    // RMPs.
    let cases: [(Edit<Wq>, (u8, u32)); 6] = [
        (
            |w| drop(w.set(Wq::WQ_TYPE, wq_type::CYCLIC)),
            (BAD_PARAM, syn::BAD_WQ_TYPE),
        ),
        (
            |w| drop(w.set(Wq::LOG_WQ_SZ, 16)),
            (BAD_PARAM, syn::SRQ_TOO_BIG),
        ),
        (
            |w| drop(w.set(Wq::LOG_WQ_STRIDE, 3)),
            (BAD_PARAM, syn::BAD_SRQ_STRIDE),
        ),
        (
            |w| drop(w.set(Wq::LOG_WQ_STRIDE, 10)),
            (BAD_PARAM, syn::BAD_SRQ_STRIDE),
        ),
        (|w| drop(w.set(Wq::PD, 99)), (BAD_RES, syn::UNKNOWN_PD)),
        (
            |w| drop(w.set(Wq::DBR_ADDR, 0x10)),
            (BAD_PARAM, syn::DBR_UNMAPPED),
        ),
    ];
    for (f, want) in cases {
        let input = fx.rmp_in(4, 5, f);
        fx.expect(&input, 0x10, want);
    }
    let mut input = fx.rmp_in(4, 5, |_| {});
    let state = CreateRmpIn::CTX.offset() + Rmpc::STATE.info.byte_offset();
    input[state] = 0; // rmpc.state = RST
    fx.expect(&input, 0x10, (BAD_PARAM, syn::BAD_RMP_STATE));
    let rmp_pas = CreateRmpIn::CTX.offset() + Rmpc::WQ.offset() + Wq::PAS.offset();
    assert_eq!(rmp_pas, 0x110);
    let input = fx.rmp_in(4, 5, |_| {});
    fx.expect(&input[..rmp_pas], 0x10, (BAD_INLEN, syn::INLEN_QUEUE_PAS));

    fx.destroy_eq(eqn);
    dev.dma_free(small.iova).unwrap();
    let dev = fx.finish();
    assert_eq!(faults_of(&dev, DmaFaultKind::QueueNotMapped), 5);
}

#[test]
fn srq_refusals_at_issi_0() {
    let mut fx = Fx::new(common::quiet_by_name("cx5-tight").unwrap(), Mode::Sync, 0);
    let cases: [(Edit<Srqc>, (u8, u32)); 4] = [
        (
            |c| drop(c.set(Srqc::LOG_SRQ_SIZE, 11)),
            (BAD_PARAM, syn::SRQ_TOO_BIG),
        ),
        (
            |c| drop(c.set(Srqc::LOG_RQ_STRIDE, 6)),
            (BAD_PARAM, syn::BAD_SRQ_STRIDE),
        ),
        (|c| drop(c.set(Srqc::PD, 99)), (BAD_RES, syn::UNKNOWN_PD)),
        (
            |c| drop(c.set(Srqc::DBR_ADDR, c.get(Srqc::DBR_ADDR) + 2)),
            (BAD_PARAM, syn::DBR_UNALIGNED),
        ),
    ];
    for (f, want) in cases {
        let input = fx.srq_in(4, 1, f);
        fx.expect(&input, 0x10, want);
    }
    let input = fx.srq_in(4, 1, |_| {});
    fx.expect(
        &input[..CreateSrqIn::PAS.offset()],
        0x10,
        (BAD_INLEN, syn::INLEN_QUEUE_PAS),
    );
    fx.finish_clean();
}
