//! `mlx5`: a `no_std` kernel-bypass driver for NVIDIA/Mellanox ConnectX-5 (mlx5) RoCE NICs.
//!
//! The driver maps nothing and allocates nothing by itself: everything it needs from its
//! environment goes through one [`Platform`] boundary (BAR0 access, DMA memory, host memory, a
//! clock). With it, [`Device::open`] drives the firmware command interface from reset to a
//! usable RoCE port, and the verbs objects — [`pd`], [`mr`], [`cq`], [`srq`], [`qp`] — run RDMA
//! on it.
//!
//! # A first RDMA program
//!
//! The verbs API, step by step, on the simulated ConnectX-5 (`mlx5::sim`, features `sim` and
//! `std`: `cargo test --doc -p mlx5 --features std,sim` runs these examples). Only the lines
//! that make a `SimPlatform` know it is a simulator; with a VFIO function or a unikernel's
//! [`Platform`] the rest is the same. The whole program, with a thousand round trips:
//! `tools/examples/rc_ping.rs` (`cargo run -p mlx5-tools --example rc_ping`).
//!
//! **Open a device.** [`Device::open`] brings the function up from reset (firmware pages, HCA,
//! EQs, RoCE, a GID, the device's protection domain); [`Device::close`] tears it down.
//!
//! ```
//! use mlx5::sim::{Mode, Profile, SimDevice};
//! use mlx5::{Device, DeviceConfig, SimPlatform};
//!
//! let sim = SimDevice::new(Profile::connectx5(), Mode::Sync);
//! let dev = Device::open(SimPlatform::new(sim), DeviceConfig::default())?;
//! let attr = dev.device_attr(); // what `ibv_query_device` reports
//! assert!(attr.max_qp > 0 && attr.max_cqe > 0);
//! dev.close()?;
//! # Ok::<(), mlx5::Error>(())
//! ```
//!
//! **Memory, a CQ and a QP.** The device's PD ([`Device::pd`]) scopes a registered buffer
//! ([`MemoryRegion`], `ibv_reg_mr`) and the QPs; a QP's sends and receives complete on CQs
//! ([`cq::Cq`]); the QP is sized from a [`qp::QpCap`] and gets at least what it asks for.
//!
//! ```
//! # use mlx5::sim::{Mode, Profile, SimDevice};
//! # use mlx5::{Device, DeviceConfig, SimPlatform};
//! use mlx5::qp::{QpCap, QpInitAttr, QpType};
//! use mlx5::MrAccess;
//!
//! # let dev = Device::open(SimPlatform::new(SimDevice::new(Profile::connectx5(), Mode::Sync)),
//! #     DeviceConfig::default())?;
//! let mr = dev.alloc_mr(dev.pd(), 4096, MrAccess::LOCAL)?;
//! let cq = dev.create_cq(64)?;
//! let cap = QpCap {
//!     max_send_wr: 16,
//!     max_recv_wr: 16,
//!     max_send_sge: 1,
//!     max_recv_sge: 1,
//!     max_inline_data: 64,
//! };
//! let qp = dev.create_qp(dev.pd(), &QpInitAttr::new(QpType::Rc, &cq, &cq, cap))?;
//! assert!(qp.cap().max_send_wr >= 16 && qp.cap().max_inline_data >= 64);
//! // Objects go in the reverse order (dropping them destroys them too).
//! qp.destroy()?;
//! cq.destroy()?;
//! drop(mr);
//! dev.close()?;
//! # Ok::<(), mlx5::Error>(())
//! ```
//!
//! **Connect two QPs, send, poll.** Two devices on one simulated wire; each QP learns the
//! other's [`qp::QpEndpoint`] (what two hosts exchange out of band: QPN, PSN, GID, MAC) and
//! [`qp::Qp::connect`] takes it through INIT, RTR and RTS. A receive is posted before the
//! SEND that fills it; both complete on their CQs ([`cq::Cq::poll`] → [`Wc`]).
//!
//! ```
//! use mlx5::qp::{ConnectOpts, QpCap, QpInitAttr, QpType, RecvWr, SendWr, Sge};
//! use mlx5::sim::{Fabric, Mode, Profile, SimDevice};
//! use mlx5::{Device, DeviceConfig, MrAccess, Platform, SimPlatform, Wc, WcStatus};
//!
//! let fabric = Fabric::new();
//! let open = |mac: u8| {
//!     let sim = SimDevice::new(Profile::connectx5().with_mac([2, 0, 0, 0, 0, mac]), Mode::Sync);
//!     fabric.attach(&sim).expect("a new device attaches");
//!     Device::open(SimPlatform::new(sim), DeviceConfig::default())
//! };
//! let (a, b) = (open(1)?, open(2)?);
//! let cap = QpCap { max_send_wr: 4, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1,
//!     max_inline_data: 0 };
//! let (cqa, cqb) = (a.create_cq(16)?, b.create_cq(16)?);
//! let (mra, mrb) = (a.alloc_mr(a.pd(), 4096, MrAccess::LOCAL)?,
//!     b.alloc_mr(b.pd(), 4096, MrAccess::LOCAL)?);
//! let mut qa = a.create_qp(a.pd(), &QpInitAttr::new(QpType::Rc, &cqa, &cqa, cap))?;
//! let mut qb = b.create_qp(b.pd(), &QpInitAttr::new(QpType::Rc, &cqb, &cqb, cap))?;
//! let (ea, eb) = (qa.endpoint(), qb.endpoint());
//! qa.connect(&eb, &ConnectOpts::default())?;
//! qb.connect(&ea, &ConnectOpts::default())?;
//!
//! // B posts a receive buffer; A sends "ping" from its registered memory.
//! let into = [Sge { addr: mrb.addr(), length: 64, lkey: mrb.lkey() }];
//! qb.post_recv(&[RecvWr { wr_id: 7, sg_list: &into }])?;
//! mra.write(0, b"ping")?;
//! let from = [Sge { addr: mra.addr(), length: 4, lkey: mra.lkey() }];
//! qa.post_send(&[SendWr::send(1, &from)])?;
//!
//! // Poll each CQ until its completion arrives (bounded).
//! let wait = |dev: &Device<SimPlatform>, cq: &mlx5::cq::Cq<'_, SimPlatform>| -> mlx5::Result<Wc> {
//!     let mut wc = [Wc::default()];
//!     for _ in 0..1_000_000 {
//!         if cq.poll(&mut wc)? == 1 {
//!             return Ok(wc[0]);
//!         }
//!         dev.platform().relax();
//!     }
//!     panic!("no completion");
//! };
//! let got = wait(&b, &cqb)?;
//! assert_eq!((got.wr_id, got.status, got.byte_len), (7, WcStatus::Success, 4));
//! let mut text = [0u8; 4];
//! mrb.read(0, &mut text)?;
//! assert_eq!(&text, b"ping");
//! assert_eq!(wait(&a, &cqa)?.wr_id, 1); // A's SEND completed
//!
//! drop((qa, qb)); // a QP borrows its CQs: it goes first
//! drop((mra, mrb, cqa, cqb));
//! a.close()?;
//! b.close()?;
//! # Ok::<(), mlx5::Error>(())
//! ```
//!
//! Beyond the verbs: an Ethernet port for plain frames and smoltcp ([`eth::EthPort`]), an
//! rdma_cm-compatible connection manager over QP1 ([`cm::Cm`]); the plumbing tools and tests
//! use is in `mlx5::raw` (cargo feature `raw`), which promises nothing.
//!
//! Layers (docs/architecture.md), one folder each:
//! * [`mlx5_ifc`]: the hardware interface as data (bit-exact layouts, opcodes, statuses);
//! * [`io`]: the one room of code the compiler cannot check (Cargo.toml denies it elsewhere) —
//!   the [`Platform`] contract, DMA memory, the host-memory tables of the driver's bookkeeping,
//!   MMIO, barriers;
//! * `fw`: the firmware interface — the command queue, firmware pages, HCA bring-up, EQs,
//!   vport, UAR pages, capabilities, queue memory and its quarantine (private plumbing; its
//!   types that callers see are re-exported here);
//! * [`Device`]: bring-up, teardown, capabilities and the verbs view of them;
//! * `verbs`: the objects RDMA programs use — [`pd`], [`mr`], [`cq`], [`srq`], [`qp`] — and the
//!   work-request tables they share;
//! * [`eth`] and [`cm`]: the Ethernet port and the connection manager, on the verbs;
//! * `raw` (cargo feature `raw`, off by default): plumbing for diagnostics, benches, fuzz
//!   targets and tests, with no stability promise.
#![cfg_attr(not(feature = "std"), no_std)]
#![deny(missing_docs)]
#![deny(unreachable_pub)]
// Without the `raw` feature, the plumbing only `mlx5::raw` exposes (the CM's MAD layouts field by
// field, the Ethernet port's objects one by one, ring geometries) has no user in the crate. Builds
// with `raw` (the workspace's: its tools and tests ask for it) still catch dead code.
#![cfg_attr(
    not(feature = "raw"),
    allow(
        dead_code,
        unused_imports,
        unreachable_pub,
        clippy::wrong_self_convention
    )
)]
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod cm;
mod device;
mod error;
pub mod eth;
mod fw;
pub mod io;
#[cfg(feature = "raw")]
pub mod raw;
mod verbs;

pub use verbs::{cq, mr, pd, qp, srq};

pub use device::{BringUp, Device, DeviceConfig, FwVersion, MAX_GIDS};
pub use error::{DeadCause, Error, Result, Wait};
pub use fw::bfreg::BfregUse;
pub use fw::caps::{AtomicCap, Caps, DeviceAttr};
pub use fw::eq::Event;
pub use fw::pages::{PageRequest, PageStats};
pub use fw::quarantine::Quarantined;
pub use fw::vport::{GidEntry, PortState, VportInfo};
pub use io::platform::{DmaRegion, Platform, PlatformError};
pub use mr::{MemoryRegion, MrAccess};
pub use verbs::cq::{Wc, WcFlags, WcOpcode, WcStatus};

pub use mlx5_ifc as ifc;

#[cfg(feature = "sim")]
pub use io::sim::SimPlatform;
#[cfg(feature = "sim")]
pub use mlx5_sim as sim;
