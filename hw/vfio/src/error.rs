//! [`VfioError`]: what went wrong opening or driving a function through VFIO, worded so that the
//! person at the keyboard knows what to type next.

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::address::{GroupMember, PciAddress};

/// Why the VFIO backend could not do what was asked. `Display` gives the fix (exact commands).
#[derive(Debug)]
#[non_exhaustive]
pub enum VfioError {
    /// The text given is not a PCI address.
    InvalidAddress {
        /// What was given.
        input: String,
    },
    /// No PCI function with that address exists.
    NoSuchDevice {
        /// The address.
        bdf: PciAddress,
    },
    /// The function is not an NVIDIA/Mellanox (vendor 0x15b3) device.
    NotMlx5 {
        /// The address.
        bdf: PciAddress,
        /// Its vendor id.
        vendor: u16,
        /// Its device id.
        device: u16,
    },
    /// The function is bound to another driver (or to none) instead of `vfio-pci`.
    NotBoundToVfio {
        /// The address.
        bdf: PciAddress,
        /// The driver it is bound to, if any.
        driver: Option<String>,
        /// Its vendor id.
        vendor: u16,
        /// Its device id.
        device: u16,
    },
    /// The function has no IOMMU group: the IOMMU is off (or absent).
    IommuOff {
        /// The address.
        bdf: PciAddress,
    },
    /// `/dev/vfio/vfio` does not exist: the vfio modules are not loaded.
    VfioNotLoaded,
    /// The IOMMU group holds devices not handed to `vfio-pci`.
    GroupNotViable {
        /// The address.
        bdf: PciAddress,
        /// The group number.
        group: u32,
        /// Every other device of the group, with its driver.
        others: Vec<GroupMember>,
    },
    /// Opening a `/dev/vfio` node was refused.
    Permission {
        /// The node.
        path: PathBuf,
    },
    /// The group is open elsewhere (another process, a VM).
    GroupBusy {
        /// The group number.
        group: u32,
    },
    /// RLIMIT_MEMLOCK is below what DMA memory needs (pinned pages count against it).
    MemlockTooLow {
        /// The current soft limit in bytes (`u64::MAX`: unlimited).
        limit: u64,
        /// What is needed.
        needed: u64,
    },
    /// The firmware still reported `initializing` when the bring-up deadline passed.
    FirmwareInitializing {
        /// The address.
        bdf: PciAddress,
        /// How long the driver waited, in milliseconds.
        waited_ms: u64,
    },
    /// The driver's bring-up failed for another reason.
    BringUp {
        /// The address.
        bdf: PciAddress,
        /// The driver error.
        source: mlx5::Error,
    },
    /// BAR0 cannot be used (absent, not memory, or not mappable at all).
    Bar {
        /// The address.
        bdf: PciAddress,
        /// What is wrong.
        what: String,
    },
    /// A VFIO operation of the `vfio-ioctls` crate failed.
    Vfio {
        /// What the backend was doing.
        op: &'static str,
        /// The crate's error.
        source: vfio_ioctls::VfioError,
    },
    /// A system call failed.
    Io {
        /// What the backend was doing.
        op: String,
        /// The OS error.
        source: io::Error,
    },
}

impl VfioError {
    /// An [`io::Error`] with what was being done.
    pub(crate) fn io(op: impl Into<String>, source: io::Error) -> Self {
        Self::Io {
            op: op.into(),
            source,
        }
    }

    /// Classifies a failed bring-up: a firmware that never left `initializing` gets its own
    /// explanation, everything else is reported as the driver said it.
    pub fn from_bringup(bdf: PciAddress, source: mlx5::Error) -> Self {
        match source {
            mlx5::Error::Timeout {
                waiting_for: mlx5::Wait::FwPreInit | mlx5::Wait::FwInit,
                waited_ms,
            } => Self::FirmwareInitializing { bdf, waited_ms },
            source => Self::BringUp { bdf, source },
        }
    }
}

/// `1.5 GiB`, `64 KiB`, `unlimited`.
pub(crate) fn human_bytes(n: u64) -> String {
    if n == u64::MAX {
        return "unlimited".into();
    }
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (unit, size) in UNITS {
        if n >= size {
            return if n % size == 0 {
                format!("{} {unit}", n / size)
            } else {
                format!("{:.1} {unit}", n as f64 / size as f64)
            };
        }
    }
    format!("{n} bytes")
}

/// The commands that hand `bdf` to vfio-pci (used by the error text, `mlx5ctl list` and docs).
pub fn bind_commands(bdf: &PciAddress, has_driver: bool) -> String {
    let mut s = String::from("  sudo modprobe vfio-pci\n");
    if has_driver {
        s += &format!("  echo {bdf} | sudo tee /sys/bus/pci/devices/{bdf}/driver/unbind\n");
    }
    s += &format!(
        "  echo vfio-pci | sudo tee /sys/bus/pci/devices/{bdf}/driver_override\n  \
         echo {bdf} | sudo tee /sys/bus/pci/drivers_probe"
    );
    s
}

