//! `mlx5ctl demo`: two simulated ConnectX-5s on a simulated RoCE v2 wire. It connects a pair of
//! QPs of the type `--type` asks for and runs what that transport carries, every byte verified:
//! RC (the default) SEND/RECV, RDMA WRITE, READ and atomics (`rc.rs`); UC SEND/RECV, RDMA WRITE
//! and WRITE with immediate (`uc.rs`); UD addressed SENDs with their GRH, source QP and Q_Key
//! (`ud.rs`). Then a throughput run and a latency run, and, on the simulator, the QP commands each
//! NIC's firmware executed: every QP through RST2INIT, INIT2RTR and RTR2RTS.

mod args;
mod rc;
mod side;
mod trace;
mod uc;
mod ud;

use std::time::Instant;

use mlx5::qp::QpType;
use mlx5::sim::{Fabric, Mode, SimDevice};
use mlx5::{Device, DeviceConfig, SimPlatform};
use mlx5_vfio::AnyPlatform;

use crate::target::{profile, Target};
use trace::{firmware_transitions, write_trace};

pub use args::Args;
use side::{e, mr, side, Dev};

/// Runs `mlx5ctl demo`.
pub fn run(a: &Args) -> Result<(), String> {
    if !a.vfio.is_empty() {
        return run_vfio(a);
    }
    let mut prof = profile(&a.sim)?;
    if a.vf {
        prof = prof.as_vf(true);
    }
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
    if a.vf {
        for (n, d) in [("A", &na), ("B", &nb)] {
            let v = d.vport();
            println!(
                "NIC {n}: a virtual function, vport 0, MAC {} ({})",
                v.mac.map(|b| format!("{b:02x}")).join(":"),
                if v.random_mac {
                    "random: none assigned"
                } else {
                    "assigned"
                }
            );
        }
    }
    println!(
        "two simulated ConnectX-5{} (fw {}) up in {:.1} ms, {} + {} firmware commands",
        if a.vf { " VFs" } else { "s" },
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
