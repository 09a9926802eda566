//! Writing work requests into a QP's rings: where the queues lie (checked once at create), the
//! send WQE's segments (in registers for the common shape, else through a [`WqeSink`]), the
//! receive WQE, and the word a measured request is packed into.

use super::sizing::QpLayout;
use super::state::QpState;
use super::wr::{Payload, RecvWr, SendOp, SendWr, Sge};
use crate::error::{Error, Result};
use crate::fw::queue::QueueBuf;
use crate::io::{DmaBuf, DmaRing, OutOfBounds, PairGeometry, PairRing, RingGeometry, SharedTable};
use crate::verbs::wqe::{
    self, flags, BfStage, StagedWqe, WqeBuilder, WqeSink, DS, INVALID_LKEY, MAX_DS, WQEBB,
};
use crate::verbs::wr_table::{rq_table, sq_desc, sq_table};

/// A post refused before anything was written (out of line: the post paths keep only their
/// common case in registers).
#[cold]
#[inline(never)]
pub(crate) fn refuse(
    op: &'static str,
    field: &'static str,
    requested: u64,
    max: u64,
    limit: &'static str,
) -> Error {
    Error::InvalidArgument {
        op,
        field,
        requested,
        max,
        limit,
    }
}

/// The memory of a QP's work queues.
#[derive(Debug)]
pub(crate) struct QpRing {
    /// RQ at offset 0, SQ after it.
    pub(crate) buf: QueueBuf,
    /// Doorbell record: word 0 RQ counter, word 1 SQ counter.
    pub(crate) dbr: DmaBuf,
    /// Send work-request table, shared with the send CQ.
    pub(crate) sq: SharedTable,
    /// Receive work-request table (own RQ), shared with the receive CQ.
    pub(crate) rq: Option<SharedTable>,
    /// Where the queues lie in `buf`, `sq` and `rq` (checked once, here).
    pub(crate) geo: QpGeometry,
}

/// A measured request in one number (two registers), its opcode decoded once for the check
/// and the write: DS (bits 0..8, ≤ 63), WQEBBs (8..16, ≤ 16), control-segment opcode (16..24),
/// bytes (32..64) and the control segment's `imm` word (64..96: immediate or rkey to
/// invalidate).
#[inline(always)]
pub(super) fn pack((ds, nbb, bytes): (u8, u32, u32), op: u8, imm: u32) -> u128 {
    let lo = u64::from(ds) | u64::from(nbb) << 8 | u64::from(op) << 16 | u64::from(bytes) << 32;
    u128::from(lo) | u128::from(imm) << 64
}

/// WQEBBs of a packed request.
#[inline(always)]
pub(super) fn nbb_of(m: u128) -> u32 {
    (m >> 8) as u8 as u32
}

/// The work-request table descriptor of a packed request ([`sq_desc`]: WQEBBs, control-segment
/// opcode, bytes).
#[inline(always)]
pub(super) fn desc_of(m: u128) -> u64 {
    sq_desc((m >> 8) as u8, (m >> 16) as u8, (m >> 32) as u32)
}

/// What every WQE of a QP's send queue takes from the QP.
#[derive(Clone, Copy)]
pub(super) struct WqeHead {
    pub(super) qpn: u32,
    pub(super) sig_all: bool,
    /// A UD QP: its WQEs carry the request's datagram segment.
    pub(super) ud: bool,
}

/// Where the send queue lies in the QP's ring buffer (computed once per `post_send`).
#[derive(Clone, Copy)]
pub(super) struct SqPlace<'t> {
    /// The send queue's WQEBBs (after the RQ in the ring buffer; checked once).
    pub(super) ring: DmaRing<'t, WQEBB>,
    /// WQEBBs − 1.
    pub(super) mask: usize,
    /// The work-request table's wr_id/descriptor pairs, one per WQEBB (checked once).
    pub(super) pairs: PairRing<'t>,
}

/// Where a QP's queues and work-request tables lie in its ring buffer and tables, checked once
/// when the QP is created; a post then checks only that the buffer and table are long enough.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QpGeometry {
    /// The send queue's WQEBBs (after the RQ) and its wr_id/descriptor pairs.
    pub(super) sq: Option<(RingGeometry<WQEBB>, PairGeometry)>,
    /// The receive queue's 16-byte segments and its wr_id/capacity pairs.
    pub(super) rq: Option<(RingGeometry<DS>, PairGeometry)>,
}

