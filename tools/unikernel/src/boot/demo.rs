//! `mlx5ctl demo` inside the unikernel: two NICs, one fabric, QPs of each type connected and
//! every byte checked — RC SEND/RECV, RDMA WRITE, READ, atomics and an SRQ; UC SEND/RECV,
//! WRITE and WRITE with immediate; UD addressed SENDs with GRH and source QP, a wrong Q_Key
//! dropped — then a 4 KiB RDMA WRITE rate and a SEND round trip (64 bytes inline: BlueFlame
//! through the write-combining alias). Every wait sleeps on the NIC's MSI-X interrupt.

use core::fmt;

use mlx5::mr::MrAccess;
use mlx5::qp::UdAddr;
use mlx5::qp::{ConnectOpts, Mtu, Payload, QpCap, QpInitAttr, QpType, RecvWr, SendOp, SendWr, Sge};
use mlx5::srq::SrqAttr;
use mlx5::{Device, Platform, Wc, WcStatus};

use super::events::{wait_cq, WaitError};
use super::verdict::check;

/// The memory region of each side.
const MR_LEN: usize = 1 << 20;
/// The GRH in front of every UD receive.
const GRH: u32 = 40;

/// What went wrong, and in which step.
#[derive(Debug)]
pub struct Failed {
    /// The step.
    pub step: &'static str,
    /// Why.
    pub why: Why,
}

/// Why a step failed.
#[derive(Debug)]
pub enum Why {
    /// The driver refused or failed.
    Driver(mlx5::Error),
    /// A wait ended without the completions.
    Wait(WaitError),
}

impl fmt::Display for Failed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.why {
            Why::Driver(e) => write!(f, "{}: {e}", self.step),
            Why::Wait(e) => write!(f, "{}: {e}", self.step),
        }
    }
}

trait Step<T> {
    fn at(self, step: &'static str) -> Result<T, Failed>;
}

impl<T> Step<T> for Result<T, mlx5::Error> {
    fn at(self, step: &'static str) -> Result<T, Failed> {
        self.map_err(|e| Failed {
            step,
            why: Why::Driver(e),
        })
    }
}

impl<T> Step<T> for Result<T, WaitError> {
    fn at(self, step: &'static str) -> Result<T, Failed> {
        self.map_err(|e| Failed {
            step,
            why: Why::Wait(e),
        })
    }
}

/// One NIC: its device and the interrupt vector its EQs signal.
#[derive(Debug)]
pub struct Nic<'a, P: Platform> {
    /// The device.
    pub dev: &'a Device<P>,
    /// Its MSI-X vector 0's IDT vector.
    pub vector: u8,
}

/// Figures of the run, for the report.
#[derive(Debug, Default, Clone, Copy)]
pub struct Figures {
    /// TSC ticks from posting the first SEND to its completion at the receiver.
    pub first_completion_ticks: u64,
    /// The TSC when that first completion arrived.
    pub first_completion_at: u64,
    /// 4 KiB RDMA WRITEs completed, and the TSC ticks they took.
    pub writes: (u64, u64),
    /// SEND round trips, and the median's ticks.
    pub round_trips: (u32, u64),
}

fn pattern_byte(i: usize, seed: u8) -> u8 {
    (i as u8).wrapping_mul(13).wrapping_add(seed)
}

/// Fills `len` bytes of `mr` at `off` with the pattern of `seed`.
fn fill<P: Platform>(
    mr: &mlx5::MemoryRegion<'_, P>,
    off: usize,
    len: usize,
    seed: u8,
) -> mlx5::Result<()> {
    let mut buf = [0u8; 4096];
    let mut done = 0;
    while done < len {
        let n = (len - done).min(buf.len());
        for (k, b) in buf[..n].iter_mut().enumerate() {
            *b = pattern_byte(done + k, seed);
        }
        mr.write(off + done, &buf[..n])?;
        done += n;
    }
    Ok(())
}

