//! Intrusive doubly linked lists over one slab of nodes: the shared
//! machinery of LRU, SIEVE, ARC, 2Q and S3-FIFO. A node belongs to at most
//! one list at a time; lists are owned by the policy, the slab holds the
//! links, so moving a line between lists allocates nothing.
//!
//! A line finds its node one of two ways ([`Keys`]): [`Hashed`], a hash map
//! from any key to a slot, slots reused as lines leave (the emulator's cache
//! tier, any trace); or [`Direct`], where keys are dense ids 0..n and the
//! slot is the key itself, so an access is one array read (the offline
//! simulation, which renumbers a trace's lines once before it starts).
//!
//! The slab is two arrays: a 2-byte [`Meta`] per node (which list, a
//! policy's bit or counter), all a hit in a FIFO-like policy touches, and
//! the links, touched only when a list changes.

use std::collections::HashMap;

use foldhash::fast::FixedState;

/// A map keyed by line number. foldhash's fixed state: fast, and the same
/// across runs, so a simulation is reproducible.
pub(crate) type Map<V> = HashMap<u64, V, FixedState>;

/// Index of no node.
pub(crate) const NIL: u32 = u32::MAX;

/// The list of a node that holds no line.
pub(crate) const FREE: u8 = u8::MAX;

/// A node's state.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Meta {
    /// Which list (policy-defined), [`FREE`] for none.
    pub list: u8,
    /// A policy's bit or counter: SIEVE's visited, S3-FIFO's frequency.
    pub flag: u8,
}

const UNUSED: Meta = Meta { list: FREE, flag: 0 };

#[derive(Debug, Clone, Copy)]
struct Link {
    prev: u32,
    next: u32,
}

const UNLINKED: Link = Link { prev: NIL, next: NIL };

mod sealed {
    pub trait Sealed {}
}

/// How a line finds its node in a policy's slab: [`Hashed`] or [`Direct`].
#[allow(private_interfaces)]
pub trait Keys: Send + sealed::Sealed {
    /// Room for `slots` nodes at once; `universe` is the number of dense ids
    /// ([`Direct`] only).
    #[doc(hidden)]
    fn new(slots: usize, universe: usize) -> Self
    where
        Self: Sized;
    /// Nodes to make up front, all free.
    #[doc(hidden)]
    fn prealloc(&self) -> usize;
    /// The node of `key`, if the policy tracks it.
    #[doc(hidden)]
    fn get(&self, meta: &[Meta], key: u64) -> Option<u32>;
    /// A slot for `key`, which has none.
    #[doc(hidden)]
    fn alloc(&mut self, key: u64) -> u32;
    /// `i` no longer holds its key.
    #[doc(hidden)]
    fn release(&mut self, i: u32);
    /// The key in slot `i`.
    #[doc(hidden)]
    fn key(&self, i: u32) -> u64;
}

/// Any keys: a hash map from key to slot, freed slots reused.
#[derive(Debug)]
pub struct Hashed {
    map: Map<u32>,
    keys: Vec<u64>,
    free: Vec<u32>,
}

impl sealed::Sealed for Hashed {}

#[allow(private_interfaces)]
impl Keys for Hashed {
    fn new(slots: usize, _universe: usize) -> Hashed {
        Hashed {
            map: Map::with_capacity_and_hasher(slots, FixedState::default()),
            keys: Vec::with_capacity(slots),
            free: Vec::new(),
        }
    }
    fn prealloc(&self) -> usize {
        0
    }
    #[inline]
    fn get(&self, _meta: &[Meta], key: u64) -> Option<u32> {
        self.map.get(&key).copied()
    }
    #[inline]
    fn alloc(&mut self, key: u64) -> u32 {
        let i = match self.free.pop() {
            Some(i) => {
                self.keys[i as usize] = key;
                i
            }
            None => {
                self.keys.push(key);
                (self.keys.len() - 1) as u32
            }
        };
        self.map.insert(key, i);
        i
    }
    #[inline]
    fn release(&mut self, i: u32) {
        self.map.remove(&self.keys[i as usize]);
        self.free.push(i);
    }
    #[inline]
    fn key(&self, i: u32) -> u64 {
        self.keys[i as usize]
    }
}

