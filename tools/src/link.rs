//! Where `mlx5ctl pingpong` and `mlx5ctl perftest` run: a real ConnectX through VFIO
//! (`--vfio BDF`), or a simulated ConnectX-5 on its own thread whose port is on a real L2 link
//! (`--link OURS:THEIRS`, QEMU's `-netdev dgram` unix sockets) with the wire faults asked for —
//! and how they find the peer's MAC.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args as ClapArgs;
use mlx5::sim::{ExternalPort, Fabric, Mode, SimDevice, WireFault};
use mlx5::{Device, DeviceConfig, GidEntry, SimPlatform};
use mlx5_vfio::AnyPlatform;

use crate::target::{profile, Target};

/// The device and its link (the tools' shared arguments).
#[derive(ClapArgs, Debug)]
pub struct LinkArgs {
    /// Set GID index 1 to this IPv4 address (an IPv4-mapped RoCE v2 GID), as a Linux host's
    /// table has it.
    #[arg(long)]
    pub ip: Option<Ipv4Addr>,
    /// The peer's MAC (aa:bb:cc:dd:ee:ff).
    #[arg(long = "peer-mac")]
    pub peer_mac: Option<String>,
    /// The simulated NIC's port on a real link: our and their unix datagram sockets.
    #[arg(long, value_name = "OURS:THEIRS")]
    pub link: Option<String>,
    /// The simulated NIC's port on a Linux TAP device (created if absent; a persistent one,
    /// `ip tuntap add dev NAME mode tap`, is taken over): the host's stack, or a bridge, at
    /// the other end.
    #[arg(long, value_name = "NAME", conflicts_with = "link")]
    pub tap: Option<String>,
    /// Write every frame of the simulated NIC's wire to FILE as pcap, as it goes (Wireshark
    /// decodes RoCE v2 and the CM's MADs).
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,
    /// The simulated NIC's MAC.
    #[arg(long, default_value = "02:c5:5a:00:00:01")]
    pub mac: String,
    /// Lose this many frames per million on the simulated wire (both ways, seeded), to see the
    /// transport recover.
    #[arg(long = "drop-ppm", default_value_t = 0)]
    pub drop_ppm: u32,
    /// Deliver this many frames per million twice on the simulated wire (both ways, seeded).
    #[arg(long = "dup-ppm", default_value_t = 0)]
    pub dup_ppm: u32,
    /// Let this many frames per million be overtaken by the next one on the simulated wire
    /// (both ways, seeded).
    #[arg(long = "reorder-ppm", default_value_t = 0)]
    pub reorder_ppm: u32,
    #[command(flatten)]
    pub target: Target,
}

pub(crate) fn e(x: impl std::fmt::Display) -> String {
    x.to_string()
}

/// `aa:bb:cc:dd:ee:ff`.
pub(crate) fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let p: Vec<&str> = s.split(':').collect();
    let mut m = [0u8; 6];
    if p.len() != 6 {
        return Err(format!("{s}: not a MAC"));
    }
    for (i, x) in p.iter().enumerate() {
        m[i] = u8::from_str_radix(x, 16).map_err(|_| format!("{s}: not a MAC"))?;
    }
    Ok(m)
}

/// The MAC of a link-local GID's interface (modified EUI-64 with ff:fe), if it is one.
pub(crate) fn mac_of_link_local(g: &[u8; 16]) -> Option<[u8; 6]> {
    (g[..8] == [0xfe, 0x80, 0, 0, 0, 0, 0, 0] && g[11] == 0xff && g[12] == 0xfe)
        .then(|| [g[8] ^ 0x02, g[9], g[10], g[13], g[14], g[15]])
}

