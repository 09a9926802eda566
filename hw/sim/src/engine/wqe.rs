//! Send WQE parsing and receive WQEs (RQ ring, SRQ / RMP linked list). The queue buffers they
//! are read from are [`crate::memory::queue`]'s.
//!
//! Send WQE (`mlx5-datapath-sizing.md` §1; the segments are the [`mlx5_ifc::wqe`] layouts): a
//! [`CtrlSeg`] (opcode, WQE index, QPN, DS, `fm_ce_se`, immediate), then by type: UD the
//! 48-byte [`DatagramSeg`]; RDMA WRITE / READ a [`RaddrSeg`]; atomics the remote address and an
//! [`AtomicSeg`]; then [`DataSeg`]s (a zero `byte_count` is skipped) or inline segments (an
//! [`InlineSeg`] header `INLINE_SEG | length`, the bytes, padded to 16).
//!
//! Receive WQEs: a regular RQ slot holds data segments; an SRQ / RMP WQE holds a 16-byte
//! [`SrqNextSeg`] (`next_wqe_index`) and then data segments. A data segment with `byte_count` 0
//! and lkey [`INVALID_LKEY`] (0x100) ends the list; other zero-length ones are skipped. (The
//! simulator's reserved lkey is also 0x100: a segment with a nonzero length and that lkey
//! scatters to physical addresses.)

use mlx5_ifc::consts::qp_st;
use mlx5_ifc::prm::srq::{Rmpc, Srqc, Wq, XrcSrqc};
use mlx5_ifc::wqe::{
    ext_atomic, fm_ce_se, AtomicSeg, CtrlSeg, DataSeg, DatagramSeg, InlineSeg, RaddrSeg,
    SrqNextSeg, XrcSeg, INVALID_LKEY,
};
use mlx5_ifc::{Layout, View};

use crate::memory::queue::{dma_fault, queue_start, read_be32, read_queue};
use crate::model::objects::ObjectKind;
use crate::model::qp_info::QpInfo;
use crate::model::runtime::{RecvSges, Sge};
use crate::model::Hw;

/// mlx5 send opcodes (control segment bits 7:0).
pub(crate) use mlx5_ifc::wqe::opcode;

/// `fm_ce_se`: CE = 2 or 3, a CQE for every WQE.
pub(crate) const CE_ALWAYS: u8 = fm_ce_se::CQ_UPDATE;
/// `fm_ce_se`: solicited event.
pub(crate) const SOLICITED: u8 = fm_ce_se::SOLICITED;

/// Why a local access failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LocalError {
    /// The data does not fit the scatter list (or the message is too long).
    Length,
    /// A key does not grant the access.
    Protection,
    /// A translated address is not mapped (a `DmaFault` is recorded).
    Dma,
    /// A page is not present (on-demand paging): where the operation supports it, a page fault
    /// is raised and the operation waits; elsewhere it is a protection error.
    PageFault,
}

/// The segment of layout `L` at `*at` of the WQE `b`; moves `*at` past it.
fn seg<'a, L: Layout>(b: &'a [u8], at: &mut usize) -> Result<View<'a, L>, &'static str> {
    let start = *at;
    *at += L::BYTES;
    b.get(start..*at)
        .and_then(|s| View::new(s).ok())
        .ok_or("DS too small for the WQE's segments")
}

/// A data segment's scatter/gather entry.
fn sge(d: View<'_, DataSeg>) -> Sge {
    Sge {
        len: d.get32(DataSeg::BYTE_COUNT),
        lkey: d.get32(DataSeg::LKEY),
        addr: d.get(DataSeg::ADDR),
    }
}

/// The address vector of a datagram segment (UD; DC: the DCT and its access key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Av {
    pub(crate) qkey: u32,
    /// `key.dc_key`: the DC access key (a DCI's WQE; the same bytes as `qkey` and the word after).
    pub(crate) dc_key: u64,
    pub(crate) dqpn: u32,
    pub(crate) sport: u16,
    pub(crate) rmac: [u8; 6],
    pub(crate) tclass: u8,
    pub(crate) hop_limit: u8,
    pub(crate) sgid_index: u8,
    pub(crate) flow_label: u32,
    pub(crate) rgid: [u8; 16],
}

