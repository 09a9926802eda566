//! The program the throw-away QEMU guest runs (tests/vfio-qemu/run.sh): the project's own VFIO
//! backend ([`mlx5_vfio`]) against a real Linux kernel, an emulated VT-d IOMMU and two emulated
//! PCI functions bound to vfio-pci:
//!
//! * QEMU's `edu` device (1234:11e8): BAR mmap and registers, config space, DMA memory from the
//!   platform, a device DMA round trip checked byte by byte, MSI to an eventfd, the IOMMU blocking
//!   DMA after unmap, the driver's bring-up failing cleanly on a non-mlx5 device, teardown and
//!   reopening;
//! * an Intel 82576 (`igb`, 8086:10c9) or 82574 (`e1000e`, 8086:10d3): MSI-X vectors raised by
//!   the device, each arriving on its own eventfd, and DMA mapping.
//!
//! Usage: `mlx5-vfio-guest BDF...` (the functions to test). Prints one `VFIOTEST: PASS|FAIL`
//! line per check and `N passed, N failed`; exits non-zero if anything failed.

use std::time::{Duration, Instant};

use mlx5::raw::DmaBuf;
use mlx5::{DeviceConfig, Platform};
use mlx5_vfio::{HostMemory, IrqKind, PciAddress, Sysfs, VfioError, VfioOptions, VfioPlatform};

/// edu registers (QEMU docs/specs/edu.rst): little-endian, 32-bit unless noted.
mod edu {
    pub const ID: u64 = 0x00;
    pub const LIVENESS: u64 = 0x04;
    pub const FACTORIAL: u64 = 0x08;
    pub const STATUS: u64 = 0x20;
    pub const IRQ_STATUS: u64 = 0x24;
    pub const IRQ_RAISE: u64 = 0x60;
    pub const IRQ_ACK: u64 = 0x64;
    /// 64-bit DMA source, destination, count, command.
    pub const DMA_SRC: u64 = 0x80;
    pub const DMA_DST: u64 = 0x88;
    pub const DMA_COUNT: u64 = 0x90;
    pub const DMA_CMD: u64 = 0x98;
    pub const CMD_START: u32 = 1;
    pub const CMD_TO_RAM: u32 = 2;
    pub const CMD_IRQ: u32 = 4;
    /// The device-side DMA buffer.
    pub const BUF: u64 = 0x40000;
    /// The interrupt status bit a finished DMA sets.
    pub const IRQ_DMA: u32 = 0x100;
}

/// 82576 (igb) registers.
mod igb {
    /// Device status (the same offset on the 82574).
    pub const STATUS: u64 = 0x0008;
    pub const GPIE: u64 = 0x1514;
    pub const GPIE_MSIX_MODE: u32 = 1 << 4;
    pub const EICS: u64 = 0x1520;
    pub const EIMS: u64 = 0x1524;
    pub const EIMC: u64 = 0x1528;
    pub const EICR: u64 = 0x1580;
}

/// 82574 (e1000e) registers.
mod e1000e {
    pub const ICS: u64 = 0x00c8;
    pub const IMS: u64 = 0x00d0;
    pub const IMC: u64 = 0x00d8;
    pub const ICR: u64 = 0x00c0;
    pub const IVAR: u64 = 0x00e4;
    /// The "other" cause, the one an ICS write can route to an MSI-X vector of our choice.
    pub const ICR_OTHER: u32 = 1 << 24;
    pub const ICR_LSC: u32 = 1 << 2;
}

struct Report {
    t0: Instant,
    passed: u32,
    failed: u32,
}

impl Report {
    fn check(&mut self, name: &str, r: Result<String, String>) -> bool {
        let ms = self.t0.elapsed().as_secs_f64() * 1e3;
        match r {
            Ok(detail) => {
                self.passed += 1;
                println!("VFIOTEST: PASS {name} [{ms:.1} ms] {detail}");
                true
            }
            Err(why) => {
                self.failed += 1;
                println!("VFIOTEST: FAIL {name} [{ms:.1} ms] {why}");
                false
            }
        }
    }
}

