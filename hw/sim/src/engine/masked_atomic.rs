//! Masked (extended) atomics, as NVIDIA's manual ("Enhanced Atomic Operations") and the 2010
//! Linux commit that added them to the verbs define them (docs/fields.md "Masked atomics"):
//!
//! * **masked compare-and-swap**: the compare succeeds when the target equals `compare` in the
//!   bits `compare_mask` sets (a zero mask always succeeds); then the bits `swap_mask` sets take
//!   `swap`'s, the others keep theirs. The original value is returned either way.
//! * **masked fetch-and-add**: the target is added to `add` bit by bit from the least significant
//!   bit; bit i of the field boundary mask ends a field — the carry out of bit i is dropped
//!   instead of entering bit i + 1 (0: one N-byte add; all ones: a carry-less XOR). The original
//!   value is returned.
//!
//! Operands and values are N-byte big-endian integers (N = 4, 8, 16 or 32). Which a device
//! offers: `atomic_operations` bits 2 (compare-and-swap) and 3 (fetch-and-add), N in
//! `atomic_size_qp` (`atomic_size_dc` for DC).

use mlx5_ifc::consts::atomic_caps as ac;
use mlx5_ifc::prm::caps::AtomicCaps;

use super::wqe::{opcode as wop, SendWqe};
use crate::model::qp_info::QpInfo;
use crate::model::Model;

/// Whether the device offers the masked atomic of `cs` (compare-and-swap, else fetch-and-add)
/// with `n`-byte arguments to a QP (`dc`: to a DCI or DCT).
pub(crate) fn device_offers(model: &Model, cs: bool, n: usize, dc: bool) -> bool {
    let op = if cs {
        ac::OPS_EXTENDED_CMP_SWAP
    } else {
        ac::OPS_EXTENDED_FETCH_ADD
    };
    let sizes = model.cur_atomic(if dc {
        AtomicCaps::ATOMIC_SIZE_DC
    } else {
        AtomicCaps::ATOMIC_SIZE_QP
    });
    model.cur_atomic(AtomicCaps::ATOMIC_OPERATIONS) & op != 0
        && n.is_power_of_two()
        && n < 64
        && sizes & n as u64 != 0
}

/// Whether send WQE `w` of QP `info` may run: true unless it is a masked atomic the device does
/// not offer (then it is a local QP operation error).
pub(crate) fn offered(model: &Model, info: &QpInfo, w: &SendWqe<'_>) -> bool {
    w.masked
        .is_none_or(|m| device_offers(model, w.opcode == wop::ATOMIC_MASKED_CS, m.n, info.dci()))
}

/// A masked compare-and-swap of `value` (N bytes, big-endian) with `operands` (swap, compare,
/// swap mask, compare mask; N bytes each): `value` becomes the new value.
pub(crate) fn compare_swap(value: &mut [u8], operands: &[u8]) {
    let n = value.len();
    let Some([swap, compare, swap_mask, compare_mask]) = split::<4>(operands, n) else {
        return;
    };
    let equal = (0..n).all(|i| (value[i] ^ compare[i]) & compare_mask[i] == 0);
    if equal {
        for i in 0..n {
            value[i] = (value[i] & !swap_mask[i]) | (swap[i] & swap_mask[i]);
        }
    }
}

/// A masked fetch-and-add of `value` (N bytes, big-endian) with `operands` (the addend and the
/// field boundary mask; N bytes each): `value` becomes the new value.
pub(crate) fn fetch_add(value: &mut [u8], operands: &[u8]) {
    let n = value.len();
    let Some([add, boundary]) = split::<2>(operands, n) else {
        return;
    };
    let mut carry = 0u8;
    // Bytes from the last (least significant), bits from bit 0 of each.
    for i in (0..n).rev() {
        let mut out = 0u8;
        for b in 0..8 {
            let (x, y) = ((value[i] >> b) & 1, (add[i] >> b) & 1);
            let sum = x + y + carry;
            out |= (sum & 1) << b;
            carry = (sum >> 1) & !(boundary[i] >> b) & 1;
        }
        value[i] = out;
    }
}

/// `operands` as `K` slices of `n` bytes, if it holds exactly that.
fn split<const K: usize>(operands: &[u8], n: usize) -> Option<[&[u8]; K]> {
    (operands.len() == K * n).then(|| std::array::from_fn(|k| &operands[k * n..(k + 1) * n]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cs(value: u32, swap: u32, compare: u32, swap_mask: u32, compare_mask: u32) -> u32 {
        let mut v = value.to_be_bytes();
        let ops: Vec<u8> = [swap, compare, swap_mask, compare_mask]
            .iter()
            .flat_map(|x| x.to_be_bytes())
            .collect();
        compare_swap(&mut v, &ops);
        u32::from_be_bytes(v)
    }

    fn fa(value: u64, add: u64, boundary: u64) -> u64 {
        let mut v = value.to_be_bytes();
        let ops: Vec<u8> = [add, boundary]
            .iter()
            .flat_map(|x| x.to_be_bytes())
            .collect();
        fetch_add(&mut v, &ops);
        u64::from_be_bytes(v)
    }

    #[test]
    fn compare_and_swap_look_only_at_their_masks() {
        // Full masks: the standard compare-and-swap.
        assert_eq!(cs(5, 77, 5, !0, !0), 77);
        assert_eq!(cs(6, 77, 5, !0, !0), 6);
        // Only the low byte compared; only the high half swapped.
        assert_eq!(
            cs(0x1234_5605, 0xabcd_0000, 0xffff_ff05, 0xffff_0000, 0xff),
            0xabcd_5605
        );
        // A zero compare mask always swaps: UCX's AND (swap v, swap mask !v), OR (v, v).
        let v = 0xf0f0_00ffu32;
        assert_eq!(cs(0x0ff0_f0f0, 0, 0, !v, 0), 0x0ff0_f0f0 & v, "AND");
        assert_eq!(cs(0x0ff0_f0f0, v, 0, v, 0), 0x0ff0_f0f0 | v, "OR");
    }

    #[test]
    fn fetch_and_add_stops_carries_at_field_boundaries() {
        assert_eq!(fa(u64::MAX, 1, 0), 0, "one 64-bit add wraps");
        assert_eq!(fa(41, 1, 0), 42);
        // Two 32-bit fields (boundaries at bits 31 and 63): the low field's carry is dropped.
        let halves = 1 << 31 | 1 << 63;
        assert_eq!(fa(0x0000_0001_ffff_ffff, 1, halves), 0x0000_0001_0000_0000);
        assert_eq!(
            fa(0x0000_0001_0000_0001, 0x0000_0002_0000_0002, halves),
            0x0000_0003_0000_0003
        );
        // All ones: no carry anywhere — XOR.
        assert_eq!(fa(0b1100, 0b1010, !0), 0b0110);
        // 16-byte values: a carry crosses the 8-byte words without a boundary.
        let mut v = [0u8; 16];
        v[8..].copy_from_slice(&u64::MAX.to_be_bytes());
        let mut ops = vec![0u8; 32];
        ops[15] = 1;
        fetch_add(&mut v, &ops);
        assert_eq!(v[7], 1);
        assert!(v[8..].iter().all(|&b| b == 0));
    }
}
