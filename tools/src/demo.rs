//! `mlx5ctl demo`: two simulated ConnectX-5s on a simulated RoCE v2 wire. It connects RC QPs,
//! runs SEND/RECV, RDMA WRITE, READ and atomics with every byte verified, then a throughput
//! run and a latency run, and prints what it did and what it measured.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args as ClapArgs;
use mlx5::mr::MrAccess;
use mlx5::qp::{ConnectOpts, Mtu, QpCap, QpInitAttr, QpType, RecvWr, SendOp, SendWr, Sge};
use mlx5::sim::{Fabric, Mode, SimDevice};
use mlx5::{Device, DeviceConfig, SimPlatform, Wc, WcStatus};
use mlx5_vfio::AnyPlatform;

use crate::target::{profile, Target};

/// `mlx5ctl demo` arguments.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Simulated device profile (both NICs).
    #[arg(long, value_name = "PROFILE|CAPS.json", default_value = "cx5")]
    sim: String,
    /// Run each simulated device on its own thread.
    #[arg(long)]
    threaded: bool,
    /// RDMA WRITEs in the throughput run.
    #[arg(long, default_value_t = 100_000)]
    messages: u64,
    /// Bytes per message in the throughput run.
    #[arg(long, default_value_t = 4096)]
    size: u32,
    /// Round trips in the latency run.
    #[arg(long, default_value_t = 2_000)]
    pings: u32,
    /// Write every frame on the simulated wire to FILE (pcap; Wireshark shows RoCE v2).
    #[arg(long, value_name = "FILE")]
    pcap: Option<PathBuf>,
    /// Write every firmware command of the first NIC as JSON lines to FILE.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Real ConnectX functions bound to vfio-pci instead of the simulator: one (both QPs on its
    /// port, in loopback) or two (one QP on each, cabled or switched together).
    #[arg(long, value_name = "BDF", num_args = 1, action = clap::ArgAction::Append)]
    vfio: Vec<String>,
}

type Dev = Device<AnyPlatform>;
type Cq<'a> = mlx5::cq::Cq<'a, AnyPlatform>;

fn e(x: impl std::fmt::Display) -> String {
    x.to_string()
}

fn blank() -> Wc {
    Wc::default()
}

/// Waits for `n` completions on `cq` (bounded by a wall-clock deadline).
fn wait(cq: &Cq<'_>, dev: &Dev, n: usize) -> Result<Vec<Wc>, String> {
    let mut out = Vec::with_capacity(n);
    let mut buf = [blank(); 64];
    let deadline = Instant::now() + std::time::Duration::from_secs(30);
    while out.len() < n {
        let got = cq.poll(&mut buf[..(n - out.len()).min(64)]).map_err(e)?;
        for w in &buf[..got] {
            if w.status != WcStatus::Success {
                return Err(format!(
                    "work request {} completed with {:?}",
                    w.wr_id, w.status
                ));
            }
        }
        out.extend_from_slice(&buf[..got]);
        if got == 0 {
            if Instant::now() > deadline {
                return Err(format!("only {} of {n} completions arrived", out.len()));
            }
            mlx5::Platform::relax(dev.platform());
        }
    }
    Ok(out)
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed))
        .collect()
}

fn check(what: &str, ok: bool) -> Result<(), String> {
    if ok {
        println!("  {what:<44} ok, every byte verified");
        Ok(())
    } else {
        Err(format!("{what}: data mismatch"))
    }
}

