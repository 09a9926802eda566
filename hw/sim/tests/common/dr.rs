//! mlx5dv direct rules' control path, byte by byte (docs/dr-control-facts.md, dr-ste-v0-facts.md):
//! uids, the send ring (its force-loopback connection, WRITE-then-READ postsends, force drain), SW
//! ICM objects and their keys, the capabilities and firmware ICM addresses DR reads, TIRs and
//! software-owned flow tables, STEs (format v0) as DR writes them and the hash of their tables.

use mlx5_ifc::consts::ste_v0::{self, lu_type, tx_action_type};
use mlx5_ifc::consts::{cap_mode, cap_type, general_obj_type, mkey_access_mode, qp_st};
use mlx5_ifc::prm::caps::{CmdHcaCap, FlowTableNicCap as Nic, FlowTablePropLayout as Prop};
use mlx5_ifc::prm::devx::{CreateUctxIn, CreateUctxOut};
use mlx5_ifc::prm::flow::{CreateFlowTableIn, FlowTableContext as Ftc};
use mlx5_ifc::prm::general_obj::{GeneralObjInCmdHdr, GeneralObjOutCmdHdr};
use mlx5_ifc::prm::hca::QueryHcaCapIn;
use mlx5_ifc::prm::memic::DeviceMemCap;
use mlx5_ifc::prm::mr::{CreateMkeyIn, CreateMkeyOut, Mkc};
use mlx5_ifc::prm::qp::{Ads, Qpc};
use mlx5_ifc::prm::ste::{SteRxSteeringMult as Rx, SteSxTransmit as Tx};
use mlx5_ifc::prm::sw_icm::{CreateSwIcmIn, SwIcm};
use mlx5_ifc::prm::tir::{CreateTirIn, CreateTirOut, Tirc};
use mlx5_ifc::{CmdInHeader, Layout, Opcode, View, ViewMut};

use super::datapath::{Mr, Node, Qp, Seg};
use super::queues::{Fx, Step};
use super::{bare, cmd, TIMEOUT_NS};

/// `input` with `uid` in its header.
pub fn as_uid(mut input: Vec<u8>, uid: u16) -> Vec<u8> {
    ViewMut::<CmdInHeader>::new(&mut input)
        .unwrap()
        .set(CmdInHeader::UID, uid.into())
        .unwrap();
    input
}

/// A user context (CREATE_UCTX, no caps): its uid.
pub fn create_uctx(fx: &mut Fx) -> u16 {
    let input = cmd::<CreateUctxIn>(Opcode::CreateUctx, 0, |_| {});
    let out = fx.p.ok(&input, CreateUctxOut::BYTES);
    View::<CreateUctxOut>::new(&out)
        .unwrap()
        .get(CreateUctxOut::UID) as u16
}

/// RST2INIT, INIT2RTR and RTR2RTS as rdma-core's `dr_devx_modify_qp_*` send them: port 1,
/// `rre`/`rwe`; MTU 1024, `log_msg_max` 24, `remote_qpn`, the path's `fl` and `min_rnr_nak` 1
/// (no `rmac`, no GID); retry and RNR retry 7, `ack_timeout` 8. The statuses of the three.
pub fn connect_fl(n: &mut Node, qp: &Qp, remote: u32, fl: u64) -> [(u8, u32); 3] {
    let port = |c: &mut ViewMut<'_, Qpc>| {
        c.nested_mut(Qpc::PRIMARY_ADDRESS_PATH)
            .set(Ads::VHCA_PORT_NUM, 1)
            .unwrap();
    };
    let rc = qp.st == mlx5_ifc::consts::qp_st::RC;
    let init = n.modify(Step::Rst2Init, qp.qpn, |c| {
        port(c);
        c.set(Qpc::PM_STATE, 3).unwrap();
        c.set(Qpc::RRE, rc.into()).unwrap();
        c.set(Qpc::RWE, 1).unwrap();
    });
    let rtr = n.modify(Step::Init2Rtr, qp.qpn, |c| {
        port(c);
        c.set(Qpc::MTU, 3).unwrap();
        c.set(Qpc::LOG_MSG_MAX, 24).unwrap();
        c.set(Qpc::REMOTE_QPN, remote.into()).unwrap();
        c.set(Qpc::MIN_RNR_NAK, 1).unwrap();
        c.nested_mut(Qpc::PRIMARY_ADDRESS_PATH)
            .set(Ads::FL, fl)
            .unwrap();
    });
    let rts = n.modify(Step::Rtr2Rts, qp.qpn, |c| {
        c.set(Qpc::RETRY_COUNT, 7).unwrap();
        c.set(Qpc::RNR_RETRY, 7).unwrap();
        c.nested_mut(Qpc::PRIMARY_ADDRESS_PATH)
            .set(Ads::ACK_TIMEOUT, 8)
            .unwrap();
    });
    [init, rtr, rts]
}

