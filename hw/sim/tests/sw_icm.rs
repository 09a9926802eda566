//! SW ICM, software steering's memory, byte by byte (notes: dr-control.md §1.2 e, §2, §3.5):
//! the capability page's regions, CREATE/DESTROY_GENERAL_OBJECT of type SW_ICM as Linux's
//! `mlx5_dm_sw_icm_alloc` sends them for a DevX context, a SW_ICM key (access mode 4,
//! zero-based) written and read back by the send ring's force-loopback QP, the objects' uids,
//! SYNC_STEERING, and the accounts (bytes backed only where written, gone with the object).

mod common;

use common::datapath::{pair, read, Node, Seg};
use common::dr::{as_uid, connect_fl, create_sw_icm, create_uctx, destroy_general, sw_icm_key};
use mlx5_ifc::consts::{cap_mode, cap_type, general_obj_type, general_obj_types, qp_st};
use mlx5_ifc::prm::caps::CmdHcaCap;
use mlx5_ifc::prm::devx::DestroyUctxIn;
use mlx5_ifc::prm::general_obj::GeneralObjInCmdHdr;
use mlx5_ifc::prm::memic::DeviceMemCap as D;
use mlx5_ifc::prm::mr::DestroyMkeyIn;
use mlx5_ifc::prm::sw_icm::{SyncSteeringIn, SyncSteeringOut};
use mlx5_ifc::{Layout, Opcode, View};
use mlx5_sim::syndrome as syn;
use mlx5_sim::{Mode, SwIcmAccounts};

use common::cmd;

const WRITE: u8 = 0x08;
const READ: u8 = 0x10;
const SIGNALED: u8 = 0x08;

/// The capability page's SW ICM fields: `(steering start, log size, header-modify start,
/// log size, log granularity)`.
fn regions(n: &mut Node) -> (u64, u64, u64, u64, u64) {
    let caps = n.fx.p.query_cap(cap_type::DEV_MEM, cap_mode::CUR);
    let c = View::<D>::new(&caps).unwrap();
    (
        c.get(D::STEERING_SW_ICM_START_ADDRESS),
        c.get(D::LOG_STEERING_SW_ICM_SIZE),
        c.get(D::HEADER_MODIFY_SW_ICM_START_ADDRESS),
        c.get(D::LOG_HEADER_MODIFY_SW_ICM_SIZE),
        c.get(D::LOG_SW_ICM_ALLOC_GRANULARITY),
    )
}

#[test]
fn the_capabilities_offer_sw_icm_regions_dr_accepts() {
    let (_fabric, mut a, _b) = pair(Mode::Sync);
    let (steer, log_steer, hm, log_hm, gran) = regions(&mut a);
    // dr_domain_check_icm_memory_caps: steering ≥ 2^26, header modify ≥ 2^15.
    assert!(log_steer >= 26 && log_hm >= 15, "{log_steer} {log_hm}");
    assert_eq!(gran, 12);
    // Aligned to their size (DR's STE pool lands aligned), below 2^40 (an STE carries 40
    // bits), apart from each other.
    for (start, log) in [(steer, log_steer), (hm, log_hm)] {
        assert!(start != 0 && start % (1 << log) == 0 && start + (1 << log) <= 1 << 40);
    }
    assert!(hm >= steer + (1 << log_steer) || hm + (1 << log_hm) <= steer);
    let general = a.fx.p.query_cap(cap_type::GENERAL, cap_mode::CUR);
    let types = View::<CmdHcaCap>::new(&general)
        .unwrap()
        .get(CmdHcaCap::GENERAL_OBJ_TYPES);
    assert_eq!(
        types,
        general_obj_types::SW_ICM | general_obj_types::FLOW_SAMPLER,
        "SW ICM and flow samplers, not the argument object (bit 35)"
    );
}