/// The argument block of a masked (extended) atomic ([`mlx5_ifc::wqe::ext_atomic`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Masked<'a> {
    /// The argument size N in bytes (4, 8, 16 or 32).
    pub(crate) n: usize,
    /// The operands, N bytes each, big-endian: swap, compare, swap mask, compare mask
    /// (compare-and-swap), or the addend and the field boundary mask (fetch-and-add).
    pub(crate) operands: &'a [u8],
}

/// A part of the payload: inline bytes (borrowed from the WQE's bytes) or a data segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Piece<'a> {
    Inline(&'a [u8]),
    Data(Sge),
}

/// The most pieces a WQE has: its DS count is 6 bits of 16-byte units, each piece at least one.
pub(crate) const MAX_PIECES: usize = 64;

/// A WQE's pieces, without an allocation.
pub(crate) type Pieces<'a> = heapless::Vec<Piece<'a>, MAX_PIECES>;

/// A parsed send WQE (its inline data borrowed from the WQE's bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SendWqe<'a> {
    pub(crate) opcode: u8,
    pub(crate) qpn: u32,
    pub(crate) fm_ce_se: u8,
    pub(crate) imm: [u8; 4],
    /// Remote address segment: `(va, rkey)`.
    pub(crate) raddr: Option<(u64, u32)>,
    /// Atomic segment: `(swap_add, compare)`.
    pub(crate) atomic: Option<(u64, u64)>,
    /// A masked atomic's argument block.
    pub(crate) masked: Option<Masked<'a>>,
    pub(crate) av: Option<Av>,
    /// XRC segment: the XRC SRQ at the target.
    pub(crate) xrc_srqn: Option<u32>,
    pub(crate) pieces: Pieces<'a>,
}

impl SendWqe<'_> {
    /// The control segment's part: opcode, QPN, `fm_ce_se`, immediate; no other segment.
    pub(crate) fn of_ctrl<'a>(c: &View<'_, CtrlSeg>) -> SendWqe<'a> {
        SendWqe {
            opcode: c.get(CtrlSeg::OPCODE) as u8,
            qpn: c.get32(CtrlSeg::QPN),
            fm_ce_se: c.get(CtrlSeg::FM_CE_SE) as u8,
            imm: c.get32(CtrlSeg::IMM).to_be_bytes(),
            raddr: None,
            atomic: None,
            masked: None,
            av: None,
            xrc_srqn: None,
            pieces: Pieces::new(),
        }
    }

    /// The data segments (READ / atomic destinations).
    pub(crate) fn sges(&self) -> Vec<Sge> {
        self.pieces
            .iter()
            .filter_map(|p| match p {
                Piece::Data(s) => Some(*s),
                Piece::Inline(_) => None,
            })
            .collect()
    }
}

/// Whether send opcode `op` is valid on a QP of service type `st`.
fn valid_for(op: u8, st: u64) -> bool {
    use opcode::*;
    match st {
        qp_st::RC | qp_st::XRC => matches!(
            op,
            NOP | SEND_INVAL
                | RDMA_WRITE
                | RDMA_WRITE_IMM
                | SEND
                | SEND_IMM
                | RDMA_READ
                | ATOMIC_CS
                | ATOMIC_FA
                | ATOMIC_MASKED_CS
                | ATOMIC_MASKED_FA
        ),
        qp_st::UC => matches!(op, NOP | RDMA_WRITE | RDMA_WRITE_IMM | SEND | SEND_IMM),
        qp_st::UD => matches!(op, NOP | SEND | SEND_IMM),
        // rdma-core's DCI send operations (`MLX5_SUPPORTED_SEND_OPS_FLAGS_DCI`): RC's without
        // SEND with invalidate.
        qp_st::DCI => matches!(
            op,
            NOP | RDMA_WRITE
                | RDMA_WRITE_IMM
                | SEND
                | SEND_IMM
                | RDMA_READ
                | ATOMIC_CS
                | ATOMIC_FA
                | ATOMIC_MASKED_CS
                | ATOMIC_MASKED_FA
        ),
        _ => false,
    }
}

