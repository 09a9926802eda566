//! TCP/IP for the image: smoltcp over an [`EthPort`] of a NIC, sockets over static buffers, a
//! clock from the TSC, and idle waits that sleep on the NIC's receive interrupt.
//!
//! [`Snoop`] sits between smoltcp and the port and learns, from every ARP and IPv4 frame it
//! receives, which MAC an IPv4 address has (a bounded table, oldest entry replaced): RoCE v2
//! needs the peer's MAC for an IPv4-mapped GID, and smoltcp keeps its neighbour cache to itself.

use smoltcp::iface::{Config, Interface, SocketSet, SocketStorage};
use smoltcp::phy::{self, DeviceCapabilities};
use smoltcp::time::Instant;
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr, Ipv4Address};

use mlx5::eth::EthPort;
use mlx5::{Device, Platform};

use super::console::uptime_us;
use super::events::service_events;
use super::irq;

/// IPv4 → MAC pairs remembered.
const NEIGHBOURS: usize = 8;

/// What [`Snoop`] learnt.
#[derive(Debug, Default)]
pub struct Neighbours {
    entries: heapless::Vec<([u8; 4], [u8; 6]), NEIGHBOURS>,
    next: usize,
    /// ICMP echo requests received (smoltcp answers them).
    pub echo_requests: u64,
}

impl Neighbours {
    /// The MAC `ip` was last seen with.
    pub fn mac_of(&self, ip: [u8; 4]) -> Option<[u8; 6]> {
        self.entries.iter().find(|e| e.0 == ip).map(|e| e.1)
    }

    fn learn(&mut self, ip: [u8; 4], mac: [u8; 6]) {
        if ip == [0; 4] || mac[0] & 1 != 0 {
            return;
        }
        if let Some(e) = self.entries.iter_mut().find(|e| e.0 == ip) {
            e.1 = mac;
        } else if self.entries.push((ip, mac)).is_err() {
            self.entries[self.next % NEIGHBOURS] = (ip, mac);
            self.next = self.next.wrapping_add(1);
        }
    }

    /// Learns from one received Ethernet frame: an ARP packet's sender, or an IPv4 packet's
    /// source with the frame's source MAC. Reads bytes only; a short frame teaches nothing.
    pub fn snoop(&mut self, f: &[u8]) {
        let (Some(src), Some(ty)) = (f.get(6..12), f.get(12..14)) else {
            return;
        };
        let mut mac = [0u8; 6];
        mac.copy_from_slice(src);
        let at = |r: core::ops::Range<usize>| -> Option<[u8; 4]> { f.get(r)?.try_into().ok() };
        match ty {
            // IPv4: source address at 12..16 of the header.
            [0x08, 0x00] => {
                if let Some(ip) = at(26..30) {
                    self.learn(ip, mac);
                }
                // ICMP (protocol 1) echo request (type 8), after a header of IHL words.
                let ihl = usize::from(f.get(14).copied().unwrap_or(0) & 0xf) * 4;
                if f.get(23) == Some(&1) && f.get(14 + ihl) == Some(&8) {
                    self.echo_requests += 1;
                }
            }
            // ARP over Ethernet/IPv4: sender MAC at 8..14, sender IP at 14..18.
            [0x08, 0x06] => {
                if let (Some(m), Some(ip)) = (f.get(22..28), at(28..32)) {
                    let mut sm = [0u8; 6];
                    sm.copy_from_slice(m);
                    self.learn(ip, sm);
                }
            }
            _ => {}
        }
    }
}

/// smoltcp's device: the port, with [`Neighbours`] learning from what it receives.
#[derive(Debug)]
pub struct Snoop<D> {
    /// The port.
    pub inner: D,
    /// What was learnt.
    pub neighbours: Neighbours,
}

/// A received frame on its way to smoltcp, shown to [`Neighbours`] first.
#[derive(Debug)]
pub struct SnoopRx<'t, R> {
    inner: R,
    n: &'t mut Neighbours,
}

impl<R: phy::RxToken> phy::RxToken for SnoopRx<'_, R> {
    fn consume<T, F: FnOnce(&[u8]) -> T>(self, f: F) -> T {
        let n = self.n;
        self.inner.consume(|b| {
            n.snoop(b);
            f(b)
        })
    }
}

