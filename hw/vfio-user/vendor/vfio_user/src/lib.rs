// Copyright © 2021 Intel Corporation
//
// SPDX-License-Identifier: Apache-2.0
//

use bitflags::bitflags;
use libc::{c_void, iovec, EINVAL};
use libc::{sysconf, _SC_PAGESIZE};
use std::ffi::CString;
use std::fs::File;
use std::io::{IoSlice, Read, Write};
use std::mem::size_of;
use std::num::Wrapping;
use std::os::fd::OwnedFd;
use std::os::unix::{
    io::{FromRawFd, RawFd},
    net::{UnixListener, UnixStream},
};
use std::path::{Path, PathBuf};
use thiserror::Error;
use vfio_bindings::bindings::vfio::*;
use vm_memory::{ByteValued, FileOffset};
use vmm_sys_util::sock_ctrl_msg::ScmSocket;

#[macro_use]
extern crate serde_derive;

#[macro_use]
extern crate log;

mod client;
mod server;

pub use server::{Server, ServerRegion, SparseArea};

#[allow(dead_code)]
#[repr(u16)]
#[derive(Clone, Copy, Debug, Default, enumn::N)]
pub enum Command {
    #[default]
    Unknown = 0,
    Version = 1,
    DmaMap = 2,
    DmaUnmap = 3,
    DeviceGetInfo = 4,
    DeviceGetRegionInfo = 5,
    GetRegionIoFds = 6,
    GetIrqInfo = 7,
    SetIrqs = 8,
    RegionRead = 9,
    RegionWrite = 10,
    DmaRead = 11,
    DmaWrite = 12,
    DeviceReset = 13,
    UserDirtyPages = 14,
}

#[allow(dead_code)]
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
enum HeaderFlags {
    #[default]
    Command = 0,
    Reply = 1,
    NoReply = 1 << 4,
    Error = 1 << 5,
}

#[repr(C)]
#[derive(Default, Clone, Copy, Debug)]
struct Header {
    message_id: u16,
    command: u16,
    message_size: u32,
    flags: u32,
    error: u32,
}

impl Header {
    fn no_reply(&self) -> bool {
        self.flags & HeaderFlags::NoReply as u32 != 0
    }
}

#[repr(C)]
#[derive(Default, Clone, Copy, Debug)]
struct Version {
    header: Header,
    major: u16,
    minor: u16,
}

#[derive(Serialize, Deserialize, Debug)]
struct MigrationCapabilities {
    pgsize: u32,
}

const fn default_max_msg_fds() -> u32 {
    1
}

const fn default_max_data_xfer_size() -> u32 {
    1048576
}

/// The most capability data a VERSION message may carry (the JSON and its NUL). Larger is
/// refused, its bytes skipped, without allocating what the client claims.
const MAX_VERSION_DATA: usize = 64 << 10;

/// Reads and drops `len` bytes of `stream`: the payload of a message refused for its size, so
/// that the next message is parsed from its header. Bounded memory whatever `len` is.
fn skip(stream: &mut UnixStream, len: u64) -> Result<(), Error> {
    let skipped = std::io::copy(&mut Read::by_ref(stream).take(len), &mut std::io::sink())
        .map_err(Error::StreamRead)?;
    if skipped < len {
        return Err(Error::StreamRead(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("payload of {len} bytes to skip: the stream ended after {skipped}"),
        )));
    }
    Ok(())
}

/// Lets at most `BURST` error lines a second through; counts the rest, and tells how many
/// with the next line let through (a client's stream of bad messages cannot flood the log).
struct LogLimit {
    window: std::time::Instant,
    in_window: u32,
    suppressed: u64,
}

impl LogLimit {
    const BURST: u32 = 10;

    fn new() -> Self {
        LogLimit {
            window: std::time::Instant::now(),
            in_window: 0,
            suppressed: 0,
        }
    }

    /// `Some(lines suppressed since the last let through)` when a line may be logged now.
    fn allow(&mut self) -> Option<u64> {
        if self.window.elapsed() >= std::time::Duration::from_secs(1) {
            self.window = std::time::Instant::now();
            self.in_window = 0;
        }
        if self.in_window < Self::BURST {
            self.in_window += 1;
            Some(std::mem::take(&mut self.suppressed))
        } else {
            self.suppressed += 1;
            None
        }
    }
}

#[inline(always)]
fn pagesize() -> u32 {
    // SAFETY: sysconf
    unsafe { sysconf(_SC_PAGESIZE) as u32 }
}

fn default_migration_capabilities() -> MigrationCapabilities {
    MigrationCapabilities { pgsize: pagesize() }
}

