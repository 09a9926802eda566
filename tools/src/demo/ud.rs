//! `mlx5ctl demo --type ud`: UD QPs, every SEND addressed with a [`UdAddr`] (remote QPN, Q_Key,
//! GID, MAC). The receiver's buffer gets the 40-byte GRH, then the payload; its completion the
//! length of both and the sender's QPN. Messages are at most the UD MTU (the port's active MTU);
//! a message with the wrong Q_Key is dropped. Then SEND throughput and SEND latency.

use std::time::{Duration, Instant};

use mlx5::qp::UdAddr;
use mlx5::qp::{ConnectOpts, QpEndpoint, RecvWr, SendWr};
use mlx5::WcStatus;

use super::args::Args;
use super::side::{blank, check_that, connect, e, pattern, ping_pong, Dev, Side, GRH, MR_LEN};

/// The largest UD message `d` sends or receives: its port's active MTU.
fn ud_mtu(d: &Dev) -> u32 {
    u32::from(crate::devinfo::active_mtu(d.vport().mtu).0)
}

/// The address of the UD QP at `to`.
fn addr(to: &QpEndpoint, o: &ConnectOpts) -> UdAddr {
    UdAddr {
        remote_qpn: to.qpn,
        qkey: o.qkey,
        dgid: to.gid,
        dmac: to.mac,
        hop_limit: o.hop_limit,
        ..UdAddr::default()
    }
}

/// Runs the UD demo on two QPs in RESET.
pub(super) fn run(a: &Args, x: &mut Side<'_>, y: &mut Side<'_>) -> Result<(), String> {
    let opts = ConnectOpts::default();
    connect(x, y, &opts)?;
    let mtu = ud_mtu(x.dev).min(ud_mtu(y.dev));
    let (ex, ey) = (x.qp.endpoint(), y.qp.endpoint());
    let (to_y, to_x) = (addr(&ey, &opts), addr(&ex, &opts));
    println!(
        "UD QP {:#x} and QP {:#x} ready, RESET -> INIT -> RTR -> RTS (Q_Key {:#x}, UD MTU {mtu}, granted {:?})",
        ex.qpn,
        ey.qpn,
        opts.qkey,
        x.qp.cap()
    );

    // SENDs from 1 byte to the UD MTU, each into a receive with room for the GRH.
    for (i, n) in [1, mtu / 2, mtu].into_iter().enumerate() {
        let msg = pattern(n as usize, 3 + i as u8);
        x.put(0, &msg)?;
        y.recv(i as u64, &[y.sge(0, GRH + mtu)])?;
        x.qp.post_send(&[SendWr {
            ud: Some(to_y),
            ..SendWr::send(i as u64, &[x.sge(0, n)])
        }])
        .map_err(e)?;
        x.wait(1)?;
        let w = y.wait(1)?[0];
        let what = match n {
            1 => "UD SEND of 1 byte".to_string(),
            n if n == mtu => format!("UD SEND of {n} bytes (the UD MTU)"),
            n => format!("UD SEND of {n} bytes"),
        };
        let bytes = y.get(u64::from(GRH), n as usize)? == msg;
        check_that(
            &what,
            bytes && (w.byte_len, w.src_qp, w.grh) == (n + GRH, ex.qpn, true),
            &format!(
                "every byte verified after the GRH, byte_len {}, src_qp {:#x}",
                w.byte_len, w.src_qp
            ),
            format!(
                "payload {}, byte_len {}, src_qp {:#x}, GRH {}; expected byte_len {}, src_qp {:#x}",
                if bytes { "verified" } else { "mismatch" },
                w.byte_len,
                w.src_qp,
                w.grh,
                n + GRH,
                ex.qpn
            ),
        )?;
    }

    // A wrong Q_Key: the receiver drops the message, so the one receive it has takes the next.
    let (bad, good) = (pattern(256, 50), pattern(256, 51));
    x.put(0, &bad)?;
    x.put(256, &good)?;
    y.put(u64::from(GRH), &[0; 256])?;
    y.recv(10, &[y.sge(0, GRH + mtu)])?;
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
    .map_err(e)?;
    x.wait(2)?;
    let w = y.wait(1)?[0];
    let got = y.get(u64::from(GRH), 256)?;
    check_that(
        &format!("UD SEND with a wrong Q_Key ({wrong:#x})"),
        w.byte_len == GRH + 256 && got == good,
        "dropped: the next SEND took the receive",
        format!(
            "the receive got {}",
            if got == bad { "it" } else { "neither SEND" }
        ),
    )?;

    throughput(a, x, y, to_y, mtu)?;
    ping_pong(a, x, y, Some((to_y, to_x)))
}

