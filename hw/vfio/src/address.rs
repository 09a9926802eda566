//! A PCI function's address and the members of its IOMMU group: the names everything else in
//! the crate (sysfs, errors, the platform) speaks of. Parsing an address (`FromStr`) is in
//! [`crate::pci`], where its errors are.

use std::fmt;

/// A PCI function address: domain, bus, device, function (`0000:03:00.0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PciAddress {
    /// PCI domain (segment).
    pub domain: u32,
    /// Bus.
    pub bus: u8,
    /// Device (0..32).
    pub device: u8,
    /// Function (0..8).
    pub function: u8,
}

impl fmt::Display for PciAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

/// Another device of an IOMMU group and the driver it is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMember {
    /// Its address.
    pub addr: PciAddress,
    /// Its driver, if bound.
    pub driver: Option<String>,
}

impl GroupMember {
    /// Whether this member lets VFIO use the group: no driver, vfio-pci, or a driver the kernel
    /// allows next to VFIO (pci-stub, PCIe port services of a bridge).
    pub fn allows_vfio(&self) -> bool {
        matches!(
            self.driver.as_deref(),
            None | Some("vfio-pci") | Some("pci-stub") | Some("pcieport")
        )
    }
}
