//! Host memory access, the bottom floor with the model: queue buffers, rings and doorbell
//! records ([`queue`]) through the IOMMU ([`crate::iommu`]).

pub(crate) mod queue;
