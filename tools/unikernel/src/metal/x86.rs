//! The machine under the bootable image: the 32-bit entry and interrupt stubs (`entry.s`), port
//! I/O, MSRs, CPUID, the TSC, physical memory reads, uncached 32-bit MMIO, the page tables, the
//! IDT, interrupts on and off, and the static memory the driver lives in.
//!
//! Physical = virtual for everything below 4 GiB (identity map), so a physical address is
//! also a pointer; the write-combining BAR aliases are the one exception (`crate::paging`).

use core::arch::{asm, global_asm};
use core::cell::UnsafeCell;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, Ordering};

use crate::acpi::PhysRead;
use crate::paging;
use crate::pci::{cf8_address, ecam_offset, Bdf, ConfigAccess};

global_asm!(include_str!("entry.s"), options(att_syntax));
global_asm!(
    include_str!(concat!(env!("OUT_DIR"), "/isr_stubs.s")),
    options(att_syntax)
);

extern "C" {
    static isr_stubs: u8;
    static __image_end: u8;
    static __stack_bottom: u8;
}

/// The paint of the unused stack (`paint_stack`).
const PAINT: u64 = 0x5a5a_a5a5_5a5a_a5a5;

/// Paints the stack below the current frame (less a margin), so `stack_used` can tell how
/// deep it ever went.
pub(crate) fn paint_stack() {
    let bottom = core::ptr::addr_of!(__stack_bottom) as u64;
    let sp: u64;
    // SAFETY: reads RSP only.
    unsafe { asm!("mov {0}, rsp", out(reg) sp, options(nomem, nostack, preserves_flags)) };
    let mut a = bottom;
    while a + 8 <= sp.saturating_sub(4096) {
        // SAFETY: `bottom..sp-4096` is the unused part of the image's own stack (in .bss,
        // identity-mapped write-back): nothing lives there below the current frame.
        unsafe { (a as *mut u64).write_volatile(PAINT) };
        a += 8;
    }
}

/// Bytes of the stack ever used (from its top down to the lowest word the paint lost), and
/// its size.
pub(crate) fn stack_used() -> (u64, u64) {
    let bottom = core::ptr::addr_of!(__stack_bottom) as u64;
    let top = {
        extern "C" {
            static __stack_top: u8;
        }
        core::ptr::addr_of!(__stack_top) as u64
    };
    let mut a = bottom;
    // SAFETY: `bottom..top` is the image's stack; words below the deepest frame are read only.
    while a < top && unsafe { (a as *const u64).read_volatile() } == PAINT {
        a += 8;
    }
    (top - a, top - bottom)
}

/// The first byte after the image (its .bss included).
pub(crate) fn image_end() -> u64 {
    core::ptr::addr_of!(__image_end) as u64
}

/// `out` of a byte.
pub(crate) fn outb(port: u16, v: u8) {
    // SAFETY: port I/O touches no memory; the ports the image uses (COM1, PIT, PS/2 control,
    // PIC, PCI configuration, isa-debug-exit) have no memory side effects.
    unsafe {
        asm!("out dx, al", in("dx") port, in("al") v, options(nomem, nostack, preserves_flags))
    }
}

/// `in` of a byte.
pub(crate) fn inb(port: u16) -> u8 {
    let v: u8;
    // SAFETY: as `outb`.
    unsafe {
        asm!("in al, dx", in("dx") port, out("al") v, options(nomem, nostack, preserves_flags))
    };
    v
}

/// `out` of a dword.
pub(crate) fn outl(port: u16, v: u32) {
    // SAFETY: as `outb`.
    unsafe {
        asm!("out dx, eax", in("dx") port, in("eax") v, options(nomem, nostack, preserves_flags))
    }
}

/// `in` of a dword.
pub(crate) fn inl(port: u16) -> u32 {
    let v: u32;
    // SAFETY: as `outb`.
    unsafe {
        asm!("in eax, dx", in("dx") port, out("eax") v, options(nomem, nostack, preserves_flags))
    };
    v
}

/// The time-stamp counter.
pub(crate) fn rdtsc() -> u64 {
    // SAFETY: RDTSC only reads the counter.
    #[allow(unused_unsafe)]
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
}

