//! The driver on a ConnectX-5 virtual function (issue #29), as Linux's mlx5_core brings one up
//! (../shared/reference/virtual-functions.md §1.2): known by its PCI device id alone (0x1018,
//! from the Platform); no HOST_ENDIANNESS; no port register writes (its link is its vport's);
//! with no MAC from the hypervisor (`permanent_address` zero) a random locally administered one,
//! programmed into the vport's unicast address list and used for its GIDs — and then RDMA
//! between two such VFs, whose frames carry those MACs.

use mlx5::ifc::{consts::reg, Opcode};
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
