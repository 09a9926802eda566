//! What the simulated firmware executed for the demo's QPs, from its command trace: the QP
//! commands of each QP with the service type its CREATE_QP gave it (`qpc.st`), printed and
//! checked, and the `--trace` file, whose QP command lines carry that type.

use std::collections::HashMap;
use std::io::Write as _;

use mlx5::ifc::consts::qp_st;
use mlx5::ifc::prm::qp::{CreateQpIn, CreateQpOut, DestroyQpIn, Qpc};
use mlx5::ifc::{opcode_name, Opcode, View};
use mlx5::qp::QpType;
use mlx5::sim::TraceRecord;

/// The commands a firmware executed for one QP.
#[derive(Debug)]
struct QpLog {
    /// The service type CREATE_QP gave it (`qpc.st`).
    st: Option<u64>,
    /// The commands by name, with their status, in order.
    cmds: Vec<(&'static str, u8)>,
}

/// Whether `opcode` is a QP command.
fn is_qp_command(opcode: u16) -> bool {
    use Opcode as O;
    matches!(
        O::from_u16(opcode),
        Some(
            O::CreateQp
                | O::DestroyQp
                | O::Rst2InitQp
                | O::Init2RtrQp
                | O::Rtr2RtsQp
                | O::Rts2RtsQp
                | O::Sqerr2RtsQp
                | O::Qp2Err
                | O::Qp2Rst
                | O::QueryQp
                | O::SqdRtsQp
                | O::Init2InitQp
        )
    )
}

/// The QP a traced QP command acts on: CREATE_QP's output names it, every other QP command's
/// input names it in the same place (bit 0x48, as DESTROY_QP's `qpn`).
fn qpn_of(r: &TraceRecord) -> Option<u32> {
    if !is_qp_command(r.opcode) {
        return None;
    }
    if r.opcode == Opcode::CreateQp as u16 {
        let v = View::<CreateQpOut>::new(&r.output).ok()?;
        (r.status == 0).then(|| v.get32(CreateQpOut::QPN))
    } else {
        Some(
            View::<DestroyQpIn>::new(&r.input)
                .ok()?
                .get32(DestroyQpIn::QPN),
        )
    }
}

/// Every QP of a trace, in the order of their CREATE_QP, with its QPN, service type and
/// commands; and for each record, the service type of the QP it acts on (a QPN created again
/// after a DESTROY_QP is another QP).
fn qp_logs(trace: &[TraceRecord]) -> (Vec<(u32, QpLog)>, Vec<Option<u64>>) {
    let mut logs: Vec<(u32, QpLog)> = Vec::new();
    let mut live: HashMap<u32, usize> = HashMap::new();
    let mut types = Vec::with_capacity(trace.len());
    for r in trace {
        let Some(qpn) = qpn_of(r) else {
            types.push(None);
            continue;
        };
        if r.opcode == Opcode::CreateQp as u16 {
            let st = View::<CreateQpIn>::new(&r.input)
                .ok()
                .map(|v| v.nested(CreateQpIn::QPC).get(Qpc::ST));
            live.insert(qpn, logs.len());
            logs.push((
                qpn,
                QpLog {
                    st,
                    cmds: Vec::new(),
                },
            ));
        }
        // Commands of a QP created before the trace's first record have no type.
        let log = live.get(&qpn).map(|&i| &mut logs[i].1);
        types.push(log.as_ref().and_then(|l| l.st));
        if let Some(l) = log {
            l.cmds.push((opcode_name(r.opcode), r.status));
        }
    }
    (logs, types)
}

/// `qpc.st` as `--type` names it.
fn st_name(st: u64) -> &'static str {
    match st {
        qp_st::RC => "rc",
        qp_st::UC => "uc",
        qp_st::UD => "ud",
        qp_st::XRC => "xrc",
        _ => "?",
    }
}

