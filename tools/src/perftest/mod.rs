//! `mlx5ctl perftest`: perftest's `ib_write_bw`, `ib_write_lat`, `ib_read_bw`, `ib_read_lat`,
//! `ib_send_bw`, `ib_send_lat`, `ib_atomic_bw` and `ib_atomic_lat` on this driver, RC,
//! wire-compatible with perftest 6.06 (Debian's 4.5-0.17) as client or server (issue #12 item
//! 2): either side can be the real tool.
//!
//! What it mirrors of perftest (the facts: docs/fields.md "perftest"): the TCP exchange on port
//! 18515 (`oob.rs`) with each test's script of key exchanges; the buffer (two halves of
//! `max(size, cycle buffer)` rounded to the cache line, the second half advertised, which the
//! peer targets); the addresses (bandwidth tests step by the size rounded to the cache line
//! within the cycle buffer when the size is at most half of it; latency tests use one place);
//! the defaults (64 KiB and 5000 / 1000 iterations for bandwidth, 2 bytes and 1000 for latency,
//! 8-byte FETCH_ADD of 1 for atomics; 128 outstanding, one signaled per 100 up to 8 KiB
//! messages); the QP attributes (timeout 14, 7 retries, 7 RNR retries, `min_rnr_timer` 12, our
//! OUT as responder depth and the peer's as initiator depth) and who does what: in the
//! bandwidth and read/atomic latency tests the client works and the server waits; in
//! `send_bw` the server counts receives; `write_lat` and `send_lat` are ping-pongs.

mod cmlink;
mod keys;
mod oob;
mod params;
mod run;

use params::{Params, Test, Verb};

use std::net::TcpListener;

use clap::Args as ClapArgs;

use crate::link::{e, with_host, Host, LinkArgs};

/// `mlx5ctl perftest` arguments (perftest's own, where it has one).
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// write-bw, write-lat, read-bw, read-lat, send-bw, send-lat, atomic-bw or atomic-lat.
    test: String,
    /// The server to connect to; without it, wait for a client (as perftest does).
    server: Option<String>,
    /// TCP port of the exchange.
    #[arg(short = 'p', long, default_value_t = 18515)]
    port: u16,
    /// Bytes per message (perftest's default: 65536 for bandwidth, 2 for latency, 8 for
    /// atomics, which take no other).
    #[arg(short = 's', long)]
    size: Option<u32>,
    /// Iterations (5000 for write-bw, 1000 for the others).
    #[arg(short = 'n', long)]
    iters: Option<u32>,
    /// The local GID index (default 0; 1 with --ip).
    #[arg(short = 'x', long = "gid-index")]
    gid_index: Option<u8>,
    /// The largest path MTU to offer (256 … 4096); the smaller of ours and the peer's is used.
    #[arg(short = 'm', long, default_value_t = 1024)]
    mtu: u32,
    /// perftest's -R: connect the test QP with rdma_cm (CM MADs over QP1), and run the
    /// exchange over an RC QP rdma_cm connected to the server's port instead of TCP (the
    /// server is then given by its IPv4 address).
    #[arg(short = 'R', long = "rdma_cm")]
    rdma_cm: bool,
    /// The largest cycle buffer the peer may ask for, in bytes (both sides register the larger
    /// of theirs and ours; perftest's is the page size). A larger one ends the run.
    #[arg(long = "max-peer-buffer", value_name = "BYTES", default_value_t = 16 << 20)]
    max_peer_buffer: u32,
    #[command(flatten)]
    host: LinkArgs,
}

/// The `ibv_mtu` enum of `n` bytes.
fn mtu_enum(n: u32) -> Result<u8, String> {
    Ok(match n {
        256 => 1,
        512 => 2,
        1024 => 3,
        2048 => 4,
        4096 => 5,
        _ => return Err(format!("--mtu {n}: 256, 512, 1024, 2048 or 4096")),
    })
}

