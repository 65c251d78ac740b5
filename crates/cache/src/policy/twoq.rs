//! 2Q, the full version (Johnson & Shasha, "2Q: A Low Overhead High
//! Performance Buffer Management Replacement Algorithm", VLDB'94): new lines
//! enter a FIFO A1in (Kin = 25 % of the cache, the paper's advice); lines
//! pushed out of A1in are remembered in the ghost FIFO A1out (Kout = 50 %);
//! a line found in A1out was re-referenced after a correlated burst and goes
//! to the LRU list Am. Hits in A1in change nothing, so a scan passes through
//! A1in without touching Am.

use super::list::{Direct, Hashed, Keys, List, Slab};
use super::Policy;

const A1IN: u8 = 0;
const AM: u8 = 1;
const A1OUT: u8 = 2;

/// Full 2Q, over any keys or (`TwoQ<Direct>`) dense ids.
pub struct TwoQ<K = Hashed> {
    cap: usize,
    kin: usize,
    kout: usize,
    slab: Slab<K>,
    a1in: List,
    am: List,
    a1out: List,
}

impl TwoQ {
    /// An empty 2Q of `cap` lines (at least 1).
    pub fn new(cap: usize) -> TwoQ {
        TwoQ::with_keys(cap, 0)
    }
}

impl TwoQ<Direct> {
    /// An empty 2Q of `cap` lines (at least 1) over keys `0..universe`.
    pub fn dense(cap: usize, universe: usize) -> TwoQ<Direct> {
        TwoQ::with_keys(cap, universe)
    }
}

impl<K: Keys> TwoQ<K> {
    fn with_keys(cap: usize, universe: usize) -> TwoQ<K> {
        let cap = cap.max(1);
        TwoQ {
            cap,
            kin: (cap / 4).max(1),
            kout: (cap / 2).max(1),
            slab: Slab::with_capacity(cap + cap / 2 + 1, universe),
            a1in: List::new(),
            am: List::new(),
            a1out: List::new(),
        }
    }

    /// Frees one resident slot: from A1in (into A1out) when A1in is over its
    /// share, else from Am. `ghost` is the node of the line being admitted,
    /// if A1out remembers it: None if A1out just forgot it.
    fn reclaim(&mut self, ghost: &mut Option<u32>) -> u64 {
        if self.a1in.len > self.kin || self.am.len == 0 {
            let y = self.slab.pop_tail(&mut self.a1in).expect("A1in holds the lines");
            let key = self.slab.key(y);
            self.slab.node_mut(y).list = A1OUT;
            self.slab.push_head(&mut self.a1out, y);
            if self.a1out.len > self.kout {
                let z = self.slab.pop_tail(&mut self.a1out).expect("A1out is over its size");
                if *ghost == Some(z) {
                    *ghost = None;
                }
                self.slab.release(z);
            }
            key
        } else {
            let y = self.slab.pop_tail(&mut self.am).expect("Am holds the lines");
            let key = self.slab.key(y);
            self.slab.release(y);
            key
        }
    }

    /// A line that missed, with its node if A1out remembers it.
    #[inline]
    fn admit_node(&mut self, key: u64, mut node: Option<u32>) -> Option<u64> {
        let victim = if self.len() >= self.cap { Some(self.reclaim(&mut node)) } else { None };
        match node {
            Some(i) => {
                // Remembered in A1out: a real re-reference, into Am.
                self.slab.unlink(&mut self.a1out, i);
                self.slab.node_mut(i).list = AM;
                self.slab.push_head(&mut self.am, i);
            }
            None => {
                let i = self.slab.alloc(key, A1IN);
                self.slab.push_head(&mut self.a1in, i);
            }
        }
        victim
    }
}

impl<K: Keys> Policy for TwoQ<K> {
    fn name(&self) -> &'static str {
        "2q"
    }
    fn capacity(&self) -> usize {
        self.cap
    }
    fn len(&self) -> usize {
        self.a1in.len + self.am.len
    }
    fn contains(&self, key: u64) -> bool {
        self.slab.get(key).is_some_and(|i| self.slab.node(i).list != A1OUT)
    }
    #[inline]
    fn lookup(&mut self, key: u64) -> bool {
        match self.slab.get(key) {
            Some(i) => match self.slab.node(i).list {
                AM => {
                    self.slab.move_to_head(&mut self.am, i);
                    true
                }
                A1IN => true,
                _ => false,
            },
            None => false,
        }
    }
    fn admit(&mut self, key: u64) -> Option<u64> {
        let node = self.slab.get(key);
        self.admit_node(key, node)
    }
    /// One index lookup per access: a miss goes on with the node found.
    #[inline]
    fn access(&mut self, key: u64) -> (bool, Option<u64>) {
        let node = self.slab.get(key);
        if let Some(i) = node {
            match self.slab.node(i).list {
                AM => {
                    self.slab.move_to_head(&mut self.am, i);
                    return (true, None);
                }
                A1IN => return (true, None),
                _ => {}
            }
        }
        (false, self.admit_node(key, node))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_seen_again_after_a1in_goes_to_am() {
        let mut p = TwoQ::new(4); // kin 1, kout 2
        for k in 1..=4 {
            p.access(k);
        }
        // A1in holds 4 > kin: its oldest (1) goes to A1out.
        assert_eq!(p.access(5), (false, Some(1)));
        assert!(!p.contains(1));
        assert_eq!(p.access(1), (false, Some(2)));
        assert_eq!(p.slab.node(p.slab.get(1).unwrap()).list, AM);
        // A hit in A1in does not promote.
        assert!(p.lookup(5));
        assert_eq!(p.slab.node(p.slab.get(5).unwrap()).list, A1IN);
    }
}
