//! Automatic path migration (`apm`) on RoCE, as IBTA and mlx5_ib define it: a QP whose
//! alternate path is loaded and armed (ALT_ADDR_PATH with PM_STATE REARM; it reads back ARMED)
//! migrates to it when its retries run out on the primary path — the alternate path becomes
//! the primary one, `pm_state` MIGRATED, a PATH_MIG event — and the request goes through it;
//! software may also migrate an armed QP (PM_STATE MIGRATED); a QP without an alternate path
//! cannot be armed, and one without an armed path fails as before.

mod common;

use common::datapath::{gid, pair, Node, Qp, Seg};
use common::queues::Step;
use mlx5_ifc::consts::{pm_state, qp_opt_param as opt, qp_st};
use mlx5_ifc::prm::qp::{Ads, Qpc};
use mlx5_ifc::{View, ViewMut};
use mlx5_sim::Mode;

const SEND: u8 = 0x0a;
const SIGNALED: u8 = 0x08;
const PATH_MIG: u8 = 0x01;
/// A MAC no port has: a path through it leads nowhere.
const NOWHERE: u64 = 0x5a00_0077;

/// Sets a path's RoCE fields towards 10.0.0.`ip` through MAC 02:c5:`mac_lo`, with a short
/// ack timeout.
fn path_to(p: &mut ViewMut<'_, Ads>, ip: u8, mac_lo: u64) {
    p.set(Ads::RMAC_47_32, 0x02c5).unwrap();
    p.set(Ads::RMAC_31_0, mac_lo).unwrap();
    p.bytes_mut(Ads::RGID_RIP).copy_from_slice(&gid(ip));
    p.set(Ads::ACK_TIMEOUT, 1).unwrap();
}

/// `a`'s QP towards `b`'s: primary path through `primary_mac`, the alternate one (armed at
/// RTR2RTS) to `b` itself when `armed`; one retry.
fn connect(a: &mut Node, qa: &Qp, b_ip: u8, qb: u32, primary_mac: u64, armed: bool) {
    for step in [Step::Rst2Init, Step::Init2Rtr, Step::Rtr2Rts] {
        let mask = if step == Step::Rtr2Rts && armed {
            opt::ALT_ADDR_PATH | opt::PM_STATE
        } else {
            0
        };
        let r = a.fx.step(step, qa.qpn, qp_st::RC, mask, |c| {
            if step == Step::Init2Rtr {
                c.set(Qpc::REMOTE_QPN, qb.into()).unwrap();
                c.set(Qpc::NEXT_RCV_PSN, 0x10).unwrap();
                path_to(
                    &mut c.nested_mut(Qpc::PRIMARY_ADDRESS_PATH),
                    b_ip,
                    primary_mac,
                );
            }
            if step == Step::Rtr2Rts {
                c.set(Qpc::NEXT_SEND_PSN, 0x10).unwrap();
                c.set(Qpc::RETRY_COUNT, 1).unwrap();
                c.nested_mut(Qpc::PRIMARY_ADDRESS_PATH)
                    .set(Ads::ACK_TIMEOUT, 1)
                    .unwrap();
                if armed {
                    let mac = 0x5a00_0000 | u64::from(b_ip);
                    path_to(&mut c.nested_mut(Qpc::SECONDARY_ADDRESS_PATH), b_ip, mac);
                    c.set(Qpc::PM_STATE, pm_state::REARM).unwrap();
                }
            }
        });
        assert_eq!(r, (0, 0), "{step:?}");
    }
}

