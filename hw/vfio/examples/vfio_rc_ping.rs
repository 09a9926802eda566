//! An RC ping over real ConnectX functions through VFIO: each function bound to `vfio-pci`, opened
//! and brought up by this driver from user space (no kernel driver, no rdma-core), a PD, a
//! registered buffer, a CQ and an RC QP on each; the QPs connect, then A sends "ping n", B
//! answers "pong n", every message checked, and the round trips are timed.
//!
//! ```text
//! cargo run --release -p mlx5-vfio --example vfio_rc_ping -- 0000:03:00.0 0000:03:00.1 [COUNT]
//! cargo run --release -p mlx5-vfio --example vfio_rc_ping -- 0000:03:00.0 [COUNT]   # loopback
//! ```
//!
//! One address: both QPs on that function's port, in loopback. Binding a function to vfio-pci:
//! `echo vfio-pci > /sys/bus/pci/devices/BDF/driver_override` and a `drivers_probe` write, or
//! `driverctl set-override BDF vfio-pci`; `mlx5ctl list` shows what is ready. The simulated
//! ConnectX-5 runs it the same way when QEMU hands it to a guest (tests/linux-on-sim).

use std::process::ExitCode;
use std::time::{Duration, Instant};

use mlx5::cq::Cq;
use mlx5::qp::{ConnectOpts, Qp, QpCap, QpInitAttr, QpType, RecvWr, SendWr, Sge};
use mlx5::{Device, DeviceConfig, MemoryRegion, MrAccess, Platform, Wc, WcStatus};
use mlx5_vfio::{open_device, VfioOptions, VfioPlatform};

type Dev = Device<VfioPlatform>;

/// Where, in each side's buffer, messages are sent from and received into.
const SEND_AT: usize = 0;
const RECV_AT: usize = 2048;
const MSG_MAX: u32 = 256;

type Res<T> = Result<T, String>;

fn e(what: &str) -> impl Fn(mlx5::Error) -> String + '_ {
    move |err| format!("{what}: {err}")
}

/// One side: its device, CQ, buffer and QP.
struct Side<'d> {
    dev: &'d Dev,
    cq: &'d Cq<'d, VfioPlatform>,
    mr: &'d MemoryRegion<'d, VfioPlatform>,
    qp: Qp<'d, VfioPlatform>,
}

/// A CQ and a registered buffer on `dev`.
fn resources(dev: &Dev) -> Res<(Cq<'_, VfioPlatform>, MemoryRegion<'_, VfioPlatform>)> {
    let pd = dev.pd();
    let cq = dev.create_cq(16).map_err(e("create_cq"))?;
    let mr = dev
        .alloc_mr(pd, 4096, MrAccess::LOCAL)
        .map_err(e("alloc_mr"))?;
    Ok((cq, mr))
}

