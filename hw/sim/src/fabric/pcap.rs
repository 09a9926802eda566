//! The frames seen on the wire in the classic pcap format with nanosecond timestamps (magic
//! 0xa1b23c4d, little-endian), link type 1 (Ethernet): Wireshark dissects them as RoCE v2 (UDP
//! port 4791).

use std::io::{self, Write};

/// The nanosecond-resolution pcap magic number.
pub const PCAP_MAGIC_NS: u32 = 0xa1b2_3c4d;
/// Link type Ethernet.
const LINKTYPE_ETHERNET: u32 = 1;
/// The snap length the file announces (frames are never longer).
const SNAPLEN: u32 = 65_535;

/// Writes the file header and one record per `(time in ns, frame)`.
pub(crate) fn write<'a>(
    w: &mut dyn Write,
    frames: impl Iterator<Item = &'a (u64, Vec<u8>)>,
) -> io::Result<()> {
    let mut head = Vec::with_capacity(24);
    head.extend_from_slice(&PCAP_MAGIC_NS.to_le_bytes());
    head.extend_from_slice(&2u16.to_le_bytes());
    head.extend_from_slice(&4u16.to_le_bytes());
    head.extend_from_slice(&0i32.to_le_bytes());
    head.extend_from_slice(&0u32.to_le_bytes());
    head.extend_from_slice(&SNAPLEN.to_le_bytes());
    head.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
    w.write_all(&head)?;
    for (t, frame) in frames {
        let len = u32::try_from(frame.len()).unwrap_or(u32::MAX).min(SNAPLEN);
        let mut rec = Vec::with_capacity(16 + frame.len());
        rec.extend_from_slice(&((t / 1_000_000_000) as u32).to_le_bytes());
        rec.extend_from_slice(&((t % 1_000_000_000) as u32).to_le_bytes());
        rec.extend_from_slice(&len.to_le_bytes());
        rec.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        rec.extend_from_slice(&frame[..len as usize]);
        w.write_all(&rec)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn header_and_record() {
        let frames = [(1_500_000_123u64, vec![1u8, 2, 3])];
        let mut out = Vec::new();
        super::write(&mut out, frames.iter()).unwrap();
        assert_eq!(&out[..4], &[0x4d, 0x3c, 0xb2, 0xa1]);
        assert_eq!(out.len(), 24 + 16 + 3);
        assert_eq!(&out[24..28], &1u32.to_le_bytes());
        assert_eq!(&out[28..32], &500_000_123u32.to_le_bytes());
        assert_eq!(&out[40..], &[1, 2, 3]);
    }
}
