//! The out-of-band exchange of rdma-core's pingpongs (`ibv_rc_pingpong` and friends): each
//! side writes `LID:QPN:PSN:GID` as `%04x:%06x:%06x:` and 32 hex digits, NUL-padded to 52 bytes.
//! A parser of bytes from the network: any input is refused, never a panic.

use core::fmt::Write as _;

/// Bytes of the exchange message, its NUL included.
pub const MSG: usize = 52;

/// The pingpongs' `struct pingpong_dest`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dest {
    /// LID (0 on RoCE).
    pub lid: u16,
    /// QP number.
    pub qpn: u32,
    /// First PSN.
    pub psn: u32,
    /// GID.
    pub gid: [u8; 16],
}

impl Dest {
    /// The message as the pingpongs write it: `%04x:%06x:%06x:` and 32 hex digits, NUL-padded.
    pub fn to_wire(self) -> [u8; MSG] {
        let mut s = heapless::String::<MSG>::new();
        let _ = write!(s, "{:04x}:{:06x}:{:06x}:", self.lid, self.qpn, self.psn);
        for b in self.gid {
            let _ = write!(s, "{b:02x}");
        }
        let mut m = [0u8; MSG];
        let n = s.len().min(MSG - 1);
        m[..n].copy_from_slice(&s.as_bytes()[..n]);
        m
    }

    /// Parses a peer's message (bytes up to the first NUL); `None` if it is not
    /// `LID:QPN:PSN:GID` in hex. Works on bytes: any input is refused, never a panic.
    pub fn from_wire(m: &[u8]) -> Option<Dest> {
        let end = m.iter().position(|&b| b == 0).unwrap_or(m.len());
        let mut f = m[..end].split(|&b| b == b':');
        let (lid, qpn, psn, gid) = (f.next()?, f.next()?, f.next()?, f.next()?);
        if f.next().is_some() || gid.len() != 32 || lid.len() > 4 || qpn.len() > 8 || psn.len() > 8
        {
            return None;
        }
        let hex = |x: &[u8]| -> Option<u32> {
            if x.is_empty() {
                return None;
            }
            x.iter()
                .try_fold(0u32, |a, &c| Some(a << 4 | char::from(c).to_digit(16)?))
        };
        let mut g = [0u8; 16];
        for (i, b) in g.iter_mut().enumerate() {
            *b = hex(&gid[2 * i..2 * i + 2])? as u8;
        }
        Some(Dest {
            lid: hex(lid)? as u16,
            qpn: hex(qpn)? & 0xff_ffff,
            psn: hex(psn)? & 0xff_ffff,
            gid: g,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_is_rdma_cores() {
        let d = Dest {
            lid: 0,
            qpn: 0x11,
            psn: 0x4fc73b,
            gid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 18, 0, 1],
        };
        let m = d.to_wire();
        assert_eq!(
            &m[..51],
            b"0000:000011:4fc73b:00000000000000000000ffffc6120001"
        );
        assert_eq!(m[51], 0);
        assert_eq!(Dest::from_wire(&m), Some(d));
    }

    #[test]
    fn any_bytes_are_refused_not_a_panic() {
        assert_eq!(Dest::from_wire(b""), None);
        assert_eq!(Dest::from_wire(&[0xc3; 52]), None);
        assert_eq!(
            Dest::from_wire(b"0000:000011:4fc73b:00000000000000000000ffffc612000\xc3"),
            None
        );
        assert_eq!(
            Dest::from_wire(b"zzzz:000011:4fc73b:00000000000000000000ffffc6120001"),
            None
        );
        assert_eq!(
            Dest::from_wire(b"0000:000011:4fc73b:00000000000000000000ffffc6120001:x"),
            None
        );
    }
}
