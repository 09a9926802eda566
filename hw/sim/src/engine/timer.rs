//! The timers of an RC requester: the ack timeout and the RNR wait, in device nanoseconds.

use crate::model::qp_info::QpInfo;
use crate::model::Hw;

/// The RNR NAK timer encoding (IBTA table 45) in microseconds.
const RNR_US: [u32; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920, 2560, 3840,
    5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122_880, 163_840, 245_760,
    327_680, 491_520,
];

/// The RNR timer `code` in nanoseconds.
pub(crate) fn rnr_timer_ns(code: u8) -> u64 {
    u64::from(RNR_US[usize::from(code & 31)]) * 1000
}

/// The ack timeout of exponent `t` in nanoseconds (`None`: 0, no timeout).
pub(crate) fn ack_timeout_ns(t: u8) -> Option<u64> {
    (t != 0).then(|| 4096u64 << t.min(31))
}

/// (Re)starts the ack timer while requests wait for an acknowledgement.
pub(crate) fn arm_timer(hw: &mut Hw<'_>, info: &QpInfo) {
    let now = hw.now;
    if let Some(rt) = hw.model.rt.qps.get_mut(&info.qpn) {
        let waiting = rt.outstanding.iter().any(|r| !r.done);
        rt.timer = if waiting && rt.resend_at.is_none() {
            ack_timeout_ns(info.ack_timeout).map(|t| now + t)
        } else {
            None
        };
        if !waiting {
            rt.retries = 0;
        }
    }
    hw.model.rt.note_timers(info.qpn);
}
