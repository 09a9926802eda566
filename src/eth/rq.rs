//! Ethernet receive queues (PRM "RQ", CREATE_RQ): a cyclic ring of 16-byte receive WQEs, one
//! data segment each (docs/ethernet-facts.md §1.5, §3): `cqn`, `flush_in_error_en`, state RST,
//! `mem_rq_type` 0 (the WQEs in the RQ's own buffer), VLAN stripping as the device defaults
//! (`vsd` 0); the work queue cyclic, the PD, the doorbell record (receive counter at byte 0),
//! a stride of 16 bytes and 2^`log_wq_sz` WQEs; then MODIFY_RQ RST → RDY. Completions come on
//! the CQ as a QP's receives do (a responder CQE; `byte_len` the frame's length), with the
//! work request's id.
//!
//! A **striding** RQ ([`EthRq::create_striding`], PRM "Striding RQ", docs/fields.md "Striding
//! RQ") is the cyclic multi-packet kind (`wq_type` 3, as mlx5_ib and DPDK make it): each
//! 32-byte WQE (an unused next segment, then one data segment) is a buffer of `2^log_strides`
//! strides of `2^log_stride` bytes, and frames land in it one after another, each from a stride
//! boundary — many frames per posted buffer. Each frame's completion names the buffer's work
//! request, the frame's offset in it and its length; the last completion of a buffer carries
//! [`WcFlags::RECV_BUFFER_DONE`](crate::verbs::cq::WcFlags::RECV_BUFFER_DONE) (a frame that
//! does not fit the rest of a buffer goes to the next one, and the rest comes back as a filler
//! completion with no bytes). The buffer is the user's again from then on: it reads the frames
//! and posts it again when it is done with all of them.

use mlx5_ifc::consts::sq_rq_state::{RDY, RST};
use mlx5_ifc::consts::{striding, wq_type};
use mlx5_ifc::prm::sq_rq::{
    CreateRqIn, CreateRqOut, DestroyRqIn, DestroyRqOut, ModifyRqIn, ModifyRqOut, Rqc,
};
use mlx5_ifc::prm::srq::Wq;
use mlx5_ifc::wqe::DS;
use mlx5_ifc::{Be32, Opcode};

use super::wq::{end, WqMem};
use crate::error::{Error, Result};
use crate::fw::cmd::{run, run_create};
use crate::fw::queue::ceil_log2;
use crate::io::barrier;
use crate::io::platform::Platform;
use crate::qp::RecvWr;
use crate::verbs::cq::state::{Attached, RecvTable};
use crate::verbs::cq::Cq;
use crate::verbs::wr_table::rq_table;
use crate::Device;

/// An Ethernet receive queue in the RDY state.
pub struct EthRq<'a, P: Platform> {
    dev: &'a Device<P>,
    cq: &'a Cq<'a, P>,
    rqn: u32,
    mem: Option<WqMem>,
    /// WQEs in the ring.
    cnt: u32,
    /// A striding RQ's geometry.
    strides: Option<Strides>,
}

/// The geometry of a striding RQ's buffers: `2^log_num_strides` strides of
/// `2^log_stride_bytes` bytes each (PRM `log_wqe_num_of_strides`, `log_wqe_stride_size`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Strides {
    /// log2 of a stride's bytes: 6 (64) to 13 (8 KiB).
    pub log_stride_bytes: u8,
    /// log2 of the strides of a buffer: 9 (512) to 16; from 3 (8) where the device offers
    /// `ext_stride_num_range`.
    pub log_num_strides: u8,
}

impl Strides {
    /// Bytes of one receive buffer (every posted buffer must be exactly this long).
    pub fn buffer_bytes(&self) -> u32 {
        1 << (self.log_stride_bytes + self.log_num_strides)
    }
}

impl<P: Platform> core::fmt::Debug for EthRq<'_, P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("EthRq")
            .field("rqn", &self.rqn)
            .field("wqes", &self.cnt)
            .finish()
    }
}

