//! `mlx5ctl demo`'s command line.

use std::path::PathBuf;

use clap::Args as ClapArgs;
use mlx5::qp::QpType;

/// `mlx5ctl demo` arguments.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// QP type: rc (SEND, WRITE, READ, atomics), uc (SEND, WRITE, WRITE with immediate) or ud
    /// (addressed SENDs).
    #[arg(long = "type", value_name = "rc|uc|ud", default_value = "rc",
          value_parser = crate::size::parse_type)]
    pub(super) qp_type: QpType,
    /// Simulated device profile (both NICs).
    #[arg(long, value_name = "PROFILE|CAPS.json", default_value = "cx5")]
    pub(super) sim: String,
    /// Two simulated ConnectX-5 virtual functions (PCI 15b3:1018) whose hypervisor assigned
    /// no MAC: each brings itself up as a VF and picks a random MAC, as in a cloud guest.
    #[arg(long)]
    pub(super) vf: bool,
    /// Run each simulated device on its own thread.
    #[arg(long)]
    pub(super) threaded: bool,
    /// Messages in the throughput run: RDMA WRITEs (rc, uc) or SENDs (ud).
    #[arg(long, default_value_t = 100_000)]
    pub(super) messages: u64,
    /// Bytes per message in the throughput run (ud: at most the UD MTU).
    #[arg(long, default_value_t = 4096)]
    pub(super) size: u32,
    /// Round trips in the latency run.
    #[arg(long, default_value_t = 2_000)]
    pub(super) pings: u32,
    /// Write every frame on the simulated wire to FILE (pcap; Wireshark shows RoCE v2).
    #[arg(long, value_name = "FILE")]
    pub(super) pcap: Option<PathBuf>,
    /// Write every firmware command of the first NIC as JSON lines to FILE (the QP commands
    /// with the QP's "qp_type").
    #[arg(long, value_name = "FILE")]
    pub(super) trace: Option<PathBuf>,
    /// Real ConnectX functions bound to vfio-pci instead of the simulator: one (both QPs on its
    /// port, in loopback) or two (one QP on each, cabled or switched together).
    #[arg(long, value_name = "BDF", num_args = 1, action = clap::ArgAction::Append)]
    pub(super) vfio: Vec<String>,
}
