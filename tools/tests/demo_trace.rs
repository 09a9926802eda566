//! Issue #10: the command trace of `mlx5ctl demo --type rc|uc|ud --trace F` shows, for every
//! row of the Linux-semantics review that a command carries, the value Linux's mlx5 drivers and
//! rdma-core write (docs/fields.md). The trace is the simulated device's own record of what it
//! received, decoded here with the `mlx5_ifc` layouts.

use std::process::Command;

use mlx5_ifc::consts::{atomic_caps, cap_type, pm_state};
use mlx5_ifc::prm::caps::{AtomicCaps, CmdHcaCap, RoceCap};
use mlx5_ifc::prm::eq::CreateEqIn;
use mlx5_ifc::prm::hca::{InitHcaIn, SetHcaCapIn};
use mlx5_ifc::prm::mr::{CreateMkeyIn, Mkc};
use mlx5_ifc::prm::qp::{Ads, Init2rtrQpIn, Qpc, Rst2initQpIn, Rtr2rtsQpIn, Rts2rtsQpIn};
use mlx5_ifc::prm::srq::{CreateRmpIn, Rmpc, Wq};
use mlx5_ifc::prm::vport::SetRoceAddressIn;
use mlx5_ifc::{event, Layout, Nested, Opcode, View};

struct Rec {
    opcode: u16,
    op_mod: u16,
    input: Vec<u8>,
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

/// Runs the demo of `kind` with a small workload and returns its successful commands.
fn trace(kind: &str) -> Vec<Rec> {
    let dir = std::env::temp_dir().join(format!("mlx5-demo-trace-{}-{kind}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("trace.jsonl");
    let out = Command::new(env!("CARGO_BIN_EXE_mlx5ctl"))
        .args([
            "demo",
            "--type",
            kind,
            "--messages",
            "64",
            "--pings",
            "4",
            "--trace",
        ])
        .arg(&file)
        .output()
        .expect("run mlx5ctl");
    assert!(
        out.status.success(),
        "demo --type {kind} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    text.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["status"] == 0)
        .map(|v| Rec {
            opcode: u16::from_str_radix(v["opcode"].as_str().unwrap().trim_start_matches("0x"), 16)
                .unwrap(),
            op_mod: v["op_mod"].as_u64().unwrap() as u16,
            input: unhex(v["input"].as_str().unwrap()),
        })
        .collect()
}

fn of(t: &[Rec], op: Opcode) -> impl Iterator<Item = &Rec> {
    t.iter().filter(move |r| r.opcode == op as u16)
}

fn view<L: Layout>(r: &Rec) -> View<'_, L> {
    View::<L>::new(&r.input).expect("a whole command input")
}

fn qpc<L: Layout>(r: &Rec, n: Nested<L, Qpc>) -> View<'_, Qpc> {
    View::<L>::new(&r.input).unwrap().nested(n)
}

/// The rows every transport's trace shows (bring-up, memory registration, QP transitions).
fn common_rows(kind: &str, t: &[Rec]) {
    // Row 0 and 6: mkc.log_page_size is absolute (≥ 12); the MTT is whole octwords.
    let mkeys: Vec<&Rec> = of(t, Opcode::CreateMkey).collect();
    assert!(!mkeys.is_empty(), "{kind}: memory is registered");
    for r in mkeys {
        let v = view::<CreateMkeyIn>(r);
        let m = v.nested(CreateMkeyIn::MEMORY_KEY_MKEY_ENTRY);
        assert!(m.get(Mkc::LOG_PAGE_SIZE) >= 12, "{kind}: row 0");
        let oct = v.get(CreateMkeyIn::TRANSLATIONS_OCTWORD_ACTUAL_SIZE) as usize;
        assert_eq!(
            r.input.len(),
            CreateMkeyIn::BYTES + 16 * oct,
            "{kind}: row 6"
        );
    }
    // Rows 4, 5, 14: capability negotiation.
    let caps = |kind_: u16| {
        of(t, Opcode::SetHcaCap)
            .filter(|r| r.op_mod >> 1 == kind_)
            .map(|r| {
                let at = SetHcaCapIn::CAPABILITY.offset();
                r.input[at..at + 256].to_vec()
            })
            .last()
    };
    let general = caps(cap_type::GENERAL).expect("SET_HCA_CAP general");
    let g = View::<CmdHcaCap>::new(&general).unwrap();
    assert_eq!(
        g.get(CmdHcaCap::ROCE),
        1,
        "{kind}: row 5 (roce_rw_supported: set)"
    );
    let atomic = caps(cap_type::ATOMIC).expect("row 4: SET_HCA_CAP atomic");
    assert_eq!(
        View::<AtomicCaps>::new(&atomic)
            .unwrap()
            .get(AtomicCaps::ATOMIC_REQ_8B_ENDIANNESS_MODE),
        atomic_caps::REQ_ENDIANNESS_HOST,
        "{kind}: row 4"
    );
    let roce = caps(cap_type::ROCE).expect("row 14: SET_HCA_CAP RoCE");
    assert_eq!(
        View::<RoceCap>::new(&roce)
            .unwrap()
            .get(RoceCap::SW_R_ROCE_SRC_UDP_PORT),
        1,
        "{kind}: row 14"
    );
    // Row 13: the profile has `sw_owner_id`, so INIT_HCA carries one.
    let init = of(t, Opcode::InitHca).next().expect("INIT_HCA");
    assert!(
        view::<InitHcaIn>(init)
            .bytes(InitHcaIn::SW_OWNER_ID)
            .iter()
            .any(|&b| b != 0),
        "{kind}: row 13"
    );
    // Row 11: the async EQ leaves INTERNAL_ERROR out.
    let eq = of(t, Opcode::CreateEq).next().expect("CREATE_EQ");
    let at = CreateEqIn::EVENT_BITMASK.offset();
    let word0 = u64::from_be_bytes(eq.input[at..at + 8].try_into().unwrap());
    assert_eq!(word0 & 1 << event::INTERNAL_ERROR, 0, "{kind}: row 11");
    // Row 12: the profile counts one vHCA port, so SET_ROCE_ADDRESS names port 1.
    for r in of(t, Opcode::SetRoceAddress) {
        assert_eq!(
            view::<SetRoceAddressIn>(r).get(SetRoceAddressIn::VHCA_PORT_NUM),
            1,
            "{kind}: row 12"
        );
    }
    // Row 10: any SRQ is created disarmed.
    for r in of(t, Opcode::CreateRmp) {
        let w = view::<CreateRmpIn>(r).nested(CreateRmpIn::CTX);
        assert_eq!(w.nested(Rmpc::WQ).get(Wq::LWM), 0, "{kind}: row 10");
    }
    // Row 8: every RST2INIT carries pm_state MIGRATED.
    let rst2init: Vec<&Rec> = of(t, Opcode::Rst2InitQp).collect();
    assert!(!rst2init.is_empty(), "{kind}: QPs are connected");
    for r in &rst2init {
        assert_eq!(
            qpc(r, Rst2initQpIn::QPC).get(Qpc::PM_STATE),
            pm_state::MIGRATED,
            "{kind}: row 8"
        );
    }
}

#[test]
fn rc_trace_shows_the_reference_values() {
    let t = trace("rc");
    common_rows("rc", &t);
    for r in of(&t, Opcode::Rst2InitQp) {
        let c = qpc(r, Rst2initQpIn::QPC);
        if c.get(Qpc::RAE) == 1 {
            // Row 2: a defined responder mode (1 IB-spec .. 8), never 0.
            assert!((1..=8).contains(&c.get(Qpc::ATOMIC_MODE)), "row 2");
        }
    }
    for r in of(&t, Opcode::Init2RtrQp) {
        let c = qpc(r, Init2rtrQpIn::QPC);
        // Row 14: RC paths use a UDP source port in the dynamic range.
        let sport = c.nested(Qpc::PRIMARY_ADDRESS_PATH).get(Ads::UDP_SPORT);
        assert!((0xc000..=0xffff).contains(&sport), "row 14: {sport:#x}");
        // Row 7: ⌊log2⌋ of a verbs count fits the device's maximum (16 → 4).
        assert!(c.get(Qpc::LOG_RRA_MAX) <= 4, "row 7");
    }
    for r in of(&t, Opcode::Rtr2RtsQp) {
        assert!(qpc(r, Rtr2rtsQpIn::QPC).get(Qpc::LOG_SRA_MAX) <= 4, "row 7");
    }
}

#[test]
fn uc_trace_shows_the_reference_values() {
    let t = trace("uc");
    common_rows("uc", &t);
    for r in of(&t, Opcode::Rst2InitQp) {
        let c = qpc(r, Rst2initQpIn::QPC);
        assert_eq!((c.get(Qpc::RRE), c.get(Qpc::RAE)), (0, 0), "UC: write only");
    }
    // NIC A's trace: its UC QP went to RTS.
    assert!(of(&t, Opcode::Init2RtrQp).count() >= 1 && of(&t, Opcode::Rtr2RtsQp).count() >= 1);
}

#[test]
fn ud_trace_shows_the_reference_values() {
    let t = trace("ud");
    common_rows("ud", &t);
    // Row 3: every UD transition carries mtu 4096 (5) and log_msg_max 12.
    let mut seen = 0;
    let rows = of(&t, Opcode::Rst2InitQp)
        .map(|r| qpc(r, Rst2initQpIn::QPC))
        .chain(of(&t, Opcode::Init2RtrQp).map(|r| qpc(r, Init2rtrQpIn::QPC)))
        .chain(of(&t, Opcode::Rtr2RtsQp).map(|r| qpc(r, Rtr2rtsQpIn::QPC)))
        .chain(of(&t, Opcode::Rts2RtsQp).map(|r| qpc(r, Rts2rtsQpIn::QPC)));
    for c in rows {
        assert_eq!((c.get(Qpc::MTU), c.get(Qpc::LOG_MSG_MAX)), (5, 12), "row 3");
        seen += 1;
    }
    assert!(seen >= 3, "NIC A's UD QP through three transitions");
}
