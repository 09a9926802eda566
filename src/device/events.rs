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
        self.cmd.lock().pages_eqn()
    }

    /// Answers the page requests waiting on the pages EQ, unless another thread is running a
    /// command (its wait answers them). An error means the device became unusable.
    pub(crate) fn answer_page_requests(&self) -> Result<()> {
        match self.cmd.try_lock() {
            Some(mut cmd) => cmd.service_pages(&self.platform),
            None => Ok(()),
        }
    }

    /// Pages the firmware holds.
    pub fn pages_held(&self) -> usize {
        self.cmd.lock().pages().held()
    }

    /// The firmware pages' counters: held, given, taken, requests answered, failures.
    pub fn page_stats(&self) -> PageStats {
        self.cmd.lock().pages().stats()
    }

    /// Answers the page requests on the pages EQ now, then asks the firmware (QUERY_PAGES
    /// regular) for anything still outstanding and answers that too: pages it wants are given,
    /// pages it offers are taken back. Returns the pages given. Nothing needs this — every
    /// command's wait and every event poll answers page requests — but it does no harm.
    pub fn service_page_requests(&self) -> Result<usize> {
        let mut cmd = self.cmd.lock();
        cmd.service_pages(&self.platform)?;
        let (io, pages) = cmd.io_and_pages();
        let n = crate::fw::pages::PagePool::query(
            io,
            &self.platform,
            Slot::Main,
            PageRequest::Regular,
        )?;
        let req = PageRequestEvent {
            ec_function: false,
            release_all: false,
            function_id: 0,
            num_pages: n,
        };
        page_req::answer(io, pages, &self.platform, Slot::Main, req)
    }
}
