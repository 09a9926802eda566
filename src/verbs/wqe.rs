//! Work queue entries as the device reads them (PRM "Send WQE", "Receive WQE"): segment layouts
//! and the ring writer that wraps at the end of the send queue.
//!
//! A send WQE is a chain of 16-byte segments: control (always first), then per operation remote
//! address, atomic, datagram (UD, 48 bytes), and data pointers or one inline segment. Its size
//! in 16-byte units (DS) is in the control segment; it occupies `ceil(DS / 4)` 64-byte WQEBBs.

use mlx5_ifc::{Be32, Be64};

use crate::error::Result;
use crate::io::{DmaRing, OutOfBounds};

// The segment layouts' facts — opcodes, `fm_ce_se` bits, flags and sizes — are defined once in
// `mlx5-ifc` (checked against `mlx5dv.h`), and shared with the simulator.
pub(crate) use mlx5_ifc::wqe::fm_ce_se as flags;
pub(crate) use mlx5_ifc::wqe::{
    opcode, DS, EXTENDED_UD_AV, INLINE_SEG, INVALID_LKEY, MAX_DS, WQEBB,
};

/// DS units of an inline data segment of `len` bytes: the 4-byte header and the bytes, padded to
/// 16; none for no bytes — rdma-core writes no inline segment for a zero-length inline send
/// (`set_data_inl_seg` and `_mlx5_send_wr_set_inline_data` add no size), so its WQE is the
/// control segment alone.
#[inline]
pub(crate) const fn inline_ds(len: usize) -> usize {
    if len == 0 {
        0
    } else {
        (4 + len).div_ceil(DS)
    }
}

/// A data pointer segment.
#[inline]
pub(crate) fn data(byte_count: u32, lkey: u32, addr: u64) -> [u8; 16] {
    let mut s = [0u8; 16];
    s[0..4].copy_from_slice(&Be32::new(byte_count).to_bytes());
    s[4..8].copy_from_slice(&Be32::new(lkey).to_bytes());
    s[8..16].copy_from_slice(&Be64::new(addr).to_bytes());
    s
}

/// The RoCE v2 address of a UD destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct UdAddr {
    /// Remote QP number.
    pub remote_qpn: u32,
    /// Q_Key.
    pub qkey: u32,
    /// Remote GID.
    pub dgid: [u8; 16],
    /// Next-hop MAC.
    pub dmac: [u8; 6],
    /// Local GID index.
    pub sgid_index: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// UDP source port; 0 (the default) picks one in the dynamic range 0xc000..=0xffff from the
    /// flow label, or from the remote QP and GID when there is none (rdma-core's mlx5 provider
    /// always sends a port in that range). Any other value is used as given.
    pub udp_sport: u16,
}

/// RoCE v2 UDP source port in the dynamic range 0xc000..=0xffff: from the flow label when there
/// is one (the low 14 bits folded with the high 6, the mapping Linux's
/// `rdma_flow_label_to_udp_sport` uses), else from a hash of the two numbers `a` and `b`.
#[inline]
pub(crate) fn roce_sport(a: u32, b: u32, flow_label: u32) -> u16 {
    let h = if flow_label != 0 {
        (flow_label & 0x3fff) ^ ((flow_label & 0xf_c000) >> 14)
    } else {
        (a ^ b.rotate_left(7)) ^ (a >> 14)
    };
    0xc000 | (h & 0x3fff) as u16
}

/// The 48-byte datagram segment (UD address vector).
pub(crate) fn datagram(a: &UdAddr) -> [u8; 48] {
    let mut s = [0u8; 48];
    s[0..4].copy_from_slice(&Be32::new(a.qkey).to_bytes());
    s[8..12].copy_from_slice(&Be32::new(a.remote_qpn | EXTENDED_UD_AV).to_bytes());
    let sport = if a.udp_sport != 0 {
        a.udp_sport
    } else {
        let g = u32::from_be_bytes([a.dgid[12], a.dgid[13], a.dgid[14], a.dgid[15]]);
        roce_sport(a.remote_qpn, g, a.flow_label)
    };
    s[14..16].copy_from_slice(&sport.to_be_bytes());
    s[20..26].copy_from_slice(&a.dmac);
    s[26] = a.traffic_class;
    s[27] = a.hop_limit;
    s[28..32].copy_from_slice(
        &Be32::new(u32::from(a.sgid_index) << 20 | (a.flow_label & 0xf_ffff)).to_bytes(),
    );
    s[32..48].copy_from_slice(&a.dgid);
    s
}

