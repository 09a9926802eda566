//! [`smoltcp::phy::Device`] over an [`EthPort`] (feature `smoltcp`, `no_std`): any `no_std`
//! system gets TCP/IP over the NIC with smoltcp's `Interface` and sockets.
//!
//! `receive` takes one completed receive (the frame copied into the port's receive stage, its
//! buffer posted again) and lends smoltcp the stage; the transmit token handed with it, and
//! `transmit`'s, exist only while a send buffer and a WQE are free (completed sends are
//! reclaimed first), and its `consume` lets smoltcp build the frame in the transmit stage,
//! then posts it. The capabilities say Ethernet and the port's MTU, and —
//! with `checksum_offload` — that the device computes and checks IPv4, TCP and UDP checksums
//! (smoltcp computes and checks only ICMP's); the port drops received frames whose checksums
//! the device found bad ([`EthStats::rx_checksum_drops`](super::EthStats)).
//!
//! An error of the queues (a send completing in error, a flushed RQ) cannot be returned
//! through smoltcp's traits: it is logged and counted in the port's stats, and no token is
//! handed out while the queue is stopped.

use smoltcp::phy::{self, Checksum, ChecksumCapabilities, DeviceCapabilities, Medium};
use smoltcp::time::Instant;

use super::port::{EthPort, TxSide};
use crate::io::platform::Platform;
use crate::io::HostBytes;
use crate::mr::MemoryRegion;

/// A received frame, lent from the port's receive stage.
#[derive(Debug)]
pub struct RxToken<'t> {
    frame: &'t [u8],
}

/// Room for one frame to send.
pub struct TxToken<'t, 'a, P: Platform> {
    tx: &'t mut TxSide<'a, P>,
    mr: &'t MemoryRegion<'a, P>,
    stage: &'t mut HostBytes,
    slot: usize,
}

impl<P: Platform> core::fmt::Debug for TxToken<'_, '_, P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TxToken").field("slot", &self.slot).finish()
    }
}

impl phy::RxToken for RxToken<'_> {
    fn consume<R, F>(self, f: F) -> R
    where
        F: FnOnce(&[u8]) -> R,
    {
        f(self.frame)
    }
}

impl<P: Platform> phy::TxToken for TxToken<'_, '_, P> {
    fn consume<R, F>(self, len: usize, f: F) -> R
    where
        F: FnOnce(&mut [u8]) -> R,
    {
        // smoltcp asks at most the MTU it was told, which the stage holds.
        let n = len.min(self.stage.len());
        if n < len {
            log::error!("smoltcp asked {len} bytes to send, over the port's {n}");
        }
        let buf = &mut self.stage.as_mut_slice()[..n];
        let r = f(buf);
        if n == len {
            if let Err(e) = self.tx.post(self.mr, self.slot, buf) {
                log::warn!("eth port send of {len} bytes: {e}");
                self.tx.stats.tx_errors += 1;
            }
        }
        r
    }
}

impl<P: Platform> EthPort<'_, P> {
    /// Whether a frame can go out now (completed sends reclaimed first; an error doing so is
    /// logged and counts as no room).
    fn tx_ready(&mut self) -> bool {
        match self.tx.reclaim() {
            Ok(()) => self.tx.room(),
            Err(e) => {
                log::warn!("eth port send completions: {e}");
                false
            }
        }
    }
}

/// A transmit token over the port's send side, region and transmit stage (fields apart, so
/// that a receive token may borrow the receive stage beside it).
fn tx_token<'t, 'a, P: Platform>(
    tx: &'t mut TxSide<'a, P>,
    mr: &'t Option<MemoryRegion<'a, P>>,
    stage: &'t mut Option<HostBytes>,
    slot: usize,
) -> Option<TxToken<'t, 'a, P>> {
    Some(TxToken {
        tx,
        mr: mr.as_ref()?,
        stage: stage.as_mut()?,
        slot,
    })
}

impl<'a, P: Platform> phy::Device for EthPort<'a, P> {
    type RxToken<'t>
        = RxToken<'t>
    where
        Self: 't;
    type TxToken<'t>
        = TxToken<'t, 'a, P>
    where
        Self: 't;

    fn receive(&mut self, _timestamp: Instant) -> Option<(RxToken<'_>, TxToken<'_, 'a, P>)> {
        // The reply's room first: a frame taken in without it would be lost.
        if !self.tx_ready() {
            return None;
        }
        let len = match self.recv() {
            Ok(Some(len)) => len,
            Ok(None) => return None,
            Err(e) => {
                log::warn!("eth port receive: {e}");
                return None;
            }
        };
        let slot = self.slot_bytes();
        let frame = &self.rx_stage.as_ref()?.as_slice()[..len];
        let tx = tx_token(&mut self.tx, &self.mr, &mut self.tx_stage, slot)?;
        Some((RxToken { frame }, tx))
    }

    fn transmit(&mut self, _timestamp: Instant) -> Option<TxToken<'_, 'a, P>> {
        if !self.tx_ready() {
            return None;
        }
        let slot = self.slot_bytes();
        tx_token(&mut self.tx, &self.mr, &mut self.tx_stage, slot)
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = self.frame_max();
        let device = if self.checksum_offload() {
            Checksum::None
        } else {
            Checksum::Both
        };
        let mut c = ChecksumCapabilities::default();
        c.ipv4 = device;
        c.udp = device;
        c.tcp = device;
        c.icmpv4 = Checksum::Both;
        caps.checksum = c;
        caps
    }
}