/// Whether `len` bytes of `mr` at `off` hold the pattern of `seed`.
fn holds<P: Platform>(
    mr: &mlx5::MemoryRegion<'_, P>,
    off: usize,
    len: usize,
    seed: u8,
) -> mlx5::Result<bool> {
    let mut buf = [0u8; 4096];
    let mut done = 0;
    while done < len {
        let n = (len - done).min(buf.len());
        mr.read(off + done, &mut buf[..n])?;
        if buf[..n]
            .iter()
            .enumerate()
            .any(|(k, &b)| b != pattern_byte(done + k, seed))
        {
            return Ok(false);
        }
        done += n;
    }
    Ok(true)
}

struct Side<'a, P: Platform> {
    nic: &'a Nic<'a, P>,
    cq: &'a mlx5::cq::Cq<'a, P>,
    mr: &'a mlx5::MemoryRegion<'a, P>,
    qp: mlx5::qp::Qp<'a, P>,
}

impl<P: Platform> Side<'_, P> {
    fn sge(&self, off: u64, len: u32) -> Sge {
        Sge {
            addr: self.mr.addr() + off,
            length: len,
            lkey: self.mr.lkey(),
        }
    }
    fn wait(&self, out: &mut [Wc], step: &'static str) -> Result<(), Failed> {
        wait_cq(self.nic.dev, self.cq, self.nic.vector, out).at(step)
    }
    fn wait1(&self, step: &'static str) -> Result<Wc, Failed> {
        let mut w = [Wc::default()];
        self.wait(&mut w, step)?;
        Ok(w[0])
    }
    fn recv(&mut self, wr_id: u64, sge: Sge, step: &'static str) -> Result<(), Failed> {
        self.qp
            .post_recv(&[RecvWr {
                wr_id,
                sg_list: &[sge],
            }])
            .at(step)
    }
}

fn cap() -> QpCap {
    QpCap {
        max_send_wr: 256,
        max_recv_wr: 256,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 64,
    }
}

/// Runs every transport between `a` and `b`; records each check; returns the figures.
pub fn run<P: Platform>(
    a: &Nic<'_, P>,
    b: &Nic<'_, P>,
    writes: u64,
    pings: u32,
) -> Result<Figures, Failed> {
    let mut fig = Figures::default();
    let (pda, pdb) = (a.dev.pd(), b.dev.pd());
    let (cqa, cqb) = (
        a.dev.create_cq(1024).at("create_cq A")?,
        b.dev.create_cq(1024).at("create_cq B")?,
    );
    let mra = a
        .dev
        .alloc_mr(pda, MR_LEN, MrAccess::ALL)
        .at("alloc_mr A")?;
    let mrb = b
        .dev
        .alloc_mr(pdb, MR_LEN, MrAccess::ALL)
        .at("alloc_mr B")?;
    for t in [QpType::Rc, QpType::Uc, QpType::Ud] {
        let qa = a
            .dev
            .create_qp(pda, &QpInitAttr::new(t, &cqa, &cqa, cap()))
            .at("create_qp A")?;
        let qb = b
            .dev
            .create_qp(pdb, &QpInitAttr::new(t, &cqb, &cqb, cap()))
            .at("create_qp B")?;
        let mut x = Side {
            nic: a,
            cq: &cqa,
            mr: &mra,
            qp: qa,
        };
        let mut y = Side {
            nic: b,
            cq: &cqb,
            mr: &mrb,
            qp: qb,
        };
        let opts = ConnectOpts {
            mtu: Mtu::Mtu1024,
            ..ConnectOpts::default()
        };
        let (ex, ey) = (x.qp.endpoint(), y.qp.endpoint());
        x.qp.connect(&ey, &opts).at("connect A")?;
        y.qp.connect(&ex, &opts).at("connect B")?;
        match t {
            QpType::Rc => {
                rc(&mut x, &mut y, &mut fig)?;
                fig.writes = write_rate(&mut x, &mut y, writes)?;
                fig.round_trips = round_trips(&mut x, &mut y, pings, None)?;
            }
            QpType::Uc => uc(&mut x, &mut y)?,
            _ => ud(&mut x, &mut y, &opts)?,
        }
    }
    srq(a, b, pda, pdb, &cqa, &cqb, &mra, &mrb)?;
    Ok(fig)
}

