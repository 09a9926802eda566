//! smoltcp over the driver (issue #13 item 3): two simulated ConnectX-5s on one wire, each an
//! [`EthPort`] under a smoltcp `Interface` — ARP resolves, ICMP echo comes back with its
//! payload, a TCP stream of 2 MiB arrives byte for byte in both directions, UDP datagrams are
//! answered; checksums are the device's (the frames on the wire carry good ones smoltcp never
//! computed), a frame with a bad TCP checksum never reaches the stack, and every object is
//! gone after teardown.

mod common;

use common::wire::{ipv4_frame, send_burst, send_raw};
use common::*;
use mlx5::cq::MiniCqe;
use mlx5::eth::{EthPort, EthPortConfig, Strides};
use mlx5::sim::{Fabric, Mode};
use mlx5::SimPlatform;
use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::socket::{icmp, tcp, udp};
use smoltcp::time::{Duration, Instant};
use smoltcp::wire::{
    EthernetAddress, HardwareAddress, Icmpv4Packet, Icmpv4Repr, IpAddress, IpCidr, Ipv4Address,
};

/// One side: its port, interface and sockets.
struct Side<'a> {
    port: EthPort<'a, SimPlatform>,
    iface: Interface,
    sockets: SocketSet<'static>,
}

impl<'a> Side<'a> {
    fn new(port: EthPort<'a, SimPlatform>, ip: [u8; 4]) -> Self {
        let mut port = port;
        let cfg = Config::new(HardwareAddress::Ethernet(EthernetAddress(port.mac())));
        let mut iface = Interface::new(cfg, &mut port, Instant::ZERO);
        iface.update_ip_addrs(|a| {
            a.push(IpCidr::new(IpAddress::Ipv4(Ipv4Address::from(ip)), 24))
                .unwrap();
        });
        Side {
            port,
            iface,
            sockets: SocketSet::new(vec![]),
        }
    }

    fn poll(&mut self, now: Instant) {
        self.iface.poll(now, &mut self.port, &mut self.sockets);
    }
}

/// Both sides polled, the clock advanced by a millisecond, until `done` or 20 000 rounds.
fn run(
    a: &mut Side<'_>,
    b: &mut Side<'_>,
    now: &mut Instant,
    mut done: impl FnMut(&mut Side<'_>, &mut Side<'_>) -> bool,
) {
    for _ in 0..20_000 {
        a.poll(*now);
        b.poll(*now);
        if done(a, b) {
            return;
        }
        *now += Duration::from_millis(1);
    }
    panic!(
        "not done after 20 000 rounds: a {:?}, b {:?}",
        a.port.stats(),
        b.port.stats()
    );
}

fn tcp_socket() -> tcp::Socket<'static> {
    tcp::Socket::new(
        tcp::SocketBuffer::new(vec![0; 64 * 1024]),
        tcp::SocketBuffer::new(vec![0; 64 * 1024]),
    )
}

fn pattern(i: usize) -> u8 {
    (i as u8).wrapping_mul(31) ^ (i >> 9) as u8
}

/// Sends `total` bytes of [`pattern`] from `tx` (connected) and checks them as `rx` reads.
fn stream(
    a: &mut Side<'_>,
    b: &mut Side<'_>,
    now: &mut Instant,
    ha: SocketHandle,
    hb: SocketHandle,
    a_sends: bool,
    total: usize,
) {
    let (mut sent, mut got) = (0usize, 0usize);
    run(a, b, now, |a, b| {
        let (tx, rx) = if a_sends {
            (
                a.sockets.get_mut::<tcp::Socket>(ha),
                b.sockets.get_mut::<tcp::Socket>(hb),
            )
        } else {
            (
                b.sockets.get_mut::<tcp::Socket>(hb),
                a.sockets.get_mut::<tcp::Socket>(ha),
            )
        };
        while sent < total && tx.can_send() {
            let n = tx
                .send(|buf| {
                    let n = buf.len().min(total - sent);
                    for (k, x) in buf[..n].iter_mut().enumerate() {
                        *x = pattern(sent + k);
                    }
                    (n, n)
                })
                .unwrap();
            sent += n;
            if n == 0 {
                break;
            }
        }
        while rx.can_recv() {
            rx.recv(|buf| {
                for (k, &x) in buf.iter().enumerate() {
                    assert_eq!(x, pattern(got + k), "byte {} of the stream", got + k);
                }
                got += buf.len();
                (buf.len(), ())
            })
            .unwrap();
        }
        got == total
    });
}

