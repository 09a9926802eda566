//! `mlx5ctl`: look at a ConnectX (mlx5) device, simulated or real.
//!
//! `mlx5ctl devinfo` brings a device up and prints what `ibv_devinfo -v` prints for it, plus the
//! firmware version, the raw capabilities that limit QPs, and what the bring-up took.

use mlx5_tools::{
    createqp, demo, devinfo, iommucheck, list, net, perftest, pingpong, rping, scale, simserve,
    size,
};

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Look at ConnectX-5 (mlx5) devices: simulated (the default) or real.
#[derive(Parser, Debug)]
#[command(name = "mlx5ctl", version, about)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Bring a device up and print its attributes (like `ibv_devinfo -v`), then tear it down.
    Devinfo(devinfo::Args),
    /// Two simulated NICs on a simulated RoCE v2 wire: an RC, UC or UD QP pair (--type), every
    /// operation of the transport verified, then throughput and latency.
    Demo(demo::Args),
    /// Many RC connections between two simulated NICs (--qps, 10 000 by default), all of a
    /// NIC's QPs on one CQ: SENDs round robin over every one, every byte verified, and what the
    /// setup cost per connection (time, commands, memory, UAR pages).
    Scale(scale::Args),
    /// What create_qp would grant (or why not), without a device: the sizing calculator.
    Size(size::Args),
    /// Create a QP on the device, print the granted caps and its layout, destroy it.
    CreateQp(createqp::Args),
    /// The ConnectX (mlx5) PCI functions of this machine and whether they are ready for --vfio.
    List(list::Args),
    /// Check that the IOMMU confines a function bound to vfio-pci: point its command queue at an
    /// IOVA nothing maps and ring; the device cannot fetch it, and the IOMMU logs the read.
    IommuCheck(iommucheck::Args),
    /// ibv_rc_pingpong / ibv_ud_pingpong on this driver, wire-compatible with rdma-core's: a
    /// real NIC (--vfio) or a simulated one on a real link (--link), as server or client.
    Pingpong(pingpong::Args),
    /// perftest's ib_{write,read,send}_{bw,lat} and ib_atomic_{bw,lat} on this driver (RC),
    /// wire-compatible with perftest 6.06: a real NIC (--vfio) or a simulated one on a real
    /// link (--link), as server or client.
    Perftest(perftest::Args),
    /// rdma-core's rping on this driver and its connection manager (RDMA CM over QP1),
    /// wire-compatible with rping: as server (-s) or client (-c), on a real NIC (--vfio) or a
    /// simulated one on a real link (--link).
    Rping(rping::Args),
    /// TCP/IP through the driver's Ethernet queues and smoltcp: two simulated NICs (ARP, ping,
    /// a TCP stream each way and UDP, every byte checked), or one on a real link (--link,
    /// --tap, --vfio) pinging and serving a peer.
    Net(net::Args),
    /// Serve simulated ConnectX-5s to a QEMU guest over vfio-user (one socket per NIC, all on
    /// one simulated fabric), until the guest disconnects.
    Sim(simserve::Args),
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Devinfo(a) => devinfo::run(&a),
        Cmd::Demo(a) => demo::run(&a),
        Cmd::Scale(a) => scale::run(&a),
        Cmd::Size(a) => size::run(&a),
        Cmd::CreateQp(a) => createqp::run(&a),
        Cmd::List(a) => list::run(&a),
        Cmd::IommuCheck(a) => iommucheck::run(&a),
        Cmd::Sim(a) => simserve::run(&a),
        Cmd::Pingpong(a) => pingpong::run(&a),
        Cmd::Perftest(a) => perftest::run(&a),
        Cmd::Rping(a) => rping::run(&a),
        Cmd::Net(a) => net::run(&a),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mlx5ctl: {e}");
            ExitCode::FAILURE
        }
    }
}
