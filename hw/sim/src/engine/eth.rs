//! Ethernet send queues (CREATE_SQ objects): the device executes their WQEs when the driver rings
//! their doorbell — the send doorbell of a UAR page, whose control segment names the SQ number
//! instead of a QP (`qpn_ds` bits 31:8).
//!
//! From the doorbell's WQE counter back to the SQ's consumer counter, WQE by WQE (each `DS × 16`
//! bytes, in 64-byte WQEBBs): a WQE whose control segment names another SQ, or whose index is
//! not the consumer counter, stops the queue (a [`DmaFaultKind::BadWqe`], the SQ goes to ERR
//! with an error CQE); NOP completes; SEND (and TSO) is put on the wire, which has no Ethernet
//! receiver yet (issue #13): the frame is counted and dropped there, as a cable with nothing at
//! its other end would. Another opcode is a local QP operation error. A WQE with CQ_UPDATE
//! (`fm_ce_se` bit 3) gets a requester CQE on the SQ's CQ: opcode REQ, the WQE's opcode, the SQN
//! and its WQE counter — what mlx5e's TX and ICOSQ completion handlers read.

use mlx5_ifc::prm::sq_rq::Sqc;
use mlx5_ifc::prm::srq::Wq;
use mlx5_ifc::wqe::{fm_ce_se, opcode, CtrlSeg};
use mlx5_ifc::{Layout, View, ViewMut};

use super::cqe::{self, op, syndrome, Cqe};
use super::wqe::{dma_fault, queue_start, read_queue};
use super::Hw;
use crate::fault::{DmaFault, DmaFaultKind};
use crate::fw::objects::ObjectKind;
use crate::fw::sq_rq::{ERR, RDY};

/// Bytes of a WQE building block.
const WQEBB: u64 = mlx5_ifc::wqe::WQEBB as u64;

/// What the device needs of an SQ to execute it.
struct SqInfo {
    state: u64,
    cqn: u32,
    pas: Vec<u64>,
    page: u64,
    start: u64,
    wqebbs: u32,
}

fn info(hw: &Hw<'_>, sqn: u32) -> Option<SqInfo> {
    let q = hw.fw.objects.queue(ObjectKind::Sq, sqn)?;
    let c = View::<Sqc>::new(&q.ctx).ok()?;
    let w = c.nested(Sqc::WQ);
    let page = 4096u64 << w.get(Wq::LOG_WQ_PG_SZ).min(20);
    Some(SqInfo {
        state: c.get(Sqc::STATE),
        cqn: c.get32(Sqc::CQN),
        pas: q.pas.clone(),
        page,
        start: queue_start(page, w.get(Wq::PAGE_OFFSET)),
        wqebbs: 1 << w.get(Wq::LOG_WQ_SZ).min(16),
    })
}

/// A send doorbell for SQ `sqn` whose last WQE has counter `last`: executes every WQE from the
/// consumer counter through that one.
pub(crate) fn doorbell(hw: &mut Hw<'_>, sqn: u32, last: u16) {
    let Some(sq) = info(hw, sqn) else {
        return;
    };
    if sq.state != RDY {
        log::debug!(
            "mlx5-sim: doorbell of SQ {sqn:#x} in state {}; ignored",
            sq.state
        );
        return;
    }
    let mut cc = hw.fw.engine.eth_sqs.get(&sqn).copied().unwrap_or(0);
    for _ in 0..sq.wqebbs {
        let slot = u64::from(u32::from(cc) & (sq.wqebbs - 1));
        let mut ctrl = [0u8; CtrlSeg::BYTES];
        if let Err(iova) = read_queue(
            hw.iommu,
            &sq.pas,
            sq.page,
            sq.start + slot * WQEBB,
            &mut ctrl,
        ) {
            dma_fault(
                hw.faults,
                iova,
                WQEBB as usize,
                false,
                format!("WQE {cc} of SQ {sqn:#x}"),
            );
            fail(hw, sqn, &sq, cc, 0);
            return;
        }
        let Ok(c) = View::<CtrlSeg>::new(&ctrl) else {
            return;
        };
        let (index, op_code, named, ds) = (
            c.get(CtrlSeg::WQE_INDEX) as u16,
            c.get(CtrlSeg::OPCODE) as u8,
            c.get32(CtrlSeg::QPN),
            c.get(CtrlSeg::DS),
        );
        if named != sqn || index != cc || ds == 0 {
            hw.faults.push(DmaFault {
                iova: sq.pas.first().copied().unwrap_or(0) + sq.start + slot * WQEBB,
                len: WQEBB as usize,
                kind: DmaFaultKind::BadWqe,
                what: format!(
                    "SQ {sqn:#x} WQE at counter {cc}: control segment names SQ {named:#x}, index {index}, DS {ds}"
                ),
            });
            fail(hw, sqn, &sq, cc, op_code);
            return;
        }
        match op_code {
            opcode::NOP => {}
            opcode::SEND | opcode::TSO => {
                hw.fw.engine.counters.eth_tx_dropped += 1;
            }
            other => {
                log::warn!("mlx5-sim: SQ {sqn:#x} WQE {cc}: opcode {other:#x} not executed");
                fail(hw, sqn, &sq, cc, other);
                return;
            }
        }
        if c.get(CtrlSeg::FM_CE_SE) as u8 & fm_ce_se::CQ_UPDATE != 0 {
            cqe::post(
                hw,
                sq.cqn,
                &Cqe {
                    opcode: op::REQ,
                    wqe_opcode: op_code,
                    qpn: sqn,
                    wqe_counter: cc,
                    ..Cqe::default()
                },
            );
        }
        let nbb = ds.div_ceil(WQEBB / 16) as u16;
        let done = cc == last;
        cc = cc.wrapping_add(nbb);
        hw.fw.engine.eth_sqs.insert(sqn, cc);
        if done {
            return;
        }
    }
}

/// The SQ stops at the WQE at counter `cc`: an error CQE (local QP operation error) and the
/// state ERR, as a send queue that met a WQE it cannot execute.
fn fail(hw: &mut Hw<'_>, sqn: u32, sq: &SqInfo, cc: u16, op_code: u8) {
    cqe::post(
        hw,
        sq.cqn,
        &Cqe {
            opcode: op::REQ_ERR,
            wqe_opcode: op_code,
            qpn: sqn,
            wqe_counter: cc,
            syndrome: syndrome::LOCAL_QP_OP_ERR,
            ..Cqe::default()
        },
    );
    if let Some(q) = hw.fw.objects.queue_mut(ObjectKind::Sq, sqn) {
        let r = ViewMut::<Sqc>::new(&mut q.ctx).and_then(|mut v| v.set(Sqc::STATE, ERR).map(drop));
        if let Err(e) = r {
            log::error!("mlx5-sim: SQ {sqn:#x} state: {e}");
        }
    }
}