/// CREATE_GENERAL_OBJECT SW_ICM as Linux's `mlx5_dm_sw_icm_alloc` sends it: `2^log_size`
/// bytes at ICM address `start`, for `uid`. The status and the object id.
pub fn create_sw_icm(fx: &mut Fx, uid: u16, start: u64, log_size: u64) -> ((u8, u32), u32) {
    let input = cmd::<CreateSwIcmIn>(Opcode::CreateGeneralObject, 0, |v| {
        let mut h = v.nested_mut(CreateSwIcmIn::HDR);
        h.set(GeneralObjInCmdHdr::OBJ_TYPE, general_obj_type::SW_ICM)
            .unwrap();
        let mut c = v.nested_mut(CreateSwIcmIn::SW_ICM);
        c.set(SwIcm::LOG_SW_ICM_SIZE, log_size).unwrap();
        c.set(SwIcm::SW_ICM_START_ADDR, start).unwrap();
    });
    let (st, out) = fx.run(&as_uid(input, uid), GeneralObjOutCmdHdr::BYTES);
    let id = View::<GeneralObjOutCmdHdr>::new(&out)
        .unwrap()
        .get32(GeneralObjOutCmdHdr::OBJ_ID);
    (st, id)
}

/// DESTROY_GENERAL_OBJECT of `obj_type` `ty`, id `id`, for `uid`: the status.
pub fn destroy_general(fx: &mut Fx, uid: u16, ty: u64, id: u32) -> (u8, u32) {
    let input = cmd::<GeneralObjInCmdHdr>(Opcode::DestroyGeneralObject, 0, |v| {
        v.set(GeneralObjInCmdHdr::OBJ_TYPE, ty).unwrap();
        v.set(GeneralObjInCmdHdr::OBJ_ID, id.into()).unwrap();
    });
    fx.run(&as_uid(input, uid), GeneralObjOutCmdHdr::BYTES).0
}

/// A SW ICM key as `mlx5_ib_get_dm_mr` makes one: access mode SW_ICM (4), `lr`, `lw`, `rr`,
/// `rw`, `qpn` 0xffffff, PD `pd`, `start_addr` the ICM address, `len`. The status and the key.
pub fn sw_icm_key(fx: &mut Fx, pd: u32, start: u64, len: u64) -> ((u8, u32), u32) {
    let input = cmd::<CreateMkeyIn>(Opcode::CreateMkey, 0, |v| {
        let mut c = v.nested_mut(CreateMkeyIn::MEMORY_KEY_MKEY_ENTRY);
        c.set(Mkc::ACCESS_MODE_1_0, mkey_access_mode::SW_ICM & 3)
            .unwrap();
        c.set(Mkc::ACCESS_MODE_4_2, mkey_access_mode::SW_ICM >> 2)
            .unwrap();
        for f in [Mkc::LR, Mkc::LW, Mkc::RR, Mkc::RW] {
            c.set(f, 1).unwrap();
        }
        c.set(Mkc::QPN, 0xff_ffff).unwrap();
        c.set(Mkc::MKEY_7_0, 0x5a).unwrap();
        c.set(Mkc::PD, pd.into()).unwrap();
        c.set(Mkc::START_ADDR, start).unwrap();
        c.set(Mkc::LEN, len).unwrap();
    });
    let (st, out) = fx.run(&input, CreateMkeyOut::BYTES);
    let index = View::<CreateMkeyOut>::new(&out)
        .unwrap()
        .get32(CreateMkeyOut::MKEY_INDEX);
    (st, index << 8 | 0x5a)
}

