//! rdma-core's mlx5 provider ("theirs") on a null device, for the side-by-side bench
//! (`tools/benches/vs_rdma_core.rs`).
//!
//! `build.rs` compiles their `providers/mlx5/qp.c` and `cq.c`, unchanged, from the tree or
//! tarball named by `MLX5_RDMA_CORE_SRC`, with our shim `csrc/shim.c`, which sets up one RC QP
//! and one CQ by hand over ordinary pages (rings, doorbell records, a UAR page whose BlueFlame
//! register is plain memory) and calls their real `mlx5_post_send`, `mlx5_post_recv` and
//! `mlx5_poll_cq`. Nothing executes: doorbells land in memory. [`Theirs`] is the safe handle to
//! that state. Without `MLX5_RDMA_CORE_SRC`, [`Theirs::new`] says why nothing was built.

#![deny(unreachable_pub)]
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

use std::ptr::NonNull;

/// How the provider's QP, CQ and BlueFlame register are set up (`struct theirs_cfg` of the
/// shim).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Config {
    /// QP number (put in every WQE and looked up for every CQE).
    pub qpn: u32,
    /// CQ number.
    pub cqn: u32,
    /// Send queue WQEBBs (a power of two).
    pub sq_wqebbs: u32,
    /// Work requests the send queue takes (the provider's `sq.max_post`).
    pub sq_max_post: u32,
    /// Receive queue WQEs (a power of two).
    pub rq_wqes: u32,
    /// log2 of the receive WQE stride.
    pub rq_wqe_shift: u32,
    /// Gather entries per send.
    pub max_send_sge: u32,
    /// Scatter entries per receive.
    pub max_recv_sge: u32,
    /// Inline bytes per send.
    pub max_inline_data: u32,
    /// CQ entries (a power of two).
    pub cq_entries: u32,
    /// One half of the BlueFlame register in bytes; 0 for no BlueFlame.
    pub bf_buf_size: u32,
    /// 1: the provider's spinlocks are taken (its default unless `MLX5_SINGLE_THREADED=1`).
    pub need_lock: u32,
}

/// Memories the provider writes, for the differential checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Region {
    /// The QP buffer: the receive queue, then the send queue.
    QpBuf = 0,
    /// The QP doorbell record (word 0 receive, word 1 send).
    QpDbr = 1,
    /// The UAR page (BlueFlame register at 0x800).
    Uar = 2,
    /// The CQ doorbell record (word 0: consumer index).
    CqDbr = 3,
    /// The CQ ring.
    CqRing = 4,
}

/// The fields of an `ibv_wc` the checks compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wc {
    /// `wr_id`.
    pub wr_id: u64,
    /// `ibv_wc_status` (0: success).
    pub status: u32,
    /// `ibv_wc_opcode`.
    pub opcode: u32,
    /// `qp_num`.
    pub qp_num: u32,
}

#[repr(C)]
struct Raw {
    _private: [u8; 0],
}

#[cfg(rdma_core)]
mod ffi {
    use super::{Config, Raw};
    extern "C" {
        pub(crate) fn theirs_new(cfg: *const Config) -> *mut Raw;
        pub(crate) fn theirs_free(t: *mut Raw);
        pub(crate) fn theirs_reset(t: *mut Raw);
        pub(crate) fn theirs_set_sends(
            t: *mut Raw,
            slot: u32,
            n: u32,
            addr: u64,
            len: u32,
            lkey: u32,
            data: *const u8,
        ) -> i32;
        pub(crate) fn theirs_post_send(t: *mut Raw, slot: u32, times: u64) -> i32;
        pub(crate) fn theirs_set_recv(t: *mut Raw, wr_id: u64, addr: u64, len: u32, lkey: u32);
        pub(crate) fn theirs_post_recv(t: *mut Raw, times: u64) -> i32;
        pub(crate) fn theirs_write_cqe(t: *mut Raw, slot: u32, img: *const u8);
        pub(crate) fn theirs_poll(t: *mut Raw, total: u32, per_call: u32) -> i32;
        pub(crate) fn theirs_wc(
            t: *const Raw,
            i: u32,
            wr_id: *mut u64,
            status: *mut u32,
            opcode: *mut u32,
            qp_num: *mut u32,
        );
        pub(crate) fn theirs_read(
            t: *const Raw,
            what: u32,
            off: u64,
            out: *mut u8,
            len: u64,
        ) -> i32;
    }
}

