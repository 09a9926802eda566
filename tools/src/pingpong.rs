//! `mlx5ctl pingpong`: rdma-core's `ibv_rc_pingpong` and `ibv_ud_pingpong` on this driver,
//! wire-compatible with them (issue #12 item 2): either side of either tool can be the real one.
//!
//! The out-of-band exchange is theirs byte for byte (rdma-core `libibverbs/examples`): over TCP
//! (port 18515), the client writes 52 bytes — `"%04x:%06x:%06x:%s"` of LID, QPN, PSN and the
//! GID as 32 hex digits in wire order, and a NUL — the server, having moved its QP to RTR and
//! RTS, answers with its own 52 bytes, and the client writes `"done"` and its NUL. Then the
//! client posts the first SEND and each side sends again once its last SEND and the peer's
//! SEND have both completed, `--iters` times; `--rx-depth` receives are kept posted. RC: access
//! 0, MTU 1024, timeout 14, 7 retries, 7 RNR retries, `min_rnr_timer` 12, one outstanding
//! READ/atomic. UD: Q_Key 0x11111111, receives of `--size` + 40 (the GRH). `-c` checks the
//! received bytes as `-c` does there (byte `i` of page `k` is `k`).
//!
//! The peer's MAC: `--peer-mac`; else from a link-local GID (its interface ID); else, on the
//! simulator's `--link`, resolved by ARP or neighbour discovery through the link.
//!
//! Where it runs: `--vfio BDF` on a real ConnectX; or the simulator (`--sim PROFILE`, its own
//! thread) with its port on a real link, `--link OURS:THEIRS` (QEMU's `-netdev dgram` unix
//! sockets: a guest with Linux's soft-RoCE, or another `mlx5ctl pingpong`), whose address
//! responder answers ARP and neighbour solicitations for the GIDs.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

use clap::Args as ClapArgs;
use mlx5::mr::MrAccess;
use mlx5::qp::UdAddr;
use mlx5::qp::{
    Access, ConnectOpts, Mtu, QpCap, QpEndpoint, QpInitAttr, QpType, RecvWr, SendWr, Sge,
};
use mlx5::{Wc, WcStatus};
use mlx5_vfio::AnyPlatform;

use crate::link::{connect_first_step, e, with_host, Host, LinkArgs};

/// `mlx5ctl pingpong` arguments (the pingpongs' own, where they have one).
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// The server to connect to; without it, wait for a client (as the pingpongs do).
    server: Option<String>,
    /// rc (ibv_rc_pingpong) or ud (ibv_ud_pingpong).
    #[arg(long = "type", value_name = "rc|ud", default_value = "rc")]
    kind: String,
    /// TCP port of the exchange.
    #[arg(short = 'p', long, default_value_t = 18515)]
    port: u16,
    /// Bytes per message.
    #[arg(short = 's', long, default_value_t = 4096)]
    size: u32,
    /// Exchanges.
    #[arg(short = 'n', long, default_value_t = 1000)]
    iters: u32,
    /// Receives kept posted.
    #[arg(short = 'r', long = "rx-depth", default_value_t = 500)]
    rx_depth: u32,
    /// Path MTU (256, 512, 1024, 2048, 4096).
    #[arg(short = 'm', long, default_value_t = 1024)]
    mtu: u32,
    /// The local GID index (default 0, the link-local GID; 1 with --ip).
    #[arg(short = 'g', long = "gid-idx")]
    gid_index: Option<u8>,
    /// Check the received bytes (the pingpongs' -c).
    #[arg(short = 'c', long)]
    chk: bool,
    /// Seconds the out-of-band exchange may wait for the peer's next message once connected
    /// (a peer that connects and says nothing ends the session instead of hanging it).
    #[arg(long = "exchange-timeout", value_name = "SECS", default_value_t = 60)]
    exchange_timeout: u64,
    #[command(flatten)]
    host: LinkArgs,
}

/// The pingpongs' `struct pingpong_dest`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Dest {
    lid: u16,
    qpn: u32,
    psn: u32,
    gid: [u8; 16],
}

/// Bytes of the exchange message, its NUL included.
const MSG: usize = 52;
/// The GRH in front of a UD receive.
const GRH: u32 = 40;
/// The pingpongs' UD Q_Key.
const QKEY: u32 = 0x1111_1111;
const RECV_WRID: u64 = 1;
const SEND_WRID: u64 = 2;

