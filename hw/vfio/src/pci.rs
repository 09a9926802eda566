//! PCI functions as sysfs shows them (address, ids, driver, IOMMU group, readiness for VFIO) and
//! the function's configuration space through the VFIO device file.
//!
//! Everything that reads sysfs takes its root as a parameter ([`Sysfs`]), so the logic is tested
//! against a fake tree in a temporary directory.

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

pub use crate::address::{GroupMember, PciAddress};
use crate::error::VfioError;

/// NVIDIA/Mellanox's PCI vendor id.
pub const MELLANOX_VENDOR: u16 = 0x15b3;

impl FromStr for PciAddress {
    type Err = VfioError;

    /// Accepts `DDDD:BB:DD.F` and `BB:DD.F` (domain 0), hexadecimal, any case.
    fn from_str(s: &str) -> Result<Self, VfioError> {
        let bad = || VfioError::InvalidAddress { input: s.into() };
        let t = s.trim();
        let (rest, function) = t.rsplit_once('.').ok_or_else(bad)?;
        let parts: Vec<&str> = rest.split(':').collect();
        let (domain, bus, device) = match parts.as_slice() {
            [d, b, v] => (*d, *b, *v),
            [b, v] => ("0", *b, *v),
            _ => return Err(bad()),
        };
        let hex = |x: &str, max: u32| -> Result<u32, VfioError> {
            if x.is_empty() || x.len() > 8 {
                return Err(bad());
            }
            let v = u32::from_str_radix(x, 16).map_err(|_| bad())?;
            if v > max {
                return Err(bad());
            }
            Ok(v)
        };
        Ok(Self {
            domain: hex(domain, u32::MAX)?,
            bus: hex(bus, 0xff)? as u8,
            device: hex(device, 0x1f)? as u8,
            function: hex(function, 7)? as u8,
        })
    }
}

/// The ConnectX model of an mlx5 device id (mlx5-control.md §1), and whether it is a VF.
pub fn mlx5_model(device: u16) -> Option<(&'static str, bool)> {
    Some(match device {
        0x1011 => ("Connect-IB", false),
        0x1012 => ("Connect-IB VF", true),
        0x1013 => ("ConnectX-4", false),
        0x1014 => ("ConnectX-4 VF", true),
        0x1015 => ("ConnectX-4 Lx", false),
        0x1016 => ("ConnectX-4 Lx VF", true),
        0x1017 => ("ConnectX-5", false),
        0x1018 => ("ConnectX-5 VF", true),
        0x1019 => ("ConnectX-5 Ex", false),
        0x101a => ("ConnectX-5 Ex VF", true),
        0x101b => ("ConnectX-6", false),
        0x101c => ("ConnectX-6 VF", true),
        0x101d => ("ConnectX-6 Dx", false),
        0x101e => ("ConnectX family mlx5Gen VF", true),
        0x101f => ("ConnectX-6 Lx", false),
        0x1021 => ("ConnectX-7", false),
        0x1023 => ("ConnectX-8", false),
        0x1025 => ("ConnectX-9", false),
        0x1027 => ("ConnectX-10", false),
        0xa2d2 => ("BlueField (ConnectX-5)", false),
        0xa2d3 => ("BlueField VF", true),
        0xa2d6 => ("BlueField-2 (ConnectX-6 Dx)", false),
        0xa2dc => ("BlueField-3 (ConnectX-7)", false),
        0xa2df => ("BlueField-4 (ConnectX-8)", false),
        _ => return None,
    })
}

/// A PCI function as sysfs describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PciFunction {
    /// Its address.
    pub addr: PciAddress,
    /// Vendor id.
    pub vendor: u16,
    /// Device id.
    pub device: u16,
    /// The bound driver, if any.
    pub driver: Option<String>,
    /// The IOMMU group, if the IOMMU is on.
    pub iommu_group: Option<u32>,
    /// NUMA node, if known.
    pub numa_node: Option<i32>,
    /// Whether it is an SR-IOV virtual function.
    pub is_vf: bool,
}

/// Where sysfs and `/dev/vfio` are (the real ones, or a fake tree in tests).
#[derive(Debug, Clone)]
pub struct Sysfs {
    /// The sysfs mount (`/sys`).
    pub root: PathBuf,
    /// The VFIO device directory (`/dev/vfio`).
    pub dev_vfio: PathBuf,
}

impl Default for Sysfs {
    fn default() -> Self {
        Self::system()
    }
}

fn read_trimmed(p: &Path) -> io::Result<String> {
    Ok(fs::read_to_string(p)?.trim().to_string())
}