/// Without the provider: `theirs_new` fails, so nothing else is ever called.
#[cfg(not(rdma_core))]
#[allow(clippy::missing_safety_doc, clippy::too_many_arguments)]
mod ffi {
    use super::{Config, Raw};
    pub(crate) unsafe fn theirs_new(_: *const Config) -> *mut Raw {
        std::ptr::null_mut()
    }
    pub(crate) unsafe fn theirs_free(_: *mut Raw) {}
    pub(crate) unsafe fn theirs_reset(_: *mut Raw) {}
    pub(crate) unsafe fn theirs_set_sends(
        _: *mut Raw,
        _: u32,
        _: u32,
        _: u64,
        _: u32,
        _: u32,
        _: *const u8,
    ) -> i32 {
        unreachable!()
    }
    pub(crate) unsafe fn theirs_post_send(_: *mut Raw, _: u32, _: u64) -> i32 {
        unreachable!()
    }
    pub(crate) unsafe fn theirs_set_recv(_: *mut Raw, _: u64, _: u64, _: u32, _: u32) {}
    pub(crate) unsafe fn theirs_post_recv(_: *mut Raw, _: u64) -> i32 {
        unreachable!()
    }
    pub(crate) unsafe fn theirs_write_cqe(_: *mut Raw, _: u32, _: *const u8) {}
    pub(crate) unsafe fn theirs_poll(_: *mut Raw, _: u32, _: u32) -> i32 {
        unreachable!()
    }
    pub(crate) unsafe fn theirs_wc(
        _: *const Raw,
        _: u32,
        _: *mut u64,
        _: *mut u32,
        _: *mut u32,
        _: *mut u32,
    ) {
    }
    pub(crate) unsafe fn theirs_read(_: *const Raw, _: u32, _: u64, _: *mut u8, _: u64) -> i32 {
        unreachable!()
    }
}

/// rdma-core's mlx5 provider with one RC QP (in RTS) and its CQ over ordinary memory.
#[derive(Debug)]
pub struct Theirs {
    raw: NonNull<Raw>,
}

/// Inline bytes a prepared SEND list can carry (the shim's `INLINE_MAX`).
pub const INLINE_MAX: usize = 512;
/// Work requests per prepared list, completions per poll (the shim's `LIST_MAX`).
pub const LIST_MAX: u32 = 256;

