//! ARC, as libCacheSim's `ARC.c` (Megiddo & Modha's four lists T1, T2, B1, B2 and target `p`),
//! with its particular choices kept so results match it:
//!
//! * list sizes count bytes (objects count 1 in object mode); `p` moves by
//!   `max(|B2|/|B1|, 1)` on a B1 hit and `max(|B1|/|B2|, 1)` on a B2 hit, capped to `[0, C]`;
//! * a ghost hit is a miss; the object comes back into T2 (the eviction for it uses REPLACE);
//! * a miss on all lists: when `|T1| + |B1| + size > C`, drop B1's LRU then REPLACE if B1 is
//!   non-empty, else evict T1's LRU without a ghost; otherwise, when all four lists hold
//!   `>= 2C`, drop B2's LRU, then REPLACE.

use super::{Links, List, Policy, Runner, NIL};
use crate::flat::SimTrace;

const NONE: u8 = 0;
const T1: u8 = 1;
const T2: u8 = 2;
const B1: u8 = 3;
const B2: u8 = 4;

pub(crate) struct Arc {
    links: Links,
    lists: [List; 5],
    size: Vec<u32>,
    state: Vec<u8>,
    bytes: [i64; 5],
    capacity: i64,
    p: f64,
    n_req: i64,
    vtime_last_ghost_hit: i64,
    cur_in_b1: bool,
    cur_in_b2: bool,
}

pub(crate) fn build(capacity: u64, trace: &SimTrace<'_>) -> Box<dyn Runner> {
    Box::new(Arc {
        links: Links::new(trace.n_objects),
        lists: [List::default(); 5],
        size: vec![0; trace.n_objects],
        state: vec![NONE; trace.n_objects],
        bytes: [0; 5],
        capacity: i64::try_from(capacity).unwrap_or(i64::MAX),
        p: 0.0,
        n_req: 0,
        vtime_last_ghost_hit: -1,
        cur_in_b1: false,
        cur_in_b2: false,
    })
}

impl Arc {
    /// Moves `x` from list `from` to the front of list `to`.
    fn shift(&mut self, x: u32, from: u8, to: u8) {
        let s = i64::from(self.size[x as usize]);
        self.links.remove(&mut self.lists[from as usize], x);
        self.bytes[from as usize] -= s;
        if to != NONE {
            self.links.push_front(&mut self.lists[to as usize], x);
            self.bytes[to as usize] += s;
        }
        self.state[x as usize] = to;
    }

    fn ghost_hit_now(&self) -> bool {
        self.vtime_last_ghost_hit == self.n_req && (self.cur_in_b1 || self.cur_in_b2)
    }

    /// REPLACE from the paper: demote T1's or T2's LRU object to its ghost list.
    fn replace(&mut self) {
        let t1 = self.bytes[T1 as usize];
        let cond1 = t1 > 0;
        let cond2 = t1 as f64 > self.p;
        let cond3 = t1 as f64 == self.p && self.cur_in_b2;
        let cond4 = self.bytes[T2 as usize] == 0;
        if (cond1 && (cond2 || cond3)) || cond4 {
            let x = self.lists[T1 as usize].tail;
            self.shift(x, T1, B1);
        } else {
            let x = self.lists[T2 as usize].tail;
            self.shift(x, T2, B2);
        }
    }

    fn evict(&mut self, incoming: u32) {
        if self.ghost_hit_now() {
            return self.replace();
        }
        let [_, t1, t2, b1, b2] = self.bytes;
        if t1 + b1 + i64::from(incoming) > self.capacity {
            if b1 > 0 {
                let x = self.lists[B1 as usize].tail;
                self.shift(x, B1, NONE);
                self.replace();
            } else {
                let x = self.lists[T1 as usize].tail;
                self.shift(x, T1, NONE);
            }
        } else {
            if t1 + b1 + t2 + b2 >= self.capacity.saturating_mul(2) && b2 > 0 {
                let x = self.lists[B2 as usize].tail;
                self.shift(x, B2, NONE);
            }
            self.replace();
        }
    }
}

impl Policy for Arc {
    fn grow(&mut self, n: usize) {
        self.links.grow(n);
        self.size.resize(n.max(self.size.len()), 0);
        self.state.resize(n.max(self.state.len()), NONE);
    }

    fn access(&mut self, _t: usize, x: u32, size: u32) -> bool {
        self.n_req += 1;
        let st = self.state[x as usize];
        if st != NONE {
            self.cur_in_b1 = false;
            self.cur_in_b2 = false;
            match st {
                T1 => {
                    self.shift(x, T1, T2);
                    return true;
                }
                T2 => {
                    self.links.move_to_front(&mut self.lists[T2 as usize], x);
                    return true;
                }
                B1 => {
                    self.vtime_last_ghost_hit = self.n_req;
                    self.cur_in_b1 = true;
                    let (b1, b2) = (self.bytes[B1 as usize], self.bytes[B2 as usize]);
                    let delta = (b2 as f64 / b1 as f64).max(1.0);
                    self.p = (self.p + delta).min(self.capacity as f64);
                    self.shift(x, B1, NONE);
                }
                _ => {
                    self.vtime_last_ghost_hit = self.n_req;
                    self.cur_in_b2 = true;
                    let (b1, b2) = (self.bytes[B1 as usize], self.bytes[B2 as usize]);
                    let delta = (b1 as f64 / b2 as f64).max(1.0);
                    self.p = (self.p - delta).max(0.0);
                    self.shift(x, B2, NONE);
                }
            }
        }
        if i64::from(size) > self.capacity {
            return false;
        }
        while self.bytes[T1 as usize] + self.bytes[T2 as usize] + i64::from(size) > self.capacity {
            self.evict(size);
        }
        self.size[x as usize] = size;
        if self.ghost_hit_now() {
            self.links.push_front(&mut self.lists[T2 as usize], x);
            self.bytes[T2 as usize] += i64::from(size);
            self.state[x as usize] = T2;
            self.cur_in_b1 = false;
            self.cur_in_b2 = false;
            self.vtime_last_ghost_hit = -1;
        } else {
            self.links.push_front(&mut self.lists[T1 as usize], x);
            self.bytes[T1 as usize] += i64::from(size);
            self.state[x as usize] = T1;
        }
        debug_assert!(self.lists[T1 as usize].head != NIL || self.bytes[T1 as usize] == 0);
        false
    }
}
