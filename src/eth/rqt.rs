//! Receive-side scaling objects (docs/ethernet-facts.md §1.7–1.8, §4): an RQ table (CREATE_RQT,
//! the RQs a hash picks among) and, in [`super::tir`], the indirect TIR that hashes each frame's
//! selected fields with Toeplitz over its key and delivers it to the RQT entry the hash picks.
//! A flow's queue can be predicted with [`super::rss::toeplitz`]: entry `hash mod n` of a table
//! of `n` RQs (a power of two, as Linux sizes them).

use mlx5_ifc::prm::tir::{CreateRqtIn, CreateRqtOut, DestroyRqtIn, DestroyRqtOut, Rqtc};
use mlx5_ifc::Opcode;

use super::rq::EthRq;
use crate::error::{Error, Result};
use crate::fw::cmd::{run, run_create};
use crate::fw::queue::PasList;
use crate::io::platform::Platform;
use crate::Device;

/// RQs an RQT of this driver lists at most.
pub(crate) const MAX_RQS: usize = 64;

/// The RQ list after CREATE_RQT's fixed part: 4 bytes per RQ, two per 8-byte unit (the count
/// is even).
struct RqList<'r>(&'r [u32]);

impl PasList for RqList<'_> {
    fn npages(&self) -> usize {
        self.0.len().div_ceil(2)
    }
    fn write_pas(&self, dst: &mut [u8]) -> Result<()> {
        let limit = dst.len();
        let dst = dst.get_mut(..self.0.len() * 4).ok_or(Error::Capacity {
            what: "RQT list",
            limit,
        })?;
        for (e, rqn) in dst.chunks_exact_mut(4).zip(self.0) {
            e.copy_from_slice(&rqn.to_be_bytes());
        }
        Ok(())
    }
}

/// An RQ table.
#[derive(Debug)]
pub struct Rqt<'d, P: Platform> {
    dev: &'d Device<P>,
    rqtn: u32,
    len: usize,
    alive: bool,
}

impl<'d, P: Platform> Rqt<'d, P> {
    /// CREATE_RQT over `rqs`: 2 to 64 (`MAX_RQS`) of them, a power of two (entry `hash mod n`
    /// then takes the hash's low bits, as on hardware), within `log_max_rqt_size`.
    pub fn create(dev: &'d Device<P>, rqs: &[&EthRq<'_, P>]) -> Result<Self> {
        let n = rqs.len();
        let cap = 1usize << dev.caps().get("log_max_rqt_size").unwrap_or(0).min(24);
        let max = MAX_RQS.min(cap);
        if n < 2 || n > max || !n.is_power_of_two() {
            return Err(Error::InvalidArgument {
                op: "create_rqt",
                field: "rqs",
                requested: n as u64,
                max: max as u64,
                limit: "a power of two from 2 to the smaller of 64 and 2^log_max_rqt_size",
            });
        }
        let mut list = [0u32; MAX_RQS];
        for (l, rq) in list.iter_mut().zip(rqs) {
            *l = rq.rqn();
        }
        let out = dev.with_cmd(|cmd, p| {
            run_create::<CreateRqtIn, CreateRqtOut, _, _, RqList<'_>>(
                cmd,
                p,
                Opcode::CreateRqt,
                Some(&RqList(&list[..n])),
                |v| {
                    v.nested_mut(CreateRqtIn::RQT_CONTEXT)
                        .set(Rqtc::RQT_MAX_SIZE, n as u64)?
                        .set(Rqtc::RQT_ACTUAL_SIZE, n as u64)?;
                    Ok(())
                },
            )
        })?;
        Ok(Rqt {
            dev,
            rqtn: out.get(CreateRqtOut::RQTN) as u32,
            len: n,
            alive: true,
        })
    }

    /// Its number.
    pub(crate) fn rqtn(&self) -> u32 {
        self.rqtn
    }

    /// RQs listed.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never empty (at least two RQs).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// DESTROY_RQT (its TIRs must be gone).
    pub fn destroy(mut self) -> Result<()> {
        self.alive = false;
        destroy(self.dev, self.rqtn)
    }
}

fn destroy<P: Platform>(dev: &Device<P>, rqtn: u32) -> Result<()> {
    dev.with_cmd(|cmd, p| {
        run::<DestroyRqtIn, DestroyRqtOut, _, _>(cmd, p, Opcode::DestroyRqt, 0, |v| {
            v.set(DestroyRqtIn::RQTN, u64::from(rqtn))?;
            Ok(())
        })
    })
    .map(drop)
}

impl<P: Platform> Drop for Rqt<'_, P> {
    fn drop(&mut self) {
        if self.alive {
            if let Err(e) = destroy(self.dev, self.rqtn) {
                log::warn!("DESTROY_RQT {:#x} at drop: {e}", self.rqtn);
            }
        }
    }
}
