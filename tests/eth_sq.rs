//! Raw Ethernet send queues (issue #13, first slice; bursts through enhanced multi-packet send
//! WQEs, issue #30 item 7): TD, TIS and an SQ on a simulated
//! ConnectX-5, frames posted with their L2 header inline and the rest gathered through an MR,
//! checked on the simulated wire byte for byte — the device's IPv4 and UDP checksums when
//! offload is asked, the bytes untouched when not — with their completions, batches that wrap
//! the ring, the refusals, and a clean teardown.

mod common;

use common::*;
use mlx5::mr::MrAccess;
use mlx5::qp::Sge;
use mlx5::raw::eth::{Checksum, EthBurst, EthSq, EthWr, Tis, TransportDomain, L2_INLINE};
use mlx5::sim::{Fabric, Mode};
use mlx5::{Error, WcOpcode, WcStatus};

fn sum16(b: &[u8], mut s: u32) -> u32 {
    for c in b.chunks(2) {
        s += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    s
}

fn fold(mut s: u32) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// Whether the IPv4 header and UDP checksums of `f` are right.
fn checksums_ok(f: &[u8]) -> bool {
    let ip = &f[14..34];
    let ip_ok = fold(sum16(ip, 0)) == 0xffff;
    let udp_len = u16::from_be_bytes([f[38], f[39]]) as usize;
    let udp = &f[34..34 + udp_len];
    let pseudo = sum16(&f[26..34], 17 + udp_len as u32);
    let udp_ok = fold(sum16(udp, pseudo)) == 0xffff;
    ip_ok && udp_ok && u16::from_be_bytes([f[40], f[41]]) != 0
}

#[test]
fn frames_go_out_as_posted_with_checksums_offloaded() {
    let fabric = Fabric::new();
    fabric.keep_frames(64);
    let (_sa, a) = nic(&fabric, Mode::Sync);
    let (_sb, b) = nic(&fabric, Mode::Sync);
    let td = TransportDomain::alloc(&a).unwrap();
    let tis = Tis::create(&a, &td).unwrap();
    let cq = a.create_cq(64).unwrap();
    let mut sq = EthSq::create(&a, &cq, &tis, 8).unwrap();
    assert_eq!(sq.room(), 8);
    let mr = a.alloc_mr(a.pd(), 1 << 16, MrAccess::default()).unwrap();
    let (ma, mb) = (a.vport().mac, b.vport().mac);

    // One frame, checksums by the device: 18 bytes inline, the rest in two pieces.
    let f = udp_frame(mb, ma, 300, 1);
    mr.write(0, &f[L2_INLINE..]).unwrap();
    let rest = (f.len() - L2_INLINE) as u32;
    let sges = [
        Sge {
            addr: mr.addr(),
            length: 100,
            lkey: mr.lkey(),
        },
        Sge {
            addr: mr.addr() + 100,
            length: rest - 100,
            lkey: mr.lkey(),
        },
    ];
    sq.post_send(&[EthWr {
        wr_id: 7,
        headers: &f[..L2_INLINE],
        payload: &sges,
        checksum: Checksum::ALL,
        vlan: None,
        tso_mss: None,
        signaled: true,
    }])
    .unwrap();
    let wc = wait(&cq, &a, 1);
    assert_eq!(
        (wc[0].status, wc[0].opcode, wc[0].wr_id, wc[0].qp_num),
        (WcStatus::Success, WcOpcode::Send, 7, sq.sqn())
    );
    let wire = fabric.captured();
    let sent = &wire.last().unwrap().1;
    assert_eq!(sent.len(), f.len());
    assert!(checksums_ok(sent), "the device filled both checksums");
    // Everything but the two checksum fields is what was posted.
    let mut expect = f.clone();
    expect[24..26].copy_from_slice(&sent[24..26]);
    expect[40..42].copy_from_slice(&sent[40..42]);
    assert_eq!(sent, &expect);

    // Without offload the bytes are untouched (zero checksums stay zero); a longer inline
    // header (all 42 header bytes) is fine too. Twelve frames in batches of four wrap the
    // ring of 16 WQEBBs; one completion per batch.
    let mut sent_frames = Vec::new();
    for batch in 0..3u8 {
        let frames: Vec<Vec<u8>> = (0..4)
            .map(|k| udp_frame(mb, ma, 60 + 40 * k, batch * 4 + k as u8))
            .collect();
        let mut offs = Vec::new();
        let mut off = 0u64;
        for fr in &frames {
            mr.write(off as usize, &fr[42..]).unwrap();
            offs.push(off);
            off += 4096;
        }
        let sg: Vec<[Sge; 1]> = frames
            .iter()
            .zip(&offs)
            .map(|(fr, o)| {
                [Sge {
                    addr: mr.addr() + o,
                    length: (fr.len() - 42) as u32,
                    lkey: mr.lkey(),
                }]
            })
            .collect();
        let wrs: Vec<EthWr<'_>> = frames
            .iter()
            .zip(&sg)
            .enumerate()
            .map(|(k, (fr, s))| EthWr {
                wr_id: 100 + u64::from(batch) * 4 + k as u64,
                headers: &fr[..42],
                payload: s,
                checksum: Checksum::NONE,
                vlan: None,
                tso_mss: None,
                signaled: k == 3,
            })
            .collect();
        sq.post_send(&wrs).unwrap();
        let wc = wait(&cq, &a, 1);
        assert_eq!(
            (wc[0].status, wc[0].wr_id),
            (WcStatus::Success, 103 + u64::from(batch) * 4)
        );
        sent_frames.extend(frames);
    }
    let wire = fabric.captured();
    let last: Vec<&Vec<u8>> = wire.iter().rev().take(12).rev().map(|(_, f)| f).collect();
    for (got, want) in last.iter().zip(&sent_frames) {
        assert_eq!(*got, want);
    }
    assert_eq!(sq.room(), 8, "every WQEBB came back");

    // Refusals, nothing posted: a header shorter than the L2 inline bytes, too many pieces.
    let short = [0u8; 14];
    let e = sq
        .post_send(&[EthWr {
            wr_id: 1,
            headers: &short,
            payload: &[],
            checksum: Checksum::NONE,
            vlan: None,
            tso_mss: None,
            signaled: true,
        }])
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidArgument {
                field: "headers",
                requested: 14,
                max: 18,
                ..
            }
        ),
        "{e:?}"
    );
    let five = [sges[0]; 5];
    let e = sq
        .post_send(&[EthWr {
            wr_id: 1,
            headers: &f[..L2_INLINE],
            payload: &five,
            checksum: Checksum::NONE,
            vlan: None,
            tso_mss: None,
            signaled: true,
        }])
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidArgument {
                field: "num_sge",
                requested: 5,
                max: 4,
                ..
            }
        ),
        "{e:?}"
    );
    // More than the ring holds is refused whole.
    let many = vec![
        EthWr {
            wr_id: 1,
            headers: &f[..L2_INLINE],
            payload: &sges[..1],
            checksum: Checksum::NONE,
            vlan: None,
            tso_mss: None,
            signaled: false,
        };
        40
    ];
    assert!(matches!(sq.post_send(&many), Err(Error::QueueFull { .. })));
    // An SQ deeper than log_max_wq_sz allows.
    let e = EthSq::create(&a, &cq, &tis, 1 << 30).unwrap_err();
    assert!(
        matches!(e, Error::InvalidArgument { field: "depth", .. }),
        "{e:?}"
    );

    // Teardown: nothing left in quarantine.
    sq.destroy().unwrap();
    tis.destroy().unwrap();
    td.dealloc().unwrap();
    drop(mr);
    cq.destroy().unwrap();
    assert_eq!(a.quarantined().buffers, 0);
}