/// Prints the QP commands of `nic`'s firmware and checks that its QPs, of type `t`, went through
/// RST2INIT, INIT2RTR and RTR2RTS, each completing with status OK.
pub(super) fn firmware_transitions(
    nic: &str,
    trace: &[TraceRecord],
    t: QpType,
) -> Result<(), String> {
    let (logs, _) = qp_logs(trace);
    let ours: Vec<_> = logs
        .iter()
        .filter(|(_, l)| l.st.map(st_name) == Some(t.name()))
        .collect();
    if ours.is_empty() {
        return Err(format!("{nic}'s firmware created no {} QP", t.name()));
    }
    for (qpn, l) in ours {
        let names: Vec<String> = l
            .cmds
            .iter()
            .map(|&(n, s)| match s {
                0 => n.to_string(),
                s => format!("{n} (status {s:#x})"),
            })
            .collect();
        println!(
            "{nic} firmware, {} QP {qpn:#x}: {}",
            t.name().to_uppercase(),
            names.join(", ")
        );
        // The three transitions, in this order, each with status OK.
        let mut done = l.cmds.iter().filter(|c| c.1 == 0).map(|c| c.0);
        for step in ["RST2INIT_QP", "INIT2RTR_QP", "RTR2RTS_QP"] {
            if !done.any(|n| n == step) {
                return Err(format!(
                    "{nic}'s firmware did not run {step} (after the steps before it) for QP \
                     {qpn:#x}"
                ));
            }
        }
    }
    Ok(())
}

/// Writes `trace` as JSON lines ([`TraceRecord::to_json_line`]), each QP command with the type
/// of its QP (`"qp_type":"ud"`, from the `qpc.st` of its CREATE_QP).
pub(super) fn write_trace(
    trace: &[TraceRecord],
    w: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    let (_, types) = qp_logs(trace);
    let mut w = std::io::BufWriter::new(w);
    for (r, st) in trace.iter().zip(types) {
        let line = r.to_json_line();
        match (st, line.strip_suffix('}')) {
            (Some(st), Some(open)) => writeln!(w, "{open},\"qp_type\":\"{}\"}}", st_name(st))?,
            _ => writeln!(w, "{line}")?,
        }
    }
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use mlx5::qp::{ConnectOpts, QpCap, QpInitAttr};
    use mlx5::sim::{Mode, Profile, SimDevice};
    use mlx5::{Device, DeviceConfig, SimPlatform};
    use serde_json::Value;

    #[test]
    fn each_qp_command_carries_its_qps_type_and_a_missing_transition_is_an_error() {
        let sim = SimDevice::new(Profile::connectx5(), Mode::Sync);
        let dev = Device::open(SimPlatform::new(sim.clone()), DeviceConfig::default()).unwrap();
        let cq = dev.create_cq(16).unwrap();
        let c = QpCap {
            max_send_wr: 4,
            max_recv_wr: 4,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        let pd = dev.pd();
        let mut rc = dev
            .create_qp(pd, &QpInitAttr::new(QpType::Rc, &cq, &cq, c))
            .unwrap();
        // Created, never connected.
        let ud = dev
            .create_qp(pd, &QpInitAttr::new(QpType::Ud, &cq, &cq, c))
            .unwrap();
        let me = rc.endpoint();
        rc.connect(&me, &ConnectOpts::default()).unwrap();
        drop((rc, ud));
        let trace = sim.trace();

        assert_eq!(firmware_transitions("NIC", &trace, QpType::Rc), Ok(()));
        let err = firmware_transitions("NIC", &trace, QpType::Ud).unwrap_err();
        assert!(err.contains("did not run RST2INIT_QP"), "{err}");
        let err = firmware_transitions("NIC", &trace, QpType::Uc).unwrap_err();
        assert!(err.contains("created no uc QP"), "{err}");

        let mut out = Vec::new();
        write_trace(&trace, &mut out).unwrap();
        let lines: Vec<Value> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), trace.len());
        let typed = |t: &str| -> Vec<&str> {
            lines
                .iter()
                .filter(|l| l["qp_type"] == t)
                .map(|l| l["name"].as_str().unwrap())
                .collect()
        };
        assert_eq!(
            typed("rc"),
            [
                "CREATE_QP",
                "RST2INIT_QP",
                "INIT2RTR_QP",
                "RTR2RTS_QP",
                "DESTROY_QP"
            ]
        );
        assert_eq!(typed("ud"), ["CREATE_QP", "DESTROY_QP"]);
        let untyped = lines.iter().filter(|l| l.get("qp_type").is_none()).count();
        assert_eq!(untyped, lines.len() - 7, "only QP commands carry a type");
    }
}