/// CPUID leaf `leaf`, subleaf 0: (eax, ebx, ecx, edx).
pub(crate) fn cpuid(leaf: u32) -> (u32, u32, u32, u32) {
    // SAFETY: CPUID is available on every x86-64 CPU and only reads.
    #[allow(unused_unsafe)]
    let r = unsafe { core::arch::x86_64::__cpuid_count(leaf, 0) };
    (r.eax, r.ebx, r.ecx, r.edx)
}

fn rdmsr(msr: u32) -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: the image reads only architectural MSRs that exist on every x86-64 CPU with the
    // features it checked (IA32_APIC_BASE, IA32_PAT).
    unsafe {
        asm!("rdmsr", in("ecx") msr, out("eax") lo, out("edx") hi, options(nomem, nostack, preserves_flags))
    };
    u64::from(hi) << 32 | u64::from(lo)
}

fn wrmsr(msr: u32, v: u64) {
    // SAFETY: the image writes only IA32_PAT (before any mapping uses entries other than 0
    // and 3... and flushes after) — see `install_page_tables`.
    unsafe {
        asm!("wrmsr", in("ecx") msr, in("eax") v as u32, in("edx") (v >> 32) as u32, options(nostack, preserves_flags))
    }
}

/// The local APIC's physical base (IA32_APIC_BASE).
pub(crate) fn lapic_base() -> u64 {
    rdmsr(0x1b) & 0x000f_ffff_ffff_f000
}

/// Halts until the next interrupt, with interrupts enabled for exactly that wait (STI's
/// one-instruction shadow makes `sti; hlt` atomic: an interrupt pending already wakes it).
pub(crate) fn wait_for_interrupt() {
    // SAFETY: the IDT is installed before interrupts are ever enabled (`boot::main`); the
    // handlers preserve every register the interrupted code relies on.
    unsafe { asm!("sti", "hlt", "cli", options(nomem, nostack)) }
}

/// One 32-bit load from an uncached identity-mapped register (local APIC, MSI-X table, ECAM).
pub(crate) fn mmio_read32(phys: u64) -> u32 {
    assert!(phys < 512 << 30 && phys % 4 == 0, "mmio_read32 {phys:#x}");
    // SAFETY: the callers pass only device register addresses (the local APIC page, ECAM, a
    // BAR): below 4 GiB everything is identity-mapped, above it every BAR the page tables
    // mapped, uncached either way; an address nothing maps faults (#PF), which the exception
    // handler reports and ends the run on — no memory is touched.
    unsafe { core::ptr::read_volatile(phys as *const u32) }
}

/// One 32-bit store to an uncached identity-mapped register.
pub(crate) fn mmio_write32(phys: u64, v: u32) {
    assert!(phys < 512 << 30 && phys % 4 == 0, "mmio_write32 {phys:#x}");
    // SAFETY: as `mmio_read32`.
    unsafe { core::ptr::write_volatile(phys as *mut u32, v) }
}

/// Leaves QEMU with status `(code << 1) | 1` (isa-debug-exit at port 0xf4); on anything
/// else, halts for ever.
pub(crate) fn exit(code: u32) -> ! {
    outl(0xf4, code);
    loop {
        // SAFETY: interrupts off and halt: nothing runs again.
        unsafe { asm!("cli", "hlt", options(nomem, nostack)) }
    }
}

/// Physical memory below the image's own end and in firmware tables: read-only access for the
/// PVH start info and ACPI (identity-mapped below 4 GiB).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PhysMem;

impl PhysRead for PhysMem {
    fn read(&self, phys: u64, out: &mut [u8]) -> bool {
        let Some(end) = phys.checked_add(out.len() as u64) else {
            return false;
        };
        if phys == 0 || end > 1 << 32 {
            return false;
        }
        for (i, b) in out.iter_mut().enumerate() {
            // SAFETY: below 4 GiB every address is identity-mapped (RAM write-back, the rest
            // uncached); firmware tables are read a byte at a time, volatile, never referenced.
            *b = unsafe { core::ptr::read_volatile((phys + i as u64) as *const u8) };
        }
        true
    }
}

/// PCI configuration space through ports 0xCF8/0xCFC (offsets below 256).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PortConfig;

impl ConfigAccess for PortConfig {
    fn read32(&self, bdf: Bdf, off: u16) -> u32 {
        if off >= 256 {
            return u32::MAX;
        }
        outl(0xcf8, cf8_address(bdf, off));
        inl(0xcfc)
    }
    fn write32(&self, bdf: Bdf, off: u16, v: u32) {
        if off < 256 {
            outl(0xcf8, cf8_address(bdf, off));
            outl(0xcfc, v);
        }
    }
}

