//! Work queue entries as the device reads them (PRM "Send WQE", "Receive WQE"): segment layouts
//! and the ring writer that wraps at the end of the send queue.
//!
//! A send WQE is a chain of 16-byte segments: control (always first), then per operation remote
//! address, atomic, datagram (UD, 48 bytes), and data pointers or one inline segment. Its size
//! in 16-byte units (DS) is in the control segment; it occupies `ceil(DS / 4)` 64-byte WQEBBs.

use mlx5_ifc::{Be32, Be64};

use crate::error::Result;
use crate::io::DmaBuf;

/// Send opcodes (control segment bits 7..0).
pub mod opcode {
    /// SEND with invalidate.
    pub const SEND_INVAL: u8 = 0x01;
    /// RDMA WRITE.
    pub const RDMA_WRITE: u8 = 0x08;
    /// RDMA WRITE with immediate.
    pub const RDMA_WRITE_IMM: u8 = 0x09;
    /// SEND.
    pub const SEND: u8 = 0x0a;
    /// SEND with immediate.
    pub const SEND_IMM: u8 = 0x0b;
    /// RDMA READ.
    pub const RDMA_READ: u8 = 0x10;
    /// Atomic compare and swap.
    pub const ATOMIC_CS: u8 = 0x11;
    /// Atomic fetch and add.
    pub const ATOMIC_FA: u8 = 0x12;
}

/// `fm_ce_se` bits (control segment byte 11).
pub mod flags {
    /// Solicited event.
    pub const SOLICITED: u8 = 0x02;
    /// Always write a CQE.
    pub const CQ_UPDATE: u8 = 0x08;
    /// Fence: wait for earlier RDMA READ/atomics.
    pub const FENCE: u8 = 0x80;
}

/// `byte_count` flag of an inline segment.
pub const INLINE_SEG: u32 = 0x8000_0000;
/// The "extended UD address vector" bit of `dqp_dct`.
pub const EXTENDED_UD_AV: u32 = 0x8000_0000;
/// The lkey that ends a receive scatter list.
pub const INVALID_LKEY: u32 = 0x100;
/// Bytes of a WQEBB.
pub const WQEBB: usize = 64;
/// Bytes of a segment unit (DS).
pub const DS: usize = 16;
/// Most DS a control segment can encode (6 bits).
pub const MAX_DS: usize = 63;

/// The control segment.
#[inline]
pub fn ctrl(opcode: u8, wqe_index: u16, qpn: u32, ds: u8, fm_ce_se: u8, imm: u32) -> [u8; 16] {
    let mut s = [0u8; 16];
    s[0..4].copy_from_slice(&Be32::new(u32::from(wqe_index) << 8 | u32::from(opcode)).to_bytes());
    s[4..8].copy_from_slice(&Be32::new(qpn << 8 | u32::from(ds & 0x3f)).to_bytes());
    s[11] = fm_ce_se;
    s[12..16].copy_from_slice(&Be32::new(imm).to_bytes());
    s
}

/// A remote address segment.
#[inline]
pub fn raddr(addr: u64, rkey: u32) -> [u8; 16] {
    let mut s = [0u8; 16];
    s[0..8].copy_from_slice(&Be64::new(addr).to_bytes());
    s[8..12].copy_from_slice(&Be32::new(rkey).to_bytes());
    s
}

/// An atomic segment (fetch-and-add puts the addend in `swap_add`).
#[inline]
pub fn atomic(swap_add: u64, compare: u64) -> [u8; 16] {
    let mut s = [0u8; 16];
    s[0..8].copy_from_slice(&Be64::new(swap_add).to_bytes());
    s[8..16].copy_from_slice(&Be64::new(compare).to_bytes());
    s
}

/// A data pointer segment.
#[inline]
pub fn data(byte_count: u32, lkey: u32, addr: u64) -> [u8; 16] {
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
    /// UDP source port.
    pub udp_sport: u16,
}

/// The 48-byte datagram segment (UD address vector).
pub fn datagram(a: &UdAddr) -> [u8; 48] {
    let mut s = [0u8; 48];
    s[0..4].copy_from_slice(&Be32::new(a.qkey).to_bytes());
    s[8..12].copy_from_slice(&Be32::new(a.remote_qpn | EXTENDED_UD_AV).to_bytes());
    s[14..16].copy_from_slice(&a.udp_sport.to_be_bytes());
    s[20..26].copy_from_slice(&a.dmac);
    s[26] = a.traffic_class;
    s[27] = a.hop_limit;
    s[28..32].copy_from_slice(
        &Be32::new(u32::from(a.sgid_index) << 20 | (a.flow_label & 0xf_ffff)).to_bytes(),
    );
    s[32..48].copy_from_slice(&a.dgid);
    s
}

/// Writes segments into the send queue from one WQEBB on, wrapping at the ring's end.
#[derive(Debug)]
pub struct SqWriter<'b> {
    buf: &'b DmaBuf,
    base: usize,
    size: usize,
    pos: usize,
    written: usize,
}

impl<'b> SqWriter<'b> {
    /// A writer for the ring at `base..base + size` of `buf`, starting at byte `start` of the ring.
    #[inline]
    pub fn new(buf: &'b DmaBuf, base: usize, size: usize, start: usize) -> Self {
        Self {
            buf,
            base,
            size,
            pos: start % size.max(1),
            written: 0,
        }
    }

    /// Writes one 16-byte unit.
    #[inline]
    pub fn put(&mut self, seg: &[u8; 16]) -> Result<()> {
        self.buf.write_seg16(self.base + self.pos, seg)?;
        self.advance(16);
        Ok(())
    }

    /// Writes `bytes` (a multiple of 16 long, or padded here with zeros), wrapping as needed.
    pub fn put_bytes(&mut self, bytes: &[u8]) -> Result<()> {
        let mut off = 0;
        while off < bytes.len() {
            let room = self.size - self.pos;
            let n = room.min(bytes.len() - off);
            self.buf
                .write_bytes(self.base + self.pos, &bytes[off..off + n])?;
            off += n;
            self.advance(n);
        }
        let pad = (DS - self.written % DS) % DS;
        for _ in 0..pad {
            self.buf.write_u8(self.base + self.pos, 0)?;
            self.advance(1);
        }
        Ok(())
    }

    #[inline]
    fn advance(&mut self, n: usize) {
        self.pos += n;
        self.written += n;
        if self.pos >= self.size {
            self.pos -= self.size;
        }
    }

    /// Bytes written so far (a multiple of 16 after complete segments).
    #[inline]
    pub fn written(&self) -> usize {
        self.written
    }
}
