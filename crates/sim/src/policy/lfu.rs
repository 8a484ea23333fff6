//! LFU, as libCacheSim's `LFU.c`: objects sit in per-frequency queues (a new object has
//! frequency 1; a hit moves it to the back of the next frequency's queue); the victim is the
//! front of the lowest non-empty frequency's queue — among equals, the object that reached that
//! frequency first.
//!
//! The frequency queues form a list sorted by frequency, so the lowest is always the first and
//! every operation is O(1).

use super::{Links, List, Policy, Runner, Space, NIL};
use crate::flat::SimTrace;

struct Bucket {
    freq: u64,
    objs: List,
    prev: u32,
    next: u32,
}

pub(crate) struct Lfu {
    links: Links,
    size: Vec<u32>,
    bucket_of: Vec<u32>,
    buckets: Vec<Bucket>,
    free: Vec<u32>,
    first: u32,
    space: Space,
}

pub(crate) fn build(capacity: u64, trace: &SimTrace<'_>) -> Box<dyn Runner> {
    Box::new(Lfu {
        links: Links::new(trace.n_objects),
        size: vec![0; trace.n_objects],
        bucket_of: vec![NIL; trace.n_objects],
        buckets: Vec::new(),
        free: Vec::new(),
        first: NIL,
        space: Space::new(capacity),
    })
}

impl Lfu {
    /// A new empty bucket of `freq` linked after `after` (or first when `after` is NIL).
    fn new_bucket(&mut self, freq: u64, after: u32) -> u32 {
        let next = if after == NIL {
            self.first
        } else {
            self.buckets[after as usize].next
        };
        let b = Bucket {
            freq,
            objs: List::default(),
            prev: after,
            next,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.buckets[id as usize] = b;
                id
            }
            None => {
                self.buckets.push(b);
                (self.buckets.len() - 1) as u32
            }
        };
        if after == NIL {
            self.first = id;
        } else {
            self.buckets[after as usize].next = id;
        }
        if next != NIL {
            self.buckets[next as usize].prev = id;
        }
        id
    }

    fn drop_if_empty(&mut self, b: u32) {
        if !self.buckets[b as usize].objs.is_empty() {
            return;
        }
        let (p, n) = (self.buckets[b as usize].prev, self.buckets[b as usize].next);
        if p == NIL {
            self.first = n;
        } else {
            self.buckets[p as usize].next = n;
        }
        if n != NIL {
            self.buckets[n as usize].prev = p;
        }
        self.free.push(b);
    }

    fn evict(&mut self) {
        let b = self.first;
        let x = self.buckets[b as usize].objs.head;
        self.links.remove(&mut self.buckets[b as usize].objs, x);
        self.drop_if_empty(b);
        self.bucket_of[x as usize] = NIL;
        self.space.used -= u64::from(std::mem::take(&mut self.size[x as usize]));
    }
}

impl Policy for Lfu {
    fn grow(&mut self, n: usize) {
        self.links.grow(n);
        self.size.resize(n.max(self.size.len()), 0);
        self.bucket_of.resize(n.max(self.bucket_of.len()), NIL);
    }

    fn access(&mut self, _t: usize, x: u32, size: u32) -> bool {
        if self.size[x as usize] != 0 {
            let b = self.bucket_of[x as usize];
            let f = self.buckets[b as usize].freq + 1;
            let mut nb = self.buckets[b as usize].next;
            if nb == NIL || self.buckets[nb as usize].freq != f {
                nb = self.new_bucket(f, b);
            }
            self.links.remove(&mut self.buckets[b as usize].objs, x);
            self.links.push_back(&mut self.buckets[nb as usize].objs, x);
            self.bucket_of[x as usize] = nb;
            self.drop_if_empty(b);
            return true;
        }
        if !self.space.admits(size) {
            return false;
        }
        while !self.space.fits(size) {
            self.evict();
        }
        let mut b = self.first;
        if b == NIL || self.buckets[b as usize].freq != 1 {
            b = self.new_bucket(1, NIL);
        }
        self.links.push_back(&mut self.buckets[b as usize].objs, x);
        self.bucket_of[x as usize] = b;
        self.size[x as usize] = size;
        self.space.used += u64::from(size);
        false
    }
}
