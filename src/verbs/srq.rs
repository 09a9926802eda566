//! Shared receive queues: CREATE_RMP (ISSI ≥ 1) or CREATE_SRQ (ISSI 0), sized like mlx5 verbs
//! (docs/sizing.md, "SRQ").
//!
//! An SRQ WQE is a 16-byte next segment (`next_wqe_index` at byte 2) followed by data segments;
//! free WQEs form a linked list, initially entry i → i + 1. The driver keeps its own copy of the
//! links in host memory (the SRQ's table) and only ever writes the device's copy: a device that
//! scribbles over a WQE cannot steer the free list.
//!
//! A CQE names an SRQ WQE by its 16-bit `wqe_counter`, so an SRQ has at most 2^16 WQEs,
//! whatever `log_max_srq_sz` says.

use mlx5_ifc::consts::{arm_rq, rmp_state};
use mlx5_ifc::prm::srq::{ArmRqIn, ArmRqOut, ModifyRmpIn, ModifyRmpOut, RmpBitmask};
use mlx5_ifc::prm::srq::{
    CreateRmpIn, CreateRmpOut, CreateSrqIn, CreateSrqOut, DestroyRmpIn, DestroyRmpOut,
    DestroySrqIn, DestroySrqOut, QueryRmpIn, QueryRmpOut, QuerySrqIn, QuerySrqOut, Rmpc, Srqc, Wq,
};
use mlx5_ifc::{Be16, Opcode};

use crate::device::Device;
use crate::error::Error as E;
use crate::error::{Error, Result};
use crate::fw::cmd::{run, run_create};
use crate::fw::queue::{alloc_dbr, ceil_log2, QueueBuf};
use crate::io::platform::Platform;
use crate::io::{barrier, DmaBuf, SharedTable};
use crate::verbs::qp::Sge;
use crate::verbs::wqe::{self, INVALID_LKEY};
use crate::verbs::wr_table::srq_table;

/// What an SRQ is asked for (`struct ibv_srq_attr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SrqAttr {
    /// Outstanding receive work requests.
    pub max_wr: u32,
    /// Scatter/gather entries per work request.
    pub max_sge: u32,
    /// Limit event threshold. `create_srq` ignores it, as `ibv_create_srq` does (the queue is
    /// created with its limit event disarmed, `lwm` 0, like Linux's mlx5); arm it with
    /// [`Srq::modify_limit`] once receives are posted.
    pub srq_limit: u32,
}

/// An SRQ's granted attributes and layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SrqSized {
    /// Granted attributes (each ≥ the request).
    pub attr: SrqAttr,
    /// WQEs in the ring (a power of two; includes the provider's spare "wait queue" entries).
    pub wqe_cnt: u32,
    /// Bytes of one WQE (a power of two ≥ 32).
    pub stride: u32,
}

fn roundup_pow2(n: u64) -> u64 {
    n.max(1).next_power_of_two()
}

