//! CM MADs from a hostile peer into a listening connection manager (issue #26): a raw QP1 on
//! one simulated NIC sends what the input says to QP1 of another, where a `Cm` listens and its
//! caller accepts, rejects, disconnects or ignores each connection the input's choice; device
//! time jumps between MADs so that every timer runs. `Cm::poll` must never fail (nothing a
//! peer sends is an error of the caller's) and nothing panics.
//!
//! The input is a sequence of records: a control byte, an action byte, a length `n`, then `n`
//! bytes (at most 232) laid over the MAD after its 24-byte header. Control bits 0–2 pick the
//! attribute (REQ … DREP, and 0x17, which the CM does not take); bit 3 aims a REQ at the
//! listened port (ServiceID, MTU, RC); bit 4 names one of our comm IDs as the remote one; bit 5
//! breaks the MAD header; bit 6 sends the record 40 times (a burst). Action bits 0–1: what the
//! caller does with a new REQ (nothing, reject, accept, disconnect); bits 6–7: the time to let
//! pass (0, 1 ms, 100 ms, 10 s).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mlx5::raw::mad::{attr, hdr, ids, req, service_id, Mad, MAD_LEN};
use mlx5::cm::{mapped, Cm, CmConfig, CmEvent, CmId, ConnParam, Gsi, GsiBufs, MadAddr};
use mlx5::qp::{QpCap, QpInitAttr, QpType};
use mlx5::sim::{Fabric, Mode, Profile, SimDevice};
use mlx5::{Device, DeviceConfig, GidEntry, SimPlatform};

const PORT: u16 = 7174;
/// Bytes of the MAD the input may lay over (after the header).
const BODY: usize = MAD_LEN - 24;
/// QPs the caller can accept on.
const QPS: usize = 4;

fn nic(fabric: &Fabric, n: u8, ip: [u8; 4]) -> (SimDevice, Device<SimPlatform>) {
    let sim = SimDevice::new(
        Profile::connectx5().with_mac([2, 0xc5, 0x5a, 0, 0x26, n]),
        Mode::Sync,
    );
    fabric.attach(&sim).expect("attach");
    let dev = Device::open(SimPlatform::new(sim.clone()), DeviceConfig::default())
        .expect("a fault-free bring-up");
    let mac = dev.vport().mac;
    dev.set_gid(1, Some(GidEntry::ipv4(ip, mac))).expect("GID");
    (sim, dev)
}

fuzz_target!(|data: &[u8]| {
    let fabric = Fabric::new();
    let (ip_a, ip_b) = ([10, 0, 0, 1], [10, 0, 0, 2]);
    let (_sa, a) = nic(&fabric, 1, ip_a);
    let (_sb, b) = nic(&fabric, 2, ip_b);
    let (ba, bb) = (GsiBufs::new(&a).unwrap(), GsiBufs::new(&b).unwrap());
    let mut ga = Gsi::open(&a, &ba, 1).unwrap();
    let cfg = CmConfig {
        cm_response_timeout: 12,
        packet_life_time: 8,
        max_cm_retries: 3,
        ca_guid: 0x0200_00ff_fe00_0002,
        ..CmConfig::default()
    };
    let mut cb = Cm::new(Gsi::open(&b, &bb, 1).unwrap(), cfg);
    cb.listen(PORT).unwrap();
    cb.learn(mapped(ip_a), a.vport().mac);
    let cq = b.create_cq(16).unwrap();
    let pd = b.pd();
    let cap = QpCap {
        max_send_wr: 4,
        max_recv_wr: 4,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let mut qps: Vec<_> = (0..QPS)
        .map(|_| {
            b.create_qp(pd, &QpInitAttr::new(QpType::Rc, &cq, &cq, cap))
                .unwrap()
        })
        .collect();
    let mut spare = b
        .create_qp(pd, &QpInitAttr::new(QpType::Rc, &cq, &cq, cap))
        .unwrap();
    let to = MadAddr {
        gid: mapped(ip_b),
        mac: b.vport().mac,
        sgid_index: 1,
        hop_limit: 64,
        traffic_class: 0,
    };
    let mut accepted = Vec::new();
    let mut known: Vec<CmId> = Vec::new();
    let mut rest = data;
    let mut records = 0;
    while rest.len() >= 3 && records < 48 {
        let (ctl, act) = (rest[0], rest[1]);
        let n = usize::from(rest[2]).min(BODY).min(rest.len() - 3);
        let body = &rest[3..3 + n];
        rest = &rest[3 + n..];
        records += 1;
        let mut m = Mad::cm(
            0x10 + u16::from(ctl & 7),
            0x4655_5a5a_0000_0000 | records as u64,
        );
        m.0[24..24 + n].copy_from_slice(body);
        if ctl & 0x08 != 0 && m.attr_id() == attr::REQ {
            m.set(req::SERVICE_ID, service_id(PORT));
            m.set(req::PATH_MTU, 3);
            m.set(req::TRANSPORT, 0);
        }
        if ctl & 0x10 != 0 && !known.is_empty() {
            let id = known[usize::from(act >> 2) % known.len()];
            m.set(ids::REMOTE_COMM_ID, u64::from(id.0));
        }
        if ctl & 0x20 != 0 {
            m.set(hdr::CLASS_VERSION, u64::from(act));
        }
        let copies = if ctl & 0x40 != 0 { 40 } else { 1 };
        for _ in 0..copies {
            // A's own send slots: its completions (and B's answers) reaped first.
            while ga.recv().unwrap().is_some() {}
            ga.send(&to, &m).unwrap();
        }
        fabric.advance(match act >> 6 {
            0 => 0,
            1 => 1_000_000,
            2 => 100_000_000,
            _ => 10_000_000_000,
        });
        // Nothing the peer sent may make poll fail.
        while let Some(e) = cb.poll().expect("Cm::poll failed on a peer's MADs") {
            let CmEvent::ConnectRequest(r) = e else {
                continue;
            };
            known.push(r.id);
            // Errors of the caller's own calls are typed answers, fine here.
            match act & 3 {
                1 => {
                    let _ = cb.reject(r.id, 28);
                }
                2 => {
                    if let Some(mut q) = qps.pop() {
                        let _ = cb.accept(r.id, &mut q, a.vport().mac, &ConnParam::default());
                        accepted.push(q);
                    }
                }
                3 => {
                    let _ = cb.disconnect(r.id, &mut spare);
                }
                _ => {}
            }
        }
    }
    // Whatever is left runs out on our clock.
    for _ in 0..8 {
        fabric.advance(60_000_000_000);
        while cb.poll().expect("Cm::poll failed on its timers").is_some() {}
    }
    while ga.recv().unwrap().is_some() {}
    for q in qps.into_iter().chain(accepted) {
        let _ = q.destroy();
    }
    let _ = spare.destroy();
    let _ = cq.destroy();
    let _ = cb.into_gsi().close();
    let _ = ga.close();
    let _ = bb.destroy();
    let _ = ba.destroy();
    let _ = b.close();
    let _ = a.close();
});
