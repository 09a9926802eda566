//! The device's state behind its one lock ([`State`]): registers, IOMMU, firmware (and with it
//! the data path's state), trace and DMA fault record. Its own module so that the command
//! interface ([`crate::cmdif`]) and the device core ([`crate::device`]) both use it without
//! depending on each other.

use mlx5_ifc::HealthSyndrome;

use crate::bar::Bar;
use crate::cmdif::held::Held;
use crate::fault::{DmaFault, DmaFaultKind};
use crate::iommu::Iommu;
use crate::model::{Hw, Model};
use crate::trace::Trace;
use crate::Profile;

/// The health syndrome the device reports when it cannot fetch or complete a command entry.
pub(crate) const FETCH_ERROR: HealthSyndrome = HealthSyndrome::FetchPciErr;

/// Everything the device knows, behind one lock.
pub(crate) struct State {
    pub(crate) bar: Bar,
    pub(crate) iommu: Iommu,
    pub(crate) model: Model,
    pub(crate) trace: Trace,
    pub(crate) dma_faults: Vec<DmaFault>,
    pub(crate) commands_executed: u64,
    /// Delivered commands waiting for firmware pages, oldest first (their entries stay owned
    /// by the device).
    pub(crate) held: Vec<Held>,
    /// Delivered commands kept by `Fault::SlowCommand`, oldest first (their entries stay owned
    /// by the device).
    pub(crate) slow: Vec<Held>,
}

impl State {
    pub(crate) fn new(profile: &Profile) -> Self {
        Self {
            bar: Bar::new(profile),
            iommu: Iommu::new(),
            model: Model::new(profile),
            trace: Trace::default(),
            dma_faults: Vec::new(),
            commands_executed: 0,
            held: Vec::new(),
            slow: Vec::new(),
        }
    }

    /// The data path's view of this state at device time `now`.
    pub(crate) fn hw(&mut self, now: u64) -> Hw<'_> {
        Hw {
            model: &mut self.model,
            iommu: &self.iommu,
            faults: &mut self.dma_faults,
            now,
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
        self.bar.set_fatal(FETCH_ERROR.raw(), now);
    }
}
