//! Firmware pages at run time: the PAGE_REQUEST events the firmware raises, and the commands it
//! holds until the pages it asked for arrive.
//!
//! After INIT_HCA the firmware's pages are its boot + init pages plus whatever it asked for at
//! run time. What it uses ("in use") is the boot + init pages plus, under a [`crate::PagePolicy`] with
//! `icm_pages_per_object` = k, k pages of ICM for every live CQ, QP, SRQ, RMP and memory key; the
//! rest of what it holds is free. Then:
//!
//! * **a command that needs ICM waits for it.** A CREATE_CQ/QP/SRQ/RMP/MKEY arriving when the
//!   free pages do not cover it (or while another command already waits — first come, first
//!   served) is held: its entry stays owned by the device, nothing executes, and the firmware
//!   posts a PAGE_REQUEST event (type 0x0b, `pages_req_event`: `function_id` 0, `num_pages` > 0)
//!   for what is missing beyond the pages already asked for. Each MANAGE_PAGES give executed
//!   releases the held commands the free pages now cover, oldest first; they then execute and
//!   complete as usual. MANAGE_PAGES op_mod 0 (the driver cannot give) fails every held command
//!   with NO_RESOURCES / PAGES_ALLOC_FAIL and forgets the outstanding request.
//! * **a destroy gives pages back.** With `spare_pages` = s, after a DESTROY the firmware offers
//!   back (PAGE_REQUEST with `num_pages` < 0) the free pages above s — one offer outstanding at
//!   a time: while the driver has not taken the last, destroys offer nothing more (the next
//!   destroy after the take offers what has piled up). A burst of destroys (Linux's MR cache,
//!   some 6 000 keys, at unload) thus makes a handful of offers, not thousands: thousands of
//!   queued page works kept Linux 6.1 reclaiming while it destroyed its command EQ, where the
//!   command interface refuses MANAGE_PAGES and Linux then frees the pages from its own tree
//!   while the device still holds them (docs/simulator.md, *The unload finding*).
//! * **at random moments** ([`crate::RandomPages`], seeded, so a run is reproducible): after a
//!   command executes (not QUERY_PAGES / MANAGE_PAGES), with probability `per_mille`/1000, the
//!   firmware asks for 1..=`max_pages` more pages or offers back up to that many free ones —
//!   provided some EQ is subscribed to PAGE_REQUEST.
//!   [`crate::SimDevice::request_pages`] raises one now.
//!
//! The firmware keeps its accounts exact ([`PageStats`]): a give beyond what it asked for is
//! refused (BAD_PARAM PAGES_NOT_REQUESTED, [`super::pages`]), a take returns only free pages
//! not promised to a held command, and QUERY_PAGES op_mod 3 (regular) reports the pages asked
//! for and not yet given (positive) or else offered and not yet taken (negative).
//!
//! Events go to every EQ subscribed to PAGE_REQUEST; with none, the request is still recorded
//! (QUERY_PAGES regular reports it), but a held command waits for a driver that never hears.

use mlx5_ifc::event;
use mlx5_ifc::prm::eqe::PagesReqEvent;
use mlx5_ifc::{Opcode, ViewMut};

use crate::events::eqe::{async_event, subscribed, EVENT_DATA_BYTES};
use crate::model::objects::ObjectKind;
use crate::model::pages::PageStats;
use crate::model::{HcaState, Hw, Model};
use crate::Profile;

/// The object kinds that take ICM.
const ICM_KINDS: [ObjectKind; 5] = [
    ObjectKind::Cq,
    ObjectKind::Qp,
    ObjectKind::Srq,
    ObjectKind::Rmp,
    ObjectKind::Mkey,
];

