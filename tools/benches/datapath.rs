//! The driver's data-path cost on a memory-backed null device: the simulated ConnectX-5 brings
//! the device up and creates the QP, then the platform stops delivering doorbells, so they land
//! in memory and nothing executes — only the driver's own work is timed.
//!
//! Baseline, in the same run: the bare stores of the same bytes (a 64-byte WQE into the ring
//! memory, the 4-byte doorbell record, the 8-byte doorbell) with the same barriers, through the
//! same DMA and MMIO primitives.

use std::hint::black_box;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};

mod null;
use mlx5::ifc::{Be32, Be64};
use mlx5::qp::{Mtu, Payload, QpCap, QpInitAttr, QpType, SendOp, SendWr, Sge};
use mlx5::raw::{barrier, DmaBuf};
use mlx5::sim::{Mode, Profile, SimDevice};
use mlx5::{Device, DeviceConfig, Platform, SimPlatform};
use null::{evict, reset, send_qp, write_cqe, Nullable};

fn post(c: &mut Criterion) {
    let plat = Nullable::new(SimDevice::new(Profile::connectx5(), Mode::Sync));
    let null = plat.null.clone();
    let dev = Device::open(plat.clone(), DeviceConfig::default()).unwrap();
    let pd = dev.pd();
    let cq = dev.create_cq(4096).unwrap();
    let mr = dev.alloc_mr(pd, 4096, mlx5::mr::MrAccess::ALL).unwrap();
    let (mut qp, gid) = send_qp(&dev, pd, &cq, 8192, 64);
    let dest = qp.qpn();
    null.store(true, Ordering::Relaxed);
    let cap = qp.cap().max_send_wr as u64; // WQEs that fit before a reset (each SEND here is 1 WQEBB)
    let sge = [Sge {
        addr: mr.addr(),
        length: 64,
        lkey: mr.lkey(),
    }];
    let one = SendWr::send(1, &sge);
    let batch: Vec<SendWr<'_>> = (0..32).map(|i| SendWr::send(i, &sge)).collect();
    let payload = [7u8; 64];
    let inline = SendWr {
        payload: Payload::Inline(&payload),
        ..one
    };

    // Baseline: the same stores through the same primitives, with the same barriers.
    let ring = DmaBuf::alloc(&plat, 1 << 16, 4096).unwrap();
    let dbr = DmaBuf::alloc(&plat, 64, 64).unwrap();
    let wqe = [0x5au8; 64];

    let mut g = c.benchmark_group("post_send");
    g.measurement_time(Duration::from_secs(3));
    g.bench_function("baseline: 64-byte WQE + DBR + 8-byte doorbell", |b| {
        let mut i = 0usize;
        b.iter(|| {
            ring.write_bytes((i & 1023) * 64, black_box(&wqe)).unwrap();
            barrier::dma_wmb();
            dbr.write_be32(4, Be32::new(i as u32)).unwrap();
            barrier::mmio_wmb();
            plat.bar_write64(0x8800, Be64::from_bytes([0; 8]));
            barrier::mmio_wmb();
            i += 1;
        })
    });
    let mut run = |name: &str, wrs: &[SendWr<'_>]| {
        let per = wrs.len() as u64;
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                let mut left = iters;
                while left > 0 {
                    reset(&mut qp, gid, dest);
                    let n = left.min(cap / per);
                    let t = Instant::now();
                    for _ in 0..n {
                        qp.post_send(black_box(wrs)).unwrap();
                    }
                    spent += t.elapsed();
                    left -= n;
                }
                spent
            })
        });
    };
    run(
        "post_send: 1 signaled 1-SGE SEND + doorbell",
        std::slice::from_ref(&one),
    );
    run("post_send: 32 WQEs behind one doorbell (per call)", &batch);
    run(
        "post_send: 64-byte inline SEND (BlueFlame)",
        std::slice::from_ref(&inline),
    );
    g.finish();
    null.store(false, Ordering::Relaxed);
    let _ = (ring.free(&plat), dbr.free(&plat));
    drop(qp);
    drop(mr);
    drop(cq);
    dev.close().unwrap();
}

/// CQEs per poll call in the poll benchmarks.
const POLL_BATCH: usize = 256;

