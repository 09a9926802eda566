//! Every field mlx5-ifc defines, checked against the reference facts: the bit offset and width
//! of each field of `mlx5_ifc.h` (Linux v6.12.113), copied into `reference/mlx5_ifc_offsets.json`,
//! the fields Linux leaves reserved that rdma-core's PRM layouts name
//! (`reference/rdma-core-names.json`), and the software-steering entry layouts (STE format v0)
//! only rdma-core's `mlx5_ifc.h` has (`reference/ste-v0.json`).

use mlx5_ifc::layout::FieldKind;
use mlx5_ifc::prm::ALL;
use mlx5_ifc::{regs, CmdInHeader, CmdOutHeader, Layout};
use serde_json::Value;

fn facts() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/reference/mlx5_ifc_offsets.json"
    );
    let text = std::fs::read_to_string(path).expect("reference facts present");
    let mut facts: Value = serde_json::from_str(&text).expect("reference facts are JSON");
    // Fields Linux leaves reserved that rdma-core's PRM layouts name
    // (`reference/rdma-core-names.json`): checked as the other facts are.
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/reference/rdma-core-names.json"
    );
    let text = std::fs::read_to_string(path).expect("rdma-core names present");
    let names: Value = serde_json::from_str(&text).expect("rdma-core names are JSON");
    for (layout, fields) in names.as_object().expect("an object") {
        if layout.starts_with('_') {
            continue;
        }
        let entry = facts[layout.as_str()]
            .as_object_mut()
            .expect("names extend structures of the reference");
        for (f, v) in fields.as_object().expect("fields") {
            entry.insert(f.clone(), v.clone());
        }
    }
    // Whole structures Linux's mlx5_ifc.h lacks (`reference/ste-v0.json`): added with their sizes.
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/reference/ste-v0.json");
    let text = std::fs::read_to_string(path).expect("STE v0 facts present");
    let ste: Value = serde_json::from_str(&text).expect("STE v0 facts are JSON");
    for (layout, fields) in ste.as_object().expect("an object") {
        if layout.starts_with('_') {
            continue;
        }
        assert!(facts.get(layout).is_none(), "{layout}: in both references");
        facts[layout.as_str()] = fields.clone();
        facts["_sizes"][layout.as_str()] = ste["_sizes"][layout.as_str()].clone();
    }
    facts
}

fn fact(facts: &Value, layout: &str, field: &str) -> Option<(u64, u64)> {
    let f = facts.get(layout)?.get(field)?;
    Some((f.get(0)?.as_u64()?, f.get(1)?.as_u64()?))
}

