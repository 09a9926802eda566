//! The short path of an Ethernet RQ's receive completions (`poll_cq` on the CQ of an
//! [`EthRq`](crate::eth::EthRq)): a successful RESP_SEND CQE becomes its [`Wc`] with the CQE's
//! words read once and the work request taken from the RQ's table, without the general
//! decoder's search and checks for every kind of queue. Whatever it does not expect — another
//! opcode, no receive outstanding, a length over the buffer — it leaves to the general path,
//! which decides (and refuses) as before; what it produces is what the general path produces
//! for the same CQE (`tests/eth_sq.rs`, `tests/smoltcp.rs` run through it).

use super::state::{Attached, CqShared, RecvTable};
use super::{Wc, WcFlags, WcOpcode, WcStatus};
use crate::io::DmaBuf;
use crate::verbs::wr_table::rq_table;

/// The Ethernet RQ of a CQ that serves one (its receive CQEs name the flow tag, not the RQ).
#[inline(always)]
pub(super) fn queue(s: &CqShared) -> Option<&Attached> {
    if s.flow_tag_rq {
        s.queues.iter().find(|e| e.flow_tag_rq)
    } else {
        None
    }
}

/// The completion of the receive CQE at byte `at` of `buf` whose last word is `hi` (already
/// loaded with acquire, owner checked), on RQ `q`; `None` to leave it to the general path.
#[inline(always)]
pub(super) fn complete(buf: &DmaBuf, at: usize, hi: u64, q: &Attached) -> Option<Wc> {
    // RESP_SEND (0x2) only: the opcode is the top nibble of `op_own`.
    if (hi as u8) >> 4 != 0x2 {
        return None;
    }
    let Some(RecvTable::Rq { table, cnt }) = q.rq.as_ref() else {
        return None;
    };
    let tail = table.load(rq_table::TAIL);
    if tail >= table.load(rq_table::HEAD) {
        return None;
    }
    let (wr_id, cap) =
        table.load_pair_relaxed(rq_table::wrid((tail as u32 & (cnt - 1)) as usize))?;
    // Bytes 12..20 (RSS hash and its type), 28..32 (header status and types, VLAN), 44..48
    // (byte count): read after the acquire load of `hi`.
    let rss = buf.read_words::<16>(at + 8).ok()?;
    let lo = buf.read_words::<24>(at + 24).ok()?;
    let byte_len = u32::from_be_bytes([lo[20], lo[21], lo[22], lo[23]]);
    if u64::from(byte_len) > cap {
        return None;
    }
    table.store(rq_table::TAIL, tail.wrapping_add(1));
    let (hds, types) = (lo[4], lo[5]);
    Some(Wc {
        wr_id,
        byte_len,
        qp_num: q.qpn,
        opcode: WcOpcode::Recv,
        status: WcStatus::Success,
        grh: false,
        vendor_err: 0,
        wc_flags: if hds & 0x6 == 0x6 && (types >> 2) & 3 == 2 {
            WcFlags::IP_CSUM_OK
        } else {
            WcFlags::empty()
        },
        src_qp: 0,
        imm_data: None,
        invalidated_rkey: None,
        vlan_tci: (types & 1 != 0).then(|| u16::from_be_bytes([lo[6], lo[7]])),
        rss_hash: (rss[8] != 0).then(|| u32::from_be_bytes([rss[4], rss[5], rss[6], rss[7]])),
    })
}
