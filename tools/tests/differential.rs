//! Issue #11 item 6: a differential against the reference driver. The same verbs requests made
//! once by unmodified rdma-core (`ibv_rc_pingpong`, `ibv_uc_pingpong`, `ibv_ud_pingpong` and
//! `ibv_srq_pingpong` of rdma-core 56.1, through Linux 6.1's mlx5_ib, on the simulated
//! ConnectX-5 in `tests/linux-on-sim`) and once by this driver on the simulator; the commands
//! each produced — CREATE_MKEY (one page and four), CREATE_CQ, CREATE_RMP, CREATE_QP (RC, UC, UD,
//! RC on an SRQ), RST2INIT, INIT2RTR, RTR2RTS — are compared field by field with the `mlx5_ifc`
//! layouts.
//!
//! Theirs are the commands the simulator recorded in that run, kept in
//! `tests/data/rdma-core-pingpong.jsonl` (`tests/linux-on-sim/run.sh` with `TRAFFIC=1` writes
//! them again to `target/linux-on-sim/rdma-core-pingpong.jsonl`). Fields that name objects or
//! addresses (QP, CQ, PD, UAR and EQ numbers, doorbell and buffer addresses, PSNs, the peer's
//! MAC and GID) are not compared. Every other field that differs must be a row of the table
//! *Differential against rdma-core* in `docs/fields.md`, with its reason; a row whose field no
//! longer differs fails too.

use std::collections::BTreeMap;

use mlx5::mr::MrAccess;
use mlx5::qp::{Access, AhAttr, Mtu, QpAttr, QpAttrMask, QpCap, QpInitAttr, QpState, QpType};
use mlx5::srq::SrqAttr;
use mlx5::{Device, DeviceConfig, SimPlatform};
use mlx5_ifc::prm::cq::{Cqc, CreateCqIn};
use mlx5_ifc::prm::mr::{CreateMkeyIn, Mkc};
use mlx5_ifc::prm::qp::{Ads, CreateQpIn, Init2rtrQpIn, Qpc, Rst2initQpIn, Rtr2rtsQpIn};
use mlx5_ifc::prm::srq::{CreateRmpIn, CreateSrqIn, Rmpc, Srqc, Wq};
use mlx5_ifc::{FieldKind, Layout, Opcode, View};
use mlx5_sim::{Mode, Profile, SimDevice};

/// Fields that name objects, addresses or per-run values: never compared.
const IDENTITY: &[&str] = &[
    "qpn",
    "mkey_7_0",
    "pd",
    "start_addr",
    "uar_page",
    "c_eqn_or_apu_element",
    "dbr_addr",
    "cqn_snd",
    "cqn_rcv",
    "remote_qpn",
    "next_rcv_psn",
    "next_send_psn",
    "rmac_47_32",
    "rmac_31_0",
    "rgid_rip",
    "counter_set_id",
    "page_offset",
    "log_page_size@qpc",
    "user_index",
    // The user context a command runs in: rdma-core asks for a DevX context on every open,
    // so Linux's mlx5_ib puts that context's uid on the user's objects; this driver owns the
    // device as mlx5_core does and runs as the kernel's uid 0 (docs/fields.md, "DevX").
    "uid",
];

struct Cmd {
    scenario: String,
    name: String,
    input: Vec<u8>,
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

fn field<'a>(line: &'a str, key: &str) -> &'a str {
    let k = format!("\"{key}\": ");
    let at = line.find(&k).unwrap_or_else(|| panic!("{key} in {line}")) + k.len();
    let rest = &line[at..];
    let rest = rest.strip_prefix('"').unwrap_or(rest);
    let end = rest.find(['"', ',', '}']).unwrap();
    &rest[..end]
}

/// rdma-core's commands: the committed fixture, or the file `MLX5_DIFF_FIXTURE` names (a fresh
/// capture of `tests/linux-on-sim/run.sh` with `TRAFFIC=1`).
fn theirs() -> Vec<Cmd> {
    let text = match std::env::var("MLX5_DIFF_FIXTURE") {
        Ok(path) => std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}")),
        Err(_) => include_str!("data/rdma-core-pingpong.jsonl").to_string(),
    };
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| Cmd {
            scenario: field(l, "scenario").to_string(),
            name: field(l, "name").to_string(),
            input: unhex(field(l, "input")),
        })
        .collect()
}

