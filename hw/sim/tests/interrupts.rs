//! MSI-X and reset. An EQE written to an armed EQ raises the EQ's `intr` vector, delivered to the
//! interrupt sink ([`SimDevice::set_interrupt_sink`]) once the device's lock is released; the
//! EQ is then fired, and raises nothing more until its doorbell arms it again (EQEs are still
//! written). This is what a vfio-user server turns into eventfd writes for a guest's driver.

mod common;

use std::sync::{Arc, Mutex};

use common::queues::*;
use mlx5_ifc::prm::eq::{CreateEqIn, CreateEqOut, Eqc};
use mlx5_ifc::{Be32, Layout, View, ViewMut};
use mlx5_sim::{InterruptSink, Mode};

/// CREATE_EQ of 16 EQEs on MSI-X vector `intr`, subscribed to PAGE_REQUEST (0x0b: bit 11 of
/// the 256-bit mask); its number.
fn page_request_eq(fx: &mut Fx, intr: u64) -> u32 {
    let mut input = fx.eq_in(4, |c| {
        c.set(Eqc::INTR, intr).unwrap();
    });
    ViewMut::<CreateEqIn>::new(&mut input)
        .unwrap()
        .bytes_mut(CreateEqIn::EVENT_BITMASK)[6] |= 1 << 3;
    let out = fx.p.ok(&input, CreateEqOut::BYTES);
    View::<CreateEqOut>::new(&out)
        .unwrap()
        .get32(CreateEqOut::EQ_NUMBER)
}

#[test]
fn an_armed_eq_raises_its_vector_once_per_arming() {
    let mut fx = Fx::cx5(Mode::Sync);
    let dev = fx.dev();
    let eqn = page_request_eq(&mut fx, 7);
    let raised = Arc::new(Mutex::new(Vec::new()));
    let (r, d) = (raised.clone(), dev.clone());
    let sink: InterruptSink = Arc::new(move |v| {
        // Called with the device unlocked: reading it here does not deadlock.
        assert_eq!(
            d.eq_armed(eqn),
            Some(false),
            "fired before the vector is raised"
        );
        r.lock().unwrap().push(v);
    });
    dev.set_interrupt_sink(Some(sink));

    // Not armed: the EQE is written, nothing raised.
    dev.request_pages(1);
    assert_eq!(dev.eqe_count(eqn), Some(1));
    assert!(raised.lock().unwrap().is_empty());

    // Armed (consumer index 1): the next EQE raises vector 7, and the EQ is fired.
    let uar = u64::from(fx.uar) * 4096;
    dev.bar_write32(uar + 0x40, Be32::new(eqn << 24 | 1));
    assert_eq!(dev.eq_armed(eqn), Some(true));
    dev.request_pages(1);
    assert_eq!(*raised.lock().unwrap(), vec![7]);
    assert_eq!(dev.eq_armed(eqn), Some(false));
    dev.request_pages(1);
    assert_eq!(dev.eqe_count(eqn), Some(3));
    assert_eq!(
        *raised.lock().unwrap(),
        vec![7],
        "fired: no second interrupt"
    );

    // Removed: nothing delivered.
    dev.set_interrupt_sink(None);
    dev.bar_write32(uar + 0x40, Be32::new(eqn << 24 | 3));
    dev.request_pages(1);
    assert_eq!(*raised.lock().unwrap(), vec![7]);
}

/// Arming an EQ behind EQEs the driver has not consumed (written while it was not armed —
/// between the driver's last look and its arming) fires it at once: the hardware's answer to
/// that race, without which the interrupt for those EQEs never comes (Linux's command interface
/// then waits for its timeout and logs "recovered after timeout"). Arming with everything
/// consumed raises nothing.
#[test]
fn arming_an_eq_behind_unconsumed_eqes_fires_it_at_once() {
    let mut fx = Fx::cx5(Mode::Sync);
    let dev = fx.dev();
    let eqn = page_request_eq(&mut fx, 5);
    let raised = Arc::new(Mutex::new(Vec::new()));
    let r = raised.clone();
    dev.set_interrupt_sink(Some(Arc::new(move |v| r.lock().unwrap().push(v))));
    let uar = u64::from(fx.uar) * 4096;
    // Two EQEs while not armed: nothing raised.
    dev.request_pages(1);
    dev.request_pages(1);
    assert!(raised.lock().unwrap().is_empty());
    // Armed having consumed one of the two: the EQ fires now.
    dev.bar_write32(uar + 0x40, Be32::new(eqn << 24 | 1));
    assert_eq!(*raised.lock().unwrap(), vec![5]);
    assert_eq!(dev.eq_armed(eqn), Some(false), "fired");
    // Armed having consumed both: armed, nothing raised until the next EQE.
    dev.bar_write32(uar + 0x40, Be32::new(eqn << 24 | 2));
    assert_eq!(dev.eq_armed(eqn), Some(true));
    assert_eq!(*raised.lock().unwrap(), vec![5]);
    dev.request_pages(1);
    assert_eq!(*raised.lock().unwrap(), vec![5, 5]);
}

