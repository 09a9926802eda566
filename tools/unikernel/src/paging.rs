//! The image's address space, as data: which 2 MiB page gets which memory type, and the bits
//! that say so in an x86-64 page-directory entry. `metal` writes the tables; this module only
//! computes them, so the rules are tested on the host.
//!
//! * 0 .. 4 GiB is identity-mapped: a 2 MiB page that holds any RAM (of the firmware's memory
//!   map) is write-back; every other page — the PCI hole with the BARs, ECAM, the local APIC,
//!   the I/O APIC — is uncached.
//! * A BAR above 4 GiB is identity-mapped uncached too, from page directories taken as needed.
//! * Each NIC's BAR0 has a **write-combining alias** at [`wc_alias`]: the BlueFlame copies go
//!   through it (the driver's `Platform::uar_write_combining`), everything else through the
//!   uncached identity mapping.
//!
//! Memory types come from the PAT (Intel SDM vol. 3, 11.12): the image programs
//! `IA32_PAT` with [`PAT_VALUE`], whose entry 1 is write-combining; a 2 MiB entry selects
//! entry `PAT*4 + PCD*2 + PWT` (PAT is bit 12 in a 2 MiB entry).

/// IA32_PAT: entry 0 WB (06), 1 **WC (01)**, 2 UC- (07), 3 UC (00), then the power-on
/// defaults WB, WT, UC-, UC for entries 4..7.
pub const PAT_VALUE: u64 = 0x0007_0406_0007_0106;

/// A page's memory type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemType {
    /// Write-back: RAM, the DMA arenas (x86 DMA is cache-coherent).
    WriteBack,
    /// Write-combining: the BlueFlame alias of BAR0.
    WriteCombining,
    /// Strong uncacheable: device registers.
    Uncached,
}

/// Present.
pub const P: u64 = 1;
/// Writable.
pub const RW: u64 = 1 << 1;
/// Page-level write-through (PAT index bit 0).
pub const PWT: u64 = 1 << 3;
/// Page-level cache disable (PAT index bit 1).
pub const PCD: u64 = 1 << 4;
/// Page size: a 2 MiB page in a page directory.
pub const PS: u64 = 1 << 7;
/// No-execute (EFER.NXE must be set for it to be honoured; the image leaves it clear).
pub const NX: u64 = 1 << 63;
/// 2 MiB.
pub const PAGE_2M: u64 = 2 << 20;
/// Physical address bits an entry holds (bits 51..12).
const ADDR_MASK: u64 = 0x000f_ffff_ffff_f000;

/// The PAT index of a type under [`PAT_VALUE`].
pub fn pat_index(t: MemType) -> u8 {
    match t {
        MemType::WriteBack => 0,
        MemType::WriteCombining => 1,
        MemType::Uncached => 3,
    }
}

/// The memory type entry `i` of a PAT value selects (0 UC, 1 WC, 4 WT, 5 WP, 6 WB, 7 UC-).
pub fn pat_entry(pat: u64, i: u8) -> u8 {
    (pat >> (8 * u32::from(i & 7))) as u8
}

/// A page-directory entry mapping the 2 MiB page at `phys` (2 MiB aligned) as type `t`.
pub fn pde_2m(phys: u64, t: MemType) -> u64 {
    let i = pat_index(t);
    let mut e = (phys & ADDR_MASK & !(PAGE_2M - 1)) | P | RW | PS;
    if i & 1 != 0 {
        e |= PWT;
    }
    if i & 2 != 0 {
        e |= PCD;
    }
    e
}

/// An entry of a PML4 or PDPT pointing at the next table at `phys` (4 KiB aligned).
pub fn table_entry(phys: u64) -> u64 {
    (phys & ADDR_MASK) | P | RW
}

