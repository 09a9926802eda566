//! Masked (extended) atomics between two simulated ConnectX-5s, written from the facts
//! (docs/fields.md "Masked atomics": NVIDIA's "Enhanced Atomic Operations", MLNX_OFED's libmlx5,
//! UCX's and NVSHMEM's WQE builders), not from a driver: opcodes 0x14 / 0x15 with `opmod`
//! 0x08 | (log2 N − 2), the N-byte big-endian argument block after the remote address segment,
//! the original value into the data segment after it; the responder's checks.

mod common;

use common::datapath::*;
use mlx5_ifc::consts::atomic_caps as ac;
use mlx5_ifc::consts::{cap_mode, cap_type, qp_st::RC};
use mlx5_ifc::prm::caps::AtomicCaps;
use mlx5_ifc::prm::qp::Qpc;
use mlx5_ifc::wqe::ext_atomic::OPMOD_EXT;
use mlx5_ifc::{View, ViewMut};
use mlx5_sim::{Fabric, Mode};

const SIGNALED: u8 = 0x08;
const MASKED_CS: u8 = 0x14;
const MASKED_FA: u8 = 0x15;
const REQ: u8 = 0x0;
const REQ_ERR: u8 = 0xd;
const LOCAL_LENGTH_ERR: u8 = 0x01;
const LOCAL_QP_OP_ERR: u8 = 0x02;
const REMOTE_INVAL_REQ_ERR: u8 = 0x12;

/// Two nodes and an RC pair whose responders take atomics up to `2^mode` bytes (`atomic_mode`),
/// a local buffer on `a` and a remote one on `b`.
struct Pair {
    _fabric: Fabric,
    a: Node,
    b: Node,
    qa: Qp,
    la: Mr,
    rb: Mr,
}

fn pair_with_mode(mode: u64) -> Pair {
    let (fabric, mut a, mut b) = pair(Mode::Sync);
    let (qa, _qb) = connected(&mut a, &mut b, RC, move |c: &mut ViewMut<'_, Qpc>| {
        c.set(Qpc::ATOMIC_MODE, mode).unwrap();
    });
    let la = a.reg_mr(4096, false, false, false);
    let rb = b.reg_mr(4096, true, true, true);
    Pair {
        _fabric: fabric,
        a,
        b,
        qa,
        la,
        rb,
    }
}

impl Pair {
    /// Posts a masked atomic (`opcode`) of `n`-byte arguments `operands` (each `n` bytes,
    /// big-endian) on the remote buffer at `at`, the original value into the local buffer at 0;
    /// the requester's completion.
    fn post(&mut self, opcode: u8, n: usize, at: u64, operands: &[&[u8]]) -> Cqe {
        let log = (n.trailing_zeros() - 2) as u8;
        self.post_raw(opcode, OPMOD_EXT | log, n as u32, at, operands)
    }

    fn post_raw(&mut self, opcode: u8, opmod: u8, dest: u32, at: u64, ops: &[&[u8]]) -> Cqe {
        let mut block: Vec<u8> = ops.concat();
        block.resize(block.len().next_multiple_of(16), 0);
        self.a.post_send_opmod(
            &mut self.qa,
            opmod,
            opcode,
            SIGNALED,
            &[
                Seg::Raddr(self.rb.va(at), self.rb.key),
                Seg::Raw(block),
                Seg::Data(dest, self.la.key, self.la.va(0)),
            ],
        );
        self.a.poll().expect("a completion")
    }

    fn remote(&self, at: u64, n: usize) -> Vec<u8> {
        read(&self.b.dev(), &self.rb, at, n)
    }

    fn set_remote(&self, at: u64, v: &[u8]) {
        self.b.dev().dma_write(self.rb.buf.iova + at, v).unwrap();
    }

    fn original(&self, n: usize) -> Vec<u8> {
        read(&self.a.dev(), &self.la, 0, n)
    }
}

