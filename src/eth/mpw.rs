//! Bursts of frames through enhanced multi-packet send WQEs (PRM opcode ENHANCED_MPSW, 0x29;
//! Linux's mlx5e "tx_mpwqe"): one control segment and one Ethernet segment, whose checksum flags
//! apply to every frame, then one 16-byte data segment per whole frame. A burst of 32 frames is
//! one WQE of 34 DS (9 WQEBBs) instead of 32 WQEs of 64 bytes, and one completion instead of
//! up to 32. No header is inline: the device takes every frame from memory (a ConnectX-5
//! reports `wqe_inline_mode` 2, inline not required, which multi-packet sends need).

use mlx5_ifc::wqe::eth_cs::{L3_CSUM, L4_CSUM};
use mlx5_ifc::wqe::{fm_ce_se, opcode, DS, WQEBB};

use super::sq::{Checksum, EthSq};
use crate::error::{Error, Result};
use crate::io::platform::Platform;
use crate::verbs::qp::Sge;
use crate::verbs::wr_table::{sq_desc, sq_table};

/// The shortest frame a burst carries (an Ethernet header; the device pads to 60 bytes).
pub const MIN_BURST_FRAME: u32 = 14;
/// The longest frame a burst carries (a 9 000-byte MTU's frame with a VLAN tag, rounded up).
pub const MAX_BURST_FRAME: u32 = 9_216;
/// Frames sent together ([`EthSq::post_burst`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthBurst<'a> {
    /// Comes back in the burst's completion.
    pub wr_id: u64,
    /// One whole frame each, Ethernet header first, in registered memory.
    pub frames: &'a [Sge],
    /// The checksums the device fills in, the same for every frame.
    pub checksum: Checksum,
    /// One completion for the whole burst (its bytes: all the frames'); else only an error
    /// completes it.
    pub signaled: bool,
}

impl<P: Platform> EthSq<'_, P> {
    /// Frames one enhanced multi-packet send WQE carries (0: the device has no such WQE, and
    /// [`EthSq::post_burst`] refuses).
    pub fn burst_frames_per_wqe(&self) -> u32 {
        self.mpw_ds.saturating_sub(2)
    }

    /// Posts a burst of frames as enhanced multi-packet send WQEs (as many as it takes, each
    /// of up to [`EthSq::burst_frames_per_wqe`] frames) and rings the doorbell once. Refused
    /// as a whole (nothing posted) when the device has no multi-packet send, a frame's length
    /// is outside 14..=9 216 bytes, a checksum is asked of a device without `csum_cap`, or the
    /// ring lacks room.
    pub fn post_burst(&mut self, b: &EthBurst<'_>) -> Result<()> {
        let per = self.burst_frames_per_wqe() as usize;
        let refuse = |field, requested: u64, max: u64, limit| Error::InvalidArgument {
            op: "eth post_burst",
            field,
            requested,
            max,
            limit,
        };
        if per == 0 {
            return Err(Error::Unsupported {
                what: "enhanced multi-packet send WQEs (enhanced_multi_pkt_send_wqe)",
                found: 0,
            });
        }
        if b.frames.is_empty() {
            return Err(refuse("frames", 0, 1, "a burst has at least one frame"));
        }
        if !self.csum && b.checksum != Checksum::NONE {
            return Err(refuse(
                "checksum",
                1,
                0,
                "the device computes no checksum (csum_cap 0)",
            ));
        }
        // WQEBBs of every WQE: the full ones and the last.
        let bbs_of = |frames: usize| ((2 + frames) * DS).div_ceil(WQEBB) as u64;
        let (full, rest) = (b.frames.len() / per, b.frames.len() % per);
        let need = full as u64 * bbs_of(per) + if rest > 0 { bbs_of(rest) } else { 0 };
        let Some((buf, dbr, table)) = self.parts() else {
            return Err(Error::QpState {
                qpn: self.sqn,
                state: crate::qp::QpState::Err,
                op: "eth post_burst (the SQ's memory is gone)",
            });
        };
        let used = self.pi.wrapping_sub(table.load(sq_table::TAIL));
        if used + need > u64::from(self.bbs) {
            return Err(Error::QueueFull {
                qpn: self.sqn,
                queue: "Ethernet send queue",
                outstanding: used,
                limit: u64::from(self.bbs),
            });
        }
        let Some(ring) = buf.buf().ring::<64>(self.bbs as usize) else {
            return Err(refuse("ring", 0, 0, "the send queue's ring"));
        };
        let be = |hi: u32, lo: u32| {
            u64::from_ne_bytes((u64::from(hi) << 32 | u64::from(lo)).to_be_bytes())
        };
        let cs = if b.checksum.l3 { L3_CSUM } else { 0 } | if b.checksum.l4 { L4_CSUM } else { 0 };
        let mask = u64::from(self.bbs) - 1;
        let (sqn, mut pi) = (self.sqn, self.pi);
        let chunks = b.frames.chunks(per);
        let last = chunks.len() - 1;
        let mut first = [0u8; 8];
        // One pass: each frame checked as it is written; nothing is published unless all were
        // (the WQEBBs written before a refusal lie in free slots the device does not read).
        let mut total = 0u64;
        for (k, wqe) in chunks.enumerate() {
            let ds = 2 + wqe.len() as u32;
            let nbb = u64::from(ds).div_ceil((WQEBB / DS) as u64);
            let ce = if k == last && b.signaled {
                fm_ce_se::CQ_UPDATE
            } else {
                0
            };
            // The WQE word by word, stored a WQEBB at a time (the last one's tail is not read).
            let mut bb = [0u64; 8];
            bb[0] = be(
                ((pi & 0xffff) as u32) << 8 | u32::from(opcode::ENHANCED_MPSW),
                sqn << 8 | ds,
            );
            bb[1] = be(u32::from(ce), 0);
            bb[2] = be(0, u32::from(cs) << 24);
            bb[3] = 0;
            first = bb[0].to_ne_bytes();
            let mut at = 4;
            let mut slot = pi;
            for f in wqe {
                if !(MIN_BURST_FRAME..=MAX_BURST_FRAME).contains(&f.length) {
                    return Err(refuse(
                        "frame length",
                        u64::from(f.length),
                        u64::from(MAX_BURST_FRAME),
                        "a whole Ethernet frame of 14 to 9 216 bytes",
                    ));
                }
                total += u64::from(f.length);
                bb[at] = be(f.length, f.lkey);
                bb[at + 1] = u64::from_ne_bytes(f.addr.to_be_bytes());
                at += 2;
                if at == 8 {
                    ring.write_wqebb((slot & mask) as usize, &bb);
                    slot += 1;
                    at = 0;
                }
            }
            if at != 0 {
                ring.write_wqebb((slot & mask) as usize, &bb);
            }
            // One entry per WQE; the last carries the burst's bytes (what its completion says).
            let bytes = if k == last {
                total.min(u64::from(u32::MAX)) as u32
            } else {
                0
            };
            table.store_pair_relaxed(
                sq_table::wrid((pi & mask) as usize),
                b.wr_id,
                sq_desc(nbb as u8, opcode::ENHANCED_MPSW, bytes),
            );
            pi += nbb;
        }
        self.publish(table, dbr, pi, first)?;
        self.pi = pi;
        Ok(())
    }
}
