//! `mlx5ctl size`: the QP sizing calculator — what `create_qp` would grant on a device, or why
//! not, without creating anything. `--batch` sizes JSON lines from stdin.

use std::io::{BufRead, Write};

use clap::Args as ClapArgs;
use mlx5::ifc::prm::caps::CmdHcaCap;
use mlx5::ifc::{Layout, View, ViewMut};
use mlx5::qp::{QpCap, QpType, SendOps, SizingError};
use mlx5::raw::{size_qp, QpLimits, SizeMode, SizedQp};
use serde_json::{json, Value};

use crate::target::profile;

/// The QP a sizing question is about (shared with `create-qp`).
#[derive(ClapArgs, Debug, Clone)]
pub struct QpSpec {
    /// QP type: rc, uc or ud.
    #[arg(long = "type", default_value = "rc", value_parser = parse_type)]
    pub qp_type: QpType,
    /// Receives come from an SRQ (receive attributes are then ignored).
    #[arg(long)]
    pub srq: bool,
    /// Declared send ops, comma-separated (send, send_imm, send_inv, write, write_imm, read,
    /// atomic_cs, atomic_fa, local_inv, bind_mw); default: what ibv_create_qp assumes.
    #[arg(long, value_delimiter = ',', value_parser = parse_op)]
    pub ops: Vec<SendOps>,
    /// max_send_wr.
    #[arg(long, default_value_t = 1)]
    pub send_wr: u32,
    /// max_recv_wr.
    #[arg(long, default_value_t = 1)]
    pub recv_wr: u32,
    /// max_send_sge.
    #[arg(long, default_value_t = 1)]
    pub send_sge: u32,
    /// max_recv_sge.
    #[arg(long, default_value_t = 1)]
    pub recv_sge: u32,
    /// max_inline_data.
    #[arg(long, default_value_t = 0)]
    pub inline: u32,
    /// Grant the most that fits instead of refusing.
    #[arg(long)]
    pub clamp: bool,
}

pub(crate) fn parse_type(s: &str) -> Result<QpType, String> {
    QpType::from_name(s).ok_or_else(|| {
        format!("unknown QP type {s:?} (rc, uc, ud; RD is not offered by any device)")
    })
}

fn parse_op(s: &str) -> Result<SendOps, String> {
    SendOps::from_name(s).ok_or_else(|| {
        let names: Vec<_> = SendOps::NAMED.iter().map(|(n, _)| *n).collect();
        format!("unknown send op {s:?} (known: {})", names.join(", "))
    })
}

impl QpSpec {
    /// The requested caps.
    pub fn cap(&self) -> QpCap {
        QpCap {
            max_send_wr: self.send_wr,
            max_recv_wr: self.recv_wr,
            max_send_sge: self.send_sge,
            max_recv_sge: self.recv_sge,
            max_inline_data: self.inline,
        }
    }

    /// The declared op set (None = the type's default).
    pub fn ops(&self) -> Option<SendOps> {
        (!self.ops.is_empty()).then(|| self.ops.iter().fold(SendOps::empty(), |a, &o| a.union(o)))
    }

    /// Clamp or exact.
    pub fn mode(&self) -> SizeMode {
        if self.clamp {
            SizeMode::Clamp
        } else {
            SizeMode::Exact
        }
    }
}

/// `mlx5ctl size` arguments.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Simulated device: a profile name or a JSON caps file.
    #[arg(long, value_name = "PROFILE|CAPS.json", default_value = "cx5")]
    sim: String,
    #[command(flatten)]
    spec: QpSpec,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Read one JSON request per line from stdin, write one JSON answer per line.
    #[arg(long)]
    batch: bool,
}

/// The limits sizing uses, from a `cmd_hca_cap` image.
pub fn limits_of(cap: &[u8]) -> Result<QpLimits, String> {
    let v = View::<CmdHcaCap>::new(cap).map_err(|e| e.to_string())?;
    Ok(QpLimits {
        max_wqe_sz_sq: v.get(CmdHcaCap::MAX_WQE_SZ_SQ) as u32,
        max_wqe_sz_rq: v.get(CmdHcaCap::MAX_WQE_SZ_RQ) as u32,
        log_max_qp_sz: v.get(CmdHcaCap::LOG_MAX_QP_SZ) as u8,
    })
}

