//! RDMA READ and atomics at the responder: the requests answered with data — READ responses
//! (path MTU sized, one PSN each), an atomic ACK with the original value — after the checks
//! [`super::responder`]'s module documentation lists. A duplicate READ is executed again; a
//! duplicate atomic gets its saved value ([`super::responder`], [`respond`]).
//!
//! Masked atomics ([`masked`], [`super::masked_atomic`]; the simulator's wire encoding:
//! [`crate::fabric::frame`]'s `op::MASKED_CMP_SWAP`): a RETH naming N bytes (4, 8, 16 or 32)
//! and the N-byte operands as payload. Checked: N one the device offers for the operation
//! (`atomic_operations`, `atomic_size_qp`; `_dc` for a DCT) and the payload exactly the
//! operands, the address N-aligned, the QP's `atomic_mode` extended (3 and up) and at least N
//! bytes wide (3: 8, 4: 16, 5: 32) — else NAK invalid request; `rae` and the rkey (ATOMIC
//! access over the N bytes) as for any atomic. An 8-byte one works on the word in the host's
//! order, as the standard atomics do; the others on N big-endian bytes.

use mlx5_ifc::consts::atomic_mode;
use mlx5_ifc::event;
use mlx5_ifc::prm::odp::OdpPerTransportServiceCap as T;

use super::masked_atomic;
use super::psn::psn_add;
use super::verdict::{access_error, flush_ack, invalid, Verdict};
use crate::fabric::frame::{aeth, op, Packet};
use crate::model::mkey::{access, KeyError};
use crate::model::qp::qp_rt;
use crate::model::qp_info::QpInfo;
use crate::model::runtime::Original;
use crate::model::translation;
use crate::model::Hw;

/// The largest RDMA READ the simulator answers.
const MAX_READ: u64 = 64 << 20;

/// Answers an RDMA READ request (also a duplicate one): the READ responses.
pub(super) fn read(hw: &mut Hw<'_>, info: &QpInfo, p: &Packet) -> Verdict {
    let Some(r) = p.reth else {
        return invalid(true);
    };
    let len = u64::from(r.len);
    if len > info.max_msg() || len > MAX_READ {
        return invalid(true);
    }
    if !info.rre {
        return access_error(true);
    }
    let pieces = match translation::translate_remote(
        hw.model,
        r.rkey,
        r.va,
        len,
        access::REMOTE_READ,
        (info.pd, info.qpn),
    ) {
        Ok(p) => p,
        Err(KeyError::Absent)
            if super::odp::rdma_fault(hw, info, (r.rkey, r.va, r.len), 0, T::READ) =>
        {
            return Verdict::Rnr;
        }
        Err(e) => {
            log::info!(
                "mlx5-sim: QP {:#x}: RDMA READ rkey {:#x}: {e:?}",
                info.qpn,
                r.rkey
            );
            return access_error(true);
        }
    };
    let mut data = Vec::with_capacity(len as usize);
    for &(iova, n) in pieces.iter() {
        let at = data.len();
        data.resize(at + n, 0);
        if hw.dma_read(iova, &mut data[at..]).is_err() {
            crate::memory::queue::dma_fault(
                hw.faults,
                iova,
                n,
                false,
                "RDMA READ of host memory".to_string(),
            );
            return Verdict::Nak(aeth::NAK_REMOTE_OP, Some(event::WQ_CATAS_ERROR));
        }
    }
    let mtu = info.mtu as usize;
    let n = data.len().div_ceil(mtu).max(1);
    flush_ack(hw, info);
    let rt = qp_rt(&mut hw.model.rt, info);
    rt.msn = psn_add(rt.msn, 1);
    let msn = rt.msn;
    for i in 0..n {
        let o = match (i == 0, i + 1 == n) {
            (true, true) => op::READ_RESP_ONLY,
            (true, false) => op::READ_RESP_FIRST,
            (false, true) => op::READ_RESP_LAST,
            (false, false) => op::READ_RESP_MIDDLE,
        };
        let resp = Packet {
            opcode: info.service() | o,
            dqpn: info.remote_qpn,
            psn: psn_add(p.psn, i as u32),
            aeth: (o != op::READ_RESP_MIDDLE).then_some((aeth::ACK | aeth::NO_CREDITS, msn)),
            payload: &data[(i * mtu).min(data.len())..((i + 1) * mtu).min(data.len())],
            ..Packet::default()
        };
        hw.model.rt.send(&info.route, &resp);
    }
    Verdict::Done {
        psns: n as u32,
        ack: false,
    }
}

/// Answers an executed (or duplicate) atomic at `psn` with its original value: an ATOMIC
/// ACKNOWLEDGE for a word, a READ response carrying a masked atomic's N bytes otherwise.
pub(super) fn respond(hw: &mut Hw<'_>, info: &QpInfo, psn: u32, original: Original) {
    let (n, bytes) = match original {
        Original::Word(v) => return atomic_ack(hw, info, psn, v),
        Original::Bytes(n, bytes) => (usize::from(n).min(bytes.len()), bytes),
    };
    flush_ack(hw, info);
    let msn = qp_rt(&mut hw.model.rt, info).msn;
    let p = Packet {
        opcode: info.service() | op::READ_RESP_ONLY,
        dqpn: info.remote_qpn,
        psn,
        aeth: Some((aeth::ACK | aeth::NO_CREDITS, msn)),
        payload: &bytes[..n],
        ..Packet::default()
    };
    hw.model.rt.counters.acks_sent += 1;
    hw.model.rt.send(&info.route, &p);
}

