//! Flow counters as the device keeps them: each a [`ObjectKind::FlowCounter`] object in slot
//! `id / 4` (ids are multiples of 4: Linux's bulk query rounds a range's first id down to one),
//! its context the packets and octets it counted (BE64 each, `traffic_counter`'s layout).

use mlx5_ifc::prm::flow_counter::TrafficCounter;
use mlx5_ifc::{Layout, View, ViewMut};

use super::objects::ObjectKind;
use super::Model;

/// Counter ids are multiples of this.
pub(crate) const ID_ALIGN: u32 = 4;

/// The object slot of counter `id`, if `id` is a counter id at all.
pub(crate) fn slot(id: u32) -> Option<u32> {
    (id % ID_ALIGN == 0 && id > 0).then_some(id / ID_ALIGN)
}

/// A new counter's context: nothing counted.
pub(crate) fn zero() -> Vec<u8> {
    vec![0u8; TrafficCounter::BYTES]
}

/// `(packets, octets)` of a counter's context.
pub(crate) fn values(ctx: &[u8]) -> (u64, u64) {
    View::<TrafficCounter>::new(ctx).map_or((0, 0), |v| {
        (
            v.get(TrafficCounter::PACKETS),
            v.get(TrafficCounter::OCTETS),
        )
    })
}

/// Adds a frame of `bytes` to counter `id` (an entry's), if it is live.
pub(crate) fn count(model: &mut Model, id: u32, bytes: usize) {
    let Some(q) = slot(id).and_then(|s| model.objects.queue_mut(ObjectKind::FlowCounter, s)) else {
        return;
    };
    let (p, o) = values(&q.ctx);
    let r = ViewMut::<TrafficCounter>::new(&mut q.ctx).and_then(|mut v| {
        v.set(TrafficCounter::PACKETS, p.wrapping_add(1))?;
        v.set(TrafficCounter::OCTETS, o.wrapping_add(bytes as u64))
            .map(drop)
    });
    if let Err(e) = r {
        log::error!("mlx5-sim: flow counter {id:#x}: {e}");
    }
}
