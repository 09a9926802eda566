//! Protection domains (PRM "ALLOC_PD"): the scope in which memory keys and QPs meet.

use mlx5_ifc::prm::uar_pd::{
    AllocPdIn, AllocPdOut, DeallocPdIn, DeallocPdOut, QuerySpecialContextsIn,
    QuerySpecialContextsOut,
};
use mlx5_ifc::Opcode;

use crate::error::Result;
use crate::fw::cmd::run;
use crate::fw::cmdq::CmdQueue;
use crate::io::platform::Platform;

/// A protection domain.
#[derive(Debug, PartialEq, Eq)]
pub struct Pd {
    pdn: u32,
}

impl Pd {
    /// The device's PD before ALLOC_PD (and after DEALLOC_PD): never seen by a caller, whose
    /// device is brought up in full.
    pub(crate) const UNALLOCATED: Pd = Pd { pdn: 0 };

    /// The PD number the contexts name.
    pub fn pdn(&self) -> u32 {
        self.pdn
    }

    /// ALLOC_PD.
    pub(crate) fn alloc<P: Platform>(cmd: &CmdQueue, p: &P) -> Result<Self> {
        let out = run::<AllocPdIn, AllocPdOut, _, _>(cmd, p, Opcode::AllocPd, 0, |_| Ok(()))?;
        Ok(Self {
            pdn: out.get(AllocPdOut::PD) as u32,
        })
    }

    /// DEALLOC_PD.
    pub(crate) fn free<P: Platform>(self, cmd: &CmdQueue, p: &P) -> Result<()> {
        run::<DeallocPdIn, DeallocPdOut, _, _>(cmd, p, Opcode::DeallocPd, 0, |v| {
            v.set(DeallocPdIn::PD, u64::from(self.pdn))?;
            Ok(())
        })
        .map(drop)
    }
}

/// The special memory keys (QUERY_SPECIAL_CONTEXTS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpecialKeys {
    /// The reserved lkey (physical addressing for kernel-style buffers).
    pub resd_lkey: u32,
    /// The null mkey (scatter entries that drop data).
    pub null_mkey: u32,
}

/// QUERY_SPECIAL_CONTEXTS.
pub(crate) fn query_special_keys<P: Platform>(cmd: &CmdQueue, p: &P) -> Result<SpecialKeys> {
    let out = run::<QuerySpecialContextsIn, QuerySpecialContextsOut, _, _>(
        cmd,
        p,
        Opcode::QuerySpecialContexts,
        0,
        |_| Ok(()),
    )?;
    Ok(SpecialKeys {
        resd_lkey: out.get(QuerySpecialContextsOut::RESD_LKEY) as u32,
        null_mkey: out.get(QuerySpecialContextsOut::NULL_MKEY) as u32,
    })
}
