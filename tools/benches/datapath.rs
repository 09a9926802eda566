//! The driver's data-path cost on a memory-backed null device: the simulated ConnectX-5 brings
//! the device up and creates the QP, then the platform stops delivering doorbells, so they land
//! in memory and nothing executes — only the driver's own work is timed.
//!
//! Baseline, in the same run: the bare stores of the same bytes (a 64-byte WQE into the ring
//! memory, the 4-byte doorbell record, the 8-byte doorbell) with the same barriers, through the
//! same DMA and MMIO primitives.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use mlx5::ifc::{Be32, Be64};
use mlx5::io::{barrier, DmaBuf};
use mlx5::qp::{
    Access, AhAttr, Mtu, Payload, QpAttr, QpAttrMask as M, QpCap, QpInitAttr, QpState, QpType,
    SendOp, SendOps, SendWr, Sge,
};
use mlx5::sim::{Mode, Profile, SimDevice};
use mlx5::{Device, DeviceConfig, DmaRegion, Platform, PlatformError, SimPlatform};

/// The simulator as a platform whose doorbells can be switched off ("null device").
#[derive(Clone)]
struct Nullable {
    sim: SimPlatform,
    null: std::sync::Arc<AtomicBool>,
    sink: std::sync::Arc<AtomicU64>,
}

// SAFETY: every call forwards to `SimPlatform`, which upholds the contract; in null mode the
// 64-bit BAR stores go to an atomic in host memory instead, touching no DMA memory.
unsafe impl Platform for Nullable {
    fn bar_read32(&self, offset: u64) -> Be32 {
        self.sim.bar_read32(offset)
    }
    fn bar_write32(&self, offset: u64, value: Be32) {
        self.sim.bar_write32(offset, value)
    }
    fn bar_write64(&self, offset: u64, value: Be64) {
        if self.null.load(Ordering::Relaxed) {
            self.sink
                .store(value.to_ne_raw() ^ offset, Ordering::Relaxed);
        } else {
            self.sim.bar_write64(offset, value)
        }
    }
    fn dma_alloc(&self, len: usize, align: usize) -> Result<DmaRegion, PlatformError> {
        self.sim.dma_alloc(len, align)
    }
    fn dma_free(&self, region: DmaRegion) -> Result<(), PlatformError> {
        self.sim.dma_free(region)
    }
    fn now_ns(&self) -> u64 {
        self.sim.now_ns()
    }
    fn relax(&self) {
        self.sim.relax()
    }
}

fn to_rts(qp: &mut mlx5::qp::Qp<'_, Nullable>, gid: [u8; 16], dest: u32) {
    let a = QpAttr {
        qp_state: Some(QpState::Init),
        port_num: 1,
        access: Access {
            remote_write: true,
            remote_read: true,
            remote_atomic: true,
        },
        ..QpAttr::default()
    };
    qp.modify(&a, M::STATE | M::PORT | M::PKEY_INDEX | M::ACCESS_FLAGS)
        .unwrap();
    let a = QpAttr {
        qp_state: Some(QpState::Rtr),
        ah_attr: AhAttr {
            dgid: gid,
            dmac: [2, 0, 0, 0, 0, 9],
            hop_limit: 64,
            ..AhAttr::default()
        },
        path_mtu: Mtu::Mtu4096,
        dest_qp_num: dest,
        max_dest_rd_atomic: 16,
        min_rnr_timer: 1,
        ..QpAttr::default()
    };
    qp.modify(
        &a,
        M::STATE
            | M::AV
            | M::PATH_MTU
            | M::DEST_QPN
            | M::RQ_PSN
            | M::MAX_DEST_RD_ATOMIC
            | M::MIN_RNR_TIMER,
    )
    .unwrap();
    let a = QpAttr {
        qp_state: Some(QpState::Rts),
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        max_rd_atomic: 16,
        ..QpAttr::default()
    };
    qp.modify(
        &a,
        M::STATE | M::SQ_PSN | M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::MAX_QP_RD_ATOMIC,
    )
    .unwrap();
}

fn reset(qp: &mut mlx5::qp::Qp<'_, Nullable>, gid: [u8; 16], dest: u32) {
    qp.modify(
        &QpAttr {
            qp_state: Some(QpState::Reset),
            ..QpAttr::default()
        },
        M::STATE,
    )
    .unwrap();
    to_rts(qp, gid, dest);
}

fn post(c: &mut Criterion) {
    let sim = SimDevice::new(Profile::connectx5(), Mode::Sync);
    let null = std::sync::Arc::new(AtomicBool::new(false));
    let plat = Nullable {
        sim: SimPlatform::new(sim),
        null: null.clone(),
        sink: Default::default(),
    };
    let dev = Device::open(plat.clone(), DeviceConfig::default()).unwrap();
    let pd = dev.pd().unwrap();
    let cq = dev.create_cq(4096).unwrap();
    let mr = dev.alloc_mr(pd, 4096, mlx5::mr::MrAccess::ALL).unwrap();
    let mut attr = QpInitAttr::new(
        QpType::Rc,
        &cq,
        &cq,
        QpCap {
            max_send_wr: 8192,
            max_recv_wr: 1,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 64,
        },
    );
    attr.send_ops = Some(SendOps::SEND);
    let mut qp = dev.create_qp(pd, &attr).unwrap();
    let gid = dev.gid0().unwrap().gid;
    let dest = qp.qpn();
    to_rts(&mut qp, gid, dest);
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

fn poll(c: &mut Criterion) {
    // Completions made for real by the simulator (RDMA WRITEs in loopback), then polled: only
    // the polling is timed.
    let sim = SimDevice::new(Profile::connectx5(), Mode::Sync);
    let fabric = mlx5::sim::Fabric::new();
    fabric.attach(&sim).unwrap();
    let dev = Device::open(SimPlatform::new(sim), DeviceConfig::default()).unwrap();
    let pd = dev.pd().unwrap();
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
    let batch: Vec<SendWr<'_>> = (0..256).map(|i| SendWr { wr_id: i, ..wr }).collect();
    let mut wc = vec![
        mlx5::cq_poll::Wc {
            wr_id: 0,
            status: mlx5::cq_poll::WcStatus::Success,
            opcode: mlx5::cq_poll::WcOpcode::Send,
            byte_len: 0,
            imm_data: None,
            qp_num: 0,
            src_qp: 0,
            grh: false,
            vendor_err: 0
        };
        256
    ];
    let mut g = c.benchmark_group("poll_cq");
    g.measurement_time(Duration::from_secs(3));
    g.bench_function("poll_cq: 256 CQEs per call (time per call)", |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                qp.post_send(&batch).unwrap();
                let t = Instant::now();
                let mut got = 0;
                while got < 256 {
                    got += cq.poll(&mut wc[got..]).unwrap();
                }
                spent += t.elapsed();
            }
            spent
        })
    });
    g.finish();
}

criterion_group!(benches, post, poll);
criterion_main!(benches);