/// A function-level reset (a vfio-user client's DEVICE_RESET, or FLR through the PCIe device
/// control register) starts the device over — objects gone, `initializing` set again for
/// INIT_DELAY — and keeps what is the host's: DMA memory and its mappings, the interrupt sink.
#[test]
fn a_function_level_reset_starts_the_device_over() {
    let mut fx = Fx::cx5(Mode::Sync);
    let dev = fx.dev();
    let input = fx.eq_in(4, |c| {
        c.set(Eqc::INTR, 1).unwrap();
    });
    fx.p.ok(&input, CreateEqOut::BYTES);
    assert!(!dev.live_objects().is_empty());
    let dma = dev.dma_allocations();
    assert_ne!(dev.hca_state(), mlx5_sim::HcaState::Disabled);
    dev.function_level_reset();
    assert!(dev.live_objects().is_empty(), "{:?}", dev.live_objects());
    assert_eq!(dev.pages_held(), 0);
    assert_eq!(dev.hca_state(), mlx5_sim::HcaState::Disabled);
    assert_eq!(dev.dma_allocations(), dma, "the host's memory stays mapped");
    let init = dev.bar_read32(mlx5_ifc::regs::INITIALIZING.into()).get();
    assert_ne!(
        init & mlx5_ifc::regs::INITIALIZING_BIT,
        0,
        "initializing again"
    );
}

/// Command completion by event, as Linux runs its command interface once its command EQ
/// exists: every command completed afterwards also writes a CMD EQE (type 0x0a) to each EQ
/// subscribed to CMD events — not the command that created the EQ (it completes by polling) —
/// and raises the EQ's vector when it is armed.
#[test]
fn commands_complete_by_event_on_an_eq_subscribed_to_them() {
    let mut fx = Fx::cx5(Mode::Sync);
    let dev = fx.dev();
    let mut input = fx.eq_in(4, |c| {
        c.set(Eqc::INTR, 2).unwrap();
    });
    {
        let mut v = ViewMut::<CreateEqIn>::new(&mut input).unwrap();
        let mask = v.bytes_mut(CreateEqIn::EVENT_BITMASK);
        mask.fill(0);
        mask[6] = 1 << 2; // CMD (0x0a): bit 10
    }
    let out = fx.p.ok(&input, CreateEqOut::BYTES);
    let eqn = View::<CreateEqOut>::new(&out)
        .unwrap()
        .get32(CreateEqOut::EQ_NUMBER);
    assert_eq!(dev.eqe_count(eqn), Some(0), "no event for its own creation");
    let raised = Arc::new(Mutex::new(Vec::new()));
    let r = raised.clone();
    dev.set_interrupt_sink(Some(Arc::new(move |v| r.lock().unwrap().push(v))));
    let uar = u64::from(fx.uar) * 4096;
    dev.bar_write32(uar + 0x40, Be32::new(eqn << 24));
    // Any command now completes with an EQE too.
    let q = common::cmd::<mlx5_ifc::prm::eq::QueryEqIn>(mlx5_ifc::Opcode::QueryEq, 0, |v| {
        v.set(mlx5_ifc::prm::eq::QueryEqIn::EQ_NUMBER, eqn.into())
            .unwrap();
    });
    fx.p.ok(&q, mlx5_ifc::prm::eq::QueryEqOut::BYTES + 8);
    assert_eq!(dev.eqe_count(eqn), Some(1));
    assert_eq!(*raised.lock().unwrap(), vec![2]);
    fx.p.ok(&q, mlx5_ifc::prm::eq::QueryEqOut::BYTES + 8);
    assert_eq!(dev.eqe_count(eqn), Some(2));
    assert_eq!(*raised.lock().unwrap(), vec![2], "fired until armed again");
}
