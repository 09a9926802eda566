//! Plumbing for diagnostics, benches, fuzz targets and the driver's own tests — **not** part
//! of the driver's API.
//!
//! Contract: nothing here is stable. Names, signatures, layouts and behaviour may change in
//! any release without notice, and items may disappear; code using this module pins the
//! driver's exact version. What is here bypasses the driver's bookkeeping or exposes its
//! internal geometry, so it can break the invariants the verbs API keeps (see each item's
//! own contract). Programs that send and receive use the crate root, [`crate::qp`],
//! [`crate::cq`], [`crate::eth`] and [`crate::cm`] instead.

pub use crate::cm::limits::req_wait_ms;
pub use crate::io::dma::{DmaBuf, DmaRing};
pub use crate::io::shared::SharedTable;
pub use crate::verbs::qp::sizing::{max_qp_cap, size_qp, sq_overhead, QpLimits, SizeMode, SizedQp};

/// The CM's MADs as bytes (IBTA vol. 1 ch. 12 layouts, field by field): what the golden tests
/// compare and the fuzz targets feed the CM with.
pub mod mad {
    pub use crate::cm::mad::*;
}

/// The Ethernet objects an [`EthPort`](crate::eth::EthPort) is made of — transport domain,
/// TIS, send and receive queues, RQ tables, TIRs, the receive flow table and its rules — for
/// the tests that drive them one by one.
pub mod eth {
    pub use crate::eth::flow::{MacSteering, RxFilter, BROADCAST};
    pub use crate::eth::rq::EthRq;
    pub use crate::eth::rqt::Rqt;
    pub use crate::eth::rss::{ipv4_input, ipv6_input, toeplitz, MAX_INPUT, MS_RSS_KEY};
    pub use crate::eth::rules::{FlowAction, FlowMatch, FlowRule, FlowTable};
    pub use crate::eth::sq::{Checksum, EthSq, EthWr, L2_INLINE};
    pub use crate::eth::tir::{RssFields, Tir};
    pub use crate::eth::tis::{Tis, TransportDomain};
    pub use crate::eth::*;
}

use crate::device::Device;
use crate::verbs::qp::Qp;

pub use crate::fw::uar::Uar;
/// The memory barriers the driver's data path uses, by name (`io/barrier.rs`).
pub mod barrier {
    pub use crate::io::barrier::*;
}

/// The UAR page the device's own doorbells go to (the CQs' arming), once it is open.
pub fn device_uar<P: Platform>(dev: &Device<P>) -> Option<Uar> {
    dev.uar()
}

/// The UAR page of a QP's doorbells and BlueFlame register.
pub fn qp_uar<P: Platform>(qp: &Qp<'_, P>) -> Uar {
    qp.uar()
}

/// The completion EQ every CQ reports to.
pub fn comp_eqn<P: Platform>(dev: &Device<P>) -> Option<u8> {
    dev.comp_eqn()
}

/// The async EQ (QP, CQ and port events).
pub fn async_eqn<P: Platform>(dev: &Device<P>) -> Option<u8> {
    dev.async_eqn()
}

/// The pages EQ (PAGE_REQUEST events only), if the device raises page requests.
pub fn pages_eqn<P: Platform>(dev: &Device<P>) -> Option<u8> {
    dev.pages_eqn()
}
use crate::error::Result;
use crate::io::platform::Platform;

/// Sends one firmware command as given (`input` is the whole command input, its header
/// included; `output` receives the whole output) on `dev`'s command queue, bypassing every
/// object the driver tracks. For diagnostics and for tests of the firmware's own answers.
///
/// # Safety
///
/// A command can point the device at any memory its IOMMU domain reaches — the command queue,
/// a ring, a work-request buffer, a page the platform will reuse — and can destroy or change
/// objects the driver still uses (a QP, a CQ, a key). The caller promises that the command
/// names no memory and no object the driver owns or will free, or that the driver is not used
/// (and the device is reset) after it.
#[allow(unsafe_code)] // A contract marker only: the body performs no unsafe operation.
pub unsafe fn raw_command<P: Platform>(
    dev: &Device<P>,
    input: &[u8],
    output: &mut [u8],
) -> Result<()> {
    dev.exec_raw(input, output)
}
