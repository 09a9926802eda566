//! `mlx5ctl demo`: two simulated ConnectX-5s on a simulated RoCE v2 wire. It connects a pair of
//! QPs of the type `--type` asks for and runs what that transport carries, every byte verified:
//! RC (the default) SEND/RECV, RDMA WRITE, READ and atomics ([`rc`]); UC SEND/RECV, RDMA WRITE
//! and WRITE with immediate ([`uc`]); UD addressed SENDs with their GRH, source QP and Q_Key
//! ([`ud`]). Then a throughput run and a latency run, and, on the simulator, the QP commands each
//! NIC's firmware executed: every QP through RST2INIT, INIT2RTR and RTR2RTS.

mod rc;
mod trace;
mod uc;
mod ud;

use std::path::PathBuf;
use std::time::Instant;

use clap::Args as ClapArgs;
use mlx5::mr::MrAccess;
use mlx5::qp::UdAddr;
use mlx5::qp::{ConnectOpts, QpCap, QpInitAttr, QpType, RecvWr, SendOp, SendWr, Sge};
use mlx5::sim::{Fabric, Mode, SimDevice};
use mlx5::{Device, DeviceConfig, SimPlatform, Wc, WcStatus};
use mlx5_vfio::AnyPlatform;

use crate::target::{profile, Target};
use trace::{firmware_transitions, write_trace};

/// `mlx5ctl demo` arguments.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// QP type: rc (SEND, WRITE, READ, atomics), uc (SEND, WRITE, WRITE with immediate) or ud
    /// (addressed SENDs).
    #[arg(long = "type", value_name = "rc|uc|ud", default_value = "rc",
          value_parser = crate::size::parse_type)]
    qp_type: QpType,
    /// Simulated device profile (both NICs).
    #[arg(long, value_name = "PROFILE|CAPS.json", default_value = "cx5")]
    sim: String,
    /// Run each simulated device on its own thread.
    #[arg(long)]
    threaded: bool,
    /// Messages in the throughput run: RDMA WRITEs (rc, uc) or SENDs (ud).
    #[arg(long, default_value_t = 100_000)]
    messages: u64,
    /// Bytes per message in the throughput run (ud: at most the UD MTU).
    #[arg(long, default_value_t = 4096)]
    size: u32,
    /// Round trips in the latency run.
    #[arg(long, default_value_t = 2_000)]
    pings: u32,
    /// Write every frame on the simulated wire to FILE (pcap; Wireshark shows RoCE v2).
    #[arg(long, value_name = "FILE")]
    pcap: Option<PathBuf>,
    /// Write every firmware command of the first NIC as JSON lines to FILE (the QP commands
    /// with the QP's "qp_type").
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Real ConnectX functions bound to vfio-pci instead of the simulator: one (both QPs on its
    /// port, in loopback) or two (one QP on each, cabled or switched together).
    #[arg(long, value_name = "BDF", num_args = 1, action = clap::ArgAction::Append)]
    vfio: Vec<String>,
}

type Dev = Device<AnyPlatform>;
type Cq<'a> = mlx5::cq::Cq<'a, AnyPlatform>;
type Mr<'a> = mlx5::MemoryRegion<'a, AnyPlatform>;
type Qp<'a> = mlx5::qp::Qp<'a, AnyPlatform>;

/// The memory region of each side.
const MR_LEN: usize = 1 << 20;
/// Where the latency run's receives land.
const PING_AT: u64 = 512 * 1024;
/// The GRH in front of every UD receive.
const GRH: u32 = 40;

/// One end of the demo: a device, its CQ (sends and receives), its memory region and its QP.
struct Side<'a> {
    dev: &'a Dev,
    cq: &'a Cq<'a>,
    mr: &'a Mr<'a>,
    qp: Qp<'a>,
}