#[test]
fn the_profile_offers_masked_atomics_of_4_to_32_bytes_as_a_connectx5_does() {
    let (_fabric, mut a, _b) = pair(Mode::Sync);
    let caps = a.fx.p.query_cap(cap_type::ATOMIC, cap_mode::MAX);
    let v = View::<AtomicCaps>::new(&caps).unwrap();
    let ops = ac::OPS_CMP_SWAP
        | ac::OPS_FETCH_ADD
        | ac::OPS_EXTENDED_CMP_SWAP
        | ac::OPS_EXTENDED_FETCH_ADD;
    let sizes = ac::SIZE_4_BYTES | ac::SIZE_8_BYTES | ac::SIZE_16_BYTES | ac::SIZE_32_BYTES;
    assert_eq!(
        (
            v.get(AtomicCaps::ATOMIC_OPERATIONS),
            v.get(AtomicCaps::ATOMIC_SIZE_QP),
            v.get(AtomicCaps::ATOMIC_SIZE_DC),
        ),
        (ops, sizes, sizes),
        "MLNX_OFED's masked_log_atomic_arg_sizes 0x3c is size_qp & size_dc"
    );
}

#[test]
fn masked_compare_and_swap_compares_and_swaps_only_the_masked_bits() {
    let mut p = pair_with_mode(5);
    // 8 bytes: the word in the responder host's order (little-endian), the original back
    // big-endian (requester endianness mode 0), as a standard atomic's.
    p.set_remote(0, &0x1122_3344_5566_7788u64.to_le_bytes());
    let be = |x: u64| x.to_be_bytes();
    // Compare only the low byte (0x88: equal); swap only the high half.
    let c = p.post(
        MASKED_CS,
        8,
        0,
        &[
            &be(0xaabb_ccdd_0000_0000),
            &be(0xffff_ffff_ffff_ff88),
            &be(0xffff_ffff_0000_0000),
            &be(0xff),
        ],
    );
    assert_eq!((c.opcode, c.wqe_opcode, c.byte_cnt), (REQ, MASKED_CS, 8));
    assert_eq!(p.original(8), be(0x1122_3344_5566_7788));
    assert_eq!(p.remote(0, 8), 0xaabb_ccdd_5566_7788u64.to_le_bytes());
    // Compared bits differ: nothing swapped, the original still returned.
    let c = p.post(MASKED_CS, 8, 0, &[&be(0), &be(0), &be(!0), &be(0xf)]);
    assert_eq!(c.opcode, REQ);
    assert_eq!(p.original(8), be(0xaabb_ccdd_5566_7788));
    assert_eq!(p.remote(0, 8), 0xaabb_ccdd_5566_7788u64.to_le_bytes());

    // 16 bytes, big-endian in memory and back: a zero compare mask always swaps — UCX's OR
    // (swap v under mask v).
    let old: Vec<u8> = (0..16).collect();
    p.set_remote(64, &old);
    let v = [0xf0u8; 16];
    let c = p.post(MASKED_CS, 16, 64, &[&v, &[0; 16], &v, &[0; 16]]);
    assert_eq!((c.opcode, c.wqe_opcode, c.byte_cnt), (REQ, MASKED_CS, 16));
    assert_eq!(p.original(16), old);
    let want: Vec<u8> = old.iter().map(|b| b | 0xf0).collect();
    assert_eq!(p.remote(64, 16), want);
}

#[test]
fn masked_fetch_and_add_stops_the_carry_at_field_boundaries() {
    let mut p = pair_with_mode(5);
    // 4 bytes: two 16-bit fields (boundaries at bits 15 and 31), each adding 1.
    p.set_remote(8, &0x0001_ffffu32.to_be_bytes());
    let c = p.post(
        MASKED_FA,
        4,
        8,
        &[&0x0001_0001u32.to_be_bytes(), &0x8000_8000u32.to_be_bytes()],
    );
    assert_eq!((c.opcode, c.wqe_opcode, c.byte_cnt), (REQ, MASKED_FA, 4));
    assert_eq!(p.original(4), 0x0001_ffffu32.to_be_bytes());
    assert_eq!(
        p.remote(8, 4),
        0x0002_0000u32.to_be_bytes(),
        "the low field wrapped alone"
    );
    // The other half of that 8-byte word is untouched.
    p.set_remote(12, &[9; 4]);
    p.post(MASKED_FA, 4, 8, &[&1u32.to_be_bytes(), &[0; 4]]);
    assert_eq!(p.remote(8, 8), [0, 2, 0, 1, 9, 9, 9, 9]);

    // 32 bytes, no boundary: one 256-bit add whose carry runs through every byte.
    let mut old = [0xffu8; 32];
    old[0] = 0x01;
    p.set_remote(128, &old);
    let mut one = [0u8; 32];
    one[31] = 1;
    let c = p.post(MASKED_FA, 32, 128, &[&one, &[0; 32]]);
    assert_eq!((c.opcode, c.byte_cnt), (REQ, 32));
    assert_eq!(p.original(32), old);
    let mut want = [0u8; 32];
    want[0] = 0x02;
    assert_eq!(p.remote(128, 32), want);
}