/// The control segment as two native words holding its 16 bytes as the device reads them.
#[inline]
pub(crate) fn ctrl_words(
    opcode: u8,
    wqe_index: u16,
    qpn: u32,
    ds: u8,
    fm_ce_se: u8,
    imm: u32,
) -> [u64; 2] {
    [
        be_pair(
            u32::from(wqe_index) << 8 | u32::from(opcode),
            qpn << 8 | u32::from(ds & 0x3f),
        ),
        be_pair(u32::from(fm_ce_se), imm),
    ]
}

/// A remote address segment as two native words.
#[inline]
pub(crate) fn raddr_words(addr: u64, rkey: u32) -> [u64; 2] {
    [addr.to_be(), be_pair(rkey, 0)]
}

/// An atomic segment as two native words.
#[inline]
pub(crate) fn atomic_words(swap_add: u64, compare: u64) -> [u64; 2] {
    [swap_add.to_be(), compare.to_be()]
}

/// A data pointer segment as two native words.
#[inline]
pub(crate) fn data_words(byte_count: u32, lkey: u32, addr: u64) -> [u64; 2] {
    [be_pair(byte_count, lkey), addr.to_be()]
}

/// The native word whose memory holds `a` then `b`, both big-endian.
#[inline]
fn be_pair(a: u32, b: u32) -> u64 {
    (u64::from(a) << 32 | u64::from(b)).to_be()
}

/// WQEBBs a BlueFlame copy may take (256 bytes: one half of a ConnectX-5's BlueFlame
/// register); a larger WQE rings the 8-byte doorbell.
pub(crate) const BF_CHUNK: usize = 4;

/// Words of a [`BfStage`].
const STAGE_WORDS: usize = BF_CHUNK * WQEBB / 8;

/// A BlueFlame WQE's words as written to the ring (the copy's source: kept by the QP, so that
/// the copy needs neither a read-back of the ring nor a buffer cleared per post). Aligned like
/// the WQEBBs it holds, so that each is one cache line.
/// The words are kept as their bytes (so that inline data is one copy into them) and handed to
/// the platform as [`Be64`] words through [`crate::io::be64_words`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(align(64))]
pub(crate) struct BfStage(pub [[u8; 8]; STAGE_WORDS]);

impl Default for BfStage {
    fn default() -> Self {
        Self([[0; 8]; STAGE_WORDS])
    }
}

/// Where a send WQE's segments go, in order: [`WqeBuilder`] (into the ring, one WQEBB at a
/// time) or [`StagedWqe`] (into a [`BfStage`], then the ring).
pub(crate) trait WqeSink {
    /// Appends one 16-byte segment given as two native words (the WQE is at a 16-byte boundary
    /// after every segment).
    fn put(&mut self, seg: [u64; 2]) -> Result<()>;

    /// Appends one native word (the WQE is at an 8-byte boundary).
    fn put_word(&mut self, w: u64) -> Result<()>;

    /// Zeros to the next 16-byte boundary.
    fn pad(&mut self) -> Result<()>;

    /// Appends `bytes`, padded with zeros to a 16-byte boundary, 8 bytes at a time.
    #[inline(always)]
    fn put_bytes(&mut self, bytes: &[u8]) -> Result<()> {
        let mut words = bytes.chunks_exact(8);
        for c in words.by_ref() {
            self.put_word(ne_word(c))?;
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            self.put_word(u64::from_le(le_bytes(rest)))?;
        }
        self.pad()
    }

