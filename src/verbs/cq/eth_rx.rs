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
use crate::io::SharedTable;
use crate::verbs::wr_table::rq_table;
use mlx5_ifc::consts::striding;
use mlx5_ifc::cqe::CQE_BYTES;

/// The Ethernet RQ of a CQ that serves one (its receive CQEs name the flow tag, not the RQ).
#[inline(always)]
pub(super) fn queue(s: &CqShared) -> Option<&Attached> {
    s.queues.get(s.flow_tag_rq?)
}

/// Where a CQE's bytes are read from: the ring ([`InRing`]) or, for a completion of a
/// compressed session, the image decompressed into ([`super::zip`]).
pub(super) trait CqeSrc {
    /// `N` bytes (a multiple of 8) at `off` (8-aligned) of the CQE.
    fn words<const N: usize>(&self, off: usize) -> Option<[u8; N]>;
}

/// The CQE at byte `at` of the CQ ring `buf`.
pub(super) struct InRing<'b> {
    pub(super) buf: &'b DmaBuf,
    pub(super) at: usize,
}

impl CqeSrc for InRing<'_> {
    #[inline(always)]
    fn words<const N: usize>(&self, off: usize) -> Option<[u8; N]> {
        self.buf.read_words::<N>(self.at + off).ok()
    }
}

impl CqeSrc for [u8; CQE_BYTES] {
    #[inline(always)]
    fn words<const N: usize>(&self, off: usize) -> Option<[u8; N]> {
        self.get(off..off.checked_add(N)?)?.try_into().ok()
    }
}

/// The completion of the receive CQE `buf` whose last word is `hi` (already loaded with
/// acquire, owner checked), on RQ `q`; `None` to leave it to the general path.
#[inline(always)]
pub(super) fn complete<S: CqeSrc>(buf: &S, hi: u64, q: &Attached) -> Option<Wc> {
    // RESP_SEND (0x2) only: the opcode is the top nibble of `op_own`.
    if (hi as u8) >> 4 != 0x2 {
        return None;
    }
    let (table, cnt) = match q.rq.as_ref()? {
        RecvTable::Rq { table, cnt } => (table, cnt),
        RecvTable::Striding {
            table,
            cnt,
            log_stride,
            log_strides,
        } => {
            let s = Strided {
                table,
                cnt: *cnt,
                log_stride: *log_stride,
                log_strides: *log_strides,
            };
            return striding(buf, hi, q, &s);
        }
        RecvTable::Srq { .. } => return None,
    };
    let tail = table.load(rq_table::TAIL);
    if tail >= table.load(rq_table::HEAD) {
        return None;
    }
    let (wr_id, cap) =
        table.load_pair_relaxed(rq_table::wrid((tail as u32 & (cnt - 1)) as usize))?;
    // Bytes 12..20 (RSS hash and its type), 28..32 (header status and types, VLAN), 44..48
    // (byte count): read after the acquire load of `hi`.
    let rss = buf.words::<16>(8)?;
    let lo = buf.words::<24>(24)?;
    let byte_len = u32::from_be_bytes([lo[20], lo[21], lo[22], lo[23]]);
    if u64::from(byte_len) > cap {
        return None;
    }
    table.store(rq_table::TAIL, tail.wrapping_add(1));
    let (wc_flags, vlan_tci, rss_hash) = offloads_of(&rss, &lo);
    Some(Wc {
        wr_id,
        byte_len,
        qp_num: q.qpn,
        opcode: WcOpcode::Recv,
        status: WcStatus::Success,
        grh: false,
        vendor_err: 0,
        wc_flags,
        src_qp: 0,
        offset: 0,
        imm_data: None,
        invalidated_rkey: None,
        vlan_tci,
        rss_hash,
    })
}

/// A striding RQ's receive table and geometry.
struct Strided<'t> {
    table: &'t SharedTable,
    cnt: u32,
    log_stride: u32,
    log_strides: u32,
}

