//! QP1, the general services interface QP, as a device service: one GSI QP (PRM `st` QP1) with
//! its receives always posted, sending and receiving 256-byte MADs to and from QP1 of other
//! nodes over RoCE v2.
//!
//! It is programmed as Linux's ib_mad and mlx5_ib program theirs (docs/rdma-cm-facts.md §1):
//! Q_Key 0x80010000, P_Key index 0, MTU 256 and 2^8-byte messages, RESET → INIT → RTR → RTS
//! with send PSN 0; every send signaled, to QP 1 with the well-known Q_Key; receives of 40 + 256
//! bytes, the network header first (IPv4: its 20 bytes at 20..40; IPv6: the 40-byte header).

use crate::cm::mad::{Mad, MAD_LEN};
use crate::error::{Error, Result};
use crate::io::platform::Platform;
use crate::mr::{MemoryRegion, MrAccess};
use crate::qp::{Qp, QpAttr, QpAttrMask as M, QpCap, QpInitAttr, QpState, QpType, RecvWr};
use crate::qp::{SendOp, SendWr, Sge};
use crate::verbs::cq::Cq;
use crate::verbs::wqe::UdAddr;
use crate::{Device, WcOpcode, WcStatus};

/// The Q_Key of QP1 (IBTA: `IB_QP1_QKEY`).
pub const QP1_QKEY: u32 = 0x8001_0000;
/// Receives kept posted.
pub(super) const RECV_SLOTS: usize = 64;
/// Sends in flight at most.
pub(super) const SEND_SLOTS: usize = 32;
/// Bytes of a receive slot: the 40-byte network header area and the MAD.
const RECV_BYTES: usize = 40 + MAD_LEN;
/// Stride of the receive slots in the buffer.
const RECV_STRIDE: usize = 512;
/// Where the send slots start.
const SEND_BASE: usize = RECV_SLOTS * RECV_STRIDE;
/// Bytes of the buffer.
const BUF_LEN: usize = SEND_BASE + SEND_SLOTS * MAD_LEN;
/// Receive work requests carry this bit (and their slot) in their id.
const RECV_TAG: u64 = 1 << 32;

/// The CQ and buffer a [`Gsi`] works in (created first, since the QP borrows them).
pub struct GsiBufs<'d, P: Platform> {
    cq: Cq<'d, P>,
    mr: MemoryRegion<'d, P>,
}

impl<'d, P: Platform> GsiBufs<'d, P> {
    /// A CQ for QP1's sends and receives, and a registered buffer of its slots.
    pub fn new(dev: &'d Device<P>) -> Result<Self> {
        let pd = dev.pd();
        let cq = dev.create_cq((RECV_SLOTS + SEND_SLOTS) as u32)?;
        let mr = dev.alloc_mr(
            pd,
            BUF_LEN,
            MrAccess {
                local_write: true,
                ..MrAccess::default()
            },
        )?;
        Ok(Self { cq, mr })
    }

    /// Destroys the CQ and the buffer (after the [`Gsi`] is gone).
    pub fn destroy(self) -> Result<()> {
        self.mr.dereg()?;
        self.cq.destroy()
    }
}

impl<P: Platform> core::fmt::Debug for GsiBufs<'_, P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("GsiBufs")
            .field("cqn", &self.cq.cqn())
            .field("lkey", &self.mr.lkey())
            .finish()
    }
}

impl<P: Platform> core::fmt::Debug for Gsi<'_, P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Gsi")
            .field("qpn", &self.qp.qpn())
            .field("in_flight", &(self.posted - self.completed))
            .field("send_errors", &self.send_errors)
            .finish()
    }
}

/// Where a MAD goes: QP1 of the node at `gid`, through the next hop `mac`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MadAddr {
    /// The destination GID (IPv4-mapped or IPv6).
    pub gid: [u8; 16],
    /// The next hop's MAC.
    pub mac: [u8; 6],
    /// Our GID table index to send from.
    pub sgid_index: u8,
    /// IP hop limit.
    pub hop_limit: u8,
    /// IP traffic class.
    pub traffic_class: u8,
}

/// A MAD received on QP1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// The MAD.
    pub mad: Mad,
    /// The sender's GID (from the packet's source address).
    pub src_gid: [u8; 16],
    /// The GID it was sent to (our address).
    pub dst_gid: [u8; 16],
    /// The source QP (1 for a GSI peer).
    pub src_qp: u32,
}

/// The GSI QP, up and receiving.
pub struct Gsi<'a, P: Platform> {
    qp: Qp<'a, P>,
    bufs: &'a GsiBufs<'a, P>,
    /// Sends posted and completed.
    posted: u64,
    completed: u64,
    /// Sends that completed in error (counted, never silent).
    send_errors: u64,
    /// Receives dropped: not a whole MAD behind a network header, or completed in error.
    recv_dropped: u64,
}

