//! A vfio-user client that speaks the protocol byte by byte — headers that lie about their
//! size, payloads cut short, file descriptors attached to any message — for the tests that play a
//! hostile client against the server, and for the fuzz target (tests/fuzz, which includes this
//! file by path).
#![allow(dead_code)]

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use vmm_sys_util::sock_ctrl_msg::ScmSocket;

/// Bytes of a message header: message ID, command, message size, flags, error.
pub const HEADER: usize = 16;
pub const VERSION: u16 = 1;
pub const DMA_MAP: u16 = 2;
pub const DMA_UNMAP: u16 = 3;
pub const DEVICE_GET_INFO: u16 = 4;
pub const SET_IRQS: u16 = 8;
pub const REGION_READ: u16 = 9;
pub const REGION_WRITE: u16 = 10;
pub const DEVICE_RESET: u16 = 13;
/// Header flags: a reply, no reply wanted, an error reply.
pub const REPLY: u32 = 1;
pub const NO_REPLY: u32 = 1 << 4;
pub const ERROR: u32 = 1 << 5;
/// Region indexes (vfio-pci): BAR0 and configuration space.
pub const BAR0: u32 = 0;
pub const CONFIG: u32 = 7;
/// The capabilities a client sends with VERSION (as the crate's own client does).
pub const CAPS: &[u8] = br#"{"capabilities":{"max_msg_fds":1,"max_data_xfer_size":1048576,"migration":{"pgsize":4096}}}"#;

/// A message's bytes: a header claiming `size` bytes in all, then `body`.
pub fn message(id: u16, command: u16, size: u32, flags: u32, body: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(HEADER + body.len());
    m.extend_from_slice(&id.to_ne_bytes());
    m.extend_from_slice(&command.to_ne_bytes());
    m.extend_from_slice(&size.to_ne_bytes());
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(body);
    m
}

/// The body of DMA_MAP: argsz, flags (read and write), file offset, IOVA, size.
pub fn dma_map_body(offset: u64, iova: u64, size: u64) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&32u32.to_ne_bytes());
    b.extend_from_slice(&3u32.to_ne_bytes());
    for v in [offset, iova, size] {
        b.extend_from_slice(&v.to_ne_bytes());
    }
    b
}

/// The body of DMA_UNMAP: argsz, flags, IOVA, size.
pub fn dma_unmap_body(flags: u32, iova: u64, size: u64) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&24u32.to_ne_bytes());
    b.extend_from_slice(&flags.to_ne_bytes());
    b.extend_from_slice(&iova.to_ne_bytes());
    b.extend_from_slice(&size.to_ne_bytes());
    b
}

/// The body of REGION_READ and REGION_WRITE (before a write's data): offset, region, count.
pub fn region_body(region: u32, offset: u64, count: u32) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&offset.to_ne_bytes());
    b.extend_from_slice(&region.to_ne_bytes());
    b.extend_from_slice(&count.to_ne_bytes());
    b
}

/// An anonymous shared-memory file of `len` bytes; `sealable`: created with
/// `MFD_ALLOW_SEALING` (as QEMU's memory-backend-memfd does), else sealed against any seal.
pub fn memfd(len: u64, sealable: bool) -> File {
    let flags = if sealable { libc::MFD_ALLOW_SEALING } else { 0 };
    // SAFETY: memfd_create with a valid C string; the result is checked.
    let fd = unsafe { libc::memfd_create(c"mlx5-vfu-hostile".as_ptr(), flags) };
    assert!(fd >= 0, "memfd_create: {}", io::Error::last_os_error());
    // SAFETY: a fresh descriptor nobody else owns.
    let f = unsafe { File::from_raw_fd(fd) };
    f.set_len(len).expect("memfd set_len");
    f
}

