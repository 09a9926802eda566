//! What the fuzz targets share: a simulated device with short deadlines, a workload that
//! touches every kind of device-written data, and the accounts checked after teardown.
#![allow(dead_code)]

use std::collections::HashSet;

use mlx5::ifc::Opcode;
use mlx5::qp::{ConnectOpts, QpAttr, QpAttrMask, QpCap, QpInitAttr, QpState, QpType};
use mlx5::qp::{RecvWr, SendOp, SendWr, Sge};
use mlx5::sim::{Mode, Profile, SimDevice};
use mlx5::srq::SrqAttr;
use mlx5::{Device, DeviceConfig, MrAccess, SimPlatform, Wc};

pub type Dev = Device<SimPlatform>;

/// Every command the bring-up and the workload send.
pub const OPCODES: &[Opcode] = &[
    Opcode::QueryHcaCap,
    Opcode::QueryAdapter,
    Opcode::InitHca,
    Opcode::TeardownHca,
    Opcode::EnableHca,
    Opcode::DisableHca,
    Opcode::QueryPages,
    Opcode::ManagePages,
    Opcode::SetHcaCap,
    Opcode::QueryIssi,
    Opcode::SetIssi,
    Opcode::CreateMkey,
    Opcode::DestroyMkey,
    Opcode::QuerySpecialContexts,
    Opcode::CreateEq,
    Opcode::DestroyEq,
    Opcode::CreateCq,
    Opcode::DestroyCq,
    Opcode::QueryCq,
    Opcode::CreateQp,
    Opcode::DestroyQp,
    Opcode::Rst2InitQp,
    Opcode::Init2RtrQp,
    Opcode::Rtr2RtsQp,
    Opcode::Qp2Err,
    Opcode::Qp2Rst,
    Opcode::CreateRmp,
    Opcode::DestroyRmp,
    Opcode::QueryVportState,
    Opcode::ModifyVportState,
    Opcode::QueryNicVportContext,
    Opcode::ModifyNicVportContext,
    Opcode::SetRoceAddress,
    Opcode::AllocPd,
    Opcode::DeallocPd,
    Opcode::AllocUar,
    Opcode::DeallocUar,
    Opcode::AccessReg,
];

pub fn config() -> DeviceConfig {
    DeviceConfig {
        cmd_timeout_ms: 100,
        min_device_timeout_ms: 20,
        fw_init_timeout_ms: 200,
        fw_pre_init_timeout_ms: 200,
        reclaim_timeout_ms: 100,
        cq_lock_timeout_ms: 50,
        ..DeviceConfig::default()
    }
}

pub fn sim() -> SimDevice {
    let sim = SimDevice::new(Profile::connectx5(), Mode::Sync);
    mlx5::sim::Fabric::new().attach(&sim).expect("attach");
    sim
}

/// Creates a CQ, an MR, an SRQ and two looped RC QPs (one on the SRQ), posts receives and a
/// mix of SENDs, WRITEs and READs, calls `between` before each batch (to inject faults), polls,
/// reads events, moves one QP through ERR and RESET, and destroys everything. Every completion
/// must name a posted work request, at most once. Errors are fine: they are typed.
pub fn workload(dev: &Dev, rounds: usize, mut between: impl FnMut(usize)) {
    let pd = dev.pd();
    let Ok(cq) = dev.create_cq(127) else { return };
    let Ok(mr) = dev.alloc_mr(pd, 8192, MrAccess::ALL) else {
        return;
    };
    let srq = dev
        .create_srq(
            pd,
            &SrqAttr {
                max_wr: 8,
                max_sge: 1,
                srq_limit: 0,
            },
        )
        .ok();
    let cap = QpCap {
        max_send_wr: 16,
        max_recv_wr: 16,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 64,
    };
    let mut qps = Vec::new();
    for on_srq in [false, true] {
        let mut attr = QpInitAttr::new(QpType::Rc, &cq, &cq, cap);
        if on_srq {
            match srq.as_ref() {
                Some(s) => attr.srq = Some(s),
                None => continue,
            }
        }
        if let Ok(mut q) = dev.create_qp(pd, &attr) {
            let me = q.endpoint();
            if q.connect(&me, &ConnectOpts::default()).is_ok() {
                qps.push(q);
            }
        }
    }
    let sge = [Sge {
        addr: mr.addr(),
        length: 256,
        lkey: mr.lkey(),
    }];
    let recv = [Sge {
        addr: mr.addr() + 4096,
        length: 1024,
        lkey: mr.lkey(),
    }];
    let mut posted = HashSet::new();
    let mut seen = HashSet::new();
    let mut id = 1u64;
    for r in 0..rounds {
        between(r);
        for q in qps.iter_mut() {
            let rw = [RecvWr {
                wr_id: id,
                sg_list: &recv,
            }];
            id += 1;
            let ok = match (q.handles().3, srq.as_ref()) {
                (Some(_), Some(s)) => s.post_recv(&rw).is_ok(),
                _ => q.post_recv(&rw).is_ok(),
            };
            if ok {
                posted.insert(rw[0].wr_id);
            }
            let op = match r % 3 {
                0 => SendOp::Send,
                1 => SendOp::Write {
                    remote_addr: mr.addr() + 6144,
                    rkey: mr.rkey(),
                },
                _ => SendOp::Read {
                    remote_addr: mr.addr() + 6144,
                    rkey: mr.rkey(),
                },
            };
            let wr = SendWr {
                op,
                ..SendWr::send(id, &sge)
            };
            id += 1;
            if q.post_send(&[wr]).is_ok() {
                posted.insert(wr.wr_id);
            }
        }
        let _ = cq.req_notify(false);
        poll(dev, &cq, &posted, &mut seen);
        let mut ev = [mlx5::Event::default(); 8];
        let _ = dev.poll_completion_events(&mut ev);
        let _ = dev.poll_async_events(&mut ev);
        let _ = cq.ack_event();
    }
    if let Some(q) = qps.first_mut() {
        for s in [QpState::Err, QpState::Reset] {
            let a = QpAttr {
                qp_state: Some(s),
                ..QpAttr::default()
            };
            let _ = q.modify(&a, QpAttrMask::STATE);
            poll(dev, &cq, &posted, &mut seen);
        }
    }
    drop(qps);
    drop(srq);
    let _ = mr.dereg();
    let _ = cq.destroy();
}

fn poll(dev: &Dev, cq: &mlx5::cq::Cq<'_, SimPlatform>, posted: &HashSet<u64>, seen: &mut HashSet<u64>) {
    let mut wc = [Wc::default(); 8];
    for _ in 0..64 {
        match cq.poll(&mut wc) {
            Ok(0) => mlx5::Platform::relax(dev.platform()),
            Ok(n) => {
                for w in &wc[..n] {
                    assert!(posted.contains(&w.wr_id), "never posted: {w:?}");
                    assert!(seen.insert(w.wr_id), "completed twice: {w:?}");
                }
            }
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    }
}

/// Closes the device; what stays mapped must be exactly what the driver quarantined.
/// And no host memory (the driver's bookkeeping, which no device can hold) stays allocated.
pub fn close(sim: &SimDevice, dev: Dev) {
    sim.clear_faults();
    let plat = dev.platform().clone();
    let (_, q) = dev.close_accounted();
    assert_eq!(
        sim.dma_bytes_mapped() as u64,
        q.bytes,
        "DMA memory left mapped that was not quarantined: {q:?}"
    );
    assert_eq!(plat.host_bytes_in_use(), 0, "host memory held after close");
}
