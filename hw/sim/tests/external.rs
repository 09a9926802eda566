//! External ports (issue #12): a fabric port on a unix datagram link, as QEMU's `-netdev dgram`
//! makes one. The address responder answers ARP and neighbour solicitations for a simulated
//! NIC's GIDs (and only for them); two fabrics joined by a pair of such links carry an RC
//! connection — RDMA WRITE and SEND — through real sockets.

mod common;

use std::os::unix::net::UnixDatagram;
use std::time::Duration;

use common::cmd;
use common::datapath::{connected, fill, read, Node, Seg};
use common::ethernet::ones;
use mlx5_ifc::consts::{qp_st, qp_state, roce};
use mlx5_ifc::event;
use mlx5_ifc::prm::mr::DestroyMkeyIn;
use mlx5_ifc::prm::qp::{Ads, Qpc};
use mlx5_ifc::prm::vport::{RoceAddrLayout, SetRoceAddressIn};
use mlx5_ifc::Opcode;
use mlx5_sim::{Fabric, Mode, MAX_NEIGHBOURS};

const PEER_MAC: [u8; 6] = [0x52, 0x54, 0, 0, 0, 2];
const PEER_IP: [u8; 4] = [10, 0, 0, 9];

/// A link counter once it reached `at_least` (or after 5 s): a link counts a frame after its
/// send returns, or when its reader takes it, so the peer (or the whole exchange) can be done
/// before the count moves.
fn settled(c: &std::sync::atomic::AtomicU64, at_least: u64) -> u64 {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let v = c.load(std::sync::atomic::Ordering::Relaxed);
        if v >= at_least || std::time::Instant::now() > deadline {
            return v;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("mlx5-sim-ext-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn arp_request(target: [u8; 4]) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&PEER_MAC);
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&PEER_MAC);
    f.extend_from_slice(&PEER_IP);
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&target);
    f.resize(60, 0);
    f
}

fn solicitation(src: [u8; 16], target: [u8; 16]) -> Vec<u8> {
    let mut f = vec![0x33, 0x33, 0xff, target[13], target[14], target[15]];
    f.extend_from_slice(&PEER_MAC);
    f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0, 0, 32, 58, 255]);
    f.extend_from_slice(&src);
    let mut dst = [0u8; 16];
    dst[..2].copy_from_slice(&[0xff, 0x02]);
    dst[11..13].copy_from_slice(&[1, 0xff]);
    dst[13..].copy_from_slice(&target[13..]);
    f.extend_from_slice(&dst);
    let mut icmp = vec![135, 0, 0, 0, 0, 0, 0, 0];
    icmp.extend_from_slice(&target);
    icmp.extend_from_slice(&[1, 1]); // source link-layer address option
    icmp.extend_from_slice(&PEER_MAC);
    let pseudo = ones(&f[22..54], 58 + icmp.len() as u64);
    let c = !ones(&icmp, u64::from(pseudo));
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&icmp);
    f
}

