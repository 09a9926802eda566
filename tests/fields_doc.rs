//! docs/fields.md keeps up with the driver: every command the driver sends in a full life cycle
//! — bring-up, a CQ, memory regions, an SRQ (an RMP at ISSI 1, a plain SRQ at ISSI 0), RC, UC
//! and UD QPs through every transition the driver offers, queries, destruction, close — has a
//! section there (a heading that names the command), and so has every register ACCESS_REG
//! touches and every capability type SET_HCA_CAP writes.
//!
//! The commands are taken from the simulated device's trace, not from a list in this file: a
//! new command the driver starts sending fails this test until its fields are written down.

mod common;

use std::collections::BTreeSet;

use common::*;
use mlx5::ifc::consts::{cap_type, reg};
use mlx5::ifc::prm::hca::AccessRegisterIn;
use mlx5::ifc::{opcode_name, Opcode, View};
use mlx5::mr::MrAccess;
use mlx5::qp::{Access, ConnectOpts, QpAttr, QpAttrMask as M, QpInitAttr, QpState, QpType};
use mlx5::raw::DmaBuf;
use mlx5::sim::{Fabric, Fault, Mode, Profile, SimDevice};
use mlx5::srq::SrqAttr;
use mlx5::{Device, DeviceConfig, GidEntry, SimPlatform};

const DOC: &str = include_str!("../docs/fields.md");

/// The words of every Markdown heading: runs of `[A-Za-z0-9_]`, so `## INIT2RTR_QP /
/// RTR2RTS_QP` names both commands and `## DEALLOC_PD` does not name ALLOC_PD.
fn headings() -> Vec<BTreeSet<String>> {
    DOC.lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| {
            l.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|w| !w.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .collect()
}

/// What a section must name: the command, and for some commands what it acts on.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Needed {
    command: &'static str,
    facet: Option<&'static str>,
}

impl core::fmt::Display for Needed {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.facet {
            Some(x) => write!(f, "{} {x}", self.command),
            None => write!(f, "{}", self.command),
        }
    }
}

fn register_name(id: u64) -> &'static str {
    match id as u16 {
        reg::HOST_ENDIANNESS => "HOST_ENDIANNESS",
        reg::PAOS => "PAOS",
        reg::PMTU => "PMTU",
        reg::DTOR => "DTOR",
        _ => "UNKNOWN_REGISTER",
    }
}

fn cap_name(op_mod: u16) -> &'static str {
    match op_mod >> 1 {
        cap_type::GENERAL => "GENERAL",
        cap_type::ATOMIC => "ATOMIC",
        cap_type::ROCE => "ROCE",
        _ => "UNKNOWN_CAP_TYPE",
    }
}

/// Every command in `sim`'s trace (refused ones too: the driver sent them). With
/// `FIELDS_DOC_TRACE=PREFIX` set, the trace is also written to `PREFIX.NAME.jsonl` (what the
/// sections of docs/fields.md describe, to decode with the `hw/ifc` layouts).
fn needed(sim: &SimDevice, name: &str, out: &mut BTreeSet<Needed>) {
    if let Some(prefix) = std::env::var_os("FIELDS_DOC_TRACE") {
        let mut path = std::path::PathBuf::from(prefix);
        path.as_mut_os_string().push(format!(".{name}.jsonl"));
        let mut f = std::fs::File::create(&path).expect("trace file");
        sim.write_trace_jsonl(&mut f).expect("write the trace");
    }
    for r in sim.trace() {
        let command = opcode_name(r.opcode);
        let facet = if r.opcode == Opcode::AccessReg as u16 {
            let id = View::<AccessRegisterIn>::new(&r.input)
                .map(|v| v.get(AccessRegisterIn::REGISTER_ID))
                .unwrap_or(u64::MAX);
            Some(register_name(id))
        } else if r.opcode == Opcode::SetHcaCap as u16 {
            Some(cap_name(r.op_mod))
        } else {
            None
        };
        out.insert(Needed { command, facet });
    }
}

fn documented(n: &Needed, heads: &[BTreeSet<String>]) -> bool {
    heads
        .iter()
        .any(|h| h.contains(n.command) && n.facet.is_none_or(|f| h.contains(f)))
}

fn attr(state: QpState) -> QpAttr {
    QpAttr {
        qp_state: Some(state),
        ..QpAttr::default()
    }
}

