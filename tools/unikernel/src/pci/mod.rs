//! PCI configuration space the bare-metal way: enumeration, BAR sizing, the capability list and
//! MSI-X, all over [`ConfigAccess`] so the real accessors (port I/O at 0xCF8/0xCFC or an ECAM
//! window, both `unsafe`, written elsewhere) plug in and tests run against a fake.

use core::fmt;

/// Offset of the vendor ID (u16); 0xffff means no function answers.
pub const VENDOR_ID: u16 = 0x00;
/// Offset of the command register (u16, low half of the dword at 0x04).
pub const COMMAND: u16 = 0x04;
/// Offset of the status register (u16, high half of the dword at 0x04; RW1C bits).
pub const STATUS: u16 = 0x06;
/// Offset of the header type byte (bit 7 = multifunction).
pub const HEADER_TYPE: u16 = 0x0e;
/// Offset of BAR0; BAR n is at `BAR0 + 4 * n`.
pub const BAR0: u16 = 0x10;
/// Offset of the capability list pointer.
pub const CAP_PTR: u16 = 0x34;
/// Command: I/O space decode.
pub const CMD_IO: u16 = 1 << 0;
/// Command: memory space decode.
pub const CMD_MEMORY: u16 = 1 << 1;
/// Command: bus master (the function may issue DMA and MSI writes).
pub const CMD_BUS_MASTER: u16 = 1 << 2;
/// Command: legacy INTx interrupt disable.
pub const CMD_INTX_DISABLE: u16 = 1 << 10;
/// Status: a capability list is present.
pub const STATUS_CAP_LIST: u16 = 1 << 4;
/// Capability ID of PCI Express.
pub const CAP_ID_PCIE: u8 = 0x10;
/// Capability ID of MSI-X.
pub const CAP_ID_MSIX: u8 = 0x11;
/// At most this many capabilities fit in 0x40..0x100, so a longer walk is a loop.
pub const MAX_CAPS: usize = 48;

/// A bus/device/function address (segment 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Bdf {
    /// Bus number.
    pub bus: u8,
    /// Device number, 0..32.
    pub dev: u8,
    /// Function number, 0..8.
    pub func: u8,
}

impl Bdf {
    /// The function `bus:dev.func`.
    pub const fn new(bus: u8, dev: u8, func: u8) -> Self {
        Self { bus, dev, func }
    }
}

impl fmt::Display for Bdf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02x}:{:02x}.{:x}", self.bus, self.dev, self.func)
    }
}

/// Dword access to configuration space. `off` is dword aligned for the required methods.
pub trait ConfigAccess {
    /// Read the dword at `off` (a multiple of 4) of `bdf`'s configuration space.
    fn read32(&self, bdf: Bdf, off: u16) -> u32;
    /// Write the dword at `off` (a multiple of 4) of `bdf`'s configuration space.
    fn write32(&self, bdf: Bdf, off: u16, v: u32);
    /// Read the u16 at `off` (even) through the dword that contains it.
    fn read16(&self, bdf: Bdf, off: u16) -> u16 {
        (self.read32(bdf, off & !3) >> ((off & 2) * 8)) as u16
    }
    /// Read the byte at `off` through the dword that contains it.
    fn read8(&self, bdf: Bdf, off: u16) -> u8 {
        (self.read32(bdf, off & !3) >> ((off & 3) * 8)) as u8
    }
}

/// Byte offset of `off` of `bdf` inside an ECAM window (the window maps bus 0 at offset 0).
pub fn ecam_offset(bdf: Bdf, off: u16) -> u64 {
    (u64::from(bdf.bus) << 20)
        | (u64::from(bdf.dev & 0x1f) << 15)
        | (u64::from(bdf.func & 7) << 12)
        | u64::from(off & 0xfff)
}

