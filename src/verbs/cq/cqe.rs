//! Reading CQEs (PRM "Completion Queue Entry", mlx5-datapath-sizing.md §4): the loop behind
//! [`Cq::poll`](crate::verbs::cq::Cq::poll), its short path for runs of one send queue's successful
//! completions, and the general decode that checks every field the device wrote.
//!
//! The general decode ([`decode`]) turns any CQE into a work completion or a typed error: the
//! QPN must be a queue attached to the CQ, the WQE counter must name an outstanding WQE (or a
//! posted SRQ WQE), the opcode must be one a CQE can have and the length must fit what was
//! posted. The short path ([`SqRun::retire_many`]) takes only what it can prove the same way —
//! a successful requester CQE of the queue being retired whose WQE counter names an
//! outstanding WQE — and leaves anything else to the general decode without consuming it.

use crate::error::{Error, Result};
use crate::fw::queue::ceil_log2;
use crate::io::{barrier, DmaBuf, DmaRing, PairRing, SharedTable};
use crate::verbs::cq::state::{Attached, CqShared, RecvTable};
use crate::verbs::cq::wc::{Wc, WcFlags, WcOpcode, WcStatus};
use crate::verbs::cq::zip::Session;
use mlx5_ifc::cqe::Cqe64;

use crate::verbs::wr_table::{rq_table, sq_table, srq_complete, SQ_COMPLETION};

/// Bytes of a CQE.
pub(crate) const CQE_BYTES: usize = mlx5_ifc::cqe::CQE_BYTES;
/// Offset of `op_own` (opcode << 4 | … | owner) in a CQE.
pub(crate) const CQE_OP_OWN: usize = mlx5_ifc::cqe::Cqe64::OP_OWN.info.byte_offset();
/// `op_own` of a CQE the device has not written: opcode INVALID (0xf), owner 0.
pub(crate) const CQE_INVALID: u8 = mlx5_ifc::cqe::INVALID_OP_OWN;

/// What a successful completion of a descriptor's WQE reports: opcode, flags, and whether its
/// byte count is the bytes posted ([`SQ_COMPLETION`] of the WQE's opcode in the descriptor,
/// [`sq_desc`](crate::verbs::wr_table::sq_desc)).
#[inline(always)]
fn desc_completion(d: u64) -> (WcOpcode, WcFlags, bool) {
    SQ_COMPLETION[usize::from((d >> 8) as u8)]
}

fn bad(what: &'static str, value: u64, limit: u64) -> Error {
    Error::BadDeviceValue { what, value, limit }
}

/// First CQE byte polling reads (`flags_rqpn`; the bytes before it are not used).
const CQE_LO: usize = Cqe64::FLAGS_RQPN.info.byte_offset();
/// `rss_hash_result` in a CQE (then `rss_hash_type`): read for Ethernet receives only.
const CQE_RSS: usize = Cqe64::RSS_HASH_RESULT.info.byte_offset();
/// `byte_cnt` in a CQE.
const CQE_BYTE_CNT: usize = Cqe64::BYTE_CNT.info.byte_offset();
/// The CQE's last 8-byte word (`sop_drop_qpn`, `wqe_counter`, `signature`, `op_own`).
const CQE_HI: usize = Cqe64::SOP_DROP_QPN.info.byte_offset();

// `op_own` is the last byte of the `CQE_HI` word: its low byte once read big-endian.
const _: () = assert!(CQE_OP_OWN == CQE_HI + 7);

/// The CQE bytes polling uses: `CQE_LO..CQE_HI` and `CQE_HI..64`.
struct Cqe {
    /// `rss_hash_result` and `rss_hash_type` (bytes 12..20), read only on the CQ of an
    /// Ethernet RQ; zeros otherwise.
    rss: [u8; 8],
    lo: [u8; CQE_HI - CQE_LO],
    hi: [u8; CQE_BYTES - CQE_HI],
}

impl Cqe {
    /// The byte at CQE offset `at` (`CQE_LO..64`; 0 outside).
    #[inline]
    fn u8(&self, at: usize) -> u8 {
        if let Some(i) = at.checked_sub(CQE_HI) {
            self.hi.get(i).copied().unwrap_or(0)
        } else if let Some(i) = at.checked_sub(CQE_LO) {
            self.lo.get(i).copied().unwrap_or(0)
        } else {
            let i = at.wrapping_sub(CQE_RSS);
            self.rss.get(i).copied().unwrap_or(0)
        }
    }