impl Side<'_> {
    /// `len` bytes at `off` of the memory region.
    fn sge(&self, off: u64, len: u32) -> Sge {
        Sge {
            addr: self.mr.addr() + off,
            length: len,
            lkey: self.mr.lkey(),
        }
    }

    /// Waits for `n` successful completions on the CQ.
    fn wait(&self, n: usize) -> Result<Vec<Wc>, String> {
        wait(self.cq, self.dev, n)
    }

    /// Posts one receive of `sge`.
    fn recv(&mut self, wr_id: u64, sge: &[Sge]) -> Result<(), String> {
        self.qp
            .post_recv(&[RecvWr {
                wr_id,
                sg_list: sge,
            }])
            .map_err(e)
    }

    /// Writes `data` at `off` of the memory region.
    fn put(&self, off: u64, data: &[u8]) -> Result<(), String> {
        self.mr.write(off as usize, data).map_err(e)
    }

    /// `n` bytes at `off` of the memory region.
    fn get(&self, off: u64, n: usize) -> Result<Vec<u8>, String> {
        let mut v = vec![0u8; n];
        self.mr.read(off as usize, &mut v).map_err(e)?;
        Ok(v)
    }
}

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

/// A check that passed, and how.
fn ok(what: &str, how: &str) {
    println!("  {what:<44} ok, {how}");
}

/// A check that is not about bytes: `ok, {how}`.
fn check_that(what: &str, good: bool, how: &str, otherwise: String) -> Result<(), String> {
    if good {
        ok(what, how);
        Ok(())
    } else {
        Err(format!("{what}: {otherwise}"))
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
    if let Some(path) = &a.pcap {
        let f = std::fs::File::create(path).map_err(|x| format!("{}: {x}", path.display()))?;
        fabric
            .pcap_to(Box::new(f))
            .map_err(|x| format!("{}: {x}", path.display()))?;
    }
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
    let (ta, tb) = (sa.trace(), sb.trace());
    let fw = if r.is_ok() {
        firmware_transitions("NIC A", &ta, a.qp_type)
            .and_then(|()| firmware_transitions("NIC B", &tb, a.qp_type))
    } else {
        Ok(())
    };
    if let Some(path) = &a.trace {
        let mut f = std::fs::File::create(path).map_err(|x| format!("{}: {x}", path.display()))?;
        write_trace(&ta, &mut f).map_err(|x| format!("{}: {x}", path.display()))?;
        println!("firmware command trace of NIC A: {}", path.display());
    }
    if let Some(path) = &a.pcap {
        let n = fabric
            .pcap_finish()
            .map_err(|x| format!("{}: {x}", path.display()))?;
        println!(
            "{n} frames of the wire written to {} (pcap, RoCE v2), every one of the run",
            path.display()
        );
    }
    r.and(fw)
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
    let (mra, mrb) = (mr(na)?, mr(nb)?);
    let mut x = side(a.qp_type, na, &cqa, &mra)?;
    let mut y = side(a.qp_type, nb, &cqb, &mrb)?;
    match a.qp_type {
        QpType::Rc => rc::run(a, &mut x, &mut y),
        QpType::Uc => uc::run(a, &mut x, &mut y),
        QpType::Ud | QpType::Gsi => ud::run(a, &mut x, &mut y),
    }
}

/// A memory region of [`MR_LEN`] bytes with every access right.
fn mr(d: &Dev) -> Result<Mr<'_>, String> {
    d.alloc_mr(d.pd(), MR_LEN, MrAccess::ALL).map_err(e)
}

/// A QP of type `t` on `dev`, in RESET, sending and receiving on `cq`.
fn side<'a>(t: QpType, dev: &'a Dev, cq: &'a Cq<'a>, mr: &'a Mr<'a>) -> Result<Side<'a>, String> {
    let c = QpCap {
        max_send_wr: 256,
        max_recv_wr: 256,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 64,
    };
    let qp = dev
        .create_qp(dev.pd(), &QpInitAttr::new(t, cq, cq, c))
        .map_err(e)?;
    Ok(Side { dev, cq, mr, qp })
}

/// Connects the two QPs to each other: RESET → INIT → RTR → RTS on each (UD: no peer).
fn connect(x: &mut Side<'_>, y: &mut Side<'_>, opts: &ConnectOpts) -> Result<(), String> {
    let (ex, ey) = (x.qp.endpoint(), y.qp.endpoint());
    x.qp.connect(&ey, opts).map_err(e)?;
    y.qp.connect(&ex, opts).map_err(e)
}