/// Pages of ICM command `opcode` needs before it can execute (0: it never waits).
pub(crate) fn icm_need(model: &Model, opcode: u16) -> u64 {
    let creates = [
        Opcode::CreateCq,
        Opcode::CreateQp,
        Opcode::CreateSrq,
        Opcode::CreateRmp,
        Opcode::CreateMkey,
    ];
    if model.state != HcaState::Initialized || !creates.iter().any(|&o| o as u16 == opcode) {
        return 0;
    }
    u64::from(model.pages.req.policy.icm_pages_per_object)
}

/// Pages the firmware uses now.
pub(crate) fn in_use(model: &Model, profile: &Profile) -> u64 {
    if model.state != HcaState::Initialized {
        return 0;
    }
    let objects: u64 = ICM_KINDS
        .iter()
        .map(|&k| model.objects.count(k) as u64)
        .sum();
    u64::from(profile.boot_pages())
        + u64::from(profile.init_pages())
        + objects.saturating_mul(u64::from(model.pages.req.policy.icm_pages_per_object))
}

/// Pages held and not in use.
pub(crate) fn free(model: &Model, profile: &Profile) -> u64 {
    (model.pages.held() as u64).saturating_sub(in_use(model, profile))
}

/// Pages a MANAGE_PAGES take may return: free, and not promised to a held command.
pub(crate) fn returnable(model: &Model, profile: &Profile) -> u64 {
    free(model, profile).saturating_sub(model.pages.req.waiting)
}

/// Pages a MANAGE_PAGES give may bring: the boot + init demand not met before INIT_HCA, the
/// pages asked for after it, nothing after TEARDOWN_HCA.
pub(crate) fn allowance(model: &Model, profile: &Profile) -> u64 {
    match model.state {
        HcaState::Enabled => (u64::from(profile.boot_pages()) + u64::from(profile.init_pages()))
            .saturating_sub(model.pages.held() as u64),
        HcaState::Initialized => model.pages.req.asked,
        HcaState::Disabled | HcaState::TornDown => 0,
    }
}

/// Whether a command needing `need` pages may execute now: nobody waits before it and the free
/// pages cover it.
pub(crate) fn may_run(model: &Model, profile: &Profile, need: u64) -> bool {
    need == 0 || (model.pages.req.waiting_commands == 0 && free(model, profile) >= need)
}

/// Whether the oldest held command, needing `need`, may execute now.
pub(crate) fn may_release(model: &Model, profile: &Profile, need: u64) -> bool {
    free(model, profile) >= need
}

/// A command needing `need` pages is held: asks for what is missing.
pub(crate) fn hold(hw: &mut Hw<'_>, profile: &Profile, need: u64) {
    let req = &mut hw.model.pages.req;
    req.waiting += need;
    req.waiting_commands += 1;
    req.stats.commands_held += 1;
    let have = free(hw.model, profile) + hw.model.pages.req.asked;
    let missing = hw.model.pages.req.waiting.saturating_sub(have);
    if missing > 0 {
        raise(hw, i64::try_from(missing).unwrap_or(i64::MAX));
    }
}

/// The oldest held command, needing `need`, leaves the queue (executed or failed).
pub(crate) fn unhold(model: &mut Model, need: u64) {
    let req = &mut model.pages.req;
    req.waiting = req.waiting.saturating_sub(need);
    req.waiting_commands = req.waiting_commands.saturating_sub(1);
}

/// Raises a PAGE_REQUEST for `n` pages (> 0: give; < 0: the firmware offers |n| back) and
/// records it.
pub(crate) fn raise(hw: &mut Hw<'_>, n: i64) {
    let n = n.clamp(-i64::from(i32::MAX), i64::from(i32::MAX));
    if n == 0 {
        return;
    }
    let req = &mut hw.model.pages.req;
    if n > 0 {
        req.asked += n.unsigned_abs();
        req.stats.requests += 1;
        req.stats.pages_requested += n.unsigned_abs();
    } else {
        req.offered += n.unsigned_abs();
        req.stats.reclaims += 1;
        req.stats.pages_offered += n.unsigned_abs();
    }
    let mut data = [0u8; EVENT_DATA_BYTES];
    let r = ViewMut::<PagesReqEvent>::new(&mut data).and_then(|mut v| {
        v.set(PagesReqEvent::FUNCTION_ID, 0)?
            .set(PagesReqEvent::NUM_PAGES, u64::from(n as i32 as u32))
            .map(drop)
    });
    if let Err(e) = r {
        log::error!("mlx5-sim: PAGE_REQUEST event data: {e}");
    }
    log::debug!("mlx5-sim: PAGE_REQUEST num_pages {n}");
    async_event(hw, event::PAGE_REQUEST, &data);
}

