//! The verbs side of `mlx5ctl perftest`: the buffer, the QP, and each test's data path as
//! perftest runs it (see the module above for what is mirrored).

use std::time::{Duration, Instant};

use mlx5::mr::MrAccess;
use mlx5::qp::{
    Access, ConnectOpts, Mtu, QpCap, QpEndpoint, QpInitAttr, QpType, RecvWr, SendOp, SendWr, Sge,
};
use mlx5::{Device, Wc, WcStatus};
use mlx5_vfio::AnyPlatform;

use super::keys::Keys;
use super::oob::Settled;
use super::params::{Params, Verb};
use crate::link::{e, Host};

type Dev = Device<AnyPlatform>;
type Cq<'a> = mlx5::cq::Cq<'a, AnyPlatform>;
type Mr<'a> = mlx5::MemoryRegion<'a, AnyPlatform>;
type Qp<'a> = mlx5::qp::Qp<'a, AnyPlatform>;

/// The longest wait for the next completion or the peer's next write before a run gives up.
const QUIET: Duration = Duration::from_secs(30);

/// `INC(x)` of perftest: `x` rounded up to the cache line (at least one line).
fn inc(x: u64, line: u64) -> u64 {
    if x > line {
        x.div_ceil(line) * line
    } else {
        line
    }
}

/// Where work request `n` lands in either half: bandwidth tests step by the size rounded up to
/// the cache line, over as many slots as the cycle buffer holds, when the size is at most half
/// of it; latency tests (and larger sizes) use one place.
#[derive(Debug, Clone, Copy)]
struct Stepping {
    inc: u64,
    slots: u64,
}

impl Stepping {
    fn of(p: Params, s: Settled) -> Stepping {
        let (size, cb) = (u64::from(p.size), u64::from(s.cycle_buffer));
        if p.test.lat || size > cb / 2 {
            return Stepping { inc: 0, slots: 1 };
        }
        let inc = inc(size, u64::from(s.cache_line));
        Stepping {
            inc,
            slots: (cb / inc).max(1),
        }
    }

    fn offset(self, n: u64) -> u64 {
        self.inc * (n % self.slots)
    }
}

/// The buffer's objects, which the QP borrows.
pub(super) struct Bufs<'a> {
    mr: Mr<'a>,
    scq: Cq<'a>,
    rcq: Cq<'a>,
    /// `max(size, cycle buffer)`: where the second half (the peer's target) starts.
    half: u64,
}

/// Allocates the buffer (two halves of `max(size, cycle buffer)` rounded to the cache line)
/// and the send and receive CQs.
pub(super) fn alloc(dev: &Dev, p: Params, s: Settled) -> Result<Bufs<'_>, String> {
    let half = u64::from(p.size.max(s.cycle_buffer));
    let len = inc(half, u64::from(s.cache_line)) * 2;
    let pd = dev.pd();
    let mr = dev
        .alloc_mr(
            pd,
            len as usize,
            MrAccess {
                local_write: true,
                remote_write: true,
                remote_read: true,
                remote_atomic: true,
                ..MrAccess::default()
            },
        )
        .map_err(e)?;
    let scq = dev.create_cq(p.tx_depth + 1).map_err(e)?;
    let rcq = dev.create_cq(p.rx_depth + 1).map_err(e)?;
    Ok(Bufs { mr, scq, rcq, half })
}

/// What a bandwidth run measured: peak and average MB/s (MB = 2^20) and million messages/s.
#[derive(Debug, Clone, Copy)]
pub(super) struct BwReport {
    pub(super) peak: f64,
    pub(super) avg: f64,
    pub(super) rate: f64,
}

/// The QP and the state of a run.
pub(super) struct Resources<'a> {
    dev: &'a Dev,
    b: &'a Bufs<'a>,
    qp: Qp<'a>,
    p: Params,
    s: Settled,
    gid_index: u8,
    gid: [u8; 16],
    psn: u32,
    /// Receives posted so far (perftest posts exactly `iters` in all).
    posted: u32,
}

