//! The frames seen on the wire in the classic pcap format with nanosecond timestamps (magic
//! 0xa1b23c4d, little-endian), link type 1 (Ethernet): Wireshark dissects them as RoCE v2 (UDP
//! port 4791).
//!
//! [`Stream`] writes them as the run goes ([`super::Fabric::pcap_to`]): every frame of a run,
//! in the memory of one buffered writer.

use std::io::{self, BufWriter, Write};

/// The nanosecond-resolution pcap magic number.
pub const PCAP_MAGIC_NS: u32 = 0xa1b2_3c4d;
/// Link type Ethernet.
const LINKTYPE_ETHERNET: u32 = 1;
/// The snap length the file announces (frames are never longer).
const SNAPLEN: u32 = 65_535;

/// The 24-byte file header.
pub(crate) fn header(w: &mut dyn Write) -> io::Result<()> {
    let mut head = [0u8; 24];
    head[..4].copy_from_slice(&PCAP_MAGIC_NS.to_le_bytes());
    head[4..6].copy_from_slice(&2u16.to_le_bytes());
    head[6..8].copy_from_slice(&4u16.to_le_bytes());
    // 8..16: time zone offset and accuracy, both zero.
    head[16..20].copy_from_slice(&SNAPLEN.to_le_bytes());
    head[20..24].copy_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
    w.write_all(&head)
}

/// One record: the frame sent at `t` ns (cut to the snap length).
pub(crate) fn record(w: &mut dyn Write, t: u64, frame: &[u8]) -> io::Result<()> {
    let len = u32::try_from(frame.len()).unwrap_or(u32::MAX).min(SNAPLEN);
    let mut rec = [0u8; 16];
    rec[..4].copy_from_slice(&((t / 1_000_000_000) as u32).to_le_bytes());
    rec[4..8].copy_from_slice(&((t % 1_000_000_000) as u32).to_le_bytes());
    rec[8..12].copy_from_slice(&len.to_le_bytes());
    rec[12..16].copy_from_slice(&u32::try_from(frame.len()).unwrap_or(u32::MAX).to_le_bytes());
    w.write_all(&rec)?;
    w.write_all(&frame[..len as usize])
}

/// Writes the file header and one record per `(time in ns, frame)`.
pub(crate) fn write<'a>(
    w: &mut dyn Write,
    frames: impl Iterator<Item = &'a (u64, Vec<u8>)>,
) -> io::Result<()> {
    header(w)?;
    for (t, frame) in frames {
        record(w, *t, frame)?;
    }
    Ok(())
}

/// A pcap file being written as frames go by. The first write error ends it: later frames are
/// counted as lost and the error is what [`Stream::finish`] returns.
pub(crate) struct Stream {
    out: BufWriter<Box<dyn Write + Send>>,
    written: u64,
    failed: Option<io::Error>,
}

impl Stream {
    /// Starts a file on `w` (its header is written at once).
    pub(crate) fn start(w: Box<dyn Write + Send>) -> io::Result<Stream> {
        let mut out = BufWriter::with_capacity(1 << 16, w);
        header(&mut out)?;
        Ok(Stream {
            out,
            written: 0,
            failed: None,
        })
    }

    /// Appends one frame.
    pub(crate) fn frame(&mut self, t: u64, frame: &[u8]) {
        if self.failed.is_some() {
            return;
        }
        match record(&mut self.out, t, frame) {
            Ok(()) => self.written += 1,
            Err(e) => {
                log::error!(
                    "mlx5-sim: the pcap stream failed after {} frames: {e}",
                    self.written
                );
                self.failed = Some(e);
            }
        }
    }

    /// Flushes the file; the frames written, or the first error.
    pub(crate) fn finish(mut self) -> io::Result<u64> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        self.out.flush()?;
        Ok(self.written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_record() {
        let frames = [(1_500_000_123u64, vec![1u8, 2, 3])];
        let mut out = Vec::new();
        write(&mut out, frames.iter()).unwrap();
        assert_eq!(&out[..4], &[0x4d, 0x3c, 0xb2, 0xa1]);
        assert_eq!(out.len(), 24 + 16 + 3);
        assert_eq!(&out[24..28], &1u32.to_le_bytes());
        assert_eq!(&out[28..32], &500_000_123u32.to_le_bytes());
        assert_eq!(&out[32..36], &3u32.to_le_bytes());
        assert_eq!(&out[36..40], &3u32.to_le_bytes());
        assert_eq!(&out[40..], &[1, 2, 3]);
    }

    /// A writer that takes `room` bytes, then fails.
    struct Full(std::sync::Arc<std::sync::Mutex<Vec<u8>>>, usize);
    impl Write for Full {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            let mut v = self.0.lock().unwrap();
            if v.len() + b.len() > self.1 {
                return Err(io::Error::new(io::ErrorKind::StorageFull, "full"));
            }
            v.extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_stream_writes_every_frame_and_reports_its_first_error() {
        let buf = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut s = Stream::start(Box::new(Full(buf.clone(), usize::MAX))).unwrap();
        for i in 0..1000u64 {
            s.frame(i, &[i as u8; 100]);
        }
        assert_eq!(s.finish().unwrap(), 1000);
        let v = buf.lock().unwrap();
        assert_eq!(v.len(), 24 + 1000 * 116);
        assert_eq!(&v[24 + 999 * 116 + 16..][..2], &[231, 231]);
        drop(v);
        let small = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut s = Stream::start(Box::new(Full(small, 1 << 17))).unwrap();
        for i in 0..10_000u64 {
            s.frame(i, &[0; 100]);
        }
        let e = s.finish().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::StorageFull);
    }
}
