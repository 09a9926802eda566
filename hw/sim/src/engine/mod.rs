//! The data path: send doorbells and BlueFlame, WQE execution, the RoCE v2 transports (RC, UC,
//! UD) as requester and responder, completions and events.
//!
//! * [`wqe`]: queue buffers through their PAS, doorbell records, send WQE parsing, receive WQEs
//!   (RQ ring, SRQ/RMP linked list); [`dma`]: gather and scatter through memory keys;
//! * [`cqe`]: CQEs (64-byte layout, 128-byte CQEs carry it in their second half), EQEs,
//!   CQ arming, asynchronous events;
//! * [`requester`]: executing the send queue, PSNs; [`ack`]: ACK/NAK processing,
//!   retransmission and the retry and RNR counts; [`flush`]: a QP entering ERR;
//! * [`responder`]: inbound requests: receive WQE consumption, RDMA WRITE / READ / atomics
//!   with rkey checks, ACK / NAK / RNR NAK generation.
//!
//! Everything here runs under the device lock with a [`Hw`]: the firmware state, the IOMMU, the
//! DMA fault record and the device time. Frames to transmit are queued in [`Engine::tx`]; the
//! device hands them to its fabric once the lock is released.
//!
//! EQE layouts ([`mlx5_ifc::prm::eqe`]: 64 bytes; byte 1 event type, byte 3 sub-type, event
//! data at 0x20..0x3b, owner bit 0 of byte 0x3f = `(producer >> log_eq_size) & 1`):
//!
//! | event | data |
//! |---|---|
//! | COMPLETION 0x00 | CQN, BE32 at 0x38 (low 24 bits) |
//! | CQ_ERROR 0x04 | CQN, BE32 at 0x20; syndrome at 0x2b (1 = overrun) |
//! | WQ_CATAS_ERROR 0x05, WQ_INVAL_REQ_ERROR 0x10, WQ_ACCESS_ERROR 0x11 | resource type at 0x34 (0 = QP), QPN BE32 at 0x38 |
//!
//! Completion events go to the CQ's EQ; asynchronous events to every EQ whose `event_bitmask`
//! has the event's bit (bit n of the 256-bit mask read as big-endian 64-bit words).

pub(crate) mod ack;
pub(crate) mod cqe;
pub(crate) mod dma;
pub(crate) mod eth;
pub(crate) mod eth_rx;
pub(crate) mod flush;
pub(crate) mod requester;
pub(crate) mod responder;
pub(crate) mod steering;
pub(crate) mod umr;
pub(crate) mod wqe;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use mlx5_ifc::consts::{qp_st, rq_type};
use mlx5_ifc::prm::qp::{Ads, Qpc};
use mlx5_ifc::prm::vport::RoceAddrLayout;
use mlx5_ifc::{View, ViewMut};

use crate::fabric::frame::{self, Packet, Route};
use crate::fabric::pool;
use crate::fault::{DmaFault, DmaFaultKind};
use crate::fw::doorbell::UarAction;
use crate::fw::objects::ObjectKind;
use crate::fw::Firmware;
use crate::iommu::Iommu;

/// What the data path works with: the firmware state, DMA memory, the fault record, the time.
pub(crate) struct Hw<'a> {
    pub(crate) fw: &'a mut Firmware,
    pub(crate) iommu: &'a Iommu,
    pub(crate) faults: &'a mut Vec<DmaFault>,
    pub(crate) now: u64,
}

