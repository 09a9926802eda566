//! Side by side on a null device: our driver and rdma-core's mlx5 provider (56.1, built
//! unchanged by `tools/vs-rdma-core` from the tree or tarball named by `MLX5_RDMA_CORE_SRC`),
//! the same work requests and the same CQE bytes, doorbells landing in memory, nothing
//! executing. Skips, saying why, when `MLX5_RDMA_CORE_SRC` is not set.
//!
//! ```text
//! MLX5_RDMA_CORE_SRC=$PWD/../shared/rdma-core/rdma-core_56.1.orig.tar.gz \
//!     MLX5_VS_PAIRED=201 cargo bench -p mlx5-tools --bench vs_rdma_core
//! ```
//!
//! Ours: the simulated ConnectX-5 brings the device up and creates the QP and CQ, then the
//! platform stops delivering UAR stores: they land in an ordinary page (the BlueFlame register
//! at 0x800 of it), as theirs do. Theirs: one RC QP and its CQ set up by our shim over ordinary
//! pages as their create paths leave them, single-threaded (no spinlocks, as
//! `MLX5_SINGLE_THREADED=1`; `MLX5_VS_THEIR_LOCKS=1` takes them), with a dedicated low-latency
//! BlueFlame register of 2 × 256 bytes, CQE version 0 (QPN lookup, as ours).
//!
//! Before anything is timed, a differential check: both must have written the same WQE bytes
//! (each WQE within its DS), the same doorbell record words, the same doorbell (or BlueFlame
//! bytes, within DS) at the same place of the UAR page, the same RQ WQE, the same completions
//! (wr_id, status, opcode, QPN) and the same CQ consumer index; it panics on any difference.
//! Nothing of a WQE's fields differs (same QPN, WQE indices from 0 on both, no WQE signature).
//! Bytes the device ignores are not compared, in the ring and in the BlueFlame copy: an inline
//! segment's padding to 16 bytes and the bytes past DS in a WQE's last WQEBB (zeros from us,
//! whatever the ring held before from them).
//!
//! Both timed loops have the same shape: a function given the work requests once, one call and
//! one result check per post (theirs through `ibv_post_send`/`ibv_post_recv`/`ibv_poll_cq`, the
//! ops an application calls), windows of posts that fit both queues, and between windows the
//! same untimed reset on both sides.
//!
//! At the end, the medians criterion saved are read back and printed as ours/theirs ratios.
//! Criterion times ours, then theirs; on a shared machine whose speed moves within seconds,
//! `MLX5_VS_PAIRED=<rounds>` adds a paired comparison first: per operation, `rounds` times one
//! window of ours then one of theirs, and the median of the per-round ratios.

use std::hint::black_box;
use std::path::PathBuf;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::Criterion;
use mlx5::ifc::{Be32, Be64};
use mlx5::qp::{
    ConnectOpts, Payload, QpAttr, QpAttrMask as M, QpCap, QpInitAttr, QpState, QpType, RecvWr,
    SendOps, SendWr, Sge,
};
use mlx5::sim::{Mode, Profile, SimDevice};
use mlx5::{Device, DeviceConfig, DmaRegion, Platform, PlatformError, SimPlatform};
use vs_rdma_core::{Config, Region, Theirs};

mod checks;
use checks::{check_poll, check_recv, check_send, paired};

/// Words of the UAR page the null device keeps.
const UAR_WORDS: usize = 4096 / 8;
/// The BlueFlame register's offset in a UAR page, and one half's size (ConnectX-5: 2 × 256).
const BF: u64 = 0x800;
const BF_HALF: u64 = 256;
/// CQ entries (both sides).
const LOG_CQ: u32 = 12;
/// Completions per poll measurement.
const POLLED: u32 = 256;

/// A page of memory standing in for a UAR page, page-aligned as theirs (and a mapped UAR) is.
#[repr(align(4096))]
struct UarPage([AtomicU64; UAR_WORDS]);

