//! Issue #10, row 9: BlueFlame only through write-combining UARs. rdma-core's mlx5 provider
//! gives a non-cached UAR no BlueFlame (`bf->buf_size = 0` in `nc_mode`); the driver asks
//! `Platform::uar_write_combining` and rings the 8-byte doorbell otherwise. The simulator logs
//! every UAR store (`SimDevice::uar_writes_since`), which is what these tests read.

mod common;

use common::{cap, wait};
use mlx5::mr::MrAccess;
use mlx5::qp::{Payload, RecvWr, SendWr, Sge};
use mlx5::sim::{Fabric, Mode, Profile, SimDevice, UarWrite};
use mlx5::{Device, DeviceConfig, SimPlatform, WcStatus};

/// The UAR stores of the QP's page made by one small inline SEND (48 bytes: 2 WQEBBs), then by
/// one SEND of an SGE, each completed through the loopback.
fn sends(write_combining: bool) -> (Vec<UarWrite>, Vec<UarWrite>, Vec<UarWrite>, u64) {
    let sim = SimDevice::new(Profile::connectx5(), Mode::Sync);
    Fabric::new().attach(&sim).unwrap();
    let plat = SimPlatform::new(sim.clone()).with_write_combining(write_combining);
    let dev = Device::open(plat, DeviceConfig::default()).unwrap();
    let cq = dev.create_cq(16).unwrap();
    let mr = dev.alloc_mr(dev.pd(), 4096, MrAccess::ALL).unwrap();
    let mut q = common::looped(&dev, &cq, cap(4, 4, 1));
    let page = mlx5::raw::qp_uar(&q).bar_offset();
    let recv = [Sge {
        addr: mr.addr() + 1024,
        length: 256,
        lkey: mr.lkey(),
    }];
    for wr_id in 0..3 {
        q.post_recv(&[RecvWr {
            wr_id,
            sg_list: &recv,
        }])
        .unwrap();
    }
    let data = [0x5au8; 48];
    let inline = SendWr {
        payload: Payload::Inline(&data),
        ..SendWr::send(1, &[])
    };
    let sge = [Sge {
        addr: mr.addr(),
        length: 48,
        lkey: mr.lkey(),
    }];
    let mut per_post = Vec::new();
    for wr in [inline, inline, SendWr::send(2, &sge)] {
        let before = sim.uar_write_count();
        q.post_send(&[wr]).unwrap();
        let wc = wait(&cq, &dev, 2);
        assert!(wc.iter().all(|w| w.status == WcStatus::Success), "{wc:?}");
        per_post.push(
            sim.uar_writes_since(before)
                .iter()
                .filter(|w| (page..page + 4096).contains(&w.offset))
                .copied()
                .collect::<Vec<_>>(),
        );
    }
    assert_eq!(
        sim.dma_faults(),
        vec![],
        "no BlueFlame word differs from the ring"
    );
    let third = per_post.pop().unwrap();
    let second = per_post.pop().unwrap();
    let first = per_post.pop().unwrap();
    (first, second, third, page)
}

#[test]
fn an_uncached_uar_gets_the_8_byte_doorbell_for_a_small_inline_send() {
    let (first, second, third, page) = sends(false);
    for (n, writes) in [first, second, third].iter().enumerate() {
        assert_eq!(
            writes
                .iter()
                .map(|w| (w.offset, w.width))
                .collect::<Vec<_>>(),
            [(page + 0x800, 64)],
            "post {n}: one doorbell, always in the first half (no BlueFlame offset to toggle)"
        );
    }
}

#[test]
fn a_write_combining_uar_gets_blueflame_for_a_small_inline_send_only() {
    let (first, second, third, page) = sends(true);
    // 48 inline bytes: control (16) + header (4) + data (48) = 68 bytes, DS 5, 2 WQEBBs.
    let bf = |half: u64| {
        (0..16)
            .map(|i| (page + 0x800 + half + 8 * i, 64))
            .collect::<Vec<_>>()
    };
    let at = |w: &[UarWrite]| w.iter().map(|w| (w.offset, w.width)).collect::<Vec<_>>();
    assert_eq!(at(&first), bf(0), "the whole WQE through the first half");
    assert_eq!(
        at(&second),
        bf(0x100),
        "the next one through the other half"
    );
    assert_eq!(
        at(&third),
        [(page + 0x800, 64)],
        "a SEND of an SGE rings the 8-byte doorbell (back in the first half)"
    );
}

