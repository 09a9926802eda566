//! `mlx5`: a `no_std` kernel-bypass driver for NVIDIA/Mellanox ConnectX-5 (mlx5) RoCE NICs.
//!
//! The driver maps nothing and allocates nothing by itself: everything it needs from its
//! environment goes through one [`Platform`] boundary (BAR0 access, DMA memory, host memory, a
//! clock). With it, [`Device::open`] drives the firmware command interface from reset to a
//! usable RoCE port, and the verbs objects — [`pd`], [`mr`], [`cq`], [`srq`], [`qp`] — run RDMA
//! on it.
//!
//! ```
//! use mlx5::qp::{QpCap, QpInitAttr, QpType};
//! use mlx5::sim::{Mode, Profile, SimDevice};
//! use mlx5::{Device, DeviceConfig, SimPlatform};
//!
//! // A simulated ConnectX-5 (any `Platform` will do: VFIO, a unikernel's, ...).
//! let sim = SimDevice::new(Profile::connectx5(), Mode::Sync);
//! let dev = Device::open(SimPlatform::new(sim), DeviceConfig::default())?;
//! let cq = dev.create_cq(64)?;
//! let cap = QpCap {
//!     max_send_wr: 16,
//!     max_recv_wr: 16,
//!     max_send_sge: 1,
//!     max_recv_sge: 1,
//!     max_inline_data: 64,
//! };
//! let qp = dev.create_qp(dev.pd(), &QpInitAttr::new(QpType::Rc, &cq, &cq, cap))?;
//! // Granted sizes are at least what was asked.
//! assert!(qp.cap().max_send_wr >= 16 && qp.cap().max_inline_data >= 64);
//! qp.destroy()?;
//! cq.destroy()?;
//! dev.close()?;
//! # Ok::<(), mlx5::Error>(())
//! ```
//!
//! Layers (docs/architecture.md), one folder each:
//! * [`mlx5_ifc`]: the hardware interface as data (bit-exact layouts, opcodes, statuses);
//! * [`io`]: the single `unsafe` room — the [`Platform`] contract, DMA memory, the host-memory
//!   tables of the driver's bookkeeping, MMIO, barriers;
//! * `fw`: the firmware interface — the command queue, firmware pages, HCA bring-up, EQs,
//!   vport, UAR pages, capabilities, queue memory and its quarantine (private plumbing; its
//!   types that callers see are re-exported here);
//! * [`Device`]: bring-up, teardown, capabilities and the verbs view of them;
//! * `verbs`: the objects RDMA programs use — [`pd`], [`mr`], [`cq`], [`srq`], [`qp`] — and the
//!   work-request tables they share.
#![cfg_attr(not(feature = "std"), no_std)]
#![deny(unsafe_code)]
#![deny(missing_docs)]
#![deny(unreachable_pub)]
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
pub mod raw;
mod verbs;

pub use verbs::{cq, mr, pd, qp, srq};

pub use device::{BringUp, Device, DeviceConfig, FwVersion, MAX_GIDS};
pub use error::{DeadCause, Error, Result, Wait};
pub use fw::caps::{AtomicCap, Caps, DeviceAttr};
pub use fw::eq::Event;
pub use fw::pages::{PageRequest, PageStats};
pub use fw::quarantine::Quarantined;
pub use fw::uar::Uar;
pub use fw::vport::{GidEntry, PortState, VportInfo};
pub use io::platform::{DmaRegion, Platform, PlatformError};
pub use mr::{MemoryRegion, MrAccess};
pub use verbs::cq::{Wc, WcFlags, WcOpcode, WcStatus};

pub use mlx5_ifc as ifc;

#[cfg(feature = "sim")]
pub use io::sim::SimPlatform;
#[cfg(feature = "sim")]
pub use mlx5_sim as sim;