fn rc<P: Platform>(
    x: &mut Side<'_, P>,
    y: &mut Side<'_, P>,
    fig: &mut Figures,
) -> Result<(), Failed> {
    fill(x.mr, 0, 4000, 1).at("RC SEND: fill")?;
    y.recv(1, y.sge(0, 4096), "RC SEND: post_recv")?;
    let t0 = crate::metal::x86::rdtsc();
    x.qp.post_send(&[SendWr::send(1, &[x.sge(0, 4000)])])
        .at("RC SEND: post_send")?;
    let w = y.wait1("RC SEND: receive")?;
    fig.first_completion_at = crate::metal::x86::rdtsc();
    fig.first_completion_ticks = fig.first_completion_at.wrapping_sub(t0);
    x.wait1("RC SEND: send completion")?;
    check(
        "rc-send-recv",
        w.byte_len == 4000 && holds(y.mr, 0, 4000, 1).at("RC SEND: read")?,
        format_args!("SEND/RECV of {} bytes, every byte verified", w.byte_len),
    );

    let (raddr, rkey) = (y.mr.addr(), y.mr.rkey());
    fill(x.mr, 0, 65536, 7).at("RC WRITE: fill")?;
    x.qp.post_send(&[SendWr {
        op: SendOp::Write {
            remote_addr: raddr + 65536,
            rkey,
        },
        ..SendWr::send(2, &[x.sge(0, 65536)])
    }])
    .at("RC WRITE: post_send")?;
    x.wait1("RC WRITE: completion")?;
    check(
        "rc-write",
        holds(y.mr, 65536, 65536, 7).at("RC WRITE: read")?,
        format_args!("RDMA WRITE of 65536 bytes, every byte verified"),
    );
    x.qp.post_send(&[SendWr {
        op: SendOp::Read {
            remote_addr: raddr + 65536,
            rkey,
        },
        ..SendWr::send(3, &[x.sge(131072, 65536)])
    }])
    .at("RC READ: post_send")?;
    x.wait1("RC READ: completion")?;
    check(
        "rc-read",
        holds(x.mr, 131072, 65536, 7).at("RC READ: read")?,
        format_args!("RDMA READ of 65536 bytes, every byte verified"),
    );

    // Atomics: remote memory and the returned value are in host order.
    let remote = 4096 * 100;
    y.mr.write(remote, &41u64.to_ne_bytes())
        .at("atomics: set")?;
    let res = [x.sge(8192, 8)];
    x.qp.post_send(&[SendWr {
        op: SendOp::FetchAdd {
            remote_addr: raddr + remote as u64,
            rkey,
            add: 1,
        },
        ..SendWr::send(4, &res)
    }])
    .at("FETCH_ADD: post_send")?;
    x.wait1("FETCH_ADD: completion")?;
    let mut old = [0u8; 8];
    x.mr.read(8192, &mut old).at("FETCH_ADD: read")?;
    x.qp.post_send(&[SendWr {
        op: SendOp::CmpSwap {
            remote_addr: raddr + remote as u64,
            rkey,
            compare: 42,
            swap: 1000,
        },
        ..SendWr::send(5, &res)
    }])
    .at("CMP_SWAP: post_send")?;
    x.wait1("CMP_SWAP: completion")?;
    let mut now = [0u8; 8];
    y.mr.read(remote, &mut now).at("CMP_SWAP: read")?;
    let (old, now) = (u64::from_ne_bytes(old), u64::from_ne_bytes(now));
    check(
        "rc-atomics",
        old == 41 && now == 1000,
        format_args!("FETCH_ADD returned {old} (41), CMP_SWAP(42 -> 1000) left {now} (1000)"),
    );
    Ok(())
}

