//! Ethernet send queues (PRM "SQ", CREATE_SQ): a cyclic ring of 64-byte WQEBBs whose WQEs are
//! a control segment, an Ethernet segment with the frame's first bytes inline, and data
//! segments for the rest (docs/ethernet-facts.md §1.3, §2).
//!
//! What is programmed, as mlx5e programs its TX queues: `tis_lst_sz` 1 and the TIS, the CQ,
//! `flush_in_error_en`, state RST (`min_wqe_inline_mode` left 0: Linux sets it only when the
//! Ethernet caps' `wqe_inline_mode` says the vport context decides; every WQE here inlines the
//! Ethernet header and a VLAN tag's room, 18 bytes, as Linux and rdma-core do in L2 mode);
//! the work queue cyclic, the PD, the SQ's own UAR page, the doorbell record (send counter at
//! byte 4), a stride of 64 bytes and 2^`log_wq_sz` WQEBBs; then MODIFY_SQ RST → RDY.
//!
//! A send ([`EthWr`]): opcode SEND (0x0a), `cs_flags` L3 and L4 (bits 6, 7) when the device is
//! to fill the IPv4 header and TCP/UDP checksums, `inline_hdr_sz` and the inline bytes from the
//! Ethernet segment's byte 14 on, then one data segment per SGE. Completions come on the CQ as
//! a QP's send completions do (a requester CQE naming the SQN), with the work request's id.
//! The data path allocates nothing and takes no lock but the CQ's.

use mlx5_ifc::consts::sq_rq_state::{ERR, RDY, RST};
use mlx5_ifc::consts::wq_type;
use mlx5_ifc::prm::sq_rq::{
    CreateSqIn, CreateSqOut, DestroySqIn, DestroySqOut, ModifySqIn, ModifySqOut, QuerySqIn,
    QuerySqOut, Sqc,
};
use mlx5_ifc::prm::srq::Wq;
use mlx5_ifc::wqe::eth_cs::{L3_CSUM, L4_CSUM};
use mlx5_ifc::wqe::{fm_ce_se, opcode, DS, WQEBB};
use mlx5_ifc::{Be32, Be64, Opcode};

use super::tis::Tis;
use super::wq::{end, WqMem};
use crate::error::{Error, Result};
use crate::fw::bfreg::Bfreg;
use crate::fw::cmd::{run, run_create};
use crate::fw::queue::{ceil_log2, QueueBuf};
use crate::io::platform::Platform;
use crate::io::{barrier, DmaBuf, SharedTable};
use crate::qp::Sge;
use crate::verbs::cq::state::Attached;
use crate::verbs::cq::Cq;
use crate::verbs::wr_table::{sq_desc, sq_table};
use crate::Device;

/// Bytes every Ethernet WQE carries inline: the Ethernet header and room for a VLAN tag
/// (`min_wqe_inline_mode` L2, Linux's `MLX5E_MIN_INLINE`).
pub const L2_INLINE: usize = 18;
/// Header bytes a TSO send inlines at least: Ethernet (14), IPv4 (20) and TCP (20) headers.
const TSO_MIN_HEADERS: usize = 54;
/// Data segments a WQE may carry (a WQE is then at most two WQEBBs).
pub(crate) const MAX_SGE: usize = 4;
/// WQEBBs of the largest WQE.
const MAX_WQEBBS: u32 = 2;

/// One frame to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthWr<'a> {
    /// Comes back in the completion.
    pub wr_id: u64,
    /// The frame's first bytes, at least [`L2_INLINE`] (the device takes them from the WQE).
    pub headers: &'a [u8],
    /// The rest of the frame, through registered memory (at most `MAX_SGE`, 4, pieces).
    pub payload: &'a [Sge],
    /// The checksums the device fills in.
    pub checksum: Checksum,
    /// An 802.1Q tag (the TCI: priority, DEI, VLAN ID) to insert after the source MAC.
    pub vlan: Option<u16>,
    /// TCP segmentation by the device (the TSO opcode): the payload cut into segments of this
    /// many bytes, each sent with the headers — which `headers` must then hold whole
    /// (Ethernet, IPv4 or IPv6, TCP) — its sequence number advanced and both checksums
    /// filled. The whole send may be up to 2^`max_lso_cap` bytes.
    pub tso_mss: Option<u16>,
    /// A completion for this frame (else only for signaled ones and errors).
    pub signaled: bool,
}

