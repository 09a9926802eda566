//! Issue #10, rows 2–5, 8, 12–14: the values the driver programs in capability negotiation,
//! INIT_HCA, SET_ROCE_ADDRESS and the QP transitions, read back from the simulated device's
//! command trace and from the frames on the simulated wire, against what Linux's mlx5 drivers
//! and rdma-core write (docs/fields.md). The simulator refuses each old value
//! (`hw/sim/tests/linux_semantics.rs`, `hw/sim/tests/qp_state.rs`).

mod common;

use common::*;
use mlx5::ifc::consts::cap_type;
use mlx5::ifc::prm::caps::{AtomicCaps, CmdHcaCap, RoceCap};
use mlx5::ifc::prm::hca::{InitHcaIn, SetHcaCapIn};
use mlx5::ifc::prm::qp::{Init2rtrQpIn, Qpc, Rst2initQpIn, Rtr2rtsQpIn};
use mlx5::ifc::prm::vport::SetRoceAddressIn;
use mlx5::ifc::{Layout, Opcode, View};
use mlx5::mr::MrAccess;
use mlx5::qp::UdAddr;
use mlx5::qp::{ConnectOpts, QpType, SendWr, Sge};
use mlx5::sim::{Fabric, Mode, Profile, SimDevice};
use mlx5::{AtomicCap, Error};

/// `(op_mod, input)` of every successful command `opcode` the device received.
fn inputs(sim: &SimDevice, opcode: Opcode) -> Vec<(u16, Vec<u8>)> {
    sim.trace()
        .into_iter()
        .filter(|r| r.opcode == opcode as u16 && r.status == 0)
        .map(|r| (r.op_mod, r.input))
        .collect()
}

fn profile(json: &str) -> Profile {
    Profile::from_json_str(json).unwrap()
}

/// The capability image of the last SET_HCA_CAP of `kind`, if one was sent.
fn set_cap(sim: &SimDevice, kind: u16) -> Option<Vec<u8>> {
    inputs(sim, Opcode::SetHcaCap)
        .into_iter()
        .rfind(|(op_mod, _)| op_mod >> 1 == kind)
        .map(|(_, i)| {
            let at = SetHcaCapIn::CAPABILITY.offset();
            i[at..at + 256].to_vec()
        })
}

fn qpc_of<L: Layout>(
    input: &[u8],
    qpc: mlx5::ifc::Nested<L, Qpc>,
    f: mlx5::ifc::Field<Qpc>,
) -> u64 {
    View::<L>::new(input).unwrap().nested(qpc).get(f)
}

/// Rows 2 and 8: RST2INIT carries `pm_state` MIGRATED for every type, and an RC QP with remote
/// atomics the responder mode Linux's `get_atomic_mode` picks: 1 (IB-spec) for plain 8-byte
/// atomics, the log2 of the largest operand (at least 3) with extended atomics.
#[test]
fn rst2init_pm_state_and_atomic_mode() {
    for (json, want) in [
        // The ConnectX-5 profile: masked atomics of 4 to 32 bytes (`atomic_size_qp` 0x3c).
        ("{}", 5u64),
        (
            r#"{"atomic_caps.atomic_operations": 15, "atomic_caps.atomic_size_qp": 72}"#,
            6,
        ),
        (
            r#"{"atomic_caps.atomic_operations": 12, "atomic_caps.atomic_size_qp": 8}"#,
            3,
        ),
    ] {
        let fabric = Fabric::new();
        let (sim, dev) = nic_with(&fabric, Mode::Sync, profile(json));
        let cq = dev.create_cq(16).unwrap();
        for t in [QpType::Rc, QpType::Uc, QpType::Ud] {
            let mut q = qp(&dev, &cq, t, cap(4, 4, 1));
            let me = q.endpoint();
            q.connect(&me, &ConnectOpts::default()).unwrap();
            let (_, i) = inputs(&sim, Opcode::Rst2InitQp).pop().unwrap();
            let get = |f| qpc_of::<Rst2initQpIn>(&i, Rst2initQpIn::QPC, f);
            assert_eq!(get(Qpc::PM_STATE), 3, "{t:?}: MIGRATED");
            let (rae, mode) = (get(Qpc::RAE), get(Qpc::ATOMIC_MODE));
            if t == QpType::Rc {
                assert_eq!((rae, mode), (1, want), "{json}");
            } else {
                assert_eq!((rae, mode), (0, 0), "{t:?}");
            }
        }
    }
}