impl Dest {
    fn to_wire(self) -> [u8; MSG] {
        let gid: String = self.gid.iter().map(|b| format!("{b:02x}")).collect();
        let s = format!("{:04x}:{:06x}:{:06x}:{gid}", self.lid, self.qpn, self.psn);
        let mut m = [0u8; MSG];
        m[..s.len().min(MSG - 1)].copy_from_slice(&s.as_bytes()[..s.len().min(MSG - 1)]);
        m
    }

    fn from_wire(m: &[u8]) -> Result<Dest, String> {
        let s = std::str::from_utf8(m.split(|&b| b == 0).next().unwrap_or(&[]))
            .ok()
            .filter(|s| s.is_ascii())
            .ok_or_else(|| "the peer's address is not ASCII text".to_string())?;
        let f: Vec<&str> = s.split(':').collect();
        let bad = || format!("the peer's address {s:?} is not LID:QPN:PSN:GID");
        if f.len() != 4 || f[3].len() != 32 {
            return Err(bad());
        }
        // Digits only (from_str_radix would take a sign); ASCII, so byte slicing is safe.
        let hex = |x: &str| {
            if x.is_empty() || x.len() > 8 || !x.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(bad());
            }
            u32::from_str_radix(x, 16).map_err(|_| bad())
        };
        let mut gid = [0u8; 16];
        for (i, g) in gid.iter_mut().enumerate() {
            *g = hex(&f[3][2 * i..2 * i + 2])? as u8;
        }
        Ok(Dest {
            lid: hex(f[0])? as u16,
            qpn: hex(f[1])? & 0xff_ffff,
            psn: hex(f[2])? & 0xff_ffff,
            gid,
        })
    }
}

fn mtu(n: u32) -> Result<Mtu, String> {
    Ok(match n {
        256 => Mtu::Mtu256,
        512 => Mtu::Mtu512,
        1024 => Mtu::Mtu1024,
        2048 => Mtu::Mtu2048,
        4096 => Mtu::Mtu4096,
        _ => return Err(format!("--mtu {n}: 256, 512, 1024, 2048 or 4096")),
    })
}

/// Runs `mlx5ctl pingpong`.
pub fn run(a: &Args) -> Result<(), String> {
    let qp_type = match a.kind.as_str() {
        "rc" => QpType::Rc,
        "ud" => QpType::Ud,
        k => return Err(format!("--type {k}: rc or ud")),
    };
    mtu(a.mtu)?;
    with_host(&a.host, |h| session(a, qp_type, h))
}