/// Checksum offloads of one frame (the Ethernet segment's `cs_flags`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Checksum {
    /// The IPv4 header checksum (bit 6, `MLX5_ETH_WQE_L3_CSUM`).
    pub l3: bool,
    /// The TCP or UDP checksum, pseudo-header included, whatever the field held (bit 7,
    /// `MLX5_ETH_WQE_L4_CSUM`). Ask it only of TCP and UDP, as Linux does.
    pub l4: bool,
}

impl Checksum {
    /// No offload: the frame goes out as posted.
    pub const NONE: Checksum = Checksum {
        l3: false,
        l4: false,
    };
    /// The IPv4 header checksum and the TCP/UDP checksum.
    pub const ALL: Checksum = Checksum { l3: true, l4: true };
}

/// An Ethernet send queue in the RDY state.
pub struct EthSq<'a, P: Platform> {
    dev: &'a Device<P>,
    cq: &'a Cq<'a, P>,
    pub(super) sqn: u32,
    bfreg: Option<Bfreg>,
    mem: Option<WqMem>,
    /// WQEBBs in the ring.
    pub(super) bbs: u32,
    /// WQEBBs posted (running).
    pub(super) pi: u64,
    /// Whether the device computes checksums (`csum_cap`).
    pub(super) csum: bool,
    /// DS units an enhanced multi-packet send WQE may have (0: the device has none).
    pub(super) mpw_ds: u32,
    /// The largest TSO send in bytes (2^`max_lso_cap`; 0 without LSO).
    lso_max: u64,
}

impl<P: Platform> core::fmt::Debug for EthSq<'_, P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("EthSq")
            .field("sqn", &self.sqn)
            .field("wqebbs", &self.bbs)
            .field("posted", &self.pi)
            .finish()
    }
}

fn refuse(field: &'static str, requested: u64, max: u64, limit: &'static str) -> Error {
    Error::InvalidArgument {
        op: "create_eth_sq",
        field,
        requested,
        max,
        limit,
    }
}

