//! ARC (Megiddo & Modha, "ARC: A Self-Tuning, Low Overhead Replacement
//! Cache", FAST'03): two resident LRU lists, T1 (seen once recently) and T2
//! (seen at least twice), and two ghost lists of evicted keys, B1 and B2, of
//! up to c entries together with T1 and T2. A hit in a ghost list moves the
//! target size p of T1 towards the list that would have hit. Follows the
//! paper's Figure 4 case by case, with its integer adaptation steps.

use super::list::{Direct, Hashed, Keys, List, Slab};
use super::Policy;

const T1: u8 = 0;
const T2: u8 = 1;
const B1: u8 = 2;
const B2: u8 = 3;

/// Adaptive Replacement Cache, over any keys or (`Arc<Direct>`) dense ids.
pub struct Arc<K = Hashed> {
    c: usize,
    p: usize,
    slab: Slab<K>,
    l: [List; 4],
}

impl Arc {
    /// An empty ARC of `cap` lines (at least 1).
    pub fn new(cap: usize) -> Arc {
        Arc::with_keys(cap, 0)
    }
}

impl Arc<Direct> {
    /// An empty ARC of `cap` lines (at least 1) over keys `0..universe`.
    pub fn dense(cap: usize, universe: usize) -> Arc<Direct> {
        Arc::with_keys(cap, universe)
    }
}

impl<K: Keys> Arc<K> {
    fn with_keys(cap: usize, universe: usize) -> Arc<K> {
        let c = cap.max(1);
        Arc { c, p: 0, slab: Slab::with_capacity(2 * c, universe), l: [List::new(); 4] }
    }

    fn push(&mut self, list: u8, i: u32) {
        self.slab.node_mut(i).list = list;
        self.slab.push_head(&mut self.l[list as usize], i);
    }

    fn unlink(&mut self, i: u32) {
        let list = self.slab.node(i).list as usize;
        self.slab.unlink(&mut self.l[list], i);
    }

    /// The paper's REPLACE: demote the LRU line of T1 or T2 to its ghost list.
    fn replace(&mut self, in_b2: bool) -> Option<u64> {
        let t1 = self.l[T1 as usize].len;
        let (from, to) =
            if t1 >= 1 && ((in_b2 && t1 == self.p) || t1 > self.p) || self.l[T2 as usize].len == 0 {
                (T1, B1)
            } else {
                (T2, B2)
            };
        let i = self.slab.pop_tail(&mut self.l[from as usize])?;
        self.push(to, i);
        Some(self.slab.key(i))
    }

    fn drop_tail(&mut self, list: u8) {
        if let Some(i) = self.slab.pop_tail(&mut self.l[list as usize]) {
            self.slab.release(i);
        }
    }

    fn len_of(&self, list: u8) -> usize {
        self.l[list as usize].len
    }

    /// Cases II-IV for a line that missed, with its node if it is a ghost.
    #[inline]
    fn admit_node(&mut self, key: u64, node: Option<u32>) -> Option<u64> {
        let c = self.c;
        if let Some(i) = node {
            let (b1, b2) = (self.len_of(B1), self.len_of(B2));
            let in_b2 = self.slab.node(i).list == B2;
            if in_b2 {
                // Case III: B2 would have hit; favour T2.
                let d = if b2 >= b1 { 1 } else { b1 / b2 };
                self.p = self.p.saturating_sub(d);
            } else {
                // Case II: B1 would have hit; favour T1.
                let d = if b1 >= b2 { 1 } else { b2 / b1 };
                self.p = (self.p + d).min(c);
            }
            let victim = if self.len() >= c { self.replace(in_b2) } else { None };
            self.unlink(i);
            self.push(T2, i);
            return victim;
        }
        // Case IV: not seen in any list.
        let mut victim = None;
        let l1 = self.len_of(T1) + self.len_of(B1);
        let total = l1 + self.len_of(T2) + self.len_of(B2);
        if l1 >= c {
            if self.len_of(T1) < c {
                self.drop_tail(B1);
                victim = self.replace(false);
            } else {
                // B1 is empty and T1 holds everything: evict T1's LRU outright.
                let t = self.slab.pop_tail(&mut self.l[T1 as usize]).expect("T1 is full");
                victim = Some(self.slab.key(t));
                self.slab.release(t);
            }
        } else if total >= c {
            if total >= 2 * c {
                self.drop_tail(B2);
            }
            if self.len() >= c {
                victim = self.replace(false);
            }
        }
        let i = self.slab.alloc(key, T1);
        self.slab.push_head(&mut self.l[T1 as usize], i);
        victim
    }
}

impl<K: Keys> Policy for Arc<K> {
    fn name(&self) -> &'static str {
        "arc"
    }
    fn capacity(&self) -> usize {
        self.c
    }
    fn len(&self) -> usize {
        self.len_of(T1) + self.len_of(T2)
    }
    fn contains(&self, key: u64) -> bool {
        self.slab.get(key).is_some_and(|i| self.slab.node(i).list <= T2)
    }
    #[inline]
    fn lookup(&mut self, key: u64) -> bool {
        // Case I: a hit in T1 or T2 moves the line to T2's head.
        match self.slab.get(key) {
            Some(i) if self.slab.node(i).list <= T2 => {
                self.unlink(i);
                self.push(T2, i);
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
            Some(i) if self.slab.node(i).list <= T2 => {
                self.unlink(i);
                self.push(T2, i);
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
    fn a_ghost_hit_comes_back_in_t2_and_moves_p() {
        let mut p = Arc::new(2);
        p.access(1);
        p.access(2);
        assert!(p.lookup(1)); // 1 to T2
                              // 3 pushes T1's LRU (2) into B1, as |T1| = 1 > p = 0.
        assert_eq!(p.access(3), (false, Some(2)));
        assert!(!p.contains(2));
        // 2 is a B1 ghost hit: p grows to 1, T2's LRU (1) goes to B2, 2 lands in T2.
        assert_eq!(p.access(2), (false, Some(1)));
        assert_eq!(p.p, 1);
        assert_eq!(p.slab.node(p.slab.get(2).unwrap()).list, T2);
        assert_eq!(p.slab.node(p.slab.get(1).unwrap()).list, B2);
        assert_eq!(p.len(), 2);
    }
}