/// Throughput: SENDs of `--size` bytes (at most the UD MTU) from `x` to `y`, up to 128 in flight
/// and never more than the receives `y` has posted (a UD message that finds none is dropped),
/// one signaled per 32. The clock stops when `y` has received them all.
fn throughput(
    a: &Args,
    x: &mut Side<'_>,
    y: &mut Side<'_>,
    to_y: UdAddr,
    mtu: u32,
) -> Result<(), String> {
    let size = a.size.clamp(1, mtu.min((MR_LEN / 2) as u32 - GRH));
    let sge = [x.sge(0, size)];
    let rsge = [y.sge(0, GRH + size)];
    let sends: Vec<SendWr<'_>> = (0..32u64)
        .map(|i| SendWr {
            signaled: i == 31,
            ud: Some(to_y),
            ..SendWr::send(i, &sge)
        })
        .collect();
    let recvs: Vec<RecvWr<'_>> = (0..32u64)
        .map(|wr_id| RecvWr {
            wr_id,
            sg_list: &rsge,
        })
        .collect();
    let rq = u64::from(y.qp.cap().max_recv_wr) / 32 * 32;
    let total = a.messages.div_ceil(32) * 32;
    let (mut sent, mut sends_done, mut recvs_posted, mut received) = (0u64, 0u64, 0u64, 0u64);
    let mut wc = [blank(); 32];
    let t = Instant::now();
    let mut progress = Instant::now();
    let mut next_report = total / 10;
    while received < total {
        while recvs_posted < total && recvs_posted + 32 <= received + rq {
            y.qp.post_recv(&recvs).map_err(e)?;
            recvs_posted += 32;
        }
        if sent < total && sent - sends_done < 128 && sent + 32 <= recvs_posted {
            x.qp.post_send(&sends).map_err(e)?;
            sent += 32;
        }
        let n = x.cq.poll(&mut wc).map_err(e)?;
        for w in &wc[..n] {
            if w.status != WcStatus::Success {
                return Err(format!("throughput run: send {:?}", w.status));
            }
            sends_done += 32;
        }
        let m = y.cq.poll(&mut wc).map_err(e)?;
        for w in &wc[..m] {
            if w.status != WcStatus::Success || w.byte_len != GRH + size {
                return Err(format!("throughput run: receive {:?}", w));
            }
            received += 1;
        }
        if n + m > 0 {
            progress = Instant::now();
        } else if progress.elapsed() > Duration::from_secs(10) {
            return Err(format!(
                "throughput run: {received} of {sent} SENDs received, no progress for 10 s"
            ));
        } else if sent == total || sent - sends_done >= 128 || sent + 32 > recvs_posted {
            mlx5::Platform::relax(x.dev.platform());
            mlx5::Platform::relax(y.dev.platform());
        }
        if total >= 100_000 && received >= next_report && received < total {
            println!("  ... {received} of {total} SENDs");
            next_report += total / 10;
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let clamped = if size < a.size {
        format!(" (--size {} is above the UD MTU)", a.size)
    } else {
        String::new()
    };
    println!(
        "throughput: {total} UD SENDs of {size} bytes{clamped} in {:.2} s: {:.0} messages/s, {:.1} MB/s",
        secs,
        total as f64 / secs,
        total as f64 * f64::from(size) / secs / 1e6
    );
    Ok(())
}