/// One pingpong's verbs requests, as its source in rdma-core 56.1 makes them
/// (`libibverbs/examples/*_pingpong.c`, the options `tests/linux-on-sim/guest-init.sh` gives).
struct Scenario {
    name: &'static str,
    qp_type: QpType,
    /// `ibv_reg_mr(pd, buf, size, IBV_ACCESS_LOCAL_WRITE)`: the buffer's size.
    mr_len: usize,
    /// `ibv_create_cq(ctx, cqe)`.
    cqe: u32,
    /// `ibv_create_srq` with `max_wr` (and `max_sge` 1), shared by `qps` RC QPs.
    srq: Option<u32>,
    qps: usize,
}

const SCENARIOS: &[Scenario] = &[
    // ibv_rc_pingpong -n 20: a page, rx_depth 500.
    Scenario {
        name: "rc",
        qp_type: QpType::Rc,
        mr_len: 4096,
        cqe: 501,
        srq: None,
        qps: 1,
    },
    // ibv_uc_pingpong -s 16384: a four-page MR.
    Scenario {
        name: "uc",
        qp_type: QpType::Uc,
        mr_len: 16384,
        cqe: 501,
        srq: None,
        qps: 1,
    },
    // ibv_ud_pingpong -s 512: the message and its 40-byte GRH.
    Scenario {
        name: "ud",
        qp_type: QpType::Ud,
        mr_len: 552,
        cqe: 501,
        srq: None,
        qps: 1,
    },
    // ibv_srq_pingpong -q 2: one SRQ of 500 receives, a CQ of rx_depth + num_qp.
    Scenario {
        name: "srq",
        qp_type: QpType::Rc,
        mr_len: 4096,
        cqe: 502,
        srq: Some(500),
        qps: 2,
    },
];

/// The commands of one scenario, in the order they were sent.
const COMPARED: &[Opcode] = &[
    Opcode::CreateMkey,
    Opcode::CreateCq,
    Opcode::CreateSrq,
    Opcode::CreateRmp,
    Opcode::CreateQp,
    Opcode::Rst2InitQp,
    Opcode::Init2RtrQp,
    Opcode::Rtr2RtsQp,
];

/// The same requests through this driver on the simulator.
fn ours() -> Vec<Cmd> {
    SCENARIOS.iter().flat_map(run_scenario).collect()
}

/// `MLX5_DIFF_VF=1`: the fixture was captured on ConnectX-5 virtual functions (linux-on-sim
/// `VF=1`), so this driver runs on one too, and the VF's own table of differences applies as
/// well.
fn on_vf() -> bool {
    std::env::var("MLX5_DIFF_VF").is_ok_and(|v| v == "1")
}

