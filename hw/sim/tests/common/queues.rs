//! Queue-object fixtures for the object and QP tests: an initialized device with a UAR, a PD,
//! a GID, a DMA arena for queue buffers and a page of doorbell records; builders for every
//! create / modify input (byte by byte through the `mlx5-ifc` layouts).

use mlx5_ifc::consts::{qp_st, rmp_state, roce};
use mlx5_ifc::prm::cq::{Cqc, CreateCqIn, CreateCqOut, DestroyCqIn};
use mlx5_ifc::prm::eq::{CreateEqIn, CreateEqOut, DestroyEqIn, Eqc};
use mlx5_ifc::prm::hca::SetIssiIn;
use mlx5_ifc::prm::qp::{
    Ads, CreateQpIn, CreateQpOut, DestroyQpIn, Init2initQpIn, Init2rtrQpIn, Qp2errIn, Qp2rstIn,
    Qpc, QueryQpIn, QueryQpOut, Rst2initQpIn, Rtr2rtsQpIn, Rts2rtsQpIn,
};
use mlx5_ifc::prm::srq::{
    CreateRmpIn, CreateRmpOut, CreateSrqIn, CreateSrqOut, DestroyRmpIn, DestroySrqIn, Rmpc, Srqc,
    Wq,
};
use mlx5_ifc::prm::uar_pd::{
    AllocPdIn, AllocPdOut, AllocUarIn, AllocUarOut, DeallocPdIn, DeallocUarIn,
};
use mlx5_ifc::prm::vport::{RoceAddrLayout, SetRoceAddressIn};
use mlx5_ifc::CmdStatus;
use mlx5_ifc::{Be64, Layout, Opcode, View, ViewMut};
use mlx5_sim::syndrome as syn;
use mlx5_sim::{DmaBlock, Mode, Profile, SimDevice};

use super::{assert_clean, bare, cmd, status, Poster};

/// Pages in the queue buffer arena.
pub const ARENA_PAGES: usize = 16;
/// The remote MAC the QP tests use.
pub const RMAC: u64 = 0x02c5_5a00_0002;

/// An initialized device with the resources queue objects need.
pub struct Fx {
    pub p: Poster,
    pub uar: u32,
    pub pd: u32,
    /// Queue buffers: every queue's PAS points into these pages (the device does not mind
    /// sharing).
    pub arena: DmaBlock,
    /// Doorbell records, one per 64 bytes.
    pub dbrs: DmaBlock,
}

/// `input` with `pas` appended as 64-bit big-endian entries.
pub fn with_pas(mut input: Vec<u8>, pas: &[u64]) -> Vec<u8> {
    for a in pas {
        input.extend_from_slice(&Be64::new(*a).to_bytes());
    }
    input
}

/// Pages a queue of `bytes` needs with 4 KiB pages.
pub fn pages_for(bytes: u64) -> usize {
    bytes.div_ceil(4096) as usize
}

impl Fx {
    /// `profile` brought up, ISSI `issi`, one UAR, one PD, GID 0 set.
    pub fn new(profile: Profile, mode: Mode, issi: u16) -> Fx {
        let mut p = Poster::sim(profile, mode);
        p.init();
        if issi != 0 {
            p.ok(
                &cmd::<SetIssiIn>(Opcode::SetIssi, 0, |v| {
                    v.set(SetIssiIn::CURRENT_ISSI, issi.into()).unwrap();
                }),
                0x10,
            );
        }
        let out = p.ok(&bare::<AllocUarIn>(Opcode::AllocUar, 0), 0x10);
        let uar = View::<AllocUarOut>::new(&out)
            .unwrap()
            .get32(AllocUarOut::UAR);
        let out = p.ok(&bare::<AllocPdIn>(Opcode::AllocPd, 0), 0x10);
        let pd = View::<AllocPdOut>::new(&out).unwrap().get32(AllocPdOut::PD);
        let arena = p.dev.dma_alloc(ARENA_PAGES * 4096, 4096).unwrap();
        let dbrs = p.dev.dma_alloc(4096, 4096).unwrap();
        let mut fx = Fx {
            p,
            uar,
            pd,
            arena,
            dbrs,
        };
        fx.set_gid(0);
        fx
    }

    pub fn cx5(mode: Mode) -> Fx {
        Fx::new(super::quiet(Profile::connectx5()), mode, 1)
    }

    pub fn dev(&self) -> SimDevice {
        self.p.dev.clone()
    }