/// Runs `mlx5ctl demo`.
pub fn run(a: &Args) -> Result<(), String> {
    if !a.vfio.is_empty() {
        return run_vfio(a);
    }
    let prof = profile(&a.sim)?;
    let mode = if a.threaded {
        Mode::Threaded
    } else {
        Mode::Sync
    };
    let fabric = Fabric::new();
    let sa = SimDevice::new(prof.clone().with_mac([0x02, 0xc5, 0x5a, 0, 0, 0x0a]), mode);
    let sb = SimDevice::new(prof.with_mac([0x02, 0xc5, 0x5a, 0, 0, 0x0b]), mode);
    fabric.attach(&sa).map_err(e)?;
    fabric.attach(&sb).map_err(e)?;
    let t0 = Instant::now();
    let open = |s: &SimDevice| {
        Device::open(
            AnyPlatform::Sim(SimPlatform::new(s.clone())),
            DeviceConfig::default(),
        )
        .map_err(e)
    };
    let na = open(&sa)?;
    let nb = open(&sb)?;
    println!(
        "two simulated ConnectX-5s (fw {}) up in {:.1} ms, {} + {} firmware commands",
        na.fw_version(),
        t0.elapsed().as_secs_f64() * 1e3,
        na.bringup().commands,
        nb.bringup().commands
    );
    let r = body(a, &na, &nb);
    let stats = fabric.counters();
    println!(
        "wire: {} RoCE v2 frames, {} bytes, {} dropped",
        stats.frames, stats.bytes, stats.dropped
    );
    drop((na.close(), nb.close()));
    if let Some(path) = &a.trace {
        let mut f = std::fs::File::create(path).map_err(|x| format!("{}: {x}", path.display()))?;
        sa.write_trace_jsonl(&mut f).map_err(e)?;
        println!("firmware command trace of NIC A: {}", path.display());
    }
    if let Some(path) = &a.pcap {
        let mut f = std::fs::File::create(path).map_err(|x| format!("{}: {x}", path.display()))?;
        fabric.write_pcap(&mut f).map_err(e)?;
        let kept = stats.frames.min(mlx5::sim::CAPTURE_FRAMES as u64);
        println!(
            "{kept} frames of the wire written to {} (pcap, RoCE v2; the last {} are kept)",
            path.display(),
            mlx5::sim::CAPTURE_FRAMES
        );
    }
    r
}

/// The same run on real functions: one in loopback, or two.
fn run_vfio(a: &Args) -> Result<(), String> {
    if a.pcap.is_some() || a.trace.is_some() {
        return Err(
            "--pcap and --trace record the simulated wire and firmware; use them without --vfio"
                .into(),
        );
    }
    if a.vfio.len() > 2 {
        return Err("demo takes one --vfio (loopback) or two".into());
    }
    let na = Target::open_vfio(&a.vfio[0]).map_err(e)?;
    println!(
        "{} up (fw {}) in {:.1} ms",
        na.hca_id,
        na.device.fw_version(),
        na.wall.as_secs_f64() * 1e3
    );
    let r = match a.vfio.get(1) {
        Some(b) => {
            let nb = Target::open_vfio(b).map_err(e)?;
            println!("{} up (fw {})", nb.hca_id, nb.device.fw_version());
            let r = body(a, &na.device, &nb.device);
            drop(nb.device.close());
            r
        }
        None => body(a, &na.device, &na.device),
    };
    drop(na.device.close());
    r
}