/// A TCP connection: `b` (at `ip_b`) listens on port 5000, `a` connects from 49152; returns
/// `a`'s and `b`'s sockets once both can move data.
fn tcp_connect(
    a: &mut Side<'_>,
    b: &mut Side<'_>,
    now: &mut Instant,
    ip_b: IpAddress,
) -> (SocketHandle, SocketHandle) {
    let hb = b.sockets.add(tcp_socket());
    b.sockets.get_mut::<tcp::Socket>(hb).listen(5000).unwrap();
    let ha = a.sockets.add(tcp_socket());
    a.sockets
        .get_mut::<tcp::Socket>(ha)
        .connect(a.iface.context(), (ip_b, 5000), 49152)
        .unwrap();
    run(a, b, now, |a, b| {
        a.sockets.get::<tcp::Socket>(ha).may_send() && b.sockets.get::<tcp::Socket>(hb).may_recv()
    });
    (ha, hb)
}

/// Runs `f` on a thread with an 8 MiB stack: smoltcp's interface and sockets are large values,
/// and a debug build's frames keep every temporary.
fn big_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn arp_ping_tcp_and_udp_between_two_nics() {
    big_stack(|| arp_ping_tcp_and_udp(false));
}

/// The same through striding RQs (2 KiB strides, 8 to a 16 KiB buffer) on compressed CQs
/// (issue #30 item 7): what smoltcp sees does not change.
#[test]
fn arp_ping_tcp_and_udp_through_striding_rqs_and_compressed_cqes() {
    big_stack(|| arp_ping_tcp_and_udp(true));
}

