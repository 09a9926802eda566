//! One end of the demo (a device, its CQ, memory region and QP) and what every transport's demo
//! does with two of them: connect, check, the WRITE throughput run and the SEND ping-pong.

use std::time::Instant;

use mlx5::mr::MrAccess;
use mlx5::qp::UdAddr;
use mlx5::qp::{ConnectOpts, QpCap, QpInitAttr, QpType, RecvWr, SendOp, SendWr, Sge};
use mlx5::{Device, Wc, WcStatus};
use mlx5_vfio::AnyPlatform;

use super::Args;

pub(super) type Dev = Device<AnyPlatform>;
pub(super) type Cq<'a> = mlx5::cq::Cq<'a, AnyPlatform>;
pub(super) type Mr<'a> = mlx5::MemoryRegion<'a, AnyPlatform>;
pub(super) type Qp<'a> = mlx5::qp::Qp<'a, AnyPlatform>;

/// The memory region of each side.
pub(super) const MR_LEN: usize = 1 << 20;
/// Where the latency run's receives land.
pub(super) const PING_AT: u64 = 512 * 1024;
/// The GRH in front of every UD receive.
pub(super) const GRH: u32 = 40;

/// One end of the demo: a device, its CQ (sends and receives), its memory region and its QP.
pub(super) struct Side<'a> {
    pub(super) dev: &'a Dev,
    pub(super) cq: &'a Cq<'a>,
    pub(super) mr: &'a Mr<'a>,
    pub(super) qp: Qp<'a>,
}

impl Side<'_> {
    /// `len` bytes at `off` of the memory region.
    pub(super) fn sge(&self, off: u64, len: u32) -> Sge {
        Sge {
            addr: self.mr.addr() + off,
            length: len,
            lkey: self.mr.lkey(),
        }
    }

    /// Waits for `n` successful completions on the CQ.
    pub(super) fn wait(&self, n: usize) -> Result<Vec<Wc>, String> {
        wait(self.cq, self.dev, n)
    }

    /// Posts one receive of `sge`.
    pub(super) fn recv(&mut self, wr_id: u64, sge: &[Sge]) -> Result<(), String> {
        self.qp
            .post_recv(&[RecvWr {
                wr_id,
                sg_list: sge,
            }])
            .map_err(e)
    }

    /// Writes `data` at `off` of the memory region.
    pub(super) fn put(&self, off: u64, data: &[u8]) -> Result<(), String> {
        self.mr.write(off as usize, data).map_err(e)
    }

    /// `n` bytes at `off` of the memory region.
    pub(super) fn get(&self, off: u64, n: usize) -> Result<Vec<u8>, String> {
        let mut v = vec![0u8; n];
        self.mr.read(off as usize, &mut v).map_err(e)?;
        Ok(v)
    }
}

pub(super) fn e(x: impl std::fmt::Display) -> String {
    x.to_string()
}

pub(super) fn blank() -> Wc {
    Wc::default()
}

/// Waits for `n` completions on `cq` (bounded by a wall-clock deadline).
pub(super) fn wait(cq: &Cq<'_>, dev: &Dev, n: usize) -> Result<Vec<Wc>, String> {
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

pub(super) fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed))
        .collect()
}

pub(super) fn check(what: &str, ok: bool) -> Result<(), String> {
    if ok {
        println!("  {what:<44} ok, every byte verified");
        Ok(())
    } else {
        Err(format!("{what}: data mismatch"))
    }
}

/// A check that passed, and how.
pub(super) fn ok(what: &str, how: &str) {
    println!("  {what:<44} ok, {how}");
}

/// A check that is not about bytes: `ok, {how}`.
pub(super) fn check_that(
    what: &str,
    good: bool,
    how: &str,
    otherwise: String,
) -> Result<(), String> {
    if good {
        ok(what, how);
        Ok(())
    } else {
        Err(format!("{what}: {otherwise}"))
    }
}

/// A memory region of [`MR_LEN`] bytes with every access right.
pub(super) fn mr(d: &Dev) -> Result<Mr<'_>, String> {
    d.alloc_mr(d.pd(), MR_LEN, MrAccess::ALL).map_err(e)
}

/// A QP of type `t` on `dev`, in RESET, sending and receiving on `cq`.
pub(super) fn side<'a>(
    t: QpType,
    dev: &'a Dev,
    cq: &'a Cq<'a>,
    mr: &'a Mr<'a>,
) -> Result<Side<'a>, String> {
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
pub(super) fn connect(
    x: &mut Side<'_>,
    y: &mut Side<'_>,
    opts: &ConnectOpts,
) -> Result<(), String> {
    let (ex, ey) = (x.qp.endpoint(), y.qp.endpoint());
    x.qp.connect(&ey, opts).map_err(e)?;
    y.qp.connect(&ex, opts).map_err(e)
}

/// How the QPs were connected, for the first line of each demo.
pub(super) fn connected(x: &Side<'_>, y: &Side<'_>, how: &str) {
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
pub(super) fn write_throughput(
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
pub(super) fn ping_pong(
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