impl<'a> Resources<'a> {
    pub(super) fn new(
        h: &Host<'a>,
        b: &'a Bufs<'a>,
        gid_index: Option<u8>,
        p: Params,
        s: Settled,
    ) -> Result<Self, String> {
        let (gid_index, gid) = h.gid(gid_index)?;
        let pd = h.dev.pd();
        let cap = QpCap {
            max_send_wr: p.tx_depth,
            max_recv_wr: p.rx_depth,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        let qp = h
            .dev
            .create_qp(pd, &QpInitAttr::new(QpType::Rc, &b.scq, &b.rcq, cap))
            .map_err(e)?;
        // A random first PSN, as perftest draws one (lrand48 seeded by pid and time).
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let psn = (now ^ std::process::id().rotate_left(12)) & 0xff_ffff;
        Ok(Resources {
            dev: h.dev,
            b,
            qp,
            p,
            s,
            gid_index,
            gid,
            psn,
            posted: 0,
        })
    }

    /// The test QP (rdma_cm connects it with `-R`).
    pub(super) fn qp_mut(&mut self) -> &mut Qp<'a> {
        &mut self.qp
    }

    /// Our key message: the second half of the buffer is what the peer targets.
    pub(super) fn keys(&self) -> Keys {
        Keys {
            lid: 0,
            out: self.p.test.out(),
            qpn: self.qp.qpn(),
            psn: self.psn,
            rkey: self.b.mr.rkey(),
            vaddr: self.b.mr.addr() + self.b.half,
            gid: self.gid,
            srqn: 0,
        }
    }

    /// RESET → INIT → RTR → RTS with the peer's keys: the settled MTU, our OUT as responder
    /// depth and the peer's (at most ours) as initiator depth, timeout 14, 7 retries, 7 RNR
    /// retries, `min_rnr_timer` 12.
    pub(super) fn connect(&mut self, h: &Host<'_>, peer: &Keys) -> Result<(), String> {
        let mac = h.peer_mac(&peer.gid, &self.gid)?;
        let mtu = match self.s.mtu {
            1 => Mtu::Mtu256,
            2 => Mtu::Mtu512,
            3 => Mtu::Mtu1024,
            4 => Mtu::Mtu2048,
            _ => Mtu::Mtu4096,
        };
        let ours = self.p.test.out();
        // perftest's timeout 14, 7 retries, 7 RNR retries and min_rnr_timer 12 are the
        // defaults; the hop limit is the route's (64), as ib_core puts it on RoCE v2.
        let opts = ConnectOpts {
            mtu,
            gid_index: self.gid_index,
            access: Access {
                remote_write: true,
                remote_read: true,
                remote_atomic: true,
            },
            // One value for both depths in ConnectOpts: ours, which the peer's OUT must allow.
            max_rd_atomic: ours.min(peer.out.max(1)).max(1) as u8,
            sq_psn: self.psn,
            ..ConnectOpts::default()
        };
        let to = QpEndpoint {
            qpn: peer.qpn,
            gid: peer.gid,
            mac,
            psn: peer.psn,
        };
        self.qp.connect(&to, &opts).map_err(e)
    }

    /// perftest's address lines.
    pub(super) fn show(&self, peer: &Keys) {
        let line = |who: &str, k: &Keys| {
            println!(
                " {who} address: LID {:04x} QPN {:#06x} PSN {:#08x} OUT {:#04x} RKey {:#010x} VAddr {:#018x}",
                k.lid, k.qpn, k.psn, k.out, k.rkey, k.vaddr
            );
            println!(
                " GID: {}",
                k.gid
                    .iter()
                    .map(|b| format!("{b:02}"))
                    .collect::<Vec<_>>()
                    .join(":")
            );
        };
        line("local", &self.keys());
        line("remote", peer);
    }

    /// The offset of work request `n` in either half ([`Stepping`]).
    fn step(&self, n: u64) -> u64 {
        Stepping::of(self.p, self.s).offset(n)
    }

    fn sge(&self, off: u64, len: u32) -> Sge {
        Sge {
            addr: self.b.mr.addr() + off,
            length: len,
            lkey: self.b.mr.lkey(),
        }
    }

    /// One receive of `size` bytes into the second half (perftest's `send_qp_buff_size`).
    fn post_recv(&mut self) -> Result<(), String> {
        let off =
            inc(self.b.half, u64::from(self.s.cache_line)) + self.step(u64::from(self.posted));
        let sge = [self.sge(off, self.p.size)];
        self.qp
            .post_recv(&[RecvWr {
                wr_id: u64::from(self.posted),
                sg_list: &sge,
            }])
            .map_err(e)?;
        self.posted += 1;
        Ok(())
    }

