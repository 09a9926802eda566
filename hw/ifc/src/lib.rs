//! The ConnectX (mlx5) hardware interface as data.
//!
//! * [`prm`]: every PRM structure the driver and simulator exchange (commands, contexts, the
//!   initialization segment, mailboxes, capabilities) as typed layouts at their `mlx5_ifc` bit
//!   offsets, generated from the reference facts in `reference/mlx5_ifc_offsets.json`.
//! * [`layout`]: the field and view types those layouts are made of; setters never truncate.
//! * [`endian`]: big-endian device words as types ([`Be32`], [`Be64`]).
//! * [`opcode`], [`status`], [`consts`], [`regs`]: opcodes, statuses and syndromes, field
//!   encodings, BAR0 register offsets.
//!
//! The crate is `no_std` and has no `unsafe` code; it depends only on `bitfield`.
#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

#[cfg(test)]
extern crate std;

pub mod cmd;
pub mod consts;
pub mod endian;
pub mod layout;
pub mod opcode;
pub mod prm;
pub mod regs;
pub mod status;

pub use endian::{Be16, Be32, Be64};
pub use layout::{Bytes, Field, FieldInfo, FieldKind, Layout, LayoutError, Nested, View, ViewMut};
pub use opcode::{opcode_name, Opcode};
pub use status::{CmdStatus, DeliveryStatus, HealthSyndrome};

pub use cmd::{CmdInHeader, CmdOutHeader};
