//! The simulated fabric's speed (issue #12, item 5): work requests through two simulated
//! ConnectX-5s and the driver on both ends, against the physical floor of a software NIC
//! measured in the same run.
//!
//! **The floor**: each frame of the same traffic copied once and its CRC-32 taken once
//! (`crc32fast`, the engine of the simulator's ICRC) — what moving those bytes through any
//! software wire costs at the least. The frames are the run's own: one window of the traffic is
//! captured ([`Fabric::keep_frames`]) before anything is timed, then capture is switched off.
//!
//! Groups (synchronous mode, pcap off, unless named):
//! - `write_4k`: windows of 128 RDMA WRITEs of 4096 bytes (path MTU 1024: four frames each, and
//!   the ACKs), one signaled per 32, as `mlx5ctl demo` runs them;
//! - `send_64`: windows of 128 SENDs of 64 bytes inline, their 128 receives posted first;
//! - `pingpong_64`: one 64-byte SEND round trip, synchronous and threaded.
//!
//! After criterion, a paired summary (`MLX5_FABRIC_PAIRED` rounds, 101 by default; 0 skips
//! it): each round times one floor window and then one simulator window, and the median of the
//! per-round ratios is printed with messages/s and round-trip times — both sides of a round see
//! the same machine, which a 2-core VM's neighbours otherwise move by up to 2×. Round trips are
//! the median of 20 per round, back to back, as a ping-pong runs them; the synchronous one is
//! also reported alone, the first after each round's windows (its caches cold).
//!
//! The summary also prints the model's own floor against the same baseline (`model_floor`:
//! two word-by-word copies through host memory and two CRCs per frame, what two simulated NICs
//! cannot avoid), to show how much of the simulator's ratio is that and how much bookkeeping.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mlx5::mr::MrAccess;
use mlx5::qp::{ConnectOpts, Mtu, Payload, QpCap, QpInitAttr, QpType, RecvWr, SendOp, SendWr, Sge};
use mlx5::sim::{Fabric, Mode, Profile, SimDevice};
use mlx5::{Device, DeviceConfig, SimPlatform, Wc, WcStatus};

/// The system allocator, counting allocations (the paired summary reports them per frame).
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call forwards to the system allocator unchanged; the counter is a side effect.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller upholds `alloc`'s contract, which `System.alloc` shares.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: `p` came from `System.alloc` with layout `l` (through `alloc` above).
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as `dealloc` and `alloc`: `p` is `System`'s with layout `l`.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Allocations made while `f` runs.
fn allocations(f: impl FnOnce()) -> u64 {
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    f();
    ALLOCATIONS.load(Ordering::Relaxed) - before
}

type Dev = Device<SimPlatform>;
type Cq = mlx5::cq::Cq<'static, SimPlatform>;
type Mr = mlx5::MemoryRegion<'static, SimPlatform>;
type Qp = mlx5::qp::Qp<'static, SimPlatform>;

/// Work requests per window.
const WINDOW: usize = 128;
/// One signaled per this many (the rest complete silently).
const SIGNAL_EVERY: usize = 32;
const MR_LEN: usize = 1 << 20;
/// Where the SENDs land in the receiver's MR.
const RECV_AT: u64 = 512 * 1024;

/// One end: a device, its CQ (send and receive), an MR and an RC QP.
struct End {
    dev: &'static Dev,
    cq: &'static Cq,
    mr: &'static Mr,
    qp: Qp,
}

impl End {
    fn sge(&self, off: u64, len: u32) -> Sge {
        Sge {
            addr: self.mr.addr() + off,
            length: len,
            lkey: self.mr.lkey(),
        }
    }

    /// Waits for `n` successful completions (a 10 s deadline).
    fn wait(&self, n: usize) {
        let mut wc = [Wc::default(); 64];
        let (mut got, deadline) = (0, Instant::now() + Duration::from_secs(10));
        while got < n {
            let k = self.cq.poll(&mut wc[..(n - got).min(64)]).expect("poll_cq");
            for w in &wc[..k] {
                assert_eq!(w.status, WcStatus::Success, "work request {}", w.wr_id);
            }
            got += k;
            if k == 0 {
                assert!(Instant::now() < deadline, "{got} of {n} completions");
                mlx5::Platform::relax(self.dev.platform());
            }
        }
    }

    fn recv(&mut self, n: usize, len: u32) {
        let sge = [self.sge(RECV_AT, len)];
        let wrs: Vec<RecvWr<'_>> = (0..n as u64)
            .map(|wr_id| RecvWr {
                wr_id,
                sg_list: &sge,
            })
            .collect();
        self.qp.post_recv(&wrs).expect("post_recv");
    }
}