    /// The big-endian word at CQE offset `at` (4-aligned, inside one half).
    #[inline]
    fn be32(&self, at: usize) -> u32 {
        u32::from_be_bytes([
            self.u8(at),
            self.u8(at + 1),
            self.u8(at + 2),
            self.u8(at + 3),
        ])
    }
}

/// CQEs ahead of the one being decoded whose line is prefetched (16 measured faster than 8
/// and 32 on the null-device bench).
const PREFETCH_CQES: usize = 16;
/// Work-request table words (one line holds four WQEBBs' pairs) prefetched ahead of the next
/// expected WQEBB.
const PREFETCH_BBS: u64 = 16;

/// Reads the CQEs from consumer index `*ci` on (a ring of `size` slots) into `wc`, advancing
/// `*ci` past each one consumed; returns how many were filled and the error that stopped it,
/// if any (the CQE that made no sense is consumed).
///
/// Requester successes of the send queue being retired take a short path
/// ([`SqRun::retire_many`]); everything else, and anything that short path doubts, goes
/// through [`decode`], which makes every check and builds the error.
#[inline(always)]
pub(crate) fn poll_ring(
    buf: &DmaBuf,
    size: u32,
    s: &CqShared,
    ci: &mut u32,
    hint: &mut usize,
    session: &mut Option<Session>,
    wc: &mut [Wc],
) -> (usize, Option<Error>) {
    let mask = size.wrapping_sub(1);
    let log = ceil_log2(u64::from(size));
    let mut c = *ci;
    let mut n = 0;
    let mut err = None;
    // The send-queue run being retired (its TAIL is stored once per run, not per CQE).
    let mut run = SqRun::NONE;
    // The ring seen with masked indices, for the short path (the general path checks each
    // access itself).
    let ring = buf.ring::<CQE_BYTES>(size as usize);
    let eth_q = super::eth_rx::queue(s);
    let slot_at = |c: u32| (c & mask) as usize * CQE_BYTES;
    loop {
        if let (Some(ring), Some(wr)) = (ring, run.wr) {
            n += run.retire_many(&ring, wr, log, &mut c, wc.get_mut(n..).unwrap_or_default());
        }
        let Some(slot) = wc.get_mut(n) else {
            break;
        };
        // A compressed session open: its next completion, the way of any Ethernet receive.
        if let (Some(z), Some(sess)) = (s.compression, session.as_mut()) {
            let striding = eth_q.is_some_and(|q| matches!(q.rq, Some(RecvTable::Striding { .. })));
            let got = match sess.next(buf, slot_at, z, striding) {
                Some(Ok(img)) => {
                    let hi = u64::from_be_bytes(img[CQE_HI..].try_into().unwrap_or_default());
                    eth_q
                        .and_then(|q| super::eth_rx::complete(&img, hi, q))
                        .ok_or_else(|| {
                            bad(
                                "a compressed completion the Ethernet RQ cannot take",
                                u64::from(c),
                                0,
                            )
                        })
                }
                Some(Err(e)) => Err(e),
                None => Err(bad("compressed session past its end", u64::from(c), 0)),
            };
            c = c.wrapping_add(1);
            if sess.finished() {
                *session = None;
            }
            match got {
                Ok(w) => {
                    *slot = w;
                    n += 1;
                    continue;
                }
                Err(e) => {
                    *session = None;
                    err = Some(e);
                    break;
                }
            }
        }
        let at = (c & mask) as usize * CQE_BYTES;
        // The last 8 bytes (QPN, WQE counter, op_own) with acquire: the rest after.
        let hi = match buf.read_u64_acquire(at + CQE_HI) {
            Ok(h) => u64::from_be_bytes(h),
            Err(e) => {
                err = Some(e.into());
                break;
            }
        };
        let op_own = hi as u8;
        if op_own >> 4 == 0xf || u32::from(op_own & 1) != (c >> log) & 1 {
            break;
        }
        barrier::dma_rmb();
        if Session::titles(op_own) {
            // Sessions only on a CQ made to compress, of an Ethernet RQ's receives.
            let opened = match (s.compression, eth_q) {
                (Some(z), Some(_)) => Session::open(buf, slot_at, c, size, z),
                _ => Err(bad(
                    "compressed CQE (format 3) on a CQ not made to compress",
                    u64::from(op_own),
                    0,
                )),
            };
            match opened {
                Ok(sess) => {
                    *session = Some(sess);
                    continue;
                }
                Err(e) => {
                    c = c.wrapping_add(1);
                    err = Some(e);
                    break;
                }
            }
        }
        // A successful send completion of another queue: start that queue's run and let the
        // short path take it from the top of the loop (should it refuse the CQE, the run is
        // the CQE's by then and the general path below decides).
        let qpn = (hi >> 32) as u32 & 0xff_ffff;
        if op_own >> 4 == 0 && qpn != run.qpn && ring.is_some() {
            if let Some((t, bbs)) = find(s, qpn, hint).and_then(|q| q.sq.as_ref()) {
                run.start(qpn, t, *bbs);
                continue;
            }
        }
        // An Ethernet RQ's receive: its own short path.
        let src = super::eth_rx::InRing { buf, at };
        if let Some(w) = eth_q.and_then(|q| super::eth_rx::complete(&src, hi, q)) {
            c = c.wrapping_add(1);
            *slot = w;
            n += 1;
            continue;
        }
        c = c.wrapping_add(1);
        // (Words are read 8-aligned: bytes 8..24, of which 12..20 are kept.)
        let rss = if s.flow_tag_rq.is_some() {
            buf.read_words::<16>(at + CQE_RSS - 4).map(|w| {
                let mut r = [0u8; 8];
                r.copy_from_slice(&w[4..12]);
                r
            })
        } else {
            Ok([0; 8])
        };
        let cqe = match rss.and_then(|rss| {
            buf.read_words::<{ CQE_HI - CQE_LO }>(at + CQE_LO)
                .map(|lo| (rss, lo))
        }) {
            Ok((rss, lo)) => Cqe {
                rss,
                lo,
                hi: hi.to_be_bytes(),
            },
            Err(e) => {
                err = Some(e.into());
                break;
            }
        };
        match decode(s, &cqe, hint, &mut run) {
            Ok(w) => {
                *slot = w;
                n += 1;
            }
            Err(e) => {
                err = Some(e);
                break;
            }
        }
    }
    // Retire the last run before anyone can look at the table again.
    run.flush();
    *ci = c;
    (n, err)
}