fn arp_ping_tcp_and_udp(dataplane: bool) {
    let fabric = Fabric::new();
    fabric.keep_frames(16);
    let (sa, da) = nic(&fabric, Mode::Sync);
    let (sb, db) = nic(&fabric, Mode::Sync);
    fn rx_cq(d: &Dev, compressed: bool) -> mlx5::cq::Cq<'_, SimPlatform> {
        match compressed {
            true => d.create_cq_compressed(256, MiniCqe::Checksum).unwrap(),
            false => d.create_cq(256).unwrap(),
        }
    }
    let (txa, rxa) = (da.create_cq(256).unwrap(), rx_cq(&da, dataplane));
    let (txb, rxb) = (db.create_cq(256).unwrap(), rx_cq(&db, dataplane));
    let cfg = EthPortConfig {
        rx_strides: dataplane.then_some(Strides {
            log_stride_bytes: 11,
            log_num_strides: 3,
        }),
        rx_depth: if dataplane { 16 } else { 64 },
        ..EthPortConfig::default()
    };
    {
        let mut a = Side::new(EthPort::open(&da, &txa, &rxa, &cfg).unwrap(), [10, 0, 0, 1]);
        let mut b = Side::new(EthPort::open(&db, &txb, &rxb, &cfg).unwrap(), [10, 0, 0, 2]);
        let mut now = Instant::ZERO;
        let ip_b = IpAddress::v4(10, 0, 0, 2);

        // ICMP echo (ARP first): b's interface answers; the reply carries our payload.
        let icmp_h = a.sockets.add(icmp::Socket::new(
            icmp::PacketBuffer::new(vec![icmp::PacketMetadata::EMPTY; 4], vec![0; 2048]),
            icmp::PacketBuffer::new(vec![icmp::PacketMetadata::EMPTY; 4], vec![0; 2048]),
        ));
        a.sockets
            .get_mut::<icmp::Socket>(icmp_h)
            .bind(icmp::Endpoint::Ident(0x4d58))
            .unwrap();
        let payload: Vec<u8> = (0..56u8).collect();
        let mut sent = false;
        let mut reply = None;
        run(&mut a, &mut b, &mut now, |a, _| {
            let s = a.sockets.get_mut::<icmp::Socket>(icmp_h);
            if !sent && s.can_send() {
                let req = Icmpv4Repr::EchoRequest {
                    ident: 0x4d58,
                    seq_no: 1,
                    data: &payload,
                };
                let buf = s.send(req.buffer_len(), ip_b).unwrap();
                req.emit(&mut Icmpv4Packet::new_unchecked(buf), &Default::default());
                sent = true;
            }
            if s.can_recv() {
                let (data, from) = s.recv().unwrap();
                let p = Icmpv4Packet::new_checked(data).unwrap();
                let r = Icmpv4Repr::parse(&p, &Default::default()).unwrap();
                if let Icmpv4Repr::EchoReply {
                    ident,
                    seq_no,
                    data,
                } = r
                {
                    reply = Some((from, ident, seq_no, data.to_vec()));
                }
            }
            reply.is_some()
        });
        assert_eq!(reply, Some((ip_b, 0x4d58, 1, payload.clone())));

        // The frames on the wire carry good IPv4 checksums the stack did not compute (the
        // interface was told the device does): the device filled them.
        let wire = fabric.captured();
        let ipv4: Vec<&Vec<u8>> = wire
            .iter()
            .map(|(_, f)| f)
            .filter(|f| f[12..14] == [8, 0])
            .collect();
        assert!(ipv4.len() >= 2, "echo request and reply");
        for f in &ipv4 {
            let mut s: u32 = f[14..34]
                .chunks(2)
                .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
                .sum();
            while s > 0xffff {
                s = (s & 0xffff) + (s >> 16);
            }
            assert_eq!(s, 0xffff, "IPv4 header checksum of {f:02x?}");
        }

        // TCP: b listens, a connects; 2 MiB each way, every byte checked.
        let (ha, hb) = tcp_connect(&mut a, &mut b, &mut now, ip_b);
        let before = a.port.stats();
        stream(&mut a, &mut b, &mut now, ha, hb, true, 2 << 20);
        stream(&mut a, &mut b, &mut now, ha, hb, false, 2 << 20);
        let after = a.port.stats();
        assert!(after.tx_bytes - before.tx_bytes > 2 << 20);
        assert!(after.rx_bytes - before.rx_bytes > 2 << 20);
        a.sockets.get_mut::<tcp::Socket>(ha).close();
        run(&mut a, &mut b, &mut now, |a, b| {
            let sb = b.sockets.get_mut::<tcp::Socket>(hb);
            if !sb.may_recv() && sb.is_open() {
                sb.close();
            }
            a.sockets.get::<tcp::Socket>(ha).state() == tcp::State::TimeWait
                || !a.sockets.get::<tcp::Socket>(ha).is_open()
        });

        // UDP: a datagram to b's port 7, b echoes it.
        let udp_sock = || {
            udp::Socket::new(
                udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; 8], vec![0; 8192]),
                udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; 8], vec![0; 8192]),
            )
        };
        let ub = b.sockets.add(udp_sock());
        b.sockets.get_mut::<udp::Socket>(ub).bind(7).unwrap();
        let ua = a.sockets.add(udp_sock());
        a.sockets.get_mut::<udp::Socket>(ua).bind(40000).unwrap();
        let msg: Vec<u8> = (0..1400).map(|i| (i * 7) as u8).collect();
        a.sockets
            .get_mut::<udp::Socket>(ua)
            .send_slice(&msg, (ip_b, 7))
            .unwrap();
        let mut echoed = None;
        run(&mut a, &mut b, &mut now, |a, b| {
            let s = b.sockets.get_mut::<udp::Socket>(ub);
            if let Ok((data, meta)) = s.recv() {
                let (data, ep) = (data.to_vec(), meta.endpoint);
                s.send_slice(&data, ep).unwrap();
            }
            if let Ok((data, _)) = a.sockets.get_mut::<udp::Socket>(ua).recv() {
                echoed = Some(data.to_vec());
            }
            echoed.is_some()
        });
        assert_eq!(echoed.as_deref(), Some(&msg[..]));
        assert_eq!(a.port.stats().rx_checksum_drops, 0);
        assert_eq!(a.port.stats().tx_errors + a.port.stats().rx_errors, 0);
        if dataplane {
            // A burst of 8 datagrams behind one doorbell from a third party (10.0.0.9): the
            // device writes their completions as a compressed session, and smoltcp gets every
            // one as sent.
            let burst: Vec<Vec<u8>> = (0..8u8)
                .map(|k| {
                    let data = [k; 100];
                    let mut l4 = vec![0, 9, 0x9c, 0x40, 0, 108, 0, 0];
                    l4.extend_from_slice(&data);
                    ipv4_frame(a.port.mac(), b.port.mac(), 17, &l4)
                })
                .collect();
            let before = sa.datapath_counters();
            send_burst(&db, &burst);
            let mut got = Vec::new();
            run(&mut a, &mut b, &mut now, |a, _| {
                while let Ok((data, _)) = a.sockets.get_mut::<udp::Socket>(ua).recv() {
                    got.push(data.to_vec());
                }
                got.len() == 8
            });
            let want: Vec<Vec<u8>> = (0..8u8).map(|k| vec![k; 100]).collect();
            assert_eq!(got, want);
            let c = sa.datapath_counters();
            assert!(
                c.cqe_sessions > before.cqe_sessions
                    && c.cqes_compressed >= before.cqes_compressed + 8,
                "{c:?}"
            );
        }

        // Teardown: every object of both ports gone, nothing quarantined.
        let Side { port: pa, .. } = a;
        let Side { port: pb, .. } = b;
        pa.close().unwrap();
        pb.close().unwrap();
    }
    for cq in [txa, rxa] {
        cq.destroy().unwrap();
    }
    for cq in [txb, rxb] {
        cq.destroy().unwrap();
    }
    assert_eq!(da.quarantined().buffers, 0);
    assert_eq!(db.quarantined().buffers, 0);
    for (s, d) in [(&sa, da), (&sb, db)] {
        d.close().unwrap();
        assert!(s.live_objects().is_empty(), "{:?}", s.live_objects());
    }
}