/// What `dr_devx_query_device` reads that an STE carries or DR's tables need: the function's
/// gvmi (`vhca_id`), `flow_table_nic_cap`'s NIC RX drop, TX drop and TX allow addresses and
/// NIC RX `max_ft_level`, and the steering SW ICM region (`device_mem_cap`).
#[derive(Debug, Clone, Copy)]
pub struct DrCaps {
    pub gvmi: u64,
    pub rx_drop: u64,
    pub tx_drop: u64,
    pub tx_allow: u64,
    pub max_ft_level: u64,
    pub steering_start: u64,
    pub log_steering_size: u64,
}

/// The whole `flow_table_nic_cap` (4 KiB: the ICM addresses sit at byte 0x400).
pub fn nic_caps(n: &mut Node) -> Vec<u8> {
    let kind = cap_type::FLOW_TABLE << 1 | cap_mode::CUR;
    let out =
        n.fx.p
            .ok(&bare::<QueryHcaCapIn>(Opcode::QueryHcaCap, kind), 0x1010);
    out[0x10..0x1010].to_vec()
}

pub fn dr_caps(n: &mut Node) -> DrCaps {
    let general = n.fx.p.query_cap(cap_type::GENERAL, cap_mode::CUR);
    let mem = n.fx.p.query_cap(cap_type::DEV_MEM, cap_mode::CUR);
    let nic = nic_caps(n);
    let (g, m) = (
        View::<CmdHcaCap>::new(&general).unwrap(),
        View::<DeviceMemCap>::new(&mem).unwrap(),
    );
    let c = View::<Nic>::new(&nic).unwrap();
    DrCaps {
        gvmi: g.get(CmdHcaCap::VHCA_ID),
        rx_drop: c.get(Nic::SW_STEERING_NIC_RX_ACTION_DROP_ICM_ADDRESS),
        tx_drop: c.get(Nic::SW_STEERING_NIC_TX_ACTION_DROP_ICM_ADDRESS),
        tx_allow: c.get(Nic::SW_STEERING_NIC_TX_ACTION_ALLOW_ICM_ADDRESS),
        max_ft_level: c
            .nested(Nic::FLOW_TABLE_PROPERTIES_NIC_RECEIVE)
            .get(Prop::MAX_FT_LEVEL),
        steering_start: m.get(DeviceMemCap::STEERING_SW_ICM_START_ADDRESS),
        log_steering_size: m.get(DeviceMemCap::LOG_STEERING_SW_ICM_SIZE),
    }
}

/// CREATE_TIR as mlx5_ib makes a raw packet QP's (with the PD's `uid`): direct to `rqn`,
/// transport domain `td`. Its number and its ICM address (`icm_address_63_40/_39_32/_31_0`).
pub fn create_tir(n: &mut Node, uid: u16, rqn: u32, td: u32) -> (u32, u64) {
    let input = cmd::<CreateTirIn>(Opcode::CreateTir, 0, |v| {
        let mut c = v.nested_mut(CreateTirIn::CTX);
        c.set(Tirc::INLINE_RQN, rqn.into()).unwrap();
        c.set(Tirc::TRANSPORT_DOMAIN, td.into()).unwrap();
    });
    let out = n.fx.p.ok(&as_uid(input, uid), CreateTirOut::BYTES);
    let o = View::<CreateTirOut>::new(&out).unwrap();
    let icm = o.get(CreateTirOut::ICM_ADDRESS_63_40) << 40
        | o.get(CreateTirOut::ICM_ADDRESS_39_32) << 32
        | o.get(CreateTirOut::ICM_ADDRESS_31_0);
    (o.get32(CreateTirOut::TIRN), icm)
}

/// DR's table (`dr_devx_create_flow_table`): type `ty`, `level`, `sw_owner` 1, `log_size` 0,
/// its start anchors in `sw_owner_icm_root_0` and `_1`.
pub fn sw_table_in(ty: u64, level: u64, root0: u64, root1: u64) -> Vec<u8> {
    cmd::<CreateFlowTableIn>(Opcode::CreateFlowTable, 0, |v| {
        v.set(CreateFlowTableIn::TABLE_TYPE, ty).unwrap();
        let mut c = v.nested_mut(CreateFlowTableIn::FLOW_TABLE_CONTEXT);
        c.set(Ftc::LEVEL, level).unwrap();
        c.set(Ftc::SW_OWNER, 1).unwrap();
        c.set(Ftc::SWS_SW_OWNER_ICM_ROOT_0, root0).unwrap();
        c.set(Ftc::SWS_SW_OWNER_ICM_ROOT_1, root1).unwrap();
    })
}