impl QpGeometry {
    /// The geometry of `layout` in `buf` and the tables `sq` and `rq`; a queue the layout does
    /// not have (or that would not fit, which sizing rules out) has none, and a post to it is
    /// refused as an internal error.
    pub(crate) fn new(
        buf: &DmaBuf,
        sq: &SharedTable,
        rq: Option<&SharedTable>,
        layout: &QpLayout,
    ) -> Self {
        let bbs = layout.sq_wqebb_cnt as usize;
        let segs = layout.rq_wqe_cnt as usize * (layout.rq_stride_bytes as usize / DS);
        Self {
            sq: buf
                .ring_geometry::<WQEBB>(layout.rq_bytes() as usize, bbs)
                .zip(sq.pair_geometry(sq_table::WRID, bbs)),
            rq: rq.and_then(|t| {
                buf.ring_geometry::<DS>(0, segs)
                    .zip(t.pair_geometry(rq_table::WRID, layout.rq_wqe_cnt as usize))
            }),
        }
    }
}

/// Writes the receive WQE of `wr` into slot `slot` (`per` segments each) of the RQ `segs`, and
/// its wr_id and scatter capacity into the table `pairs`.
#[inline(always)]
pub(super) fn write_recv(
    segs: DmaRing<'_, DS>,
    pairs: PairRing<'_>,
    slot: usize,
    per: usize,
    wr: &RecvWr<'_>,
) {
    let at = slot * per;
    // One SGE (the common case) in a straight line, with nothing else live; any other shape
    // out of line, so that its loop does not crowd the common case's registers.
    match wr.sg_list {
        [s] if s.length > 0 => {
            segs.write_seg(at, wqe::data_words(s.length, s.lkey, s.addr));
            if per > 1 {
                segs.write_seg(at + 1, wqe::data_words(0, INVALID_LKEY, 0));
            }
            pairs.store_relaxed(slot, wr.wr_id, u64::from(s.length));
        }
        sg => write_recv_list(segs, pairs, slot, per, wr.wr_id, sg),
    }
}

/// [`write_recv`] for a scatter list of any other shape (zero-length SGEs are skipped).
#[inline(never)]
fn write_recv_list(
    segs: DmaRing<'_, DS>,
    pairs: PairRing<'_>,
    slot: usize,
    per: usize,
    wr_id: u64,
    sg: &[Sge],
) {
    let at = slot * per;
    let (mut n, mut cap) = (0, 0u64);
    for s in sg {
        cap += u64::from(s.length);
        if s.length > 0 {
            segs.write_seg(at + n, wqe::data_words(s.length, s.lkey, s.addr));
            n += 1;
        }
    }
    if n < per {
        segs.write_seg(at + n, wqe::data_words(0, INVALID_LKEY, 0));
    }
    pairs.store_relaxed(slot, wr_id, cap);
}

/// A queue of `entries` entries whose geometry is missing or does not fit its memory (sizing
/// rules it out): an internal error, nothing posted.
#[cold]
pub(super) fn misplaced(entries: usize) -> Error {
    Error::Internal(OutOfBounds {
        offset: 0,
        len: entries,
        size: 0,
    })
}

/// The state and queue checks every post makes first (`wrs` requests on QP `qpn`, in
/// `state`): the ring buffer and the send queue's WQEBBs.
#[inline(always)]
pub(super) fn send_queue<'r>(
    state: QpState,
    qpn: u32,
    ring: &'r Option<QpRing>,
    layout: &QpLayout,
    wrs: usize,
) -> Result<(&'r QpRing, u32)> {
    if state != QpState::Rts {
        return Err(Error::QpState {
            qpn,
            state,
            op: "post_send",
        });
    }
    let bbs = layout.sq_wqebb_cnt;
    match ring.as_ref().filter(|_| bbs > 0) {
        Some(ring) => Ok((ring, bbs)),
        None => Err(refuse(
            "post_send",
            "max_send_wr",
            wrs as u64,
            0,
            "the QP has no send queue",
        )),
    }
}