#[test]
fn frames_to_our_mac_are_steered_into_the_rq_others_dropped() {
    use mlx5::qp::RecvWr;
    use mlx5::raw::eth::{EthRq, MacSteering, Tir};
    let fabric = Fabric::new();
    let (_sa, a) = nic(&fabric, Mode::Sync);
    let (_sb, b) = nic(&fabric, Mode::Sync);
    let (ma, mb) = (a.vport().mac, b.vport().mac);
    // A: the sender.
    let td_a = TransportDomain::alloc(&a).unwrap();
    let tis = Tis::create(&a, &td_a).unwrap();
    let cq_a = a.create_cq(16).unwrap();
    let mut sq = EthSq::create(&a, &cq_a, &tis, 8).unwrap();
    let mr_a = a.alloc_mr(a.pd(), 1 << 14, MrAccess::default()).unwrap();
    // B: an RQ of 8 buffers behind a direct TIR, its MAC steered to it.
    let td_b = TransportDomain::alloc(&b).unwrap();
    let cq_b = b.create_cq(16).unwrap();
    let mut rq = EthRq::create(&b, &cq_b, 8).unwrap();
    let tir = Tir::direct(&b, &td_b, &rq).unwrap();
    let steer = MacSteering::create(&b, mb, &tir).unwrap();
    let mr_b = b
        .alloc_mr(
            b.pd(),
            8 * 2048,
            MrAccess {
                local_write: true,
                ..MrAccess::default()
            },
        )
        .unwrap();
    let sges: Vec<[Sge; 1]> = (0..8)
        .map(|k| {
            [Sge {
                addr: mr_b.addr() + k * 2048,
                length: 2048,
                lkey: mr_b.lkey(),
            }]
        })
        .collect();
    let recvs: Vec<RecvWr<'_>> = sges
        .iter()
        .enumerate()
        .map(|(k, s)| RecvWr {
            wr_id: 500 + k as u64,
            sg_list: s,
        })
        .collect();
    rq.post_recv(&recvs).unwrap();

    // Three frames to B, one to a MAC nobody steers: three receives, in order, intact.
    let other = [0x02, 0, 0, 0, 0, 0x77];
    let frames = [
        udp_frame(mb, ma, 100, 1),
        udp_frame(other, ma, 100, 2),
        udp_frame(mb, ma, 900, 3),
        udp_frame(mb, ma, 1400, 4),
    ];
    for (k, f) in frames.iter().enumerate() {
        mr_a.write(k * 2048, &f[L2_INLINE..]).unwrap();
    }
    let s: Vec<[Sge; 1]> = frames
        .iter()
        .enumerate()
        .map(|(k, f)| {
            [Sge {
                addr: mr_a.addr() + (k * 2048) as u64,
                length: (f.len() - L2_INLINE) as u32,
                lkey: mr_a.lkey(),
            }]
        })
        .collect();
    let wrs: Vec<EthWr<'_>> = frames
        .iter()
        .zip(&s)
        .enumerate()
        .map(|(k, (f, s))| EthWr {
            wr_id: k as u64,
            headers: &f[..L2_INLINE],
            payload: s,
            // The last frame goes without offload: its zero IPv4 checksum is wrong.
            checksum: if k != 3 {
                Checksum::ALL
            } else {
                Checksum::NONE
            },
            vlan: None,
            tso_mss: None,
            signaled: k == 3,
        })
        .collect();
    sq.post_send(&wrs).unwrap();
    assert_eq!(wait(&cq_a, &a, 1)[0].wr_id, 3);
    let wc = wait(&cq_b, &b, 3);
    for (w, (k, f)) in wc
        .iter()
        .zip([(0u64, &frames[0]), (1, &frames[2]), (2, &frames[3])])
    {
        assert_eq!(
            (w.status, w.opcode, w.wr_id, w.byte_len, w.qp_num),
            (
                WcStatus::Success,
                WcOpcode::Recv,
                500 + k,
                f.len() as u32,
                rq.rqn()
            )
        );
        let mut got = vec![0u8; f.len()];
        mr_b.read((k * 2048) as usize, &mut got).unwrap();
        if k < 2 {
            // The device verified the checksums it had just filled in (IPv4, UDP).
            assert_eq!(w.wc_flags, mlx5::WcFlags::IP_CSUM_OK);
            assert!(checksums_ok(&got));
        } else {
            // Sent as is: a zero IPv4 header checksum, which the receiver does not vouch for.
            assert_eq!(w.wc_flags, mlx5::WcFlags::empty());
            assert_eq!(&got, f);
        }
        assert_eq!(&got[..24], &f[..24]);
        assert_eq!(&got[42..], &f[42..]);
    }
    let mut none = [mlx5::Wc::default()];
    assert_eq!(
        cq_b.poll(&mut none).unwrap(),
        0,
        "the frame to another MAC was dropped"
    );

    // Refusals: two SGEs in one receive; more receives than the ring holds.
    let two = [sges[0][0], sges[1][0]];
    let e = rq
        .post_recv(&[RecvWr {
            wr_id: 1,
            sg_list: &two,
        }])
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidArgument {
                field: "num_sge",
                ..
            }
        ),
        "{e:?}"
    );
    let nine: Vec<RecvWr<'_>> = (0..9).map(|_| recvs[0]).collect();
    assert!(matches!(rq.post_recv(&nine), Err(Error::QueueFull { .. })));

    // Teardown, in order, nothing quarantined.
    steer.destroy().unwrap();
    tir.destroy().unwrap();
    rq.destroy().unwrap();
    td_b.dealloc().unwrap();
    sq.destroy().unwrap();
    tis.destroy().unwrap();
    td_a.dealloc().unwrap();
    drop((mr_a, mr_b));
    cq_a.destroy().unwrap();
    cq_b.destroy().unwrap();
    assert_eq!((a.quarantined().buffers, b.quarantined().buffers), (0, 0));
}

