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
mod tests {
    extern crate std;
    use super::*;
    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::string::ToString;
    use std::vec::Vec;

    /// Config space per function: 64 dwords, BAR probe semantics, RW1C status, and a log of
    /// the command register's value at each BAR write.
    #[derive(Default)]
    struct Fake {
        fns: RefCell<HashMap<Bdf, [u32; 64]>>,
        /// (bdf, dword index) -> writable mask of a BAR dword; fixed bits kept from the value.
        bar_masks: HashMap<(Bdf, usize), u32>,
        cmd_at_bar_write: RefCell<Vec<u16>>,
    }

    impl Fake {
        fn add(&mut self, bdf: Bdf, vendor: u16, device: u16, class: u32, ht: u8) {
            let mut s = [0u32; 64];
            s[0] = u32::from(vendor) | (u32::from(device) << 16);
            s[2] = class << 8;
            s[3] = u32::from(ht) << 16;
            self.fns.borrow_mut().insert(bdf, s);
        }
        fn set(&self, bdf: Bdf, off: u16, v: u32) {
            self.fns.borrow_mut().get_mut(&bdf).unwrap()[usize::from(off / 4)] = v;
        }
        fn get(&self, bdf: Bdf, off: u16) -> u32 {
            self.read32(bdf, off)
        }
        /// BAR dword `i` reading `value`, decoding `size` bytes (low part for dword i).
        fn bar(&mut self, bdf: Bdf, i: usize, value: u32, mask: u32) {
            self.set(bdf, BAR0 + 4 * i as u16, value);
            self.bar_masks.insert((bdf, i), mask);
        }
        /// The ConnectX-5 as QEMU shows it: 64-bit prefetchable 32 MiB BAR0 at 0xfc000000,
        /// caps 0x34 -> 0x60 (PCIe) -> 0x9c (MSI-X, 64 entries) -> 0.
        fn cx5(bdf: Bdf) -> Self {
            let mut f = Fake::default();
            f.add(bdf, 0x15b3, 0x1017, 0x020000, 0);
            f.bar(bdf, 0, 0xfc00_000c, !(32 << 20) + 1);
            f.bar(bdf, 1, 0, 0xffff_ffff);
            f.set(bdf, 0x04, (u32::from(STATUS_CAP_LIST) << 16) | 0x0006);
            f.set(bdf, 0x34, 0x60);
            f.set(bdf, 0x60, 0x9c00 | u32::from(CAP_ID_PCIE));
            f.set(bdf, 0x9c, 0x003f_0000 | u32::from(CAP_ID_MSIX));
            f.set(bdf, 0xa0, 0x2000);
            f.set(bdf, 0xa4, 0x3000);
            f
        }
    }

    impl ConfigAccess for Fake {
        fn read32(&self, bdf: Bdf, off: u16) -> u32 {
            assert_eq!(off % 4, 0);
            self.fns
                .borrow()
                .get(&bdf)
                .map_or(0xffff_ffff, |s| s[usize::from(off / 4)])
        }
        fn write32(&self, bdf: Bdf, off: u16, v: u32) {
            assert_eq!(off % 4, 0);
            let i = usize::from(off / 4);
            let old = self.read32(bdf, off);
            let bar = (4..10)
                .contains(&i)
                .then(|| self.bar_masks.get(&(bdf, i - 4)))
                .flatten();
            let new = if let Some(&m) = bar {
                let cmd = self.read16(bdf, COMMAND);
                self.cmd_at_bar_write.borrow_mut().push(cmd);
                (v & m) | (old & !m)
            } else if i == 1 {
                (v & 0xffff) | (old & 0xffff_0000 & !(v & 0xffff_0000))
            } else {
                v
            };
            self.set(bdf, off, new);
        }
    }

    const CX5: Bdf = Bdf::new(0x01, 0x00, 0);