impl<'a, P: Platform> EthSq<'a, P> {
    /// An SQ of room for at least `depth` frames (each up to `MAX_SGE`, 4, pieces) on `cq`,
    /// transmitting through `tis`, moved to RDY.
    pub fn create(
        dev: &'a Device<P>,
        cq: &'a Cq<'a, P>,
        tis: &Tis<'a, P>,
        depth: u32,
    ) -> Result<Self> {
        if !core::ptr::eq(cq.device(), dev) {
            return Err(refuse("cq", 0, 0, "the CQ must belong to the SQ's device"));
        }
        let caps = dev.caps();
        let log_max_wq = caps.get("log_max_wq_sz").unwrap_or(0).min(24);
        let max_wqe = caps.get("max_wqe_sz_sq").unwrap_or(0);
        if max_wqe < u64::from(MAX_WQEBBS) * WQEBB as u64 {
            return Err(Error::Unsupported {
                what: "Ethernet WQEs of two WQEBBs (max_wqe_sz_sq)",
                found: max_wqe,
            });
        }
        let want = u64::from(depth.max(1)) * u64::from(MAX_WQEBBS);
        let log = u64::from(ceil_log2(want));
        if log > log_max_wq {
            return Err(refuse(
                "depth",
                u64::from(depth),
                (1u64 << log_max_wq) / u64::from(MAX_WQEBBS),
                "log_max_wq_sz (two WQEBBs per frame)",
            ));
        }
        let bbs = 1u32 << log;
        let pd = dev.pd();
        let p = dev.platform();
        let mem = WqMem::alloc(p, sq_table::words(bbs as usize), bbs as usize * WQEBB)?;
        let bfreg = match dev.take_bfreg() {
            Ok(u) => u,
            Err(e) => {
                mem.retire(dev, true, "never given to the device");
                return Err(e);
            }
        };
        let mut sq = EthSq {
            dev,
            cq,
            sqn: 0,
            bfreg: Some(bfreg),
            mem: Some(mem),
            bbs,
            pi: 0,
            csum: caps.eth("csum_cap") == Some(1),
            mpw_ds: if caps.eth("enhanced_multi_pkt_send_wqe") == Some(1) {
                mpw_max_ds(caps.max_wqe_sz_sq())
            } else {
                0
            },
            lso_max: match caps.eth("max_lso_cap") {
                Some(l @ 1..=30) => 1 << l,
                _ => 0,
            },
        };
        let uar_index = sq.bfreg.as_ref().map_or(0, |b| b.uar().index());
        let (tisn, cqn, pdn) = (tis.tisn(), cq.cqn(), pd.pdn());
        let (dbr_iova, log_pg) = match &sq.mem {
            Some(m) => (m.dbr.iova(), m.buf.log_page_size()),
            None => return Err(refuse("memory", 0, 0, "allocated above")),
        };
        let made = dev.with_cmd(|cmd, p| {
            run_create::<CreateSqIn, CreateSqOut, _, _, _>(
                cmd,
                p,
                Opcode::CreateSq,
                sq.mem.as_ref().map(|m| &m.buf),
                |v| {
                    let mut c = v.nested_mut(CreateSqIn::CTX);
                    c.set(Sqc::TIS_LST_SZ, 1)?
                        .set(Sqc::TIS_NUM_0, u64::from(tisn))?
                        .set(Sqc::CQN, u64::from(cqn))?
                        .set(Sqc::FLUSH_IN_ERROR_EN, 1)?
                        .set(Sqc::STATE, RST)?;
                    let mut w = c.nested_mut(Sqc::WQ);
                    w.set(Wq::WQ_TYPE, wq_type::CYCLIC)?
                        .set(Wq::PD, u64::from(pdn))?
                        .set(Wq::UAR_PAGE, u64::from(uar_index))?
                        .set(Wq::DBR_ADDR, dbr_iova)?
                        .set(Wq::LOG_WQ_STRIDE, 6)?
                        .set(Wq::LOG_WQ_PG_SZ, u64::from(log_pg))?
                        .set(Wq::LOG_WQ_SZ, log)?;
                    Ok(())
                },
            )
        });
        match made {
            Ok(o) => sq.sqn = o.get(CreateSqOut::SQN) as u32,
            Err(e) => {
                // The device may hold the memory if the outcome is unknown.
                sq.retire(!e.device_may_hold_memory());
                return Err(e);
            }
        }
        let sqn = sq.sqn;
        if let Err(e) = sq.modify(RST, RDY) {
            let _ = sq.destroy_sq();
            sq.retire(false);
            return Err(e);
        }
        if let Some(t) = sq.mem.as_ref().map(|m| &m.table) {
            if let Err(e) = cq.attach(Attached {
                qpn: sqn,
                sq: Some((t.share(), bbs)),
                rq: None,
                flow_tag_rq: false,
            }) {
                let done = sq.destroy_sq().is_ok();
                sq.retire(done);
                return Err(e);
            }
        }
        log::debug!("Ethernet SQ {sqn:#x}: {bbs} WQEBBs, TIS {tisn:#x}, CQ {cqn:#x}");
        Ok(sq)
    }

    /// The SQ number (what its completions name).
    pub fn sqn(&self) -> u32 {
        self.sqn
    }

    /// Frames that can be posted now (each counted at its largest, two WQEBBs).
    pub fn room(&self) -> u32 {
        let tail = self
            .mem
            .as_ref()
            .map_or(0, |m| m.table.load(sq_table::TAIL));
        let used = self.pi.wrapping_sub(tail);
        (u64::from(self.bbs).saturating_sub(used) / u64::from(MAX_WQEBBS)) as u32
    }

