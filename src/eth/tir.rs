//! A transport interface receive object (CREATE_TIR) dispatching directly to one RQ
//! (`disp_type` DIRECT, `inline_rqn`; docs/ethernet-facts.md §1.8): what a flow table entry
//! forwards to. RSS (an indirect TIR over an RQT with a Toeplitz hash) comes next.

use mlx5_ifc::prm::tir::{CreateTirIn, CreateTirOut, DestroyTirIn, DestroyTirOut, Tirc};
use mlx5_ifc::Opcode;

use super::rq::EthRq;
use super::tis::TransportDomain;
use crate::error::Result;
use crate::fw::cmd::run;
use crate::fw::cmd::run_create;
use crate::fw::queue::QueueBuf;
use crate::platform::Platform;
use crate::Device;

/// `disp_type` DIRECT.
const DIRECT: u64 = 0;

/// A direct TIR.
#[derive(Debug)]
pub struct Tir<'d, P: Platform> {
    dev: &'d Device<P>,
    tirn: u32,
    alive: bool,
}

impl<'d, P: Platform> Tir<'d, P> {
    /// CREATE_TIR in `td`, delivering to `rq`.
    pub fn direct(
        dev: &'d Device<P>,
        td: &TransportDomain<'d, P>,
        rq: &EthRq<'_, P>,
    ) -> Result<Self> {
        let (tdn, rqn) = (td.tdn(), rq.rqn());
        let out = dev.with_cmd(|cmd, p| {
            run_create::<CreateTirIn, CreateTirOut, _, _, QueueBuf>(
                cmd,
                p,
                Opcode::CreateTir,
                None,
                |v| {
                    v.nested_mut(CreateTirIn::CTX)
                        .set(Tirc::DISP_TYPE, DIRECT)?
                        .set(Tirc::INLINE_RQN, u64::from(rqn))?
                        .set(Tirc::TRANSPORT_DOMAIN, u64::from(tdn))?;
                    Ok(())
                },
            )
        })?;
        Ok(Tir {
            dev,
            tirn: out.get(CreateTirOut::TIRN) as u32,
            alive: true,
        })
    }

    /// Its number.
    pub fn tirn(&self) -> u32 {
        self.tirn
    }

    /// DESTROY_TIR (entries forwarding to it must be gone).
    pub fn destroy(mut self) -> Result<()> {
        self.alive = false;
        destroy(self.dev, self.tirn)
    }
}

fn destroy<P: Platform>(dev: &Device<P>, tirn: u32) -> Result<()> {
    dev.with_cmd(|cmd, p| {
        run::<DestroyTirIn, DestroyTirOut, _, _>(cmd, p, Opcode::DestroyTir, 0, |v| {
            v.set(DestroyTirIn::TIRN, u64::from(tirn))?;
            Ok(())
        })
    })
    .map(drop)
}

impl<P: Platform> Drop for Tir<'_, P> {
    fn drop(&mut self) {
        if self.alive {
            if let Err(e) = destroy(self.dev, self.tirn) {
                log::warn!("DESTROY_TIR {:#x} at drop: {e}", self.tirn);
            }
        }
    }
}
