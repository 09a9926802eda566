//! `mlx5-sim`: a simulated NVIDIA ConnectX-5 (mlx5) that behaves like its firmware, for the
//! driver's tests and for users without a NIC.
//!
//! A [`SimDevice`] is a PCI function seen from the driver: a 32 MiB BAR0 ([`SimDevice::bar_read32`],
//! [`SimDevice::bar_write32`], [`SimDevice::bar_write64`]) holding the initialization segment,
//! health buffer and UAR pages; DMA memory reached through an IOMMU-like translation
//! ([`SimDevice::dma_alloc`]); and a clock ([`SimDevice::now_ns`], [`SimDevice::relax`]). Behind
//! BAR0 the firmware command interface runs the bring-up and resource commands, and creates,
//! queries and destroys the queue objects (EQ, CQ, SRQ / RMP, QP and its state machine), with the
//! checks real firmware makes (delivery status, command status with a per-reason [`syndrome`]).
//! The EQ and CQ doorbells written to UAR pages update their queues ([`SimDevice::eq_armed`]).
//!
//!
//! The data path: memory keys (CREATE/QUERY/DESTROY_MKEY), send doorbells and BlueFlame on the
//! UAR pages, WQE execution, CQEs and EQEs, and the RoCE v2 transports (RC with PSNs, ACKs,
//! retransmission and RNR; UC; UD) over a [`Fabric`] of real frame bytes (ICRC included), with
//! wire faults ([`WireFault`]) and a pcap capture. A device is alone on a private fabric (its
//! own MAC loops back) until [`Fabric::attach`] puts it on a shared one.
//!
//! Firmware pages as a PF's firmware asks for them: under a [`PagePolicy`] a CREATE that needs
//! ICM is held — its entry stays the device's — until MANAGE_PAGES in another command slot
//! brings the pages a PAGE_REQUEST event asked for; spare pages are offered back, and seeded
//! requests come at random moments ([`SimDevice::page_stats`] keeps the accounts).
//!
//! A hostile device: [`Fault`]s make it lie in what it writes — CQEs, EQEs, command outputs
//! and tokens, init segment and health words, a BAR that reads all ones — write stray bytes
//! into live DMA memory ([`SimDevice::dma_scribble`]), and complete commands twice, out of
//! order or spuriously; each one that takes effect is recorded ([`SimDevice::fault_events`]).
//!
//! Modules, by floor (each imports only the floors below it, never sideways):
//!
//! 1. `model` (the device model: HCA state, capabilities, objects, keys, pages, vport, the
//!    data path's runtime of each object, statuses) and `memory` (queue buffers, rings and
//!    doorbell records through `iommu`), with `bar` (init segment, health, UAR pages),
//!    `fault` (injected faults and records), `fabric` (the wire, RoCE v2 frames, pcap, behind
//!    its `Fabric` and `Station` interface), `profile`, `syndrome`, `trace`, `scribble`;
//! 2. `events`: CQEs, EQEs, CQ and EQ arming, asynchronous events, a QP entering ERR;
//! 3. `fw` (the command handlers: state machine, dispatch, one module per object) and `engine`
//!    (the data path: doorbells, WQEs, transports, Ethernet), side by side, never importing
//!    each other;
//! 4. `cmdif` (entries, mailboxes, delivery, held commands) and `device` (the device core:
//!    BAR0 routing of commands to `fw` and doorbells to `engine`, time, the fabric link), with
//!    `lib.rs` on top and `bar0` (the handle's BAR0 accesses) beside it.
//!
//! Two modes ([`Mode`]): `Sync` executes a command — and a send doorbell, with every frame it
//! causes — inside the doorbell write and runs on virtual time advanced by `relax()`;
//! `Threaded` runs the firmware and the data path on a thread per device and real time, so the
//! driver's polling, ordering and timeouts are exercised for real.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![deny(unreachable_pub)]
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

