//! The values real firmware refuses where the Linux drivers and rdma-core would never send them
//! (issue #10; `../docs/fields.md`): each check here sends the value the driver used to send and
//! sees it refused, then the reference value and sees it accepted.

mod common;

use common::{bare, cmd, status, Poster};
use mlx5_ifc::consts::{cap_mode, cap_type, query_pages};
use mlx5_ifc::prm::caps::{AtomicCaps, CmdHcaCap};
use mlx5_ifc::prm::hca::InitHcaIn;
use mlx5_ifc::prm::vport::{QueryRoceAddressIn, SetRoceAddressIn};
use mlx5_ifc::{CmdStatus, Opcode, View, ViewMut};
use mlx5_sim::syndrome as syn;
use mlx5_sim::{Mode, Profile};

const BAD_PARAM: u8 = CmdStatus::BadParam.raw();

fn profile(json: &str) -> Profile {
    common::quiet(Profile::from_json_str(json).unwrap())
}

/// Enabled, boot pages given: ready for SET_HCA_CAP.
fn enabled(profile: Profile) -> Poster {
    let mut p = Poster::sim(profile, Mode::Sync);
    p.ok(
        &bare::<mlx5_ifc::prm::hca::EnableHcaIn>(Opcode::EnableHca, 0),
        0x10,
    );
    let boot = p.query_pages(query_pages::BOOT);
    p.give(boot as usize);
    p
}

fn set(cap: &[u8], f: impl FnOnce(&mut ViewMut<'_, CmdHcaCap>)) -> Vec<u8> {
    let mut c = cap.to_vec();
    f(&mut ViewMut::<CmdHcaCap>::new(&mut c).unwrap());
    c
}

/// Row 5: `roce` is read-only where `roce_rw_supported` is 0; the old rule
/// (`roce := roce_rw_supported & roce`) cleared it there.
#[test]
fn roce_is_read_only_without_roce_rw_supported() {
    let mut p = enabled(profile(r#"{"roce_rw_supported": 0}"#));
    let cur = p.query_cap(cap_type::GENERAL, cap_mode::CUR);
    let cleared = set(&cur, |v| drop(v.set(CmdHcaCap::ROCE, 0)));
    assert_eq!(
        p.set_cap(cap_type::GENERAL, &cleared),
        (BAD_PARAM, syn::ROCE_NOT_WRITABLE)
    );
    assert_eq!(
        p.set_cap(cap_type::GENERAL, &cur),
        (0, 0),
        "unchanged: fine"
    );
    // Where it is writable, turning RoCE off is the driver's business.
    let mut p = enabled(common::quiet(Profile::connectx5()));
    let cur = p.query_cap(cap_type::GENERAL, cap_mode::CUR);
    let cleared = set(&cur, |v| drop(v.set(CmdHcaCap::ROCE, 0)));
    assert_eq!(p.set_cap(cap_type::GENERAL, &cleared), (0, 0));
}

/// Row 4: the atomic requester endianness mode is 0 or, where supported, 1; QUERY_HCA_CAP
/// (atomic, current) reads back what was set.
#[test]
fn atomic_endianness_mode() {
    let with_mode = |m: u64| {
        let mut c = vec![0u8; 256];
        ViewMut::<AtomicCaps>::new(&mut c)
            .unwrap()
            .set(AtomicCaps::ATOMIC_REQ_8B_ENDIANNESS_MODE, m)
            .unwrap();
        c
    };
    let mode = |p: &mut Poster| {
        let cur = p.query_cap(cap_type::ATOMIC, cap_mode::CUR);
        View::<AtomicCaps>::new(&cur)
            .unwrap()
            .get(AtomicCaps::ATOMIC_REQ_8B_ENDIANNESS_MODE)
    };
    let mut p = enabled(common::quiet(Profile::connectx5()));
    assert_eq!(mode(&mut p), 0, "big-endian until told otherwise");
    assert_eq!(
        p.set_cap(cap_type::ATOMIC, &with_mode(2)),
        (BAD_PARAM, syn::BAD_ATOMIC_ENDIANNESS)
    );
    assert_eq!(p.set_cap(cap_type::ATOMIC, &with_mode(1)), (0, 0));
    assert_eq!(mode(&mut p), 1);
    let mut p = enabled(profile(
        r#"{"atomic_caps.supported_atomic_req_8B_endianness_mode_1": 0}"#,
    ));
    assert_eq!(
        p.set_cap(cap_type::ATOMIC, &with_mode(1)),
        (BAD_PARAM, syn::BAD_ATOMIC_ENDIANNESS)
    );
    assert_eq!(mode(&mut p), 0);
}

/// Row 13: INIT_HCA carries a software owner id only where the capability says so.
#[test]
fn sw_owner_id_only_with_the_capability() {
    let owner = cmd::<InitHcaIn>(Opcode::InitHca, 0, |v| {
        v.set_bytes(InitHcaIn::SW_OWNER_ID, &[7u8; 16]).unwrap();
    });
    let mut p = enabled(profile(r#"{"sw_owner_id": 0}"#));
    let cur = p.query_cap(cap_type::GENERAL, cap_mode::CUR);
    assert_eq!(p.set_cap(cap_type::GENERAL, &cur), (0, 0));
    let init = p.query_pages(query_pages::INIT);
    p.give(init as usize);
    assert_eq!(
        status(&p.exec(&owner, 0x10)),
        (BAD_PARAM, syn::SW_OWNER_ID_NOT_SUPPORTED)
    );
    p.ok(&bare::<InitHcaIn>(Opcode::InitHca, 0), 0x10);
    let mut p = Poster::cx5(Mode::Sync);
    p.ok(
        &bare::<mlx5_ifc::prm::hca::EnableHcaIn>(Opcode::EnableHca, 0),
        0x10,
    );
    let boot = p.query_pages(query_pages::BOOT);
    p.give(boot as usize);
    let init = p.query_pages(query_pages::INIT);
    p.give(init as usize);
    p.ok(&owner, 0x10);
}

/// Row 12: SET/QUERY_ROCE_ADDRESS name a vHCA port only where the device counts them.
#[test]
fn vhca_port_only_with_num_vhca_ports() {
    let gid = |port: u64| {
        cmd::<SetRoceAddressIn>(Opcode::SetRoceAddress, 0, |v| {
            v.set(SetRoceAddressIn::VHCA_PORT_NUM, port).unwrap();
        })
    };
    let query = |port: u64| {
        cmd::<QueryRoceAddressIn>(Opcode::QueryRoceAddress, 0, |v| {
            v.set(QueryRoceAddressIn::VHCA_PORT_NUM, port).unwrap();
        })
    };
    let mut p = Poster::sim(profile(r#"{"num_vhca_ports": 0}"#), Mode::Sync);
    p.init();
    assert_eq!(
        status(&p.exec(&gid(1), 0x10)),
        (BAD_PARAM, syn::VHCA_PORT_NOT_SUPPORTED)
    );
    assert_eq!(
        status(&p.exec(&query(1), 0x30)),
        (BAD_PARAM, syn::VHCA_PORT_NOT_SUPPORTED)
    );
    p.ok(&gid(0), 0x10);
    p.ok(&query(0), 0x30);
    let mut p = Poster::cx5(Mode::Sync);
    p.init();
    p.ok(&gid(1), 0x10);
}