/// PCI configuration space through ECAM (the MCFG window, identity-mapped uncached).
#[derive(Debug, Clone, Copy)]
pub(crate) struct EcamConfig {
    /// The window's physical base (bus 0).
    pub base: u64,
    /// The last bus it covers.
    pub end_bus: u8,
}

impl EcamConfig {
    fn addr(&self, bdf: Bdf, off: u16) -> Option<u64> {
        (bdf.bus <= self.end_bus && off < 4096 && off % 4 == 0)
            .then(|| self.base + ecam_offset(bdf, off))
            .filter(|&a| a < 1 << 32)
    }
}

impl ConfigAccess for EcamConfig {
    fn read32(&self, bdf: Bdf, off: u16) -> u32 {
        self.addr(bdf, off).map_or(u32::MAX, mmio_read32)
    }
    fn write32(&self, bdf: Bdf, off: u16, v: u32) {
        if let Some(a) = self.addr(bdf, off) {
            mmio_write32(a, v)
        }
    }
}

/// Static memory handed out once: the page tables, the IDT, the DMA and host arenas.
#[repr(C, align(4096))]
struct Static<const N: usize>(UnsafeCell<[u8; N]>);

// SAFETY: each static is handed out at most once (`TAKEN` flags), as a raw pointer; no two
// owners alias it.
unsafe impl<const N: usize> Sync for Static<N> {}

impl<const N: usize> Static<N> {
    const fn new() -> Self {
        Self(UnsafeCell::new([0; N]))
    }
    fn ptr(&self) -> *mut u8 {
        self.0.get().cast()
    }
}

/// Page tables: the PML4, the identity PDPT and its four PDs, the alias PDPT and a PD per
/// alias, PDs for BARs above 4 GiB.
const TABLES: usize = 16;
static PAGE_TABLES: Static<{ 2 * TABLES * 4096 }> = Static::new();
static IDT: Static<4096> = Static::new();
/// DMA memory of all NICs together.
pub(crate) const DMA_ARENA_BYTES: usize = 32 << 20;
/// Host memory (the driver's bookkeeping, smoltcp's buffers) of all NICs together.
pub(crate) const HOST_ARENA_BYTES: usize = 2 << 20;
static DMA_ARENA: Static<DMA_ARENA_BYTES> = Static::new();
static HOST_ARENA: Static<HOST_ARENA_BYTES> = Static::new();
static ARENAS_TAKEN: AtomicBool = AtomicBool::new(false);
/// smoltcp's socket buffers.
pub(crate) const NET_BYTES: usize = 4 << 20;
static NET: Static<NET_BYTES> = Static::new();
static NET_TAKEN: AtomicBool = AtomicBool::new(false);

/// The static memory of the TCP/IP sockets, once.
pub(crate) fn net_memory() -> Option<&'static mut [u8]> {
    if NET_TAKEN.swap(true, Ordering::AcqRel) {
        return None;
    }
    // SAFETY: the static is handed out once (NET_TAKEN), so this is its only reference; it is
    // ordinary identity-mapped write-back memory no device is told about.
    Some(unsafe { &mut *NET.0.get() })
}

/// A BAR the page tables map: uncached at its physical address (identity), and
/// write-combining at `wc` (its alias). Only [`install_page_tables`] makes one.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MappedBar {
    phys: u64,
    len: u64,
    wc: u64,
}

impl MappedBar {
    /// Bytes.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }
}

/// Page-table errors: what did not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PagingError {
    /// The static pool of page tables is used up.
    NoTables,
    /// A BAR is not 2 MiB aligned, lies beyond the first 512 GiB, overlaps RAM, or there are
    /// more BARs than aliases.
    BadBar {
        /// Its physical start.
        phys: u64,
    },
}

impl core::fmt::Display for PagingError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::NoTables => write!(f, "the {TABLES} static page tables are used up"),
            Self::BadBar { phys } => write!(
                f,
                "BAR at {phys:#x} cannot be mapped (not 2 MiB aligned, above 512 GiB, over RAM, or too many BARs)"
            ),
        }
    }
}

