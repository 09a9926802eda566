//! Ethernet send queues (CREATE_SQ objects): the device executes their WQEs when the driver rings
//! their doorbell — the send doorbell of a UAR page, whose control segment names the SQ number
//! instead of a QP (`qpn_ds` bits 31:8).
//!
//! From the doorbell's WQE counter back to the SQ's consumer counter, WQE by WQE (each `DS × 16`
//! bytes, in 64-byte WQEBBs): a WQE whose control segment names another SQ, or whose index is
//! not the consumer counter, stops the queue (a [`DmaFaultKind::BadWqe`], the SQ goes to ERR
//! with an error CQE); NOP completes; SEND and TSO put frames on the wire, and so does an
//! enhanced multi-packet send (ENHANCED_MPSW, 0x29: one frame per data segment after the
//! Ethernet segment, whose checksum flags and VLAN insertion apply to each); UMR, on an SQ made
//! with `reg_umr` (mlx5e's ICOSQ, mapping a striding RQ's pages), changes a memory key
//! ([`super::umr`]). Another opcode is a local QP operation error. A WQE with CQ_UPDATE
//! (`fm_ce_se` bit 3) gets a requester CQE on the SQ's CQ: opcode REQ, the WQE's opcode, the SQN
//! and its WQE counter — what mlx5e's TX and ICOSQ completion handlers read — and, with CQE
//! version 1, the SQ's `user_index` in `srqn_uidx`, as in every completion of the SQ (errors and
//! flushes too): mlx5_ib gives a raw packet QP's SQ the QP's user index, and rdma-core finds the
//! QP of a send completion by that index alone (QPs sharing a CQ each get their own back).
//!
//! A SEND or TSO WQE (`mlx5_wqe_eth_seg` after the control segment): `inline_hdr_sz` bytes of
//! the frame inline from the Ethernet segment's byte 14 on (none at all may be: the device
//! reports `wqe_inline_mode` 2, not required, as a ConnectX-5 does; a TSO WQE inlines every
//! header), then data segments to the
//! WQE's end, gathered through their lkeys in the SQ's PD (an inline data segment, byte count
//! bit 31, carries its bytes in the WQE). `inline_hdr_sz` with bit 15 set is instead a VLAN
//! insertion (`insert.type`, the TCI in the next two bytes). `cs_flags` bit 6 computes the IPv4
//! header checksum, bit 7 the TCP/UDP checksum (whatever the field held: pseudo-header and all).
//! TSO cuts the TCP payload into `mss`-byte segments ([`packet::segment`]). Frames shorter than
//! 60 bytes are padded, as a MAC does. A gather error (a bad lkey, a frame over 256 KiB) is an
//! error CQE and the SQ goes to ERR.
//!
//! Packet pacing: an SQ whose `packet_pacing_rate_limit_index` names a set rate
//! ([`crate::fw`]'s `pacing`) sends a SEND or TSO WQE's frames only once the frames before have
//! gone at that rate (`bytes × 8 / rate` after the later of their slot and now); until then its
//! doorbell waits, and the timer tick runs it on.

use mlx5_ifc::consts::sq_rq_state::{ERR, RDY};
use mlx5_ifc::prm::sq_rq::Sqc;
use mlx5_ifc::prm::tir::Tisc;
use mlx5_ifc::wqe::{eth_cs, fm_ce_se, opcode, CtrlSeg, DataSeg, EthSeg};
use mlx5_ifc::{Layout, View, ViewMut};

use super::dma;
use super::wqe::{LocalError, Piece, Pieces};
use crate::events::cqe::{self, op, syndrome, Cqe};
use crate::fabric::packet;
use crate::fault::{DmaFault, DmaFaultKind};
use crate::memory::queue::{dma_fault, WqRing};
use crate::model::objects::ObjectKind;
use crate::model::runtime::Sge;
use crate::model::Hw;

/// Bytes of a WQE building block.
const WQEBB: u64 = mlx5_ifc::wqe::WQEBB as u64;