/// Everything the driver offers on a device of the default profile (ISSI 1).
fn full_life_cycle(sim: &SimDevice, dev: Device<SimPlatform>) {
    let pd = dev.pd();
    dev.port_state().unwrap();
    dev.service_page_requests().unwrap();
    let mac = dev.vport().mac;
    dev.set_gid(1, Some(GidEntry::ipv4([192, 0, 2, 1], mac)))
        .unwrap();
    dev.set_gid(1, None).unwrap();
    {
        let cq = dev.create_cq(64).unwrap();
        cq.query().unwrap();
        // Owned memory (an odd page count) and caller memory.
        let mr = dev.alloc_mr(pd, 3 * 4096, MrAccess::ALL).unwrap();
        let buf = DmaBuf::alloc(dev.platform(), 2 * 4096, 4096).unwrap();
        let mine = dev.reg_mr(pd, buf, MrAccess::LOCAL).unwrap();
        let srq = dev
            .create_srq(
                pd,
                &SrqAttr {
                    max_wr: 16,
                    max_sge: 1,
                    srq_limit: 0,
                },
            )
            .unwrap();
        srq.modify_limit(4).unwrap();
        srq.query().unwrap();
        let opts = ConnectOpts::default();
        for t in [QpType::Rc, QpType::Uc, QpType::Ud, QpType::Gsi] {
            let mut qp = qp(&dev, &cq, t, cap(16, 16, 1));
            let me = qp.endpoint();
            // RST2INIT, INIT2RTR, RTR2RTS.
            qp.connect(&me, &opts).unwrap();
            // RTS2RTS with an optional attribute.
            let (a, m) = match t {
                QpType::Rc => (
                    QpAttr {
                        min_rnr_timer: 14,
                        ..attr(QpState::Rts)
                    },
                    M::STATE | M::MIN_RNR_TIMER,
                ),
                QpType::Uc => (
                    QpAttr {
                        access: Access {
                            remote_write: true,
                            ..Access::default()
                        },
                        ..attr(QpState::Rts)
                    },
                    M::STATE | M::ACCESS_FLAGS,
                ),
                QpType::Ud | QpType::Gsi => (
                    QpAttr {
                        qkey: 0x2222_2222,
                        ..attr(QpState::Rts)
                    },
                    M::STATE | M::QKEY,
                ),
            };
            qp.modify(&a, m).unwrap();
            qp.query().unwrap();
            // 2ERR, 2RST, and again RST2INIT then INIT2INIT.
            qp.modify(&attr(QpState::Err), M::STATE).unwrap();
            qp.modify(&attr(QpState::Reset), M::STATE).unwrap();
            let init = QpAttr {
                port_num: 1,
                qkey: 0x1111_1111,
                access: Access {
                    remote_write: true,
                    ..Access::default()
                },
                ..attr(QpState::Init)
            };
            let m = if t.is_datagram() {
                M::QKEY
            } else {
                M::ACCESS_FLAGS
            };
            qp.modify(&init, M::STATE | M::PORT | M::PKEY_INDEX | m)
                .unwrap();
            qp.modify(&init, M::STATE | m).unwrap();
            qp.destroy().unwrap();
        }
        // An RC QP receiving from the SRQ.
        let mut on_srq = dev
            .create_qp(
                pd,
                &QpInitAttr {
                    srq: Some(&srq),
                    ..QpInitAttr::new(QpType::Rc, &cq, &cq, cap(16, 0, 1))
                },
            )
            .unwrap();
        let me = on_srq.endpoint();
        on_srq.connect(&me, &opts).unwrap();
        on_srq.destroy().unwrap();
        srq.destroy().unwrap();
        mine.dereg().unwrap();
        mr.dereg().unwrap();
        // Raw Ethernet: the transport domain, a TIS, an SQ (created, moved to RDY, destroyed).
        let td = mlx5::raw::eth::TransportDomain::alloc(&dev).unwrap();
        let tis = mlx5::raw::eth::Tis::create(&dev, &td).unwrap();
        let sq = mlx5::raw::eth::EthSq::create(&dev, &cq, &tis, 4).unwrap();
        sq.destroy().unwrap();
        let rx_cq = dev.create_cq(8).unwrap();
        let rq = mlx5::raw::eth::EthRq::create(&dev, &rx_cq, 4).unwrap();
        let tir = mlx5::raw::eth::Tir::direct(&dev, &td, &rq).unwrap();
        let steer = mlx5::raw::eth::MacSteering::create(&dev, mac, &tir).unwrap();
        steer.destroy().unwrap();
        tir.destroy().unwrap();
        // RSS: a second RQ, an RQT of the two, a Toeplitz TIR over it.
        let rx_cq2 = dev.create_cq(8).unwrap();
        let rq2 = mlx5::raw::eth::EthRq::create(&dev, &rx_cq2, 4).unwrap();
        let rqt = mlx5::raw::eth::Rqt::create(&dev, &[&rq, &rq2]).unwrap();
        let rss = mlx5::raw::eth::Tir::rss(
            &dev,
            &td,
            &rqt,
            &mlx5::raw::eth::MS_RSS_KEY,
            mlx5::raw::eth::RssFields::Ipv4Tcp,
        )
        .unwrap();
        rss.destroy().unwrap();
        rqt.destroy().unwrap();
        rq2.destroy().unwrap();
        rx_cq2.destroy().unwrap();
        rq.destroy().unwrap();
        rx_cq.destroy().unwrap();
        tis.destroy().unwrap();
        td.dealloc().unwrap();
        cq.destroy().unwrap();
    }
    dev.close().unwrap();
    assert!(
        sim.trace().iter().all(|r| r.status == 0),
        "every command of the life cycle succeeded"
    );
}