    #[test]
    fn bdf_display_and_addresses() {
        let b = Bdf::new(0x3a, 0x1f, 7);
        assert_eq!(b.to_string(), "3a:1f.7");
        assert_eq!(CX5.to_string(), "01:00.0");
        assert_eq!(
            ecam_offset(b, 0x104),
            (0x3a << 20) | (0x1f << 15) | (7 << 12) | 0x104
        );
        assert_eq!(
            cf8_address(b, 0x9e),
            0x8000_0000 | (0x3a << 16) | (0x1f << 11) | (7 << 8) | 0x9c
        );
    }

    #[test]
    fn narrow_reads() {
        let f = Fake::cx5(CX5);
        assert_eq!(f.read16(CX5, 0), 0x15b3);
        assert_eq!(f.read16(CX5, 2), 0x1017);
        assert_eq!(f.read8(CX5, 0x0b), 0x02);
        assert_eq!(f.read8(CX5, 0x9d), 0x00);
        assert_eq!(f.read16(CX5, 0x9e), 0x003f);
    }

    #[test]
    fn cx5_bar0_is_64bit_prefetchable_32mib_and_restored() {
        let f = Fake::cx5(CX5);
        let bar = size_bar(&f, CX5, 0).unwrap();
        assert_eq!(
            bar,
            Bar {
                base: 0xfc00_0000,
                size: 32 << 20,
                is_64: true,
                prefetchable: true
            }
        );
        assert_eq!(f.get(CX5, 0x10), 0xfc00_000c);
        assert_eq!(f.get(CX5, 0x14), 0);
        // Memory decode was off for each of the 4 BAR writes, and is back on.
        let log = f.cmd_at_bar_write.borrow();
        assert_eq!(log.len(), 4);
        assert!(log
            .iter()
            .all(|c| c & CMD_MEMORY == 0 && c & CMD_BUS_MASTER != 0));
        assert_eq!(
            f.get(CX5, 0x04),
            (u32::from(STATUS_CAP_LIST) << 16) | 0x0006
        );
    }

    #[test]
    fn bar_32bit_high_address_and_errors() {
        let mut f = Fake::cx5(CX5);
        f.bar(CX5, 2, 0xfeb0_0000, !0xfff); // 4 KiB, 32-bit, non-prefetchable
        f.bar(CX5, 3, 0x0000_c001, !0xff); // I/O
        f.bar(CX5, 4, 0, 0); // unimplemented
        f.bar(CX5, 5, 0x0000_0004, 0xffff_fff0); // 64-bit in the last slot
        let bar = size_bar(&f, CX5, 2).unwrap();
        assert_eq!(
            bar,
            Bar {
                base: 0xfeb0_0000,
                size: 0x1000,
                is_64: false,
                prefetchable: false
            }
        );
        assert_eq!(f.get(CX5, 0x18), 0xfeb0_0000);
        assert_eq!(size_bar(&f, CX5, 3), Err(PciError::IoBar(CX5, 3)));
        assert_eq!(f.get(CX5, 0x1c), 0xc001); // untouched
        assert_eq!(
            size_bar(&f, CX5, 4),
            Err(PciError::BarNotImplemented(CX5, 4))
        );
        assert_eq!(size_bar(&f, CX5, 5), Err(PciError::BarIndex(CX5, 5)));
        assert_eq!(size_bar(&f, CX5, 6), Err(PciError::BarIndex(CX5, 6)));
        f.set(CX5, 0x18, 0x2); // type 0b01: reserved
        assert!(matches!(
            size_bar(&f, CX5, 2),
            Err(PciError::BarType { index: 2, .. })
        ));
        f.bar(CX5, 2, 0, 0xf0f0_0000);
        assert!(matches!(
            size_bar(&f, CX5, 2),
            Err(PciError::BarMask {
                mask: 0xf0f0_0000,
                ..
            })
        ));
        assert_eq!(
            size_bar(&f, Bdf::new(9, 0, 0), 0),
            Err(PciError::NoDevice(Bdf::new(9, 0, 0)))
        );
        let e = size_bar(&f, CX5, 3).unwrap_err().to_string();
        assert!(
            e.contains("01:00.0") && e.contains("BAR3") && e.contains("I/O"),
            "{e}"
        );
    }