    /// Posts `wrs` and rings the doorbell once. Refused as a whole (nothing posted) if a
    /// request is malformed or the ring lacks room.
    pub fn post_send(&mut self, wrs: &[EthWr<'_>]) -> Result<()> {
        let Some((buf, dbr, table)) = self.parts() else {
            return Err(Error::QpState {
                qpn: self.sqn,
                state: crate::qp::QpState::Err,
                op: "eth post_send (the SQ's memory is gone)",
            });
        };
        // One pass: each request checked and written; nothing is published (HEAD, the
        // doorbell record, the doorbell) unless every one was, so a refusal leaves none posted
        // — the WQEs already written lie in free slots the device does not read.
        let used = self.pi.wrapping_sub(table.load(sq_table::TAIL));
        let room = u64::from(self.bbs).saturating_sub(used);
        let mask = u64::from(self.bbs) - 1;
        let mut first = [0u8; 8];
        let (start, mut pi) = (self.pi, self.pi);
        let ring = buf.buf().ring::<64>(self.bbs as usize);
        for wr in wrs {
            let fast = one_bb(wr) && (self.csum || wr.checksum == Checksum::NONE);
            let nbb = if fast {
                1
            } else {
                check(wr, self.csum, self.lso_max)?
            };
            if pi - start + u64::from(nbb) > room {
                return Err(Error::QueueFull {
                    qpn: self.sqn,
                    queue: "Ethernet send queue",
                    outstanding: used + (pi - start),
                    limit: u64::from(self.bbs),
                });
            }
            let (op, bytes) = match &ring {
                Some(r) if fast => {
                    let bb = wqebb(self.sqn, pi, wr);
                    first = bb[0].to_ne_bytes();
                    r.write_wqebb(pi as usize, &bb);
                    (
                        opcode::SEND,
                        L2_INLINE as u64 + u64::from(wr.payload[0].length),
                    )
                }
                _ => {
                    wqe(buf.buf(), self.sqn, pi, mask, wr, &mut first)?;
                    let op = if wr.tso_mss.is_some() {
                        opcode::TSO
                    } else {
                        opcode::SEND
                    };
                    let b = inline_len(wr) as u64
                        + wr.payload.iter().map(|s| u64::from(s.length)).sum::<u64>();
                    (op, b)
                }
            };
            table.store_pair_relaxed(
                sq_table::wrid((pi & mask) as usize),
                wr.wr_id,
                sq_desc(nbb as u8, op, bytes.min(u64::from(u32::MAX)) as u32),
            );
            pi += u64::from(nbb);
        }
        if wrs.is_empty() {
            return Ok(());
        }
        self.publish(table, dbr, pi, first)?;
        self.pi = pi;
        Ok(())
    }

    /// Makes the WQEs up to WQEBB `pi` the device's (the caller then records `pi`): the table
    /// first (the CQ may see a
    /// completion as soon as the device runs), then the doorbell record, then the doorbell
    /// (`first`: the first 8 bytes of the last WQE).
    #[inline(always)]
    pub(super) fn publish(
        &self,
        table: &SharedTable,
        dbr: &DmaBuf,
        pi: u64,
        first: [u8; 8],
    ) -> Result<()> {
        table.store(sq_table::HEAD, pi);
        barrier::dma_wmb();
        dbr.write_be32(4, Be32::new(pi as u32 & 0xffff))?;
        barrier::uar_wc_start();
        let reg = self.bfreg.as_ref().map_or(0, Bfreg::bar_offset);
        self.dev
            .platform()
            .bar_write64(reg, Be64::from_ne_raw(u64::from_ne_bytes(first)));
        barrier::uar_wc_flush();
        Ok(())
    }

    /// The SQ's state as the device reports it (QUERY_SQ `sqc.state`: 0 RST, 1 RDY, 3 ERR).
    pub fn query_state(&self) -> Result<u64> {
        let sqn = self.sqn;
        let out = self.dev.with_cmd(|cmd, p| {
            run::<QuerySqIn, QuerySqOut, _, _>(cmd, p, Opcode::QuerySq, 0, |v| {
                v.set(QuerySqIn::SQN, u64::from(sqn))?;
                Ok(())
            })
        })?;
        Ok(out.view()?.nested(QuerySqOut::SQ_CONTEXT).get(Sqc::STATE))
    }

    /// Brings the SQ back after an error completion, as mlx5e's TX recovery does: the state
    /// queried first (an SQ the device still runs needs nothing: `Ok(false)`); every WQE
    /// posted must have completed — the device completes the rest flushed (WR_FLUSH_ERR) once
    /// one failed; poll the CQ until they are in — then MODIFY_SQ ERR → RST and RST → RDY, and
    /// the ring starts over at WQEBB 0 (`Ok(true)`). Refused by name while WQEs are
    /// outstanding, or in a state other than RDY and ERR.
    pub fn recover(&mut self) -> Result<bool> {
        let Some((_, dbr, table)) = self.parts() else {
            return Err(Error::QpState {
                qpn: self.sqn,
                state: crate::qp::QpState::Err,
                op: "eth sq recover (the SQ's memory is gone)",
            });
        };
        match self.query_state()? {
            RDY => {
                log::warn!(
                    "Ethernet SQ {:#x}: an error completion, yet the device runs the SQ",
                    self.sqn
                );
                return Ok(false);
            }
            ERR => {}
            other => {
                return Err(Error::InvalidArgument {
                    op: "eth sq recover",
                    field: "sq state",
                    requested: other,
                    max: ERR,
                    limit: "an SQ in RDY or ERR",
                })
            }
        }
        let outstanding = self.pi.wrapping_sub(table.load(sq_table::TAIL));
        if outstanding != 0 {
            return Err(Error::InvalidArgument {
                op: "eth sq recover",
                field: "outstanding WQEBBs",
                requested: outstanding,
                max: 0,
                limit: "every posted WQE completed (poll the CQ until the flush is in)",
            });
        }
        self.modify(ERR, RST)?;
        self.modify(RST, RDY)?;
        table.store(sq_table::TAIL, 0);
        table.store(sq_table::HEAD, 0);
        dbr.write_be32(4, Be32::new(0))?;
        self.pi = 0;
        log::info!("Ethernet SQ {:#x} recovered (ERR -> RST -> RDY)", self.sqn);
        Ok(true)
    }

    /// MODIFY_SQ from state `from` to `to`.
    fn modify(&self, from: u64, to: u64) -> Result<()> {
        let sqn = self.sqn;
        self.dev
            .with_cmd(|cmd, p| {
                run::<ModifySqIn, ModifySqOut, _, _>(cmd, p, Opcode::ModifySq, 0, |v| {
                    v.set(ModifySqIn::SQN, u64::from(sqn))?
                        .set(ModifySqIn::SQ_STATE, from)?;
                    v.nested_mut(ModifySqIn::CTX).set(Sqc::STATE, to)?;
                    Ok(())
                })
            })
            .map(drop)
    }

    pub(super) fn parts(&self) -> Option<(&QueueBuf, &DmaBuf, &SharedTable)> {
        self.mem.as_ref().map(|m| (&m.buf, &m.dbr, &m.table))
    }

    fn destroy_sq(&self) -> Result<()> {
        let sqn = self.sqn;
        self.dev
            .with_cmd(|cmd, p| {
                run::<DestroySqIn, DestroySqOut, _, _>(cmd, p, Opcode::DestroySq, 0, |v| {
                    v.set(DestroySqIn::SQN, u64::from(sqn))?;
                    Ok(())
                })
            })
            .map(drop)
    }

    /// Gives the memory back: freed when the device is done with it (`done`), else
    /// quarantined; the UAR page too.
    fn retire(&mut self, done: bool) {
        if let Some(m) = self.mem.take() {
            m.retire(self.dev, done, WHY);
        }
        if let Some(b) = self.bfreg.take() {
            let _ = self.dev.give_bfreg(b);
        }
    }

    /// DESTROY_SQ, then the memory freed (quarantined if the device may still hold it).
    pub fn destroy(mut self) -> Result<()> {
        let r = self.destroy_sq();
        end(self.dev, self.cq, self.sqn, &r, self.mem.take(), WHY);
        self.retire(r.is_ok());
        r
    }
}

/// Why an SQ's memory is quarantined.
const WHY: &str = "an Ethernet SQ the device may still use";

impl<P: Platform> Drop for EthSq<'_, P> {
    fn drop(&mut self) {
        if self.mem.is_some() {
            let r = self.destroy_sq();
            if let Err(e) = &r {
                log::warn!("DESTROY_SQ {:#x} at drop: {e}", self.sqn);
            }
            end(self.dev, self.cq, self.sqn, &r, self.mem.take(), WHY);
            self.retire(r.is_ok());
        }
    }
}