/// Counters of the data path, for tests and tools.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DatapathCounters {
    /// Send WQEs fetched and executed (not counting flushed ones).
    pub wqes_executed: u64,
    /// Send and receive WQEs completed with WR_FLUSH_ERR.
    pub wqes_flushed: u64,
    /// CQEs written (error CQEs included).
    pub cqes: u64,
    /// Error CQEs written (flushes included).
    pub error_cqes: u64,
    /// CQEs dropped because their CQ was full or in error.
    pub cqes_dropped: u64,
    /// EQEs written.
    pub eqes: u64,
    /// EQEs dropped because their EQ was full.
    pub eqes_dropped: u64,
    /// Frames handed to the wire.
    pub tx_frames: u64,
    /// Ethernet frames Ethernet send queues put on the wire (a TSO WQE's segments each count).
    pub eth_tx_frames: u64,
    /// Received frames that were not RoCE (they go to the receive flow tables).
    pub eth_rx_frames: u64,
    /// Ethernet frames written to an RQ with a completion.
    pub eth_rx_delivered: u64,
    /// Ethernet frames the flow tables dropped (no root table, a miss, a DROP entry).
    pub eth_rx_steering_drops: u64,
    /// Ethernet frames for an RQ with no posted WQE (or not RDY): the Q counter's
    /// `out_of_buffer`.
    pub eth_rx_out_of_buffer: u64,
    /// Ethernet frames that met a receive error (too long for the WQE, a bad lkey): error CQEs.
    pub eth_rx_errors: u64,
    /// Bytes handed to the wire.
    pub tx_bytes: u64,
    /// Frames received from the wire.
    pub rx_frames: u64,
    /// Received frames dropped for a bad ICRC.
    pub rx_icrc_errors: u64,
    /// Received frames dropped as malformed (not RoCE v2, bad IP header, unknown opcode).
    pub rx_malformed: u64,
    /// RoCE frames to another device's unicast MAC (flooded by the switch), dropped.
    pub rx_not_ours: u64,
    /// Well-formed frames dropped: no such QP, wrong service or state, Q_Key mismatch, UD or UC
    /// without a receive WQE, UC out of sequence, stray responses.
    pub rx_dropped: u64,
    /// Packets sent again (ack timeout, NAK, RNR).
    pub retransmits: u64,
    /// ACKs (and atomic ACKs) sent.
    pub acks_sent: u64,
    /// NAKs sent (sequence error, invalid request, remote access, remote operational).
    pub naks_sent: u64,
    /// RNR NAKs sent.
    pub rnr_naks_sent: u64,
}

/// A data segment: `byte_count`, `lkey`, `addr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sge {
    pub(crate) len: u32,
    pub(crate) lkey: u32,
    pub(crate) addr: u64,
}

/// One RC request on the wire, waiting for its acknowledgement or response.
#[derive(Debug, Clone)]
pub(crate) struct SendReq {
    pub(crate) wqe_counter: u16,
    /// The mlx5 send opcode (`s_wqe_opcode` of the CQE).
    pub(crate) opcode: u8,
    pub(crate) signaled: bool,
    pub(crate) first_psn: u32,
    pub(crate) last_psn: u32,
    pub(crate) byte_count: u32,
    /// READ / atomic: where the response data goes.
    pub(crate) local: Vec<Sge>,
    /// READ / atomic: whether the request waits for response data.
    pub(crate) needs_response: bool,
    /// READ: response packets and bytes received so far.
    pub(crate) got_pkts: u32,
    pub(crate) got_bytes: u32,
    /// Acknowledged (or fully answered): ready to complete.
    pub(crate) done: bool,
}

/// A receive WQE being filled by a multi-packet SEND.
#[derive(Debug, Clone)]
pub(crate) struct RecvCtx {
    pub(crate) wqe_counter: u16,
    pub(crate) sges: wqe::RecvSges,
    pub(crate) offset: u64,
}

/// A multi-packet RDMA WRITE in progress: its key and range, what is written, and the IOVA
/// pieces of the packet being placed (looked up again for every packet).
#[derive(Debug, Clone)]
pub(crate) struct WriteCtx {
    pub(crate) pieces: crate::fw::mkey::IovaPieces,
    /// The piece being filled, and the bytes of it already written.
    pub(crate) at: usize,
    pub(crate) used: usize,
    pub(crate) total: u32,
    /// The RETH's rkey and virtual address.
    pub(crate) key: u32,
    pub(crate) va: u64,
    /// Bytes of the message placed so far.
    pub(crate) written: u64,
}

