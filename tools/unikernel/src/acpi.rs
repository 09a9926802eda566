//! Just enough ACPI to find the PCIe ECAM window (MCFG) and the local APIC (MADT): RSDP, then
//! RSDT or XSDT, then the table by signature. Everything is read through [`PhysRead`] into small
//! byte buffers and decoded little-endian, so unaligned tables at odd addresses are fine and a
//! bad pointer is an error, never a fault or a panic.

use core::fmt;

/// Reads physical memory (identity mapped, a fixed offset, a copy; the kernel decides).
pub trait PhysRead {
    /// Fill `out` from physical address `phys`; `false` if any byte is not readable.
    fn read(&self, phys: u64, out: &mut [u8]) -> bool;
}

impl<T: PhysRead + ?Sized> PhysRead for &T {
    fn read(&self, phys: u64, out: &mut [u8]) -> bool {
        (**self).read(phys, out)
    }
}

/// Length of every SDT header.
pub const SDT_HEADER_LEN: u32 = 36;
/// Largest table accepted (1 MiB).
pub const MAX_TABLE_LEN: u32 = 1 << 20;
/// Most entries accepted in the RSDT/XSDT.
pub const MAX_ROOT_ENTRIES: usize = 256;

/// Which ACPI structure an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    /// The root system description pointer.
    Rsdp,
    /// A system description table by signature (`RSDT`, `XSDT`, `MCFG`, `APIC`, ...).
    Sdt([u8; 4]),
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Table::Rsdp => f.write_str("RSDP"),
            Table::Sdt(sig) => sig.iter().try_for_each(|&b| {
                let c = if b.is_ascii_graphic() { b as char } else { '?' };
                write!(f, "{c}")
            }),
        }
    }
}

/// What went wrong, in which table, with what was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcpiError {
    /// `len` bytes at `phys` could not be read.
    Unreadable {
        /// The structure being read.
        table: Table,
        /// Its address.
        phys: u64,
        /// Bytes asked for.
        len: u32,
    },
    /// The RSDP does not start with `"RSD PTR "`.
    RsdpSignature {
        /// Its address.
        phys: u64,
        /// The 8 bytes found.
        found: [u8; 8],
    },
    /// A root table does not carry the signature its pointer promised.
    Signature {
        /// The table expected.
        table: Table,
        /// Its address.
        phys: u64,
        /// The 4 bytes found.
        found: [u8; 4],
    },
    /// The bytes do not sum to zero (for the RSDP: its first 20 bytes, or all `length` bytes
    /// for the revision 2+ extended checksum).
    Checksum {
        /// The structure.
        table: Table,
        /// Its address.
        phys: u64,
        /// The byte sum.
        sum: u8,
    },
    /// A length field is too small, over [`MAX_TABLE_LEN`], or not header + whole entries.
    Length {
        /// The structure.
        table: Table,
        /// Its address.
        phys: u64,
        /// The length field.
        length: u32,
    },
    /// The root table lists more than [`MAX_ROOT_ENTRIES`] tables.
    TooManyEntries {
        /// RSDT or XSDT.
        table: Table,
        /// Entries it claims.
        count: usize,
    },
    /// A root table entry is the null pointer.
    NullEntry {
        /// RSDT or XSDT.
        table: Table,
        /// Which entry.
        index: usize,
    },
    /// The RSDP gives neither an XSDT nor an RSDT address.
    NoRootTable,
    /// No MCFG table: the platform has no ECAM (e.g. QEMU's `pc` machine rather than `q35`).
    NoMcfg,
    /// MCFG has no allocation for PCI segment 0.
    NoSegment0 {
        /// Allocations it has.
        allocations: usize,
    },
    /// The segment-0 allocation's bus range is empty (end below start).
    BusRange {
        /// Start bus.
        start: u8,
        /// End bus.
        end: u8,
    },
}