#[test]
fn rss_spreads_flows_over_four_rqs_as_the_toeplitz_hash_predicts() {
    use mlx5::qp::RecvWr;
    use mlx5::raw::eth::{ipv4_input, MAX_INPUT};
    use mlx5::raw::eth::{toeplitz, EthRq, MacSteering, Rqt, RssFields, Tir, MS_RSS_KEY};
    let fabric = Fabric::new();
    let (_sa, a) = nic(&fabric, Mode::Sync);
    let (_sb, b) = nic(&fabric, Mode::Sync);
    let (ma, mb) = (a.vport().mac, b.vport().mac);
    let td_a = TransportDomain::alloc(&a).unwrap();
    let tis = Tis::create(&a, &td_a).unwrap();
    let cq_a = a.create_cq(64).unwrap();
    let mut sq = EthSq::create(&a, &cq_a, &tis, 32).unwrap();
    let mr_a = a.alloc_mr(a.pd(), 1 << 16, MrAccess::default()).unwrap();
    // B: four RQs, each on its own CQ, behind an RQT and a Toeplitz TIR over UDP 4-tuples.
    let td_b = TransportDomain::alloc(&b).unwrap();
    let cqs: Vec<_> = (0..4).map(|_| b.create_cq(32).unwrap()).collect();
    let mut rqs: Vec<_> = cqs
        .iter()
        .map(|c| EthRq::create(&b, c, 16).unwrap())
        .collect();
    let rq_refs: Vec<&EthRq<'_, _>> = rqs.iter().collect();
    assert!(matches!(
        Rqt::create(&b, &rq_refs[..3]),
        Err(Error::InvalidArgument {
            field: "rqs",
            requested: 3,
            ..
        })
    ));
    let rqt = Rqt::create(&b, &rq_refs).unwrap();
    let tir = Tir::rss(&b, &td_b, &rqt, &MS_RSS_KEY, RssFields::Ipv4Udp).unwrap();
    let steer = MacSteering::create(&b, mb, &tir).unwrap();
    let mr_b = b
        .alloc_mr(
            b.pd(),
            4 * 16 * 2048,
            MrAccess {
                local_write: true,
                ..MrAccess::default()
            },
        )
        .unwrap();
    for (q, rq) in rqs.iter_mut().enumerate() {
        let sges: Vec<[Sge; 1]> = (0..16)
            .map(|k| {
                [Sge {
                    addr: mr_b.addr() + ((q * 16 + k) * 2048) as u64,
                    length: 2048,
                    lkey: mr_b.lkey(),
                }]
            })
            .collect();
        let wrs: Vec<RecvWr<'_>> = sges
            .iter()
            .enumerate()
            .map(|(k, s)| RecvWr {
                wr_id: (q * 100 + k) as u64,
                sg_list: s,
            })
            .collect();
        rq.post_recv(&wrs).unwrap();
    }
    // 24 UDP flows (source ports 4000..4024): each frame lands in RQ `hash mod 4`.
    let mut expect = [0usize; 4];
    let mut frames = Vec::new();
    let mut hashes = Vec::new();
    for k in 0..24u16 {
        let mut f = udp_frame(mb, ma, 64, k as u8);
        f[34..36].copy_from_slice(&(4000 + k).to_be_bytes());
        let mut buf = [0u8; MAX_INPUT];
        let input = ipv4_input(
            &mut buf,
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            Some((4000 + k, 0x35)),
        );
        let h = toeplitz(&MS_RSS_KEY, input).unwrap();
        let q = (h % 4) as usize;
        expect[q] += 1;
        hashes.push(h);
        frames.push((f, q));
    }
    assert!(expect.iter().filter(|&&n| n > 0).count() >= 3, "{expect:?}");
    for (k, (f, _)) in frames.iter().enumerate() {
        mr_a.write(k * 1024, &f[L2_INLINE..]).unwrap();
    }
    let sg: Vec<[Sge; 1]> = frames
        .iter()
        .enumerate()
        .map(|(k, (f, _))| {
            [Sge {
                addr: mr_a.addr() + (k * 1024) as u64,
                length: (f.len() - L2_INLINE) as u32,
                lkey: mr_a.lkey(),
            }]
        })
        .collect();
    let wrs: Vec<EthWr<'_>> = frames
        .iter()
        .zip(&sg)
        .enumerate()
        .map(|(k, ((f, _), s))| EthWr {
            wr_id: k as u64,
            headers: &f[..L2_INLINE],
            payload: s,
            checksum: Checksum::ALL,
            vlan: None,
            tso_mss: None,
            signaled: k == 23,
        })
        .collect();
    sq.post_send(&wrs).unwrap();
    assert_eq!(wait(&cq_a, &a, 1)[0].wr_id, 23);
    for (q, cq) in cqs.iter().enumerate() {
        let wc = wait(cq, &b, expect[q]);
        let mut none = [mlx5::Wc::default()];
        assert_eq!(
            cq.poll(&mut none).unwrap(),
            0,
            "RQ {q} got more than predicted"
        );
        // The frames of this RQ, in order, each intact.
        let mine: Vec<(&Vec<u8>, u32)> = frames
            .iter()
            .zip(&hashes)
            .filter(|((_, fq), _)| *fq == q)
            .map(|((f, _), h)| (f, *h))
            .collect();
        for (n, (w, (f, h))) in wc.iter().zip(&mine).enumerate() {
            assert_eq!(
                (w.status, w.wr_id, w.qp_num),
                (WcStatus::Success, (q * 100 + n) as u64, rqs[q].rqn())
            );
            // The completion carries the hash the device computed: the Toeplitz hash.
            assert_eq!((w.rss_hash, w.vlan_tci), (Some(*h), None));
            let mut got = vec![0u8; f.len()];
            mr_b.read((q * 16 + n) * 2048, &mut got).unwrap();
            assert_eq!(&got[34..36], &f[34..36], "RQ {q}: the flow the hash picked");
            assert_eq!(&got[42..], &f[42..]);
        }
    }
    steer.destroy().unwrap();
    tir.destroy().unwrap();
    rqt.destroy().unwrap();
    for rq in rqs {
        rq.destroy().unwrap();
    }
    td_b.dealloc().unwrap();
    sq.destroy().unwrap();
    tis.destroy().unwrap();
    td_a.dealloc().unwrap();
    drop((mr_a, mr_b));
    assert_eq!((a.quarantined().buffers, b.quarantined().buffers), (0, 0));
}

