//! Errors of the simulator's host-side API (profiles, DMA memory).
//!
//! Device-side failures are never errors of this kind: the simulated firmware reports them the
//! way a real one does (delivery status, command status and syndrome, health buffer) and records
//! DMA translation faults in [`crate::SimDevice::dma_faults`].

use std::fmt;

/// What a host-side call of the simulator refused, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SimError {
    /// A profile JSON key names no `cmd_hca_cap` / `roce_cap` field and no profile setting.
    UnknownProfileKey {
        /// The key as written.
        key: String,
    },
    /// A profile value does not fit the field it sets.
    ProfileValueTooWide {
        /// The key as written.
        key: String,
        /// The value that was refused.
        value: u64,
        /// The field's width in bits.
        width: u32,
    },
    /// A profile value has the wrong JSON type.
    ProfileValueType {
        /// The key as written.
        key: String,
        /// What the key takes.
        expected: &'static str,
    },
    /// A profile `base` names no built-in profile.
    UnknownProfile {
        /// The name given.
        name: String,
    },
    /// The profile text is not a JSON object.
    ProfileJson {
        /// The parser's complaint.
        reason: String,
    },
    /// The profile file could not be read.
    ProfileFile {
        /// The path given.
        path: String,
        /// The I/O error.
        reason: String,
    },
    /// `dma_alloc` of zero bytes.
    DmaZeroLength,
    /// `dma_alloc` alignment not a power of two or above 2 MiB.
    DmaBadAlign {
        /// The alignment asked for.
        align: usize,
    },
    /// `dma_alloc` would exceed the simulator's DMA memory budget.
    DmaExhausted {
        /// Bytes asked for.
        len: usize,
        /// Bytes mapped already.
        mapped: usize,
        /// The budget.
        limit: usize,
    },
    /// `dma_free` of an IOVA that is not the start of a live allocation.
    DmaUnknownIova {
        /// The IOVA given.
        iova: u64,
    },
    /// A host-side `dma_read` / `dma_write` touched memory outside every live allocation.
    DmaUnmapped {
        /// First byte.
        iova: u64,
        /// Length of the access.
        len: usize,
    },
    /// `dma_map_external` of no bytes' worth of memory, of memory shorter than the range, of a
    /// range that wraps or overlaps a live mapping.
    DmaMapRefused {
        /// The IOVA given.
        iova: u64,
        /// The length given.
        len: usize,
    },
    /// `Fabric::attach` of a device that is on another shared fabric already.
    FabricAlreadyAttached,
    /// A port with this MAC is on the fabric already.
    DuplicateMac {
        /// The MAC.
        mac: [u8; 6],
    },
    /// `Fabric::attach` of a device whose mode differs from the fabric's devices'.
    FabricModeMismatch {
        /// The mode of the devices on the fabric.
        fabric: crate::mode::Mode,
        /// The mode of the device.
        device: crate::mode::Mode,
    },
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownProfileKey { key } => write!(f, "unknown profile key \"{key}\""),
            Self::ProfileValueTooWide { key, value, width } => {
                write!(f, "value {value} does not fit {key} ({width} bits)")
            }
            Self::ProfileValueType { key, expected } => {
                write!(f, "profile key \"{key}\" takes {expected}")
            }
            Self::UnknownProfile { name } => write!(f, "unknown profile \"{name}\""),
            Self::ProfileJson { reason } => write!(f, "profile is not a JSON object: {reason}"),
            Self::ProfileFile { path, reason } => write!(f, "cannot read profile {path}: {reason}"),
            Self::DmaZeroLength => write!(f, "DMA allocation of zero bytes"),
            Self::DmaBadAlign { align } => {
                write!(f, "DMA alignment {align:#x} is not a power of two up to 2 MiB")
            }
            Self::DmaExhausted { len, mapped, limit } => write!(
                f,
                "DMA allocation of {len:#x} bytes exceeds the budget ({mapped:#x} of {limit:#x} bytes mapped)"
            ),
            Self::DmaUnknownIova { iova } => write!(f, "DMA free of unknown iova {iova:#x}"),
            Self::DmaMapRefused { iova, len } => write!(
                f,
                "external DMA mapping of {len:#x} bytes at iova {iova:#x} refused (empty, shorter than its memory, wrapping, or overlapping a live mapping)"
            ),
            Self::DmaUnmapped { iova, len } => {
                write!(f, "host access of {len:#x} bytes at iova {iova:#x} is outside every DMA mapping")
            }
            Self::DuplicateMac { mac } => write!(
                f,
                "a port with MAC {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x} is on the fabric already (give each profile its own \"_mac\")",
                mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]
            ),
            Self::FabricAlreadyAttached => {
                write!(f, "the device is attached to another fabric already")
            }
            Self::FabricModeMismatch { fabric, device } => write!(
                f,
                "a {device:?} device cannot join a fabric of {fabric:?} devices"
            ),
        }
    }
}

impl std::error::Error for SimError {}