impl std::ops::Deref for UarPage {
    type Target = [AtomicU64; UAR_WORDS];
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

/// Whether UAR stores go to [`UAR`] instead of the simulator (the process has one null device):
/// statics, so that a store costs what theirs to their BlueFlame register page does — no
/// pointer to follow first.
static NULL_MODE: AtomicBool = AtomicBool::new(false);
/// The UAR page stores land in while [`NULL_MODE`] is on.
static UAR: UarPage = UarPage([const { AtomicU64::new(0) }; UAR_WORDS]);

/// The simulator as a platform whose UAR stores can be sent to an ordinary page instead ("null
/// device": [`NULL_MODE`], [`UAR`]), with write-combining UARs (BlueFlame on).
#[derive(Clone)]
struct NullUar {
    sim: SimPlatform,
    allocs: Arc<Mutex<Vec<DmaRegion>>>,
}

impl NullUar {
    fn new(sim: SimDevice) -> Self {
        NullUar {
            sim: SimPlatform::new(sim),
            allocs: Default::default(),
        }
    }

    /// `len` bytes at `off` of the page.
    fn uar_bytes(&self, off: u64, len: usize) -> Vec<u8> {
        (0..len.div_ceil(8))
            .flat_map(|i| {
                let w = UAR[(off as usize / 8 + i) % UAR_WORDS].load(Ordering::Relaxed);
                w.to_ne_bytes()
            })
            .take(len)
            .collect()
    }

    fn clear_uar(&self) {
        for w in UAR.iter() {
            w.store(0, Ordering::Relaxed);
        }
    }
}

// SAFETY: every call forwards to `SimPlatform`, which upholds the contract; in null mode the
// 64-bit BAR stores go to atomics in a page of host memory instead, touching no DMA memory.
unsafe impl Platform for NullUar {
    fn bar_read32(&self, offset: u64) -> Be32 {
        self.sim.bar_read32(offset)
    }
    fn bar_write32(&self, offset: u64, value: Be32) {
        self.sim.bar_write32(offset, value)
    }
    #[inline]
    fn bar_write64(&self, offset: u64, value: Be64) {
        if NULL_MODE.load(Ordering::Relaxed) {
            UAR[(offset as usize / 8) % UAR_WORDS].store(value.to_ne_raw(), Ordering::Relaxed);
        } else {
            self.sim.bar_write64(offset, value)
        }
    }
    #[inline(always)]
    fn bar_write_bf(&self, offset: u64, chunk: &[Be64]) {
        if NULL_MODE.load(Ordering::Relaxed) {
            let at = (offset as usize / 8) % UAR_WORDS;
            let dst = UAR.get(at..at + chunk.len()).expect("inside the UAR page");
            // Eight words at a time, as their BlueFlame copy goes (64 bytes per step).
            let mut d8 = dst.chunks_exact(8);
            let mut w8 = chunk.chunks_exact(8);
            for (d, w) in d8.by_ref().zip(w8.by_ref()) {
                for i in 0..8 {
                    d[i].store(w[i].to_ne_raw(), Ordering::Relaxed);
                }
            }
            for (d, w) in d8.remainder().iter().zip(w8.remainder()) {
                d.store(w.to_ne_raw(), Ordering::Relaxed);
            }
        } else {
            self.sim.bar_write_bf(offset, chunk)
        }
    }
    fn uar_write_combining(&self) -> bool {
        true
    }
    fn dma_alloc(&self, len: usize, align: usize) -> Result<DmaRegion, PlatformError> {
        let r = self.sim.dma_alloc(len, align)?;
        self.allocs.lock().unwrap().push(r);
        Ok(r)
    }
    fn dma_free(&self, region: DmaRegion) -> Result<(), PlatformError> {
        self.sim.dma_free(region)
    }
    fn host_alloc(&self, len: usize, align: usize) -> Result<NonNull<u8>, PlatformError> {
        self.sim.host_alloc(len, align)
    }
    unsafe fn host_free(&self, ptr: NonNull<u8>, len: usize, align: usize) {
        // SAFETY: forwarded contract.
        unsafe { self.sim.host_free(ptr, len, align) }
    }
    fn now_ns(&self) -> u64 {
        self.sim.now_ns()
    }
    fn relax(&self) {
        self.sim.relax()
    }
}

type Qp<'a> = mlx5::qp::Qp<'a, NullUar>;

/// RESET to RTS, connected to itself (the driver's own sequence of transitions).
fn to_rts(qp: &mut Qp<'_>, _gid: [u8; 16]) {
    let me = qp.endpoint();
    qp.connect(&me, &ConnectOpts::default()).unwrap();
}

/// Both sides' rings empty again: ours through RESET and back to RTS (untimed), theirs as its
/// `mlx5_init_qp_indices`.
fn reset_both(s: &mut Sides<'_>) {
    s.qp.modify(
        &QpAttr {
            qp_state: Some(QpState::Reset),
            ..QpAttr::default()
        },
        M::STATE,
    )
    .unwrap();
    to_rts(&mut s.qp, s.gid);
    s.theirs.reset();
    s.plat.clear_uar();
}

/// `iters` operations timed in windows of at most `window`, each window after the same untimed
/// `reset_both` on both sides (our QP's RESET and back through the simulator included, so that
/// both start as warm); `run(s, n)` does `n`. With `null`, our UAR stores go to the null page
/// while it runs.
fn timed_windows<'a>(
    s: &mut Sides<'a>,
    iters: u64,
    window: u64,
    null: bool,
    mut run: impl FnMut(&mut Sides<'a>, u64),
) -> Duration {
    let mut spent = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        reset_both(s);
        NULL_MODE.store(null, Ordering::Relaxed);
        let n = left.min(window);
        let t = Instant::now();
        run(s, n);
        spent += t.elapsed();
        NULL_MODE.store(false, Ordering::Relaxed);
        left -= n;
    }
    spent
}

