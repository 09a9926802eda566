//! `mlx5ctl devinfo`: the device as `ibv_devinfo -v` shows it, plus what limits QPs and what
//! the bring-up took.

use clap::Args as ClapArgs;
use mlx5::qp::{QpType, SendOps};
use mlx5::raw::max_qp_cap;
use serde_json::{json, Map, Value};

use crate::target::{Opened, Target};

/// `mlx5ctl devinfo` arguments.
#[derive(ClapArgs, Debug)]
pub struct Args {
    #[command(flatten)]
    target: Target,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// The raw `cmd_hca_cap` fields that decide what a QP, CQ or SRQ may be.
pub const QP_LIMIT_CAPS: &[&str] = &[
    "log_max_qp",
    "log_max_qp_sz",
    "max_wqe_sz_sq",
    "max_wqe_sz_rq",
    "max_wqe_sz_sq_dc",
    "log_max_srq",
    "log_max_srq_sz",
    "log_max_cq",
    "log_max_cq_sz",
    "log_max_eq",
    "log_max_eq_sz",
    "log_max_mkey",
    "log_max_pd",
    "log_max_ra_req_qp",
    "log_max_ra_res_qp",
    "log_max_msg",
    "log_pg_sz",
    "bf",
    "log_bf_reg_size",
    "cqe_version",
    "rc",
    "uc",
    "ud",
    "xrc",
];

fn gid_text(g: &[u8; 16]) -> String {
    g.chunks(2)
        .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
        .collect::<Vec<_>>()
        .join(":")
}

fn mtu_enum(bytes: u16) -> (u16, u8) {
    // IB MTU enumeration: the largest IB MTU that fits the Ethernet MTU (minus RoCE headers).
    [(4096u16, 5u8), (2048, 4), (1024, 3), (512, 2), (256, 1)]
        .into_iter()
        .find(|&(m, _)| m <= bytes)
        .unwrap_or((256, 1))
}

/// The port's active MTU (`ibv_port_attr.active_mtu`, bytes and enum) for a vport MTU: the
/// largest IB MTU that fits with the RoCE v2 headers. UD messages are at most this long.
pub(crate) fn active_mtu(vport_mtu: u16) -> (u16, u8) {
    mtu_enum(vport_mtu.saturating_sub(58).max(256))
}

fn report(o: &Opened) -> Value {
    let d = &o.device;
    let a = d.device_attr();
    let v = d.vport();
    let mac = v.mac;
    let guid = mlx5::cm::guid_of_mac(mac).to_be_bytes();
    let guid_text = guid
        .chunks(2)
        .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
        .collect::<Vec<_>>()
        .join(":");
    let mut raw = Map::new();
    for name in QP_LIMIT_CAPS {
        raw.insert((*name).into(), json!(d.caps().get(name)));
    }
    let port = d.port_state().ok();
    let (max_mtu, max_mtu_e) = mtu_enum(4096);
    let (active_mtu, active_mtu_e) = active_mtu(v.mtu);
    let limits = d.caps().qp_limits();
    let mut maxcap = Map::new();
    for t in [QpType::Rc, QpType::Uc, QpType::Ud] {
        let m = max_qp_cap(&limits, t, SendOps::default_for(t));
        maxcap.insert(
            t.name().into(),
            json!({"max_send_wr": m.max_send_wr, "max_recv_wr": m.max_recv_wr, "max_send_sge": m.max_send_sge, "max_recv_sge": m.max_recv_sge, "max_inline_data": m.max_inline_data}),
        );
    }
    let b = d.bringup();
    let mac_text = mac
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":");
    let gids: Vec<Value> = d
        .gid0()
        .map(|g| vec![json!({"index": 0, "gid": gid_text(&g.gid), "type": "RoCE v2"})])
        .unwrap_or_default();
    let state = match port {
        Some(s) if s.oper == 1 => "PORT_ACTIVE (4)",
        _ => "PORT_DOWN (1)",
    };
    json!({
        "hca_id": o.hca_id,
        // A virtual function (by its PCI id) or the physical one; its vport (a function's own is
        // 0) and whether its MAC is the hypervisor's or a random one the driver picked.
        "function": if d.is_vf() { "VF" } else { "PF" },
        "vport": 0,
        "mac_origin": if v.random_mac { "random (none assigned)" } else { "assigned" },
        "transport": "InfiniBand (0)",
        "fw_ver": d.fw_version().to_string(),
        "node_guid": guid_text,
        "sys_image_guid": guid_text,
        "vendor_id": "0x02c9",
        "vendor_part_id": o.part_id,
        "hw_ver": "0x0",
        "phys_port_cnt": a.phys_port_cnt,
        "max_mr_size": format!("{:#x}", a.max_mr_size),
        "page_size_cap": format!("{:#x}", a.page_size_cap),
        "max_qp": a.max_qp,
        "max_qp_wr": a.max_qp_wr,
        "max_sge": a.max_sge,
        "max_sge_rd": a.max_sge_rd,
        "max_cq": a.max_cq,
        "max_cqe": a.max_cqe,
        "max_mr": a.max_mr,
        "max_pd": a.max_pd,
        "max_qp_rd_atom": a.max_qp_rd_atom,
        "max_res_rd_atom": a.max_res_rd_atom,
        "max_qp_init_rd_atom": a.max_qp_init_rd_atom,
        "atomic_cap": if d.caps().atomic() == 1 { "ATOMIC_HCA (1)" } else { "ATOMIC_NONE (0)" },
        "max_mw": a.max_mw,
        "max_mcast_grp": a.max_mcast_grp,
        "max_mcast_qp_attach": a.max_mcast_qp_attach,
        "max_total_mcast_qp_attach": a.max_mcast_grp.saturating_mul(u64::from(a.max_mcast_qp_attach)),
        "max_ah": a.max_ah,
        "max_srq": a.max_srq,
        "max_srq_wr": a.max_srq_wr,
        "max_srq_sge": a.max_srq_sge,
        "max_fast_reg_page_list_len": a.max_fast_reg_page_list_len,
        "hca_core_clock_khz": a.hca_core_clock_khz,
        "ports": [{
            "port": 1,
            "state": state,
            "max_mtu": format!("{max_mtu} ({max_mtu_e})"),
            "active_mtu": format!("{active_mtu} ({active_mtu_e})"),
            "link_layer": "Ethernet",
            "mac": mac_text,
            "gids": gids,
        }],
        "raw_caps": raw,
        "max_qp_cap": maxcap,
        "bring_up": {
            "issi": d.issi(),
            "commands": b.commands,
            "boot_pages": b.boot_pages,
            "init_pages": b.init_pages,
            "wall_us": o.wall.as_micros() as u64,
            "device_time_us": b.elapsed_ns / 1000,
        },
        "dma": {
            "pages_held_by_firmware": d.pages_held(),
            "quarantined_bytes": d.quarantined().bytes,
            "quarantined_buffers": d.quarantined().buffers,
        },
    })
}

