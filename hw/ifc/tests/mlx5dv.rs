//! The CQE and WQE segment layouts checked against the public `mlx5dv.h` of the system's
//! rdma-core (Debian package `libibverbs-dev`), as the command layouts are checked against the
//! `mlx5_ifc.h` facts.
//!
//! The test writes a small C program, compiles it with the system `cc` and reads what it prints:
//! `offsetof` and `sizeof` of every header member one of our fields corresponds to, the header's
//! constants, what its `mlx5dv_get_cqe_*` accessors read from every `op_own` byte, and the bytes
//! its `mlx5dv_set_*_seg` helpers write. Our byte offsets and widths must equal the header's;
//! fields packed inside a header member must lie inside it, and build the same bytes as the
//! header's helpers.
//!
//! Without the header the test fails and says to install `libibverbs-dev`; with
//! `MLX5_SKIP_MLX5DV=1` it prints "skipped" instead.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::process::Command;
use std::sync::OnceLock;

use mlx5_ifc::cqe::{self, Cqe64};
use mlx5_ifc::wqe::{self, CtrlSeg, DataSeg, DatagramSeg, EthSeg, InlineSeg};
use mlx5_ifc::{FieldInfo, View, ViewMut};

/// How one of our fields relates to a header member.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Rel {
    /// The same bytes: offset and width equal.
    Whole,
    /// Bits packed inside the member (checked bit by bit in the other tests).
    Inside,
}
use Rel::{Inside, Whole};

/// `(our field, header member, relation)`.
type Member = (&'static str, &'static str, Rel);