impl fmt::Display for AcpiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            AcpiError::Unreadable { table, phys, len } => {
                write!(f, "{table}: {len} bytes at {phys:#x} are not readable")
            }
            AcpiError::RsdpSignature { phys, found } => {
                write!(
                    f,
                    "RSDP at {phys:#x}: signature {found:02x?}, want \"RSD PTR \""
                )
            }
            AcpiError::Signature { table, phys, found } => {
                write!(
                    f,
                    "{table} at {phys:#x}: signature is {}",
                    Table::Sdt(found)
                )
            }
            AcpiError::Checksum { table, phys, sum } => {
                write!(
                    f,
                    "{table} at {phys:#x}: checksum bytes sum to {sum:#04x}, not 0"
                )
            }
            AcpiError::Length {
                table,
                phys,
                length,
            } => {
                write!(f, "{table} at {phys:#x}: bad length field {length}")
            }
            AcpiError::TooManyEntries { table, count } => {
                write!(f, "{table}: {count} entries (max {MAX_ROOT_ENTRIES})")
            }
            AcpiError::NullEntry { table, index } => write!(f, "{table}: entry {index} is null"),
            AcpiError::NoRootTable => f.write_str("RSDP: no XSDT or RSDT address"),
            AcpiError::NoMcfg => f.write_str("no MCFG table (no PCIe ECAM)"),
            AcpiError::NoSegment0 { allocations } => {
                write!(
                    f,
                    "MCFG: none of its {allocations} allocations is for segment 0"
                )
            }
            AcpiError::BusRange { start, end } => {
                write!(
                    f,
                    "MCFG: segment 0 bus range {start:#x}..={end:#x} is empty"
                )
            }
        }
    }
}

/// A PCIe ECAM window from MCFG.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ecam {
    /// Physical address bus 0 would have (bus `b` is at `base + (b << 20)`).
    pub base: u64,
    /// PCI segment group.
    pub segment: u16,
    /// First bus decoded.
    pub start_bus: u8,
    /// Last bus decoded (inclusive).
    pub end_bus: u8,
}

impl Ecam {
    /// Physical address of config offset `off` of `bus:dev.func`, if the bus is in range.
    pub fn config_phys(&self, bus: u8, dev: u8, func: u8, off: u16) -> Option<u64> {
        if bus < self.start_bus || bus > self.end_bus || dev >= 32 || func >= 8 || off >= 4096 {
            return None;
        }
        let rel = (u64::from(bus) << 20) | (u64::from(dev) << 15) | (u64::from(func) << 12);
        Some(self.base + rel + u64::from(off))
    }
}

/// `N` bytes of physical memory at `phys`, if all of them are readable (firmware tables and the
/// PVH start info alike).
pub(crate) fn read_phys<const N: usize>(mem: &impl PhysRead, phys: u64) -> Option<[u8; N]> {
    let mut b = [0u8; N];
    (phys.checked_add(N as u64).is_some() && mem.read(phys, &mut b)).then_some(b)
}

fn read_arr<const N: usize>(
    mem: &impl PhysRead,
    table: Table,
    phys: u64,
) -> Result<[u8; N], AcpiError> {
    read_phys(mem, phys).ok_or(AcpiError::Unreadable {
        table,
        phys,
        len: N as u32,
    })
}

/// The little-endian u32 at `at` of `b` (firmware structures are byte-packed).
pub(crate) fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The little-endian u64 at `at` of `b`.
pub(crate) fn le64(b: &[u8], at: usize) -> u64 {
    u64::from(le32(b, at)) | (u64::from(le32(b, at + 4)) << 32)
}

/// Byte sum of `len` bytes at `phys`, read in small chunks.
fn sum(mem: &impl PhysRead, table: Table, phys: u64, len: u32) -> Result<u8, AcpiError> {
    let mut buf = [0u8; 64];
    let (mut done, mut acc) = (0u32, 0u8);
    while done < len {
        let n = (len - done).min(buf.len() as u32);
        let at = phys + u64::from(done);
        if !mem.read(at, &mut buf[..n as usize]) {
            return Err(AcpiError::Unreadable {
                table,
                phys: at,
                len: n,
            });
        }
        acc = buf[..n as usize]
            .iter()
            .fold(acc, |a, &b| a.wrapping_add(b));
        done += n;
    }
    Ok(acc)
}

