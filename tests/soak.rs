//! The soak test of issue #9: thousands of random device faults from one seed (printed, so a
//! failure is reproduced with `MLX5_SOAK_SEED=<seed> cargo test --test soak`), against a
//! workload that creates and destroys CQs, SRQs, memory regions and QPs, posts, polls, moves QPs
//! through ERR and RESET, and reads events.
//!
//! What must hold, whatever the device does:
//! * no panic (in the driver or the simulator), no hang past the configured deadlines;
//! * every failure a typed `Error` that says what failed;
//! * every signaled work request completed at most once, and never one that was not posted
//!   (a completion the device lied about is refused, not handed out twice);
//! * after each device's teardown, the accounts balance: what the platform still has mapped is
//!   exactly what the driver quarantined, and a healthy device has no page or object left.

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use mlx5::ifc::Opcode;
use mlx5::mr::MrAccess;
use mlx5::qp::{ConnectOpts, QpAttr, QpAttrMask as M, QpInitAttr, QpState, QpType, RecvWr};
use mlx5::qp::{SendOp, SendWr, Sge};
use mlx5::sim::{CqeField, EqeField, Fabric, Fault, Mode, Profile, Replay, SimDevice};
use mlx5::srq::SrqAttr;
use mlx5::{Device, DeviceConfig, Error, SimPlatform, WcStatus};

/// splitmix64: small, fast, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

/// The commands the workload sends, which the command faults aim at.
const OPCODES: &[Opcode] = &[
    Opcode::CreateCq,
    Opcode::DestroyCq,
    Opcode::CreateQp,
    Opcode::DestroyQp,
    Opcode::Rst2InitQp,
    Opcode::Init2RtrQp,
    Opcode::Rtr2RtsQp,
    Opcode::Qp2Err,
    Opcode::Qp2Rst,
    Opcode::CreateMkey,
    Opcode::DestroyMkey,
    Opcode::CreateRmp,
    Opcode::DestroyRmp,
    Opcode::AllocUar,
    Opcode::DeallocUar,
    Opcode::QueryCq,
];

/// Injects one random fault; returns its name. The rare ones kill the device.
fn inject(sim: &SimDevice, rng: &mut Rng) -> &'static str {
    let op = rng.pick(OPCODES) as u16;
    let f = match rng.below(100) {
        0..=14 => Fault::CorruptCqe {
            field: rng.pick(&[
                CqeField::Qpn,
                CqeField::WqeCounter,
                CqeField::ByteCnt,
                CqeField::Opcode,
            ]),
            value: match rng.below(3) {
                0 => rng.below(8) as u32,
                1 => rng.next() as u32,
                _ => 0x100 + rng.below(4) as u32,
            },
        },
        15..=24 => Fault::CorruptEqe {
            eqn: None,
            field: match rng.below(5) {
                0 => EqeField::EventType,
                1 => EqeField::Cqn,
                2 => EqeField::Qpn,
                3 => EqeField::OwnerFlipped,
                _ => EqeField::Byte(rng.below(64) as u8),
            },
            value: rng.next() as u32,
        },
        25..=39 => Fault::CorruptOutput {
            opcode: op,
            offset: rng.below(80) as usize,
            bytes: (0..1 + rng.below(4)).map(|_| rng.next() as u8).collect(),
        },
        40..=44 => Fault::CorruptOutputToken {
            opcode: op,
            block: 0,
            token: rng.next() as u8,
        },
        45..=54 => Fault::FailCommand {
            opcode: op,
            status: rng.pick(&[0x2, 0x3, 0x4, 0x5, 0x6, 0x10, 0x22, 0x40]),
            syndrome: rng.next() as u32,
        },
        55..=69 => {
            let n = 1 + rng.below(3) as usize;
            sim.dma_scribble(rng.next(), n);
            return "DmaScribble";
        }
        70..=76 => Fault::CompleteTwice {
            opcode: op,
            when: if rng.below(2) == 0 {
                Replay::BeforeNextCommand
            } else {
                Replay::AfterNextCommand
            },
        },
        77..=83 => Fault::CompleteOutOfOrder,
        84..=91 => Fault::InitSegWord {
            offset: rng.pick(&[0x1010, 0x1fc, 0x238, 0x23c, 0xff8, 0xffc, 0x0, 0x4]),
            value: rng.next() as u32,
            sticky: false,
        },
        92..=93 => Fault::NeverComplete { opcode: op },
        94 => Fault::FatalHealth {
            synd: rng.pick(&[1, 2, 3, 7, 8, 9]),
        },
        95 => Fault::FellOffBus,
        _ => return "none",
    };
    let name = f.name();
    sim.inject(f);
    name
}