fn atomic_ack(hw: &mut Hw<'_>, info: &QpInfo, psn: u32, value: u64) {
    flush_ack(hw, info);
    let msn = qp_rt(&mut hw.model.rt, info).msn;
    let p = Packet {
        opcode: info.service() | op::ATOMIC_ACK,
        dqpn: info.remote_qpn,
        psn,
        aeth: Some((aeth::ACK | aeth::NO_CREDITS, msn)),
        atomic_ack: Some(value),
        ..Packet::default()
    };
    hw.model.rt.counters.acks_sent += 1;
    hw.model.rt.send(&info.route, &p);
}

pub(super) fn atomic(hw: &mut Hw<'_>, info: &QpInfo, p: &Packet) -> Verdict {
    let Some(a) = p.atomic else {
        return invalid(true);
    };
    if a.va % 8 != 0 {
        return invalid(true);
    }
    if !info.rae {
        return access_error(true);
    }
    // `atomic_mode` 0 is no responder mode at all: the request is invalid.
    if info.atomic_mode == 0 {
        return invalid(true);
    }
    let iova = match translation::translate_remote(
        hw.model,
        a.rkey,
        a.va,
        8,
        access::ATOMIC,
        (info.pd, info.qpn),
    ) {
        Ok(pieces) if pieces.len() == 1 => pieces[0].0,
        Err(KeyError::Absent)
            if super::odp::rdma_fault(hw, info, (a.rkey, a.va, 8), 0, T::ATOMIC) =>
        {
            return Verdict::Rnr;
        }
        _ => return access_error(true),
    };
    let cs = p.opcode & 0x1f == op::CMP_SWAP;
    // The target word is in the responder host's byte order (HOST_ENDIANNESS); the original
    // value travels big-endian in the atomic ACK.
    let big_endian = hw.model.vport.host_big_endian();
    let r = hw.dma_fetch_update_u64(iova, big_endian, |old| {
        if cs {
            if old == a.compare {
                a.swap_add
            } else {
                old
            }
        } else {
            old.wrapping_add(a.swap_add)
        }
    });
    let Ok(orig) = r else {
        crate::memory::queue::dma_fault(
            hw.faults,
            iova,
            8,
            true,
            "atomic on host memory".to_string(),
        );
        return Verdict::Nak(aeth::NAK_REMOTE_OP, Some(event::WQ_CATAS_ERROR));
    };
    done(hw, info, p.psn, Original::Word(orig))
}

/// Records an executed atomic's original value for duplicates and answers it.
fn done(hw: &mut Hw<'_>, info: &QpInfo, psn: u32, original: Original) -> Verdict {
    let rt = qp_rt(&mut hw.model.rt, info);
    rt.msn = psn_add(rt.msn, 1);
    while rt.atomics.len() >= info.rra.max(1) {
        rt.atomics.pop_front();
    }
    rt.atomics.push_back((psn, original));
    respond(hw, info, psn, original);
    Verdict::Done {
        psns: 1,
        ack: false,
    }
}

/// Executes a masked atomic request (see the module documentation).
pub(super) fn masked(hw: &mut Hw<'_>, info: &QpInfo, p: &Packet) -> Verdict {
    let Some(r) = p.reth else {
        return invalid(true);
    };
    let n = r.len as usize;
    let cs = p.opcode & 0x1f == op::MASKED_CMP_SWAP;
    let block = if cs { 4 * n } else { 2 * n };
    if !masked_atomic::device_offers(hw.model, cs, n, info.dct)
        || p.payload.len() != block
        || r.va % n as u64 != 0
    {
        return invalid(true);
    }
    if !info.rae {
        return access_error(true);
    }
    // Extended responder modes name their widest argument: 3 is 8 bytes, 4 16, 5 32.
    if info.atomic_mode < atomic_mode::UP_TO_8B as u8 || n > 1 << info.atomic_mode {
        return invalid(true);
    }
    let iova = match translation::translate_remote(
        hw.model,
        r.rkey,
        r.va,
        n as u64,
        access::ATOMIC,
        (info.pd, info.qpn),
    ) {
        Ok(pieces) if pieces.len() == 1 => pieces[0].0,
        Err(KeyError::Absent)
            if super::odp::rdma_fault(hw, info, (r.rkey, r.va, r.len), 0, T::ATOMIC) =>
        {
            return Verdict::Rnr;
        }
        _ => return access_error(true),
    };
    let ops = p.payload;
    let apply = |v: &mut [u8]| {
        if cs {
            masked_atomic::compare_swap(v, ops);
        } else {
            masked_atomic::fetch_add(v, ops);
        }
    };
    let r = if n == 8 {
        let big_endian = hw.model.vport.host_big_endian();
        hw.dma_fetch_update_u64(iova, big_endian, |old| {
            let mut v = old.to_be_bytes();
            apply(&mut v);
            u64::from_be_bytes(v)
        })
        .map(Original::Word)
    } else {
        let mut old = [0u8; 32];
        hw.dma_fetch_update_bytes(iova, &mut old[..n], apply)
            .map(|()| Original::Bytes(n as u8, old))
    };
    let Ok(original) = r else {
        crate::memory::queue::dma_fault(
            hw.faults,
            iova,
            n,
            true,
            "masked atomic on host memory".to_string(),
        );
        return Verdict::Nak(aeth::NAK_REMOTE_OP, Some(event::WQ_CATAS_ERROR));
    };
    done(hw, info, p.psn, original)
}