impl<'a, P: Platform> EthRq<'a, P> {
    /// An RQ of at least `depth` receive buffers on `cq`, moved to RDY. The CQ's receive side
    /// must be the RQ's alone (its CQEs name the flow tag, not the RQ, as in mlx5e where each
    /// RQ has its own CQ); send queues may share it.
    pub fn create(dev: &'a Device<P>, cq: &'a Cq<'a, P>, depth: u32) -> Result<Self> {
        Self::make(dev, cq, depth, None)
    }

    /// A striding (multi-packet) RQ of at least `depth` receive buffers of `strides`' geometry
    /// on `cq`, moved to RDY (see the module documentation). Refused where the device offers no
    /// striding RQ (`striding_rq`), or a geometry it does not: a stride of 64 bytes to 8 KiB,
    /// 512 to 65 536 strides a buffer — from 8 with `ext_stride_num_range`.
    pub fn create_striding(
        dev: &'a Device<P>,
        cq: &'a Cq<'a, P>,
        depth: u32,
        strides: Strides,
    ) -> Result<Self> {
        let cap = |n| dev.caps().get(n).unwrap_or(0);
        if cap("striding_rq") == 0 {
            return Err(refuse("striding_rq", 1, 0, "striding_rq"));
        }
        let ext = cap("ext_stride_num_range") == 1;
        let min_log = if ext {
            striding::EXT_MIN_LOG_NUM_STRIDES
        } else {
            striding::LOG_NUM_STRIDES_BASE
        };
        let n = strides.log_num_strides;
        if !(min_log..=16).contains(&u64::from(n)) {
            let limit = if ext {
                "8 to 65536 strides a buffer (ext_stride_num_range)"
            } else {
                "512 to 65536 strides a buffer"
            };
            return Err(refuse("log_num_strides", u64::from(n), 16, limit));
        }
        let b = strides.log_stride_bytes;
        if !(striding::LOG_STRIDE_SIZE_BASE..=13).contains(&u64::from(b)) {
            return Err(refuse(
                "log_stride_bytes",
                u64::from(b),
                13,
                "a stride of 64 bytes to 8 KiB",
            ));
        }
        Self::make(dev, cq, depth, Some(strides))
    }

