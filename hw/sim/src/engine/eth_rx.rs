//! Ethernet receive: a frame that is not RoCE goes through the receive flow tables
//! ([`super::steering`]) to a TIR and an RQ (CREATE_RQ objects, cyclic work queues), and lands
//! in the buffers of the RQ's next WQE with a completion on the RQ's CQ.
//!
//! * The RQ must be RDY; its producer counter is word 0 of its doorbell record (low 16 bits),
//!   its consumer counter the device's. No posted WQE: the frame is dropped and counted
//!   (`eth_rx_out_of_buffer`, the Q counter's `out_of_buffer`).
//! * A cyclic RQ's WQE is a list of data segments (`16 << log_wq_stride` bytes, ended by a zero
//!   byte count with the invalid lkey, or by its end); the frame is scattered over them through
//!   their lkeys (the RQ's PD; local write). Too long for them: an error CQE, LOCAL_LENGTH_ERR;
//!   a key that does not grant the write: LOCAL_PROT_ERR (the RQ stays RDY: Ethernet queues do
//!   not stop on a bad receive, as mlx5e's RX error handling expects).
//! * Delay drop (`rqc.delay_drop_en`, armed by SET_DELAY_DROP_PARAMS): an RQ without a WQE
//!   holds its frames (at most [`MAX_HELD`], [`MAX_HELD_DEVICE`] for all RQs together, oldest
//!   first; later ones queue behind them) and
//!   looks at its doorbell record every 10 µs of device time, landing them as WQEs come; when
//!   the timeout passes first, the held frames are dropped (`eth_rx_out_of_buffer`), delay drop
//!   is disarmed for the device and a GENERAL_EVENT of sub-type DELAY_DROP_TIMEOUT is posted —
//!   mlx5_ib then arms it again.
//! * VLAN stripping (`rqc.vlan_strip_disable` 0): the first C-VLAN tag is removed from the frame
//!   and reported in the CQE (`cv`, `vlan_info`).
//! * `rqc.scatter_fcs`: the FCS of the frame as it was on the wire (CRC-32, least significant
//!   byte first) follows it in the buffers and counts in `byte_cnt` (the CQE's checksum does not
//!   cover it, as mlx5e's RX-FCS handling expects). `wq.end_padding_mode` 1: the write goes on
//!   with zeros to the end of the 64-byte line of its last byte (within that data segment), which
//!   `byte_cnt` does not count.
//! * The CQE (opcode RESP_SEND): `byte_cnt` the bytes written, `wqe_counter` the WQE's counter,
//!   `check_sum` the 16-bit one's complement sum of everything from the IP header to the frame's
//!   end (what Linux's CHECKSUM_COMPLETE takes), `hds_ip_ext` L3_OK (a good IPv4 header
//!   checksum, or IPv6) and L4_OK (a good TCP/UDP checksum), the L3 and L4 header types, the
//!   RSS hash and its type, the steering entry's flow tag in `sop_drop_qpn`, and the RQ's
//!   `user_index` (CQE version 1).

use mlx5_ifc::consts::self_lb_block;
use mlx5_ifc::consts::sq_rq_state::RDY;
use mlx5_ifc::cqe::{l3_hdr_type, l4_hdr_type};
use mlx5_ifc::prm::sq_rq::Rqc;
use mlx5_ifc::prm::srq::Wq;
use mlx5_ifc::prm::tir::Tirc;
use mlx5_ifc::View;

use super::eth_mpw::{Landing, Placed};
use super::ste_key::Meta;
use super::wqe::{recv_sges, LocalError};
use super::{dma, steering};
use crate::events::cqe::{self, op, syndrome, Cqe, EthRx};
use crate::fabric::icrc::crc32;
use crate::fabric::packet::{self, Addrs, Headers, L3, TPID_CVLAN};
use crate::memory::queue::{dma_fault, read_be32, WqRing};
use crate::model::objects::ObjectKind;
use crate::model::runtime::{HeldFrame, HeldRq, Sge};
use crate::model::Hw;

/// The port (its MAC) for the trace log.
struct Port([u8; 6]);

impl Port {
    fn new(hw: &Hw<'_>) -> Self {
        Port(hw.model.vport.mac())
    }
}