    /// Appends an inline data segment: its 4-byte header, then `data`, padded to 16 bytes.
    /// Built as native words: the first holds the header and `data[0..4]`, word `k` after it
    /// `data[8k - 4..8k + 4]` (one unaligned 8-byte load), the last one zero-padded — in
    /// registers, never as bytes reloaded as a word (a store-forwarding stall). No data appends
    /// nothing ([`inline_ds`] units: a zero-length inline send is its control segment alone).
    #[inline(always)]
    fn put_inline(&mut self, data: &[u8]) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let hdr = u64::from(u32::from_le_bytes(
            Be32::new(INLINE_SEG | data.len() as u32).to_bytes(),
        ));
        let (head, rest) = data.split_at(data.len().min(4));
        self.put_word(u64::from_le(hdr | le_bytes(head) << 32))?;
        let mut words = rest.chunks_exact(8);
        for c in words.by_ref() {
            self.put_word(ne_word(c))?;
        }
        let tail = words.remainder();
        if !tail.is_empty() {
            self.put_word(u64::from_le(le_bytes(tail)))?;
        }
        self.pad()
    }
}

/// Builds a send WQE one WQEBB at a time in registers / a stack buffer of native words and
/// stores each WQEBB whole (one bounds check, eight 64-bit stores), wrapping at the ring's end
/// between WQEBBs. Bytes of the last WQEBB past the WQE's DS units are written as zeros.
#[derive(Debug)]
pub(crate) struct WqeBuilder<'b> {
    sq: DmaRing<'b, WQEBB>,
    bb: usize,
    cur: [u64; WQEBB / 8],
    /// Bytes of `cur` filled.
    fill: usize,
    /// WQEBBs stored.
    stored: usize,
}

impl<'b> WqeBuilder<'b> {
    /// A builder for the send queue `sq`, from WQEBB `bb` on (taken modulo the ring).
    #[inline(always)]
    pub(crate) fn new(sq: DmaRing<'b, WQEBB>, bb: usize) -> Self {
        Self {
            sq,
            bb,
            cur: [0; WQEBB / 8],
            fill: 0,
            stored: 0,
        }
    }

    #[inline(always)]
    fn flush(&mut self) -> Result<()> {
        self.sq.write_wqebb(self.bb, &self.cur);
        self.bb = self.bb.wrapping_add(1);
        self.stored += 1;
        self.cur = [0; WQEBB / 8];
        self.fill = 0;
        Ok(())
    }

    /// Stores the last, partly filled WQEBB; returns the WQEBBs the WQE took.
    #[inline(always)]
    pub(crate) fn finish(&mut self) -> Result<usize> {
        if self.fill > 0 {
            self.flush()?;
        }
        Ok(self.stored)
    }
}

impl WqeSink for WqeBuilder<'_> {
    #[inline(always)]
    fn put(&mut self, seg: [u64; 2]) -> Result<()> {
        let at = (self.fill & (WQEBB - DS)) / 8;
        self.cur[at] = seg[0];
        self.cur[at + 1] = seg[1];
        self.fill = at * 8 + DS;
        if self.fill == WQEBB {
            self.flush()?;
        }
        Ok(())
    }

    #[inline(always)]
    fn put_word(&mut self, w: u64) -> Result<()> {
        let at = (self.fill / 8) & (WQEBB / 8 - 1);
        self.cur[at] = w;
        self.fill = at * 8 + 8;
        if self.fill == WQEBB {
            self.flush()?;
        }
        Ok(())
    }

    #[inline(always)]
    fn pad(&mut self) -> Result<()> {
        // `cur` is zero past `fill`: padding is rounding up.
        self.fill = self.fill.next_multiple_of(DS);
        if self.fill == WQEBB {
            self.flush()?;
        }
        Ok(())
    }
}

/// Builds a send WQE of at most [`BF_CHUNK`] WQEBBs word by word in a [`BfStage`], then stores
/// its WQEBBs into the ring from there: the stage then holds the BlueFlame copy's source.
#[derive(Debug)]
pub(crate) struct StagedWqe<'s> {
    stage: &'s mut [[u8; 8]; STAGE_WORDS],
    /// Words written.
    len: usize,
}

impl<'s> StagedWqe<'s> {
    /// An empty WQE in `stage`. Nothing is cleared: words past the WQE's DS units keep what an
    /// earlier WQE of this QP left there, which the BlueFlame copy (whole 64-byte blocks) carries
    /// and the device ignores, as it does the bytes past DS that rdma-core's `mlx5_bf_copy`
    /// copies from its ring.
    #[inline(always)]
    pub(crate) fn new(stage: &'s mut BfStage, _nbb: usize) -> Self {
        Self {
            stage: &mut stage.0,
            len: 0,
        }
    }

