//! Issue #30: what scale costs. Each figure is a ratio against a baseline measured in the same
//! run:
//!
//! * `create_qp` + `destroy_qp` of one QP with 1, 1 000, 10 000 and 100 000 QPs already live on
//!   the same CQ (flat is the goal), against one firmware command round trip.
//! * post + poll per work request on the memory-backed null device, round robin over 64 QPs in
//!   RTS, with none and with 10 000 other QPs on the same CQ (flat is the goal): the run with none
//!   is the baseline.
//! * two threads, each with its own CQ and 64 QPs, posting and polling on the null device,
//!   against one thread doing the same work (2× is perfect scaling on two cores).
//! * `create_qp` + `destroy_qp` from two threads against one thread.

use std::hint::black_box;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};

mod null;
use mlx5::qp::{ConnectOpts, QpCap, QpInitAttr, QpType, SendOps, SendWr, Sge};
use mlx5::sim::{Mode, Profile, SimDevice};
use mlx5::{Device, DeviceConfig, DmaRegion};
use null::{write_cqe, Nullable};

type Dev = Device<Nullable>;
type Cq<'a> = mlx5::cq::Cq<'a, Nullable>;
type Qp<'a> = mlx5::qp::Qp<'a, Nullable>;

/// QPs the data-path runs post to, round robin.
const ACTIVE: usize = 64;
/// log2 of the CQ's slots in the data-path runs.
const LOG_CQ: u32 = 12;

fn small() -> QpCap {
    QpCap {
        max_send_wr: 64,
        max_recv_wr: 1,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    }
}

fn idle_qps<'a>(dev: &'a Dev, cq: &'a Cq<'a>, n: usize) -> Vec<Qp<'a>> {
    let attr = QpInitAttr::new(QpType::Rc, cq, cq, small());
    (0..n)
        .map(|i| {
            dev.create_qp(dev.pd(), &attr)
                .unwrap_or_else(|e| panic!("idle QP {i} of {n}: {e}"))
        })
        .collect()
}

fn open() -> (Nullable, Dev) {
    let plat = Nullable::new(SimDevice::new(Profile::connectx5(), Mode::Sync));
    let dev = Device::open(plat.clone(), DeviceConfig::default()).unwrap();
    (plat, dev)
}

fn create(c: &mut Criterion) {
    let (_plat, dev) = open();
    let cq = dev.create_cq(256).unwrap();
    let attr = QpInitAttr::new(QpType::Rc, &cq, &cq, small());
    let mut g = c.benchmark_group("scale/create_qp");
    g.measurement_time(Duration::from_secs(3));
    g.sample_size(30);
    g.bench_function("baseline: one command (QUERY_VPORT_STATE)", |b| {
        b.iter(|| dev.port_state().unwrap())
    });
    let mut live: Vec<Qp<'_>> = Vec::new();
    for n in [1usize, 1_000, 10_000, 100_000] {
        live.extend(idle_qps(&dev, &cq, n - 1 - live.len().min(n - 1)));
        g.bench_function(format!("create_qp + destroy_qp, {n} live"), |b| {
            b.iter(|| dev.create_qp(dev.pd(), &attr).unwrap().destroy().unwrap())
        });
    }
    g.finish();
    eprintln!(
        "scale: {:?} with {} QPs live",
        dev.bfreg_usage(),
        live.len()
    );
    drop(live);
    drop(cq);
    dev.close().unwrap();
}

/// A CQ of 2^`LOG_CQ` slots and its ring: the first region of the ring's size that its creation
/// allocated (a firmware page chunk has the same size, so earlier regions are not looked at).
fn ring_cq<'d>(plat: &Nullable, dev: &'d Dev) -> (Cq<'d>, Ring) {
    let before = plat.allocs.lock().unwrap().len();
    let cq = dev.create_cq((1 << LOG_CQ) - 1).unwrap();
    let ring = plat.allocs.lock().unwrap()[before..]
        .iter()
        .copied()
        .find(|r| r.len == 64 << LOG_CQ)
        .expect("the CQ ring's DMA region");
    (cq, Ring(ring))
}

/// A CQ ring the bench writes CQEs into, as the device would.
#[derive(Clone, Copy)]
struct Ring(DmaRegion);

// SAFETY: the region is DMA memory the bench reaches only through atomics (`write_cqe`), as
// the device does from any thread; it stays mapped while its CQ exists, which outlives every
// thread that holds the `Ring` (scoped threads).
unsafe impl Send for Ring {}

/// `ACTIVE` QPs in RTS on `cq` whose ring is `ring`, and the device side: posts one SEND of
/// 64 bytes on each, writes their CQEs, polls them.
struct Active<'a> {
    qps: Vec<Qp<'a>>,
    cq: &'a Cq<'a>,
    ring: Ring,
    pi: u32,
    wqe: Vec<u16>,
    sge: [Sge; 1],
    wc: Vec<mlx5::Wc>,
}

impl<'a> Active<'a> {
    fn new(
        dev: &'a Dev,
        ring: Ring,
        cq: &'a Cq<'a>,
        mr: &mlx5::MemoryRegion<'a, Nullable>,
    ) -> Self {
        let mut attr = QpInitAttr::new(QpType::Rc, cq, cq, small());
        attr.send_ops = Some(SendOps::SEND);
        let qps = (0..ACTIVE)
            .map(|_| {
                let mut q = dev.create_qp(dev.pd(), &attr).unwrap();
                let me = q.endpoint();
                q.connect(&me, &ConnectOpts::default()).unwrap();
                q
            })
            .collect();
        Active {
            qps,
            cq,
            ring,
            pi: 0,
            wqe: vec![0; ACTIVE],
            sge: [Sge {
                addr: mr.addr(),
                length: 64,
                lkey: mr.lkey(),
            }],
            wc: vec![mlx5::Wc::default(); ACTIVE],
        }
    }