/// The send queue of `ring` and its work-request table (their geometry checked at creation;
/// here only that the memory holds them).
#[inline(always)]
pub(super) fn sq_place(ring: &QpRing, bbs: u32) -> Result<SqPlace<'_>> {
    let place = ring.geo.sq.as_ref().and_then(|(g, t)| {
        Some(SqPlace {
            ring: ring.buf.buf().ring_of(g)?,
            mask: bbs as usize - 1,
            pairs: ring.sq.pairs_of(t)?,
        })
    });
    place.ok_or_else(|| misplaced(bbs as usize))
}

/// Writes the WQE of a measured request at `cur_post` and its work-request table words
/// (built in `stage`, the BlueFlame copy's source, if given); returns the first 8 bytes of its
/// control segment (for the doorbell).
#[inline(always)]
pub(super) fn write_wqe(
    sq: SqPlace,
    head: WqeHead,
    cur_post: u64,
    wr: &SendWr<'_>,
    m: u128,
    stage: Option<&mut BfStage>,
) -> Result<u64> {
    let (ds, op) = (m as u8, (m >> 16) as u8);
    let imm = (m >> 64) as u32;
    let idx = cur_post as usize & sq.mask;
    let mut fl = 0;
    if wr.signaled || head.sig_all {
        fl |= flags::CQ_UPDATE;
    }
    if wr.fence {
        fl |= flags::FENCE;
    }
    if wr.solicited {
        fl |= flags::SOLICITED;
    }
    let c = wqe::ctrl_words(op, cur_post as u16, head.qpn, ds, fl, imm);
    // The common shape, one SGE of data and no datagram, takes one WQEBB whose words are at
    // known places: built in registers and stored whole.
    if let (Payload::Sges([sge]), false) = (wr.payload, head.ud) {
        let data = wqe::data_words(sge.length, sge.lkey, sge.addr);
        let segs = match wr.op {
            SendOp::Send | SendOp::SendImm(_) | SendOp::SendInv(_) => Some((data, [0, 0])),
            SendOp::Write { remote_addr, rkey }
            | SendOp::WriteImm {
                remote_addr, rkey, ..
            }
            | SendOp::Read { remote_addr, rkey } => {
                Some((wqe::raddr_words(remote_addr, rkey), data))
            }
            _ => None,
        };
        if let (Some((s1, s2)), true) = (segs, sge.length > 0) {
            let bb = [c[0], c[1], s1[0], s1[1], s2[0], s2[1], 0, 0];
            sq.ring.write_wqebb(idx, &bb);
            sq.pairs.store_relaxed(idx, wr.wr_id, desc_of(m));
            return Ok(c[0]);
        }
    }
    match stage {
        Some(stage) => {
            let mut w = StagedWqe::new(stage, nbb_of(m) as usize);
            // An inline SEND or WRITE (the BlueFlame case) without the general dispatch.
            match (wr.payload, wr.op, head.ud) {
                (
                    Payload::Inline(data),
                    SendOp::Send | SendOp::SendImm(_) | SendOp::SendInv(_),
                    false,
                ) => {
                    w.put(c)?;
                    w.put_inline(data)?;
                }
                (
                    Payload::Inline(data),
                    SendOp::Write { remote_addr, rkey }
                    | SendOp::WriteImm {
                        remote_addr, rkey, ..
                    },
                    false,
                ) => {
                    w.put(c)?;
                    w.put(wqe::raddr_words(remote_addr, rkey))?;
                    w.put_inline(data)?;
                }
                _ => segments(&mut w, head, wr, c)?,
            }
            w.finish(sq.ring, idx, nbb_of(m) as usize)?;
        }
        None => {
            let mut w = WqeBuilder::new(sq.ring, idx);
            segments(&mut w, head, wr, c)?;
            w.finish()?;
        }
    }
    // Ordered before the CQ reads them by the caller's release store of HEAD.
    sq.pairs.store_relaxed(idx, wr.wr_id, desc_of(m));
    Ok(c[0])
}

