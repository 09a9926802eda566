//! The handle the data path and the event writers work with: the model, host memory through the
//! IOMMU, the DMA fault record and the device time ([`Hw`]).

use super::Model;
use crate::fault::DmaFault;
use crate::iommu::Iommu;

/// What the data path and the events work with: the model, DMA memory, the fault record, the time.
pub(crate) struct Hw<'a> {
    pub(crate) model: &'a mut Model,
    pub(crate) iommu: &'a Iommu,
    pub(crate) faults: &'a mut Vec<DmaFault>,
    pub(crate) now: u64,
}
