//! Creating, querying and destroying a CQ.

use mlx5_ifc::prm::cq::{
    Cqc, CreateCqIn, CreateCqOut, DestroyCqIn, DestroyCqOut, QueryCqIn, QueryCqOut,
};
use mlx5_ifc::Opcode;

use crate::device::Device;
use crate::error::{Error, Result};
use crate::fw::cmd::{run, run_create};
use crate::fw::queue::{alloc_dbr, ceil_log2, QueueBuf};
use crate::io::platform::Platform;
use crate::io::DmaBuf;

use super::cqe::{CQE_BYTES, CQE_INVALID, CQE_OP_OWN};
use super::state;
use super::zip::{Compression, MiniCqe};

/// A completion queue of device `'d`.
#[derive(Debug)]
pub struct Cq<'d, P: Platform> {
    pub(crate) dev: &'d Device<P>,
    pub(crate) cqn: u32,
    pub(crate) cqe: u32,
    eqn: u8,
    pub(crate) mem: Option<(QueueBuf, DmaBuf)>,
    pub(crate) shared: spin::Mutex<state::CqShared>,
}

/// What the device holds for a CQ (QUERY_CQ).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CqInfo {
    /// log2 of the slots.
    pub log_cq_size: u8,
    /// The completion EQ.
    pub c_eqn: u32,
    /// The UAR page of its doorbells.
    pub uar_page: u32,
    /// The doorbell record address.
    pub dbr_addr: u64,
}

impl<P: Platform> Device<P> {
    /// Creates a CQ for at least `cqe` completions (`ibv_create_cq`), on the completion EQ.
    pub fn create_cq(&self, cqe: u32) -> Result<Cq<'_, P>> {
        self.make_cq(cqe, None)
    }

    /// [`Device::create_cq`] for a CQ the device may write compressed (`cqe_comp_en`): runs of
    /// an Ethernet RQ's receive completions as one title CQE and arrays of mini CQEs carrying
    /// what `mini` names — fewer bytes across PCI for the same completions. Polling gives them
    /// as completions like any other (`verbs::cq::zip`). Refused where the device offers no
    /// CQE compression (`cqe_compression`), or no stride index in mini CQEs
    /// (`mini_cqe_resp_stride_index`) for [`MiniCqe::ChecksumStrideIndex`]. Only an Ethernet
    /// RQ's completions are compressed; RDMA completions on the CQ never are.
    pub fn create_cq_compressed(&self, cqe: u32, mini: MiniCqe) -> Result<Cq<'_, P>> {
        let cap = |n| self.caps().get(n).unwrap_or(0);
        let unsupported = |what| Error::Unsupported { what, found: 0 };
        if cap("cqe_compression") == 0 {
            return Err(unsupported("CQE compression (cqe_compression)"));
        }
        if mini == MiniCqe::ChecksumStrideIndex && cap("mini_cqe_resp_stride_index") == 0 {
            return Err(unsupported(
                "the stride index in mini CQEs (mini_cqe_resp_stride_index)",
            ));
        }
        let max = cap("cqe_compression_max_num") as u32;
        if max < 2 {
            return Err(unsupported(
                "CQE compression sessions (cqe_compression_max_num)",
            ));
        }
        self.make_cq(cqe, Some(Compression { mini, max }))
    }

    fn make_cq(&self, cqe: u32, zip: Option<Compression>) -> Result<Cq<'_, P>> {
        let max = crate::fw::caps::p2(self.caps().log_max_cq_sz()).saturating_sub(1);
        if cqe == 0 || u64::from(cqe) > max {
            return Err(Error::InvalidArgument {
                op: "create_cq",
                field: "cqe",
                requested: u64::from(cqe),
                max,
                limit: "log_max_cq_sz (2^log_max_cq_sz - 1 completions; at least 1)",
            });
        }
        let (Some(uar), Some(eqn)) = (self.uar(), self.comp_eqn()) else {
            return Err(Error::Unsupported {
                what: "a completion EQ (device not open)",
                found: 0,
            });
        };
        let log_size = ceil_log2(u64::from(cqe) + 1);
        let p = self.platform();
        let buf = QueueBuf::alloc(p, CQE_BYTES << log_size, "allocate a CQ ring")?;
        let dbr = match alloc_dbr(p, "allocate a CQ doorbell record") {
            Ok(d) => d,
            Err(e) => {
                buf.free(p);
                return Err(e);
            }
        };
        let init = (0..1usize << log_size)
            .try_for_each(|i| buf.buf().write_u8(i * CQE_BYTES + CQE_OP_OWN, CQE_INVALID));
        let made = init.map_err(Error::from).and_then(|()| {
            self.with_cmd(|cmd, p| {
                run_create::<CreateCqIn, CreateCqOut, _, _, _>(
                    cmd,
                    p,
                    Opcode::CreateCq,
                    Some(&buf),
                    |v| {
                        let mut c = v.nested_mut(CreateCqIn::CQ_CONTEXT);
                        c.set(Cqc::LOG_CQ_SIZE, u64::from(log_size))?;
                        c.set(Cqc::UAR_PAGE, u64::from(uar.index()))?;
                        c.set(Cqc::C_EQN_OR_APU_ELEMENT, u64::from(eqn))?;
                        c.set(Cqc::LOG_PAGE_SIZE, u64::from(buf.log_page_size()))?;
                        c.set(Cqc::DBR_ADDR, dbr.iova())?;
                        if let Some(z) = zip {
                            c.set(Cqc::CQE_COMP_EN, 1)?;
                            c.set(Cqc::MINI_CQE_RES_FORMAT, z.mini.format())?;
                        }
                        Ok(())
                    },
                )
            })
        });
        match made {
            Ok(out) => {
                let cqn = out.get(CreateCqOut::CQN) as u32;
                Ok(Cq {
                    dev: self,
                    cqn,
                    cqe: (1 << log_size) - 1,
                    eqn,
                    mem: Some((buf, dbr)),
                    shared: spin::Mutex::new(state::CqShared {
                        compression: zip,
                        ..state::CqShared::default()
                    }),
                })
            }
            Err(e) => {
                // A CREATE_CQ that may have taken effect leaves the ring to the device.
                let done = !e.device_may_hold_memory();
                let q = self.quarantine();
                buf.retire(q, p, done, "CREATE_CQ failed with its outcome unknown");
                q.retire(p, dbr, done, "CREATE_CQ failed with its outcome unknown");
                Err(e)
            }
        }
    }
}