bitflags! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct DmaMapFlags: u32 {
        const READ = 1 << 0;
        const WRITE = 1 << 1;
        const READ_WRITE = Self::READ.bits() | Self::WRITE.bits();

        // There might be unknown bits and we don't want bitflags to clear them.
        const _ = !0;
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct DmaUnmapFlags: u32 {
        const GET_DIRTY_PAGE_INFO = 1 << 1;
        const UNMAP_ALL = 1 << 2;

        // See above.
        const _ = !0;
    }
}

#[repr(C)]
#[derive(Default, Clone, Copy, Debug)]
struct DmaMap {
    header: Header,
    argsz: u32,
    flags: u32,
    offset: u64,
    address: u64,
    size: u64,
}

#[repr(C)]
#[derive(Default, Clone, Copy, Debug)]
struct DmaUnmap {
    header: Header,
    argsz: u32,
    flags: u32,
    address: u64,
    size: u64,
}

#[repr(C)]
#[derive(Default, Clone, Copy, Debug)]
struct DeviceGetInfo {
    header: Header,
    argsz: u32,
    flags: u32,
    num_regions: u32,
    num_irqs: u32,
}

#[repr(C)]
#[derive(Default, Clone, Copy, Debug)]
struct DeviceGetRegionInfo {
    header: Header,
    region_info: vfio_region_info,
}

#[repr(C)]
#[derive(Default, Clone, Copy, Debug)]
struct RegionAccess {
    header: Header,
    offset: u64,
    region: u32,
    count: u32,
}

#[repr(C)]
#[derive(Default, Clone, Copy, Debug)]
struct GetIrqInfo {
    header: Header,
    argsz: u32,
    flags: u32,
    index: u32,
    count: u32,
}

#[repr(C)]
#[derive(Default, Clone, Copy, Debug)]
struct SetIrqs {
    header: Header,
    argsz: u32,
    flags: u32,
    index: u32,
    start: u32,
    count: u32,
}

#[repr(C)]
#[derive(Default, Clone, Copy, Debug)]
struct DeviceReset {
    header: Header,
}

// SAFETY: data structure only contain a series of integers
unsafe impl ByteValued for Header {}
// SAFETY: data structure only contain a series of integers
unsafe impl ByteValued for Version {}
// SAFETY: data structure only contain a series of integers
unsafe impl ByteValued for DmaMap {}
// SAFETY: data structure only contain a series of integers
unsafe impl ByteValued for DmaUnmap {}
// SAFETY: data structure only contain a series of integers
unsafe impl ByteValued for DeviceGetInfo {}
// SAFETY: data structure only contain a series of integers
unsafe impl ByteValued for DeviceGetRegionInfo {}
// SAFETY: data structure only contain a series of integers
unsafe impl ByteValued for RegionAccess {}
// SAFETY: data structure only contain a series of integers
unsafe impl ByteValued for GetIrqInfo {}
// SAFETY: data structure only contain a series of integers
unsafe impl ByteValued for SetIrqs {}
// SAFETY: data structure only contain a series of integers
unsafe impl ByteValued for DeviceReset {}

#[derive(Serialize, Deserialize, Debug)]
struct Capabilities {
    #[serde(default = "default_max_msg_fds")]
    max_msg_fds: u32,
    #[serde(default = "default_max_data_xfer_size")]
    max_data_xfer_size: u32,
    #[serde(default = "default_migration_capabilities")]
    migration: MigrationCapabilities,
}

#[derive(Serialize, Deserialize, Debug, Default)]
struct CapabilitiesData {
    capabilities: Capabilities,
}

impl Default for Capabilities {
    fn default() -> Self {
        Self {
            max_msg_fds: default_max_msg_fds(),
            max_data_xfer_size: default_max_data_xfer_size(),
            migration: default_migration_capabilities(),
        }
    }
}

pub struct Client {
    stream: UnixStream,
    next_message_id: Wrapping<u16>,
    num_irqs: u32,
    resettable: bool,
    regions: Vec<Region>,
}

#[derive(Debug)]
pub struct Region {
    pub flags: u32,
    pub index: u32,
    pub size: u64,
    pub file_offset: Option<FileOffset>,
    pub sparse_areas: Vec<vfio_region_sparse_mmap_area>,
}

#[derive(Clone, Copy, Debug)]
pub struct IrqInfo {
    pub index: u32,
    pub flags: u32,
    pub count: u32,
}

