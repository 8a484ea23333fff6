//! Belady's MIN: on a miss, evict the cached object whose next request is farthest away; do not
//! insert an object whose own next request is farther than every cached object's (or that is
//! never requested again). Next requests are computed from the trace itself, never read from a
//! file. With capacity in objects this is the optimal miss count, a lower bound for every other
//! policy; with capacity in bytes it is the usual heuristic, not an optimum.

use std::collections::BinaryHeap;

use super::{Policy, Runner, Space};
use crate::flat::SimTrace;

const NEVER: u32 = u32::MAX;

pub(crate) struct Belady {
    /// Index of the next simulated request to the same object, per request.
    next: Vec<u32>,
    /// Next request of each cached object.
    cur_next: Vec<u32>,
    size: Vec<u32>,
    /// (next request, slot), largest first; entries go stale and are skipped when popped.
    heap: BinaryHeap<(u32, u32)>,
    cached: usize,
    space: Space,
}

pub(crate) fn build(capacity: u64, trace: &SimTrace<'_>) -> Box<dyn Runner> {
    let mut next = vec![NEVER; trace.len()];
    let mut last = vec![NEVER; trace.n_objects];
    for t in (0..trace.len()).rev() {
        if trace.skipped(t) {
            continue;
        }
        let s = trace.slots[t] as usize;
        next[t] = last[s];
        last[s] = t as u32;
    }
    Box::new(Belady {
        next,
        cur_next: vec![NEVER; trace.n_objects],
        size: vec![0; trace.n_objects],
        heap: BinaryHeap::new(),
        cached: 0,
        space: Space::new(capacity),
    })
}

impl Belady {
    fn valid(&self, (n, s): (u32, u32)) -> bool {
        self.size[s as usize] != 0 && self.cur_next[s as usize] == n
    }

    fn compact(&mut self) {
        if self.heap.len() > 2 * self.cached + 4096 {
            let entries: Vec<(u32, u32)> = self
                .heap
                .drain()
                .filter(|&e| self.size[e.1 as usize] != 0 && self.cur_next[e.1 as usize] == e.0)
                .collect();
            self.heap = entries.into();
        }
    }
}

impl Policy for Belady {
    fn grow(&mut self, n: usize) {
        assert!(
            n <= self.cur_next.len(),
            "Belady is built over the whole trace and cannot grow"
        );
    }

    fn access(&mut self, t: usize, x: u32, size: u32) -> bool {
        let nx = self.next[t];
        if self.size[x as usize] != 0 {
            self.cur_next[x as usize] = nx;
            self.heap.push((nx, x));
            self.compact();
            return true;
        }
        if nx == NEVER || !self.space.admits(size) {
            return false;
        }
        while !self.space.fits(size) {
            let top = loop {
                let e = self.heap.pop().expect("cached objects are in the heap");
                if self.valid(e) {
                    break e;
                }
            };
            if top.0 < nx {
                self.heap.push(top);
                return false;
            }
            let v = top.1 as usize;
            self.space.used -= u64::from(std::mem::take(&mut self.size[v]));
            self.cached -= 1;
        }
        self.size[x as usize] = size;
        self.cur_next[x as usize] = nx;
        self.space.used += u64::from(size);
        self.cached += 1;
        self.heap.push((nx, x));
        false
    }
}