/// A fresh socket path for test `name`.
pub fn socket(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("mlx5-vfu-{}-{name}.sock", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

/// Connects to the server on `path`, waiting up to 5 s for it to listen.
pub fn connect(path: &Path) -> UnixStream {
    for _ in 0..25_000 {
        if let Ok(s) = UnixStream::connect(path) {
            return s;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    panic!("the server does not listen on {}", path.display());
}

/// A reply: its header fields and the bytes after the header.
pub struct Reply {
    pub id: u16,
    pub command: u16,
    pub flags: u32,
    pub error: u32,
    pub body: Vec<u8>,
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reply")
            .field("id", &self.id)
            .field("command", &self.command)
            .field("flags", &self.flags)
            .field("error", &self.error)
            .field("bytes", &self.body.len())
            .field("first", &&self.body[..self.body.len().min(24)])
            .finish()
    }
}

impl Reply {
    pub fn is_error(&self) -> bool {
        self.flags & ERROR != 0
    }
}

/// A raw client: messages written as given, replies read as they come.
pub struct Raw {
    pub s: UnixStream,
    next_id: u16,
}

impl Raw {
    pub fn connect(path: &Path) -> Raw {
        let s = connect(path);
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        Raw { s, next_id: 0 }
    }

    /// Sends `command` with `body`, its header telling the true size; `fd` attached.
    pub fn send(&mut self, command: u16, body: &[u8], fd: Option<&File>) -> io::Result<u16> {
        let size = (HEADER + body.len()) as u32;
        self.send_sized(command, size, body, fd)
    }

    /// Sends `command` with `body` under a header that claims `size` bytes.
    pub fn send_sized(
        &mut self,
        command: u16,
        size: u32,
        body: &[u8],
        fd: Option<&File>,
    ) -> io::Result<u16> {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        let m = message(id, command, size, 0, body);
        match fd {
            Some(f) => {
                // The descriptor goes with the header (the server receives it there), the
                // rest as a plain write.
                let n = self
                    .s
                    .send_with_fd(&m[..HEADER], f.as_raw_fd())
                    .map_err(|e| io::Error::from_raw_os_error(e.errno()))?;
                assert_eq!(n, HEADER, "sendmsg of a header");
                self.s.write_all(&m[HEADER..])?;
            }
            None => self.s.write_all(&m)?,
        }
        Ok(id)
    }

    /// The next reply (its payload capped at 4 MiB).
    pub fn reply(&mut self) -> io::Result<Reply> {
        let mut h = [0u8; HEADER];
        self.s.read_exact(&mut h)?;
        let word = |at: usize| u32::from_ne_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]);
        let size = word(4) as usize;
        let rest = size.saturating_sub(HEADER).min(4 << 20);
        let mut body = vec![0; rest];
        self.s.read_exact(&mut body)?;
        Ok(Reply {
            id: u16::from_ne_bytes([h[0], h[1]]),
            command: u16::from_ne_bytes([h[2], h[3]]),
            flags: word(8),
            error: word(12),
            body,
        })
    }

    /// Sends a message and returns its reply.
    pub fn call(&mut self, command: u16, body: &[u8], fd: Option<&File>) -> io::Result<Reply> {
        self.send(command, body, fd)?;
        self.reply()
    }

    /// VERSION with the usual capabilities.
    pub fn version(&mut self) -> io::Result<Reply> {
        let mut body = vec![0, 0, 1, 0]; // major 0, minor 1
        body.extend_from_slice(CAPS);
        body.push(0);
        self.call(VERSION, &body, None)
    }

    /// REGION_READ of `count` bytes at `offset` of `region`.
    pub fn read(&mut self, region: u32, offset: u64, count: u32) -> io::Result<Reply> {
        self.call(REGION_READ, &region_body(region, offset, count), None)
    }

    /// REGION_WRITE of `data` at `offset` of `region`.
    pub fn write(&mut self, region: u32, offset: u64, data: &[u8]) -> io::Result<Reply> {
        let mut body = region_body(region, offset, data.len() as u32);
        body.extend_from_slice(data);
        self.call(REGION_WRITE, &body, None)
    }

    /// A 4-byte BAR0 write of `v` (big-endian, as the device's registers are).
    pub fn bar_write32(&mut self, offset: u64, v: u32) -> io::Result<Reply> {
        self.write(BAR0, offset, &v.to_be_bytes())
    }

    /// A 4-byte BAR0 read.
    pub fn bar_read32(&mut self, offset: u64) -> io::Result<u32> {
        let r = self.read(BAR0, offset, 4)?;
        let b: [u8; 4] = r
            .body
            .get(16..20)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| io::Error::other(format!("BAR0 read at {offset:#x}: reply {r:?}")))?;
        Ok(u32::from_be_bytes(b))
    }

    /// The configuration space's vendor and device IDs, the server's sign of life.
    pub fn ids(&mut self) -> io::Result<[u8; 4]> {
        let r = self.read(CONFIG, 0, 4)?;
        r.body
            .get(16..20)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| io::Error::other(format!("config read: reply {r:?}")))
    }
}

/// Vendor 15b3, device 1017, as configuration space holds them.
pub const IDS: [u8; 4] = [0xb3, 0x15, 0x17, 0x10];