/// The WQEBBs `wr` takes, or why it is refused.
fn check(wr: &EthWr<'_>, csum: bool, lso_max: u64) -> Result<u32> {
    let bad = |field, requested: u64, max: u64, limit| Error::InvalidArgument {
        op: "eth post_send",
        field,
        requested,
        max,
        limit,
    };
    if !csum && (wr.checksum != Checksum::NONE || wr.tso_mss.is_some()) {
        return Err(bad(
            "checksum",
            1,
            0,
            "csum_cap 0: the device computes no checksums",
        ));
    }
    if let Some(mss) = wr.tso_mss {
        let total =
            wr.headers.len() as u64 + wr.payload.iter().map(|s| u64::from(s.length)).sum::<u64>();
        if mss == 0 || lso_max == 0 {
            return Err(bad(
                "tso_mss",
                u64::from(mss),
                lso_max,
                "a nonzero segment size, on a device with LSO (max_lso_cap)",
            ));
        }
        if total > lso_max {
            return Err(bad(
                "tso bytes",
                total,
                lso_max,
                "2^max_lso_cap bytes per TSO send",
            ));
        }
        if wr.headers.len() < TSO_MIN_HEADERS {
            return Err(bad(
                "headers",
                wr.headers.len() as u64,
                TSO_MIN_HEADERS as u64,
                "a TSO send inlines every header: Ethernet, IP and TCP (54 bytes at least)",
            ));
        }
    }
    if inline_len(wr) < L2_INLINE {
        return Err(bad(
            "headers",
            wr.headers.len() as u64,
            (L2_INLINE - (inline_len(wr) - wr.headers.len())) as u64,
            "at least the L2 inline bytes (min_wqe_inline_mode L2; a VLAN tag counts)",
        ));
    }
    if wr.payload.len() > MAX_SGE {
        return Err(bad(
            "num_sge",
            wr.payload.len() as u64,
            MAX_SGE as u64,
            "data segments of an Ethernet WQE",
        ));
    }
    let bytes = ds_count(inline_len(wr), wr.payload.len()) * DS;
    let nbb = bytes.div_ceil(WQEBB) as u32;
    if nbb > MAX_WQEBBS {
        return Err(bad(
            "headers",
            wr.headers.len() as u64,
            (MAX_WQEBBS as usize * WQEBB - 2 * DS - wr.payload.len() * DS + 2
                - (inline_len(wr) - wr.headers.len())) as u64,
            "inline bytes that fit two WQEBBs with the data segments",
        ));
    }
    Ok(nbb)
}

