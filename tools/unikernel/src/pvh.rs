//! The PVH boot protocol's `hvm_start_info`, whose physical address QEMU (`-kernel` with a PVH
//! ELF note) leaves in EBX. [`StartInfo::read`] copies out everything the kernel needs: the
//! memory map, the command line and the RSDP address, because the structure itself lies in RAM
//! the kernel will reuse.
//!
//! Policies:
//! - Version 0 (no memory map fields) is refused: a PVH kernel has no other memory map source.
//! - At most [`MAX_MEMMAP`] entries are kept; the rest are dropped (not read) and
//!   [`StartInfo::memmap_truncated`] says so. Dropping entries only hides memory: consumers use
//!   listed RAM only, so a missing reserved range is never turned into usable RAM.
//! - The command line is read up to its NUL, at most [`CMDLINE_MAX`] bytes; a longer one is an
//!   error (truncating could silently change the last argument). Bytes that are not UTF-8 are
//!   replaced by `?` one for one.

use core::fmt;

use crate::acpi::{le32, le64, PhysRead};

/// `hvm_start_info.magic`.
pub const PVH_MAGIC: u32 = 0x336e_c578;
/// Memory map entries kept.
pub const MAX_MEMMAP: usize = 32;
/// Longest command line accepted, in bytes, without its NUL.
pub const CMDLINE_MAX: usize = 256;
/// Bytes of `hvm_start_info` version 1.
pub const START_INFO_LEN: usize = 56;
/// Bytes per memory map entry.
pub const MEMMAP_ENTRY_LEN: usize = 24;

/// Kind of a memory map range (E820 numbering).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemKind {
    /// 1: usable RAM.
    Ram,
    /// 2: reserved.
    Reserved,
    /// 3: ACPI tables, reclaimable once parsed.
    Acpi,
    /// 4: ACPI non-volatile storage.
    Nvs,
    /// 5: unusable (bad memory).
    Unusable,
    /// Any other type number.
    Other(u32),
}

impl MemKind {
    /// The kind for type number `raw`.
    pub fn from_raw(raw: u32) -> Self {
        match raw {
            1 => MemKind::Ram,
            2 => MemKind::Reserved,
            3 => MemKind::Acpi,
            4 => MemKind::Nvs,
            5 => MemKind::Unusable,
            n => MemKind::Other(n),
        }
    }

    /// The type number.
    pub fn raw(self) -> u32 {
        match self {
            MemKind::Ram => 1,
            MemKind::Reserved => 2,
            MemKind::Acpi => 3,
            MemKind::Nvs => 4,
            MemKind::Unusable => 5,
            MemKind::Other(n) => n,
        }
    }
}

/// One memory map entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemRange {
    /// Physical start.
    pub addr: u64,
    /// Length in bytes.
    pub size: u64,
    /// What it is.
    pub kind: MemKind,
}

impl MemRange {
    /// One past the last byte (saturating).
    pub fn end(&self) -> u64 {
        self.addr.saturating_add(self.size)
    }
}

/// The part of the start info an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PvhPart {
    /// The `hvm_start_info` structure.
    StartInfo,
    /// Memory map entry `index`.
    MemoryMap {
        /// Which entry.
        index: u32,
    },
    /// The command line.
    Cmdline,
}

/// Why the start info was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PvhError {
    /// `len` bytes at `phys` could not be read.
    Unreadable {
        /// What was being read.
        part: PvhPart,
        /// Its address.
        phys: u64,
        /// Bytes asked for.
        len: u32,
    },
    /// The magic is not [`PVH_MAGIC`].
    Magic {
        /// The value found.
        found: u32,
    },
    /// Version 0: no memory map.
    Version {
        /// The value found.
        found: u32,
    },
    /// Memory map entries announced at physical address 0.
    NullMemmap {
        /// Entries announced.
        entries: u32,
    },
    /// No NUL within the first [`CMDLINE_MAX`] + 1 bytes of the command line.
    CmdlineTooLong {
        /// Its address.
        phys: u64,
    },
}

impl fmt::Display for PvhPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PvhPart::StartInfo => f.write_str("hvm_start_info"),
            PvhPart::MemoryMap { index } => write!(f, "memory map entry {index}"),
            PvhPart::Cmdline => f.write_str("command line"),
        }
    }
}

