//! `mlx5ctl scale`: many RC connections between two simulated ConnectX-5s, as a server with
//! thousands of clients holds them. Each NIC puts all its QPs on one CQ; SENDs go round robin
//! over every connection, in both directions, and every byte received is checked against what
//! its connection and round should carry. It prints what the setup cost per connection: time,
//! firmware commands, memory (process and DMA) and the UAR pages the doorbells took.

use std::time::Instant;

use clap::Args as ClapArgs;
use mlx5::mr::MrAccess;
use mlx5::qp::{ConnectOpts, QpCap, QpInitAttr, QpType, RecvWr, SendWr, Sge};
use mlx5::sim::{Fabric, Mode, SimDevice};
use mlx5::{Device, DeviceConfig, SimPlatform, Wc, WcOpcode, WcStatus};

use crate::target::profile;

type Dev = Device<SimPlatform>;
type Cq<'a> = mlx5::cq::Cq<'a, SimPlatform>;
type Mr<'a> = mlx5::MemoryRegion<'a, SimPlatform>;
type Qp<'a> = mlx5::qp::Qp<'a, SimPlatform>;

/// `mlx5ctl scale` arguments.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// RC connections (a QP on each NIC per connection, all of a NIC's on one CQ).
    #[arg(long, default_value_t = 10_000)]
    pub qps: usize,
    /// Rounds of traffic: each sends one message on every connection, alternately from NIC A
    /// and from NIC B.
    #[arg(long, default_value_t = 2)]
    pub rounds: u32,
    /// Bytes per message.
    #[arg(long, default_value_t = 64)]
    pub size: u32,
    /// Messages in flight at once (posted before their completions are polled).
    #[arg(long, default_value_t = 512)]
    pub window: usize,
    /// Simulated device profile (both NICs).
    #[arg(long, value_name = "PROFILE|CAPS.json", default_value = "cx5")]
    pub sim: String,
}

/// One NIC's end of every connection.
struct End<'a> {
    dev: &'a Dev,
    cq: &'a Cq<'a>,
    mr: &'a Mr<'a>,
    qps: Vec<Qp<'a>>,
}

fn e(x: impl std::fmt::Display) -> String {
    x.to_string()
}

/// Resident memory of this process in bytes (Linux), 0 where unknown.
fn rss() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// The bytes connection `c` carries in round `r`.
fn payload(c: usize, r: u32, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    let seed = (c as u64) << 8 | u64::from(r);
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    v
}

/// Runs `mlx5ctl scale`.
pub fn run(a: &Args) -> Result<(), String> {
    if a.qps == 0 || a.size == 0 || a.window == 0 {
        return Err("--qps, --size and --window must be at least 1".into());
    }
    let prof = profile(&a.sim)?;
    let fabric = Fabric::new();
    let sims = [0x0a, 0x0b].map(|n| {
        SimDevice::new(
            prof.clone().with_mac([0x02, 0xc5, 0x5a, 0, 0, n]),
            Mode::Sync,
        )
    });
    for s in &sims {
        fabric.attach(s).map_err(e)?;
    }
    let open = |s: &SimDevice| {
        Device::open(SimPlatform::new(s.clone()), DeviceConfig::default()).map_err(e)
    };
    let (na, nb) = (open(&sims[0])?, open(&sims[1])?);
    let max_qp = na.device_attr().max_qp;
    println!(
        "two simulated ConnectX-5s (fw {}), max_qp {max_qp}: {} RC connections, one CQ a NIC",
        na.fw_version(),
        a.qps
    );
    let r = body(a, &na, &nb, &sims);
    drop((na.close(), nb.close()));
    r
}