fn uc<P: Platform>(x: &mut Side<'_, P>, y: &mut Side<'_, P>) -> Result<(), Failed> {
    fill(x.mr, 0, 3000, 21).at("UC SEND: fill")?;
    y.recv(1, y.sge(0, 4096), "UC SEND: post_recv")?;
    x.qp.post_send(&[SendWr::send(1, &[x.sge(0, 3000)])])
        .at("UC SEND: post_send")?;
    let w = y.wait1("UC SEND: receive")?;
    x.wait1("UC SEND: send completion")?;
    check(
        "uc-send-recv",
        w.byte_len == 3000 && holds(y.mr, 0, 3000, 21).at("UC SEND: read")?,
        format_args!("SEND/RECV of {} bytes, every byte verified", w.byte_len),
    );
    let (raddr, rkey) = (y.mr.addr(), y.mr.rkey());
    fill(x.mr, 0, 32768, 22).at("UC WRITE: fill")?;
    y.recv(2, y.sge(0, 64), "UC WRITE_IMM: post_recv")?;
    x.qp.post_send(&[
        SendWr {
            op: SendOp::Write {
                remote_addr: raddr + 65536,
                rkey,
            },
            signaled: false,
            ..SendWr::send(2, &[x.sge(0, 16384)])
        },
        SendWr {
            op: SendOp::WriteImm {
                remote_addr: raddr + 65536 + 16384,
                rkey,
                imm: 0x1a57,
            },
            ..SendWr::send(3, &[x.sge(16384, 16384)])
        },
    ])
    .at("UC WRITE: post_send")?;
    x.wait1("UC WRITE: completion")?;
    let w = y.wait1("UC WRITE_IMM: receive")?;
    check(
        "uc-write-imm",
        w.imm_data == Some(0x1a57) && holds(y.mr, 65536, 32768, 22).at("UC WRITE: read")?,
        format_args!(
            "RDMA WRITE + WRITE with immediate {:#x} (0x1a57), 32768 bytes verified",
            w.imm_data.unwrap_or(0)
        ),
    );
    Ok(())
}