/// Both sides and what the checks read.
struct Sides<'a> {
    plat: NullUar,
    qp: Qp<'a>,
    cq: &'a mlx5::cq::Cq<'a, NullUar>,
    gid: [u8; 16],
    theirs: Theirs,
    /// Our CQ ring, and the CQE producer counters the bench keeps for each side.
    cq_ring: DmaRegion,
    pi_ours: u32,
    pi_theirs: u32,
    /// WQEs each side has posted since its last reset (for the CQEs' WQE counters).
    wqe_ours: u16,
    wqe_theirs: u16,
}

impl Sides<'_> {
    fn ours_ring(&self, off: u64, len: usize) -> Vec<u8> {
        let (buf, _) = self.qp.buffer_iovas();
        let mut v = vec![0; len];
        self.plat
            .sim
            .device()
            .dma_read(buf.unwrap() + off, &mut v)
            .unwrap();
        v
    }
    fn ours_dbr(&self) -> Vec<u8> {
        let (_, dbr) = self.qp.buffer_iovas();
        let mut v = vec![0; 8];
        self.plat
            .sim
            .device()
            .dma_read(dbr.unwrap(), &mut v)
            .unwrap();
        v
    }
    fn theirs_bytes(&self, r: Region, off: u64, len: usize) -> Vec<u8> {
        let mut v = vec![0; len];
        self.theirs.read(r, off, &mut v).unwrap();
        v
    }
    /// The CQE of a SEND of `byte_cnt` bytes completed at WQE `wqe`, owner bit of pass `pi`.
    fn cqe(&self, pi: u32, wqe: u16) -> [u8; 64] {
        let mut img = [0u8; 64];
        img[44..48].copy_from_slice(&64u32.to_be_bytes());
        img[56..60].copy_from_slice(&(0x0a << 24 | self.qp.qpn()).to_be_bytes());
        img[60..62].copy_from_slice(&wqe.to_be_bytes());
        img[63] = ((pi >> LOG_CQ) & 1) as u8; // opcode REQ (0), owner bit
        img
    }
    /// Plays the device on both sides: `n` requester CQEs for the next `n` SENDs (1 WQEBB each).
    fn complete_ours(&mut self, n: u32) {
        let dev = self.plat.sim.device().clone();
        for _ in 0..n {
            let slot = u64::from(self.pi_ours & ((1 << LOG_CQ) - 1));
            let img = self.cqe(self.pi_ours, self.wqe_ours);
            let at = self.cq_ring.iova + slot * 64;
            dev.dma_write(at, &img[..56]).unwrap();
            dev.dma_write(at + 56, &img[56..]).unwrap(); // op_own last
            self.pi_ours = self.pi_ours.wrapping_add(1);
            self.wqe_ours = self.wqe_ours.wrapping_add(1);
        }
    }
    fn complete_theirs(&mut self, n: u32) {
        for _ in 0..n {
            let img = self.cqe(self.pi_theirs, self.wqe_theirs);
            self.theirs.write_cqe(self.pi_theirs, &img);
            self.pi_theirs = self.pi_theirs.wrapping_add(1);
            self.wqe_theirs = self.wqe_theirs.wrapping_add(1);
        }
    }
}