/// Row 2, the other side: a device without atomics refuses remote atomic access up front
/// instead of sending `atomic_mode` 0, which no responder honours.
#[test]
fn remote_atomics_refused_without_atomic_caps() {
    let fabric = Fabric::new();
    let (_sim, dev) = nic_with(&fabric, Mode::Sync, profile(r#"{"atomic": 0}"#));
    assert_eq!(dev.device_attr().atomic_cap, AtomicCap::None);
    let cq = dev.create_cq(16).unwrap();
    let mut q = qp(&dev, &cq, QpType::Rc, cap(4, 4, 1));
    let me = q.endpoint();
    let err = q.connect(&me, &ConnectOpts::default()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidArgument {
                field: "qp_access_flags.remote_atomic",
                ..
            }
        ),
        "{err}"
    );
}

/// Row 3: every UD transition carries `mtu` 4096 (5) and `log_msg_max` 12, as Linux writes
/// them; RC keeps the path MTU it was given and the device's `log_max_msg`.
#[test]
fn ud_transitions_carry_mtu_and_msg_max() {
    let fabric = Fabric::new();
    let (sim, dev) = nic(&fabric, Mode::Sync);
    let cq = dev.create_cq(16).unwrap();
    let mut q = qp(&dev, &cq, QpType::Ud, cap(4, 4, 1));
    let me = q.endpoint();
    q.connect(&me, &ConnectOpts::default()).unwrap();
    let (_, a) = inputs(&sim, Opcode::Rst2InitQp).pop().unwrap();
    let (_, b) = inputs(&sim, Opcode::Init2RtrQp).pop().unwrap();
    let (_, c) = inputs(&sim, Opcode::Rtr2RtsQp).pop().unwrap();
    let got = [
        (
            qpc_of::<Rst2initQpIn>(&a, Rst2initQpIn::QPC, Qpc::MTU),
            qpc_of::<Rst2initQpIn>(&a, Rst2initQpIn::QPC, Qpc::LOG_MSG_MAX),
        ),
        (
            qpc_of::<Init2rtrQpIn>(&b, Init2rtrQpIn::QPC, Qpc::MTU),
            qpc_of::<Init2rtrQpIn>(&b, Init2rtrQpIn::QPC, Qpc::LOG_MSG_MAX),
        ),
        (
            qpc_of::<Rtr2rtsQpIn>(&c, Rtr2rtsQpIn::QPC, Qpc::MTU),
            qpc_of::<Rtr2rtsQpIn>(&c, Rtr2rtsQpIn::QPC, Qpc::LOG_MSG_MAX),
        ),
    ];
    assert_eq!(got, [(5, 12); 3]);
}

/// Rows 4, 5, 13: what bring-up negotiates. SET_HCA_CAP (atomic) asks for host-order results
/// where supported (and `atomic_cap` is then HCA); `roce` is sent back unchanged where it is
/// read-only; INIT_HCA carries a software owner id only with the capability.
#[test]
fn bring_up_negotiation() {
    let fabric = Fabric::new();
    let (sim, dev) = nic(&fabric, Mode::Sync);
    let atomic = set_cap(&sim, cap_type::ATOMIC).expect("SET_HCA_CAP atomic");
    let v = View::<AtomicCaps>::new(&atomic).unwrap();
    assert_eq!(v.get(AtomicCaps::ATOMIC_REQ_8B_ENDIANNESS_MODE), 1);
    assert_eq!(dev.device_attr().atomic_cap, AtomicCap::Hca);
    let roce = set_cap(&sim, cap_type::ROCE).expect("SET_HCA_CAP RoCE");
    let v = View::<RoceCap>::new(&roce).unwrap();
    assert_eq!(v.get(RoceCap::SW_R_ROCE_SRC_UDP_PORT), 1);
    let (_, init) = inputs(&sim, Opcode::InitHca).pop().unwrap();
    let owner = View::<InitHcaIn>::new(&init)
        .unwrap()
        .bytes(InitHcaIn::SW_OWNER_ID)
        .to_vec();
    assert!(owner.iter().any(|&b| b != 0), "the cap is set: an owner id");

    let (sim, dev) = nic_with(
        &fabric,
        Mode::Sync,
        profile(
            r#"{"roce_rw_supported": 0, "sw_owner_id": 0,
                "atomic_caps.supported_atomic_req_8B_endianness_mode_1": 0}"#,
        ),
    );
    let general = set_cap(&sim, cap_type::GENERAL).unwrap();
    assert_eq!(
        View::<CmdHcaCap>::new(&general)
            .unwrap()
            .get(CmdHcaCap::ROCE),
        1,
        "read-only roce goes back as it was"
    );
    assert!(set_cap(&sim, cap_type::ATOMIC).is_none());
    assert_eq!(dev.device_attr().atomic_cap, AtomicCap::None);
    let (_, init) = inputs(&sim, Opcode::InitHca).pop().unwrap();
    let v = View::<InitHcaIn>::new(&init).unwrap();
    assert!(v.bytes(InitHcaIn::SW_OWNER_ID).iter().all(|&b| b == 0));
}