mod bar;
mod bar0;
mod cmdif;
mod device;
mod engine;
mod error;
mod events;
mod fabric;
mod fault;
mod fw;
mod iommu;
mod memory;
mod mode;
mod model;
mod profile;
mod scribble;
mod small;
mod state;
pub mod syndrome;
mod trace;
mod work;

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use bar::{
    UarWrite, BAR_SIZE, HEALTH_TICK_NS, INIT_DELAY_NS, LOG_CMDQ_SIZE, LOG_CMDQ_STRIDE, UAR_LOG,
};
pub use device::{InterruptSink, BUSY_POLL_DEFAULT, RELAX_NS};
pub use error::SimError;
pub use fabric::{
    ExternalCounters, ExternalPort, Fabric, FabricCounters, WireFault, MAX_NEIGHBOURS,
    PCAP_MAGIC_NS,
};
pub use fault::{
    CqeField, DmaFault, DmaFaultKind, EqeField, Fault, FaultEvent, Replay, EQE_DATA_WORDS,
    SPURIOUS_STATUS,
};
pub use fw::eq::EQE_BYTES;
pub use fw::qp::FIRST_QPN;
pub use fw::resources::FIRST_UAR_INDEX;
pub use iommu::{DmaBlock, ExternalMemory, IOVA_BASE, MAX_DMA_ALIGN, MAX_DMA_BYTES};
pub use mode::Mode;
pub use model::icm::SwIcmAccounts;
pub use model::mkey::{NULL_MKEY, RESD_LKEY};
pub use model::objects::ObjectKind;
pub use model::pages::{PagePolicy, PageStats, RandomPages};
pub use model::runtime::DatapathCounters;
pub use model::vport::{DEFAULT_MTU, MAX_MTU};
pub use model::HcaState;
pub use profile::Profile;
pub use profile::MSIX_VECTORS;
pub use scribble::{Scribble, MAX_SCRIBBLE_BYTES};
pub use trace::{TraceRecord, TRACE_CAPACITY};

use device::Shared;
use work::Work;

/// The longest a device thread sleeps before it looks at its timers again.
const THREAD_TICK: Duration = Duration::from_micros(200);

impl Fabric {
    /// Puts `dev`'s port on this fabric. Refused when the device is on another shared fabric
    /// already ([`SimError::FabricAlreadyAttached`]), runs in another mode than the devices
    /// on this one ([`SimError::FabricModeMismatch`]), or has the MAC of a port already on it
    /// ([`SimError::DuplicateMac`]: give each profile its own `_mac`). Attaching again is a no-op.
    pub fn attach(&self, dev: &SimDevice) -> Result<(), SimError> {
        Shared::attach_to(dev.shared_arc(), self)
    }
}

/// The handle every clone shares; dropping the last one stops the device thread.
struct Handle {
    shared: Arc<Shared>,
    doorbells: Option<Sender<Work>>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        // The fabric keeps senders to the thread too: stop it explicitly.
        self.shared.set_kick(None);
        if let Some(tx) = self.doorbells.take() {
            let _ = tx.send(Work::Stop);
        }
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                log::error!("mlx5-sim: the device thread panicked");
            }
        }
    }
}

/// A simulated ConnectX-5. Clones share the device; it is `Send + Sync`.
#[derive(Clone)]
pub struct SimDevice {
    inner: Arc<Handle>,
}

impl std::fmt::Debug for SimDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimDevice")
            .field("profile", &self.inner.shared.profile.name())
            .field("mode", &self.inner.shared.mode)
            .finish_non_exhaustive()
    }
}

