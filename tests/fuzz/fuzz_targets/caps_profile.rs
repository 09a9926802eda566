//! A device whose capabilities are arbitrary: a JSON capability profile (`mlx5ctl --sim`) is
//! parsed; when the simulator accepts it, the driver brings that device up and creates a CQ, an
//! SRQ, QPs of each type and a memory region on it, then closes it. Whatever the capabilities
//! say, the driver must refuse with a typed error or work — never panic, never hang, and leave
//! nothing mapped that it did not quarantine.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mlx5::qp::{QpCap, QpInitAttr, QpType};
use mlx5::sim::{Mode, Profile, SimDevice};
use mlx5::srq::SrqAttr;
use mlx5::{Device, DeviceConfig, MrAccess, SimPlatform};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(profile) = Profile::from_json_str(text) else {
        return;
    };
    let sim = SimDevice::new(profile, Mode::Sync);
    let config = DeviceConfig {
        cmd_timeout_ms: 500,
        fw_init_timeout_ms: 500,
        fw_pre_init_timeout_ms: 500,
        reclaim_timeout_ms: 500,
        ..DeviceConfig::default()
    };
    let Ok(dev) = Device::open(SimPlatform::new(sim.clone()), config) else {
        return;
    };
    let seed = data.iter().fold(7u32, |a, &b| a.wrapping_mul(31).wrapping_add(u32::from(b)));
    if let (Ok(cq), pd) = (dev.create_cq(1 + seed % 4096), dev.pd()) {
        let srq = dev
            .create_srq(
                pd,
                &SrqAttr {
                    max_wr: 1 + seed % 300,
                    max_sge: 1 + seed % 5,
                    srq_limit: 0,
                },
            )
            .ok();
        let _mr = dev.alloc_mr(pd, 1 + (seed as usize % 70_000), MrAccess::ALL);
        for t in [QpType::Rc, QpType::Uc, QpType::Ud] {
            let cap = QpCap {
                max_send_wr: seed % 600,
                max_recv_wr: (seed >> 3) % 600,
                max_send_sge: 1 + (seed >> 5) % 8,
                max_recv_sge: 1 + (seed >> 7) % 8,
                max_inline_data: (seed >> 9) % 1100,
            };
            let mut attr = QpInitAttr::new(t, &cq, &cq, cap);
            if seed & 1 == 1 {
                attr.srq = srq.as_ref();
            }
            let _ = dev.create_qp(pd, &attr);
        }
    }
    let (_, q) = dev.close_accounted();
    assert_eq!(
        sim.dma_bytes_mapped() as u64,
        q.bytes,
        "DMA memory left mapped that was not quarantined"
    );
});
