//! QP sizing and create_qp + destroy_qp on the simulated device.
//!
//! Baselines measured in the same run: for sizing, reading the three limits out of the
//! capability image (what any caller must do before sizing); for create_qp, one firmware command
//! round trip on the same simulated device (QUERY_VPORT_STATE), so the ratio says how many
//! command-equivalents a QP costs.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use mlx5::qp::{QpCap, QpInitAttr, QpType, SendOps};
use mlx5::raw::{max_qp_cap, size_qp, SizeMode};
use mlx5::sim::{Mode, Profile, SimDevice};
use mlx5::{Device, DeviceConfig, SimPlatform};

fn sizing(c: &mut Criterion) {
    let dev = Device::open(
        SimPlatform::new(SimDevice::new(Profile::connectx5(), Mode::Sync)),
        DeviceConfig::default(),
    )
    .unwrap();
    let caps = dev.caps().clone();
    let limits = caps.qp_limits();
    let ops = SendOps::default_for(QpType::Rc);
    let req = QpCap {
        max_send_wr: 2,
        max_recv_wr: 2,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let bad = QpCap {
        max_inline_data: 1005,
        max_send_wr: 64,
        ..req
    };
    let mut g = c.benchmark_group("sizing");
    g.bench_function("baseline: read the limits from the caps", |b| {
        b.iter(|| black_box(&caps).qp_limits())
    });
    g.bench_function("size_qp RC 2/2/1/1/0", |b| {
        b.iter(|| {
            size_qp(
                black_box(&limits),
                QpType::Rc,
                ops,
                false,
                black_box(&req),
                SizeMode::Exact,
            )
        })
    });
    g.bench_function("size_qp refused (error with max)", |b| {
        b.iter(|| {
            size_qp(
                black_box(&limits),
                QpType::Rc,
                ops,
                false,
                black_box(&bad),
                SizeMode::Exact,
            )
        })
    });
    g.bench_function("max_qp_cap RC", |b| {
        b.iter(|| max_qp_cap(black_box(&limits), QpType::Rc, ops))
    });
    g.finish();
    dev.close().unwrap();
}

fn create(c: &mut Criterion) {
    let sim = SimDevice::new(Profile::connectx5(), Mode::Sync);
    let dev = Device::open(SimPlatform::new(sim.clone()), DeviceConfig::default()).unwrap();
    {
        let cq = dev.create_cq(256).unwrap();
        let pd = dev.pd();
        let attr = QpInitAttr::new(
            QpType::Rc,
            &cq,
            &cq,
            QpCap {
                max_send_wr: 64,
                max_recv_wr: 64,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
        );
        let before = sim.commands_executed();
        dev.create_qp(pd, &attr).unwrap().destroy().unwrap();
        eprintln!(
            "create_qp + destroy_qp: {} firmware commands per QP",
            sim.commands_executed() - before
        );
        let mut g = c.benchmark_group("create_qp");
        g.measurement_time(Duration::from_secs(3));
        g.bench_function("baseline: one command (QUERY_VPORT_STATE)", |b| {
            b.iter(|| dev.port_state().unwrap())
        });
        g.bench_function("create_qp + destroy_qp (RC 64/64)", |b| {
            b.iter(|| dev.create_qp(pd, &attr).unwrap().destroy().unwrap())
        });
        g.finish();
    }
    dev.close().unwrap();
}

criterion_group!(benches, sizing, create);
criterion_main!(benches);