#[test]
fn sw_icm_objects_are_checked_and_belong_to_their_context() {
    let (_fabric, mut a, _b) = pair(Mode::Sync);
    let (steer, log_steer, hm, _, _) = regions(&mut a);
    let uid = create_uctx(&mut a.fx);
    let other = create_uctx(&mut a.fx);
    // DR's STE pool: 2^min(20, log - 9) STEs of 64 bytes.
    let log_pool = (log_steer - 9).min(20) + 6;
    let (st, id) = create_sw_icm(&mut a.fx, uid, steer, log_pool);
    assert_eq!(st, (0, 0));
    assert_ne!(id, 0);
    let block = 4096;
    for (start, log, want, what) in [
        (steer + block, 12, syn::SW_ICM_OVERLAP, "inside the first"),
        (
            steer + (1 << log_pool) + 64,
            12,
            syn::SW_ICM_PARAM,
            "not on a block",
        ),
        (
            steer + (1 << log_pool),
            11,
            syn::SW_ICM_PARAM,
            "below a block",
        ),
        (
            steer + (1 << log_steer) - block,
            13,
            syn::SW_ICM_PARAM,
            "past the region",
        ),
        (steer - block, 12, syn::SW_ICM_PARAM, "below the region"),
    ] {
        assert_eq!(
            create_sw_icm(&mut a.fx, uid, start, log).0,
            (0x03, want),
            "{what}"
        );
    }
    // The header-modify region, as DR's action pool: 4 KiB blocks, 64-byte alignment asked.
    let (st, hm_id) = create_sw_icm(&mut a.fx, uid, hm + 3 * block, 12);
    assert_eq!(st, (0, 0));
    // A type the device does not offer; an input too short for SW ICM.
    let input = cmd::<GeneralObjInCmdHdr>(Opcode::CreateGeneralObject, 0, |v| {
        v.set(GeneralObjInCmdHdr::OBJ_TYPE, 0x13).unwrap();
    });
    assert_eq!(a.fx.run(&input, 0x10).0, (0x03, syn::GENERAL_OBJ_TYPE));
    let input = cmd::<GeneralObjInCmdHdr>(Opcode::CreateGeneralObject, 0, |v| {
        v.set(GeneralObjInCmdHdr::OBJ_TYPE, general_obj_type::SW_ICM)
            .unwrap();
    });
    assert_eq!(a.fx.run(&input, 0x10).0, (0x50, syn::INLEN_BELOW_LAYOUT));
    let acc = a.dev().sw_icm_accounts();
    assert_eq!(
        (acc.objects, acc.bytes, acc.backed_pages),
        (2, (1 << log_pool) + block, 0)
    );

    // Another context does not see it; its own context cannot go while it lives.
    let ty = general_obj_type::SW_ICM;
    assert_eq!(
        destroy_general(&mut a.fx, other, ty, id),
        (0x05, syn::UNKNOWN_GENERAL_OBJECT)
    );
    let input = cmd::<DestroyUctxIn>(Opcode::DestroyUctx, 0, |v| {
        v.set(DestroyUctxIn::UID, uid.into()).unwrap();
    });
    assert_eq!(a.fx.run(&input, 0x10).0, (0x06, syn::UCTX_IN_USE));
    assert_eq!(destroy_general(&mut a.fx, uid, ty, id), (0, 0));
    assert_eq!(
        destroy_general(&mut a.fx, uid, ty, id),
        (0x05, syn::UNKNOWN_GENERAL_OBJECT),
        "twice"
    );
    assert_eq!(
        destroy_general(&mut a.fx, 0, ty, hm_id),
        (0, 0),
        "uid 0 may"
    );
    assert_eq!(a.fx.run(&input, 0x10).0, (0, 0));
    assert_eq!(a.dev().sw_icm_accounts(), SwIcmAccounts::default());
}

#[test]
fn sync_steering_succeeds_for_a_live_uid() {
    let (_fabric, mut a, _b) = pair(Mode::Sync);
    let uid = create_uctx(&mut a.fx);
    let sync = cmd::<SyncSteeringIn>(Opcode::SyncSteering, 0, |_| {});
    assert_eq!(
        a.fx.run(&as_uid(sync.clone(), uid), SyncSteeringOut::BYTES)
            .0,
        (0, 0)
    );
    assert_eq!(a.fx.run(&sync, SyncSteeringOut::BYTES).0, (0, 0));
    assert_eq!(
        a.fx.run(&as_uid(sync, uid + 7), SyncSteeringOut::BYTES).0,
        (0x03, syn::BAD_UID)
    );
}