/// `inline_hdr_sz` bit 15: the field is `insert.type`, a VLAN insertion.
const INSERT_VLAN: u16 = 0x8000;
/// Byte count bit 31 of a data segment: inline data.
const INLINE_SEG: u32 = 0x8000_0000;
/// The largest frame (or TSO payload with its headers) a send WQE may gather: 2^18 bytes
/// (`max_lso_cap`).
const MAX_GATHER: u64 = 1 << 18;
/// The shortest Ethernet frame without its FCS; shorter ones are padded.
const MIN_FRAME: usize = 60;

/// What the device needs of an SQ to execute it.
struct SqInfo {
    state: u64,
    cqn: u32,
    /// `user_index`: its completions' `srqn_uidx` (CQE version 1).
    user_index: u32,
    /// The transport domain of its TIS (what a looped-back frame is blocked by).
    td: u32,
    /// Its ring, in WQEBBs.
    ring: WqRing,
    /// Its packet pacing rate (kbit/s), if its rate index names a set rate.
    rate: Option<u32>,
    /// `reg_umr`: it executes UMR WQEs.
    reg_umr: bool,
}

fn info(hw: &Hw<'_>, sqn: u32) -> Option<SqInfo> {
    let q = hw.model.objects.queue(ObjectKind::Sq, sqn)?;
    let c = View::<Sqc>::new(&q.ctx).ok()?;
    let mut ring = WqRing::of(&c.nested(Sqc::WQ), &q.pas);
    ring.stride = WQEBB;
    let td = hw
        .model
        .objects
        .queue(ObjectKind::Tis, c.get32(Sqc::TIS_NUM_0))
        .and_then(|t| {
            View::<Tisc>::new(&t.ctx)
                .ok()
                .map(|v| v.get32(Tisc::TRANSPORT_DOMAIN))
        })
        .unwrap_or(0);
    let index = c.get(Sqc::PACKET_PACING_RATE_LIMIT_INDEX) as u16;
    Some(SqInfo {
        state: c.get(Sqc::STATE),
        cqn: c.get32(Sqc::CQN),
        user_index: c.get32(Sqc::USER_INDEX),
        td,
        ring,
        rate: (index != 0)
            .then(|| hw.model.rates.get(&index).copied())
            .flatten(),
        reg_umr: c.get(Sqc::REG_UMR) == 1,
    })
}

/// Whether SQ `sq` (`sqn`) is rate limited and its next frame may not leave yet: then the
/// doorbell (its last WQE, `last`) waits for that time, which the timer tick serves.
fn paced_wait(hw: &mut Hw<'_>, sqn: u32, sq: &SqInfo, last: u16) -> bool {
    if sq.rate.is_none() {
        return false;
    }
    let now = hw.now;
    let p = hw.model.rt.paced.entry(sqn).or_default();
    if p.next_at <= now {
        p.waiting = None;
        return false;
    }
    p.waiting = Some(last);
    true
}

/// A rate-limited SQ sent `bytes` on the wire: its next frame may leave once they have gone at
/// its rate (kbit/s: `bytes × 8 × 10^6 / rate` ns after the later of now and the last frame's
/// slot).
fn paced_sent(hw: &mut Hw<'_>, sqn: u32, sq: &SqInfo, bytes: usize) {
    let Some(rate) = sq.rate.filter(|&r| r > 0) else {
        return;
    };
    let now = hw.now;
    let p = hw.model.rt.paced.entry(sqn).or_default();
    let ns = (bytes as u64).saturating_mul(8_000_000) / u64::from(rate);
    p.next_at = p.next_at.max(now).saturating_add(ns);
}

/// The rate-limited SQs whose waiting doorbell is due now run on.
pub(crate) fn paced_due(hw: &mut Hw<'_>) {
    let now = hw.now;
    let due: Vec<(u32, u16)> = hw
        .model
        .rt
        .paced
        .iter_mut()
        .filter(|(_, p)| p.next_at <= now)
        .filter_map(|(&sqn, p)| p.waiting.take().map(|last| (sqn, last)))
        .collect();
    for (sqn, last) in due {
        doorbell(hw, sqn, last);
    }
}