impl<'d, P: Platform> Cq<'d, P> {
    /// The CQ number QPs name.
    pub fn cqn(&self) -> u32 {
        self.cqn
    }

    /// Completions the CQ holds (granted; ≥ what was asked).
    pub fn cqe(&self) -> u32 {
        self.cqe
    }

    /// The completion EQ.
    pub fn eqn(&self) -> u8 {
        self.eqn
    }

    /// The device this CQ belongs to.
    pub fn device(&self) -> &'d Device<P> {
        self.dev
    }

    /// QUERY_CQ.
    pub fn query(&self) -> Result<CqInfo> {
        self.dev.with_cmd(|cmd, p| {
            let out = run::<QueryCqIn, QueryCqOut, _, _>(cmd, p, Opcode::QueryCq, 0, |v| {
                v.set(QueryCqIn::CQN, u64::from(self.cqn))?;
                Ok(())
            })?;
            let v = out.view()?;
            let c = v.nested(QueryCqOut::CQ_CONTEXT);
            Ok(CqInfo {
                log_cq_size: c.get(Cqc::LOG_CQ_SIZE) as u8,
                c_eqn: c.get(Cqc::C_EQN_OR_APU_ELEMENT) as u32,
                uar_page: c.get(Cqc::UAR_PAGE) as u32,
                dbr_addr: c.get(Cqc::DBR_ADDR),
            })
        })
    }

    /// DESTROY_CQ and free its memory (`ibv_destroy_cq`).
    pub fn destroy(mut self) -> Result<()> {
        self.destroy_inner()
    }

    fn destroy_inner(&mut self) -> Result<()> {
        let Some((buf, dbr)) = self.mem.take() else {
            return Ok(());
        };
        let cqn = self.cqn;
        let r = self.dev.with_cmd(|cmd, p| {
            run::<DestroyCqIn, DestroyCqOut, _, _>(cmd, p, Opcode::DestroyCq, 0, |v| {
                v.set(DestroyCqIn::CQN, u64::from(cqn))?;
                Ok(())
            })
        });
        // Unless DESTROY_CQ succeeded, the device may still write the ring: quarantine it.
        let (p, q) = (self.dev.platform(), self.dev.quarantine());
        buf.retire(q, p, r.is_ok(), "DESTROY_CQ failed");
        q.retire(p, dbr, r.is_ok(), "DESTROY_CQ failed");
        // Queues still attached are QPs whose DESTROY_QP failed (every QP borrows its CQs, so
        // none is left alive). Their tables are host memory the device cannot reach, and no
        // poll reads them any more: give the handles back either way.
        self.shared.get_mut().queues.clear(p, |a| {
            log::debug!("CQ {cqn:#x} releases the tables of QP {:#x}", a.qpn);
        });
        r.map(drop)
    }
}

impl<P: Platform> Drop for Cq<'_, P> {
    fn drop(&mut self) {
        if let Err(e) = self.destroy_inner() {
            log::error!("destroying CQ {:#x} on drop: {e}", self.cqn);
        }
    }
}