/// Whether send opcode `op` is an atomic (standard or masked).
pub(crate) fn is_atomic(op: u8) -> bool {
    matches!(
        op,
        opcode::ATOMIC_CS | opcode::ATOMIC_FA | opcode::ATOMIC_MASKED_CS | opcode::ATOMIC_MASKED_FA
    )
}

/// The argument block of a masked atomic at `*at` of WQE `b` (opcode `op`, control segment
/// `opmod`); moves `*at` past it (its length padded to 16).
fn masked<'a>(b: &'a [u8], at: &mut usize, op: u8, opmod: u8) -> Result<Masked<'a>, &'static str> {
    if opmod & !ext_atomic::OPMOD_LOG_SIZE != ext_atomic::OPMOD_EXT {
        return Err("masked atomic without the extended-atomic opmod");
    }
    let log = opmod & ext_atomic::OPMOD_LOG_SIZE;
    if log > 3 {
        // 64 bytes and up, and the indirect form (7): no ConnectX-5 offers them.
        return Err("masked atomic argument size not offered");
    }
    let n = 4usize << log;
    let len = if op == opcode::ATOMIC_MASKED_CS {
        ext_atomic::cmp_swap_block(n)
    } else {
        ext_atomic::fetch_add_block(n)
    };
    let start = *at;
    *at += len.next_multiple_of(16);
    let operands = b
        .get(start..start + len)
        .filter(|_| *at <= b.len())
        .ok_or("DS too small for the masked atomic's arguments")?;
    Ok(Masked { n, operands })
}