    /// One SEND on every active QP, their CQEs, one poll of all: `ACTIVE` work requests.
    fn round(&mut self) {
        for (i, q) in self.qps.iter_mut().enumerate() {
            q.post_send(&[SendWr::send(i as u64, &self.sge)]).unwrap();
        }
        for (i, q) in self.qps.iter().enumerate() {
            let slot = (self.pi & ((1 << LOG_CQ) - 1)) as usize;
            let mut img = [0u8; 64];
            img[44..48].copy_from_slice(&64u32.to_be_bytes());
            img[56..60].copy_from_slice(&(0x0a << 24 | q.qpn()).to_be_bytes());
            img[60..62].copy_from_slice(&self.wqe[i].to_be_bytes());
            img[63] = ((self.pi >> LOG_CQ) & 1) as u8;
            write_cqe(self.ring.0, slot * 64, &img);
            self.pi = self.pi.wrapping_add(1);
            self.wqe[i] = self.wqe[i].wrapping_add(1);
        }
        let mut got = 0;
        while got < ACTIVE {
            got += self.cq.poll(&mut self.wc[got..]).unwrap();
        }
        black_box(&self.wc);
    }
}

fn post_poll(c: &mut Criterion) {
    let mut g = c.benchmark_group("scale/post_poll");
    g.measurement_time(Duration::from_secs(3));
    for idle in [0usize, 10_000] {
        let (plat, dev) = open();
        let (cq, ring) = ring_cq(&plat, &dev);
        let mr = dev
            .alloc_mr(dev.pd(), 4096, mlx5::mr::MrAccess::ALL)
            .unwrap();
        // Idle QPs first and after: the active ones' numbers sit among them.
        let mut others = idle_qps(&dev, &cq, idle / 2);
        let mut act = Active::new(&dev, ring, &cq, &mr);
        others.extend(idle_qps(&dev, &cq, idle - idle / 2));
        plat.null.store(true, Ordering::Relaxed);
        let name = if idle == 0 {
            format!("baseline: post + poll of {ACTIVE} WRs, one per QP, {ACTIVE} QPs on the CQ")
        } else {
            format!("post + poll of {ACTIVE} WRs, one per QP, {ACTIVE} active + {idle} idle QPs on the CQ")
        };
        g.bench_function(name, |b| b.iter(|| act.round()));
        plat.null.store(false, Ordering::Relaxed);
        drop(act);
        drop(others);
        drop(mr);
        drop(cq);
        dev.close().unwrap();
    }
    g.finish();
}

/// Rounds of `ACTIVE` WRs in one iteration of the thread runs (split between the threads).
const THREAD_ROUNDS: u64 = 200;
/// QPs created and destroyed in one iteration of the thread runs (split between the threads).
const THREAD_QPS: u64 = 64;

fn threads(c: &mut Criterion) {
    let (plat, dev) = open();
    let cqs = [0, 1].map(|_| ring_cq(&plat, &dev));
    let mr = dev
        .alloc_mr(dev.pd(), 4096, mlx5::mr::MrAccess::ALL)
        .unwrap();
    let mut acts: Vec<Active<'_>> = cqs
        .iter()
        .map(|(cq, ring)| Active::new(&dev, *ring, cq, &mr))
        .collect();
    plat.null.store(true, Ordering::Relaxed);
    let mut g = c.benchmark_group("scale/threads");
    g.measurement_time(Duration::from_secs(4));
    g.sample_size(20);
    // One iteration: THREAD_ROUNDS rounds, by one thread or split between two.
    g.bench_function("baseline: post + poll, one thread", |b| {
        b.iter_custom(|iters| {
            let t = Instant::now();
            for _ in 0..iters * THREAD_ROUNDS {
                acts[0].round();
            }
            t.elapsed()
        })
    });
    g.bench_function("post + poll, two threads each on its own CQ", |b| {
        b.iter_custom(|iters| {
            let t = Instant::now();
            std::thread::scope(|s| {
                for a in acts.iter_mut() {
                    s.spawn(move || {
                        for _ in 0..iters * THREAD_ROUNDS / 2 {
                            a.round();
                        }
                    });
                }
            });
            t.elapsed()
        })
    });
    plat.null.store(false, Ordering::Relaxed);
    let attr = [0, 1].map(|i| QpInitAttr::new(QpType::Rc, &cqs[i].0, &cqs[i].0, small()));
    // One iteration: THREAD_QPS QPs, by one thread or split between two.
    g.bench_function("baseline: create_qp + destroy_qp, one thread", |b| {
        b.iter_custom(|iters| {
            let t = Instant::now();
            for _ in 0..iters * THREAD_QPS {
                dev.create_qp(dev.pd(), &attr[0])
                    .unwrap()
                    .destroy()
                    .unwrap();
            }
            t.elapsed()
        })
    });
    g.bench_function("create_qp + destroy_qp, two threads", |b| {
        b.iter_custom(|iters| {
            let t = Instant::now();
            std::thread::scope(|s| {
                for a in &attr {
                    let dev = &dev;
                    s.spawn(move || {
                        for _ in 0..iters * THREAD_QPS / 2 {
                            dev.create_qp(dev.pd(), a).unwrap().destroy().unwrap();
                        }
                    });
                }
            });
            t.elapsed()
        })
    });
    g.finish();
    drop(acts);
    drop(mr);
    drop(cqs);
    dev.close().unwrap();
}

criterion_group!(benches, create, post_poll, threads);
criterion_main!(benches);
