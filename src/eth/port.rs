//! [`EthPort`]: one Ethernet send queue and one receive queue made ready to carry a network
//! stack's frames (issue #13 item 3) — the transport domain, a TIS, the SQ, the RQ behind a
//! direct TIR, the receive steering of the port's MAC (and broadcast, and what else the
//! [`RxFilter`] asks), one memory region of frame buffers, and two staging buffers in host
//! memory. `no_std`, no allocation after [`EthPort::open`], no lock but the CQs'.
//!
//! **Copies.** A frame is copied once each way: a received frame from its DMA buffer into the
//! receive stage, a frame to send from the transmit stage into its DMA buffer (its first
//! [`L2_INLINE`] bytes into the WQE instead). The stages are host memory the device cannot
//! reach, so the stack may borrow them as slices; device-visible memory is never borrowed
//! (docs/architecture.md, the io rule) — a device that writes a buffer after completing it can
//! change nothing the stack is reading.
//!
//! **Checksums.** With `checksum_offload`, the device fills the IPv4 header checksum of every
//! IPv4 frame sent and the TCP/UDP checksum of unfragmented TCP and UDP ones (the stack leaves
//! them alone); a received IPv4 TCP or UDP frame is passed up only if its completion says both
//! checksums are good ([`WcFlags::IP_CSUM_OK`], rdma-core's rule), any other IPv4 frame only if
//! its header checksum is good (checked here: the device's L4 flag does not cover ICMP). Frames
//! refused count in [`EthStats::rx_checksum_drops`].

use super::csum::{checksum_ok, offloads};
use super::flow::{MacSteering, RxFilter};
use super::rq::{EthRq, Strides};
use super::rqt::Rqt;
use super::rss::MS_RSS_KEY;
use super::rules::{FlowAction, FlowMatch, FlowTable};
use super::sq::{Checksum, EthSq, EthWr, L2_INLINE};
use super::tir::{RssFields, Tir};
use super::tis::{Tis, TransportDomain};
use crate::error::{Error, Result};
use crate::io::platform::Platform;
use crate::io::HostBytes;
use crate::mr::{MemoryRegion, MrAccess};
use crate::qp::{RecvWr, Sge};
use crate::verbs::cq::Cq;
use crate::{Device, Wc, WcFlags, WcOpcode, WcStatus};

/// Ethernet header bytes (no VLAN tag).
const ETH_HLEN: usize = 14;
/// The largest IP MTU a port accepts (a 9000-byte jumbo frame and headroom).
pub const MAX_MTU: u16 = 9216;
/// Receive completions examined per [`EthPort::recv`] call at most (refused frames included),
/// so that a flood of bad frames cannot hold the caller.
const RECV_BUDGET: usize = 64;

/// How to open an [`EthPort`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthPortConfig<'m> {
    /// The IP MTU: frames carry up to `mtu + 14` bytes. 68..=[`MAX_MTU`].
    pub mtu: u16,
    /// Frames in flight on the send queue.
    pub tx_depth: u32,
    /// Receive buffers posted.
    pub rx_depth: u32,
    /// The port's MAC (`None`: the vport's).
    pub mac: Option<[u8; 6]>,
    /// Further destination MACs accepted (multicast groups, a second address).
    pub extra_macs: &'m [[u8; 6]],
    /// Accept broadcast frames (ARP needs them).
    pub broadcast: bool,
    /// Accept every multicast frame.
    pub all_multicast: bool,
    /// Accept every frame.
    pub promiscuous: bool,
    /// Let the device fill and check IPv4, TCP and UDP checksums.
    pub checksum_offload: bool,
    /// The Toeplitz key of RSS (several receive queues; `None`: Microsoft's published key).
    pub rss_key: Option<&'m [u8; 40]>,
    /// Receive through striding RQs (`None`: one frame a buffer): `rx_depth` buffers a queue
    /// of this geometry, each holding frames from a stride boundary, one after another —
    /// fewer receive WQEs to post for the same frames. A buffer must hold a whole frame
    /// (`mtu + 14` bytes). The receive CQs may be compressed too
    /// ([`Device::create_cq_compressed`](crate::Device::create_cq_compressed)).
    pub rx_strides: Option<Strides>,
}