/// The transport state of one QP (beyond its context).
#[derive(Debug, Clone, Default)]
pub(crate) struct QpRt {
    /// Send queue: the WQEBB counter of the next WQE to fetch.
    pub(crate) sq_cc: u16,
    pub(crate) next_psn: Option<u32>,
    pub(crate) outstanding: VecDeque<SendReq>,
    pub(crate) retries: u8,
    pub(crate) rnr_retries: u8,
    /// Ack timeout deadline (device time).
    pub(crate) timer: Option<u64>,
    /// RNR wait: retransmit from the oldest outstanding PSN at this time.
    pub(crate) resend_at: Option<u64>,
    /// RNR wait: the PSN to go back to.
    pub(crate) resend_psn: u32,
    /// Receive queue: the counter of the next RQ WQE to consume.
    pub(crate) rq_cc: u16,
    pub(crate) epsn: Option<u32>,
    pub(crate) msn: u32,
    pub(crate) nak_sent: bool,
    pub(crate) recv: Option<RecvCtx>,
    pub(crate) write: Option<WriteCtx>,
    /// The atomics executed last, `(PSN, original value)`, oldest first: as many as the QP's
    /// responder resources (`2^log_rra_max`), so that a duplicate of any atomic the requester
    /// may still retransmit gets its original value again instead of being executed twice.
    pub(crate) atomics: VecDeque<(u32, u64)>,
    /// Responder: the ACK owed, `(PSN, MSN)` (coalesced: sent when the device goes idle).
    pub(crate) ack_owed: Option<(u32, u32)>,
}

/// CQ state: producer counter, error, CQEs written.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CqRt {
    pub(crate) pi: u32,
    pub(crate) error: bool,
    pub(crate) written: u64,
}

/// The data path state of the device.
#[derive(Debug, Default)]
pub(crate) struct Engine {
    pub(crate) qps: BTreeMap<u32, QpRt>,
    pub(crate) cqs: BTreeMap<u32, CqRt>,
    /// SRQ / RMP: `(next WQE index, WQEs consumed)`.
    pub(crate) srqs: BTreeMap<u32, (u16, u16)>,
    /// Ethernet SQs: the consumer counter (WQEBBs).
    pub(crate) eth_sqs: BTreeMap<u32, u16>,
    /// Ethernet RQs: the consumer counter (WQEs).
    pub(crate) eth_rqs: BTreeMap<u32, u16>,
    /// EQ producer counters.
    pub(crate) eqs: BTreeMap<u32, u32>,
    /// BlueFlame halves: BAR offset of the half → the WQE its last doorbell named.
    pub(crate) bf: BTreeMap<u64, BfCopy>,
    /// Frames to put on the wire.
    pub(crate) tx: Vec<Vec<u8>>,
    /// MSI-X vectors raised and not yet delivered (an EQE written to an armed EQ raises its
    /// `intr`); [`crate::SimDevice::set_interrupt_sink`] gets them once the state is unlocked.
    pub(crate) irqs: Vec<u16>,
    pub(crate) counters: DatapathCounters,
    ip_id: u16,
    /// Decoded QP contexts ([`QpInfo::load`]).
    qp_cache: BTreeMap<u32, Arc<QpInfo>>,
    /// The QPs that owe an ACK ([`QpRt::ack_owed`]).
    pub(crate) acks_owed: Vec<u32>,
}

impl Engine {
    /// A firmware command ran (or the function was reset): what the data path decoded from
    /// contexts may be stale.
    pub(crate) fn commanded(&mut self) {
        self.qp_cache.clear();
    }