/// The value written to port 0xCF8 to reach the dword containing `off` (legacy mechanism #1,
/// first 256 bytes only).
pub fn cf8_address(bdf: Bdf, off: u16) -> u32 {
    0x8000_0000
        | (u32::from(bdf.bus) << 16)
        | (u32::from(bdf.dev & 0x1f) << 11)
        | (u32::from(bdf.func & 7) << 8)
        | u32::from(off & 0xfc)
}

/// Which MSI-X structure an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MsixPart {
    /// The vector table.
    Table,
    /// The pending-bit array.
    Pba,
}

/// What went wrong, and where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PciError {
    /// The vendor ID reads 0xffff: nothing answers at this address.
    NoDevice(Bdf),
    /// Function `.0`'s header type `.1` (multifunction bit masked) is neither 0 nor 1.
    UnsupportedHeader(Bdf, u8),
    /// Function `.0` has no BAR `.1`: beyond the header's BARs (6 for type 0, 2 for type 1), or
    /// a 64-bit BAR in the last slot with no room for its high half.
    BarIndex(Bdf, u8),
    /// BAR `.1` of function `.0` decodes I/O space, not memory.
    IoBar(Bdf, u8),
    /// The memory BAR's type bits (2:1) are a reserved encoding.
    BarType {
        /// The function.
        bdf: Bdf,
        /// The BAR.
        index: u8,
        /// The BAR's original low dword.
        raw: u32,
    },
    /// BAR `.1` of function `.0` is not implemented (the all-ones probe reads back zero).
    BarNotImplemented(Bdf, u8),
    /// The probe's address mask is not contiguous ones followed by zeros.
    BarMask {
        /// The function.
        bdf: Bdf,
        /// The BAR.
        index: u8,
        /// The mask read back (type bits cleared).
        mask: u64,
    },
    /// A capability pointer (read at `at`) is below 0x40 or leaves no room for the capability.
    CapPointer {
        /// The function.
        bdf: Bdf,
        /// Where the pointer was read.
        at: u16,
        /// The pointer, low 2 bits masked.
        ptr: u8,
    },
    /// A capability is too close to 0x100 to hold its registers.
    CapTruncated {
        /// The function.
        bdf: Bdf,
        /// Capability ID.
        id: u8,
        /// Its offset.
        offset: u8,
    },
    /// The capability list is longer than [`MAX_CAPS`]: it loops.
    CapLoop(Bdf),
    /// The function has no MSI-X capability.
    NoMsix(Bdf),
    /// An MSI-X BIR is 6 or 7 (reserved).
    MsixBir {
        /// The function.
        bdf: Bdf,
        /// Table or PBA.
        part: MsixPart,
        /// The BIR found.
        bir: u8,
    },
    /// An MSI-X structure is not in BAR0 (the only BAR the driver maps).
    MsixNotInBar0 {
        /// Table or PBA.
        part: MsixPart,
        /// The BIR found.
        bir: u8,
    },
    /// An MSI-X structure runs past the end of its BAR.
    MsixOutsideBar {
        /// Table or PBA.
        part: MsixPart,
        /// Its offset into the BAR.
        offset: u32,
        /// Its length in bytes.
        len: u64,
        /// The BAR's size.
        bar_size: u64,
    },
}

impl fmt::Display for MsixPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MsixPart::Table => "MSI-X table",
            MsixPart::Pba => "MSI-X PBA",
        })
    }
}

