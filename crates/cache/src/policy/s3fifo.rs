//! S3-FIFO (Yang et al., "FIFO queues are all you need for cache eviction",
//! SOSP'23): a small FIFO S (10 % of the cache), a main FIFO M (the rest)
//! and a ghost FIFO G of keys (90 % of the cache's lines, libCacheSim's
//! default). New lines enter S; a line leaving S that was hit at least twice
//! there (libCacheSim's `move_to_main_threshold` = 2) moves to M, else its
//! key goes to G; a miss found in G enters M directly. M is a CLOCK of
//! 2-bit frequencies: a line leaving M with frequency > 0 is reinserted with
//! one less. Most one-hit wonders leave through S quickly ("quick demotion").

use std::collections::VecDeque;

use super::list::{Direct, Hashed, Keys, Slab};
use super::Policy;

const MOVE_TO_MAIN: u8 = 2;
const MAX_FREQ: u8 = 3;

/// A node's list: resident in S or M, or a key remembered in G.
const SMALL: u8 = 0;
const MAIN: u8 = 1;
const GHOST: u8 = 2;

/// S3-FIFO, over any keys or (`S3Fifo<Direct>`) dense ids. A line's node
/// holds its place (S, M or G) and frequency; the queues hold nodes. A ghost
/// keeps the number of its eviction from S in its node, and G is the window
/// of the last `ghost_cap` such evictions: an entry leaving the window frees
/// its node only if the node is still that ghost (not since admitted, or
/// evicted again with a newer number).
pub struct S3Fifo<K = Hashed> {
    cap: usize,
    small_cap: usize,
    ghost_cap: usize,
    slab: Slab<K>,
    small: VecDeque<u32>,
    main: VecDeque<u32>,
    ghost: VecDeque<(u32, u64)>,
    ghost_seq: u64,
}

impl S3Fifo {
    /// An empty S3-FIFO of `cap` lines (at least 1).
    pub fn new(cap: usize) -> S3Fifo {
        S3Fifo::with_keys(cap, 0)
    }
}

impl S3Fifo<Direct> {
    /// An empty S3-FIFO of `cap` lines (at least 1) over keys `0..universe`.
    pub fn dense(cap: usize, universe: usize) -> S3Fifo<Direct> {
        S3Fifo::with_keys(cap, universe)
    }
}

impl<K: Keys> S3Fifo<K> {
    fn with_keys(cap: usize, universe: usize) -> S3Fifo<K> {
        let cap = cap.max(1);
        let ghost_cap = (cap * 9 / 10).max(1);
        S3Fifo {
            cap,
            small_cap: (cap / 10).max(1),
            ghost_cap,
            slab: Slab::with_capacity(cap + ghost_cap + 1, universe),
            small: VecDeque::with_capacity(cap),
            main: VecDeque::with_capacity(cap),
            ghost: VecDeque::with_capacity(ghost_cap + 1),
            ghost_seq: 0,
        }
    }

    fn remember_ghost(&mut self, i: u32) {
        self.ghost_seq += 1;
        self.slab.node_mut(i).list = GHOST;
        self.slab.set_aux(i, self.ghost_seq);
        self.ghost.push_front((i, self.ghost_seq));
        if self.ghost.len() > self.ghost_cap {
            let (j, s) = self.ghost.pop_back().expect("the ghost queue is over its size");
            // A key that came back (and maybe left again) is not this ghost.
            if self.slab.node(j).list == GHOST && self.slab.aux(j) == s {
                self.slab.release(j);
            }
        }
    }

    /// Evicts from S until one line leaves the cache, moving frequently hit
    /// lines to M on the way; None if every line of S moved to M.
    fn evict_small(&mut self) -> Option<u64> {
        while let Some(i) = self.small.pop_back() {
            let m = self.slab.node_mut(i);
            if m.flag >= MOVE_TO_MAIN {
                m.flag = 0;
                m.list = MAIN;
                self.main.push_front(i);
            } else {
                let key = self.slab.key(i);
                self.remember_ghost(i);
                return Some(key);
            }
        }
        None
    }

    fn evict_main(&mut self) -> Option<u64> {
        while let Some(i) = self.main.pop_back() {
            let m = self.slab.node_mut(i);
            if m.flag > 0 {
                m.flag -= 1;
                self.main.push_front(i);
            } else {
                let key = self.slab.key(i);
                self.slab.release(i);
                return Some(key);
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

    /// A line that missed, with its node if it has one (a ghost).
    #[inline]
    fn admit_node(&mut self, key: u64, node: Option<u32>) -> Option<u64> {
        let victim = if self.len() >= self.cap { self.evict() } else { None };
        // The eviction may have pushed this line's own ghost out of G.
        match node {
            Some(i) if self.slab.node(i).list == GHOST => {
                *self.slab.node_mut(i) = super::list::Meta { list: MAIN, flag: 0 };
                self.main.push_front(i);
            }
            _ => {
                let i = self.slab.alloc(key, SMALL);
                self.small.push_front(i);
            }
        }
        victim
    }
}

impl<K: Keys> Policy for S3Fifo<K> {
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
        self.slab.get(key).is_some_and(|i| self.slab.node(i).list != GHOST)
    }
    #[inline]
    fn lookup(&mut self, key: u64) -> bool {
        match self.slab.get(key) {
            Some(i) if self.slab.node(i).list != GHOST => {
                let m = self.slab.node_mut(i);
                m.flag = (m.flag + 1).min(MAX_FREQ);
                true
            }
            _ => false,
        }
    }
    fn admit(&mut self, key: u64) -> Option<u64> {
        let node = self.slab.get(key);
        self.admit_node(key, node)
    }
    /// One index lookup per access: a miss goes on with the node found.
    #[inline]
    fn access(&mut self, key: u64) -> (bool, Option<u64>) {
        match self.slab.get(key) {
            Some(i) if self.slab.node(i).list != GHOST => {
                let m = self.slab.node_mut(i);
                m.flag = (m.flag + 1).min(MAX_FREQ);
                (true, None)
            }
            node => (false, self.admit_node(key, node)),
        }
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
        let list_of = |p: &S3Fifo, k| p.slab.node(p.slab.get(k).unwrap()).list;
        assert_eq!(list_of(&p, 0), GHOST);
        // 0 comes back from the ghost straight into M.
        assert_eq!(p.access(0), (false, Some(1)));
        assert_eq!(p.main.front().map(|&i| p.slab.key(i)), Some(0));
        // A line hit twice in S moves to M instead of leaving.
        assert!(p.lookup(2) && p.lookup(2));
        assert_eq!(p.access(11), (false, Some(3)));
        assert_eq!(list_of(&p, 2), MAIN);
    }
}