    /// Forgets the runtime state of a destroyed object (or of a QP moved to RST).
    pub(crate) fn forget(&mut self, kind: ObjectKind, id: u32) {
        match kind {
            ObjectKind::Qp => {
                self.qps.remove(&id);
            }
            ObjectKind::Cq => {
                self.cqs.remove(&id);
            }
            ObjectKind::Srq | ObjectKind::Rmp => {
                self.srqs.remove(&id);
            }
            ObjectKind::Eq => {
                self.eqs.remove(&id);
            }
            ObjectKind::Sq => {
                self.eth_sqs.remove(&id);
            }
            ObjectKind::Rq => {
                self.eth_rqs.remove(&id);
            }
            _ => {}
        }
    }

    /// The earliest timer of any QP (device time).
    pub(crate) fn deadline(&self) -> Option<u64> {
        self.qps
            .values()
            .flat_map(|q| [q.timer, q.resend_at])
            .flatten()
            .min()
    }

    /// Queues an Ethernet frame an SQ built.
    pub(crate) fn send_raw(&mut self, f: Vec<u8>) {
        self.counters.tx_frames += 1;
        self.counters.eth_tx_frames += 1;
        self.counters.tx_bytes += f.len() as u64;
        self.tx.push(f);
    }

    /// Queues a frame of `p` on `route`.
    pub(crate) fn send(&mut self, route: &Route, p: &Packet<'_>) {
        self.ip_id = self.ip_id.wrapping_add(1);
        let r = Route {
            ip_id: self.ip_id,
            ..*route
        };
        let mut f = pool::take();
        frame::encode_into(&mut f, &r, p);
        self.counters.tx_frames += 1;
        self.counters.tx_bytes += f.len() as u64;
        self.tx.push(f);
    }
}

/// 24-bit PSN arithmetic: `a - b` as a signed distance.
pub(crate) fn psn_diff(a: u32, b: u32) -> i32 {
    let d = a.wrapping_sub(b) & 0xff_ffff;
    if d >= 1 << 23 {
        d as i32 - (1 << 24)
    } else {
        d as i32
    }
}

/// `psn + n` in 24 bits.
pub(crate) fn psn_add(psn: u32, n: u32) -> u32 {
    psn.wrapping_add(n) & 0xff_ffff
}

/// What the data path needs from a QP context.
#[derive(Debug, Clone)]
pub(crate) struct QpInfo {
    pub(crate) qpn: u32,
    pub(crate) st: u64,
    /// A REG_UMR QP (its `st` is UD's: [`qp_st::transport`]).
    pub(crate) umr: bool,
    /// QP1, the GSI QP (its `st` is UD's): number 1 on the wire, whatever CREATE_QP named it.
    pub(crate) gsi: bool,
    /// Responder resources: the READs and atomics a requester may have outstanding
    /// (`2^log_rra_max`).
    pub(crate) rra: usize,
    pub(crate) state: u64,
    pub(crate) pd: u32,
    pub(crate) cqn_snd: u32,
    pub(crate) cqn_rcv: u32,
    pub(crate) dbr: u64,
    pub(crate) pas: Arc<[u64]>,
    pub(crate) page: u64,
    /// Where the queue starts in its first page (`page_offset`).
    pub(crate) start: u64,
    pub(crate) rq_wqes: u32,
    pub(crate) rq_stride: u64,
    pub(crate) sq_wqebbs: u32,
    pub(crate) sq_offset: u64,
    /// The SRQ / RMP the QP receives from.
    pub(crate) srq: Option<(ObjectKind, u32)>,
    pub(crate) mtu: u32,
    pub(crate) remote_qpn: u32,
    pub(crate) rre: bool,
    pub(crate) rwe: bool,
    pub(crate) rae: bool,
    /// `atomic_mode`: 0 (undefined: atomics are refused), 1 IB-spec, 2 CX, 3..=8 extended.
    pub(crate) atomic_mode: u8,
    pub(crate) q_key: u32,
    pub(crate) retry_count: u8,
    pub(crate) rnr_retry: u8,
    pub(crate) min_rnr_nak: u8,
    pub(crate) ack_timeout: u8,
    pub(crate) log_msg_max: u32,
    pub(crate) user_index: u32,
    pub(crate) next_send_psn: u32,
    pub(crate) next_rcv_psn: u32,
    /// The primary path as a route (RC / UC).
    pub(crate) route: Route,
}