/// Runs `mlx5ctl perftest`.
pub fn run(a: &Args) -> Result<(), String> {
    let test = Test::parse(&a.test)?;
    let size = a.size.unwrap_or(test.default_size());
    if test.verb == Verb::Atomic && size != 8 {
        return Err("Message size cannot be changed for Atomic tests".into());
    }
    if size == 0 {
        return Err("--size 0".into());
    }
    let iters = a.iters.unwrap_or(test.default_iters());
    if !(5..=100_000_000).contains(&iters) {
        return Err(format!("--iters {iters}: 5 to 100000000"));
    }
    let tx_depth = if test.lat { 1 } else { 128u32.min(iters) };
    let rx_depth = if test.verb == Verb::Send {
        let d = 512u32.min(iters);
        d + d % 2
    } else {
        1
    };
    let cq_mod = if test.lat {
        1
    } else {
        let m = if size > 8192 { 1 } else { 100 };
        m.min(tx_depth)
    };
    let p = Params {
        test,
        client: a.server.is_some(),
        size,
        iters,
        tx_depth,
        rx_depth,
        cq_mod,
    };
    let mtu = mtu_enum(a.mtu)?;
    with_host(&a.host, |h| session(a, p, mtu, h))
}

/// One run on the device: the exchange's script around the test.
fn session(a: &Args, p: Params, mtu: u8, h: &Host<'_>) -> Result<(), String> {
    let banner = || {
        println!("************************************");
        println!("* Waiting for client to connect... *");
        println!("************************************");
    };
    let ctrl = if a.rdma_cm {
        Some(cmlink::CtrlBufs::new(h.dev)?)
    } else {
        None
    };
    let mut chan = match &ctrl {
        Some(b) => {
            if !p.client {
                banner();
            }
            oob::Chan::cm(
                cmlink::CmLink::open(h, b, a.server.as_deref(), a.port)?,
                p.client,
            )
        }
        None => match &a.server {
            Some(host) => oob::Chan::connect(host, a.port)?,
            None => {
                let l = TcpListener::bind(("0.0.0.0", a.port))
                    .map_err(|x| format!("port {}: {x}", a.port))?;
                banner();
                oob::Chan::new(l.accept().map_err(e)?.0, p.client)?
            }
        },
    };
    let settled = chan.prelude(4096, 64, mtu, a.max_peer_buffer)?;
    let bufs = run::alloc(h.dev, p, settled)?;
    let mut r = run::Resources::new(h, &bufs, a.gid_index, p, settled)?;
    let me = r.keys();
    let mut peer = keys::Keys::default();
    if a.rdma_cm {
        // -R: the test QP is connected by rdma_cm between two exchanges (of zeroed keys).
        chan.keys(&keys::Keys::default())?;
        let out = match p.test.verb {
            Verb::Read | Verb::Atomic => p.test.out().min(255) as u8,
            Verb::Write | Verb::Send => 0,
        };
        chan.link()
            .ok_or("no rdma_cm link")?
            .connect_test(r.qp_mut(), out)?;
        chan.keys(&keys::Keys::default())?;
    }
    for n in 1..=p.test.exchanges_before() {
        peer = chan.keys(&me)?;
        if n == p.test.connect_after() {
            // Connected before our next message: the peer may start its traffic as soon as it
            // has it (with -R, rdma_cm connected it already).
            if !a.rdma_cm {
                r.connect(h, &peer)?;
            }
            r.show(&peer);
        }
        if n + 1 == p.test.exchanges_before() && p.test.verb == Verb::Send {
            // The receives are posted before the last exchange (the peer sends after it).
            r.post_initial_receives()?;
        }
    }
    let test = p.test;
    match (test.verb, test.lat, p.client) {
        // The bandwidth tests: the client works, then the post-test exchange and the report.
        (Verb::Write | Verb::Read | Verb::Atomic, false, true) => {
            let rep = r.bw_client(&peer)?;
            chan.keys(&me)?;
            chan.report(
                u64::from(p.size),
                u64::from(p.iters),
                rep.peak,
                rep.avg,
                rep.rate,
            )?;
            run::print_bw(p, rep);
        }
        (Verb::Write | Verb::Read | Verb::Atomic, false, false) => {
            // The server waits out the client's test, then prints what the client reports.
            chan.keys(&me)?;
            let (_, _, peak, avg, rate) = chan.report(0, 0, 0.0, 0.0, 0.0)?;
            run::print_bw(p, run::BwReport { peak, avg, rate });
        }
        (Verb::Send, false, true) => run::print_bw(p, r.bw_client(&peer)?),
        (Verb::Send, false, false) => run::print_bw(p, r.send_bw_server()?),
        (Verb::Read | Verb::Atomic, true, true) => run::print_lat(p, &r.lat_client(&peer)?),
        (Verb::Read | Verb::Atomic, true, false) => {}
        (Verb::Write, true, _) => {
            let lat = r.write_lat(&peer)?;
            run::print_lat(p, &lat);
            // No closing exchange: the peer just exits.
            chan.linger(Some(r.qp_mut()));
            r.close();
            return Ok(());
        }
        (Verb::Send, true, _) => run::print_lat(p, &r.send_lat(&peer)?),
    }
    chan.keys(&me)?;
    chan.done(Some(r.qp_mut()));
    r.close();
    Ok(())
}

