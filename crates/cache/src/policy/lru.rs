//! LRU: evict the line used least recently. The reference policy: its miss
//! ratio at every size comes from one pass of Mattson's stack algorithm
//! (`mrc::exact`), and the simulation here must agree with it exactly.

use super::list::{Hashed, List, Slab};
use super::Policy;

/// Least recently used.
pub struct Lru {
    cap: usize,
    slab: Slab<Hashed>,
    list: List,
}

impl Lru {
    /// An empty LRU of `cap` lines (at least 1).
    pub fn new(cap: usize) -> Lru {
        let cap = cap.max(1);
        Lru { cap, slab: Slab::with_capacity(cap, 0), list: List::new() }
    }
}

impl Policy for Lru {
    fn name(&self) -> &'static str {
        "lru"
    }
    fn capacity(&self) -> usize {
        self.cap
    }
    fn len(&self) -> usize {
        self.list.len
    }
    fn contains(&self, key: u64) -> bool {
        self.slab.get(key).is_some()
    }
    #[inline]
    fn lookup(&mut self, key: u64) -> bool {
        match self.slab.get(key) {
            Some(i) => {
                self.slab.move_to_head(&mut self.list, i);
                true
            }
            None => false,
        }
    }
    #[inline]
    fn admit(&mut self, key: u64) -> Option<u64> {
        let mut victim = None;
        if self.list.len >= self.cap {
            let t = self.slab.pop_tail(&mut self.list).expect("a full list has a tail");
            victim = Some(self.slab.key(t));
            self.slab.release(t);
        }
        let i = self.slab.alloc(key, 0);
        self.slab.push_head(&mut self.list, i);
        victim
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_the_least_recently_used() {
        let mut p = Lru::new(3);
        for k in [1, 2, 3] {
            p.access(k);
        }
        assert!(p.lookup(1));
        assert_eq!(p.access(4), (false, Some(2)));
        assert_eq!(p.access(5), (false, Some(3)));
        assert_eq!(p.access(6), (false, Some(1)));
    }
}