#[test]
fn the_responder_answers_arp_and_nd_for_the_nics_gids_only() {
    let dir = scratch("responder");
    let (ours, theirs) = (dir.join("ours"), dir.join("theirs"));
    let mut a = Node::new(Mode::Sync, 1);
    // GID 1: an IPv6 RoCE v2 address.
    let v6 = [
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0xc5, 0x5a, 0xff, 0xfe, 0, 0, 1,
    ];
    a.fx.p.ok(
        &cmd::<SetRoceAddressIn>(Opcode::SetRoceAddress, 0, |v| {
            v.set(SetRoceAddressIn::ROCE_ADDRESS_INDEX, 1).unwrap();
            v.set(SetRoceAddressIn::VHCA_PORT_NUM, 1).unwrap();
            let mut r = v.nested_mut(SetRoceAddressIn::ROCE_ADDRESS);
            r.set(RoceAddrLayout::ROCE_VERSION, roce::VERSION_2)
                .unwrap();
            r.set(RoceAddrLayout::ROCE_L3_TYPE, roce::L3_IPV6).unwrap();
            r.bytes_mut(RoceAddrLayout::SOURCE_L3_ADDRESS)
                .copy_from_slice(&v6);
        }),
        0x10,
    );
    let fabric = Fabric::new();
    fabric.attach(&a.dev()).unwrap();
    let peer = UnixDatagram::bind(&theirs).unwrap();
    peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let port = fabric.attach_unix_dgram(&ours, &theirs, true).unwrap();
    let mut buf = [0u8; 2048];

    // ARP for 10.0.0.1 (GID 0, IPv4-mapped): answered with the NIC's MAC.
    peer.send_to(&arp_request([10, 0, 0, 1]), &ours).unwrap();
    let n = peer.recv(&mut buf).unwrap();
    let r = &buf[..n];
    assert_eq!(n, 60);
    assert_eq!((&r[..6], &r[6..12]), (&PEER_MAC[..], &a.mac()[..]));
    assert_eq!(&r[12..22], &[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 2]);
    assert_eq!(&r[22..28], &a.mac(), "sender hardware address");
    assert_eq!(&r[28..32], &[10, 0, 0, 1]);
    assert_eq!((&r[32..38], &r[38..42]), (&PEER_MAC[..], &PEER_IP[..]));

    // Neighbour solicitation for the IPv6 GID: a solicited, overriding advertisement.
    let src = [
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0, 0xff, 0xfe, 0, 0, 2,
    ];
    peer.send_to(&solicitation(src, v6), &ours).unwrap();
    let n = peer.recv(&mut buf).unwrap();
    let r = &buf[..n];
    assert_eq!(
        (&r[..6], &r[6..12], &r[12..14]),
        (&PEER_MAC[..], &a.mac()[..], &[0x86, 0xdd][..])
    );
    let (ip, icmp) = (&r[14..54], &r[54..]);
    assert_eq!((ip[6], ip[7]), (58, 255), "ICMPv6, hop limit 255");
    assert_eq!((&ip[8..24], &ip[24..40]), (&v6[..], &src[..]));
    assert_eq!(
        (icmp[0], icmp[4] & 0x60),
        (136, 0x60),
        "advertisement, solicited + override"
    );
    assert_eq!(&icmp[8..24], &v6);
    assert_eq!((icmp[24], icmp[25], &icmp[26..32]), (2, 1, &a.mac()[..]));
    let pseudo = ones(&ip[8..40], 58 + icmp.len() as u64);
    assert_eq!(ones(icmp, u64::from(pseudo)), 0xffff, "ICMPv6 checksum");

    // Another address: no answer from the port (the request goes on to the fabric).
    peer.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    peer.send_to(&arp_request([10, 0, 0, 77]), &ours).unwrap();
    assert!(
        peer.recv(&mut buf).is_err(),
        "no reply for an address no NIC holds"
    );
    // The port learned the peer from its requests; it asks the link for others.
    let mapped = |ip: [u8; 4]| {
        let mut g = [0u8; 16];
        g[10..12].fill(0xff);
        g[12..].copy_from_slice(&ip);
        g
    };
    assert_eq!(port.neighbour(&mapped(PEER_IP)), Some(PEER_MAC));
    assert_eq!(
        port.neighbour(&src),
        Some(PEER_MAC),
        "from the solicitation's option"
    );
    let asked = port.resolve(
        &mapped([10, 0, 0, 50]),
        a.mac(),
        &mapped([10, 0, 0, 1]),
        Duration::from_millis(100),
    );
    assert_eq!(asked, None, "nobody answers for 10.0.0.50");
    let n = peer.recv(&mut buf).unwrap();
    let r = &buf[..n];
    assert_eq!(
        (&r[..6], &r[6..12], &r[12..14]),
        (&[0xff; 6][..], &a.mac()[..], &[8, 6][..])
    );
    assert_eq!(
        (&r[20..22], &r[28..32], &r[38..42]),
        (&[0, 1][..], &[10, 0, 0, 1][..], &[10, 0, 0, 50][..])
    );
    // The port counts an answer after its send returns (the peer may have read it before) and a
    // frame when its reader takes it: awaited, bounded, then compared exactly.
    let c = port.counters();
    assert_eq!(settled(&c.answered, 2), 2);
    assert_eq!(settled(&c.rx_frames, 3), 3);
    drop(port);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue #26 row 5: a peer that announces a new address in every ARP frame made the port's
/// neighbour table grow without bound (6 -> 18 MB for 300 000 ARPs). The table now holds at
/// most MAX_NEIGHBOURS, the oldest forgotten first, and counts what it forgot.
#[test]
fn an_arp_flood_of_new_addresses_holds_a_bounded_table() {
    let dir = scratch("arp-flood");
    let (ours, theirs) = (dir.join("ours"), dir.join("theirs"));
    let fabric = Fabric::new();
    let peer = UnixDatagram::bind(&theirs).unwrap();
    let port = fabric.attach_unix_dgram(&ours, &theirs, true).unwrap();
    let n = MAX_NEIGHBOURS as u32 * 3;
    let sender = |i: u32| -> ([u8; 4], [u8; 6]) {
        let b = i.to_be_bytes();
        ([100, b[1], b[2], b[3]], [0x52, 0x54, 0, b[1], b[2], b[3]])
    };
    for i in 0..n {
        let (ip, mac) = sender(i);
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&mac);
        f.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
        f.extend_from_slice(&mac);
        f.extend_from_slice(&ip);
        f.extend_from_slice(&[0; 6]);
        f.extend_from_slice(&[10, 0, 0, 200]);
        f.resize(60, 0);
        // The port's reader may lag: a full socket buffer is waited out, not a failure.
        while let Err(e) = peer.send_to(&f, &ours) {
            assert!(
                e.kind() == std::io::ErrorKind::WouldBlock || e.raw_os_error() == Some(105),
                "{e}"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let c = port.counters();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while c.rx_frames.load(std::sync::atomic::Ordering::Relaxed) < u64::from(n) {
        assert!(
            std::time::Instant::now() < deadline,
            "the port took {n} frames"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let mapped = |ip: [u8; 4]| {
        let mut g = [0u8; 16];
        g[10..12].fill(0xff);
        g[12..].copy_from_slice(&ip);
        g
    };
    assert_eq!(port.neighbours_held(), MAX_NEIGHBOURS);
    assert_eq!(
        c.neighbours_evicted
            .load(std::sync::atomic::Ordering::Relaxed),
        u64::from(n) - MAX_NEIGHBOURS as u64
    );
    let (last_ip, last_mac) = sender(n - 1);
    assert_eq!(
        port.neighbour(&mapped(last_ip)),
        Some(last_mac),
        "the newest is known"
    );
    assert_eq!(
        port.neighbour(&mapped(sender(0).0)),
        None,
        "the oldest was forgotten"
    );
    drop(port);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn two_fabrics_joined_by_datagram_links_carry_rc() {
    let dir = scratch("rc");
    let (s1, s2) = (dir.join("one"), dir.join("two"));
    let (mut a, mut b) = (Node::new(Mode::Threaded, 1), Node::new(Mode::Threaded, 2));
    let (f1, f2) = (Fabric::new(), Fabric::new());
    f1.attach(&a.dev()).unwrap();
    f2.attach(&b.dev()).unwrap();
    let p1 = f1.attach_unix_dgram(&s1, &s2, false).unwrap();
    let p2 = f2.attach_unix_dgram(&s2, &s1, false).unwrap();
    let (mut qa, mut qb) = connected(&mut a, &mut b, qp_st::RC, |_| {});
    let la = a.reg_mr(8192, false, false, false);
    let rb = b.reg_mr(8192, true, true, false);
    let data = fill(&a.dev(), &la, 5);

    // An RDMA WRITE of three packets and a SEND, across both links.
    a.post_send(
        &mut qa,
        0x08,
        0x08,
        [0; 4],
        &[
            Seg::Raddr(rb.va(64), rb.key),
            Seg::Data(3000, la.key, la.va(0)),
        ],
    );
    let c = a.wait(5_000_000_000).expect("the WRITE's completion");
    assert_eq!(c.opcode, 0, "success");
    assert_eq!(read(&b.dev(), &rb, 64, 3000), &data[..3000]);
    b.post_recv(&mut qb, &[(4096, rb.key, rb.va(4096))]);
    a.post_send(
        &mut qa,
        0x0a,
        0x08,
        [0; 4],
        &[Seg::Data(100, la.key, la.va(10))],
    );
    assert_eq!(a.wait(5_000_000_000).map(|c| c.opcode), Some(0));
    let c = b
        .wait(5_000_000_000)
        .expect("the SEND's receive completion");
    assert_eq!((c.opcode, c.byte_cnt), (2, 100));
    assert_eq!(read(&b.dev(), &rb, 4096, 100), &data[10..110]);
    // A link counts a frame once the socket took it, after `send_to` returns: the peer may have
    // received it, and the whole exchange completed, before the sending thread counts it. So
    // the counts are awaited (bounded), not read once.
    assert!(
        settled(&p1.counters().tx_frames, 4) >= 4,
        "requests went out on link one"
    );
    assert!(
        settled(&p2.counters().tx_frames, 2) >= 2,
        "acknowledgements came back"
    );
    drop((p1, p2));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Ethernet (14), IPv4 (20) and UDP (8) bytes before the BTH: the GIDs are IPv4-mapped, so the
/// frames are RoCE v2 over IPv4.
const BTH_AT: usize = 14 + 20 + 8;

/// The BTH opcode and PSN of a RoCE v2 frame over IPv4, `None` for any other frame.
fn bth(f: &[u8]) -> Option<(u8, u32)> {
    let roce =
        f.len() >= BTH_AT + 12 && f[12..14] == [0x08, 0x00] && f[36..38] == 4791u16.to_be_bytes();
    roce.then(|| {
        let b = &f[BTH_AT..];
        (b[0], u32::from_be_bytes([0, b[9], b[10], b[11]]))
    })
}

/// Issue #26: a multi-packet RDMA WRITE kept the translation of its first packet, so a packet
/// that came after the MR was deregistered was still placed in its memory. Every packet now
/// looks the rkey up again: the rest of the message is refused with a remote access NAK.
///
/// The requester and the responder are on two fabrics joined through this test, which relays
/// the frames between the two external ports and holds back the WRITE's last packet until the
/// responder has placed the first and its MR is destroyed.
#[test]
fn a_write_whose_mr_goes_away_mid_message_is_nakked() {
    const WRITE_FIRST: u8 = 0x06;
    const WRITE_LAST: u8 = 0x08;
    const ACK: u8 = 0x11;
    const NAK_REMOTE_ACCESS: u8 = 0x62;
    const REQ_ERR: u8 = 0xd;
    const REMOTE_ACCESS_ERR: u8 = 0x13;
    let wait = Duration::from_secs(5);
    let dir = scratch("dereg");
    let (ours1, theirs1) = (dir.join("ours1"), dir.join("theirs1"));
    let (ours2, theirs2) = (dir.join("ours2"), dir.join("theirs2"));
    // The relay's two ends: `one` faces the requester's fabric, `two` the responder's.
    let one = UnixDatagram::bind(&theirs1).unwrap();
    let two = UnixDatagram::bind(&theirs2).unwrap();
    for s in [&one, &two] {
        s.set_read_timeout(Some(wait)).unwrap();
    }
    let recv = |s: &UnixDatagram, what: &str| -> Vec<u8> {
        let mut buf = vec![0u8; 65536];
        let n = s.recv(&mut buf).unwrap_or_else(|e| panic!("{what}: {e}"));
        buf.truncate(n);
        buf
    };
    let (mut a, mut b) = (Node::new(Mode::Threaded, 1), Node::new(Mode::Threaded, 2));
    let (f1, f2) = (Fabric::new(), Fabric::new());
    f1.attach(&a.dev()).unwrap();
    f2.attach(&b.dev()).unwrap();
    let p1 = f1.attach_unix_dgram(&ours1, &theirs1, false).unwrap();
    let p2 = f2.attach_unix_dgram(&ours2, &theirs2, false).unwrap();
    // No ack timeout: the requester does not retransmit while the relay holds its last packet.
    let (mut qa, qb) = connected(&mut a, &mut b, qp_st::RC, |c| {
        c.nested_mut(Qpc::PRIMARY_ADDRESS_PATH)
            .set(Ads::ACK_TIMEOUT, 0)
            .unwrap();
    });
    let la = a.reg_mr(4096, false, false, false);
    let rb = b.reg_mr(4096, true, true, false);
    let data = fill(&a.dev(), &la, 5);
    let pattern = fill(&b.dev(), &rb, 0x5a);

    // 2048 bytes at path MTU 1024: WRITE FIRST and WRITE LAST, sent at once.
    a.post_send(
        &mut qa,
        0x08,
        0x08,
        [0; 4],
        &[
            Seg::Raddr(rb.va(0), rb.key),
            Seg::Data(2048, la.key, la.va(0)),
        ],
    );
    let mut first = false;
    let (last, last_psn) = loop {
        let f = recv(&one, "the WRITE's packets on link one");
        match bth(&f) {
            Some((WRITE_LAST, psn)) => break (f, psn),
            Some((WRITE_FIRST, _)) => first = true,
            _ => {}
        }
        two.send_to(&f, &ours2).unwrap();
    };
    assert!(first, "WRITE FIRST went ahead of WRITE LAST");
    // The first packet is placed (through a key that is still valid) ...
    let deadline = std::time::Instant::now() + wait;
    while read(&b.dev(), &rb, 0, 1024) != data[..1024] {
        assert!(
            std::time::Instant::now() < deadline,
            "the responder placed WRITE FIRST"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // ... then the MR is deregistered, and only then does the last packet arrive.
    b.fx.p.ok(
        &cmd::<DestroyMkeyIn>(Opcode::DestroyMkey, 0, |v| {
            v.set(DestroyMkeyIn::MKEY_INDEX, u64::from(rb.key >> 8))
                .unwrap();
        }),
        0x10,
    );
    two.send_to(&last, &ours2).unwrap();
    // The responder's answer to it, relayed back (with anything it sent before).
    let answer = loop {
        let f = recv(&two, "the responder's answer on link two");
        one.send_to(&f, &ours1).unwrap();
        if bth(&f) == Some((ACK, last_psn)) {
            break f;
        }
    };
    let c = a.wait(5_000_000_000).expect("the WRITE's completion");
    assert_eq!(
        (c.opcode, c.syndrome, c.wqe_counter, c.wqe_opcode),
        (REQ_ERR, REMOTE_ACCESS_ERR, 0, 0x08),
        "the requester sees a remote access error, not success"
    );
    assert_eq!(
        answer[BTH_AT + 12],
        NAK_REMOTE_ACCESS,
        "the AETH of the answer to WRITE LAST"
    );
    assert_eq!(
        read(&b.dev(), &rb, 1024, 3072),
        &pattern[1024..],
        "nothing of the second packet is placed"
    );
    assert_eq!(read(&b.dev(), &rb, 0, 1024), &data[..1024]);
    // The responder's QP is in error, with the access error on its EQ; no completion.
    assert_eq!(b.dev().qp_state(qb.qpn), Some(qp_state::ERR as u8));
    assert_eq!(a.dev().qp_state(qa.qpn), Some(qp_state::ERR as u8));
    let deadline = std::time::Instant::now() + wait;
    let eqe = loop {
        match b.poll_eq() {
            Some((e, d)) if e == event::WQ_ACCESS_ERROR => break d,
            Some(_) => {}
            None => assert!(
                std::time::Instant::now() < deadline,
                "the responder's access error event"
            ),
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(
        &eqe[0x18..0x1c],
        &qb.qpn.to_be_bytes(),
        "QPN at EQE byte 0x38"
    );
    assert_eq!(b.drain(), vec![], "no completion on the responder");
    assert!(
        b.dev().dma_faults().is_empty(),
        "{:?}",
        b.dev().dma_faults()
    );
    assert!(
        a.dev().dma_faults().is_empty(),
        "{:?}",
        a.dev().dma_faults()
    );
    drop((p1, p2));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The threads of this process named `name` (as far as /proc/self/task/*/comm shows it: 15
/// bytes).
fn threads_named(name: &str) -> Vec<i32> {
    let mut tids: Vec<i32> = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
            (comm.trim_end() == &name[..name.len().min(15)])
                .then(|| e.file_name().to_str()?.parse().ok())
                .flatten()
        })
        .collect();
    tids.sort_unstable();
    tids
}

extern "C" fn ignore_signal(_: libc::c_int) {}

/// Issue #26: the port's reader took `EINTR` from its socket for a fatal error and ended, and
/// the port went deaf for good (a warning in the log, nothing else). A socket with a receive
/// timeout is not restarted after a signal handler ran, `SA_RESTART` or not, nor after the
/// thread was stopped and continued (signal(7)): a handled signal landing on the thread, Ctrl-Z
/// and `fg` on `mlx5ctl sim`, a debugger attaching — or the leak checker of the fuzz target
/// external_port, which stops every thread to scan memory, and found it. Here signals with a
/// handler are sent to the port's reader as it waits in `recv`; the port must answer after.
#[test]
fn the_port_survives_signals_to_its_reader() {
    let dir = scratch("signals");
    let (ours, theirs) = (dir.join("ours"), dir.join("theirs"));
    let a = Node::new(Mode::Sync, 1);
    let fabric = Fabric::new();
    fabric.attach(&a.dev()).unwrap();
    let peer = UnixDatagram::bind(&theirs).unwrap();
    peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let before = threads_named("mlx5-sim external rx");
    let port = fabric.attach_unix_dgram(&ours, &theirs, true).unwrap();
    let mut buf = [0u8; 2048];
    peer.send_to(&arp_request([10, 0, 0, 1]), &ours).unwrap();
    assert_eq!(peer.recv(&mut buf).unwrap(), 60, "answered before");
    // The port's threads: the new ones of that name (others' ports may be among them; a
    // signal does them no harm either).
    let ours_threads: Vec<i32> = threads_named("mlx5-sim external rx")
        .into_iter()
        .filter(|t| !before.contains(t))
        .collect();
    assert!(!ours_threads.is_empty(), "the port's reader thread");
    // SAFETY: a handler that does nothing (async-signal-safe) for SIGUSR1, which nothing else
    // in this test binary uses; `sa` is a zeroed sigaction with its handler, mask and flags
    // set, as sigaction(2) takes it.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = ignore_signal as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        sa.sa_flags = libc::SA_RESTART;
        assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
    }
    for _ in 0..20 {
        for &tid in &ours_threads {
            // SAFETY: tgkill(2) with this process's id, a thread id read from /proc (a thread
            // gone since then gets nothing: ESRCH) and a signal whose handler is installed.
            unsafe {
                libc::syscall(
                    libc::SYS_tgkill,
                    std::process::id() as libc::c_int,
                    tid,
                    libc::SIGUSR1,
                );
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    peer.send_to(&arp_request([10, 0, 0, 1]), &ours).unwrap();
    let n = peer
        .recv(&mut buf)
        .expect("an answer after signals to the port's reader");
    assert_eq!((n, &buf[28..32]), (60, &[10, 0, 0, 1][..]));
    drop(port);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Found by the hostile-peer soak (tests/hostile_peer.rs): a frame from the link shorter than
/// an Ethernet header was skipped without a trace; it is counted.
#[test]
fn runts_from_the_link_are_counted() {
    use std::sync::atomic::Ordering::Relaxed;
    let dir = scratch("runts");
    let (ours, theirs) = (dir.join("ours"), dir.join("theirs"));
    let a = Node::new(Mode::Sync, 1);
    let fabric = Fabric::new();
    fabric.attach(&a.dev()).unwrap();
    let peer = UnixDatagram::bind(&theirs).unwrap();
    peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let port = fabric.attach_unix_dgram(&ours, &theirs, true).unwrap();
    for len in [0, 1, 13] {
        peer.send_to(&vec![0xff; len], &ours).unwrap();
    }
    // An ARP request after them: its answer says the port read everything before it.
    peer.send_to(&arp_request([10, 0, 0, 1]), &ours).unwrap();
    let mut buf = [0u8; 2048];
    assert_eq!(peer.recv(&mut buf).unwrap(), 60);
    let c = port.counters();
    assert_eq!(
        (c.rx_runts.load(Relaxed), c.rx_frames.load(Relaxed)),
        (3, 1)
    );
    drop(port);
    let _ = std::fs::remove_dir_all(&dir);
}