/// Per (our layout, header struct): how each of our fields relates to a header member.
const MAP: &[(&str, &str, &[Member])] = &[
    (
        "cqe64",
        "mlx5_cqe64",
        &[
            ("wqe_id", "wqe_id", Whole),
            ("ml_path", "ml_path", Whole),
            ("slid", "slid", Whole),
            ("flags_rqpn", "flags_rqpn", Whole),
            ("grh", "flags_rqpn", Inside),
            ("sl", "flags_rqpn", Inside),
            ("roce_l3_hdr_type", "flags_rqpn", Inside),
            ("rqpn", "flags_rqpn", Inside),
            ("hds_ip_ext", "hds_ip_ext", Whole),
            ("l4_ok", "hds_ip_ext", Inside),
            ("l3_ok", "hds_ip_ext", Inside),
            ("l2_ok", "hds_ip_ext", Inside),
            ("l4_hdr_type_etc", "l4_hdr_type_etc", Whole),
            ("l4_hdr_type", "l4_hdr_type_etc", Inside),
            ("l3_hdr_type", "l4_hdr_type_etc", Inside),
            ("cv", "l4_hdr_type_etc", Inside),
            ("vlan_info", "vlan_info", Whole),
            ("srqn_uidx", "srqn_uidx", Whole),
            ("srqn", "srqn_uidx", Inside),
            ("imm_inval_pkey", "imm_inval_pkey", Whole),
            ("app", "app", Whole),
            ("app_op", "app_op", Whole),
            ("app_info", "app_info", Whole),
            ("byte_cnt", "byte_cnt", Whole),
            ("timestamp", "timestamp", Whole),
            ("sop_drop_qpn", "sop_drop_qpn", Whole),
            ("qpn", "sop_drop_qpn", Inside),
            ("wqe_counter", "wqe_counter", Whole),
            ("signature", "signature", Whole),
            ("op_own", "op_own", Whole),
            ("opcode", "op_own", Inside),
            ("format", "op_own", Inside),
            ("se", "op_own", Inside),
            ("owner", "op_own", Inside),
        ],
    ),
    (
        "cqe64",
        "mlx5_err_cqe",
        &[
            ("srqn_uidx", "srqn", Whole),
            ("vendor_err_synd", "vendor_err_synd", Whole),
            ("syndrome", "syndrome", Whole),
            ("sop_drop_qpn", "s_wqe_opcode_qpn", Whole),
            ("wqe_opcode", "s_wqe_opcode_qpn", Inside),
            ("wqe_counter", "wqe_counter", Whole),
            ("signature", "signature", Whole),
            ("op_own", "op_own", Whole),
        ],
    ),
    (
        "wqe_ctrl_seg",
        "mlx5_wqe_ctrl_seg",
        &[
            ("opmod_idx_opcode", "opmod_idx_opcode", Whole),
            ("opmod", "opmod_idx_opcode", Inside),
            ("wqe_index", "opmod_idx_opcode", Inside),
            ("opcode", "opmod_idx_opcode", Inside),
            ("qpn_ds", "qpn_ds", Whole),
            ("qpn", "qpn_ds", Inside),
            ("ds", "qpn_ds", Inside),
            ("signature", "signature", Whole),
            ("dci_stream_channel_id", "dci_stream_channel_id", Whole),
            ("fm_ce_se", "fm_ce_se", Whole),
            ("fm", "fm_ce_se", Inside),
            ("ce", "fm_ce_se", Inside),
            ("se", "fm_ce_se", Inside),
            ("imm", "imm", Whole),
        ],
    ),
    (
        "wqe_raddr_seg",
        "mlx5_wqe_raddr_seg",
        &[("raddr", "raddr", Whole), ("rkey", "rkey", Whole)],
    ),
    (
        "wqe_atomic_seg",
        "mlx5_wqe_atomic_seg",
        &[
            ("swap_add", "swap_add", Whole),
            ("compare", "compare", Whole),
        ],
    ),
    (
        "wqe_data_seg",
        "mlx5_wqe_data_seg",
        &[
            ("byte_count", "byte_count", Whole),
            ("lkey", "lkey", Whole),
            ("addr", "addr", Whole),
        ],
    ),
    (
        "wqe_inl_data_seg",
        "mlx5_wqe_inl_data_seg",
        &[
            ("byte_count", "byte_count", Whole),
            ("inline", "byte_count", Inside),
            ("length", "byte_count", Inside),
        ],
    ),
    (
        "wqe_datagram_seg",
        "mlx5_wqe_datagram_seg",
        &[
            ("dc_key", "av.key.dc_key", Whole),
            ("qkey", "av.key.qkey.qkey", Whole),
            ("dqp_dct", "av.dqp_dct", Whole),
            ("ext", "av.dqp_dct", Inside),
            ("dqpn", "av.dqp_dct", Inside),
            ("stat_rate_sl", "av.stat_rate_sl", Whole),
            ("fl_mlid", "av.fl_mlid", Whole),
            ("rlid", "av.rlid", Whole),
            ("rmac", "av.rmac", Whole),
            ("tclass", "av.tclass", Whole),
            ("hop_limit", "av.hop_limit", Whole),
            ("grh_gid_fl", "av.grh_gid_fl", Whole),
            ("grh", "av.grh_gid_fl", Inside),
            ("sgid_index", "av.grh_gid_fl", Inside),
            ("flow_label", "av.grh_gid_fl", Inside),
            ("rgid", "av.rgid", Whole),
        ],
    ),
    (
        "wqe_srq_next_seg",
        "mlx5_wqe_srq_next_seg",
        &[
            ("next_wqe_index", "next_wqe_index", Whole),
            ("signature", "signature", Whole),
        ],
    ),
    (
        "wqe_eth_seg",
        "mlx5_wqe_eth_seg",
        &[
            ("cs_flags", "cs_flags", Whole),
            ("l4_csum", "cs_flags", Inside),
            ("l3_csum", "cs_flags", Inside),
            ("mss", "mss", Whole),
            ("inline_hdr_sz", "inline_hdr_sz", Whole),
            ("inline_hdr_start", "inline_hdr_start", Whole),
            ("inline_hdr", "inline_hdr", Whole),
        ],
    ),
];

/// `MAP` flattened: `(our layout, our field, header struct, header member, relation)`.
fn map() -> impl Iterator<Item = (&'static str, &'static str, &'static str, &'static str, Rel)> {
    MAP.iter().flat_map(|&(layout, s, fields)| {
        fields
            .iter()
            .map(move |&(f, m, rel)| (layout, f, s, m, rel))
    })
}

/// Fields the header leaves unnamed (reserved bytes); checked against the fact sheet in
/// `golden.rs` instead.
const NOT_IN_HEADER: &[(&str, &str)] = &[
    ("cqe64", "check_sum"),
    ("cqe64", "rss_hash_result"),
    ("cqe64", "rss_hash_type"),
];

