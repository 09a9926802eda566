//! A hostile CM peer's tools (issue #26): addresses for a raw QP1 to send to, REQs that ask
//! for the longest timers, and sending with the sender's own completions reaped.

use super::Dev;
use mlx5::cm::{mapped, CmConfig, Gsi, MadAddr};
use mlx5::raw::mad::{attr, req, Mad};
use mlx5::GidEntry;

/// Gives `dev` the IPv4-mapped GID of `ip` at index 1 (RoCE v2, as rdma_cm's addresses).
pub fn with_ip(dev: &Dev, ip: [u8; 4]) {
    let mac = dev.vport().mac;
    dev.set_gid(
        1,
        Some(GidEntry {
            gid: mapped(ip),
            mac,
            vlan: None,
        }),
    )
    .unwrap();
}

/// Where a hostile node sends: QP1 of `dev` at `ip`, from the sender's GID index 1.
pub fn to(dev: &Dev, ip: [u8; 4]) -> MadAddr {
    MadAddr {
        gid: mapped(ip),
        mac: dev.vport().mac,
        sgid_index: 1,
        hop_limit: 64,
        traffic_class: 0,
    }
}

/// A REQ for `port` from `from` asking for the longest timers the fields can say: response
/// timeouts 31 (2^23 ms each) and 15 retries.
pub fn greedy_req(port: u16, comm_id: u32, from: [u8; 4]) -> Mad {
    let mut m = Mad::cm(attr::REQ, 0x7700_0000_0000_0000 | u64::from(comm_id));
    m.set(req::LOCAL_COMM_ID, u64::from(comm_id));
    m.set(req::SERVICE_ID, mlx5::raw::mad::service_id(port));
    m.set(
        req::LOCAL_CA_GUID,
        0x0666_0000_0000_0000 | u64::from(comm_id),
    );
    m.set(req::LOCAL_QPN, 0x100 + u64::from(comm_id & 0xffff));
    m.set(req::REMOTE_CM_RESPONSE_TIMEOUT, 31);
    m.set(req::LOCAL_CM_RESPONSE_TIMEOUT, 31);
    m.set(req::MAX_CM_RETRIES, 15);
    m.set(req::PATH_MTU, 3);
    m.set(req::TRANSPORT, 0);
    m.set(req::LOCAL_ACK_TIMEOUT, 18);
    m.0[req::PRIMARY_LOCAL_GID..][..16].copy_from_slice(&mapped(from));
    m
}

/// Sends `m` from the raw QP1 `g`, reaping its send completions (and whatever else came,
/// returned: how many MADs it received on the way).
pub fn send(g: &mut Gsi<'_, mlx5::SimPlatform>, to: &MadAddr, m: &Mad) -> usize {
    let mut got = 0;
    while g.recv().unwrap().is_some() {
        got += 1;
    }
    g.send(to, m).unwrap();
    while g.recv().unwrap().is_some() {
        got += 1;
    }
    got
}

/// Short timers so that a retransmission test takes milliseconds (a REQ every 2·1 + 16 ms; the
/// REQ wait allowed is 2 × 2^(12−8) ms × (5 + 1) = 192 ms), and a CA GUID of `dev`'s own.
pub fn fast(dev: &Dev) -> CmConfig {
    CmConfig {
        cm_response_timeout: 12,
        packet_life_time: 8,
        max_cm_retries: 5,
        ca_guid: 0x0200_00ff_fe00_0000 | u64::from(dev.vport().mac[5]),
        ..CmConfig::default()
    }
}