impl fmt::Display for PvhError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            PvhError::Unreadable { part, phys, len } => {
                write!(f, "{part}: {len} bytes at {phys:#x} are not readable")
            }
            PvhError::Magic { found } => {
                write!(
                    f,
                    "hvm_start_info: magic {found:#010x}, want {PVH_MAGIC:#010x}"
                )
            }
            PvhError::Version { found } => {
                write!(
                    f,
                    "hvm_start_info: version {found} has no memory map (need 1+)"
                )
            }
            PvhError::NullMemmap { entries } => {
                write!(
                    f,
                    "hvm_start_info: {entries} memory map entries at address 0"
                )
            }
            PvhError::CmdlineTooLong { phys } => {
                write!(
                    f,
                    "command line at {phys:#x}: no NUL within {CMDLINE_MAX} bytes"
                )
            }
        }
    }
}

/// What the kernel keeps of `hvm_start_info`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartInfo {
    /// Structure version (1+).
    pub version: u32,
    /// Flags (bit 0: the guest is the hardware domain, Xen only).
    pub flags: u32,
    /// Number of modules (initrds) at `modlist_paddr`.
    pub nr_modules: u32,
    /// Physical address of the module list (not copied).
    pub modlist_paddr: u64,
    /// Physical address of the ACPI RSDP, 0 if not given.
    pub rsdp_paddr: u64,
    /// The first [`MAX_MEMMAP`] memory map entries.
    pub memmap: heapless::Vec<MemRange, MAX_MEMMAP>,
    /// Memory map entries the structure announced (more than `memmap.len()` if truncated).
    pub memmap_entries: u32,
    /// The command line (empty when none was given).
    pub cmdline: heapless::String<CMDLINE_MAX>,
}

fn read_arr<const N: usize>(
    mem: &impl PhysRead,
    part: PvhPart,
    phys: u64,
) -> Result<[u8; N], PvhError> {
    crate::acpi::read_phys(mem, phys).ok_or(PvhError::Unreadable {
        part,
        phys,
        len: N as u32,
    })
}

fn read_cmdline(mem: &impl PhysRead, phys: u64) -> Result<heapless::String<CMDLINE_MAX>, PvhError> {
    let mut out = heapless::String::new();
    if phys == 0 {
        return Ok(out);
    }
    let mut buf = [0u8; CMDLINE_MAX];
    let mut len = 0;
    loop {
        let at = phys.checked_add(len as u64);
        let [b] = read_arr::<1>(mem, PvhPart::Cmdline, at.unwrap_or(u64::MAX))?;
        if b == 0 {
            break;
        }
        if len == CMDLINE_MAX {
            return Err(PvhError::CmdlineTooLong { phys });
        }
        buf[len] = b;
        len += 1;
    }
    let mut rest = &buf[..len];
    // Same byte count in and out, so the pushes cannot overflow.
    while !rest.is_empty() {
        match core::str::from_utf8(rest) {
            Ok(s) => {
                let _ = out.push_str(s);
                rest = &[];
            }
            Err(e) => {
                let (good, bad) = rest.split_at(e.valid_up_to());
                let _ = out.push_str(core::str::from_utf8(good).unwrap_or_default());
                let n = e.error_len().unwrap_or(bad.len());
                for _ in 0..n {
                    let _ = out.push('?');
                }
                rest = &bad[n..];
            }
        }
    }
    Ok(out)
}