/// `poll_cq` on the null device: 256 signaled SENDs are posted (the doorbell lands in memory),
/// then the bench plays the device and writes their 256 requester CQEs into the CQ ring's DMA
/// memory, as the PRM lays them out (§4.1: `byte_cnt`, `sop_drop_qpn`, `wqe_counter`, `op_own`
/// written last). Only the polling is timed, once with the CQE lines
/// as the writes left them (in this core's caches) and once with them flushed to memory first
/// (`CLFLUSH`: every CQE read misses, as when a NIC writes them to DRAM).
fn poll_null(c: &mut Criterion) {
    let plat = Nullable::new(SimDevice::new(Profile::connectx5(), Mode::Sync));
    let dev = Device::open(plat.clone(), DeviceConfig::default()).unwrap();
    let pd = dev.pd();
    let log_cq = 12u32;
    let before = plat.allocs.lock().unwrap().len();
    let cq = dev.create_cq((1 << log_cq) - 1).unwrap();
    let ring = plat.allocs.lock().unwrap()[before..]
        .iter()
        .copied()
        .find(|r| r.len == 64 << log_cq)
        .expect("the CQ ring's DMA region");
    let mr = dev.alloc_mr(pd, 4096, mlx5::mr::MrAccess::ALL).unwrap();
    let (mut qp, _) = send_qp(&dev, pd, &cq, 1024, 0);
    let qpn = qp.qpn();
    plat.null.store(true, Ordering::Relaxed);
    let sge = [Sge {
        addr: mr.addr(),
        length: 64,
        lkey: mr.lkey(),
    }];
    let batch: Vec<SendWr<'_>> = (0..POLL_BATCH as u64)
        .map(|i| SendWr::send(i, &sge))
        .collect();
    // Device side: CQEs written (producer counter) and WQEs completed (each SEND is 1 WQEBB).
    let mut pi = 0u32;
    let mut wqe = 0u16;
    let mut complete = |n: usize, flush: bool| {
        for _ in 0..n {
            let slot = (pi & ((1 << log_cq) - 1)) as usize;
            let mut img = [0u8; 64];
            img[44..48].copy_from_slice(&64u32.to_be_bytes());
            img[56..60].copy_from_slice(&(0x0a << 24 | qpn).to_be_bytes());
            img[60..62].copy_from_slice(&wqe.to_be_bytes());
            img[63] = ((pi >> log_cq) & 1) as u8; // opcode REQ (0), owner bit
            write_cqe(ring, slot * 64, &img);
            if flush {
                evict(ring, slot * 64);
            }
            pi = pi.wrapping_add(1);
            wqe = wqe.wrapping_add(1);
        }
    };
    let mut wc = vec![mlx5::Wc::default(); POLL_BATCH];
    let mut g = c.benchmark_group("poll_cq");
    g.measurement_time(Duration::from_secs(3));
    // 256 CQEs are written, then polled in calls of `n` under one timer (a timer pair costs
    // about 34 ns on this machine: per call it would swamp a 32-CQE call).
    for (name, n, flush) in [
        (
            "poll_cq null device: 256 CQEs in calls of 32, lines in cache",
            32,
            false,
        ),
        (
            "poll_cq null device: 256 CQEs in calls of 32 under start_poll, lines in cache",
            32,
            false,
        ),
        (
            "poll_cq null device: 256 CQEs in one call, lines in cache",
            POLL_BATCH,
            false,
        ),
        (
            "poll_cq null device: 256 CQEs in one call, lines flushed",
            POLL_BATCH,
            true,
        ),
    ] {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    qp.post_send(&batch).unwrap();
                    complete(POLL_BATCH, flush);
                    let t = Instant::now();
                    let mut got = 0;
                    if name.contains("start_poll") {
                        let mut p = cq.start_poll().unwrap();
                        while got < POLL_BATCH {
                            let end = (got + n).min(POLL_BATCH);
                            got += p.poll(&mut wc[got..end]).unwrap();
                        }
                    } else {
                        while got < POLL_BATCH {
                            let end = (got + n).min(POLL_BATCH);
                            got += cq.poll(&mut wc[got..end]).unwrap();
                        }
                    }
                    spent += t.elapsed();
                    assert_eq!(wc[POLL_BATCH - 1].wr_id, POLL_BATCH as u64 - 1);
                    assert_eq!(wc[POLL_BATCH - 1].byte_len, 64);
                }
                spent
            })
        });
    }
    g.finish();
    plat.null.store(false, Ordering::Relaxed);
    drop(qp);
    drop(mr);
    drop(cq);
    dev.close().unwrap();
}

fn poll(c: &mut Criterion) {
    // Completions made for real by the simulator (RDMA WRITEs in loopback), then polled: only
    // the polling is timed.
    let sim = SimDevice::new(Profile::connectx5(), Mode::Sync);
    let fabric = mlx5::sim::Fabric::new();
    fabric.attach(&sim).unwrap();
    let dev = Device::open(SimPlatform::new(sim), DeviceConfig::default()).unwrap();
    let pd = dev.pd();
    let cq = dev.create_cq(8192).unwrap();
    let mr = dev.alloc_mr(pd, 4096, mlx5::mr::MrAccess::ALL).unwrap();
    let mut qp = dev
        .create_qp(
            pd,
            &QpInitAttr::new(
                QpType::Rc,
                &cq,
                &cq,
                QpCap {
                    max_send_wr: 4096,
                    max_recv_wr: 1,
                    max_send_sge: 1,
                    max_recv_sge: 1,
                    max_inline_data: 0,
                },
            ),
        )
        .unwrap();
    // Loopback: the QP is connected to itself.
    let me = qp.endpoint();
    qp.connect(
        &me,
        &mlx5::qp::ConnectOpts {
            mtu: Mtu::Mtu4096,
            min_rnr_timer: 1,
            ..Default::default()
        },
    )
    .unwrap();
    let sge = [Sge {
        addr: mr.addr(),
        length: 8,
        lkey: mr.lkey(),
    }];
    let wr = SendWr {
        op: SendOp::Write {
            remote_addr: mr.addr() + 64,
            rkey: mr.rkey(),
        },
        ..SendWr::send(0, &sge)
    };
    let batch: Vec<SendWr<'_>> = (0..POLL_BATCH as u64)
        .map(|i| SendWr { wr_id: i, ..wr })
        .collect();
    let mut wc = vec![mlx5::Wc::default(); POLL_BATCH];
    let mut g = c.benchmark_group("poll_cq");
    g.measurement_time(Duration::from_secs(3));
    g.bench_function(
        "poll_cq fabric: 256 CQEs per call, written by the simulated loopback",
        |b| {
            b.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    qp.post_send(&batch).unwrap();
                    let t = Instant::now();
                    let mut got = 0;
                    while got < POLL_BATCH {
                        got += cq.poll(&mut wc[got..]).unwrap();
                    }
                    spent += t.elapsed();
                }
                spent
            })
        },
    );
    g.finish();
}

criterion_group!(benches, post, poll_null, poll);
criterion_main!(benches);
