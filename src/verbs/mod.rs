//! The verbs objects: protection domains, memory regions, CQs, SRQs and QPs, and the
//! work-request tables through which CQs find what their queues posted.

pub mod cq;
pub mod mr;
pub mod pd;
pub mod qp;
pub mod srq;
pub(crate) mod wqe;
pub(crate) mod wr_table;
