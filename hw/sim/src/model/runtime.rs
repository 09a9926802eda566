//! The data path's runtime of the model's objects ([`Runtime`]): per QP the transport state
//! ([`QpRt`]: PSNs, outstanding requests, timers, the message being received), per CQ, SRQ, EQ
//! and Ethernet queue its counters, the BlueFlame copies, the frames to put on the wire, the
//! interrupts raised, the decoded QP contexts and the data path's counters.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use super::mkey::IovaPieces;
use super::objects::ObjectKind;
use super::qp_info::QpInfo;
use crate::fabric::frame::{self, Packet, Route};
use crate::fabric::pool;

/// The data segments of a receive WQE.
pub(crate) type RecvSges = crate::small::SmallList<Sge, 4>;

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
    /// RoCE frames of force-loopback QPs (path `fl`): kept in the function and taken by its own
    /// receive side, never on the wire (not in `tx_frames` or `rx_frames`).
    pub fl_frames: u64,
    /// Ethernet frames Ethernet send queues put on the wire (a TSO WQE's segments each count).
    pub eth_tx_frames: u64,
    /// Received frames that were not RoCE (they go to the receive flow tables).
    pub eth_rx_frames: u64,
    /// Ethernet frames written to an RQ with a completion.
    pub eth_rx_delivered: u64,
    /// Ethernet frames the flow tables dropped (no root table, a miss, a DROP entry).
    pub eth_rx_steering_drops: u64,
    /// Frames (received or sent) whose software-steering walk ended in an error: an address
    /// nothing lives at, unwritten SW ICM, an STE of the wrong side, a lookup or action not
    /// modelled, a loop (dropped).
    pub sw_steering_errors: u64,
    /// Copies of received Ethernet frames flow samplers took that their sample table kept
    /// (each then delivered as the table says).
    pub eth_rx_sampled: u64,
    /// Ethernet frames for an RQ with no posted WQE (or not RDY): the Q counter's
    /// `out_of_buffer`.
    pub eth_rx_out_of_buffer: u64,
    /// Ethernet frames that met a receive error (too long for the WQE, a bad lkey): error CQEs.
    pub eth_rx_errors: u64,
    /// Completions written compressed (mini CQEs of CQE compression sessions).
    pub cqes_compressed: u64,
    /// CQE compression sessions written (title CQEs).
    pub cqe_sessions: u64,
    /// Filler CQEs of striding RQs: the strides a frame did not fit in, given back.
    pub eth_rx_mpw_fillers: u64,
    /// Looped-back multicast frames a TIR of the sender's own transport domain refused
    /// (`self_lb_block`).
    pub eth_rx_self_lb_blocked: u64,
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
    /// PAGE_FAULT events raised (on-demand paging: a WQE's or an RDMA access's page absent).
    pub page_faults: u64,
    /// Page faults resumed by PAGE_FAULT_RESUME (`error` clear).
    pub page_faults_resolved: u64,
    /// Page faults resumed with `error` set: the WQE or request completes in error.
    pub page_faults_failed: u64,
    /// Requests and responses dropped because their BTH P_Key does not match the QP's (`pkv`:
    /// the P_Key violation counter; counted in `rx_dropped` too).
    pub pkey_violations: u64,
    /// Datagrams dropped because their DETH Q_Key is not the QP's (`qkv`: the Q_Key violation
    /// counter; counted in `rx_dropped` too).
    pub qkey_violations: u64,
    /// DC requests dropped because their access key is not their DCT's (counted in
    /// `rx_dropped` too; each DCT counts its own in `dc_access_key_violation_count`).
    pub dc_key_violations: u64,
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
    pub(crate) sges: RecvSges,
    pub(crate) offset: u64,
}

