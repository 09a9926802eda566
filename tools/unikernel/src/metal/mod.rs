//! The crate's one room with `unsafe` code: the [`BareMetal`](platform::BareMetal) platform,
//! and — in the bootable image — the machine itself (`x86`: port I/O, MSRs, page tables, the
//! IDT and local APIC, physical memory, the static arenas). Every block says why it is sound.

pub(crate) mod platform;

#[cfg(all(target_arch = "x86_64", target_os = "none"))]
pub(crate) mod x86;
