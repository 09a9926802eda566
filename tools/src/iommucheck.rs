//! `mlx5ctl iommu-check --vfio BDF`: does the IOMMU confine this function's DMA?
//!
//! Opens the function through VFIO, reserves a page of IOVA space in its container that nothing
//! maps, points the command queue at it (the initialization segment's `cmdq_addr`) and hands
//! the firmware command slot 0. A device behind a working IOMMU cannot fetch that entry: no
//! completion can come back (it could not be written either), and the IOMMU's fault log holds a
//! read of this function at that address — the host's `dmesg` (`DMAR: [DMA Read] … fault addr`)
//! on real hardware, the simulator's DMA fault record when the function is a simulated
//! ConnectX-5 served over vfio-user. The function is reset when VFIO releases it.
//!
//! Nothing of the driver's bring-up runs: the check writes three registers and reads two.

use std::time::{Duration, Instant};

use clap::Args as ClapArgs;
use mlx5::ifc::{regs, Be32};
use mlx5::Platform;
use mlx5_vfio::{VfioOptions, VfioPlatform};

/// `mlx5ctl iommu-check` arguments.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// The ConnectX function, bound to vfio-pci (`mlx5ctl list`).
    #[arg(long, value_name = "BDF")]
    vfio: String,
    /// How long to watch the entry after ringing, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    watch_ms: u64,
}

/// Polls `initializing` until it clears, up to `limit`.
fn wait_ready(p: &VfioPlatform, limit: Duration, what: &str) -> Result<(), String> {
    let t0 = Instant::now();
    loop {
        let v = p.bar_read32(u64::from(regs::INITIALIZING)).get();
        if v != u32::MAX && v & regs::INITIALIZING_BIT == 0 {
            return Ok(());
        }
        if t0.elapsed() > limit {
            return Err(format!(
                "{what}: the firmware still initializes after {} ms (initializing {v:#010x})",
                limit.as_millis()
            ));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Runs the check.
pub fn run(a: &Args) -> Result<(), String> {
    let opts = VfioOptions {
        expect_vendor: Some(mlx5_vfio::pci::MELLANOX_VENDOR),
        ..VfioOptions::default()
    };
    let p = VfioPlatform::open(&a.vfio, &opts).map_err(|e| e.to_string())?;
    wait_ready(
        &p,
        Duration::from_secs(10),
        "before the command queue address",
    )?;
    let rev = p.bar_read32(u64::from(regs::CMDIF_REV_FW_SUB)).get() >> 16;
    if rev != u32::from(regs::CMD_IF_REV) {
        return Err(format!(
            "command interface revision {rev}, expected {}: not a ConnectX this check knows",
            regs::CMD_IF_REV
        ));
    }
    let hole = p
        .iommu()
        .reserve_unmapped(4096)
        .ok_or("no IOVA space left to reserve")?;
    let iova = hole.iova();
    p.bar_write32(u64::from(regs::CMDQ_ADDR_H), Be32::new((iova >> 32) as u32));
    p.bar_write32(
        u64::from(regs::CMDQ_ADDR_L_SZ),
        Be32::new(iova as u32 & !0xfff),
    );
    wait_ready(
        &p,
        Duration::from_secs(10),
        "after the command queue address",
    )?;
    println!(
        "iommu-check: {}: command queue at IOVA {iova:#x} (reserved in this container, never mapped)",
        a.vfio
    );
    p.bar_write32(u64::from(regs::CMD_DBELL), Be32::new(1));
    println!(
        "iommu-check: rang command slot 0; watching for {} ms",
        a.watch_ms
    );
    std::thread::sleep(Duration::from_millis(a.watch_ms));
    let health = p.bar_read32(u64::from(regs::HEALTH_SYND)).get();
    println!(
        "iommu-check: the device could not fetch the entry at {iova:#x}; health syndrome word {health:#010x}. \
         Its IOMMU fault log now holds that read: `dmesg | grep DMAR` on the host of a real NIC, the \
         simulator's DMA fault record for a simulated one. VFIO resets the function on release."
    );
    drop(hole);
    Ok(())
}
