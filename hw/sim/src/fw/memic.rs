//! Device memory: ALLOC_MEMIC (0x205) and DEALLOC_MEMIC (0x206), as Linux 6.1's mlx5_ib sends
//! them for `ibv_alloc_dm` / `ibv_free_dm` (docs/fields.md "Device memory"); the window and its
//! bookkeeping are the model's ([`crate::model::memic`]).
//!
//! ALLOC_MEMIC: `memic_size` bytes aligned to `64 << log_memic_addr_alignment`, inside
//! `[range_start_addr, + range_size)` — BAR0 offsets in the MEMIC window. The answer is the
//! lowest free place there (`memic_start_addr`, a BAR0 offset; its bytes zeroed). Refusals:
//! a size of 0 or above `max_memic_size`, an alignment above `log_max_memic_addr_alignment`, a
//! range outside the window, or a device without `memic` (BAD_PARAM MEMIC_PARAM); no room in
//! the range (NO_RESOURCES MEMIC_NO_ROOM — what makes Linux try its next page).
//!
//! DEALLOC_MEMIC: exactly an allocation handed out, address and size (BAD_PARAM
//! MEMIC_UNKNOWN); one that a MEMIC key still reaches is refused (RES_BUSY MEMIC_IN_USE).

use mlx5_ifc::prm::memic::{AllocMemicIn, AllocMemicOut, DeallocMemicIn};
use mlx5_ifc::CmdStatus;

use super::cmd::{bad_param, encoded, fail, input, output, CmdResult, Env, Req};
use crate::model::memic::AllocError;
use crate::model::Model;
use crate::syndrome as syn;

pub(crate) fn alloc_memic(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    out: &mut [u8],
) -> CmdResult {
    let i = input::<AllocMemicIn>(req)?;
    let range = (
        i.get(AllocMemicIn::RANGE_START_ADDR),
        i.get(AllocMemicIn::RANGE_SIZE),
    );
    let size = i.get(AllocMemicIn::MEMIC_SIZE);
    let align = i.get(AllocMemicIn::LOG_MEMIC_ADDR_ALIGNMENT);
    let at = model.memic.alloc(range, size, align).map_err(|e| match e {
        AllocError::Param => bad_param(syn::MEMIC_PARAM),
        AllocError::NoRoom => fail(CmdStatus::NoResources, syn::MEMIC_NO_ROOM),
    })?;
    encoded(output::<AllocMemicOut>(out)?.set(AllocMemicOut::MEMIC_START_ADDR, at))?;
    Ok(())
}

pub(crate) fn dealloc_memic(
    model: &mut Model,
    _: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    let i = input::<DeallocMemicIn>(req)?;
    let (start, size) = (
        i.get(DeallocMemicIn::MEMIC_START_ADDR),
        i.get(DeallocMemicIn::MEMIC_SIZE),
    );
    if !model.memic.allocated(start, size) {
        return Err(bad_param(syn::MEMIC_UNKNOWN));
    }
    if super::mkey::memic_in_use(model, start, size) {
        return Err(fail(CmdStatus::ResBusy, syn::MEMIC_IN_USE));
    }
    if !model.memic.dealloc(start, size) {
        return Err(bad_param(syn::MEMIC_UNKNOWN));
    }
    Ok(())
}
