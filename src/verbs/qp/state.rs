//! The states of a QP (verbs names; the hardware's `qp_state` codes).

use core::fmt;

use mlx5_ifc::consts::qp_state;

/// QP states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpState {
    /// RESET.
    Reset,
    /// INIT.
    Init,
    /// Ready to receive.
    Rtr,
    /// Ready to send.
    Rts,
    /// Error.
    Err,
}

impl QpState {
    /// The verbs name.
    pub const fn name(self) -> &'static str {
        match self {
            QpState::Reset => "RESET",
            QpState::Init => "INIT",
            QpState::Rtr => "RTR",
            QpState::Rts => "RTS",
            QpState::Err => "ERR",
        }
    }

    pub(super) fn from_hw(v: u64) -> Option<Self> {
        Some(match v {
            qp_state::RST => QpState::Reset,
            qp_state::INIT => QpState::Init,
            qp_state::RTR => QpState::Rtr,
            qp_state::RTS => QpState::Rts,
            qp_state::ERR => QpState::Err,
            _ => return None,
        })
    }
}

impl fmt::Display for QpState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