/// `(our layout, header struct)` of equal size.
const SIZES: &[(&str, &str)] = &[
    ("cqe64", "mlx5_cqe64"),
    ("cqe64", "mlx5_err_cqe"),
    ("wqe_ctrl_seg", "mlx5_wqe_ctrl_seg"),
    ("wqe_raddr_seg", "mlx5_wqe_raddr_seg"),
    ("wqe_atomic_seg", "mlx5_wqe_atomic_seg"),
    ("wqe_data_seg", "mlx5_wqe_data_seg"),
    ("wqe_inl_data_seg", "mlx5_wqe_inl_data_seg"),
    ("wqe_datagram_seg", "mlx5_wqe_datagram_seg"),
    ("wqe_datagram_seg", "mlx5_wqe_av"),
    ("wqe_srq_next_seg", "mlx5_wqe_srq_next_seg"),
    ("wqe_eth_seg", "mlx5_wqe_eth_seg"),
];

/// Our constants and the header's names for them.
fn constants() -> Vec<(u64, &'static str)> {
    use cqe::{l3_hdr_type as l3, opcode as cop, syndrome as syn};
    use wqe::{eth_cs, fm_ce_se as f, opcode as op};
    let mut v: Vec<(u64, &str)> = vec![
        (cop::REQ.into(), "MLX5_CQE_REQ"),
        (cop::RESP_WR_IMM.into(), "MLX5_CQE_RESP_WR_IMM"),
        (cop::RESP_SEND.into(), "MLX5_CQE_RESP_SEND"),
        (cop::RESP_SEND_IMM.into(), "MLX5_CQE_RESP_SEND_IMM"),
        (cop::RESP_SEND_INV.into(), "MLX5_CQE_RESP_SEND_INV"),
        (cop::RESIZE_CQ.into(), "MLX5_CQE_RESIZE_CQ"),
        (cop::NO_PACKET.into(), "MLX5_CQE_NO_PACKET"),
        (cop::SIG_ERR.into(), "MLX5_CQE_SIG_ERR"),
        (cop::REQ_ERR.into(), "MLX5_CQE_REQ_ERR"),
        (cop::RESP_ERR.into(), "MLX5_CQE_RESP_ERR"),
        (cop::INVALID.into(), "MLX5_CQE_INVALID"),
        (
            syn::LOCAL_LENGTH_ERR.into(),
            "MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR",
        ),
        (
            syn::LOCAL_QP_OP_ERR.into(),
            "MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR",
        ),
        (
            syn::LOCAL_PROT_ERR.into(),
            "MLX5_CQE_SYNDROME_LOCAL_PROT_ERR",
        ),
        (syn::WR_FLUSH_ERR.into(), "MLX5_CQE_SYNDROME_WR_FLUSH_ERR"),
        (syn::MW_BIND_ERR.into(), "MLX5_CQE_SYNDROME_MW_BIND_ERR"),
        (syn::BAD_RESP_ERR.into(), "MLX5_CQE_SYNDROME_BAD_RESP_ERR"),
        (
            syn::LOCAL_ACCESS_ERR.into(),
            "MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR",
        ),
        (
            syn::REMOTE_INVAL_REQ_ERR.into(),
            "MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR",
        ),
        (
            syn::REMOTE_ACCESS_ERR.into(),
            "MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR",
        ),
        (syn::REMOTE_OP_ERR.into(), "MLX5_CQE_SYNDROME_REMOTE_OP_ERR"),
        (
            syn::TRANSPORT_RETRY_EXC_ERR.into(),
            "MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR",
        ),
        (
            syn::RNR_RETRY_EXC_ERR.into(),
            "MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR",
        ),
        (
            syn::REMOTE_ABORTED_ERR.into(),
            "MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR",
        ),
        (l3::NONE.into(), "MLX5_CQE_L3_HDR_TYPE_NONE"),
        (l3::IPV6.into(), "MLX5_CQE_L3_HDR_TYPE_IPV6"),
        (l3::IPV4.into(), "MLX5_CQE_L3_HDR_TYPE_IPV4"),
        (op::NOP.into(), "MLX5_OPCODE_NOP"),
        (op::SEND_INVAL.into(), "MLX5_OPCODE_SEND_INVAL"),
        (op::RDMA_WRITE.into(), "MLX5_OPCODE_RDMA_WRITE"),
        (op::RDMA_WRITE_IMM.into(), "MLX5_OPCODE_RDMA_WRITE_IMM"),
        (op::SEND.into(), "MLX5_OPCODE_SEND"),
        (op::SEND_IMM.into(), "MLX5_OPCODE_SEND_IMM"),
        (op::TSO.into(), "MLX5_OPCODE_TSO"),
        (op::RDMA_READ.into(), "MLX5_OPCODE_RDMA_READ"),
        (op::ATOMIC_CS.into(), "MLX5_OPCODE_ATOMIC_CS"),
        (op::ATOMIC_FA.into(), "MLX5_OPCODE_ATOMIC_FA"),
        (op::ATOMIC_MASKED_CS.into(), "MLX5_OPCODE_ATOMIC_MASKED_CS"),
        (op::ATOMIC_MASKED_FA.into(), "MLX5_OPCODE_ATOMIC_MASKED_FA"),
        (op::FMR.into(), "MLX5_OPCODE_FMR"),
        (op::LOCAL_INVAL.into(), "MLX5_OPCODE_LOCAL_INVAL"),
        (op::CONFIG_CMD.into(), "MLX5_OPCODE_CONFIG_CMD"),
        (op::SET_PSV.into(), "MLX5_OPCODE_SET_PSV"),
        (op::UMR.into(), "MLX5_OPCODE_UMR"),
        (op::TAG_MATCHING.into(), "MLX5_OPCODE_TAG_MATCHING"),
        (op::FLOW_TBL_ACCESS.into(), "MLX5_OPCODE_FLOW_TBL_ACCESS"),
        (op::MMO.into(), "MLX5_OPCODE_MMO"),
        (f::SOLICITED.into(), "MLX5_WQE_CTRL_SOLICITED"),
        (f::CQ_UPDATE.into(), "MLX5_WQE_CTRL_CQ_UPDATE"),
        (f::FENCE.into(), "MLX5_WQE_CTRL_FENCE"),
        (
            f::INITIATOR_SMALL_FENCE.into(),
            "MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE",
        ),
        (eth_cs::L3_CSUM.into(), "MLX5_ETH_WQE_L3_CSUM"),
        (eth_cs::L4_CSUM.into(), "MLX5_ETH_WQE_L4_CSUM"),
        (wqe::INLINE_SEG.into(), "MLX5_INLINE_SEG"),
        (wqe::EXTENDED_UD_AV.into(), "MLX5_EXTENDED_UD_AV"),
        (wqe::INVALID_LKEY.into(), "MLX5_INVALID_LKEY"),
        (wqe::WQEBB as u64, "MLX5_SEND_WQE_BB"),
    ];
    v.sort_by_key(|c| c.1);
    v
}