#[test]
fn bad_checksums_never_reach_the_stack_and_filters_steer_as_asked() {
    let fabric = Fabric::new();
    let (_sa, da) = nic(&fabric, Mode::Sync);
    let (_sb, db) = nic(&fabric, Mode::Sync);
    let (tx, rx) = (da.create_cq(64).unwrap(), da.create_cq(64).unwrap());
    let (ma, mb) = (da.vport().mac, db.vport().mac);
    {
        let mut port = EthPort::open(&da, &tx, &rx, &EthPortConfig::default()).unwrap();
        // A TCP segment whose checksum is wrong, an ICMP packet whose IPv4 header checksum is
        // wrong, then a good ICMP packet (its header checksum right; ICMP's own is smoltcp's
        // to check) and a frame to a MAC the port does not accept.
        let mut tcp = vec![0u8; 20];
        tcp[12] = 0x50;
        tcp[16] = 0x12; // a checksum nobody computed
        let bad_tcp = ipv4_frame(ma, mb, 6, &tcp);
        let mut bad_ip = ipv4_frame(ma, mb, 1, &[8, 0, 0, 0, 0, 1, 0, 1]);
        bad_ip[24] ^= 0xff;
        let good_icmp = ipv4_frame(ma, mb, 1, &[8, 0, 0xf7, 0xfd, 0, 1, 0, 1]);
        let other = ipv4_frame(
            [2, 0, 0, 0, 0, 0x99],
            mb,
            1,
            &[8, 0, 0xf7, 0xfd, 0, 1, 0, 1],
        );
        send_raw(&db, &[bad_tcp, bad_ip, good_icmp.clone(), other]);
        let n = port.recv().unwrap().expect("the good frame");
        assert!(n >= good_icmp.len(), "{n}");
        assert_eq!(&port.received(n)[..good_icmp.len()], &good_icmp[..]);
        assert_eq!(
            port.recv().unwrap(),
            None,
            "the other MAC's frame was not steered"
        );
        let st = port.stats();
        assert_eq!((st.rx_checksum_drops, st.rx_frames), (2, 1), "{st:?}");
        port.close().unwrap();
    }
    {
        // Promiscuous: the frame to another MAC arrives too; checksums left to the stack.
        let cfg = EthPortConfig {
            promiscuous: true,
            checksum_offload: false,
            ..EthPortConfig::default()
        };
        let mut port = EthPort::open(&da, &tx, &rx, &cfg).unwrap();
        let other = ipv4_frame(
            [2, 0, 0, 0, 0, 0x99],
            mb,
            1,
            &[8, 0, 0xf7, 0xfd, 0, 1, 0, 1],
        );
        let mcast = ipv4_frame(
            [1, 0, 0x5e, 0, 0, 1],
            mb,
            1,
            &[8, 0, 0xf7, 0xfd, 0, 1, 0, 1],
        );
        send_raw(&db, &[other.clone(), mcast.clone()]);
        for want in [&other, &mcast] {
            let n = port.recv().unwrap().expect("promiscuous");
            assert_eq!(&port.received(n)[..want.len()], &want[..]);
        }
        port.close().unwrap();
        // All-multicast without promiscuous: the multicast frame only.
        let cfg = EthPortConfig {
            all_multicast: true,
            broadcast: false,
            ..EthPortConfig::default()
        };
        let mut port = EthPort::open(&da, &tx, &rx, &cfg).unwrap();
        send_raw(&db, &[other, mcast.clone()]);
        let n = port.recv().unwrap().expect("multicast");
        assert_eq!(&port.received(n)[..mcast.len()], &mcast[..]);
        assert_eq!(port.recv().unwrap(), None);
        port.close().unwrap();
    }
    // Refusals, by name.
    let refused =
        |cfg: EthPortConfig<'_>, rx_cq: &mlx5::cq::Cq<'_, SimPlatform>| match EthPort::open(
            &da, &tx, rx_cq, &cfg,
        ) {
            Err(mlx5::Error::InvalidArgument { field, .. }) => field,
            other => panic!("{other:?}"),
        };
    let d = EthPortConfig::default;
    assert_eq!(refused(EthPortConfig { mtu: 9217, ..d() }, &rx), "mtu");
    assert_eq!(refused(EthPortConfig { mtu: 67, ..d() }, &rx), "mtu");
    assert_eq!(
        refused(EthPortConfig { tx_depth: 0, ..d() }, &rx),
        "tx_depth"
    );
    assert_eq!(
        refused(
            EthPortConfig {
                rx_depth: 5000,
                ..d()
            },
            &rx
        ),
        "rx_depth"
    );
    assert_eq!(refused(d(), &tx), "rx_cq");
    let many = [[2, 0, 0, 0, 0, 1]; 13];
    assert_eq!(
        refused(
            EthPortConfig {
                extra_macs: &many,
                ..d()
            },
            &rx
        ),
        "extra_macs"
    );
    tx.destroy().unwrap();
    rx.destroy().unwrap();
    assert_eq!(da.quarantined().buffers, 0);
}

