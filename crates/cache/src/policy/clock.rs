//! CLOCK (second chance): lines sit in a ring with one reference bit; a hit
//! sets the bit, and the hand clears set bits as it passes and evicts the
//! first line whose bit is clear. An approximation of LRU that needs no list
//! update on a hit, which is why operating systems and arrays use it.

use foldhash::fast::FixedState;

use super::list::Map;
use super::Policy;

/// CLOCK with one reference bit; a new line enters with its bit clear.
pub struct Clock {
    keys: Vec<u64>,
    refd: Vec<bool>,
    map: Map<u32>,
    cap: usize,
    hand: usize,
}

impl Clock {
    /// An empty CLOCK of `cap` lines (at least 1).
    pub fn new(cap: usize) -> Clock {
        let cap = cap.max(1);
        Clock {
            keys: Vec::with_capacity(cap),
            refd: Vec::with_capacity(cap),
            map: Map::with_capacity_and_hasher(cap, FixedState::default()),
            cap,
            hand: 0,
        }
    }
}

impl Policy for Clock {
    fn name(&self) -> &'static str {
        "clock"
    }
    fn capacity(&self) -> usize {
        self.cap
    }
    fn len(&self) -> usize {
        self.keys.len()
    }
    fn contains(&self, key: u64) -> bool {
        self.map.contains_key(&key)
    }
    #[inline]
    fn lookup(&mut self, key: u64) -> bool {
        match self.map.get(&key) {
            Some(&i) => {
                self.refd[i as usize] = true;
                true
            }
            None => false,
        }
    }
    #[inline]
    fn admit(&mut self, key: u64) -> Option<u64> {
        if self.keys.len() < self.cap {
            self.map.insert(key, self.keys.len() as u32);
            self.keys.push(key);
            self.refd.push(false);
            return None;
        }
        // At most one full turn clears every bit, so this ends.
        while self.refd[self.hand] {
            self.refd[self.hand] = false;
            self.hand = (self.hand + 1) % self.cap;
        }
        let slot = self.hand;
        let victim = self.keys[slot];
        self.map.remove(&victim);
        self.keys[slot] = key;
        self.map.insert(key, slot as u32);
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