/// Parses the `DS × 16` bytes of a send WQE of a QP of type `st`. `Err` names what is wrong
/// (the WQE completes with LOCAL_QP_OP_ERR).
pub(crate) fn parse_send(b: &[u8], st: u64) -> Result<SendWqe<'_>, &'static str> {
    let Ok(c) = View::<CtrlSeg>::new(b) else {
        return Err("shorter than a control segment");
    };
    let op = c.get(CtrlSeg::OPCODE) as u8;
    if !valid_for(op, st) {
        return Err("opcode not valid for the QP's service type");
    }
    let mut w = SendWqe::of_ctrl(&c);
    let mut at = CtrlSeg::BYTES;
    if st == qp_st::XRC && op != opcode::NOP {
        let x = seg::<XrcSeg>(b, &mut at)?;
        w.xrc_srqn = Some(x.get32(XrcSeg::XRC_SRQN));
    }
    if matches!(st, qp_st::UD | qp_st::DCI) && op != opcode::NOP {
        let d = seg::<DatagramSeg>(b, &mut at)?;
        // A DC destination on RoCE needs the MAC and GID only the extended (48-byte) address
        // vector holds.
        if st == qp_st::DCI && d.get(DatagramSeg::EXT) == 0 {
            return Err("a DCI's address vector is not the extended one");
        }
        let mut rmac = [0u8; 6];
        rmac.copy_from_slice(d.bytes(DatagramSeg::RMAC));
        let mut rgid = [0u8; 16];
        rgid.copy_from_slice(d.bytes(DatagramSeg::RGID));
        w.av = Some(Av {
            qkey: d.get32(DatagramSeg::QKEY),
            dc_key: d.get(DatagramSeg::DC_KEY),
            dqpn: d.get32(DatagramSeg::DQPN),
            sport: d.get(DatagramSeg::RLID) as u16,
            rmac,
            tclass: d.get(DatagramSeg::TCLASS) as u8,
            hop_limit: d.get(DatagramSeg::HOP_LIMIT) as u8,
            sgid_index: d.get(DatagramSeg::SGID_INDEX) as u8,
            flow_label: d.get32(DatagramSeg::FLOW_LABEL),
            rgid,
        });
    }
    if matches!(
        op,
        opcode::RDMA_WRITE
            | opcode::RDMA_WRITE_IMM
            | opcode::RDMA_READ
            | opcode::ATOMIC_CS
            | opcode::ATOMIC_FA
            | opcode::ATOMIC_MASKED_CS
            | opcode::ATOMIC_MASKED_FA
    ) {
        let r = seg::<RaddrSeg>(b, &mut at)?;
        w.raddr = Some((r.get(RaddrSeg::RADDR), r.get32(RaddrSeg::RKEY)));
    }
    if matches!(op, opcode::ATOMIC_CS | opcode::ATOMIC_FA) {
        let a = seg::<AtomicSeg>(b, &mut at)?;
        w.atomic = Some((a.get(AtomicSeg::SWAP_ADD), a.get(AtomicSeg::COMPARE)));
    }
    if matches!(op, opcode::ATOMIC_MASKED_CS | opcode::ATOMIC_MASKED_FA) {
        w.masked = Some(masked(b, &mut at, op, c.get(CtrlSeg::OPMOD) as u8)?);
    }
    if op == opcode::NOP {
        return Ok(w);
    }
    while at + DataSeg::BYTES <= b.len() {
        let Some(rest) = b.get(at..) else { break };
        let (Ok(h), Ok(d)) = (View::<InlineSeg>::new(rest), View::<DataSeg>::new(rest)) else {
            break;
        };
        if h.get(InlineSeg::INLINE) != 0 {
            let len = h.get(InlineSeg::LENGTH) as usize;
            let start = at + InlineSeg::BYTES;
            let end = start + len;
            if end > b.len() {
                return Err("inline data runs past DS");
            }
            w.pieces
                .push(Piece::Inline(&b[start..end]))
                .map_err(|_| "more pieces than a WQE holds")?;
            at = (end + 15) & !15;
        } else {
            if d.get(DataSeg::BYTE_COUNT) != 0 {
                w.pieces
                    .push(Piece::Data(sge(d)))
                    .map_err(|_| "more pieces than a WQE holds")?;
            }
            at += DataSeg::BYTES;
        }
    }
    Ok(w)
}

/// The data segments of a receive WQE (`b` from its first data segment), up to the terminator.
pub(crate) fn recv_sges(b: &[u8]) -> RecvSges {
    let mut out = RecvSges::new();
    for d in b.chunks_exact(DataSeg::BYTES) {
        let Ok(d) = View::<DataSeg>::new(d) else {
            break;
        };
        if d.get(DataSeg::BYTE_COUNT) == 0 {
            if d.get32(DataSeg::LKEY) == INVALID_LKEY {
                break;
            }
            continue;
        }
        out.push(sge(d));
    }
    out
}

/// Takes the next posted receive WQE of `info` (its RQ, or its SRQ / RMP): `(WQE counter or
/// SRQ index, data segments)`; `Ok(None)` when none is posted.
pub(crate) fn take_recv(hw: &mut Hw<'_>, info: &QpInfo) -> Result<Option<(u16, RecvSges)>, ()> {
    if let Some((kind, n)) = info.srq {
        return take_srq(hw, kind, n);
    }
    if info.rq_wqes == 0 {
        return Ok(None);
    }
    let Some(pi) = read_be32(hw.iommu, info.dbr) else {
        dma_fault(
            hw.faults,
            info.dbr,
            4,
            false,
            format!("QP {:#x} doorbell record", info.qpn),
        );
        return Err(());
    };
    let rt = crate::model::qp::qp_rt(&mut hw.model.rt, info);
    let cc = rt.rq_cc;
    if pi as u16 == cc {
        return Ok(None);
    }
    let slot = u64::from(cc) & u64::from(info.rq_wqes - 1);
    let mut buf = crate::fabric::pool::take();
    buf.resize(info.rq_stride as usize, 0);
    if let Err(iova) = read_queue(
        hw.iommu,
        &info.pas,
        info.page,
        info.start + slot * info.rq_stride,
        &mut buf,
    ) {
        dma_fault(
            hw.faults,
            iova,
            buf.len(),
            false,
            format!("QP {:#x} receive WQE", info.qpn),
        );
        return Err(());
    }
    rt.rq_cc = cc.wrapping_add(1);
    let sges = recv_sges(&buf);
    crate::fabric::pool::give(buf);
    Ok(Some((cc, sges)))
}

