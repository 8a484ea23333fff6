//! S3-FIFO, as libCacheSim's `S3FIFO.c` with its defaults (`fifo-size-ratio=0.10,
//! ghost-size-ratio=0.90, move-to-main-threshold=2`):
//!
//! * a small FIFO of `trunc(0.1 C)`, a main FIFO of the rest, and a ghost FIFO of ids (sized in
//!   bytes, `trunc(0.9 C)`);
//! * a hit adds 1 to the object's counter (a main object's counter is used up to 3);
//! * a miss whose id is in the ghost goes straight to main; any other miss goes to small
//!   (an object not smaller than the small FIFO is never inserted, an object larger than it
//!   is not even made room for);
//! * room is made from main when main is over its share or small is empty, else from small:
//!   small's oldest object moves to main when its counter is at least 2 (counter reset), or
//!   leaves for the ghost; main's oldest object is reinserted with `min(counter, 3) - 1` while
//!   its counter is positive, else evicted.

use super::{Links, List, Policy, Runner};
use crate::flat::SimTrace;

const NONE: u8 = 0;
const SMALL: u8 = 1;
const MAIN: u8 = 2;
const GHOST: u8 = 3;

pub(crate) struct S3Fifo {
    links: Links,
    small: List,
    main: List,
    ghost: List,
    size: Vec<u32>,
    state: Vec<u8>,
    freq: Vec<u8>,
    capacity: u64,
    small_cap: u64,
    main_cap: u64,
    ghost_cap: u64,
    small_used: u64,
    main_used: u64,
    ghost_used: u64,
}

pub(crate) fn build(capacity: u64, trace: &SimTrace<'_>) -> Box<dyn Runner> {
    // The same float-to-integer truncations libCacheSim does.
    let small_cap = (capacity as i64 as f64 * 0.10) as u64;
    let ghost_cap = (capacity as f64 * 0.90) as u64;
    Box::new(S3Fifo {
        links: Links::new(trace.n_objects),
        small: List::default(),
        main: List::default(),
        ghost: List::default(),
        size: vec![0; trace.n_objects],
        state: vec![NONE; trace.n_objects],
        freq: vec![0; trace.n_objects],
        capacity,
        small_cap,
        main_cap: capacity - small_cap,
        ghost_cap,
        small_used: 0,
        main_used: 0,
        ghost_used: 0,
    })
}

impl S3Fifo {
    fn size(&self, x: u32) -> u64 {
        u64::from(self.size[x as usize])
    }

    fn demote_to_ghost(&mut self, x: u32) {
        let s = self.size(x);
        if s > self.ghost_cap {
            self.state[x as usize] = NONE;
            return;
        }
        while self.ghost_used + s > self.ghost_cap {
            let g = self.ghost.tail;
            self.links.remove(&mut self.ghost, g);
            self.ghost_used -= self.size(g);
            self.state[g as usize] = NONE;
        }
        self.links.push_front(&mut self.ghost, x);
        self.ghost_used += s;
        self.state[x as usize] = GHOST;
    }

    fn evict_small(&mut self) {
        while self.small_used > 0 {
            let x = self.small.tail;
            self.links.remove(&mut self.small, x);
            self.small_used -= self.size(x);
            if self.freq[x as usize] >= 2 {
                self.links.push_front(&mut self.main, x);
                self.main_used += self.size(x);
                self.state[x as usize] = MAIN;
                self.freq[x as usize] = 0;
            } else {
                self.demote_to_ghost(x);
                return;
            }
        }
    }

    fn evict_main(&mut self) {
        while self.main_used > 0 {
            let x = self.main.tail;
            let f = self.freq[x as usize];
            if f >= 1 {
                self.links.move_to_front(&mut self.main, x);
                self.freq[x as usize] = f.min(3) - 1;
            } else {
                self.links.remove(&mut self.main, x);
                self.main_used -= self.size(x);
                self.state[x as usize] = NONE;
                return;
            }
        }
    }
}

impl Policy for S3Fifo {
    fn grow(&mut self, n: usize) {
        self.links.grow(n);
        self.size.resize(n.max(self.size.len()), 0);
        self.state.resize(n.max(self.state.len()), NONE);
        self.freq.resize(n.max(self.freq.len()), 0);
    }

    fn access(&mut self, _t: usize, x: u32, size: u32) -> bool {
        let mut hit_on_ghost = false;
        match self.state[x as usize] {
            SMALL | MAIN => {
                self.freq[x as usize] = self.freq[x as usize].saturating_add(1);
                return true;
            }
            GHOST => {
                self.links.remove(&mut self.ghost, x);
                self.ghost_used -= self.size(x);
                self.state[x as usize] = NONE;
                hit_on_ghost = true;
            }
            _ => {}
        }
        let s = u64::from(size);
        if s > self.small_cap {
            return false;
        }
        while self.small_used + self.main_used + s > self.capacity {
            if self.main_used > self.main_cap || self.small_used == 0 {
                self.evict_main();
            } else {
                self.evict_small();
            }
        }
        self.size[x as usize] = size;
        self.freq[x as usize] = 0;
        if hit_on_ghost {
            self.links.push_front(&mut self.main, x);
            self.main_used += s;
            self.state[x as usize] = MAIN;
        } else if s < self.small_cap {
            self.links.push_front(&mut self.small, x);
            self.small_used += s;
            self.state[x as usize] = SMALL;
        }
        false
    }
}
