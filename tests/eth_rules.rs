//! Receive flow rules (issue #13): a root table of `FlowTable` rules on a simulated ConnectX-5
//! steers frames by UDP port, VLAN ID, EtherType, IPv4 source, or drops them, each into the RQ
//! behind the TIR its rule names — frames sent by another simulated NIC through its SQ, the
//! VLAN tag inserted by the sender's WQE and stripped by the receiving RQ. Then every refusal:
//! ours by name before any command, the firmware's (a TIR that does not exist, a forward to a
//! table of a lower level) as the simulator's syndromes, a removed rule.

mod common;

use common::*;
use mlx5::mr::MrAccess;
use mlx5::qp::{RecvWr, Sge};
use mlx5::raw::eth::{
    Checksum, EthRq, EthSq, EthWr, FlowAction, FlowMatch, FlowTable, Tir, Tis, TransportDomain,
    L2_INLINE,
};
use mlx5::sim::{Fabric, Mode};
use mlx5::Error;

/// An Ethernet/IPv4 frame to `dst` from 10.0.0.`src_host`, protocol `proto`, ports
/// `sport` → `dport` (TCP or UDP headers of 20 or 8 bytes), `payload` bytes, checksums zero.
fn frame(
    dst: [u8; 6],
    src: [u8; 6],
    src_host: u8,
    proto: u8,
    ports: (u16, u16),
    payload: usize,
) -> Vec<u8> {
    let l4 = if proto == 6 { 20 } else { 8 };
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x08, 0x00]);
    let total = (20 + l4 + payload) as u16;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[
        0, 1, 0x40, 0, 64, proto, 0, 0, 10, 0, 0, src_host, 10, 0, 0, 2,
    ]);
    f.extend_from_slice(&ports.0.to_be_bytes());
    f.extend_from_slice(&ports.1.to_be_bytes());
    if proto == 6 {
        f.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
    } else {
        f.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
        f.extend_from_slice(&[0, 0]);
    }
    f.extend((0..payload).map(|i| i as u8));
    f
}