    /// The receives posted before the last exchange: `rx_depth` on the receiving sides (the
    /// send_bw server, both sides of send_lat).
    pub(super) fn post_initial_receives(&mut self) -> Result<(), String> {
        if self.p.client && !self.p.test.lat {
            return Ok(());
        }
        for _ in 0..self.p.rx_depth.min(self.p.iters) {
            self.post_recv()?;
        }
        Ok(())
    }

    /// Polls `cq` for up to `wc.len()` completions, giving up after [`QUIET`] without one.
    fn poll(
        &self,
        cq: &Cq<'_>,
        wc: &mut [Wc],
        since: &mut Instant,
        what: &str,
    ) -> Result<usize, String> {
        let n = cq.poll(wc).map_err(e)?;
        for w in &wc[..n] {
            if w.status != WcStatus::Success {
                return Err(format!(
                    " Completion with error at {}: {what} wr_id {}: {:?}",
                    if self.p.client { "client" } else { "server" },
                    w.wr_id,
                    w.status
                ));
            }
        }
        if n > 0 {
            *since = Instant::now();
        } else if since.elapsed() > QUIET {
            return Err(format!("{what}: no completion for {} s", QUIET.as_secs()));
        } else {
            mlx5::Platform::relax(self.dev.platform());
        }
        Ok(n)
    }

    /// The work request `n` of the test's operation to the peer.
    fn op(&self, peer: &Keys) -> impl Fn(u64) -> SendOp {
        let (verb, rkey, base) = (self.p.test.verb, peer.rkey, peer.vaddr);
        let stepping = Stepping::of(self.p, self.s);
        move |n| {
            let remote_addr = base + stepping.offset(n);
            match verb {
                Verb::Write => SendOp::Write { remote_addr, rkey },
                Verb::Read => SendOp::Read { remote_addr, rkey },
                Verb::Atomic => SendOp::FetchAdd {
                    remote_addr,
                    rkey,
                    add: 1,
                },
                Verb::Send => SendOp::Send,
            }
        }
    }

    /// The bandwidth client: `iters` operations of `size` bytes, at most `tx_depth`
    /// outstanding, one signaled per `cq_mod` and the last.
    pub(super) fn bw_client(&mut self, peer: &Keys) -> Result<BwReport, String> {
        let p = self.p;
        let op = self.op(peer);
        let (iters, m) = (u64::from(p.iters), u64::from(p.cq_mod));
        let (mut posted, mut done) = (0u64, 0u64);
        let mut wc = [Wc::default(); 16];
        // When each WR was posted, and when each signaled one completed (perftest's tposted /
        // tcompleted), for the peak.
        let mut t_posted = Vec::with_capacity(p.iters as usize);
        let mut t_done: Vec<(u64, Instant)> = Vec::with_capacity((p.iters / p.cq_mod + 1) as usize);
        let start = Instant::now();
        let mut quiet = Instant::now();
        while done < iters {
            while posted < iters && posted - done < u64::from(p.tx_depth) {
                let sge = [self.sge(self.step(posted), p.size)];
                let wr = SendWr {
                    op: op(posted),
                    signaled: posted % m == m - 1 || posted == iters - 1,
                    ..SendWr::send(posted, &sge)
                };
                t_posted.push(Instant::now());
                self.qp.post_send(&[wr]).map_err(e)?;
                posted += 1;
            }
            let n = self.poll(&self.b.scq, &mut wc, &mut quiet, "send")?;
            let now = Instant::now();
            for w in &wc[..n] {
                done = done.max(w.wr_id + 1);
                t_done.push((w.wr_id, now));
            }
        }
        let secs = start.elapsed().as_secs_f64();
        let mb = f64::from(1u32 << 20);
        let avg = p.size as f64 * iters as f64 / secs / mb;
        Ok(BwReport {
            peak: f64::from(p.size) / peak_delta(&t_posted, &t_done).max(1e-12) / mb,
            avg,
            rate: iters as f64 / secs / 1e6,
        })
    }

    /// The send_bw server: `iters` receives, re-posted while fewer than `iters` were posted.
    pub(super) fn send_bw_server(&mut self) -> Result<BwReport, String> {
        let iters = self.p.iters;
        let mut got = 0u32;
        let mut wc = [Wc::default(); 16];
        let mut quiet = Instant::now();
        let mut start = None;
        while got < iters {
            let n = self.poll(&self.b.rcq, &mut wc, &mut quiet, "receive")?;
            if n > 0 && start.is_none() {
                start = Some(Instant::now());
            }
            for _ in 0..n {
                got += 1;
                if self.posted < iters {
                    self.post_recv()?;
                }
            }
        }
        let secs = start.map_or(0.0, |s| s.elapsed().as_secs_f64()).max(1e-9);
        let avg = self.p.size as f64 * f64::from(iters) / secs / f64::from(1u32 << 20);
        Ok(BwReport {
            peak: 0.0,
            avg,
            rate: f64::from(iters) / secs / 1e6,
        })
    }