/// A little-endian register (the driver's boundary speaks big-endian words as byte images).
fn rd(p: &VfioPlatform, off: u64) -> u32 {
    u32::from_le_bytes(p.bar_read32(off).to_bytes())
}

fn wr(p: &VfioPlatform, off: u64, v: u32) {
    p.bar_write32(off, mlx5::ifc::Be32::from_bytes(v.to_le_bytes()))
}

fn wr64(p: &VfioPlatform, off: u64, v: u64) {
    wr(p, off, v as u32);
    wr(p, off + 4, (v >> 32) as u32);
}

fn ensure(cond: bool, msg: impl FnOnce() -> String) -> Result<(), String> {
    if cond {
        Ok(())
    } else {
        Err(msg())
    }
}

/// Waits (polling) until `f` is true or `timeout` passes.
fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while t.elapsed() < timeout {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    f()
}

/// Runs one edu DMA and waits for it to finish.
fn edu_dma(p: &VfioPlatform, src: u64, dst: u64, count: u64, cmd: u32) -> Result<(), String> {
    wr64(p, edu::DMA_SRC, src);
    wr64(p, edu::DMA_DST, dst);
    wr64(p, edu::DMA_COUNT, count);
    wr(p, edu::DMA_CMD, cmd | edu::CMD_START);
    ensure(
        wait_until(Duration::from_secs(5), || {
            rd(p, edu::DMA_CMD) & edu::CMD_START == 0
        }),
        || "DMA did not finish within 5 s".into(),
    )
}

fn edu_opts() -> VfioOptions {
    VfioOptions {
        dma_mask_bits: 28, // edu clamps DMA addresses to 28 bits
        ..VfioOptions::default()
    }
}

