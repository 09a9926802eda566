//! What a bare-metal platform needs to be told by the image that builds it: a clock for the
//! driver's deadlines and how the device addresses the DMA arena.

/// Monotonic time for the driver's deadlines.
pub trait Clock {
    /// Nanoseconds since an arbitrary start; never goes backwards.
    fn now_ns(&self) -> u64;
}

/// How the device addresses the arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DmaTranslation {
    /// No IOMMU (or one in pass-through): device address = physical address.
    Identity,
    /// The IOMMU maps the arena linearly: device address = physical address + this offset
    /// (wrapping), e.g. an arena at physical 0x1_2340_0000 mapped at IOVA 0x10_0000.
    Offset(u64),
}