    /// The read / atomic latency client: one operation at a time to the peer's first byte.
    pub(super) fn lat_client(&mut self, peer: &Keys) -> Result<Vec<f64>, String> {
        let op = self.op(peer);
        let sge = [self.sge(0, self.p.size)];
        let mut wc = [Wc::default(); 1];
        let mut quiet = Instant::now();
        let mut lat = Vec::with_capacity(self.p.iters as usize);
        for i in 0..u64::from(self.p.iters) {
            let t = Instant::now();
            self.qp
                .post_send(&[SendWr {
                    op: op(0),
                    ..SendWr::send(i, &sge)
                }])
                .map_err(e)?;
            while self.poll(&self.b.scq, &mut wc, &mut quiet, "send")? == 0 {}
            lat.push(t.elapsed().as_secs_f64() * 1e6);
        }
        Ok(lat)
    }

    /// The write_lat ping-pong: each side waits for the peer's count in the last byte of its
    /// second half (the server skips the first wait), then writes its own count into the last
    /// byte of `size` and WRITEs them to the peer. Half round trips, in µs.
    pub(super) fn write_lat(&mut self, peer: &Keys) -> Result<Vec<f64>, String> {
        let (iters, size) = (self.p.iters, self.p.size);
        let op = self.op(peer);
        let sge = [self.sge(0, size)];
        let poll_at = self.b.half as usize + size as usize - 1;
        let (mut scnt, mut rcnt) = (0u32, 0u32);
        let mut wc = [Wc::default(); 1];
        let mut quiet;
        let mut posted_at = Vec::with_capacity(iters as usize);
        while scnt < iters || rcnt < iters {
            // The server writes first: it skips the wait before its first write.
            if rcnt < iters && (self.p.client || scnt >= 1) {
                rcnt += 1;
                let since = Instant::now();
                let mut b = [0u8; 1];
                loop {
                    self.b.mr.read(poll_at, &mut b).map_err(e)?;
                    if b[0] == rcnt as u8 {
                        break;
                    }
                    if since.elapsed() > QUIET {
                        return Err(format!(
                            "write_lat: the peer's write {rcnt} did not come in {} s",
                            QUIET.as_secs()
                        ));
                    }
                    mlx5::Platform::relax(self.dev.platform());
                }
            }
            if scnt < iters {
                scnt += 1;
                posted_at.push(Instant::now());
                self.b
                    .mr
                    .write(size as usize - 1, &[scnt as u8])
                    .map_err(e)?;
                self.qp
                    .post_send(&[SendWr {
                        op: op(0),
                        ..SendWr::send(u64::from(scnt), &sge)
                    }])
                    .map_err(e)?;
                quiet = Instant::now();
                while self.poll(&self.b.scq, &mut wc, &mut quiet, "send")? == 0 {}
            }
        }
        Ok(posted_at
            .windows(2)
            .map(|w| (w[1] - w[0]).as_secs_f64() * 1e6 / 2.0)
            .collect())
    }

    /// The send_lat ping-pong: the client sends first; each side waits for a receive (the
    /// client skips the first wait), re-posts while fewer than `iters` were posted, then sends
    /// and waits for the send's completion. Half round trips, in µs.
    pub(super) fn send_lat(&mut self, _peer: &Keys) -> Result<Vec<f64>, String> {
        let (iters, size) = (self.p.iters, self.p.size);
        let sge = [self.sge(0, size)];
        let (mut scnt, mut rcnt) = (0u32, 0u32);
        let mut wc = [Wc::default(); 1];
        let mut quiet = Instant::now();
        let mut posted_at = Vec::with_capacity(iters as usize);
        while scnt < iters || rcnt < iters {
            // The client sends first: it skips the wait before its first send.
            if rcnt < iters && (!self.p.client || scnt >= 1) {
                while self.poll(&self.b.rcq, &mut wc, &mut quiet, "receive")? == 0 {}
                rcnt += 1;
                if self.posted < iters {
                    self.post_recv()?;
                }
            }
            if scnt < iters {
                scnt += 1;
                posted_at.push(Instant::now());
                self.qp
                    .post_send(&[SendWr::send(u64::from(scnt), &sge)])
                    .map_err(e)?;
                while self.poll(&self.b.scq, &mut wc, &mut quiet, "send")? == 0 {}
            }
        }
        Ok(posted_at
            .windows(2)
            .map(|w| (w[1] - w[0]).as_secs_f64() * 1e6 / 2.0)
            .collect())
    }