/// A send doorbell for SQ `sqn` whose last WQE has counter `last`: executes every WQE from the
/// consumer counter through that one.
pub(crate) fn doorbell(hw: &mut Hw<'_>, sqn: u32, last: u16) {
    let Some(sq) = info(hw, sqn) else {
        return;
    };
    let mut cc = hw.model.rt.eth_sqs.get(&sqn).copied().unwrap_or(0);
    if sq.state == ERR {
        // An SQ in error executes nothing: what is posted completes flushed.
        flush(hw, sqn, &sq, cc, last);
        return;
    }
    if sq.state != RDY {
        log::debug!(
            "mlx5-sim: doorbell of SQ {sqn:#x} in state {}; ignored",
            sq.state
        );
        return;
    }
    for _ in 0..sq.ring.entries {
        let slot = u64::from(u32::from(cc) & (sq.ring.entries - 1));
        let mut ctrl = [0u8; CtrlSeg::BYTES];
        if let Err(iova) = sq.ring.read(hw.iommu, u64::from(cc), &mut ctrl) {
            dma_fault(
                hw.faults,
                iova,
                WQEBB as usize,
                false,
                format!("WQE {cc} of SQ {sqn:#x}"),
            );
            fail(hw, sqn, &sq, cc, 0, syndrome::LOCAL_QP_OP_ERR, None);
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
                iova: sq.ring.pas.first().copied().unwrap_or(0) + sq.ring.start + slot * WQEBB,
                len: WQEBB as usize,
                kind: DmaFaultKind::BadWqe,
                what: format!(
                    "SQ {sqn:#x} WQE at counter {cc}: control segment names SQ {named:#x}, index {index}, DS {ds}"
                ),
            });
            fail(hw, sqn, &sq, cc, op_code, syndrome::LOCAL_QP_OP_ERR, None);
            return;
        }
        let rest = Some((cc.wrapping_add(ds.div_ceil(WQEBB / 16) as u16), last));
        match op_code {
            opcode::NOP => {}
            opcode::UMR if sq.reg_umr => {
                let done = read_wqe(hw, &sq, cc, ds as usize)
                    .ok_or(LocalError::Dma)
                    .and_then(|w| super::umr::execute(hw, &w));
                if let Err(e) = done {
                    log::info!("mlx5-sim: SQ {sqn:#x} UMR WQE {cc}: {e:?}");
                    fail(hw, sqn, &sq, cc, op_code, local_syndrome(e), rest);
                    return;
                }
            }
            opcode::SEND | opcode::TSO | opcode::ENHANCED_MPSW
                if paced_wait(hw, sqn, &sq, last) =>
            {
                return
            }
            opcode::SEND | opcode::TSO | opcode::ENHANCED_MPSW => {
                let wqe_iova =
                    sq.ring.pas.first().copied().unwrap_or(0) + sq.ring.start + slot * WQEBB;
                let sent = injected_read_fault(hw, sqn, cc, wqe_iova)
                    .and_then(|()| read_wqe(hw, &sq, cc, ds as usize))
                    .ok_or(LocalError::Dma)
                    .and_then(|w| match op_code {
                        opcode::ENHANCED_MPSW => mpw_frames(hw, sq.ring.pd, &w),
                        _ => frames(hw, sq.ring.pd, &w, op_code == opcode::TSO),
                    });
                match sent {
                    Ok(frames) => {
                        let v = &hw.model.vport;
                        let (own, lb) = (v.mac(), (!v.disable_uc_local_lb, !v.disable_mc_local_lb));
                        let bytes: usize = frames.iter().map(Vec::len).sum();
                        // The NIC transmit tables first: a frame they drop is sent as far as
                        // the WQE is concerned.
                        for f in frames {
                            if let Some(f) = super::steering::egress(hw.model, f) {
                                hw.model.rt.send_raw(f, sq.td, own, lb);
                            }
                        }
                        paced_sent(hw, sqn, &sq, bytes);
                    }
                    Err(e) => {
                        log::info!("mlx5-sim: SQ {sqn:#x} WQE {cc}: {e:?}");
                        fail(hw, sqn, &sq, cc, op_code, local_syndrome(e), rest);
                        return;
                    }
                }
            }
            other => {
                log::warn!("mlx5-sim: SQ {sqn:#x} WQE {cc}: opcode {other:#x} not executed");
                fail(hw, sqn, &sq, cc, other, syndrome::LOCAL_QP_OP_ERR, rest);
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
                    srqn_uidx: cqe::srqn_uidx(hw, sq.user_index, None),
                    ..Cqe::default()
                },
            );
        }
        let nbb = ds.div_ceil(WQEBB / 16) as u16;
        let done = cc == last;
        cc = cc.wrapping_add(nbb);
        hw.model.rt.eth_sqs.insert(sqn, cc);
        if done {
            return;
        }
    }
}