/// The source GID of RoCE address `index` (zeros if unset or out of the table).
pub(crate) fn own_gid(fw: &Firmware, index: usize) -> [u8; 16] {
    let mut g = [0u8; 16];
    if let Some(entry) = fw.vport.gid(index) {
        if let Ok(v) = View::<RoceAddrLayout>::new(entry) {
            g.copy_from_slice(v.bytes(RoceAddrLayout::SOURCE_L3_ADDRESS));
        }
    }
    g
}

/// Whether GID table entry `index` is a RoCE (v1) GID: set (not all zero) with `roce_version`
/// 0. Its QPs' frames then go out as RoCE v1 ([`frame`]).
pub(crate) fn gid_is_v1(fw: &Firmware, index: usize) -> bool {
    fw.vport.gid(index).is_some_and(|entry| {
        entry.iter().any(|&b| b != 0)
            && View::<RoceAddrLayout>::new(entry)
                .is_ok_and(|v| v.get(RoceAddrLayout::ROCE_VERSION) == 0)
    })
}

/// The UDP source port of a RoCE v2 packet of QP `qpn`: the one software gave (`ads.udp_sport`,
/// the UD address vector's `rlid`) when `roce_cap.sw_r_roce_src_udp_port` is set — literally,
/// even 0 — else the firmware's own choice in the dynamic range 0xc000..=0xffff.
pub(crate) fn wire_sport(fw: &Firmware, given: u16, qpn: u32) -> u16 {
    let sw = View::<mlx5_ifc::prm::caps::RoceCap>::new(&fw.cur_roce)
        .is_ok_and(|v| v.get(mlx5_ifc::prm::caps::RoceCap::SW_R_ROCE_SRC_UDP_PORT) == 1);
    if sw {
        given
    } else {
        0xc000 | ((qpn ^ (qpn >> 14)) & 0x3fff) as u16
    }
}

impl QpInfo {
    /// The QP `qpn` as the data path sees it, if it is live. Decoded from the context (and
    /// the vport: MAC, GIDs) once, then kept in the engine until something could change it:
    /// every firmware command drops the whole cache ([`Engine::commanded`]), and a state
    /// change the data path makes itself ([`set_qp_state`]) drops the QP's entry.
    pub(crate) fn load(fw: &mut Firmware, qpn: u32) -> Option<Arc<QpInfo>> {
        if let Some(i) = fw.engine.qp_cache.get(&qpn) {
            return Some(i.clone());
        }
        let i = Arc::new(Self::decode(fw, qpn)?);
        fw.engine.qp_cache.insert(qpn, i.clone());
        Some(i)
    }