impl Default for EthPortConfig<'_> {
    fn default() -> Self {
        EthPortConfig {
            mtu: 1500,
            tx_depth: 64,
            rx_depth: 64,
            mac: None,
            extra_macs: &[],
            broadcast: true,
            all_multicast: false,
            promiscuous: false,
            checksum_offload: true,
            rss_key: None,
            rx_strides: None,
        }
    }
}

/// What a port has carried.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EthStats {
    /// Frames posted to send.
    pub tx_frames: u64,
    /// Their bytes.
    pub tx_bytes: u64,
    /// Sends that failed (an error completion; the send queue stops until recovered).
    pub tx_errors: u64,
    /// Times the send queue was brought back after an error (ERR → RST → RDY, once every
    /// posted frame had completed, flushed).
    pub tx_recoveries: u64,
    /// Frames passed up.
    pub rx_frames: u64,
    /// Their bytes.
    pub rx_bytes: u64,
    /// Received frames refused for a bad checksum.
    pub rx_checksum_drops: u64,
    /// Receive completions in error.
    pub rx_errors: u64,
}

/// The send side: the SQ, its CQ and its buffers' accounting.
pub(crate) struct TxSide<'a, P: Platform> {
    pub(crate) sq: Option<EthSq<'a, P>>,
    cq: &'a Cq<'a, P>,
    /// Frame buffers (one per WQE in flight), from offset 0 of the region.
    slots: u32,
    posted: u64,
    done: u64,
    offload: bool,
    /// An error completion came: nothing is posted until the SQ is recovered.
    broken: bool,
    pub(crate) stats: EthStats,
}

/// Receive queues of a port at most.
pub(crate) const MAX_QUEUES: usize = 16;

/// An Ethernet port for a network stack: one SQ, one RQ or several behind RSS, steering,
/// buffers.
pub struct EthPort<'a, P: Platform> {
    dev: &'a Device<P>,
    mac: [u8; 6],
    mtu: u16,
    /// Bytes of a frame at most (`mtu + 14`).
    frame_max: usize,
    /// Bytes per frame buffer in the region (`frame_max` rounded up to 64).
    slot: usize,
    // Torn down in this order (fields drop in declaration order, too).
    steering: Option<MacSteering<'a, P>>,
    /// RSS: the traffic-type table between the MAC table and the TIRs.
    ttc: Option<FlowTable<'a, P>>,
    tirs: heapless::Vec<Tir<'a, P>, 7>,
    rqt: Option<Rqt<'a, P>>,
    rqs: heapless::Vec<EthRq<'a, P>, MAX_QUEUES>,
    pub(crate) tx: TxSide<'a, P>,
    tis: Option<Tis<'a, P>>,
    td: Option<TransportDomain<'a, P>>,
    pub(crate) mr: Option<MemoryRegion<'a, P>>,
    rx_cqs: &'a [Cq<'a, P>],
    rx_slots: u32,
    /// Bytes per receive buffer in the region (`slot`, or a striding RQ's buffer).
    rx_buf: usize,
    /// Striding receive queues (a buffer goes back once its last stride is used).
    striding: bool,
    /// The queue polled first next time (round robin).
    next_q: usize,
    /// Frames passed up, per receive queue.
    per_queue: [u64; MAX_QUEUES],
    pub(crate) rx_stage: Option<HostBytes>,
    pub(crate) tx_stage: Option<HostBytes>,
}

impl<P: Platform> core::fmt::Debug for EthPort<'_, P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("EthPort")
            .field("mac", &self.mac)
            .field("mtu", &self.mtu)
            .field("stats", &self.tx.stats)
            .finish()
    }
}

fn refuse(field: &'static str, requested: u64, max: u64, limit: &'static str) -> Error {
    Error::InvalidArgument {
        op: "open_eth_port",
        field,
        requested,
        max,
        limit,
    }
}

