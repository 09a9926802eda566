//! Packet pacing: SET_PP_RATE_LIMIT (0x780), the device's table of rates, and the rate an SQ
//! takes from it (MODIFY_SQ `modify_bitmask` bit 0, `sqc.packet_pacing_rate_limit_index`) —
//! what Linux's `mlx5_rl_add_rate` / `mlx5_rl_remove_rate` and mlx5_ib's raw packet QP rate
//! limit (`ibv_modify_qp_rate_limit`) send. The wire keeps the rate ([`crate::engine`]'s
//! Ethernet SQ: a frame leaves when the previous one's bits have gone at the rate).
//!
//! SET_PP_RATE_LIMIT checks, each with its syndrome (BAD_PARAM):
//! * `rate_limit_index` 1 to `packet_pacing_rate_table_size` − 1 (PP_RATE_INDEX; 0 is "no
//!   limit" in an SQ context, not an entry);
//! * `rate_limit` 0 (frees the entry) or `packet_pacing_min_rate` to `_max_rate` kbit/s
//!   (PP_RATE_RANGE);
//! * no `burst_upper_bound` or `typical_packet_size` (PP_RATE_RANGE): the profile offers
//!   neither (`packet_pacing_burst_bound`, `packet_pacing_typical_size` clear).
//!
//! An SQ's index must be 0 or a set entry (PP_RATE_INDEX). Freeing an entry an SQ still uses
//! leaves that SQ unpaced (as if its index were 0).

use mlx5_ifc::prm::pacing::{QosCap, SetPpRateLimitContext as Ctx, SetPpRateLimitIn};

use super::cmd::{bad_param, input, CmdResult, Env, Failure, Req};
use crate::model::Model;
use crate::syndrome as syn;

pub(crate) fn set_pp_rate_limit(
    model: &mut Model,
    env: &mut Env<'_>,
    req: &Req<'_>,
    _: &mut [u8],
) -> CmdResult {
    if env.profile.qos_field(QosCap::PACKET_PACING) == 0 {
        return Err(bad_param(syn::PP_RATE_INDEX));
    }
    let i = input::<SetPpRateLimitIn>(req)?;
    let index = i.get(SetPpRateLimitIn::RATE_LIMIT_INDEX);
    let size = env.profile.qos_field(QosCap::PACKET_PACING_RATE_TABLE_SIZE);
    if index == 0 || index >= size {
        return Err(bad_param(syn::PP_RATE_INDEX));
    }
    let c = i.nested(SetPpRateLimitIn::CTX);
    let rate = c.get32(Ctx::RATE_LIMIT);
    let (min, max) = (
        env.profile.qos_field(QosCap::PACKET_PACING_MIN_RATE),
        env.profile.qos_field(QosCap::PACKET_PACING_MAX_RATE),
    );
    let burst = c.get(Ctx::BURST_UPPER_BOUND) != 0 || c.get(Ctx::TYPICAL_PACKET_SIZE) != 0;
    if burst || (rate != 0 && !(min..=max).contains(&u64::from(rate))) {
        return Err(bad_param(syn::PP_RATE_RANGE));
    }
    if rate == 0 {
        model.rates.remove(&(index as u16));
    } else {
        model.rates.insert(index as u16, rate);
    }
    Ok(())
}

/// Checks an SQ's `packet_pacing_rate_limit_index`: 0 or a set entry.
pub(crate) fn check_index(model: &Model, index: u64) -> Result<(), Failure> {
    if index == 0 || model.rates.contains_key(&(index as u16)) {
        Ok(())
    } else {
        Err(bad_param(syn::PP_RATE_INDEX))
    }
}
