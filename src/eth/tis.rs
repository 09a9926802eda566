//! The transport domain (ALLOC_TRANSPORT_DOMAIN) and a transport interface send object
//! (CREATE_TIS) in it: what an Ethernet send queue names as its transmit context
//! (docs/ethernet-facts.md §1.2; mlx5e creates one TIS per traffic class, priority 0 here).

use mlx5_ifc::prm::tir::{
    AllocTransportDomainIn, AllocTransportDomainOut, CreateTisIn, CreateTisOut,
    DeallocTransportDomainIn, DeallocTransportDomainOut, DestroyTisIn, DestroyTisOut, Tisc,
};
use mlx5_ifc::Opcode;

use crate::error::Result;
use crate::fw::cmd::run;
use crate::io::platform::Platform;
use crate::Device;

/// A transport domain: the scope TIS and TIR objects share (loopback between them is
/// filtered by it).
#[derive(Debug)]
pub struct TransportDomain<'d, P: Platform> {
    dev: &'d Device<P>,
    tdn: u32,
    alive: bool,
}

impl<'d, P: Platform> TransportDomain<'d, P> {
    /// ALLOC_TRANSPORT_DOMAIN.
    pub fn alloc(dev: &'d Device<P>) -> Result<Self> {
        let out = dev.with_cmd(|cmd, p| {
            run::<AllocTransportDomainIn, AllocTransportDomainOut, _, _>(
                cmd,
                p,
                Opcode::AllocTransportDomain,
                0,
                |_| Ok(()),
            )
        })?;
        Ok(TransportDomain {
            dev,
            tdn: out.get(AllocTransportDomainOut::TRANSPORT_DOMAIN) as u32,
            alive: true,
        })
    }

    /// Its number.
    pub(crate) fn tdn(&self) -> u32 {
        self.tdn
    }

    /// DEALLOC_TRANSPORT_DOMAIN (its TISes must be gone).
    pub fn dealloc(mut self) -> Result<()> {
        self.alive = false;
        dealloc(self.dev, self.tdn)
    }
}

fn dealloc<P: Platform>(dev: &Device<P>, tdn: u32) -> Result<()> {
    dev.with_cmd(|cmd, p| {
        run::<DeallocTransportDomainIn, DeallocTransportDomainOut, _, _>(
            cmd,
            p,
            Opcode::DeallocTransportDomain,
            0,
            |v| {
                v.set(DeallocTransportDomainIn::TRANSPORT_DOMAIN, u64::from(tdn))?;
                Ok(())
            },
        )
    })
    .map(drop)
}

impl<P: Platform> Drop for TransportDomain<'_, P> {
    fn drop(&mut self) {
        if self.alive {
            if let Err(e) = dealloc(self.dev, self.tdn) {
                log::warn!("DEALLOC_TRANSPORT_DOMAIN {:#x} at drop: {e}", self.tdn);
            }
        }
    }
}

/// A TIS: the send context an Ethernet SQ transmits through.
#[derive(Debug)]
pub struct Tis<'d, P: Platform> {
    dev: &'d Device<P>,
    tisn: u32,
    alive: bool,
}

impl<'d, P: Platform> Tis<'d, P> {
    /// CREATE_TIS in `td`, priority 0.
    pub fn create(dev: &'d Device<P>, td: &TransportDomain<'d, P>) -> Result<Self> {
        let tdn = td.tdn();
        let out = dev.with_cmd(|cmd, p| {
            run::<CreateTisIn, CreateTisOut, _, _>(cmd, p, Opcode::CreateTis, 0, |v| {
                v.nested_mut(CreateTisIn::CTX)
                    .set(Tisc::TRANSPORT_DOMAIN, u64::from(tdn))?;
                Ok(())
            })
        })?;
        Ok(Tis {
            dev,
            tisn: out.get(CreateTisOut::TISN) as u32,
            alive: true,
        })
    }

    /// Its number.
    pub(crate) fn tisn(&self) -> u32 {
        self.tisn
    }

    /// DESTROY_TIS (its SQs must be gone).
    pub fn destroy(mut self) -> Result<()> {
        self.alive = false;
        destroy(self.dev, self.tisn)
    }
}

fn destroy<P: Platform>(dev: &Device<P>, tisn: u32) -> Result<()> {
    dev.with_cmd(|cmd, p| {
        run::<DestroyTisIn, DestroyTisOut, _, _>(cmd, p, Opcode::DestroyTis, 0, |v| {
            v.set(DestroyTisIn::TISN, u64::from(tisn))?;
            Ok(())
        })
    })
    .map(drop)
}

impl<P: Platform> Drop for Tis<'_, P> {
    fn drop(&mut self) {
        if self.alive {
            if let Err(e) = destroy(self.dev, self.tisn) {
                log::warn!("DESTROY_TIS {:#x} at drop: {e}", self.tisn);
            }
        }
    }
}
