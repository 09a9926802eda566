//! The raw Ethernet path's own cost on the null device (issue #13 item 6): the simulated
//! ConnectX-5 creates the queues, then doorbells land in memory and nothing executes.
//!
//! - `eth post_send`: 64-byte frames posted in batches of 32 (18 header bytes inline, the other
//!   46 through one data segment, checksum offload asked: one 64-byte WQE each), against the
//!   baseline of the bare stores of the same WQE bytes — 32 × 64 bytes into ring memory as
//!   eight 64-bit stores each (the io module's fastest WQEBB store), the doorbell record, the
//!   8-byte doorbell — with the same barriers, in the same run. Reported per frame.
//! - `eth post_burst`: the same 32 frames, whole in memory, as one enhanced multi-packet send
//!   WQE (ENHANCED_MPSW: a data segment per frame, 9 WQEBBs) with one completion, beside the
//!   same baseline.
//! - `eth poll`: 256 receive completions of 64-byte IPv4/UDP frames (checksums good), written
//!   into the RQ's CQ ring as the device writes them, polled in one call (and in calls of 32);
//!   reported per frame.

use std::hint::black_box;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use mlx5::ifc::{Be32, Be64};
use mlx5::mr::MrAccess;
use mlx5::qp::{RecvWr, Sge};
use mlx5::raw::eth::{Checksum, EthBurst, EthRq, EthSq, EthWr, Tis, TransportDomain, L2_INLINE};
use mlx5::raw::{barrier, DmaBuf};
use mlx5::sim::{Mode, Profile, SimDevice};
use mlx5::{Device, DeviceConfig, Platform, WcFlags};

mod null;
use null::{write_cqe, Nullable};

/// Frames per post call.
const BATCH: usize = 32;
/// Frames in the SQ (WQEs of up to two WQEBBs each): refilled every this many.
const SQ_DEPTH: u32 = 4096;

/// A 64-byte Ethernet/IPv4/UDP frame.
fn frame() -> [u8; 64] {
    let mut f = [0u8; 64];
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[8, 0]);
    f[14..24].copy_from_slice(&[0x45, 0, 0, 50, 0, 1, 0x40, 0, 64, 17]);
    f[26..34].copy_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
    f[34..42].copy_from_slice(&[0x30, 0x39, 0, 9, 0, 30, 0, 0]);
    f
}

fn post(c: &mut Criterion) {
    let plat = Nullable::new(SimDevice::new(Profile::connectx5(), Mode::Sync));
    let dev = Device::open(plat.clone(), DeviceConfig::default()).unwrap();
    let td = TransportDomain::alloc(&dev).unwrap();
    let tis = Tis::create(&dev, &td).unwrap();
    let cq = dev.create_cq(8192).unwrap();
    let mr = dev.alloc_mr(dev.pd(), 4096, MrAccess::default()).unwrap();
    let f = frame();
    mr.write(0, &f[L2_INLINE..]).unwrap();
    // The whole frame too, for the bursts (no header inline).
    mr.write(1024, &f).unwrap();
    let whole: Vec<Sge> = (0..BATCH)
        .map(|_| Sge {
            addr: mr.addr() + 1024,
            length: f.len() as u32,
            lkey: mr.lkey(),
        })
        .collect();
    let burst = EthBurst {
        wr_id: 1,
        frames: &whole,
        checksum: Checksum::ALL,
        signaled: true,
    };
    let sge = [Sge {
        addr: mr.addr(),
        length: (f.len() - L2_INLINE) as u32,
        lkey: mr.lkey(),
    }];
    let wrs: Vec<EthWr<'_>> = (0..BATCH as u64)
        .map(|i| EthWr {
            wr_id: i,
            headers: &f[..L2_INLINE],
            payload: &sge,
            checksum: Checksum::ALL,
            vlan: None,
            tso_mss: None,
            signaled: i + 1 == BATCH as u64,
        })
        .collect();
    plat.null.store(true, Ordering::Relaxed);
    let mut sq = Some(EthSq::create(&dev, &cq, &tis, SQ_DEPTH).unwrap());

    // Baseline: the same WQE bytes stored through the same primitives and barriers.
    let ring = DmaBuf::alloc(&plat, 1 << 16, 4096).unwrap();
    let dbr = DmaBuf::alloc(&plat, 64, 64).unwrap();
    let wqe = [0x5a5a_5a5a_5a5a_5a5au64; 8];
    let mut g = c.benchmark_group("eth post_send");
    g.measurement_time(Duration::from_secs(3));
    g.bench_function(
        "baseline: 32 × (64-byte WQE) + DBR + 8-byte doorbell",
        |b| {
            let mut i = 0usize;
            b.iter(|| {
                for k in 0..BATCH {
                    ring.write_wqebb(((i + k) & 1023) * 64, black_box(&wqe))
                        .unwrap();
                }
                barrier::dma_wmb();
                dbr.write_be32(4, Be32::new(i as u32)).unwrap();
                barrier::uar_wc_start();
                plat.bar_write64(0x8800, Be64::from_bytes([0; 8]));
                barrier::uar_wc_flush();
                i += BATCH;
            })
        },
    );
    // The datapath bench's baseline primitive, for reading beside its QP figures: the same
    // bytes through `write_bytes`, with `mmio_wmb` around the doorbell.
    let bytes = [0x5au8; 64];
    g.bench_function(
        "baseline (datapath bench's): 32 × write_bytes(64) + DBR + doorbell",
        |b| {
            let mut i = 0usize;
            b.iter(|| {
                for k in 0..BATCH {
                    ring.write_bytes(((i + k) & 1023) * 64, black_box(&bytes))
                        .unwrap();
                }
                barrier::dma_wmb();
                dbr.write_be32(4, Be32::new(i as u32)).unwrap();
                barrier::mmio_wmb();
                plat.bar_write64(0x8800, Be64::from_bytes([0; 8]));
                barrier::mmio_wmb();
                i += BATCH;
            })
        },
    );
    // Each post timed alone; the null device completes nothing, so a fresh SQ (untimed)
    // replaces one whose ring is full.
    let mut timed = |name: &str, post: &dyn Fn(&mut EthSq<'_, Nullable>)| {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    if sq.as_ref().is_some_and(|s| s.room() < BATCH as u32) {
                        sq.take().unwrap().destroy().unwrap();
                        sq = Some(EthSq::create(&dev, &cq, &tis, SQ_DEPTH).unwrap());
                    }
                    let s = sq.as_mut().unwrap();
                    let t = Instant::now();
                    post(s);
                    spent += t.elapsed();
                }
                spent
            })
        });
    };
    timed(
        "post_send: 32 frames of 64 bytes behind one doorbell",
        &|s| s.post_send(black_box(&wrs)).unwrap(),
    );
    timed(
        "post_burst: 32 frames of 64 bytes in one enhanced multi-packet send WQE",
        &|s| s.post_burst(black_box(&burst)).unwrap(),
    );
    g.finish();
    plat.null.store(false, Ordering::Relaxed);
    let _ = (ring.free(&plat), dbr.free(&plat));
    drop(sq);
    drop(mr);
    drop(cq);
    drop(tis);
    drop(td);
    dev.close().unwrap();
}