/// Whether `wr` is the common shape: exactly the L2 inline bytes, no tag, one data segment —
/// one WQEBB, built in registers by [`wqebb`].
#[inline(always)]
fn one_bb(wr: &EthWr<'_>) -> bool {
    wr.headers.len() == L2_INLINE
        && wr.vlan.is_none()
        && wr.tso_mss.is_none()
        && wr.payload.len() == 1
}

/// The WQEBB of a [`one_bb`] request at WQEBB `pi`, as eight native words of the bytes the
/// device reads: control segment (DS 4), Ethernet segment with the first 2 of the 18 inline
/// bytes, the other 16, the data segment.
#[inline(always)]
fn wqebb(sqn: u32, pi: u64, wr: &EthWr<'_>) -> [u64; 8] {
    let be = |hi: u32, lo: u32| {
        u64::from_ne_bytes(((u64::from(hi) << 32) | u64::from(lo)).to_be_bytes())
    };
    // `one_bb` checked the lengths: 18 header bytes, one data segment.
    let mut h = [0u8; L2_INLINE];
    h.copy_from_slice(&wr.headers[..L2_INLINE]);
    let word = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&h[at..at + 8]);
        u64::from_ne_bytes(b)
    };
    let cs = if wr.checksum.l3 { L3_CSUM } else { 0 } | if wr.checksum.l4 { L4_CSUM } else { 0 };
    let ce = if wr.signaled { fm_ce_se::CQ_UPDATE } else { 0 };
    let s = wr.payload[0];
    [
        be(
            ((pi & 0xffff) as u32) << 8 | u32::from(opcode::SEND),
            sqn << 8 | 4,
        ),
        be(u32::from(ce), 0),
        be(0, u32::from(cs) << 24),
        be(
            0,
            (L2_INLINE as u32) << 16 | u32::from(u16::from_be_bytes([h[0], h[1]])),
        ),
        word(2),
        word(10),
        be(s.length, s.lkey),
        u64::from_ne_bytes(s.addr.to_be_bytes()),
    ]
}

/// Bytes inline in the WQE: the headers, and the VLAN tag inserted among them.
fn inline_len(wr: &EthWr<'_>) -> usize {
    wr.headers.len() + if wr.vlan.is_some() { 4 } else { 0 }
}