/// The segments of a send WQE after its control segment `c`, in order, into `w`.
#[inline(always)]
pub(super) fn segments<W: WqeSink>(
    w: &mut W,
    head: WqeHead,
    wr: &SendWr<'_>,
    c: [u64; 2],
) -> Result<()> {
    w.put(c)?;
    // Only a UD QP's WQEs have a datagram segment (`fits` counted it only there).
    if let (true, Some(ud)) = (head.ud, &wr.ud) {
        w.put_bytes(&wqe::datagram(ud))?;
    }
    match wr.op {
        SendOp::Write { remote_addr, rkey }
        | SendOp::WriteImm {
            remote_addr, rkey, ..
        }
        | SendOp::Read { remote_addr, rkey } => {
            w.put(wqe::raddr_words(remote_addr, rkey))?;
        }
        SendOp::CmpSwap {
            remote_addr,
            rkey,
            compare,
            swap,
        } => {
            w.put(wqe::raddr_words(remote_addr, rkey))?;
            w.put(wqe::atomic_words(swap, compare))?;
        }
        SendOp::FetchAdd {
            remote_addr,
            rkey,
            add,
        } => {
            w.put(wqe::raddr_words(remote_addr, rkey))?;
            w.put(wqe::atomic_words(add, 0))?;
        }
        SendOp::Send | SendOp::SendImm(_) | SendOp::SendInv(_) => {}
    }
    match wr.payload {
        Payload::Sges(sg) => {
            for s in sg.iter().filter(|s| s.length > 0) {
                w.put(wqe::data_words(s.length, s.lkey, s.addr))?;
            }
        }
        Payload::Inline(data) => w.put_inline(data)?,
    }
    Ok(())
}

/// The receive queue a post goes to: the QP's ring and receive table, its WQEs and SGEs per WQE;
/// refused for a QP with an SRQ, in RESET, or without a receive queue (`n` requests asked).
#[inline(always)]
pub(super) fn recv_queue<'r>(
    srqn: Option<u32>,
    state: QpState,
    qpn: u32,
    ring: &'r Option<QpRing>,
    layout: &QpLayout,
    n: usize,
) -> Result<(&'r QpRing, &'r SharedTable, u64, usize)> {
    if srqn.is_some() {
        return Err(refuse(
            "post_recv",
            "qp",
            u64::from(qpn),
            0,
            "receives of a QP with an SRQ go to the SRQ",
        ));
    }
    if state == QpState::Reset {
        return Err(Error::QpState {
            qpn,
            state,
            op: "post_recv",
        });
    }
    match ring.as_ref().and_then(|r| Some((r, r.rq.as_ref()?))) {
        Some((r, rq)) => Ok((
            r,
            rq,
            u64::from(layout.rq_wqe_cnt),
            (layout.rq_stride_bytes / 16) as usize,
        )),
        None => Err(refuse(
            "post_recv",
            "max_recv_wr",
            n as u64,
            0,
            "the QP has no receive queue",
        )),
    }
}

/// The receive queue as a ring of 16-byte segments and its table's pairs (checked at creation).
#[inline(always)]
pub(super) fn recv_place<'r>(
    ring: &'r QpRing,
    rq: &'r SharedTable,
) -> Option<(DmaRing<'r, DS>, PairRing<'r>)> {
    let (g, t) = ring.geo.rq.as_ref()?;
    Some((ring.buf.buf().ring_of(g)?, rq.pairs_of(t)?))
}

/// One more than the longest inline payload a WQE of `base` DS units before its inline segment
/// (1: SEND kinds, 2: WRITE kinds) takes on a QP of `cap` and `layout` whose messages are at
/// most `max_msg` bytes; 0 when none does. A payload of `n` bytes fits when `n` is at most the
/// granted `max_inline_data` and `max_msg`, and its WQE's DS units (`base` plus
/// [`wqe::inline_ds`]`(n)`) are at most [`MAX_DS`] and fit the send WQE: the checks
/// `fits_any` makes one by one, folded into one number at create.
pub(super) fn inline_limit(
    base: usize,
    cap: &super::sizing::QpCap,
    layout: &QpLayout,
    max_msg: u64,
) -> u32 {
    let ds_max = MAX_DS.min(layout.sq_wqe_bytes as usize / DS);
    if base > ds_max {
        return 0;
    }
    // `base + ceil((4 + n) / 16) <= ds_max` for n > 0; n = 0 adds no units.
    let room = ((ds_max - base) * DS).saturating_sub(4) as u64;
    let longest = room.min(u64::from(cap.max_inline_data)).min(max_msg);
    longest as u32 + 1
}
