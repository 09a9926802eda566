//! perftest's out-of-band exchange over TCP (perftest 6.06, Debian's 4.5-0.17;
//! `src/perftest_communication.c`). Every step is one message each way of the same size: the
//! client writes first and reads the answer, the server reads and then answers. Each message
//! is written in one call and read whole (perftest reads each with one `read` of its size).
//!
//! The prelude: the version (16 bytes, `"6.06"` NUL-padded; a peer below 5.70 is refused, as
//! perftest refuses one), the cycle buffer and the cache line size (4 bytes each, big-endian;
//! both sides use the larger), the MTU (2 bytes: the `ibv_mtu` enum as a decimal digit and a
//! NUL; both use the smaller). Then the 108-byte key messages ([`Keys`]), the bandwidth
//! reports (five 8-byte big-endian values), and the closing `"done"` with its NUL, which
//! nobody reads.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use super::cmlink::CmLink;
use super::keys::Keys;
use crate::link::e;

type Qp<'a> = mlx5::qp::Qp<'a, mlx5_vfio::AnyPlatform>;

/// Our version string.
const VERSION: &[u8] = b"6.06";
/// The oldest version perftest talks to.
const OLDEST: f64 = 5.70;
/// The longest wait for the peer's next message (the peer may be running its test meanwhile).
const PATIENCE: Duration = Duration::from_secs(300);
/// The largest cache line a peer may name (perftest sends the host's, 64 or 128 bytes): it
/// rounds every buffer offset, so it must be a power of two this size at most.
pub(super) const MAX_PEER_CACHE_LINE: u32 = 4096;

/// What the prelude settled: the cycle buffer, the cache line size and the MTU enum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Settled {
    pub(super) cycle_buffer: u32,
    pub(super) cache_line: u32,
    pub(super) mtu: u8,
}

/// What the exchange runs over: perftest's TCP socket, or (`-R`) an RC QP rdma_cm connected.
enum Wire<'a> {
    Tcp(TcpStream),
    Cm(Box<CmLink<'a>>),
}

/// Our version step's message: the version text, NUL-padded to 16 bytes.
fn version_msg() -> [u8; 16] {
    let mut v = [0u8; 16];
    v[..VERSION.len()].copy_from_slice(VERSION);
    v
}

/// The exchange's connection, on the client or the server side.
pub(super) struct Chan<'a> {
    w: Wire<'a>,
    client: bool,
    /// The peer's version, read already by [`Chan::connect`].
    version: Option<Vec<u8>>,
}