fn body(a: &Args, na: &Dev, nb: &Dev, sims: &[SimDevice; 2]) -> Result<(), String> {
    // Each connection's send buffer, then its receive buffer, on each NIC.
    let slot = u64::from(a.size).next_multiple_of(64);
    let mr_len = usize::try_from(2 * slot * a.qps as u64).map_err(e)?;
    let cqe = (2 * a.window as u32).next_power_of_two().max(64);
    let (ca, cb) = (na.create_cq(cqe).map_err(e)?, nb.create_cq(cqe).map_err(e)?);
    let ma = na.alloc_mr(na.pd(), mr_len, MrAccess::ALL).map_err(e)?;
    let mb = nb.alloc_mr(nb.pd(), mr_len, MrAccess::ALL).map_err(e)?;
    let mut ends = [
        End {
            dev: na,
            cq: &ca,
            mr: &ma,
            qps: Vec::with_capacity(a.qps),
        },
        End {
            dev: nb,
            cq: &cb,
            mr: &mb,
            qps: Vec::with_capacity(a.qps),
        },
    ];
    let cmds0 = [na.cmd_stats().executed, nb.cmd_stats().executed];
    let dma0 = sims.each_ref().map(SimDevice::dma_bytes_mapped);
    let rss0 = rss();
    let cap = QpCap {
        max_send_wr: 1,
        max_recv_wr: 1,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let t0 = Instant::now();
    for end in &mut ends {
        for i in 0..a.qps {
            let attr = QpInitAttr::new(QpType::Rc, end.cq, end.cq, cap);
            let q = end
                .dev
                .create_qp(end.dev.pd(), &attr)
                .map_err(|x| format!("create_qp {} of {}: {x}", i + 1, a.qps))?;
            end.qps.push(q);
        }
    }
    let created = t0.elapsed();
    let t1 = Instant::now();
    let opts = ConnectOpts::default();
    let [ea, eb] = &mut ends;
    for (qa, qb) in ea.qps.iter_mut().zip(eb.qps.iter_mut()) {
        let (pa, pb) = (qa.endpoint(), qb.endpoint());
        qa.connect(&pb, &opts).map_err(e)?;
        qb.connect(&pa, &opts).map_err(e)?;
    }
    let connected = t1.elapsed();
    let n2 = 2.0 * a.qps as f64;
    let cmds = (na.cmd_stats().executed - cmds0[0]) + (nb.cmd_stats().executed - cmds0[1]);
    let dma: usize = sims
        .iter()
        .zip(dma0)
        .map(|(s, d)| s.dma_bytes_mapped().saturating_sub(d))
        .sum();
    let host = rss().saturating_sub(rss0);
    let used = na.bfreg_usage();
    println!(
        "setup: {} QPs created in {:.0} ms ({:.1} us each), connected in {:.0} ms ({:.1} us each)",
        2 * a.qps,
        created.as_secs_f64() * 1e3,
        created.as_secs_f64() * 1e6 / n2,
        connected.as_secs_f64() * 1e3,
        connected.as_secs_f64() * 1e6 / n2,
    );
    println!(
        "  {:.1} firmware commands a QP; memory a QP: {:.0} bytes of DMA, {:.0} bytes of process \
         (driver, simulator and DMA together)",
        cmds as f64 / n2,
        dma as f64 / n2,
        host as f64 / n2
    );
    println!(
        "  doorbells of NIC A: {} UAR pages, {} QPs on dedicated BlueFlame registers, {} on {} \
         shared registers",
        used.pages, used.dedicated, used.shared_users, used.shared
    );
    let t2 = Instant::now();
    let mut bytes = 0u64;
    for round in 0..a.rounds {
        let (from, to) = if round % 2 == 0 { (0, 1) } else { (1, 0) };
        for chunk in (0..a.qps).collect::<Vec<_>>().chunks(a.window) {
            exchange(&mut ends, from, to, chunk, round, slot, a.size)?;
            bytes += u64::from(a.size) * chunk.len() as u64;
        }
    }
    let moved = t2.elapsed();
    let msgs = u64::from(a.rounds) * a.qps as u64;
    println!(
        "traffic: {msgs} SENDs of {} bytes round robin over {} connections, both ways, in \
         {:.0} ms ({:.2} us each); every byte verified",
        a.size,
        a.qps,
        moved.as_secs_f64() * 1e3,
        moved.as_secs_f64() * 1e6 / msgs.max(1) as f64
    );
    let t3 = Instant::now();
    for end in &mut ends {
        for q in end.qps.drain(..) {
            q.destroy().map_err(e)?;
        }
    }
    let left = [na.bfreg_usage(), nb.bfreg_usage()];
    // One empty page stays with each device as a spare until close.
    if left
        .iter()
        .any(|u| u.pages > 1 || u.dedicated != 0 || u.shared_users != 0)
    {
        return Err(format!(
            "UAR pages still held after every QP went: {left:?}"
        ));
    }
    println!(
        "teardown: {} QPs destroyed in {:.0} ms, every UAR page given back but a spare; {bytes} bytes moved",
        2 * a.qps,
        t3.elapsed().as_secs_f64() * 1e3
    );
    let faults: usize = sims.iter().map(|s| s.dma_faults().len()).sum();
    if faults != 0 {
        return Err(format!("the simulated NICs recorded {faults} DMA faults"));
    }
    Ok(())
}

/// One window of SENDs on connections `conns` from end `from` to end `to`, then their
/// completions on both CQs, each receive's bytes checked.
fn exchange(
    ends: &mut [End<'_>; 2],
    from: usize,
    to: usize,
    conns: &[usize],
    round: u32,
    slot: u64,
    size: u32,
) -> Result<(), String> {
    let len = size as usize;
    for &c in conns {
        let rx = &mut ends[to];
        let dst = [Sge {
            addr: rx.mr.addr() + (2 * c as u64 + 1) * slot,
            length: size,
            lkey: rx.mr.lkey(),
        }];
        rx.qps[c]
            .post_recv(&[RecvWr {
                wr_id: c as u64,
                sg_list: &dst,
            }])
            .map_err(e)?;
        let tx = &mut ends[from];
        let off = 2 * c as u64 * slot;
        tx.mr
            .write(off as usize, &payload(c, round, len))
            .map_err(e)?;
        let src = [Sge {
            addr: tx.mr.addr() + off,
            length: size,
            lkey: tx.mr.lkey(),
        }];
        tx.qps[c]
            .post_send(&[SendWr::send(c as u64, &src)])
            .map_err(e)?;
    }
    let sent = drain(&ends[from], conns.len(), WcOpcode::Send)?;
    let got = drain(&ends[to], conns.len(), WcOpcode::Recv)?;
    for (w, opcode) in sent
        .iter()
        .map(|w| (w, "SEND"))
        .chain(got.iter().map(|w| (w, "RECV")))
    {
        let c = w.wr_id as usize;
        let end = if opcode == "SEND" {
            &ends[from]
        } else {
            &ends[to]
        };
        if end.qps.get(c).map(Qp::qpn) != Some(w.qp_num) {
            return Err(format!(
                "{opcode} completion {c} names QP {:#x}, not connection {c}'s",
                w.qp_num
            ));
        }
    }
    for w in &got {
        let c = w.wr_id as usize;
        let mut buf = vec![0u8; len];
        ends[to]
            .mr
            .read(((2 * c as u64 + 1) * slot) as usize, &mut buf)
            .map_err(e)?;
        if w.byte_len != size || buf != payload(c, round, len) {
            return Err(format!(
                "connection {c}, round {round}: received {} bytes that are not what was sent",
                w.byte_len
            ));
        }
    }
    Ok(())
}

/// Polls `n` successful completions of `opcode` from the end's CQ (bounded by a deadline).
fn drain(end: &End<'_>, n: usize, opcode: WcOpcode) -> Result<Vec<Wc>, String> {
    let mut out = Vec::with_capacity(n);
    let mut buf = [Wc::default(); 64];
    let deadline = Instant::now() + std::time::Duration::from_secs(60);
    while out.len() < n {
        let got = end
            .cq
            .poll(&mut buf[..(n - out.len()).min(64)])
            .map_err(e)?;
        for w in &buf[..got] {
            if w.status != WcStatus::Success || w.opcode != opcode {
                return Err(format!(
                    "work request {} of QP {:#x} completed {:?} {:?}",
                    w.wr_id, w.qp_num, w.opcode, w.status
                ));
            }
        }
        out.extend_from_slice(&buf[..got]);
        if got == 0 {
            if Instant::now() > deadline {
                return Err(format!("only {} of {n} completions arrived", out.len()));
            }
            mlx5::Platform::relax(end.dev.platform());
        }
    }
    Ok(out)
}