/// Header constants that our fields must produce when set alone (checked in `bits_in_bytes`).
const FLAG_NAMES: &[&str] = &[
    "MLX5_CQE_OWNER_MASK",
    "MLX5_INLINE_SCATTER_32",
    "MLX5_INLINE_SCATTER_64",
    "MLX5_CQE_L2_OK",
    "MLX5_CQE_L3_OK",
    "MLX5_CQE_L4_OK",
];

/// What the C program printed.
#[derive(Debug, Default)]
struct Probe {
    /// `(struct, member) -> (offset, size)` in bytes.
    members: BTreeMap<(String, String), (u64, u64)>,
    sizes: BTreeMap<String, u64>,
    consts: BTreeMap<String, u64>,
    /// `op_own` byte -> (opcode, se, format, owner) as the header's accessors read it.
    op_own: BTreeMap<u8, [u64; 4]>,
    /// Segments the header's `mlx5dv_set_*_seg` helpers filled.
    bytes: BTreeMap<String, Vec<u8>>,
}

fn c_program() -> String {
    let mut c = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include <string.h>\n#include <endian.h>\n\
         #include <infiniband/mlx5dv.h>\n\
         #define MEMBER(S, m) printf(\"member %s %s %zu %zu\\n\", #S, #m, offsetof(struct S, m), sizeof(((struct S *)0)->m))\n\
         #define SIZE(S) printf(\"size %s %zu\\n\", #S, sizeof(struct S))\n\
         #define CONST(c) printf(\"const %s %llu\\n\", #c, (unsigned long long)(c))\n\
         static void dump(const char *what, const void *p, size_t n) {\n\
         \tconst unsigned char *b = p;\n\tprintf(\"bytes %s \", what);\n\
         \tfor (size_t i = 0; i < n; i++) printf(\"%02x\", b[i]);\n\tprintf(\"\\n\");\n}\n\
         int main(void) {\n",
    );
    let members: BTreeSet<(&str, &str)> = map().map(|m| (m.2, m.3)).collect();
    for (s, m) in members {
        writeln!(c, "\tMEMBER({s}, {m});").unwrap();
    }
    let structs: BTreeSet<&str> = SIZES.iter().map(|s| s.1).collect();
    for s in structs {
        writeln!(c, "\tSIZE({s});").unwrap();
    }
    for (_, name) in constants() {
        writeln!(c, "\tCONST({name});").unwrap();
    }
    for name in FLAG_NAMES {
        writeln!(c, "\tCONST({name});").unwrap();
    }
    c.push_str(
        "\tstruct mlx5_cqe64 cqe;\n\
         \tfor (int i = 0; i < 256; i++) {\n\
         \t\tmemset(&cqe, 0, sizeof(cqe));\n\t\tcqe.op_own = (uint8_t)i;\n\
         \t\tprintf(\"op_own %d %u %u %u %u\\n\", i, mlx5dv_get_cqe_opcode(&cqe),\n\
         \t\t       mlx5dv_get_cqe_se(&cqe), mlx5dv_get_cqe_format(&cqe), mlx5dv_get_cqe_owner(&cqe));\n\
         \t}\n\
         \tstruct mlx5_wqe_ctrl_seg ctrl;\n\tmemset(&ctrl, 0, sizeof(ctrl));\n\
         \tmlx5dv_set_ctrl_seg(&ctrl, 0xbeef, 0x0a, 0x5c, 0x123456, 0x8a, 0x2d, 0x77, htobe32(0xcafef00d));\n\
         \tdump(\"ctrl\", &ctrl, sizeof(ctrl));\n\
         \tstruct mlx5_wqe_data_seg data;\n\tmemset(&data, 0, sizeof(data));\n\
         \tmlx5dv_set_data_seg(&data, 0x1000, 0x2233, (uintptr_t)0x0123456789abcdefULL);\n\
         \tdump(\"data\", &data, sizeof(data));\n\
         \tstruct mlx5_wqe_datagram_seg dg;\n\tmemset(&dg, 0, sizeof(dg));\n\
         \tuint8_t rmac[6] = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55};\n\
         \tuint8_t rgid[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8};\n\
         \tmlx5dv_set_dgram_seg(&dg, 0x0102030405060708ULL, 0xabcdef, 1, 0x35, 0x81, 0xc001, rmac,\n\
         \t                     0x2e, 0x40, (1u << 30) | (0x5au << 20) | 0x12345u, rgid);\n\
         \tdump(\"dgram\", &dg, sizeof(dg));\n\
         \tstruct mlx5_wqe_eth_seg eth;\n\tmemset(&eth, 0, sizeof(eth));\n\
         \tuint8_t hdr[2] = {0xaa, 0xbb};\n\
         \tmlx5dv_set_eth_seg(&eth, 0xc0, 1460, 2, hdr);\n\
         \tdump(\"eth\", &eth, sizeof(eth));\n\
         \treturn 0;\n}\n",
    );
    c
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

fn parse(out: &str) -> Probe {
    let mut p = Probe::default();
    for line in out.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        let n = |i: usize| w[i].parse::<u64>().unwrap();
        match w.first().copied() {
            Some("member") => {
                p.members.insert((w[1].into(), w[2].into()), (n(3), n(4)));
            }
            Some("size") => {
                p.sizes.insert(w[1].into(), n(2));
            }
            Some("const") => {
                p.consts.insert(w[1].into(), n(2));
            }
            Some("op_own") => {
                p.op_own.insert(n(1) as u8, [n(2), n(3), n(4), n(5)]);
            }
            Some("bytes") => {
                p.bytes.insert(w[1].into(), hex(w[2]));
            }
            _ => panic!("unexpected line from the mlx5dv.h probe: {line}"),
        }
    }
    p
}

/// Compiles and runs the probe once; `None` when skipped.
fn probe() -> Option<&'static Probe> {
    static PROBE: OnceLock<Option<Probe>> = OnceLock::new();
    PROBE.get_or_init(run_probe).as_ref()
}