impl<'d> Side<'d> {
    fn new(
        dev: &'d Dev,
        cq: &'d Cq<'d, VfioPlatform>,
        mr: &'d MemoryRegion<'d, VfioPlatform>,
    ) -> Res<Self> {
        let pd = dev.pd();
        let cap = QpCap {
            max_send_wr: 4,
            max_recv_wr: 4,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        let qp = dev
            .create_qp(pd, &QpInitAttr::new(QpType::Rc, cq, cq, cap))
            .map_err(e("create_qp"))?;
        Ok(Side { dev, cq, mr, qp })
    }

    fn post_recv(&mut self, id: u64) -> Res<()> {
        let sge = [Sge {
            addr: self.mr.addr() + RECV_AT as u64,
            length: MSG_MAX,
            lkey: self.mr.lkey(),
        }];
        self.qp
            .post_recv(&[RecvWr {
                wr_id: id,
                sg_list: &sge,
            }])
            .map_err(e("post_recv"))
    }

    fn send(&mut self, id: u64, text: &str) -> Res<()> {
        self.mr
            .write(SEND_AT, text.as_bytes())
            .map_err(|err| format!("writing the message: {err}"))?;
        let sge = [Sge {
            addr: self.mr.addr() + SEND_AT as u64,
            length: text.len() as u32,
            lkey: self.mr.lkey(),
        }];
        self.qp
            .post_send(&[SendWr::send(id, &sge)])
            .map_err(e("post_send"))
    }

    /// The next completion, within a second; an error unless it succeeded.
    fn wait(&self) -> Res<Wc> {
        let mut wc = [Wc::default(); 1];
        let deadline = Instant::now() + Duration::from_secs(1);
        loop {
            if self.cq.poll(&mut wc).map_err(e("poll"))? == 1 {
                if wc[0].status != WcStatus::Success {
                    return Err(format!("completion failed: {:?}", wc[0]));
                }
                return Ok(wc[0]);
            }
            if Instant::now() > deadline {
                return Err("no completion within 1 s".into());
            }
            self.dev.platform().relax();
        }
    }

    /// The message a receive completion delivered.
    fn received(&self, wc: &Wc) -> Res<String> {
        let mut b = vec![0u8; (wc.byte_len as usize).min(MSG_MAX as usize)];
        self.mr
            .read(RECV_AT, &mut b)
            .map_err(|err| format!("reading the message: {err}"))?;
        Ok(String::from_utf8_lossy(&b).into_owned())
    }
}

/// `count` round trips A → B → A; returns each one's time.
fn ping(a: &mut Side<'_>, b: &mut Side<'_>, count: u64) -> Res<Vec<Duration>> {
    let (ea, eb) = (a.qp.endpoint(), b.qp.endpoint());
    a.qp.connect(&eb, &ConnectOpts::default())
        .map_err(e("connect A"))?;
    b.qp.connect(&ea, &ConnectOpts::default())
        .map_err(e("connect B"))?;
    println!("QP {:#x} connected to QP {:#x}", a.qp.qpn(), b.qp.qpn());
    let mut rtt = Vec::with_capacity(count as usize);
    for n in 0..count {
        b.post_recv(n)?;
        a.post_recv(n)?;
        let t = Instant::now();
        a.send(n, &format!("ping {n}"))?;
        let got = b.wait()?;
        if b.received(&got)? != format!("ping {n}") {
            return Err(format!("B received {:?}", b.received(&got)?));
        }
        b.send(n, &format!("pong {n}"))?;
        // A: its SEND's completion and B's answer, in either order.
        let (x, y) = (a.wait()?, a.wait()?);
        let answer = if x.opcode == mlx5::WcOpcode::Recv {
            x
        } else {
            y
        };
        if a.received(&answer)? != format!("pong {n}") {
            return Err(format!("A received {:?}", a.received(&answer)?));
        }
        rtt.push(t.elapsed());
        b.wait()?; // B's SEND
    }
    Ok(rtt)
}

fn run(args: &[String]) -> Res<()> {
    let (bdfs, count): (Vec<&String>, u64) = match args {
        [] => return Err("usage: vfio_rc_ping BDF [BDF] [COUNT]".into()),
        [a] => (vec![a], 1000),
        [a, n] if n.parse::<u64>().is_ok() => (vec![a], n.parse().unwrap_or(1000)),
        [a, b] => (vec![a, b], 1000),
        [a, b, n] => (vec![a, b], n.parse().map_err(|_| format!("COUNT {n}"))?),
        _ => return Err("usage: vfio_rc_ping BDF [BDF] [COUNT]".into()),
    };
    if count == 0 {
        return Err("COUNT 0: nothing to time".into());
    }
    let open = |bdf: &str| {
        let t = Instant::now();
        let dev = open_device(bdf, &VfioOptions::default(), DeviceConfig::default())
            .map_err(|err| format!("{bdf}: {err}"))?;
        println!(
            "{bdf}: up in {:.1} ms, firmware {}",
            t.elapsed().as_secs_f64() * 1e3,
            dev.fw_version()
        );
        Ok::<_, String>(dev)
    };
    let da = open(bdfs[0])?;
    let db = match bdfs.get(1) {
        Some(b) => Some(open(b)?),
        None => None,
    };
    let r = (|| {
        let db = db.as_ref().unwrap_or(&da);
        let (cqa, mra) = resources(&da)?;
        let (cqb, mrb) = resources(db)?;
        let mut a = Side::new(&da, &cqa, &mra)?;
        let mut b = Side::new(db, &cqb, &mrb)?;
        let mut rtt = ping(&mut a, &mut b, count)?;
        rtt.sort();
        let pct = |p: f64| rtt[((rtt.len() - 1) as f64 * p) as usize].as_secs_f64() * 1e6;
        println!(
            "vfio_rc_ping: {count} round trips, every message checked: p50 {:.1} us, p99 {:.1} us",
            pct(0.5),
            pct(0.99)
        );
        Ok(())
    })();
    // Everything the sides made is gone (dropped above); the devices close last.
    if let Some(db) = db {
        db.close().map_err(e("closing B"))?;
    }
    da.close().map_err(e("closing A"))?;
    r
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("vfio_rc_ping: {err}");
            ExitCode::FAILURE
        }
    }
}