impl<'a, P: Platform> Gsi<'a, P> {
    /// Creates QP1 on `port`, brings it to RTS and posts its receives. A device has one GSI QP
    /// at a time (the firmware refuses a second).
    pub fn open(dev: &'a Device<P>, bufs: &'a GsiBufs<'a, P>, port: u8) -> Result<Self> {
        let pd = dev.pd();
        let cap = QpCap {
            max_send_wr: SEND_SLOTS as u32,
            max_recv_wr: RECV_SLOTS as u32,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        let mut init = QpInitAttr::new(QpType::Gsi, &bufs.cq, &bufs.cq, cap);
        init.sq_sig_all = true;
        let mut qp = dev.create_qp(pd, &init)?;
        let a = QpAttr {
            qp_state: Some(QpState::Init),
            port_num: port,
            pkey_index: 0,
            qkey: QP1_QKEY,
            ..QpAttr::default()
        };
        qp.modify(&a, M::STATE | M::PKEY_INDEX | M::PORT | M::QKEY)?;
        let mut g = Gsi {
            qp,
            bufs,
            posted: 0,
            completed: 0,
            send_errors: 0,
            recv_dropped: 0,
        };
        for slot in 0..RECV_SLOTS {
            g.post_recv(slot)?;
        }
        let rtr = QpAttr {
            qp_state: Some(QpState::Rtr),
            ..QpAttr::default()
        };
        g.qp.modify(&rtr, M::STATE)?;
        let rts = QpAttr {
            qp_state: Some(QpState::Rts),
            sq_psn: 0,
            ..QpAttr::default()
        };
        g.qp.modify(&rts, M::STATE | M::SQ_PSN)?;
        Ok(g)
    }

    /// The GSI QP's number as the device named it (on the wire it is 1).
    pub fn qpn(&self) -> u32 {
        self.qp.qpn()
    }

    /// The platform's clock, in nanoseconds.
    pub fn now_ns(&self) -> u64 {
        self.qp.device().platform().now_ns()
    }

    /// Sends that completed in error so far.
    pub fn send_errors(&self) -> u64 {
        self.send_errors
    }

    /// Receives dropped so far ([`Gsi::recv`]): not a whole MAD behind a network header, or
    /// completed in error (a flush excepted).
    pub fn recv_dropped(&self) -> u64 {
        self.recv_dropped
    }

    fn post_recv(&mut self, slot: usize) -> Result<()> {
        let sge = [Sge {
            addr: self.bufs.mr.addr() + (slot * RECV_STRIDE) as u64,
            length: RECV_BYTES as u32,
            lkey: self.bufs.mr.lkey(),
        }];
        self.qp.post_recv(&[RecvWr {
            wr_id: RECV_TAG | slot as u64,
            sg_list: &sge,
        }])
    }

    /// Sends `mad` to QP1 at `to`. Send completions are reaped by [`Gsi::recv`]; with every
    /// send slot still in flight the send is refused ([`Error::QueueFull`]).
    pub fn send(&mut self, to: &MadAddr, mad: &Mad) -> Result<()> {
        if self.posted - self.completed >= SEND_SLOTS as u64 {
            return Err(Error::QueueFull {
                qpn: self.qp.qpn(),
                queue: "GSI send slots",
                outstanding: self.posted - self.completed,
                limit: SEND_SLOTS as u64,
            });
        }
        let slot = (self.posted % SEND_SLOTS as u64) as usize;
        let off = SEND_BASE + slot * MAD_LEN;
        self.bufs.mr.write(off, &mad.0)?;
        let sge = [Sge {
            addr: self.bufs.mr.addr() + off as u64,
            length: MAD_LEN as u32,
            lkey: self.bufs.mr.lkey(),
        }];
        let wr = SendWr {
            wr_id: slot as u64,
            op: SendOp::Send,
            signaled: true,
            ud: Some(UdAddr {
                remote_qpn: 1,
                // Bit 31 set: the QP's own Q_Key (0x80010000) goes on the wire, as ib_mad asks.
                qkey: 0x8000_0000,
                dgid: to.gid,
                dmac: to.mac,
                sgid_index: to.sgid_index,
                hop_limit: to.hop_limit,
                traffic_class: to.traffic_class,
                flow_label: 0,
                udp_sport: 0,
            }),
            ..SendWr::send(slot as u64, &sge)
        };
        self.qp.post_send(&[wr])?;
        self.posted += 1;
        Ok(())
    }

    /// The next MAD received, if any (send completions met on the way are accounted).
    /// Receives that are not a whole MAD behind a network header are dropped, counted
    /// ([`Gsi::recv_dropped`]) and re-posted.
    pub fn recv(&mut self) -> Result<Option<Received>> {
        let mut wc = [crate::Wc::default()];
        loop {
            if self.bufs.cq.poll(&mut wc)? == 0 {
                return Ok(None);
            }
            let w = wc[0];
            if w.wr_id & RECV_TAG == 0 {
                self.completed += 1;
                if w.status != WcStatus::Success {
                    self.send_errors += 1;
                    log::warn!("GSI send {} completed with {:?}", w.wr_id, w.status);
                }
                continue;
            }
            let slot = (w.wr_id & 0xffff) as usize;
            if slot >= RECV_SLOTS {
                return Err(Error::BadDeviceValue {
                    what: "GSI receive wr_id",
                    value: w.wr_id,
                    limit: RECV_SLOTS as u64,
                });
            }
            if w.status == WcStatus::WrFlushErr {
                // The QP left RTS (teardown): nothing to re-post.
                continue;
            }
            let got = self.take(slot, &w);
            self.post_recv(slot)?;
            match got? {
                Some(r) => return Ok(Some(r)),
                None => self.recv_dropped += 1,
            }
        }
    }

    /// The MAD in receive `slot`, if the completion describes a well-formed one.
    fn take(&self, slot: usize, w: &crate::Wc) -> Result<Option<Received>> {
        if w.status != WcStatus::Success
            || w.opcode != WcOpcode::Recv
            || (w.byte_len as usize) < RECV_BYTES
        {
            log::debug!("GSI receive dropped: {:?}, {} bytes", w.status, w.byte_len);
            return Ok(None);
        }
        let mut b = [0u8; RECV_BYTES];
        self.bufs.mr.read(slot * RECV_STRIDE, &mut b)?;
        let Some((src_gid, dst_gid)) = network_gids(&b[..40]) else {
            log::debug!("GSI receive dropped: no IPv4 or IPv6 header in front of the MAD");
            return Ok(None);
        };
        let mut mad = Mad::default();
        mad.0.copy_from_slice(&b[40..]);
        Ok(Some(Received {
            mad,
            src_gid,
            dst_gid,
            src_qp: w.src_qp,
        }))
    }

    /// Moves QP1 to ERROR and destroys it.
    pub fn close(self) -> Result<()> {
        self.qp.destroy()
    }
}

/// The source and destination GIDs of the 40-byte network header area of a RoCE v2 receive:
/// an IPv4 header at 20..40 (version 4, IHL 5, a valid checksum, as ib_core recognises it),
/// or an IPv6 header.
pub(super) fn network_gids(h: &[u8]) -> Option<([u8; 16], [u8; 16])> {
    if h.len() < 40 {
        return None;
    }
    let v4 = &h[20..40];
    if v4[0] == 0x45 && ipv4_checksum_ok(v4) {
        let mapped = |a: &[u8]| {
            let mut g = [0u8; 16];
            g[10] = 0xff;
            g[11] = 0xff;
            g[12..].copy_from_slice(a);
            g
        };
        return Some((mapped(&v4[12..16]), mapped(&v4[16..20])));
    }
    if h[0] >> 4 == 6 {
        let mut s = [0u8; 16];
        let mut d = [0u8; 16];
        s.copy_from_slice(&h[8..24]);
        d.copy_from_slice(&h[24..40]);
        return Some((s, d));
    }
    None
}

fn ipv4_checksum_ok(h: &[u8]) -> bool {
    let mut sum: u32 = 0;
    for c in h.chunks(2) {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum == 0xffff
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_and_ipv6_headers_give_gids() {
        let mut h = [0u8; 40];
        // An IPv4 header 10.0.0.1 -> 10.0.0.2, UDP, TTL 64, with its checksum.
        let ip = [
            0x45, 0, 0x01, 0x34, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        h[20..].copy_from_slice(&ip);
        let mut sum: u32 = 0;
        for c in ip.chunks(2) {
            sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        let ck = !(sum as u16);
        h[30..32].copy_from_slice(&ck.to_be_bytes());
        let (s, d) = network_gids(&h).unwrap();
        assert_eq!(&s[10..], &[0xff, 0xff, 10, 0, 0, 1]);
        assert_eq!(&d[10..], &[0xff, 0xff, 10, 0, 0, 2]);
        // A bad checksum is no IPv4 header.
        h[31] ^= 1;
        assert_eq!(network_gids(&h), None);
        let mut v6 = [0u8; 40];
        v6[0] = 0x60;
        v6[8] = 0xfe;
        v6[24] = 0xfd;
        let (s, d) = network_gids(&v6).unwrap();
        assert_eq!((s[0], d[0]), (0xfe, 0xfd));
    }
}