#[test]
fn every_field_matches_the_reference() {
    let facts = facts();
    let mut checked = 0;
    for &(name, bytes, fields) in ALL {
        let size_bits = facts["_sizes"][name]
            .as_u64()
            .unwrap_or_else(|| panic!("{name}: no reference size"));
        assert_eq!(bytes as u64 * 8, size_bits, "{name}: size");
        for f in fields {
            let (bit, width) = fact(&facts, name, f.name)
                .unwrap_or_else(|| panic!("{name}.{}: not in the reference", f.name));
            assert_eq!(
                (u64::from(f.bit), u64::from(f.width)),
                (bit, width),
                "{name}.{}: (bit, width)",
                f.name
            );
            assert!(
                u64::from(f.bit + f.width) <= size_bits,
                "{name}.{}: runs past the structure",
                f.name
            );
            if f.kind != FieldKind::Value {
                assert_eq!(
                    f.bit % 8,
                    0,
                    "{name}.{}: byte arrays and nested structures are byte aligned",
                    f.name
                );
            } else {
                assert!(
                    f.width >= 1 && f.width <= 64,
                    "{name}.{}: integer fields are 1..=64 bits",
                    f.name
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 1000, "only {checked} fields checked");
}

#[test]
fn every_named_reference_field_is_defined() {
    // Coverage: a named field of a structure we define may only be missing if it cannot be
    // expressed (a duplicate name or a wide non-aligned array), never by oversight.
    let facts = facts();
    for &(name, _, fields) in ALL {
        let obj = facts[name].as_object().expect("struct facts");
        for (fname, v) in obj {
            if fname.starts_with("reserved") || fname.contains('#') {
                continue;
            }
            let width = v[1].as_u64().unwrap_or(0);
            let bit = v[0].as_u64().unwrap_or(0);
            let expressible = width <= 64 || (bit % 8 == 0 && width % 8 == 0);
            if expressible {
                assert!(
                    fields.iter().any(|f| f.name == fname),
                    "{name}.{fname} is not defined"
                );
            }
        }
    }
}

#[test]
fn command_headers_match_every_command() {
    let facts = facts();
    let mut ins = 0;
    let mut outs = 0;
    for &(name, _, _) in ALL {
        // A context inside ALLOC_PACKET_REFORMAT_CONTEXT's input, named like a command's.
        if name == "packet_reformat_context_in" {
            continue;
        }
        // Modify-header actions (8 bytes each in ALLOC_MODIFY_HEADER_CONTEXT), named like
        // commands' inputs.
        if matches!(name, "set_action_in" | "add_action_in" | "copy_action_in") {
            continue;
        }
        // A general object command (CREATE_GENERAL_OBJECT, ...) starts with the general object
        // header, checked as a header of its own.
        if fact(&facts, name, "hdr") == Some((0, 128)) {
            let want = if name.ends_with("_in") {
                "general_obj_in_cmd_hdr"
            } else {
                "general_obj_out_cmd_hdr"
            };
            assert_eq!(
                facts["_member_types"][name]["hdr"]["type"], want,
                "{name}.hdr"
            );
            continue;
        }
        let general_in = name == "general_obj_in_cmd_hdr";
        let (hdr, n): (&[mlx5_ifc::FieldInfo], &mut i32) = if name.ends_with("_in") || general_in {
            (CmdInHeader::FIELDS, &mut ins)
        } else if name.ends_with("_out") || name == "general_obj_out_cmd_hdr" {
            (CmdOutHeader::FIELDS, &mut outs)
        } else {
            continue;
        };
        for f in hdr {
            if f.name == "uid" && fact(&facts, name, "uid").is_none() {
                continue; // older commands keep those bits reserved
            }
            if f.name == "uid" && name == "destroy_uctx_in" {
                continue; // the context it destroys is named in its body (byte 10), not the header
            }
            if f.name == "op_mod" && general_in {
                // The object type takes op_mod's place.
                assert_eq!(fact(&facts, name, "obj_type"), Some((0x30, 16)));
                continue;
            }
            assert_eq!(
                fact(&facts, name, f.name),
                Some((u64::from(f.bit), u64::from(f.width))),
                "{name}.{}",
                f.name
            );
        }
        *n += 1;
    }
    assert!(ins > 40 && outs > 40);
}

#[test]
fn bar0_register_offsets_match_the_init_segment() {
    let facts = facts();
    let dword = |field: &str| {
        fact(&facts, "initial_seg", field)
            .map(|(bit, _)| bit / 32 * 4)
            .unwrap()
    };
    assert_eq!(u64::from(regs::FW_REV), dword("fw_rev_minor"));
    assert_eq!(
        u64::from(regs::CMDIF_REV_FW_SUB),
        dword("cmd_interface_rev")
    );
    assert_eq!(u64::from(regs::CMDQ_ADDR_H), dword("cmdq_phy_addr_63_32"));
    assert_eq!(u64::from(regs::CMDQ_ADDR_L_SZ), dword("log_cmdq_size"));
    assert_eq!(u64::from(regs::CMD_DBELL), dword("command_doorbell_vector"));
    assert_eq!(u64::from(regs::INITIALIZING), dword("initializing"));
    assert_eq!(u64::from(regs::HEALTH_BUFFER), dword("health_buffer"));
    assert_eq!(u64::from(regs::HEALTH_COUNTER), dword("health_counter"));
    // bit 31 of the `initializing` dword.
    assert_eq!(
        fact(&facts, "initial_seg", "initializing").unwrap().0 % 32,
        0
    );
    let hb = |field: &str| {
        fact(&facts, "health_buffer", field)
            .map(|(bit, _)| bit / 32 * 4)
            .unwrap()
    };
    assert_eq!(
        u64::from(regs::HEALTH_SYND - regs::HEALTH_BUFFER),
        hb("synd")
    );
    assert_eq!(
        u64::from(regs::HEALTH_RFR_SEVERITY - regs::HEALTH_BUFFER),
        hb("rfr")
    );
    assert_eq!(
        u64::from(regs::HEALTH_FW_VER - regs::HEALTH_BUFFER),
        hb("fw_version")
    );
}

#[test]
fn ste_v0_entry_parts_match_the_constants() {
    use mlx5_ifc::consts::ste_v0;
    use mlx5_ifc::prm::{ste, ste_tag};
    type Hw = ste::DrHwSteFormat;
    assert_eq!(Hw::BYTES, ste_v0::SIZE);
    assert_eq!(1 << ste_v0::LOG_SIZE, ste_v0::SIZE);
    assert_eq!((Hw::CTRL.offset(), Hw::CTRL.info.width / 8), (0, 32));
    assert_eq!(ste_v0::CTRL_SIZE, 32);
    assert_eq!(Hw::TAG.offset(), ste_v0::TAG_OFFSET);
    assert_eq!(Hw::TAG.info.width as usize / 8, ste_v0::TAG_SIZE);
    assert_eq!(Hw::MASK.offset(), ste_v0::MASK_OFFSET);
    assert_eq!(Hw::MASK.info.width as usize / 8, ste_v0::MASK_SIZE);
    // The three control layouts fill the control part and share the head `ste_general` names.
    for (name, bytes, fields) in [
        (
            "ste_rx_steering_mult",
            ste::SteRxSteeringMult::BYTES,
            ste::SteRxSteeringMult::FIELDS,
        ),
        (
            "ste_sx_transmit",
            ste::SteSxTransmit::BYTES,
            ste::SteSxTransmit::FIELDS,
        ),
        (
            "ste_modify_packet",
            ste::SteModifyPacket::BYTES,
            ste::SteModifyPacket::FIELDS,
        ),
    ] {
        assert_eq!(bytes, ste_v0::CTRL_SIZE, "{name}");
        for head in ste::SteGeneral::FIELDS.iter().filter(|f| f.bit < 0x60) {
            let f = fields.iter().find(|f| f.name == head.name);
            assert_eq!(
                f.map(|f| (f.bit, f.width)),
                Some((head.bit, head.width)),
                "{name}.{}",
                head.name
            );
        }
    }
    // Every tag layout is a tag (or mask) exactly.
    let control = [
        "ste_general",
        "ste_rx_steering_mult",
        "ste_sx_transmit",
        "ste_modify_packet",
    ];
    let mut n = 0;
    for &(name, bytes, _) in ALL {
        if name.starts_with("ste_") && !control.contains(&name) {
            assert_eq!(bytes, ste_v0::TAG_SIZE, "{name}");
            n += 1;
        }
    }
    assert_eq!(n, 22);
    assert_eq!(ste_tag::SteEthL2Src::BYTES, ste_v0::TAG_SIZE);
    // A flow tag is 24 bits under the valid bit of `qp_list_pointer`.
    assert_eq!(ste::SteRxSteeringMult::QP_LIST_POINTER.info.width, 32);
    assert_eq!(ste_v0::FLOW_TAG_VALID, 1 << 31);
}

#[test]
fn general_object_values_fit_their_fields() {
    use mlx5_ifc::consts::{general_obj_type, general_obj_types, mkey_access_mode};
    use mlx5_ifc::prm::{caps::CmdHcaCap, general_obj::GeneralObjInCmdHdr, mr::Mkc};
    assert!(general_obj_type::SW_ICM <= GeneralObjInCmdHdr::OBJ_TYPE.max());
    assert_eq!(CmdHcaCap::GENERAL_OBJ_TYPES.info.width, 64);
    assert_eq!(general_obj_types::SW_ICM, 1 << 8);
    assert!(
        mkey_access_mode::SW_ICM <= (Mkc::ACCESS_MODE_4_2.max() << 2 | Mkc::ACCESS_MODE_1_0.max())
    );
}