fn check_sum(mem: &impl PhysRead, table: Table, phys: u64, len: u32) -> Result<(), AcpiError> {
    match sum(mem, table, phys, len)? {
        0 => Ok(()),
        s => Err(AcpiError::Checksum {
            table,
            phys,
            sum: s,
        }),
    }
}

/// Validate the SDT at `phys` (length 36..=1 MiB, checksum) and return its header.
fn sdt(mem: &impl PhysRead, table: Table, phys: u64) -> Result<[u8; 36], AcpiError> {
    if phys.checked_add(u64::from(MAX_TABLE_LEN)).is_none() {
        return Err(AcpiError::Unreadable {
            table,
            phys,
            len: SDT_HEADER_LEN,
        });
    }
    let h: [u8; 36] = read_arr(mem, table, phys)?;
    let length = le32(&h, 4);
    if !(SDT_HEADER_LEN..=MAX_TABLE_LEN).contains(&length) {
        return Err(AcpiError::Length {
            table,
            phys,
            length,
        });
    }
    check_sum(mem, table, phys, length)?;
    Ok(h)
}

/// The validated root table: its address, which one (RSDT or XSDT), its entry count.
fn root(mem: &impl PhysRead, rsdp: u64) -> Result<(u64, Table, usize), AcpiError> {
    let r: [u8; 20] = read_arr(mem, Table::Rsdp, rsdp)?;
    if &r[..8] != b"RSD PTR " {
        let mut found = [0u8; 8];
        found.copy_from_slice(&r[..8]);
        return Err(AcpiError::RsdpSignature { phys: rsdp, found });
    }
    check_sum(mem, Table::Rsdp, rsdp, 20)?;
    let rsdt = u64::from(le32(&r, 16));
    // Revision 0 is ACPI 1.0; 1 was never assigned (treated as 0); 2+ adds the XSDT.
    let (phys, sig) = if r[15] >= 2 {
        let x: [u8; 36] = read_arr(mem, Table::Rsdp, rsdp)?;
        let length = le32(&x, 20);
        // The extended RSDP is 36 bytes; anything past a page is not an RSDP.
        if !(36..=4096).contains(&length) {
            return Err(AcpiError::Length {
                table: Table::Rsdp,
                phys: rsdp,
                length,
            });
        }
        check_sum(mem, Table::Rsdp, rsdp, length)?;
        match le64(&x, 24) {
            0 => (rsdt, *b"RSDT"),
            xsdt => (xsdt, *b"XSDT"),
        }
    } else {
        (rsdt, *b"RSDT")
    };
    if phys == 0 {
        return Err(AcpiError::NoRootTable);
    }
    let table = Table::Sdt(sig);
    let h = sdt(mem, table, phys)?;
    if h[..4] != sig {
        return Err(AcpiError::Signature {
            table,
            phys,
            found: [h[0], h[1], h[2], h[3]],
        });
    }
    let (length, width) = (le32(&h, 4), if sig == *b"XSDT" { 8 } else { 4 });
    let body = (length - SDT_HEADER_LEN) as usize;
    if body % width != 0 {
        return Err(AcpiError::Length {
            table,
            phys,
            length,
        });
    }
    let count = body / width;
    if count > MAX_ROOT_ENTRIES {
        return Err(AcpiError::TooManyEntries { table, count });
    }
    Ok((phys, table, count))
}

/// Physical address of the first table with signature `sig` listed by the RSDP at `rsdp`
/// (through the XSDT when the RSDP is revision 2+ and gives one, else the RSDT). The root table
/// and the table found are validated (length, checksum); other tables are only read for their
/// signature. An unreadable or null entry is an error.
pub fn find_table(mem: &impl PhysRead, rsdp: u64, sig: [u8; 4]) -> Result<Option<u64>, AcpiError> {
    let (root_phys, table, count) = root(mem, rsdp)?;
    let width = if table == Table::Sdt(*b"XSDT") { 8 } else { 4 };
    for index in 0..count {
        let at = root_phys + u64::from(SDT_HEADER_LEN) + (index * width) as u64;
        let entry = if width == 8 {
            u64::from_le_bytes(read_arr(mem, table, at)?)
        } else {
            u64::from(u32::from_le_bytes(read_arr(mem, table, at)?))
        };
        if entry == 0 {
            return Err(AcpiError::NullEntry { table, index });
        }
        let found: [u8; 4] = read_arr(mem, table, entry)?;
        if found == sig {
            sdt(mem, Table::Sdt(sig), entry)?;
            return Ok(Some(entry));
        }
    }
    Ok(None)
}