impl fmt::Display for PciError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            PciError::NoDevice(b) => write!(f, "{b}: no device (vendor ID 0xffff)"),
            PciError::UnsupportedHeader(bdf, header_type) => {
                write!(f, "{bdf}: unsupported header type {header_type:#x}")
            }
            PciError::BarIndex(bdf, index) => write!(f, "{bdf}: no BAR{index} in this header"),
            PciError::IoBar(bdf, index) => write!(f, "{bdf}: BAR{index} is I/O, not memory"),
            PciError::BarType { bdf, index, raw } => {
                write!(
                    f,
                    "{bdf}: BAR{index} has a reserved memory type ({raw:#010x})"
                )
            }
            PciError::BarNotImplemented(bdf, index) => {
                write!(
                    f,
                    "{bdf}: BAR{index} is not implemented (probe read back 0)"
                )
            }
            PciError::BarMask { bdf, index, mask } => {
                write!(
                    f,
                    "{bdf}: BAR{index} probe mask {mask:#x} is not a power-of-two size"
                )
            }
            PciError::CapPointer { bdf, at, ptr } => {
                write!(
                    f,
                    "{bdf}: capability pointer {ptr:#x} read at {at:#x} is out of range"
                )
            }
            PciError::CapTruncated { bdf, id, offset } => {
                write!(
                    f,
                    "{bdf}: capability {id:#x} at {offset:#x} runs past offset 0x100"
                )
            }
            PciError::CapLoop(b) => write!(f, "{b}: capability list loops (> {MAX_CAPS} entries)"),
            PciError::NoMsix(b) => write!(f, "{b}: no MSI-X capability"),
            PciError::MsixBir { bdf, part, bir } => {
                write!(f, "{bdf}: {part} BIR {bir} is reserved")
            }
            PciError::MsixNotInBar0 { part, bir } => write!(f, "{part} is in BAR{bir}, not BAR0"),
            PciError::MsixOutsideBar {
                part,
                offset,
                len,
                bar_size,
            } => write!(
                f,
                "{part} at {offset:#x} (+{len:#x}) runs past the BAR's {bar_size:#x} bytes"
            ),
        }
    }
}

/// One function found by [`enumerate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Function {
    /// Its address.
    pub bdf: Bdf,
    /// Vendor ID (0x15b3 for Mellanox).
    pub vendor: u16,
    /// Device ID (0x1017 for ConnectX-5).
    pub device: u16,
    /// 24-bit class code: class, subclass, programming interface (0x020000 = Ethernet).
    pub class: u32,
    /// Header type byte, multifunction bit included.
    pub header_type: u8,
}

/// Brute-force scan of all 256 buses x 32 devices: function 0 always, functions 1..8 only when
/// function 0's header type has the multifunction bit. `out` is cleared first and keeps the first
/// `N` functions found; the return value is how many were found in all (more than `out.len()`
/// means `out` was too small).
pub fn enumerate<C: ConfigAccess + ?Sized, const N: usize>(
    cfg: &C,
    out: &mut heapless::Vec<Function, N>,
) -> usize {
    out.clear();
    let mut found = 0;
    for bus in 0..=255u8 {
        for dev in 0..32u8 {
            for func in 0..8u8 {
                let bdf = Bdf::new(bus, dev, func);
                let id = cfg.read32(bdf, VENDOR_ID);
                if id & 0xffff == 0xffff {
                    if func == 0 {
                        break;
                    }
                    continue;
                }
                let header_type = cfg.read8(bdf, HEADER_TYPE);
                let f = Function {
                    bdf,
                    vendor: id as u16,
                    device: (id >> 16) as u16,
                    class: cfg.read32(bdf, 0x08) >> 8,
                    header_type,
                };
                found += 1;
                let _ = out.push(f); // full: counted but not kept, as documented
                if func == 0 && header_type & 0x80 == 0 {
                    break;
                }
            }
        }
    }
    found
}

/// A memory BAR as sized by [`size_bar`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bar {
    /// Physical base address as programmed by firmware.
    pub base: u64,
    /// Size in bytes (a power of two).
    pub size: u64,
    /// 64-bit BAR (the next BAR slot holds the high half).
    pub is_64: bool,
    /// Prefetchable memory.
    pub prefetchable: bool,
}