/// A 64-byte STE (format v0) as DR's `ste_init` and builders write it: `entry_type`, its lookup
/// type, the domain's gvmi in the entry and the miss address's bits 63:48; tag and mask zero.
pub struct Ste(pub [u8; ste_v0::SIZE]);

impl Ste {
    pub fn new(entry_type: u64, lu: u64, gvmi: u64) -> Ste {
        let mut s = Ste([0; ste_v0::SIZE]);
        let mut v = s.ctrl();
        v.set(Rx::ENTRY_TYPE, entry_type).unwrap();
        v.set(Rx::ENTRY_SUB_TYPE, lu).unwrap();
        v.set(Rx::MISS_ADDRESS_63_48, gvmi).unwrap();
        if entry_type == ste_v0::entry_type::TX {
            s.tx().set(Tx::GVMI, gvmi).unwrap();
        } else {
            s.ctrl().set(Rx::GVMI, gvmi).unwrap();
        }
        s
    }

    /// The control part through the receive layout (the shared head, the miss address and
    /// the counter are where the other layouts have them).
    fn ctrl(&mut self) -> ViewMut<'_, Rx> {
        ViewMut::new(&mut self.0[..]).unwrap()
    }

    fn tx(&mut self) -> ViewMut<'_, Tx> {
        ViewMut::new(&mut self.0[..]).unwrap()
    }

    /// Hit: on to the table of `entries` at `addr` (hit gvmi `addr >> 48`), whose entry is
    /// picked with `next_lu`'s key under `byte_mask` (`dr_ste_v0_set_hit_addr`: the index
    /// `(addr >> 5) | entries` over `next_table_base_39_32_size` and `_31_5_size`).
    pub fn hit(mut self, addr: u64, entries: u64, next_lu: u64, byte_mask: u16) -> Ste {
        let index = (addr >> 5) | entries;
        let mut v = self.ctrl();
        v.set(Rx::NEXT_TABLE_BASE_63_48, addr >> 48).unwrap();
        v.set(Rx::NEXT_TABLE_BASE_39_32_SIZE, (index >> 27) & 0xff)
            .unwrap();
        v.set(Rx::NEXT_TABLE_BASE_31_5_SIZE, index & ((1 << 27) - 1))
            .unwrap();
        v.set(Rx::NEXT_LU_TYPE, next_lu).unwrap();
        v.set(Rx::BYTE_MASK, byte_mask.into()).unwrap();
        self
    }

    /// Hit: a final address (a TIR, drop, allow), one entry, no hash.
    pub fn to(self, addr: u64) -> Ste {
        self.hit(addr, 1, lu_type::DONT_CARE, 0)
    }

    /// Miss: the single STE at `addr` (`addr >> 6` over `miss_address_39_32` and `_31_6`).
    pub fn miss(mut self, addr: u64) -> Ste {
        let index = addr >> 6;
        let mut v = self.ctrl();
        v.set(Rx::MISS_ADDRESS_39_32, (index >> 26) & 0xff).unwrap();
        v.set(Rx::MISS_ADDRESS_31_6, index & ((1 << 26) - 1))
            .unwrap();
        self
    }

    /// "Always miss" to `addr` (`dr_ste_set_always_miss`): the tag's first byte 0xdc under an
    /// all-zero mask.
    pub fn always_miss(self, addr: u64) -> Ste {
        let mut s = self.miss(addr);
        s.0[ste_v0::TAG_OFFSET] = ste_v0::ALWAYS_MISS_TAG;
        s
    }

    /// The tag and the mask, laid out by the entry's lookup type `L`.
    pub fn tag_mask<L: Layout>(mut self, f: impl Fn(&mut ViewMut<'_, L>, bool)) -> Ste {
        for (at, mask) in [(ste_v0::TAG_OFFSET, false), (ste_v0::MASK_OFFSET, true)] {
            f(
                &mut ViewMut::<L>::new(&mut self.0[at..at + L::BYTES]).unwrap(),
                mask,
            );
        }
        self
    }

    /// A receive entry's flow tag (`qp_list_pointer`: valid bit and 24 bits).
    pub fn flow_tag(mut self, tag: u32) -> Ste {
        self.ctrl()
            .set(
                Rx::QP_LIST_POINTER,
                ste_v0::FLOW_TAG_VALID | u64::from(tag & 0xff_ffff),
            )
            .unwrap();
        self
    }

    /// The flow counter the entry counts in (`counter_trigger`, 24 bits; RX and TX alike).
    pub fn counter(mut self, id: u32) -> Ste {
        let mut v = self.ctrl();
        v.set(Rx::COUNTER_TRIGGER_15_0, u64::from(id & 0xffff))
            .unwrap();
        v.set(Rx::COUNTER_TRIGGER_23_16, u64::from(id >> 16 & 0xff))
            .unwrap();
        self
    }

    /// A transmit entry's push VLAN: `action_type` PUSH_VLAN, the 4 bytes of the tag (TPID in
    /// bits 31:16, TCI in 15:0) in `encap_pointer_vlan_data`.
    pub fn push_vlan(mut self, tpid: u16, tci: u16) -> Ste {
        let mut v = self.tx();
        v.set(Tx::ACTION_TYPE, tx_action_type::PUSH_VLAN).unwrap();
        v.set(
            Tx::ENCAP_POINTER_VLAN_DATA,
            u64::from(tpid) << 16 | u64::from(tci),
        )
        .unwrap();
        self
    }

    /// The hash byte mask of the bytes of this entry's mask that are all ones
    /// (`dr_ste_conv_bit_to_byte_mask`: key byte 0 is bit 15).
    pub fn byte_mask(&self) -> u16 {
        let mask = &self.0[ste_v0::MASK_OFFSET..ste_v0::MASK_OFFSET + ste_v0::MASK_SIZE];
        mask.iter()
            .enumerate()
            .filter(|(_, &b)| b == 0xff)
            .fold(0, |m, (i, _)| m | 1 << (15 - i))
    }

    /// The tag: on the bytes of [`Ste::byte_mask`], the key every packet that matches brings —
    /// what DR hashes to pick the entry's slot.
    pub fn tag(&self) -> [u8; ste_v0::TAG_SIZE] {
        self.0[ste_v0::TAG_OFFSET..ste_v0::TAG_OFFSET + ste_v0::TAG_SIZE]
            .try_into()
            .unwrap()
    }
}