#[test]
fn rules_steer_by_port_vlan_ethertype_and_source_or_drop() {
    let fabric = Fabric::new();
    let (_sa, a) = nic(&fabric, Mode::Sync);
    let (sb, b) = nic(&fabric, Mode::Sync);
    let (ma, mb) = (a.vport().mac, b.vport().mac);
    // A: an SQ.
    let td_a = TransportDomain::alloc(&a).unwrap();
    let tis = Tis::create(&a, &td_a).unwrap();
    let cq_a = a.create_cq(64).unwrap();
    let mut sq = EthSq::create(&a, &cq_a, &tis, 16).unwrap();
    let mr_a = a.alloc_mr(a.pd(), 16 * 2048, MrAccess::default()).unwrap();
    // B: three RQs, each on its own CQ behind a direct TIR, 8 buffers each.
    let td_b = TransportDomain::alloc(&b).unwrap();
    let cqs: Vec<_> = (0..3).map(|_| b.create_cq(16).unwrap()).collect();
    let mut rqs: Vec<_> = cqs
        .iter()
        .map(|c| EthRq::create(&b, c, 8).unwrap())
        .collect();
    let lw = MrAccess {
        local_write: true,
        ..MrAccess::default()
    };
    let mr_b = b.alloc_mr(b.pd(), 3 * 8 * 2048, lw).unwrap();
    for (q, rq) in rqs.iter_mut().enumerate() {
        for i in 0..8u64 {
            let at = mr_b.addr() + (q as u64 * 8 + i) * 2048;
            let sge = [Sge {
                addr: at,
                length: 2048,
                lkey: mr_b.lkey(),
            }];
            rq.post_recv(&[RecvWr {
                wr_id: q as u64 * 8 + i,
                sg_list: &sge,
            }])
            .unwrap();
        }
    }
    let tirs: Vec<_> = rqs
        .iter()
        .map(|r| Tir::direct(&b, &td_b, r).unwrap())
        .collect();
    let mut t = FlowTable::create(&b, 0, 6).unwrap();
    let to = |m: FlowMatch| FlowMatch {
        dmac: Some(mb),
        ..m
    };
    let dns = t
        .add(
            &to(FlowMatch {
                ethertype: Some(0x0800),
                ip_protocol: Some(17),
                dst_port: Some(53),
                ..FlowMatch::default()
            }),
            FlowAction::Tir(tirs[1].tirn()),
        )
        .unwrap();
    t.add(
        &to(FlowMatch {
            vlan_id: Some(100),
            ..FlowMatch::default()
        }),
        FlowAction::Tir(tirs[2].tirn()),
    )
    .unwrap();
    t.add(
        &to(FlowMatch {
            ethertype: Some(0x0800),
            ip_protocol: Some(6),
            src_ipv4: Some([10, 0, 0, 66]),
            ..FlowMatch::default()
        }),
        FlowAction::Drop,
    )
    .unwrap();
    t.add(&to(FlowMatch::default()), FlowAction::Tir(tirs[0].tirn()))
        .unwrap();
    t.set_root().unwrap();

    // Five frames: DNS → RQ 1; VLAN 100 → RQ 2 (tag stripped); TCP from .66 dropped; other
    // UDP → RQ 0; TCP from .1 → RQ 0.
    let frames = [
        (frame(mb, ma, 1, 17, (4000, 53), 100), None),
        (frame(mb, ma, 1, 17, (4000, 54), 200), Some(100u16)),
        (frame(mb, ma, 66, 6, (4000, 80), 300), None),
        (frame(mb, ma, 1, 17, (4000, 54), 400), None),
        (frame(mb, ma, 1, 6, (4000, 80), 500), None),
    ];
    for (k, (f, vlan)) in frames.iter().enumerate() {
        mr_a.write(k * 2048, &f[L2_INLINE - 4..]).unwrap();
        let sge = [Sge {
            addr: mr_a.addr() + (k * 2048) as u64,
            length: (f.len() - (L2_INLINE - 4)) as u32,
            lkey: mr_a.lkey(),
        }];
        // The L2 header inline (14 bytes: with a tag inserted, 18 go into the WQE).
        let headers = &f[..L2_INLINE - 4];
        let e = sq.post_send(&[EthWr {
            wr_id: k as u64,
            headers,
            payload: &sge,
            checksum: Checksum::NONE,
            vlan: *vlan,
            tso_mss: None,
            signaled: true,
        }]);
        if vlan.is_none() {
            // Untagged, 14 inline bytes are too few (L2 mode inlines 18): refused by name.
            assert!(
                matches!(
                    e,
                    Err(Error::InvalidArgument {
                        field: "headers",
                        requested: 14,
                        max: 18,
                        ..
                    })
                ),
                "{e:?}"
            );
            let sge = [Sge {
                addr: mr_a.addr() + (k * 2048 + 4) as u64,
                length: (f.len() - L2_INLINE) as u32,
                lkey: mr_a.lkey(),
            }];
            sq.post_send(&[EthWr {
                wr_id: k as u64,
                headers: &f[..L2_INLINE],
                payload: &sge,
                checksum: Checksum::NONE,
                vlan: None,
                tso_mss: None,
                signaled: true,
            }])
            .unwrap();
        } else {
            e.unwrap();
        }
        assert_eq!(wait(&cq_a, &a, 1)[0].wr_id, k as u64);
    }
    let got = |q: usize, n: usize| wait(&cqs[q], &b, n);
    let read = |wr_id: u64, len: u32| {
        let mut v = vec![0u8; len as usize];
        mr_b.read(wr_id as usize * 2048, &mut v).unwrap();
        v
    };
    let w1 = got(1, 1);
    assert_eq!(&read(w1[0].wr_id, w1[0].byte_len)[14..], &frames[0].0[14..]);
    let w2 = got(2, 1);
    assert_eq!(
        w2[0].vlan_tci,
        Some(100),
        "the stripped tag, in the completion"
    );
    assert_eq!(w1[0].vlan_tci, None);
    // The RQ strips the tag (vsd 0): the frame as it was before the sender inserted it.
    let f2 = read(w2[0].wr_id, w2[0].byte_len);
    assert_eq!(f2.len(), frames[1].0.len());
    assert_eq!(&f2[14..], &frames[1].0[14..]);
    let w0 = got(0, 2);
    assert_eq!(w0[0].byte_len as usize, frames[3].0.len());
    assert_eq!(w0[1].byte_len as usize, frames[4].0.len());
    let c = sb.datapath_counters();
    assert_eq!(c.eth_rx_steering_drops, 1, "the TCP segment from 10.0.0.66");

    // Removing the DNS rule: port 53 now falls to the catch-all (RQ 0).
    t.remove(dns).unwrap();
    assert!(matches!(
        t.remove(dns),
        Err(Error::InvalidArgument { field: "rule", .. })
    ));
    mr_a.write(0, &frames[0].0[L2_INLINE..]).unwrap();
    let sge = [Sge {
        addr: mr_a.addr(),
        length: (frames[0].0.len() - L2_INLINE) as u32,
        lkey: mr_a.lkey(),
    }];
    sq.post_send(&[EthWr {
        wr_id: 9,
        headers: &frames[0].0[..L2_INLINE],
        payload: &sge,
        checksum: Checksum::NONE,
        vlan: None,
        tso_mss: None,
        signaled: true,
    }])
    .unwrap();
    wait(&cq_a, &a, 1);
    assert_eq!(got(0, 1)[0].byte_len as usize, frames[0].0.len());

    // Teardown: the table (root disconnected first), TIRs, RQs; nothing left.
    t.destroy().unwrap();
    for x in tirs {
        x.destroy().unwrap();
    }
    for r in rqs {
        r.destroy().unwrap();
    }
    for c in cqs {
        c.destroy().unwrap();
    }
    mr_b.dereg().unwrap();
    td_b.dealloc().unwrap();
    sq.destroy().unwrap();
    tis.destroy().unwrap();
    td_a.dealloc().unwrap();
    mr_a.dereg().unwrap();
    cq_a.destroy().unwrap();
    b.close().unwrap();
    assert!(sb.live_objects().is_empty(), "{:?}", sb.live_objects());
}

