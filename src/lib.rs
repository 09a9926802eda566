//! `mlx5`: a `no_std` kernel-bypass driver for NVIDIA/Mellanox ConnectX-5 (mlx5) RoCE NICs.
//!
//! The driver maps nothing and allocates nothing by itself: everything it needs from its
//! environment goes through one [`Platform`] boundary (BAR0 access, DMA memory, a clock). With
//! it, [`Device::open`] drives the firmware command interface from reset to a usable RoCE port.
//!
//! Layers (docs/architecture.md):
//! * [`mlx5_ifc`]: the hardware interface as data (bit-exact layouts, opcodes, statuses);
//! * [`io`]: the single `unsafe` module (DMA memory, MMIO, barriers);
//! * [`cmd`], [`pages`], [`hca`], [`uar`], [`pd`], [`vport`]: one module per hardware object;
//! * [`Device`]: bring-up, teardown, capabilities and the verbs view of them.
#![cfg_attr(not(feature = "std"), no_std)]
#![deny(unsafe_code)]
#![deny(missing_docs)]

#[allow(unsafe_code)]
pub mod io;
pub use io::platform;

pub mod caps;
pub mod cmd;
pub mod cq;
mod cq_clean;
pub mod cq_poll;
mod cqe;
pub mod device;
pub mod eq;
pub mod error;
pub mod hca;
pub mod mr;
pub mod pages;
pub mod pd;
pub mod qp;
pub mod quarantine;
pub mod queue;
pub mod srq;
pub mod uar;
pub mod vport;
pub mod wqe;

pub use caps::{Caps, DeviceAttr};
pub use cq_poll::{Wc, WcOpcode, WcStatus};
pub use device::{BringUp, Device, DeviceConfig, FwVersion};
pub use error::{DeadCause, Error, Result, Wait};
pub use mr::{MemoryRegion, MrAccess};
pub use platform::{DmaRegion, Platform, PlatformError};
pub use quarantine::Quarantined;

pub use mlx5_ifc as ifc;

#[cfg(feature = "sim")]
pub use io::sim::SimPlatform;
#[cfg(feature = "sim")]
pub use mlx5_sim as sim;