/// DS units: control, the Ethernet segment (its last 2 bytes the first inline ones), the rest
/// of the inline bytes in 16-byte units, the data segments.
fn ds_count(inline: usize, sges: usize) -> usize {
    2 + inline.saturating_sub(2).div_ceil(DS) + sges
}

/// Writes `wr` as the WQE at WQEBB `pi`; its first 8 bytes into `first` (the doorbell's).
/// Returns its WQEBBs.
fn wqe(
    buf: &DmaBuf,
    sqn: u32,
    pi: u64,
    mask: u64,
    wr: &EthWr<'_>,
    first: &mut [u8; 8],
) -> Result<u32> {
    let ds = ds_count(inline_len(wr), wr.payload.len());
    let nbb = (ds * DS).div_ceil(WQEBB) as u32;
    // The WQE as 16-byte segments, then written WQEBB by WQEBB (the second may wrap).
    let mut segs = [[0u8; 16]; (MAX_WQEBBS as usize * WQEBB) / DS];
    let idx = (pi & 0xffff) as u32;
    let op = if wr.tso_mss.is_some() {
        opcode::TSO
    } else {
        opcode::SEND
    };
    segs[0][0..4].copy_from_slice(&(idx << 8 | u32::from(op)).to_be_bytes());
    segs[0][4..8].copy_from_slice(&(sqn << 8 | ds as u32).to_be_bytes());
    segs[0][11] = if wr.signaled { fm_ce_se::CQ_UPDATE } else { 0 };
    // Ethernet segment: cs_flags at 4, inline_hdr_sz at 12, the inline bytes from 14 on.
    segs[1][4] =
        if wr.checksum.l3 { L3_CSUM } else { 0 } | if wr.checksum.l4 { L4_CSUM } else { 0 };
    // TSO: the segment size, and both checksums of every segment (as mlx5e asks for GSO).
    if let Some(mss) = wr.tso_mss {
        segs[1][4] = L3_CSUM | L4_CSUM;
        segs[1][6..8].copy_from_slice(&mss.to_be_bytes());
    }
    let ihs = inline_len(wr);
    segs[1][12..14].copy_from_slice(&(ihs as u16).to_be_bytes());
    // The inline bytes from the segment's byte 14 on: the headers, a VLAN tag after the MACs.
    let mut at = DS + 14;
    let mut put = |bytes: &[u8]| {
        for &b in bytes {
            segs[at / DS][at % DS] = b;
            at += 1;
        }
    };
    match wr.vlan {
        Some(tci) => {
            put(&wr.headers[..12]);
            put(&[0x81, 0x00]);
            put(&tci.to_be_bytes());
            put(&wr.headers[12..]);
        }
        None => put(wr.headers),
    }
    let data_at = 2 + (ihs - 2).div_ceil(DS);
    for (k, s) in wr.payload.iter().enumerate() {
        let d = &mut segs[data_at + k];
        d[0..4].copy_from_slice(&s.length.to_be_bytes());
        d[4..8].copy_from_slice(&s.lkey.to_be_bytes());
        d[8..16].copy_from_slice(&s.addr.to_be_bytes());
    }
    first.copy_from_slice(&segs[0][..8]);
    let per_bb = WQEBB / DS;
    for b in 0..nbb as usize {
        let slot = ((pi + b as u64) & mask) as usize;
        for k in 0..per_bb {
            let i = b * per_bb + k;
            if i >= ds.next_multiple_of(per_bb) {
                break;
            }
            buf.write_seg16(slot * WQEBB + k * DS, &segs[i])?;
        }
    }
    Ok(nbb)
}

/// DS units of a WQE the control segment's 6-bit `ds` field can name.
const DS_FIELD_MAX: u32 = 63;

/// DS units an enhanced multi-packet send WQE (`super::mpw`) may have on a device whose send WQEs are at most
/// `max_wqe_sz_sq` bytes (0: too small for one frame).
fn mpw_max_ds(max_wqe_sz_sq: u32) -> u32 {
    let ds = (max_wqe_sz_sq / DS as u32).min(DS_FIELD_MAX);
    if ds < 3 {
        0
    } else {
        ds
    }
}