/// Size memory BAR `index` by the all-ones probe, with memory decode turned off meanwhile so the
/// half-written BAR never decodes. The BAR(s) and command register are restored afterwards.
pub fn size_bar<C: ConfigAccess + ?Sized>(cfg: &C, bdf: Bdf, index: u8) -> Result<Bar, PciError> {
    if cfg.read16(bdf, VENDOR_ID) == 0xffff {
        return Err(PciError::NoDevice(bdf));
    }
    let nbars = match cfg.read8(bdf, HEADER_TYPE) & 0x7f {
        0 => 6,
        1 => 2,
        header_type => return Err(PciError::UnsupportedHeader(bdf, header_type)),
    };
    if index >= nbars {
        return Err(PciError::BarIndex(bdf, index));
    }
    let off = BAR0 + 4 * u16::from(index);
    let lo = cfg.read32(bdf, off);
    if lo & 1 != 0 {
        return Err(PciError::IoBar(bdf, index));
    }
    let is_64 = match (lo >> 1) & 3 {
        0b00 => false,
        0b10 => true,
        _ => {
            return Err(PciError::BarType {
                bdf,
                index,
                raw: lo,
            })
        }
    };
    if is_64 && index + 1 >= nbars {
        return Err(PciError::BarIndex(bdf, index));
    }
    let cmd = cfg.read16(bdf, COMMAND);
    // Upper half 0: status bits are write-1-to-clear.
    cfg.write32(bdf, COMMAND, u32::from(cmd & !CMD_MEMORY));
    cfg.write32(bdf, off, 0xffff_ffff);
    let mask_lo = cfg.read32(bdf, off) & !0xf;
    cfg.write32(bdf, off, lo);
    let (hi, mask_hi) = if is_64 {
        let hi = cfg.read32(bdf, off + 4);
        cfg.write32(bdf, off + 4, 0xffff_ffff);
        let mask_hi = cfg.read32(bdf, off + 4);
        cfg.write32(bdf, off + 4, hi);
        (hi, mask_hi)
    } else {
        (0, 0xffff_ffff) // a 32-bit BAR's size is computed within 32 bits
    };
    cfg.write32(bdf, COMMAND, u32::from(cmd));

    if mask_lo == 0 && (!is_64 || mask_hi == 0) {
        return Err(PciError::BarNotImplemented(bdf, index));
    }
    let mask = (u64::from(mask_hi) << 32) | u64::from(mask_lo);
    let size = (!mask).wrapping_add(1);
    if !size.is_power_of_two() {
        let mask = if is_64 { mask } else { u64::from(mask_lo) };
        return Err(PciError::BarMask { bdf, index, mask });
    }
    Ok(Bar {
        base: (u64::from(hi) << 32) | u64::from(lo & !0xf),
        size,
        is_64,
        prefetchable: lo & 0x8 != 0,
    })
}

/// One entry of the capability list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capability {
    /// Capability ID.
    pub id: u8,
    /// Its offset in configuration space.
    pub offset: u8,
}

/// Iterator over a function's capability list (see [`capabilities`]). After an error it ends.
#[derive(Debug)]
pub struct Capabilities<'a, C: ?Sized> {
    cfg: &'a C,
    bdf: Bdf,
    at: u16,
    next: u8,
    steps: usize,
}

/// Walk `bdf`'s capability list: empty when status bit 4 is clear. Pointers have their low 2
/// bits masked; a pointer below 0x40 or a list of more than [`MAX_CAPS`] entries yields one error.
pub fn capabilities<C: ConfigAccess + ?Sized>(cfg: &C, bdf: Bdf) -> Capabilities<'_, C> {
    let next = if cfg.read16(bdf, STATUS) & STATUS_CAP_LIST != 0 {
        cfg.read8(bdf, CAP_PTR) & 0xfc
    } else {
        0
    };
    Capabilities {
        cfg,
        bdf,
        at: CAP_PTR,
        next,
        steps: 0,
    }
}

