//! The bootable image's program: from the PVH entry to a verdict.
//!
//! 1. Console, IDT, PICs masked; the PVH start info copied out (its memory is reused).
//! 2. The TSC's rate (CPUID 0x15, else the PIT).
//! 3. ACPI's MCFG → ECAM; PCI enumerated through ECAM and checked against 0xCF8/0xCFC; every
//!    15b3:1017 / 15b3:1018 taken: BAR0 sized, memory space and bus mastering on.
//! 4. Page tables with memory types: RAM write-back, BARs uncached, a write-combining alias of
//!    each BAR0 for BlueFlame; the PAT programmed.
//! 5. Local APIC and its timer; each NIC's MSI-X entry 0 routed to a vector of its own.
//! 6. Each NIC brought up on a [`BareMetal`] platform over the static arenas.
//! 7. With two NICs: the demo ([`demo`]) and TCP/IP over smoltcp ([`net`]); then each NIC
//!    closed, its pages and objects given back, and the verdict.

mod clock;
pub mod console;
pub mod demo;
pub mod events;
pub mod irq;
pub mod net;
pub mod peer;
pub mod pingpong;
pub mod stack;
pub mod verdict;

use mlx5::{Device, DeviceConfig};

use crate::acpi;
use crate::metal::platform::{BareMetal, TscClock};
use crate::metal::x86::{self, Arenas, EcamConfig, MappedBar, PhysMem, PortConfig};
use crate::pci::{self, Bdf, ConfigAccess, Function};
use crate::pvh::{MemKind, StartInfo};
use verdict::{check, fail, ok};

/// ConnectX-5 PF and VF device IDs (vendor 0x15b3).
const CX5_IDS: [u16; 2] = [0x1017, 0x1018];
/// NICs the image drives at most.
const MAX_NICS: usize = 2;
/// DMA and host memory each NIC's platform gets.
const DMA_PER_NIC: usize = 16 << 20;
const HOST_PER_NIC: usize = 1 << 20;

/// A NIC found on PCI.
#[derive(Debug, Clone, Copy)]
struct Found {
    f: Function,
    bar: pci::Bar,
    msix: pci::MsixInfo,
}

/// From `kmain`: never returns (QEMU exits with the verdict).
pub fn main(start_info: u64) -> ! {
    let t_kmain = x86::rdtsc();
    x86::paint_stack();
    console::init();
    x86::install_idt();
    irq::mask_pic();
    crate::say!("\nmlx5 unikernel: booted through PVH, start info at {start_info:#x}");
    let Some((hz, how)) = clock::tsc_hz() else {
        fail(
            "tsc-clock",
            format_args!("neither CPUID 0x15 nor the PIT gave the TSC's rate"),
        );
        verdict::finish();
    };
    let clock = TscClock { hz };
    console::set_clock((hz / 1_000_000).max(1));
    if !clock::tsc_invariant() {
        log::warn!("the CPU does not advertise an invariant TSC: deadlines assume it is steady");
    }
    ok(
        "tsc-clock",
        format_args!(
            "{}.{:03} MHz ({how:?}); kmain at {} us after reset",
            hz / 1_000_000,
            hz / 1000 % 1000,
            t_kmain / (hz / 1_000_000).max(1)
        ),
    );
    let info = match StartInfo::read(&PhysMem, start_info) {
        Ok(i) => i,
        Err(e) => {
            fail("pvh-start-info", format_args!("{e}"));
            verdict::finish();
        }
    };
    if let Some(l) = info.cmdline_arg("mlx5.log") {
        log::set_max_level(match l {
            "debug" => log::LevelFilter::Debug,
            "trace" => log::LevelFilter::Trace,
            "warn" => log::LevelFilter::Warn,
            _ => log::LevelFilter::Info,
        });
    }
    ok(
        "pvh-start-info",
        format_args!(
            "{} memory ranges, {} MiB of RAM, RSDP at {:#x}, cmdline {:?}",
            info.memmap.len(),
            info.ram_total() >> 20,
            info.rsdp_paddr,
            info.cmdline.as_str()
        ),
    );
    let code = run(&info, clock, t_kmain);
    let _ = code;
    verdict::finish()
}

