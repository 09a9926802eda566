//! A minimal RC ping over two simulated ConnectX-5s on one simulated RoCE v2 wire: each side
//! opens its device, registers a buffer, creates a CQ and an RC QP, and the two QPs connect;
//! then A sends "ping n", B receives it and answers "pong n", a thousand times.
//!
//! `cargo run --release -p mlx5-tools --example rc_ping [COUNT]`
//!
//! Everything here is the verbs API any other `Platform` (a VFIO function, a unikernel's) would
//! use the same way: only the two lines that make `SimPlatform`s know it is a simulator.

use std::time::{Duration, Instant};

use mlx5::qp::{ConnectOpts, Qp, QpCap, QpInitAttr, QpType, RecvWr, SendWr, Sge};
use mlx5::sim::{Fabric, Mode, Profile, SimDevice};
use mlx5::{Device, DeviceConfig, MemoryRegion, MrAccess, SimPlatform, Wc, WcStatus};

type Dev = Device<SimPlatform>;

/// Offsets in each side's registered buffer.
const SEND_AT: usize = 0;
const RECV_AT: usize = 2048;
const MSG_MAX: u32 = 256;

fn open(fabric: &Fabric, last_mac_byte: u8) -> Result<Dev, mlx5::Error> {
    let sim = SimDevice::new(
        Profile::connectx5().with_mac([0x02, 0xc5, 0x5a, 0, 0, last_mac_byte]),
        Mode::Sync,
    );
    fabric
        .attach(&sim)
        .expect("a fresh device attaches to the fabric");
    Device::open(SimPlatform::new(sim), DeviceConfig::default())
}

fn post_recv(qp: &Qp<'_, SimPlatform>, mr: &MemoryRegion<'_, SimPlatform>, id: u64) {
    let sge = [Sge {
        addr: mr.addr() + RECV_AT as u64,
        length: MSG_MAX,
        lkey: mr.lkey(),
    }];
    qp.post_recv(&[RecvWr {
        wr_id: id,
        sg_list: &sge,
    }])
    .expect("post_recv");
}

fn send(qp: &mut Qp<'_, SimPlatform>, mr: &MemoryRegion<'_, SimPlatform>, id: u64, text: &str) {
    mr.write(SEND_AT, text.as_bytes())
        .expect("write the message");
    let sge = [Sge {
        addr: mr.addr() + SEND_AT as u64,
        length: text.len() as u32,
        lkey: mr.lkey(),
    }];
    qp.post_send(&[SendWr::send(id, &sge)]).expect("post_send");
}

/// Polls `cq` until a completion arrives (bounded), and checks it succeeded.
fn wait_one(dev: &Dev, cq: &mlx5::cq::Cq<'_, SimPlatform>) -> Wc {
    let mut wc = [Wc::default(); 1];
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if cq.poll(&mut wc).expect("poll_cq") == 1 {
            assert_eq!(wc[0].status, WcStatus::Success, "{:?}", wc[0]);
            return wc[0];
        }
        assert!(Instant::now() < deadline, "no completion within 5 s");
        mlx5::Platform::relax(dev.platform());
    }
}

/// Reads the message a receive completion delivered.
fn received(mr: &MemoryRegion<'_, SimPlatform>, wc: &Wc) -> String {
    let mut b = vec![0u8; wc.byte_len as usize];
    mr.read(RECV_AT, &mut b).expect("read the message");
    String::from_utf8_lossy(&b).into_owned()
}

fn main() -> Result<(), mlx5::Error> {
    let count: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    ping(count)
}

#[test]
fn a_hundred_pings_are_answered() {
    ping(100).expect("ping");
}

/// `count` round trips between two simulated NICs.
fn ping(count: u64) -> Result<(), mlx5::Error> {
    let fabric = Fabric::new();
    let (a, b) = (open(&fabric, 1)?, open(&fabric, 2)?);
    let cap = QpCap {
        max_send_wr: 4,
        max_recv_wr: 4,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let (cqa, cqb) = (a.create_cq(16)?, b.create_cq(16)?);
    let mra = a.alloc_mr(a.pd(), 4096, MrAccess::LOCAL)?;
    let mrb = b.alloc_mr(b.pd(), 4096, MrAccess::LOCAL)?;
    let mut qa = a.create_qp(a.pd(), &QpInitAttr::new(QpType::Rc, &cqa, &cqa, cap))?;
    let mut qb = b.create_qp(b.pd(), &QpInitAttr::new(QpType::Rc, &cqb, &cqb, cap))?;
    // The out-of-band exchange a real pair of hosts would do over TCP: QPN, PSN, GID, MAC.
    let (ea, eb) = (qa.endpoint(), qb.endpoint());
    qa.connect(&eb, &ConnectOpts::default())?;
    qb.connect(&ea, &ConnectOpts::default())?;
    println!(
        "QP {:#x} on A connected to QP {:#x} on B",
        qa.qpn(),
        qb.qpn()
    );

    let started = Instant::now();
    for n in 0..count {
        post_recv(&qb, &mrb, n);
        post_recv(&qa, &mra, n);
        send(&mut qa, &mra, n, &format!("ping {n}"));
        // B: its receive, then answer; A: its send completion, then the answer.
        let got = wait_one(&b, &cqb);
        assert_eq!(received(&mrb, &got), format!("ping {n}"));
        send(&mut qb, &mrb, n, &format!("pong {n}"));
        assert_eq!(wait_one(&a, &cqa).wr_id, n, "A's SEND completed");
        let got = wait_one(&a, &cqa);
        assert_eq!(received(&mra, &got), format!("pong {n}"));
        assert_eq!(wait_one(&b, &cqb).wr_id, n, "B's SEND completed");
    }
    let rtt = started.elapsed() / count.max(1) as u32;
    println!("{count} pings answered, every byte checked: {rtt:?} per round trip (simulated wire)");

    drop((qa, qb));
    drop((mra, mrb));
    drop((cqa, cqb));
    a.close()?;
    b.close()?;
    Ok(())
}
