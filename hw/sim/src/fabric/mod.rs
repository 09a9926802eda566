//! The wire between simulated devices: an Ethernet segment carrying RoCE v2 frames.
//!
//! Every [`crate::SimDevice`] starts on a private fabric of its own (its port alone on the wire: frames
//! to its own MAC come back to it — loopback — and others are lost as unroutable).
//! [`Fabric::attach`] moves a device's port 1 onto a shared fabric; frames go to the port whose
//! MAC (the device's vport MAC) is the frame's destination MAC, and broadcast or multicast
//! frames (the group bit of the destination MAC), and unicast frames to a MAC no port has, to
//! every other port, as a switch floods them (each device's receive steering then decides:
//! a RoCE frame not to the device's MAC is dropped, an Ethernet frame goes through the flow
//! tables, where a promiscuous entry can take it).
//!
//! Time. A fabric has one clock. In [`crate::Mode::Sync`] it is virtual: every attached device runs on
//! it (attaching raises it to the device's time if that is later), `relax()` on any of them
//! advances it, and [`Fabric::advance`] jumps it forward, running every timer and delayed frame
//! on the way. Frames are delivered inside the doorbell write that sent them, and whatever they
//! trigger (acknowledgements, responses) runs to quiescence before it returns:
//! [`Fabric::run_until_idle`]. In [`crate::Mode::Threaded`] the clock is real time since the fabric
//! was created; each device thread takes the frames for its port and services its timers.
//! Devices of both modes cannot share a fabric.
//!
//! Faults ([`WireFault`]) apply to frames as they are sent: drops, corruption (one byte flipped,
//! so the receiver's ICRC check fails), a delay, reordering (a frame overtaken by the next one),
//! duplication (a frame arriving twice), a link down; drops, reordering and duplication also at
//! random, seeded.
//!
//! Capture is off unless asked for: [`Fabric::pcap_to`] streams every frame that makes it onto
//! the wire to a pcap file as it is sent (the whole run, in bounded memory), and
//! [`Fabric::keep_frames`] keeps the last frames in memory for [`Fabric::captured`] (tests).
//!
//! Locks. A device has its state lock and its link lock (which fabric, which port: a leaf); a
//! fabric has its wire lock (a leaf too). A device hands its frames to the fabric only after
//! releasing its state lock, and the fabric releases its wire lock before it delivers a frame to
//! a device, so the wire lock and a device's state lock are never held together, and no code
//! holds two devices' state locks: no lock order can deadlock.

pub(crate) mod bth;
mod consts;
pub(crate) mod external;
pub(crate) mod frame;
pub(crate) mod icrc;
pub(crate) mod packet;
pub(crate) mod pcap;
pub(crate) mod pool;
mod wire;

pub use external::{ExternalCounters, ExternalPort, MAX_NEIGHBOURS};
pub use pcap::PCAP_MAGIC_NS;
pub(crate) use wire::Station;
pub use wire::{Fabric, FabricCounters, WireFault};

pub(crate) use wire::{Addresses, LEARNED};
