//! What every command handler works with: the command ([`Req`]), what it may use besides the
//! model ([`Env`]), views of its input and output, the status it ends with (re-exported from
//! [`crate::model::status`]) and the output header.

use mlx5_ifc::{CmdOutHeader, CmdStatus, Layout, View, ViewMut};

use crate::fault::DmaFault;
use crate::iommu::Iommu;
pub(crate) use crate::model::status::{bad_param, bad_state, encoded, fail, CmdResult, Failure};
use crate::syndrome as syn;
use crate::Profile;

/// What a handler may use besides the model.
pub(crate) struct Env<'a> {
    pub(crate) profile: &'a Profile,
    pub(crate) iommu: &'a Iommu,
    pub(crate) dma_faults: &'a mut Vec<DmaFault>,
    /// Device time.
    pub(crate) now: u64,
}

/// One command: its header fields, its input (truncated to `input_length`) and `output_length`.
pub(crate) struct Req<'a> {
    pub(crate) opcode: u16,
    pub(crate) op_mod: u16,
    pub(crate) input: &'a [u8],
    pub(crate) outlen: usize,
}

/// Input bytes viewed as `L` (a short buffer is a bad input length).
pub(crate) fn view<L: Layout>(b: &[u8]) -> Result<View<'_, L>, Failure> {
    View::new(b).map_err(|_| fail(CmdStatus::BadInputLen, syn::INLEN_BELOW_LAYOUT))
}

/// The input viewed as `L` (its length was checked by the dispatcher).
pub(crate) fn input<'a, L: Layout>(req: &Req<'a>) -> Result<View<'a, L>, Failure> {
    view(req.input)
}

/// The output viewed as `L` (its length was checked by the dispatcher).
pub(crate) fn output<L: Layout>(out: &mut [u8]) -> Result<ViewMut<'_, L>, Failure> {
    ViewMut::new(out).map_err(|_| fail(CmdStatus::BadOutputLen, syn::OUTLEN_BELOW_LAYOUT))
}

/// Writes status and syndrome into the first 8 output bytes.
pub(crate) fn write_header(out: &mut [u8], status: u8, syndrome: u32) {
    if let Ok(mut v) = ViewMut::<CmdOutHeader>::new(out) {
        let r = v
            .set(CmdOutHeader::STATUS, status.into())
            .and_then(|v| v.set(CmdOutHeader::SYNDROME, syndrome.into()));
        if let Err(e) = r {
            log::error!("mlx5-sim: cannot write command status: {e}");
        }
    }
}
