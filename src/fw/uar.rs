//! User Access Region pages (PRM "UAR"): the 4 KiB BAR0 pages that hold doorbells.

use mlx5_ifc::prm::uar_pd::{AllocUarIn, AllocUarOut, DeallocUarIn, DeallocUarOut};
use mlx5_ifc::{regs, Opcode};

use crate::error::{Error, Result};
use crate::fw::cmd::{run, Exec};
use crate::io::platform::Platform;

/// A UAR page: its index and where it sits in BAR0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Uar {
    index: u32,
}

impl Uar {
    /// The UAR index the contexts name (`uar_page`).
    pub fn index(&self) -> u32 {
        self.index
    }

    /// Offset of the page in BAR0 (4 KiB-page hosts, `uar_4k` = 0).
    pub fn bar_offset(&self) -> u64 {
        u64::from(self.index) * regs::UAR_PAGE_SIZE
    }

    /// ALLOC_UAR; the index is checked against the BAR size.
    pub(crate) fn alloc<P: Platform>(cmd: &dyn Exec<P>, p: &P, bar_size: u64) -> Result<Self> {
        let out = run::<AllocUarIn, AllocUarOut, _, _>(cmd, p, Opcode::AllocUar, 0, |_| Ok(()))?;
        let index = out.get(AllocUarOut::UAR) as u32;
        let pages = bar_size / regs::UAR_PAGE_SIZE;
        if index == 0 || u64::from(index) >= pages {
            let uar = Self { index };
            let _ = uar.free(cmd, p);
            return Err(Error::BadDeviceValue {
                what: "ALLOC_UAR index",
                value: u64::from(index),
                limit: pages.saturating_sub(1),
            });
        }
        Ok(Self { index })
    }

    /// DEALLOC_UAR.
    pub(crate) fn free<P: Platform>(self, cmd: &dyn Exec<P>, p: &P) -> Result<()> {
        run::<DeallocUarIn, DeallocUarOut, _, _>(cmd, p, Opcode::DeallocUar, 0, |v| {
            v.set(DeallocUarIn::UAR, u64::from(self.index))?;
            Ok(())
        })
        .map(drop)
    }
}

#[cfg(test)]
impl Uar {
    /// UAR page `index`, as if allocated.
    pub(crate) fn test_page(index: u32) -> Self {
        Self { index }
    }
}