fn test_edu(rep: &mut Report, bdf: &str) {
    let sysfs = Sysfs::system();
    let addr: PciAddress = bdf.parse().expect("address");

    rep.check("open-checks-ready", {
        sysfs
            .function(&addr)
            .and_then(|f| sysfs.check_ready(&f))
            .map(|g| format!("{bdf} bound to vfio-pci, IOMMU group {g} viable"))
            .map_err(|e| e.to_string())
    });

    let p = match VfioPlatform::open(bdf, &edu_opts()) {
        Ok(p) => p,
        Err(e) => {
            rep.check("open", Err(e.to_string()));
            return;
        }
    };
    let info = p.info().clone();
    rep.check(
        "open",
        Ok(format!(
            "group {}, reset {}, PCI_COMMAND {:#06x} -> {:#06x}",
            info.group, info.reset, info.command.0, info.command.1
        )),
    );

    rep.check("config-space", {
        let c = p.config();
        (|| -> Result<String, String> {
            let vendor = c.read16(0).map_err(|e| e.to_string())?;
            let device = c.read16(2).map_err(|e| e.to_string())?;
            let cmd = c.command().map_err(|e| e.to_string())?;
            ensure((vendor, device) == (0x1234, 0x11e8), || {
                format!("ids {vendor:04x}:{device:04x}")
            })?;
            ensure(cmd & 0x6 == 0x6, || {
                format!("PCI_COMMAND {cmd:#06x}: MEM|BME not set")
            })?;
            ensure(c.read(c.size(), &mut [0u8; 1]).is_err(), || {
                "read past the end was not refused".into()
            })?;
            Ok(format!(
                "{vendor:04x}:{device:04x}, PCI_COMMAND {cmd:#06x} (memory + bus master), size {}",
                c.size()
            ))
        })()
    });

    rep.check("bar0-mmap", {
        let b = p.bar();
        ensure(b.size() == 1 << 20 && b.fully_mapped(), || {
            format!("size {:#x}, mapped {:x?}", b.size(), b.mapped())
        })
        .map(|()| format!("{:#x} bytes, mmapped {:x?}", b.size(), b.mapped()))
    });

    rep.check("bar0-id", {
        let id = rd(&p, edu::ID);
        ensure(id & 0xffff == 0x00ed, || format!("id {id:#010x}"))
            .map(|()| format!("id {id:#010x}"))
    });

    rep.check("bar0-liveness", {
        let pats = [0u32, 0xffff_ffff, 0xdead_beef, 0x1234_5678, 0xa5a5_5a5a];
        let bad: Vec<String> = pats
            .iter()
            .filter_map(|&v| {
                wr(&p, edu::LIVENESS, v);
                let r = rd(&p, edu::LIVENESS);
                (r != !v).then(|| format!("{v:#x}->{r:#x}"))
            })
            .collect();
        ensure(bad.is_empty(), || bad.join(", "))
            .map(|()| format!("{} patterns inverted", pats.len()))
    });

    rep.check("bar0-factorial", {
        wr(&p, edu::FACTORIAL, 10);
        let done = wait_until(Duration::from_secs(2), || rd(&p, edu::STATUS) & 1 == 0);
        let v = rd(&p, edu::FACTORIAL);
        ensure(done && v == 3_628_800, || format!("done {done}, value {v}"))
            .map(|()| "10! = 3628800".into())
    });

    // DMA memory from the Platform boundary, as the driver gets it.
    let bufs = (DmaBuf::alloc(&p, 4096, 4096), DmaBuf::alloc(&p, 4096, 4096));
    let (a, b) = match bufs {
        (Ok(a), Ok(b)) => (a, b),
        (a, b) => {
            rep.check("dma-alloc", Err(format!("{:?} {:?}", a.err(), b.err())));
            return;
        }
    };
    rep.check("dma-alloc", {
        let mut z = [0xffu8; 4096];
        b.read_bytes(0, &mut z).unwrap();
        let s = p.dma_stats();
        // The guest boots with hugepages=16, so the pool's chunks must be hugepage-backed.
        ensure(
            a.iova() % 4096 == 0
                && a.iova() != 0
                && a.iova() < 1 << 28
                && z.iter().all(|&x| x == 0)
                && s.huge_chunks == s.chunks,
            || format!("iova {:#x} / {:#x}, {s:?}", a.iova(), b.iova()),
        )
        .map(|()| {
            format!(
                "iova {:#x} and {:#x}, zeroed; pool: {} chunk(s), {} hugepage-backed, {} KiB pinned",
                a.iova(),
                b.iova(),
                s.chunks,
                s.huge_chunks,
                s.mapped_bytes >> 10
            )
        })
    });

    const N: usize = 2048; // < 4096: QEMU 7.2's edu aborts on a full-page transfer
    let pattern: Vec<u8> = (0..N)
        .map(|i| (i * 7 + 0x3c) as u8 ^ (i >> 8) as u8)
        .collect();
    rep.check("dma-roundtrip", {
        (|| -> Result<String, String> {
            a.write_bytes(0, &pattern).unwrap();
            edu_dma(&p, a.iova(), edu::BUF, N as u64, 0)?;
            edu_dma(&p, edu::BUF, b.iova(), N as u64, edu::CMD_TO_RAM)?;
            let mut got = vec![0u8; 4096];
            b.read_bytes(0, &mut got).unwrap();
            let bad = (0..N).filter(|&i| got[i] != pattern[i]).count();
            let tail = got[N..].iter().all(|&x| x == 0);
            ensure(bad == 0 && tail, || {
                format!("{bad} mismatching bytes, rest of page untouched {tail}")
            })?;
            Ok(format!(
                "RAM -> edu -> RAM, {N} bytes compared, 0 mismatches, rest of the page untouched, b[0..4]={:02x}{:02x}{:02x}{:02x}",
                got[0], got[1], got[2], got[3]
            ))
        })()
    });

    let irqs = p.interrupts();
    rep.check("msi-raise", {
        (|| -> Result<String, String> {
            let n = irqs.available(IrqKind::Msi);
            ensure(n >= 1, || format!("MSI vectors: {n}"))?;
            irqs.enable(IrqKind::Msi, 1).map_err(|e| e.to_string())?;
            ensure(irqs.take(0).map_err(|e| e.to_string())? == 0, || {
                "spurious interrupt".into()
            })?;
            wr(&p, edu::IRQ_RAISE, 0x1);
            let got = irqs
                .wait(0, Duration::from_secs(2))
                .map_err(|e| e.to_string())?;
            let st = rd(&p, edu::IRQ_STATUS);
            wr(&p, edu::IRQ_ACK, st);
            ensure(got >= 1 && st & 1 == 1, || {
                format!("eventfd count {got}, irq status {st:#x}")
            })?;
            Ok(format!(
                "{n} MSI vector(s); eventfd count {got}, irq status {st:#x}"
            ))
        })()
    });

    rep.check("msi-dma-complete", {
        (|| -> Result<String, String> {
            b.zero();
            edu_dma(
                &p,
                edu::BUF,
                b.iova(),
                N as u64,
                edu::CMD_TO_RAM | edu::CMD_IRQ,
            )?;
            let got = irqs
                .wait(0, Duration::from_secs(2))
                .map_err(|e| e.to_string())?;
            let st = rd(&p, edu::IRQ_STATUS);
            wr(&p, edu::IRQ_ACK, st);
            let mut data = vec![0u8; N];
            b.read_bytes(0, &mut data).unwrap();
            ensure(
                got >= 1 && st & edu::IRQ_DMA != 0 && data == pattern,
                || {
                    format!(
                        "eventfd count {got}, irq status {st:#x}, data ok {}",
                        data == pattern
                    )
                },
            )?;
            irqs.disable().map_err(|e| e.to_string())?;
            Ok(format!(
                "eventfd count {got}, irq status {st:#x}, data ok; MSI disabled"
            ))
        })()
    });

    rep.check("iommu-blocks-unmapped", {
        (|| -> Result<String, String> {
            let mem = HostMemory::new(4096, false).map_err(|e| e.to_string())?;
            mem.fill(0, mem.len(), 0x5a).unwrap();
            let m = p.iommu().map_memory(&mem).map_err(|e| e.to_string())?;
            let iova = m.iova();
            // While mapped, the device reaches the memory...
            edu_dma(&p, edu::BUF, iova, N as u64, edu::CMD_TO_RAM)?;
            let mut got = vec![0u8; N];
            mem.read(0, &mut got).unwrap();
            ensure(got == pattern, || "DMA into mapped memory did not arrive".into())?;
            mem.fill(0, mem.len(), 0x5a).unwrap();
            // ...after unmap it does not: the IOMMU faults the write.
            m.unmap().map_err(|e| e.to_string())?;
            edu_dma(&p, edu::BUF, iova, N as u64, edu::CMD_TO_RAM)?;
            let mut all = vec![0u8; mem.len()];
            mem.read(0, &mut all).unwrap();
            let touched = all.iter().filter(|&&x| x != 0x5a).count();
            ensure(touched == 0, || format!("{touched} bytes changed after unmap"))?;
            Ok(format!("iova {iova:#x}: DMA arrived while mapped; after unmap the device's write was blocked, 0 bytes changed"))
        })()
    });

    rep.check("dma-free", {
        (|| -> Result<String, String> {
            a.free(&p).map_err(|e| e.to_string())?;
            b.free(&p).map_err(|e| e.to_string())?;
            let s = p.dma_stats();
            ensure(s.allocations == 0, || format!("{s:?}"))?;
            // Unknown regions are refused.
            let r = p.dma_free(mlx5::DmaRegion {
                cpu: std::ptr::NonNull::dangling(),
                iova: 0x1234_5000,
                len: 64,
            });
            ensure(r.is_err(), || "a bogus region was accepted".into())?;
            Ok(format!(
                "both returned; {} chunk(s) still mapped for reuse; bogus free refused",
                s.chunks
            ))
        })()
    });

    rep.check("driver-over-vfio", {
        // The driver's bring-up through this very Platform: on a non-mlx5 function it must fail
        // with an error, not hang or crash.
        let cfg = DeviceConfig {
            fw_pre_init_timeout_ms: 500,
            fw_init_timeout_ms: 500,
            cmd_timeout_ms: 500,
            reclaim_timeout_ms: 500,
            bar_size: p.bar_size(),
            ..DeviceConfig::default()
        };
        let t = Instant::now();
        let r = mlx5::Device::open(p, cfg);
        let ms = t.elapsed().as_millis();
        match r {
            Err(e) => Ok(format!(
                "Device::open on edu failed cleanly after {ms} ms: {e}"
            )),
            Ok(d) => {
                let _ = d.close();
                Err("Device::open succeeded on a non-mlx5 device".into())
            }
        }
        // `p` was moved into Device::open and dropped with the error: teardown ran.
    });

    rep.check("reopen-after-teardown", {
        (|| -> Result<String, String> {
            let p = VfioPlatform::open(bdf, &edu_opts()).map_err(|e| e.to_string())?;
            let id = rd(&p, edu::ID);
            wr(&p, edu::LIVENESS, 0x600d_f00d);
            let l = rd(&p, edu::LIVENESS);
            ensure(id & 0xffff == 0xed && l == !0x600d_f00d, || {
                format!("id {id:#x} liveness {l:#x}")
            })?;
            drop(p);
            Ok(format!(
                "group released by teardown and reopened; id {id:#010x}, BAR live"
            ))
        })()
    });

    rep.check("errors-are-clear", {
        (|| -> Result<String, String> {
            let e = mlx5_vfio::open_device(bdf, &edu_opts(), DeviceConfig::default())
                .err()
                .ok_or("open_device accepted edu")?;
            ensure(matches!(e, VfioError::NotMlx5 { vendor: 0x1234, .. }), || e.to_string())?;
            let e = VfioPlatform::open("0000:7f:1f.7", &edu_opts()).err().ok_or("bogus BDF opened")?;
            ensure(matches!(e, VfioError::NoSuchDevice { .. }), || e.to_string())?;
            // The host bridge is bound to no driver: the message must say how to bind it.
            let e = VfioPlatform::open("0000:00:00.0", &edu_opts()).err().ok_or("host bridge opened")?;
            let s = e.to_string();
            ensure(
                matches!(e, VfioError::NotBoundToVfio { .. }) && s.contains("drivers_probe"),
                || s.clone(),
            )?;
            Ok("NotMlx5 for edu, NoSuchDevice for 0000:7f:1f.7, NotBoundToVfio (with bind commands) for 0000:00:00.0".into())
        })()
    });
}

