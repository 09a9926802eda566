//! `mlx5ctl create-qp`: create a QP on a device, print what was granted and how it is laid out,
//! destroy it. `--example N` runs example N of the `ibv_create_qp` documentation.

use clap::Args as ClapArgs;
use mlx5::qp::{QpCap, QpInitAttr, QpType};
use mlx5::srq::SrqAttr;
use serde_json::json;

use crate::size::QpSpec;
use crate::target::Target;

/// `mlx5ctl create-qp` arguments.
#[derive(ClapArgs, Debug)]
pub struct Args {
    #[command(flatten)]
    target: Target,
    /// Run example N (1-4) of the ibv_create_qp documentation instead of the flags below.
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=4))]
    example: Option<u8>,
    #[command(flatten)]
    spec: QpSpec,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

struct Plan {
    title: &'static str,
    qp_type: QpType,
    cap: QpCap,
    two_cqs: bool,
    srq: bool,
}

fn example(n: u8) -> Plan {
    let c = |s_wr, r_wr, s_sge, r_sge, inl| QpCap {
        max_send_wr: s_wr,
        max_recv_wr: r_wr,
        max_send_sge: s_sge,
        max_recv_sge: r_sge,
        max_inline_data: inl,
    };
    match n {
        1 => Plan {
            title: "1) one CQ for both queues",
            qp_type: QpType::Rc,
            cap: c(2, 2, 1, 1, 0),
            two_cqs: false,
            srq: false,
        },
        2 => Plan {
            title: "2) different send and receive CQs",
            qp_type: QpType::Rc,
            cap: c(2, 2, 1, 1, 0),
            two_cqs: true,
            srq: false,
        },
        3 => Plan {
            title: "3) receives from an SRQ",
            qp_type: QpType::Rc,
            cap: c(2, 0, 1, 0, 0),
            two_cqs: true,
            srq: true,
        },
        _ => Plan {
            title: "4) inline messages of 512 bytes",
            qp_type: QpType::Rc,
            cap: c(2, 2, 1, 1, 512),
            two_cqs: false,
            srq: false,
        },
    }
}

/// Runs `mlx5ctl create-qp`.
pub fn run(a: &Args) -> Result<(), String> {
    let plan = match a.example {
        Some(n) => example(n),
        None => Plan {
            title: "custom",
            qp_type: a.spec.qp_type,
            cap: a.spec.cap(),
            two_cqs: false,
            srq: a.spec.srq,
        },
    };
    let o = a.target.open()?;
    let report = {
        let dev = &o.device;
        let pd = dev.pd();
        let scq = dev.create_cq(256).map_err(|e| e.to_string())?;
        let rcq = if plan.two_cqs {
            Some(dev.create_cq(256).map_err(|e| e.to_string())?)
        } else {
            None
        };
        let srq = if plan.srq {
            Some(
                dev.create_srq(
                    pd,
                    &SrqAttr {
                        max_wr: 64,
                        max_sge: 1,
                        srq_limit: 0,
                    },
                )
                .map_err(|e| e.to_string())?,
            )
        } else {
            None
        };
        let mut attr = QpInitAttr::new(plan.qp_type, &scq, rcq.as_ref().unwrap_or(&scq), plan.cap);
        attr.srq = srq.as_ref();
        attr.send_ops = if a.example.is_some() {
            None
        } else {
            a.spec.ops()
        };
        attr.size_mode = if a.example.is_some() {
            mlx5::raw::SizeMode::Exact
        } else {
            a.spec.mode()
        };
        let qp = dev.create_qp(pd, &attr).map_err(|e| e.to_string())?;
        let (c, l) = (qp.cap(), qp.layout());
        let (pdn, scqn, rcqn, srqn) = qp.handles();
        let (buf, dbr) = qp.buffer_iovas();
        let r = json!({
            "example": plan.title,
            "qp_type": plan.qp_type.name(),
            "qpn": qp.qpn(),
            "requested": {"max_send_wr": plan.cap.max_send_wr, "max_recv_wr": plan.cap.max_recv_wr, "max_send_sge": plan.cap.max_send_sge, "max_recv_sge": plan.cap.max_recv_sge, "max_inline_data": plan.cap.max_inline_data},
            "granted": {"max_send_wr": c.max_send_wr, "max_recv_wr": c.max_recv_wr, "max_send_sge": c.max_send_sge, "max_recv_sge": c.max_recv_sge, "max_inline_data": c.max_inline_data},
            "layout": {"sq_wqe_bytes": l.sq_wqe_bytes, "sq_wqebb_cnt": l.sq_wqebb_cnt, "rq_stride_bytes": l.rq_stride_bytes, "rq_wqe_cnt": l.rq_wqe_cnt, "sq_overhead": l.sq_overhead, "rq_offset": 0, "sq_offset": l.rq_bytes()},
            "handles": {"pd": pdn, "send_cq": scqn, "recv_cq": rcqn, "srq": srqn},
            "buffer_iova": buf.map(|b| format!("{b:#x}")),
            "dbr_iova": dbr.map(|d| format!("{d:#x}")),
        });
        qp.destroy().map_err(|e| e.to_string())?;
        r
    };
    a.target.close(o)?;
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    println!(
        "create_qp {}: {} QP {:#x}",
        report["example"].as_str().unwrap_or(""),
        report["qp_type"].as_str().unwrap_or(""),
        report["qpn"].as_u64().unwrap_or(0)
    );
    for k in ["requested", "granted"] {
        let v = &report[k];
        println!(
            "  {k:<10} max_send_wr {}  max_recv_wr {}  max_send_sge {}  max_recv_sge {}  max_inline_data {}",
            v["max_send_wr"], v["max_recv_wr"], v["max_send_sge"], v["max_recv_sge"], v["max_inline_data"]
        );
    }
    let l = &report["layout"];
    println!(
        "  send WQE   {} bytes, send overhead {} bytes",
        l["sq_wqe_bytes"], l["sq_overhead"]
    );
    println!(
        "  buffer     RQ at offset 0: {} x {} bytes; SQ at offset {}: {} WQEBBs of 64 bytes",
        l["rq_wqe_cnt"], l["rq_stride_bytes"], l["sq_offset"], l["sq_wqebb_cnt"]
    );
    let h = &report["handles"];
    println!(
        "  context    pd {}  send_cq {}  recv_cq {}  srq {}  buffer {}  doorbell record {}",
        h["pd"], h["send_cq"], h["recv_cq"], h["srq"], report["buffer_iova"], report["dbr_iova"]
    );
    println!("  destroyed");
    Ok(())
}