fn parse_hex_u16(s: &str) -> Option<u16> {
    u16::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok()
}

fn link_name(p: &Path) -> Option<String> {
    let target = fs::read_link(p).ok()?;
    Some(target.file_name()?.to_string_lossy().into_owned())
}

impl Sysfs {
    /// The machine's own `/sys` and `/dev/vfio`.
    pub fn system() -> Self {
        Self {
            root: "/sys".into(),
            dev_vfio: "/dev/vfio".into(),
        }
    }

    /// `/sys/bus/pci/devices/<addr>`.
    pub fn device_path(&self, addr: &PciAddress) -> PathBuf {
        self.root.join("bus/pci/devices").join(addr.to_string())
    }

    /// Reads one function; [`VfioError::NoSuchDevice`] if sysfs does not know it.
    pub fn function(&self, addr: &PciAddress) -> Result<PciFunction, VfioError> {
        let dir = self.device_path(addr);
        if !dir.exists() {
            return Err(VfioError::NoSuchDevice { bdf: *addr });
        }
        let id = |name: &str| -> Result<u16, VfioError> {
            let p = dir.join(name);
            let s = read_trimmed(&p).map_err(|e| VfioError::io(format!("{}", p.display()), e))?;
            parse_hex_u16(&s).ok_or_else(|| {
                VfioError::io(
                    format!("{}", p.display()),
                    io::Error::new(io::ErrorKind::InvalidData, format!("not an id: {s:?}")),
                )
            })
        };
        Ok(PciFunction {
            addr: *addr,
            vendor: id("vendor")?,
            device: id("device")?,
            driver: link_name(&dir.join("driver")),
            iommu_group: link_name(&dir.join("iommu_group")).and_then(|g| g.parse().ok()),
            numa_node: read_trimmed(&dir.join("numa_node"))
                .ok()
                .and_then(|s| s.parse().ok()),
            is_vf: dir.join("physfn").exists(),
        })
    }

    /// Every PCI function with this vendor id, sorted by address.
    pub fn scan_vendor(&self, vendor: u16) -> Result<Vec<PciFunction>, VfioError> {
        let dir = self.root.join("bus/pci/devices");
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(VfioError::io(format!("{}", dir.display()), e)),
        };
        let mut out = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Ok(addr) = name.to_string_lossy().parse::<PciAddress>() else {
                continue;
            };
            let v = read_trimmed(&entry.path().join("vendor"))
                .ok()
                .and_then(|s| parse_hex_u16(&s));
            if v == Some(vendor) {
                out.push(self.function(&addr)?);
            }
        }
        out.sort_by_key(|f| f.addr);
        Ok(out)
    }

    /// The other devices of IOMMU group `group` (not `except`), with their drivers.
    pub fn group_members(&self, group: u32, except: &PciAddress) -> Vec<GroupMember> {
        let dir = self
            .root
            .join("kernel/iommu_groups")
            .join(group.to_string())
            .join("devices");
        let mut out: Vec<GroupMember> = fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let addr: PciAddress = e.file_name().to_string_lossy().parse().ok()?;
                (addr != *except).then(|| GroupMember {
                    addr,
                    driver: link_name(&self.device_path(&addr).join("driver")),
                })
            })
            .collect();
        out.sort_by_key(|m| m.addr);
        out
    }

    /// Whether `f` can be opened through VFIO: bound to vfio-pci, IOMMU on, group viable, vfio
    /// loaded, group node accessible. Returns the group number, or the error opening would give.
    pub fn check_ready(&self, f: &PciFunction) -> Result<u32, VfioError> {
        if f.driver.as_deref() != Some("vfio-pci") {
            if f.iommu_group.is_none() {
                return Err(VfioError::IommuOff { bdf: f.addr });
            }
            return Err(VfioError::NotBoundToVfio {
                bdf: f.addr,
                driver: f.driver.clone(),
                vendor: f.vendor,
                device: f.device,
            });
        }
        let group = f.iommu_group.ok_or(VfioError::IommuOff { bdf: f.addr })?;
        let others: Vec<GroupMember> = self.group_members(group, &f.addr);
        if others.iter().any(|m| !m.allows_vfio()) {
            return Err(VfioError::GroupNotViable {
                bdf: f.addr,
                group,
                others,
            });
        }
        if !self.dev_vfio.join("vfio").exists() {
            return Err(VfioError::VfioNotLoaded);
        }
        let node = self.dev_vfio.join(group.to_string());
        if !accessible(&node) {
            return Err(VfioError::Permission { path: node });
        }
        Ok(group)
    }
}