    #[test]
    fn capability_walk_finds_msix() {
        let f = Fake::cx5(CX5);
        let caps: Vec<_> = capabilities(&f, CX5).map(Result::unwrap).collect();
        assert_eq!(
            caps,
            [
                Capability {
                    id: 0x10,
                    offset: 0x60
                },
                Capability {
                    id: 0x11,
                    offset: 0x9c
                }
            ]
        );
        assert_eq!(find_cap(&f, CX5, CAP_ID_PCIE), Ok(Some(0x60)));
        assert_eq!(find_cap(&f, CX5, 0x05), Ok(None));
        let m = msix(&f, CX5).unwrap();
        let want = MsixInfo {
            cap: 0x9c,
            table_size: 64,
            enabled: false,
            function_masked: false,
            table_bir: 0,
            table_offset: 0x2000,
            pba_bir: 0,
            pba_offset: 0x3000,
        };
        assert_eq!(m, want);
        assert_eq!((m.table_len(), m.pba_len()), (1024, 8));
        assert_eq!(m.check_bar0(32 << 20), Ok(()));
        assert!(matches!(
            m.check_bar0(0x2200),
            Err(PciError::MsixOutsideBar {
                part: MsixPart::Table,
                ..
            })
        ));
        f.set(CX5, 0xa4, 0x3002);
        let m = msix(&f, CX5).unwrap();
        assert_eq!(
            m.check_bar0(32 << 20),
            Err(PciError::MsixNotInBar0 {
                part: MsixPart::Pba,
                bir: 2
            })
        );
        f.set(CX5, 0xa0, 0x2007);
        assert_eq!(
            msix(&f, CX5),
            Err(PciError::MsixBir {
                bdf: CX5,
                part: MsixPart::Table,
                bir: 7
            })
        );
    }

    #[test]
    fn no_cap_list_or_no_msix() {
        let f = Fake::cx5(CX5);
        f.set(CX5, 0x9c, 0x0005); // MSI instead, end of list
        assert_eq!(msix(&f, CX5), Err(PciError::NoMsix(CX5)));
        f.set(CX5, 0x04, 0x0006); // status bit 4 clear: the pointer is ignored
        assert_eq!(capabilities(&f, CX5).count(), 0);
        assert_eq!(find_cap(&f, CX5, CAP_ID_PCIE), Ok(None));
    }

    #[test]
    fn looping_or_bad_pointers_are_errors() {
        let f = Fake::cx5(CX5);
        f.set(CX5, 0x9c, 0x6005); // 0x60 -> 0x9c -> 0x60 ...
        assert_eq!(find_cap(&f, CX5, CAP_ID_MSIX), Err(PciError::CapLoop(CX5)));
        assert_eq!(capabilities(&f, CX5).count(), MAX_CAPS + 1);
        f.set(CX5, 0x9c, 0x6311); // 0x63 masks to 0x60: still a loop, but MSI-X comes first
        assert_eq!(msix(&f, CX5).map(|m| m.cap), Ok(0x9c));
        assert_eq!(find_cap(&f, CX5, 0x05), Err(PciError::CapLoop(CX5)));
        f.set(CX5, 0x60, 0x9c10 | 0x1f0000);
        f.set(CX5, 0x9c, 0x0c05); // points into the header
        assert_eq!(
            find_cap(&f, CX5, CAP_ID_MSIX),
            Err(PciError::CapPointer {
                bdf: CX5,
                at: 0x9d,
                ptr: 0x0c
            })
        );
        f.set(CX5, 0x34, 0x3f);
        assert_eq!(
            find_cap(&f, CX5, CAP_ID_MSIX),
            Err(PciError::CapPointer {
                bdf: CX5,
                at: 0x34,
                ptr: 0x3c
            })
        );
        f.set(CX5, 0x34, 0xf8);
        f.set(CX5, 0xf8, 0x11);
        assert_eq!(
            msix(&f, CX5),
            Err(PciError::CapTruncated {
                bdf: CX5,
                id: 0x11,
                offset: 0xf8
            })
        );
    }