/// Row 12: SET_ROCE_ADDRESS names port 1 only where the device counts vHCA ports.
#[test]
fn roce_address_port_only_with_num_vhca_ports() {
    for (json, want) in [("{}", 1u64), (r#"{"num_vhca_ports": 0}"#, 0)] {
        let fabric = Fabric::new();
        let (sim, dev) = nic_with(&fabric, Mode::Sync, profile(json));
        let (_, i) = inputs(&sim, Opcode::SetRoceAddress).pop().unwrap();
        assert_eq!(
            View::<SetRoceAddressIn>::new(&i)
                .unwrap()
                .get(SetRoceAddressIn::VHCA_PORT_NUM),
            want,
            "{json}"
        );
        dev.close().unwrap();
    }
}

/// The UDP source ports of the RoCE v2 frames on the wire (IPv4 or IPv6).
fn udp_sports(fabric: &Fabric) -> Vec<u16> {
    fabric
        .captured()
        .iter()
        .filter_map(|(_, f)| {
            let udp = match (f.get(12..14)?, f.get(23), f.get(20)) {
                ([0x08, 0x00], Some(17), _) => 14 + usize::from(f[14] & 0xf) * 4,
                ([0x86, 0xdd], _, Some(17)) => 14 + 40,
                _ => return None,
            };
            Some(u16::from_be_bytes([*f.get(udp)?, *f.get(udp + 1)?]))
        })
        .collect()
}

/// Row 14: a UD send with the default address (no UDP source port given) goes out with a port
/// in 0xc000..=0xffff, as rdma-core's always are; RC frames too. The device honours the port
/// software picks (`sw_r_roce_src_udp_port`, set at bring-up), so the wire shows the driver's.
#[test]
fn udp_source_ports_in_the_dynamic_range() {
    let fabric = Fabric::new();
    fabric.keep_frames(1 << 10);
    let (_sa, a) = nic(&fabric, Mode::Sync);
    let (_sb, b) = nic(&fabric, Mode::Sync);
    let (cqa, cqb) = (a.create_cq(16).unwrap(), b.create_cq(16).unwrap());
    let mr = a.alloc_mr(a.pd(), 4096, MrAccess::ALL).unwrap();
    let mut qa = qp(&a, &cqa, QpType::Ud, cap(4, 4, 1));
    let mut qb = qp(&b, &cqb, QpType::Ud, cap(4, 4, 1));
    connect(&mut qa, &mut qb, &ConnectOpts::default());
    let eb = qb.endpoint();
    let sge = [Sge {
        addr: mr.addr(),
        length: 16,
        lkey: mr.lkey(),
    }];
    for flow_label in [0u32, 0x12345] {
        qa.post_send(&[SendWr {
            ud: Some(UdAddr {
                remote_qpn: eb.qpn,
                qkey: ConnectOpts::default().qkey,
                dgid: eb.gid,
                dmac: eb.mac,
                hop_limit: 64,
                flow_label,
                ..UdAddr::default()
            }),
            ..SendWr::send(1, &sge)
        }])
        .unwrap();
        wait(&cqa, &a, 1);
    }
    let ud = udp_sports(&fabric);
    assert_eq!(ud.len(), 2, "two UD frames");
    assert!(ud.iter().all(|&p| p >= 0xc000), "{ud:x?}");
    // Flow label 0x12345: (0x2345 ^ (0x10000 >> 14)) | 0xc000.
    assert_eq!(ud[1], 0xc000 | (0x2345 ^ 0x4));
    let cq = a.create_cq(16).unwrap();
    let mrl = a.alloc_mr(a.pd(), 8192, MrAccess::ALL).unwrap();
    let mut q = looped(&a, &cq, cap(4, 4, 1));
    let s = [Sge {
        addr: mrl.addr(),
        length: 64,
        lkey: mrl.lkey(),
    }];
    q.post_send(&[write_wr(&mrl, &s, 7)]).unwrap();
    wait(&cq, &a, 1);
    let all = udp_sports(&fabric);
    assert!(
        all.len() > 2 && all.iter().all(|&p| p >= 0xc000),
        "{all:x?}"
    );
}
