//! Data path fixtures, independent of the driver: a node (a device with its own EQ, CQ and QP
//! buffers), a raw WQE writer, memory registration, CQE / EQE polling — all byte by byte.

use mlx5_ifc::consts::qp_st;
use mlx5_ifc::prm::cq::{Cqc, CreateCqIn, CreateCqOut};
use mlx5_ifc::prm::eq::{CreateEqIn, CreateEqOut, Eqc};
use mlx5_ifc::prm::mr::{CreateMkeyIn, CreateMkeyOut, Mkc};
use mlx5_ifc::prm::qp::{Ads, CreateQpIn, CreateQpOut, Qpc};
use mlx5_ifc::prm::vport::{RoceAddrLayout, SetRoceAddressIn};
use mlx5_ifc::{consts::roce, Be64, Layout, Opcode, View, ViewMut};
use mlx5_sim::{DmaBlock, Fabric, Mode, Profile, SimDevice, WireFault};

use super::cmd;
use super::queues::{modify_in, with_pas, Fx, Step};

/// The CQ and EQ sizes of a node (log2).
pub const LOG_CQ: u32 = 6;
pub const LOG_EQ: u32 = 6;
/// The virtual address memory regions are registered at, per node.
pub const VA_BASE: u64 = 0x7f00_0000_0000;

/// A CQE as the tests read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cqe {
    pub opcode: u8,
    pub syndrome: u8,
    pub wqe_opcode: u8,
    pub qpn: u32,
    pub wqe_counter: u16,
    /// A striding RQ's receive: the WQE (bytes 2–3).
    pub wqe_id: u16,
    pub byte_cnt: u32,
    pub imm: [u8; 4],
    pub flags_rqpn: u32,
    pub srqn_uidx: u32,
    pub l3: u8,
}

impl Cqe {
    fn from(b: &[u8; 64]) -> Cqe {
        let be32 = |o: usize| u32::from_be_bytes(b[o..o + 4].try_into().unwrap());
        Cqe {
            opcode: b[63] >> 4,
            syndrome: b[55],
            wqe_opcode: b[56],
            qpn: be32(56) & 0xff_ffff,
            wqe_counter: u16::from_be_bytes([b[60], b[61]]),
            wqe_id: u16::from_be_bytes([b[2], b[3]]),
            byte_cnt: be32(44),
            imm: b[36..40].try_into().unwrap(),
            flags_rqpn: be32(24),
            srqn_uidx: be32(32),
            l3: b[29],
        }
    }
}

/// A CQ besides the node's own ([`Node::another_cq`]): its number, ring, doorbell record and
/// consumer counter.
pub struct Cq {
    pub cqn: u32,
    pub buf: DmaBlock,
    pub dbr: DmaBlock,
    pub ci: u32,
}