/// Two simulated NICs of `mode` on one fabric, an RC QP on each, connected with path MTU
/// `mtu`.
fn pair(mode: Mode, mtu: Mtu) -> (Fabric, End, End) {
    let fabric = Fabric::new();
    let end = |last: u8| {
        let sim = SimDevice::new(
            Profile::connectx5().with_mac([0x02, 0xc5, 0x5a, 0, 0, last]),
            mode,
        );
        fabric.attach(&sim).expect("attach");
        let dev: &'static Dev = Box::leak(Box::new(
            Device::open(SimPlatform::new(sim), DeviceConfig::default()).expect("open"),
        ));
        let cq: &'static Cq = Box::leak(Box::new(dev.create_cq(1024).expect("create_cq")));
        let pd = dev.pd();
        let mr: &'static Mr = Box::leak(Box::new(
            dev.alloc_mr(pd, MR_LEN, MrAccess::ALL).expect("alloc_mr"),
        ));
        let cap = QpCap {
            max_send_wr: 256,
            max_recv_wr: 256,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 64,
        };
        let qp = dev
            .create_qp(pd, &QpInitAttr::new(QpType::Rc, cq, cq, cap))
            .expect("create_qp");
        End { dev, cq, mr, qp }
    };
    let (mut a, mut b) = (end(0x0a), end(0x0b));
    let (ea, eb) = (a.qp.endpoint(), b.qp.endpoint());
    let opts = ConnectOpts {
        mtu,
        ..ConnectOpts::default()
    };
    a.qp.connect(&eb, &opts).expect("connect");
    b.qp.connect(&ea, &opts).expect("connect");
    (fabric, a, b)
}

/// One window of 4 KiB RDMA WRITEs from `a` to `b`.
fn write_window(a: &mut End, b: &End) {
    let sge = [a.sge(0, 4096)];
    let (remote_addr, rkey) = (b.mr.addr(), b.mr.rkey());
    let batch: [SendWr<'_>; SIGNAL_EVERY] = std::array::from_fn(|i| SendWr {
        op: SendOp::Write { remote_addr, rkey },
        signaled: i == SIGNAL_EVERY - 1,
        ..SendWr::send(i as u64, &sge)
    });
    for _ in 0..WINDOW / SIGNAL_EVERY {
        a.qp.post_send(&batch).expect("post_send");
    }
    a.wait(WINDOW / SIGNAL_EVERY);
}

/// One window of 64-byte inline SENDs from `a` to `b`, receives posted first.
fn send_window(a: &mut End, b: &mut End) {
    b.recv(WINDOW, 64);
    let msg = [0x5au8; 64];
    let batch: [SendWr<'_>; SIGNAL_EVERY] = std::array::from_fn(|i| SendWr {
        payload: Payload::Inline(&msg),
        signaled: i == SIGNAL_EVERY - 1,
        ..SendWr::send(i as u64, &[])
    });
    for _ in 0..WINDOW / SIGNAL_EVERY {
        a.qp.post_send(&batch).expect("post_send");
    }
    a.wait(WINDOW / SIGNAL_EVERY);
    b.wait(WINDOW);
}

/// One 64-byte SEND round trip: `a` to `b` and back, every WR signaled (as ibv_rc_pingpong).
fn round_trip(a: &mut End, b: &mut End) {
    b.recv(1, 64);
    a.recv(1, 64);
    let msg = [0xa5u8; 64];
    let wr = |id| SendWr {
        payload: Payload::Inline(&msg),
        ..SendWr::send(id, &[])
    };
    a.qp.post_send(&[wr(1)]).expect("post_send");
    b.wait(1);
    b.qp.post_send(&[wr(2)]).expect("post_send");
    a.wait(2);
    b.wait(1);
}

/// The frames `traffic` puts on `fabric`'s wire.
fn frames_of(fabric: &Fabric, traffic: impl FnOnce()) -> Vec<Vec<u8>> {
    fabric.keep_frames(1 << 16);
    traffic();
    let frames = fabric.captured().into_iter().map(|(_, f)| f).collect();
    fabric.keep_frames(0);
    frames
}

/// The floor: every frame copied once and CRC-ed once.
fn floor(frames: &[Vec<u8>], buf: &mut [u8]) -> u32 {
    let mut acc = 0u32;
    for f in frames {
        let b = &mut buf[..f.len()];
        b.copy_from_slice(f);
        acc ^= crc32fast::hash(black_box(b));
    }
    acc
}