/// The send queue whose completions are being retired in this poll call: its table, TAIL as
/// retired so far and the HEAD last loaded. TAIL is stored when the run ends (another queue,
/// the end of the call or an error), so a poster sees every completion once `poll` returns;
/// until then it only sees less room, never more.
struct SqRun<'s> {
    /// The queue's table; `None` for no run.
    t: Option<&'s SharedTable>,
    /// Its wr_id/descriptor pairs; `None` for no run (or a table too small for its queue).
    wr: Option<PairRing<'s>>,
    /// Its QP number; `u32::MAX` (no 24-bit QPN) for no run.
    qpn: u32,
    /// WQEBBs − 1.
    mask: usize,
    tail: u64,
    head: u64,
    /// Whether `tail` moved since it was loaded.
    dirty: bool,
}

impl<'s> SqRun<'s> {
    const NONE: Self = Self {
        t: None,
        wr: None,
        qpn: u32::MAX,
        mask: 0,
        tail: 0,
        head: 0,
        dirty: false,
    };

    /// Starts the run of QP `qpn`'s send queue (`bbs` WQEBBs).
    #[inline(always)]
    fn start(&mut self, qpn: u32, t: &'s SharedTable, bbs: u32) {
        self.flush();
        *self = SqRun {
            t: Some(t),
            wr: t.pairs(sq_table::WRID, bbs as usize),
            qpn,
            mask: bbs.wrapping_sub(1) as usize,
            tail: t.load(sq_table::TAIL),
            head: t.load(sq_table::HEAD),
            dirty: false,
        };
    }

    /// Stores the run's TAIL (if it moved) and ends it.
    #[inline(always)]
    fn flush(&mut self) {
        if self.dirty {
            if let Some(t) = self.t {
                t.store(sq_table::TAIL, self.tail);
            }
        }
        *self = Self::NONE;
    }