/// The JSON answer for one sizing.
pub fn answer(r: &Result<SizedQp, SizingError>) -> Value {
    match r {
        Ok(s) => json!({
            "ok": true,
            "max_send_wr": s.cap.max_send_wr,
            "max_recv_wr": s.cap.max_recv_wr,
            "max_send_sge": s.cap.max_send_sge,
            "max_recv_sge": s.cap.max_recv_sge,
            "max_inline_data": s.cap.max_inline_data,
            "sq_wqe_bytes": s.layout.sq_wqe_bytes,
            "sq_wqebb_cnt": s.layout.sq_wqebb_cnt,
            "rq_stride_bytes": s.layout.rq_stride_bytes,
            "rq_wqe_cnt": s.layout.rq_wqe_cnt,
        }),
        Err(
            e @ SizingError::TooLarge {
                field,
                requested,
                max,
                limit,
                ..
            },
        ) => json!({
            "ok": false,
            "field": field.name(),
            "requested": requested,
            "max": max,
            "limit": limit.name(),
            "message": e.to_string(),
        }),
        Err(e) => json!({ "ok": false, "field": "send_ops", "message": e.to_string() }),
    }
}

fn refuse(field: &str, message: String) -> Value {
    json!({ "ok": false, "field": field, "message": message })
}

/// The longest request line `--batch` reads; a longer one is refused (and skipped to its end)
/// without being held in memory.
pub const MAX_BATCH_LINE: usize = 64 * 1024;

/// Answers every line of `input` with one JSON line on `out`: a request that is not UTF-8, not
/// JSON, too long or refused gets its own error object, and the batch goes on.
pub fn batch(
    base: &[u8; 256],
    input: &mut impl BufRead,
    out: &mut impl Write,
) -> std::io::Result<()> {
    let mut line = Vec::with_capacity(256);
    loop {
        line.clear();
        let (read, too_long) = read_line_bounded(input, &mut line, MAX_BATCH_LINE)?;
        if read == 0 {
            return Ok(());
        }
        let answer = if too_long {
            refuse(
                "request",
                format!("line longer than {MAX_BATCH_LINE} bytes ({read} read)"),
            )
        } else {
            match std::str::from_utf8(&line) {
                Ok(l) if l.trim().is_empty() => continue,
                Ok(l) => batch_line(base, l),
                Err(e) => refuse("request", format!("not UTF-8: {e}")),
            }
        };
        writeln!(out, "{answer}")?;
    }
}

/// Reads one line (without its `\n`) into `line`, keeping at most `max` bytes; returns the bytes
/// read (0 at the end of input) and whether the line was longer than `max`.
fn read_line_bounded(
    input: &mut impl BufRead,
    line: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<(usize, bool)> {
    let (mut read, mut too_long) = (0usize, false);
    loop {
        let buf = input.fill_buf()?;
        if buf.is_empty() {
            return Ok((read, too_long));
        }
        let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if !too_long && line.len() + chunk.len() <= max {
            line.extend_from_slice(chunk);
        } else {
            too_long = true;
            line.clear();
        }
        let used = done.unwrap_or(buf.len());
        read = read.saturating_add(used);
        input.consume(used);
        if done.is_some() {
            return Ok((read, too_long));
        }
    }
}

/// Answers one `--batch` request line.
pub fn batch_line(base: &[u8; 256], line: &str) -> Value {
    let req: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => return refuse("request", format!("not JSON: {e}")),
    };
    let mut cap = *base;
    if let Some(over) = req.get("caps") {
        let Some(obj) = over.as_object() else {
            return refuse("caps", "caps must be an object".into());
        };
        let Ok(mut v) = ViewMut::<CmdHcaCap>::new(&mut cap) else {
            return refuse("caps", "internal".into());
        };
        for (k, val) in obj {
            let Some(n) = val.as_u64() else {
                return refuse("caps", format!("caps.{k} must be a non-negative integer"));
            };
            match v.set_by_name(k, n) {
                Ok(true) => {}
                Ok(false) => {
                    return refuse(
                        "caps",
                        format!("caps.{k} is not a {} field", CmdHcaCap::NAME),
                    )
                }
                Err(e) => return refuse("caps", e.to_string()),
            }
        }
    }
    let t = match req.get("qp_type").and_then(Value::as_str).map(parse_type) {
        Some(Ok(t)) => t,
        Some(Err(e)) => return refuse("qp_type", e),
        None => return refuse("qp_type", "qp_type is required (rc, uc, ud)".into()),
    };
    let mut ops = None;
    if let Some(list) = req.get("send_ops") {
        let Some(list) = list.as_array() else {
            return refuse("send_ops", "send_ops must be an array".into());
        };
        let mut set = SendOps::empty();
        for o in list {
            match o.as_str().map(parse_op) {
                Some(Ok(op)) => set = set.union(op),
                Some(Err(e)) => return refuse("send_ops", e),
                None => return refuse("send_ops", "send_ops entries are strings".into()),
            }
        }
        ops = Some(set);
    }
    let num = |k: &str| -> Result<u32, Value> {
        match req.get(k) {
            None => Ok(0),
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| refuse(k, format!("{k} must be a 32-bit unsigned integer"))),
        }
    };
    let c = (|| -> Result<QpCap, Value> {
        Ok(QpCap {
            max_send_wr: num("max_send_wr")?,
            max_recv_wr: num("max_recv_wr")?,
            max_send_sge: num("max_send_sge")?,
            max_recv_sge: num("max_recv_sge")?,
            max_inline_data: num("max_inline_data")?,
        })
    })();
    let c = match c {
        Ok(c) => c,
        Err(v) => return v,
    };
    let srq = req.get("srq").and_then(Value::as_bool).unwrap_or(false);
    let mode = if req.get("clamp").and_then(Value::as_bool).unwrap_or(false) {
        SizeMode::Clamp
    } else {
        SizeMode::Exact
    };
    let limits = match limits_of(&cap) {
        Ok(l) => l,
        Err(e) => return refuse("caps", e),
    };
    answer(&size_qp(
        &limits,
        t,
        ops.unwrap_or(SendOps::default_for(t)),
        srq,
        &c,
        mode,
    ))
}