impl<'a, P: Platform> EthPort<'a, P> {
    /// Opens a port on `dev`: sends complete on `tx_cq`, receives on `rx_cq` (two CQs: a
    /// receive CQ serves one RQ alone). Every object is made, the receive buffers posted and
    /// the steering set before this returns; on an error, what was made is torn down.
    pub fn open(
        dev: &'a Device<P>,
        tx_cq: &'a Cq<'a, P>,
        rx_cq: &'a Cq<'a, P>,
        cfg: &EthPortConfig<'_>,
    ) -> Result<Self> {
        Self::open_rss(dev, tx_cq, core::slice::from_ref(rx_cq), cfg)
    }

    /// Opens a port with one receive queue per CQ of `rx_cqs` (a power of two up to
    /// `MAX_QUEUES`, 16). With more than one, received frames are spread by RSS as mlx5e spreads
    /// them: the MAC table forwards to a traffic-type table (level 1) whose rules send UDP (over
    /// IPv4 or IPv6) to a TIR hashing addresses and UDP ports, TCP to one hashing addresses and
    /// TCP ports, other IP to one hashing the addresses (each over an RQT of every queue, the
    /// Toeplitz hash under `cfg.rss_key`), and everything else to the first queue.
    pub fn open_rss(
        dev: &'a Device<P>,
        tx_cq: &'a Cq<'a, P>,
        rx_cqs: &'a [Cq<'a, P>],
        cfg: &EthPortConfig<'_>,
    ) -> Result<Self> {
        if !(68..=MAX_MTU).contains(&cfg.mtu) {
            return Err(refuse(
                "mtu",
                u64::from(cfg.mtu),
                u64::from(MAX_MTU),
                "IP MTU 68..=9216",
            ));
        }
        let n = rx_cqs.len();
        if n == 0 || n > MAX_QUEUES || !n.is_power_of_two() {
            return Err(refuse(
                "rx_cqs",
                n as u64,
                MAX_QUEUES as u64,
                "receive queues: a power of two, 1..=16",
            ));
        }
        for (k, c) in rx_cqs.iter().enumerate() {
            if core::ptr::eq(tx_cq, c) || rx_cqs[..k].iter().any(|o| core::ptr::eq(o, c)) {
                return Err(refuse(
                    "rx_cq",
                    k as u64,
                    0,
                    "a CQ of its own per receive queue (its CQEs name the flow tag, not the RQ)",
                ));
            }
        }
        for (field, d) in [("tx_depth", cfg.tx_depth), ("rx_depth", cfg.rx_depth)] {
            if !(1..=4096).contains(&d) {
                return Err(refuse(
                    field,
                    u64::from(d),
                    4096,
                    "buffers per queue 1..=4096",
                ));
            }
        }
        let pd = dev.pd();
        let mac = cfg.mac.unwrap_or(dev.vport().mac);
        let frame_max = usize::from(cfg.mtu) + ETH_HLEN;
        let slot = frame_max.next_multiple_of(64);
        let (tx_slots, rx_slots) = (cfg.tx_depth, cfg.rx_depth);
        let rx_buf = match cfg.rx_strides {
            Some(st) if (st.buffer_bytes() as usize) < frame_max => {
                return Err(refuse(
                    "rx_strides",
                    u64::from(st.buffer_bytes()),
                    frame_max as u64,
                    "a striding receive buffer holds a whole frame (mtu + 14 bytes)",
                ));
            }
            Some(st) => st.buffer_bytes() as usize,
            None => slot,
        };
        let mut port = EthPort {
            dev,
            mac,
            mtu: cfg.mtu,
            frame_max,
            slot,
            steering: None,
            ttc: None,
            tirs: heapless::Vec::new(),
            rqt: None,
            rqs: heapless::Vec::new(),
            tx: TxSide {
                sq: None,
                cq: tx_cq,
                slots: tx_slots,
                posted: 0,
                done: 0,
                // Without `csum_cap` the stack computes and checks every checksum itself.
                offload: cfg.checksum_offload && dev.caps().eth("csum_cap") == Some(1),
                broken: false,
                stats: EthStats::default(),
            },
            tis: None,
            td: None,
            mr: None,
            rx_cqs,
            rx_slots,
            rx_buf,
            striding: cfg.rx_strides.is_some(),
            next_q: 0,
            per_queue: [0; MAX_QUEUES],
            rx_stage: None,
            tx_stage: None,
        };
        let stage = || {
            HostBytes::alloc(dev.platform(), frame_max).map_err(|source| Error::Platform {
                op: "allocate an Ethernet port's staging buffer",
                source,
            })
        };
        port.rx_stage = Some(stage()?);
        port.tx_stage = Some(stage()?);
        let bytes = slot * tx_slots as usize + rx_buf * n * rx_slots as usize;
        let access = MrAccess {
            local_write: true,
            ..MrAccess::default()
        };
        port.mr = Some(dev.alloc_mr(pd, bytes, access)?);
        let td = TransportDomain::alloc(dev)?;
        port.tis = Some(Tis::create(dev, &td)?);
        port.td = Some(td);
        if let Some(tis) = &port.tis {
            port.tx.sq = Some(EthSq::create(dev, tx_cq, tis, tx_slots)?);
        }
        for (q, cq) in rx_cqs.iter().enumerate() {
            let mut rq = match cfg.rx_strides {
                Some(st) => EthRq::create_striding(dev, cq, rx_slots, st)?,
                None => EthRq::create(dev, cq, rx_slots)?,
            };
            for i in 0..rx_slots {
                post_rx(&mut rq, i, port.rx_sge(q, i)?)?;
            }
            let _ = port.rqs.push(rq);
        }
        let mut macs: heapless::Vec<[u8; 6], { super::flow::MAX_MACS }> = heapless::Vec::new();
        for m in core::iter::once(&mac).chain(cfg.extra_macs) {
            macs.push(*m).map_err(|_| {
                refuse(
                    "extra_macs",
                    cfg.extra_macs.len() as u64,
                    super::flow::MAX_MACS as u64 - 1,
                    "addresses of the steering table, the port's own included",
                )
            })?;
        }
        let filter = RxFilter {
            macs: &macs,
            broadcast: cfg.broadcast,
            all_multicast: cfg.all_multicast,
            promiscuous: cfg.promiscuous,
        };
        port.steer(cfg, &filter)?;
        log::debug!(
            "eth port {mac:02x?}: mtu {}, {tx_slots} tx / {rx_slots} rx buffers of {slot} bytes",
            cfg.mtu
        );
        Ok(port)
    }

    /// The port's MAC.
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// The IP MTU.
    pub fn mtu(&self) -> u16 {
        self.mtu
    }

    /// Bytes of the largest frame (`mtu + 14`).
    pub fn frame_max(&self) -> usize {
        self.frame_max
    }

    /// Bytes per frame buffer in the region.
    #[cfg(feature = "smoltcp")]
    pub(crate) fn slot_bytes(&self) -> usize {
        self.slot
    }

    /// Whether the device fills and checks checksums.
    pub fn checksum_offload(&self) -> bool {
        self.tx.offload
    }

    /// What the port has carried.
    pub fn stats(&self) -> EthStats {
        self.tx.stats
    }

    /// The SQ and (first) RQ numbers.
    pub fn queues(&self) -> (u32, u32) {
        (
            self.tx.sq.as_ref().map_or(0, EthSq::sqn),
            self.rqs.first().map_or(0, EthRq::rqn),
        )
    }

    /// Where receive buffer `i` of queue `q` lies in the region.
    fn rx_offset(&self, q: usize, i: u32) -> usize {
        self.slot * self.tx.slots as usize + self.rx_buf * (q * self.rx_slots as usize + i as usize)
    }

    /// The TIRs and the steering: one direct TIR, or (several queues) the RQT, the RSS TIRs
    /// and the traffic-type table; then the MAC table as NIC receive's root.
    fn steer(&mut self, cfg: &EthPortConfig<'_>, filter: &RxFilter<'_>) -> Result<()> {
        let dev = self.dev;
        let (td, rq0) = (self.td.as_ref().ok_or(GONE)?, self.rqs.first().ok_or(GONE)?);
        let direct = Tir::direct(dev, td, rq0)?;
        if self.rqs.len() == 1 {
            self.steering = Some(MacSteering::with_filter(dev, filter, &direct)?);
            let _ = self.tirs.push(direct);
            return Ok(());
        }
        let _ = self.tirs.push(direct);
        let refs: heapless::Vec<&EthRq<'a, P>, MAX_QUEUES> = self.rqs.iter().collect();
        let rqt = Rqt::create(dev, &refs)?;
        let key = cfg.rss_key.unwrap_or(&MS_RSS_KEY);
        let mut ttc = FlowTable::create(dev, 1, 6)?;
        for (ethertype, proto, fields) in [
            (0x0800, Some(17), RssFields::Ipv4Udp),
            (0x0800, Some(6), RssFields::Ipv4Tcp),
            (0x86dd, Some(17), RssFields::Ipv6Udp),
            (0x86dd, Some(6), RssFields::Ipv6Tcp),
            (0x0800, None, RssFields::Ipv4),
            (0x86dd, None, RssFields::Ipv6),
        ] {
            let tir = Tir::rss(dev, td, &rqt, key, fields)?;
            let m = FlowMatch {
                ethertype: Some(ethertype),
                ip_protocol: proto,
                ..FlowMatch::default()
            };
            let r = ttc.add(&m, FlowAction::Tir(tir.tirn()));
            let _ = self.tirs.push(tir);
            r?;
        }
        let first = self.tirs.first().map_or(0, Tir::tirn);
        ttc.add(&FlowMatch::default(), FlowAction::Tir(first))?;
        self.rqt = Some(rqt);
        let steering = MacSteering::with_filter_to_table(dev, filter, &ttc);
        self.ttc = Some(ttc);
        self.steering = Some(steering?);
        Ok(())
    }

    /// Frames each receive queue passed up.
    pub fn queue_frames(&self) -> &[u64] {
        &self.per_queue[..self.rqs.len()]
    }

    /// Receive buffer `i` of queue `q` (of the region's receive part).
    fn rx_sge(&self, q: usize, i: u32) -> Result<Sge> {
        let mr = self.mr.as_ref().ok_or(GONE)?;
        Ok(Sge {
            addr: mr.addr() + self.rx_offset(q, i) as u64,
            length: if self.striding {
                self.rx_buf as u32
            } else {
                self.frame_max as u32
            },
            lkey: mr.lkey(),
        })
    }

    /// Whether a frame can be sent now (completed sends reclaimed first).
    pub fn can_send(&mut self) -> Result<bool> {
        self.tx.reclaim()?;
        Ok(self.tx.room())
    }

    /// Sends `frame` (14..=`frame_max` bytes). `Ok(false)` if the send queue is full.
    pub fn send(&mut self, frame: &[u8]) -> Result<bool> {
        if frame.len() < ETH_HLEN || frame.len() > self.frame_max {
            return Err(Error::InvalidArgument {
                op: "eth port send",
                field: "frame length",
                requested: frame.len() as u64,
                max: self.frame_max as u64,
                limit: "14 bytes up to the MTU plus the Ethernet header",
            });
        }
        self.tx.reclaim()?;
        if !self.tx.room() {
            return Ok(false);
        }
        let mr = self.mr.as_ref().ok_or(GONE)?;
        self.tx.post(mr, self.slot, frame)?;
        Ok(true)
    }

    /// Receives one frame into the receive stage and returns its length, or `None` if none
    /// is waiting. Refused frames (bad checksums) and receives completed in error (counted in
    /// [`EthStats::rx_errors`]) have their buffers posted again and are skipped, up to a budget
    /// per call.
    pub fn recv(&mut self) -> Result<Option<usize>> {
        let n = self.rqs.len();
        for _ in 0..RECV_BUDGET {
            let mut wc = [Wc::default()];
            let mut from = None;
            for k in 0..n {
                let q = (self.next_q + k) % n;
                if self.rx_cqs.get(q).ok_or(GONE)?.poll(&mut wc)? == 1 {
                    from = Some(q);
                    break;
                }
            }
            let Some(q) = from else {
                return Ok(None);
            };
            self.next_q = (q + 1) % n;
            let wc = wc[0];
            let i = wc.wr_id as u32;
            if wc.status != WcStatus::Success || wc.opcode != WcOpcode::Recv || i >= self.rx_slots {
                self.tx.stats.rx_errors += 1;
                log::warn!(
                    "eth port rx: {:?} {:?} wr_id {}",
                    wc.status,
                    wc.opcode,
                    wc.wr_id
                );
                if wc.status == WcStatus::WrFlushErr {
                    return Err(Error::QpState {
                        qpn: self.queues().1,
                        state: crate::qp::QpState::Err,
                        op: "eth port recv (the RQ flushed)",
                    });
                }
                // The buffer goes back whatever the completion says (a frame too long for it,
                // say), as mlx5e reuses the WQE of an error CQE: else each such frame a peer
                // sends costs a buffer for good, and `rx_depth` of them leave the port deaf.
                if i < self.rx_slots {
                    match (self.rx_sge(q, i), self.rqs.get_mut(q)) {
                        (Ok(sge), Some(rq)) => post_rx(rq, i, sge)?,
                        (Err(e), _) => return Err(e),
                        (_, None) => return Err(GONE),
                    }
                }
                continue;
            }
            // The driver's CQ path already bounds byte_len by the posted buffer (a striding RQ's
            // frame by the strides it took, `offset` inside the buffer).
            let len = (wc.byte_len as usize).min(self.frame_max);
            let off = self.rx_offset(q, i) + (wc.offset as usize).min(self.rx_buf - len);
            let (Some(mr), Some(stage)) = (self.mr.as_ref(), self.rx_stage.as_mut()) else {
                return Err(GONE);
            };
            let copied = mr.read(off, &mut stage.as_mut_slice()[..len]);
            // The buffer goes back whatever the frame holds — a striding RQ's once the device
            // is done with it (its last frame, or the filler for the strides left).
            let done = !self.striding || wc.wc_flags.contains(WcFlags::RECV_BUFFER_DONE);
            let reposted = match (done, self.rx_sge(q, i), self.rqs.get_mut(q)) {
                (false, _, _) => Ok(()),
                (true, Ok(sge), Some(rq)) => post_rx(rq, i, sge),
                (true, Err(e), _) => Err(e),
                (true, _, None) => Err(GONE),
            };
            copied?;
            reposted?;
            // A filler: no frame, the buffer given back above.
            if len == 0 && self.striding {
                continue;
            }
            let frame = &self.rx_stage.as_ref().ok_or(GONE)?.as_slice()[..len];
            if self.tx.offload && !checksum_ok(frame, wc.wc_flags) {
                self.tx.stats.rx_checksum_drops += 1;
                continue;
            }
            self.tx.stats.rx_frames += 1;
            self.tx.stats.rx_bytes += len as u64;
            self.per_queue[q] += 1;
            return Ok(Some(len));
        }
        Ok(None)
    }

    /// The frame [`EthPort::recv`] last returned (`len` bytes).
    pub fn received(&self, len: usize) -> &[u8] {
        self.rx_stage
            .as_ref()
            .map_or(&[][..], |s| &s.as_slice()[..len.min(s.len())])
    }

    /// Tears everything down (steering, TIR, RQ, SQ, TIS, TD, the region, the stages); the
    /// first error is returned, everything else still torn down.
    pub fn close(mut self) -> Result<()> {
        self.teardown()
    }

    fn teardown(&mut self) -> Result<()> {
        let mut r = Ok(());
        let mut keep = |x: Result<()>| {
            if r.is_ok() {
                r = x;
            }
        };
        if let Some(s) = self.steering.take() {
            keep(s.destroy());
        }
        if let Some(t) = self.ttc.take() {
            keep(t.destroy());
        }
        while let Some(t) = self.tirs.pop() {
            keep(t.destroy());
        }
        if let Some(t) = self.rqt.take() {
            keep(t.destroy());
        }
        while let Some(q) = self.rqs.pop() {
            keep(q.destroy());
        }
        if let Some(q) = self.tx.sq.take() {
            keep(q.destroy());
        }
        if let Some(t) = self.tis.take() {
            keep(t.destroy());
        }
        if let Some(t) = self.td.take() {
            keep(t.dealloc());
        }
        if let Some(m) = self.mr.take() {
            keep(m.dereg().map(drop));
        }
        for s in [self.rx_stage.take(), self.tx_stage.take()]
            .into_iter()
            .flatten()
        {
            s.release(self.dev.platform());
        }
        r
    }
}

