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
pub use crate::io::raw::{raw_command, Accepted, RawTarget};
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
    pub use crate::eth::mpw::{EthBurst, MAX_BURST_FRAME, MIN_BURST_FRAME};
    pub use crate::eth::rq::{EthRq, Strides};
    pub use crate::eth::rqt::Rqt;
    pub use crate::eth::rss::{ipv4_input, ipv6_input, toeplitz, MAX_INPUT, MS_RSS_KEY};
    pub use crate::eth::rules::{FlowAction, FlowMatch, FlowRule, FlowTable};
    pub use crate::eth::sq::{Checksum, EthSq, EthWr, L2_INLINE};
    pub use crate::eth::tir::{RssFields, Tir};
    pub use crate::eth::tis::{Tis, TransportDomain};
    pub use crate::eth::*;
}

use crate::device::Device;
use crate::io::platform::Platform;
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
