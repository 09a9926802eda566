//! The RC QP as the connection manager programs it from the CM's messages, as librdmacm does
//! (docs/rdma-cm-facts.md §3.5–3.6): INIT with the rights rdma_cm grants, then RTR and RTS with
//! the path, the two sides' QPNs and PSNs, depths and timeouts; and the small conversions the
//! messages need (ACK timeout, MTU enum, IPv4-mapped GIDs).

use crate::error::{Error, Result};
use crate::io::platform::Platform;
use crate::qp::{Access, Mtu, Qp, QpAttr, QpAttrMask as M, QpState};

/// `cm_ack_timeout`: the ACK timeout of a path from a CA's ACK delay and the packet life time.
pub fn ack_timeout(ca_ack_delay: u8, packet_life_time: u8) -> u8 {
    let mut t = packet_life_time.min(30) + 1;
    if t >= ca_ack_delay {
        t += u8::from(ca_ack_delay >= t - 1);
    } else {
        t = ca_ack_delay + u8::from(t >= ca_ack_delay.saturating_sub(1));
    }
    t.min(31)
}

pub(super) fn mtu_of(v: u64) -> Option<Mtu> {
    Some(match v {
        1 => Mtu::Mtu256,
        2 => Mtu::Mtu512,
        3 => Mtu::Mtu1024,
        4 => Mtu::Mtu2048,
        5 => Mtu::Mtu4096,
        _ => return None,
    })
}

/// `::ffff:a.b.c.d`.
pub fn mapped(ip: [u8; 4]) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12..].copy_from_slice(&ip);
    g
}

/// To INIT with the rights rdma_cm grants: remote write, and remote read and atomics when we
/// take in READs (responder resources ≠ 0). From RESET (RESET → INIT) or from INIT (INIT →
/// INIT, as librdmacm re-programs the QP `rdma_create_qp` left in INIT); receives may be posted
/// from INIT on, before the connection exists.
pub fn init_qp<P: Platform>(qp: &mut Qp<'_, P>, responder_resources: u8) -> Result<()> {
    let rd = responder_resources != 0;
    let a = QpAttr {
        qp_state: Some(QpState::Init),
        port_num: 1,
        pkey_index: 0,
        access: Access {
            remote_write: true,
            remote_read: rd,
            remote_atomic: rd,
        },
        ..QpAttr::default()
    };
    match qp.state() {
        QpState::Reset => qp.modify(&a, M::STATE | M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS),
        QpState::Init => qp.modify(&a, M::STATE | M::ACCESS_FLAGS),
        state => Err(Error::QpState {
            qpn: qp.qpn(),
            state,
            op: "cm connect/accept (the QP must be in RESET or INIT)",
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ack_timeouts_as_linux_computes_them() {
        // docs/rdma-cm-facts.md §3.5: plt 16 with delay 16 -> 18, delay 15 -> 17; plt 13 -> 16.
        assert_eq!(ack_timeout(16, 16), 18);
        assert_eq!(ack_timeout(15, 16), 17);
        assert_eq!(ack_timeout(16, 13), 16);
        assert_eq!(ack_timeout(15, 13), 16);
    }
}
