//! Events and firmware pages: the async and completion EQs handed to the caller, and the page
//! requests the driver answers by itself (the pages EQ, `crate::fw::page_req`), whenever events
//! are serviced.

use crate::error::Result;
use crate::fw::cmd::Slot;
use crate::fw::eq::{Eq, Event};
use crate::fw::page_req::{self, PageRequestEvent};
use crate::fw::pages::{PageRequest, PageStats};
use crate::io::platform::Platform;

use super::Device;

impl<P: Platform> Device<P> {
    /// Completion events: which CQs got a completion since they were armed
    /// (`ibv_get_cq_event`); the EQ is re-armed. Page requests waiting are answered first.
    pub fn poll_completion_events(&self, out: &mut [Event]) -> Result<usize> {
        self.answer_page_requests()?;
        match self.comp_eq.as_ref() {
            Some(eq) => eq.poll(&self.platform, out),
            None => Ok(0),
        }
    }

    /// Asynchronous events (`ibv_get_async_event`): QP and SRQ errors, CQ errors, port changes.
    /// Page requests have an EQ of their own and are answered here first, never returned.
    pub fn poll_async_events(&self, out: &mut [Event]) -> Result<usize> {
        self.answer_page_requests()?;
        match self.async_eq.as_ref() {
            Some(eq) => eq.poll(&self.platform, out),
            None => Ok(0),
        }
    }

    /// The async EQ (QP, CQ and port events).
    pub(crate) fn async_eqn(&self) -> Option<u8> {
        self.async_eq.as_ref().map(Eq::eqn)
    }

    /// The pages EQ (PAGE_REQUEST events only), if the device raises page requests.
    pub(crate) fn pages_eqn(&self) -> Option<u8> {
        self.cmd.pages_eqn()
    }

    /// Answers the page requests waiting on the pages EQ, unless another thread is answering
    /// them. An error means the device became unusable.
    pub(crate) fn answer_page_requests(&self) -> Result<()> {
        self.cmd.try_service_pages(&self.platform, u64::MAX)
    }

    /// Pages the firmware holds.
    pub fn pages_held(&self) -> usize {
        self.cmd.with_pages(|_, pages| pages.held())
    }

    /// The firmware pages' counters: held, given, taken, requests answered, failures.
    pub fn page_stats(&self) -> PageStats {
        self.cmd.with_pages(|_, pages| pages.stats())
    }

    /// Answers the page requests on the pages EQ now, then asks the firmware (QUERY_PAGES
    /// regular) for anything still outstanding and answers that too: pages it wants are given,
    /// pages it offers are taken back. Returns the pages given. Nothing needs this — every
    /// command's wait and every event poll answers page requests — but it does no harm.
    pub fn service_page_requests(&self) -> Result<usize> {
        self.cmd.service_pages(&self.platform)?;
        let p = &self.platform;
        self.cmd.with_pages(|io, pages| {
            let n = crate::fw::pages::PagePool::query(io, p, Slot::Pages, PageRequest::Regular)?;
            let req = PageRequestEvent {
                ec_function: false,
                release_all: false,
                function_id: 0,
                num_pages: n,
            };
            page_req::answer(io, pages, p, Slot::Pages, req)
        })
    }
}