/// `post_send(wrs)` `n` times: our side of the timed loop, shaped as theirs (`theirs_post_send`
/// in the shim: a function of its own given the list once, a call per post, a check of each
/// result).
#[inline(never)]
fn ours_sends(qp: &mut Qp<'_>, wrs: &[SendWr<'_>], n: u64) {
    let wrs = black_box(wrs);
    for _ in 0..n {
        if let Err(e) = qp.post_send(wrs) {
            panic!("post_send: {e}");
        }
    }
}

/// `post_recv(wrs)` `n` times, likewise.
#[inline(never)]
fn ours_recvs(qp: &mut Qp<'_>, wrs: &[RecvWr<'_>], n: u64) {
    let wrs = black_box(wrs);
    for _ in 0..n {
        if let Err(e) = qp.post_recv(wrs) {
            panic!("post_recv: {e}");
        }
    }
}

/// A post operation compared: (criterion group, list slot of theirs, WQEBBs per WR, WRs per
/// post).
type Op = (&'static str, u32, u64, u64);
const SEND1: Op = ("vs_rdma_core send1", 0, 1, 1);
const SEND32: Op = ("vs_rdma_core send32", 1, 1, 32);
const INLINE_BF: Op = ("vs_rdma_core inline64_bf", 2, 2, 1);
/// Theirs' list of 256 SENDs the poll benches complete.
const LIST_POLL: u32 = 3;

fn bench(c: &mut Criterion) -> Vec<(&'static str, u64)> {
    let plat = NullUar::new(SimDevice::new(Profile::connectx5(), Mode::Sync));
    let dev = Device::open(plat.clone(), DeviceConfig::default()).unwrap();
    let pd = dev.pd();
    let before = plat.allocs.lock().unwrap().len();
    let cq = dev.create_cq((1 << LOG_CQ) - 1).unwrap();
    let cq_ring = plat.allocs.lock().unwrap()[before..]
        .iter()
        .copied()
        .find(|r| r.len == 64 << LOG_CQ)
        .expect("the CQ ring's DMA region");
    let mr = dev.alloc_mr(pd, 4096, mlx5::mr::MrAccess::ALL).unwrap();
    let mut attr = QpInitAttr::new(
        QpType::Rc,
        &cq,
        &cq,
        QpCap {
            max_send_wr: 8192,
            max_recv_wr: 4096,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 64,
        },
    );
    attr.send_ops = Some(SendOps::SEND);
    let mut qp = dev.create_qp(pd, &attr).unwrap();
    let gid = dev.gid0().unwrap().gid;
    to_rts(&mut qp, gid);
    let layout = qp.layout();
    let cap = qp.cap();
    // Theirs, sized as ours: same rings, same QPN and CQN, max_post as their sizing gives for a
    // 2-WQEBB largest WQE (64 inline bytes).
    let cfg = Config {
        qpn: qp.qpn(),
        cqn: cq.cqn(),
        sq_wqebbs: layout.sq_wqebb_cnt,
        sq_max_post: layout.sq_wqebb_cnt / 2,
        rq_wqes: layout.rq_wqe_cnt,
        rq_wqe_shift: layout.rq_stride_bytes.trailing_zeros(),
        max_send_sge: cap.max_send_sge,
        max_recv_sge: cap.max_recv_sge,
        max_inline_data: cap.max_inline_data,
        cq_entries: 1 << LOG_CQ,
        bf_buf_size: BF_HALF as u32,
        need_lock: u32::from(std::env::var("MLX5_VS_THEIR_LOCKS").as_deref() == Ok("1")),
    };
    let mut theirs = Theirs::new(&cfg).expect("rdma-core's provider set up");
    let sge = [Sge {
        addr: mr.addr(),
        length: 64,
        lkey: mr.lkey(),
    }];
    let sg = (mr.addr(), 64, mr.lkey());
    let payload = [7u8; 64];
    let one = SendWr::send(0, &sge);
    let batch: Vec<SendWr<'_>> = (0..32).map(|i| SendWr::send(i, &sge)).collect();
    let inline = SendWr {
        payload: Payload::Inline(&payload),
        ..one
    };
    let poll_batch: Vec<SendWr<'_>> = (0..u64::from(POLLED))
        .map(|i| SendWr::send(i, &sge))
        .collect();
    theirs.set_sends(SEND1.1, 1, sg, None).unwrap();
    theirs.set_sends(SEND32.1, 32, sg, None).unwrap();
    theirs
        .set_sends(INLINE_BF.1, 1, sg, Some(&payload))
        .unwrap();
    theirs.set_sends(LIST_POLL, POLLED, sg, None).unwrap();
    let rsge = [Sge {
        addr: mr.addr() + 1024,
        length: 256,
        lkey: mr.lkey(),
    }];
    let recv = RecvWr {
        wr_id: 0,
        sg_list: &rsge,
    };
    theirs.set_recv(0, mr.addr() + 1024, 256, mr.lkey());

    let mut s = Sides {
        plat: plat.clone(),
        qp,
        cq: &cq,
        gid,
        theirs,
        cq_ring,
        pi_ours: 0,
        pi_theirs: 0,
        wqe_ours: 0,
        wqe_theirs: 0,
    };
    let mut wc = vec![mlx5::Wc::default(); POLLED as usize];

    // The differential checks.
    check_send(&mut s, SEND1, std::slice::from_ref(&one), false);
    check_send(&mut s, SEND32, &batch, false);
    check_send(&mut s, INLINE_BF, std::slice::from_ref(&inline), true);
    check_recv(&mut s, &recv);
    check_poll(&mut s, &poll_batch, &mut wc);

    if let Some(rounds) = std::env::var("MLX5_VS_PAIRED")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        paired(
            &mut s,
            rounds,
            &layout,
            &cfg,
            [&one, &inline],
            &batch,
            &recv,
        );
    }

    let mut ids = Vec::new();
    // Posts: windows of calls that fit both send queues, a reset (untimed) between windows.
    for (op, wrs) in [
        (SEND1, std::slice::from_ref(&one)),
        (SEND32, &batch[..]),
        (INLINE_BF, std::slice::from_ref(&inline)),
    ] {
        let (name, slot, nbb, per) = op;
        let window =
            (u64::from(layout.sq_wqebb_cnt) / nbb).min(u64::from(cfg.sq_max_post) - 1) / per;
        let mut g = c.benchmark_group(name);
        g.warm_up_time(Duration::from_secs(1));
        g.measurement_time(Duration::from_secs(2));
        g.bench_function("ours", |b| {
            b.iter_custom(|iters| {
                timed_windows(&mut s, iters, window, true, |s, n| {
                    ours_sends(&mut s.qp, wrs, n)
                })
            })
        });
        g.bench_function("theirs", |b| {
            b.iter_custom(|iters| {
                timed_windows(&mut s, iters, window, false, |s, n| {
                    s.theirs.post_send(slot, n).unwrap()
                })
            })
        });
        g.finish();
        ids.push((name, per));
    }

    // post_recv: one WR of one SGE per call, windows of the RQ.
    {
        let window = u64::from(layout.rq_wqe_cnt) - 1;
        let name = "vs_rdma_core recv1";
        let mut g = c.benchmark_group(name);
        g.warm_up_time(Duration::from_secs(1));
        g.measurement_time(Duration::from_secs(2));
        g.bench_function("ours", |b| {
            b.iter_custom(|iters| {
                timed_windows(&mut s, iters, window, false, |s, n| {
                    ours_recvs(&mut s.qp, std::slice::from_ref(&recv), n)
                })
            })
        });
        g.bench_function("theirs", |b| {
            b.iter_custom(|iters| {
                timed_windows(&mut s, iters, window, false, |s, n| {
                    s.theirs.post_recv(n).unwrap()
                })
            })
        });
        g.finish();
        ids.push((name, 1));
    }

    // poll_cq: 256 SENDs posted and their CQEs written (untimed), then polled in calls of 32
    // and of 256 under one timer.
    for (name, per_call) in [
        ("vs_rdma_core poll256_by32", 32u32),
        ("vs_rdma_core poll256_by256", POLLED),
    ] {
        reset_both(&mut s);
        s.wqe_ours = 0;
        s.wqe_theirs = 0;
        let mut g = c.benchmark_group(name);
        g.warm_up_time(Duration::from_secs(1));
        g.measurement_time(Duration::from_secs(2));
        g.bench_function("ours", |b| {
            b.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                NULL_MODE.store(true, Ordering::Relaxed);
                for _ in 0..iters {
                    s.qp.post_send(&poll_batch).unwrap();
                    s.complete_ours(POLLED);
                    let t = Instant::now();
                    let mut got = 0;
                    while got < POLLED as usize {
                        let end = (got + per_call as usize).min(POLLED as usize);
                        got += s.cq.poll(&mut wc[got..end]).unwrap();
                    }
                    spent += t.elapsed();
                    assert_eq!(wc[POLLED as usize - 1].wr_id, u64::from(POLLED) - 1);
                }
                NULL_MODE.store(false, Ordering::Relaxed);
                spent
            })
        });
        g.bench_function("theirs", |b| {
            b.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    s.theirs.post_send(LIST_POLL, 1).unwrap();
                    s.complete_theirs(POLLED);
                    let t = Instant::now();
                    let got = s.theirs.poll(POLLED, per_call);
                    spent += t.elapsed();
                    assert_eq!(got, Some(POLLED as usize));
                }
                spent
            })
        });
        g.finish();
        ids.push((name, u64::from(POLLED)));
    }
    drop(s);
    drop(mr);
    drop(cq);
    dev.close().unwrap();
    ids
}

