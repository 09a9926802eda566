//! A tiny command poster for the simulator's tests: it builds queue entries and mailbox chains
//! byte by byte in DMA memory (through the simulator's host-side `dma_write`/`dma_read`), rings
//! the doorbell, waits for the ownership bit and collects the output.
#![allow(dead_code)]

pub mod datapath;
pub mod dr;
pub mod dr_domain;
pub mod eth_node;
pub mod ethernet;
pub mod queues;

use mlx5_ifc::consts::{
    cap_mode, cap_type, manage_pages, query_pages, CMD_INLINE_BYTES, CMD_TYPE_PCI,
};
use mlx5_ifc::prm::cmdif::{CmdIfBox, CmdQueueEntry as Entry};
use mlx5_ifc::prm::hca::{
    DisableHcaIn, EnableHcaIn, InitHcaIn, ManagePagesIn, ManagePagesOut, QueryHcaCapIn,
    QueryPagesIn, QueryPagesOut, SetHcaCapIn, TeardownHcaIn,
};
use mlx5_ifc::{regs, Be32, Be64, CmdInHeader, CmdOutHeader, Layout, Opcode, View, ViewMut};
use mlx5_sim::{DmaBlock, HcaState, Mode, Profile, SimDevice};

/// Device time a command may take before `wait` gives up (generous: threaded runs share two
/// cores with other tests).
pub const TIMEOUT_NS: u64 = 5_000_000_000;
/// How long a test waits for a completion that must not come.
pub const NEVER_NS: u64 = 20_000_000;

pub const DATA: usize = 512;

fn xor(b: &[u8]) -> u8 {
    b.iter().fold(0, |a, x| a ^ x)
}

/// One command laid out in DMA memory.
pub struct Msg {
    pub slot: u32,
    pub entry: u64,
    pub inbox: Vec<DmaBlock>,
    pub outbox: Vec<DmaBlock>,
    pub outlen: usize,
}

pub struct Poster {
    pub dev: SimDevice,
    pub cmdq: DmaBlock,
    token: u8,
    /// Pages given to the device and not yet taken back.
    pub given: Vec<DmaBlock>,
}