/// SRQ / RMP geometry: `(log size, stride, page, doorbell record, pages, start in the first
/// page)`.
type SrqGeometry = (u32, u64, u64, u64, std::sync::Arc<[u64]>, u64);

fn srq_geometry(hw: &Hw<'_>, kind: ObjectKind, n: u32) -> Option<SrqGeometry> {
    let q = hw.model.objects.queue(kind, n)?;
    if kind == ObjectKind::Srq {
        let c = View::<Srqc>::new(&q.ctx).ok()?;
        let page = 4096 << c.get(Srqc::LOG_PAGE_SIZE).min(20);
        Some((
            c.get(Srqc::LOG_SRQ_SIZE) as u32,
            16 << c.get(Srqc::LOG_RQ_STRIDE),
            page,
            c.get(Srqc::DBR_ADDR),
            q.pas.clone(),
            queue_start(page, c.get(Srqc::PAGE_OFFSET)),
        ))
    } else if kind == ObjectKind::XrcSrq {
        let c = View::<XrcSrqc>::new(&q.ctx).ok()?;
        let page = 4096 << c.get(XrcSrqc::LOG_PAGE_SIZE).min(20);
        let dbr =
            (c.get(XrcSrqc::DB_RECORD_ADDR_H) << 32) | (c.get(XrcSrqc::DB_RECORD_ADDR_L) << 2);
        Some((
            c.get(XrcSrqc::LOG_XRC_SRQ_SIZE) as u32,
            16 << c.get(XrcSrqc::LOG_RQ_STRIDE),
            page,
            dbr,
            q.pas.clone(),
            queue_start(page, c.get(XrcSrqc::PAGE_OFFSET)),
        ))
    } else {
        let c = View::<Rmpc>::new(&q.ctx).ok()?;
        let w = c.nested(Rmpc::WQ);
        let page = 4096 << w.get(Wq::LOG_WQ_PG_SZ).min(20);
        Some((
            w.get(Wq::LOG_WQ_SZ).min(24) as u32,
            1 << w.get(Wq::LOG_WQ_STRIDE).min(16),
            page,
            w.get(Wq::DBR_ADDR),
            q.pas.clone(),
            queue_start(page, w.get(Wq::PAGE_OFFSET)),
        ))
    }
}