    /// The QP `qpn` decoded from its context.
    fn decode(fw: &Firmware, qpn: u32) -> Option<QpInfo> {
        let q = fw.objects.queue(ObjectKind::Qp, qpn)?;
        let c = View::<Qpc>::new(&q.ctx).ok()?;
        let a = c.nested(Qpc::PRIMARY_ADDRESS_PATH);
        let regular = c.get(Qpc::RQ_TYPE) == rq_type::REGULAR;
        let rq_stride = 16u64 << c.get(Qpc::LOG_RQ_STRIDE);
        let rq_wqes = if regular {
            1u32 << c.get(Qpc::LOG_RQ_SIZE).min(24)
        } else {
            0
        };
        let no_sq = c.get(Qpc::NO_SQ) == 1;
        let mut rmac = [0u8; 6];
        rmac[..2].copy_from_slice(&(a.get(Ads::RMAC_47_32) as u16).to_be_bytes());
        rmac[2..].copy_from_slice(&(a.get(Ads::RMAC_31_0) as u32).to_be_bytes());
        let mut dgid = [0u8; 16];
        dgid.copy_from_slice(a.bytes(Ads::RGID_RIP));
        let tclass = match a.get(Ads::TCLASS) as u8 {
            0 => (a.get(Ads::DSCP) as u8) << 2,
            t => t,
        };
        let page = 4096u64 << c.get(Qpc::LOG_PAGE_SIZE).min(20);
        let route = Route {
            smac: fw.vport.mac(),
            dmac: rmac,
            sgid: own_gid(fw, a.get(Ads::SRC_ADDR_INDEX) as usize),
            dgid,
            tclass,
            flow_label: a.get(Ads::FLOW_LABEL) as u32,
            hop_limit: a.get(Ads::HOP_LIMIT) as u8,
            sport: wire_sport(fw, a.get(Ads::UDP_SPORT) as u16, qpn),
            ip_id: 0,
            v1: gid_is_v1(fw, a.get(Ads::SRC_ADDR_INDEX) as usize),
        };
        Some(QpInfo {
            qpn,
            st: mlx5_ifc::consts::qp_st::transport(c.get(Qpc::ST)),
            umr: c.get(Qpc::ST) == qp_st::REG_UMR,
            gsi: c.get(Qpc::ST) == qp_st::QP1,
            rra: 1 << c.get(Qpc::LOG_RRA_MAX).min(8),
            state: c.get(Qpc::STATE),
            pd: c.get32(Qpc::PD),
            cqn_snd: c.get32(Qpc::CQN_SND),
            cqn_rcv: c.get32(Qpc::CQN_RCV),
            dbr: c.get(Qpc::DBR_ADDR),
            pas: q.pas.clone(),
            page,
            start: wqe::queue_start(page, c.get(Qpc::PAGE_OFFSET)),
            rq_wqes,
            rq_stride,
            sq_wqebbs: if no_sq {
                0
            } else {
                1u32 << c.get(Qpc::LOG_SQ_SIZE).min(24)
            },
            sq_offset: u64::from(rq_wqes) * rq_stride,
            srq: q
                .holds
                .iter()
                .copied()
                .find(|(k, _)| matches!(k, ObjectKind::Srq | ObjectKind::Rmp)),
            // Every transition to RTR checks `mtu` is 1..=5 (BAD_PATH_MTU); the smallest MTU
            // only keeps the arithmetic safe for a context that never got there.
            mtu: match c.get(Qpc::MTU) {
                m @ 1..=5 => 256 << (m - 1),
                _ => 256,
            },
            remote_qpn: c.get32(Qpc::REMOTE_QPN),
            rre: c.get(Qpc::RRE) == 1,
            rwe: c.get(Qpc::RWE) == 1,
            rae: c.get(Qpc::RAE) == 1,
            atomic_mode: c.get(Qpc::ATOMIC_MODE) as u8,
            q_key: c.get32(Qpc::Q_KEY),
            retry_count: c.get(Qpc::RETRY_COUNT) as u8,
            rnr_retry: c.get(Qpc::RNR_RETRY) as u8,
            min_rnr_nak: c.get(Qpc::MIN_RNR_NAK) as u8,
            ack_timeout: a.get(Ads::ACK_TIMEOUT) as u8,
            log_msg_max: c.get(Qpc::LOG_MSG_MAX) as u32,
            user_index: c.get32(Qpc::USER_INDEX),
            next_send_psn: c.get32(Qpc::NEXT_SEND_PSN),
            next_rcv_psn: c.get32(Qpc::NEXT_RCV_PSN),
            route,
        })
    }

    /// Whether the QP is UD.
    pub(crate) fn ud(&self) -> bool {
        self.st == qp_st::UD
    }

    /// The largest message the QP takes: `2^log_msg_max`, literally (0 is one byte), capped at
    /// 2 GiB.
    pub(crate) fn max_msg(&self) -> u64 {
        1u64 << self.log_msg_max.min(31)
    }
}

