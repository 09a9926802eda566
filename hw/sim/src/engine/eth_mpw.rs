//! Striding (multi-packet) receive queues: one WQE is a buffer of `2^n` strides of `2^s` bytes,
//! and the frames received fill it stride by stride — mlx5e's MPWQE RQ (`wq_type` 2, a linked
//! list of WQEs), mlx5_ib's striding WQs and DPDK's MPRQ (`wq_type` 3, cyclic).
//!
//! * A WQE is a 16-byte next segment (bytes 2–3: the index of the next WQE of a linked list;
//!   unused in a cyclic ring) and one data segment: the buffer's address and lkey (mlx5e's is
//!   the RQ's UMR mkey, its pages mapped by UMR WQEs from the ICOSQ). The doorbell record's word
//!   0 counts the WQEs posted (low 16 bits); the device keeps its own count of those it used up.
//! * A frame takes `ceil((bytes + shift) / stride)` strides from the first free one (`shift` is
//!   2 with `two_byte_shift_en`: the frame starts 2 bytes into its first stride). Its CQE:
//!   `wqe_id` the WQE, `wqe_counter` the first stride, `byte_cnt` the strides consumed (bits
//!   30:16) and the frame's bytes (15:0).
//! * A frame that does not fit the strides left in the WQE: a filler CQE (`byte_cnt` bit 31,
//!   the strides left) gives them back, and the frame goes to stride 0 of the next WQE; the
//!   strides of a WQE's CQEs add up to exactly its stride count (there is no "last" flag:
//!   mlx5e frees a WQE when they do). The next WQE of a linked list is the one the used-up
//!   WQE's next segment names.
//! * A frame larger than a whole WQE (or 64 KiB) never fits: dropped and counted
//!   (`eth_rx_errors`), as a port drops a frame over its MTU.

use mlx5_ifc::consts::{striding, wq_type};
use mlx5_ifc::prm::srq::Wq;
use mlx5_ifc::wqe::DataSeg;
use mlx5_ifc::{Layout, View};

use super::dma;
use super::wqe::LocalError;
use crate::events::cqe::{self, op, Cqe};
use crate::memory::queue::{dma_fault, WqRing};
use crate::model::runtime::{MpwRq, Sge};
use crate::model::Hw;

/// Bytes of a striding RQ's WQE the device reads: the next segment and one data segment.
const WQE_BYTES: usize = 16 + DataSeg::BYTES;

/// What became of a frame offered to an RQ (cyclic or striding: [`super::eth_rx`] builds the
/// CQE).
pub(super) enum Landing {
    /// No WQE is posted.
    NoWqe,
    /// A WQE could not be read (a DMA fault, recorded): the frame is gone, with no CQE.
    Lost,
    /// It went to a WQE: its CQE follows.
    At(Placed),
}

/// Where a frame went in its RQ: the CQE fields that say so, and whether the write succeeded.
pub(super) struct Placed {
    pub(super) wqe_counter: u16,
    pub(super) wqe_id: u16,
    pub(super) byte_cnt: u32,
    pub(super) wrote: Result<(), LocalError>,
}

/// A striding RQ's geometry.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Striding {
    /// A linked list (`wq_type` 2), not a cyclic ring (3).
    linked: bool,
    /// Strides per WQE.
    strides: u32,
    /// Bytes per stride.
    stride: u32,
    /// Bytes the frame starts into its first stride (`two_byte_shift_en`).
    shift: u32,
}

impl Striding {
    /// The geometry of work queue `w`, if it is a striding RQ (its encodings as CREATE_RQ
    /// checked them: [`log_num_strides`], [`log_stride_size`]).
    pub(crate) fn of(w: &View<'_, Wq>) -> Option<Striding> {
        let linked = match w.get(Wq::WQ_TYPE) {
            wq_type::LINKED_LIST_STRIDING_RQ => true,
            wq_type::CYCLIC_STRIDING_RQ => false,
            _ => return None,
        };
        let n = log_num_strides(w.get(Wq::LOG_WQE_NUM_OF_STRIDES), true)?;
        Some(Striding {
            linked,
            strides: 1 << n,
            stride: 1 << log_stride_size(w.get(Wq::LOG_WQE_STRIDE_SIZE)),
            shift: if w.get(Wq::TWO_BYTE_SHIFT_EN) == 1 {
                2
            } else {
                0
            },
        })
    }
}