/// Connects to the server, retrying while it is not listening yet (up to 30 s).
pub(crate) fn connect_retry(host: &str, port: u16) -> Result<std::net::TcpStream, String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match std::net::TcpStream::connect((host, port)) {
            Ok(s) => return Ok(s),
            Err(x) if Instant::now() > deadline => {
                return Err(format!("Couldn't connect to {host}:{port}: {x}"))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// Connects to the server at `host:port` ([`connect_retry`]) and makes the exchange's first
/// step: `first` out, `reply.len()` bytes in. A connection closed or reset before the server's
/// first byte is a server not listening yet behind a port forwarder — QEMU's user-mode network
/// accepts on the host at once and resets the connection when the guest refuses it, and
/// ibv_rc_pingpong prints its address before it listens — so it is made again, up to 30 s.
pub(crate) fn connect_first_step(
    host: &str,
    port: u16,
    first: &[u8],
    reply: &mut [u8],
    patience: Duration,
) -> Result<std::net::TcpStream, String> {
    use std::io::{ErrorKind, Read, Write};
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut s = connect_retry(host, port)?;
        // A server that accepts and never answers ends the wait after `patience`.
        s.set_read_timeout(Some(patience))
            .map_err(|x| x.to_string())?;
        s.set_write_timeout(Some(patience))
            .map_err(|x| x.to_string())?;
        let r = s.write_all(first).and_then(|()| s.read_exact(reply));
        match r {
            Ok(()) => return Ok(s),
            Err(x)
                if matches!(
                    x.kind(),
                    ErrorKind::ConnectionReset | ErrorKind::UnexpectedEof | ErrorKind::BrokenPipe
                ) && Instant::now() < deadline =>
            {
                log::info!("{host}:{port} closed the connection before answering ({x}); again");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(x) => return Err(format!("reading the server's first message: {x}")),
        }
    }
}

/// What a session runs on: the device, and the simulated NIC's link if it has one.
pub struct Host<'a> {
    pub dev: &'a Device<AnyPlatform>,
    pub link: Option<&'a ExternalPort>,
    pub args: &'a LinkArgs,
}

impl std::fmt::Debug for Host<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("link", &self.args.link)
            .field("vfio", &self.args.target.vfio)
            .finish_non_exhaustive()
    }
}

impl Host<'_> {
    /// Sets GID 1 from `--ip` if given; the GID index to use (`asked`, else 1 with `--ip`,
    /// else 0) and its GID.
    pub fn gid(&self, asked: Option<u8>) -> Result<(u8, [u8; 16]), String> {
        let mac = self.dev.vport().mac;
        if let Some(ip) = self.args.ip {
            self.dev
                .set_gid(1, Some(GidEntry::ipv4(ip.octets(), mac)))
                .map_err(e)?;
        }
        let index = asked.unwrap_or(if self.args.ip.is_some() { 1 } else { 0 });
        let gid = self
            .dev
            .gid(u16::from(index))
            .ok_or(format!("GID index {index} is not set"))?
            .gid;
        Ok((index, gid))
    }

    /// The MAC of the peer whose GID is `rem` (ours: `own`): `--peer-mac`, else a link-local
    /// GID's interface ID, else resolved by ARP / neighbour discovery on the simulator's link.
    pub fn peer_mac(&self, rem: &[u8; 16], own: &[u8; 16]) -> Result<[u8; 6], String> {
        if let Some(m) = &self.args.peer_mac {
            return parse_mac(m);
        }
        if let Some(m) = mac_of_link_local(rem) {
            return Ok(m);
        }
        let l = self.link.ok_or("the peer's MAC: give --peer-mac")?;
        l.resolve(rem, self.dev.vport().mac, own, Duration::from_secs(10))
            .ok_or_else(|| {
                format!(
                    "no ARP/ND answer for the peer's GID {}",
                    std::net::Ipv6Addr::from(*rem)
                )
            })
    }
}

