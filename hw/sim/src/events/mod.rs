//! Events, above the model and host memory: CQEs and CQ arming ([`cqe`]); EQEs, EQ arming,
//! completion, command and asynchronous events ([`eqe`]); a QP entering ERR with its flush
//! completions ([`flush`]); page faults ([`page_fault`]).
//! Both the command handlers ([`crate::fw`]) and the data path ([`crate::engine`]) raise them;
//! neither is imported here.

pub(crate) mod cqe;
pub(crate) mod eqe;
pub(crate) mod flush;
pub(crate) mod page_fault;
pub(crate) mod zip;