/// The entry of a hash table of `entries` a 16-byte lookup key lands on (dr-ste-v0-facts.md §2.5,
/// `dr_ste_calc_hash_index`): the key's bytes outside `byte_mask` zeroed (key byte 0 is bit 15),
/// CRC-32 over the 16 bytes (reflected 0xedb88320, from 0, no final XOR, bytewise), byte-swapped,
/// modulo `entries`.
pub fn dr_hash_index(key: &[u8; 16], byte_mask: u16, entries: u64) -> u64 {
    let mut crc = 0u32;
    for (i, &b) in key.iter().enumerate() {
        let b = if byte_mask & (0x8000 >> i) != 0 { b } else { 0 };
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xedb8_8320 & (crc & 1).wrapping_neg());
        }
    }
    u64::from(crc.swap_bytes()) % entries
}

/// WQE opcodes and the CQ_UPDATE flag of the send ring's work requests.
const RDMA_WRITE: u8 = 0x08;
const RDMA_READ: u8 = 0x10;
const CQ_UPDATE: u8 = 0x08;
/// Bytes DR 56.1 writes inline at most (`max_inline_size`); longer writes go by pointer.
/// 44.0 (the guest's) never sets it: every write goes by pointer.
const MAX_INLINE: usize = 64;
/// WQEs between two signalled ones (`signal_th` = max_send_wr 128 / 16).
const SIGNAL_TH: u32 = 8;
/// The ring buffer's slots (DR copies long writes to slot `tx_head & 7`) and their bytes.
const RING_SLOTS: u64 = 8;
const RING_SLOT: u64 = 4096;

/// DR's send ring (dr-control-facts.md §3): a force-loopback RC QP connected to itself, a ring
/// buffer (the data of writes longer than `max_inline`) and a sync buffer (where the READs land),
/// writing through `key`, a SW ICM key (zero-based: `raddr` is an offset into it).
pub struct SendRing {
    pub qp: Qp,
    pub ring: Mr,
    pub sync: Mr,
    pub key: u32,
    /// 64 as rdma-core 56.1; 0 as 44.0 (the guest's), which never writes inline.
    pub max_inline: usize,
    pending: u32,
    tx_head: u64,
}

