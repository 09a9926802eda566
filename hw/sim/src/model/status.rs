//! What a command (or a model operation a command and the data path share) ends with when it
//! fails: its status and syndrome ([`Failure`]; the syndromes are [`crate::syndrome`]).

use mlx5_ifc::{CmdStatus, LayoutError};

use crate::syndrome as syn;

/// A failed command: status and syndrome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Failure {
    pub(crate) status: CmdStatus,
    pub(crate) syndrome: u32,
}

/// What a handler returns.
pub(crate) type CmdResult = Result<(), Failure>;

pub(crate) const fn fail(status: CmdStatus, syndrome: u32) -> Failure {
    Failure { status, syndrome }
}
pub(crate) const fn bad_param(syndrome: u32) -> Failure {
    fail(CmdStatus::BadParam, syndrome)
}
pub(crate) const fn bad_state(syndrome: u32) -> Failure {
    fail(CmdStatus::BadSysState, syndrome)
}

/// Maps a layout refusal (a value the simulator produced does not fit) to an internal error.
pub(crate) fn encoded<T>(r: Result<T, LayoutError>) -> Result<T, Failure> {
    r.map_err(|e| {
        log::error!("mlx5-sim: cannot encode output: {e}");
        fail(CmdStatus::InternalErr, syn::INTERNAL)
    })
}
