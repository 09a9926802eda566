//! Stray DMA writes: the device writing bytes where nothing told it to — into a queue, a
//! doorbell record, a mailbox, the command queue or the driver's data — through the IOMMU, so
//! only live allocations can be hit ([`crate::Fault::DmaScribble`], [`crate::SimDevice::dma_scribble`]).

use crate::iommu::{Iommu, Unmapped};

/// One stray write of [`crate::SimDevice::dma_scribble`]: where, what was there, what the
/// device wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scribble {
    /// The IOVA written.
    pub iova: u64,
    /// The bytes there before.
    pub old: Vec<u8>,
    /// The bytes written (as many as `old`).
    pub new: Vec<u8>,
}

/// The longest single random write.
pub const MAX_SCRIBBLE_BYTES: usize = 8;

/// splitmix64: a small, well-mixed generator; the same seed gives the same sequence.
#[derive(Debug)]
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (`n` > 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Writes `bytes` at `iova` (one stray write); the bytes it replaced.
pub(crate) fn write(iommu: &Iommu, iova: u64, bytes: &[u8]) -> Result<Vec<u8>, Unmapped> {
    let mut old = vec![0u8; bytes.len()];
    iommu.read(iova, &mut old)?;
    iommu.write_release(iova, bytes)?;
    Ok(old)
}

/// `count` random writes of 1..=[`MAX_SCRIBBLE_BYTES`] random bytes at random offsets of
/// random live allocations, drawn from `seed`: the same seed over the same allocations gives
/// the same writes.
pub(crate) fn random(iommu: &Iommu, seed: u64, count: usize) -> Vec<Scribble> {
    let allocs = iommu.allocations();
    let mut rng = Rng(seed);
    let mut done = Vec::with_capacity(count.min(1 << 16));
    if allocs.is_empty() {
        return done;
    }
    for _ in 0..count {
        let (base, len) = allocs[rng.below(allocs.len() as u64) as usize];
        let off = rng.below(len as u64);
        let room = (len as u64 - off).min(MAX_SCRIBBLE_BYTES as u64);
        let n = 1 + rng.below(room) as usize;
        let new: Vec<u8> = rng.next().to_le_bytes()[..n].to_vec();
        let iova = base + off;
        if let Ok(old) = write(iommu, iova, &new) {
            done.push(Scribble { iova, old, new });
        }
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_writes_are_reproducible_and_inside_allocations() {
        let run = |seed| {
            let mut io = crate::iommu::testing::Io::new();
            let a = io.alloc(100, 8).unwrap();
            let b = io.alloc(4096, 4096).unwrap();
            let s = random(&io, seed, 50);
            for w in &s {
                let inside = |blk: &crate::DmaBlock| {
                    w.iova >= blk.iova && w.iova + w.new.len() as u64 <= blk.iova + blk.len as u64
                };
                assert!(inside(&a) || inside(&b), "{w:?}");
                let mut now = vec![0u8; w.new.len()];
                io.read(w.iova, &mut now).unwrap();
                assert_eq!(w.old.len(), w.new.len());
            }
            s
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
        assert!(random(&Iommu::new(), 1, 10).is_empty());
    }
}