/// CREATE_CQ of `2^LOG_CQ` 64-byte CQEs (all owned by hardware) on `eqn`, `edit` applied to its
/// context: `(cqn, ring, doorbell record)`.
fn make_cq(
    fx: &mut Fx,
    eqn: u32,
    edit: impl FnOnce(&mut ViewMut<'_, Cqc>),
) -> (u32, DmaBlock, DmaBlock) {
    let dev = fx.dev();
    let uar = fx.uar;
    let cq = dev.dma_alloc(64 << LOG_CQ, 4096).unwrap();
    for k in 0..1u64 << LOG_CQ {
        dev.dma_write(cq.iova + k * 64 + 63, &[0xf0]).unwrap();
    }
    let cq_dbr = dev.dma_alloc(64, 64).unwrap();
    let input = cmd::<CreateCqIn>(Opcode::CreateCq, 0, |v| {
        let mut c = v.nested_mut(CreateCqIn::CQ_CONTEXT);
        c.set(Cqc::LOG_CQ_SIZE, LOG_CQ.into()).unwrap();
        c.set(Cqc::UAR_PAGE, uar.into()).unwrap();
        c.set(Cqc::C_EQN_OR_APU_ELEMENT, eqn.into()).unwrap();
        c.set(Cqc::DBR_ADDR, cq_dbr.iova).unwrap();
        edit(&mut c);
    });
    let out = fx.p.ok(&with_pas(input, &[cq.iova]), CreateCqOut::BYTES);
    let cqn = View::<CreateCqOut>::new(&out)
        .unwrap()
        .get32(CreateCqOut::CQN);
    (cqn, cq, cq_dbr)
}

/// The next CQE of the CQ at `cq` (doorbell record `dbr`, consumer counter `ci`), if the device
/// has written one: the counter moves past it and goes to the doorbell record.
fn poll_ring(dev: &SimDevice, cq: &DmaBlock, dbr: &DmaBlock, ci: &mut u32) -> Option<Cqe> {
    let slot = u64::from(*ci & ((1 << LOG_CQ) - 1));
    let mut b = [0u8; 64];
    dev.dma_read(cq.iova + slot * 64, &mut b).unwrap();
    let owner = (*ci >> LOG_CQ) & 1;
    if b[63] >> 4 == 0xf || u32::from(b[63] & 1) != owner {
        return None;
    }
    *ci += 1;
    dev.dma_write(dbr.iova, &(*ci & 0xff_ffff).to_be_bytes())
        .unwrap();
    Some(Cqe::from(&b))
}

/// A memory region: a DMA block registered at `VA_BASE + (iova - first iova)`.
#[derive(Debug, Clone, Copy)]
pub struct Mr {
    pub key: u32,
    pub buf: DmaBlock,
    pub va: u64,
}

impl Mr {
    pub fn va(&self, off: u64) -> u64 {
        self.va + off
    }
}

/// A QP with its own buffer and doorbell record.
pub struct Qp {
    pub qpn: u32,
    pub st: u64,
    pub buf: DmaBlock,
    pub dbr: DmaBlock,
    pub sq_bbs: u32,
    pub rq_wqes: u32,
    pub rq_stride: u64,
    pub sq_pi: u16,
    pub rq_pi: u16,
    pub bf_half: u64,
}

/// A segment of a send WQE after the control segment.
#[derive(Debug, Clone)]
pub enum Seg {
    Raddr(u64, u32),
    Atomic(u64, u64),
    Data(u32, u32, u64),
    Inline(Vec<u8>),
    /// UD address vector: remote QPN, Q_Key, remote MAC, remote IPv4 (last byte), UDP sport.
    Av(u32, u32, [u8; 6], u8, u16),
    /// Bytes as they are (e.g. a UMR control and mkey segment), whole 16-byte units.
    Raw(Vec<u8>),
}

/// A device with an EQ (every async event), a CQ, and its GID 0 = 10.0.0.`ip`.
pub struct Node {
    pub fx: Fx,
    pub ip: u8,
    pub eqn: u32,
    pub eq: DmaBlock,
    pub eq_ci: u32,
    pub cqn: u32,
    pub cq: DmaBlock,
    pub cq_dbr: DmaBlock,
    pub cq_ci: u32,
    pub next_va: u64,
}

/// The IPv4-mapped GID of 10.0.0.`ip`.
pub fn gid(ip: u8) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10..].copy_from_slice(&[0xff, 0xff, 10, 0, 0, ip]);
    g
}

impl Node {
    /// A `cx5` device in `mode` with MAC 02:c5:5a:00:00:`ip` and IP 10.0.0.`ip`.
    pub fn new(mode: Mode, ip: u8) -> Node {
        Node::with_cq(mode, ip, |_| {})
    }