/// A multi-packet RDMA WRITE in progress: its key and range, what is written, and the IOVA
/// pieces of the packet being placed (looked up again for every packet).
#[derive(Debug, Clone)]
pub(crate) struct WriteCtx {
    pub(crate) pieces: IovaPieces,
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

/// A striding RQ's place: the WQEs it has used up (against the doorbell record's count of
/// WQEs posted), the index of the WQE it fills, and the strides of that WQE already used.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct MpwRq {
    pub(crate) consumed: u16,
    pub(crate) index: u16,
    pub(crate) used: u32,
}

/// A frame an RQ with delay drop holds (what delivering it needs).
#[derive(Debug, Clone)]
pub(crate) struct HeldFrame {
    pub(crate) frame: Vec<u8>,
    pub(crate) h: crate::fabric::packet::Headers,
    pub(crate) flow_tag: u32,
    pub(crate) rss: (u32, u8),
}

/// An RQ's held frames, oldest first, the time they are dropped at, and the time the device
/// looks at its doorbell record again.
#[derive(Debug, Clone, Default)]
pub(crate) struct HeldRq {
    pub(crate) frames: VecDeque<HeldFrame>,
    pub(crate) deadline: u64,
    pub(crate) poll_at: u64,
}

/// A rate-limited send queue's clock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Paced {
    /// Device time at which the next frame may leave.
    pub(crate) next_at: u64,
    /// The last WQE of a doorbell whose WQEs wait for `next_at`.
    pub(crate) waiting: Option<u16>,
}

/// Where a page fault stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FaultState {
    /// Raised; PAGE_FAULT_RESUME has not come.
    Pending,
    /// Resumed with `error`: the WQE or request it stopped completes in error.
    Failed,
}

/// A page fault the device raised on a QP's queue and waits on: what PAGE_FAULT_RESUME must
/// name (`page_fault_type`, `wq_number`, `token`) and where it stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PageFault {
    /// The event's sub-type ([`mlx5_ifc::consts::odp`]: RDMA or WQE).
    pub(crate) subtype: u8,
    /// The fault type: a WQE fault type, or an RDMA fault's flags.
    pub(crate) kind: u8,
    /// The queue: the QP, or the SRQ of an SRQ receive WQE.
    pub(crate) wq: u32,
    /// The token the event carried (an RDMA fault's is its QP).
    pub(crate) token: u32,
    /// A WQE fault's WQE counter (0 for an RDMA fault).
    pub(crate) wqe: u16,
    pub(crate) state: FaultState,
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
    pub(crate) atomics: VecDeque<(u32, Original)>,
    /// Responder: the ACK owed, `(PSN, MSN)` (coalesced: sent when the device goes idle).
    pub(crate) ack_owed: Option<(u32, u32)>,
    /// The send queue's page fault: its WQEs wait from `sq_cc` until it is resumed.
    pub(crate) sq_fault: Option<PageFault>,
    /// The responder's page fault (a receive WQE's, an RDMA access's): requests are answered
    /// with RNR NAKs until it is resumed.
    pub(crate) rq_fault: Option<PageFault>,
    /// The send queue was resumed: it runs again at this time (device time).
    pub(crate) resume_at: Option<u64>,
    /// A DCI: the DCT it is connected to now.
    pub(crate) dc_peer: Option<super::dc::DciPeer>,
    /// A DCI: the send queue waits at a WQE for another destination until every request to
    /// the current one is acknowledged (a DCI talks to one DCT at a time).
    pub(crate) dc_waits: bool,
}

/// CQ state: producer counter, error, CQEs written.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CqRt {
    pub(crate) pi: u32,
    pub(crate) error: bool,
    pub(crate) written: u64,
}

/// What an executed atomic returned, as its response carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Original {
    /// A standard or 8-byte masked atomic's original word (an ATOMIC ACKNOWLEDGE).
    Word(u64),
    /// A 4-, 16- or 32-byte masked atomic's original bytes, big-endian: `(N, bytes)`.
    Bytes(u8, [u8; 32]),
}