fn body(a: &Args, na: &Dev, nb: &Dev) -> Result<(), String> {
    let (cqa, cqb) = (
        na.create_cq(4096).map_err(e)?,
        nb.create_cq(4096).map_err(e)?,
    );
    let mrlen = 1 << 20;
    let mra = na
        .alloc_mr(na.pd().ok_or("no PD")?, mrlen, MrAccess::ALL)
        .map_err(e)?;
    let mrb = nb
        .alloc_mr(nb.pd().ok_or("no PD")?, mrlen, MrAccess::ALL)
        .map_err(e)?;
    let c = QpCap {
        max_send_wr: 256,
        max_recv_wr: 256,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 64,
    };
    let mut qa = na
        .create_qp(
            na.pd().ok_or("no PD")?,
            &QpInitAttr::new(QpType::Rc, &cqa, &cqa, c),
        )
        .map_err(e)?;
    let mut qb = nb
        .create_qp(
            nb.pd().ok_or("no PD")?,
            &QpInitAttr::new(QpType::Rc, &cqb, &cqb, c),
        )
        .map_err(e)?;
    let opts = ConnectOpts {
        mtu: Mtu::Mtu1024,
        ..ConnectOpts::default()
    };
    let (ea, eb) = (qa.endpoint(), qb.endpoint());
    qa.connect(&eb, &opts).map_err(e)?;
    qb.connect(&ea, &opts).map_err(e)?;
    println!(
        "RC QP {:#x} <-> QP {:#x} connected (path MTU 1024, granted {:?})",
        ea.qpn,
        eb.qpn,
        qa.cap()
    );
    let (la, lb) = (mra.lkey(), mrb.lkey());

    // SEND / RECV.
    let msg = pattern(4000, 1);
    mra.write(0, &msg).map_err(e)?;
    qb.post_recv(&[RecvWr {
        wr_id: 1,
        sg_list: &[Sge {
            addr: mrb.addr(),
            length: 4096,
            lkey: lb,
        }],
    }])
    .map_err(e)?;
    qa.post_send(&[SendWr::send(
        1,
        &[Sge {
            addr: mra.addr(),
            length: 4000,
            lkey: la,
        }],
    )])
    .map_err(e)?;
    wait(&cqa, na, 1)?;
    let w = wait(&cqb, nb, 1)?;
    let mut got = vec![0u8; 4000];
    mrb.read(0, &mut got).map_err(e)?;
    check(&format!("SEND/RECV of {} bytes", w[0].byte_len), got == msg)?;

    // RDMA WRITE, then READ it back.
    let big = pattern(65536, 7);
    mra.write(0, &big).map_err(e)?;
    qa.post_send(&[SendWr {
        op: SendOp::Write {
            remote_addr: mrb.addr() + 65536,
            rkey: mrb.rkey(),
        },
        ..SendWr::send(
            2,
            &[Sge {
                addr: mra.addr(),
                length: 65536,
                lkey: la,
            }],
        )
    }])
    .map_err(e)?;
    wait(&cqa, na, 1)?;
    let mut got = vec![0u8; 65536];
    mrb.read(65536, &mut got).map_err(e)?;
    check("RDMA WRITE of 65536 bytes", got == big)?;
    qa.post_send(&[SendWr {
        op: SendOp::Read {
            remote_addr: mrb.addr() + 65536,
            rkey: mrb.rkey(),
        },
        ..SendWr::send(
            3,
            &[Sge {
                addr: mra.addr() + 131072,
                length: 65536,
                lkey: la,
            }],
        )
    }])
    .map_err(e)?;
    wait(&cqa, na, 1)?;
    mra.read(131072, &mut got).map_err(e)?;
    check("RDMA READ of 65536 bytes", got == big)?;

    // Atomics: remote memory and the returned value are in host order.
    mrb.write(4096 * 100, &41u64.to_ne_bytes()).map_err(e)?;
    let res = [Sge {
        addr: mra.addr() + 8192,
        length: 8,
        lkey: la,
    }];
    let remote = mrb.addr() + 4096 * 100;
    qa.post_send(&[SendWr {
        op: SendOp::FetchAdd {
            remote_addr: remote,
            rkey: mrb.rkey(),
            add: 1,
        },
        ..SendWr::send(4, &res)
    }])
    .map_err(e)?;
    wait(&cqa, na, 1)?;
    let mut w8 = [0u8; 8];
    mra.read(8192, &mut w8).map_err(e)?;
    let old = u64::from_ne_bytes(w8);
    qa.post_send(&[SendWr {
        op: SendOp::CmpSwap {
            remote_addr: remote,
            rkey: mrb.rkey(),
            compare: 42,
            swap: 1000,
        },
        ..SendWr::send(5, &res)
    }])
    .map_err(e)?;
    wait(&cqa, na, 1)?;
    mrb.read(4096 * 100, &mut w8).map_err(e)?;
    check(
        "atomic FETCH_ADD then CMP_SWAP",
        old == 41 && u64::from_ne_bytes(w8) == 1000,
    )?;

    // Throughput: RDMA WRITEs, up to 128 in flight, one signaled per 32.
    let size = a.size.clamp(1, (mrlen / 2) as u32);
    let batch: Vec<SendWr<'_>> = (0..32u64)
        .map(|i| SendWr {
            op: SendOp::Write {
                remote_addr: mrb.addr(),
                rkey: mrb.rkey(),
            },
            signaled: i == 31,
            ..SendWr::send(i, &[])
        })
        .collect();
    let sge = [Sge {
        addr: mra.addr(),
        length: size,
        lkey: la,
    }];
    let batch: Vec<SendWr<'_>> = batch
        .into_iter()
        .map(|w| SendWr {
            payload: mlx5::qp::Payload::Sges(&sge),
            ..w
        })
        .collect();
    let total = a.messages.div_ceil(32) * 32;
    let (mut posted, mut done) = (0u64, 0u64);
    let mut wc = [blank(); 16];
    let t = Instant::now();
    let mut next_report = total / 10;
    while done < total {
        if posted - done < 128 && posted < total {
            qa.post_send(&batch).map_err(e)?;
            posted += 32;
        }
        let n = cqa.poll(&mut wc).map_err(e)?;
        for w in &wc[..n] {
            if w.status != WcStatus::Success {
                return Err(format!("throughput run: {:?}", w.status));
            }
            done += 32;
        }
        if n == 0 && posted >= total {
            mlx5::Platform::relax(na.platform());
        }
        if total >= 100_000 && done >= next_report && done < total {
            println!("  ... {done} of {total} writes");
            next_report += total / 10;
        }
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "throughput: {total} RDMA WRITEs of {size} bytes in {:.2} s: {:.0} messages/s, {:.1} MB/s",
        secs,
        total as f64 / secs,
        total as f64 * f64::from(size) / secs / 1e6
    );

    // Latency: SEND ping-pong, 64 bytes inline.
    let ping = [0x5au8; 64];
    let rsa = [Sge {
        addr: mra.addr() + 512 * 1024,
        length: 64,
        lkey: la,
    }];
    let rsb = [Sge {
        addr: mrb.addr() + 512 * 1024,
        length: 64,
        lkey: lb,
    }];
    let mut lat = Vec::with_capacity(a.pings as usize);
    for i in 0..a.pings {
        qb.post_recv(&[RecvWr {
            wr_id: u64::from(i),
            sg_list: &rsb,
        }])
        .map_err(e)?;
        qa.post_recv(&[RecvWr {
            wr_id: u64::from(i),
            sg_list: &rsa,
        }])
        .map_err(e)?;
        let t = Instant::now();
        qa.post_send(&[SendWr {
            payload: mlx5::qp::Payload::Inline(&ping),
            ..SendWr::send(u64::from(i), &[])
        }])
        .map_err(e)?;
        wait(&cqb, nb, 1)?;
        qb.post_send(&[SendWr {
            payload: mlx5::qp::Payload::Inline(&ping),
            ..SendWr::send(u64::from(i), &[])
        }])
        .map_err(e)?;
        let mut seen = 0;
        while seen < 2 {
            seen += wait(&cqa, na, 1)?.len();
        }
        wait(&cqb, nb, 1)?;
        lat.push(t.elapsed().as_nanos() as u64);
    }
    lat.sort_unstable();
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0) as f64
            / 1e3
    };
    println!("latency: {} SEND ping-pongs of 64 bytes: p50 {:.1} us, p99 {:.1} us, p99.9 {:.1} us (round trip)", lat.len(), pct(0.5), pct(0.99), pct(0.999));
    Ok(())
}