/// The error CQE syndrome of a WQE that failed with `e`.
fn local_syndrome(e: LocalError) -> u8 {
    match e {
        LocalError::Length => syndrome::LOCAL_LENGTH_ERR,
        // Ethernet queues take no page faults (no ODP for raw packets).
        LocalError::Protection | LocalError::PageFault => syndrome::LOCAL_PROT_ERR,
        LocalError::Dma => syndrome::LOCAL_QP_OP_ERR,
    }
}

/// An injected [`crate::Fault::SqReadFault`], if one is pending, consumed and recorded: the
/// WQE at counter `cc` of SQ `sqn` (at `iova`, the fault's recorded address) cannot read its
/// data (`None`).
fn injected_read_fault(hw: &mut Hw<'_>, sqn: u32, cc: u16, iova: u64) -> Option<()> {
    if !hw.model.injected.take_sq_read() {
        return Some(());
    }
    let what = format!("SQ {sqn:#x} WQE {cc}: its data read faults");
    hw.faults.push(DmaFault {
        iova,
        len: WQEBB as usize,
        kind: DmaFaultKind::Injected,
        what: what.clone(),
    });
    hw.model.injected.log.push(hw.now, "SqReadFault", what);
    None
}

/// The SQ stops at the WQE at counter `cc`: an error CQE (syndrome `syn`) and the state ERR,
/// as a send queue that met a WQE it cannot execute; with `flush_in_error_en`, the WQEs posted
/// after it (`rest`: the next WQE's counter and the doorbell's last) complete flushed, one
/// WR_FLUSH_ERR CQE each, as mlx5e's recovery waits for (consumer = producer) before it moves
/// the SQ back to RDY. (A WQE whose control segment cannot be read stops the flush: the
/// counters after it are unknown.)
fn fail(
    hw: &mut Hw<'_>,
    sqn: u32,
    sq: &SqInfo,
    cc: u16,
    op_code: u8,
    syn: u8,
    rest: Option<(u16, u16)>,
) {
    cqe::post(
        hw,
        sq.cqn,
        &Cqe {
            opcode: op::REQ_ERR,
            wqe_opcode: op_code,
            qpn: sqn,
            wqe_counter: cc,
            srqn_uidx: cqe::srqn_uidx(hw, sq.user_index, None),
            syndrome: syn,
            ..Cqe::default()
        },
    );
    if let Some(q) = hw.model.objects.queue_mut(ObjectKind::Sq, sqn) {
        let r = ViewMut::<Sqc>::new(&mut q.ctx).and_then(|mut v| v.set(Sqc::STATE, ERR).map(drop));
        if let Err(e) = r {
            log::error!("mlx5-sim: SQ {sqn:#x} state: {e}");
        }
    }
    if let Some((next, last)) = rest {
        hw.model.rt.eth_sqs.insert(sqn, next);
        if cc != last {
            flush(hw, sqn, sq, next, last);
        }
    }
}