impl<P: Platform> Drop for EthPort<'_, P> {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            log::warn!("eth port {:02x?} teardown at drop: {e}", self.mac);
        }
    }
}

/// Posts receive buffer `sge` as receive `i` of `rq`.
fn post_rx<P: Platform>(rq: &mut EthRq<'_, P>, i: u32, sge: Sge) -> Result<()> {
    rq.post_recv(&[RecvWr {
        wr_id: u64::from(i),
        sg_list: &[sge],
    }])
}

/// The error of a port whose parts are gone (torn down).
const GONE: Error = Error::Unsupported {
    what: "an Ethernet port already torn down",
    found: 0,
};

impl<'a, P: Platform> TxSide<'a, P> {
    /// Takes the send completions in (in order: one per frame, every frame signaled).
    pub(crate) fn reclaim(&mut self) -> Result<()> {
        let mut wc = [Wc::default(); 16];
        loop {
            let n = self.cq.poll(&mut wc)?;
            for c in &wc[..n] {
                if c.status != WcStatus::Success {
                    self.stats.tx_errors += 1;
                    self.broken = true;
                    log::warn!("eth port tx: {:?} wr_id {}", c.status, c.wr_id);
                }
                self.done += 1;
            }
            if n < wc.len() {
                break;
            }
        }
        // After an error, once every frame posted has completed (flushed), the SQ is brought
        // back (mlx5e's TX recovery).
        if self.broken && self.done == self.posted {
            if let Some(sq) = self.sq.as_mut() {
                if sq.recover()? {
                    self.stats.tx_recoveries += 1;
                }
                self.broken = false;
            }
        }
        Ok(())
    }