/// Offers back `want` free pages not yet offered (at most), if there are any.
fn offer(hw: &mut Hw<'_>, profile: &Profile, want: u64) {
    let spare = returnable(hw.model, profile).saturating_sub(hw.model.pages.req.offered);
    let n = want.min(spare);
    if n > 0 {
        raise(hw, -i64::try_from(n).unwrap_or(i64::MAX));
    }
}

/// What the firmware does after command `opcode` executed: offers pages back after a destroy
/// (`spare_pages`) and raises the random requests.
pub(crate) fn after_command(hw: &mut Hw<'_>, profile: &Profile, opcode: u16) {
    // Pages offered back and used again since (by a command that needed them) are no longer
    // on offer.
    let spare = returnable(hw.model, profile);
    let req = &mut hw.model.pages.req;
    req.offered = req.offered.min(spare);
    if hw.model.state != HcaState::Initialized
        || opcode == Opcode::ManagePages as u16
        || opcode == Opcode::QueryPages as u16
    {
        return;
    }
    let destroys = [
        Opcode::DestroyCq,
        Opcode::DestroyQp,
        Opcode::DestroySrq,
        Opcode::DestroyRmp,
        Opcode::DestroyMkey,
    ];
    if let Some(keep) = hw.model.pages.req.policy.spare_pages {
        // One offer outstanding at a time: the next only once the driver has taken the last.
        if destroys.iter().any(|&o| o as u16 == opcode) && hw.model.pages.req.offered == 0 {
            let above = returnable(hw.model, profile)
                .saturating_sub(hw.model.pages.req.offered)
                .saturating_sub(u64::from(keep));
            offer(hw, profile, above);
        }
    }
    let Some(random) = hw.model.pages.req.policy.random else {
        return;
    };
    if !heard(hw.model) {
        // Nobody would hear it: a request nobody answers would only stall later commands.
        return;
    }
    let req = &mut hw.model.pages.req;
    if req.rng.below(1000) >= u64::from(random.per_mille) {
        return;
    }
    let give = req.rng.below(2) == 0;
    let n = 1 + req.rng.below(u64::from(random.max_pages.max(1)));
    if give {
        raise(hw, i64::try_from(n).unwrap_or(i64::MAX));
    } else {
        offer(hw, profile, n);
    }
}

/// Whether some EQ is subscribed to PAGE_REQUEST.
fn heard(model: &Model) -> bool {
    model.objects.queues(ObjectKind::Eq).into_iter().any(|n| {
        model
            .objects
            .queue(ObjectKind::Eq, n)
            .is_some_and(|q| subscribed(&q.event_bitmask, event::PAGE_REQUEST))
    })
}

/// MANAGE_PAGES op_mod 0: the driver cannot give what was asked for.
pub(crate) fn alloc_fail(model: &mut Model) {
    let req = &mut model.pages.req;
    req.stats.alloc_fail_notices += 1;
    req.asked = 0;
    if req.waiting_commands > 0 {
        req.alloc_failed = true;
    }
}

/// The accounts now.
pub(crate) fn stats(model: &Model) -> PageStats {
    let req = &model.pages.req;
    PageStats {
        held: model.pages.held() as u64,
        asked: req.asked,
        offered: req.offered,
        waiting_commands: req.waiting_commands,
        ..req.stats
    }
}
