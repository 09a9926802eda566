//! Page requests at run time: the PAGE_REQUEST events of the pages EQ, answered at once.
//!
//! The firmware asks for pages when it needs them — a command it executes may wait until they
//! arrive — and offers pages back when it no longer does. Its requests arrive on the pages EQ
//! (subscribed to PAGE_REQUEST, type 0x0b, only), which the driver drains
//!
//! * on every poll while a command waits in its entry ([`crate::fw::cmdq::CmdQueue::exec`]; the
//!   waiting thread that holds the pages lock), the answers going through the pages entry
//!   ([`Slot::Pages`], the last) — a bare-metal driver's worker;
//! * whenever the driver services events otherwise: `Device::poll_async_events`,
//!   `Device::poll_completion_events`, `Device::check_health`, `Device::service_page_requests`.
//!
//! An event's data (`pages_req_event`): a 16-bit word whose bit 15 marks an embedded-CPU
//! function and bit 14 "release all pages", the 16-bit `function_id`, and `num_pages`, a
//! signed 32-bit count. The answer: `num_pages` > 0, MANAGE_PAGES give of that many pages (when
//! the pool is full or the platform has no memory, MANAGE_PAGES op_mod 0, "cannot give", so
//! the firmware fails what waits instead of waiting forever); `num_pages` < 0, MANAGE_PAGES
//! take of that many, every address returned checked against the pool (`crate::fw::pages`),
//! the chunks left with no page of the device's freed; "release all": the device's pages are
//! forgotten and their chunks quarantined (the device says it dropped them, nothing proves
//! it). A request for another function (this driver runs one PF, function 0) is refused with a
//! warning, never acted on.
//!
//! A request the driver cannot answer is counted and logged, and the wait goes on: the
//! firmware decides what becomes of the command that waits (it fails it, or the wait ends at
//! the command timeout). Only an error that left the device unusable (a MANAGE_PAGES that
//! timed out, a fatal health state) ends the wait early. Each poll handles at most
//! [`MAX_EVENTS_PER_POLL`] events, taken one at a time and none once the waiting command's
//! deadline has passed, so a device raising events without end cannot keep the driver from its
//! deadline by more than the answer to one request.

use mlx5_ifc::event;

use crate::error::{Error, Result};
use crate::fw::cmd::{CmdIo, Slot};
use crate::fw::eq::{Eq, Event};
use crate::fw::pages::PagePool;
use crate::io::platform::Platform;

/// Events handled per poll of the pages EQ.
pub(crate) const MAX_EVENTS_PER_POLL: usize = 16;

/// Bit 15 of the event's first word: the request is for an embedded-CPU function.
const EC_FUNCTION: u16 = 0x8000;
/// Bit 14 of the event's first word: the firmware released every page of the function.
const RELEASE_ALL: u16 = 0x4000;

/// A PAGE_REQUEST event decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PageRequestEvent {
    /// The request is for an embedded-CPU function.
    pub ec_function: bool,
    /// The firmware released every page of the function.
    pub release_all: bool,
    /// The function.
    pub function_id: u16,
    /// Pages wanted (> 0) or offered back (< 0).
    pub num_pages: i32,
}

impl PageRequestEvent {
    /// The request an event carries, if it is a PAGE_REQUEST.
    pub(crate) fn decode(e: &Event) -> Option<Self> {
        if e.event_type != event::PAGE_REQUEST {
            return None;
        }
        let d = &e.data;
        let word = u16::from_be_bytes([d[0], d[1]]);
        Some(Self {
            ec_function: word & EC_FUNCTION != 0,
            release_all: word & RELEASE_ALL != 0,
            function_id: u16::from_be_bytes([d[2], d[3]]),
            num_pages: i32::from_be_bytes([d[4], d[5], d[6], d[7]]),
        })
    }
}

/// Drains the pages EQ (at most [`MAX_EVENTS_PER_POLL`] events, one at a time, none once the
/// platform clock passes `deadline_ns`) and answers each request in [`Slot::Pages`]. An error
/// means the device is unusable now.
pub(crate) fn service<P: Platform>(
    io: &CmdIo,
    pool: &mut PagePool,
    eq: Option<&Eq>,
    p: &P,
    deadline_ns: u64,
) -> Result<()> {
    let Some(eq) = eq else {
        return Ok(());
    };
    for _ in 0..MAX_EVENTS_PER_POLL {
        if p.now_ns() > deadline_ns {
            return Ok(());
        }
        let mut ev = [Event::default()];
        if eq.poll(p, &mut ev)? == 0 {
            return Ok(());
        }
        let e = &ev[0];
        match PageRequestEvent::decode(e) {
            Some(req) => {
                answer(io, pool, p, Slot::Pages, req)?;
            }
            None => log::warn!(
                "event type {:#x} on the pages EQ, which only takes page requests; ignored",
                e.event_type
            ),
        }
    }
    Ok(())
}

/// Answers one page request through `slot`. Returns the pages given. An error means the device
/// is unusable now; other failures are counted and logged.
pub(crate) fn answer<P: Platform>(
    io: &CmdIo,
    pool: &mut PagePool,
    p: &P,
    slot: Slot,
    req: PageRequestEvent,
) -> Result<usize> {
    pool.stats.requests += 1;
    if req.ec_function || req.function_id != 0 {
        pool.stats.failures += 1;
        log::warn!(
            "page request for function {:#x}{}: this driver runs function 0 only; ignored",
            req.function_id,
            if req.ec_function {
                " (embedded CPU)"
            } else {
                ""
            }
        );
        return Ok(0);
    }
    if req.release_all {
        log::warn!(
            "the firmware released all {} pages; their memory is kept from reuse",
            pool.held()
        );
        pool.forget_all();
        return Ok(0);
    }
    let n = req.num_pages.unsigned_abs() as usize;
    let r = if req.num_pages > 0 {
        give(io, pool, p, slot, n).map(|()| n)
    } else if req.num_pages < 0 {
        pool.reclaim(io, p, slot, n).map(|got| {
            log::debug!("took back {got} of the {n} pages the firmware offered");
            0
        })
    } else {
        Ok(0)
    };
    match r {
        Ok(given) => Ok(given),
        Err(e) if io.dead().is_some() => Err(e),
        Err(e) => {
            pool.stats.failures += 1;
            log::warn!("page request for {} pages not answered: {e}", req.num_pages);
            Ok(0)
        }
    }
}

/// Gives `n` pages; when they cannot be had (the pool full, the platform out of DMA memory),
/// tells the firmware so with MANAGE_PAGES op_mod 0.
fn give<P: Platform>(io: &CmdIo, pool: &mut PagePool, p: &P, slot: Slot, n: usize) -> Result<()> {
    let r = if n > pool.room() {
        Err(Error::Capacity {
            what: "firmware page pool",
            limit: pool.room(),
        })
    } else {
        pool.give(io, p, slot, n)
    };
    match r {
        Err(e @ (Error::Capacity { .. } | Error::Platform { .. })) => {
            log::warn!("cannot give the firmware {n} pages ({e}); telling it so");
            PagePool::cannot_give(io, p, slot)?;
            Err(e)
        }
        r => r,
    }
}
