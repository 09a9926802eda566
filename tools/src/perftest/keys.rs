//! perftest's key message: one side's connection data as the out-of-band exchange
//! ([`super::oob`]) and the rdma_cm private data ([`super::cmlink`]) carry it.

/// Bytes of a key message, its NUL included.
pub(super) const KEYS: usize = 108;
/// One side's connection data (perftest's `struct pingpong_dest` as the key message carries
/// it: `"%04x:%04x:%06x:%06x:%08x:%016llx:"` LID, OUT, QPN, PSN, rkey, VADDR, then the 16 GID
/// bytes each as `"%02x:"`, then the SRQN as `"%08x:"`, and a NUL).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Keys {
    pub(super) lid: u16,
    /// The sender's outstanding reads and atomics: its responder depth, the peer's initiator
    /// depth.
    pub(super) out: u16,
    pub(super) qpn: u32,
    pub(super) psn: u32,
    pub(super) rkey: u32,
    pub(super) vaddr: u64,
    pub(super) gid: [u8; 16],
    pub(super) srqn: u32,
}

impl Keys {
    pub(super) fn to_wire(self) -> [u8; KEYS] {
        let mut s = format!(
            "{:04x}:{:04x}:{:06x}:{:06x}:{:08x}:{:016x}:",
            self.lid,
            self.out,
            self.qpn & 0xff_ffff,
            self.psn & 0xff_ffff,
            self.rkey,
            self.vaddr
        );
        for b in self.gid {
            s.push_str(&format!("{b:02x}:"));
        }
        s.push_str(&format!("{:08x}:", self.srqn));
        let mut m = [0u8; KEYS];
        let n = s.len().min(KEYS - 1);
        m[..n].copy_from_slice(&s.as_bytes()[..n]);
        m
    }

    pub(super) fn from_wire(m: &[u8]) -> Result<Keys, String> {
        let text = m.split(|&b| b == 0).next().unwrap_or(&[]);
        let s =
            std::str::from_utf8(text).map_err(|_| "the peer's keys are not text".to_string())?;
        let bad = || format!("the peer's keys {s:?} are not LID:OUT:QPN:PSN:RKEY:VADDR:GID:SRQN");
        let f: Vec<&str> = s.split(':').collect();
        // 6 fields, 16 GID bytes, the SRQN, and the empty tail after the last ':'.
        if f.len() != 24 || !f[23].is_empty() {
            return Err(bad());
        }
        let hex = |x: &str| u64::from_str_radix(x, 16).map_err(|_| bad());
        let mut gid = [0u8; 16];
        for (i, g) in gid.iter_mut().enumerate() {
            *g = u8::from_str_radix(f[6 + i], 16).map_err(|_| bad())?;
        }
        Ok(Keys {
            lid: hex(f[0])? as u16,
            out: hex(f[1])? as u16,
            qpn: hex(f[2])? as u32 & 0xff_ffff,
            psn: hex(f[3])? as u32 & 0xff_ffff,
            rkey: hex(f[4])? as u32,
            vaddr: hex(f[5])?,
            gid,
            srqn: hex(f[22])? as u32,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_message_is_perftests() {
        // The example of the rxe interop memo.
        let mut gid = [0u8; 16];
        gid[10..].copy_from_slice(&[0xff, 0xff, 0xc6, 0x12, 0x00, 0x0a]);
        let k = Keys {
            lid: 0,
            out: 0x80,
            qpn: 0x11,
            psn: 0x042abe,
            rkey: 0x20f,
            vaddr: 0x0000_555c_b3f5_1000,
            gid,
            srqn: 0,
        };
        let w = k.to_wire();
        let text = "0000:0080:000011:042abe:0000020f:0000555cb3f51000:00:00:00:00:00:00:00:00:00:00:ff:ff:c6:12:00:0a:00000000:";
        assert_eq!(text.len(), KEYS - 1);
        assert_eq!(&w[..KEYS - 1], text.as_bytes());
        assert_eq!(w[KEYS - 1], 0);
        assert_eq!(Keys::from_wire(&w).unwrap(), k);
        assert!(Keys::from_wire(b"0000:0080:11\0").is_err());
    }
}