#[test]
fn flow_table_refusals_ours_and_the_firmwares() {
    let fabric = Fabric::new();
    let (_s, d) = nic(&fabric, Mode::Sync);
    let field = |e: Error| match e {
        Error::InvalidArgument { field, .. } => field,
        other => panic!("{other:?}"),
    };
    assert_eq!(field(FlowTable::create(&d, 0, 3).unwrap_err()), "log_size");
    assert_eq!(field(FlowTable::create(&d, 0, 11).unwrap_err()), "log_size");
    let mut t = FlowTable::create(&d, 1, 4).unwrap();
    let bad = [
        (
            FlowMatch {
                dst_port: Some(80),
                ..FlowMatch::default()
            },
            "ip_protocol",
        ),
        (
            FlowMatch {
                ip_protocol: Some(1),
                src_port: Some(1),
                ..FlowMatch::default()
            },
            "ip_protocol",
        ),
        (
            FlowMatch {
                src_ipv4: Some([1, 2, 3, 4]),
                ..FlowMatch::default()
            },
            "ethertype",
        ),
        (
            FlowMatch {
                vlan_id: Some(4096),
                ..FlowMatch::default()
            },
            "vlan_id",
        ),
    ];
    for (m, f) in bad {
        assert_eq!(field(t.add(&m, FlowAction::Drop).unwrap_err()), f, "{m:?}");
    }
    // A group holds 16 rules; a table of 16 entries one group.
    for k in 0..16u16 {
        let m = FlowMatch {
            ethertype: Some(0x9000 + k),
            ..FlowMatch::default()
        };
        t.add(&m, FlowAction::Drop).unwrap();
    }
    let m = FlowMatch {
        ethertype: Some(0x9100),
        ..FlowMatch::default()
    };
    assert_eq!(field(t.add(&m, FlowAction::Drop).unwrap_err()), "rules");
    let other = FlowMatch {
        ip_protocol: Some(17),
        ..FlowMatch::default()
    };
    assert_eq!(
        field(t.add(&other, FlowAction::Drop).unwrap_err()),
        "groups"
    );

    // The firmware's refusals, as its syndromes: a TIR that does not exist; a forward to a
    // table of a lower level (t is level 1, u level 0 would be below it).
    let mut u = FlowTable::create(&d, 2, 4).unwrap();
    let e = u
        .add(&FlowMatch::default(), FlowAction::Tir(0xabc))
        .unwrap_err();
    assert!(matches!(e, Error::Cmd { .. }), "{e:?}");
    let e = u
        .add(&FlowMatch::default(), FlowAction::Table(t.id()))
        .unwrap_err();
    assert!(matches!(e, Error::Cmd { .. }), "{e:?}");
    // A failed entry leaves no trace: the slot is free for a good one.
    u.add(&FlowMatch::default(), FlowAction::Drop).unwrap();
    u.destroy().unwrap();
    t.destroy().unwrap();
    d.close().unwrap();
}