    fn make(
        dev: &'a Device<P>,
        cq: &'a Cq<'a, P>,
        depth: u32,
        strides: Option<Strides>,
    ) -> Result<Self> {
        if !core::ptr::eq(cq.device(), dev) {
            return Err(refuse("cq", 0, 0, "the CQ must belong to the RQ's device"));
        }
        let log_max = dev.caps().get("log_max_wq_sz").unwrap_or(0).min(24);
        let log = u64::from(ceil_log2(u64::from(depth.max(1))));
        if log > log_max {
            return Err(refuse(
                "depth",
                u64::from(depth),
                1 << log_max,
                "log_max_wq_sz",
            ));
        }
        let cnt = 1u32 << log;
        let pd = dev.pd();
        // A striding RQ's WQE: a next segment (unused in a cyclic RQ) before the data segment;
        // its table has the used-strides word after the slots.
        let (wqe, words) = match strides {
            Some(_) => (2 * DS, rq_table::used(cnt as usize) + 1),
            None => (DS, rq_table::words(cnt as usize)),
        };
        let mem = WqMem::alloc(dev.platform(), words, (cnt as usize * wqe).max(4096))?;
        let (dbr_iova, log_pg) = (mem.dbr.iova(), mem.buf.log_page_size());
        let mut rq = EthRq {
            dev,
            cq,
            rqn: 0,
            mem: Some(mem),
            cnt,
            strides,
        };
        let (cqn, pdn) = (cq.cqn(), pd.pdn());
        let made = dev.with_cmd(|cmd, p| {
            run_create::<CreateRqIn, CreateRqOut, _, _, _>(
                cmd,
                p,
                Opcode::CreateRq,
                rq.mem.as_ref().map(|m| &m.buf),
                |v| {
                    let mut c = v.nested_mut(CreateRqIn::CTX);
                    c.set(Rqc::CQN, u64::from(cqn))?
                        .set(Rqc::FLUSH_IN_ERROR_EN, 1)?
                        .set(Rqc::STATE, RST)?;
                    let mut w = c.nested_mut(Rqc::WQ);
                    w.set(Wq::PD, u64::from(pdn))?
                        .set(Wq::DBR_ADDR, dbr_iova)?
                        .set(Wq::LOG_WQ_PG_SZ, u64::from(log_pg))?
                        .set(Wq::LOG_WQ_SZ, log)?;
                    match strides {
                        None => {
                            w.set(Wq::WQ_TYPE, wq_type::CYCLIC)?
                                .set(Wq::LOG_WQ_STRIDE, 4)?;
                        }
                        // Strides: 2^(n - 9) in four bits (8..256: the extended range's
                        // 0xa..0xf), 2^(b - 6) bytes.
                        Some(s) => {
                            let n = u64::from(s.log_num_strides)
                                .wrapping_sub(striding::LOG_NUM_STRIDES_BASE)
                                & 0xf;
                            let b = u64::from(s.log_stride_bytes) - striding::LOG_STRIDE_SIZE_BASE;
                            w.set(Wq::WQ_TYPE, wq_type::CYCLIC_STRIDING_RQ)?
                                .set(Wq::LOG_WQ_STRIDE, 5)?
                                .set(Wq::LOG_WQE_NUM_OF_STRIDES, n)?
                                .set(Wq::LOG_WQE_STRIDE_SIZE, b)?;
                        }
                    }
                    Ok(())
                },
            )
        });
        match made {
            Ok(o) => rq.rqn = o.get(CreateRqOut::RQN) as u32,
            Err(e) => {
                rq.retire(!e.device_may_hold_memory());
                return Err(e);
            }
        }
        let rqn = rq.rqn;
        let moved = dev.with_cmd(|cmd, p| {
            run::<ModifyRqIn, ModifyRqOut, _, _>(cmd, p, Opcode::ModifyRq, 0, |v| {
                v.set(ModifyRqIn::RQN, u64::from(rqn))?
                    .set(ModifyRqIn::RQ_STATE, RST)?;
                v.nested_mut(ModifyRqIn::CTX).set(Rqc::STATE, RDY)?;
                Ok(())
            })
        });
        if let Err(e) = moved {
            let done = rq.destroy_rq().is_ok();
            rq.retire(done);
            return Err(e);
        }
        if let Some(t) = rq.mem.as_ref().map(|m| &m.table) {
            if let Err(e) = cq.attach(Attached {
                qpn: rqn,
                sq: None,
                rq: Some(match strides {
                    None => RecvTable::Rq {
                        table: t.share(),
                        cnt,
                    },
                    Some(s) => RecvTable::Striding {
                        table: t.share(),
                        cnt,
                        log_stride: u32::from(s.log_stride_bytes),
                        log_strides: u32::from(s.log_num_strides),
                    },
                }),
                flow_tag_rq: true,
            }) {
                let done = rq.destroy_rq().is_ok();
                rq.retire(done);
                return Err(e);
            }
        }
        log::debug!("Ethernet RQ {rqn:#x}: {cnt} WQEs, CQ {cqn:#x}, strides {strides:?}");
        Ok(rq)
    }

    /// The RQ number.
    pub fn rqn(&self) -> u32 {
        self.rqn
    }

    /// The geometry of a striding RQ's buffers; `None` for a regular RQ.
    pub fn strides(&self) -> Option<Strides> {
        self.strides
    }

