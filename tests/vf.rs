//! The driver on a ConnectX-5 virtual function (issue #29), as Linux's mlx5_core brings one up
//! (../shared/reference/virtual-functions.md §1.2): known by its PCI device id alone (0x1018,
//! from the Platform); no HOST_ENDIANNESS; no port register writes (its link is its vport's);
//! with no MAC from the hypervisor (`permanent_address` zero) a random locally administered one,
//! programmed into the vport's unicast address list and used for its GIDs — and then RDMA
//! between two such VFs, whose frames carry those MACs.

mod common;

use common::{cap, connect, nic_with, qp, sge1, wait, write_wr};
use mlx5::ifc::{consts::reg, Opcode};
use mlx5::mr::MrAccess;
use mlx5::qp::{ConnectOpts, QpType};
use mlx5::sim::{Fabric, Mode, Profile, SimDevice};
use mlx5::{Device, DeviceConfig, SimPlatform};

/// ACCESS_REG's `register_id` (bytes 0x0a-0x0b of its input) and whether it writes (op_mod 0).
fn register_writes(dev: &SimDevice) -> Vec<u16> {
    dev.trace()
        .into_iter()
        .filter(|r| r.opcode == Opcode::AccessReg as u16 && r.op_mod == 0)
        .map(|r| u16::from_be_bytes([r.input[0x0a], r.input[0x0b]]))
        .collect()
}

#[test]
fn a_vf_without_a_mac_comes_up_as_linux_brings_one_up() {
    let fabric = Fabric::new();
    let (sa, sb) = (
        SimDevice::new(
            Profile::connectx5()
                .with_mac([2, 0xc5, 0x5a, 0, 0, 0x0a])
                .as_vf(true),
            Mode::Sync,
        ),
        SimDevice::new(
            Profile::connectx5()
                .with_mac([2, 0xc5, 0x5a, 0, 0, 0x0b])
                .as_vf(true),
            Mode::Sync,
        ),
    );
    fabric.attach(&sa).unwrap();
    fabric.attach(&sb).unwrap();
    let a = Device::open(SimPlatform::new(sa.clone()), DeviceConfig::default()).unwrap();
    let b = Device::open(SimPlatform::new(sb.clone()), DeviceConfig::default()).unwrap();
    for (d, s) in [(&a, &sa), (&b, &sb)] {
        assert!(d.is_vf());
        let v = d.vport();
        assert!(v.random_mac);
        assert_eq!(
            v.mac[0] & 0x03,
            0x02,
            "locally administered, unicast: {:02x?}",
            v.mac
        );
        assert_ne!(v.mac, [2, 0xc5, 0x5a, 0, 0, 0x0a]);
        assert_eq!(
            d.gid0().unwrap().mac,
            v.mac,
            "the GIDs carry the random MAC"
        );
        let writes = register_writes(s);
        assert!(
            !writes.contains(&reg::HOST_ENDIANNESS) && !writes.contains(&reg::PAOS),
            "no HOST_ENDIANNESS, no PAOS write on a VF: {writes:x?}"
        );
        // The address list: one MODIFY_NIC_VPORT_CONTEXT with `addresses_list`.
        let lists = s
            .trace()
            .into_iter()
            .filter(|r| r.opcode == Opcode::ModifyNicVportContext as u16 && r.input.len() > 0x200)
            .count();
        assert_eq!(lists, 1);
    }
    assert_ne!(a.vport().mac, b.vport().mac);
    drop((a.close(), b.close()));
}

#[test]
fn a_pf_writes_its_port_registers_and_keeps_its_mac() {
    let s = SimDevice::new(Profile::connectx5(), Mode::Sync);
    let d = Device::open(SimPlatform::new(s.clone()), DeviceConfig::default()).unwrap();
    assert!(!d.is_vf());
    assert!(!d.vport().random_mac);
    assert_eq!(d.vport().mac, Profile::connectx5().mac());
    assert!(register_writes(&s).contains(&reg::HOST_ENDIANNESS));
    drop(d.close());
}

/// RDMA between two VFs with random MACs, a third NIC (a PF) on the same fabric: the VFs'
/// frames carry their random MACs, and the switch forwards them by the addresses each VF's
/// vport lists — the bystander sees none of them (nothing flooded).
#[test]
fn two_vfs_with_random_macs_exchange_rdma_switched_by_their_listed_addresses() {
    let fabric = Fabric::new();
    let (sa, a) = nic_with(&fabric, Mode::Sync, Profile::connectx5().as_vf(true));
    let (sb, b) = nic_with(&fabric, Mode::Sync, Profile::connectx5().as_vf(true));
    let (bystander, _c) = nic_with(&fabric, Mode::Sync, Profile::connectx5());
    assert!(a.vport().random_mac && b.vport().random_mac);
    let (cqa, cqb) = (a.create_cq(64).unwrap(), b.create_cq(64).unwrap());
    let (ma, mb) = (
        a.alloc_mr(a.pd(), 8192, MrAccess::ALL).unwrap(),
        b.alloc_mr(b.pd(), 8192, MrAccess::ALL).unwrap(),
    );
    let mut qa = qp(&a, &cqa, QpType::Rc, cap(16, 4, 1));
    let mut qb = qp(&b, &cqb, QpType::Rc, cap(16, 4, 1));
    connect(&mut qa, &mut qb, &ConnectOpts::default());
    let before = bystander.datapath_counters().rx_frames;
    let sg = sge1(&ma, 1024);
    for i in 0..8 {
        qa.post_send(&[write_wr(&mb, &sg, i)]).unwrap();
    }
    let done = wait(&cqa, &a, 8);
    assert!(
        done.iter().all(|w| w.status == mlx5::WcStatus::Success),
        "{done:?}"
    );
    assert_eq!(
        bystander.datapath_counters().rx_frames,
        before,
        "no frame of the VFs flooded to the bystander"
    );
    assert_eq!(
        sa.datapath_counters().rx_not_ours + sb.datapath_counters().rx_not_ours,
        0
    );
    drop((qa, qb));
}

/// The hypervisor holds a VF's vport down, then lets it follow the uplink again: the VF's link
/// (QUERY_VPORT_STATE, what its driver reads) follows, `admin_state` says who decided.
#[test]
fn the_hypervisor_sets_a_vfs_link() {
    use mlx5::sim::VportAdmin;
    let fabric = Fabric::new();
    let (s, d) = nic_with(&fabric, Mode::Sync, Profile::connectx5().as_vf(false));
    let st = d.port_state().unwrap();
    assert_eq!((st.admin, st.oper), (2, 1), "AUTO, up");
    assert!(!s.set_vport_admin(VportAdmin::Down));
    let st = d.port_state().unwrap();
    assert_eq!((st.admin, st.oper), (0, 0), "held down by the hypervisor");
    assert!(s.set_vport_admin(VportAdmin::Auto));
    assert_eq!(d.port_state().unwrap().oper, 1);
    // The assigned MAC, seen at the next bring-up.
    s.set_assigned_mac(Some([0x02, 0x11, 0x22, 0x33, 0x44, 0x55]));
    drop(d.close());
    let d = Device::open(SimPlatform::new(s.clone()), DeviceConfig::default()).unwrap();
    assert_eq!(d.vport().mac, [0x02, 0x11, 0x22, 0x33, 0x44, 0x55]);
    assert!(!d.vport().random_mac);
    drop(d.close());
}