fn test_nic(rep: &mut Report, bdf: &str, device: u16) {
    let name = if device == 0x10c9 { "igb" } else { "e1000e" };
    let p = match VfioPlatform::open(bdf, &VfioOptions::default()) {
        Ok(p) => p,
        Err(e) => {
            rep.check(&format!("{name}-open"), Err(e.to_string()));
            return;
        }
    };
    let irqs = p.interrupts();
    let msix = irqs.available(IrqKind::MsiX);
    rep.check(&format!("{name}-open"), {
        let st = rd(&p, igb::STATUS);
        ensure(st != u32::MAX && msix >= 2, || {
            format!("STATUS {st:#x}, MSI-X vectors {msix}")
        })
        .map(|()| {
            format!(
                "BAR0 {:#x} bytes mmapped {:x?}, STATUS {st:#010x}, {msix} MSI-X vectors, reset {}",
                p.bar().size(),
                p.bar().mapped(),
                p.info().reset
            )
        })
    });

    rep.check(&format!("{name}-msix"), {
        (|| -> Result<String, String> {
            let n = msix.min(3);
            irqs.enable(IrqKind::MsiX, n).map_err(|e| e.to_string())?;
            let mut counts = Vec::new();
            for v in 0..n as usize {
                // Start from silence: every cause masked and cleared, every eventfd drained
                // (a NIC may signal a cause twice, e.g. at unmask and at set).
                if device == 0x10c9 {
                    wr(&p, igb::EIMC, u32::MAX);
                    wr(&p, igb::EICR, u32::MAX);
                } else {
                    wr(&p, e1000e::IMC, u32::MAX);
                    let _ = rd(&p, e1000e::ICR);
                }
                std::thread::sleep(Duration::from_millis(20));
                for o in 0..n as usize {
                    let _ = irqs.take(o);
                }
                if device == 0x10c9 {
                    // Multiple-vector MSI-X mode: extended cause bit v goes to vector v.
                    wr(&p, igb::GPIE, rd(&p, igb::GPIE) | igb::GPIE_MSIX_MODE);
                    wr(&p, igb::EIMS, 1 << v);
                    wr(&p, igb::EICS, 1 << v);
                } else {
                    // Route the "other" cause to vector v, then set it.
                    wr(&p, e1000e::IVAR, (0x8 | v as u32) << 16 | 1 << 31);
                    wr(&p, e1000e::IMS, e1000e::ICR_OTHER | e1000e::ICR_LSC);
                    wr(&p, e1000e::ICS, e1000e::ICR_OTHER | e1000e::ICR_LSC);
                }
                let got = irqs.wait(v, Duration::from_secs(2)).map_err(|e| e.to_string())?;
                std::thread::sleep(Duration::from_millis(20)); // let a stray one show up
                let others: u64 = (0..n as usize)
                    .filter(|&o| o != v)
                    .map(|o| irqs.take(o).unwrap_or(0))
                    .sum();
                ensure(got >= 1 && others == 0, || {
                    format!("vector {v}: eventfd count {got}, other vectors {others}")
                })?;
                counts.push(got);
            }
            irqs.disable().map_err(|e| e.to_string())?;
            Ok(format!(
                "{n} vectors enabled; each raised by the device arrived on its own eventfd (counts {counts:?}); disabled"
            ))
        })()
    });

    rep.check(&format!("{name}-dma-map"), {
        (|| -> Result<String, String> {
            let big = DmaBuf::alloc(&p, 64 << 10, 4096).map_err(|e| e.to_string())?;
            let huge = DmaBuf::alloc(&p, 5 << 20, 2 << 20).map_err(|e| e.to_string())?;
            let s = p.dma_stats();
            let (i1, i2) = (big.iova(), huge.iova());
            big.free(&p).map_err(|e| e.to_string())?;
            huge.free(&p).map_err(|e| e.to_string())?;
            let after = p.dma_stats();
            ensure(i2 % (2 << 20) == 0 && after.chunks == 1, || format!("{s:?} -> {after:?}"))?;
            Ok(format!(
                "64 KiB at {i1:#x}, 5 MiB at {i2:#x} ({} chunks, {} on hugepages, {} KiB pinned); after free {} chunk kept",
                s.chunks,
                s.huge_chunks,
                s.mapped_bytes >> 10,
                after.chunks
            ))
        })()
    });
}