/// One pingpong on `dev`.
fn session(a: &Args, qp_type: QpType, h: &Host<'_>) -> Result<(), String> {
    let dev = h.dev;
    let (gid_index, gid) = h.gid(a.gid_index)?;
    let ud = qp_type == QpType::Ud;
    let pd = dev.pd();
    let buf_len = (a.size + if ud { GRH } else { 0 }) as usize;
    let mr = dev
        .alloc_mr(
            pd,
            buf_len.max(1),
            MrAccess {
                local_write: true,
                ..MrAccess::default()
            },
        )
        .map_err(e)?;
    let cq = dev.create_cq(a.rx_depth + 1).map_err(e)?;
    let cap = QpCap {
        max_send_wr: 1,
        max_recv_wr: a.rx_depth,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let mut qp = dev
        .create_qp(pd, &QpInitAttr::new(qp_type, &cq, &cq, cap))
        .map_err(e)?;
    let recv_sge = [Sge {
        addr: mr.addr(),
        length: buf_len as u32,
        lkey: mr.lkey(),
    }];
    let post_recvs = |qp: &mut mlx5::qp::Qp<'_, AnyPlatform>, n: u32| -> Result<u32, String> {
        for _ in 0..n {
            qp.post_recv(&[RecvWr {
                wr_id: RECV_WRID,
                sg_list: &recv_sge,
            }])
            .map_err(e)?;
        }
        Ok(n)
    };
    // A random first PSN, as the pingpongs draw one (lrand48 seeded by pid and time).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let psn = (now ^ std::process::id().rotate_left(12)) & 0xff_ffff;
    let me = Dest {
        lid: 0,
        qpn: qp.qpn(),
        psn,
        gid,
    };
    println!("  local address:  {}", show(&me));
    // The exchange; the server connects before it answers.
    let peer_mac = |rem: &Dest| h.peer_mac(&rem.gid, &gid);
    // The pingpongs' attributes (RC: access 0, one READ/atomic each way; UD: Q_Key
    // 0x11111111); the hop limit a route gives, as Linux's ib_core substitutes it on RoCE v2.
    let opts = ConnectOpts {
        mtu: mtu(a.mtu)?,
        gid_index,
        access: Access::default(),
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        min_rnr_timer: 12,
        max_rd_atomic: 1,
        qkey: QKEY,
        hop_limit: 64,
        traffic_class: 0,
        sq_psn: psn,
    };
    let connect = |qp: &mut mlx5::qp::Qp<'_, AnyPlatform>, rem: &Dest, dmac: [u8; 6]| {
        let to = QpEndpoint {
            qpn: rem.qpn,
            gid: rem.gid,
            mac: dmac,
            psn: rem.psn,
        };
        qp.connect(&to, &opts).map_err(e)
    };
    // `rx_depth` receives, posted once connect moved the QP out of RESET: on the server before
    // it answers, on the client before its first SEND.
    let mut routs;
    let (rem, dmac) = match &a.server {
        Some(host) => {
            let mut m = [0u8; MSG];
            let patience = Duration::from_secs(a.exchange_timeout.max(1));
            let mut s = connect_first_step(host, a.port, &me.to_wire(), &mut m, patience)
                .map_err(|x| format!("the server's address: {x}"))?;
            let rem = Dest::from_wire(&m)?;
            s.write_all(b"done\0").map_err(e)?;
            let dmac = peer_mac(&rem)?;
            connect(&mut qp, &rem, dmac)?;
            routs = post_recvs(&mut qp, a.rx_depth)?;
            (rem, dmac)
        }
        None => {
            let l = TcpListener::bind(("0.0.0.0", a.port))
                .map_err(|x| format!("port {}: {x}", a.port))?;
            let (mut s, _) = l.accept().map_err(e)?;
            let patience = Some(Duration::from_secs(a.exchange_timeout.max(1)));
            s.set_read_timeout(patience).map_err(e)?;
            s.set_write_timeout(patience).map_err(e)?;
            let mut m = [0u8; MSG];
            s.read_exact(&mut m)
                .map_err(|x| format!("reading the client's address: {x}"))?;
            let rem = Dest::from_wire(&m)?;
            let dmac = peer_mac(&rem)?;
            connect(&mut qp, &rem, dmac)?;
            routs = post_recvs(&mut qp, a.rx_depth)?;
            s.write_all(&me.to_wire()).map_err(e)?;
            let mut done = [0u8; 5];
            s.read_exact(&mut done)
                .map_err(|x| format!("reading done: {x}"))?;
            (rem, dmac)
        }
    };
    println!("  remote address: {}", show(&rem));
    let ud_to = UdAddr {
        remote_qpn: rem.qpn,
        qkey: QKEY,
        dgid: rem.gid,
        dmac,
        sgid_index: gid_index,
        hop_limit: 64,
        ..UdAddr::default()
    };
    let send_sge = [Sge {
        addr: mr.addr() + if ud { u64::from(GRH) } else { 0 },
        length: a.size,
        lkey: mr.lkey(),
    }];
    let post_send = |qp: &mut mlx5::qp::Qp<'_, AnyPlatform>| {
        qp.post_send(&[SendWr {
            ud: ud.then_some(ud_to),
            ..SendWr::send(SEND_WRID, &send_sge)
        }])
        .map_err(e)
    };
    let page = 4096usize;
    if a.server.is_some() && a.chk {
        let mut b = vec![0u8; a.size as usize];
        for i in (0..b.len()).step_by(page) {
            b[i] = (i / page) as u8;
        }
        mr.write(if ud { GRH as usize } else { 0 }, &b).map_err(e)?;
    }
    let mut pending = RECV_WRID;
    if a.server.is_some() {
        post_send(&mut qp)?;
        pending |= SEND_WRID;
    }
    let (mut scnt, mut rcnt) = (0u32, 0u32);
    let start = Instant::now();
    let mut quiet = Instant::now();
    let mut wc = [Wc::default(); 2];
    while rcnt < a.iters || scnt < a.iters {
        let n = cq.poll(&mut wc).map_err(e)?;
        if n == 0 {
            if quiet.elapsed() > Duration::from_secs(30) {
                return Err(format!(
                    "no completion for 30 s ({scnt} sent, {rcnt} received)"
                ));
            }
            mlx5::Platform::relax(dev.platform());
            continue;
        }
        quiet = Instant::now();
        for w in &wc[..n] {
            if w.status != WcStatus::Success {
                return Err(format!(
                    "Failed status {:?} for wr_id {}",
                    w.status, w.wr_id
                ));
            }
            match w.wr_id {
                SEND_WRID => scnt += 1,
                RECV_WRID => {
                    routs -= 1;
                    if routs <= 1 {
                        routs += post_recvs(&mut qp, a.rx_depth - routs)?;
                    }
                    rcnt += 1;
                }
                other => return Err(format!("Completion for unknown wr_id {other}")),
            }
            pending &= !w.wr_id;
            if scnt < a.iters && pending == 0 {
                post_send(&mut qp)?;
                pending = RECV_WRID | SEND_WRID;
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let bytes = u64::from(a.size) * u64::from(a.iters) * 2;
    println!(
        "{bytes} bytes in {secs:.2} seconds = {:.2} Mbit/sec",
        bytes as f64 * 8.0 / secs / 1e6
    );
    println!(
        "{} iters in {secs:.2} seconds = {:.2} usec/iter",
        a.iters,
        secs * 1e6 / f64::from(a.iters)
    );
    if a.server.is_none() && a.chk {
        let mut b = vec![0u8; a.size as usize];
        mr.read(if ud { GRH as usize } else { 0 }, &mut b)
            .map_err(e)?;
        for i in (0..b.len()).step_by(page) {
            if b[i] != (i / page) as u8 {
                return Err(format!("invalid data in page {}", i / page));
            }
        }
    }
    Ok(())
}

/// What the fuzz target (tests/fuzz `pingpong_exchange`) reaches: the parser of the peer's
/// 52-byte address. Not an interface of the tool.
#[doc(hidden)]
pub mod fuzz {
    /// The peer's address message parsed: `Some((qpn, psn))`, or `None` when it is refused.
    pub fn dest(m: &[u8]) -> Option<(u32, u32)> {
        super::Dest::from_wire(m).ok().map(|d| (d.qpn, d.psn))
    }
}

/// `LID 0x0000, QPN 0x000011, PSN 0x4fc73b, GID ::ffff:…` as the pingpongs print it.
fn show(d: &Dest) -> String {
    let g = std::net::Ipv6Addr::from(d.gid);
    format!(
        "LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {g}",
        d.lid, d.qpn, d.psn
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exchange_message_is_rdma_cores() {
        // The example of the rxe interop memo: ::ffff:198.18.0.11, QPN 0x11, PSN 0xff76d6.
        let mut gid = [0u8; 16];
        gid[10..].copy_from_slice(&[0xff, 0xff, 0xc6, 0x12, 0x00, 0x0b]);
        let d = Dest {
            lid: 0,
            qpn: 0x11,
            psn: 0xff76d6,
            gid,
        };
        let w = d.to_wire();
        assert_eq!(
            &w[..MSG - 1],
            b"0000:000011:ff76d6:00000000000000000000ffffc612000b"
        );
        assert_eq!(w[MSG - 1], 0);
        assert_eq!(Dest::from_wire(&w), Ok(d));
        assert!(Dest::from_wire(b"0000:11:22\0").is_err());
    }

    /// Issue #26 row 7: a 52-byte address whose GID is not ASCII panicked (a `str` sliced
    /// inside a multi-byte character), ending client or server with exit 101.
    #[test]
    fn any_bytes_are_refused_never_a_panic() {
        let mut m = *b"0000:000011:ff76d6:00000000000000000000ffffc612000b\0";
        m[19] = 0xc3;
        m[20] = 0xa9; // "é": a two-byte character where a hex digit pair starts
        assert!(Dest::from_wire(&m).is_err());
        // 19 digits, then "é" straddling the tenth pair, then 11 digits: 32 bytes of GID.
        let mut odd = Vec::from(&b"0000:000011:ff76d6:"[..]);
        odd.extend_from_slice(&[b'0'; 19]);
        odd.extend_from_slice("é".as_bytes());
        odd.extend_from_slice(&[b'f'; 11]);
        odd.push(0);
        assert_eq!(odd.len(), MSG);
        assert!(Dest::from_wire(&odd).is_err());
        assert!(Dest::from_wire(b"+000:000011:ff76d6:00000000000000000000ffffc612000b\0").is_err());
        assert!(Dest::from_wire(&[0xff; 52]).is_err());
        assert!(Dest::from_wire(&[]).is_err());
        for b in 0..=255u8 {
            let mut m = *b"0000:000011:ff76d6:00000000000000000000ffffc612000b\0";
            for i in [0, 5, 19, 20, 35, 50] {
                m[i] = b;
                let _ = Dest::from_wire(&m);
            }
        }
    }
}