#[test]
fn bursts_put_every_frame_on_the_wire_with_one_completion() {
    let fabric = Fabric::new();
    fabric.keep_frames(512);
    let (_sa, a) = nic(&fabric, Mode::Sync);
    let (_sb, b) = nic(&fabric, Mode::Sync);
    let td = TransportDomain::alloc(&a).unwrap();
    let tis = Tis::create(&a, &td).unwrap();
    let cq = a.create_cq(64).unwrap();
    // 64 frames of room: 128 WQEBBs, so three bursts of 70 frames wrap the ring.
    let mut sq = EthSq::create(&a, &cq, &tis, 64).unwrap();
    let per = sq.burst_frames_per_wqe() as usize;
    assert_eq!(
        per, 61,
        "63 DS (max_wqe_sz_sq 1024): control, Ethernet, 61 frames"
    );
    let mr = a.alloc_mr(a.pd(), 1 << 20, MrAccess::default()).unwrap();
    let (ma, mb) = (a.vport().mac, b.vport().mac);
    let mut seen = fabric.captured().len();
    for round in 0..3u8 {
        let n = 70;
        let frames: Vec<Vec<u8>> = (0..n)
            .map(|k| {
                udp_frame(
                    mb,
                    ma,
                    18 + (k * 37 + round as usize * 11) % 1400,
                    round ^ k as u8,
                )
            })
            .collect();
        let sges: Vec<Sge> = frames
            .iter()
            .enumerate()
            .map(|(k, f)| {
                let off = k * 2048;
                mr.write(off, f).unwrap();
                Sge {
                    addr: mr.addr() + off as u64,
                    length: f.len() as u32,
                    lkey: mr.lkey(),
                }
            })
            .collect();
        let checksum = if round == 1 {
            Checksum::NONE
        } else {
            Checksum::ALL
        };
        sq.post_burst(&EthBurst {
            wr_id: 100 + u64::from(round),
            frames: &sges,
            checksum,
            signaled: true,
        })
        .unwrap();
        let wc = wait(&cq, &a, 1);
        let total: usize = frames.iter().map(Vec::len).sum();
        assert_eq!(
            (
                wc[0].status,
                wc[0].opcode,
                wc[0].wr_id,
                wc[0].byte_len as usize,
                wc[0].qp_num
            ),
            (
                WcStatus::Success,
                WcOpcode::Send,
                100 + u64::from(round),
                total,
                sq.sqn()
            ),
            "one completion for the burst of {n} frames in two WQEs"
        );
        let wire = fabric.captured();
        let sent: Vec<&Vec<u8>> = wire[seen..].iter().map(|(_, f)| f).collect();
        seen = wire.len();
        assert_eq!(sent.len(), n, "every frame of the burst, once");
        for (k, (got, want)) in sent.iter().zip(&frames).enumerate() {
            let mut expect = want.clone();
            if checksum == Checksum::ALL {
                assert_eq!(
                    fold(sum16(&got[14..34], 0)),
                    0xffff,
                    "frame {k}: IPv4 checksum"
                );
                expect[24..26].copy_from_slice(&got[24..26]);
                expect[40..42].copy_from_slice(&got[40..42]);
            }
            if expect.len() < 60 {
                expect.resize(60, 0);
            }
            assert_eq!(&got[..], &expect[..], "round {round}, frame {k}");
        }
    }
    let mut wc = [empty_wc(); 4];
    assert_eq!(cq.poll(&mut wc).unwrap(), 0, "no completion per frame");
}