fn take_srq(hw: &mut Hw<'_>, kind: ObjectKind, n: u32) -> Result<Option<(u16, RecvSges)>, ()> {
    let Some((log_size, stride, page, dbr, pas, start)) = srq_geometry(hw, kind, n) else {
        return Ok(None);
    };
    let Some(posted) = read_be32(hw.iommu, dbr) else {
        dma_fault(
            hw.faults,
            dbr,
            4,
            false,
            format!("SRQ {n:#x} doorbell record"),
        );
        return Err(());
    };
    let (head, consumed) = hw.model.rt.srqs.get(&n).copied().unwrap_or((0, 0));
    if posted as u16 == consumed {
        return Ok(None);
    }
    let index = head & ((1u32 << log_size) - 1) as u16;
    let mut buf = crate::fabric::pool::take();
    buf.resize(stride as usize, 0);
    if let Err(iova) = read_queue(
        hw.iommu,
        &pas,
        page,
        start + u64::from(index) * stride,
        &mut buf,
    ) {
        dma_fault(
            hw.faults,
            iova,
            buf.len(),
            false,
            format!("SRQ {n:#x} WQE {index}"),
        );
        return Err(());
    }
    let next =
        View::<SrqNextSeg>::new(&buf).map_or(0, |v| v.get(SrqNextSeg::NEXT_WQE_INDEX) as u16);
    let consumed = consumed.wrapping_add(1);
    hw.model.rt.srqs.insert(n, (next, consumed));
    // The limit event: fewer than `lwm` WQEs left raises SRQ_RQ_LIMIT once and disarms.
    let left = u32::from((posted as u16).wrapping_sub(consumed));
    if let Some((lwm, _)) = crate::model::srq::limit(hw.model, kind, n) {
        if lwm != 0 && left < lwm {
            let _ = crate::model::srq::set_limit(hw.model, kind, n, 0);
            crate::events::eqe::srq_event(hw, mlx5_ifc::event::SRQ_RQ_LIMIT, n);
        }
    }
    let sges = recv_sges(buf.get(SrqNextSeg::BYTES..).unwrap_or(&[]));
    crate::fabric::pool::give(buf);
    Ok(Some((index, sges)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_segments() {
        let mut b = vec![0u8; 64];
        b[3] = opcode::RDMA_WRITE;
        b[4..8].copy_from_slice(&((0x123u32 << 8) | 4).to_be_bytes());
        b[11] = CE_ALWAYS;
        b[16..24].copy_from_slice(&0x1000u64.to_be_bytes());
        b[24..28].copy_from_slice(&0x55u32.to_be_bytes());
        b[32..36].copy_from_slice(&(0x8000_0000u32 | 5).to_be_bytes());
        b[36..41].copy_from_slice(b"hello");
        b[48..52].copy_from_slice(&8u32.to_be_bytes());
        b[52..56].copy_from_slice(&0x77u32.to_be_bytes());
        b[56..64].copy_from_slice(&0x2000u64.to_be_bytes());
        let w = parse_send(&b, qp_st::RC).unwrap();
        assert_eq!(w.qpn, 0x123);
        assert_eq!(w.raddr, Some((0x1000, 0x55)));
        assert_eq!(
            &w.pieces[..],
            &[
                Piece::Inline(b"hello"),
                Piece::Data(Sge {
                    len: 8,
                    lkey: 0x77,
                    addr: 0x2000
                })
            ]
        );
        assert!(parse_send(&b, qp_st::UD).is_err());
        assert!(parse_send(&b[..16], qp_st::RC).is_err());
    }

    #[test]
    fn a_control_segment_alone_is_a_send_of_no_bytes() {
        let mut b = vec![0u8; 16];
        b[3] = opcode::SEND;
        b[4..8].copy_from_slice(&((0x123u32 << 8) | 1).to_be_bytes());
        {
            let w = parse_send(&b, qp_st::RC).unwrap();
            assert_eq!((w.opcode, w.qpn), (opcode::SEND, 0x123));
            assert!(w.pieces.is_empty());
        }
        b[3] = opcode::SEND_INVAL;
        b[12..16].copy_from_slice(&0x4242u32.to_be_bytes());
        let w = parse_send(&b, qp_st::RC).unwrap();
        assert_eq!((w.imm, w.pieces.len()), (0x4242u32.to_be_bytes(), 0));
        assert!(
            parse_send(&b, qp_st::UC).is_err(),
            "UC has no SEND with invalidate"
        );
    }

    #[test]
    fn receive_lists_end_at_the_terminator() {
        let mut b = vec![0u8; 64];
        b[0..4].copy_from_slice(&4u32.to_be_bytes());
        b[16..20].copy_from_slice(&0u32.to_be_bytes());
        b[20..24].copy_from_slice(&7u32.to_be_bytes());
        b[36..40].copy_from_slice(&INVALID_LKEY.to_be_bytes());
        b[48..52].copy_from_slice(&9u32.to_be_bytes());
        let s = recv_sges(&b);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].len, 4);
    }
}
