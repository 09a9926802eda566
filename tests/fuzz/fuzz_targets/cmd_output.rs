//! Command outputs that lie: each 8-byte record of the input makes the next completion of one
//! command (bring-up or workload) carry chosen bytes at a chosen output offset, a wrong mailbox
//! token or signature, or come twice or out of order. The driver must bring the device up or
//! refuse with a typed error, never panic or hang, and leave mapped only what it quarantined.
#![no_main]

#[path = "common/mod.rs"]
mod common;

use libfuzzer_sys::fuzz_target;
use mlx5::sim::{Fault, Replay};
use mlx5::{Device, SimPlatform};

fuzz_target!(|data: &[u8]| {
    let sim = common::sim();
    for r in data.chunks_exact(8).take(16) {
        let opcode = common::OPCODES[usize::from(r[0]) % common::OPCODES.len()] as u16;
        let offset = usize::from(u16::from_le_bytes([r[2], r[3]])) % 1100;
        let f = match r[1] % 8 {
            0..=3 => Fault::CorruptOutput {
                opcode,
                offset,
                bytes: r[4..4 + 1 + usize::from(r[1] >> 6)].to_vec(),
            },
            4 => Fault::CorruptOutputToken {
                opcode,
                block: usize::from(r[4] % 3),
                token: r[5],
            },
            5 => Fault::CorruptOutputSignature {
                opcode,
                block: (r[4] & 1 == 1).then_some(usize::from(r[5] % 2)),
            },
            6 => Fault::CompleteTwice {
                opcode,
                when: if r[4] & 1 == 0 {
                    Replay::BeforeNextCommand
                } else {
                    Replay::AfterNextCommand
                },
            },
            _ => Fault::CompleteOutOfOrder,
        };
        sim.inject(f);
    }
    let plat = SimPlatform::new(sim.clone());
    match Device::open(plat.clone(), common::config()) {
        Ok(dev) => {
            common::workload(&dev, 3, |_| {});
            common::close(&sim, dev);
        }
        Err(_) => assert_eq!(plat.host_bytes_in_use(), 0, "host memory held after a failed open"),
    }
});