#[test]
fn tso_cuts_a_tcp_send_into_segments_with_their_checksums() {
    use mlx5::eth::{EthPort, EthPortConfig};
    let fabric = Fabric::new();
    let (_sa, a) = nic(&fabric, Mode::Sync);
    let (_sb, b) = nic(&fabric, Mode::Sync);
    let (ma, mb) = (a.vport().mac, b.vport().mac);
    let td = TransportDomain::alloc(&a).unwrap();
    let tis = Tis::create(&a, &td).unwrap();
    let cq = a.create_cq(16).unwrap();
    let mut sq = EthSq::create(&a, &cq, &tis, 8).unwrap();
    let mr = a.alloc_mr(a.pd(), 8192, MrAccess::default()).unwrap();
    // B: a port (its receive path passes TCP up only with the device's checksum verdict).
    let (btx, brx) = (b.create_cq(16).unwrap(), b.create_cq(16).unwrap());
    let mut port = EthPort::open(&b, &btx, &brx, &EthPortConfig::default()).unwrap();
    // One TCP send of 2500 bytes, MSS 1000: the 54 header bytes inline, the payload by SGE.
    let f = frame(mb, ma, 1, 6, (4000, 80), 2500);
    mr.write(0, &f[54..]).unwrap();
    let sge = [Sge {
        addr: mr.addr(),
        length: 2500,
        lkey: mr.lkey(),
    }];
    let wr = EthWr {
        wr_id: 77,
        headers: &f[..54],
        payload: &sge,
        checksum: Checksum::NONE,
        vlan: None,
        tso_mss: Some(1000),
        signaled: true,
    };
    sq.post_send(&[wr]).unwrap();
    let wc = wait(&cq, &a, 1);
    assert_eq!(
        (wc[0].status, wc[0].opcode, wc[0].wr_id),
        (mlx5::WcStatus::Success, mlx5::WcOpcode::Tso, 77)
    );
    let mut got = Vec::new();
    while let Some(n) = port.recv().unwrap() {
        got.push(port.received(n).to_vec());
    }
    assert_eq!(got.len(), 3, "1000 + 1000 + 500");
    assert_eq!(
        port.stats().rx_checksum_drops,
        0,
        "every segment's checksums good"
    );
    let seq0 = u32::from_be_bytes(f[38..42].try_into().unwrap());
    let mut joined = Vec::new();
    for (k, s) in got.iter().enumerate() {
        let len = if k < 2 { 1000 } else { 500 };
        assert_eq!(s.len(), 54 + len);
        assert_eq!(
            u16::from_be_bytes([s[16], s[17]]) as usize,
            40 + len,
            "IPv4 total length"
        );
        let seq = u32::from_be_bytes(s[38..42].try_into().unwrap());
        assert_eq!(seq, seq0 + 1000 * k as u32);
        joined.extend_from_slice(&s[54..]);
    }
    assert_eq!(joined, &f[54..]);
    // Refusals: no segment size, headers that cannot be a TCP header, too much for LSO.
    let mut field = |w: EthWr<'_>| match sq.post_send(&[w]) {
        Err(Error::InvalidArgument { field, .. }) => field,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        field(EthWr {
            tso_mss: Some(0),
            ..wr
        }),
        "tso_mss"
    );
    assert_eq!(
        field(EthWr {
            headers: &f[..40],
            ..wr
        }),
        "headers"
    );
    let big = [Sge {
        addr: mr.addr(),
        length: 1 << 18,
        lkey: mr.lkey(),
    }];
    assert_eq!(
        field(EthWr {
            payload: &big,
            ..wr
        }),
        "tso bytes"
    );
    port.close().unwrap();
    btx.destroy().unwrap();
    brx.destroy().unwrap();
    sq.destroy().unwrap();
    tis.destroy().unwrap();
    td.dealloc().unwrap();
    mr.dereg().unwrap();
    cq.destroy().unwrap();
}