/// The data path's runtime of the device's objects (beyond their contexts), kept in the model
/// so that destroying an object forgets it in one place ([`super::Model::remove`]).
#[derive(Debug, Default)]
pub(crate) struct Runtime {
    pub(crate) qps: BTreeMap<u32, QpRt>,
    /// The QPs (runtime keys) with a timer running (`timer`, `resend_at` or `resume_at`), so
    /// that finding the next deadline looks at them only, as a card's timer list does, not at
    /// every QP; kept by [`Runtime::note_timers`] wherever a timer starts or stops.
    pub(crate) timed: BTreeSet<u32>,
    pub(crate) cqs: BTreeMap<u32, CqRt>,
    /// CQs with an open CQE compression session (written at the end of the data path's pass).
    pub(crate) zip: BTreeMap<u32, super::completion::Session>,
    /// SRQ / RMP: `(next WQE index, WQEs consumed)`.
    pub(crate) srqs: BTreeMap<u32, (u16, u16)>,
    /// Ethernet SQs: the consumer counter (WQEBBs).
    pub(crate) eth_sqs: BTreeMap<u32, u16>,
    /// Rate-limited Ethernet SQs: when the next frame may leave, and the doorbell (its last
    /// WQE) that waits for that time.
    pub(crate) paced: BTreeMap<u32, Paced>,
    /// Ethernet RQs with delay drop holding frames until a WQE is posted.
    pub(crate) held: BTreeMap<u32, HeldRq>,
    /// Ethernet RQs: the consumer counter (WQEs).
    pub(crate) eth_rqs: BTreeMap<u32, u16>,
    /// Striding Ethernet RQs: where the next frame goes.
    pub(crate) mpw_rqs: BTreeMap<u32, MpwRq>,
    /// EQ producer counters.
    pub(crate) eqs: BTreeMap<u32, u32>,
    /// Flow samplers: the frames each has met (the sampling count).
    pub(crate) sampled: BTreeMap<u32, u64>,
    /// BlueFlame halves: BAR offset of the half → the WQE its last doorbell named.
    pub(crate) bf: BTreeMap<u64, BfCopy>,
    /// Frames to put on the wire.
    pub(crate) tx: Vec<Vec<u8>>,
    /// Copies of the RoCE multicast frames sent, which the port receives too
    /// ([`crate::engine::loop_back`]).
    pub(crate) looped: Vec<Vec<u8>>,
    /// Copies of the Ethernet multicast and broadcast frames an SQ sent, with the SQ's transport
    /// domain: the port receives them too unless its vport disables multicast local loopback
    /// ([`crate::engine::loop_back`]).
    pub(crate) eth_looped: Vec<(Vec<u8>, u32)>,
    /// The frames of force-loopback QPs, which the function's own receive side takes
    /// ([`crate::engine::loop_back`]) and the wire never sees.
    pub(crate) fl_looped: Vec<Vec<u8>>,
    /// MSI-X vectors raised and not yet delivered (an EQE written to an armed EQ raises its
    /// `intr`); [`crate::SimDevice::set_interrupt_sink`] gets them once the state is unlocked.
    pub(crate) irqs: Vec<u16>,
    pub(crate) counters: DatapathCounters,
    ip_id: u16,
    /// Decoded QP contexts ([`QpInfo::load`]).
    pub(super) qp_cache: BTreeMap<u32, Arc<QpInfo>>,
    /// The QPs that owe an ACK ([`QpRt::ack_owed`]).
    pub(crate) acks_owed: Vec<u32>,
    /// The token of the last WQE page fault raised (24 bits, counting).
    pub(crate) fault_token: u32,
}

