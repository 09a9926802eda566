//! Events, above the model and host memory: CQEs and EQEs, CQ and EQ arming, completion and
//! asynchronous events ([`cqe`]), and a QP entering ERR with its flush completions ([`flush`]).
//! Both the command handlers ([`crate::fw`]) and the data path ([`crate::engine`]) raise them;
//! neither is imported here.

pub(crate) mod cqe;
pub(crate) mod flush;