fn ud<P: Platform>(
    x: &mut Side<'_, P>,
    y: &mut Side<'_, P>,
    opts: &ConnectOpts,
) -> Result<(), Failed> {
    let (ex, ey) = (x.qp.endpoint(), y.qp.endpoint());
    let to_y = UdAddr {
        remote_qpn: ey.qpn,
        qkey: opts.qkey,
        dgid: ey.gid,
        dmac: ey.mac,
        hop_limit: opts.hop_limit,
        ..UdAddr::default()
    };
    let mtu = ud_mtu(x.nic.dev).min(ud_mtu(y.nic.dev));
    for (i, n) in [1, mtu / 2, mtu].into_iter().enumerate() {
        let seed = 3 + i as u8;
        fill(x.mr, 0, n as usize, seed).at("UD SEND: fill")?;
        y.recv(i as u64, y.sge(0, GRH + mtu), "UD SEND: post_recv")?;
        x.qp.post_send(&[SendWr {
            ud: Some(to_y),
            ..SendWr::send(i as u64, &[x.sge(0, n)])
        }])
        .at("UD SEND: post_send")?;
        x.wait1("UD SEND: send completion")?;
        let w = y.wait1("UD SEND: receive")?;
        let bytes = holds(y.mr, GRH as usize, n as usize, seed).at("UD SEND: read")?;
        check(
            if n == mtu { "ud-send-mtu" } else if n == 1 { "ud-send-1" } else { "ud-send-half-mtu" },
            bytes && (w.byte_len, w.src_qp, w.grh) == (n + GRH, ex.qpn, true),
            format_args!(
                "UD SEND of {n} bytes: payload {}, byte_len {} (want {}), src_qp {:#x} (want {:#x}), GRH {}",
                if bytes { "verified" } else { "MISMATCH" },
                w.byte_len,
                n + GRH,
                w.src_qp,
                ex.qpn,
                w.grh
            ),
        );
    }
    // A wrong Q_Key is dropped by the receiver: the next SEND takes the receive.
    fill(x.mr, 0, 256, 50).at("UD Q_Key: fill")?;
    fill(x.mr, 256, 256, 51).at("UD Q_Key: fill")?;
    y.recv(10, y.sge(0, GRH + mtu), "UD Q_Key: post_recv")?;
    let wrong = opts.qkey ^ 0xffff;
    x.qp.post_send(&[
        SendWr {
            ud: Some(UdAddr {
                qkey: wrong,
                ..to_y
            }),
            ..SendWr::send(10, &[x.sge(0, 256)])
        },
        SendWr {
            ud: Some(to_y),
            ..SendWr::send(11, &[x.sge(256, 256)])
        },
    ])
    .at("UD Q_Key: post_send")?;
    let mut two = [Wc::default(); 2];
    x.wait(&mut two, "UD Q_Key: send completions")?;
    let w = y.wait1("UD Q_Key: receive")?;
    check(
        "ud-wrong-qkey-dropped",
        w.byte_len == GRH + 256 && holds(y.mr, GRH as usize, 256, 51).at("UD Q_Key: read")?,
        format_args!("a SEND with Q_Key {wrong:#x} dropped: the next SEND took the receive"),
    );
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn srq<'a, P: Platform>(
    a: &'a Nic<'a, P>,
    b: &'a Nic<'a, P>,
    pda: &mlx5::pd::Pd,
    pdb: &mlx5::pd::Pd,
    cqa: &'a mlx5::cq::Cq<'a, P>,
    cqb: &'a mlx5::cq::Cq<'a, P>,
    mra: &'a mlx5::MemoryRegion<'a, P>,
    mrb: &'a mlx5::MemoryRegion<'a, P>,
) -> Result<(), Failed> {
    let s = b
        .dev
        .create_srq(
            pdb,
            &SrqAttr {
                max_wr: 64,
                max_sge: 1,
                srq_limit: 0,
            },
        )
        .at("create_srq")?;
    let qa = a
        .dev
        .create_qp(pda, &QpInitAttr::new(QpType::Rc, cqa, cqa, cap()))
        .at("SRQ: create_qp A")?;
    let mut ib = QpInitAttr::new(QpType::Rc, cqb, cqb, cap());
    ib.srq = Some(&s);
    let qb = b.dev.create_qp(pdb, &ib).at("SRQ: create_qp B")?;
    let mut x = Side {
        nic: a,
        cq: cqa,
        mr: mra,
        qp: qa,
    };
    let y = Side {
        nic: b,
        cq: cqb,
        mr: mrb,
        qp: qb,
    };
    let opts = ConnectOpts::default();
    let (ex, ey) = (x.qp.endpoint(), y.qp.endpoint());
    x.qp.connect(&ey, &opts).at("SRQ: connect A")?;
    let mut yq = y.qp;
    yq.connect(&ex, &opts).at("SRQ: connect B")?;
    for i in 0..4u64 {
        s.post_recv(&[RecvWr {
            wr_id: 100 + i,
            sg_list: &[Sge {
                addr: mrb.addr() + 8192 * i,
                length: 8192,
                lkey: mrb.lkey(),
            }],
        }])
        .at("SRQ: post_recv")?;
    }
    for i in 0..4u64 {
        fill(mra, 8192 * i as usize, 5000, 60 + i as u8).at("SRQ: fill")?;
    }
    let sends: [Sge; 4] = core::array::from_fn(|i| Sge {
        addr: mra.addr() + 8192 * i as u64,
        length: 5000,
        lkey: mra.lkey(),
    });
    let wrs: [SendWr<'_>; 4] =
        core::array::from_fn(|i| SendWr::send(i as u64, core::slice::from_ref(&sends[i])));
    x.qp.post_send(&wrs).at("SRQ: post_send")?;
    let mut out = [Wc::default(); 4];
    wait_cq(b.dev, cqb, b.vector, &mut out).at("SRQ: receives")?;
    let mut sent = [Wc::default(); 4];
    wait_cq(a.dev, cqa, a.vector, &mut sent).at("SRQ: send completions")?;
    let mut good = true;
    for w in &out {
        let i = w.wr_id.wrapping_sub(100);
        good &= i < 4 && w.byte_len == 5000 && w.status == WcStatus::Success;
        good &= i < 4 && holds(mrb, 8192 * i as usize, 5000, 60 + i as u8).at("SRQ: read")?;
    }
    check(
        "rc-srq",
        good,
        format_args!("4 SENDs of 5000 bytes into an SRQ, every byte verified"),
    );
    drop(yq);
    Ok(())
}

/// 4 KiB RDMA WRITEs, up to 128 in flight, one signaled per 32: (messages, TSC ticks).
fn write_rate<P: Platform>(
    x: &mut Side<'_, P>,
    y: &mut Side<'_, P>,
    total: u64,
) -> Result<(u64, u64), Failed> {
    let total = total.div_ceil(32) * 32;
    let sge = [x.sge(0, 4096)];
    let (remote_addr, rkey) = (y.mr.addr(), y.mr.rkey());
    let batch: [SendWr<'_>; 32] = core::array::from_fn(|i| SendWr {
        op: SendOp::Write {
            remote_addr: remote_addr + 4096 * i as u64,
            rkey,
        },
        signaled: i == 31,
        ..SendWr::send(i as u64, &sge)
    });
    fill(x.mr, 0, 4096, 99).at("WRITE rate: fill")?;
    let (mut posted, mut done) = (0u64, 0u64);
    let t0 = crate::metal::x86::rdtsc();
    while done < total {
        while posted - done < 128 && posted < total {
            x.qp.post_send(&batch).at("WRITE rate: post_send")?;
            posted += 32;
        }
        let mut w = [Wc::default()];
        x.wait(&mut w, "WRITE rate: completion")?;
        done += 32;
    }
    let ticks = crate::metal::x86::rdtsc().wrapping_sub(t0);
    check(
        "rc-write-rate",
        holds(y.mr, 4096 * 31, 4096, 99).at("WRITE rate: read")?,
        format_args!("{total} RDMA WRITEs of 4096 bytes, the last one verified"),
    );
    Ok((total, ticks))
}