    /// Posts receive buffers (one SGE each; on a striding RQ exactly
    /// [`Strides::buffer_bytes`] long), then the doorbell record. Refused as a whole (nothing
    /// posted) if one is malformed or the ring lacks room.
    pub fn post_recv(&mut self, wrs: &[RecvWr<'_>]) -> Result<()> {
        let Some(WqMem { buf, dbr, table }) = &self.mem else {
            return Err(refuse(
                "rq",
                u64::from(self.rqn),
                0,
                "the RQ's memory is gone",
            ));
        };
        if let Some(wr) = wrs.iter().find(|w| w.sg_list.len() != 1) {
            return Err(Error::InvalidArgument {
                op: "eth post_recv",
                field: "num_sge",
                requested: wr.sg_list.len() as u64,
                max: 1,
                limit: "one data segment per Ethernet receive WQE",
            });
        }
        if let Some((wr, s)) = self.strides.and_then(|s| {
            wrs.iter()
                .find(|w| w.sg_list[0].length != s.buffer_bytes())
                .map(|w| (w, s))
        }) {
            return Err(Error::InvalidArgument {
                op: "eth post_recv",
                field: "length",
                requested: u64::from(wr.sg_list[0].length),
                max: u64::from(s.buffer_bytes()),
                limit: "a striding RQ's buffer is exactly its strides",
            });
        }
        let head = table.load_relaxed(rq_table::HEAD);
        let used = head.wrapping_sub(table.load(rq_table::TAIL));
        if used + wrs.len() as u64 > u64::from(self.cnt) {
            return Err(Error::QueueFull {
                qpn: self.rqn,
                queue: "Ethernet receive queue",
                outstanding: used,
                limit: u64::from(self.cnt),
            });
        }
        let mask = u64::from(self.cnt) - 1;
        for (k, wr) in wrs.iter().enumerate() {
            let slot = ((head + k as u64) & mask) as usize;
            let s = &wr.sg_list[0];
            let mut seg = [0u8; 16];
            seg[0..4].copy_from_slice(&s.length.to_be_bytes());
            seg[4..8].copy_from_slice(&s.lkey.to_be_bytes());
            seg[8..16].copy_from_slice(&s.addr.to_be_bytes());
            match self.strides {
                None => buf.buf().write_seg16(slot * DS, &seg)?,
                // After the 16-byte next segment, which a cyclic RQ leaves unused.
                Some(_) => buf.buf().write_seg16(slot * 2 * DS + DS, &seg)?,
            }
            table.store_pair_relaxed(rq_table::wrid(slot), wr.wr_id, u64::from(s.length));
        }
        let head = head + wrs.len() as u64;
        table.store(rq_table::HEAD, head);
        barrier::dma_wmb();
        dbr.write_be32(0, Be32::new(head as u32 & 0xffff))?;
        Ok(())
    }

    fn destroy_rq(&self) -> Result<()> {
        let rqn = self.rqn;
        self.dev
            .with_cmd(|cmd, p| {
                run::<DestroyRqIn, DestroyRqOut, _, _>(cmd, p, Opcode::DestroyRq, 0, |v| {
                    v.set(DestroyRqIn::RQN, u64::from(rqn))?;
                    Ok(())
                })
            })
            .map(drop)
    }

    fn retire(&mut self, done: bool) {
        if let Some(m) = self.mem.take() {
            m.retire(self.dev, done, WHY);
        }
    }

    /// DESTROY_RQ (its TIR must be gone), then the memory freed (quarantined if the device may
    /// still hold it).
    pub fn destroy(mut self) -> Result<()> {
        let r = self.destroy_rq();
        end(self.dev, self.cq, self.rqn, &r, self.mem.take(), WHY);
        r
    }
}

/// Why an RQ's memory is quarantined.
const WHY: &str = "an Ethernet RQ the device may still use";

impl<P: Platform> Drop for EthRq<'_, P> {
    fn drop(&mut self) {
        if self.mem.is_some() {
            let r = self.destroy_rq();
            if let Err(e) = &r {
                log::warn!("DESTROY_RQ {:#x} at drop: {e}", self.rqn);
            }
            end(self.dev, self.cq, self.rqn, &r, self.mem.take(), WHY);
        }
    }
}

fn refuse(field: &'static str, requested: u64, max: u64, limit: &'static str) -> Error {
    Error::InvalidArgument {
        op: "create_eth_rq",
        field,
        requested,
        max,
        limit,
    }
}
