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

#[cfg(not(target_os = "none"))]
fn main() {
    eprintln!(
        "mlx5-unikernel is a bootable image: build it with --target x86_64-unknown-none and run \
         it with qemu-system-x86_64 -kernel (tests/unikernel-qemu/run.sh)"
    );
    std::process::exit(2);
}