fn run_scenario(s: &Scenario) -> Vec<Cmd> {
    let profile = if on_vf() {
        Profile::connectx5().as_vf(true)
    } else {
        Profile::connectx5()
    };
    let sim = SimDevice::new(profile, Mode::Sync);
    let dev = Device::open(SimPlatform::new(sim.clone()), DeviceConfig::default()).unwrap();
    let first = sim.trace().len();
    let pd = dev.pd();
    let (rc, ud) = (s.qp_type == QpType::Rc, s.qp_type == QpType::Ud);
    let local = MrAccess {
        local_write: true,
        ..MrAccess::default()
    };
    let _mr = dev.alloc_mr(pd, s.mr_len, local).unwrap();
    let cq = dev.create_cq(s.cqe).unwrap();
    let srq = s.srq.map(|max_wr| {
        let attr = SrqAttr {
            max_wr,
            max_sge: 1,
            srq_limit: 0,
        };
        dev.create_srq(pd, &attr).unwrap()
    });
    // The pingpongs' caps; with an SRQ only the send side is asked for.
    let cap = QpCap {
        max_send_wr: 1,
        max_recv_wr: if srq.is_some() { 0 } else { 500 },
        max_send_sge: 1,
        max_recv_sge: if srq.is_some() { 0 } else { 1 },
        max_inline_data: 0,
    };
    let mut qps = Vec::new();
    for _ in 0..s.qps {
        let mut init_attr = QpInitAttr::new(s.qp_type, &cq, &cq, cap);
        init_attr.srq = srq.as_ref();
        qps.push(dev.create_qp(pd, &init_attr).unwrap());
    }
    let m = QpAttrMask::STATE;
    let init = QpAttr {
        qp_state: Some(QpState::Init),
        pkey_index: 0,
        port_num: 1,
        qkey: 0x1111_1111,
        access: Access::default(),
        ..QpAttr::default()
    };
    let init_mask = m
        | QpAttrMask::PKEY_INDEX
        | QpAttrMask::PORT
        | if ud {
            QpAttrMask::QKEY
        } else {
            QpAttrMask::ACCESS_FLAGS
        };
    let mut dgid = [0u8; 16];
    dgid[..2].copy_from_slice(&[0xfe, 0x80]);
    dgid[8..].copy_from_slice(&[0x00, 0xc5, 0x5a, 0xff, 0xfe, 0x00, 0x01, 0x01]);
    let rtr = QpAttr {
        qp_state: Some(QpState::Rtr),
        path_mtu: Mtu::Mtu1024,
        dest_qp_num: 0x103,
        rq_psn: 0x4f_c73b,
        max_dest_rd_atomic: 1,
        min_rnr_timer: 12,
        ah_attr: AhAttr {
            // The RoCE v2 GID: the simulator's index 0 (Linux's table lists each address as
            // RoCE v1 at index 0 and v2 at 1; the pingpongs ran with -g 1).
            sgid_index: 0,
            dgid,
            dmac: [0x02, 0xc5, 0x5a, 0x00, 0x01, 0x01],
            hop_limit: 1,
            ..AhAttr::default()
        },
        ..QpAttr::default()
    };
    let connected =
        m | QpAttrMask::AV | QpAttrMask::PATH_MTU | QpAttrMask::DEST_QPN | QpAttrMask::RQ_PSN;
    let rtr_mask = match s.qp_type {
        QpType::Ud => m,
        QpType::Uc => connected,
        _ => connected | QpAttrMask::MAX_DEST_RD_ATOMIC | QpAttrMask::MIN_RNR_TIMER,
    };
    let rts = QpAttr {
        qp_state: Some(QpState::Rts),
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        sq_psn: 0x94_dbed,
        max_rd_atomic: 1,
        ..QpAttr::default()
    };
    let rts_mask = if rc {
        m | QpAttrMask::TIMEOUT
            | QpAttrMask::RETRY_CNT
            | QpAttrMask::RNR_RETRY
            | QpAttrMask::SQ_PSN
            | QpAttrMask::MAX_QP_RD_ATOMIC
    } else {
        m | QpAttrMask::SQ_PSN
    };
    // The pingpongs move each QP to INIT when it is made, and to RTR and RTS once connected.
    for qp in &mut qps {
        qp.modify(&init, init_mask).unwrap();
    }
    for qp in &mut qps {
        qp.modify(&rtr, rtr_mask).unwrap();
        qp.modify(&rts, rts_mask).unwrap();
    }
    let out = sim.trace()[first..]
        .iter()
        .filter(|r| r.status == 0 && COMPARED.iter().any(|op| *op as u16 == r.opcode))
        .map(|r| Cmd {
            scenario: s.name.to_string(),
            name: Opcode::from_u16(r.opcode)
                .map_or("?", |o| o.name())
                .to_string(),
            input: r.input.clone(),
        })
        .collect();
    drop(qps);
    drop(srq);
    drop(cq);
    out
}

/// Every value field of `L` in `bytes`, named `prefix.field`.
fn values<L: Layout>(prefix: &str, bytes: &[u8], out: &mut BTreeMap<String, String>) {
    let Ok(v) = View::<L>::new(bytes) else {
        out.insert(format!("{prefix}(length)"), bytes.len().to_string());
        return;
    };
    for f in L::FIELDS {
        let key = format!("{prefix}.{}", f.name);
        match f.kind {
            FieldKind::Value => {
                let x = v.get_by_name(f.name).unwrap_or(0);
                out.insert(key, format!("{x:#x}"));
            }
            FieldKind::Bytes if f.width > 0 && f.width <= 256 => {
                let (a, n) = (f.byte_offset(), (f.width / 8) as usize);
                let b = bytes.get(a..a + n).unwrap_or(&[]);
                out.insert(key, b.iter().map(|x| format!("{x:02x}")).collect());
            }
            _ => {}
        }
    }
}

/// Decodes a command's header fields into a map.
type Decoder = fn(&[u8], &mut BTreeMap<String, String>);

