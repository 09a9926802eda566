//! EQEs that lie: the records of the input corrupt the next EQEs the device writes (event type,
//! sub type, CQN, QPN, any data word or byte, a flipped owner bit) while the workload arms its
//! CQ, takes completion events and async events (a QP moved to ERR raises some). Reading events
//! must never panic; an event naming an unknown CQ or QP is the caller's to ignore.
#![no_main]

#[path = "common/mod.rs"]
mod common;

use libfuzzer_sys::fuzz_target;
use mlx5::sim::{EqeField, Fault};
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
        let field = match rec[0] % 7 {
            0 => EqeField::EventType,
            1 => EqeField::SubType,
            2 => EqeField::Cqn,
            3 => EqeField::Qpn,
            4 => EqeField::Data(rec[1] % 8),
            5 => EqeField::Byte(rec[1] % 64),
            _ => EqeField::OwnerFlipped,
        };
        sim.inject(Fault::CorruptEqe {
            eqn: None,
            field,
            value,
        });
    });
    let mut ev = [mlx5::Event::default(); 64];
    if let Ok(n) = dev.poll_async_events(&mut ev) {
        for e in &ev[..n] {
            let _ = (e.cqn(), e.qpn());
        }
    }
    common::close(&sim, dev);
});