/// Whether the calling process may open `p` for reading and writing (access(2)).
fn accessible(p: &Path) -> bool {
    crate::sys::fd::accessible_rw(p)
}

/// PCI command register bits.
pub mod command {
    /// Memory space enable.
    pub const MEMORY: u16 = 1 << 1;
    /// Bus master enable: the function may issue DMA (and MSI writes).
    pub const BUS_MASTER: u16 = 1 << 2;
    /// INTx disable.
    pub const INTX_DISABLE: u16 = 1 << 10;
}

/// The function's configuration space, through the VFIO device file (region 7). Unlike
/// `vfio-ioctls`' `region_read`/`region_write`, every access reports its error.
#[derive(Debug, Clone)]
pub struct ConfigSpace {
    file: Arc<File>,
    offset: u64,
    size: u64,
}

impl ConfigSpace {
    pub(crate) fn new(file: Arc<File>, offset: u64, size: u64) -> Self {
        Self { file, offset, size }
    }

    fn check(&self, off: u64, len: usize) -> io::Result<()> {
        match off.checked_add(len as u64) {
            Some(end) if end <= self.size => Ok(()),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "config access of {len} bytes at {off:#x} beyond {:#x}",
                    self.size
                ),
            )),
        }
    }

    /// Size of the configuration space (256 or 4096 bytes).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Reads `buf.len()` bytes at `off`.
    pub fn read(&self, off: u64, buf: &mut [u8]) -> io::Result<()> {
        self.check(off, buf.len())?;
        self.file.read_exact_at(buf, self.offset + off)
    }

    /// Writes `buf` at `off` (VFIO filters what the function may not change).
    pub fn write(&self, off: u64, buf: &[u8]) -> io::Result<()> {
        self.check(off, buf.len())?;
        self.file.write_all_at(buf, self.offset + off)
    }

    /// A 16-bit little-endian register.
    pub fn read16(&self, off: u64) -> io::Result<u16> {
        let mut b = [0u8; 2];
        self.read(off, &mut b)?;
        Ok(u16::from_le_bytes(b))
    }

    /// A 32-bit little-endian register.
    pub fn read32(&self, off: u64) -> io::Result<u32> {
        let mut b = [0u8; 4];
        self.read(off, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    /// Writes a 16-bit little-endian register.
    pub fn write16(&self, off: u64, v: u16) -> io::Result<()> {
        self.write(off, &v.to_le_bytes())
    }

    /// The command register (offset 4).
    pub fn command(&self) -> io::Result<u16> {
        self.read16(4)
    }

    /// Sets and clears command register bits; returns (before, after as read back).
    pub fn update_command(&self, set: u16, clear: u16) -> io::Result<(u16, u16)> {
        let old = self.command()?;
        self.write16(4, (old | set) & !clear)?;
        Ok((old, self.command()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn addr(s: &str) -> PciAddress {
        s.parse().unwrap()
    }

    #[test]
    fn addresses_parse_and_print() {
        assert_eq!(addr("0000:03:00.0").to_string(), "0000:03:00.0");
        assert_eq!(addr("3b:00.1").to_string(), "0000:3b:00.1");
        assert_eq!(addr("10000:E1:1f.7").to_string(), "10000:e1:1f.7");
        for bad in [
            "",
            "03:00",
            "0000:03:20.0",
            "0000:03:00.8",
            "0000:103:00.0",
            "x:03:00.0",
            "a:b:c:d.0",
        ] {
            let e = bad.parse::<PciAddress>().unwrap_err();
            assert!(matches!(e, VfioError::InvalidAddress { .. }), "{bad}");
        }
    }

    #[test]
    fn models() {
        assert_eq!(mlx5_model(0x1017), Some(("ConnectX-5", false)));
        assert_eq!(mlx5_model(0x1018), Some(("ConnectX-5 VF", true)));
        assert_eq!(mlx5_model(0x101d).unwrap().0, "ConnectX-6 Dx");
        assert_eq!(mlx5_model(0x1003), None); // ConnectX-3 is mlx4
    }

    /// A fake sysfs: devices, drivers and IOMMU groups as symlinks, like the kernel makes them.
    struct Fake {
        dir: PathBuf,
    }

    impl Fake {
        fn new(tag: &str) -> Self {
            let dir = std::env::temp_dir().join(format!(
                "mlx5-vfio-sysfs-{tag}-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(dir.join("sys/bus/pci/devices")).unwrap();
            fs::create_dir_all(dir.join("dev/vfio")).unwrap();
            Self { dir }
        }

        fn sysfs(&self) -> Sysfs {
            Sysfs {
                root: self.dir.join("sys"),
                dev_vfio: self.dir.join("dev/vfio"),
            }
        }

        fn device(
            &self,
            bdf: &str,
            vendor: u16,
            device: u16,
            driver: Option<&str>,
            group: Option<u32>,
        ) {
            let real = self.dir.join("sys/devices/pci0000:00").join(bdf);
            fs::create_dir_all(&real).unwrap();
            fs::write(real.join("vendor"), format!("0x{vendor:04x}\n")).unwrap();
            fs::write(real.join("device"), format!("0x{device:04x}\n")).unwrap();
            fs::write(real.join("numa_node"), "-1\n").unwrap();
            symlink(&real, self.dir.join("sys/bus/pci/devices").join(bdf)).unwrap();
            if let Some(d) = driver {
                let ddir = self.dir.join("sys/bus/pci/drivers").join(d);
                fs::create_dir_all(&ddir).unwrap();
                symlink(&ddir, real.join("driver")).unwrap();
            }
            if let Some(g) = group {
                let gdir = self.dir.join("sys/kernel/iommu_groups").join(g.to_string());
                fs::create_dir_all(gdir.join("devices")).unwrap();
                symlink(&gdir, real.join("iommu_group")).unwrap();
                symlink(&real, gdir.join("devices").join(bdf)).unwrap();
            }
        }
    }

    impl Drop for Fake {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }

    #[test]
    fn scan_finds_mellanox_functions_with_driver_and_group() {
        let f = Fake::new("scan");
        f.device("0000:3b:00.1", 0x15b3, 0x1017, Some("mlx5_core"), Some(40));
        f.device("0000:3b:00.0", 0x15b3, 0x1017, Some("vfio-pci"), Some(39));
        f.device("0000:00:1f.6", 0x8086, 0x15bb, Some("e1000e"), Some(12));
        let s = f.sysfs();
        let found = s.scan_vendor(MELLANOX_VENDOR).unwrap();
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].addr, addr("0000:3b:00.0"));
        assert_eq!(found[0].driver.as_deref(), Some("vfio-pci"));
        assert_eq!(found[0].iommu_group, Some(39));
        assert_eq!(found[0].numa_node, Some(-1));
        assert!(!found[0].is_vf);
        assert_eq!(found[1].driver.as_deref(), Some("mlx5_core"));
        assert!(matches!(
            s.function(&addr("0000:99:00.0")),
            Err(VfioError::NoSuchDevice { .. })
        ));
    }

    #[test]
    fn readiness_explains_what_is_missing() {
        let f = Fake::new("ready");
        f.device("0000:3b:00.0", 0x15b3, 0x1017, Some("mlx5_core"), Some(39));
        f.device("0000:3c:00.0", 0x15b3, 0x1017, Some("vfio-pci"), None);
        f.device("0000:3d:00.0", 0x15b3, 0x1017, Some("vfio-pci"), Some(41));
        f.device("0000:3d:00.1", 0x15b3, 0x1017, Some("mlx5_core"), Some(41));
        f.device("0000:3e:00.0", 0x15b3, 0x1017, Some("vfio-pci"), Some(42));
        f.device("0000:3e:00.1", 0x15b3, 0x1017, None, Some(42));
        let s = f.sysfs();
        let check = |bdf: &str| s.check_ready(&s.function(&addr(bdf)).unwrap());

        assert!(matches!(
            check("0000:3b:00.0"),
            Err(VfioError::NotBoundToVfio { driver: Some(ref d), .. }) if d == "mlx5_core"
        ));
        assert!(matches!(
            check("0000:3c:00.0"),
            Err(VfioError::IommuOff { .. })
        ));
        match check("0000:3d:00.0") {
            Err(VfioError::GroupNotViable { group, others, .. }) => {
                assert_eq!(group, 41);
                assert_eq!(
                    others,
                    vec![GroupMember {
                        addr: addr("0000:3d:00.1"),
                        driver: Some("mlx5_core".into())
                    }]
                );
            }
            other => panic!("{other:?}"),
        }
        // A driver-less neighbour is fine; then /dev/vfio decides.
        assert!(matches!(
            check("0000:3e:00.0"),
            Err(VfioError::VfioNotLoaded)
        ));
        fs::write(f.dir.join("dev/vfio/vfio"), "").unwrap();
        assert!(matches!(
            check("0000:3e:00.0"),
            Err(VfioError::Permission { .. })
        ));
        fs::write(f.dir.join("dev/vfio/42"), "").unwrap();
        assert_eq!(check("0000:3e:00.0").unwrap(), 42);
    }
}