impl core::fmt::Display for Port {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let m = self.0;
        write!(
            f,
            "port {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

/// `hds_ip_ext` bits.
const L3_OK: u8 = 0x2;
const L4_OK: u8 = 0x4;

/// What the device needs of an RQ to fill it.
struct RqInfo {
    state: u64,
    cqn: u32,
    user_index: u32,
    strip: bool,
    /// `scatter_fcs`: the frame's FCS lands after it.
    fcs: bool,
    /// `end_padding_mode` 1: the last cache line written is written whole.
    end_pad: bool,
    /// `delay_drop_en`: without a WQE, frames wait (while delay drop is armed).
    delay_drop: bool,
    /// A striding RQ's geometry; `None` for a cyclic RQ of scatter lists.
    striding: Option<super::eth_mpw::Striding>,
    ring: WqRing,
}

fn info(hw: &Hw<'_>, rqn: u32) -> Option<RqInfo> {
    let q = hw.model.objects.queue(ObjectKind::Rq, rqn)?;
    let c = View::<Rqc>::new(&q.ctx).ok()?;
    Some(RqInfo {
        state: c.get(Rqc::STATE),
        cqn: c.get32(Rqc::CQN),
        user_index: c.get32(Rqc::USER_INDEX),
        strip: c.get(Rqc::VSD) == 0,
        fcs: c.get(Rqc::SCATTER_FCS) == 1,
        end_pad: c.nested(Rqc::WQ).get(Wq::END_PADDING_MODE) == END_PAD_ALIGN,
        delay_drop: c.get(Rqc::DELAY_DROP_EN) == 1,
        striding: super::eth_mpw::Striding::of(&c.nested(Rqc::WQ)),
        ring: WqRing::of(&c.nested(Rqc::WQ), &q.pas),
    })
}

/// Takes a frame that is not RoCE from the wire.
pub(crate) fn receive(hw: &mut Hw<'_>, f: &[u8]) {
    receive_from(hw, f, None);
}

/// Takes a frame the port sent itself (a looped-back frame of an SQ of transport domain `td`:
/// multicast or broadcast, or unicast to the port's own MAC): steered as any other, but a TIR
/// of that domain with `self_lb_block` for its kind does not take it.
pub(crate) fn looped_back(hw: &mut Hw<'_>, f: &[u8], td: u32) {
    receive_from(hw, f, Some(td));
}

fn receive_from(hw: &mut Hw<'_>, f: &[u8], origin: Option<u32>) {
    hw.model.rt.counters.eth_rx_frames += 1;
    let Some(h) = packet::parse(f) else {
        hw.model.rt.counters.rx_malformed += 1;
        return;
    };
    let meta = Meta {
        loopback: origin.is_some(),
        ..Meta::default()
    };
    let s = steering::lookup(hw.model, steering::Direction::Rx, f, &meta);
    for &c in &s.counters {
        crate::model::flow_counter::count(hw.model, c, f.len());
    }
    // What flow samplers took goes where their sample tables say, whatever becomes of the frame.
    for copy in &s.sampled {
        if copy.dropped.is_none() {
            hw.model.rt.counters.eth_rx_sampled += 1;
            take(hw, copy, f, &h, origin);
        }
    }
    if let Some(why) = s.dropped {
        log::trace!(
            "mlx5-sim: {}: Ethernet frame {} dropped by steering at {} ns: {why:?}",
            Port::new(hw),
            Addrs(f),
            hw.now
        );
        hw.model.rt.counters.eth_rx_steering_drops += 1;
        if why == steering::Dropped::SwSteering {
            hw.model.rt.counters.sw_steering_errors += 1;
        }
        return;
    }
    take(hw, &s, f, &h, origin);
}

/// Delivers frame `f` (headers `h`) as steering `s` says: rewritten or wrapped as it says, to
/// each of its TIRs with its flow tag.
fn take(hw: &mut Hw<'_>, s: &steering::Steered, f: &[u8], h: &Headers, origin: Option<u32>) {
    let h = *h;
    // Software-steering actions may have rewritten it.
    let rewritten = s
        .frame
        .as_deref()
        .and_then(|r| packet::parse(r).map(|rh| (r, rh)));
    let (f, h) = rewritten.unwrap_or((f, h));
    // A receive entry's reformat (a table of a type offering `reformat`) wraps the frame the
    // TIRs get.
    let wrapped = s
        .reformat
        .and_then(|r| hw.model.objects.queue(ObjectKind::PacketReformat, r))
        .map(|q| steering::encapsulate(&q.ctx, f));
    let (f, h) = match wrapped
        .as_deref()
        .and_then(|w| packet::parse(w).map(|h| (w, h)))
    {
        Some((w, wh)) => (w, wh),
        None => (f, h),
    };
    for &tirn in &s.tirs {
        if origin.is_some_and(|td| self_blocked(hw, tirn, td, f)) {
            hw.model.rt.counters.eth_rx_self_lb_blocked += 1;
            continue;
        }
        deliver(hw, tirn, f, &h, s.flow_tag);
    }
}

/// Whether TIR `tirn` refuses frame `f` looped back from its own transport domain `td`:
/// `self_lb_block` bit 1 for a multicast or broadcast frame, bit 0 for a unicast one.
fn self_blocked(hw: &Hw<'_>, tirn: u32, td: u32, f: &[u8]) -> bool {
    let bit = if f.first().is_some_and(|b| b & 1 != 0) {
        self_lb_block::MULTICAST
    } else {
        self_lb_block::UNICAST
    };
    hw.model
        .objects
        .queue(ObjectKind::Tir, tirn)
        .and_then(|t| {
            View::<Tirc>::new(&t.ctx).ok().map(|c| {
                c.get32(Tirc::TRANSPORT_DOMAIN) == td && c.get(Tirc::SELF_LB_BLOCK) & bit != 0
            })
        })
        .unwrap_or(false)
}

/// Delivers a copy of `f` through TIR `tirn`: to the RQ it picks, behind the frames that RQ
/// holds; without a WQE, held (delay drop) or dropped.
fn deliver(hw: &mut Hw<'_>, tirn: u32, f: &[u8], h: &Headers, flow_tag: u32) {
    let Some((rqn, rss_hash, rss_type)) = steering::select_rq(hw.model, tirn, h) else {
        hw.model.rt.counters.eth_rx_steering_drops += 1;
        return;
    };
    let Some(rq) = info(hw, rqn).filter(|rq| rq.state == RDY) else {
        log::trace!(
            "mlx5-sim: {}: Ethernet frame {} for RQ {rqn:#x}, not RDY, dropped at {} ns",
            Port::new(hw),
            Addrs(f),
            hw.now
        );
        hw.model.rt.counters.eth_rx_out_of_buffer += 1;
        return;
    };
    let held = HeldFrame {
        frame: f.to_vec(),
        h: *h,
        flow_tag,
        rss: (rss_hash, rss_type),
    };
    if hw.model.rt.held.contains_key(&rqn) || !land(hw, rqn, &rq, &held) {
        hold(hw, rqn, &rq, held);
    }
}

/// Lands `held` in RQ `rqn`'s next WQE with its CQE (an error CQE if it does not fit); `false`
/// when no WQE is posted.
fn land(hw: &mut Hw<'_>, rqn: u32, rq: &RqInfo, held: &HeldFrame) -> bool {
    let (f, h, flow_tag) = (&held.frame[..], &held.h, held.flow_tag);
    let (rss_hash, rss_type) = held.rss;
    // VLAN stripping: the first C-VLAN tag leaves the frame for the CQE.
    let (frame, vlan, h) = match h.vlan {
        Some((TPID_CVLAN, tci)) if rq.strip => {
            let mut g = Vec::with_capacity(f.len() - 4);
            g.extend_from_slice(&f[..12]);
            g.extend_from_slice(&f[16..]);
            let h2 = packet::parse(&g).unwrap_or(*h);
            (g, Some(tci), h2)
        }
        _ => (f.to_vec(), None, *h),
    };
    let Some(pi) = read_be32(hw.iommu, rq.ring.dbr) else {
        dma_fault(
            hw.faults,
            rq.ring.dbr,
            4,
            false,
            format!("RQ {rqn:#x} doorbell record"),
        );
        return true;
    };
    // What lands in the buffers: the frame, its FCS (that of the frame on the wire) with
    // `scatter_fcs`.
    let mut data = frame.clone();
    if rq.fcs {
        data.extend_from_slice(&crc32(f).to_le_bytes());
    }
    let placed = match &rq.striding {
        Some(s) => super::eth_mpw::place(hw, rqn, rq.cqn, &rq.ring, s, pi as u16, &data),
        None => place_cyclic(hw, rqn, rq, pi as u16, data),
    };
    let p = match placed {
        Landing::NoWqe => return false,
        Landing::Lost => return true,
        Landing::At(p) => p,
    };
    log::trace!(
        "mlx5-sim: {}: Ethernet frame {} landed in RQ {rqn:#x} WQE {} ({} bytes) at {} ns",
        Port::new(hw),
        Addrs(f),
        p.wqe_counter,
        p.byte_cnt,
        hw.now
    );
    let srqn_uidx = cqe::srqn_uidx(hw, rq.user_index, None);
    let c = match p.wrote {
        Ok(()) => {
            hw.model.rt.counters.eth_rx_delivered += 1;
            Cqe {
                opcode: op::RESP_SEND,
                qpn: flow_tag & 0xff_ffff,
                wqe_counter: p.wqe_counter,
                wqe_id: p.wqe_id,
                byte_cnt: p.byte_cnt,
                srqn_uidx,
                l3_hdr_type: match h.l3 {
                    L3::V4 => l3_hdr_type::IPV4,
                    L3::V6 => l3_hdr_type::IPV6,
                    L3::None => l3_hdr_type::NONE,
                },
                eth: offloads(&frame, &h, vlan, rss_hash, rss_type),
                ..Cqe::default()
            }
        }
        Err(e) => {
            hw.model.rt.counters.eth_rx_errors += 1;
            Cqe {
                opcode: op::RESP_ERR,
                qpn: rqn,
                wqe_counter: p.wqe_counter,
                wqe_id: p.wqe_id,
                srqn_uidx,
                syndrome: match e {
                    LocalError::Length => syndrome::LOCAL_LENGTH_ERR,
                    LocalError::Protection | LocalError::PageFault => syndrome::LOCAL_PROT_ERR,
                    LocalError::Dma => syndrome::LOCAL_QP_OP_ERR,
                },
                vendor: if e == LocalError::Dma {
                    cqe::VENDOR_DMA
                } else {
                    0
                },
                ..Cqe::default()
            }
        }
    };
    if c.is_error() {
        cqe::post(hw, rq.cqn, &c);
    } else {
        cqe::post_rx(hw, rq.cqn, &c, rq.striding.is_some());
    }
    true
}

/// Places `data` in the next WQE of cyclic RQ `rqn` (`pi` WQEs posted): scattered over its data
/// segments, with end padding.
fn place_cyclic(hw: &mut Hw<'_>, rqn: u32, rq: &RqInfo, pi: u16, mut data: Vec<u8>) -> Landing {
    let cc = hw.model.rt.eth_rqs.get(&rqn).copied().unwrap_or(0);
    if pi == cc {
        return Landing::NoWqe;
    }
    let mut wqe = vec![0u8; rq.ring.stride as usize];
    if let Err(iova) = rq.ring.read(hw.iommu, u64::from(cc), &mut wqe) {
        dma_fault(
            hw.faults,
            iova,
            wqe.len(),
            false,
            format!("RQ {rqn:#x} WQE {cc}"),
        );
        return Landing::Lost;
    }
    hw.model.rt.eth_rqs.insert(rqn, cc.wrapping_add(1));
    let sges = recv_sges(&wqe);
    let byte_cnt = data.len() as u32;
    if rq.end_pad {
        data.resize(data.len() + end_padding(&sges, data.len()), 0);
    }
    let wrote = dma::scatter(hw, rq.ring.pd, &sges, 0, &data);
    Landing::At(Placed {
        wqe_counter: cc,
        wqe_id: 0,
        byte_cnt,
        wrote,
    })
}

/// The most frames an RQ holds; more are dropped.
pub(crate) const MAX_HELD: usize = 64;
/// The most frames the device holds for all its RQs together (a packet buffer is finite: a
/// sender — or a guest making RQs — cannot make the simulator hold more).
pub(crate) const MAX_HELD_DEVICE: usize = 1024;
/// How often (device time) the device looks at a holding RQ's doorbell record.
const HELD_POLL_NS: u64 = 10_000;

/// A frame for RQ `rqn`, which has no WQE (or holds frames already): held while delay drop is
/// armed and the RQ has it (at most [`MAX_HELD`] for the RQ, [`MAX_HELD_DEVICE`] for the
/// device), else dropped (`eth_rx_out_of_buffer`).
fn hold(hw: &mut Hw<'_>, rqn: u32, rq: &RqInfo, f: HeldFrame) {
    log::trace!(
        "mlx5-sim: {}: Ethernet frame {} for RQ {rqn:#x}: no WQE at {} ns",
        Port::new(hw),
        Addrs(&f.frame),
        hw.now
    );
    let Some(timeout) = hw.model.delay_drop_ns.filter(|_| rq.delay_drop) else {
        hw.model.rt.counters.eth_rx_out_of_buffer += 1;
        return;
    };
    let held: usize = hw.model.rt.held.values().map(|q| q.frames.len()).sum();
    if held >= MAX_HELD_DEVICE {
        hw.model.rt.counters.eth_rx_out_of_buffer += 1;
        return;
    }
    let now = hw.now;
    let q = hw.model.rt.held.entry(rqn).or_insert_with(|| HeldRq {
        frames: Default::default(),
        deadline: now.saturating_add(timeout),
        poll_at: now.saturating_add(HELD_POLL_NS),
    });
    if q.frames.len() >= MAX_HELD {
        hw.model.rt.counters.eth_rx_out_of_buffer += 1;
        return;
    }
    q.frames.push_back(f);
}

/// The holding RQs due now: each lands what its posted WQEs take; one whose timeout passed
/// drops the rest (counted), and delay drop is disarmed with a DELAY_DROP_TIMEOUT event.
pub(crate) fn held_due(hw: &mut Hw<'_>) {
    let now = hw.now;
    let due: Vec<u32> = hw
        .model
        .rt
        .held
        .iter()
        .filter(|(_, q)| q.poll_at <= now || q.deadline <= now)
        .map(|(&n, _)| n)
        .collect();
    for rqn in due {
        let rq = info(hw, rqn).filter(|rq| rq.state == RDY);
        while let (Some(rq), Some(f)) = (
            rq.as_ref(),
            hw.model
                .rt
                .held
                .get(&rqn)
                .and_then(|q| q.frames.front().cloned()),
        ) {
            if !land(hw, rqn, rq, &f) {
                break;
            }
            if let Some(q) = hw.model.rt.held.get_mut(&rqn) {
                q.frames.pop_front();
            }
        }
        let Some(q) = hw.model.rt.held.get_mut(&rqn) else {
            continue;
        };
        if q.frames.is_empty() {
            hw.model.rt.held.remove(&rqn);
        } else if q.deadline <= now || rq.is_none() {
            let n = q.frames.len() as u64;
            hw.model.rt.held.remove(&rqn);
            hw.model.rt.counters.eth_rx_out_of_buffer += n;
            hw.model.delay_drop_ns = None;
            crate::events::eqe::delay_drop_timeout(hw);
        } else {
            q.poll_at = now + HELD_POLL_NS;
        }
    }
}

/// `wq.end_padding_mode` 1: writes end at a 64-byte (cache line) boundary.
const END_PAD_ALIGN: u64 = 1;

/// The bytes of padding that take a write of `len` bytes over `sges` to the end of the 64-byte
/// line of its last byte (by the buffer's address), within that data segment.
fn end_padding(sges: &[Sge], len: usize) -> usize {
    let mut left = len as u64;
    for s in sges {
        let cap = u64::from(s.len);
        if left <= cap {
            let end = s.addr.wrapping_add(left);
            let pad = end.next_multiple_of(64).wrapping_sub(end);
            return pad.min(cap - left) as usize;
        }
        left -= cap;
    }
    0
}

/// The receive offload fields of a delivered frame.
fn offloads(f: &[u8], h: &Headers, vlan: Option<u16>, rss_hash: u32, rss_type: u8) -> EthRx {
    let mut e = EthRx {
        vlan,
        rss_hash,
        rss_type,
        ..EthRx::default()
    };
    if h.l3 == L3::None {
        return e;
    }
    e.check_sum = packet::fold(packet::sum(&f[h.l3_at..], 0));
    if packet::l3_ok(f, h) && !h.short {
        e.hds_ip_ext |= L3_OK;
    }
    if h.l4_at.is_some() && packet::l4_ok(f, h) && !h.short {
        e.hds_ip_ext |= L4_OK;
    }
    e.l4_hdr_type = if h.udp() {
        l4_hdr_type::UDP
    } else if h.tcp() {
        let at = h.l4_at.unwrap_or(0);
        let ack = h.tcp_flags & 0x10 != 0;
        let data = h.ip_end > at + h.tcp_len;
        match (ack, data) {
            (false, _) => l4_hdr_type::TCP_NO_ACK,
            (true, false) => l4_hdr_type::TCP_ACK_NO_DATA,
            (true, true) => l4_hdr_type::TCP_ACK_AND_DATA,
        }
    } else {
        l4_hdr_type::NONE
    };
    e
}