fn print_text(r: &Value) {
    let s = |k: &str| match &r[k] {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    };
    println!("hca_id:\t{}", s("hca_id"));
    println!(
        "function:\t{}, vport {}, MAC {}",
        s("function"),
        s("vport"),
        s("mac_origin")
    );
    for k in [
        "transport",
        "fw_ver",
        "node_guid",
        "sys_image_guid",
        "vendor_id",
        "vendor_part_id",
        "hw_ver",
        "phys_port_cnt",
        "max_mr_size",
        "page_size_cap",
        "max_qp",
        "max_qp_wr",
        "max_sge",
        "max_sge_rd",
        "max_cq",
        "max_cqe",
        "max_mr",
        "max_pd",
        "max_qp_rd_atom",
        "max_res_rd_atom",
        "max_qp_init_rd_atom",
        "atomic_cap",
        "max_mw",
        "max_mcast_grp",
        "max_mcast_qp_attach",
        "max_total_mcast_qp_attach",
        "max_ah",
        "max_srq",
        "max_srq_wr",
        "max_srq_sge",
        "max_fast_reg_page_list_len",
        "hca_core_clock_khz",
    ] {
        println!("\t{:<28}{}", format!("{k}:"), s(k));
    }
    for p in r["ports"].as_array().into_iter().flatten() {
        println!("\t\tport:\t{}", p["port"]);
        for k in ["state", "max_mtu", "active_mtu", "link_layer", "mac"] {
            println!(
                "\t\t\t{:<20}{}",
                format!("{k}:"),
                p[k].as_str().unwrap_or("")
            );
        }
        for g in p["gids"].as_array().into_iter().flatten() {
            println!(
                "\t\t\tGID[{:>3}]:\t\t{}, {}",
                g["index"],
                g["gid"].as_str().unwrap_or(""),
                g["type"].as_str().unwrap_or("")
            );
        }
    }
    println!();
    println!("raw capabilities that limit QPs (cmd_hca_cap, current):");
    if let Some(m) = r["raw_caps"].as_object() {
        for (k, v) in m {
            println!("\t{:<28}{}", format!("{k}:"), v);
        }
    }
    println!();
    println!("max_qp_cap: the largest each field can be on a QP of that type (default send ops, others minimal):");
    println!(
        "\t{:<6}{:>12}{:>12}{:>13}{:>13}{:>16}",
        "type", "max_send_wr", "max_recv_wr", "max_send_sge", "max_recv_sge", "max_inline_data"
    );
    if let Some(m) = r["max_qp_cap"].as_object() {
        for (t, v) in m {
            println!(
                "\t{:<6}{:>12}{:>12}{:>13}{:>13}{:>16}",
                t,
                v["max_send_wr"].as_u64().unwrap_or(0),
                v["max_recv_wr"].as_u64().unwrap_or(0),
                v["max_send_sge"].as_u64().unwrap_or(0),
                v["max_recv_sge"].as_u64().unwrap_or(0),
                v["max_inline_data"].as_u64().unwrap_or(0)
            );
        }
    }
    let b = &r["bring_up"];
    println!();
    println!(
        "bring-up: {} firmware commands, ISSI {}, {} boot + {} init pages, {} us wall clock ({} us device time)",
        b["commands"], b["issi"], b["boot_pages"], b["init_pages"], b["wall_us"], b["device_time_us"]
    );
    let m = &r["dma"];
    println!(
        "DMA memory: {} pages lent to the firmware; {} bytes in {} buffers quarantined (the device may still use them: kept mapped, never reused)",
        m["pages_held_by_firmware"], m["quarantined_bytes"], m["quarantined_buffers"]
    );
}

/// Runs `mlx5ctl devinfo`.
pub fn run(a: &Args) -> Result<(), String> {
    let o = a.target.open()?;
    let r = report(&o);
    a.target.close(o)?;
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&r).map_err(|e| e.to_string())?
        );
    } else {
        print_text(&r);
    }
    Ok(())
}
