//! SIEVE, as libCacheSim's `Sieve.c`: FIFO order, a visited bit set on hits, and a hand that
//! walks from the oldest object towards the newest, clearing visited bits, and evicts the first
//! unvisited object it meets (wrapping to the oldest at the end).

use super::{Links, List, Policy, Runner, Space, NIL};
use crate::flat::SimTrace;

pub(crate) struct Sieve {
    links: Links,
    list: List,
    size: Vec<u32>,
    visited: Vec<bool>,
    hand: u32,
    space: Space,
}

pub(crate) fn build(capacity: u64, trace: &SimTrace<'_>) -> Box<dyn Runner> {
    Box::new(Sieve {
        links: Links::new(trace.n_objects),
        list: List::default(),
        size: vec![0; trace.n_objects],
        visited: vec![false; trace.n_objects],
        hand: NIL,
        space: Space::new(capacity),
    })
}

impl Sieve {
    fn evict(&mut self) {
        let mut x = if self.hand == NIL {
            self.list.tail
        } else {
            self.hand
        };
        while self.visited[x as usize] {
            self.visited[x as usize] = false;
            x = match self.links.prev(x) {
                NIL => self.list.tail,
                p => p,
            };
        }
        self.hand = self.links.prev(x);
        self.links.remove(&mut self.list, x);
        self.space.used -= u64::from(std::mem::take(&mut self.size[x as usize]));
    }
}

impl Policy for Sieve {
    fn grow(&mut self, n: usize) {
        self.links.grow(n);
        self.size.resize(n.max(self.size.len()), 0);
        self.visited.resize(n.max(self.visited.len()), false);
    }

    fn access(&mut self, _t: usize, x: u32, size: u32) -> bool {
        if self.size[x as usize] != 0 {
            self.visited[x as usize] = true;
            return true;
        }
        if !self.space.admits(size) {
            return false;
        }
        while !self.space.fits(size) {
            self.evict();
        }
        self.links.push_front(&mut self.list, x);
        self.visited[x as usize] = false;
        self.size[x as usize] = size;
        self.space.used += u64::from(size);
        false
    }
}