/// The send ring's postsend (dr_send.c): an RDMA WRITE of an STE into the ICM key at a
/// zero-based offset, then an RDMA READ of the same bytes into the sync buffer.
#[test]
fn a_sw_icm_key_is_written_and_read_by_the_send_ring() {
    let (_fabric, mut a, _b) = pair(Mode::Sync);
    let (steer, _, _, _, _) = regions(&mut a);
    let uid = create_uctx(&mut a.fx);
    let (st, id) = create_sw_icm(&mut a.fx, uid, steer, 24);
    assert_eq!(st, (0, 0));
    let pd = a.fx.pd;
    // The DM MR: at an offset into the object; inside it only.
    let offset = 1 << 20;
    let len = 1 << 22;
    let ((st, key), _) = (sw_icm_key(&mut a.fx, pd, steer + offset, len), ());
    assert_eq!(st, (0, 0));
    assert_eq!(
        sw_icm_key(&mut a.fx, pd, steer + (1 << 24) - 4096, 8192).0,
        (0x03, syn::MKEY_LENGTH),
        "past the object"
    );
    assert_eq!(
        sw_icm_key(&mut a.fx, pd, steer + (1 << 24), 4096).0,
        (0x03, syn::MKEY_LENGTH),
        "no object there"
    );

    let mut qp = a.create_qp(qp_st::RC);
    assert_eq!(connect_fl(&mut a, &qp, qp.qpn, 1), [(0, 0); 3]);
    let sync = a.reg_mr(4096, false, false, false);
    let ste: Vec<u8> = (0..64u8).map(|i| i ^ 0xa5).collect();
    // An STE at index 0x101 of the chunk at 2 MiB into the key (raddr is an offset: DR's
    // `mr->addr` is NULL for DM MRs).
    let raddr = (2 << 20) + 64 * 0x101;
    a.post_send(
        &mut qp,
        WRITE,
        0,
        [0; 4],
        &[Seg::Raddr(raddr, key), Seg::Inline(ste.clone())],
    );
    a.post_send(
        &mut qp,
        READ,
        SIGNALED,
        [0; 4],
        &[Seg::Raddr(raddr, key), Seg::Data(64, sync.key, sync.va(0))],
    );
    let c = a.poll().expect("the READ completed at the doorbell");
    assert_eq!((c.opcode, c.wqe_opcode), (0, READ));
    assert_eq!(read(&a.dev(), &sync, 0, 64), ste);
    assert_eq!(
        a.dev().sw_icm_accounts().backed_pages,
        1,
        "one page written"
    );
    // A partial update of 16 bytes inside the STE (rule insertion rewrites a part).
    a.post_send(
        &mut qp,
        WRITE,
        0,
        [0; 4],
        &[Seg::Raddr(raddr + 32, key), Seg::Inline(vec![0xee; 16])],
    );
    a.post_send(
        &mut qp,
        READ,
        SIGNALED,
        [0; 4],
        &[Seg::Raddr(raddr, key), Seg::Data(64, sync.key, sync.va(64))],
    );
    assert_eq!(a.poll().map(|c| c.opcode), Some(0));
    let mut want = ste.clone();
    want[32..48].fill(0xee);
    assert_eq!(read(&a.dev(), &sync, 64, 64), want);

    // Past the key's length: refused by the responder, which is the QP itself — it goes to
    // ERR, and the WRITE completes in error (flushed, as the QP left RTS before the NAK came
    // back, or with the remote access error).
    a.post_send(
        &mut qp,
        WRITE,
        SIGNALED,
        [0; 4],
        &[Seg::Raddr(len - 32, key), Seg::Inline(vec![1; 64])],
    );
    let c = a.poll().expect("an error completion");
    assert!(
        c.opcode == 0xd && [0x05, 0x13].contains(&c.syndrome),
        "{c:?}"
    );

    // The object goes only after its key; its bytes with it.
    let ty = general_obj_type::SW_ICM;
    assert_eq!(
        destroy_general(&mut a.fx, uid, ty, id),
        (0x06, syn::SW_ICM_IN_USE)
    );
    let input = cmd::<DestroyMkeyIn>(Opcode::DestroyMkey, 0, |v| {
        v.set(DestroyMkeyIn::MKEY_INDEX, u64::from(key >> 8))
            .unwrap();
    });
    assert_eq!(a.fx.run(&input, 0x10).0, (0, 0));
    assert_eq!(destroy_general(&mut a.fx, uid, ty, id), (0, 0));
    assert_eq!(a.dev().sw_icm_accounts(), SwIcmAccounts::default());
}