/// Sets the state of QP `qpn` in its context.
pub(crate) fn set_qp_state(fw: &mut Firmware, qpn: u32, state: u64) {
    fw.engine.qp_cache.remove(&qpn);
    if let Some(q) = fw.objects.queue_mut(ObjectKind::Qp, qpn) {
        if let Ok(mut v) = ViewMut::<Qpc>::new(&mut q.ctx) {
            if let Err(e) = v.set(Qpc::STATE, state) {
                log::error!("mlx5-sim: QP {qpn:#x}: {e}");
            }
        }
    }
}

/// The runtime of QP `qpn`, PSNs initialized from its context.
pub(crate) fn qp_rt<'a>(engine: &'a mut Engine, info: &QpInfo) -> &'a mut QpRt {
    let rt = engine.qps.entry(info.qpn).or_default();
    if rt.epsn.is_none() {
        rt.epsn = Some(info.next_rcv_psn & 0xff_ffff);
    }
    if rt.next_psn.is_none() {
        rt.next_psn = Some(info.next_send_psn & 0xff_ffff);
    }
    rt
}

/// The state of QP `qpn` as its context holds it now.
pub(crate) fn qp_state_of(fw: &Firmware, qpn: u32) -> Option<u64> {
    let q = fw.objects.queue(ObjectKind::Qp, qpn)?;
    View::<Qpc>::new(&q.ctx).ok().map(|v| v.get(Qpc::STATE))
}

/// Services the timers of every QP that are due at `hw.now`.
pub(crate) fn tick(hw: &mut Hw<'_>) {
    let due: Vec<u32> = hw
        .fw
        .engine
        .qps
        .iter()
        .filter(|(_, q)| {
            q.timer.is_some_and(|t| t <= hw.now) || q.resend_at.is_some_and(|t| t <= hw.now)
        })
        .map(|(&n, _)| n)
        .collect();
    for qpn in due {
        ack::on_timer(hw, qpn);
    }
}

/// A write to a UAR page: EQ and CQ doorbells ([`Firmware::uar_write`]), send doorbells and
/// BlueFlame words. Returns the QP whose send queue the device must now execute.
pub(crate) fn uar_write(hw: &mut Hw<'_>, off: u64, value: u64, width: u8) -> Option<u32> {
    match hw.fw.uar_write(off, value, width, hw.faults) {
        UarAction::None => None,
        UarAction::CqArmed { cqn, ci } => {
            cqe::arm_check(hw, cqn, ci);
            None
        }
        UarAction::Send { qpn, wqe, half } => {
            // The control segment's DS (byte 7, low 6 bits): how much of what follows the
            // device reads as the WQE.
            let ds = value.to_be_bytes()[7] & 0x3f;
            let copy = BfCopy::take(hw, qpn, wqe, ds);
            hw.fw.engine.bf.insert(half, copy);
            blueflame(hw, off, half, 0, value);
            Some(qpn)
        }
        UarAction::BlueFlame { half, at } => {
            blueflame(hw, off, half, at, value);
            None
        }
        UarAction::EqArmed { eqn, ci } => {
            cqe::eq_arm_check(hw, eqn, ci);
            None
        }
        UarAction::EthSend { sqn, wqe } => {
            eth::doorbell(hw, sqn, wqe);
            None
        }
    }
}

/// The bytes of the WQE a send doorbell named, as the send queue held them when it rang: what
/// the rest of that WQE's BlueFlame copy must repeat. Only the WQE's DS units are kept: a
/// BlueFlame copy is whole 64-byte blocks, and the bytes past DS in its last block are whatever
/// the host's buffer held (rdma-core's `mlx5_bf_copy` copies them from its ring as they lie),
/// which the device ignores.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BfCopy {
    qpn: u32,
    wqe: u16,
    /// Bytes of `bytes` to compare: the DS units, fewer if the queue could not be read.
    len: usize,
    bytes: [u8; BF_HALF_MAX],
}

/// The largest BlueFlame half (`log_bf_reg_size` is at most 10: two halves of 512 bytes).
const BF_HALF_MAX: usize = 512;