impl StartInfo {
    /// Copy the start info at `phys` (from EBX) out of guest memory.
    pub fn read(mem: &impl PhysRead, phys: u64) -> Result<StartInfo, PvhError> {
        let s: [u8; START_INFO_LEN] = read_arr(mem, PvhPart::StartInfo, phys)?;
        let magic = le32(&s, 0);
        if magic != PVH_MAGIC {
            return Err(PvhError::Magic { found: magic });
        }
        let version = le32(&s, 4);
        if version == 0 {
            return Err(PvhError::Version { found: version });
        }
        let (memmap_paddr, memmap_entries) = (le64(&s, 40), le32(&s, 48));
        if memmap_paddr == 0 && memmap_entries != 0 {
            return Err(PvhError::NullMemmap {
                entries: memmap_entries,
            });
        }
        let mut memmap = heapless::Vec::new();
        for index in 0..memmap_entries.min(MAX_MEMMAP as u32) {
            let at = memmap_paddr.checked_add(u64::from(index) * MEMMAP_ENTRY_LEN as u64);
            let e: [u8; MEMMAP_ENTRY_LEN] =
                read_arr(mem, PvhPart::MemoryMap { index }, at.unwrap_or(u64::MAX))?;
            let range = MemRange {
                addr: le64(&e, 0),
                size: le64(&e, 8),
                kind: MemKind::from_raw(le32(&e, 16)),
            };
            let _ = memmap.push(range); // at most MAX_MEMMAP iterations
        }
        Ok(StartInfo {
            version,
            flags: le32(&s, 8),
            nr_modules: le32(&s, 12),
            modlist_paddr: le64(&s, 16),
            rsdp_paddr: le64(&s, 32),
            memmap,
            memmap_entries,
            cmdline: read_cmdline(mem, le64(&s, 24))?,
        })
    }

    /// The RSDP's physical address, if the loader gave one.
    pub fn rsdp(&self) -> Option<u64> {
        (self.rsdp_paddr != 0).then_some(self.rsdp_paddr)
    }

    /// Whether memory map entries were dropped (more than [`MAX_MEMMAP`]).
    pub fn memmap_truncated(&self) -> bool {
        self.memmap_entries as usize > self.memmap.len()
    }

    /// Bytes of RAM in the (kept) memory map.
    pub fn ram_total(&self) -> u64 {
        self.memmap
            .iter()
            .filter(|r| r.kind == MemKind::Ram)
            .fold(0u64, |acc, r| acc.saturating_add(r.size))
    }

