//! CQE compression (`cqc.cqe_comp_en`): receive completions of an Ethernet RQ that the device
//! makes together go to the CQ as one session — a title CQE and arrays of 8-byte mini CQEs —
//! in as many slots as they are completions, as a ConnectX-5 writes them under load (facts:
//! docs/fields.md, "CQE compression"; Linux's mlx5e decompresses them, `mlx5e_decompress_cqes_*`).
//!
//! * What may join a session: a successful receive completion (not a filler) of the same RQ
//!   whose fields all equal the first's but for those a mini CQE carries — the byte count, the
//!   checksum (formats CSUM, CSUM_STRIDX; the RSS hash then is not carried) or the RSS hash
//!   (format HASH; the checksum then is not carried) — and whose WQE follows: the next WQE
//!   counter of a cyclic RQ, the next stride of the same WQE of a striding RQ. At most
//!   `cqe_compression_max_num` completions (and never more than [`MAX_SESSION`]).
//! * The session: the title is the first completion's CQE with format 3 (COMPRESSED) and
//!   `byte_cnt` the number of completions N; the arrays of 8 mini CQEs follow at slots title +
//!   1, title + 8, title + 16, … (slot title + 1 holds the first completion's own mini CQE too);
//!   the other slots are the driver's room to decompress into. Only the title carries an owner
//!   bit: it is written last.
//! * Opportunistic, as on the card: the device gathers the completions of one pass of its data
//!   path (a burst of frames from the wire, one doorbell's loopback) per CQ; a lone completion,
//!   or a session the CQ has no room for, is written as plain CQEs. Any other CQE for the CQ
//!   writes the open session first, so CQEs stay in the order the device made them.
//!
//! This module is the format (which completions join, the images of a session);
//! [`super::cqe`] keeps the open sessions and writes them.
//!
//! * Only Ethernet receive completions are compressed: RDMA completions never are (a device
//!   never has to compress; rdma-core's mlx5 provider has no decompressor).

use mlx5_ifc::consts::striding::{CQE_FILLER, CQE_STRIDES_SHIFT};
use mlx5_ifc::cqe::opcode as op;
use mlx5_ifc::cqe::{format, Cqe64, CQE_BYTES};
use mlx5_ifc::ViewMut;

use crate::model::completion::Cqe;

/// The most completions a session holds, whatever a profile's `cqe_compression_max_num` says
/// (a bound on what the simulator gathers).
pub(super) const MAX_SESSION: usize = 1024;
/// Mini CQEs per array (one 64-byte CQE slot).
const MINIS: usize = mlx5_ifc::cqe::mini_cqe::PER_ARRAY;

/// `cqc.mini_cqe_res_format`.
pub(super) mod res_format {
    use mlx5_ifc::cqe::mini_cqe;
    pub(crate) const HASH: u64 = mini_cqe::FORMAT_HASH;
    pub(crate) const CSUM: u64 = mini_cqe::FORMAT_CSUM;
    pub(crate) const CSUM_STRIDX: u64 = mini_cqe::FORMAT_CSUM_STRIDX;
}

/// A completion a mini CQE can stand for: a receive that succeeded, not a filler.
pub(super) fn compressible(c: &Cqe) -> bool {
    c.opcode == op::RESP_SEND && c.byte_cnt & CQE_FILLER == 0
}

/// Whether `c` may follow the completions `cqes` in their session (see the module
/// documentation).
pub(super) fn joins(cqes: &[Cqe], c: &Cqe, fmt: u64, striding: bool, max: usize) -> bool {
    let (Some(first), Some(last)) = (cqes.first(), cqes.last()) else {
        return false;
    };
    let next = if striding {
        last.wqe_counter
            .wrapping_add(((last.byte_cnt >> CQE_STRIDES_SHIFT) & 0x7fff) as u16)
    } else {
        last.wqe_counter.wrapping_add(1)
    };
    let (mut a, mut b) = (first.eth, c.eth);
    // What the mini CQE carries may differ.
    if fmt == res_format::HASH {
        (a.rss_hash, b.rss_hash, a.check_sum, b.check_sum) = (0, 0, 0, 0);
    } else {
        (a.check_sum, b.check_sum, a.rss_hash, b.rss_hash) = (0, 0, 0, 0);
    }
    cqes.len() < max
        && c.wqe_counter == next
        && c.wqe_id == first.wqe_id
        && a == b
        && (c.opcode, c.qpn, c.srqn_uidx, c.flags_rqpn, c.l3_hdr_type)
            == (
                first.opcode,
                first.qpn,
                first.srqn_uidx,
                first.flags_rqpn,
                first.l3_hdr_type,
            )
        && (c.imm, c.solicited, c.wqe_opcode) == (first.imm, first.solicited, first.wqe_opcode)
}

/// The images of a session of `cqes` in format `fmt`, the title (owner bit `owner`) last:
/// `(slot relative to the title, image)`.
pub(super) fn session(cqes: &[Cqe], fmt: u64, owner: u8, now: u64) -> Vec<(u32, [u8; CQE_BYTES])> {
    let mut out = Vec::new();
    for (j, minis) in cqes.chunks(MINIS).enumerate() {
        let mut arr = [0u8; CQE_BYTES];
        for (m, c) in arr.chunks_exact_mut(8).zip(minis) {
            match fmt {
                res_format::HASH => m[..4].copy_from_slice(&c.eth.rss_hash.to_be_bytes()),
                _ => {
                    m[..2].copy_from_slice(&c.eth.check_sum.to_be_bytes());
                    if fmt == res_format::CSUM_STRIDX {
                        m[2..4].copy_from_slice(&c.wqe_counter.to_be_bytes());
                    }
                }
            }
            m[4..].copy_from_slice(&c.byte_cnt.to_be_bytes());
        }
        let slot = if j == 0 { 1 } else { (j * MINIS) as u32 };
        out.push((slot, arr));
    }
    let mut title = cqes[0].image(owner, now);
    let r = ViewMut::<Cqe64>::new(&mut title).and_then(|mut v| {
        v.set(Cqe64::BYTE_CNT, cqes.len() as u64)?;
        v.set(Cqe64::FORMAT, format::COMPRESSED.into()).map(drop)
    });
    if let Err(e) = r {
        log::error!("mlx5-sim: compressed CQE title: {e}");
    }
    out.push((0, title));
    out
}