/// Prints the backend's log lines (warnings and errors) to stderr.
struct Logger;

impl log::Log for Logger {
    fn enabled(&self, m: &log::Metadata) -> bool {
        // The backend's own lines down to info; other crates' only when they are errors.
        m.level() <= log::Level::Error
            || (m.target().starts_with("mlx5") && m.level() <= log::Level::Info)
    }
    fn log(&self, r: &log::Record) {
        if self.enabled(r.metadata()) {
            eprintln!("[{}] {}", r.level(), r.args());
        }
    }
    fn flush(&self) {}
}

fn main() {
    let _ = log::set_logger(&Logger).map(|()| log::set_max_level(log::LevelFilter::Info));
    let mut rep = Report {
        t0: Instant::now(),
        passed: 0,
        failed: 0,
    };
    let sysfs = Sysfs::system();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut edu, mut nic) = (false, false);
    for arg in &args {
        let bdf = arg.rsplit('/').next().unwrap_or(arg);
        let f = bdf.parse::<PciAddress>().and_then(|a| sysfs.function(&a));
        match f {
            Ok(f) if (f.vendor, f.device) == (0x1234, 0x11e8) => {
                edu = true;
                test_edu(&mut rep, bdf)
            }
            Ok(f) if f.vendor == 0x8086 && matches!(f.device, 0x10c9 | 0x10d3) => {
                nic = true;
                test_nic(&mut rep, bdf, f.device)
            }
            Ok(f) => println!(
                "VFIOTEST: skipping {bdf} ({:04x}:{:04x})",
                f.vendor, f.device
            ),
            Err(e) => {
                rep.check("arguments", Err(format!("{arg}: {e}")));
            }
        }
    }
    rep.check("devices-present", {
        ensure(edu && nic, || {
            format!("edu found {edu}, MSI-X NIC found {nic}")
        })
        .map(|()| "edu and an MSI-X NIC".into())
    });
    println!("{} passed, {} failed", rep.passed, rep.failed);
    std::process::exit(if rep.failed == 0 { 0 } else { 1 });
}