impl BfCopy {
    /// Reads the WQE `wqe` of QP `qpn` from its send queue (one WQEBB at a time: the ring may
    /// wrap), `ds` units of 16 bytes.
    fn take(hw: &mut Hw<'_>, qpn: u32, wqe: u16, ds: u8) -> BfCopy {
        let mut copy = BfCopy {
            qpn,
            wqe,
            len: 0,
            bytes: [0; BF_HALF_MAX],
        };
        let Some(info) = QpInfo::load(hw.fw, qpn) else {
            return copy;
        };
        if info.sq_wqebbs == 0 {
            return copy;
        }
        let want = (usize::from(ds) * 16).min(BF_HALF_MAX);
        for (i, block) in copy.bytes[..want].chunks_mut(64).enumerate() {
            let slot = (u64::from(wqe) + i as u64) & u64::from(info.sq_wqebbs - 1);
            let at = info.start + info.sq_offset + slot * 64;
            if wqe::read_queue(hw.iommu, &info.pas, info.page, at, block).is_err() {
                break;
            }
            copy.len += block.len();
        }
        copy
    }
}

/// Compares the doorbell or BlueFlame word `value` at byte `at` of the half at `half` with the
/// WQE its doorbell named ([`BfCopy`]); a difference is a [`DmaFaultKind::BlueFlameMismatch`].
fn blueflame(hw: &mut Hw<'_>, off: u64, half: u64, at: u64, value: u64) {
    let Some(copy) = hw.fw.engine.bf.get(&half) else {
        hw.faults.push(DmaFault {
            iova: off,
            len: 8,
            kind: DmaFaultKind::BlueFlameMismatch,
            what: format!("BlueFlame word at {off:#x} without a doorbell"),
        });
        return;
    };
    let Some(ring) = usize::try_from(at)
        .ok()
        .and_then(|at| copy.bytes[..copy.len].get(at..at + 8))
    else {
        return;
    };
    if ring != value.to_be_bytes() {
        let (qpn, wqe) = (copy.qpn, copy.wqe);
        let held = u64::from_be_bytes(ring.try_into().unwrap_or_default());
        log::warn!("mlx5-sim: QP {qpn:#x} WQE {wqe}: BlueFlame byte {at} differs from the ring");
        hw.faults.push(DmaFault {
            iova: off,
            len: 8,
            kind: DmaFaultKind::BlueFlameMismatch,
            what: format!(
                "QP {qpn:#x} WQE {wqe}: BlueFlame word at byte {at} is {value:#018x}, the send queue holds {held:#018x}"
            ),
        });
    }
}

/// Handles a frame received from the wire.
pub(crate) fn receive(hw: &mut Hw<'_>, bytes: &[u8]) {
    hw.fw.engine.counters.rx_frames += 1;
    if !crate::fabric::packet::is_roce(bytes) {
        eth_rx::receive(hw, bytes);
        return;
    }
    // RoCE is received on the port's own MAC (or a group address): a switch floods unicast it
    // has not learned to every port, and the others' frames are not ours.
    if bytes.len() >= 6 && bytes[0] & 1 == 0 && bytes[..6] != hw.fw.vport.mac() {
        hw.fw.engine.counters.rx_not_ours += 1;
        return;
    }
    match frame::decode(bytes) {
        Ok(rx) => responder::dispatch(hw, rx),
        Err(frame::Refused::Icrc) => {
            log::info!("mlx5-sim: frame with a bad ICRC dropped");
            hw.fw.engine.counters.rx_icrc_errors += 1;
        }
        Err(frame::Refused::Malformed) => {
            log::info!("mlx5-sim: malformed frame dropped");
            hw.fw.engine.counters.rx_malformed += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psn_arithmetic_wraps_at_24_bits() {
        assert_eq!(psn_diff(5, 3), 2);
        assert_eq!(psn_diff(3, 5), -2);
        assert_eq!(psn_diff(0, 0xff_ffff), 1);
        assert_eq!(psn_diff(0xff_ffff, 0), -1);
        assert_eq!(psn_add(0xff_ffff, 2), 1);
    }
}
