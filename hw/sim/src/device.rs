//! The device core shared by every `SimDevice` clone and the device thread: the clock and the
//! state behind one lock.
//!
//! Time: in [`Mode::Sync`] the device clock is virtual — it starts at 0 and only `relax()`
//! advances it (by [`RELAX_NS`]); it is the clock of the device's fabric, shared with the other
//! devices on it. In [`Mode::Threaded`] it is real monotonic time since creation. Time-driven
//! work (`initializing`, `health_counter`) is computed from the clock when observed; the data
//! path's timers (ack timeout, RNR wait) are serviced when they are due: by `relax()` and
//! [`crate::Fabric::run_until_idle`] in Sync mode, by the device thread in Threaded mode.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::engine;
use crate::error::SimError;
use crate::fabric::{Fabric, Station};
use crate::iommu::staged::Staged;
use crate::iommu::Freed;
use crate::model::Hw;

use crate::cmdif;
use crate::mode::Mode;
use crate::state::State;
use crate::work::Work;
use crate::Profile;

/// How long a device thread keeps polling for work after its last item before it sleeps, unless
/// [`crate::SimDevice::set_busy_poll`] says otherwise.
pub const BUSY_POLL_DEFAULT: Duration = Duration::from_micros(100);

/// Virtual time one `relax()` call advances in [`Mode::Sync`].
pub const RELAX_NS: u64 = 1_000;

/// The device proper.
pub(crate) struct Shared {
    pub(crate) profile: Profile,
    pub(crate) mode: Mode,
    created: Instant,
    state: Mutex<State>,
    /// The fabric the port is on and the port's index there (a leaf lock).
    link: Mutex<(Fabric, usize)>,
    /// The earliest data path timer (device time; `u64::MAX`: none).
    deadline: AtomicU64,
    /// [`Mode::Threaded`]: how long (ns) the device thread polls for work after its last item
    /// before it sleeps ([`crate::SimDevice::set_busy_poll`]).
    pub(crate) busy_poll_ns: AtomicU64,
    /// The data path owes coalesced ACKs ([`Station::idle`] sends them).
    owes: AtomicBool,
    /// The device thread's work queue ([`Mode::Threaded`]).
    kick: Mutex<Option<Sender<Work>>>,
    /// Where raised MSI-X vectors go ([`crate::SimDevice::set_interrupt_sink`]; a leaf lock).
    irq_sink: Mutex<Option<InterruptSink>>,
    /// The simulator's own DMA allocations and frees, made without the state lock (a leaf
    /// lock); applied to the translation table whenever the state lock is taken.
    staged: Mutex<Staged>,
    /// Whether `staged` holds changes not applied yet.
    staged_pending: AtomicBool,
}

/// Receives the MSI-X vectors the device raises (a vfio-user server writes the vector's
/// eventfd). Called with no lock of the device held.
pub type InterruptSink = std::sync::Arc<dyn Fn(u16) + Send + Sync>;

/// The device state, locked; when it is released, the MSI-X vectors raised meanwhile go to the
/// interrupt sink (outside the lock, so that the sink may call back into the device).
pub(crate) struct StateGuard<'a> {
    guard: Option<MutexGuard<'a, State>>,
    shared: &'a Shared,
    /// Memory unmapped when the guard was taken: freed once the lock is let go.
    freed: Vec<Freed>,
}

impl std::ops::Deref for StateGuard<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        self.guard
            .as_deref()
            .unwrap_or_else(|| unreachable!("held until drop"))
    }
}

impl std::ops::DerefMut for StateGuard<'_> {
    fn deref_mut(&mut self) -> &mut State {
        self.guard
            .as_deref_mut()
            .unwrap_or_else(|| unreachable!("held until drop"))
    }
}

thread_local! {
    /// The data path's spare list of outgoing frames: the engine's and this one trade places
    /// at every turn, so neither is allocated again.
    static SPARE_TX: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Drop for StateGuard<'_> {
    fn drop(&mut self) {
        let Some(mut g) = self.guard.take() else {
            return;
        };
        if g.model.rt.irqs.is_empty() {
            drop(g);
            self.freed.clear();
            return;
        }
        let raised = std::mem::take(&mut g.model.rt.irqs);
        drop(g);
        let sink = self
            .shared
            .irq_sink
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(sink) = sink {
            for v in raised {
                sink(v);
            }
        }
    }
}

impl Shared {
    /// Moves this device's port onto `fabric` ([`Fabric::attach`], which says when it is
    /// refused).
    pub(crate) fn attach_to(self: &Arc<Self>, fabric: &Fabric) -> Result<(), SimError> {
        let (old, old_port) = self.link();
        let station: Arc<dyn Station> = self.clone();
        let joined = fabric.join(&old, old_port, self.mode, self.mac(), station, self.kick())?;
        if let Some(port) = joined {
            self.set_link(fabric.clone(), port);
        }
        Ok(())
    }