#[test]
fn rss_spreads_udp_flows_over_four_queues_through_the_traffic_type_table() {
    big_stack(rss_udp);
}

fn rss_udp() {
    use mlx5::raw::eth::{ipv4_input, MAX_INPUT};
    use mlx5::raw::eth::{toeplitz, MS_RSS_KEY};
    let fabric = Fabric::new();
    let (_sa, da) = nic(&fabric, Mode::Sync);
    let (sb, db) = nic(&fabric, Mode::Sync);
    let (txa, rxa) = (da.create_cq(256).unwrap(), da.create_cq(256).unwrap());
    let txb = db.create_cq(256).unwrap();
    let rxb: Vec<_> = (0..4).map(|_| db.create_cq(256).unwrap()).collect();
    let cfg = EthPortConfig::default();
    {
        let mut a = Side::new(EthPort::open(&da, &txa, &rxa, &cfg).unwrap(), [10, 0, 0, 1]);
        let pb = EthPort::open_rss(&db, &txb, &rxb, &cfg).unwrap();
        let mut b = Side::new(pb, [10, 0, 0, 2]);
        let mut now = Instant::ZERO;
        let sock = || {
            udp::Socket::new(
                udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; 256], vec![0; 65536]),
                udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; 256], vec![0; 65536]),
            )
        };
        let hb = b.sockets.add(sock());
        b.sockets.get_mut::<udp::Socket>(hb).bind(9).unwrap();
        // 32 flows (source ports 40000..40032), 4 datagrams each.
        let flows: Vec<u16> = (40000..40032).collect();
        let hs: Vec<_> = flows
            .iter()
            .map(|&p| {
                let h = a.sockets.add(sock());
                a.sockets.get_mut::<udp::Socket>(h).bind(p).unwrap();
                h
            })
            .collect();
        let to = (IpAddress::v4(10, 0, 0, 2), 9);
        for h in &hs {
            for k in 0..4u8 {
                a.sockets
                    .get_mut::<udp::Socket>(*h)
                    .send_slice(&[k; 100], to)
                    .unwrap();
            }
        }
        let mut got = 0;
        run(&mut a, &mut b, &mut now, |_, b| {
            while let Ok((d, meta)) = b.sockets.get_mut::<udp::Socket>(hb).recv() {
                assert_eq!(d.len(), 100);
                assert!(flows.contains(&meta.endpoint.port));
                got += 1;
            }
            got == flows.len() * 4
        });
        // Each flow's four datagrams on the queue its Toeplitz hash names; ARP (b's request for
        // a's MAC, a's reply... whatever arrived at b that is not IPv4) on queue 0.
        let mut want = [0u64; 4];
        for &p in &flows {
            let mut buf = [0u8; MAX_INPUT];
            let input = ipv4_input(&mut buf, [10, 0, 0, 1], [10, 0, 0, 2], Some((p, 9)));
            want[(toeplitz(&MS_RSS_KEY, input).unwrap() % 4) as usize] += 4;
        }
        let st = b.port.stats();
        let non_ip = st.rx_frames - flows.len() as u64 * 4;
        want[0] += non_ip;
        assert_eq!(b.port.queue_frames(), &want, "per queue (ARP: {non_ip})");
        assert!(want.iter().all(|&n| n > 0), "every queue used: {want:?}");
        let Side { port: pa, .. } = a;
        let Side { port: pb, .. } = b;
        pa.close().unwrap();
        pb.close().unwrap();
    }
    for cq in rxb.into_iter().chain([txb]) {
        cq.destroy().unwrap();
    }
    db.close().unwrap();
    assert!(sb.live_objects().is_empty(), "{:?}", sb.live_objects());
    // Refused: three queues, one CQ twice.
    let refused =
        |cqs: &[mlx5::cq::Cq<'_, SimPlatform>]| match EthPort::open_rss(&da, &txa, cqs, &cfg) {
            Err(mlx5::Error::InvalidArgument { field, .. }) => field,
            other => panic!("{other:?}"),
        };
    let three: Vec<_> = (0..3).map(|_| da.create_cq(16).unwrap()).collect();
    assert_eq!(refused(&three), "rx_cqs");
    for c in three {
        c.destroy().unwrap();
    }
    txa.destroy().unwrap();
    rxa.destroy().unwrap();
}