/// Inline SENDs of every length class through BlueFlame (header and data in the first WQEBB or
/// across two, padding in the last): the bytes arrive, and every BlueFlame word matches the ring.
#[test]
fn blueflame_inline_sends_of_every_length_arrive_intact() {
    let sim = SimDevice::new(Profile::connectx5(), Mode::Sync);
    Fabric::new().attach(&sim).unwrap();
    let dev = Device::open(SimPlatform::new(sim.clone()), DeviceConfig::default()).unwrap();
    let cq = dev.create_cq(16).unwrap();
    let mr = dev.alloc_mr(dev.pd(), 4096, MrAccess::ALL).unwrap();
    let mut q = common::looped(&dev, &cq, cap(4, 4, 1));
    let recv = [Sge {
        addr: mr.addr() + 1024,
        length: 256,
        lkey: mr.lkey(),
    }];
    for len in [1usize, 3, 4, 5, 11, 12, 13, 27, 28, 29, 44, 59, 60, 61, 64] {
        let data: Vec<u8> = (0..len as u8).map(|i| i.wrapping_mul(31) ^ 0x5a).collect();
        q.post_recv(&[RecvWr {
            wr_id: len as u64,
            sg_list: &recv,
        }])
        .unwrap();
        let before = sim.uar_write_count();
        q.post_send(&[SendWr {
            payload: Payload::Inline(&data),
            ..SendWr::send(len as u64, &[])
        }])
        .unwrap();
        assert!(
            sim.uar_write_count() - before >= 8,
            "{len} bytes: a BlueFlame copy of whole WQEBBs"
        );
        let wc = wait(&cq, &dev, 2);
        assert!(
            wc.iter().all(|w| w.status == WcStatus::Success),
            "{len}: {wc:?}"
        );
        let mut got = vec![0; len];
        mr.read(1024, &mut got).unwrap();
        assert_eq!(got, data, "{len} bytes");
    }
    assert_eq!(
        sim.dma_faults(),
        vec![],
        "no BlueFlame word differs from the ring"
    );
}

/// The straight-line check of an inline SEND or WRITE (one number per QP, folded at create)
/// takes exactly what the rules take: at most the granted `max_inline_data` bytes, in a WQE of
/// at most 63 DS units that fits the send WQE — for every length up to past the limit, on QPs
/// asked for several inline sizes. What is taken completes (through the loopback); what is
/// refused posts nothing.
#[test]
fn inline_limits_are_the_rules_at_every_length() {
    let sim = SimDevice::new(Profile::connectx5(), Mode::Sync);
    Fabric::new().attach(&sim).unwrap();
    let dev = Device::open(SimPlatform::new(sim.clone()), DeviceConfig::default()).unwrap();
    let cq = dev.create_cq(64).unwrap();
    let mr = dev.alloc_mr(dev.pd(), 8192, MrAccess::ALL).unwrap();
    let data = [0xa5u8; 1100];
    for asked in [0, 1, 12, 28, 44, 60, 64, 200, 828] {
        let mut c = cap(8, 8, 1);
        c.max_inline_data = asked;
        let mut q = common::looped(&dev, &cq, c);
        let granted = q.cap().max_inline_data;
        let ds_max = 63.min(q.layout().sq_wqe_bytes as usize / 16);
        let recv = [Sge {
            addr: mr.addr(),
            length: 4096,
            lkey: mr.lkey(),
        }];
        let mut recvs = 0;
        for len in 0..=(granted as usize + 40).min(data.len()) {
            let units = if len == 0 { 0 } else { (4 + len).div_ceil(16) };
            for (base, write) in [(1, false), (2, true)] {
                let want = len <= granted as usize && base + units <= ds_max;
                if !write && recvs == 0 {
                    q.post_recv(&[RecvWr {
                        wr_id: 9,
                        sg_list: &recv,
                    }])
                    .unwrap();
                    recvs = 1;
                }
                let mut wr = SendWr {
                    payload: Payload::Inline(&data[..len]),
                    ..SendWr::send(len as u64, &[])
                };
                if write {
                    wr.op = mlx5::qp::SendOp::Write {
                        remote_addr: mr.addr() + 4096,
                        rkey: mr.rkey(),
                    };
                }
                let got = q.post_send(&[wr]);
                assert_eq!(
                    got.is_ok(),
                    want,
                    "max_inline_data {asked} (granted {granted}, DS ≤ {ds_max}): {} of {len} bytes: {got:?}",
                    if write { "WRITE" } else { "SEND" }
                );
                if want {
                    let n = if write { 1 } else { 2 };
                    let wc = wait(&cq, &dev, n);
                    assert!(wc.iter().all(|w| w.status == WcStatus::Success), "{wc:?}");
                    if !write {
                        recvs = 0;
                    }
                }
            }
        }
        drop(q);
    }
    assert_eq!(sim.dma_faults(), vec![]);
}
