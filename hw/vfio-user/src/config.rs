//! PCI configuration space of the simulated ConnectX-5 (a type 0 header, 256 bytes): vendor
//! 15b3, device 1017 (ConnectX-5), class 0x020000 (Ethernet controller), BAR0 64-bit
//! prefetchable memory of the simulator's BAR size, and a capability list — PCI Express (v2,
//! endpoint, function-level reset) at 0x60, MSI-X at 0x9c with its table and PBA in BAR0 pages 2
//! and 3 (pages the simulator's UARs never use: they start at page 8), as on the card.
//!
//! Writes go through a mask of the bits a device lets software change (command register, cache
//! line size, latency timer, the MSI-X control bits, the PCIe device control register); BARs are
//! virtualized by the client (QEMU sizes and places them from the region information).

/// Bytes of configuration space served.
pub const CONFIG_BYTES: usize = 256;
/// Vendor ID (Mellanox).
pub const VENDOR_ID: u16 = 0x15b3;
/// Device ID (ConnectX-5).
pub const DEVICE_ID: u16 = 0x1017;
/// The PCI Express capability.
pub const PCIE_CAP: usize = 0x60;
/// The MSI-X capability.
pub const MSIX_CAP: usize = 0x9c;
/// BAR0 offset of the MSI-X table (page 2) and of the pending-bit array (page 3).
pub const MSIX_TABLE: u32 = 0x2000;
/// BAR0 offset of the MSI-X pending-bit array.
pub const MSIX_PBA: u32 = 0x3000;

/// The configuration space and which of its bits software may write.
#[derive(Debug, Clone)]
pub struct ConfigSpace {
    bytes: [u8; CONFIG_BYTES],
    writable: [u8; CONFIG_BYTES],
}

impl ConfigSpace {
    /// A ConnectX-5 function — device `device_id` (0x1017 the PF, 0x1018 a VF) — with
    /// `msix_vectors` MSI-X vectors.
    pub fn connectx5(device_id: u16, msix_vectors: u16) -> Self {
        let mut c = ConfigSpace {
            bytes: [0; CONFIG_BYTES],
            writable: [0; CONFIG_BYTES],
        };
        c.le16(0x00, VENDOR_ID);
        c.le16(0x02, device_id);
        c.le16(0x06, 0x0010); // status: capability list
        c.bytes[0x0b] = 0x02; // class: network controller
        c.bytes[0x0a] = 0x00; // subclass: Ethernet
                              // BAR0: memory, 64-bit (type 2), prefetchable; the address bits are the client's.
        c.le32(0x10, 0x0000_000c);
        c.le16(0x2c, VENDOR_ID); // subsystem vendor
        c.le16(0x2e, 0x0008); // subsystem
        c.bytes[0x34] = PCIE_CAP as u8; // first capability
        c.bytes[0x3d] = 0x01; // interrupt pin INTA (MSI-X is what the driver uses)
                              // PCI Express capability v2, endpoint; next: MSI-X.
        c.bytes[PCIE_CAP] = 0x10;
        c.bytes[PCIE_CAP + 1] = MSIX_CAP as u8;
        c.le16(PCIE_CAP + 2, 0x0002);
        // Device capabilities: max payload 512 bytes, function-level reset.
        c.le32(PCIE_CAP + 4, 0x1000_8002);
        // Link capabilities: 8 GT/s x8; link status the same.
        c.le32(PCIE_CAP + 0x0c, 0x0000_0083);
        c.le16(PCIE_CAP + 0x12, 0x0083);
        // Device control: writable (FLR is bit 15).
        c.writable[PCIE_CAP + 8] = 0xff;
        c.writable[PCIE_CAP + 9] = 0xff;
        // MSI-X: table size N-1, table and PBA in BAR0 (BIR 0).
        c.bytes[MSIX_CAP] = 0x11;
        c.bytes[MSIX_CAP + 1] = 0x00;
        c.le16(MSIX_CAP + 2, msix_vectors.saturating_sub(1) & 0x7ff);
        c.le32(MSIX_CAP + 4, MSIX_TABLE);
        c.le32(MSIX_CAP + 8, MSIX_PBA);
        c.writable[MSIX_CAP + 3] = 0xc0; // enable, function mask
                                         // Command register (memory space, bus master, …), cache line size, latency timer.
        c.writable[0x04] = 0xff;
        c.writable[0x05] = 0x07;
        c.writable[0x0c] = 0xff;
        c.writable[0x0d] = 0xff;
        c
    }

    fn le16(&mut self, at: usize, v: u16) {
        self.bytes[at..at + 2].copy_from_slice(&v.to_le_bytes());
    }

    fn le32(&mut self, at: usize, v: u32) {
        self.bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }

    /// Reads `data.len()` bytes at `at`; bytes past the space read as zeros.
    pub fn read(&self, at: u64, data: &mut [u8]) {
        for (i, b) in data.iter_mut().enumerate() {
            *b = usize::try_from(at)
                .ok()
                .and_then(|a| a.checked_add(i))
                .and_then(|a| self.bytes.get(a))
                .copied()
                .unwrap_or(0);
        }
    }

    /// Writes `data` at `at` through the writable mask; returns whether it asked for a
    /// function-level reset (PCIe device control bit 15 written as 1).
    pub fn write(&mut self, at: u64, data: &[u8]) -> bool {
        let mut flr = false;
        for (i, &b) in data.iter().enumerate() {
            let Some(a) = usize::try_from(at).ok().and_then(|a| a.checked_add(i)) else {
                continue;
            };
            if a >= CONFIG_BYTES {
                continue;
            }
            if a == PCIE_CAP + 9 && b & 0x80 != 0 {
                flr = true;
            }
            let m = self.writable[a];
            self.bytes[a] = (self.bytes[a] & !m) | (b & m);
        }
        // The FLR bit always reads 0.
        self.bytes[PCIE_CAP + 9] &= 0x7f;
        flr
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u16_at(c: &ConfigSpace, at: u64) -> u16 {
        let mut b = [0; 2];
        c.read(at, &mut b);
        u16::from_le_bytes(b)
    }

    #[test]
    fn ids_class_and_the_capability_chain() {
        let c = ConfigSpace::connectx5(DEVICE_ID, 64);
        assert_eq!((u16_at(&c, 0), u16_at(&c, 2)), (0x15b3, 0x1017));
        let mut class = [0; 3];
        c.read(0x09, &mut class);
        assert_eq!(class, [0, 0, 2]);
        // Walk the list: PCIe (0x10) then MSI-X (0x11), then the end.
        let mut at = u64::from(c.bytes[0x34]);
        let mut ids = Vec::new();
        while at != 0 {
            ids.push(c.bytes[at as usize]);
            at = u64::from(c.bytes[at as usize + 1]);
        }
        assert_eq!(ids, [0x10, 0x11]);
        assert_eq!(u16_at(&c, MSIX_CAP as u64 + 2) & 0x7ff, 63);
    }

    #[test]
    fn only_writable_bits_change_and_flr_is_seen() {
        let mut c = ConfigSpace::connectx5(DEVICE_ID, 64);
        assert!(!c.write(0, &[0xff, 0xff, 0xff, 0xff]));
        assert_eq!((u16_at(&c, 0), u16_at(&c, 2)), (0x15b3, 0x1017));
        c.write(4, &[0x06, 0x00]);
        assert_eq!(u16_at(&c, 4), 0x0006);
        assert!(c.write(PCIE_CAP as u64 + 8, &[0x00, 0x80]));
        assert_eq!(u16_at(&c, PCIE_CAP as u64 + 8) & 0x8000, 0, "FLR reads 0");
    }
}