    /// Stores the WQE's `nbb` WQEBBs (as given to `new`) into the send queue `sq` from WQEBB
    /// `bb` on (taken modulo the ring), whole (eight unrolled stores each; words past DS are
    /// what the stage held, which the device ignores). A WQE longer
    /// than `nbb ≤ BF_CHUNK` WQEBBs (its words wrapped in the stage) is refused before anything
    /// is stored.
    #[inline(always)]
    pub(crate) fn finish(self, sq: DmaRing<'_, WQEBB>, bb: usize, nbb: usize) -> Result<()> {
        let end = nbb * (WQEBB / 8);
        if self.len > end || end > STAGE_WORDS {
            return Err(OutOfBounds {
                offset: self.len * 8,
                len: end * 8,
                size: STAGE_WORDS * 8,
            }
            .into());
        }
        for (q, words) in self.stage[..end].chunks_exact(WQEBB / 8).enumerate() {
            sq.write_wqebb_be(bb.wrapping_add(q), crate::io::be64_words(words));
        }
        Ok(())
    }
}

impl WqeSink for StagedWqe<'_> {
    #[inline(always)]
    fn put(&mut self, seg: [u64; 2]) -> Result<()> {
        self.put_word(seg[0])?;
        self.put_word(seg[1])
    }

    /// No check per word: the index wraps in the stage, and `finish` refuses a WQE whose words
    /// wrapped.
    #[inline(always)]
    fn put_word(&mut self, w: u64) -> Result<()> {
        self.stage[self.len % STAGE_WORDS] = w.to_ne_bytes();
        self.len += 1;
        Ok(())
    }

    #[inline(always)]
    fn pad(&mut self) -> Result<()> {
        if self.len % 2 == 1 {
            self.put_word(0)?;
        }
        Ok(())
    }

    /// The segment's first word (the header and `data[0..4]`) is one 8-byte store; the rest of
    /// the data is one copy into the stage's bytes (the device's byte image) from the next word
    /// on, so that every word the ring copy then loads lies inside one earlier store (store
    /// forwarding). Its padding to 16 bytes is not written (the device reads `byte_count`
    /// bytes; rdma-core leaves it as its ring held it too). No data appends nothing (DS 1, as
    /// rdma-core).
    #[inline(always)]
    fn put_inline(&mut self, data: &[u8]) -> Result<()> {
        let n = data.len();
        if n == 0 {
            return Ok(());
        }
        let words = (4 + n).div_ceil(DS) * (DS / 8);
        let at = self.len;
        self.len += words;
        let hdr = u64::from(u32::from_le_bytes(
            Be32::new(INLINE_SEG | n as u32).to_bytes(),
        ));
        let (head, rest) = data.split_at(n.min(4));
        self.stage[at % STAGE_WORDS] = u64::from_le(hdr | le_bytes(head) << 32).to_ne_bytes();
        // Longer than the stage: nothing copied, and `finish` refuses it.
        let from = (at + 1) * 8;
        if let Some(dst) = self
            .stage
            .as_flattened_mut()
            .get_mut(from..from + rest.len())
        {
            dst.copy_from_slice(rest);
        }
        Ok(())
    }
}

/// The native word of 8 bytes (`c.len() == 8`).
#[inline(always)]
fn ne_word(c: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(c);
    u64::from_ne_bytes(w)
}

/// Up to 8 bytes packed little-endian (`bytes[i]` in bits `8i..8i + 8`): `u64::from_le` of it
/// is the native word whose memory holds `bytes`, zero-padded. Four bytes (the usual head of an
/// inline segment) are one load.
#[inline(always)]
fn le_bytes(bytes: &[u8]) -> u64 {
    if let Some(b) = bytes.first_chunk::<4>().filter(|_| bytes.len() == 4) {
        return u64::from(u32::from_le_bytes(*b));
    }
    bytes
        .iter()
        .take(8)
        .enumerate()
        .fold(0, |w, (i, &b)| w | u64::from(b) << (8 * i))
}