#[test]
fn bursts_are_refused_whole_when_malformed_or_too_big() {
    let fabric = Fabric::new();
    let (_sa, a) = nic(&fabric, Mode::Sync);
    let td = TransportDomain::alloc(&a).unwrap();
    let tis = Tis::create(&a, &td).unwrap();
    let cq = a.create_cq(64).unwrap();
    let mut sq = EthSq::create(&a, &cq, &tis, 8).unwrap();
    let mr = a.alloc_mr(a.pd(), 1 << 16, MrAccess::default()).unwrap();
    let sge = |len| Sge {
        addr: mr.addr(),
        length: len,
        lkey: mr.lkey(),
    };
    fn burst(frames: &[Sge]) -> EthBurst<'_> {
        EthBurst {
            wr_id: 1,
            frames,
            checksum: Checksum::NONE,
            signaled: true,
        }
    }
    for (frames, field) in [
        (vec![], "frames"),
        (vec![sge(60), sge(13)], "frame length"),
        (vec![sge(9_217)], "frame length"),
    ] {
        match sq.post_burst(&burst(&frames)) {
            Err(Error::InvalidArgument { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{field}: {other:?}"),
        }
    }
    // 16 WQEBBs of ring: a burst of 61 frames takes exactly 16; with one more, 17.
    let many = vec![sge(64); 62];
    assert!(matches!(
        sq.post_burst(&burst(&many)),
        Err(Error::QueueFull { .. })
    ));
    sq.post_burst(&burst(&many[..61])).unwrap();
    assert_eq!(wait(&cq, &a, 1)[0].byte_len, 61 * 64);
}