/// Sizes an SRQ as the mlx5 provider and kernel do together (mlx5-datapath-sizing.md §5.2).
pub fn size_srq(log_max_srq_sz: u8, max_wqe_sz_rq: u32, a: &SrqAttr) -> Result<SrqSized> {
    // A CQE's 16-bit wqe_counter indexes the SRQ: no more than 2^16 WQEs, whatever the cap says.
    let lim = 1u64 << log_max_srq_sz.min(16);
    let bad = |field, requested: u32, max: u64, limit| Error::InvalidArgument {
        op: "create_srq",
        field,
        requested: u64::from(requested),
        max,
        limit,
    };
    // The kernel refuses `roundup_pow2(wr) - 1 >= lim`; `max_wr = lim - 1` is the last that fits.
    if a.max_wr == 0 || u64::from(a.max_wr) >= lim {
        return Err(bad(
            "max_wr",
            a.max_wr,
            lim - 1,
            "log_max_srq_sz (2^log_max_srq_sz - 1, at least 1; at most 2^16 - 1)",
        ));
    }
    let max_gs_limit = u64::from(max_wqe_sz_rq / 16);
    let stride = roundup_pow2((16 + 16 * u64::from(a.max_sge)).max(32));
    let max_gs = (stride - 16) / 16;
    if u64::from(a.max_sge) > max_gs_limit || max_gs > max_gs_limit {
        // The largest SGE count whose power-of-two stride keeps (stride - 16) / 16 within the limit.
        let stride_max = 1u64 << (63 - (16 * max_gs_limit + 16).leading_zeros());
        let fit = (stride_max.max(32) - 16) / 16;
        return Err(bad(
            "max_sge",
            a.max_sge,
            fit.min(max_gs_limit),
            "max_wqe_sz_rq (16-byte next segment + SGEs)",
        ));
    }
    // A "wait queue" of max_wr + 1 extra entries when the device has room for it (§5.2).
    let w = u64::from(a.max_wr);
    let wr = if 2 * w < lim { 2 * w + 1 } else { w + 1 };
    let hw = roundup_pow2(wr);
    let granted_wr = roundup_pow2(u64::from(a.max_wr) + 1) - 1;
    if a.srq_limit > a.max_wr {
        return Err(bad("srq_limit", a.srq_limit, u64::from(a.max_wr), "max_wr"));
    }
    Ok(SrqSized {
        attr: SrqAttr {
            max_wr: granted_wr as u32,
            max_sge: max_gs as u32,
            srq_limit: a.srq_limit,
        },
        wqe_cnt: hw as u32,
        stride: stride as u32,
    })
}

/// What the device holds for an SRQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SrqInfo {
    /// log2 of the WQEs in the ring.
    pub log_size: u8,
    /// Bytes per WQE.
    pub stride: u32,
    /// Its protection domain.
    pub pdn: u32,
    /// The limit-event threshold.
    pub limit: u32,
}

/// A shared receive queue of device `'d`.
#[derive(Debug)]
pub struct Srq<'d, P: Platform> {
    dev: &'d Device<P>,
    srqn: u32,
    rmp: bool,
    sized: SrqSized,
    mem: Option<(QueueBuf, DmaBuf, SharedTable)>,
    state: spin::Mutex<SrqState>,
}

/// The free list of SRQ WQEs (linked through `next_wqe_index`): the driver fills `head` and
/// follows its link; `tail` is the last free WQE, where returned WQEs are linked.
#[derive(Debug)]
struct SrqState {
    head: u32,
    tail: u32,
    posted: u64,
}

