//! The device model, the bottom floor with host memory ([`crate::memory`]): everything the
//! device knows about its one function ([`Model`], in [`hca`]), without the code that changes it
//! in answer to commands ([`crate::fw`]) or doorbells and frames ([`crate::engine`]).
//!
//! * [`objects`]: the object table (numbers, references, queue contexts and buffers);
//! * [`mkey`]: memory keys, [`translation`] through them; [`pages`]: firmware pages and page requests;
//!   [`vport`]: the port, its addresses and registers; [`srq`]: SRQ / RMP limits;
//! * [`qp`]: a QP as the data path sees it, its state; [`runtime`]: the data path's runtime of
//!   every object, forgotten when the object is destroyed ([`Model::remove`]);
//! * [`dc`]: the Dynamically Connected transport's connections and DCT events;
//! * [`mcg`]: multicast groups and the UD QPs attached to them; [`memic`]: device memory;
//!   [`icm`]: SW ICM (software steering's memory); [`icm_map`]: the firmware's ICM addresses
//!   and what an ICM address names;
//! * [`status`]: what a failed command or model operation ends with;
//! * [`hw`]: the handle the data path and the event writers work with (model, IOMMU, DMA
//!   fault record, time).

pub(crate) mod completion;
pub(crate) mod dc;
pub(crate) mod flow_counter;
pub(crate) mod hca;
pub(crate) mod hw;
pub(crate) mod icm;
pub(crate) mod icm_map;
pub(crate) mod mcg;
pub(crate) mod memic;
pub(crate) mod mkey;
pub(crate) mod objects;
pub(crate) mod pages;
pub(crate) mod qp;
pub(crate) mod qp_info;
pub(crate) mod runtime;
pub(crate) mod sampler;
pub(crate) mod srq;
pub(crate) mod status;
pub(crate) mod translation;
pub(crate) mod vport;

pub use hca::HcaState;
pub(crate) use hca::Model;
pub(crate) use hw::Hw;