    /// The short path: successful requester CQEs of this run's QP, from consumer index `*ci`
    /// into `wc`, in a loop that keeps the run in registers. Each CQE must be ready (owner bit),
    /// have opcode REQ and this QPN, and its WQE counter must name a WQE outstanding as of the
    /// HEAD already loaded whose table words exist. It stops at the first CQE that is anything
    /// else — not ready, another queue, an error, a post made since HEAD was loaded — without
    /// consuming it: the general path ([`decode`]) then decides. Returns how many it filled.
    #[inline(never)]
    fn retire_many(
        &mut self,
        ring: &DmaRing<'_, CQE_BYTES>,
        wr: PairRing<'_>,
        log: u8,
        ci: &mut u32,
        wc: &mut [Wc],
    ) -> usize {
        let qp_num = self.qpn;
        let qpn = u64::from(qp_num);
        let (mut tail, head) = (self.tail, self.head);
        let mut c = *ci;
        let mut k = 0;
        // Stretches of the ring that do not wrap: along one, the owner bit is the same.
        while k < wc.len() {
            let seg = ring.segment(c as usize, wc.len() - k);
            let Some(out) = wc.get_mut(k..k + seg.len()) else {
                break;
            };
            let want = qpn << 32 | u64::from((c >> log) & 1);
            let mut j = 0;
            for (i, slot) in (0..seg.len()).zip(out.iter_mut()) {
                let Some(hi) = seg.load_u64_acquire::<CQE_HI>(i) else {
                    break;
                };
                seg.prefetch_ahead::<PREFETCH_CQES>(i);
                let hi = u64::from_be_bytes(hi);
                // One compare: the QPN, opcode REQ (0) and the owner bit of this pass (the
                // solicited and format bits are not looked at).
                if hi & 0x00ff_ffff_0000_00f1 != want {
                    break;
                }
                // The running position of the WQE completed: at or after TAIL, before HEAD.
                let wqe_counter = (hi >> 16) as u16;
                let at = tail.wrapping_add(u64::from(wqe_counter.wrapping_sub(tail as u16)));
                if at >= head {
                    break;
                }
                // Written before HEAD (release), which was loaded with acquire.
                let (wr_id, desc) = wr.load_relaxed(usize::from(wqe_counter));
                let (opcode, wc_flags, sent) = desc_completion(desc);
                let posted = (desc >> 32) as u32;
                // SEND and WRITE: the bytes posted; READ and atomics: what the device says,
                // no more than the scatter list holds (or the general path refuses it).
                let byte_len = if sent {
                    posted
                } else {
                    match seg.load_be32::<CQE_BYTE_CNT>(i) {
                        Some(b) if b.get() <= posted => b.get(),
                        _ => break,
                    }
                };
                *slot = Wc {
                    wr_id,
                    byte_len,
                    qp_num,
                    opcode,
                    status: WcStatus::Success,
                    grh: false,
                    vendor_err: 0,
                    wc_flags,
                    src_qp: 0,
                    offset: 0,
                    imm_data: None,
                    invalidated_rkey: None,
                    vlan_tci: None,
                    rss_hash: None,
                };
                tail = at + (desc & 0xff).max(1);
                j += 1;
            }
            c = c.wrapping_add(j as u32);
            k += j;
            if j < seg.len() || seg.is_empty() {
                break;
            }
        }
        if k > 0 {
            // Past HEAD only if a descriptor's WQEBB count was corrupt: never publish that.
            self.tail = tail.min(head);
            self.dirty = true;
            *ci = c;
        }
        k
    }
}

/// The queue of QP `qpn` on this CQ; `hint` (a slot of the CQ's queue map, checked) is tried
/// first and updated.
#[inline(always)]
fn find<'s>(s: &'s CqShared, qpn: u32, hint: &mut usize) -> Option<&'s Attached> {
    s.queues.find(qpn, hint)
}

/// A receive completion's length against its receive buffer: a SEND (opcodes 0x2..0x4) must
/// fit in the scatter list (`cap` bytes, the GRH of a UD receive included); an RDMA WRITE with
/// immediate (0x1) wrote remote memory, not the buffer. Error CQEs carry no length.
/// Takes the receive at TAIL of an RQ table of `cnt` WQEs (QP or RQ `qpn`): its wr_id and
/// the bytes its buffer holds.
fn take_tail(table: &SharedTable, cnt: u32, qpn: u32) -> Result<(u64, u64)> {
    let tail = table.load(rq_table::TAIL);
    if tail >= table.load(rq_table::HEAD) {
        return Err(bad(
            "responder CQE with no receive posted",
            u64::from(qpn),
            0,
        ));
    }
    let slot = (tail as u32 & (cnt - 1)) as usize;
    // Written before HEAD (release), which was loaded with acquire above.
    let got = table
        .load_pair_relaxed(rq_table::wrid(slot))
        .ok_or_else(|| bad("receive table slot", slot as u64, u64::from(cnt)))?;
    table.store(rq_table::TAIL, tail.wrapping_add(1));
    Ok(got)
}