    pub(crate) fn new(profile: Profile, mode: Mode) -> Self {
        let state = Mutex::new(State::new(&profile));
        Self {
            profile,
            mode,
            created: Instant::now(),
            state,
            link: Mutex::new((Fabric::private(mode), usize::MAX)),
            deadline: AtomicU64::new(u64::MAX),
            busy_poll_ns: AtomicU64::new(BUSY_POLL_DEFAULT.as_nanos() as u64),
            owes: AtomicBool::new(false),
            kick: Mutex::new(None),
            irq_sink: Mutex::new(None),
            staged: Mutex::new(Staged::new()),
            staged_pending: AtomicBool::new(false),
        }
    }

    /// The allocator of the simulator's own DMA memory (never held with the state lock's
    /// holder waiting on it: the state lock is taken first, or not at all).
    pub(crate) fn staged(&self) -> std::sync::MutexGuard<'_, Staged> {
        self.staged.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks staged changes for the next holder of the state lock (after the change is in).
    pub(crate) fn staged_changed(&self) {
        self.staged_pending.store(true, Ordering::Release);
    }

    /// Sets (or with `None` removes) where raised MSI-X vectors go.
    pub(crate) fn set_irq_sink(&self, sink: Option<InterruptSink>) {
        *self.irq_sink.lock().unwrap_or_else(|e| e.into_inner()) = sink;
    }