impl SimDevice {
    /// A device of `profile`, just out of reset (`initializing` set, HCA disabled).
    pub fn new(profile: Profile, mode: Mode) -> SimDevice {
        let shared = Arc::new(Shared::new(profile, mode));
        let (mut doorbells, mut thread) = (None, None);
        if mode == Mode::Threaded {
            let (tx, rx) = mpsc::channel::<Work>();
            let dev = Arc::clone(&shared);
            let spawned = std::thread::Builder::new()
                .name("mlx5-sim".to_string())
                .spawn(move || {
                    let mut busy = Instant::now();
                    loop {
                        // Hot (work came within the busy-poll window): poll for the next item
                        // instead of sleeping, as a NIC's engines do not wait to be woken;
                        // else block.
                        let window = dev.busy_poll_ns.load(std::sync::atomic::Ordering::Relaxed);
                        let next = if (busy.elapsed().as_nanos() as u64) < window {
                            match rx.try_recv() {
                                Ok(w) => Ok(w),
                                Err(mpsc::TryRecvError::Empty) => {
                                    std::thread::yield_now();
                                    Err(RecvTimeoutError::Timeout)
                                }
                                Err(mpsc::TryRecvError::Disconnected) => {
                                    Err(RecvTimeoutError::Disconnected)
                                }
                            }
                        } else {
                            rx.recv_timeout(THREAD_TICK)
                        };
                        match next {
                            Ok(Work::Cmd(bits)) => dev.ring(bits),
                            Ok(Work::Sq(rung)) => dev.sq_doorbell(rung),
                            Ok(Work::Wire) | Err(RecvTimeoutError::Timeout) => {}
                            Ok(Work::Stop) | Err(RecvTimeoutError::Disconnected) => break,
                        }
                        if next.is_ok() {
                            busy = Instant::now();
                        }
                        dev.service();
                    }
                });
            match spawned {
                Ok(t) => {
                    shared.set_kick(Some(tx.clone()));
                    (doorbells, thread) = (Some(tx), Some(t));
                }
                Err(e) => log::error!(
                    "mlx5-sim: cannot start the device thread ({e}); doorbells run inline"
                ),
            }
        }
        let (fabric, _) = shared.link();
        let station: Arc<dyn fabric::Station> = shared.clone();
        let port = fabric.add_port(
            Arc::downgrade(&station),
            profile_mac(&shared),
            shared.kick(),
        );
        shared.set_link(fabric, port);
        SimDevice {
            inner: Arc::new(Handle {
                shared,
                doorbells,
                thread,
            }),
        }
    }

    fn shared(&self) -> &Shared {
        &self.inner.shared
    }

    pub(crate) fn shared_arc(&self) -> &Arc<Shared> {
        &self.inner.shared
    }

    /// The mode the device runs in.
    pub fn mode(&self) -> Mode {
        self.shared().mode
    }

    /// The device's profile.
    pub fn profile(&self) -> &Profile {
        &self.shared().profile
    }

    /// Allocates `len` zeroed bytes of DMA memory, mapped at an IOVA aligned to
    /// `max(align, 4096)`, at a host address aligned to `align` (a power of two up to 2 MiB).
    pub fn dma_alloc(&self, len: usize, align: usize) -> Result<DmaBlock, SimError> {
        // The memory is made and zeroed before the device's lock is taken: another thread's
        // commands and doorbells do not wait for it.
        let z = iommu::Zeroed::new(len, align)?;
        let sh = self.shared();
        let b = sh.staged().alloc(z)?;
        sh.staged_changed();
        Ok(b)
    }

    /// Unmaps and frees the allocation at `iova`. Freeing memory that holds a page the device
    /// still owns (MANAGE_PAGES give, not taken back) frees it anyway and records a
    /// [`DmaFaultKind::HostFreedDevicePage`] in [`SimDevice::dma_faults`].
    pub fn dma_free(&self, iova: u64) -> Result<(), SimError> {
        // The table drops it (and the device's pages in it are looked for) the next time the
        // device takes its lock, before it touches memory again.
        let sh = self.shared();
        sh.staged().free(iova)?;
        sh.staged_changed();
        Ok(())
    }

    /// A function-level reset: the device starts over as if just powered on — `initializing`
    /// for [`INIT_DELAY_NS`], firmware state, objects, pages, EQs and command interface gone,
    /// the command queue unprogrammed. What is the host's stays: DMA memory and its mappings
    /// (the simulator's own allocations and external ones), the fabric port, the interrupt
    /// sink.
    pub fn function_level_reset(&self) {
        let now = self.now_ns();
        let profile = self.shared().profile.clone();
        let mut st = self.shared().lock();
        let iommu = std::mem::replace(&mut st.iommu, iommu::Iommu::new());
        // What the hypervisor set for the function (its MAC, its vport's admin state) is the
        // PF's, not the function's: it outlives the reset.
        let v = &st.model.vport;
        let hv = (v.mac, v.mac_unset, v.hv_admin);
        *st = state::State::new(&profile);
        st.iommu = iommu;
        let v = &mut st.model.vport;
        (v.mac, v.mac_unset, v.hv_admin) = hv;
        st.bar.set_born(now);
        log::info!("mlx5-sim: function-level reset at {now} ns");
    }