/// The compared fields of one command.
fn decode(c: &Cmd) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    let i = &c.input;
    let sub = |n: usize| i.get(n..).unwrap_or(&[]);
    match c.name.as_str() {
        "CREATE_MKEY" => {
            values::<CreateMkeyIn>("in", i, &mut m);
            values::<Mkc>(
                "mkc",
                sub(CreateMkeyIn::MEMORY_KEY_MKEY_ENTRY.offset()),
                &mut m,
            );
        }
        "CREATE_CQ" => {
            values::<CreateCqIn>("in", i, &mut m);
            values::<Cqc>("cqc", sub(CreateCqIn::CQ_CONTEXT.offset()), &mut m);
        }
        "CREATE_RMP" => {
            values::<CreateRmpIn>("in", i, &mut m);
            let r = CreateRmpIn::CTX.offset();
            values::<Rmpc>("rmpc", sub(r), &mut m);
            values::<Wq>("wq", sub(r + Rmpc::WQ.offset()), &mut m);
        }
        "CREATE_SRQ" => {
            values::<CreateSrqIn>("in", i, &mut m);
            values::<Srqc>("srqc", sub(CreateSrqIn::SRQ_CONTEXT_ENTRY.offset()), &mut m);
        }
        "CREATE_QP" => {
            values::<CreateQpIn>("in", i, &mut m);
            values::<Qpc>("qpc", sub(CreateQpIn::QPC.offset()), &mut m);
            // With receives from an SRQ (`rq_type` 1) the field names that SRQ: an object.
            if m.get("qpc.rq_type").map(String::as_str) == Some("0x1") {
                m.remove("qpc.srqn_rmpn_xrqn");
            }
        }
        name => {
            let (q, hdr): (usize, Decoder) = match name {
                "RST2INIT_QP" => (Rst2initQpIn::QPC.offset(), |b, m| {
                    values::<Rst2initQpIn>("in", b, m)
                }),
                "INIT2RTR_QP" => (Init2rtrQpIn::QPC.offset(), |b, m| {
                    values::<Init2rtrQpIn>("in", b, m)
                }),
                _ => (Rtr2rtsQpIn::QPC.offset(), |b, m| {
                    values::<Rtr2rtsQpIn>("in", b, m)
                }),
            };
            hdr(i, &mut m);
            values::<Qpc>("qpc", sub(q), &mut m);
            values::<Ads>("ads", sub(q + Qpc::PRIMARY_ADDRESS_PATH.offset()), &mut m);
        }
    }
    // The RoCE v2 UDP source port: both drivers derive it from QP numbers (objects), by
    // different functions, into the range 0xc000..=0xffff (review row 14). Compared as that
    // class: in the range, or 0 (no UDP header: a RoCE v1 path).
    if let Some(v) = m.get_mut("ads.udp_sport") {
        let port = u64::from_str_radix(v.trim_start_matches("0x"), 16).unwrap_or(0);
        *v = match port {
            0 => "0".into(),
            0xc000..=0xffff => "0xc000..=0xffff".into(),
            _ => v.clone(),
        };
    }
    m.retain(|k, _| {
        let f = k.rsplit('.').next().unwrap_or(k);
        let scoped = format!("{f}@{}", k.split('.').next().unwrap_or(""));
        !f.starts_with("reserved") && !IDENTITY.contains(&f) && !IDENTITY.contains(&scoped.as_str())
    });
    m
}

/// The documented differences: `(scenario, command, field) → (theirs, ours)` from the table in
/// docs/fields.md (a row's first cell may list several scenarios: `` `rc`, `uc` ``; its "ours"
/// cell several values: `` `0x1` or `0x2` ``).
fn documented() -> BTreeMap<(String, String, String), (String, String)> {
    let mut out = table("# Differential against rdma-core\n");
    if on_vf() {
        out.extend(table("# Differential against rdma-core on a VF\n"));
    }
    out
}