impl<D: phy::Device> phy::Device for Snoop<D> {
    type RxToken<'t>
        = SnoopRx<'t, D::RxToken<'t>>
    where
        Self: 't;
    type TxToken<'t>
        = D::TxToken<'t>
    where
        Self: 't;

    fn receive(&mut self, t: Instant) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)> {
        let (rx, tx) = self.inner.receive(t)?;
        Some((
            SnoopRx {
                inner: rx,
                n: &mut self.neighbours,
            },
            tx,
        ))
    }
    fn transmit(&mut self, t: Instant) -> Option<Self::TxToken<'_>> {
        self.inner.transmit(t)
    }
    fn capabilities(&self) -> DeviceCapabilities {
        self.inner.capabilities()
    }
}

/// smoltcp's clock: the TSC since reset.
pub fn now() -> Instant {
    Instant::from_micros(uptime_us() as i64)
}

/// One NIC's TCP/IP: its port, interface and sockets.
pub struct Stack<'a, 's, P: Platform> {
    /// The device under the port.
    pub dev: &'a Device<P>,
    /// Its MSI-X vector.
    pub vector: u8,
    /// The receive CQ (armed when idle).
    pub rx_cq: &'a mlx5::cq::Cq<'a, P>,
    /// The port, as smoltcp sees it.
    pub port: Snoop<EthPort<'a, P>>,
    /// The interface.
    pub iface: Interface,
    /// The sockets.
    pub sockets: SocketSet<'s>,
}

impl<P: Platform> core::fmt::Debug for Stack<'_, '_, P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Stack")
            .field("vector", &self.vector)
            .finish()
    }
}

impl<'a, 's, P: Platform> Stack<'a, 's, P> {
    /// smoltcp on `port` with address `ip`/`prefix`.
    pub fn new(
        dev: &'a Device<P>,
        vector: u8,
        rx_cq: &'a mlx5::cq::Cq<'a, P>,
        port: EthPort<'a, P>,
        ip: [u8; 4],
        prefix: u8,
        storage: &'s mut [SocketStorage<'s>],
    ) -> Self {
        let mut cfg = Config::new(HardwareAddress::Ethernet(EthernetAddress(port.mac())));
        cfg.random_seed = crate::metal::x86::rdtsc();
        let mut port = Snoop {
            inner: port,
            neighbours: Neighbours::default(),
        };
        let mut iface = Interface::new(cfg, &mut port, now());
        iface.update_ip_addrs(|a| {
            let _ = a.push(IpCidr::new(IpAddress::Ipv4(Ipv4Address::from(ip)), prefix));
        });
        Self {
            dev,
            vector,
            rx_cq,
            port,
            iface,
            sockets: SocketSet::new(storage),
        }
    }

    /// One pass of smoltcp; whether anything happened.
    pub fn poll(&mut self) -> bool {
        self.iface.poll(now(), &mut self.port, &mut self.sockets)
            != smoltcp::iface::PollResult::None
    }

    /// Readies the wake-up of an idle wait: the NIC's events taken (their EQ re-armed) and
    /// the receive CQ armed, so the next frame raises the NIC's interrupt.
    pub fn arm(&mut self) {
        if let Err(e) = service_events(self.dev, Some(self.rx_cq)) {
            log::warn!("events: {e}");
        }
        if let Err(e) = self.rx_cq.req_notify(false) {
            log::warn!("arming the receive CQ: {e}");
        }
    }
}

/// Polls every stack once; when none made progress, arms them and halts until an interrupt
/// (a frame, or the 1 ms timer: smoltcp's own timers need the clock to move).
pub fn step<P: Platform>(stacks: &mut [&mut Stack<'_, '_, P>]) {
    let mut busy = false;
    for s in stacks.iter_mut() {
        busy |= s.poll();
    }
    if !busy {
        for s in stacks.iter_mut() {
            s.arm();
        }
        let mut again = false;
        for s in stacks.iter_mut() {
            again |= s.poll();
        }
        if !again {
            irq::halt();
        }
    }
}