/// WR_FLUSH_ERR completions for the WQEs from counter `cc` through `last` (each WQE's DS read
/// from its control segment to find the next); the consumer counter moves past them.
fn flush(hw: &mut Hw<'_>, sqn: u32, sq: &SqInfo, mut cc: u16, last: u16) {
    for _ in 0..sq.ring.entries {
        let mut ctrl = [0u8; CtrlSeg::BYTES];
        if sq.ring.read(hw.iommu, u64::from(cc), &mut ctrl).is_err() {
            return;
        }
        let Ok(c) = View::<CtrlSeg>::new(&ctrl) else {
            return;
        };
        let (op_code, ds) = (c.get(CtrlSeg::OPCODE) as u8, c.get(CtrlSeg::DS));
        if ds == 0 {
            return;
        }
        hw.model.rt.counters.wqes_flushed += 1;
        cqe::post(
            hw,
            sq.cqn,
            &Cqe {
                opcode: op::REQ_ERR,
                wqe_opcode: op_code,
                qpn: sqn,
                wqe_counter: cc,
                srqn_uidx: cqe::srqn_uidx(hw, sq.user_index, None),
                syndrome: syndrome::WR_FLUSH_ERR,
                ..Cqe::default()
            },
        );
        let done = cc == last;
        cc = cc.wrapping_add(ds.div_ceil(WQEBB / 16) as u16);
        hw.model.rt.eth_sqs.insert(sqn, cc);
        if done {
            return;
        }
    }
}

/// The `ds × 16` bytes of the WQE at counter `cc` (WQEBB by WQEBB: it may wrap the ring);
/// `None` after recording a DMA fault.
fn read_wqe(hw: &mut Hw<'_>, sq: &SqInfo, cc: u16, ds: usize) -> Option<Vec<u8>> {
    let mut w = vec![0u8; ds * 16];
    for (i, bb) in w.chunks_mut(WQEBB as usize).enumerate() {
        if let Err(iova) = sq.ring.read(hw.iommu, u64::from(cc) + i as u64, bb) {
            dma_fault(hw.faults, iova, bb.len(), false, format!("send WQE {cc}"));
            return None;
        }
    }
    Some(w)
}

/// The frames of a SEND or TSO WQE `w` (see the module documentation).
fn frames(hw: &mut Hw<'_>, pd: u32, w: &[u8], tso: bool) -> Result<Vec<Vec<u8>>, LocalError> {
    let e = eth_seg(w)?;
    let inline = w
        .get(ETH_AT + 14..ETH_AT + 14 + e.inline_len)
        .ok_or(LocalError::Length)?;
    // Data segments start at the 16-byte unit after the inline header.
    let at = ETH_AT + 16 + 16 * e.inline_len.saturating_sub(2).div_ceil(16);
    let mut pieces = Pieces::new();
    pieces
        .push(Piece::Inline(inline))
        .map_err(|_| LocalError::Length)?;
    for p in data_segments(w, at)? {
        pieces.push(p).map_err(|_| LocalError::Length)?;
    }
    let f = dma::gather(hw, pd, &pieces, MAX_GATHER)?;
    if tso {
        let f = with_vlan(f, e.vlan)?;
        let mut out = packet::segment(&f, e.mss).ok_or(LocalError::Length)?;
        for f in &mut out {
            pad(f);
        }
        return Ok(out);
    }
    Ok(vec![finish(f, &e)?])
}

/// The frames of an enhanced multi-packet send WQE `w`: its Ethernet segment (checksum flags
/// and a VLAN insertion, no inline headers) applies to every packet; each data segment after
/// it is one whole frame — through its lkey, or inline (byte count bit 31, the bytes following
/// in the WQE). A frame that cannot be gathered fails the WQE: none of its frames leave.
fn mpw_frames(hw: &mut Hw<'_>, pd: u32, w: &[u8]) -> Result<Vec<Vec<u8>>, LocalError> {
    let e = eth_seg(w)?;
    if e.inline_len != 0 {
        log::info!(
            "mlx5-sim: an enhanced MPW WQE with {} bytes of inline headers",
            e.inline_len
        );
        return Err(LocalError::Length);
    }
    let mut out = Vec::new();
    for p in data_segments(w, ETH_AT + 16)? {
        let mut one = Pieces::new();
        one.push(p).map_err(|_| LocalError::Length)?;
        let f = dma::gather(hw, pd, &one, MAX_GATHER)?;
        out.push(finish(f, &e)?);
    }
    Ok(out)
}