fn recv_fits(opcode: u8, byte_cnt: u32, cap: u64) -> Result<()> {
    if (0x2..=0x4).contains(&opcode) && u64::from(byte_cnt) > cap {
        return Err(bad(
            "CQE byte_cnt (more than the receive buffer holds)",
            u64::from(byte_cnt),
            cap,
        ));
    }
    Ok(())
}

/// Turns one CQE into a work completion, retiring the work requests it completes. `hint` is
/// the index in the CQ's queue list of the last queue found; updated. `run` is the send queue
/// being retired ([`SqRun`]); updated.
#[inline(never)]
fn decode<'s>(s: &'s CqShared, c: &Cqe, hint: &mut usize, run: &mut SqRun<'s>) -> Result<Wc> {
    let opcode = c.u8(63) >> 4;
    let qpn = c.be32(56) & 0xff_ffff;
    let wqe_counter = u16::from_be_bytes([c.u8(60), c.u8(61)]);
    let byte_cnt = c.be32(44);
    let imm = c.be32(36);
    // A receive CQE on the CQ of an Ethernet RQ names the flow tag, not the queue.
    let flow_tag_rq = if opcode == 0x0 || opcode == 0xd {
        None
    } else {
        super::eth_rx::queue(s)
    };
    let q = match flow_tag_rq {
        Some(q) => q,
        None => find(s, qpn, hint)
            .ok_or_else(|| bad("CQE QPN (no such queue on this CQ)", u64::from(qpn), 0))?,
    };
    // Completions name the queue (for an Ethernet RQ, the RQ rather than the flow tag).
    let qpn = q.qpn;
    let (status, vendor_err) = match opcode {
        0xd | 0xe => (WcStatus::from_syndrome(c.u8(55)), c.u8(54)),
        0x0..=0x4 => (WcStatus::Success, 0),
        other => return Err(bad("CQE opcode", u64::from(other), 0x4)),
    };
    let mut wc = Wc {
        wr_id: 0,
        status,
        opcode: WcOpcode::Recv,
        byte_len: byte_cnt,
        imm_data: None,
        invalidated_rkey: None,
        vlan_tci: None,
        rss_hash: None,
        wc_flags: WcFlags::empty(),
        qp_num: qpn,
        src_qp: c.be32(24) & 0xff_ffff,
        offset: 0,
        grh: (c.u8(24) >> 4) & 3 != 0,
        vendor_err,
    };
    let requester = opcode == 0x0 || opcode == 0xd;
    if requester {
        let (t, bbs) = q.sq.as_ref().ok_or_else(|| {
            bad(
                "requester CQE for a QP whose send CQ is another",
                u64::from(qpn),
                0,
            )
        })?;
        if run.qpn != qpn {
            run.start(qpn, t, *bbs);
        }
        let tail = run.tail;
        let delta = u64::from(wqe_counter.wrapping_sub(tail as u16));
        if delta >= run.head.wrapping_sub(tail) {
            // Posted since HEAD was loaded? Load it again before calling the CQE bad.
            run.head = t.load(sq_table::HEAD);
            if delta >= run.head.wrapping_sub(tail) {
                return Err(bad(
                    "CQE wqe_counter (not an outstanding send WQE)",
                    u64::from(wqe_counter),
                    run.head & 0xffff,
                ));
            }
        }
        let idx = usize::from(wqe_counter) & run.mask;
        // Written before HEAD (release), which was loaded with acquire above.
        let (wr_id, desc) = t.load_pair_relaxed(sq_table::wrid(idx)).ok_or_else(|| {
            bad(
                "CQE wqe_counter (outside the work-request table)",
                u64::from(wqe_counter),
                u64::from(*bbs),
            )
        })?;
        wc.wr_id = wr_id;
        let (wc_op, wc_flags, sent) = desc_completion(desc);
        wc.opcode = wc_op;
        if opcode == 0x0 {
            wc.wc_flags = wc_flags;
        }
        let posted = (desc >> 32) as u32;
        // Fields a requester CQE does not carry.
        wc.src_qp = 0;
        wc.grh = false;
        // Never past HEAD (the descriptor is the driver's own, in host memory: this only keeps
        // a driver bug from publishing more room than there is).
        run.tail = tail
            .wrapping_add(delta + (desc & 0xff).max(1))
            .min(run.head);
        run.dirty = true;
        // The table line of the WQEBBs a few completions on.
        t.prefetch(sq_table::wrid(
            (run.tail.wrapping_add(PREFETCH_BBS) as usize) & run.mask,
        ));
        if sent {
            wc.byte_len = posted;
        } else if opcode == 0x0 && byte_cnt > posted {
            // A READ or an atomic cannot bring more than its scatter list holds (the WQEs
            // are retired above: the device is done with them).
            return Err(bad(
                "CQE byte_cnt (more than the READ/atomic's scatter list holds)",
                u64::from(byte_cnt),
                u64::from(posted),
            ));
        }
        return Ok(wc);
    }
    // rdma-core's `handle_responder` (cq.c): RESP_WR_IMM and RESP_SEND_IMM carry the immediate,
    // RESP_SEND_INV the invalidated rkey, in `imm_inval_pkey`; GRH from `flags_rqpn`.
    wc.opcode = if opcode == 0x1 {
        WcOpcode::RecvRdmaWithImm
    } else {
        WcOpcode::Recv
    };
    match opcode {
        0x1 | 0x3 => {
            wc.imm_data = Some(imm);
            wc.wc_flags = WcFlags::WITH_IMM;
        }
        0x4 => {
            wc.invalidated_rkey = Some(imm);
            wc.wc_flags = WcFlags::WITH_INV;
        }
        _ => {}
    }
    if wc.grh && status == WcStatus::Success {
        wc.wc_flags = wc.wc_flags.union(WcFlags::GRH);
    }
    if q.flow_tag_rq {
        // An Ethernet frame carries no GRH and no source QP (the bytes there are the packet's
        // own); its checksum verdict, VLAN tag and RSS hash as the short path reads them.
        wc.grh = false;
        wc.src_qp = 0;
        wc.wc_flags = WcFlags::empty();
        if status == WcStatus::Success {
            let rss = core::array::from_fn(|k| c.u8(CQE_RSS + k));
            let b28 = core::array::from_fn(|k| c.u8(28 + k));
            (wc.wc_flags, wc.vlan_tci, wc.rss_hash) = super::eth_rx::offloads(rss, b28);
        }
    }
    match q.rq.as_ref().ok_or_else(|| {
        bad(
            "responder CQE for a QP whose receive CQ is another",
            u64::from(qpn),
            0,
        )
    })? {
        RecvTable::Rq { table, cnt } => {
            let (wr_id, cap) = take_tail(table, *cnt, qpn)?;
            wc.wr_id = wr_id;
            recv_fits(opcode, byte_cnt, cap)?;
        }
        // A striding RQ's successful receives are the short path's ([`super::eth_rx`]); one it
        // left here does not add up. An error (a flush) gives the WQE at TAIL back whole.
        RecvTable::Striding { table, cnt, .. } => {
            if status == WcStatus::Success {
                return Err(bad(
                    "striding RQ CQE (not the next WQE's next strides, or past the WQE)",
                    u64::from(byte_cnt),
                    u64::from(wqe_counter),
                ));
            }
            table.store(rq_table::used(*cnt as usize), 0);
            wc.wr_id = take_tail(table, *cnt, qpn)?.0;
        }
        RecvTable::Srq { table, cnt, .. } => {
            let idx = u32::from(wqe_counter);
            if idx >= *cnt {
                return Err(bad("CQE SRQ WQE index", u64::from(idx), u64::from(cnt - 1)));
            }
            let (wr_id, cap) = srq_complete(table, *cnt, idx).ok_or_else(|| {
                bad(
                    "CQE SRQ WQE index (not a posted receive)",
                    u64::from(idx),
                    u64::from(cnt - 1),
                )
            })?;
            wc.wr_id = wr_id;
            recv_fits(opcode, byte_cnt, cap)?;
        }
    }
    Ok(wc)
}

// The offsets polling reads at are the layout's (checked against `mlx5dv.h` in mlx5-ifc).
const _: () = assert!(CQE_RSS == 12 && CQE_LO == 24 && CQE_BYTE_CNT == 44 && CQE_HI == 56);
