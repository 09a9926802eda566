//! An Ethernet port of the driver under smoltcp: two simulated ConnectX-5s on one wire, each an
//! [`EthPort`] (a send queue, a receive queue, the steering that brings its MAC's frames to it)
//! handed to a smoltcp `Interface`. B serves TCP echo on port 7; A resolves B by ARP, connects,
//! sends a message of `BYTES` bytes and reads it back. The checksums on the wire are the
//! NIC's: smoltcp is told the device computes and checks them.
//!
//! `cargo run --release -p mlx5-tools --example eth_smoltcp [BYTES]`
//!
//! The `EthPort` is a `smoltcp::phy::Device` with the driver's `smoltcp` feature; nothing here
//! allocates on the data path but smoltcp's own socket buffers.

use std::time::Duration;

use mlx5::eth::{EthPort, EthPortConfig};
use mlx5::sim::{Fabric, Mode, Profile, SimDevice};
use mlx5::{Device, DeviceConfig, SimPlatform};
use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::socket::tcp;
use smoltcp::time::Instant;
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr};

type Dev = Device<SimPlatform>;

/// One host: its port, its IP interface and its sockets.
struct Host<'d> {
    port: EthPort<'d, SimPlatform>,
    iface: Interface,
    sockets: SocketSet<'static>,
}

impl<'d> Host<'d> {
    fn new(mut port: EthPort<'d, SimPlatform>, ip: IpAddress) -> Self {
        let cfg = Config::new(HardwareAddress::Ethernet(EthernetAddress(port.mac())));
        let mut iface = Interface::new(cfg, &mut port, Instant::ZERO);
        iface.update_ip_addrs(|a| {
            let _ = a.push(IpCidr::new(ip, 24));
        });
        Host {
            port,
            iface,
            sockets: SocketSet::new(vec![]),
        }
    }

    fn tcp(&mut self) -> SocketHandle {
        self.sockets.add(tcp::Socket::new(
            tcp::SocketBuffer::new(vec![0; 64 * 1024]),
            tcp::SocketBuffer::new(vec![0; 64 * 1024]),
        ))
    }
}

fn open(fabric: &Fabric, last_mac_byte: u8) -> Result<Dev, Box<dyn std::error::Error>> {
    let sim = SimDevice::new(
        Profile::connectx5().with_mac([0x02, 0xc5, 0x5a, 0, 0, last_mac_byte]),
        Mode::Sync,
    );
    fabric.attach(&sim)?;
    Ok(Device::open(
        SimPlatform::new(sim),
        DeviceConfig::default(),
    )?)
}

/// Runs the echo of `bytes` bytes; returns the simulated time it took.
fn echo(bytes: usize) -> Result<Duration, Box<dyn std::error::Error>> {
    let fabric = Fabric::new();
    let (da, db) = (open(&fabric, 1)?, open(&fabric, 2)?);
    // Each port's send and receive completions go to CQs of its own.
    let (txa, rxa) = (da.create_cq(256)?, da.create_cq(256)?);
    let (txb, rxb) = (db.create_cq(256)?, db.create_cq(256)?);
    let cfg = EthPortConfig::default();
    let ip_a = IpAddress::v4(10, 0, 0, 1);
    let ip_b = IpAddress::v4(10, 0, 0, 2);
    let mut a = Host::new(EthPort::open(&da, &txa, &rxa, &cfg)?, ip_a);
    let mut b = Host::new(EthPort::open(&db, &txb, &rxb, &cfg)?, ip_b);
    println!(
        "A {} (MTU {}, checksum offload {}), B {}",
        ip_a,
        a.port.mtu(),
        a.port.checksum_offload(),
        ip_b
    );

    let server = b.tcp();
    b.sockets.get_mut::<tcp::Socket>(server).listen(7)?;
    let client = a.tcp();
    a.sockets
        .get_mut::<tcp::Socket>(client)
        .connect(a.iface.context(), (ip_b, 7), 49152)?;

    let message: Vec<u8> = (0..bytes).map(|i| (i * 31 % 251) as u8).collect();
    let (mut sent, mut echoed) = (0, Vec::with_capacity(bytes));
    let mut now = Instant::ZERO;
    // Both hosts polled on one thread, the clock a millisecond a round, a bounded number of rounds.
    for _ in 0..100_000 {
        a.iface.poll(now, &mut a.port, &mut a.sockets);
        b.iface.poll(now, &mut b.port, &mut b.sockets);
        // B: whatever arrives goes back.
        let s = b.sockets.get_mut::<tcp::Socket>(server);
        while s.can_recv() && s.can_send() {
            let mut chunk = [0u8; 4096];
            let n = s.recv_slice(&mut chunk)?;
            s.send_slice(&chunk[..n])?;
        }
        // A: send what is left, take what came back.
        let c = a.sockets.get_mut::<tcp::Socket>(client);
        if c.may_send() && sent < bytes {
            sent += c.send_slice(&message[sent..])?;
        }
        while c.can_recv() {
            let mut chunk = [0u8; 4096];
            let n = c.recv_slice(&mut chunk)?;
            echoed.extend_from_slice(&chunk[..n]);
        }
        if echoed.len() == bytes {
            break;
        }
        now += smoltcp::time::Duration::from_millis(1);
    }
    if echoed != message {
        return Err(format!(
            "echo: {} of {bytes} bytes came back, or not as sent",
            echoed.len()
        )
        .into());
    }
    let (sa, sb) = (a.port.stats(), b.port.stats());
    println!(
        "{bytes} bytes echoed over TCP, every byte checked: A sent {} frames, received {}; B sent {}, received {}",
        sa.tx_frames, sa.rx_frames, sb.tx_frames, sb.rx_frames
    );
    // Teardown in order: the stacks, the ports (their queues and steering), the CQs, the devices.
    for host in [a, b] {
        let Host {
            port,
            iface,
            sockets,
        } = host;
        drop((iface, sockets));
        port.close()?;
    }
    drop((txa, rxa, txb, rxb));
    da.close()?;
    db.close()?;
    Ok(Duration::from_millis(now.total_millis() as u64))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let bytes = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1 << 20);
    let took = echo(bytes)?;
    println!("{took:?} of simulated time");
    Ok(())
}

#[test]
fn a_tcp_echo_crosses_the_simulated_wire() {
    // smoltcp's interface and sockets are large values: a thread with room for them.
    std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(|| echo(64 << 10).map_err(|e| e.to_string()))
        .expect("spawn")
        .join()
        .expect("join")
        .expect("echo");
}