/// Builds fresh page tables — 0..4 GiB identity with `ram` (start, length) write-back and the
/// rest uncached; each of `bars` (start, length) identity-mapped uncached (also above 4 GiB)
/// and aliased write-combining at [`paging::wc_alias`] — programs the PAT
/// ([`paging::PAT_VALUE`]) and switches CR3 to them. Called twice: first with no BARs, before
/// any device register (ECAM included) is touched, so that configuration space is read
/// uncached; then with the BARs PCI found. Each call fills its own half of the static pool
/// (never the tables CR3 holds); a third call is refused.
pub(crate) fn install_page_tables(
    ram: &[(u64, u64)],
    bars: &[(u64, u64)],
) -> Result<heapless::Vec<MappedBar, { paging::MAX_WC_ALIASES }>, PagingError> {
    static CALLS: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
    let set_no = CALLS.fetch_add(1, Ordering::AcqRel);
    if set_no >= 2 {
        return Err(PagingError::NoTables);
    }
    let base = PAGE_TABLES.ptr().wrapping_add(set_no * TABLES * 4096);
    let table = |i: usize| -> *mut u64 { base.wrapping_add(i * 4096).cast() };
    let index_of = |entry: u64| ((entry & 0x000f_ffff_ffff_f000) - table(0) as u64) as usize / 4096;
    let set = |t: usize, i: usize, v: u64| {
        // SAFETY: `t` < TABLES and `i` < 512 index this call's half of the static pool, which
        // the CPU does not use until CR3 is loaded below and which no other call writes
        // (CALLS gives each call its own half, zero from .bss).
        unsafe { core::ptr::write_volatile(table(t).add(i), v) }
    };
    let get = |t: usize, i: usize| -> u64 {
        // SAFETY: as `set`.
        unsafe { core::ptr::read_volatile(table(t).add(i)) }
    };
    let mut used = 1usize; // table 0 is the PML4
    let mut map = |virt: u64, pa: u64, ty: paging::MemType| -> Result<(), PagingError> {
        let mut t = 0;
        for shift in [39u32, 30] {
            let i = (virt >> shift) as usize & 511;
            let mut e = get(t, i);
            if e == 0 {
                if used >= TABLES {
                    return Err(PagingError::NoTables);
                }
                e = paging::table_entry(table(used) as u64);
                set(t, i, e);
                used += 1;
            }
            t = index_of(e);
        }
        set(t, (virt >> 21) as usize & 511, paging::pde_2m(pa, ty));
        Ok(())
    };
    for page in (0..(4u64 << 30)).step_by(paging::PAGE_2M as usize) {
        map(page, page, paging::identity_type(page, ram.iter().copied()))?;
    }
    let mut out = heapless::Vec::new();
    for (k, &(phys, len)) in bars.iter().enumerate() {
        let bad = PagingError::BadBar { phys };
        let over_ram = paging::pages_2m(phys, len)
            .any(|p| paging::identity_type(p, ram.iter().copied()) != paging::MemType::Uncached);
        if phys % paging::PAGE_2M != 0
            || phys.saturating_add(len) > 512 << 30
            || len == 0
            || over_ram
        {
            return Err(bad);
        }
        let wc = paging::wc_alias(k);
        for (j, page) in paging::pages_2m(phys, len).enumerate() {
            if page >= 4 << 30 {
                map(page, page, paging::MemType::Uncached)?;
            }
            map(
                wc + j as u64 * paging::PAGE_2M,
                page,
                paging::MemType::WriteCombining,
            )?;
        }
        out.push(MappedBar { phys, len, wc }).map_err(|_| bad)?;
    }
    wrmsr(0x277, paging::PAT_VALUE);
    // SAFETY: the new tables map the image, its stack and statics identically (0..4 GiB
    // identity, RAM write-back), so execution continues unchanged; WBINVD and the CR3 load
    // flush caches and TLBs after the PAT change, as the SDM (11.12.4) asks.
    unsafe {
        asm!("wbinvd", "mov cr3, {0}", in(reg) table(0) as u64, options(nostack));
    }
    Ok(out)
}

/// The static DMA and host arenas, carved into one platform per NIC.
#[derive(Debug)]
pub(crate) struct Arenas {
    dma: NonNull<u8>,
    dma_used: usize,
    host: NonNull<u8>,
    host_used: usize,
}