fn run_probe() -> Option<Probe> {
    let skip = std::env::var("MLX5_SKIP_MLX5DV").is_ok_and(|v| v == "1");
    let header = ["/usr/include", "/usr/local/include"]
        .iter()
        .any(|d| std::path::Path::new(d).join("infiniband/mlx5dv.h").exists());
    if !header {
        if skip {
            println!("skipped: no infiniband/mlx5dv.h (MLX5_SKIP_MLX5DV=1)");
            return None;
        }
        panic!(
            "infiniband/mlx5dv.h not found: install it with `apt-get install -y libibverbs-dev` \
             (or set MLX5_SKIP_MLX5DV=1 to skip this check)"
        );
    }
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("mlx5dv-probe");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("probe.c");
    let exe = dir.join("probe");
    std::fs::write(&src, c_program()).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = Command::new(&cc)
        .args(["-std=gnu11", "-O0", "-w", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}` (install gcc): {e}"));
    assert!(
        built.status.success(),
        "the mlx5dv.h probe ({}) did not compile:\n{}",
        src.display(),
        String::from_utf8_lossy(&built.stderr)
    );
    let ran = Command::new(&exe).output().unwrap();
    assert!(ran.status.success(), "the mlx5dv.h probe failed");
    Some(parse(&String::from_utf8(ran.stdout).unwrap()))
}

fn all_layouts() -> Vec<(&'static str, usize, &'static [FieldInfo])> {
    cqe::ALL.iter().chain(wqe::ALL).copied().collect()
}

fn field(layout: &str, name: &str) -> FieldInfo {
    let (_, _, fields) = all_layouts()
        .into_iter()
        .find(|l| l.0 == layout)
        .unwrap_or_else(|| panic!("no layout {layout}"));
    *fields
        .iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("no field {layout}.{name}"))
}

#[test]
fn every_field_is_mapped_to_the_header() {
    for (layout, _, fields) in all_layouts() {
        for f in fields {
            let mapped = map().any(|m| m.0 == layout && m.1 == f.name);
            let exempt = NOT_IN_HEADER.contains(&(layout, f.name));
            assert!(
                mapped != exempt,
                "{layout}.{}: map it to an mlx5dv.h member (or list it as not in the header)",
                f.name
            );
        }
    }
}

#[test]
fn offsets_and_sizes_match_mlx5dv_h() {
    let Some(p) = probe() else { return };
    let mut checked = 0;
    for (layout, name, s, m, rel) in map() {
        let f = field(layout, name);
        let &(off, size) = p
            .members
            .get(&(s.to_string(), m.to_string()))
            .unwrap_or_else(|| panic!("the probe printed no {s}.{m}"));
        let (bit, end) = (u64::from(f.bit), u64::from(f.bit + f.width));
        match rel {
            Whole => assert_eq!(
                (bit, u64::from(f.width)),
                (off * 8, size * 8),
                "{layout}.{name} against {s}.{m}: (bit offset, bit width)"
            ),
            Inside => assert!(
                bit >= off * 8 && end <= (off + size) * 8,
                "{layout}.{name} (bits {bit}..{end}) lies outside {s}.{m} (bytes {off}..{})",
                off + size
            ),
        }
        checked += 1;
    }
    for &(layout, s) in SIZES {
        let bytes = all_layouts().iter().find(|l| l.0 == layout).unwrap().1;
        assert_eq!(Some(&(bytes as u64)), p.sizes.get(s), "sizeof({s})");
    }
    assert!(checked >= 80, "only {checked} fields checked");
}

#[test]
fn constants_match_mlx5dv_h() {
    let Some(p) = probe() else { return };
    for (value, name) in constants() {
        assert_eq!(Some(&value), p.consts.get(name), "{name}");
    }
}

/// The fields packed inside bytes, set alone on a zero image: the byte values the header names.
#[test]
fn bits_in_bytes_match_mlx5dv_h() {
    let Some(p) = probe() else { return };
    let c = |name: &str| p.consts[name];
    let cqe_byte = |f, v: u64, at: usize| {
        let mut b = [0u8; 64];
        ViewMut::<Cqe64>::new(&mut b).unwrap().set(f, v).unwrap();
        u64::from(b[at])
    };
    assert_eq!(cqe_byte(Cqe64::OWNER, 1, 63), c("MLX5_CQE_OWNER_MASK"));
    let (s32, s64) = (cqe::format::SCATTER_32, cqe::format::SCATTER_64);
    assert_eq!(
        cqe_byte(Cqe64::FORMAT, s32.into(), 63),
        c("MLX5_INLINE_SCATTER_32")
    );
    assert_eq!(
        cqe_byte(Cqe64::FORMAT, s64.into(), 63),
        c("MLX5_INLINE_SCATTER_64")
    );
    assert_eq!(cqe_byte(Cqe64::L2_OK, 1, 28), c("MLX5_CQE_L2_OK"));
    assert_eq!(cqe_byte(Cqe64::L3_OK, 1, 28), c("MLX5_CQE_L3_OK"));
    assert_eq!(cqe_byte(Cqe64::L4_OK, 1, 28), c("MLX5_CQE_L4_OK"));
    let mut b = [0u8; 16];
    let mut v = ViewMut::<CtrlSeg>::new(&mut b).unwrap();
    v.set(CtrlSeg::CE, wqe::ce::ALWAYS.into()).unwrap();
    assert_eq!(u64::from(b[11]), c("MLX5_WQE_CTRL_CQ_UPDATE"));
    let mut v = ViewMut::<CtrlSeg>::new(&mut b).unwrap();
    v.set(CtrlSeg::CE, 0).unwrap().set(CtrlSeg::SE, 1).unwrap();
    assert_eq!(u64::from(b[11]), c("MLX5_WQE_CTRL_SOLICITED"));
    let mut v = ViewMut::<CtrlSeg>::new(&mut b).unwrap();
    v.set(CtrlSeg::SE, 0).unwrap();
    v.set(CtrlSeg::FM, wqe::fm::SMALL_AND_FENCE.into()).unwrap();
    assert_eq!(u64::from(b[11]), c("MLX5_WQE_CTRL_FENCE"));
    let mut v = ViewMut::<CtrlSeg>::new(&mut b).unwrap();
    v.set(CtrlSeg::FM, wqe::fm::INITIATOR_SMALL.into()).unwrap();
    assert_eq!(u64::from(b[11]), c("MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE"));
    let mut b = [0u8; 4];
    ViewMut::<InlineSeg>::new(&mut b)
        .unwrap()
        .set(InlineSeg::INLINE, 1)
        .unwrap();
    assert_eq!(u64::from(u32::from_be_bytes(b)), c("MLX5_INLINE_SEG"));
    let mut b = [0u8; 48];
    ViewMut::<DatagramSeg>::new(&mut b)
        .unwrap()
        .set(DatagramSeg::EXT, 1)
        .unwrap();
    assert_eq!(
        u64::from(u32::from_be_bytes([b[8], b[9], b[10], b[11]])),
        c("MLX5_EXTENDED_UD_AV")
    );
    let mut b = [0u8; 32];
    let mut v = ViewMut::<EthSeg>::new(&mut b).unwrap();
    v.set(EthSeg::L3_CSUM, 1).unwrap();
    assert_eq!(u64::from(b[4]), c("MLX5_ETH_WQE_L3_CSUM"));
    let mut v = ViewMut::<EthSeg>::new(&mut b).unwrap();
    v.set(EthSeg::L3_CSUM, 0)
        .unwrap()
        .set(EthSeg::L4_CSUM, 1)
        .unwrap();
    assert_eq!(u64::from(b[4]), c("MLX5_ETH_WQE_L4_CSUM"));
}

/// Every `op_own` byte read through our fields as the header's accessors read it.
#[test]
fn op_own_fields_match_the_header_accessors() {
    let Some(p) = probe() else { return };
    assert_eq!(p.op_own.len(), 256);
    for (&byte, &[opcode, se, format, owner]) in &p.op_own {
        let mut b = [0u8; 64];
        b[63] = byte;
        let v = View::<Cqe64>::new(&b).unwrap();
        assert_eq!(
            [
                v.get(Cqe64::OPCODE),
                v.get(Cqe64::SE),
                v.get(Cqe64::FORMAT),
                v.get(Cqe64::OWNER)
            ],
            [opcode, se, format, owner],
            "op_own {byte:#04x}: (opcode, se, format, owner)"
        );
        assert_eq!(v.get(Cqe64::OP_OWN), u64::from(byte));
    }
}

/// Segments built with our fields equal the ones the header's helpers fill.
#[test]
fn segments_match_the_header_helpers() {
    let Some(p) = probe() else { return };
    let mut ctrl = [0u8; 16];
    let mut v = ViewMut::<CtrlSeg>::new(&mut ctrl).unwrap();
    v.set(CtrlSeg::OPMOD, 0x5c).unwrap();
    v.set(CtrlSeg::WQE_INDEX, 0xbeef).unwrap();
    v.set(CtrlSeg::OPCODE, wqe::opcode::SEND.into()).unwrap();
    v.set(CtrlSeg::QPN, 0x12_3456).unwrap();
    v.set(CtrlSeg::DS, 0x2d).unwrap();
    v.set(CtrlSeg::SIGNATURE, 0x77).unwrap();
    v.set(CtrlSeg::FM, wqe::fm::SMALL_AND_FENCE.into()).unwrap();
    v.set(CtrlSeg::CE, wqe::ce::ALWAYS.into()).unwrap();
    v.set(CtrlSeg::SE, 1).unwrap();
    v.set(CtrlSeg::IMM, 0xcafe_f00d).unwrap();
    assert_eq!(v.get(CtrlSeg::QPN_DS), 0x1234_562d);
    assert_eq!(v.get(CtrlSeg::OPMOD_IDX_OPCODE), 0x5cbe_ef0a);
    assert_eq!(v.get(CtrlSeg::FM_CE_SE), 0x8a);
    assert_eq!(&ctrl[..], &p.bytes["ctrl"][..], "control segment");

    let mut data = [0u8; 16];
    let mut v = ViewMut::<DataSeg>::new(&mut data).unwrap();
    v.set(DataSeg::BYTE_COUNT, 0x1000).unwrap();
    v.set(DataSeg::LKEY, 0x2233).unwrap();
    v.set(DataSeg::ADDR, 0x0123_4567_89ab_cdef).unwrap();
    assert_eq!(&data[..], &p.bytes["data"][..], "data segment");

    let mut dg = [0u8; 48];
    let mut v = ViewMut::<DatagramSeg>::new(&mut dg).unwrap();
    v.set(DatagramSeg::DC_KEY, 0x0102_0304_0506_0708).unwrap();
    assert_eq!(v.get(DatagramSeg::QKEY), 0x0102_0304);
    v.set(DatagramSeg::EXT, 1).unwrap();
    v.set(DatagramSeg::DQPN, 0xab_cdef).unwrap();
    v.set(DatagramSeg::STAT_RATE_SL, 0x35).unwrap();
    v.set(DatagramSeg::FL_MLID, 0x81).unwrap();
    v.set(DatagramSeg::RLID, 0xc001).unwrap();
    v.set_bytes(DatagramSeg::RMAC, &[0x02, 0x11, 0x22, 0x33, 0x44, 0x55])
        .unwrap();
    v.set(DatagramSeg::TCLASS, 0x2e).unwrap();
    v.set(DatagramSeg::HOP_LIMIT, 0x40).unwrap();
    v.set(DatagramSeg::GRH, 1).unwrap();
    v.set(DatagramSeg::SGID_INDEX, 0x5a).unwrap();
    v.set(DatagramSeg::FLOW_LABEL, 0x1_2345).unwrap();
    let gid = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
    v.set_bytes(DatagramSeg::RGID, &gid).unwrap();
    assert_eq!(v.get(DatagramSeg::DQP_DCT), 0x80ab_cdef);
    assert_eq!(
        v.get(DatagramSeg::GRH_GID_FL),
        1 << 30 | 0x5a << 20 | 0x1_2345
    );
    assert_eq!(&dg[..], &p.bytes["dgram"][..], "datagram segment");

    let mut eth = [0u8; 32];
    let mut v = ViewMut::<EthSeg>::new(&mut eth).unwrap();
    v.set(EthSeg::L3_CSUM, 1)
        .unwrap()
        .set(EthSeg::L4_CSUM, 1)
        .unwrap();
    assert_eq!(v.get(EthSeg::CS_FLAGS), 0xc0);
    v.set(EthSeg::MSS, 1460).unwrap();
    v.set(EthSeg::INLINE_HDR_SZ, 2).unwrap();
    v.set_bytes(EthSeg::INLINE_HDR_START, &[0xaa, 0xbb])
        .unwrap();
    assert_eq!(&eth[..], &p.bytes["eth"][..], "Ethernet segment");
}
