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
//!   reported per frame. The same 256 frames written compressed (4 sessions of 64: a title and
//!   8 arrays of mini CQEs each) on a compressed CQ; and on a striding RQ (4 buffers of 64
//!   strides of 64 bytes, one frame a stride).
//! - beside them, in the same run: one RC SEND of 64 bytes (1 SGE) per work request, 32 behind
//!   one doorbell, on an RC QP of the same null device.
//!
//! Instructions: with `MLX5_ETH_COUNT=<n>` each operation also runs n times outside criterion
//! through a function of its own (`count_*`), for `valgrind --tool=callgrind` to count
//! (docs/performance.md, "The raw Ethernet path").

use std::hint::black_box;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use mlx5::cq::MiniCqe;
use mlx5::ifc::{Be32, Be64};
use mlx5::mr::MrAccess;
use mlx5::qp::SendWr;
use mlx5::qp::{RecvWr, Sge};
use mlx5::raw::eth::{
    Checksum, EthBurst, EthRq, EthSq, EthWr, Strides, Tis, TransportDomain, L2_INLINE,
};
use mlx5::raw::{barrier, DmaBuf};
use mlx5::sim::{Mode, Profile, SimDevice};
use mlx5::{Device, DeviceConfig, Platform, WcFlags};

mod null;
use null::{reset, send_qp, write_cqe, Nullable};

/// `MLX5_ETH_COUNT`: how many times to run each operation for callgrind (0: not).
fn count_runs() -> u64 {
    std::env::var("MLX5_ETH_COUNT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

// One function per operation, for callgrind's inclusive counts; each with a body of its own
// (a different constant), as identical functions would be folded into one symbol.
macro_rules! counted {
    ($($name:ident = $k:literal),* $(,)?) => {$(
        #[inline(never)]
        fn $name(f: &mut dyn FnMut()) {
            black_box($k as u8);
            f()
        }
    )*};
}
counted!(
    count_baseline = 1,
    count_eth_post_send = 2,
    count_eth_post_burst = 3,
    count_rc_post_send = 4,
    count_poll_plain = 5,
    count_poll_compressed = 6,
    count_poll_striding = 7,
);

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
    // One RC SEND per work request, for scale: 32 behind one doorbell, each the 64 bytes of
    // the frame through one SGE.
    // Its own CQ: an Ethernet SQ numbered like the QP may not share one (their CQEs would
    // name the same number).
    let rc_cq = dev.create_cq(8192).unwrap();
    let (mut qp, gid) = send_qp(&dev, dev.pd(), &rc_cq, 8192, 0);
    let dest = qp.qpn();
    let whole1 = [whole[0]];
    let sends: Vec<SendWr<'_>> = (0..BATCH as u64)
        .map(|i| SendWr::send(i, &whole1))
        .collect();
    let qp_cap = u64::from(qp.cap().max_send_wr);
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
    g.bench_function(
        "RC post_send: 32 SENDs of 64 bytes (1 SGE) behind one doorbell",
        |b| {
            b.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                let mut left = iters;
                while left > 0 {
                    reset(&mut qp, gid, dest);
                    let n = left.min(qp_cap / BATCH as u64);
                    let t = Instant::now();
                    for _ in 0..n {
                        qp.post_send(black_box(&sends)).unwrap();
                    }
                    spent += t.elapsed();
                    left -= n;
                }
                spent
            })
        },
    );
    g.finish();
    // Instruction counts (callgrind): each operation through its own function.
    let runs = count_runs();
    if runs > 0 {
        let mut i = 0usize;
        for _ in 0..runs {
            count_baseline(&mut || {
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
            });
        }
        for burst_mode in [false, true] {
            for _ in 0..runs {
                if sq.as_ref().is_some_and(|s| s.room() < BATCH as u32) {
                    sq.take().unwrap().destroy().unwrap();
                    sq = Some(EthSq::create(&dev, &cq, &tis, SQ_DEPTH).unwrap());
                }
                let s = sq.as_mut().unwrap();
                if burst_mode {
                    count_eth_post_burst(&mut || s.post_burst(black_box(&burst)).unwrap());
                } else {
                    count_eth_post_send(&mut || s.post_send(black_box(&wrs)).unwrap());
                }
            }
        }
        let mut left = 0;
        for _ in 0..runs {
            if left == 0 {
                reset(&mut qp, gid, dest);
                left = qp_cap / BATCH as u64;
            }
            count_rc_post_send(&mut || qp.post_send(black_box(&sends)).unwrap());
            left -= 1;
        }
    }
    plat.null.store(false, Ordering::Relaxed);
    let _ = (ring.free(&plat), dbr.free(&plat));
    drop(sq);
    drop(qp);
    drop(rc_cq);
    drop(mr);
    drop(cq);
    drop(tis);
    drop(td);
    dev.close().unwrap();
}