fn run(info: &StartInfo, clock: TscClock, t_kmain: u64) -> Option<()> {
    let per_us = (clock.hz / 1_000_000).max(1);
    let us = |ticks: u64| ticks / per_us;
    // --- page tables: RAM write-back, the rest (ECAM, APIC) uncached; BARs come after PCI ---
    let ram: heapless::Vec<(u64, u64), 32> = info
        .memmap
        .iter()
        .filter(|m| m.kind == MemKind::Ram)
        .map(|m| (m.addr, m.size))
        .collect();
    let image = (0x10_0000u64, x86::image_end());
    check(
        "memory-fits",
        ram.iter().any(|&(s, l)| s <= image.0 && image.1 <= s + l),
        format_args!(
            "the image with its .bss ({:#x}..{:#x}) lies in RAM",
            image.0, image.1
        ),
    );
    if let Err(e) = x86::install_page_tables(&ram, &[]) {
        fail("page-tables", format_args!("{e}"));
        return None;
    }
    // --- PCI -------------------------------------------------------------------------------
    let rsdp = info.rsdp();
    let ecam = rsdp.map(|r| acpi::find_mcfg(&PhysMem, r));
    let ecam = match ecam {
        Some(Ok(e)) => {
            ok(
                "acpi-mcfg",
                format_args!(
                    "ECAM at {:#x}, buses {}..={}",
                    e.base, e.start_bus, e.end_bus
                ),
            );
            Some(EcamConfig {
                base: e.base,
                end_bus: e.end_bus,
            })
        }
        Some(Err(e)) => {
            fail("acpi-mcfg", format_args!("{e}"));
            None
        }
        None => {
            log::warn!("no RSDP: PCI through 0xCF8/0xCFC only");
            None
        }
    };
    let mut funcs = heapless::Vec::<Function, 64>::new();
    let t0 = x86::rdtsc();
    match &ecam {
        Some(e) => pci::enumerate(e, &mut funcs),
        None => pci::enumerate(&PortConfig, &mut funcs),
    };
    let scan_us = us(x86::rdtsc() - t0);
    for f in &funcs {
        log::info!(
            "pci {} {:04x}:{:04x} class {:06x}",
            f.bdf,
            f.vendor,
            f.device,
            f.class
        );
    }
    let nics: heapless::Vec<Function, MAX_NICS> = funcs
        .iter()
        .filter(|f| f.vendor == 0x15b3 && CX5_IDS.contains(&f.device))
        .take(MAX_NICS)
        .copied()
        .collect();
    if !check(
        "pci-enumerate",
        !nics.is_empty(),
        format_args!(
            "{} functions in {scan_us} us, {} ConnectX-5",
            funcs.len(),
            nics.len()
        ),
    ) {
        return None;
    }
    if let Some(e) = &ecam {
        let same = nics
            .iter()
            .all(|f| e.read32(f.bdf, 0) == PortConfig.read32(f.bdf, 0));
        check(
            "pci-ecam-vs-cf8",
            same,
            format_args!("ECAM and 0xCF8/0xCFC read the same IDs"),
        );
    }
    let cfg: &dyn ConfigAccess = match &ecam {
        Some(e) => e,
        None => &PortConfig,
    };
    let mut found = heapless::Vec::<Found, MAX_NICS>::new();
    for f in &nics {
        let bar = match pci::size_bar(cfg, f.bdf, 0) {
            Ok(b) => b,
            Err(e) => {
                fail("pci-bar0", format_args!("{}: {e}", f.bdf));
                continue;
            }
        };
        let msix = match pci::msix(cfg, f.bdf).and_then(|m| m.check_bar0(bar.size).map(|()| m)) {
            Ok(m) => m,
            Err(e) => {
                fail("pci-msix", format_args!("{}: {e}", f.bdf));
                continue;
            }
        };
        pci::enable_bus_master(cfg, f.bdf);
        ok(
            "pci-function",
            format_args!(
                "{} {:04x}:{:04x}: BAR0 {:#x} ({} MiB, {}-bit{}), MSI-X {} entries at BAR0+{:#x}, memory space and bus master on",
                f.bdf,
                f.vendor,
                f.device,
                bar.base,
                bar.size >> 20,
                if bar.is_64 { 64 } else { 32 },
                if bar.prefetchable { ", prefetchable" } else { "" },
                msix.table_size,
                msix.table_offset
            ),
        );
        let _ = found.push(Found { f: *f, bar, msix });
    }
    // --- page tables and memory types --------------------------------------------------------
    let bars: heapless::Vec<(u64, u64), MAX_NICS> =
        found.iter().map(|n| (n.bar.base, n.bar.size)).collect();
    let mapped = match x86::install_page_tables(&ram, &bars) {
        Ok(m) => m,
        Err(e) => {
            fail("page-tables", format_args!("{e}"));
            return None;
        }
    };
    ok(
        "page-tables",
        format_args!(
            "PAT {:#018x}; RAM write-back, BARs uncached, BlueFlame aliases write-combining at {:#x}",
            crate::paging::PAT_VALUE,
            crate::paging::wc_alias(0)
        ),
    );
    // --- interrupts --------------------------------------------------------------------------
    let (apic, timer_rate) = irq::init_lapic(per_us, 1000);
    for (i, n) in found.iter().enumerate() {
        let table = n.bar.base + u64::from(n.msix.table_offset);
        irq::route_msix(cfg, n.f.bdf, &n.msix, table, apic, irq::NIC_BASE + i as u8);
    }
    ok(
        "interrupts",
        format_args!(
            "local APIC {apic} on, timer {timer_rate} ticks/us every 1 ms (vector {:#x}); NIC MSI-X vector 0 -> vectors {:#x}..",
            irq::TIMER,
            irq::NIC_BASE
        ),
    );
    // --- the NICs ----------------------------------------------------------------------------
    let mut arenas = Arenas::take()?;
    // mlx5.blueflame=off: every send rings the doorbell (no write-combining alias).
    let wc = info.cmdline_arg("mlx5.blueflame") != Some("off");
    let mut devs = heapless::Vec::<(Device<BareMetal<TscClock>>, u8, Bdf), MAX_NICS>::new();
    let mut t_up = 0;
    for (i, (n, m)) in found.iter().zip(mapped.iter()).enumerate() {
        let Some(p) = arenas.platform(m, DMA_PER_NIC, HOST_PER_NIC, clock, wc) else {
            fail("arena", format_args!("no room for NIC {i}"));
            continue;
        };
        let p = p.with_pci_device_id(n.f.device);
        let t = x86::rdtsc();
        match bring_up(p, m) {
            Ok(d) => {
                ok(
                    "device-up",
                    format_args!(
                        "{}{}: fw {}, {} firmware commands in {} ms; kmain -> up {} ms; BlueFlame {}",
                        n.f.bdf,
                        match (d.is_vf(), d.vport().random_mac) {
                            (true, true) => " (a VF; no MAC assigned: a random one)",
                            (true, false) => " (a VF)",
                            _ => "",
                        },
                        d.fw_version(),
                        d.bringup().commands,
                        us(x86::rdtsc() - t) / 1000,
                        us(x86::rdtsc() - t_kmain) / 1000,
                        if mlx5::Platform::uar_write_combining(d.platform()) {
                            "on (write-combining alias)"
                        } else {
                            "off"
                        }
                    ),
                );
                let _ = devs.push((d, irq::NIC_BASE + i as u8, n.f.bdf));
                t_up = x86::rdtsc();
            }
            Err(e) => fail("device-up", format_args!("{}: {e}", n.f.bdf)),
        }
    }
    let peer = info.cmdline_arg("mlx5.mode") == Some("peer");
    if peer {
        let args = peer_args(info);
        match (devs.first(), args) {
            (Some(d), Some(pa)) => {
                let nic = demo::Nic {
                    dev: &d.0,
                    vector: d.1,
                };
                if let Err(e) = peer::run(&nic, &pa) {
                    fail("peer", format_args!("{e}"));
                }
            }
            (None, _) => fail("peer", format_args!("no NIC is up")),
            (_, None) => fail(
                "peer",
                format_args!("mlx5.ip=A.B.C.D/N and mlx5.peer=A.B.C.D are needed"),
            ),
        }
    } else if devs.len() == 2 {
        let a = demo::Nic {
            dev: &devs[0].0,
            vector: devs[0].1,
        };
        let b = demo::Nic {
            dev: &devs[1].0,
            vector: devs[1].1,
        };
        match demo::run(&a, &b, 2048, 200) {
            Ok(fig) => report_figures(&fig, per_us, t_kmain, t_up),
            Err(e) => fail("demo", format_args!("{e}")),
        }
        if let Err(e) = net::run(&a, &b) {
            fail("net", format_args!("{e}"));
        }
    } else {
        log::warn!("{} NIC(s) up: the two-NIC runs need two", devs.len());
    }
    for (i, (_, v, _)) in devs.iter().enumerate() {
        check(
            "msix-interrupts",
            irq::count(*v) > 0,
            format_args!("NIC {i}: {} interrupts on vector {v:#x}", irq::count(*v)),
        );
    }
    log::info!(
        "timer interrupts: {}, spurious: {}",
        irq::count(irq::TIMER),
        irq::count(irq::SPURIOUS)
    );
    for (d, _, bdf) in devs {
        let (dma, host) = d.platform().usage();
        let held_before = d.pages_held();
        let (r, q) = d.close_accounted();
        crate::say!(
            "FIGURE dma-high-water-{bdf} {} KiB (peak in use {} KiB)",
            dma.high_water >> 10,
            dma.peak >> 10
        );
        crate::say!(
            "FIGURE host-high-water-{bdf} {} KiB (peak in use {} KiB)",
            host.high_water >> 10,
            host.peak >> 10
        );
        check(
            "device-close",
            r.is_ok() && q.buffers == 0,
            format_args!(
                "{bdf}: closed ({r:?}), {held_before} firmware pages given back, {} regions quarantined; DMA arena high water {} KiB of {} KiB (peak in use {} KiB), host arena {} KiB of {} KiB",
                q.buffers,
                dma.high_water >> 10,
                dma.capacity >> 10,
                dma.peak >> 10,
                host.high_water >> 10,
                host.capacity >> 10
            ),
        );
    }
    let (d, h) = arenas.used();
    let (stack, stack_size) = x86::stack_used();
    crate::say!("FIGURE dma-arena-carved {} KiB", d >> 10);
    crate::say!("FIGURE host-arena-carved {} KiB", h >> 10);
    crate::say!(
        "FIGURE stack-used {} KiB (of {} KiB)",
        stack >> 10,
        stack_size >> 10
    );
    crate::say!("FIGURE net-buffers {} KiB", x86::NET_BYTES >> 10);
    crate::say!("FIGURE image-end {:#x}", x86::image_end());
    Some(())
}