/// Runs `mlx5ctl size`.
pub fn run(a: &Args) -> Result<(), String> {
    let prof = profile(&a.sim)?;
    let base = *prof.hca_cap_max();
    if a.batch {
        let mut out = std::io::stdout().lock();
        return batch(&base, &mut std::io::stdin().lock(), &mut out)
            .map_err(|e| format!("--batch: {e}"));
    }
    let limits = limits_of(&base)?;
    let t = a.spec.qp_type;
    let r = size_qp(
        &limits,
        t,
        a.spec.ops().unwrap_or(SendOps::default_for(t)),
        a.spec.srq,
        &a.spec.cap(),
        a.spec.mode(),
    );
    if a.json {
        println!("{}", answer(&r));
    } else if let Ok(s) = &r {
        println!(
            "{} QP on {} (max_wqe_sz_sq {}, max_wqe_sz_rq {}, log_max_qp_sz {}):",
            t.name(),
            prof.name(),
            limits.max_wqe_sz_sq,
            limits.max_wqe_sz_rq,
            limits.log_max_qp_sz
        );
        print_sized(s);
    }
    r.map(drop).map_err(|e| format!("refused: {e}"))
}

/// Prints granted caps and layout as text.
pub fn print_sized(s: &SizedQp) {
    let c = s.cap;
    let l = s.layout;
    println!("  granted   max_send_wr {}  max_recv_wr {}  max_send_sge {}  max_recv_sge {}  max_inline_data {}", c.max_send_wr, c.max_recv_wr, c.max_send_sge, c.max_recv_sge, c.max_inline_data);
    println!(
        "  send WQE  {} bytes ({} WQEBBs of 64), overhead {} bytes",
        l.sq_wqe_bytes,
        l.sq_wqe_bytes / 64,
        l.sq_overhead
    );
    println!(
        "  SQ        {} WQEBBs = {} bytes",
        l.sq_wqebb_cnt,
        l.sq_bytes()
    );
    println!(
        "  RQ        {} WQEs x {} bytes = {} bytes",
        l.rq_wqe_cnt,
        l.rq_stride_bytes,
        l.rq_bytes()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_batch(input: &[u8]) -> Vec<Value> {
        let base = *mlx5_sim::Profile::connectx5().hca_cap_max();
        let mut out = Vec::new();
        batch(&base, &mut &input[..], &mut out).unwrap();
        String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn a_bad_line_is_answered_alone_and_the_batch_goes_on() {
        let good = br#"{"qp_type":"rc","max_send_wr":2,"max_recv_wr":2,"max_send_sge":1,"max_recv_sge":1}"#;
        let mut input = Vec::new();
        input.extend_from_slice(good);
        input.extend_from_slice(b"\n\xff\xfe not utf-8\n\n");
        input.extend(std::iter::repeat_n(b'x', MAX_BATCH_LINE + 10));
        input.push(b'\n');
        input.extend_from_slice(good);
        let r = run_batch(&input);
        assert_eq!(r.len(), 4, "{r:?}");
        assert_eq!(r[0]["ok"], true);
        assert!(
            r[1]["message"].as_str().unwrap().contains("UTF-8"),
            "{}",
            r[1]
        );
        assert!(
            r[2]["message"].as_str().unwrap().contains("longer than"),
            "{}",
            r[2]
        );
        assert_eq!(r[3]["ok"], true, "the batch goes on after both");
    }

    #[test]
    fn the_last_line_needs_no_newline() {
        let r = run_batch(br#"{"qp_type":"ud","max_send_wr":1,"max_recv_wr":1,"max_send_sge":1,"max_recv_sge":1}"#);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0]["ok"], true, "{}", r[0]);
    }
}