/// What differs at ISSI 0 (firmware without QUERY_ISSI): the SRQ commands.
fn issi_0_life_cycle(dev: Device<SimPlatform>) {
    assert_eq!(dev.issi(), 0);
    {
        let srq = dev
            .create_srq(
                dev.pd(),
                &SrqAttr {
                    max_wr: 16,
                    max_sge: 1,
                    srq_limit: 0,
                },
            )
            .unwrap();
        assert!(!srq.is_rmp());
        srq.modify_limit(4).unwrap();
        srq.query().unwrap();
        srq.destroy().unwrap();
    }
    dev.close().unwrap();
}

#[test]
fn every_command_the_driver_sends_has_a_section_in_fields_md() {
    let mut need = BTreeSet::new();

    let fabric = Fabric::new();
    let (sim, dev) = nic(&fabric, Mode::Sync);
    full_life_cycle(&sim, dev);
    needed(&sim, "issi1", &mut need);

    // Firmware that refuses QUERY_ISSI: the driver stays at ISSI 0, as Linux does.
    let old = SimDevice::new(Profile::connectx5(), Mode::Sync);
    old.inject(Fault::FailCommand {
        opcode: Opcode::QueryIssi as u16,
        status: 0x02,
        syndrome: 0,
    });
    let dev = Device::open(SimPlatform::new(old.clone()), DeviceConfig::default()).unwrap();
    issi_0_life_cycle(dev);
    needed(&old, "issi0", &mut need);

    // The life cycle reaches what it is meant to reach (so a passing check means something).
    for must in [
        "CREATE_RMP",
        "MODIFY_RMP",
        "CREATE_SRQ",
        "ARM_RQ",
        "INIT2INIT_QP",
        "RTS2RTS_QP",
        "2ERR_QP",
        "2RST_QP",
        "QUERY_VPORT_STATE",
        "TEARDOWN_HCA",
        "DISABLE_HCA",
    ] {
        assert!(
            need.iter().any(|n| n.command == must),
            "the life cycle never sent {must}"
        );
    }

    let heads = headings();
    let missing: Vec<String> = need
        .iter()
        .filter(|n| !documented(n, &heads))
        .map(ToString::to_string)
        .collect();
    assert!(
        missing.is_empty(),
        "docs/fields.md has no section (a heading naming the command, and the register or \
         capability type where one is shown) for: {}",
        missing.join(", ")
    );
}

/// The check itself: a heading names a command only as a whole word.
#[test]
fn a_heading_names_a_command_only_as_a_whole_word() {
    let heads = vec![["DEALLOC_PD".to_owned()].into_iter().collect()];
    let alloc = Needed {
        command: "ALLOC_PD",
        facet: None,
    };
    assert!(!documented(&alloc, &heads));
    let reg = Needed {
        command: "ACCESS_REG",
        facet: Some("PAOS"),
    };
    let heads = vec![["ACCESS_REG".to_owned(), "PMTU".to_owned()]
        .into_iter()
        .collect()];
    assert!(!documented(&reg, &heads));
}