/// How the QPs were connected, for the first line of each demo.
fn connected(x: &Side<'_>, y: &Side<'_>, how: &str) {
    let t = x.qp.qp_type().name().to_uppercase();
    println!(
        "{t} QP {:#x} <-> QP {:#x} connected, RESET -> INIT -> RTR -> RTS ({how}, granted {:?})",
        x.qp.qpn(),
        y.qp.qpn(),
        x.qp.cap()
    );
}

/// Throughput: RDMA WRITEs of `--size` bytes from `x` to `y`, up to 128 in flight, one
/// signaled per 32. `last_with_imm` (UC, which has no acknowledgements: a send completes once
/// on the wire) ends the run with a WRITE with immediate and stops the clock when its receive
/// completes at `y`, after every earlier WRITE of the QP was placed.
fn write_throughput(
    a: &Args,
    x: &mut Side<'_>,
    y: &mut Side<'_>,
    last_with_imm: bool,
) -> Result<(), String> {
    let size = a.size.clamp(1, (MR_LEN / 2) as u32);
    let sge = [x.sge(0, size)];
    let (remote_addr, rkey) = (y.mr.addr(), y.mr.rkey());
    let batch: Vec<SendWr<'_>> = (0..32u64)
        .map(|i| SendWr {
            op: SendOp::Write { remote_addr, rkey },
            signaled: i == 31,
            ..SendWr::send(i, &sge)
        })
        .collect();
    let total = a.messages.div_ceil(32) * 32;
    let last_with_imm = last_with_imm && total > 0;
    let (mut posted, mut done) = (0u64, 0u64);
    let mut wc = [blank(); 16];
    let t = Instant::now();
    let mut next_report = total / 10;
    let mut last = batch.clone();
    if last_with_imm {
        y.recv(0, &[y.sge(PING_AT, 64)])?;
        last[31].op = SendOp::WriteImm {
            remote_addr,
            rkey,
            imm: 0x1a57,
        };
    }
    while done < total {
        if posted - done < 128 && posted < total {
            let b = if posted + 32 == total { &last } else { &batch };
            x.qp.post_send(b).map_err(e)?;
            posted += 32;
        }
        let n = x.cq.poll(&mut wc).map_err(e)?;
        for w in &wc[..n] {
            if w.status != WcStatus::Success {
                return Err(format!("throughput run: {:?}", w.status));
            }
            done += 32;
        }
        if n == 0 && posted >= total {
            mlx5::Platform::relax(x.dev.platform());
        }
        if total >= 100_000 && done >= next_report && done < total {
            println!("  ... {done} of {total} writes");
            next_report += total / 10;
        }
    }
    if last_with_imm {
        let w = y.wait(1)?;
        if w[0].imm_data != Some(0x1a57) {
            return Err(format!(
                "throughput run: the last WRITE arrived as {:?}",
                w[0]
            ));
        }
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "throughput: {total} RDMA WRITEs of {size} bytes in {:.2} s: {:.0} messages/s, {:.1} MB/s",
        secs,
        total as f64 / secs,
        total as f64 * f64::from(size) / secs / 1e6
    );
    Ok(())
}

