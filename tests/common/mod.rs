//! Shared setup of the data-path tests: simulated ConnectX-5s on a simulated wire.
#![allow(dead_code)]

pub mod cm;
pub mod wire;

use mlx5::qp::{ConnectOpts, Qp, QpCap, QpInitAttr, QpType};
use mlx5::sim::{Fabric, Mode, Profile, SimDevice};
use mlx5::{Device, DeviceConfig, SimPlatform, Wc};

pub type Dev = Device<SimPlatform>;

/// A device on the fabric.
pub fn nic(fabric: &Fabric, mode: Mode) -> (SimDevice, Dev) {
    nic_with(fabric, mode, Profile::connectx5())
}

/// A device of `profile` on the fabric (its MAC made unique).
pub fn nic_with(fabric: &Fabric, mode: Mode, profile: Profile) -> (SimDevice, Dev) {
    static NEXT: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(1);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let sim = SimDevice::new(profile.with_mac([0x02, 0xc5, 0x5a, 0, 1, n]), mode);
    fabric.attach(&sim).expect("attach");
    let dev =
        Device::open(SimPlatform::new(sim.clone()), DeviceConfig::default()).expect("bring-up");
    (sim, dev)
}

pub fn cap(s_wr: u32, r_wr: u32, sge: u32) -> QpCap {
    QpCap {
        max_send_wr: s_wr,
        max_recv_wr: r_wr,
        max_send_sge: sge,
        max_recv_sge: sge,
        max_inline_data: 64,
    }
}

/// One scatter/gather entry: the first `length` bytes of `mr`.
pub fn sge1(mr: &mlx5::MemoryRegion<'_, SimPlatform>, length: u32) -> [mlx5::qp::Sge; 1] {
    [mlx5::qp::Sge {
        addr: mr.addr(),
        length,
        lkey: mr.lkey(),
    }]
}

/// `n` receive work requests (`wr_id` 0..n) over `sg`.
pub fn recv_wrs(sg: &[mlx5::qp::Sge], n: u64) -> Vec<mlx5::qp::RecvWr<'_>> {
    (0..n)
        .map(|wr_id| mlx5::qp::RecvWr { wr_id, sg_list: sg })
        .collect()
}

pub fn empty_wc() -> Wc {
    Wc::default()
}

/// Polls `cq` until `n` completions arrived (bounded: the simulator runs synchronously or on its
/// own thread; a missing completion fails the test instead of hanging it).
pub fn wait(cq: &mlx5::cq::Cq<'_, SimPlatform>, dev: &Dev, n: usize) -> Vec<Wc> {
    let mut out = Vec::new();
    let mut buf = [empty_wc(); 64];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while out.len() < n {
        let got = cq.poll(&mut buf[..(n - out.len()).min(64)]).expect("poll");
        out.extend_from_slice(&buf[..got]);
        if got == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "only {} of {n} completions arrived",
                out.len()
            );
            mlx5::Platform::relax(dev.platform());
        }
    }
    out
}

/// Connects `a` and `b` to each other.
pub fn connect<'a>(a: &mut Qp<'a, SimPlatform>, b: &mut Qp<'a, SimPlatform>, opts: &ConnectOpts) {
    let (ea, eb) = (a.endpoint(), b.endpoint());
    a.connect(&eb, opts).expect("connect a");
    b.connect(&ea, opts).expect("connect b");
}

/// An RC QP of `dev` on `cq` connected to itself (loopback).
pub fn looped<'a>(
    dev: &'a Dev,
    cq: &'a mlx5::cq::Cq<'a, SimPlatform>,
    c: QpCap,
) -> Qp<'a, SimPlatform> {
    let mut q = qp(dev, cq, QpType::Rc, c);
    let me = q.endpoint();
    q.connect(&me, &ConnectOpts::default())
        .expect("connect to itself");
    q
}

pub fn qp<'a>(
    dev: &'a Dev,
    cq: &'a mlx5::cq::Cq<'a, SimPlatform>,
    t: QpType,
    c: QpCap,
) -> Qp<'a, SimPlatform> {
    dev.create_qp(dev.pd(), &QpInitAttr::new(t, cq, cq, c))
        .expect("create_qp")
}

/// A signaled RDMA WRITE `wr_id` of `sge` to byte 2048 of `mr` (the loopback tests' own region).
pub fn write_wr<'a>(
    mr: &mlx5::MemoryRegion<'_, SimPlatform>,
    sge: &'a [mlx5::qp::Sge],
    wr_id: u64,
) -> mlx5::qp::SendWr<'a> {
    mlx5::qp::SendWr {
        op: mlx5::qp::SendOp::Write {
            remote_addr: mr.addr() + 2048,
            rkey: mr.rkey(),
        },
        ..mlx5::qp::SendWr::send(wr_id, sge)
    }
}

/// A soak's seed and rounds: `seed_var` (else the clock) and `rounds_var` (else `default_rounds`)
/// from the environment, so a printed seed reproduces a run.
pub fn seed_and_rounds(seed_var: &str, rounds_var: &str, default_rounds: u64) -> (u64, u64) {
    let seed = std::env::var(seed_var)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    let rounds = std::env::var(rounds_var)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default_rounds);
    (seed, rounds)
}

/// An Ethernet/IPv4/UDP frame of `payload` bytes from `src` to `dst`, checksums zero.
pub fn udp_frame(dst: [u8; 6], src: [u8; 6], payload: usize, seed: u8) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x08, 0x00]);
    let total = (20 + 8 + payload) as u16;
    f.extend_from_slice(&[0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, 17, 0, 0]);
    f[16..18].copy_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
    f.extend_from_slice(&[0x30, 0x39, 0x00, 0x35]);
    f.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend((0..payload).map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed)));
    f
}

/// Sends `frames` from `sq` (their bytes after the inline header staged in `mr` first), no
/// checksum offload, and waits for the last one's completion.
pub fn send_frames(
    sq: &mut mlx5::raw::eth::EthSq<'_, SimPlatform>,
    mr: &mlx5::MemoryRegion<'_, SimPlatform>,
    frames: &[Vec<u8>],
) {
    for (k, f) in frames.iter().enumerate() {
        mr.write(k * 2048, &f[mlx5::raw::eth::L2_INLINE..]).unwrap();
    }
    let sges: Vec<[mlx5::qp::Sge; 1]> = frames
        .iter()
        .enumerate()
        .map(|(k, f)| {
            [mlx5::qp::Sge {
                addr: mr.addr() + (k * 2048) as u64,
                length: (f.len() - mlx5::raw::eth::L2_INLINE) as u32,
                lkey: mr.lkey(),
            }]
        })
        .collect();
    let wrs: Vec<mlx5::raw::eth::EthWr<'_>> = frames
        .iter()
        .zip(&sges)
        .enumerate()
        .map(|(k, (f, s))| mlx5::raw::eth::EthWr {
            wr_id: k as u64,
            headers: &f[..mlx5::raw::eth::L2_INLINE],
            payload: s,
            checksum: mlx5::raw::eth::Checksum::NONE,
            vlan: None,
            tso_mss: None,
            signaled: k + 1 == frames.len(),
        })
        .collect();
    sq.post_send(&wrs).unwrap();
}
