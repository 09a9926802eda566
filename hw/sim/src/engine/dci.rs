//! A DC initiator's connection to the DCT its WQEs name (the requester runs it as an RC QP
//! whose destination comes from each WQE's address vector).
//!
//! A DCI is connected to one DCT at a time. A WQE for another destination waits, unexecuted,
//! until every request to the current one is acknowledged ([`must_wait`]); the requester then
//! runs it again ([`super::requester::complete_ready`]). A request starts a connection — its
//! first packet carries the connect flag at its PSN — when its destination is new, or when the
//! DCI had nothing outstanding (an idle DCI lets its connection go, so a DCT that forgot it
//! loses nothing); a retransmission of that packet carries the flag again ([`dceth`]).

use mlx5_ifc::wqe::{CtrlSeg, DatagramSeg};
use mlx5_ifc::{Layout, View};

use crate::fabric::frame::Dceth;
use crate::model::dc::DciPeer;
use crate::model::qp::qp_rt;
use crate::model::qp_info::QpInfo;
use crate::model::Hw;

/// The destination of a DCI's WQE (`bytes` from its control segment): `(DCT GID, DCT number)`.
fn destination(bytes: &[u8]) -> Option<([u8; 16], u32)> {
    let d = View::<DatagramSeg>::new(bytes.get(CtrlSeg::BYTES..)?).ok()?;
    let mut gid = [0u8; 16];
    gid.copy_from_slice(d.bytes(DatagramSeg::RGID));
    Some((gid, d.get32(DatagramSeg::DQPN)))
}

/// Whether DCI `info`'s WQE `bytes` must wait: it names another DCT than the one the DCI is
/// connected to while requests to that one are unacknowledged. Marks the DCI waiting.
pub(super) fn must_wait(hw: &mut Hw<'_>, info: &QpInfo, bytes: &[u8]) -> bool {
    let Some((gid, dctn)) = destination(bytes) else {
        return false;
    };
    let rt = qp_rt(&mut hw.model.rt, info);
    let busy = rt.outstanding.iter().any(|r| !r.done);
    let other = rt.dc_peer.is_some_and(|p| p.dgid != gid || p.dctn != dctn);
    rt.dc_waits = busy && other;
    rt.dc_waits
}

/// Whether DCI `info` waits at a WQE and may go on now (nothing outstanding): clears the mark.
pub(super) fn may_go_on(hw: &mut Hw<'_>, info: &QpInfo) -> bool {
    let Some(rt) = hw.model.rt.qps.get_mut(&info.rt_key) else {
        return false;
    };
    let go = rt.dc_waits && !rt.outstanding.iter().any(|r| !r.done);
    if go {
        rt.dc_waits = false;
    }
    go
}

/// The DCETH of DCI `info`'s packet with PSN `psn` of the request that starts at `first_psn`
/// and goes to DCT `dctn` at `dgid` with access key `key` (`None` on any other QP); `again`: a
/// retransmission, which never starts a connection (its DCT may have executed it already) and
/// carries the connect flag only on the packet that started the current one.
pub(super) fn dceth(
    hw: &mut Hw<'_>,
    info: &QpInfo,
    (dgid, dctn, key): ([u8; 16], u32, u64),
    (first_psn, psn): (u32, u32),
    again: bool,
) -> Option<Dceth> {
    if !info.dci() {
        return None;
    }
    let rt = qp_rt(&mut hw.model.rt, info);
    // Busy: a request before this one is unacknowledged (a new request is queued only after
    // its packets first went out).
    let busy = rt.outstanding.iter().any(|r| !r.done);
    let connect = match rt.dc_peer {
        Some(p) if again || (busy && p.dgid == dgid && p.dctn == dctn) => p.first_psn == psn,
        Some(p) if p.dgid == dgid && p.dctn == dctn && p.first_psn == first_psn => {
            p.first_psn == psn
        }
        _ => {
            rt.dc_peer = Some(DciPeer {
                dgid,
                dctn,
                first_psn,
            });
            first_psn == psn
        }
    };
    Some(Dceth {
        key,
        connect,
        dci: info.qpn,
    })
}