/// The ECAM window of PCI segment 0 from the MCFG table.
pub fn find_mcfg(mem: &impl PhysRead, rsdp: u64) -> Result<Ecam, AcpiError> {
    let phys = find_table(mem, rsdp, *b"MCFG")?.ok_or(AcpiError::NoMcfg)?;
    let table = Table::Sdt(*b"MCFG");
    let length = le32(&read_arr::<8>(mem, table, phys)?, 4);
    // Header, 8 reserved bytes, then 16-byte allocations.
    if length < SDT_HEADER_LEN + 8 || (length - SDT_HEADER_LEN - 8) % 16 != 0 {
        return Err(AcpiError::Length {
            table,
            phys,
            length,
        });
    }
    let allocations = ((length - SDT_HEADER_LEN - 8) / 16) as usize;
    for i in 0..allocations {
        let a: [u8; 16] = read_arr(mem, table, phys + 44 + 16 * i as u64)?;
        let segment = u16::from_le_bytes([a[8], a[9]]);
        if segment == 0 {
            let (start, end) = (a[10], a[11]);
            if end < start {
                return Err(AcpiError::BusRange { start, end });
            }
            return Ok(Ecam {
                base: le64(&a, 0),
                segment,
                start_bus: start,
                end_bus: end,
            });
        }
    }
    Err(AcpiError::NoSegment0 { allocations })
}