impl<C: ConfigAccess + ?Sized> Iterator for Capabilities<'_, C> {
    type Item = Result<Capability, PciError>;

    fn next(&mut self) -> Option<Self::Item> {
        let (bdf, ptr) = (self.bdf, self.next);
        if ptr == 0 {
            return None;
        }
        self.next = 0; // every error below ends the walk
        if ptr < 0x40 {
            return Some(Err(PciError::CapPointer {
                bdf,
                at: self.at,
                ptr,
            }));
        }
        self.steps += 1;
        if self.steps > MAX_CAPS {
            return Some(Err(PciError::CapLoop(bdf)));
        }
        let off = u16::from(ptr);
        let head = self.cfg.read16(bdf, off);
        self.at = off + 1;
        self.next = (head >> 8) as u8 & 0xfc;
        Some(Ok(Capability {
            id: head as u8,
            offset: ptr,
        }))
    }
}

/// Offset of the first capability with ID `id`, if any.
pub fn find_cap<C: ConfigAccess + ?Sized>(
    cfg: &C,
    bdf: Bdf,
    id: u8,
) -> Result<Option<u8>, PciError> {
    for cap in capabilities(cfg, bdf) {
        let cap = cap?;
        if cap.id == id {
            return Ok(Some(cap.offset));
        }
    }
    Ok(None)
}

/// A function's MSI-X capability as read by [`msix`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MsixInfo {
    /// Offset of the capability.
    pub cap: u8,
    /// Number of table entries (1..=2048).
    pub table_size: u16,
    /// MSI-X enable bit as read.
    pub enabled: bool,
    /// Function mask bit as read.
    pub function_masked: bool,
    /// BAR holding the table.
    pub table_bir: u8,
    /// Table offset into that BAR (8-byte aligned).
    pub table_offset: u32,
    /// BAR holding the pending-bit array.
    pub pba_bir: u8,
    /// PBA offset into that BAR.
    pub pba_offset: u32,
}

impl MsixInfo {
    /// Bytes of the vector table.
    pub fn table_len(&self) -> u64 {
        u64::from(self.table_size) * MsixEntry::SIZE as u64
    }

    /// Bytes of the PBA (one bit per vector, in qwords).
    pub fn pba_len(&self) -> u64 {
        u64::from(self.table_size).div_ceil(64) * 8
    }

    /// Check that table and PBA both lie in BAR0 of `bar0_size` bytes.
    pub fn check_bar0(&self, bar0_size: u64) -> Result<(), PciError> {
        let parts = [
            (
                MsixPart::Table,
                self.table_bir,
                self.table_offset,
                self.table_len(),
            ),
            (MsixPart::Pba, self.pba_bir, self.pba_offset, self.pba_len()),
        ];
        for (part, bir, offset, len) in parts {
            if bir != 0 {
                return Err(PciError::MsixNotInBar0 { part, bir });
            }
            if u64::from(offset) + len > bar0_size {
                return Err(PciError::MsixOutsideBar {
                    part,
                    offset,
                    len,
                    bar_size: bar0_size,
                });
            }
        }
        Ok(())
    }
}

/// Read `bdf`'s MSI-X capability (ID 0x11).
pub fn msix<C: ConfigAccess + ?Sized>(cfg: &C, bdf: Bdf) -> Result<MsixInfo, PciError> {
    let cap = find_cap(cfg, bdf, CAP_ID_MSIX)?.ok_or(PciError::NoMsix(bdf))?;
    if cap > 0xf4 {
        return Err(PciError::CapTruncated {
            bdf,
            id: CAP_ID_MSIX,
            offset: cap,
        });
    }
    let off = u16::from(cap);
    let ctl = cfg.read16(bdf, off + 2);
    let table = cfg.read32(bdf, off + 4);
    let pba = cfg.read32(bdf, off + 8);
    for (part, dword) in [(MsixPart::Table, table), (MsixPart::Pba, pba)] {
        let bir = (dword & 7) as u8;
        if bir > 5 {
            return Err(PciError::MsixBir { bdf, part, bir });
        }
    }
    Ok(MsixInfo {
        cap,
        table_size: (ctl & 0x7ff) + 1,
        enabled: ctl & (1 << 15) != 0,
        function_masked: ctl & (1 << 14) != 0,
        table_bir: (table & 7) as u8,
        table_offset: table & !7,
        pba_bir: (pba & 7) as u8,
        pba_offset: pba & !7,
    })
}