/// An input buffer of layout `L` with opcode and op_mod set; `f` sets the rest.
pub fn cmd<L: Layout>(op: Opcode, op_mod: u16, f: impl FnOnce(&mut ViewMut<'_, L>)) -> Vec<u8> {
    let mut b = vec![0u8; L::BYTES];
    let mut h = ViewMut::<CmdInHeader>::new(&mut b).unwrap();
    h.set(CmdInHeader::OPCODE, op as u64)
        .unwrap()
        .set(CmdInHeader::OP_MOD, op_mod.into())
        .unwrap();
    f(&mut ViewMut::<L>::new(&mut b).unwrap());
    b
}

/// `profile` without run-time page requests: these tests post raw commands and answer no
/// PAGE_REQUEST (the built-in profiles raise them as a PF's firmware does; `tests/slots.rs` and
/// the driver's tests cover that).
pub fn quiet(profile: Profile) -> Profile {
    profile.with_page_policy(mlx5_sim::PagePolicy::default())
}

/// A built-in profile by name, [`quiet`].
pub fn quiet_by_name(name: &str) -> Option<Profile> {
    Profile::by_name(name).map(quiet)
}

/// A bare input of layout `L` (nothing but opcode and op_mod).
pub fn bare<L: Layout>(op: Opcode, op_mod: u16) -> Vec<u8> {
    cmd::<L>(op, op_mod, |_| {})
}

/// `(status, syndrome)` of an output.
pub fn status(out: &[u8]) -> (u8, u32) {
    let v = View::<CmdOutHeader>::new(out).unwrap();
    (
        v.get(CmdOutHeader::STATUS) as u8,
        v.get32(CmdOutHeader::SYNDROME),
    )
}

impl Poster {
    /// Programs the command queue and waits until the firmware has initialized.
    pub fn new(dev: SimDevice) -> Poster {
        let cmdq = dev.dma_alloc(4096, 4096).unwrap();
        dev.bar_write32(
            regs::CMDQ_ADDR_H.into(),
            Be32::new((cmdq.iova >> 32) as u32),
        );
        dev.bar_write32(regs::CMDQ_ADDR_L_SZ.into(), Be32::new(cmdq.iova as u32));
        let p = Poster {
            dev,
            cmdq,
            token: 0,
            given: Vec::new(),
        };
        assert!(p.wait_initialized(), "firmware never finished initializing");
        p
    }

    pub fn sim(profile: Profile, mode: Mode) -> Poster {
        Poster::new(SimDevice::new(profile, mode))
    }

    pub fn cx5(mode: Mode) -> Poster {
        Poster::sim(quiet(Profile::connectx5()), mode)
    }

    pub fn wait_initialized(&self) -> bool {
        let start = self.dev.now_ns();
        while self.dev.bar_read32(regs::INITIALIZING.into()).get() & regs::INITIALIZING_BIT != 0 {
            if self.dev.now_ns() - start > TIMEOUT_NS {
                return false;
            }
            self.dev.relax();
        }
        true
    }

    fn next_token(&mut self) -> u8 {
        self.token = self.token.wrapping_add(1).max(1);
        self.token
    }

    fn chain(&self, len: usize, data: Option<&[u8]>, token: u8) -> Vec<DmaBlock> {
        let n = len.saturating_sub(CMD_INLINE_BYTES).div_ceil(DATA);
        let blocks: Vec<DmaBlock> = (0..n)
            .map(|_| self.dev.dma_alloc(CmdIfBox::BYTES, 1024).unwrap())
            .collect();
        for (k, b) in blocks.iter().enumerate() {
            let mut img = [0u8; CmdIfBox::BYTES];
            if let Some(data) = data {
                let start = (CMD_INLINE_BYTES + k * DATA).min(data.len());
                let end = (start + DATA).min(data.len());
                img[..end - start].copy_from_slice(&data[start..end]);
            }
            let next = blocks.get(k + 1).map_or(0, |b| b.iova);
            let mut v = ViewMut::<CmdIfBox>::new(&mut img).unwrap();
            v.set(CmdIfBox::NEXT_POINTER_63_32, next >> 32).unwrap();
            v.set(CmdIfBox::NEXT_POINTER_31_10, (next & 0xffff_ffff) >> 10)
                .unwrap();
            v.set(CmdIfBox::BLOCK_NUMBER, k as u64).unwrap();
            v.set(CmdIfBox::TOKEN, token.into()).unwrap();
            img[0x23e] = !xor(&img[0x200..0x23e]);
            img[0x23f] = !xor(&img[..0x23f]);
            self.dev.dma_write(b.iova, &img).unwrap();
        }
        blocks
    }

    /// Lays out a command in `slot` (entry owned by the device, doorbell not rung).
    pub fn prepare(&mut self, slot: u32, input: &[u8], outlen: usize) -> Msg {
        let token = self.next_token();
        let inbox = self.chain(input.len(), Some(input), token);
        let outbox = self.chain(outlen, None, token);
        let mut e = [0u8; Entry::BYTES];
        let mut v = ViewMut::<Entry>::new(&mut e).unwrap();
        v.set(Entry::TYPE, CMD_TYPE_PCI.into()).unwrap();
        v.set(Entry::INPUT_LENGTH, input.len() as u64).unwrap();
        v.set(Entry::OUTPUT_LENGTH, outlen as u64).unwrap();
        let ptr = |c: &[DmaBlock]| c.first().map_or(0, |b| b.iova);
        let (i, o) = (ptr(&inbox), ptr(&outbox));
        v.set(Entry::INPUT_MAILBOX_POINTER_63_32, i >> 32).unwrap();
        v.set(Entry::INPUT_MAILBOX_POINTER_31_9, (i & 0xffff_ffff) >> 9)
            .unwrap();
        v.set(Entry::OUTPUT_MAILBOX_POINTER_63_32, o >> 32).unwrap();
        v.set(Entry::OUTPUT_MAILBOX_POINTER_31_9, (o & 0xffff_ffff) >> 9)
            .unwrap();
        let n = input.len().min(CMD_INLINE_BYTES);
        v.bytes_mut(Entry::COMMAND_INPUT_INLINE_DATA)[..n].copy_from_slice(&input[..n]);
        v.set(Entry::TOKEN, token.into()).unwrap();
        v.set(Entry::OWNERSHIP, 1).unwrap();
        e[0x3d] = !xor(&e);
        let entry = self.cmdq.iova + (u64::from(slot) << 6);
        self.dev.dma_write(entry, &e).unwrap();
        Msg {
            slot,
            entry,
            inbox,
            outbox,
            outlen,
        }
    }

    /// Writes bytes into the entry of `m` (to corrupt it before ringing).
    pub fn poke_entry(&self, m: &Msg, off: usize, bytes: &[u8]) {
        self.dev.dma_write(m.entry + off as u64, bytes).unwrap();
    }

    pub fn entry(&self, m: &Msg) -> [u8; Entry::BYTES] {
        let mut e = [0u8; Entry::BYTES];
        self.dev.dma_read(m.entry, &mut e).unwrap();
        e
    }

    pub fn ring(&self, slots: u32) {
        self.dev
            .bar_write32(regs::CMD_DBELL.into(), Be32::new(slots));
    }

    /// The delivery status once the device hands the entry back; `None` on timeout.
    pub fn wait(&self, m: &Msg) -> Option<u8> {
        self.wait_for(m, TIMEOUT_NS)
    }

    /// [`Poster::wait`] with a timeout of `timeout_ns` of device time.
    pub fn wait_for(&self, m: &Msg, timeout_ns: u64) -> Option<u8> {
        let start = self.dev.now_ns();
        loop {
            let mut b = [0u8; 1];
            self.dev.dma_read(m.entry + 0x3f, &mut b).unwrap();
            if b[0] & 1 == 0 {
                return Some(b[0] >> 1);
            }
            if self.dev.now_ns() - start > timeout_ns {
                return None;
            }
            self.dev.relax();
        }
    }

    /// The output: 16 inline bytes and the output mailbox data, `outlen` bytes.
    pub fn output(&self, m: &Msg) -> Vec<u8> {
        let e = self.entry(m);
        let mut out = View::<Entry>::new(&e)
            .unwrap()
            .bytes(Entry::COMMAND_OUTPUT_INLINE_DATA)
            .to_vec();
        for b in &m.outbox {
            let mut img = [0u8; CmdIfBox::BYTES];
            self.dev.dma_read(b.iova, &mut img).unwrap();
            out.extend_from_slice(&img[..DATA]);
        }
        out.truncate(m.outlen.max(CMD_INLINE_BYTES));
        out
    }

    pub fn release(&self, m: Msg) {
        for b in m.inbox.iter().chain(&m.outbox) {
            self.dev.dma_free(b.iova).unwrap();
        }
    }

    /// Posts in slot 0: the output, or the delivery status when it is not OK.
    pub fn exec_raw(&mut self, input: &[u8], outlen: usize) -> Result<Vec<u8>, u8> {
        let m = self.prepare(0, input, outlen);
        self.ring(1);
        let ds = self.wait(&m).expect("command never completed");
        let out = self.output(&m);
        self.release(m);
        if ds == 0 {
            Ok(out)
        } else {
            Err(ds)
        }
    }

    /// Posts in `slot` a command whose delivery must succeed; returns its output.
    pub fn exec_in(&mut self, slot: u32, input: &[u8], outlen: usize) -> Vec<u8> {
        let m = self.prepare(slot, input, outlen);
        self.ring(1 << slot);
        let ds = self.wait(&m).expect("command never completed");
        assert_eq!(ds, 0, "delivery status");
        let out = self.output(&m);
        self.release(m);
        out
    }

    /// Posts a command whose delivery must succeed; returns its output.
    pub fn exec(&mut self, input: &[u8], outlen: usize) -> Vec<u8> {
        self.exec_raw(input, outlen)
            .unwrap_or_else(|ds| panic!("delivery status {ds:#x}"))
    }

    /// Posts a command that must succeed; returns its output.
    pub fn ok(&mut self, input: &[u8], outlen: usize) -> Vec<u8> {
        let out = self.exec(input, outlen);
        assert_eq!(
            status(&out),
            (0, 0),
            "{:#06x} failed",
            View::<CmdInHeader>::new(input)
                .unwrap()
                .get(CmdInHeader::OPCODE)
        );
        out
    }

    /// MANAGE_PAGES give of `pages`; returns `(status, syndrome)`.
    pub fn give_addrs(&mut self, pages: &[u64]) -> (u8, u32) {
        let mut input = cmd::<ManagePagesIn>(Opcode::ManagePages, manage_pages::GIVE, |v| {
            v.set(ManagePagesIn::INPUT_NUM_ENTRIES, pages.len() as u64)
                .unwrap();
        });
        for p in pages {
            input.extend_from_slice(&Be64::new(*p).to_bytes());
        }
        status(&self.exec(&input, ManagePagesOut::BYTES))
    }

    /// Allocates `n` pages and gives them to the device.
    pub fn give(&mut self, n: usize) {
        let pages: Vec<DmaBlock> = (0..n)
            .map(|_| self.dev.dma_alloc(4096, 4096).unwrap())
            .collect();
        let addrs: Vec<u64> = pages.iter().map(|p| p.iova).collect();
        assert_eq!(self.give_addrs(&addrs), (0, 0));
        self.given.extend(pages);
    }

    /// QUERY_PAGES `op_mod`.
    pub fn query_pages(&mut self, op_mod: u16) -> u32 {
        let out = self.ok(
            &bare::<QueryPagesIn>(Opcode::QueryPages, op_mod),
            QueryPagesOut::BYTES,
        );
        View::<QueryPagesOut>::new(&out)
            .unwrap()
            .get32(QueryPagesOut::NUM_PAGES)
    }

    /// MANAGE_PAGES take of up to `n` pages with room for `room`; returns the addresses.
    pub fn take(&mut self, n: u64, room: usize) -> Vec<u64> {
        let input = cmd::<ManagePagesIn>(Opcode::ManagePages, manage_pages::TAKE, |v| {
            v.set(ManagePagesIn::INPUT_NUM_ENTRIES, n).unwrap();
        });
        let out = self.ok(&input, ManagePagesOut::BYTES + 8 * room);
        let v = View::<ManagePagesOut>::new(&out).unwrap();
        let got = v.get(ManagePagesOut::OUTPUT_NUM_ENTRIES) as usize;
        let pas = v.bytes(ManagePagesOut::PAS);
        (0..got)
            .map(|i| Be64::from_bytes(pas[i * 8..i * 8 + 8].try_into().unwrap()).get())
            .collect()
    }

    /// Takes every returnable page back and frees it.
    pub fn take_all(&mut self) {
        loop {
            let got = self.take(768, 768);
            if got.is_empty() {
                break;
            }
            for a in got {
                let i = self
                    .given
                    .iter()
                    .position(|b| b.iova == a)
                    .expect("device returned a page it was not given");
                self.dev.dma_free(self.given.swap_remove(i).iova).unwrap();
            }
        }
    }

    /// The general capability (`op_mod` = general, `mode`).
    pub fn query_cap(&mut self, kind: u16, mode: u16) -> Vec<u8> {
        let input = bare::<QueryHcaCapIn>(Opcode::QueryHcaCap, kind << 1 | mode);
        let out = self.ok(&input, 0x1010);
        out[0x10..0x110].to_vec()
    }

    /// SET_HCA_CAP general with `cap` (256 bytes).
    pub fn set_cap(&mut self, kind: u16, cap: &[u8]) -> (u8, u32) {
        let input = cmd::<SetHcaCapIn>(Opcode::SetHcaCap, kind << 1, |v| {
            v.bytes_mut(SetHcaCapIn::CAPABILITY)[..cap.len()].copy_from_slice(cap);
        });
        status(&self.exec(&input, 0x10))
    }

    /// ENABLE_HCA .. INIT_HCA, the way a PF driver does it.
    pub fn init(&mut self) {
        self.ok(&bare::<EnableHcaIn>(Opcode::EnableHca, 0), 0x10);
        let boot = self.query_pages(query_pages::BOOT);
        self.give(boot as usize);
        let _max = self.query_cap(cap_type::GENERAL, cap_mode::MAX);
        let cur = self.query_cap(cap_type::GENERAL, cap_mode::CUR);
        assert_eq!(self.set_cap(cap_type::GENERAL, &cur), (0, 0));
        let init = self.query_pages(query_pages::INIT);
        self.give(init as usize);
        self.ok(&bare::<InitHcaIn>(Opcode::InitHca, 0), 0x10);
        assert_eq!(self.dev.hca_state(), HcaState::Initialized);
    }

    /// TEARDOWN_HCA, page reclaim, DISABLE_HCA.
    pub fn shutdown(&mut self) {
        self.ok(&bare::<TeardownHcaIn>(Opcode::TeardownHca, 0), 0x10);
        self.take_all();
        self.ok(&bare::<DisableHcaIn>(Opcode::DisableHca, 0), 0x10);
        assert_eq!(self.dev.hca_state(), HcaState::Disabled);
    }

    /// Frees the command queue; afterwards nothing of the test's should be left in the device.
    pub fn finish(self) -> SimDevice {
        self.dev.dma_free(self.cmdq.iova).unwrap();
        for p in &self.given {
            self.dev.dma_free(p.iova).unwrap();
        }
        self.dev
    }
}

/// Nothing left behind in `dev`.
pub fn assert_clean(dev: &SimDevice) {
    assert_eq!(dev.pages_held(), 0, "pages held");
    assert!(
        dev.live_objects().is_empty(),
        "live objects {:?}",
        dev.live_objects()
    );
    assert_eq!(dev.dma_bytes_mapped(), 0, "DMA bytes mapped");
    assert!(
        dev.dma_faults().is_empty(),
        "DMA faults {:?}",
        dev.dma_faults()
    );
}