fn qpc_field(n: &mut Node, qpn: u32, f: impl Fn(&View<'_, Qpc>) -> u64) -> u64 {
    let c = n.fx.qpc(qpn);
    f(&View::<Qpc>::new(&c).unwrap())
}

#[test]
fn an_armed_qp_migrates_to_its_alternate_path_when_the_primary_fails() {
    let (fabric, mut a, mut b) = pair(Mode::Sync);
    fabric.keep_frames(16);
    let (qa, mut qb) = (a.create_qp(qp_st::RC), b.create_qp(qp_st::RC));
    let (a_ip, b_ip) = (a.ip, b.ip);
    b.connect(&qb, a_ip, qa.qpn, |_| {});
    connect(&mut a, &qa, b_ip, qb.qpn, NOWHERE, true);
    assert_eq!(
        qpc_field(&mut a, qa.qpn, |c| c.get(Qpc::PM_STATE)),
        pm_state::ARMED,
        "REARM reads back ARMED"
    );
    let dst = b.reg_mr(4096, false, false, false);
    b.post_recv(&mut qb, &[(4096, dst.key, dst.va(0))]);
    let mut qa = qa;
    a.post_send(&mut qa, SEND, SIGNALED, [0; 4], &[Seg::Inline(vec![5; 32])]);
    let c = a.wait(50_000_000).expect("the SEND completes");
    assert_eq!(c.opcode, 0, "through the alternate path: {c:?}");
    assert_eq!(b.poll().map(|c| c.byte_cnt), Some(32));
    // On the wire: the SEND and its one retry to nowhere, then the SEND on the alternate path.
    let to: Vec<u8> = fabric.captured().iter().map(|(_, f)| f[5]).collect();
    assert_eq!(to[..3], [0x77, 0x77, b_ip], "{to:02x?}");
    let ev = std::iter::from_fn(|| a.poll_eq()).find(|(t, _)| *t == PATH_MIG);
    let (_, data) = ev.expect("a PATH_MIG event");
    assert_eq!(
        u32::from_be_bytes(data[0x18..0x1c].try_into().unwrap()) & 0xff_ffff,
        qa.qpn
    );
    // The alternate path is the primary one now.
    assert_eq!(
        qpc_field(&mut a, qa.qpn, |c| c.get(Qpc::PM_STATE)),
        pm_state::MIGRATED
    );
    let rmac = qpc_field(&mut a, qa.qpn, |c| {
        c.nested(Qpc::PRIMARY_ADDRESS_PATH).get(Ads::RMAC_31_0)
    });
    assert_eq!(rmac, 0x5a00_0000 | u64::from(b_ip));
}

#[test]
fn without_an_armed_path_the_retries_run_out_and_software_migrates_an_armed_qp() {
    let (_fabric, mut a, mut b) = pair(Mode::Sync);
    let (mut qa, qb) = (a.create_qp(qp_st::RC), b.create_qp(qp_st::RC));
    let (a_ip, b_ip) = (a.ip, b.ip);
    b.connect(&qb, a_ip, qa.qpn, |_| {});
    connect(&mut a, &qa, b_ip, qb.qpn, NOWHERE, false);
    // No alternate path loaded: it cannot be armed.
    let r =
        a.fx.step(Step::Rts2Rts, qa.qpn, qp_st::RC, opt::PM_STATE, |c| {
            c.set(Qpc::PM_STATE, pm_state::REARM).unwrap();
        });
    assert_eq!(
        r,
        (0x03, 0x5e03_0032),
        "BAD_PARAM MISSING_RMAC: no alternate path"
    );
    a.post_send(&mut qa, SEND, SIGNALED, [0; 4], &[Seg::Inline(vec![5; 32])]);
    let c = a.wait(50_000_000).expect("an error completion");
    assert_eq!(
        (c.opcode, c.syndrome),
        (0xd, 0x15),
        "TRANSPORT_RETRY_EXC_ERR"
    );

    // A second QP armed, then migrated by software before any traffic.
    let (qa2, qb2) = (a.create_qp(qp_st::RC), b.create_qp(qp_st::RC));
    b.connect(&qb2, a_ip, qa2.qpn, |_| {});
    connect(&mut a, &qa2, b_ip, qb2.qpn, NOWHERE, true);
    let r =
        a.fx.step(Step::Rts2Rts, qa2.qpn, qp_st::RC, opt::PM_STATE, |c| {
            c.set(Qpc::PM_STATE, pm_state::MIGRATED).unwrap();
        });
    assert_eq!(r, (0, 0));
    assert_eq!(
        qpc_field(&mut a, qa2.qpn, |c| c.get(Qpc::PM_STATE)),
        pm_state::MIGRATED
    );
    let rmac = qpc_field(&mut a, qa2.qpn, |c| {
        c.nested(Qpc::PRIMARY_ADDRESS_PATH).get(Ads::RMAC_31_0)
    });
    assert_eq!(
        rmac,
        0x5a00_0000 | u64::from(b_ip),
        "the alternate path took over"
    );
}
