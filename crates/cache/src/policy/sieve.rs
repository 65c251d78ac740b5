//! SIEVE (Zhang et al., "SIEVE is Simpler than LRU", NSDI'24): one FIFO
//! queue with a visited bit per line. A hit only sets the bit. The hand walks
//! from the oldest line towards the newest, clearing visited bits and
//! evicting the first unvisited line; it stays where it stopped, so survivors
//! keep their place instead of moving to the head (what sets it apart from
//! CLOCK). New lines enter at the head.

use super::list::{Direct, Hashed, Keys, List, Slab, NIL};
use super::Policy;

/// SIEVE, over any keys or (`Sieve<Direct>`) dense ids.
pub struct Sieve<K = Hashed> {
    cap: usize,
    slab: Slab<K>,
    q: List,
    hand: u32,
}

impl Sieve {
    /// An empty SIEVE of `cap` lines (at least 1).
    pub fn new(cap: usize) -> Sieve {
        Sieve::with_keys(cap, 0)
    }
}

impl Sieve<Direct> {
    /// An empty SIEVE of `cap` lines (at least 1) over keys `0..universe`.
    pub fn dense(cap: usize, universe: usize) -> Sieve<Direct> {
        Sieve::with_keys(cap, universe)
    }
}

impl<K: Keys> Sieve<K> {
    fn with_keys(cap: usize, universe: usize) -> Sieve<K> {
        let cap = cap.max(1);
        Sieve { cap, slab: Slab::with_capacity(cap, universe), q: List::new(), hand: NIL }
    }

    fn evict(&mut self) -> u64 {
        let mut o = if self.hand == NIL { self.q.tail } else { self.hand };
        while self.slab.node(o).flag != 0 {
            self.slab.node_mut(o).flag = 0;
            o = self.slab.prev(o);
            if o == NIL {
                o = self.q.tail;
            }
        }
        self.hand = self.slab.prev(o);
        self.slab.unlink(&mut self.q, o);
        let key = self.slab.key(o);
        self.slab.release(o);
        key
    }
}

impl<K: Keys> Policy for Sieve<K> {
    fn name(&self) -> &'static str {
        "sieve"
    }
    fn capacity(&self) -> usize {
        self.cap
    }
    fn len(&self) -> usize {
        self.q.len
    }
    fn contains(&self, key: u64) -> bool {
        self.slab.get(key).is_some()
    }
    #[inline]
    fn lookup(&mut self, key: u64) -> bool {
        match self.slab.get(key) {
            Some(i) => {
                self.slab.node_mut(i).flag = 1;
                true
            }
            None => false,
        }
    }
    #[inline]
    fn admit(&mut self, key: u64) -> Option<u64> {
        let victim = if self.q.len >= self.cap { Some(self.evict()) } else { None };
        let i = self.slab.alloc(key, 0);
        self.slab.push_head(&mut self.q, i);
        victim
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hand_stays_where_it_stopped() {
        let mut p = Sieve::new(3);
        for k in [1, 2, 3] {
            p.access(k);
        }
        assert!(p.lookup(1));
        assert!(p.lookup(3));
        // Hand from the tail: 1 visited (cleared), 2 evicted; hand now at 3.
        assert_eq!(p.access(4), (false, Some(2)));
        // 3 visited (cleared), 4 is next towards the head: unvisited, evicted.
        assert_eq!(p.access(5), (false, Some(4)));
        // Hand wrapped past the head to the tail: 1 (cleared earlier) goes.
        assert_eq!(p.access(6), (false, Some(1)));
    }
}