    /// [`Mode::Threaded`]: how long the device thread keeps polling for work (a doorbell, a
    /// frame) after its last item before it sleeps — [`BUSY_POLL_DEFAULT`] unless set. Polling
    /// costs a CPU while it lasts and saves a thread wake-up (tens of µs on a busy VM) per hop:
    /// a 64-byte round trip between two threaded devices takes ~13 µs polling, ~85 µs not.
    /// `Duration::ZERO` never polls (a host whose CPUs are needed elsewhere, e.g. by a QEMU
    /// guest under TCG). No effect in [`Mode::Sync`].
    pub fn set_busy_poll(&self, window: Duration) {
        self.shared().busy_poll_ns.store(
            window.as_nanos().min(u128::from(u64::MAX)) as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    /// Where the MSI-X vectors the device raises go: an EQE written to an armed EQ raises the
    /// EQ's `intr` vector, and the EQ is then fired until its doorbell arms it again (as the
    /// hardware does). The sink is called with no lock of the device held, after the operation
    /// that raised the vector (a BAR write, a command, a frame's arrival, a timer); `None`
    /// removes it (vectors raised meanwhile are dropped: the driver polls).
    pub fn set_interrupt_sink(&self, sink: Option<InterruptSink>) {
        self.shared().set_irq_sink(sink);
    }

    /// Maps `len` bytes of memory the simulator did not allocate at `iova` — a vfio-user
    /// client's DMA_MAP of guest RAM — so that the device reaches it like its own DMA memory.
    /// Refused ([`SimError::DmaMapRefused`]) for no bytes, memory shorter than `len`, a range
    /// that wraps or overlaps a live mapping.
    pub fn dma_map_external(
        &self,
        iova: u64,
        len: usize,
        mem: std::sync::Arc<dyn ExternalMemory>,
    ) -> Result<(), SimError> {
        self.shared().lock().iommu.map_external(iova, len, mem)
    }

    /// Unmaps every external mapping inside `[iova, iova + len)` (a vfio-user DMA_UNMAP);
    /// returns how many there were. A later device access there is a translation fault.
    pub fn dma_unmap_external(&self, iova: u64, len: usize) -> usize {
        self.shared().lock().iommu.unmap_external(iova, len)
    }

    /// Bytes of external memory mapped ([`SimDevice::dma_map_external`]).
    pub fn dma_external_bytes(&self) -> usize {
        self.shared().lock().iommu.external_bytes()
    }

    /// Host-side convenience: writes `data` into DMA memory at `iova`.
    pub fn dma_write(&self, iova: u64, data: &[u8]) -> Result<(), SimError> {
        let st = self.shared().lock();
        st.iommu
            .write_release(iova, data)
            .map_err(|_| SimError::DmaUnmapped {
                iova,
                len: data.len(),
            })
    }

    /// Host-side convenience: reads DMA memory at `iova` into `buf`.
    pub fn dma_read(&self, iova: u64, buf: &mut [u8]) -> Result<(), SimError> {
        let st = self.shared().lock();
        st.iommu.read(iova, buf).map_err(|_| SimError::DmaUnmapped {
            iova,
            len: buf.len(),
        })
    }

    /// Device time in nanoseconds: virtual in [`Mode::Sync`], real since creation in
    /// [`Mode::Threaded`].
    pub fn now_ns(&self) -> u64 {
        self.shared().now_ns()
    }

    /// Called by the driver in every polling loop: [`Mode::Sync`] advances device time (the
    /// fabric's clock) by [`RELAX_NS`] and runs the timers and delayed frames now due;
    /// [`Mode::Threaded`] yields the CPU.
    pub fn relax(&self) {
        self.shared().relax();
    }

    /// Injects a fault (see [`Fault`]; the module documentation of `fault` has a summary
    /// table). `FatalHealth`, `InitSegWord`, `FellOffBus` and `DmaScribble` act now; the
    /// others wait for the event they corrupt.
    pub fn inject(&self, f: Fault) {
        let now = self.now_ns();
        let mut st = self.shared().lock();
        let st = &mut *st;
        let name = f.name();
        match f {
            Fault::FatalHealth { synd } => {
                st.bar.set_fatal(synd, now);
                let what = format!("health syndrome {synd:#x}, rfr; the firmware is dead");
                st.model.injected.log.push(now, name, what);
            }
            Fault::InitSegWord {
                offset,
                value,
                sticky,
            } => {
                let off = u64::from(offset);
                if !bar::Bar::forgeable(off) {
                    log::warn!("mlx5-sim: InitSegWord at {off:#x}: not a word of the init segment pages; ignored");
                    return;
                }
                let stuck = st.model.injected.stuck_initializing;
                st.bar.forge(off, value, sticky, now, stuck);
                let what = format!(
                    "BAR0 word {off:#x} reads {value:#010x} ({})",
                    if sticky {
                        "sticky"
                    } else {
                        "until the device changes it"
                    }
                );
                st.model.injected.log.push(now, name, what);
            }
            Fault::FellOffBus => {
                st.bar.fall_off_bus();
                let what = "BAR reads return all ones, BAR writes are lost".to_string();
                st.model.injected.log.push(now, name, what);
            }
            Fault::DmaScribble { iova, bytes } => {
                let what = match scribble::write(&st.iommu, iova, &bytes) {
                    Ok(old) => format!(
                        "{} bytes at {iova:#x}: {old:02x?} -> {bytes:02x?}",
                        bytes.len()
                    ),
                    Err(_) => {
                        st.dma_faults.push(DmaFault {
                            iova,
                            len: bytes.len(),
                            kind: DmaFaultKind::Write,
                            what: "injected stray DMA write".to_string(),
                        });
                        format!("{} bytes at {iova:#x}: not mapped, blocked", bytes.len())
                    }
                };
                st.model.injected.log.push(now, name, what);
            }
            other => st.model.injected.add(other),
        }
    }

    /// Commands [`Fault::SlowCommand`] keeps now (delivered, not executed).
    pub fn slow_commands(&self) -> usize {
        self.shared().lock().slow.len()
    }

    /// Ends the commands [`Fault::SlowCommand`] keeps: each executes and completes now (after
    /// its pages, if it needs some). Returns how many there were.
    pub fn finish_slow_commands(&self) -> usize {
        self.shared().finish_slow()
    }

    /// Drops every pending injected fault and every sticky one (`StuckInitializing`,
    /// `InitSegWord`, `FellOffBus`, armed `CompleteTwice` replays). A fatal health state stays,
    /// and so do the bytes faults have written and [`SimDevice::fault_events`].
    pub fn clear_faults(&self) {
        let mut st = self.shared().lock();
        st.model.injected.clear();
        st.bar.clear_lies();
    }

    /// Every injected fault that took effect so far, in order (the last [`TRACE_CAPACITY`]).
    pub fn fault_events(&self) -> Vec<FaultEvent> {
        self.shared().lock().model.injected.log.events()
    }

    /// Every live DMA allocation, `(iova, len)`, by IOVA: what the device can reach.
    pub fn dma_allocations(&self) -> Vec<(u64, usize)> {
        self.shared().lock().iommu.allocations()
    }

    /// The device writes `count` times 1..=[`MAX_SCRIBBLE_BYTES`] random bytes at a random
    /// offset of a random live DMA allocation ([`SimDevice::dma_allocations`]); the same `seed`
    /// over the same allocations writes the same bytes at the same places. Returns every write
    /// (recorded as `DmaScribble` in [`SimDevice::fault_events`] too). Nothing is written when
    /// nothing is allocated.
    pub fn dma_scribble(&self, seed: u64, count: usize) -> Vec<Scribble> {
        let now = self.now_ns();
        let mut st = self.shared().lock();
        let done = scribble::random(&st.iommu, seed, count);
        for s in &done {
            let what = format!(
                "{} bytes at {:#x}: {:02x?} -> {:02x?} (seed {seed:#x})",
                s.new.len(),
                s.iova,
                s.old,
                s.new
            );
            st.model.injected.log.push(now, "DmaScribble", what);
        }
        done
    }

    /// Firmware pages the device holds now.
    pub fn pages_held(&self) -> usize {
        self.shared().lock().model.pages.held()
    }

    /// The firmware's page accounts: held, asked for, offered back, the PAGE_REQUEST events
    /// raised, the commands that waited for pages.
    pub fn page_stats(&self) -> PageStats {
        fw::page_req::stats(&self.shared().lock().model)
    }

    /// Changes how the firmware asks for pages from now on ([`PagePolicy`]; the profile's is
    /// the initial one). Held commands the new policy no longer makes wait execute now.
    pub fn set_page_policy(&self, policy: PagePolicy) {
        self.shared().with_state(|st, profile, now| {
            st.model.pages.req.set_policy(policy);
            cmdif::release_held(st, profile, now);
        });
    }

    /// The firmware raises a PAGE_REQUEST now: `n` > 0 asks for `n` more pages; `n` < 0 offers
    /// back up to `|n|` of its free pages (as many as it has that are not yet offered; none:
    /// no event). Ignored unless the HCA is initialized.
    pub fn request_pages(&self, n: i32) {
        self.shared().with_state(|st, profile, now| {
            if st.model.state != HcaState::Initialized {
                log::warn!("mlx5-sim: request_pages({n}) before INIT_HCA; ignored");
                return;
            }
            let n = if n < 0 {
                let spare = fw::page_req::returnable(&st.model, profile)
                    .saturating_sub(st.model.pages.req.offered);
                -(i64::from(n.unsigned_abs()).min(i64::try_from(spare).unwrap_or(i64::MAX)))
            } else {
                i64::from(n)
            };
            fw::page_req::raise(&mut st.hw(now), n);
        });
    }

    /// Every live firmware object, by kind then handle.
    pub fn live_objects(&self) -> Vec<(ObjectKind, u32)> {
        self.shared().lock().model.objects.live()
    }

    /// The context image of a queue object or memory key as the firmware holds it now — the
    /// `eqc`, `cqc`, `srqc`, `rmpc` (without its PAS), `qpc` or `mkc` bytes (an mkey's by its
    /// index: `free` is set once a SEND with invalidate invalidated it) — or `None` if `id` is
    /// not a live object of `kind` with a context (UARs and PDs have none).
    pub fn object_context(&self, kind: ObjectKind, id: u32) -> Option<Vec<u8>> {
        let s = self.shared().lock();
        match kind {
            ObjectKind::Mkey => s.model.objects.mkey(id).map(|m| m.ctx.clone()),
            _ => s.model.objects.queue(kind, id).map(|q| q.ctx.clone()),
        }
    }

    /// The state (`qpc.state`, `mlx5_ifc::consts::qp_state`) of QP `qpn`, if it exists.
    pub fn qp_state(&self, qpn: u32) -> Option<u8> {
        fw::qp::state(&self.shared().lock().model, qpn)
    }

    /// Whether EQ `eqn` is armed (its last doorbell was the arming one), if it exists.
    pub fn eq_armed(&self, eqn: u32) -> Option<bool> {
        self.armed(ObjectKind::Eq, eqn)
    }

    /// Whether CQ `cqn` has been armed by a CQ doorbell, if it exists.
    pub fn cq_armed(&self, cqn: u32) -> Option<bool> {
        self.armed(ObjectKind::Cq, cqn)
    }

    fn armed(&self, kind: ObjectKind, id: u32) -> Option<bool> {
        self.shared()
            .lock()
            .model
            .objects
            .queue(kind, id)
            .map(|q| q.armed)
    }

    /// Bytes of DMA memory still allocated.
    pub fn dma_bytes_mapped(&self) -> usize {
        self.shared().staged().mapped_bytes()
    }

    /// Every DMA violation so far (device translation faults, host frees of device pages).
    pub fn dma_faults(&self) -> Vec<DmaFault> {
        self.shared().lock().dma_faults.clone()
    }

    /// The HCA state the firmware is in.
    pub fn hca_state(&self) -> HcaState {
        self.shared().lock().model.state
    }

    /// Every executed command (the last [`TRACE_CAPACITY`]).
    pub fn trace(&self) -> Vec<TraceRecord> {
        self.shared().lock().trace.records()
    }

    /// Writes the trace as JSON lines ([`TraceRecord::to_json_line`]).
    pub fn write_trace_jsonl(&self, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        for r in self.trace() {
            writeln!(w, "{}", r.to_json_line())?;
        }
        Ok(())
    }

    /// How many commands the firmware has executed (delivered, whatever their status).
    pub fn commands_executed(&self) -> u64 {
        self.shared().lock().commands_executed
    }

    /// The health buffer syndrome (0 = healthy).
    pub fn health_syndrome(&self) -> u8 {
        self.shared().lock().bar.health_synd()
    }

    /// The driver version string SET_DRIVER_VERSION reported, if any.
    pub fn driver_version(&self) -> Option<String> {
        self.shared().lock().model.driver_version.clone()
    }

    /// The fabric the device's port is on: its own private one until [`Fabric::attach`].
    pub fn fabric(&self) -> Fabric {
        self.shared().link().0
    }

    /// The port's MAC address (the NIC vport's permanent address): frames to it reach this
    /// device.
    pub fn port_mac(&self) -> [u8; 6] {
        self.shared().mac()
    }

    /// How many CQEs the device has written to CQ `cqn` (error CQEs included), if it exists.
    pub fn cqe_count(&self, cqn: u32) -> Option<u64> {
        let st = self.shared().lock();
        st.model.objects.queue(ObjectKind::Cq, cqn)?;
        Some(st.model.rt.cqs.get(&cqn).map_or(0, |c| c.written))
    }

    /// How many EQEs the device has written to EQ `eqn`, if it exists.
    pub fn eqe_count(&self, eqn: u32) -> Option<u64> {
        let st = self.shared().lock();
        st.model.objects.queue(ObjectKind::Eq, eqn)?;
        Some(st.model.rt.eqs.get(&eqn).map_or(0, |&pi| u64::from(pi)))
    }

    /// How many send WQEs the device has executed (flushed ones not counted).
    pub fn wqes_executed(&self) -> u64 {
        self.shared().lock().model.rt.counters.wqes_executed
    }

    /// The hypervisor's side of a virtual function (its PF's e-switch, `ip link set … vf N
    /// state …`): the vport's administrative state. The function's link is up when its own
    /// PAOS says so and this is not [`VportAdmin::Down`]; a change of it raises PORT_CHANGE
    /// (down or active) to the EQs subscribed, as the VF's driver sees it. Returns whether the
    /// link is up now.
    pub fn set_vport_admin(&self, state: VportAdmin) -> bool {
        let v = match state {
            VportAdmin::Down => model::vport::VPORT_ADMIN_DOWN,
            VportAdmin::Up => model::vport::VPORT_ADMIN_UP,
            VportAdmin::Auto => model::vport::VPORT_ADMIN_AUTO,
        };
        self.shared().datapath(false, |hw| {
            hw.model.vport.set_hv_admin(v);
            fw::vport::after_command(hw);
            hw.model.vport.oper_up()
        })
    }

    /// The hypervisor's side: the MAC it assigns the function (`ip link set … vf N mac …`),
    /// or none (`permanent_address` reads zero). The function's driver reads it at its next
    /// bring-up, as on a real VF.
    pub fn set_assigned_mac(&self, mac: Option<[u8; 6]>) {
        let mut st = self.shared().lock();
        match mac {
            Some(m) => {
                st.model.vport.mac = m;
                st.model.vport.mac_unset = false;
            }
            None => st.model.vport.mac_unset = true,
        }
    }

    /// The data path counters (WQEs, CQEs, EQEs, frames, retransmissions, NAKs...).
    pub fn datapath_counters(&self) -> DatapathCounters {
        self.shared().lock().model.rt.counters
    }

    /// The DCT connections the device holds (one per initiator that reached a DCT and was
    /// neither drained nor forgotten; at most 1024).
    pub fn dc_connections(&self) -> usize {
        self.shared().lock().model.dc.connections()
    }
}

/// A vport's administrative state as the hypervisor sets it ([`SimDevice::set_vport_admin`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VportAdmin {
    /// Held down: the function's link is down whatever its own PAOS says.
    Down,
    /// Held up.
    Up,
    /// Following the uplink (a VF's default).
    Auto,
}

/// The MAC of a new device (read before its port exists).
fn profile_mac(shared: &Shared) -> [u8; 6] {
    shared.mac()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn handle_is_send_sync() {
        assert_send_sync::<SimDevice>();
    }

    #[test]
    fn dropping_the_last_clone_stops_the_thread() {
        let dev = SimDevice::new(Profile::connectx5(), Mode::Threaded);
        let weak = Arc::downgrade(&dev.inner.shared);
        let other = dev.clone();
        drop(dev);
        assert!(weak.upgrade().is_some());
        drop(other);
        assert!(
            weak.upgrade().is_none(),
            "device thread still holds the device"
        );
    }
}