#[test]
fn what_the_requester_and_the_responder_refuse() {
    // The requester: no extended-atomic flag in opmod, a size no ConnectX-5 offers (64 bytes),
    // a destination not N bytes long.
    for (opmod, dest, want) in [
        (0x02u8, 16u32, LOCAL_QP_OP_ERR),
        (OPMOD_EXT | 4, 64, LOCAL_QP_OP_ERR),
        (OPMOD_EXT | 2, 8, LOCAL_LENGTH_ERR),
    ] {
        let mut p = pair_with_mode(5);
        let ops = [0u8; 128];
        let c = p.post_raw(MASKED_FA, opmod, dest, 0, &[&ops[..2 * dest as usize]]);
        assert_eq!((c.opcode, c.syndrome), (REQ_ERR, want), "opmod {opmod:#x}");
    }
    // The responder: an address not N-aligned; an IB-spec responder (mode 1: standard atomics
    // only); a 32-byte atomic on a responder taking at most 16 (mode 4).
    for (mode, at, n) in [(5u64, 8u64, 16usize), (1, 0, 8), (4, 0, 32)] {
        let mut p = pair_with_mode(mode);
        let c = p.post(MASKED_FA, n, at, &[&vec![0; n], &vec![0; n]]);
        assert_eq!(
            (c.opcode, c.syndrome),
            (REQ_ERR, REMOTE_INVAL_REQ_ERR),
            "mode {mode}, {n} bytes at {at}"
        );
    }
    // Mode 4 takes 16 bytes.
    let mut p = pair_with_mode(4);
    let c = p.post(MASKED_FA, 16, 0, &[&[1; 16], &[0; 16]]);
    assert_eq!(c.opcode, REQ);
    assert_eq!(p.remote(0, 16), [1; 16]);
}

/// Masked atomics eight at a time with frames lost, duplicated and reordered both ways: each is
/// executed once — a retransmitted one is answered from the responder resources with the
/// original bytes it had — so a 16-byte counter ends at the number of adds and every original
/// value comes back once.
#[test]
fn retransmitted_masked_atomics_are_answered_again_not_executed_again() {
    let (fabric, mut a, mut b) = pair(Mode::Sync);
    let (mut qa, _qb) = connected(&mut a, &mut b, RC, |c: &mut ViewMut<'_, Qpc>| {
        c.set(Qpc::ATOMIC_MODE, 5).unwrap();
        c.set(Qpc::RETRY_COUNT, 7).unwrap();
        c.nested_mut(Qpc::PRIMARY_ADDRESS_PATH)
            .set(mlx5_ifc::prm::qp::Ads::ACK_TIMEOUT, 1)
            .unwrap();
    });
    let la = a.reg_mr(16 * 64, false, false, false);
    let rb = b.reg_mr(4096, false, false, true);
    lossy(&fabric, 17);
    let mut one = [0u8; 32];
    one[15] = 1;
    for round in 0..8u64 {
        for i in 0..8u64 {
            let mut block = one.to_vec();
            block.resize(32, 0);
            a.post_send_opmod(
                &mut qa,
                OPMOD_EXT | 2,
                MASKED_FA,
                SIGNALED,
                &[
                    Seg::Raddr(rb.va(0), rb.key),
                    Seg::Raw(block),
                    Seg::Data(16, la.key, la.va((round * 8 + i) * 16)),
                ],
            );
        }
        fabric.advance(10_000_000);
        let done: Vec<_> = std::iter::from_fn(|| a.poll()).collect();
        assert_eq!(done.len(), 8, "round {round}: {done:?}");
        assert!(
            done.iter().all(|c| c.opcode == REQ),
            "round {round}: {done:?}"
        );
    }
    let mut orig: Vec<u128> = (0..64)
        .map(|k| u128::from_be_bytes(read(&a.dev(), &la, k * 16, 16).try_into().unwrap()))
        .collect();
    orig.sort_unstable();
    assert_eq!(orig, (0..64).collect::<Vec<u128>>());
    let end = u128::from_be_bytes(read(&b.dev(), &rb, 0, 16).try_into().unwrap());
    assert_eq!(end, 64, "each executed once");
    let c = fabric.counters();
    assert!(
        c.dropped > 0 && c.duplicated > 0 && c.reordered > 0,
        "{c:?}"
    );
}