    /// Whether a frame buffer and a WQE are free.
    pub(crate) fn room(&self) -> bool {
        !self.broken
            && self.posted.wrapping_sub(self.done) < u64::from(self.slots)
            && self.sq.as_ref().is_some_and(|s| s.room() > 0)
    }

    /// Posts `frame` through frame buffer `posted % slots` of `mr` (buffers of `slot` bytes).
    pub(crate) fn post(
        &mut self,
        mr: &MemoryRegion<'a, P>,
        slot: usize,
        frame: &[u8],
    ) -> Result<()> {
        let sq = self.sq.as_mut().ok_or(GONE)?;
        let mut head = [0u8; L2_INLINE];
        let n = frame.len().min(L2_INLINE);
        head[..n].copy_from_slice(&frame[..n]);
        let i = (self.posted % u64::from(self.slots)) as usize;
        let rest = frame.get(L2_INLINE..).unwrap_or(&[]);
        let sge = [Sge {
            addr: mr.addr() + (i * slot) as u64,
            length: rest.len() as u32,
            lkey: mr.lkey(),
        }];
        if !rest.is_empty() {
            mr.write(i * slot, rest)?;
        }
        let checksum = if self.offload {
            offloads(frame)
        } else {
            Checksum::NONE
        };
        sq.post_send(&[EthWr {
            wr_id: self.posted,
            headers: &head,
            payload: if rest.is_empty() { &[] } else { &sge },
            checksum,
            vlan: None,
            tso_mss: None,
            signaled: true,
        }])?;
        self.posted += 1;
        self.stats.tx_frames += 1;
        self.stats.tx_bytes += frame.len() as u64;
        Ok(())
    }
}