/// What the fuzz targets (tests/fuzz `perftest_exchange`) reach: the parsers of the peer's
/// bytes in the out-of-band exchange. Not an interface of the tool.
#[doc(hidden)]
pub mod fuzz {
    use std::io::{Read, Write};
    use std::net::{Shutdown, TcpListener, TcpStream};

    use super::keys::Keys;
    use super::oob::Chan;
    use crate::link::e;

    /// A key message read as text (the TCP exchange) and as perftest's binary struct (`-R`):
    /// whether each parsed.
    pub fn keys(m: &[u8]) -> (bool, bool) {
        (Keys::from_wire(m).is_ok(), Keys::from_binary(m).is_ok())
    }

    /// The server's side of the TCP exchange — the prelude (version, cycle buffer, cache line,
    /// MTU), one key exchange and the report — against a client on loopback that sends `peer`
    /// and closes. Errors are the exchange refusing the bytes; a panic is a finding.
    pub fn tcp_server(peer: &[u8]) -> Result<(), String> {
        let l = TcpListener::bind(("127.0.0.1", 0)).map_err(e)?;
        let at = l.local_addr().map_err(e)?;
        let bytes = peer.to_vec();
        let client = std::thread::spawn(move || -> std::io::Result<()> {
            let mut s = TcpStream::connect(at)?;
            s.write_all(&bytes)?;
            s.shutdown(Shutdown::Write)?;
            // The server's answers, until it closes.
            let mut sink = Vec::new();
            s.read_to_end(&mut sink).map(drop)
        });
        let r = l.accept().map_err(e).and_then(|(s, _)| {
            let mut c = Chan::new(s, false)?;
            c.prelude(4096, 64, 3, 1 << 20)?;
            c.keys(&Keys::default())?;
            c.report(0, 0, 0.0, 0.0, 0.0)?;
            Ok(())
        });
        // The server's socket is closed: the client's read ends.
        drop(client.join());
        r
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn a_whole_exchange_parses_and_anything_else_is_refused() {
            let mut m = b"6.06".to_vec();
            m.resize(16, 0);
            m.extend_from_slice(&8192u32.to_be_bytes());
            m.extend_from_slice(&128u32.to_be_bytes());
            m.extend_from_slice(b"5\0");
            m.extend_from_slice(&Keys::default().to_wire());
            m.extend_from_slice(&[0x55; 40]);
            assert_eq!(tcp_server(&m), Ok(()));
            // A cache line (or cycle buffer) the peer should not be able to name.
            let mut huge = m.clone();
            huge[20..24].copy_from_slice(&0xffff_ffffu32.to_be_bytes());
            assert!(tcp_server(&huge).is_err());
            assert!(tcp_server(&m[..m.len() - 1]).is_err());
            assert!(tcp_server(b"\xff\xfe not a version").is_err());
            assert_eq!(keys(&Keys::default().to_wire()), (true, true));
            assert_eq!(keys(&[0xc3; 20]), (false, false));
        }
    }
}
