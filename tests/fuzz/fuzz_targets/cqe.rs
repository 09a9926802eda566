//! CQEs that lie: before each round of work, the records of the input corrupt the next CQEs
//! the device writes (QPN, WQE counter, byte count, opcode) or scribble bytes over live DMA
//! memory (rings, doorbell records, data). Polling must turn every lie into a typed error or a
//! completion of a posted work request, each at most once; nothing panics.
#![no_main]

#[path = "common/mod.rs"]
mod common;

use libfuzzer_sys::fuzz_target;
use mlx5::sim::{CqeField, Fault};
use mlx5::{Device, SimPlatform};

fuzz_target!(|data: &[u8]| {
    let sim = common::sim();
    let Ok(dev) = Device::open(SimPlatform::new(sim.clone()), common::config()) else {
        panic!("a fault-free bring-up failed");
    };
    let records: Vec<&[u8]> = data.chunks_exact(6).take(32).collect();
    common::workload(&dev, records.len().max(1), |r| {
        let Some(rec) = records.get(r) else { return };
        let value = u32::from_le_bytes([rec[2], rec[3], rec[4], rec[5]]);
        match rec[0] % 6 {
            0 => sim.inject(Fault::CorruptCqe {
                field: CqeField::Qpn,
                value,
            }),
            1 => sim.inject(Fault::CorruptCqe {
                field: CqeField::WqeCounter,
                value,
            }),
            2 => sim.inject(Fault::CorruptCqe {
                field: CqeField::ByteCnt,
                value,
            }),
            3 => sim.inject(Fault::CorruptCqe {
                field: CqeField::Opcode,
                value,
            }),
            4 => {
                sim.dma_scribble(u64::from(value), 1 + usize::from(rec[1] % 4));
            }
            _ => {}
        }
    });
    common::close(&sim, dev);
});