    /// Like `new`, with `edit` applied to the CQ's context at creation.
    pub fn with_cq(mode: Mode, ip: u8, edit: impl FnOnce(&mut ViewMut<'_, Cqc>)) -> Node {
        let json = format!(r#"{{"_mac": "02:c5:5a:00:00:{ip:02x}"}}"#);
        let profile = super::quiet(Profile::from_json_str(&json).unwrap());
        Node::build(profile, mode, ip, edit)
    }

    /// Like `new`, on `profile` (whose `_mac` should be 02:c5:5a:00:00:`ip`).
    pub fn with_profile(profile: Profile, mode: Mode, ip: u8) -> Node {
        Node::build(profile, mode, ip, |_| {})
    }

    fn build(
        profile: Profile,
        mode: Mode,
        ip: u8,
        edit: impl FnOnce(&mut ViewMut<'_, Cqc>),
    ) -> Node {
        let mut fx = Fx::new(profile, mode, 1);
        let input = cmd::<SetRoceAddressIn>(Opcode::SetRoceAddress, 0, |v| {
            v.set(SetRoceAddressIn::VHCA_PORT_NUM, 1).unwrap();
            let mut a = v.nested_mut(SetRoceAddressIn::ROCE_ADDRESS);
            a.set(RoceAddrLayout::ROCE_VERSION, roce::VERSION_2)
                .unwrap();
            a.set(RoceAddrLayout::ROCE_L3_TYPE, roce::L3_IPV4).unwrap();
            a.bytes_mut(RoceAddrLayout::SOURCE_L3_ADDRESS)
                .copy_from_slice(&gid(ip));
        });
        fx.p.ok(&input, 0x10);
        let dev = fx.dev();
        let eq = dev.dma_alloc(64 << LOG_EQ, 4096).unwrap();
        for k in 0..1u64 << LOG_EQ {
            dev.dma_write(eq.iova + k * 64 + 63, &[1]).unwrap();
        }
        let uar = fx.uar;
        let input = cmd::<CreateEqIn>(Opcode::CreateEq, 0, |v| {
            let mut c = v.nested_mut(CreateEqIn::EQ_CONTEXT_ENTRY);
            c.set(Eqc::LOG_EQ_SIZE, LOG_EQ.into()).unwrap();
            c.set(Eqc::UAR_PAGE, uar.into()).unwrap();
            let m = v.bytes_mut(CreateEqIn::EVENT_BITMASK);
            m[5] = 0x1f; // 0x10..0x14
            m[7] = 0xff; // 0x00..0x07
                         // 0x08, 0x09, 0x0b — not CMD (0x0a): the fixture polls its commands.
            m[6] = 0x0b;
            m[3] = 0x04; // 0x22, general events (delay drop timeouts)
            m[4] = 0x30; // 0x1c, 0x1d: DCT drained, DCT key violation
        });
        let out = fx.p.ok(&with_pas(input, &[eq.iova]), CreateEqOut::BYTES);
        let eqn = View::<CreateEqOut>::new(&out)
            .unwrap()
            .get32(CreateEqOut::EQ_NUMBER);
        let (cqn, cq, cq_dbr) = make_cq(&mut fx, eqn, edit);
        Node {
            fx,
            ip,
            eqn,
            eq,
            eq_ci: 0,
            cqn,
            cq,
            cq_dbr,
            cq_ci: 0,
            next_va: VA_BASE,
        }
    }

    pub fn dev(&self) -> SimDevice {
        self.fx.dev()
    }

    pub fn mac(&self) -> [u8; 6] {
        [0x02, 0xc5, 0x5a, 0, 0, self.ip]
    }

    /// Registers `len` bytes with access bits (lr, lw, rr, rw, a) — MTT mode, 4 KiB pages.
    pub fn reg_mr(&mut self, len: usize, rr: bool, rw: bool, a: bool) -> Mr {
        self.reg_mr_with(len, rr, rw, a, |_| {})
    }

    /// Like `reg_mr`, with `edit` applied to the `mkc` last (e.g. `en_rinval`).
    pub fn reg_mr_with(
        &mut self,
        len: usize,
        rr: bool,
        rw: bool,
        a: bool,
        edit: impl FnOnce(&mut ViewMut<'_, Mkc>),
    ) -> Mr {
        let dev = self.dev();
        let buf = dev.dma_alloc(len, 4096).unwrap();
        let va = self.next_va;
        self.next_va += (len as u64).next_multiple_of(4096) + 4096;
        let pages: Vec<u64> = (0..len.div_ceil(4096) as u64)
            .map(|k| (buf.iova + k * 4096) | 3)
            .collect();
        let pd = self.fx.pd;
        let input = cmd::<CreateMkeyIn>(Opcode::CreateMkey, 0, |v| {
            let mut c = v.nested_mut(CreateMkeyIn::MEMORY_KEY_MKEY_ENTRY);
            c.set(Mkc::ACCESS_MODE_1_0, 1).unwrap();
            c.set(Mkc::LR, 1).unwrap();
            c.set(Mkc::LW, 1).unwrap();
            c.set(Mkc::RR, rr.into()).unwrap();
            c.set(Mkc::RW, rw.into()).unwrap();
            c.set(Mkc::A, a.into()).unwrap();
            c.set(Mkc::QPN, 0xff_ffff).unwrap();
            c.set(Mkc::MKEY_7_0, 0x42).unwrap();
            c.set(Mkc::LOG_PAGE_SIZE, 12).unwrap();
            c.set(Mkc::PD, pd.into()).unwrap();
            c.set(Mkc::START_ADDR, va).unwrap();
            c.set(Mkc::LEN, len as u64).unwrap();
            c.set(
                Mkc::TRANSLATIONS_OCTWORD_SIZE,
                pages.len().div_ceil(2) as u64,
            )
            .unwrap();
            edit(&mut c);
        });
        let out = self.fx.p.ok(&with_pas(input, &pages), CreateMkeyOut::BYTES);
        let index = View::<CreateMkeyOut>::new(&out)
            .unwrap()
            .get32(CreateMkeyOut::MKEY_INDEX);
        Mr {
            key: index << 8 | 0x42,
            buf,
            va,
        }
    }

    /// A QP of type `st` on the node's CQ: RQ 16 × 64 B, SQ 16 WQEBBs, own buffer.
    pub fn create_qp(&mut self, st: u64) -> Qp {
        self.create_qp_srq(st, None)
    }

    /// Like `create_qp`; with `srq`, the QP receives from that SRQ / RMP and has no RQ.
    pub fn create_qp_srq(&mut self, st: u64, srq: Option<u32>) -> Qp {
        self.create_qp_with(st, srq, |_| {})
    }

    /// Like `create_qp_srq`, with `edit` applied to the QP context last.
    pub fn create_qp_with(
        &mut self,
        st: u64,
        srq: Option<u32>,
        edit: impl FnOnce(&mut ViewMut<'_, Qpc>),
    ) -> Qp {
        let dev = self.dev();
        let buf = dev.dma_alloc(4096, 4096).unwrap();
        let dbr = dev.dma_alloc(64, 64).unwrap();
        let (pd, uar, cqn) = (self.fx.pd, self.fx.uar, self.cqn);
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
            c.set(Qpc::DBR_ADDR, dbr.iova).unwrap();
            c.set(Qpc::USER_INDEX, 0x77).unwrap();
            if let Some(n) = srq {
                c.set(Qpc::RQ_TYPE, 1).unwrap();
                c.set(Qpc::SRQN_RMPN_XRQN, n.into()).unwrap();
                c.set(Qpc::LOG_RQ_SIZE, 0).unwrap();
            }
            edit(&mut c);
        });
        let out = self
            .fx
            .p
            .ok(&with_pas(input, &[buf.iova]), CreateQpOut::BYTES);
        let qpn = View::<CreateQpOut>::new(&out)
            .unwrap()
            .get32(CreateQpOut::QPN);
        Qp {
            qpn,
            st,
            buf,
            dbr,
            sq_bbs: 16,
            rq_wqes: if srq.is_some() { 0 } else { 16 },
            rq_stride: 64,
            sq_pi: 0,
            rq_pi: 0,
            bf_half: 0,
        }
    }

    /// RST → INIT → RTR → RTS towards `peer` (QPN `remote`); `edit` adjusts every transition.
    pub fn connect(
        &mut self,
        qp: &Qp,
        peer_ip: u8,
        remote: u32,
        edit: impl Fn(&mut ViewMut<'_, Qpc>),
    ) {
        let st = qp.st;
        for step in [Step::Rst2Init, Step::Init2Rtr, Step::Rtr2Rts] {
            let r = self.fx.step(step, qp.qpn, st, 0, |c| {
                if step == Step::Init2Rtr && st != qp_st::UD && st != qp_st::QP1 {
                    c.set(Qpc::REMOTE_QPN, remote.into()).unwrap();
                    c.set(Qpc::NEXT_RCV_PSN, 0x10).unwrap();
                    let mut a = c.nested_mut(Qpc::PRIMARY_ADDRESS_PATH);
                    a.set(Ads::RMAC_47_32, 0x02c5).unwrap();
                    a.set(Ads::RMAC_31_0, 0x5a00_0000 | u64::from(peer_ip))
                        .unwrap();
                    a.bytes_mut(Ads::RGID_RIP).copy_from_slice(&gid(peer_ip));
                }
                if step == Step::Rtr2Rts {
                    c.set(Qpc::NEXT_SEND_PSN, 0x10).unwrap();
                }
                edit(c);
            });
            assert_eq!(r, (0, 0), "{step:?}");
        }
    }

    /// Runs a modify step with no context edits beyond `f` (e.g. to reset or fail a QP).
    pub fn modify(
        &mut self,
        step: Step,
        qpn: u32,
        f: impl FnOnce(&mut ViewMut<'_, Qpc>),
    ) -> (u8, u32) {
        self.fx.run(&modify_in(step, qpn, 0, f), 0x10).0
    }

    /// The next CQE, if the device has written one.
    pub fn poll(&mut self) -> Option<Cqe> {
        poll_ring(&self.dev(), &self.cq, &self.cq_dbr, &mut self.cq_ci)
    }

    /// Another CQ of `2^LOG_CQ` 64-byte CQEs on the node's EQ.
    pub fn another_cq(&mut self) -> Cq {
        let (cqn, buf, dbr) = make_cq(&mut self.fx, self.eqn, |_| {});
        Cq {
            cqn,
            buf,
            dbr,
            ci: 0,
        }
    }

    /// The next CQE of `cq`, if the device has written one.
    pub fn poll_cq(&self, cq: &mut Cq) -> Option<Cqe> {
        poll_ring(&self.dev(), &cq.buf, &cq.dbr, &mut cq.ci)
    }

    /// Every CQE of `cq` available now.
    pub fn drain_cq(&self, cq: &mut Cq) -> Vec<Cqe> {
        std::iter::from_fn(|| self.poll_cq(cq)).collect()
    }

    /// Every CQE available now.
    pub fn drain(&mut self) -> Vec<Cqe> {
        std::iter::from_fn(|| self.poll()).collect()
    }

    /// Waits (relaxing the device) for the next CQE, up to `ns` of device time.
    pub fn wait(&mut self, ns: u64) -> Option<Cqe> {
        let dev = self.dev();
        let start = dev.now_ns();
        loop {
            if let Some(c) = self.poll() {
                return Some(c);
            }
            if dev.now_ns() - start > ns {
                return None;
            }
            dev.relax();
        }
    }

    /// The next EQE: `(type, data bytes 0x20..0x40)`.
    pub fn poll_eq(&mut self) -> Option<(u8, [u8; 32])> {
        let dev = self.dev();
        let slot = u64::from(self.eq_ci & ((1 << LOG_EQ) - 1));
        let mut b = [0u8; 64];
        dev.dma_read(self.eq.iova + slot * 64, &mut b).unwrap();
        if u32::from(b[63] & 1) != (self.eq_ci >> LOG_EQ) & 1 {
            return None;
        }
        self.eq_ci += 1;
        let uar = u64::from(self.fx.uar) * 4096;
        dev.bar_write32(uar + 0x48, mlx5_ifc::Be32::new(self.eqn << 24 | self.eq_ci));
        Some((b[1], b[0x20..0x40].try_into().unwrap()))
    }

    /// Posts a receive WQE with `sges` (`(len, lkey, addr)`).
    pub fn post_recv(&self, qp: &mut Qp, sges: &[(u32, u32, u64)]) {
        let dev = self.dev();
        let slot = u64::from(qp.rq_pi) & u64::from(qp.rq_wqes - 1);
        let mut w = vec![0u8; qp.rq_stride as usize];
        for (k, d) in w.chunks_exact_mut(16).enumerate() {
            match sges.get(k) {
                Some(&(len, lkey, addr)) => {
                    d[..4].copy_from_slice(&len.to_be_bytes());
                    d[4..8].copy_from_slice(&lkey.to_be_bytes());
                    d[8..].copy_from_slice(&addr.to_be_bytes());
                }
                None => {
                    d[4..8].copy_from_slice(&0x100u32.to_be_bytes());
                    break;
                }
            }
        }
        dev.dma_write(qp.buf.iova + slot * qp.rq_stride, &w)
            .unwrap();
        qp.rq_pi = qp.rq_pi.wrapping_add(1);
        dev.dma_write(qp.dbr.iova, &u32::from(qp.rq_pi).to_be_bytes())
            .unwrap();
    }

    /// Writes a send WQE (without ringing): its WQE counter and its bytes (whole WQEBBs).
    pub fn write_wqe(
        &self,
        qp: &mut Qp,
        opcode: u8,
        fm_ce_se: u8,
        imm: [u8; 4],
        segs: &[Seg],
    ) -> (u16, Vec<u8>) {
        self.write_wqe_opmod(qp, 0, opcode, fm_ce_se, imm, segs)
    }

    /// [`Node::write_wqe`] with the control segment's `opmod` (byte 0).
    pub fn write_wqe_opmod(
        &self,
        qp: &mut Qp,
        opmod: u8,
        opcode: u8,
        fm_ce_se: u8,
        imm: [u8; 4],
        segs: &[Seg],
    ) -> (u16, Vec<u8>) {
        let mut w = vec![0u8; 16];
        for s in segs {
            match s {
                Seg::Raddr(va, rkey) => {
                    w.extend_from_slice(&va.to_be_bytes());
                    w.extend_from_slice(&rkey.to_be_bytes());
                    w.extend_from_slice(&[0; 4]);
                }
                Seg::Atomic(a, b) => {
                    w.extend_from_slice(&a.to_be_bytes());
                    w.extend_from_slice(&b.to_be_bytes());
                }
                Seg::Data(len, lkey, addr) => {
                    w.extend_from_slice(&len.to_be_bytes());
                    w.extend_from_slice(&lkey.to_be_bytes());
                    w.extend_from_slice(&addr.to_be_bytes());
                }
                Seg::Inline(b) => {
                    w.extend_from_slice(&(0x8000_0000u32 | b.len() as u32).to_be_bytes());
                    w.extend_from_slice(b);
                    w.resize(w.len().next_multiple_of(16), 0);
                }
                Seg::Raw(b) => w.extend_from_slice(b),
                Seg::Av(dqpn, qkey, rmac, ip, sport) => {
                    let mut av = [0u8; 48];
                    av[..4].copy_from_slice(&qkey.to_be_bytes());
                    av[8..12].copy_from_slice(&(dqpn | 0x8000_0000).to_be_bytes());
                    av[14..16].copy_from_slice(&sport.to_be_bytes());
                    av[20..26].copy_from_slice(rmac);
                    av[27] = 64;
                    av[32..48].copy_from_slice(&gid(*ip));
                    w.extend_from_slice(&av);
                }
            }
        }
        let ds = (w.len() / 16) as u32;
        let idx = qp.sq_pi;
        let word = u32::from(opmod) << 24 | u32::from(idx) << 8 | u32::from(opcode);
        w[0..4].copy_from_slice(&word.to_be_bytes());
        w[4..8].copy_from_slice(&((qp.qpn << 8) | ds).to_be_bytes());
        w[11] = fm_ce_se;
        w[12..16].copy_from_slice(&imm);
        w.resize(w.len().next_multiple_of(64), 0);
        let dev = self.dev();
        let sq = qp.buf.iova + u64::from(qp.rq_wqes) * qp.rq_stride;
        for (k, bb) in w.chunks(64).enumerate() {
            let slot = (u64::from(idx) + k as u64) & u64::from(qp.sq_bbs - 1);
            dev.dma_write(sq + slot * 64, bb).unwrap();
        }
        qp.sq_pi = qp.sq_pi.wrapping_add((w.len() / 64) as u16);
        dev.dma_write(qp.dbr.iova + 4, &u32::from(qp.sq_pi).to_be_bytes())
            .unwrap();
        (idx, w)
    }

    /// The BAR offset of the QP's doorbell register half (alternating halves).
    fn db_offset(&self, qp: &mut Qp) -> u64 {
        let off = u64::from(self.fx.uar) * 4096 + 0x800 + qp.bf_half;
        qp.bf_half ^= 256;
        off
    }

    /// Writes a send WQE and rings the doorbell (first 8 bytes of the control segment).
    pub fn post_send(
        &self,
        qp: &mut Qp,
        opcode: u8,
        fm_ce_se: u8,
        imm: [u8; 4],
        segs: &[Seg],
    ) -> u16 {
        let (idx, w) = self.write_wqe(qp, opcode, fm_ce_se, imm, segs);
        let off = self.db_offset(qp);
        let first = u64::from_be_bytes(w[..8].try_into().unwrap());
        self.dev().bar_write64(off, Be64::new(first));
        idx
    }

    /// [`Node::post_send`] with the control segment's `opmod` (extended atomics: 0x08 | the
    /// argument size's log2 − 2).
    pub fn post_send_opmod(
        &self,
        qp: &mut Qp,
        opmod: u8,
        opcode: u8,
        fm_ce_se: u8,
        segs: &[Seg],
    ) -> u16 {
        let (idx, w) = self.write_wqe_opmod(qp, opmod, opcode, fm_ce_se, [0; 4], segs);
        let off = self.db_offset(qp);
        let first = u64::from_be_bytes(w[..8].try_into().unwrap());
        self.dev().bar_write64(off, Be64::new(first));
        idx
    }

    /// Like `post_send`, through BlueFlame: the whole WQE as 64-bit writes to the half.
    pub fn post_send_bf(
        &self,
        qp: &mut Qp,
        opcode: u8,
        fm_ce_se: u8,
        imm: [u8; 4],
        segs: &[Seg],
    ) -> u16 {
        let (idx, w) = self.write_wqe(qp, opcode, fm_ce_se, imm, segs);
        let off = self.db_offset(qp);
        for (k, q) in w.chunks(8).enumerate() {
            let v = u64::from_be_bytes(q.try_into().unwrap());
            self.dev().bar_write64(off + 8 * k as u64, Be64::new(v));
        }
        idx
    }
}

/// Two `Sync` nodes (10.0.0.1 and 10.0.0.2) on a fabric.
pub fn pair(mode: Mode) -> (Fabric, Node, Node) {
    let (a, b) = (Node::new(mode, 1), Node::new(mode, 2));
    let fabric = Fabric::new();
    fabric.attach(&a.dev()).unwrap();
    fabric.attach(&b.dev()).unwrap();
    (fabric, a, b)
}

/// RC (or UC) QPs `(on a, on b)` connected to each other; `edit` applies to both.
pub fn connected(
    a: &mut Node,
    b: &mut Node,
    st: u64,
    edit: impl Fn(&mut ViewMut<'_, Qpc>),
) -> (Qp, Qp) {
    let (qa, qb) = (a.create_qp(st), b.create_qp(st));
    let (ipa, ipb) = (a.ip, b.ip);
    a.connect(&qa, ipb, qb.qpn, &edit);
    b.connect(&qb, ipa, qa.qpn, &edit);
    (qa, qb)
}

/// Fills `mr` with a pattern seeded by `seed`; returns it.
pub fn fill(dev: &SimDevice, mr: &Mr, seed: u8) -> Vec<u8> {
    let data: Vec<u8> = (0..mr.buf.len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect();
    dev.dma_write(mr.buf.iova, &data).unwrap();
    data
}

/// `len` bytes of `mr` at offset `off`.
pub fn read(dev: &SimDevice, mr: &Mr, off: u64, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    dev.dma_read(mr.buf.iova + off, &mut b).unwrap();
    b
}

/// A shared receive queue's ring as its owner posts to it: `2^log_size` WQEs of 64 bytes
/// (a next-WQE segment, one data segment, the terminator), each linked to the next.
pub struct SrqRing {
    /// The SRQ's (RMP's, XRC SRQ's) number.
    pub n: u32,
    pub buf: DmaBlock,
    pub dbr: DmaBlock,
    pub size: u32,
    pub posted: u32,
}

impl SrqRing {
    /// Posts the next WQE: one data segment of `len` bytes at `mr` + `off`.
    pub fn post(&mut self, dev: &SimDevice, mr: &Mr, off: u64, len: u32) {
        let i = u64::from(self.posted % self.size);
        let mut w = [0u8; 64];
        w[2..4].copy_from_slice(&(((self.posted + 1) % self.size) as u16).to_be_bytes());
        w[16..20].copy_from_slice(&len.to_be_bytes());
        w[20..24].copy_from_slice(&mr.key.to_be_bytes());
        w[24..32].copy_from_slice(&mr.va(off).to_be_bytes());
        w[36..40].copy_from_slice(&0x100u32.to_be_bytes());
        dev.dma_write(self.buf.iova + 64 * i, &w).unwrap();
        self.posted += 1;
        dev.dma_write(self.dbr.iova, &self.posted.to_be_bytes())
            .unwrap();
    }
}

/// Loses, duplicates and reorders one frame in ten of `fabric`, both ways (seeds `seed`,
/// `seed + 1`, `seed + 2`).
pub fn lossy(fabric: &Fabric, seed: u64) {
    for fault in [
        WireFault::DropRandom {
            per_million: 100_000,
            seed,
        },
        WireFault::DuplicateRandom {
            per_million: 100_000,
            seed: seed + 1,
        },
        WireFault::ReorderRandom {
            per_million: 100_000,
            seed: seed + 2,
        },
    ] {
        fabric.inject(fault);
    }
}