    /// Sets RoCE address `index` to a RoCE v2 IPv4 GID.
    pub fn set_gid(&mut self, index: u16) {
        let input = cmd::<SetRoceAddressIn>(Opcode::SetRoceAddress, 0, |v| {
            v.set(SetRoceAddressIn::ROCE_ADDRESS_INDEX, index.into())
                .unwrap();
            v.set(SetRoceAddressIn::VHCA_PORT_NUM, 1).unwrap();
            let mut a = v.nested_mut(SetRoceAddressIn::ROCE_ADDRESS);
            a.set(RoceAddrLayout::ROCE_VERSION, roce::VERSION_2)
                .unwrap();
            a.set(RoceAddrLayout::ROCE_L3_TYPE, roce::L3_IPV4).unwrap();
            let ip = a.bytes_mut(RoceAddrLayout::SOURCE_L3_ADDRESS);
            ip[10..16].copy_from_slice(&[0xff, 0xff, 10, 0, 0, 1 + index as u8]);
        });
        self.p.ok(&input, 0x10);
    }

    /// The first `n` arena pages (at most the arena: builders of queues too big to create
    /// still build).
    pub fn pages(&self, n: usize) -> Vec<u64> {
        (0..n.min(ARENA_PAGES) as u64)
            .map(|k| self.arena.iova + k * 4096)
            .collect()
    }

    /// Doorbell record `k`.
    pub fn dbr(&self, k: u64) -> u64 {
        self.dbrs.iova + 64 * (k % 64)
    }

    /// Runs a command (delivery must succeed); `(status, syndrome)` and the output.
    pub fn run(&mut self, input: &[u8], outlen: usize) -> ((u8, u32), Vec<u8>) {
        let out = self.p.exec(input, outlen);
        (status(&out), out)
    }

    /// Runs a command that must fail with `want`; its output must be zero.
    pub fn expect(&mut self, input: &[u8], outlen: usize, want: (u8, u32)) {
        let (got, out) = self.run(input, outlen);
        assert_eq!(got, want, "got syndrome {:?}", syn::name(got.1));
        assert!(
            out[8..].iter().all(|&b| b == 0),
            "a failed command's output is zero"
        );
    }

