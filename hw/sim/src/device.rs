//! The device core shared by every `SimDevice` clone and the device thread: the clock and the
//! state behind one lock.
//!
//! Time: in [`Mode::Sync`] the device clock is virtual — it starts at 0 and only `relax()`
//! advances it (by [`RELAX_NS`]); in [`Mode::Threaded`] it is real monotonic time since creation.
//! Time-driven work (`initializing`, `health_counter`) is computed from the clock when observed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use crate::bar::Bar;
use crate::cmdif;
use crate::fault::{DmaFault, DmaFaultKind, Faults};
use crate::fw::Firmware;
use crate::iommu::Iommu;
use crate::trace::Trace;
use crate::{Mode, Profile};

/// Virtual time one `relax()` call advances in [`Mode::Sync`].
pub const RELAX_NS: u64 = 1_000;

/// Everything the device knows, behind one lock.
pub(crate) struct State {
    pub(crate) bar: Bar,
    pub(crate) iommu: Iommu,
    pub(crate) fw: Firmware,
    pub(crate) faults: Faults,
    pub(crate) trace: Trace,
    pub(crate) dma_faults: Vec<DmaFault>,
    pub(crate) commands_executed: u64,
}

impl State {
    fn new(profile: &Profile) -> Self {
        Self {
            bar: Bar::new(profile),
            iommu: Iommu::new(),
            fw: Firmware::new(profile),
            faults: Faults::default(),
            trace: Trace::default(),
            dma_faults: Vec::new(),
            commands_executed: 0,
        }
    }

    /// A DMA fault of the device's own command machinery: recorded, and fatal (health syndrome
    /// 0xa, ICM fetch PCI error).
    pub(crate) fn device_fault(
        &mut self,
        iova: u64,
        len: usize,
        kind: DmaFaultKind,
        what: String,
        now: u64,
    ) {
        log::warn!("mlx5-sim: DMA fault at {iova:#x}: {what}");
        self.dma_faults.push(DmaFault {
            iova,
            len,
            kind,
            what,
        });
        self.bar.set_fatal(cmdif::FETCH_ERROR.raw(), now);
    }
}

/// The device proper.
pub(crate) struct Shared {
    pub(crate) profile: Profile,
    pub(crate) mode: Mode,
    created: Instant,
    virtual_ns: AtomicU64,
    state: Mutex<State>,
}

impl Shared {
    pub(crate) fn new(profile: Profile, mode: Mode) -> Self {
        let state = Mutex::new(State::new(&profile));
        Self {
            profile,
            mode,
            created: Instant::now(),
            virtual_ns: AtomicU64::new(0),
            state,
        }
    }

    /// The state; a panic on another thread while it was held does not make it unusable.
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Device time in nanoseconds.
    pub(crate) fn now_ns(&self) -> u64 {
        match self.mode {
            Mode::Sync => self.virtual_ns.load(Ordering::Acquire),
            Mode::Threaded => u64::try_from(self.created.elapsed().as_nanos()).unwrap_or(u64::MAX),
        }
    }

    /// One turn of a driver polling loop.
    pub(crate) fn relax(&self) {
        match self.mode {
            Mode::Sync => {
                self.virtual_ns.fetch_add(RELAX_NS, Ordering::AcqRel);
            }
            Mode::Threaded => std::thread::yield_now(),
        }
    }

    /// Processes a command doorbell now.
    pub(crate) fn ring(&self, bits: u32) {
        let now = self.now_ns();
        let mut st = self.lock();
        cmdif::ring(&mut st, &self.profile, now, bits);
    }
}