/// The log2 of the strides per WQE that `log_wqe_num_of_strides` `v` encodes: 0..=7 are 9..=16;
/// with the extended range (`ext_stride_num_range`), 0xa..=0xf are 3..=8. `None` for a value
/// that encodes nothing (8, 9; or 0xa..=0xf without the extended range).
pub(crate) fn log_num_strides(v: u64, ext: bool) -> Option<u64> {
    match v {
        0..=7 => Some(striding::LOG_NUM_STRIDES_BASE + v),
        0xa..=0xf if ext => Some(v + striding::LOG_NUM_STRIDES_BASE - 0x10),
        _ => None,
    }
}

/// The log2 of the bytes per stride that `log_wqe_stride_size` `v` (3 bits) encodes: 6..=13.
pub(crate) fn log_stride_size(v: u64) -> u64 {
    striding::LOG_STRIDE_SIZE_BASE + (v & 7)
}

/// Places `data` (a frame, with its FCS if scattered) in striding RQ `rqn` (`pi` WQEs posted,
/// completions to `cqn`): see the module documentation.
pub(super) fn place(
    hw: &mut Hw<'_>,
    rqn: u32,
    cqn: u32,
    ring: &WqRing,
    s: &Striding,
    pi: u16,
    data: &[u8],
) -> Landing {
    let need = (data.len() as u64 + u64::from(s.shift)).div_ceil(u64::from(s.stride));
    if need > u64::from(s.strides) || data.len() > 0xffff {
        log::debug!(
            "mlx5-sim: RQ {rqn:#x}: a {}-byte frame is larger than a WQE ({} strides of {} bytes); dropped",
            data.len(),
            s.strides,
            s.stride
        );
        hw.model.rt.counters.eth_rx_errors += 1;
        return Landing::Lost;
    }
    let need = need as u32;
    let mut st = hw.model.rt.mpw_rqs.get(&rqn).copied().unwrap_or_default();
    // At most two WQEs: the current one (given back by a filler CQE if the frame does not fit)
    // and the next, in which it fits from stride 0.
    for _ in 0..2 {
        if st.consumed == pi {
            hw.model.rt.mpw_rqs.insert(rqn, st);
            return Landing::NoWqe;
        }
        let mut w = [0u8; WQE_BYTES];
        if let Err(iova) = ring.read(hw.iommu, u64::from(st.index), &mut w) {
            dma_fault(
                hw.faults,
                iova,
                w.len(),
                false,
                format!("striding RQ {rqn:#x} WQE {}", st.index),
            );
            return Landing::Lost;
        }
        let next = u16::from_be_bytes([w[2], w[3]]);
        let slot = (u32::from(st.index) & (ring.entries - 1)) as u16;
        let left = s.strides - st.used;
        if need > left {
            hw.model.rt.counters.eth_rx_mpw_fillers += 1;
            let filler = Cqe {
                opcode: op::RESP_SEND,
                wqe_id: slot,
                wqe_counter: st.used as u16,
                byte_cnt: striding::CQE_FILLER | left << striding::CQE_STRIDES_SHIFT,
                ..Cqe::default()
            };
            cqe::post(hw, cqn, &filler);
            advance(&mut st, s, next);
            continue;
        }
        let Ok(d) = View::<DataSeg>::new(&w[16..]) else {
            return Landing::Lost;
        };
        let sge = Sge {
            addr: d
                .get(DataSeg::ADDR)
                .wrapping_add(u64::from(st.used) * u64::from(s.stride))
                .wrapping_add(u64::from(s.shift)),
            len: need * s.stride - s.shift,
            lkey: d.get32(DataSeg::LKEY),
        };
        let wrote = dma::scatter(hw, ring.pd, &[sge], 0, data);
        let placed = Placed {
            wqe_counter: st.used as u16,
            wqe_id: slot,
            byte_cnt: need << striding::CQE_STRIDES_SHIFT | data.len() as u32,
            wrote,
        };
        st.used += need;
        if st.used == s.strides {
            advance(&mut st, s, next);
        }
        hw.model.rt.mpw_rqs.insert(rqn, st);
        return Landing::At(placed);
    }
    hw.model.rt.mpw_rqs.insert(rqn, st);
    Landing::NoWqe
}

/// The WQE at `st.index` is used up: on to the next (`next`, its next segment's index, in a
/// linked list; the next in the ring otherwise).
fn advance(st: &mut MpwRq, s: &Striding, next: u16) {
    st.consumed = st.consumed.wrapping_add(1);
    st.used = 0;
    st.index = if s.linked { next } else { st.consumed };
}