    /// Destroys the QP (the buffer goes with its owner).
    pub(super) fn close(self) {
        if let Err(x) = self.qp.destroy() {
            log::warn!("perftest: destroy_qp: {x}");
        }
    }
}

/// perftest's peak: the shortest time per message over any run of consecutive WRs from one
/// posted (`i`) to a signaled completion (`j >= i`): `min (done[j] - posted[i]) / (j - i + 1)`,
/// in seconds.
fn peak_delta(posted: &[Instant], done: &[(u64, Instant)]) -> f64 {
    let mut best = f64::INFINITY;
    for (i, tp) in posted.iter().enumerate() {
        for &(j, tc) in done {
            if let Some(span) = j.checked_sub(i as u64) {
                let t = tc.saturating_duration_since(*tp).as_secs_f64() / (span + 1) as f64;
                best = best.min(t);
            }
        }
    }
    best
}

const DASHES: &str =
    "---------------------------------------------------------------------------------------";

/// perftest's bandwidth result lines.
pub(super) fn print_bw(p: Params, r: BwReport) {
    println!("{DASHES}");
    println!("                    {}", p.test.title());
    println!(" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]");
    println!(
        " {:<10} {:<10}       {:.2}              {:.2}              {:.6}",
        p.size, p.iters, r.peak, r.avg, r.rate
    );
    println!("{DASHES}");
}

/// perftest's latency result lines (µs).
pub(super) fn print_lat(p: Params, lat: &[f64]) {
    let mut v = lat.to_vec();
    v.sort_by(f64::total_cmp);
    let at = |q: f64| {
        v.get(((v.len() as f64 * q) as usize).min(v.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0.0)
    };
    let avg = v.iter().sum::<f64>() / v.len().max(1) as f64;
    let sd = (v.iter().map(|x| (x - avg) * (x - avg)).sum::<f64>() / v.len().max(1) as f64).sqrt();
    println!("{DASHES}");
    println!("                    {}", p.test.title());
    println!(" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]");
    println!(
        " {:<7} {:<10}       {:.2}           {:.2}        {:.2}              {:.2}             {:.2}            {:.2}                    {:.2}",
        p.size, p.iters, at(0.0), at(1.0), at(0.5), avg, sd, at(0.99), at(0.999)
    );
    println!("{DASHES}");
}

#[cfg(test)]
mod tests {
    use super::super::params::{Params, Test, Verb};
    use super::{Settled, Stepping};

    fn params(verb: Verb, lat: bool, size: u32) -> Params {
        Params {
            test: Test { verb, lat },
            client: true,
            size,
            iters: 1000,
            tx_depth: 128,
            rx_depth: 1,
            cq_mod: 100,
        }
    }

    #[test]
    fn stepping_covers_the_settled_cycle_buffer() {
        let s = |cb, cl| Settled {
            cycle_buffer: cb,
            cache_line: cl,
            mtu: 3,
        };
        // Atomics: 64 slots of one cache line in 4 KiB; 128 when a peer's pages are 8 KiB.
        let a = Stepping::of(params(Verb::Atomic, false, 8), s(4096, 64));
        assert_eq!((a.offset(1), a.offset(63), a.offset(64)), (64, 63 * 64, 0));
        let a = Stepping::of(params(Verb::Atomic, false, 8), s(8192, 64));
        assert_eq!((a.offset(64), a.offset(128)), (64 * 64, 0));
        // 1 KiB writes: four places; above half the cycle buffer, and latency tests: one.
        let w = Stepping::of(params(Verb::Write, false, 1024), s(4096, 64));
        assert_eq!((w.offset(3), w.offset(4)), (3072, 0));
        let big = Stepping::of(params(Verb::Write, false, 4096), s(4096, 64));
        assert_eq!(big.offset(5), 0);
        let lat = Stepping::of(params(Verb::Write, true, 2), s(4096, 64));
        assert_eq!(lat.offset(7), 0);
    }
}