impl Arenas {
    /// The arenas, once.
    pub(crate) fn take() -> Option<Self> {
        if ARENAS_TAKEN.swap(true, Ordering::AcqRel) {
            return None;
        }
        Some(Self {
            dma: NonNull::new(DMA_ARENA.ptr())?,
            dma_used: 0,
            host: NonNull::new(HOST_ARENA.ptr())?,
            host_used: 0,
        })
    }

    /// A platform for the NIC whose BAR0 is `bar`, with `dma` bytes of the DMA arena and
    /// `host` bytes of the host arena (each rounded up to 2 MiB / 4 KiB), device address =
    /// physical address (no IOMMU in the guest), BlueFlame through the write-combining alias
    /// if `write_combining`; `None` when the arenas are used up.
    pub(crate) fn platform(
        &mut self,
        bar: &MappedBar,
        dma: usize,
        host: usize,
        clock: super::platform::TscClock,
        write_combining: bool,
    ) -> Option<super::platform::BareMetal<super::platform::TscClock>> {
        let dma = dma.checked_next_multiple_of(2 << 20)?;
        let host = host.checked_next_multiple_of(4096)?;
        if self.dma_used.checked_add(dma)? > DMA_ARENA_BYTES
            || self.host_used.checked_add(host)? > HOST_ARENA_BYTES
        {
            return None;
        }
        let d = NonNull::new(self.dma.as_ptr().wrapping_add(self.dma_used))?;
        let h = NonNull::new(self.host.as_ptr().wrapping_add(self.host_used))?;
        self.dma_used += dma;
        self.host_used += host;
        let bar_ptr = NonNull::new(bar.phys as *mut u8)?;
        let wc_ptr = NonNull::new(bar.wc as *mut u8)?;
        // SAFETY: `bar` was mapped by `install_page_tables` (uncached identity and the
        // write-combining alias) and stays mapped; `d..d+dma` and `h..h+host` are disjoint
        // pieces of the static arenas that no other platform gets (the `*_used` cursors only
        // grow and `take` hands the arenas out once), identity-mapped write-back, 4 KiB
        // aligned, physically contiguous (physical = virtual), cache-coherent for PCIe DMA;
        // there is no IOMMU in this guest, so the device reaches every byte at its physical
        // address — the host arena too (the contract's limit without an IOMMU, stated in
        // `BareMetal::new`); the caller turned on memory space and bus mastering.
        let p = unsafe {
            super::platform::BareMetal::new(
                bar_ptr,
                bar.len as usize,
                d,
                d.as_ptr() as u64,
                dma,
                crate::DmaTranslation::Identity,
                h,
                host,
                clock,
            )
        };
        if !write_combining {
            return Some(p);
        }
        // SAFETY: the alias maps the same BAR0 from its first byte, write-combining
        // (`install_page_tables`), for the image's whole life.
        Some(unsafe { p.with_write_combining(wc_ptr, bar.len as usize) })
    }

    /// Bytes of the DMA and host arenas handed out so far.
    pub(crate) fn used(&self) -> (usize, usize) {
        (self.dma_used, self.host_used)
    }
}

/// Fills the IDT (every vector to its stub in `isr_stubs`, 16 bytes apart) and loads it.
pub(crate) fn install_idt() {
    let stubs = core::ptr::addr_of!(isr_stubs) as u64;
    let idt: *mut u64 = IDT.ptr().cast();
    for v in 0..256u64 {
        let h = stubs + 16 * v;
        // Interrupt gate, present, DPL 0, selector 0x08 (the 64-bit code segment).
        let lo = (h & 0xffff) | (0x08 << 16) | (0x8e00u64 << 32) | ((h >> 16) & 0xffff) << 48;
        let hi = h >> 32;
        // SAFETY: the IDT static is 4096 bytes, 256 entries of 16; written only here, before
        // it is loaded.
        unsafe {
            idt.add(2 * v as usize).write_volatile(lo);
            idt.add(2 * v as usize + 1).write_volatile(hi);
        }
    }
    #[repr(C, packed)]
    struct Idtr {
        limit: u16,
        base: u64,
    }
    let r = Idtr {
        limit: 4095,
        base: idt as u64,
    };
    // SAFETY: the IDT holds 256 valid gates to the stubs, which save and restore what they use.
    unsafe { asm!("lidt [{0}]", in(reg) &r, options(readonly, nostack, preserves_flags)) }
}