/// The rows of the docs/fields.md section headed `heading`.
fn table(heading: &str) -> BTreeMap<(String, String, String), (String, String)> {
    let doc = include_str!("../../docs/fields.md");
    let start = doc
        .find(heading)
        .unwrap_or_else(|| panic!("docs/fields.md has a section {heading:?}"));
    let section = &doc[start..];
    let end = section[1..].find("\n# ").map_or(section.len(), |e| e + 1);
    // `a` or `b` in the "ours" cell: either value (one per QP of a scenario).
    let cell = |c: &str| c.trim().replace('`', "");
    let mut out = BTreeMap::new();
    for l in section[..end].lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = l.split('|').collect();
        for scenario in cells[1].split(',') {
            out.insert(
                (cell(scenario), cell(cells[2]), cell(cells[3])),
                (cell(cells[4]), cell(cells[5])),
            );
        }
    }
    out
}

#[test]
fn rdma_core_and_this_driver_program_the_same_fields() {
    let (theirs, ours) = (theirs(), ours());
    for s in SCENARIOS {
        assert!(
            theirs
                .iter()
                .any(|t| t.scenario == s.name && t.name == "CREATE_QP"),
            "fixture: no CREATE_QP of rdma-core's {} scenario",
            s.name
        );
    }
    // Every differing value of a field (a scenario with two QPs may differ twice).
    let mut found: BTreeMap<(String, String, String), Vec<(String, String)>> = BTreeMap::new();
    let mut compared = 0;
    // The k-th command of a name in a scenario against our k-th.
    let mut seen: BTreeMap<(String, String), usize> = BTreeMap::new();
    for t in &theirs {
        let k = seen
            .entry((t.scenario.clone(), t.name.clone()))
            .or_default();
        let o = ours
            .iter()
            .filter(|o| o.scenario == t.scenario && o.name == t.name)
            .nth(*k)
            .unwrap_or_else(|| panic!("{} {} #{k}: none of ours", t.scenario, t.name));
        *k += 1;
        let (a, b) = (decode(t), decode(o));
        for (k, va) in &a {
            compared += 1;
            let vb = b.get(k).cloned().unwrap_or_default();
            if *va != vb {
                found
                    .entry((t.scenario.clone(), t.name.clone(), k.clone()))
                    .or_default()
                    .push((va.clone(), vb));
            }
        }
    }
    // Every command of ours has its counterpart (no CREATE_SRQ where they sent CREATE_RMP). A
    // live capture on the real profile has no CREATE_MKEY: mlx5_ib registered the buffers with
    // UMR WQEs on keys of its MR cache (no command); the committed fixture, captured with
    // UMR=0, has them.
    let live = std::env::var("MLX5_DIFF_FIXTURE").is_ok();
    for o in &ours {
        let by_umr = |v: &Vec<Cmd>| {
            !v.iter()
                .any(|c| c.scenario == o.scenario && c.name == "CREATE_MKEY")
        };
        if live && o.name == "CREATE_MKEY" && by_umr(&theirs) {
            continue;
        }
        let n = |v: &Vec<Cmd>| {
            v.iter()
                .filter(|c| c.scenario == o.scenario && c.name == o.name)
                .count()
        };
        assert_eq!(
            n(&ours),
            n(&theirs),
            "{} {}: we sent it {} times, rdma-core {}",
            o.scenario,
            o.name,
            n(&ours),
            n(&theirs)
        );
    }
    let documented = documented();
    let undocumented: Vec<_> = found
        .iter()
        .flat_map(|(k, vals)| vals.iter().map(move |v| (k, v)))
        .filter(|(k, (t, o))| {
            documented
                .get(*k)
                .is_none_or(|(dt, dos)| dt != t || !dos.split(" or ").any(|d| d == o))
        })
        .map(|((s, c, f), (t, o))| format!("| `{s}` | `{c}` | `{f}` | `{t}` | `{o}` | … |"))
        .collect();
    let registered = |scenario: &str| {
        theirs
            .iter()
            .any(|c| c.scenario == scenario && c.name == "CREATE_MKEY")
    };
    let stale: Vec<_> = documented
        .keys()
        .filter(|k| !found.contains_key(*k))
        .filter(|(s, c, _)| c != "CREATE_MKEY" || registered(s))
        .map(|(s, c, f)| format!("{s} {c} {f}"))
        .collect();
    eprintln!(
        "differential: {compared} fields compared, {} differ, all documented: {}",
        found.len(),
        undocumented.is_empty()
    );
    assert!(
        undocumented.is_empty() && stale.is_empty(),
        "differences not in docs/fields.md (or with other values):\n{}\ndocumented but no longer different:\n{}",
        undocumented.join("\n"),
        stale.join("\n")
    );
}
