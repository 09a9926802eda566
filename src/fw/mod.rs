//! The firmware interface: the command queue and everything the driver sets up through it
//! below the verbs objects. Plumbing: private to the crate; the types callers see are
//! re-exported at the crate root.

pub(crate) mod bfreg;
pub(crate) mod caps;
pub(crate) mod cmd;
pub(crate) mod cmdq;
pub(crate) mod eq;
pub(crate) mod hca;
pub(crate) mod negotiate;
pub(crate) mod page_req;
pub(crate) mod pages;
pub(crate) mod quarantine;
pub(crate) mod queue;
pub(crate) mod uar;
pub(crate) mod vport;