/// Completions per round of the poll bench (the RQ's depth).
const RECVS: usize = 256;
/// log2 of the poll bench's CQ slots.
const LOG_CQ: u32 = 9;

/// How the bench's device writes the 256 receive completions of a round.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rx {
    /// One CQE each (a regular RQ).
    Plain,
    /// Sessions of 64: a title and 8 arrays of 8 mini CQEs (CHECKSUM), the other slots left.
    Compressed,
    /// One CQE each, on a striding RQ: buffer `k / 64`, stride `k % 64`, one stride a frame.
    Striding,
}

/// 64-byte strides, 64 to a buffer; 4 buffers hold a round.
const STRIDES: Strides = Strides {
    log_stride_bytes: 6,
    log_num_strides: 6,
};

/// The image of receive CQE `k` of a round (L3 and L4 OK, IPv4/UDP, 64 bytes), owner bit
/// `owner`.
fn rx_cqe(rx: Rx, k: usize, owner: u8) -> [u8; 64] {
    let mut img = [0u8; 64];
    img[28] = 0x6;
    img[29] = (2 << 4) | (2 << 2);
    let (byte_cnt, counter) = match rx {
        Rx::Striding => {
            img[2..4].copy_from_slice(&((k / 64) as u16).to_be_bytes());
            ((1u32 << 16) | 64, (k % 64) as u16)
        }
        _ => (64u32, k as u16),
    };
    img[44..48].copy_from_slice(&byte_cnt.to_be_bytes());
    img[60..62].copy_from_slice(&counter.to_be_bytes());
    img[63] = (0x2 << 4) | owner;
    img
}

/// Writes a round's 256 completions from CQ counter `pi` into `ring` as `rx` says; the new
/// counter.
fn device_writes(ring: mlx5::DmaRegion, rx: Rx, pi: u32) -> u32 {
    let slot = |c: u32| (c & ((1 << LOG_CQ) - 1)) as usize * 64;
    let owner = |c: u32| ((c >> LOG_CQ) & 1) as u8;
    match rx {
        Rx::Plain | Rx::Striding => {
            for k in 0..RECVS {
                let c = pi + k as u32;
                write_cqe(ring, slot(c), &rx_cqe(rx, k, owner(c)));
            }
        }
        Rx::Compressed => {
            for s in 0..RECVS / 64 {
                let t = pi + 64 * s as u32;
                for a in 0..8u32 {
                    let mut arr = [0u8; 64];
                    for m in arr.chunks_exact_mut(8) {
                        m[4..].copy_from_slice(&64u32.to_be_bytes());
                    }
                    write_cqe(ring, slot(t + if a == 0 { 1 } else { 8 * a }), &arr);
                }
                // The title last: byte_cnt the session's 64 completions, format 3.
                let mut title = rx_cqe(Rx::Plain, 64 * s, owner(t));
                title[44..48].copy_from_slice(&64u32.to_be_bytes());
                title[63] |= 3 << 2;
                write_cqe(ring, slot(t), &title);
            }
        }
    }
    pi.wrapping_add(RECVS as u32)
}

