//! Intrusive doubly linked lists over one slab of nodes, with a map from key
//! to node: the shared machinery of LRU, SIEVE, ARC and 2Q. A node belongs to
//! at most one list at a time; lists are owned by the policy, the slab holds
//! the links, so moving a line between lists allocates nothing.

use std::collections::HashMap;

use foldhash::fast::FixedState;

/// A map keyed by line number. foldhash's fixed state: fast, and the same
/// across runs, so a simulation is reproducible.
pub(crate) type Map<V> = HashMap<u64, V, FixedState>;

/// Index of no node.
pub(crate) const NIL: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
pub(crate) struct Node {
    pub key: u64,
    prev: u32,
    next: u32,
    /// Which list (policy-defined).
    pub list: u8,
    /// A policy's bit: SIEVE's visited, for instance.
    pub flag: bool,
}

/// One list: head is the most recently inserted end, tail the oldest.
#[derive(Debug, Clone, Copy)]
pub(crate) struct List {
    pub head: u32,
    pub tail: u32,
    pub len: usize,
}

impl List {
    pub const fn new() -> List {
        List { head: NIL, tail: NIL, len: 0 }
    }
}

/// The nodes, their free slots and the key map.
#[derive(Debug)]
pub(crate) struct Slab {
    nodes: Vec<Node>,
    free: Vec<u32>,
    pub map: Map<u32>,
}

impl Slab {
    pub fn with_capacity(n: usize) -> Slab {
        Slab {
            nodes: Vec::with_capacity(n),
            free: Vec::new(),
            map: Map::with_capacity_and_hasher(n, FixedState::default()),
        }
    }

    #[inline]
    pub fn get(&self, key: u64) -> Option<u32> {
        self.map.get(&key).copied()
    }

    #[inline]
    pub fn node(&self, i: u32) -> &Node {
        &self.nodes[i as usize]
    }

    #[inline]
    pub fn node_mut(&mut self, i: u32) -> &mut Node {
        &mut self.nodes[i as usize]
    }

    /// Towards the head (newer).
    #[inline]
    pub fn prev(&self, i: u32) -> u32 {
        self.nodes[i as usize].prev
    }

    /// A new unlinked node for `key`, entered in the map.
    pub fn alloc(&mut self, key: u64, list: u8) -> u32 {
        let n = Node { key, prev: NIL, next: NIL, list, flag: false };
        let i = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = n;
                i
            }
            None => {
                self.nodes.push(n);
                (self.nodes.len() - 1) as u32
            }
        };
        self.map.insert(key, i);
        i
    }

    /// Frees an unlinked node and drops its key from the map.
    pub fn release(&mut self, i: u32) {
        self.map.remove(&self.nodes[i as usize].key);
        self.free.push(i);
    }

    #[inline]
    pub fn push_head(&mut self, l: &mut List, i: u32) {
        let old = l.head;
        {
            let n = &mut self.nodes[i as usize];
            n.prev = NIL;
            n.next = old;
        }
        if old != NIL {
            self.nodes[old as usize].prev = i;
        } else {
            l.tail = i;
        }
        l.head = i;
        l.len += 1;
    }

    #[inline]
    pub fn unlink(&mut self, l: &mut List, i: u32) {
        let Node { prev, next, .. } = self.nodes[i as usize];
        if prev != NIL {
            self.nodes[prev as usize].next = next;
        } else {
            l.head = next;
        }
        if next != NIL {
            self.nodes[next as usize].prev = prev;
        } else {
            l.tail = prev;
        }
        l.len -= 1;
    }

    /// Unlinks and returns the oldest node of `l`.
    #[inline]
    pub fn pop_tail(&mut self, l: &mut List) -> Option<u32> {
        let t = l.tail;
        if t == NIL {
            return None;
        }
        self.unlink(l, t);
        Some(t)
    }

    #[inline]
    pub fn move_to_head(&mut self, l: &mut List, i: u32) {
        if l.head != i {
            self.unlink(l, i);
            self.push_head(l, i);
        }
    }
}