    /// CREATE_EQ of `2^log_size` EQEs; `f` edits the context.
    pub fn eq_in(&self, log_size: u64, f: impl FnOnce(&mut ViewMut<'_, Eqc>)) -> Vec<u8> {
        let uar = self.uar;
        let input = cmd::<CreateEqIn>(Opcode::CreateEq, 0, |v| {
            let mut c = v.nested_mut(CreateEqIn::EQ_CONTEXT_ENTRY);
            c.set(Eqc::LOG_EQ_SIZE, log_size).unwrap();
            c.set(Eqc::UAR_PAGE, uar.into()).unwrap();
            f(&mut c);
            v.bytes_mut(CreateEqIn::EVENT_BITMASK)[7] = 0x3f;
        });
        with_pas(input, &self.pages(pages_for(64 << log_size)))
    }

    /// CREATE_CQ of `2^log_size` 64-byte CQEs on `eqn`; `f` edits the context.
    pub fn cq_in(&self, eqn: u32, log_size: u64, f: impl FnOnce(&mut ViewMut<'_, Cqc>)) -> Vec<u8> {
        let (uar, dbr) = (self.uar, self.dbr(1));
        let input = cmd::<CreateCqIn>(Opcode::CreateCq, 0, |v| {
            let mut c = v.nested_mut(CreateCqIn::CQ_CONTEXT);
            c.set(Cqc::LOG_CQ_SIZE, log_size).unwrap();
            c.set(Cqc::UAR_PAGE, uar.into()).unwrap();
            c.set(Cqc::C_EQN_OR_APU_ELEMENT, eqn.into()).unwrap();
            c.set(Cqc::DBR_ADDR, dbr).unwrap();
            c.set(Cqc::CQ_PERIOD, 16).unwrap();
            c.set(Cqc::CQ_MAX_COUNT, 32).unwrap();
            f(&mut c);
        });
        let cqe = if View::<CreateCqIn>::new(&input)
            .unwrap()
            .nested(CreateCqIn::CQ_CONTEXT)
            .get(Cqc::CQE_SZ)
            == 1
        {
            128
        } else {
            64
        };
        with_pas(input, &self.pages(pages_for(cqe << log_size)))
    }

    /// CREATE_SRQ of `2^log_size` WQEs of `16 << log_stride` bytes.
    pub fn srq_in(
        &self,
        log_size: u64,
        log_stride: u64,
        f: impl FnOnce(&mut ViewMut<'_, Srqc>),
    ) -> Vec<u8> {
        let (pd, dbr) = (self.pd, self.dbr(2));
        let input = cmd::<CreateSrqIn>(Opcode::CreateSrq, 0, |v| {
            let mut c = v.nested_mut(CreateSrqIn::SRQ_CONTEXT_ENTRY);
            c.set(Srqc::LOG_SRQ_SIZE, log_size).unwrap();
            c.set(Srqc::LOG_RQ_STRIDE, log_stride).unwrap();
            c.set(Srqc::PD, pd.into()).unwrap();
            c.set(Srqc::DBR_ADDR, dbr).unwrap();
            f(&mut c);
        });
        with_pas(
            input,
            &self.pages(pages_for((16 << log_stride) << log_size)),
        )
    }

    /// CREATE_RMP of `2^log_size` WQEs of `1 << log_stride` bytes.
    pub fn rmp_in(
        &self,
        log_size: u64,
        log_stride: u64,
        f: impl FnOnce(&mut ViewMut<'_, Wq>),
    ) -> Vec<u8> {
        let (pd, dbr) = (self.pd, self.dbr(3));
        let input = cmd::<CreateRmpIn>(Opcode::CreateRmp, 0, |v| {
            let mut c = v.nested_mut(CreateRmpIn::CTX);
            c.set(Rmpc::STATE, rmp_state::RDY).unwrap();
            let mut w = c.nested_mut(Rmpc::WQ);
            w.set(Wq::LOG_WQ_SZ, log_size).unwrap();
            w.set(Wq::LOG_WQ_STRIDE, log_stride).unwrap();
            w.set(Wq::PD, pd.into()).unwrap();
            w.set(Wq::DBR_ADDR, dbr).unwrap();
            f(&mut w);
        });
        with_pas(input, &self.pages(pages_for((1 << log_stride) << log_size)))
    }

    /// CREATE_QP of type `st` on `cqn` (both sides), a regular RQ of 16 × 64 B and an SQ of
    /// 16 WQEBBs; `f` edits the context. The PAS covers the buffer the final context needs.
    pub fn qp_in(&self, st: u64, cqn: u32, f: impl FnOnce(&mut ViewMut<'_, Qpc>)) -> Vec<u8> {
        let (pd, uar, dbr) = (self.pd, self.uar, self.dbr(4));
        let input = cmd::<CreateQpIn>(Opcode::CreateQp, 0, |v| {
            let mut c = v.nested_mut(CreateQpIn::QPC);
            c.set(Qpc::ST, st).unwrap();
            c.set(Qpc::PM_STATE, 3).unwrap();
            c.set(Qpc::PD, pd.into()).unwrap();
            c.set(Qpc::UAR_PAGE, uar.into()).unwrap();
            c.set(Qpc::CQN_SND, cqn.into()).unwrap();
            c.set(Qpc::CQN_RCV, cqn.into()).unwrap();
            c.set(Qpc::LOG_RQ_SIZE, 4).unwrap();
            c.set(Qpc::LOG_RQ_STRIDE, 2).unwrap();
            c.set(Qpc::LOG_SQ_SIZE, 4).unwrap();
            c.set(Qpc::DBR_ADDR, dbr).unwrap();
            c.set(Qpc::USER_INDEX, 0x77).unwrap();
            f(&mut c);
        });
        let c = View::<CreateQpIn>::new(&input)
            .unwrap()
            .nested(CreateQpIn::QPC);
        let rq = if c.get(Qpc::RQ_TYPE) == 0 {
            (16u64 << c.get(Qpc::LOG_RQ_STRIDE)) << c.get(Qpc::LOG_RQ_SIZE)
        } else {
            0
        };
        let sq = if c.get(Qpc::NO_SQ) == 1 {
            0
        } else {
            64u64 << c.get(Qpc::LOG_SQ_SIZE)
        };
        let page = 4096u64 << c.get(Qpc::LOG_PAGE_SIZE);
        let n = (rq + sq).div_ceil(page) as usize;
        with_pas(input, &self.pages(n))
    }

    /// Runs a create that must succeed; the number at `field` of its output `O`.
    fn created<O: Layout>(&mut self, input: &[u8], field: mlx5_ifc::Field<O>) -> u32 {
        let out = self.p.ok(input, O::BYTES);
        View::<O>::new(&out).unwrap().get32(field)
    }

    pub fn create_eq(&mut self) -> u32 {
        let input = self.eq_in(4, |_| {});
        self.created::<CreateEqOut>(&input, CreateEqOut::EQ_NUMBER)
    }

    pub fn create_cq(&mut self, eqn: u32) -> u32 {
        let input = self.cq_in(eqn, 4, |_| {});
        self.created::<CreateCqOut>(&input, CreateCqOut::CQN)
    }

    pub fn create_srq(&mut self) -> u32 {
        let input = self.srq_in(4, 1, |_| {});
        self.created::<CreateSrqOut>(&input, CreateSrqOut::SRQN)
    }

    pub fn create_rmp(&mut self) -> u32 {
        let input = self.rmp_in(4, 5, |_| {});
        self.created::<CreateRmpOut>(&input, CreateRmpOut::RMPN)
    }

    pub fn create_qp_with(&mut self, input: &[u8]) -> u32 {
        self.created::<CreateQpOut>(input, CreateQpOut::QPN)
    }

    pub fn create_qp(&mut self, st: u64, cqn: u32) -> u32 {
        let input = self.qp_in(st, cqn, |_| {});
        self.create_qp_with(&input)
    }

    pub fn destroy_eq(&mut self, eqn: u32) {
        let input = cmd::<DestroyEqIn>(Opcode::DestroyEq, 0, |v| {
            v.set(DestroyEqIn::EQ_NUMBER, eqn.into()).unwrap();
        });
        self.p.ok(&input, 0x10);
    }

    pub fn destroy_cq(&mut self, cqn: u32) {
        let input = cmd::<DestroyCqIn>(Opcode::DestroyCq, 0, |v| {
            v.set(DestroyCqIn::CQN, cqn.into()).unwrap();
        });
        self.p.ok(&input, 0x10);
    }

    pub fn destroy_srq(&mut self, srqn: u32) {
        let input = cmd::<DestroySrqIn>(Opcode::DestroySrq, 0, |v| {
            v.set(DestroySrqIn::SRQN, srqn.into()).unwrap();
        });
        self.p.ok(&input, 0x10);
    }

    pub fn destroy_rmp(&mut self, rmpn: u32) {
        let input = cmd::<DestroyRmpIn>(Opcode::DestroyRmp, 0, |v| {
            v.set(DestroyRmpIn::RMPN, rmpn.into()).unwrap();
        });
        self.p.ok(&input, 0x10);
    }

    pub fn destroy_qp(&mut self, qpn: u32) {
        let input = cmd::<DestroyQpIn>(Opcode::DestroyQp, 0, |v| {
            v.set(DestroyQpIn::QPN, qpn.into()).unwrap();
        });
        self.p.ok(&input, 0x10);
    }

    /// Frees the PD, UAR and DMA memory, tears the device down and checks that no page, object
    /// or DMA memory is left (DMA faults are the caller's to check).
    pub fn finish(mut self) -> SimDevice {
        let (pd, uar) = (self.pd, self.uar);
        self.p.ok(
            &cmd::<DeallocPdIn>(Opcode::DeallocPd, 0, |v| {
                v.set(DeallocPdIn::PD, pd.into()).unwrap();
            }),
            0x10,
        );
        self.p.ok(
            &cmd::<DeallocUarIn>(Opcode::DeallocUar, 0, |v| {
                v.set(DeallocUarIn::UAR, uar.into()).unwrap();
            }),
            0x10,
        );
        assert!(
            self.p.dev.live_objects().is_empty(),
            "{:?}",
            self.p.dev.live_objects()
        );
        self.p.dev.dma_free(self.arena.iova).unwrap();
        self.p.dev.dma_free(self.dbrs.iova).unwrap();
        self.p.shutdown();
        let dev = self.p.finish();
        assert_eq!(dev.pages_held(), 0, "pages held");
        assert_eq!(dev.dma_bytes_mapped(), 0, "DMA bytes mapped");
        dev
    }

    /// [`Fx::finish`], and no DMA fault either.
    pub fn finish_clean(self) {
        assert_clean(&self.finish());
    }
}

/// A primary path for RoCE RC/UC INIT2RTR: GID 0, the test RMAC, a destination IP.
pub fn roce_path(c: &mut ViewMut<'_, Qpc>) {
    let mut a = c.nested_mut(Qpc::PRIMARY_ADDRESS_PATH);
    a.set(Ads::SRC_ADDR_INDEX, 0).unwrap();
    a.set(Ads::HOP_LIMIT, 64).unwrap();
    a.set(Ads::TCLASS, 0x68).unwrap();
    a.set(Ads::FLOW_LABEL, 0x12345).unwrap();
    a.set(Ads::UDP_SPORT, 0xc123).unwrap();
    a.set(Ads::DSCP, 0x1a).unwrap();
    a.set(Ads::RMAC_47_32, RMAC >> 32).unwrap();
    a.set(Ads::RMAC_31_0, RMAC & 0xffff_ffff).unwrap();
    a.set(Ads::VHCA_PORT_NUM, 1).unwrap();
    a.set(Ads::ACK_TIMEOUT, 14).unwrap();
    let ip = a.bytes_mut(Ads::RGID_RIP);
    ip[10..16].copy_from_slice(&[0xff, 0xff, 10, 0, 0, 2]);
}

/// Whether `st` is a connected service type.
pub fn connected(st: u64) -> bool {
    st == qp_st::RC || st == qp_st::UC || st == qp_st::XRC
}

/// The modify-QP commands with a context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Rst2Init,
    Init2Init,
    Init2Rtr,
    Rtr2Rts,
    Rts2Rts,
}

/// Builds a modify input of layout `$in`.
macro_rules! modify {
    ($in:ident, $op:expr, $qpn:expr, $mask:expr, $f:expr) => {
        cmd::<$in>($op, 0, |v| {
            v.set($in::QPN, u64::from($qpn)).unwrap();
            v.set($in::OPT_PARAM_MASK, u64::from($mask)).unwrap();
            ($f)(&mut v.nested_mut($in::QPC));
        })
    };
}

/// The input of `step` for QP `qpn` with `opt_param_mask` = `mask`; `f` fills the context.
pub fn modify_in(
    step: Step,
    qpn: u32,
    mask: u32,
    f: impl FnOnce(&mut ViewMut<'_, Qpc>),
) -> Vec<u8> {
    match step {
        Step::Rst2Init => modify!(Rst2initQpIn, Opcode::Rst2InitQp, qpn, mask, f),
        Step::Init2Init => modify!(Init2initQpIn, Opcode::Init2InitQp, qpn, mask, f),
        Step::Init2Rtr => modify!(Init2rtrQpIn, Opcode::Init2RtrQp, qpn, mask, f),
        Step::Rtr2Rts => modify!(Rtr2rtsQpIn, Opcode::Rtr2RtsQp, qpn, mask, f),
        Step::Rts2Rts => modify!(Rts2rtsQpIn, Opcode::Rts2RtsQp, qpn, mask, f),
    }
}

/// 2ERR_QP (`to_err`) or 2RST_QP of `qpn`.
pub fn force_in(qpn: u32, to_err: bool) -> Vec<u8> {
    if to_err {
        cmd::<Qp2errIn>(Opcode::Qp2Err, 0, |v| {
            v.set(Qp2errIn::QPN, qpn.into()).unwrap();
        })
    } else {
        cmd::<Qp2rstIn>(Opcode::Qp2Rst, 0, |v| {
            v.set(Qp2rstIn::QPN, qpn.into()).unwrap();
        })
    }
}

/// A complete, valid set of attributes for `step` of a QP of type `st`.
pub fn good(step: Step, st: u64, c: &mut ViewMut<'_, Qpc>) {
    if st == qp_st::UD || st == qp_st::QP1 {
        // Every UD (and GSI) transition carries the MTU and message limit (Linux: 4096, 2^12).
        c.set(Qpc::MTU, 5).unwrap();
        c.set(Qpc::LOG_MSG_MAX, 12).unwrap();
    }
    match step {
        Step::Rst2Init => {
            c.set(Qpc::PM_STATE, 3).unwrap();
            let mut a = c.nested_mut(Qpc::PRIMARY_ADDRESS_PATH);
            a.set(Ads::PKEY_INDEX, 0).unwrap();
            a.set(Ads::VHCA_PORT_NUM, 1).unwrap();
            match st {
                qp_st::RC | qp_st::XRC => {
                    for f in [Qpc::RRE, Qpc::RWE, Qpc::RAE] {
                        c.set(f, 1).unwrap();
                    }
                    c.set(Qpc::ATOMIC_MODE, 3).unwrap();
                }
                qp_st::UC => {
                    c.set(Qpc::RWE, 1).unwrap();
                }
                _ => {
                    c.set(Qpc::Q_KEY, 0x1111_1111).unwrap();
                }
            }
        }
        Step::Init2Rtr if connected(st) => {
            c.set(Qpc::MTU, 3).unwrap();
            c.set(Qpc::LOG_MSG_MAX, 30).unwrap();
            c.set(Qpc::REMOTE_QPN, 0x1234).unwrap();
            c.set(Qpc::NEXT_RCV_PSN, 0x100).unwrap();
            roce_path(c);
            if st == qp_st::RC || st == qp_st::XRC {
                c.set(Qpc::LOG_RRA_MAX, 4).unwrap();
                c.set(Qpc::MIN_RNR_NAK, 12).unwrap();
            }
        }
        Step::Rtr2Rts => {
            c.set(Qpc::NEXT_SEND_PSN, 0x200).unwrap();
            if st == qp_st::RC || st == qp_st::XRC {
                c.set(Qpc::RETRY_COUNT, 7).unwrap();
                c.set(Qpc::RNR_RETRY, 7).unwrap();
                c.set(Qpc::LOG_SRA_MAX, 4).unwrap();
                c.nested_mut(Qpc::PRIMARY_ADDRESS_PATH)
                    .set(Ads::ACK_TIMEOUT, 14)
                    .unwrap();
            }
        }
        _ => {}
    }
}

impl Fx {
    /// Runs `step` on `qpn` with [`good`] attributes edited by `f`; `(status, syndrome)`.
    pub fn step(
        &mut self,
        step: Step,
        qpn: u32,
        st: u64,
        mask: u32,
        f: impl FnOnce(&mut ViewMut<'_, Qpc>),
    ) -> (u8, u32) {
        let input = modify_in(step, qpn, mask, |c| {
            good(step, st, c);
            f(c);
        });
        self.run(&input, 0x10).0
    }

    /// Moves a fresh QP of type `st` to RTS.
    pub fn bring_to_rts(&mut self, qpn: u32, st: u64) {
        for step in [Step::Rst2Init, Step::Init2Rtr, Step::Rtr2Rts] {
            assert_eq!(self.step(step, qpn, st, 0, |_| {}), (0, 0), "{step:?}");
        }
    }

    /// QUERY_QP (room for 24 PAS entries): the output.
    pub fn query_qp(&mut self, qpn: u32) -> Vec<u8> {
        let input = cmd::<QueryQpIn>(Opcode::QueryQp, 0, |v| {
            v.set(QueryQpIn::QPN, qpn.into()).unwrap();
        });
        self.p.ok(&input, QueryQpOut::BYTES)
    }

    /// The QP context QUERY_QP returns.
    pub fn qpc(&mut self, qpn: u32) -> Vec<u8> {
        let out = self.query_qp(qpn);
        let v = View::<QueryQpOut>::new(&out).unwrap();
        v.nested(QueryQpOut::QPC).as_bytes()[..Qpc::BYTES].to_vec()
    }
}

/// Shorthands for statuses.
pub const BAD_OP: u8 = CmdStatus::BadOp.raw();
pub const BAD_PARAM: u8 = CmdStatus::BadParam.raw();
pub const BAD_RES: u8 = CmdStatus::BadRes.raw();
pub const RES_BUSY: u8 = CmdStatus::ResBusy.raw();
pub const EXCEED_LIM: u8 = CmdStatus::ExceedLim.raw();
pub const BAD_RES_STATE: u8 = CmdStatus::BadResState.raw();
pub const BAD_INLEN: u8 = CmdStatus::BadInputLen.raw();
pub const BAD_OUTLEN: u8 = CmdStatus::BadOutputLen.raw();

/// An edit of a context of layout `C`.
pub type Edit<C> = fn(&mut ViewMut<'_, C>);

/// The first PAS entry of a PAS tail.
pub fn pas0(tail: &[u8]) -> u64 {
    Be64::from_bytes(tail[..8].try_into().unwrap()).get()
}

/// `input` with PAS entry `k` (at byte `off`) replaced by `addr`.
pub fn patch_pas(mut input: Vec<u8>, off: usize, k: usize, addr: u64) -> Vec<u8> {
    input[off + 8 * k..off + 8 * k + 8].copy_from_slice(&Be64::new(addr).to_bytes());
    input
}

/// How many DMA faults of `kind` `dev` recorded.
pub fn faults_of(dev: &SimDevice, kind: mlx5_sim::DmaFaultKind) -> usize {
    dev.dma_faults().iter().filter(|f| f.kind == kind).count()
}