/// Criterion's output directory, as it finds it: `CRITERION_HOME`, `CARGO_TARGET_DIR`/criterion,
/// else `target/criterion` beside this executable (`target/release/deps/…`).
fn criterion_dir() -> PathBuf {
    if let Some(h) = std::env::var_os("CRITERION_HOME") {
        return h.into();
    }
    if let Some(t) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(t).join("criterion");
    }
    std::env::current_exe()
        .ok()
        .and_then(|e| e.ancestors().nth(3).map(|t| t.join("criterion")))
        .unwrap_or_else(|| "target/criterion".into())
}

/// The median criterion saved for `group`/`function` in this run, in ns.
fn median(group: &str, function: &str) -> Option<f64> {
    let p = criterion_dir()
        .join(group)
        .join(function)
        .join("new/estimates.json");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok()?;
    v["median"]["point_estimate"].as_f64()
}

fn main() {
    if !Theirs::available() {
        eprintln!("vs_rdma_core: skipped: {}", Theirs::status());
        return;
    }
    let start = std::time::SystemTime::now();
    let mut c = Criterion::default().configure_from_args();
    let ids = bench(&mut c);
    c.final_summary();
    println!("\nours/theirs, medians of this run ({}):", Theirs::status());
    println!(
        "{:<28} {:>12} {:>12} {:>8}",
        "operation", "ours ns/WR", "theirs ns/WR", "ratio"
    );
    for (group, per) in ids {
        let fresh = |f: &str| {
            let p = criterion_dir()
                .join(group)
                .join(f)
                .join("new/estimates.json");
            std::fs::metadata(p)
                .and_then(|m| m.modified())
                .is_ok_and(|m| m >= start)
        };
        if !(fresh("ours") && fresh("theirs")) {
            continue;
        }
        if let (Some(o), Some(t)) = (median(group, "ours"), median(group, "theirs")) {
            let per = per as f64;
            println!(
                "{:<28} {:>12.2} {:>12.2} {:>8.2}",
                group.trim_start_matches("vs_rdma_core "),
                o / per,
                t / per,
                o / t
            );
        }
    }
}