impl SendRing {
    pub fn new(n: &mut Node, key: u32) -> SendRing {
        let qp = n.create_qp(qp_st::RC);
        assert_eq!(connect_fl(n, &qp, qp.qpn, 1), [(0, 0); 3]);
        let ring = n.reg_mr((RING_SLOTS * RING_SLOT) as usize, true, true, false);
        let sync = n.reg_mr(RING_SLOT as usize, true, true, false);
        SendRing {
            qp,
            ring,
            sync,
            key,
            max_inline: MAX_INLINE,
            pending: 0,
            tx_head: 0,
        }
    }

    /// One WQE posted: signalled when it makes `pending` a multiple of `signal_th`, whose
    /// completion is then awaited (Sync: it is there when the doorbell returns).
    fn post(&mut self, n: &mut Node, opcode: u8, segs: &[Seg]) -> bool {
        self.pending += 1;
        let signal = self.pending % SIGNAL_TH == 0;
        let flags = if signal { CQ_UPDATE } else { 0 };
        let idx = n.post_send(&mut self.qp, opcode, flags, [0; 4], segs);
        if signal {
            let c = n.wait(TIMEOUT_NS).expect("the signalled WQE completed");
            assert_eq!(
                (c.opcode, c.wqe_opcode, c.qpn, c.wqe_counter),
                (0, opcode, self.qp.qpn, idx),
                "{c:?}"
            );
        }
        signal
    }

    /// `dr_postsend_icm_data`: an RDMA WRITE of `data` at `raddr` of the key (inline up to
    /// `max_inline` bytes, else from the ring buffer), then an RDMA READ of the same range into
    /// the sync buffer. Where the READ is signalled, the bytes it read back are checked.
    pub fn write(&mut self, n: &mut Node, raddr: u64, data: &[u8]) {
        let remote = Seg::Raddr(raddr, self.key);
        self.write_to(n, remote, data);
    }

    fn write_to(&mut self, n: &mut Node, remote: Seg, data: &[u8]) {
        let local = if data.len() <= self.max_inline {
            Seg::Inline(data.to_vec())
        } else {
            assert!(data.len() as u64 <= RING_SLOT);
            let at = (self.tx_head % RING_SLOTS) * RING_SLOT;
            n.dev().dma_write(self.ring.buf.iova + at, data).unwrap();
            Seg::Data(data.len() as u32, self.ring.key, self.ring.va(at))
        };
        self.tx_head += 1;
        self.post(n, RDMA_WRITE, &[remote.clone(), local]);
        let read = Seg::Data(data.len() as u32, self.sync.key, self.sync.va(0));
        if self.post(n, RDMA_READ, &[remote, read]) {
            assert_eq!(read_back(n, &self.sync, data.len()), data, "read back");
        }
    }

    /// WQEs posted so far (every `SIGNAL_TH`-th is signalled and awaited).
    pub fn pending(&self) -> u32 {
        self.pending
    }

    /// Whether the next write (a WRITE and a READ) goes unsignalled: nothing waits for it.
    pub fn next_write_unawaited(&self) -> bool {
        (1..=2).all(|k| (self.pending + k) % SIGNAL_TH != 0)
    }

    /// One write of 64 bytes to the sync buffer (moves the signalling along).
    pub fn pad(&mut self, n: &mut Node) {
        let remote = Seg::Raddr(self.sync.va(0), self.sync.key);
        self.write_to(n, remote, &[0xee; 64]);
    }

    /// `dr_send_ring_force_drain`: 8 postsends of 64 bytes to the sync buffer itself — two
    /// signalled WQEs among them, so every WQE before them has completed.
    pub fn drain(&mut self, n: &mut Node) {
        for k in 0..8u8 {
            let remote = Seg::Raddr(self.sync.va(0), self.sync.key);
            self.write_to(n, remote, &[k; 64]);
        }
    }
}

fn read_back(n: &Node, mr: &Mr, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    n.dev().dma_read(mr.buf.iova, &mut b).unwrap();
    b
}
