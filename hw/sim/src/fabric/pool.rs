//! Frame buffers, reused: a frame's bytes are built into a buffer taken from here, travel the
//! wire, and come back once the receiving device has taken the frame in (or a fault lost it, or
//! the request that kept it for retransmission is finished), so a run in its steady state
//! allocates no memory per frame.
//!
//! Each thread keeps up to [`LOCAL`] buffers of its own (no lock: in synchronous mode, where
//! one thread does everything, that is all there is); beyond that, one pool for the process: in
//! threaded mode one device's thread builds the frames that another's consumes, so buffers move
//! between threads, half a local cache at a time. The process pool's lock is a leaf (no other
//! lock is taken while it is held) and is held for a batch move only.

use std::cell::RefCell;
use std::sync::Mutex;

/// Buffers a thread keeps without a lock.
const LOCAL: usize = 256;

/// Buffers kept at most (the rest are freed): enough for every frame in flight of a busy run.
const KEEP: usize = 4096;
/// Buffers larger than this are freed rather than kept (jumbo frames are rare).
const KEEP_CAPACITY: usize = 16 * 1024;

static POOL: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

fn pool() -> std::sync::MutexGuard<'static, Vec<Vec<u8>>> {
    POOL.lock().unwrap_or_else(|e| e.into_inner())
}

thread_local! {
    static MINE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// An empty buffer (with the capacity of an earlier frame, when one is free).
pub(crate) fn take() -> Vec<u8> {
    MINE.with(|m| {
        let mut m = m.borrow_mut();
        if m.is_empty() {
            let mut p = pool();
            let n = p.len().min(LOCAL / 2);
            let at = p.len() - n;
            m.extend(p.drain(at..));
        }
        m.pop()
    })
    .unwrap_or_default()
}

thread_local! {
    /// The thread's spare buffer for [`take_len`], with the length it last had.
    static SPARE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A buffer of `len` bytes holding whatever they held before — for a caller that overwrites
/// every one of them (a gather): the thread's spare when there is one, so that bytes it
/// already had are not zeroed again. Give it back with [`give_spare`] (or [`give`]).
pub(crate) fn take_len(len: usize) -> Vec<u8> {
    let mut v = SPARE.with(|s| std::mem::take(&mut *s.borrow_mut()));
    if v.capacity() == 0 {
        v = take();
    }
    if v.len() >= len {
        v.truncate(len);
    } else {
        v.resize(len, 0);
    }
    v
}

/// Gives back a buffer of [`take_len`]: it becomes the thread's spare (its bytes and length
/// kept) if there is none, else it goes back to the pool.
pub(crate) fn give_spare(v: Vec<u8>) {
    let rest = SPARE.with(|s| {
        let mut s = s.borrow_mut();
        if s.capacity() == 0 && v.capacity() <= KEEP_CAPACITY {
            *s = v;
            None
        } else {
            Some(v)
        }
    });
    if let Some(v) = rest {
        give(v);
    }
}

/// A copy of `bytes` in a pooled buffer.
pub(crate) fn copy(bytes: &[u8]) -> Vec<u8> {
    let mut f = take();
    f.extend_from_slice(bytes);
    f
}

/// Gives a buffer back.
pub(crate) fn give(mut f: Vec<u8>) {
    if f.capacity() == 0 || f.capacity() > KEEP_CAPACITY {
        return;
    }
    f.clear();
    MINE.with(|m| {
        let mut m = m.borrow_mut();
        if m.len() >= LOCAL {
            let mut p = pool();
            let room = KEEP.saturating_sub(p.len()).min(LOCAL / 2);
            let at = m.len() - room;
            p.extend(m.drain(at..));
            // What the process pool has no room for is freed.
            m.truncate(LOCAL / 2);
        }
        m.push(f);
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn buffers_come_back_empty_with_their_capacity() {
        let mut f = super::take();
        f.extend_from_slice(&[7u8; 1500]);
        super::give(f);
        // Other tests share the process pool: look for ours among what it holds.
        let mut seen = Vec::new();
        let mut found = false;
        for _ in 0..super::KEEP + super::LOCAL {
            let g = super::take();
            if g.capacity() == 0 {
                break;
            }
            assert!(g.is_empty());
            found |= g.capacity() >= 1500;
            seen.push(g);
            if found {
                break;
            }
        }
        assert!(found);
        seen.into_iter().for_each(super::give);
        super::give(Vec::with_capacity(super::KEEP_CAPACITY + 1));
    }
}

#[cfg(test)]
mod moving {
    /// Buffers given on one thread are taken on another (threaded mode's producer and
    /// consumer), and a thread that only gives keeps a bounded cache.
    #[test]
    fn buffers_move_between_threads_and_caches_stay_bounded() {
        std::thread::spawn(|| {
            for _ in 0..3 * super::LOCAL {
                super::give(Vec::with_capacity(64));
            }
            super::MINE.with(|m| assert!(m.borrow().len() <= super::LOCAL));
        })
        .join()
        .unwrap();
        std::thread::spawn(|| {
            let got = (0..super::LOCAL)
                .filter(|_| super::take().capacity() > 0)
                .count();
            assert!(got > 0, "the giving thread's buffers reached this one");
        })
        .join()
        .unwrap();
    }
}