impl Theirs {
    /// What was built: `"rdma-core 56.1"`, or why nothing was.
    pub fn status() -> &'static str {
        env!("MLX5_RDMA_CORE_STATUS")
    }

    /// Whether the provider was built.
    pub fn available() -> bool {
        cfg!(rdma_core)
    }

    /// Sets up the QP and CQ; `Err` says why not (not built, or a size the shim refuses).
    pub fn new(cfg: &Config) -> Result<Self, String> {
        if !Self::available() {
            return Err(Self::status().to_string());
        }
        // SAFETY: `cfg` is a valid `theirs_cfg` for the call; the shim copies it.
        let raw = unsafe { ffi::theirs_new(cfg) };
        NonNull::new(raw)
            .map(|raw| Theirs { raw })
            .ok_or_else(|| format!("the shim refused {cfg:?} (sizes must be powers of two)"))
    }

    /// Empty rings again (the provider's `mlx5_init_qp_indices`), BlueFlame offset 0.
    pub fn reset(&mut self) {
        // SAFETY: `raw` is a live handle from `theirs_new`, used by one thread (`&mut self`).
        unsafe { ffi::theirs_reset(self.raw.as_ptr()) }
    }

    /// Prepares list `slot` (0..4): `n` signaled SENDs (wr_id 0..n) of one SGE, or inline
    /// SENDs of `inline`'s bytes.
    pub fn set_sends(
        &mut self,
        slot: u32,
        n: u32,
        sge: (u64, u32, u32),
        inline: Option<&[u8]>,
    ) -> Result<(), i32> {
        let (addr, mut len, lkey) = sge;
        let data = match inline {
            Some(d) if d.len() <= INLINE_MAX => {
                len = d.len() as u32;
                d.as_ptr()
            }
            Some(_) => return Err(22),
            None => std::ptr::null(),
        };
        // SAFETY: live handle, exclusive; `data` is null or `len` readable bytes, copied by
        // the shim before it returns.
        let r = unsafe { ffi::theirs_set_sends(self.raw.as_ptr(), slot, n, addr, len, lkey, data) };
        if r == 0 {
            Ok(())
        } else {
            Err(r)
        }
    }

    /// `mlx5_post_send` of list `slot`, `times` times (a loop in C).
    #[inline]
    pub fn post_send(&mut self, slot: u32, times: u64) -> Result<(), i32> {
        // SAFETY: live handle, exclusive; the lists live as long as the handle.
        match unsafe { ffi::theirs_post_send(self.raw.as_ptr(), slot, times) } {
            0 => Ok(()),
            e => Err(e),
        }
    }

    /// Prepares the receive work request (one SGE).
    pub fn set_recv(&mut self, wr_id: u64, addr: u64, len: u32, lkey: u32) {
        // SAFETY: live handle, exclusive.
        unsafe { ffi::theirs_set_recv(self.raw.as_ptr(), wr_id, addr, len, lkey) }
    }

    /// `mlx5_post_recv` of the receive work request, `times` times (a loop in C).
    #[inline]
    pub fn post_recv(&mut self, times: u64) -> Result<(), i32> {
        // SAFETY: live handle, exclusive.
        match unsafe { ffi::theirs_post_recv(self.raw.as_ptr(), times) } {
            0 => Ok(()),
            e => Err(e),
        }
    }

    /// Plays the device: writes CQE `img` into slot `slot` (owner word last, with release).
    pub fn write_cqe(&mut self, slot: u32, img: &[u8; 64]) {
        // SAFETY: live handle, exclusive; `img` is 64 readable bytes.
        unsafe { ffi::theirs_write_cqe(self.raw.as_ptr(), slot, img.as_ptr()) }
    }

    /// `mlx5_poll_cq` until `total` (≤ 256) completions, `per_call` at a time; `None` if a call
    /// failed or found the CQ empty first.
    #[inline]
    pub fn poll(&mut self, total: u32, per_call: u32) -> Option<usize> {
        // SAFETY: live handle, exclusive; the shim checks `total` against its array.
        let n = unsafe { ffi::theirs_poll(self.raw.as_ptr(), total, per_call) };
        usize::try_from(n).ok()
    }

    /// Completion `i` of the last poll.
    pub fn wc(&self, i: u32) -> Wc {
        let mut w = Wc {
            wr_id: 0,
            status: 0,
            opcode: 0,
            qp_num: 0,
        };
        // SAFETY: live handle; four valid out pointers; the shim masks `i` into its array.
        unsafe {
            ffi::theirs_wc(
                self.raw.as_ptr(),
                i,
                &mut w.wr_id,
                &mut w.status,
                &mut w.opcode,
                &mut w.qp_num,
            )
        };
        w
    }

    /// Copies `out.len()` bytes at `off` of `region`.
    pub fn read(&self, region: Region, off: u64, out: &mut [u8]) -> Result<(), i32> {
        // SAFETY: live handle; `out` is writable for its length; the shim checks the bounds.
        let r = unsafe {
            ffi::theirs_read(
                self.raw.as_ptr(),
                region as u32,
                off,
                out.as_mut_ptr(),
                out.len() as u64,
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(r)
        }
    }
}

impl Drop for Theirs {
    fn drop(&mut self) {
        // SAFETY: the handle came from `theirs_new` and is freed once, here.
        unsafe { ffi::theirs_free(self.raw.as_ptr()) }
    }
}