/// Latency: SEND ping-pong, 64 bytes inline, receives posted on both sides first. `ud` gives
/// the address of `y` and of `x` (UD sends name their destination).
fn ping_pong(
    a: &Args,
    x: &mut Side<'_>,
    y: &mut Side<'_>,
    ud: Option<(UdAddr, UdAddr)>,
) -> Result<(), String> {
    let ping = [0x5au8; 64];
    let rlen = 64 + if ud.is_some() { GRH } else { 0 };
    let (rsx, rsy) = ([x.sge(PING_AT, rlen)], [y.sge(PING_AT, rlen)]);
    let mut lat = Vec::with_capacity(a.pings as usize);
    for i in 0..a.pings {
        let id = u64::from(i);
        y.recv(id, &rsy)?;
        x.recv(id, &rsx)?;
        let t = Instant::now();
        x.qp.post_send(&[SendWr {
            payload: mlx5::qp::Payload::Inline(&ping),
            ud: ud.map(|u| u.0),
            ..SendWr::send(id, &[])
        }])
        .map_err(e)?;
        y.wait(1)?;
        y.qp.post_send(&[SendWr {
            payload: mlx5::qp::Payload::Inline(&ping),
            ud: ud.map(|u| u.1),
            ..SendWr::send(id, &[])
        }])
        .map_err(e)?;
        let mut seen = 0;
        while seen < 2 {
            seen += x.wait(1)?.len();
        }
        y.wait(1)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use serde_json::Value;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        a: Args,
    }

    fn args(argv: &[&str]) -> Args {
        Cli::try_parse_from(std::iter::once("demo").chain(argv.iter().copied()))
            .unwrap()
            .a
    }

    /// Runs the demo of type `t` (shortened) with `--trace` and returns the trace's records.
    fn run_with_trace(t: &str, extra: &[&str]) -> Vec<Value> {
        let path = std::env::temp_dir().join(format!(
            "mlx5ctl-demo-{t}-{}-{}.trace.jsonl",
            std::process::id(),
            extra.len()
        ));
        let p = path.to_str().unwrap();
        let mut argv = vec!["--type", t, "--messages", "512", "--pings", "20"];
        argv.extend_from_slice(&["--size", "1024", "--trace", p]);
        argv.extend_from_slice(extra);
        run(&args(&argv)).unwrap_or_else(|x| panic!("demo --type {t}: {x}"));
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The trace has CREATE_QP, RST2INIT_QP, INIT2RTR_QP and RTR2RTS_QP, in that order, with
    /// status OK and `qp_type` `t`, and no QP command of another type.
    fn has_the_transitions(t: &str, trace: &[Value]) {
        let qp: Vec<&Value> = trace
            .iter()
            .filter(|r| r.get("qp_type").is_some())
            .collect();
        assert!(
            qp.iter().all(|r| r["qp_type"] == t),
            "QP commands of another type: {qp:?}"
        );
        let mut seq = -1i64;
        for (opcode, name) in [
            ("0x0500", "CREATE_QP"),
            ("0x0502", "RST2INIT_QP"),
            ("0x0503", "INIT2RTR_QP"),
            ("0x0504", "RTR2RTS_QP"),
        ] {
            let r = qp
                .iter()
                .find(|r| r["opcode"] == opcode)
                .unwrap_or_else(|| panic!("no {name} of a {t} QP in the trace"));
            assert_eq!(r["name"], name);
            assert_eq!(r["status"], 0, "{r}");
            let s = r["seq"].as_i64().unwrap();
            assert!(s > seq, "{name} out of order");
            seq = s;
        }
        assert!(
            qp.iter().any(|r| r["name"] == "DESTROY_QP"),
            "the QP is destroyed before the trace is written"
        );
        let not_qp = trace.iter().find(|r| r["name"] == "CREATE_CQ").unwrap();
        assert!(not_qp.get("qp_type").is_none(), "{not_qp}");
    }

    #[test]
    fn rc_demo_runs_and_its_trace_has_the_rc_transitions() {
        has_the_transitions("rc", &run_with_trace("rc", &[]));
    }

    #[test]
    fn uc_demo_runs_and_its_trace_has_the_uc_transitions() {
        has_the_transitions("uc", &run_with_trace("uc", &[]));
    }

    #[test]
    fn ud_demo_runs_and_its_trace_has_the_ud_transitions() {
        has_the_transitions("ud", &run_with_trace("ud", &[]));
    }

    #[test]
    fn every_type_runs_with_threaded_devices() {
        for t in ["rc", "uc", "ud"] {
            has_the_transitions(t, &run_with_trace(t, &["--threaded"]));
        }
    }

    #[test]
    fn the_type_defaults_to_rc_and_names_what_it_accepts() {
        assert_eq!(args(&[]).qp_type, QpType::Rc);
        assert_eq!(args(&["--type", "UD"]).qp_type, QpType::Ud);
        let err = Cli::try_parse_from(["demo", "--type", "rd"])
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("rc, uc, ud"), "{err}");
    }
}