/// The memory type of the identity page at `base` (2 MiB aligned): write-back if any of `ram`
/// (start, length) overlaps it, else uncached.
pub fn identity_type(base: u64, ram: impl IntoIterator<Item = (u64, u64)>) -> MemType {
    let end = base.saturating_add(PAGE_2M);
    for (s, len) in ram {
        if len > 0 && s < end && s.saturating_add(len) > base {
            return MemType::WriteBack;
        }
    }
    MemType::Uncached
}

/// Where NIC `i`'s write-combining alias of BAR0 starts: 512 GiB up (PML4 entry 1), 1 GiB
/// apart (one page directory each; a ConnectX-5 BAR0 is 32 MiB).
pub fn wc_alias(i: usize) -> u64 {
    (512u64 << 30) + ((i as u64) << 30)
}

/// How many NICs can have a write-combining alias.
pub const MAX_WC_ALIASES: usize = 8;

/// The 2 MiB pages covering `base..base+len`, rounded out.
pub fn pages_2m(base: u64, len: u64) -> impl Iterator<Item = u64> {
    let start = base & !(PAGE_2M - 1);
    let end = base.saturating_add(len).saturating_add(PAGE_2M - 1) & !(PAGE_2M - 1);
    (start..end).step_by(PAGE_2M as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pat_entries_give_the_types() {
        // 6 = WB, 1 = WC, 0 = UC (Intel SDM table 11-10).
        assert_eq!(pat_entry(PAT_VALUE, pat_index(MemType::WriteBack)), 6);
        assert_eq!(pat_entry(PAT_VALUE, pat_index(MemType::WriteCombining)), 1);
        assert_eq!(pat_entry(PAT_VALUE, pat_index(MemType::Uncached)), 0);
        // Entries 4..7 keep their power-on values (WB, WT, UC-, UC).
        assert_eq!(PAT_VALUE >> 32, 0x0007_0406);
    }

    #[test]
    fn entries_encode_address_type_and_size() {
        assert_eq!(pde_2m(0x20_0000, MemType::WriteBack), 0x20_0083);
        assert_eq!(
            pde_2m(0xfc00_0000, MemType::Uncached),
            0xfc00_0083 | PCD | PWT
        );
        assert_eq!(pde_2m(0xfc00_0000, MemType::WriteCombining), 0xfc00_008b);
        // Misaligned bits below 2 MiB and above bit 51 are dropped; PAT (bit 12) stays 0.
        assert_eq!(
            pde_2m(0x000f_0000_fc00_1000, MemType::WriteBack),
            0x000f_0000_fc00_0083
        );
        assert_eq!(
            pde_2m(0xfff0_0000_fc00_0000, MemType::WriteBack),
            0xfc00_0083
        );
        assert_eq!(table_entry(0x10_7000), 0x10_7003);
    }

    #[test]
    fn ram_pages_are_write_back_the_hole_uncached() {
        // QEMU q35, -m 1G: RAM 0..0x9fc00 and 0x100000..0x3ffe0000.
        let ram = [(0u64, 0x9fc00u64), (0x10_0000, 0x3ffe_0000 - 0x10_0000)];
        assert_eq!(identity_type(0, ram), MemType::WriteBack);
        assert_eq!(identity_type(0x3fe0_0000, ram), MemType::WriteBack);
        assert_eq!(identity_type(0x4000_0000, ram), MemType::Uncached);
        assert_eq!(identity_type(0xb000_0000, ram), MemType::Uncached);
        assert_eq!(identity_type(0xfee0_0000, ram), MemType::Uncached);
    }

    #[test]
    fn aliases_and_page_ranges() {
        assert_eq!(wc_alias(0), 0x80_0000_0000);
        assert_eq!(wc_alias(1), 0x80_4000_0000);
        let v: heapless::Vec<u64, 32> = pages_2m(0xfc00_0000, 32 << 20).collect();
        assert_eq!(v.len(), 16);
        assert_eq!(v[15], 0xfc00_0000 + 15 * PAGE_2M);
        assert_eq!(pages_2m(0x1f_ffff, 2).count(), 2);
    }
}