#[test]
fn ipv6_udp_flows_spread_by_rss_as_toeplitz_predicts() {
    use mlx5::raw::eth::{ipv6_input, MAX_INPUT};
    use mlx5::raw::eth::{toeplitz, MS_RSS_KEY};
    let fabric = Fabric::new();
    let (_sa, da) = nic(&fabric, Mode::Sync);
    let (_sb, db) = nic(&fabric, Mode::Sync);
    let (ma, mb) = (da.vport().mac, db.vport().mac);
    let tx = db.create_cq(64).unwrap();
    let rx: Vec<_> = (0..4).map(|_| db.create_cq(64).unwrap()).collect();
    let cfg = EthPortConfig {
        checksum_offload: false,
        ..EthPortConfig::default()
    };
    let mut port = EthPort::open_rss(&db, &tx, &rx, &cfg).unwrap();
    let (src, dst) = (
        [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
    );
    let mut want = [0u64; 4];
    let frames: Vec<Vec<u8>> = (0..16u16)
        .map(|k| {
            let sport = 50000 + k;
            let mut buf = [0u8; MAX_INPUT];
            let h = toeplitz(
                &MS_RSS_KEY,
                ipv6_input(&mut buf, src, dst, Some((sport, 9))),
            )
            .unwrap();
            want[(h % 4) as usize] += 1;
            let mut f = Vec::new();
            f.extend_from_slice(&mb);
            f.extend_from_slice(&ma);
            f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0, 0, 16, 17, 64]);
            f.extend_from_slice(&src);
            f.extend_from_slice(&dst);
            f.extend_from_slice(&sport.to_be_bytes());
            f.extend_from_slice(&[0, 9, 0, 16, 0, 0]);
            f.extend_from_slice(&[k as u8; 8]);
            f
        })
        .collect();
    send_raw(&da, &frames);
    let mut got = 0;
    while let Some(n) = port.recv().unwrap() {
        assert_eq!(n, frames[0].len().max(60));
        got += 1;
    }
    assert_eq!(got, 16);
    assert_eq!(port.queue_frames(), &want);
    assert!(want.iter().filter(|&&n| n > 0).count() >= 3, "{want:?}");
    port.close().unwrap();
    for c in rx.into_iter().chain([tx]) {
        c.destroy().unwrap();
    }
}

