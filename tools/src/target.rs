//! Which device a command runs on: `--sim PROFILE|CAPS.json` (the default: a simulated
//! ConnectX-5) with an optional `--trace FILE` of every firmware command.

use std::path::{Path, PathBuf};

use clap::Args;
use mlx5::sim::{Mode, Profile, SimDevice};
use mlx5::{Device, DeviceConfig, SimPlatform};

/// Device selection shared by the subcommands.
#[derive(Args, Debug, Clone)]
pub struct Target {
    /// Simulated device: a profile name (cx5, cx5-tight, cx5-sq512) or a JSON caps file whose
    /// keys are cmd_hca_cap field names.
    #[arg(long, value_name = "PROFILE|CAPS.json", default_value = "cx5")]
    pub sim: String,
    /// Run the simulated device on its own thread (like hardware) instead of synchronously.
    #[arg(long)]
    pub threaded: bool,
    /// Write every firmware command as a JSON line to FILE.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
}

/// An opened device and what is needed to report on it.
pub struct Opened {
    pub device: Device<SimPlatform>,
    pub sim: SimDevice,
    pub name: String,
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
        let profile = profile(&self.sim)?;
        let name = profile.name().to_string();
        let mode = if self.threaded {
            Mode::Threaded
        } else {
            Mode::Sync
        };
        let sim = SimDevice::new(profile, mode);
        let t0 = std::time::Instant::now();
        let device = Device::open(SimPlatform::new(sim.clone()), DeviceConfig::default());
        let wall = t0.elapsed();
        let device = match device {
            Ok(d) => d,
            Err(e) => {
                self.write_trace(&sim)?;
                return Err(format!("bring-up of the simulated device failed: {e}"));
            }
        };
        Ok(Opened {
            device,
            sim,
            name,
            wall,
        })
    }

    /// Writes the command trace, if asked for.
    pub fn write_trace(&self, sim: &SimDevice) -> Result<(), String> {
        let Some(path) = &self.trace else {
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
        self.write_trace(&o.sim)?;
        r
    }
}