impl fmt::Display for VfioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidAddress { input } => write!(
                f,
                "{input:?} is not a PCI address: expected DDDD:BB:DD.F (or BB:DD.F), e.g. \
                 0000:03:00.0; `mlx5ctl list` or `lspci -D -d 15b3:` shows them"
            ),
            Self::NoSuchDevice { bdf } => write!(
                f,
                "there is no PCI function {bdf} (/sys/bus/pci/devices/{bdf} does not exist); \
                 `mlx5ctl list` shows the ConnectX functions of this machine"
            ),
            Self::NotMlx5 {
                bdf,
                vendor,
                device,
            } => write!(
                f,
                "{bdf} is {vendor:04x}:{device:04x}, not an NVIDIA/Mellanox ConnectX function \
                 (vendor 15b3); `mlx5ctl list` shows the ConnectX functions of this machine"
            ),
            Self::NotBoundToVfio {
                bdf,
                driver,
                vendor,
                device,
            } => {
                match driver {
                    Some(d) => write!(f, "{bdf} is bound to {d}, not to vfio-pci. ")?,
                    None => write!(f, "{bdf} is bound to no driver, not to vfio-pci. ")?,
                }
                writeln!(
                    f,
                    "Hand it to vfio-pci (its kernel network interface, if any, goes away):"
                )?;
                writeln!(f, "{}", bind_commands(bdf, driver.is_some()))?;
                write!(
                    f,
                    "(or for every {vendor:04x}:{device:04x} function: \
                     `echo {vendor:04x} {device:04x} | sudo tee /sys/bus/pci/drivers/vfio-pci/new_id`; \
                     `driverctl set-override {bdf} vfio-pci` makes it permanent)"
                )
            }
            Self::IommuOff { bdf } => write!(
                f,
                "{bdf} has no IOMMU group, so the IOMMU is off. Turn it on: enable VT-d (Intel) or \
                 AMD-Vi/IOMMU (AMD) in the firmware setup, add `intel_iommu=on iommu=pt` (Intel; \
                 AMD: `amd_iommu=on iommu=pt`) to GRUB_CMDLINE_LINUX in /etc/default/grub, run \
                 `sudo update-grub` and reboot. Check with `ls /sys/kernel/iommu_groups` and \
                 `sudo dmesg | grep -i -e DMAR -e IOMMU`"
            ),
            Self::VfioNotLoaded => write!(
                f,
                "/dev/vfio/vfio does not exist: the vfio modules are not loaded. Run \
                 `sudo modprobe vfio-pci` (and bind the function to vfio-pci, see docs/vfio.md)"
            ),
            Self::GroupNotViable { bdf, group, others } => {
                writeln!(
                    f,
                    "IOMMU group {group} of {bdf} is not viable: every device in a group must be \
                     bound to vfio-pci (or to no driver) before any of them can be used. The \
                     group also holds:"
                )?;
                for m in others {
                    let driver = m.driver.as_deref().unwrap_or("no driver");
                    writeln!(f, "  {} ({driver})", m.addr)?;
                }
                write!(
                    f,
                    "Bind each of them to vfio-pci as for {bdf} (`mlx5ctl list` prints the \
                     commands), or put the card in a slot with its own group (ACS)"
                )
            }
            Self::Permission { path } => write!(
                f,
                "no permission to open {}: run as root, or give your user the node \
                 (`sudo chown $USER {}`; a udev rule `SUBSYSTEM==\"vfio\", OWNER=\"<user>\"` \
                 keeps it) and raise the memlock limit (docs/vfio.md)",
                path.display(),
                path.display()
            ),
            Self::GroupBusy { group } => write!(
                f,
                "/dev/vfio/{group} is already open elsewhere (another process or a VM has the \
                 device); `sudo fuser -v /dev/vfio/{group}` shows who"
            ),
            Self::MemlockTooLow { limit, needed } => write!(
                f,
                "the locked-memory limit (RLIMIT_MEMLOCK) is {}, but the DMA memory pinned for the \
                 device needs at least {}. Raise it: `ulimit -l unlimited` (as root, in the shell \
                 that starts the program), or `<user> - memlock unlimited` in \
                 /etc/security/limits.conf (log in again), or `LimitMEMLOCK=infinity` for a \
                 systemd service; processes with CAP_IPC_LOCK (root) have no limit",
                human_bytes(*limit),
                human_bytes(*needed)
            ),
            Self::FirmwareInitializing { bdf, waited_ms } => write!(
                f,
                "the firmware of {bdf} was still initializing after {waited_ms} ms. Check \
                 `sudo dmesg` for PCI/AER errors; reset the function \
                 (`echo 1 | sudo tee /sys/bus/pci/devices/{bdf}/reset`) or power-cycle the \
                 machine; `sudo mlxfwmanager` or `sudo flint -d {bdf} query` shows whether the \
                 firmware is healthy (a firmware update may be pending)"
            ),
            Self::BringUp { bdf, source } => write!(f, "bring-up of {bdf} failed: {source}"),
            Self::Bar { bdf, what } => write!(f, "BAR0 of {bdf}: {what}"),
            Self::Vfio { op, source } => write!(f, "{op}: {source}"),
            Self::Io { op, source } => write!(f, "{op}: {source}"),
        }
    }
}