impl<P: Platform> Device<P> {
    /// Creates an SRQ in `pd` (`ibv_create_srq`): an RMP at ISSI ≥ 1, a plain SRQ at ISSI 0.
    pub fn create_srq(&self, pd: &crate::verbs::pd::Pd, attr: &SrqAttr) -> Result<Srq<'_, P>> {
        let c = self.caps();
        let sized = size_srq(c.log_max_srq_sz(), c.max_wqe_sz_rq(), attr)?;
        let p = self.platform();
        let bytes = sized.wqe_cnt as usize * sized.stride as usize;
        let n = sized.wqe_cnt;
        // The driver's bookkeeping first: host memory, nothing the device is told about.
        let table =
            SharedTable::alloc(p, srq_table::words(n as usize)).map_err(|source| E::Platform {
                op: "allocate the SRQ work-request table",
                source,
            })?;
        let buf = match QueueBuf::alloc(p, bytes, "allocate an SRQ ring") {
            Ok(b) => b,
            Err(e) => {
                table.release(p);
                return Err(e);
            }
        };
        let dbr = match alloc_dbr(p, "allocate an SRQ doorbell record") {
            Ok(d) => d,
            Err(e) => {
                buf.free(p);
                table.release(p);
                return Err(e);
            }
        };
        let init = (0..n).try_for_each(|i| {
            let next = (i + 1) & (n - 1);
            table.store(srq_table::next(n as usize, i as usize), u64::from(next));
            buf.buf().write_bytes(
                i as usize * sized.stride as usize + 2,
                &Be16::new(next as u16).to_bytes(),
            )
        });
        let log_sz = ceil_log2(u64::from(n));
        let log_stride = ceil_log2(u64::from(sized.stride));
        let rmp = self.issi() >= 1;
        let pdn = pd.pdn();
        let made = init.map_err(Error::from).and_then(|()| {
            self.with_cmd(|cmd, p| {
                if rmp {
                    let out = run_create::<CreateRmpIn, CreateRmpOut, _, _, _>(
                        cmd,
                        p,
                        Opcode::CreateRmp,
                        Some(&buf),
                        |v| {
                            let mut r = v.nested_mut(CreateRmpIn::CTX);
                            r.set(Rmpc::STATE, rmp_state::RDY)?;
                            let mut w = r.nested_mut(Rmpc::WQ);
                            w.set(Wq::WQ_TYPE, 0)?;
                            w.set(Wq::PD, u64::from(pdn))?;
                            w.set(Wq::DBR_ADDR, dbr.iova())?;
                            w.set(Wq::LOG_WQ_STRIDE, u64::from(log_stride))?;
                            w.set(Wq::LOG_WQ_SZ, u64::from(log_sz))?;
                            w.set(Wq::LOG_WQ_PG_SZ, u64::from(buf.log_page_size()))?;
                            Ok(())
                        },
                    )?;
                    Ok(out.get(CreateRmpOut::RMPN) as u32)
                } else {
                    let out = run_create::<CreateSrqIn, CreateSrqOut, _, _, _>(
                        cmd,
                        p,
                        Opcode::CreateSrq,
                        Some(&buf),
                        |v| {
                            let mut s = v.nested_mut(CreateSrqIn::SRQ_CONTEXT_ENTRY);
                            s.set(Srqc::LOG_SRQ_SIZE, u64::from(log_sz))?;
                            s.set(Srqc::LOG_RQ_STRIDE, u64::from(log_stride - 4))?;
                            s.set(Srqc::PD, u64::from(pdn))?;
                            s.set(Srqc::DBR_ADDR, dbr.iova())?;
                            s.set(Srqc::LOG_PAGE_SIZE, u64::from(buf.log_page_size()))?;
                            Ok(())
                        },
                    )?;
                    Ok(out.get(CreateSrqOut::SRQN) as u32)
                }
            })
        });
        match made {
            Ok(srqn) => Ok(Srq {
                dev: self,
                srqn,
                rmp,
                sized,
                mem: Some((buf, dbr, table)),
                state: spin::Mutex::new(SrqState {
                    head: 0,
                    tail: n - 1,
                    posted: 0,
                }),
            }),
            Err(e) => {
                // A create that may have taken effect leaves the ring to the device.
                let done = !e.device_may_hold_memory();
                let q = self.quarantine();
                buf.retire(q, p, done, "CREATE_SRQ/RMP failed with its outcome unknown");
                q.retire(
                    p,
                    dbr,
                    done,
                    "CREATE_SRQ/RMP failed with its outcome unknown",
                );
                table.release(p);
                Err(e)
            }
        }
    }
}

impl<'d, P: Platform> Srq<'d, P> {
    /// The SRQ (or RMP) number QPs name.
    pub fn srqn(&self) -> u32 {
        self.srqn
    }

    /// Whether the device object is an RMP (ISSI ≥ 1).
    pub fn is_rmp(&self) -> bool {
        self.rmp
    }

    /// Granted attributes and layout.
    pub fn sized(&self) -> SrqSized {
        self.sized
    }