    /// The fabric and port index.
    pub(crate) fn link(&self) -> (Fabric, usize) {
        self.link.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub(crate) fn set_link(&self, fabric: Fabric, port: usize) {
        *self.link.lock().unwrap_or_else(|e| e.into_inner()) = (fabric, port);
    }

    /// The device thread's work queue, if it has one.
    pub(crate) fn kick(&self) -> Option<Sender<Work>> {
        self.kick.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub(crate) fn set_kick(&self, tx: Option<Sender<Work>>) {
        *self.kick.lock().unwrap_or_else(|e| e.into_inner()) = tx;
    }

    /// The port MAC.
    pub(crate) fn mac(&self) -> [u8; 6] {
        self.lock().model.vport.mac()
    }

    /// The earliest data path timer.
    pub(crate) fn deadline(&self) -> Option<u64> {
        Some(self.deadline.load(Ordering::Acquire)).filter(|&d| d != u64::MAX)
    }

    /// Whether a data path timer is due.
    pub(crate) fn timers_due(&self) -> bool {
        self.deadline().is_some_and(|d| d <= self.now_ns())
    }

    /// Runs `f` on the data path under the lock; then hands the frames it queued to the fabric
    /// (after releasing the lock) and, in Sync mode, runs the fabric until it is idle when
    /// `settle`.
    pub(crate) fn datapath<R>(&self, settle: bool, f: impl FnOnce(&mut Hw<'_>) -> R) -> R {
        let (fabric, port) = self.link();
        let now = self.now_on(&fabric);
        let (r, frames, mac) = {
            let mut st = self.lock();
            let mut hw = st.hw(now);
            let r = f(&mut hw);
            let rt = &hw.model.rt;
            if !rt.looped.is_empty() || !rt.eth_looped.is_empty() || !rt.fl_looped.is_empty() {
                engine::loop_back(&mut hw);
            }
            // The completions this pass made, compressed where the CQ asks for it.
            crate::events::cqe::close_all(&mut hw);
            // The queued frames out, a spare (emptied earlier, its capacity kept) in.
            let spare = SPARE_TX.with(|s| std::mem::take(&mut *s.borrow_mut()));
            let frames = std::mem::replace(&mut hw.model.rt.tx, spare);
            self.owes
                .store(!hw.model.rt.acks_owed.is_empty(), Ordering::Release);
            let deadline = hw.model.rt.deadline().unwrap_or(u64::MAX);
            self.deadline.store(deadline, Ordering::Release);
            (r, frames, (hw.model.vport.mac(), hw.model.vport.learned()))
        };
        let mut frames = frames;
        fabric.transmit(port, (mac.0, &mac.1), &mut frames);
        SPARE_TX.with(|s| *s.borrow_mut() = frames);
        if settle && self.mode == Mode::Sync {
            fabric.run_until_idle();
        }
        r
    }

    /// Delivers frames from the wire, in order, in one pass (the caller settles the fabric).
    pub(crate) fn deliver(&self, frames: &[Vec<u8>]) {
        self.datapath(false, |hw| {
            for f in frames {
                engine::receive(hw, f);
            }
        });
    }

    /// Every frame due for the device is in: the coalesced ACKs leave. Whether there were any.
    pub(crate) fn idle(&self) -> bool {
        if !self.owes.load(Ordering::Acquire) {
            return false;
        }
        self.datapath(false, engine::verdict::owed_acks);
        true
    }

    /// Services the due data path timers.
    pub(crate) fn service_timers(&self) {
        self.datapath(false, engine::tick);
    }

    /// Executes the send queue a doorbell rang.
    pub(crate) fn sq_doorbell(&self, rung: engine::Rung) {
        self.datapath(true, |hw| engine::ring(hw, rung));
    }

    /// Threaded mode: delivers the frames for the port and services the timers.
    pub(crate) fn service(&self) {
        let (fabric, port) = self.link();
        fabric.service(port, self);
    }

    /// The state; a panic on another thread while it was held does not make it unusable.
    pub(crate) fn lock(&self) -> StateGuard<'_> {
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut freed = Vec::new();
        // A load first: the flag's cache line is written only when there is something staged.
        if self.staged_pending.load(Ordering::Acquire)
            && self.staged_pending.swap(false, Ordering::AcqRel)
        {
            let ops = self.staged().take();
            let (gone, memory) = guard.iommu.apply(ops);
            freed = memory;
            for (iova, len) in gone {
                for page in guard.model.pages.held_in(iova, len) {
                    log::warn!(
                        "mlx5-sim: host freed DMA memory at {iova:#x} holding device page {page:#x}"
                    );
                    guard.dma_faults.push(crate::fault::DmaFault {
                        iova: page,
                        len: mlx5_ifc::consts::ADAPTER_PAGE_SIZE,
                        kind: crate::fault::DmaFaultKind::HostFreedDevicePage,
                        what: "host freed a page the device holds".to_string(),
                    });
                }
            }
        }
        StateGuard {
            guard: Some(guard),
            shared: self,
            freed,
        }
    }

    /// Device time in nanoseconds.
    pub(crate) fn now_ns(&self) -> u64 {
        match self.mode {
            Mode::Sync => self.link().0.now_ns(),
            Mode::Threaded => u64::try_from(self.created.elapsed().as_nanos()).unwrap_or(u64::MAX),
        }
    }

    /// Device time, the device being on `fabric` (its link, which the caller has at hand).
    fn now_on(&self, fabric: &Fabric) -> u64 {
        match self.mode {
            Mode::Sync => fabric.now_ns(),
            Mode::Threaded => u64::try_from(self.created.elapsed().as_nanos()).unwrap_or(u64::MAX),
        }
    }

    /// One turn of a driver polling loop.
    pub(crate) fn relax(&self) {
        match self.mode {
            Mode::Sync => {
                let fabric = self.link().0;
                fabric.tick_clock(RELAX_NS);
                fabric.poll();
            }
            Mode::Threaded => std::thread::yield_now(),
        }
    }

    /// Runs `f` on the state (with the profile and the device time), then publishes the data
    /// path's next timer and, in Sync mode, lets the fabric deliver what `f` caused.
    pub(crate) fn with_state<R>(&self, f: impl FnOnce(&mut State, &Profile, u64) -> R) -> R {
        let now = self.now_ns();
        let r = {
            let mut st = self.lock();
            let r = f(&mut st, &self.profile, now);
            let deadline = st.model.rt.deadline().unwrap_or(u64::MAX);
            self.deadline.store(deadline, Ordering::Release);
            r
        };
        if self.mode == Mode::Sync {
            self.link().0.poll();
        }
        r
    }

    /// Processes a command doorbell now.
    pub(crate) fn ring(&self, bits: u32) {
        self.commands(|st, profile, now| cmdif::ring(st, profile, now, bits));
    }

    /// Ends the commands `Fault::SlowCommand` keeps; returns how many there were.
    pub(crate) fn finish_slow(&self) -> usize {
        self.commands(cmdif::finish_slow)
    }

    /// Runs `f` on the command interface now, then what follows a command: the next timer
    /// deadline, the addresses the switch learns, the fabric (in [`Mode::Sync`]).
    fn commands<R>(&self, f: impl FnOnce(&mut State, &Profile, u64) -> R) -> R {
        let now = self.now_ns();
        let (r, addresses) = {
            let mut st = self.lock();
            let r = f(&mut st, &self.profile, now);
            let deadline = st.model.rt.deadline().unwrap_or(u64::MAX);
            self.deadline.store(deadline, Ordering::Release);
            (r, (st.model.vport.mac(), st.model.vport.learned()))
        };
        // The switch learns the addresses a command gave the function (its vport's address
        // list, its GIDs) at once, as the e-switch installs a vport's rules when it lists them.
        let (fabric, port) = self.link();
        fabric.announce(port, (addresses.0, &addresses.1));
        if self.mode == Mode::Sync {
            self.link().0.poll();
        }
        r
    }
}

impl Station for Shared {
    fn deliver(&self, frames: &[Vec<u8>]) {
        Shared::deliver(self, frames);
    }
    fn timers_due(&self) -> bool {
        Shared::timers_due(self)
    }
    fn idle(&self) -> bool {
        Shared::idle(self)
    }
    fn service_timers(&self) {
        Shared::service_timers(self);
    }
    fn deadline(&self) -> Option<u64> {
        Shared::deadline(self)
    }
    fn gids(&self) -> Vec<[u8; 16]> {
        self.lock().model.vport.gid_addresses()
    }
}