/// Where the Ethernet segment starts in a send WQE (after the control segment).
const ETH_AT: usize = CtrlSeg::BYTES;

/// What a send WQE's Ethernet segment asks for.
struct Eth {
    cs: u8,
    mss: usize,
    inline_len: usize,
    vlan: Option<u16>,
}

/// The Ethernet segment of send WQE `w`. `inline_hdr_sz` with bit 15 set is a VLAN insertion
/// (`insert.type`; the TCI in the next two bytes), else the bytes of inline header.
fn eth_seg(w: &[u8]) -> Result<Eth, LocalError> {
    // The layout spans the first 16 inline bytes too; a WQE may end before them.
    let mut e = [0u8; EthSeg::BYTES];
    let have = w.len().saturating_sub(ETH_AT).min(EthSeg::BYTES);
    e[..have].copy_from_slice(&w[ETH_AT..ETH_AT + have]);
    let eth = View::<EthSeg>::new(&e).map_err(|_| LocalError::Length)?;
    let sz_field = eth.get(EthSeg::INLINE_HDR_SZ) as u16;
    let (inline_len, vlan) = if sz_field & INSERT_VLAN != 0 {
        (0, Some(u16::from_be_bytes([e[14], e[15]])))
    } else {
        (usize::from(sz_field & 0x3ff), None)
    };
    Ok(Eth {
        cs: eth.get(EthSeg::CS_FLAGS) as u8,
        mss: eth.get(EthSeg::MSS) as usize,
        inline_len,
        vlan,
    })
}

/// The data segments of send WQE `w` from byte `at` to its end: pointers (a zero byte count
/// is skipped) and inline data (byte count bit 31: the bytes follow, padded to 16).
fn data_segments(w: &[u8], mut at: usize) -> Result<Vec<Piece<'_>>, LocalError> {
    let mut out = Vec::new();
    while at + DataSeg::BYTES <= w.len() {
        let d =
            View::<DataSeg>::new(&w[at..at + DataSeg::BYTES]).map_err(|_| LocalError::Length)?;
        let bc = d.get32(DataSeg::BYTE_COUNT);
        if bc & INLINE_SEG != 0 {
            let n = (bc & !INLINE_SEG) as usize;
            out.push(Piece::Inline(
                w.get(at + 4..at + 4 + n).ok_or(LocalError::Length)?,
            ));
            at += (4 + n).div_ceil(16) * 16;
            continue;
        }
        if bc != 0 {
            out.push(Piece::Data(Sge {
                len: bc,
                lkey: d.get32(DataSeg::LKEY),
                addr: d.get(DataSeg::ADDR),
            }));
        }
        at += DataSeg::BYTES;
    }
    Ok(out)
}

/// Frame `f` with the VLAN tag `vlan` inserted after its MAC addresses.
fn with_vlan(mut f: Vec<u8>, vlan: Option<u16>) -> Result<Vec<u8>, LocalError> {
    if f.len() < 14 {
        return Err(LocalError::Length);
    }
    if let Some(tci) = vlan {
        let mut tag = [0u8; 4];
        tag[..2].copy_from_slice(&packet::TPID_CVLAN.to_be_bytes());
        tag[2..].copy_from_slice(&tci.to_be_bytes());
        f.splice(12..12, tag);
    }
    Ok(f)
}

/// A frame as it leaves: its VLAN tag inserted, the checksums `e` asks for computed, padded.
fn finish(f: Vec<u8>, e: &Eth) -> Result<Vec<u8>, LocalError> {
    let mut f = with_vlan(f, e.vlan)?;
    if let Some(h) = packet::parse(&f) {
        packet::fill_checksums(
            &mut f,
            &h,
            e.cs & eth_cs::L3_CSUM != 0,
            e.cs & eth_cs::L4_CSUM != 0,
        );
    }
    pad(&mut f);
    Ok(f)
}

/// Frames shorter than 60 bytes are padded, as a MAC does.
fn pad(f: &mut Vec<u8>) {
    if f.len() < MIN_FRAME {
        f.resize(MIN_FRAME, 0);
    }
}