/// Faults after which the device may have been told something the driver cannot know was a lie
/// (an output or completion that looks right but is not, a stray write into the command queue):
/// firmware objects may then be orphaned — the driver was never told their number, or was told
/// a command ran that did not. The DMA accounts must balance all the same.
const LIES: &[&str] = &[
    "CorruptOutput",
    "CorruptOutputToken",
    "CompleteTwice",
    "CompleteOutOfOrder",
    "DmaScribble",
    "InitSegWord",
];

#[derive(Default)]
struct Tally {
    /// A lying fault was injected in this device's life.
    lies: bool,
    rounds: u64,
    faults: u64,
    completions: u64,
    successes: u64,
    errors: u64,
    lives: u64,
    quarantined: u64,
}

fn config() -> DeviceConfig {
    DeviceConfig {
        cmd_timeout_ms: 200,
        min_device_timeout_ms: 50,
        fw_init_timeout_ms: 500,
        fw_pre_init_timeout_ms: 500,
        reclaim_timeout_ms: 300,
        cq_lock_timeout_ms: 100,
        ..DeviceConfig::default()
    }
}

/// Notes an error: it must say something (every error is typed; Display names what failed).
fn note(t: &mut Tally, e: &Error) {
    let text = e.to_string();
    assert!(!text.is_empty());
    t.errors += 1;
}

