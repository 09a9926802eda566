//! `mlx5ctl demo --type uc`: UC QPs, SEND/RECV, RDMA WRITE and WRITE with immediate, then RDMA
//! WRITE throughput and SEND latency. UC has no READ and no atomics: the driver refuses remote
//! read or atomic access on a UC QP, and `connect` grants remote write only. Nothing is
//! acknowledged either (a send completes once on the wire), so what was written is checked
//! after a receive at the peer shows it arrived: a WRITE with immediate consumes one, after
//! every earlier message of the QP was placed.

use mlx5::qp::{Access, ConnectOpts, Mtu, QpAttr, QpAttrMask as M, QpState, SendOp, SendWr};
use mlx5::WcOpcode;

use super::args::Args;
use super::side::{
    check, check_that, connect, connected, e, ok, pattern, ping_pong, write_throughput, Side,
};

/// Runs the UC demo on two QPs in RESET.
pub(super) fn run(a: &Args, x: &mut Side<'_>, y: &mut Side<'_>) -> Result<(), String> {
    // What UC does not have is refused before any command reaches the device.
    let refused = x.qp.modify(
        &QpAttr {
            qp_state: Some(QpState::Init),
            port_num: 1,
            access: Access {
                remote_write: true,
                remote_read: true,
                remote_atomic: true,
            },
            ..QpAttr::default()
        },
        M::STATE | M::PORT | M::PKEY_INDEX | M::ACCESS_FLAGS,
    );
    let refusal = match refused {
        Err(mlx5::Error::InvalidArgument {
            field: "qp_access_flags",
            limit,
            ..
        }) if x.qp.state() == QpState::Reset => limit,
        r => {
            return Err(format!(
                "remote READ and atomic access on UC: the driver should refuse it, the QP staying \
                 in RESET ({r:?})"
            ))
        }
    };
    let opts = ConnectOpts {
        mtu: Mtu::Mtu1024,
        ..ConnectOpts::default()
    };
    connect(x, y, &opts)?;
    connected(x, y, "path MTU 1024, remote write only");
    ok(
        "remote READ and atomic access on UC",
        &format!("refused by the driver: {refusal}"),
    );

    // SEND / RECV: the receive is posted first (UC drops a message that finds none).
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

    // RDMA WRITE, then WRITE with immediate: its receive completion at the peer follows the
    // placement of both.
    let big = pattern(65536, 7);
    let tail = pattern(4096, 99);
    x.put(0, &big)?;
    x.put(65536, &tail)?;
    let (raddr, rkey) = (y.mr.addr(), y.mr.rkey());
    let imm = 0x00c0_ffee;
    y.recv(2, &[y.sge(0, 64)])?;
    x.qp.post_send(&[
        SendWr {
            op: SendOp::Write {
                remote_addr: raddr + 65536,
                rkey,
            },
            ..SendWr::send(2, &[x.sge(0, 65536)])
        },
        SendWr {
            op: SendOp::WriteImm {
                remote_addr: raddr + 131072,
                rkey,
                imm,
            },
            ..SendWr::send(3, &[x.sge(65536, 4096)])
        },
    ])
    .map_err(e)?;
    x.wait(2)?;
    let w = y.wait(1)?;
    check("RDMA WRITE of 65536 bytes", y.get(65536, 65536)? == big)?;
    check_that(
        "WRITE_WITH_IMM consumed a receive",
        w[0].opcode == WcOpcode::RecvRdmaWithImm && w[0].imm_data == Some(imm),
        &format!("imm {imm:#x} in its completion"),
        format!("the receive completed as {:?}", w[0]),
    )?;
    check(
        "RDMA WRITE_WITH_IMM of 4096 bytes",
        y.get(131072, 4096)? == tail,
    )?;

    write_throughput(a, x, y, true)?;
    ping_pong(a, x, y, None)
}