/// Runs `session` on the device the arguments name: `--vfio BDF`, or the simulator on
/// `--link` with its faults (and reports what they did).
pub fn with_host(
    a: &LinkArgs,
    session: impl FnOnce(&Host<'_>) -> Result<(), String>,
) -> Result<(), String> {
    if let Some(bdf) = &a.target.vfio {
        let o = Target::open_vfio(bdf).map_err(e)?;
        let r = session(&Host {
            dev: &o.device,
            link: None,
            args: a,
        });
        drop(o.device.close());
        return r;
    }
    let mac = parse_mac(&a.mac)?;
    let sim = SimDevice::new(profile(&a.target.sim)?.with_mac(mac), Mode::Threaded);
    let fabric = Fabric::new();
    fabric.attach(&sim).map_err(e)?;
    let port = if let Some(link) = &a.link {
        let (ours, theirs) = link
            .split_once(':')
            .ok_or("--link OURS:THEIRS (two socket paths)")?;
        fabric
            .attach_unix_dgram(&PathBuf::from(ours), &PathBuf::from(theirs), true)
            .map_err(|x| format!("--link {link}: {x}"))?
    } else if let Some(tap) = &a.tap {
        fabric
            .attach_tap(tap, true)
            .map_err(|x| format!("--tap {tap}: {x}"))?
    } else {
        return Err(
            "the simulated NIC needs a peer: --link OURS:THEIRS or --tap NAME (or --vfio BDF)"
                .into(),
        );
    };
    let dev = Device::open(
        AnyPlatform::Sim(SimPlatform::new(sim.clone())),
        DeviceConfig::default(),
    )
    .map_err(e)?;
    if let Some(p) = &a.pcap {
        let f = std::fs::File::create(p).map_err(|x| format!("--pcap {}: {x}", p.display()))?;
        fabric
            .pcap_to(Box::new(std::io::BufWriter::new(f)))
            .map_err(|x| format!("--pcap {}: {x}", p.display()))?;
    }
    let seed = u64::from(std::process::id());
    for (ppm, fault) in [
        (
            a.drop_ppm,
            WireFault::DropRandom {
                per_million: a.drop_ppm,
                seed,
            },
        ),
        (
            a.dup_ppm,
            WireFault::DuplicateRandom {
                per_million: a.dup_ppm,
                seed: seed.rotate_left(21),
            },
        ),
        (
            a.reorder_ppm,
            WireFault::ReorderRandom {
                per_million: a.reorder_ppm,
                seed: seed.rotate_left(42),
            },
        ),
    ] {
        if ppm > 0 {
            fabric.inject(fault);
        }
    }
    let r = session(&Host {
        dev: &dev,
        link: Some(&port),
        args: a,
    });
    if a.drop_ppm > 0 || a.dup_ppm > 0 || a.reorder_ppm > 0 {
        let c = fabric.counters();
        println!(
            "wire: {} frames lost, {} duplicated, {} reordered on purpose",
            c.dropped, c.duplicated, c.reordered
        );
    }
    drop(dev.close());
    if let Some(p) = &a.pcap {
        match fabric.pcap_finish() {
            Ok(n) => println!("pcap: {n} frames in {}", p.display()),
            Err(x) => eprintln!("mlx5ctl: --pcap {}: {x}", p.display()),
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_local_gid_names_its_mac() {
        let g = GidEntry::link_local([0x52, 0x54, 0, 0x12, 0x34, 0x56]).gid;
        assert_eq!(
            mac_of_link_local(&g),
            Some([0x52, 0x54, 0, 0x12, 0x34, 0x56])
        );
        let mut v4 = [0u8; 16];
        v4[10..12].fill(0xff);
        assert_eq!(mac_of_link_local(&v4), None);
    }

    /// A forwarder that accepted before its server listened closes the connection unanswered
    /// (twice here, once by dropping it at once, once after reading our message): the client
    /// connects again and the exchange goes through on the third.
    #[test]
    fn a_connection_closed_before_the_first_answer_is_made_again() {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = l.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            drop(l.accept().unwrap());
            let (mut s, _) = l.accept().unwrap();
            let mut m = [0u8; 5];
            s.read_exact(&mut m).unwrap();
            drop(s);
            let (mut s, _) = l.accept().unwrap();
            s.read_exact(&mut m).unwrap();
            assert_eq!(&m, b"hello");
            s.write_all(b"there").unwrap();
        });
        let mut reply = [0u8; 5];
        connect_first_step(
            "127.0.0.1",
            port,
            b"hello",
            &mut reply,
            Duration::from_secs(30),
        )
        .unwrap();
        assert_eq!(&reply, b"there");
        server.join().unwrap();
    }
}