/// Completions per round of the poll bench (the RQ's depth).
const RECVS: usize = 256;

fn poll(c: &mut Criterion) {
    let plat = Nullable::new(SimDevice::new(Profile::connectx5(), Mode::Sync));
    let dev = Device::open(plat.clone(), DeviceConfig::default()).unwrap();
    let log_cq = 9u32;
    let before = plat.allocs.lock().unwrap().len();
    let cq = dev.create_cq((1 << log_cq) - 1).unwrap();
    let ring = plat.allocs.lock().unwrap()[before..]
        .iter()
        .copied()
        .find(|r| r.len == 64 << log_cq)
        .expect("the CQ ring's DMA region");
    let mut rq = EthRq::create(&dev, &cq, RECVS as u32).unwrap();
    let lw = MrAccess {
        local_write: true,
        ..MrAccess::default()
    };
    let mr = dev.alloc_mr(dev.pd(), RECVS * 2048, lw).unwrap();
    let sges: Vec<[Sge; 1]> = (0..RECVS as u64)
        .map(|i| {
            [Sge {
                addr: mr.addr() + i * 2048,
                length: 2048,
                lkey: mr.lkey(),
            }]
        })
        .collect();
    let recvs: Vec<RecvWr<'_>> = sges
        .iter()
        .enumerate()
        .map(|(i, s)| RecvWr {
            wr_id: i as u64,
            sg_list: s,
        })
        .collect();
    plat.null.store(true, Ordering::Relaxed);
    // Device side: receive CQEs (opcode RESP_SEND, the flow tag 0 in `sop_drop_qpn`, L3 and L4
    // OK, IPv4/UDP header types, 64 bytes), the producer counter and the RQ's WQE counter.
    let (mut pi, mut wqe) = (0u32, 0u16);
    let mut complete = |n: usize| {
        for _ in 0..n {
            let slot = (pi & ((1 << log_cq) - 1)) as usize;
            let mut img = [0u8; 64];
            img[28] = 0x6;
            img[29] = (2 << 4) | (2 << 2);
            img[44..48].copy_from_slice(&64u32.to_be_bytes());
            img[60..62].copy_from_slice(&wqe.to_be_bytes());
            img[63] = (0x2 << 4) | ((pi >> log_cq) & 1) as u8;
            write_cqe(ring, slot * 64, &img);
            pi = pi.wrapping_add(1);
            wqe = wqe.wrapping_add(1);
        }
    };
    let mut wc = vec![mlx5::Wc::default(); RECVS];
    let mut g = c.benchmark_group("eth poll");
    g.measurement_time(Duration::from_secs(3));
    for (name, n) in [
        ("poll_cq: 256 Ethernet receive CQEs in one call", RECVS),
        ("poll_cq: 256 Ethernet receive CQEs in calls of 32", 32),
    ] {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    rq.post_recv(&recvs).unwrap();
                    complete(RECVS);
                    let t = Instant::now();
                    let mut got = 0;
                    while got < RECVS {
                        let end = (got + n).min(RECVS);
                        got += cq.poll(&mut wc[got..end]).unwrap();
                    }
                    spent += t.elapsed();
                    let last = &wc[RECVS - 1];
                    assert_eq!((last.wr_id, last.byte_len), (RECVS as u64 - 1, 64));
                    assert!(last.wc_flags.contains(WcFlags::IP_CSUM_OK));
                }
                spent
            })
        });
    }
    g.finish();
    plat.null.store(false, Ordering::Relaxed);
    drop(rq);
    drop(mr);
    drop(cq);
    dev.close().unwrap();
}

criterion_group!(benches, post, poll);
criterion_main!(benches);