/// SEND ping-pong, 64 bytes inline: (round trips, median ticks).
fn round_trips<P: Platform>(
    x: &mut Side<'_, P>,
    y: &mut Side<'_, P>,
    n: u32,
    ud: Option<(UdAddr, UdAddr)>,
) -> Result<(u32, u64), Failed> {
    let ping = [0x5au8; 64];
    let mut lat = heapless::Vec::<u64, 1024>::new();
    let n = n.min(1024);
    for i in 0..n {
        let id = u64::from(i);
        y.recv(id, y.sge(512 * 1024, 64), "ping: post_recv B")?;
        x.recv(id, x.sge(512 * 1024, 64), "ping: post_recv A")?;
        let t = crate::metal::x86::rdtsc();
        x.qp.post_send(&[SendWr {
            payload: Payload::Inline(&ping),
            ud: ud.map(|u| u.0),
            ..SendWr::send(id, &[])
        }])
        .at("ping: post_send A")?;
        y.wait1("ping: receive B")?;
        y.qp.post_send(&[SendWr {
            payload: Payload::Inline(&ping),
            ud: ud.map(|u| u.1),
            ..SendWr::send(id, &[])
        }])
        .at("ping: post_send B")?;
        let mut two = [Wc::default(); 2];
        x.wait(&mut two, "pong: A's send and receive")?;
        y.wait1("pong: B's send")?;
        let _ = lat.push(crate::metal::x86::rdtsc().wrapping_sub(t));
    }
    lat.sort_unstable();
    let median = lat.get(lat.len() / 2).copied().unwrap_or(0);
    check(
        "rc-ping-pong",
        lat.len() as u32 == n && n > 0,
        format_args!("{n} SEND round trips of 64 bytes inline"),
    );
    Ok((n, median))
}

/// The UD MTU of a device: the largest IB MTU that fits the port's MTU less the RoCE headers.
fn ud_mtu<P: Platform>(d: &Device<P>) -> u32 {
    let room = u32::from(d.vport().mtu).saturating_sub(58);
    [4096, 2048, 1024, 512, 256]
        .into_iter()
        .find(|&m| m <= room)
        .unwrap_or(256)
}
