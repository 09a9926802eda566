//! The subcommands of `mlx5ctl` (the binary in `main.rs` parses the command line and calls
//! them); a library so that benchmarks and fuzz targets reach the same code.

#![recursion_limit = "256"]
#![deny(unreachable_pub)]
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod createqp;
pub mod demo;
pub mod devinfo;
pub mod iommucheck;
pub mod link;
pub mod list;
pub mod net;
pub mod perftest;
pub mod pingpong;
pub mod rping;
pub mod scale;
pub mod simctl;
pub mod simserve;
pub mod size;
pub mod target;
