//! A list that keeps its first few elements inline: the data path's per-work-request lists
//! (a receive's scatter list, a translation's IOVA pieces) are nearly always short, and the
//! engine allocates nothing for them then; a longer one moves to the heap.

/// Up to `N` elements inline, more on the heap. Reads as a slice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SmallList<T, const N: usize> {
    Few(heapless::Vec<T, N>),
    Many(Vec<T>),
}

impl<T: Clone, const N: usize> SmallList<T, N> {
    pub(crate) fn new() -> Self {
        SmallList::Few(heapless::Vec::new())
    }

    pub(crate) fn push(&mut self, x: T) {
        match self {
            SmallList::Few(v) => {
                if let Err(x) = v.push(x) {
                    let mut m: Vec<T> = v.to_vec();
                    m.push(x);
                    *self = SmallList::Many(m);
                }
            }
            SmallList::Many(m) => m.push(x),
        }
    }
}

impl<T: Clone, const N: usize> Default for SmallList<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T, const N: usize> std::ops::Deref for SmallList<T, N> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match self {
            SmallList::Few(v) => v,
            SmallList::Many(m) => m,
        }
    }
}

/// The elements by value.
pub(crate) enum IntoIter<T, const N: usize> {
    Few(<heapless::Vec<T, N> as IntoIterator>::IntoIter),
    Many(std::vec::IntoIter<T>),
}

impl<T, const N: usize> Iterator for IntoIter<T, N> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        match self {
            IntoIter::Few(i) => i.next(),
            IntoIter::Many(i) => i.next(),
        }
    }
}

impl<T, const N: usize> IntoIterator for SmallList<T, N> {
    type Item = T;
    type IntoIter = IntoIter<T, N>;
    fn into_iter(self) -> IntoIter<T, N> {
        match self {
            SmallList::Few(v) => IntoIter::Few(v.into_iter()),
            SmallList::Many(m) => IntoIter::Many(m.into_iter()),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn it_keeps_order_across_the_move_to_the_heap() {
        let mut l = super::SmallList::<u32, 2>::new();
        for i in 0..5 {
            l.push(i);
        }
        assert_eq!(&*l, &[0, 1, 2, 3, 4]);
        assert!(matches!(l, super::SmallList::Many(_)));
        let mut s = super::SmallList::<u32, 2>::new();
        s.push(7);
        assert!(matches!(s, super::SmallList::Few(_)));
        assert_eq!(&*s, &[7]);
        assert_eq!(l.into_iter().sum::<u32>(), 10);
        assert_eq!(s.into_iter().collect::<Vec<_>>(), vec![7]);
    }
}