impl<'a> Chan<'a> {
    pub(super) fn new(s: TcpStream, client: bool) -> Result<Chan<'a>, String> {
        s.set_read_timeout(Some(PATIENCE)).map_err(e)?;
        s.set_write_timeout(Some(PATIENCE)).map_err(e)?;
        s.set_nodelay(true).map_err(e)?;
        Ok(Chan {
            w: Wire::Tcp(s),
            client,
            version: None,
        })
    }

    /// The client's connection to the server at `host:port`, its first step (the versions)
    /// made — again if the connection is reset before the server answers
    /// ([`crate::link::connect_first_step`]).
    pub(super) fn connect(host: &str, port: u16) -> Result<Chan<'a>, String> {
        let mut theirs = vec![0u8; 16];
        let s = crate::link::connect_first_step(host, port, &version_msg(), &mut theirs, PATIENCE)
            .map_err(|x| format!("version: {x}"))?;
        let mut c = Chan::new(s, true)?;
        c.version = Some(theirs);
        Ok(c)
    }

    /// The exchange over a control connection rdma_cm made (`-R`).
    pub(super) fn cm(link: CmLink<'a>, client: bool) -> Chan<'a> {
        Chan {
            w: Wire::Cm(Box::new(link)),
            client,
            version: None,
        }
    }

    /// The connection manager, with `-R`.
    pub(super) fn link(&mut self) -> Option<&mut CmLink<'a>> {
        match &mut self.w {
            Wire::Cm(l) => Some(l),
            Wire::Tcp(_) => None,
        }
    }

    /// One step: our message out and the peer's (of the same size) in, in the order of our
    /// side. `what` names the step in errors.
    pub(super) fn step(&mut self, mine: &[u8], what: &str) -> Result<Vec<u8>, String> {
        let s = match &mut self.w {
            Wire::Cm(l) => return l.step(mine, what),
            Wire::Tcp(s) => s,
        };
        let mut theirs = vec![0u8; mine.len()];
        if self.client {
            s.write_all(mine)
                .map_err(|x| format!("sending {what}: {x}"))?;
        }
        s.read_exact(&mut theirs)
            .map_err(|x| format!("reading the peer's {what}: {x}"))?;
        if !self.client {
            s.write_all(mine)
                .map_err(|x| format!("sending {what}: {x}"))?;
        }
        Ok(theirs)
    }

    /// The version, cycle buffer, cache line and MTU steps. Both sides use the larger cycle
    /// buffer and cache line, so the peer names the size of the buffer we register: a cycle
    /// buffer above `max_cycle_buffer` (what the caller allows) or a cache line that is not a
    /// power of two up to [`MAX_PEER_CACHE_LINE`] ends the exchange with an error instead.
    pub(super) fn prelude(
        &mut self,
        cycle_buffer: u32,
        cache_line: u32,
        mtu: u8,
        max_cycle_buffer: u32,
    ) -> Result<Settled, String> {
        let theirs = match self.version.take() {
            Some(t) => t,
            None => self.step(&version_msg(), "version")?,
        };
        let text =
            String::from_utf8_lossy(theirs.split(|&b| b == 0).next().unwrap_or(&[])).to_string();
        let version: f64 = text.trim().parse().unwrap_or(0.0);
        if version < OLDEST {
            return Err(format!(
                "the peer's perftest version {text:?} is older than 5.70"
            ));
        }
        let word = |x: &[u8]| u32::from_be_bytes([x[0], x[1], x[2], x[3]]);
        let cb = word(&self.step(&cycle_buffer.to_be_bytes(), "cycle buffer size")?);
        let cl = word(&self.step(&cache_line.to_be_bytes(), "cache line size")?);
        if cb > max_cycle_buffer.max(cycle_buffer) {
            return Err(format!(
                "the peer's cycle buffer of {cb} bytes is larger than the {} this side allows (--max-peer-buffer)",
                max_cycle_buffer.max(cycle_buffer)
            ));
        }
        if !cl.is_power_of_two() || cl > MAX_PEER_CACHE_LINE {
            return Err(format!(
                "the peer's cache line size {cl} is not a power of two up to {MAX_PEER_CACHE_LINE}"
            ));
        }
        let m = self.step(&[b'0' + mtu.min(9), 0], "MTU")?;
        let peer_mtu = m[0].wrapping_sub(b'0');
        Ok(Settled {
            cycle_buffer: cycle_buffer.max(cb),
            cache_line: cache_line.max(cl),
            // The smaller, as perftest takes it (an invalid value of the peer's is ignored).
            mtu: if (1..=5).contains(&peer_mtu) {
                mtu.min(peer_mtu)
            } else {
                mtu
            },
        })
    }

    /// One key exchange: ours out, the peer's in (text over TCP, perftest's binary struct
    /// over rdma_cm).
    pub(super) fn keys(&mut self, me: &Keys) -> Result<Keys, String> {
        if matches!(self.w, Wire::Cm(_)) {
            let m = self.step(&me.to_binary(1), "keys")?;
            return Keys::from_binary(&m);
        }
        let m = self.step(&me.to_wire(), "keys")?;
        Keys::from_wire(&m)
    }

    /// The bandwidth report: size, iterations, peak and average MB/s (MB = 2^20), million
    /// messages per second — five steps of 8 big-endian bytes. The peer's values.
    pub(super) fn report(
        &mut self,
        size: u64,
        iters: u64,
        peak: f64,
        avg: f64,
        rate: f64,
    ) -> Result<(u64, u64, f64, f64, f64), String> {
        let mut q = |x: [u8; 8], what: &str| -> Result<[u8; 8], String> {
            let m = self.step(&x, what)?;
            let mut b = [0u8; 8];
            b.copy_from_slice(&m);
            Ok(b)
        };
        let s = u64::from_be_bytes(q(size.to_be_bytes(), "report size")?);
        let n = u64::from_be_bytes(q(iters.to_be_bytes(), "report iterations")?);
        let p = f64::from_be_bytes(q(peak.to_be_bytes(), "report peak")?);
        let a = f64::from_be_bytes(q(avg.to_be_bytes(), "report average")?);
        let r = f64::from_be_bytes(q(rate.to_be_bytes(), "report message rate")?);
        Ok((s, n, p, a, r))
    }

    /// The end of the exchange. TCP: the closing `"done"` (nobody reads it), then whatever
    /// the peer sends until it closes (at most a few seconds), so that our close never resets
    /// a connection the peer still writes to. rdma_cm: no "done"; the test connection and
    /// the control connection are disconnected.
    pub(super) fn done(self, test_qp: Option<&mut Qp<'_>>) {
        match self.w {
            Wire::Tcp(mut s) => {
                if s.write_all(b"done\0").is_ok() {
                    linger(s);
                }
            }
            Wire::Cm(l) => l.close(test_qp),
        }
    }

    /// Ends without a closing message (ib_write_lat closes without a `"done"`): over TCP, ends
    /// our writing and reads whatever the peer still sends until it closes (3 s at most).
    pub(super) fn linger(self, test_qp: Option<&mut Qp<'_>>) {
        match self.w {
            Wire::Tcp(s) => linger(s),
            Wire::Cm(l) => l.close(test_qp),
        }
    }
}

