//! The bootable image: `cargo build -p mlx5-unikernel-example --target x86_64-unknown-none
//! --release --bin mlx5-unikernel`, then `qemu-system-x86_64 -kernel` it (tests/unikernel-qemu).
//! Built for any other target it is a program that says so.
#![cfg_attr(target_os = "none", no_std, no_main)]

#[cfg(target_os = "none")]
#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    mlx5_unikernel_example::say!("PANIC {info}");
    mlx5_unikernel_example::boot::verdict::exit_panic()
}

// The two places the boot code in the library's metal room (`metal/entry.s`) calls by name, here
// at the top of the image so that nothing below the boot flow calls up into it.

/// `kmain(start_info)`: where the boot code lands in 64-bit mode, with the PVH start info's
/// physical address.
#[cfg(target_os = "none")]
#[no_mangle]
extern "C" fn kmain(start_info: u32) -> ! {
    mlx5_unikernel_example::boot::main(u64::from(start_info))
}

/// Called by the common interrupt entry for every interrupt and exception, with the vector its
/// stub pushed, the error code (the CPU's, or 0) and the interrupted instruction's address.
#[cfg(target_os = "none")]
#[no_mangle]
extern "C" fn isr_dispatch(vector: u64, error: u64, rip: u64) {
    mlx5_unikernel_example::boot::irq::on_interrupt(vector as u8, error, rip);
}

#[cfg(not(target_os = "none"))]
fn main() {
    eprintln!(
        "mlx5-unikernel is a bootable image: build it with --target x86_64-unknown-none and run \
         it with qemu-system-x86_64 -kernel (tests/unikernel-qemu/run.sh)"
    );
    std::process::exit(2);
}