#[derive(Error, Debug)]
pub enum Error {
    #[error("Error connecting: {0}")]
    Connect(#[source] std::io::Error),
    #[error("Error serializing capabilities: {0}")]
    SerializeCapabilites(#[source] serde_json::Error),
    #[error("Error deserializing capabilities: {0}")]
    DeserializeCapabilites(#[source] serde_json::Error),
    #[error("Error writing to stream: {0}")]
    StreamWrite(#[source] std::io::Error),
    #[error("Error reading from stream: {0}")]
    StreamRead(#[source] std::io::Error),
    #[error("Error shutting down stream: {0}")]
    StreamShutdown(#[source] std::io::Error),
    #[error("Error writing with file descriptors: {0}")]
    SendWithFd(#[source] vmm_sys_util::errno::Error),
    #[error("Error reading with file descriptors: {0}")]
    ReceiveWithFd(#[source] vmm_sys_util::errno::Error),
    #[error("Not a PCI device")]
    NotPciDevice,
    #[error("Socket path already exists")]
    SocketPathExists,
    #[error("Error binding to socket: {0}")]
    SocketBind(#[source] std::io::Error),
    #[error("Error accepting connection: {0}")]
    SocketAccept(#[source] std::io::Error),
    #[error("Unknown command: {0}")]
    UnknownCommand(u16),
    #[error("Unsupported command: {0:?}")]
    UnsupportedCommand(Command),
    #[error("Unsupported feature")]
    UnsupportedFeature,
    #[error("Error from backend: {0:?}")]
    Backend(#[source] std::io::Error),
    #[error("Invalid input")]
    InvalidInput,
    #[error("No_reply bit unexpectedly set for command: {0:?}")]
    UnexpectedNoReply(Command),
}

impl Error {
    /// The errno an error reply carries: never 0, which a client reads as success.
    fn errno(&self) -> u32 {
        let e = match self {
            Error::InvalidInput | Error::UnexpectedNoReply(_) => EINVAL,
            Error::DeserializeCapabilites(_) => EINVAL,
            Error::UnknownCommand(_) | Error::UnsupportedCommand(_) => libc::ENOTSUP,
            Error::UnsupportedFeature => libc::ENOTSUP,
            Error::Backend(e) => match (e.raw_os_error(), e.kind()) {
                (Some(errno), _) if errno > 0 => errno,
                (_, std::io::ErrorKind::InvalidInput) => EINVAL,
                (_, std::io::ErrorKind::OutOfMemory) => libc::ENOMEM,
                _ => libc::EIO,
            },
            _ => libc::EIO,
        };
        e as u32
    }
}

/// The header every capability of a region begins with.
#[repr(C)]
#[derive(Default, Clone, Copy, Debug)]
struct CapabilityHeader {
    id: u16,
    version: u16,
    next: u32,
}

/// Fixed-size header at the start of a sparse mmap capability.
#[repr(C)]
#[derive(Default, Clone, Copy, Debug)]
struct SparseMmapHeader {
    nr_areas: u32,
    reserved: u32,
}

// SAFETY: data structure only contain a series of integers
unsafe impl ByteValued for CapabilityHeader {}
// SAFETY: data structure only contain a series of integers
unsafe impl ByteValued for SparseMmapHeader {}

/// Error encountered while walking a region's capability list.
#[derive(Debug, Error)]
enum CapabilityError {
    #[error("offset {0} does not advance")]
    NotAdvancing(usize),
    #[error("offset {offset} is outside the {len} bytes of capability data")]
    Outside { offset: usize, len: usize },
    #[error("capability at offset {offset} is truncated")]
    Truncated {
        offset: usize,
        #[source]
        source: std::io::Error,
    },
    #[error("sparse mmap capability at offset {offset} claims {count} areas, which do not fit")]
    AreaCount {
        offset: usize,
        count: usize,
        #[source]
        source: std::io::Error,
    },
}


pub trait ServerBackend {
    fn region_read(
        &mut self,
        _region: u32,
        _offset: u64,
        _data: &mut [u8],
    ) -> Result<(), std::io::Error>;
    fn region_write(
        &mut self,
        _region: u32,
        _offset: u64,
        _data: &[u8],
    ) -> Result<(), std::io::Error>;
    fn dma_map(
        &mut self,
        _flags: DmaMapFlags,
        _offset: u64,
        _address: u64,
        _size: u64,
        _fd: Option<File>,
    ) -> Result<(), std::io::Error>;
    fn dma_unmap(
        &mut self,
        _flags: DmaUnmapFlags,
        _address: u64,
        _size: u64,
    ) -> Result<(), std::io::Error>;
    fn reset(&mut self) -> Result<(), std::io::Error>;
    fn set_irqs(
        &mut self,
        _index: u32,
        _flags: u32,
        _start: u32,
        _count: u32,
        _fds: Vec<File>,
    ) -> Result<(), std::io::Error>;
}

#[cfg(test)]
mod tests {
    use super::*;

    mod capability {
        use super::*;

        /// Offsets in a capability list are relative to the region info
        /// structure.
        const FIRST_CAPABILITY: u32 = size_of::<vfio_region_info>() as u32;

        fn sparse_cap(next: u32, nr_areas: u32, areas: &[(u64, u64)]) -> Vec<u8> {
            let header = CapabilityHeader {
                id: VFIO_REGION_INFO_CAP_SPARSE_MMAP as u16,
                version: 1,
                next,
            };
            let sparse = SparseMmapHeader {
                nr_areas,
                reserved: 0,
            };

            let mut data = Vec::new();
            data.extend_from_slice(header.as_slice());
            data.extend_from_slice(sparse.as_slice());
            for (offset, size) in areas {
                data.extend_from_slice(offset.as_slice());
                data.extend_from_slice(size.as_slice());
            }
            data
        }

        fn area(offset: u64, size: u64) -> vfio_region_sparse_mmap_area {
            vfio_region_sparse_mmap_area { offset, size }
        }

        fn walk(
            cap_offset: u32,
            cap_data: &[u8],
        ) -> Result<Vec<vfio_region_sparse_mmap_area>, CapabilityError> {
            let region_info = vfio_region_info {
                argsz: (size_of::<vfio_region_info>() + cap_data.len()) as u32,
                flags: VFIO_REGION_INFO_FLAG_CAPS,
                cap_offset,
                ..Default::default()
            };
            Client::parse_region_caps(cap_data, &region_info)
        }

        #[test]
        fn absent_list_collects_none() {
            assert_eq!(walk(0, &[]).ok(), Some(vec![]));
        }

        #[test]
        fn unsupported_id_is_skipped() {
            let mut cap_data = sparse_cap(0, 1, &[(0x0, 0x1000)]);
            cap_data[0..2].copy_from_slice(&0xffffu16.to_ne_bytes());

            assert_eq!(walk(FIRST_CAPABILITY, &cap_data).ok(), Some(vec![]));
        }

        #[test]
        fn offset_inside_region_info_fails() {
            let cap_data = sparse_cap(0, 1, &[(0x0, 0x1000)]);

            assert!(matches!(
                walk(FIRST_CAPABILITY - 4, &cap_data),
                Err(CapabilityError::Outside { .. })
            ));
        }

        #[test]
        fn offset_past_list_fails() {
            let cap_data = sparse_cap(0, 1, &[(0x0, 0x1000)]);
            let past = FIRST_CAPABILITY + cap_data.len() as u32;

            assert!(matches!(
                walk(past, &cap_data),
                Err(CapabilityError::Truncated { .. })
            ));
        }

        #[test]
        fn next_pointing_at_itself_fails() {
            let cap_data = sparse_cap(FIRST_CAPABILITY, 1, &[(0x0, 0x1000)]);

            assert!(matches!(
                walk(FIRST_CAPABILITY, &cap_data),
                Err(CapabilityError::NotAdvancing(_))
            ));
        }

        mod sparse {
            use super::*;

            #[test]
            fn areas_keep_wire_order() {
                let cap_data = sparse_cap(0, 2, &[(0x0, 0x1000), (0x2000, 0x3000)]);

                assert_eq!(
                    walk(FIRST_CAPABILITY, &cap_data).ok(),
                    Some(vec![area(0x0, 0x1000), area(0x2000, 0x3000)])
                );
            }

            #[test]
            fn count_of_zero_collects_none() {
                let cap_data = sparse_cap(0, 0, &[]);

                assert_eq!(walk(FIRST_CAPABILITY, &cap_data).ok(), Some(vec![]));
            }

            #[test]
            fn count_beyond_list_fails() {
                let cap_data = sparse_cap(0, u32::MAX, &[(0x0, 0x1000)]);

                assert!(matches!(
                    walk(FIRST_CAPABILITY, &cap_data),
                    Err(CapabilityError::AreaCount { .. })
                ));
            }

            #[test]
            fn truncated_areas_fail() {
                let cap_data = sparse_cap(0, 2, &[(0x0, 0x1000)]);

                assert!(matches!(
                    walk(FIRST_CAPABILITY, &cap_data),
                    Err(CapabilityError::AreaCount { .. })
                ));
            }
        }
    }
}