    /// The device.
    pub fn device(&self) -> &'d Device<P> {
        self.dev
    }

    /// QUERY_RMP / QUERY_SRQ: what the device holds (`ibv_query_srq`).
    pub fn query(&self) -> Result<SrqInfo> {
        let n = u64::from(self.srqn);
        self.dev.with_cmd(|cmd, p| {
            if self.rmp {
                let out = run::<QueryRmpIn, QueryRmpOut, _, _>(cmd, p, Opcode::QueryRmp, 0, |v| {
                    v.set(QueryRmpIn::RMPN, n)?;
                    Ok(())
                })?;
                let v = out.view()?;
                let r = v.nested(QueryRmpOut::RMP_CONTEXT);
                let w = r.nested(Rmpc::WQ);
                Ok(SrqInfo {
                    log_size: w.get(Wq::LOG_WQ_SZ) as u8,
                    stride: 1 << w.get(Wq::LOG_WQ_STRIDE).min(31),
                    pdn: w.get(Wq::PD) as u32,
                    limit: w.get(Wq::LWM) as u32,
                })
            } else {
                let out = run::<QuerySrqIn, QuerySrqOut, _, _>(cmd, p, Opcode::QuerySrq, 0, |v| {
                    v.set(QuerySrqIn::SRQN, n)?;
                    Ok(())
                })?;
                let v = out.view()?;
                let s = v.nested(QuerySrqOut::SRQ_CONTEXT_ENTRY);
                Ok(SrqInfo {
                    log_size: s.get(Srqc::LOG_SRQ_SIZE) as u8,
                    stride: 16 << s.get(Srqc::LOG_RQ_STRIDE).min(27),
                    pdn: s.get(Srqc::PD) as u32,
                    limit: s.get(Srqc::LWM) as u32,
                })
            }
        })
    }

    /// Arms the limit event (`ibv_modify_srq` with `IBV_SRQ_LIMIT`): when fewer than
    /// `srq_limit` receive WQEs are left posted, the device raises one SRQ_RQ_LIMIT event
    /// (see [`Device::poll_async_events`]; [`crate::Event::qpn`] names the SRQ) and disarms.
    /// 0 disarms. MODIFY_RMP with the `lwm` field selected (ISSI ≥ 1) or ARM_RQ (ISSI 0), as
    /// Linux's mlx5_ib arms them.
    pub fn modify_limit(&self, srq_limit: u32) -> Result<()> {
        let max = self.sized.attr.max_wr;
        if srq_limit > max {
            return Err(Error::InvalidArgument {
                op: "modify_srq",
                field: "srq_limit",
                requested: u64::from(srq_limit),
                max: u64::from(max),
                limit: "the SRQ's max_wr",
            });
        }
        let (n, lwm) = (u64::from(self.srqn), u64::from(srq_limit));
        self.dev.with_cmd(|cmd, p| {
            if self.rmp {
                run::<ModifyRmpIn, ModifyRmpOut, _, _>(cmd, p, Opcode::ModifyRmp, 0, |v| {
                    v.set(ModifyRmpIn::RMP_STATE, rmp_state::RDY)?;
                    v.set(ModifyRmpIn::RMPN, n)?;
                    v.nested_mut(ModifyRmpIn::BITMASK).set(RmpBitmask::LWM, 1)?;
                    let mut r = v.nested_mut(ModifyRmpIn::CTX);
                    r.set(Rmpc::STATE, rmp_state::RDY)?;
                    r.nested_mut(Rmpc::WQ).set(Wq::LWM, lwm)?;
                    Ok(())
                })
                .map(drop)
            } else {
                run::<ArmRqIn, ArmRqOut, _, _>(cmd, p, Opcode::ArmRq, arm_rq::SRQ, |v| {
                    v.set(ArmRqIn::SRQ_NUMBER, n)?;
                    v.set(ArmRqIn::LWM, lwm)?;
                    Ok(())
                })
                .map(drop)
            }
        })
    }

    /// Destroys the SRQ (`ibv_destroy_srq`).
    pub fn destroy(mut self) -> Result<()> {
        self.destroy_inner()
    }

    fn destroy_inner(&mut self) -> Result<()> {
        let Some((buf, dbr, table)) = self.mem.take() else {
            return Ok(());
        };
        let r = self.dev.destroy_srq_cmd(self.srqn, self.rmp);
        // Unless the destroy succeeded, the device may still read the ring and write the DBR.
        let (p, q) = (self.dev.platform(), self.dev.quarantine());
        buf.retire(q, p, r.is_ok(), "DESTROY_SRQ/RMP failed");
        q.retire(p, dbr, r.is_ok(), "DESTROY_SRQ/RMP failed");
        table.release(p);
        r
    }

    /// The work-request table CQs share.
    pub(crate) fn table(&self) -> Option<&SharedTable> {
        self.mem.as_ref().map(|m| &m.2)
    }

    /// Posts receive work requests to the SRQ (`ibv_post_srq_recv`). Any QP attached to it may
    /// consume them.
    pub fn post_recv(&self, wrs: &[crate::verbs::qp::RecvWr<'_>]) -> Result<()> {
        let Some((buf, dbr, table)) = self.mem.as_ref() else {
            return Ok(());
        };
        let max_sge = self.sized.attr.max_sge as usize;
        for wr in wrs {
            if wr.sg_list.len() > max_sge {
                return Err(E::InvalidArgument {
                    op: "post_srq_recv",
                    field: "num_sge",
                    requested: wr.sg_list.len() as u64,
                    max: max_sge as u64,
                    limit: "max_sge of the SRQ",
                });
            }
        }
        let n = self.sized.wqe_cnt as usize;
        let mask = self.sized.wqe_cnt - 1;
        let stride = self.sized.stride as usize;
        // The link after WQE `i`, from the driver's copy (host memory).
        let next_of = |i: u32| table.load(srq_table::next(n, i as usize)) as u32 & mask;
        let mut st = self.state.lock();
        // Link the WQEs the CQs handed back after the last free one.
        loop {
            let h = table.load(srq_table::FREED_HEAD);
            if h == table.load(srq_table::FREED_TAIL) {
                break;
            }
            let at = srq_table::freed(n) + (h as usize % n);
            let v = table.load(at);
            if v == 0 {
                break; // a poller reserved the slot and has not filled it yet
            }
            table.store(at, 0);
            table.store(srq_table::FREED_HEAD, h.wrapping_add(1));
            let idx = (v - 1) as u32 & mask;
            table.store(srq_table::next(n, st.tail as usize), u64::from(idx));
            buf.buf()
                .write_bytes(st.tail as usize * stride + 2, &(idx as u16).to_be_bytes())?;
            st.tail = idx;
        }
        let mut free = 0usize;
        let mut i = st.head;
        while i != st.tail && free < wrs.len() {
            free += 1;
            i = next_of(i);
        }
        if free < wrs.len() {
            return Err(E::QueueFull {
                qpn: self.srqn,
                queue: "SRQ",
                outstanding: st.posted,
                limit: self.sized.attr.max_wr.into(),
            });
        }
        for wr in wrs {
            let idx = st.head;
            let mut at = idx as usize * stride + 16;
            let mut used = 0;
            for s in wr.sg_list.iter().filter(|s: &&Sge| s.length > 0) {
                buf.buf()
                    .write_bytes(at, &wqe::data(s.length, s.lkey, s.addr))?;
                at += 16;
                used += 1;
            }
            if used < max_sge {
                buf.buf().write_bytes(at, &wqe::data(0, INVALID_LKEY, 0))?;
            }
            let cap: u64 = wr.sg_list.iter().map(|s| u64::from(s.length)).sum();
            table.store_pair_relaxed(
                srq_table::wrid(idx as usize),
                wr.wr_id,
                cap | srq_table::POSTED,
            );
            st.head = next_of(idx);
            st.posted += 1;
        }
        barrier::dma_wmb();
        dbr.write_be32(0, mlx5_ifc::Be32::new(st.posted as u32 & 0xffff))?;
        Ok(())
    }
}

impl<P: Platform> Device<P> {
    fn destroy_srq_cmd(&self, srqn: u32, rmp: bool) -> Result<()> {
        let n = u64::from(srqn);
        self.with_cmd(|cmd, p| {
            if rmp {
                run::<DestroyRmpIn, DestroyRmpOut, _, _>(cmd, p, Opcode::DestroyRmp, 0, |v| {
                    v.set(DestroyRmpIn::RMPN, n)?;
                    Ok(())
                })
                .map(drop)
            } else {
                run::<DestroySrqIn, DestroySrqOut, _, _>(cmd, p, Opcode::DestroySrq, 0, |v| {
                    v.set(DestroySrqIn::SRQN, n)?;
                    Ok(())
                })
                .map(drop)
            }
        })
    }
}

impl<P: Platform> Drop for Srq<'_, P> {
    fn drop(&mut self) {
        if let Err(e) = self.destroy_inner() {
            log::error!("destroying SRQ {:#x} on drop: {e}", self.srqn);
        }
    }
}
