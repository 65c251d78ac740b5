//! LRU: evict the line used least recently. The reference policy: its miss
//! ratio at every size comes from one pass of Mattson's stack algorithm
//! (`mrc::exact`), and the simulation here must agree with it exactly.

use super::list::{Direct, Hashed, Keys, List, Slab};
use super::Policy;

/// Least recently used, over any keys or (`Lru<Direct>`) dense ids.
pub struct Lru<K = Hashed> {
    cap: usize,
    slab: Slab<K>,
    list: List,
}

impl Lru {
    /// An empty LRU of `cap` lines (at least 1).
    pub fn new(cap: usize) -> Lru {
        Lru::with_keys(cap, 0)
    }
}

impl Lru<Direct> {
    /// An empty LRU of `cap` lines (at least 1) over keys `0..universe`.
    pub fn dense(cap: usize, universe: usize) -> Lru<Direct> {
        Lru::with_keys(cap, universe)
    }
}

impl<K: Keys> Lru<K> {
    fn with_keys(cap: usize, universe: usize) -> Lru<K> {
        let cap = cap.max(1);
        Lru { cap, slab: Slab::with_capacity(cap, universe), list: List::new() }
    }
}

impl<K: Keys> Policy for Lru<K> {
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
