//! `mlx5ctl demo --type rc` (the default): RC QPs, SEND/RECV, RDMA WRITE, READ and atomics,
//! then RDMA WRITE throughput and SEND latency.

use mlx5::qp::{ConnectOpts, Mtu, SendOp, SendWr};

use super::args::Args;
use super::side::{check, connect, connected, e, pattern, ping_pong, write_throughput, Side};

/// Runs the RC demo on two QPs in RESET.
pub(super) fn run(a: &Args, x: &mut Side<'_>, y: &mut Side<'_>) -> Result<(), String> {
    let opts = ConnectOpts {
        mtu: Mtu::Mtu1024,
        ..ConnectOpts::default()
    };
    connect(x, y, &opts)?;
    connected(x, y, "path MTU 1024");

    // SEND / RECV.
    let msg = pattern(4000, 1);
    x.put(0, &msg)?;
    y.recv(1, &[y.sge(0, 4096)])?;
    x.qp.post_send(&[SendWr::send(1, &[x.sge(0, 4000)])])
        .map_err(e)?;
    x.wait(1)?;
    let w = y.wait(1)?;
    check(
        &format!("SEND/RECV of {} bytes", w[0].byte_len),
        y.get(0, 4000)? == msg,
    )?;

    // RDMA WRITE, then READ it back.
    let big = pattern(65536, 7);
    x.put(0, &big)?;
    let (raddr, rkey) = (y.mr.addr(), y.mr.rkey());
    x.qp.post_send(&[SendWr {
        op: SendOp::Write {
            remote_addr: raddr + 65536,
            rkey,
        },
        ..SendWr::send(2, &[x.sge(0, 65536)])
    }])
    .map_err(e)?;
    x.wait(1)?;
    check("RDMA WRITE of 65536 bytes", y.get(65536, 65536)? == big)?;
    x.qp.post_send(&[SendWr {
        op: SendOp::Read {
            remote_addr: raddr + 65536,
            rkey,
        },
        ..SendWr::send(3, &[x.sge(131072, 65536)])
    }])
    .map_err(e)?;
    x.wait(1)?;
    check("RDMA READ of 65536 bytes", x.get(131072, 65536)? == big)?;

    // Atomics: remote memory and the returned value are in host order.
    y.put(4096 * 100, &41u64.to_ne_bytes())?;
    let res = [x.sge(8192, 8)];
    let remote = raddr + 4096 * 100;
    x.qp.post_send(&[SendWr {
        op: SendOp::FetchAdd {
            remote_addr: remote,
            rkey,
            add: 1,
        },
        ..SendWr::send(4, &res)
    }])
    .map_err(e)?;
    x.wait(1)?;
    let word = |v: Vec<u8>| v.try_into().map(u64::from_ne_bytes).unwrap_or(u64::MAX);
    let old = word(x.get(8192, 8)?);
    x.qp.post_send(&[SendWr {
        op: SendOp::CmpSwap {
            remote_addr: remote,
            rkey,
            compare: 42,
            swap: 1000,
        },
        ..SendWr::send(5, &res)
    }])
    .map_err(e)?;
    x.wait(1)?;
    check(
        "atomic FETCH_ADD then CMP_SWAP",
        old == 41 && word(y.get(4096 * 100, 8)?) == 1000,
    )?;

    write_throughput(a, x, y, false)?;
    ping_pong(a, x, y, None)
}