#[test]
fn queue_refusals_an_error_its_flush_and_recovery() {
    let fabric = Fabric::new();
    let (_sa, a) = nic(&fabric, Mode::Sync);
    let (_sb, b) = nic(&fabric, Mode::Sync);
    let td = TransportDomain::alloc(&a).unwrap();
    let tis = Tis::create(&a, &td).unwrap();
    let cq = a.create_cq(16).unwrap();
    let other = b.create_cq(16).unwrap();
    let field = |e: Error| match e {
        Error::InvalidArgument { field, .. } => field,
        other => panic!("{other:?}"),
    };
    // A CQ of another device; a depth over log_max_wq_sz.
    assert_eq!(field(EthSq::create(&a, &other, &tis, 8).unwrap_err()), "cq");
    assert_eq!(field(EthRq::create(&a, &other, 8).unwrap_err()), "cq");
    assert_eq!(field(EthRq::create(&a, &cq, 1 << 30).unwrap_err()), "depth");
    // A send whose data segment names a key the device does not know: an error completion,
    // the SQ stops in ERR and flushes what follows; recovered, it sends again.
    let mut sq = EthSq::create(&a, &cq, &tis, 8).unwrap();
    let f = frame([2, 0, 0, 0, 0, 9], a.vport().mac, 1, 17, (1, 2), 100);
    let bad = [Sge {
        addr: 0x1000,
        length: (f.len() - L2_INLINE) as u32,
        lkey: 0xdead_beef,
    }];
    let wr = EthWr {
        wr_id: 5,
        headers: &f[..L2_INLINE],
        payload: &bad,
        checksum: Checksum::NONE,
        vlan: None,
        tso_mss: None,
        signaled: true,
    };
    // Behind it in the same doorbell, a good frame: it completes flushed (the SQ stopped).
    let mr = a.alloc_mr(a.pd(), 4096, MrAccess::default()).unwrap();
    mr.write(0, &f[L2_INLINE..]).unwrap();
    let good = [Sge {
        addr: mr.addr(),
        length: (f.len() - L2_INLINE) as u32,
        lkey: mr.lkey(),
    }];
    let ok = EthWr {
        wr_id: 6,
        payload: &good,
        ..wr
    };
    // An SQ the device runs needs no recovery.
    assert!(!sq.recover().unwrap());
    sq.post_send(&[wr, ok]).unwrap();
    let wc = wait(&cq, &a, 2);
    assert_eq!(wc[0].wr_id, 5);
    assert_ne!(wc[0].status, mlx5::WcStatus::Success, "{:?}", wc[0]);
    assert_eq!((wc[1].wr_id, wc[1].status), (6, mlx5::WcStatus::WrFlushErr));
    // Posted while in ERR: flushed as well.
    sq.post_send(&[EthWr { wr_id: 7, ..ok }]).unwrap();
    let wc = wait(&cq, &a, 1);
    assert_eq!((wc[0].wr_id, wc[0].status), (7, mlx5::WcStatus::WrFlushErr));
    // Recovery (ERR -> RST -> RDY): the ring starts over and the good frame goes out.
    assert_eq!(sq.query_state().unwrap(), 3, "ERR");
    assert!(sq.recover().unwrap());
    assert_eq!(sq.query_state().unwrap(), 1, "RDY");
    sq.post_send(&[EthWr { wr_id: 8, ..ok }]).unwrap();
    let wc = wait(&cq, &a, 1);
    assert_eq!((wc[0].wr_id, wc[0].status), (8, mlx5::WcStatus::Success));
    mr.dereg().unwrap();
    sq.destroy().unwrap();
    tis.destroy().unwrap();
    td.dealloc().unwrap();
    cq.destroy().unwrap();
    other.destroy().unwrap();
    assert_eq!(a.quarantined().buffers, 0);
}