/// Our side is done writing: says so (FIN after what is queued), then reads whatever the peer
/// still sends until it closes (3 s at most) — so that closing never resets a connection the
/// peer still reads from. Without the shutdown, two of our own sides lingered on each other for
/// the whole 3 s.
fn linger(mut s: TcpStream) {
    let _ = s.shutdown(std::net::Shutdown::Write);
    let _ = s.set_read_timeout(Some(Duration::from_secs(3)));
    let mut sink = [0u8; 64];
    while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exchange_is_step_by_step_and_settles_the_larger_buffers_and_smaller_mtu() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut c = Chan::new(s, false).unwrap();
            let p = c.prelude(4096, 128, 3, 1 << 20).unwrap();
            let k = c
                .keys(&Keys {
                    qpn: 2,
                    ..Keys::default()
                })
                .unwrap();
            let r = c.report(1, 2, 3.0, 4.0, 5.0).unwrap();
            c.done(None);
            (p, k, r)
        });
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let mut c = Chan::new(s, true).unwrap();
        let p = c.prelude(8192, 64, 5, 1 << 20).unwrap();
        let k = c
            .keys(&Keys {
                qpn: 1,
                ..Keys::default()
            })
            .unwrap();
        let r = c.report(10, 20, 30.0, 40.0, 50.0).unwrap();
        c.done(None);
        let (sp, sk, sr) = server.join().unwrap();
        let settled = Settled {
            cycle_buffer: 8192,
            cache_line: 128,
            mtu: 3,
        };
        assert_eq!((p, sp), (settled, settled));
        assert_eq!((k.qpn, sk.qpn), (2, 1));
        assert_eq!(r, (1, 2, 3.0, 4.0, 5.0));
        assert_eq!(sr, (10, 20, 30.0, 40.0, 50.0));
    }

    /// Issue #26 row 9: the cycle buffer and cache line are the larger of both sides', so a
    /// peer naming 0xFFFFFFFF for each made us register a buffer of 8 GiB (the simulator
    /// refused it; a real NIC's driver would have tried). Now the exchange ends with an error.
    #[test]
    fn a_peer_cannot_name_the_size_of_our_buffer() {
        for (cb, cl, what) in [
            (u32::MAX, 64, "cycle buffer"),
            (4096, u32::MAX, "cache line"),
            (4096, 96, "cache line"),
            (4096, 0, "cache line"),
        ] {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let port = l.local_addr().unwrap().port();
            // The hostile client: perftest's messages, with its own sizes.
            let client = std::thread::spawn(move || {
                let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
                let mut v = [0u8; 16];
                v[..4].copy_from_slice(b"6.06");
                let mut back = [0u8; 16];
                let _ = s.write_all(&v).and_then(|()| s.read_exact(&mut back));
                let mut w = [0u8; 4];
                let _ = s
                    .write_all(&cb.to_be_bytes())
                    .and_then(|()| s.read_exact(&mut w));
                let _ = s
                    .write_all(&cl.to_be_bytes())
                    .and_then(|()| s.read_exact(&mut w));
                let _ = s.write_all(b"3\0");
            });
            let (s, _) = l.accept().unwrap();
            let mut c = Chan::new(s, false).unwrap();
            let err = c.prelude(4096, 64, 3, 16 << 20).unwrap_err();
            assert!(err.contains(what), "{err}");
            drop(c);
            client.join().unwrap();
        }
    }
}
