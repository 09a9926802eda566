//! For the bootable image (`x86_64-unknown-none` only): the linker script that loads it at
//! 1 MiB with its PVH note, and the 256 interrupt entry stubs (generated: one per vector, 16
//! bytes apart, so the IDT is filled from one base address).

use std::fmt::Write as _;
use std::path::PathBuf;

/// Vectors whose exception pushes an error code (Intel SDM vol. 3, table 6-1).
const WITH_ERROR_CODE: [u32; 10] = [8, 10, 11, 12, 13, 14, 17, 21, 29, 30];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=link.ld");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let mut s = String::from(
        "    .section .text.isr, \"ax\"\n    .code64\n    .balign 16\n    .globl isr_stubs\nisr_stubs:\n",
    );
    for v in 0..256u32 {
        s.push_str("    .balign 16\n");
        if !WITH_ERROR_CODE.contains(&v) {
            s.push_str("    pushq $0\n");
        }
        let _ = writeln!(s, "    pushq ${v}\n    jmp isr_common");
    }
    std::fs::write(out.join("isr_stubs.s"), s).expect("write isr_stubs.s");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "none" {
        let dir = std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR");
        // Absolute addresses in the 32-bit entry and the note: a static, non-PIE executable.
        println!("cargo:rustc-link-arg-bins=-T{dir}/link.ld");
        println!("cargo:rustc-link-arg-bins=--no-pie");
    }
}