    /// The value of the last `key=value` word of the command line; `Some("")` for a bare `key`
    /// word, `None` if the key is absent (or empty).
    pub fn cmdline_arg(&self, key: &str) -> Option<&str> {
        if key.is_empty() {
            return None;
        }
        self.cmdline
            .split_ascii_whitespace()
            .rev()
            .find_map(|word| {
                let rest = word.strip_prefix(key)?;
                if rest.is_empty() {
                    Some(rest)
                } else {
                    rest.strip_prefix('=')
                }
            })
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::string::ToString;
    use std::vec::Vec;

    #[derive(Default)]
    struct Mem(Vec<(u64, Vec<u8>)>);

    impl PhysRead for Mem {
        fn read(&self, phys: u64, out: &mut [u8]) -> bool {
            self.0.iter().any(|(base, b)| {
                let Some(off) = phys.checked_sub(*base).map(|o| o as usize) else {
                    return false;
                };
                let ok = off.checked_add(out.len()).is_some_and(|end| end <= b.len());
                if ok {
                    out.copy_from_slice(&b[off..off + out.len()]);
                }
                ok
            })
        }
    }

    const INFO: u64 = 0x6d81;
    const MEMMAP: u64 = 0x6e03;
    const CMDLINE: u64 = 0x7005;
    const RAM: (u64, u64) = (0x10_0000, 0x3ffe_0000 - 0x10_0000);

    /// The memory map QEMU gives a 1 GiB q35 guest.
    const QEMU_MAP: [(u64, u64, u32); 9] = [
        (0, 0x9fc00, 1),
        (0x9fc00, 0x400, 2),
        (0xf0000, 0x10000, 2),
        (RAM.0, RAM.1, 1),
        (0x3ffe_0000, 0x20000, 2),
        (0xb000_0000, 0x1000_0000, 2),
        (0xfed1_c000, 0x4000, 2),
        (0xfeff_c000, 0x4000, 2),
        (0xfffc_0000, 0x40000, 2),
    ];

    fn info(magic: u32, version: u32, memmap: u64, entries: u32, cmdline: u64) -> Vec<u8> {
        let mut s = Vec::new();
        for v in [magic, version, 0, 0] {
            s.extend_from_slice(&v.to_le_bytes());
        }
        for v in [0u64, cmdline, 0xf_52e0, memmap] {
            s.extend_from_slice(&v.to_le_bytes());
        }
        s.extend_from_slice(&entries.to_le_bytes());
        s.extend_from_slice(&0u32.to_le_bytes());
        s
    }

    fn map(entries: &[(u64, u64, u32)]) -> Vec<u8> {
        let mut m = Vec::new();
        for &(a, s, t) in entries {
            m.extend_from_slice(&a.to_le_bytes());
            m.extend_from_slice(&s.to_le_bytes());
            m.extend_from_slice(&t.to_le_bytes());
            m.extend_from_slice(&0u32.to_le_bytes());
        }
        m
    }

    /// Start info as QEMU 10.2 hands it over, at odd addresses.
    fn qemu(cmdline: &[u8]) -> Mem {
        Mem(Vec::from([
            (INFO, info(PVH_MAGIC, 1, MEMMAP, 9, CMDLINE)),
            (MEMMAP, map(&QEMU_MAP)),
            (CMDLINE, cmdline.to_vec()),
        ]))
    }

    #[test]
    fn qemu_start_info() {
        let si = StartInfo::read(&qemu(b"mlx5.test=1 hello\0garbage"), INFO).unwrap();
        assert_eq!(
            (si.version, si.flags, si.nr_modules, si.modlist_paddr),
            (1, 0, 0, 0)
        );
        assert_eq!(si.rsdp(), Some(0xf_52e0));
        assert_eq!(si.memmap.len(), 9);
        assert!(!si.memmap_truncated());
        assert_eq!(
            si.memmap[3],
            MemRange {
                addr: 0x10_0000,
                size: RAM.1,
                kind: MemKind::Ram
            }
        );
        assert_eq!(si.memmap[3].end(), 0x3ffe_0000);
        assert_eq!(si.memmap[5].kind, MemKind::Reserved);
        assert_eq!(si.ram_total(), 0x9fc00 + RAM.1);
        assert_eq!(si.cmdline.as_str(), "mlx5.test=1 hello");
        assert_eq!(si.cmdline_arg("mlx5.test"), Some("1"));
        assert_eq!(si.cmdline_arg("hello"), Some(""));
        assert_eq!(si.cmdline_arg("mlx5"), None);
        assert_eq!(si.cmdline_arg("hell"), None);
        assert_eq!(si.cmdline_arg(""), None);
    }

    #[test]
    fn cmdline_args_last_wins_and_values_keep_equals() {
        let si = StartInfo::read(&qemu(b"  a=1\tb=x=y a=2 c= \0"), INFO).unwrap();
        assert_eq!(si.cmdline_arg("a"), Some("2"));
        assert_eq!(si.cmdline_arg("b"), Some("x=y"));
        assert_eq!(si.cmdline_arg("c"), Some(""));
        assert_eq!(si.cmdline_arg("d"), None);
    }

    #[test]
    fn bad_magic_and_version() {
        let mut m = qemu(b"\0");
        m.0[0].1[0] ^= 1;
        let err = StartInfo::read(&m, INFO).unwrap_err();
        assert_eq!(
            err,
            PvhError::Magic {
                found: PVH_MAGIC ^ 1
            }
        );
        assert_eq!(
            err.to_string(),
            "hvm_start_info: magic 0x336ec579, want 0x336ec578"
        );
        m.0[0].1 = info(PVH_MAGIC, 0, MEMMAP, 9, CMDLINE);
        assert_eq!(
            StartInfo::read(&m, INFO),
            Err(PvhError::Version { found: 0 })
        );
        m.0[0].1 = info(PVH_MAGIC, 2, MEMMAP, 9, CMDLINE); // newer versions append fields
        assert_eq!(StartInfo::read(&m, INFO).unwrap().version, 2);
        let e = StartInfo::read(&m, INFO + 1).unwrap_err();
        assert_eq!(
            e,
            PvhError::Unreadable {
                part: PvhPart::StartInfo,
                phys: INFO + 1,
                len: 56
            }
        );
        assert!(StartInfo::read(&m, u64::MAX - 10).is_err());
    }

    #[test]
    fn unreadable_memmap() {
        let mut m = qemu(b"\0");
        m.0[0].1 = info(PVH_MAGIC, 1, 0x8000_0000, 9, CMDLINE);
        let e = StartInfo::read(&m, INFO).unwrap_err();
        assert_eq!(
            e,
            PvhError::Unreadable {
                part: PvhPart::MemoryMap { index: 0 },
                phys: 0x8000_0000,
                len: 24
            }
        );
        assert_eq!(
            e.to_string(),
            "memory map entry 0: 24 bytes at 0x80000000 are not readable"
        );
        m.0[0].1 = info(PVH_MAGIC, 1, MEMMAP, 10, CMDLINE); // one entry past the end
        let e = StartInfo::read(&m, INFO).unwrap_err();
        assert!(matches!(
            e,
            PvhError::Unreadable {
                part: PvhPart::MemoryMap { index: 9 },
                ..
            }
        ));
        m.0[0].1 = info(PVH_MAGIC, 1, 0, 9, CMDLINE);
        assert_eq!(
            StartInfo::read(&m, INFO),
            Err(PvhError::NullMemmap { entries: 9 })
        );
        m.0[0].1 = info(PVH_MAGIC, 1, u64::MAX - 30, 9, CMDLINE);
        assert!(StartInfo::read(&m, INFO).is_err());
        m.0[0].1 = info(PVH_MAGIC, 1, 0, 0, CMDLINE); // no map at all is not an error here
        assert_eq!(StartInfo::read(&m, INFO).unwrap().ram_total(), 0);
    }

    #[test]
    fn long_memmap_is_truncated_and_flagged() {
        let entries: Vec<_> = (0..40u64)
            .map(|i| (i << 20, 1 << 20, 1 + (i % 2) as u32))
            .collect();
        let mut m = qemu(b"\0");
        m.0[0].1 = info(PVH_MAGIC, 1, MEMMAP, 0xffff_ffff, CMDLINE); // only 32 are read
        m.0[1].1 = map(&entries);
        let si = StartInfo::read(&m, INFO).unwrap();
        assert_eq!((si.memmap.len(), si.memmap_entries), (32, 0xffff_ffff));
        assert!(si.memmap_truncated());
        assert_eq!(si.ram_total(), 16 << 20);
        assert_eq!(si.memmap[31].kind, MemKind::Reserved);
        assert_eq!(MemKind::from_raw(7), MemKind::Other(7));
        assert_eq!([MemKind::Nvs.raw(), MemKind::Other(12).raw()], [4, 12]);
    }

    #[test]
    fn cmdline_limits() {
        let mut long = [b'a'; 300].to_vec();
        let e = StartInfo::read(&qemu(&long), INFO).unwrap_err();
        assert_eq!(e, PvhError::CmdlineTooLong { phys: CMDLINE });
        long.truncate(CMDLINE_MAX);
        // Exactly CMDLINE_MAX bytes, but the NUL lies in unreadable memory.
        let e = StartInfo::read(&qemu(&long), INFO).unwrap_err();
        assert_eq!(
            e,
            PvhError::Unreadable {
                part: PvhPart::Cmdline,
                phys: CMDLINE + 256,
                len: 1
            }
        );
        long.push(0);
        assert_eq!(
            StartInfo::read(&qemu(&long), INFO).unwrap().cmdline.len(),
            CMDLINE_MAX
        );
        let mut m = qemu(b"");
        m.0[0].1 = info(PVH_MAGIC, 1, MEMMAP, 9, 0);
        assert_eq!(StartInfo::read(&m, INFO).unwrap().cmdline.as_str(), "");
    }

    #[test]
    fn non_utf8_cmdline_is_replaced() {
        let si = StartInfo::read(&qemu(b"a=\xff\xfe b=\xc3\xa9 c=\xe2\x82\0"), INFO).unwrap();
        assert_eq!(si.cmdline.as_str(), "a=?? b=\u{e9} c=??");
        assert_eq!(si.cmdline_arg("b"), Some("\u{e9}"));
        let mut full = [0xffu8; CMDLINE_MAX].to_vec();
        full.push(0);
        let si = StartInfo::read(&qemu(&full), INFO).unwrap();
        assert!(si.cmdline.len() == CMDLINE_MAX && si.cmdline.bytes().all(|b| b == b'?'));
    }
}