/// Set MSI-X enable and function mask as given, by a read-modify-write of the dword at the
/// capability whose upper 16 bits are message control (the lower half, ID and next pointer, is
/// read-only and written back unchanged).
pub fn set_msix_control<C: ConfigAccess + ?Sized>(
    cfg: &C,
    bdf: Bdf,
    info: &MsixInfo,
    enable: bool,
    function_mask: bool,
) {
    let off = u16::from(info.cap);
    let dword = cfg.read32(bdf, off);
    let mut ctl = (dword >> 16) as u16 & !((1 << 15) | (1 << 14));
    if enable {
        ctl |= 1 << 15;
    }
    if function_mask {
        ctl |= 1 << 14;
    }
    cfg.write32(bdf, off, (dword & 0xffff) | (u32::from(ctl) << 16));
}

/// Enable MSI-X and unmask the function (program the table first).
pub fn enable_msix<C: ConfigAccess + ?Sized>(cfg: &C, bdf: Bdf, info: &MsixInfo) {
    set_msix_control(cfg, bdf, info, true, false);
}

/// Turn on memory decode, bus mastering and INTx disable, leaving the RW1C status bits alone.
pub fn enable_bus_master<C: ConfigAccess + ?Sized>(cfg: &C, bdf: Bdf) {
    let cmd = cfg.read16(bdf, COMMAND) | CMD_MEMORY | CMD_BUS_MASTER | CMD_INTX_DISABLE;
    cfg.write32(bdf, COMMAND, u32::from(cmd));
}

/// The x86 MSI message for fixed delivery, edge triggered, physical destination `apic_id`:
/// `(address, data)`.
pub fn msix_message(apic_id: u8, vector: u8) -> (u64, u32) {
    (0xfee0_0000 | (u64::from(apic_id) << 12), u32::from(vector))
}

/// One MSI-X table entry (16 bytes in the BAR) and its layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MsixEntry {
    /// Message address.
    pub addr: u64,
    /// Message data.
    pub data: u32,
    /// Vector control bit 0: masked.
    pub masked: bool,
}

impl MsixEntry {
    /// Bytes per entry.
    pub const SIZE: usize = 16;
    /// Offset of the low address dword.
    pub const ADDR_LO: usize = 0;
    /// Offset of the high address dword.
    pub const ADDR_HI: usize = 4;
    /// Offset of the data dword.
    pub const DATA: usize = 8;
    /// Offset of the vector control dword.
    pub const VECTOR_CTRL: usize = 12;
    /// Vector control: entry masked.
    pub const MASKED: u32 = 1;

    /// An unmasked entry delivering `vector` to `apic_id` (see [`msix_message`]).
    pub fn new(apic_id: u8, vector: u8) -> Self {
        let (addr, data) = msix_message(apic_id, vector);
        Self {
            addr,
            data,
            masked: false,
        }
    }

    /// Offset of entry `index` from the start of the table.
    pub fn offset(index: u16) -> usize {
        usize::from(index) * Self::SIZE
    }

    /// The four dwords to store at `ADDR_LO`, `ADDR_HI`, `DATA`, `VECTOR_CTRL` (in that order;
    /// write the vector control last when unmasking).
    pub fn dwords(&self) -> [u32; 4] {
        let ctrl = if self.masked { Self::MASKED } else { 0 };
        [self.addr as u32, (self.addr >> 32) as u32, self.data, ctrl]
    }
}

#[cfg(test)]
mod tests;