/// The model's own floor, for comparison (not the baseline): what two NICs must do to
/// each frame at the least, done as the simulator has to do it — the sender reads the bytes
/// from host memory and CRCs the frame, the receiver CRCs it again and writes the bytes to host
/// memory, host memory being 8-byte atomic words shared with the driver (as the simulator's
/// IOMMU sees it: it has no `unsafe`, so no wider copies). No parsing, no bookkeeping.
fn model_floor(frames: &[Vec<u8>], host: &[AtomicU64], buf: &mut [u8]) -> u32 {
    let mut acc = 0u32;
    for f in frames {
        let words = f.len() / 8;
        let b = &mut buf[..f.len()];
        for (d, w) in b.chunks_exact_mut(8).zip(&host[..words]) {
            d.copy_from_slice(&w.load(Ordering::Acquire).to_ne_bytes());
        }
        acc ^= crc32fast::hash(black_box(&*b));
        acc ^= crc32fast::hash(black_box(&*b));
        for (w, s) in host[..words].iter().zip(b.chunks_exact(8)) {
            let mut v = [0u8; 8];
            v.copy_from_slice(s);
            w.store(u64::from_ne_bytes(v), Ordering::Relaxed);
        }
    }
    acc
}

/// Times `f` (seconds).
fn time(f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

struct Setup {
    fabric: Fabric,
    a: End,
    b: End,
    write_frames: Vec<Vec<u8>>,
    /// The same WRITEs at path MTU 4096 (one frame each, as with jumbo frames).
    jumbo: (Fabric, End, End),
    jumbo_frames: Vec<Vec<u8>>,
    send_frames: Vec<Vec<u8>>,
    ping_frames: Vec<Vec<u8>>,
    threaded: (Fabric, End, End),
}

fn setup() -> Setup {
    let (fabric, mut a, mut b) = pair(Mode::Sync, Mtu::Mtu1024);
    // Warm up, then capture one window of each kind of traffic.
    write_window(&mut a, &b);
    let write_frames = frames_of(&fabric, || write_window(&mut a, &b));
    let mut jumbo = pair(Mode::Sync, Mtu::Mtu4096);
    write_window(&mut jumbo.1, &jumbo.2);
    let jumbo_frames = frames_of(&jumbo.0, || write_window(&mut jumbo.1, &jumbo.2));
    let send_frames = frames_of(&fabric, || send_window(&mut a, &mut b));
    let ping_frames = frames_of(&fabric, || round_trip(&mut a, &mut b));
    let threaded = pair(Mode::Threaded, Mtu::Mtu1024);
    Setup {
        fabric,
        a,
        b,
        write_frames,
        jumbo,
        jumbo_frames,
        send_frames,
        ping_frames,
        threaded,
    }
}

fn bytes(frames: &[Vec<u8>]) -> usize {
    frames.iter().map(Vec::len).sum()
}

fn fabric_benches(c: &mut Criterion) {
    let mut s = setup();
    let mut buf = vec![0u8; 1 << 16];
    eprintln!(
        "frames per window: write_4k {} ({} bytes; MTU 4096: {}, {} bytes), send_64 {} ({} bytes), round trip {} ({} bytes)",
        s.write_frames.len(),
        bytes(&s.write_frames),
        s.jumbo_frames.len(),
        bytes(&s.jumbo_frames),
        s.send_frames.len(),
        bytes(&s.send_frames),
        s.ping_frames.len(),
        bytes(&s.ping_frames)
    );

    let mut g = c.benchmark_group("write_4k");
    g.throughput(Throughput::Elements(WINDOW as u64));
    g.measurement_time(Duration::from_secs(3));
    g.bench_function("floor: copy + CRC-32 of the window's frames", |bn| {
        bn.iter(|| floor(&s.write_frames, &mut buf))
    });
    g.bench_function("128 RDMA WRITEs of 4 KiB, two simulated NICs", |bn| {
        bn.iter(|| write_window(&mut s.a, &s.b))
    });
    g.bench_function("floor at MTU 4096", |bn| {
        bn.iter(|| floor(&s.jumbo_frames, &mut buf))
    });
    g.bench_function("128 RDMA WRITEs of 4 KiB at MTU 4096", |bn| {
        bn.iter(|| write_window(&mut s.jumbo.1, &s.jumbo.2))
    });
    g.finish();

    let mut g = c.benchmark_group("send_64");
    g.throughput(Throughput::Elements(WINDOW as u64));
    g.measurement_time(Duration::from_secs(3));
    g.bench_function("floor: copy + CRC-32 of the window's frames", |bn| {
        bn.iter(|| floor(&s.send_frames, &mut buf))
    });
    g.bench_function("128 SENDs of 64 bytes, two simulated NICs", |bn| {
        bn.iter(|| send_window(&mut s.a, &mut s.b))
    });
    g.finish();

    let mut g = c.benchmark_group("pingpong_64");
    g.measurement_time(Duration::from_secs(3));
    g.bench_function("floor: copy + CRC-32 of the round trip's frames", |bn| {
        bn.iter(|| floor(&s.ping_frames, &mut buf))
    });
    g.bench_function("round trip, synchronous", |bn| {
        bn.iter(|| round_trip(&mut s.a, &mut s.b))
    });
    let (_, ta, tb) = &mut s.threaded;
    g.bench_function("round trip, threaded", |bn| bn.iter(|| round_trip(ta, tb)));
    g.finish();

    paired(&mut s, &mut buf);
    drop(s.fabric);
}

/// The paired summary (see the module documentation).
fn paired(s: &mut Setup, buf: &mut [u8]) {
    let rounds: usize = std::env::var("MLX5_FABRIC_PAIRED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(101);
    if rounds == 0 {
        return;
    }
    let (mut w, mut sd, mut ws, mut ss, mut sync_rtt, mut thr_rtt) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    let mut first_rtt = vec![];
    let (mut j, mut js) = (vec![], vec![]);
    // The model's own floor (see `model_floor`) against the same floor, per round.
    let host: Vec<AtomicU64> = (0..buf.len() / 8).map(|_| AtomicU64::new(0)).collect();
    let (mut mw, mut mj) = (vec![], vec![]);
    for _ in 0..rounds {
        let f = time(|| {
            black_box(floor(&s.jumbo_frames, buf));
        });
        let t = time(|| write_window(&mut s.jumbo.1, &s.jumbo.2));
        j.push(t / f);
        js.push(t);
        let f = time(|| {
            black_box(floor(&s.write_frames, buf));
        });
        let t = time(|| write_window(&mut s.a, &s.b));
        w.push(t / f);
        ws.push(t);
        let f = time(|| {
            black_box(floor(&s.send_frames, buf));
        });
        let t = time(|| send_window(&mut s.a, &mut s.b));
        sd.push(t / f);
        ss.push(t);
        // The first round trip after the windows (its caches cold), then 20 back to back, as a
        // ping-pong runs them.
        first_rtt.push(time(|| round_trip(&mut s.a, &mut s.b)));
        for _ in 0..20 {
            sync_rtt.push(time(|| round_trip(&mut s.a, &mut s.b)));
        }
    }
    // Threaded round trips back to back, as a ping-pong runs (a device thread polls for work
    // for a while after its last item, then sleeps: an isolated round trip wakes four threads).
    let (_, ta, tb) = &mut s.threaded;
    for _ in 0..20 * rounds {
        thr_rtt.push(time(|| round_trip(ta, tb)));
    }
    // The model's own floor against the floor, in rounds of their own after the simulator's
    // (run among them, it would change the floor's cache state and so the simulator's ratio).
    for _ in 0..rounds {
        for (frames, out) in [(&s.write_frames, &mut mw), (&s.jumbo_frames, &mut mj)] {
            let f = time(|| {
                black_box(floor(frames, buf));
            });
            let m = time(|| {
                black_box(model_floor(frames, &host, buf));
            });
            out.push(m / f);
        }
    }
    let per = WINDOW as f64;
    // Allocations per frame in the steady state (one more window of each, after the rounds).
    let wa = allocations(|| write_window(&mut s.a, &s.b)) as f64 / s.write_frames.len() as f64;
    let sa = allocations(|| send_window(&mut s.a, &mut s.b)) as f64 / s.send_frames.len() as f64;
    let (wt, st, jt) = (median(ws), median(ss), median(js));
    println!("paired, {rounds} rounds (median):");
    println!(
        "  write_4k: {:.2}x the floor; {:.0} WRITEs/s, {:.0} MB/s",
        median(w),
        per / wt,
        per * 4096.0 / wt / 1e6
    );
    println!(
        "  write_4k at MTU 4096: {:.2}x the floor; {:.0} WRITEs/s, {:.0} MB/s",
        median(j),
        per / jt,
        per * 4096.0 / jt / 1e6
    );
    println!(
        "  the model's own floor (two word copies through host memory and two CRCs per frame): {:.2}x the floor at MTU 1024, {:.2}x at MTU 4096",
        median(mw),
        median(mj)
    );
    println!(
        "  send_64:  {:.2}x the floor; {:.0} SENDs/s",
        median(sd),
        per / st
    );
    println!(
        "  allocations per frame (driver and simulator, steady state): write_4k {wa:.2}, send_64 {sa:.2}"
    );
    println!(
        "  64-byte round trip, back to back: {:.2} us synchronous, {:.2} us threaded",
        median(sync_rtt) * 1e6,
        median(thr_rtt) * 1e6
    );
    println!(
        "  64-byte round trip, synchronous, the first after a window of each kind: {:.2} us",
        median(first_rtt) * 1e6
    );
}

criterion_group!(benches, fabric_benches);
criterion_main!(benches);