/// Dense keys 0..universe: the slot is the key. A key at or beyond the
/// universe panics.
#[derive(Debug)]
pub struct Direct {
    universe: usize,
}

impl sealed::Sealed for Direct {}

#[allow(private_interfaces)]
impl Keys for Direct {
    fn new(_slots: usize, universe: usize) -> Direct {
        assert!(universe < NIL as usize, "{universe} dense ids do not fit a u32 slot");
        Direct { universe }
    }
    fn prealloc(&self) -> usize {
        self.universe
    }
    #[inline]
    fn get(&self, meta: &[Meta], key: u64) -> Option<u32> {
        (meta[key as usize].list != FREE).then_some(key as u32)
    }
    #[inline]
    fn alloc(&mut self, key: u64) -> u32 {
        key as u32
    }
    #[inline]
    fn release(&mut self, _i: u32) {}
    #[inline]
    fn key(&self, i: u32) -> u64 {
        i as u64
    }
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

/// The nodes and how keys find them.
#[derive(Debug)]
pub(crate) struct Slab<K> {
    meta: Vec<Meta>,
    links: Vec<Link>,
    keys: K,
}

impl<K: Keys> Slab<K> {
    /// Room for `slots` nodes at once over keys `0..universe` (the latter
    /// for [`Direct`] only).
    pub fn with_capacity(slots: usize, universe: usize) -> Slab<K> {
        let keys = K::new(slots, universe);
        let n = keys.prealloc();
        let (meta, links) = if n > 0 {
            (vec![UNUSED; n], vec![UNLINKED; n])
        } else {
            (Vec::with_capacity(slots), Vec::with_capacity(slots))
        };
        Slab { meta, links, keys }
    }

    #[inline]
    pub fn get(&self, key: u64) -> Option<u32> {
        self.keys.get(&self.meta, key)
    }

    #[inline]
    pub fn node(&self, i: u32) -> Meta {
        self.meta[i as usize]
    }

    #[inline]
    pub fn node_mut(&mut self, i: u32) -> &mut Meta {
        &mut self.meta[i as usize]
    }

    #[inline]
    pub fn key(&self, i: u32) -> u64 {
        self.keys.key(i)
    }

    /// Towards the head (newer).
    #[inline]
    pub fn prev(&self, i: u32) -> u32 {
        self.links[i as usize].prev
    }

    /// A node in no list may keep a number in its links' place (S3-FIFO's
    /// ghosts their eviction number); [`Slab::push_head`] overwrites it.
    #[inline]
    pub fn aux(&self, i: u32) -> u64 {
        let l = self.links[i as usize];
        (l.prev as u64) << 32 | l.next as u64
    }

    #[inline]
    pub fn set_aux(&mut self, i: u32, v: u64) {
        self.links[i as usize] = Link { prev: (v >> 32) as u32, next: v as u32 };
    }

    /// A new unlinked node for `key`, which has none.
    #[inline]
    pub fn alloc(&mut self, key: u64, list: u8) -> u32 {
        let i = self.keys.alloc(key);
        let m = Meta { list, flag: 0 };
        if i as usize == self.meta.len() {
            self.meta.push(m);
            self.links.push(UNLINKED);
        } else {
            self.meta[i as usize] = m;
        }
        i
    }

    /// Frees an unlinked node: its key has no node any more.
    #[inline]
    pub fn release(&mut self, i: u32) {
        self.meta[i as usize].list = FREE;
        self.keys.release(i);
    }

    #[inline]
    pub fn push_head(&mut self, l: &mut List, i: u32) {
        let old = l.head;
        self.links[i as usize] = Link { prev: NIL, next: old };
        if old != NIL {
            self.links[old as usize].prev = i;
        } else {
            l.tail = i;
        }
        l.head = i;
        l.len += 1;
    }

    #[inline]
    pub fn unlink(&mut self, l: &mut List, i: u32) {
        let Link { prev, next } = self.links[i as usize];
        if prev != NIL {
            self.links[prev as usize].next = next;
        } else {
            l.head = next;
        }
        if next != NIL {
            self.links[next as usize].prev = prev;
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
