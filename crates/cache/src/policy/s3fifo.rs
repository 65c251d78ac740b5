//! S3-FIFO (Yang et al., "FIFO queues are all you need for cache eviction",
//! SOSP'23): a small FIFO S (10 % of the cache), a main FIFO M (the rest)
//! and a ghost FIFO G of keys (90 % of the cache's lines, libCacheSim's
//! default). New lines enter S; a line leaving S that was hit at least twice
//! there (libCacheSim's `move_to_main_threshold` = 2) moves to M, else its
//! key goes to G; a miss found in G enters M directly. M is a CLOCK of
//! 2-bit frequencies: a line leaving M with frequency > 0 is reinserted with
//! one less. Most one-hit wonders leave through S quickly ("quick demotion").

use std::collections::VecDeque;

use foldhash::fast::FixedState;

use super::list::Map;
use super::Policy;

const MOVE_TO_MAIN: u8 = 2;
const MAX_FREQ: u8 = 3;

#[derive(Clone, Copy)]
struct Entry {
    freq: u8,
}

/// S3-FIFO.
pub struct S3Fifo {
    cap: usize,
    small_cap: usize,
    ghost_cap: usize,
    map: Map<Entry>,
    small: VecDeque<u64>,
    main: VecDeque<u64>,
    ghost: VecDeque<(u64, u64)>,
    ghost_map: Map<u64>,
    ghost_seq: u64,
}

impl S3Fifo {
    /// An empty S3-FIFO of `cap` lines (at least 1).
    pub fn new(cap: usize) -> S3Fifo {
        let cap = cap.max(1);
        let ghost_cap = (cap * 9 / 10).max(1);
        S3Fifo {
            cap,
            small_cap: (cap / 10).max(1),
            ghost_cap,
            map: Map::with_capacity_and_hasher(cap, FixedState::default()),
            small: VecDeque::with_capacity(cap),
            main: VecDeque::with_capacity(cap),
            ghost: VecDeque::with_capacity(ghost_cap + 1),
            ghost_map: Map::with_capacity_and_hasher(ghost_cap, FixedState::default()),
            ghost_seq: 0,
        }
    }

    fn remember_ghost(&mut self, key: u64) {
        self.ghost_seq += 1;
        self.ghost.push_front((key, self.ghost_seq));
        self.ghost_map.insert(key, self.ghost_seq);
        if self.ghost.len() > self.ghost_cap {
            let (k, s) = self.ghost.pop_back().expect("the ghost queue is over its size");
            // A key that came back and left again has a newer entry: keep that one.
            if self.ghost_map.get(&k) == Some(&s) {
                self.ghost_map.remove(&k);
            }
        }
    }

    /// Evicts from S until one line leaves the cache, moving frequently hit
    /// lines to M on the way; None if every line of S moved to M.
    fn evict_small(&mut self) -> Option<u64> {
        while let Some(k) = self.small.pop_back() {
            let e = self.map.get_mut(&k).expect("a line in S is in the map");
            if e.freq >= MOVE_TO_MAIN {
                e.freq = 0;
                self.main.push_front(k);
            } else {
                self.map.remove(&k);
                self.remember_ghost(k);
                return Some(k);
            }
        }
        None
    }

    fn evict_main(&mut self) -> Option<u64> {
        while let Some(k) = self.main.pop_back() {
            let e = self.map.get_mut(&k).expect("a line in M is in the map");
            if e.freq > 0 {
                e.freq -= 1;
                self.main.push_front(k);
            } else {
                self.map.remove(&k);
                return Some(k);
            }
        }
        None
    }

    fn evict(&mut self) -> Option<u64> {
        if self.small.len() >= self.small_cap || self.main.is_empty() {
            if let Some(k) = self.evict_small() {
                return Some(k);
            }
        }
        self.evict_main()
    }
}

impl Policy for S3Fifo {
    fn name(&self) -> &'static str {
        "s3fifo"
    }
    fn capacity(&self) -> usize {
        self.cap
    }
    fn len(&self) -> usize {
        self.small.len() + self.main.len()
    }
    fn contains(&self, key: u64) -> bool {
        self.map.contains_key(&key)
    }
    #[inline]
    fn lookup(&mut self, key: u64) -> bool {
        match self.map.get_mut(&key) {
            Some(e) => {
                e.freq = (e.freq + 1).min(MAX_FREQ);
                true
            }
            None => false,
        }
    }
    fn admit(&mut self, key: u64) -> Option<u64> {
        let victim = if self.len() >= self.cap { self.evict() } else { None };
        self.map.insert(key, Entry { freq: 0 });
        if self.ghost_map.remove(&key).is_some() {
            self.main.push_front(key);
        } else {
            self.small.push_front(key);
        }
        victim
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_hit_wonders_leave_through_the_small_queue() {
        let mut p = S3Fifo::new(10); // S 1, G 9
        for k in 0..10 {
            p.access(k);
        }
        // Everything sits in S; 0 is oldest and was never hit: to the ghost.
        assert_eq!(p.access(10), (false, Some(0)));
        assert!(p.ghost_map.contains_key(&0));
        // 0 comes back from the ghost straight into M.
        assert_eq!(p.access(0), (false, Some(1)));
        assert_eq!(p.main.front(), Some(&0));
        // A line hit twice in S moves to M instead of leaving.
        assert!(p.lookup(2) && p.lookup(2));
        assert_eq!(p.access(11), (false, Some(3)));
        assert!(p.main.contains(&2));
    }
}