type Port<'a> = EthPort<'a, SimPlatform>;

/// Two NICs on one fabric (synchronous), an Ethernet port on each; `body` gets NIC A's
/// simulated device, both ports, and ICMP echo frames from A to B (`seq` tells them apart).
/// Both ports and their CQs are torn down after.
fn two_ports(
    body: impl FnOnce(&mlx5::sim::SimDevice, &mut Port<'_>, &mut Port<'_>, &dyn Fn(u8) -> Vec<u8>),
) {
    let fabric = Fabric::new();
    let (sa, da) = nic(&fabric, Mode::Sync);
    let (_sb, db) = nic(&fabric, Mode::Sync);
    let (tx, rx) = (da.create_cq(64).unwrap(), da.create_cq(64).unwrap());
    let (txb, rxb) = (db.create_cq(64).unwrap(), db.create_cq(64).unwrap());
    let mut a = EthPort::open(&da, &tx, &rx, &EthPortConfig::default()).unwrap();
    let mut b = EthPort::open(&db, &txb, &rxb, &EthPortConfig::default()).unwrap();
    let frame = |seq: u8| {
        ipv4_frame(
            db.vport().mac,
            da.vport().mac,
            1,
            &[8, 0, 0xf7, 0xfd - seq, 0, 1, 0, 1 + seq],
        )
    };
    body(&sa, &mut a, &mut b, &frame);
    a.close().unwrap();
    b.close().unwrap();
    for c in [tx, rx, txb, rxb] {
        c.destroy().unwrap();
    }
}

/// A device that reports an error completion for a send it went on running (a corrupted CQE):
/// the port counts the error, asks the device the SQ's state (RDY: nothing to recover), and
/// sends on.
#[test]
fn a_false_send_error_is_counted_and_the_port_sends_on() {
    use mlx5::sim::{CqeField, Fault};
    two_ports(|sa, a, b, frame| {
        // The send's completion arrives as REQ_ERR (opcode 0xd).
        sa.inject(Fault::CorruptCqe {
            field: CqeField::Opcode,
            value: 0xd,
        });
        assert!(a.send(&frame(0)).unwrap());
        assert!(a.can_send().unwrap(), "no recovery needed: the SQ runs");
        let st = a.stats();
        assert_eq!((st.tx_errors, st.tx_recoveries), (1, 0), "{st:?}");
        assert!(a.send(&frame(0)).unwrap());
        let mut got = 0;
        while b.recv().unwrap().is_some() {
            got += 1;
        }
        assert_eq!(
            got, 2,
            "both frames went out (the device did send the first)"
        );
    });
}