/// The peer mode's arguments from the command line.
fn peer_args(info: &StartInfo) -> Option<peer::PeerArgs> {
    let num = |k: &str, d: u32| {
        info.cmdline_arg(k)
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    Some(peer::PeerArgs {
        ip: peer::parse_ip(info.cmdline_arg("mlx5.ip")?)?,
        peer: peer::parse_ip(info.cmdline_arg("mlx5.peer")?)?.0,
        iters: num("mlx5.iters", 1000),
        size: num("mlx5.size", 4096),
        stream: num("mlx5.stream", 1 << 20) as usize,
    })
}

fn bring_up(
    p: BareMetal<TscClock>,
    bar: &MappedBar,
) -> Result<Device<BareMetal<TscClock>>, mlx5::Error> {
    let config = DeviceConfig {
        bar_size: bar.len(),
        ..DeviceConfig::default()
    };
    Device::open(p, config)
}

fn report_figures(f: &demo::Figures, per_us: u64, t_kmain: u64, t_up: u64) {
    let (n, ticks) = f.writes;
    let us = (ticks / per_us).max(1);
    let fig = |name: &str, v: u64, unit: &str| crate::say!("FIGURE {name} {v} {unit}");
    fig("reset-to-kmain", t_kmain / per_us / 1000, "ms");
    fig(
        "kmain-to-devices-up",
        t_up.saturating_sub(t_kmain) / per_us / 1000,
        "ms",
    );
    fig("reset-to-devices-up", t_up / per_us / 1000, "ms");
    fig(
        "devices-up-to-first-completion",
        f.first_completion_at.saturating_sub(t_up) / per_us,
        "us",
    );
    fig(
        "first-send-to-receive",
        f.first_completion_ticks / per_us,
        "us",
    );
    fig("rc-write-4k-rate", n * 1_000_000 / us, "writes/s");
    fig("rc-write-4k-throughput", n * 4096 / us, "MB/s");
    fig("rc-send-rtt-median", f.round_trips.1 / per_us, "us");
}
