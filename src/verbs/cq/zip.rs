//! CQE compression on the polling side (`cqc.cqe_comp_en`; PRM "CQE Compression",
//! docs/fields.md "CQE compression"): the device may write the receive completions of an
//! Ethernet RQ as a session — a title CQE of format COMPRESSED whose `byte_cnt` is the number of
//! completions N and whose other fields they share, then arrays of eight 8-byte mini CQEs (each
//! the byte count, and the checksum, stride index or RSS hash the CQ's `mini_cqe_res_format`
//! names) at slots title + 1, title + 8, title + 16, … The session takes N slots; only the
//! title's owner bit counts.
//!
//! [`Session`] decompresses: each completion is the title's image with its mini CQE's fields and
//! its WQE counter (the title's plus one per completion on a cyclic RQ; on a striding RQ the
//! mini CQE's stride index, or the title's plus the strides before it), then goes the way of any
//! Ethernet receive CQE. An array is copied out of the ring when the session reaches its slot —
//! before the consumer index passes that slot — so the device may reuse the slots behind it. A
//! slot the session used gets the invalid opcode back: what the device left there (array bytes,
//! an old CQE) must not pass for a completion when the ring comes round again.

use mlx5_ifc::cqe::{format, mini_cqe, Cqe64, CQE_BYTES, INVALID_OP_OWN as CQE_INVALID};

use crate::error::{Error, Result};
use crate::io::DmaBuf;
use mlx5_ifc::consts::striding;

/// What the mini CQEs of a compressed CQ carry besides the byte count
/// (`cqc.mini_cqe_res_format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MiniCqe {
    /// The RSS hash (no checksum).
    Hash,
    /// The checksum (no RSS hash).
    Checksum,
    /// The checksum and the stride index: for a CQ of a striding RQ (needs
    /// `mini_cqe_resp_stride_index`).
    ChecksumStrideIndex,
}

impl MiniCqe {
    /// The `mini_cqe_res_format` value.
    pub(crate) fn format(self) -> u64 {
        match self {
            MiniCqe::Hash => mini_cqe::FORMAT_HASH,
            MiniCqe::Checksum => mini_cqe::FORMAT_CSUM,
            MiniCqe::ChecksumStrideIndex => mini_cqe::FORMAT_CSUM_STRIDX,
        }
    }
}

/// A compressed CQ's format and the most completions a session may hold
/// (`cqe_compression_max_num`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Compression {
    pub(crate) mini: MiniCqe,
    pub(crate) max: u32,
}

/// Byte offsets in a CQE (mlx5-ifc's `Cqe64`).
const RSS_HASH: usize = Cqe64::RSS_HASH_RESULT.info.byte_offset();
const CHECK_SUM: usize = Cqe64::CHECK_SUM.info.byte_offset();
const BYTE_CNT: usize = Cqe64::BYTE_CNT.info.byte_offset();
const WQE_COUNTER: usize = Cqe64::WQE_COUNTER.info.byte_offset();
const CQE_OP_OWN: usize = Cqe64::OP_OWN.info.byte_offset();

/// A session being decompressed (host memory: the title and the current array are copies).
#[derive(Debug, Clone)]
pub(crate) struct Session {
    title: [u8; CQE_BYTES],
    minis: [u8; CQE_BYTES],
    /// Completions in the session, and how many were given.
    n: u32,
    done: u32,
    /// The CQ counter of the title's slot.
    start: u32,
    /// The WQE counter of the next completion (cyclic RQ; striding RQ without stride index).
    counter: u16,
}

/// `be16` / `be32` of `b` at `at`.
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn bad(what: &'static str, value: u64, limit: u64) -> Error {
    Error::BadDeviceValue { what, value, limit }
}

impl Session {
    /// Whether the CQE whose `op_own` is `op_own` opens a session.
    #[inline(always)]
    pub(super) fn titles(op_own: u8) -> bool {
        (op_own >> 2) & 3 == format::COMPRESSED
    }

    /// Opens the session whose title is at slot `c` (byte `at(c)` of `buf`) of a ring of
    /// `slots`, on a CQ compressing as `z` says: the title and the first array copied.
    pub(super) fn open(
        buf: &DmaBuf,
        at: impl Fn(u32) -> usize,
        c: u32,
        slots: u32,
        z: Compression,
    ) -> Result<Session> {
        let title: [u8; CQE_BYTES] = buf.read_words(at(c))?;
        let n = be32(&title, BYTE_CNT);
        let max = z.max.min(slots);
        if !(2..=max).contains(&n) {
            return Err(bad(
                "compressed CQE byte_cnt (completions in the session)",
                u64::from(n),
                u64::from(max),
            ));
        }
        let minis = buf.read_words(at(c.wrapping_add(1)))?;
        Ok(Session {
            title,
            minis,
            n,
            done: 0,
            start: c,
            counter: be16(&title, WQE_COUNTER),
        })
    }

    /// The next completion's CQE image; its slot (`start + done`) gets the invalid opcode back.
    /// `striding`: the session is a striding RQ's. `None` once all were given.
    pub(super) fn next(
        &mut self,
        buf: &DmaBuf,
        at: impl Fn(u32) -> usize,
        z: Compression,
        striding: bool,
    ) -> Option<Result<[u8; CQE_BYTES]>> {
        let i = self.done;
        if i >= self.n {
            return None;
        }
        let slot = self.start.wrapping_add(i);
        // Arrays after the first sit at title + 8, + 16, …: read as the session reaches them.
        if i > 0 && i as usize % mini_cqe::PER_ARRAY == 0 {
            match buf.read_words(at(slot)) {
                Ok(m) => self.minis = m,
                Err(e) => return Some(Err(e.into())),
            }
        }
        let k = i as usize % mini_cqe::PER_ARRAY * mini_cqe::BYTES;
        let m = &self.minis[k..k + mini_cqe::BYTES];
        let mut img = self.title;
        img[BYTE_CNT..BYTE_CNT + 4].copy_from_slice(&m[mini_cqe::BYTE_CNT_AT..][..4]);
        match z.mini {
            MiniCqe::Hash => {
                img[RSS_HASH..RSS_HASH + 4].copy_from_slice(&m[mini_cqe::RX_HASH_AT..][..4])
            }
            MiniCqe::Checksum | MiniCqe::ChecksumStrideIndex => {
                img[CHECK_SUM..CHECK_SUM + 2].copy_from_slice(&m[mini_cqe::CHECKSUM_AT..][..2])
            }
        }
        let counter = if z.mini == MiniCqe::ChecksumStrideIndex {
            be16(m, mini_cqe::STRIDX_AT)
        } else {
            self.counter
        };
        img[WQE_COUNTER..WQE_COUNTER + 2].copy_from_slice(&counter.to_be_bytes());
        let used = if striding {
            (be32(m, mini_cqe::BYTE_CNT_AT) >> striding::CQE_STRIDES_SHIFT) & 0x7fff
        } else {
            1
        };
        self.counter = counter.wrapping_add(used as u16);
        // A plain CQE now (format 0); the owner bit is the title's.
        img[CQE_OP_OWN] &= !(3 << 2);
        self.done += 1;
        if let Err(e) = buf.write_u8(at(slot) + CQE_OP_OWN, CQE_INVALID) {
            return Some(Err(e.into()));
        }
        Some(Ok(img))
    }

    /// Whether every completion was given.
    pub(super) fn finished(&self) -> bool {
        self.done >= self.n
    }
}