/// A send the device cannot carry out (its data read faults): the SQ stops in ERR with an
/// error completion; the port counts it, finds the SQ in ERR, brings it back through RST to
/// RDY on its own (as mlx5e's TX recovery does), and the next frame goes out. The lost frame
/// is lost (a stack above retransmits); the device records the fault.
#[test]
fn a_send_the_device_cannot_read_stops_the_sq_and_the_port_brings_it_back() {
    use mlx5::sim::{DmaFaultKind, Fault};
    two_ports(|sa, a, b, frame| {
        sa.inject(Fault::SqReadFault);
        assert!(a.send(&frame(0)).unwrap(), "posted: the device fails it");
        let events = sa.fault_events();
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0].fault, "SqReadFault");
        assert!(
            sa.dma_faults()
                .iter()
                .any(|f| f.kind == DmaFaultKind::Injected),
            "{:?}",
            sa.dma_faults()
        );
        assert!(
            a.can_send().unwrap(),
            "the port recovered the SQ on its own"
        );
        let st = a.stats();
        assert_eq!((st.tx_errors, st.tx_recoveries), (1, 1), "{st:?}");
        for seq in 1..=3 {
            assert!(a.send(&frame(seq)).unwrap());
        }
        assert!(a.can_send().unwrap());
        let mut got = 0;
        while b.recv().unwrap().is_some() {
            got += 1;
        }
        assert_eq!(
            got, 3,
            "the three frames after the recovery, not the failed one"
        );
        let st = a.stats();
        assert_eq!((st.tx_errors, st.tx_recoveries), (1, 1), "{st:?}");
    });
}

/// The same device fault under TCP: a segment the device could not send is lost, the port
/// brings its SQ back, and smoltcp's retransmission carries the stream on — every byte of
/// 256 KiB arrives, in order.
#[test]
fn tcp_carries_on_across_a_send_the_device_could_not_read() {
    big_stack(tcp_across_a_send_fault);
}

fn tcp_across_a_send_fault() {
    use mlx5::sim::Fault;
    let fabric = Fabric::new();
    let (sa, da) = nic(&fabric, Mode::Sync);
    let (_sb, db) = nic(&fabric, Mode::Sync);
    let (txa, rxa) = (da.create_cq(256).unwrap(), da.create_cq(256).unwrap());
    let (txb, rxb) = (db.create_cq(256).unwrap(), db.create_cq(256).unwrap());
    let cfg = EthPortConfig::default();
    {
        let mut a = Side::new(EthPort::open(&da, &txa, &rxa, &cfg).unwrap(), [10, 0, 0, 1]);
        let mut b = Side::new(EthPort::open(&db, &txb, &rxb, &cfg).unwrap(), [10, 0, 0, 2]);
        let mut now = Instant::ZERO;
        let (ha, hb) = tcp_connect(&mut a, &mut b, &mut now, IpAddress::v4(10, 0, 0, 2));
        assert_eq!(a.port.stats().tx_errors, 0);
        sa.inject(Fault::SqReadFault);
        stream(&mut a, &mut b, &mut now, ha, hb, true, 256 << 10);
        let st = a.port.stats();
        assert_eq!((st.tx_errors, st.tx_recoveries), (1, 1), "{st:?}");
        assert_eq!(sa.fault_events().len(), 1);
        let Side { port: pa, .. } = a;
        let Side { port: pb, .. } = b;
        pa.close().unwrap();
        pb.close().unwrap();
    }
    for cq in [txa, rxa, txb, rxb] {
        cq.destroy().unwrap();
    }
}