    #[test]
    fn enable_msix_and_bus_master_leave_status_alone() {
        let f = Fake::cx5(CX5);
        f.set(CX5, 0x04, (0x8000 | u32::from(STATUS_CAP_LIST)) << 16); // a pending RW1C error bit
        enable_bus_master(&f, CX5);
        assert_eq!(f.get(CX5, 0x04) & 0xffff, 0x0406);
        assert_eq!(
            f.get(CX5, 0x04) >> 16,
            0x8010,
            "status bits must not be cleared"
        );
        let m = msix(&f, CX5).unwrap();
        set_msix_control(&f, CX5, &m, true, true);
        assert_eq!(f.get(CX5, 0x9c), 0xc03f_0011);
        let m = msix(&f, CX5).unwrap();
        assert!(m.enabled && m.function_masked);
        enable_msix(&f, CX5, &m);
        assert_eq!(f.get(CX5, 0x9c), 0x803f_0011);
    }

    #[test]
    fn msix_message_and_entry_layout() {
        assert_eq!(msix_message(0, 0x30), (0xfee0_0000, 0x30));
        assert_eq!(msix_message(3, 0xff), (0xfee0_3000, 0xff));
        let e = MsixEntry::new(0xff, 0x41);
        assert_eq!(e.dwords(), [0xfeef_f000, 0, 0x41, 0]);
        assert_eq!(
            MsixEntry { masked: true, ..e }.dwords()[3],
            MsixEntry::MASKED
        );
        assert_eq!(MsixEntry::offset(3), 48);
        assert_eq!(
            [
                MsixEntry::ADDR_LO,
                MsixEntry::ADDR_HI,
                MsixEntry::DATA,
                MsixEntry::VECTOR_CTRL
            ],
            [0, 4, 8, 12]
        );
    }

    #[test]
    fn enumeration_follows_multifunction_bit() {
        let mut f = Fake::default();
        f.add(Bdf::new(0, 0, 0), 0x8086, 0x29c0, 0x060000, 0x00); // host bridge
        f.add(Bdf::new(0, 0, 3), 0x1234, 0x0001, 0, 0); // hidden: function 0 not multifunction
        f.add(Bdf::new(0, 0x1f, 0), 0x8086, 0x2918, 0x060100, 0x80); // multifunction
        f.add(Bdf::new(0, 0x1f, 2), 0x8086, 0x2922, 0x010601, 0x00);
        f.add(Bdf::new(0, 0x1f, 3), 0x8086, 0x2930, 0x0c0500, 0x00);
        f.add(Bdf::new(1, 0, 0), 0x15b3, 0x1017, 0x020000, 0x00);
        f.add(Bdf::new(1, 0, 1), 0x15b3, 0x1018, 0x020000, 0x00); // hidden too
        f.add(Bdf::new(0xff, 0x1f, 0), 0x1af4, 0x1041, 0x020000, 0x00);
        let mut out = heapless::Vec::<Function, 8>::new();
        assert_eq!(enumerate(&f, &mut out), 6);
        let bdfs: Vec<_> = out.iter().map(|f| f.bdf.to_string()).collect();
        assert_eq!(
            bdfs,
            ["00:00.0", "00:1f.0", "00:1f.2", "00:1f.3", "01:00.0", "ff:1f.0"]
        );
        assert_eq!(
            out[4],
            Function {
                bdf: Bdf::new(1, 0, 0),
                vendor: 0x15b3,
                device: 0x1017,
                class: 0x020000,
                header_type: 0
            }
        );
        let mut small = heapless::Vec::<Function, 2>::new();
        assert_eq!(enumerate(&f, &mut small), 6);
        assert_eq!(small.len(), 2);
    }
}