/// One round of work under whatever faults are pending. Returns whether the device still
/// answers commands.
fn round(dev: &Device<SimPlatform>, sim: &SimDevice, rng: &mut Rng, t: &mut Tally) -> bool {
    t.rounds += 1;
    let cq = match dev.create_cq(1 + rng.below(255) as u32) {
        Ok(c) => c,
        Err(e) => {
            note(t, &e);
            return alive(&e);
        }
    };
    let pd = dev.pd();
    let mr = match dev.alloc_mr(pd, 8192, MrAccess::ALL) {
        Ok(m) => m,
        Err(e) => {
            note(t, &e);
            return alive(&e);
        }
    };
    let srq = if rng.below(3) == 0 {
        dev.create_srq(
            pd,
            &SrqAttr {
                max_wr: 16,
                max_sge: 1,
                srq_limit: 0,
            },
        )
        .map_err(|e| note(t, &e))
        .ok()
    } else {
        None
    };
    let cap = common::cap(32, 32, 1);
    let mut attr = QpInitAttr::new(QpType::Rc, &cq, &cq, cap);
    attr.srq = srq.as_ref();
    let mut qp = match dev.create_qp(pd, &attr) {
        Ok(q) => q,
        Err(e) => {
            note(t, &e);
            return alive(&e);
        }
    };
    let me = qp.endpoint();
    if let Err(e) = qp.connect(&me, &ConnectOpts::default()) {
        note(t, &e);
        return alive(&e);
    }
    let sge = [Sge {
        addr: mr.addr(),
        length: 64 + rng.below(512) as u32,
        lkey: mr.lkey(),
    }];
    let recv = [Sge {
        addr: mr.addr() + 4096,
        length: 2048,
        lkey: mr.lkey(),
    }];
    let mut posted = HashSet::new();
    let mut seen = HashSet::new();
    let mut next_id = 1u64 + (t.rounds << 16);
    for _ in 0..1 + rng.below(3) {
        // Receives for the SENDs.
        let rwrs: Vec<RecvWr<'_>> = (0..4)
            .map(|i| RecvWr {
                wr_id: (1 << 40) + next_id + i,
                sg_list: &recv,
            })
            .collect();
        let r = match srq.as_ref() {
            Some(s) => s.post_recv(&rwrs),
            None => qp.post_recv(&rwrs),
        };
        match r {
            Ok(()) => posted.extend(rwrs.iter().map(|w| w.wr_id)),
            Err(e) => note(t, &e),
        }
        if rng.below(2) == 0 {
            let f = inject(sim, rng);
            t.faults += u64::from(f != "none");
            t.lies |= LIES.contains(&f);
        }
        let n = 1 + rng.below(6);
        let wrs: Vec<SendWr<'_>> = (0..n)
            .map(|i| {
                let op = match rng.below(3) {
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
                SendWr {
                    op,
                    signaled: true,
                    ..SendWr::send(next_id + 100 + i, &sge)
                }
            })
            .collect();
        next_id += 1000;
        match qp.post_send(&wrs) {
            Ok(()) => posted.extend(wrs.iter().map(|w| w.wr_id)),
            Err(e) => note(t, &e),
        }
        poll_some(dev, &cq, &posted, &mut seen, t);
        let mut ev = [mlx5::Event::default(); 8];
        if let Err(e) = dev.poll_async_events(&mut ev) {
            note(t, &e);
        }
        if let Err(e) = dev.poll_completion_events(&mut ev) {
            note(t, &e);
        }
    }
    if rng.below(2) == 0 {
        for s in [QpState::Err, QpState::Reset] {
            let a = QpAttr {
                qp_state: Some(s),
                ..QpAttr::default()
            };
            if let Err(e) = qp.modify(&a, M::STATE) {
                note(t, &e);
            }
            poll_some(dev, &cq, &posted, &mut seen, t);
        }
    }
    if let Err(e) = qp.destroy() {
        note(t, &e);
    }
    if let Some(s) = srq {
        if let Err(e) = s.destroy() {
            note(t, &e);
        }
    }
    if let Err(e) = mr.dereg() {
        note(t, &e);
    }
    if let Err(e) = cq.destroy() {
        note(t, &e);
        return alive(&e);
    }
    sim.health_syndrome() == 0
}

/// Polls until the CQ stays empty for a while (bounded), checking each completion.
fn poll_some(
    dev: &Device<SimPlatform>,
    cq: &mlx5::cq::Cq<'_, SimPlatform>,
    posted: &HashSet<u64>,
    seen: &mut HashSet<u64>,
    t: &mut Tally,
) {
    let mut wc = [mlx5::Wc::default(); 16];
    let deadline = Instant::now() + Duration::from_millis(500);
    let mut idle = 0;
    while idle < 200 && Instant::now() < deadline {
        match cq.poll(&mut wc) {
            Ok(0) => {
                idle += 1;
                mlx5::Platform::relax(dev.platform());
            }
            Ok(n) => {
                idle = 0;
                for w in &wc[..n] {
                    t.completions += 1;
                    assert!(
                        posted.contains(&w.wr_id),
                        "completion of wr_id {:#x}, never posted: {w:?}",
                        w.wr_id
                    );
                    assert!(
                        seen.insert(w.wr_id),
                        "wr_id {:#x} completed twice: {w:?}",
                        w.wr_id
                    );
                    if w.status == WcStatus::Success {
                        t.successes += 1;
                    }
                }
            }
            Err(e) => {
                note(t, &e);
                if !alive(&e) {
                    return;
                }
            }
        }
    }
}

/// Whether the device may still answer after this error.
fn alive(e: &Error) -> bool {
    !matches!(
        e,
        Error::Unusable { .. } | Error::Health { .. } | Error::Timeout { .. }
    )
}

/// One device's life: open, rounds until it dies or the budget runs out, teardown, accounts.
fn life(rng: &mut Rng, fabric: &Fabric, rounds: u64, t: &mut Tally) {
    t.lives += 1;
    t.lies = false;
    let sim = SimDevice::new(Profile::connectx5(), Mode::Sync);
    fabric.attach(&sim).expect("attach");
    let dev = match Device::open(SimPlatform::new(sim.clone()), config()) {
        Ok(d) => d,
        Err(e) => panic!("a fault-free bring-up failed: {e}"),
    };
    let mut healthy = true;
    for _ in 0..rounds {
        if !round(&dev, &sim, rng, t) {
            healthy = false;
            break;
        }
    }
    // Faults still pending must not bite the teardown of a device that is meant to be fine.
    sim.clear_faults();
    let (r, q) = dev.close_accounted();
    t.quarantined += q.bytes;
    assert_eq!(
        sim.dma_bytes_mapped() as u64,
        q.bytes,
        "after teardown ({r:?}), DMA memory left mapped that was not quarantined: {q:?}"
    );
    if r.is_ok() {
        assert_eq!(sim.pages_held(), 0, "a clean teardown took every page back");
    }
    if r.is_ok() && healthy && !t.lies {
        // Nothing lied to the driver: every object it made, it destroyed.
        assert!(sim.live_objects().is_empty(), "{:?}", sim.live_objects());
    }
    if !t.lies {
        // And it freed nothing the device still used: no write blocked by the IOMMU, no
        // firmware page freed under the device.
        assert_eq!(
            sim.dma_faults(),
            vec![],
            "DMA violations without a lying device"
        );
    }
}

#[test]
fn thousands_of_random_faults_leave_no_panic_no_hang_and_balanced_accounts() {
    let (seed, budget) = common::seed_and_rounds("MLX5_SOAK_SEED", "MLX5_SOAK_ROUNDS", 300);
    println!("soak seed {seed} ({budget} rounds): MLX5_SOAK_SEED={seed} reproduces it");
    let mut rng = Rng(seed);
    let fabric = Fabric::new();
    let mut t = Tally::default();
    let started = Instant::now();
    while t.rounds < budget {
        let per_life = 20 + rng.below(60);
        life(&mut rng, &fabric, per_life.min(budget - t.rounds), &mut t);
    }
    println!(
        "soak seed {seed}: {} rounds over {} devices, {} faults, {} completions ({} successful), {} typed errors, {} bytes quarantined, {:.1} s",
        t.rounds,
        t.lives,
        t.faults,
        t.completions,
        t.successes,
        t.errors,
        t.quarantined,
        started.elapsed().as_secs_f64()
    );
    assert!(t.faults > budget / 4, "the faults were injected");
}