impl Runtime {
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
                self.timed.remove(&id);
            }
            ObjectKind::Cq => {
                self.cqs.remove(&id);
                self.zip.remove(&id);
            }
            ObjectKind::Srq | ObjectKind::Rmp | ObjectKind::XrcSrq => {
                self.srqs.remove(&id);
            }
            ObjectKind::Eq => {
                self.eqs.remove(&id);
            }
            ObjectKind::FlowSampler => {
                self.sampled.remove(&id);
            }
            ObjectKind::Sq => {
                self.eth_sqs.remove(&id);
                self.paced.remove(&id);
            }
            ObjectKind::Rq => {
                self.eth_rqs.remove(&id);
                self.mpw_rqs.remove(&id);
                self.held.remove(&id);
            }
            _ => {}
        }
    }

    /// Records whether QP `key` has a timer running now.
    pub(crate) fn note_timers(&mut self, key: u32) {
        let on = self
            .qps
            .get(&key)
            .is_some_and(|q| q.timer.is_some() || q.resend_at.is_some() || q.resume_at.is_some());
        if on {
            self.timed.insert(key);
        } else {
            self.timed.remove(&key);
        }
    }

    /// The earliest timer of any QP (device time).
    pub(crate) fn deadline(&self) -> Option<u64> {
        let paced = self
            .paced
            .values()
            .filter(|p| p.waiting.is_some())
            .map(|p| p.next_at)
            .chain(self.held.values().map(|h| h.poll_at.min(h.deadline)));
        self.timed
            .iter()
            .filter_map(|k| self.qps.get(k))
            .flat_map(|q| [q.timer, q.resend_at, q.resume_at])
            .flatten()
            .chain(paced)
            .min()
    }

    /// Queues an Ethernet frame an SQ of transport domain `td` built on a port of MAC `own`: a
    /// unicast one to `own` stays in the device — looped back to the port when `uc_local_lb`,
    /// never on the wire — and a multicast or broadcast one is looped back too when
    /// `mc_local_lb` (`(uc_local_lb, mc_local_lb)`: the vport's local loopback settings).
    pub(crate) fn send_raw(&mut self, f: Vec<u8>, td: u32, own: [u8; 6], lb: (bool, bool)) {
        self.counters.eth_tx_frames += 1;
        if f.get(..6) == Some(&own[..]) {
            if lb.0 {
                self.eth_looped.push((f, td));
            }
            return;
        }
        self.counters.tx_frames += 1;
        self.counters.tx_bytes += f.len() as u64;
        if f.first().is_some_and(|b| b & 1 != 0) {
            if lb.1 {
                self.eth_looped.push((f.clone(), td));
            } else {
                log::trace!(
                    target: "mlx5_sim::engine::eth_rx",
                    "mlx5-sim: Ethernet frame {} not looped back (disable_mc_local_lb)",
                    crate::fabric::packet::Addrs(&f)
                );
            }
        }
        self.tx.push(f);
    }

    /// Queues a frame of `p` on `route` (a force-loopback route's for the function itself).
    pub(crate) fn send(&mut self, route: &Route, p: &Packet<'_>) {
        self.ip_id = self.ip_id.wrapping_add(1);
        let r = Route {
            ip_id: self.ip_id,
            ..*route
        };
        let mut f = pool::take();
        frame::encode_into(&mut f, &r, p);
        if r.loopback {
            self.counters.fl_frames += 1;
            self.fl_looped.push(f);
            return;
        }
        self.counters.tx_frames += 1;
        self.counters.tx_bytes += f.len() as u64;
        if r.dmac[0] & 1 != 0 {
            self.looped.push(f.clone());
        }
        self.tx.push(f);
    }
}

/// The bytes of the WQE a send doorbell named, as the send queue held them when it rang: what
/// the rest of that WQE's BlueFlame copy must repeat. Only the WQE's DS units are kept: a
/// BlueFlame copy is whole 64-byte blocks, and the bytes past DS in its last block are whatever
/// the host's buffer held (rdma-core's `mlx5_bf_copy` copies them from its ring as they lie),
/// which the device ignores.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BfCopy {
    pub(crate) qpn: u32,
    pub(crate) wqe: u16,
    /// Bytes of `bytes` to compare: the DS units, fewer if the queue could not be read.
    pub(crate) len: usize,
    pub(crate) bytes: [u8; BF_HALF_MAX],
}

/// The largest BlueFlame half (`log_bf_reg_size` is at most 10: two halves of 512 bytes).
pub(crate) const BF_HALF_MAX: usize = 512;