impl std::error::Error for VfioError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Vfio { source, .. } => Some(source),
            Self::Io { source, .. } => Some(source),
            Self::BringUp { source, .. } => Some(source),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bdf() -> PciAddress {
        "0000:03:00.0".parse().unwrap()
    }

    #[test]
    fn not_bound_prints_the_exact_commands() {
        let e = VfioError::NotBoundToVfio {
            bdf: bdf(),
            driver: Some("mlx5_core".into()),
            vendor: 0x15b3,
            device: 0x1017,
        };
        let s = e.to_string();
        assert!(s.contains("bound to mlx5_core, not to vfio-pci"), "{s}");
        assert!(s.contains("sudo modprobe vfio-pci"), "{s}");
        assert!(
            s.contains(
                "echo 0000:03:00.0 | sudo tee /sys/bus/pci/devices/0000:03:00.0/driver/unbind"
            ),
            "{s}"
        );
        assert!(
            s.contains(
                "echo vfio-pci | sudo tee /sys/bus/pci/devices/0000:03:00.0/driver_override"
            ),
            "{s}"
        );
        assert!(
            s.contains("echo 0000:03:00.0 | sudo tee /sys/bus/pci/drivers_probe"),
            "{s}"
        );
        assert!(s.contains("15b3 1017"), "{s}");
        // Without a driver there is nothing to unbind.
        let e = VfioError::NotBoundToVfio {
            bdf: bdf(),
            driver: None,
            vendor: 0x15b3,
            device: 0x1017,
        };
        assert!(!e.to_string().contains("unbind"));
    }

    #[test]
    fn iommu_off_names_the_kernel_parameters() {
        let s = VfioError::IommuOff { bdf: bdf() }.to_string();
        assert!(s.contains("intel_iommu=on"), "{s}");
        assert!(s.contains("amd_iommu=on"), "{s}");
        assert!(s.contains("update-grub"), "{s}");
    }

    #[test]
    fn group_not_viable_lists_the_other_devices() {
        let e = VfioError::GroupNotViable {
            bdf: bdf(),
            group: 17,
            others: vec![
                GroupMember {
                    addr: "0000:03:00.1".parse().unwrap(),
                    driver: Some("mlx5_core".into()),
                },
                GroupMember {
                    addr: "0000:00:01.0".parse().unwrap(),
                    driver: None,
                },
            ],
        };
        let s = e.to_string();
        assert!(
            s.contains("IOMMU group 17 of 0000:03:00.0 is not viable"),
            "{s}"
        );
        assert!(s.contains("  0000:03:00.1 (mlx5_core)"), "{s}");
        assert!(s.contains("  0000:00:01.0 (no driver)"), "{s}");
    }

    #[test]
    fn memlock_prints_limit_and_fix() {
        let s = VfioError::MemlockTooLow {
            limit: 8 << 20,
            needed: 256 << 20,
        }
        .to_string();
        assert!(s.contains("is 8 MiB"), "{s}");
        assert!(s.contains("at least 256 MiB"), "{s}");
        assert!(s.contains("ulimit -l unlimited"), "{s}");
        assert!(s.contains("/etc/security/limits.conf"), "{s}");
        assert!(s.contains("LimitMEMLOCK=infinity"), "{s}");
    }

    #[test]
    fn permission_and_missing_modules() {
        let s = VfioError::Permission {
            path: "/dev/vfio/5".into(),
        }
        .to_string();
        assert!(s.contains("/dev/vfio/5"), "{s}");
        assert!(s.contains("chown"), "{s}");
        assert!(VfioError::VfioNotLoaded
            .to_string()
            .contains("sudo modprobe vfio-pci"));
    }

    #[test]
    fn firmware_timeouts_are_classified() {
        let e = VfioError::from_bringup(
            bdf(),
            mlx5::Error::Timeout {
                waiting_for: mlx5::Wait::FwPreInit,
                waited_ms: 120_001,
            },
        );
        let s = e.to_string();
        assert!(matches!(
            e,
            VfioError::FirmwareInitializing {
                waited_ms: 120_001,
                ..
            }
        ));
        assert!(s.contains("still initializing after 120001 ms"), "{s}");
        assert!(s.contains("/sys/bus/pci/devices/0000:03:00.0/reset"), "{s}");
        let e = VfioError::from_bringup(
            bdf(),
            mlx5::Error::Timeout {
                waiting_for: mlx5::Wait::Command { opcode: 0x100 },
                waited_ms: 60_000,
            },
        );
        assert!(matches!(e, VfioError::BringUp { .. }));
    }

    #[test]
    fn sizes_read_well() {
        assert_eq!(human_bytes(u64::MAX), "unlimited");
        assert_eq!(human_bytes(64 << 10), "64 KiB");
        assert_eq!(human_bytes(3 << 29), "1.5 GiB");
        assert_eq!(human_bytes(100), "100 bytes");
    }
}