/// The bench's receive side: a CQ (compressed for [`Rx::Compressed`]) and its RQ, the buffers
/// posted each round, and the CQ ring's DMA region.
fn poll_case(c: &mut Criterion, g_name: &str, rx: Rx) {
    let plat = Nullable::new(SimDevice::new(Profile::connectx5(), Mode::Sync));
    let dev = Device::open(plat.clone(), DeviceConfig::default()).unwrap();
    let before = plat.allocs.lock().unwrap().len();
    let cq = match rx {
        Rx::Compressed => dev.create_cq_compressed((1 << LOG_CQ) - 1, MiniCqe::Checksum),
        _ => dev.create_cq((1 << LOG_CQ) - 1),
    }
    .unwrap();
    let ring = plat.allocs.lock().unwrap()[before..]
        .iter()
        .copied()
        .find(|r| r.len == 64 << LOG_CQ)
        .expect("the CQ ring's DMA region");
    let (mut rq, wqes, buf) = match rx {
        Rx::Striding => (
            EthRq::create_striding(&dev, &cq, 4, STRIDES).unwrap(),
            4,
            STRIDES.buffer_bytes() as usize,
        ),
        _ => (EthRq::create(&dev, &cq, RECVS as u32).unwrap(), RECVS, 2048),
    };
    let lw = MrAccess {
        local_write: true,
        ..MrAccess::default()
    };
    let mr = dev.alloc_mr(dev.pd(), wqes * buf, lw).unwrap();
    let sges: Vec<[Sge; 1]> = (0..wqes)
        .map(|i| {
            [Sge {
                addr: mr.addr() + (i * buf) as u64,
                length: buf as u32,
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
    let mut pi = 0u32;
    let mut wc = vec![mlx5::Wc::default(); RECVS];
    // One round: buffers posted and the device's writes untimed, the polls timed.
    let mut round = |n: usize, timed: &mut dyn FnMut(&mut dyn FnMut())| {
        rq.post_recv(&recvs).unwrap();
        pi = device_writes(ring, rx, pi);
        timed(&mut || {
            let mut got = 0;
            while got < RECVS {
                let end = (got + n).min(RECVS);
                got += cq.poll(&mut wc[got..end]).unwrap();
            }
        });
        let last = &wc[RECVS - 1];
        let want = if rx == Rx::Striding {
            3
        } else {
            RECVS as u64 - 1
        };
        assert_eq!((last.wr_id, last.byte_len), (want, 64));
        assert!(last.wc_flags.contains(WcFlags::IP_CSUM_OK));
    };
    let mut g = c.benchmark_group("eth poll");
    g.measurement_time(Duration::from_secs(3));
    let calls: &[(&str, usize)] = if rx == Rx::Plain {
        &[("one call", RECVS), ("calls of 32", 32)]
    } else {
        &[("one call", RECVS)]
    };
    for &(how, n) in calls {
        g.bench_function(format!("poll_cq: 256 {g_name}, {how}"), |b| {
            b.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    round(n, &mut |poll| {
                        let t = Instant::now();
                        poll();
                        spent += t.elapsed();
                    });
                }
                spent
            })
        });
    }
    g.finish();
    for _ in 0..count_runs() {
        round(RECVS, &mut |poll| match rx {
            Rx::Plain => count_poll_plain(poll),
            Rx::Compressed => count_poll_compressed(poll),
            Rx::Striding => count_poll_striding(poll),
        });
    }
    plat.null.store(false, Ordering::Relaxed);
    drop(rq);
    drop(mr);
    drop(cq);
    dev.close().unwrap();
}

fn poll(c: &mut Criterion) {
    poll_case(c, "Ethernet receive CQEs", Rx::Plain);
    poll_case(
        c,
        "Ethernet receives compressed (4 sessions of 64)",
        Rx::Compressed,
    );
    poll_case(
        c,
        "Ethernet receives on a striding RQ (64 frames a buffer)",
        Rx::Striding,
    );
}

criterion_group!(benches, post, poll);
criterion_main!(benches);
