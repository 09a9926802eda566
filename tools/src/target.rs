//! Which device a command runs on: `--sim PROFILE|CAPS.json` (the default: a simulated
//! ConnectX-5) with an optional `--trace FILE` of every firmware command, or `--vfio BDF`: a real
//! ConnectX function bound to vfio-pci.

use std::path::{Path, PathBuf};

use clap::Args;
use mlx5::sim::{Mode, Profile, SimDevice};
use mlx5::{Device, DeviceConfig, SimPlatform};
use mlx5_vfio::{AnyPlatform, VfioError, VfioOptions, VfioPlatform};

/// Device selection shared by the subcommands.
#[derive(Args, Debug, Clone)]
pub struct Target {
    /// Simulated device: a profile name (cx5, cx5-tight, cx5-sq512, cx5-vf) or a JSON caps file whose
    /// keys are cmd_hca_cap field names.
    #[arg(long, value_name = "PROFILE|CAPS.json", default_value = "cx5")]
    pub sim: String,
    /// A real ConnectX function bound to vfio-pci instead of the simulator, by PCI address
    /// (`mlx5ctl list` shows them; docs/vfio.md says how to bind one).
    #[arg(long, value_name = "BDF", conflicts_with_all = ["threaded", "trace"])]
    pub vfio: Option<String>,
    /// Run the simulated device on its own thread (like hardware) instead of synchronously.
    #[arg(long)]
    pub threaded: bool,
    /// Write every firmware command as a JSON line to FILE.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
}

/// An opened device and what is needed to report on it.
#[derive(Debug)]
pub struct Opened {
    pub device: Device<AnyPlatform>,
    /// The simulated device behind it, if it is one.
    pub sim: Option<SimDevice>,
    /// `hca_id` as `ibv_devinfo` prints it.
    pub hca_id: String,
    /// PCI device id (`vendor_part_id`).
    pub part_id: u16,
    pub wall: std::time::Duration,
}

/// Resolves `--sim` to a profile.
pub fn profile(spec: &str) -> Result<Profile, String> {
    let path = Path::new(spec);
    if spec.ends_with(".json") || path.is_file() {
        return Profile::from_json_file(path).map_err(|e| format!("caps file {spec}: {e}"));
    }
    Profile::by_name(spec).ok_or_else(|| {
        format!(
            "unknown profile {spec:?} (known: {})",
            Profile::names().join(", ")
        )
    })
}

impl Target {
    /// Brings the selected device up.
    pub fn open(&self) -> Result<Opened, String> {
        if let Some(bdf) = &self.vfio {
            return Self::open_vfio(bdf).map_err(|e| e.to_string());
        }
        let profile = profile(&self.sim)?;
        let name = profile.name().to_string();
        let mode = if self.threaded {
            Mode::Threaded
        } else {
            Mode::Sync
        };
        let sim = SimDevice::new(profile, mode);
        let t0 = std::time::Instant::now();
        let platform = AnyPlatform::Sim(SimPlatform::new(sim.clone()));
        let device = Device::open(platform, DeviceConfig::default());
        let wall = t0.elapsed();
        let device = match device {
            Ok(d) => d,
            Err(e) => {
                self.write_trace(Some(&sim))?;
                return Err(format!("bring-up of the simulated device failed: {e}"));
            }
        };
        let part_id = sim.profile().pci_device_id();
        Ok(Opened {
            device,
            sim: Some(sim),
            hca_id: format!("mlx5_sim ({name})"),
            part_id,
            wall,
        })
    }

    /// Opens a real function bound to vfio-pci (also used by `demo --vfio`).
    pub fn open_vfio(bdf: &str) -> Result<Opened, VfioError> {
        let opts = VfioOptions {
            expect_vendor: Some(mlx5_vfio::pci::MELLANOX_VENDOR),
            ..VfioOptions::default()
        };
        let platform = VfioPlatform::open(bdf, &opts)?;
        let addr = platform.address();
        let part_id = platform.info().function.device;
        let config = DeviceConfig {
            bar_size: platform.bar_size(),
            ..DeviceConfig::default()
        };
        let t0 = std::time::Instant::now();
        let device = Device::open(AnyPlatform::Vfio(Box::new(platform)), config)
            .map_err(|e| VfioError::from_bringup(addr, e))?;
        Ok(Opened {
            device,
            sim: None,
            hca_id: format!("mlx5_vfio ({addr})"),
            part_id,
            wall: t0.elapsed(),
        })
    }

    /// Writes the command trace, if asked for (simulated devices only).
    pub fn write_trace(&self, sim: Option<&SimDevice>) -> Result<(), String> {
        let (Some(path), Some(sim)) = (&self.trace, sim) else {
            return Ok(());
        };
        let mut f = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
        sim.write_trace_jsonl(&mut f)
            .map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Tears the device down and writes the trace (which then includes the teardown).
    pub fn close(&self, o: Opened) -> Result<(), String> {
        let r = o
            .device
            .close()
            .map_err(|e| format!("teardown failed: {e}"));
        self.write_trace(o.sim.as_ref())?;
        r
    }
}
