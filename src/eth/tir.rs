//! A transport interface receive object (CREATE_TIR), what a flow table entry forwards to
//! (docs/ethernet-facts.md §1.8): direct to one RQ (`disp_type` DIRECT, `inline_rqn`), or
//! spreading frames over an RQT by the Toeplitz hash of their addresses and ports (RSS).

use mlx5_ifc::consts::rx_hash_field::{DST_IP, L4_DPORT, L4_SPORT, SRC_IP};
use mlx5_ifc::consts::{rx_hash_fn, self_lb_block, tir_disp_type};
use mlx5_ifc::prm::tir::{
    CreateTirIn, CreateTirOut, DestroyTirIn, DestroyTirOut, RxHashFieldSelect as Sel, Tirc,
};
use mlx5_ifc::Opcode;

use super::rq::EthRq;
use super::rqt::Rqt;
use super::tis::TransportDomain;
use crate::error::Result;
use crate::fw::cmd::run;
use crate::fw::cmd::run_create;

/// Every TIR blocks the frames its own transport domain's SQs loop back (unicast and
/// multicast), as Linux's mlx5e sets its TIRs (`mlx5e_refresh_tirs`): the port never receives
/// its own broadcasts and multicast.
const SELF_LB_BLOCK: u64 = self_lb_block::UNICAST | self_lb_block::MULTICAST;
use crate::fw::queue::QueueBuf;
use crate::io::platform::Platform;
use crate::Device;

/// The fields an RSS TIR hashes (`rx_hash_field_selector_outer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RssFields {
    /// IPv4 source and destination addresses.
    Ipv4,
    /// IPv4 addresses and TCP ports.
    Ipv4Tcp,
    /// IPv4 addresses and UDP ports.
    Ipv4Udp,
    /// IPv6 source and destination addresses.
    Ipv6,
    /// IPv6 addresses and TCP ports.
    Ipv6Tcp,
    /// IPv6 addresses and UDP ports.
    Ipv6Udp,
}

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
                        .set(Tirc::DISP_TYPE, tir_disp_type::DIRECT)?
                        .set(Tirc::INLINE_RQN, u64::from(rqn))?
                        .set(Tirc::TRANSPORT_DOMAIN, u64::from(tdn))?
                        .set(Tirc::SELF_LB_BLOCK, SELF_LB_BLOCK)?;
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

    /// CREATE_TIR in `td`, spreading frames over `rqt` by the Toeplitz hash of `fields` under
    /// `key` (`disp_type` INDIRECT, `rx_hash_fn` Toeplitz, `rx_hash_symmetric` 0).
    pub fn rss(
        dev: &'d Device<P>,
        td: &TransportDomain<'d, P>,
        rqt: &Rqt<'_, P>,
        key: &[u8; 40],
        fields: RssFields,
    ) -> Result<Self> {
        let (tdn, rqtn) = (td.tdn(), rqt.rqtn());
        // l4_prot_type 0 TCP, 1 UDP; selected_fields: source IP, destination IP, L4 source
        // port, L4 destination port (bits 0-3).
        // l3_prot_type 0 IPv4, 1 IPv6.
        let addrs = SRC_IP | DST_IP;
        let ports = addrs | L4_SPORT | L4_DPORT;
        let (l3, l4, sel) = match fields {
            RssFields::Ipv4 => (0, 0, addrs),
            RssFields::Ipv4Tcp => (0, 0, ports),
            RssFields::Ipv4Udp => (0, 1, ports),
            RssFields::Ipv6 => (1, 0, addrs),
            RssFields::Ipv6Tcp => (1, 0, ports),
            RssFields::Ipv6Udp => (1, 1, ports),
        };
        let out = dev.with_cmd(|cmd, p| {
            run_create::<CreateTirIn, CreateTirOut, _, _, QueueBuf>(
                cmd,
                p,
                Opcode::CreateTir,
                None,
                |v| {
                    let mut c = v.nested_mut(CreateTirIn::CTX);
                    c.set(Tirc::DISP_TYPE, tir_disp_type::INDIRECT)?
                        .set(Tirc::INDIRECT_TABLE, u64::from(rqtn))?
                        .set(Tirc::RX_HASH_FN, rx_hash_fn::TOEPLITZ)?
                        .set(Tirc::TRANSPORT_DOMAIN, u64::from(tdn))?
                        .set(Tirc::SELF_LB_BLOCK, SELF_LB_BLOCK)?;
                    let k = c.bytes_mut(Tirc::RX_HASH_TOEPLITZ_KEY);
                    let n = k.len().min(key.len());
                    k[..n].copy_from_slice(&key[..n]);
                    c.nested_mut(Tirc::RX_HASH_FIELD_SELECTOR_OUTER)
                        .set(Sel::L3_PROT_TYPE, l3)?
                        .set(Sel::L4_PROT_TYPE, l4)?
                        .set(Sel::SELECTED_FIELDS, sel)?;
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