/// The local APIC's physical address from the MADT (`APIC`), if there is a MADT.
pub fn find_lapic(mem: &impl PhysRead, rsdp: u64) -> Result<Option<u32>, AcpiError> {
    let Some(phys) = find_table(mem, rsdp, *b"APIC")? else {
        return Ok(None);
    };
    let table = Table::Sdt(*b"APIC");
    let length = le32(&read_arr::<8>(mem, table, phys)?, 4);
    if length < SDT_HEADER_LEN + 8 {
        return Err(AcpiError::Length {
            table,
            phys,
            length,
        });
    }
    Ok(Some(u32::from_le_bytes(read_arr(mem, table, phys + 36)?)))
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::string::ToString;
    use std::vec;
    use std::vec::Vec;

    /// Sparse physical memory: readable only inside the regions placed.
    #[derive(Default)]
    struct Mem(Vec<(u64, Vec<u8>)>);

    impl Mem {
        fn put(&mut self, phys: u64, bytes: Vec<u8>) {
            self.0.push((phys, bytes));
        }
    }

    impl PhysRead for Mem {
        fn read(&self, phys: u64, out: &mut [u8]) -> bool {
            self.0.iter().any(|(base, b)| {
                let Some(off) = phys.checked_sub(*base) else {
                    return false;
                };
                let Some(end) = (off as usize).checked_add(out.len()) else {
                    return false;
                };
                end <= b.len() && {
                    out.copy_from_slice(&b[off as usize..end]);
                    true
                }
            })
        }
    }

    fn fix_sum(b: &mut [u8], at: usize) {
        b[at] = 0;
        let s = b.iter().fold(0u8, |a, &x| a.wrapping_add(x));
        b[at] = s.wrapping_neg();
    }

    fn sdt(sig: &[u8; 4], body: &[u8]) -> Vec<u8> {
        let mut t = vec![0u8; 36];
        t[..4].copy_from_slice(sig);
        t[4..8].copy_from_slice(&(36 + body.len() as u32).to_le_bytes());
        t[8] = 1;
        t[10..16].copy_from_slice(b"BOCHS ");
        t.extend_from_slice(body);
        fix_sum(&mut t, 9);
        t
    }

    fn rsdp(rev: u8, rsdt: u32, xsdt: u64) -> Vec<u8> {
        let mut r = vec![0u8; if rev >= 2 { 36 } else { 20 }];
        r[..8].copy_from_slice(b"RSD PTR ");
        r[9..15].copy_from_slice(b"BOCHS ");
        r[15] = rev;
        r[16..20].copy_from_slice(&rsdt.to_le_bytes());
        fix_sum(&mut r[..20], 8);
        if rev >= 2 {
            r[20..24].copy_from_slice(&36u32.to_le_bytes());
            r[24..32].copy_from_slice(&xsdt.to_le_bytes());
            fix_sum(&mut r, 32);
        }
        r
    }

    fn mcfg(allocs: &[(u64, u16, u8, u8)]) -> Vec<u8> {
        let mut body = vec![0u8; 8];
        for &(base, seg, s, e) in allocs {
            body.extend_from_slice(&base.to_le_bytes());
            body.extend_from_slice(&seg.to_le_bytes());
            body.extend_from_slice(&[s, e, 0, 0, 0, 0]);
        }
        sdt(b"MCFG", &body)
    }

    const RSDP: u64 = 0xf_52e1;
    const RSDT: u64 = 0x7ffe_2003;
    const FACP: u64 = 0x7ffe_1001;
    const MCFG: u64 = 0x7ffe_3005;
    const APIC: u64 = 0x7ffe_4007;

    /// RSDP rev 0 -> RSDT -> [FACP, MCFG, APIC], all at odd addresses.
    fn q35() -> Mem {
        let mut m = Mem::default();
        m.put(RSDP, rsdp(0, RSDT as u32, 0));
        let entries: Vec<u8> = [FACP, MCFG, APIC]
            .iter()
            .flat_map(|&p| (p as u32).to_le_bytes())
            .collect();
        m.put(RSDT, sdt(b"RSDT", &entries));
        m.put(FACP, sdt(b"FACP", &[0xaa; 80]));
        m.put(MCFG, mcfg(&[(0xb000_0000, 0, 0, 255)]));
        let mut madt = 0xfee0_0000u32.to_le_bytes().to_vec();
        madt.extend_from_slice(&[1, 0, 0, 0, 0, 8, 0, 0, 1, 0, 0, 0]);
        m.put(APIC, sdt(b"APIC", &madt));
        m
    }

    fn replace(m: &mut Mem, phys: u64, bytes: Vec<u8>) {
        m.0.retain(|(p, _)| *p != phys);
        m.put(phys, bytes);
    }

    const Q35_ECAM: Ecam = Ecam {
        base: 0xb000_0000,
        segment: 0,
        start_bus: 0,
        end_bus: 255,
    };

    #[test]
    fn rsdt_path_at_odd_addresses() {
        let m = q35();
        assert_eq!(find_mcfg(&m, RSDP), Ok(Q35_ECAM));
        assert_eq!(find_table(&m, RSDP, *b"FACP"), Ok(Some(FACP)));
        assert_eq!(find_table(&m, RSDP, *b"HPET"), Ok(None));
        assert_eq!(find_lapic(&m, RSDP), Ok(Some(0xfee0_0000)));
        assert_eq!(Q35_ECAM.config_phys(1, 0, 0, 0x10), Some(0xb010_0010));
        assert_eq!(Q35_ECAM.config_phys(0, 0x1f, 7, 0xffc), Some(0xb00f_fffc));
        assert_eq!(Q35_ECAM.config_phys(0, 32, 0, 0), None);
        let e = Ecam {
            start_bus: 2,
            end_bus: 3,
            ..Q35_ECAM
        };
        assert_eq!(
            (e.config_phys(1, 0, 0, 0), e.config_phys(3, 0, 0, 0)),
            (None, Some(0xb030_0000))
        );
    }

    #[test]
    fn xsdt_path_and_rsdt_fallback() {
        let mut m = q35();
        let xsdt = 0x1_0000_0009u64;
        let entries: Vec<u8> = [APIC, MCFG].iter().flat_map(|p| p.to_le_bytes()).collect();
        m.put(xsdt, sdt(b"XSDT", &entries));
        // The RSDT lists only FACP: finding MCFG proves the XSDT was used.
        replace(&mut m, RSDT, sdt(b"RSDT", &(FACP as u32).to_le_bytes()));
        replace(&mut m, RSDP, rsdp(2, RSDT as u32, xsdt));
        assert_eq!(find_mcfg(&m, RSDP), Ok(Q35_ECAM));
        assert_eq!(find_table(&m, RSDP, *b"FACP"), Ok(None));
        replace(&mut m, RSDP, rsdp(2, RSDT as u32, 0));
        assert_eq!(find_table(&m, RSDP, *b"FACP"), Ok(Some(FACP)));
        assert_eq!(find_mcfg(&m, RSDP), Err(AcpiError::NoMcfg));
        assert_eq!(find_lapic(&m, RSDP), Ok(None));
        replace(&mut m, RSDP, rsdp(2, 0, 0));
        assert_eq!(find_mcfg(&m, RSDP), Err(AcpiError::NoRootTable));
    }

    #[test]
    fn bad_checksums_refused() {
        let mut m = q35();
        let mut r = rsdp(0, RSDT as u32, 0);
        r[19] ^= 1;
        replace(&mut m, RSDP, r);
        assert!(matches!(
            find_mcfg(&m, RSDP),
            Err(AcpiError::Checksum {
                table: Table::Rsdp,
                ..
            })
        ));
        let mut r = rsdp(2, RSDT as u32, 0);
        r[34] = 1; // reserved byte covered only by the extended checksum
        replace(&mut m, RSDP, r);
        assert!(matches!(
            find_mcfg(&m, RSDP),
            Err(AcpiError::Checksum {
                table: Table::Rsdp,
                ..
            })
        ));
        let mut m = q35();
        let mut t = mcfg(&[(0xb000_0000, 0, 0, 255)]);
        t[50] ^= 0x10;
        replace(&mut m, MCFG, t);
        let err = find_mcfg(&m, RSDP).unwrap_err();
        assert_eq!(
            err,
            AcpiError::Checksum {
                table: Table::Sdt(*b"MCFG"),
                phys: MCFG,
                sum: 0x10
            }
        );
        assert_eq!(
            err.to_string(),
            "MCFG at 0x7ffe3005: checksum bytes sum to 0x10, not 0"
        );
        let mut m = q35();
        let mut t = sdt(b"RSDT", &(MCFG as u32).to_le_bytes());
        t[0] = b'X';
        fix_sum(&mut t, 9);
        replace(&mut m, RSDT, t);
        assert!(matches!(
            find_mcfg(&m, RSDP),
            Err(AcpiError::Signature {
                found: [b'X', ..],
                ..
            })
        ));
        replace(&mut m, RSDP, b"RSD PTX ........................".to_vec());
        assert!(matches!(
            find_mcfg(&m, RSDP),
            Err(AcpiError::RsdpSignature { .. })
        ));
    }

    #[test]
    fn bad_lengths_refused() {
        let rsdt_len = |length| AcpiError::Length {
            table: Table::Sdt(*b"RSDT"),
            phys: RSDT,
            length,
        };
        for length in [0u32, 35, MAX_TABLE_LEN + 1, u32::MAX] {
            let mut m = q35();
            let mut t = sdt(b"RSDT", &(MCFG as u32).to_le_bytes());
            t[4..8].copy_from_slice(&length.to_le_bytes());
            fix_sum(&mut t, 9);
            replace(&mut m, RSDT, t);
            assert_eq!(
                find_mcfg(&m, RSDP),
                Err(rsdt_len(length)),
                "length {length}"
            );
        }
        // A valid table whose body is not whole 4-byte entries.
        let mut m = q35();
        replace(&mut m, RSDT, sdt(b"RSDT", &[0, 0]));
        assert_eq!(find_mcfg(&m, RSDP), Err(rsdt_len(38)));
        // Length beyond the bytes present: the checksum read fails, no panic.
        let mut m = q35();
        let mut t = mcfg(&[(0xb000_0000, 0, 0, 255)]);
        t[4..8].copy_from_slice(&4096u32.to_le_bytes());
        replace(&mut m, MCFG, t);
        assert!(matches!(
            find_mcfg(&m, RSDP),
            Err(AcpiError::Unreadable { .. })
        ));
        // MCFG whose body is not whole allocations.
        let mut m = q35();
        replace(&mut m, MCFG, sdt(b"MCFG", &[0; 12]));
        assert!(matches!(
            find_mcfg(&m, RSDP),
            Err(AcpiError::Length { length: 48, .. })
        ));
        // Too many root entries.
        let mut m = q35();
        replace(
            &mut m,
            RSDT,
            sdt(b"RSDT", &[0x11; 4 * (MAX_ROOT_ENTRIES + 1)]),
        );
        assert!(matches!(
            find_mcfg(&m, RSDP),
            Err(AcpiError::TooManyEntries { count: 257, .. })
        ));
    }

    #[test]
    fn unreadable_and_null_entries_are_errors() {
        let mut m = q35();
        let entries: Vec<u8> = [0xdead_beefu32, MCFG as u32]
            .iter()
            .flat_map(|p| p.to_le_bytes())
            .collect();
        replace(&mut m, RSDT, sdt(b"RSDT", &entries));
        assert!(matches!(
            find_mcfg(&m, RSDP),
            Err(AcpiError::Unreadable {
                phys: 0xdead_beef,
                ..
            })
        ));
        let entries: Vec<u8> = [0u32, MCFG as u32]
            .iter()
            .flat_map(|p| p.to_le_bytes())
            .collect();
        replace(&mut m, RSDT, sdt(b"RSDT", &entries));
        assert_eq!(
            find_mcfg(&m, RSDP),
            Err(AcpiError::NullEntry {
                table: Table::Sdt(*b"RSDT"),
                index: 0
            })
        );
        assert!(matches!(
            find_mcfg(&m, 0x1234),
            Err(AcpiError::Unreadable {
                table: Table::Rsdp,
                ..
            })
        ));
        assert!(matches!(
            find_mcfg(&m, u64::MAX - 3),
            Err(AcpiError::Unreadable { .. })
        ));
        let mut m = q35();
        replace(&mut m, RSDP, rsdp(0, 0xffff_fff0, 0));
        assert!(matches!(
            find_mcfg(&m, RSDP),
            Err(AcpiError::Unreadable {
                phys: 0xffff_fff0,
                ..
            })
        ));
    }

    #[test]
    fn mcfg_segment_selection() {
        let mut m = q35();
        replace(
            &mut m,
            MCFG,
            mcfg(&[(0xe000_0000, 1, 0, 63), (0xc000_0000, 0, 0x10, 0x1f)]),
        );
        let want = Ecam {
            base: 0xc000_0000,
            segment: 0,
            start_bus: 0x10,
            end_bus: 0x1f,
        };
        assert_eq!(find_mcfg(&m, RSDP), Ok(want));
        replace(&mut m, MCFG, mcfg(&[(0xe000_0000, 1, 0, 63)]));
        assert_eq!(
            find_mcfg(&m, RSDP),
            Err(AcpiError::NoSegment0 { allocations: 1 })
        );
        replace(&mut m, MCFG, mcfg(&[]));
        assert_eq!(
            find_mcfg(&m, RSDP),
            Err(AcpiError::NoSegment0 { allocations: 0 })
        );
        replace(&mut m, MCFG, mcfg(&[(0xb000_0000, 0, 9, 8)]));
        assert_eq!(
            find_mcfg(&m, RSDP),
            Err(AcpiError::BusRange { start: 9, end: 8 })
        );
        replace(&mut m, APIC, sdt(b"APIC", &[0; 4]));
        let e = find_lapic(&m, RSDP);
        assert!(matches!(e, Err(AcpiError::Length { length: 40, .. })));
    }
}
