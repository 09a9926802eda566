//! Flow samplers on the data path (the objects: [`crate::fw::sampler`]).

use mlx5_ifc::prm::general_obj::FlowSampler as Fs;
use mlx5_ifc::View;

use super::objects::ObjectKind;
use super::Model;

/// What flow sampler `id` does with the frame it meets now: `(sample table, default table,
/// sampled)`, counting the frame. One frame in `sample_ratio` is sampled — every
/// `sample_ratio`-th the sampler meets, counted from its creation: how the device picks is not
/// public, and a count keeps every run alike. `None` if no such sampler.
pub(crate) fn meet(model: &mut Model, id: u32) -> Option<(u32, u32, bool)> {
    let q = model.objects.queue(ObjectKind::FlowSampler, id)?;
    let s = View::<Fs>::new(&q.ctx).ok()?;
    let ratio = s.get(Fs::SAMPLE_RATIO).max(1);
    let (sample, default) = (s.get32(Fs::SAMPLE_TABLE_ID), s.get32(Fs::DEFAULT_TABLE_ID));
    let n = model.rt.sampled.entry(id).or_insert(0);
    *n += 1;
    Some((sample, default, *n % ratio == 0))
}
