//! CLOCK (second chance): lines sit in a ring with one reference bit; a hit
//! sets the bit, and the hand clears set bits as it passes and evicts the
//! first line whose bit is clear. An approximation of LRU that needs no list
//! update on a hit, which is why operating systems and arrays use it.

use super::list::{Direct, Hashed, Keys, Slab};
use super::Policy;

/// The list of a resident line's node.
const RING: u8 = 0;

/// CLOCK with one reference bit (its node's flag); a new line enters with
/// its bit clear. Over any keys or (`Clock<Direct>`) dense ids.
pub struct Clock<K = Hashed> {
    /// The nodes in ring order.
    ring: Vec<u32>,
    slab: Slab<K>,
    cap: usize,
    hand: usize,
}

impl Clock {
    /// An empty CLOCK of `cap` lines (at least 1).
    pub fn new(cap: usize) -> Clock {
        Clock::with_keys(cap, 0)
    }
}

impl Clock<Direct> {
    /// An empty CLOCK of `cap` lines (at least 1) over keys `0..universe`.
    pub fn dense(cap: usize, universe: usize) -> Clock<Direct> {
        Clock::with_keys(cap, universe)
    }
}

impl<K: Keys> Clock<K> {
    fn with_keys(cap: usize, universe: usize) -> Clock<K> {
        let cap = cap.max(1);
        Clock { ring: Vec::with_capacity(cap), slab: Slab::with_capacity(cap, universe), cap, hand: 0 }
    }
}

impl<K: Keys> Policy for Clock<K> {
    fn name(&self) -> &'static str {
        "clock"
    }
    fn capacity(&self) -> usize {
        self.cap
    }
    fn len(&self) -> usize {
        self.ring.len()
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
        if self.ring.len() < self.cap {
            let i = self.slab.alloc(key, RING);
            self.ring.push(i);
            return None;
        }
        // At most one full turn clears every bit, so this ends.
        while self.slab.node(self.ring[self.hand]).flag != 0 {
            self.slab.node_mut(self.ring[self.hand]).flag = 0;
            self.hand = (self.hand + 1) % self.cap;
        }
        let old = self.ring[self.hand];
        let victim = self.slab.key(old);
        self.slab.release(old);
        self.ring[self.hand] = self.slab.alloc(key, RING);
        self.hand = (self.hand + 1) % self.cap;
        Some(victim)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_referenced_line_gets_a_second_chance() {
        let mut p = Clock::new(3);
        for k in [1, 2, 3] {
            p.access(k);
        }
        assert!(p.lookup(1));
        // The hand clears 1's bit and takes 2.
        assert_eq!(p.access(4), (false, Some(2)));
        assert_eq!(p.access(5), (false, Some(3)));
        assert_eq!(p.access(6), (false, Some(1)));
    }
}