/// The completion of a striding RQ's receive CQE (PRM "Striding RQ"; docs/fields.md "Striding
/// RQ"): `wqe_id` (bytes 2–3) the WQE, `wqe_counter` its first stride, `byte_cnt` bit 31 a
/// filler, bits 30:16 the strides used, 15:0 the frame's bytes. The WQEs of a cyclic striding
/// RQ fill in order, so the CQE must name the WQE at TAIL and the stride after those already
/// used, and stay inside the WQE; the frame inside the strides it took. When the WQE's strides
/// are all used, TAIL moves on and the completion says so ([`WcFlags::RECV_BUFFER_DONE`]); a
/// filler is such a completion with no bytes. `None` (the general path refuses it) if the CQE
/// does not add up.
#[inline(always)]
fn striding<S: CqeSrc>(buf: &S, hi: u64, q: &Attached, s: &Strided<'_>) -> Option<Wc> {
    let t = s.table;
    let tail = t.load(rq_table::TAIL);
    if tail >= t.load(rq_table::HEAD) {
        return None;
    }
    let slot = tail as u32 & (s.cnt - 1);
    let head = buf.words::<8>(0)?;
    let wqe_id = u32::from(u16::from_be_bytes([head[2], head[3]]));
    let first = (hi >> 16) as u32 & 0xffff;
    let lo = buf.words::<24>(24)?;
    let byte_cnt = u32::from_be_bytes([lo[20], lo[21], lo[22], lo[23]]);
    let filler = byte_cnt & striding::CQE_FILLER != 0;
    let strides = (byte_cnt >> striding::CQE_STRIDES_SHIFT) & 0x7fff;
    let bytes = byte_cnt & 0xffff;
    let used = t.load_relaxed(rq_table::used(s.cnt as usize));
    let total = 1u64 << s.log_strides;
    let end = used + u64::from(strides);
    if wqe_id != slot
        || u64::from(first) != used
        || strides == 0
        || end > total
        || (!filler && u64::from(bytes) > u64::from(strides) << s.log_stride)
    {
        return None;
    }
    let (wr_id, _) = t.load_pair_relaxed(rq_table::wrid(slot as usize))?;
    let done = end == total;
    if done {
        t.store(rq_table::used(s.cnt as usize), 0);
        t.store(rq_table::TAIL, tail.wrapping_add(1));
    } else {
        t.store(rq_table::used(s.cnt as usize), end);
    }
    let (mut wc_flags, mut vlan_tci, mut rss_hash) = (WcFlags::empty(), None, None);
    if !filler {
        let rss = buf.words::<16>(8)?;
        (wc_flags, vlan_tci, rss_hash) = offloads_of(&rss, &lo);
    }
    if done {
        wc_flags = wc_flags.union(WcFlags::RECV_BUFFER_DONE);
    }
    Some(Wc {
        wr_id,
        byte_len: if filler { 0 } else { bytes },
        qp_num: q.qpn,
        opcode: WcOpcode::Recv,
        status: WcStatus::Success,
        grh: false,
        vendor_err: 0,
        wc_flags,
        src_qp: 0,
        offset: first << s.log_stride,
        imm_data: None,
        invalidated_rkey: None,
        vlan_tci,
        rss_hash,
    })
}

/// [`offloads`] of a CQE's bytes 8..24 (`rss`) and 24..48 (`lo`).
#[inline(always)]
fn offloads_of(rss: &[u8; 16], lo: &[u8; 24]) -> (WcFlags, Option<u16>, Option<u32>) {
    offloads(
        [
            rss[4], rss[5], rss[6], rss[7], rss[8], rss[9], rss[10], rss[11],
        ],
        [lo[4], lo[5], lo[6], lo[7]],
    )
}

/// What a successful Ethernet receive CQE says of its frame, from its bytes 12..20 (`rss`:
/// `rss_hash_result`, `rss_hash_type`) and 28..32 (`b28`: `hds_ip_ext`, `l4_hdr_type_etc`,
/// `vlan_info`): `IP_CSUM_OK` as rdma-core's `get_csum_ok` sets it for raw-packet receives (L3
/// and L4 OK, `hds_ip_ext` 0x2 | 0x4, and the frame IPv4, `l3_hdr_type` 2); the stripped VLAN
/// tag (`cv` set); the RSS hash (when `rss_hash_type` says what it covered) — as mlx5e's
/// `mlx5e_build_rx_skb` reads them. The general decoder and the short path both use it.
#[inline(always)]
pub(super) fn offloads(rss: [u8; 8], b28: [u8; 4]) -> (WcFlags, Option<u16>, Option<u32>) {
    let [hds, types, v0, v1] = b28;
    let flags = if hds & 0x6 == 0x6 && (types >> 2) & 3 == 2 {
        WcFlags::IP_CSUM_OK
    } else {
        WcFlags::empty()
    };
    let vlan = (types & 1 != 0).then(|| u16::from_be_bytes([v0, v1]));
    let hash = (rss[4] != 0).then(|| u32::from_be_bytes([rss[0], rss[1], rss[2], rss[3]]));
    (flags, vlan, hash)
}
