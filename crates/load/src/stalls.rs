//! Stalls: the stretches of a run when requests waited at least the stall threshold.
//!
//! Percentiles say how often a run was slow; they do not say *when*, and a two-second stall
//! in a thirty-second run is a handful of samples in the tail. So every thread also notes,
//! as they happen:
//!
//! * a reply that took at least `spec.stall` (corrected latency in open loop, so a request
//!   that was sent late because the server stalled counts from its intended time): the
//!   stretch from its start to its reply;
//! * a request that timed out: the stretch from its send to the timeout;
//! * a connection that was down (a failed connect, or a fault that dropped it) for at least
//!   `spec.stall`: the stretch until it connected again, or until the run ended.
//!
//! Stretches that overlap, or are apart by less than the threshold, merge into one [`Stall`]
//! (a server stopped for two seconds makes requests time out, their connections reconnect
//! and the next requests wait again: one stall, not two), per thread as they are noted (so a
//! long slow phase costs one entry, not one per reply) and then across threads ([`merge`]).

use serde::Serialize;

/// At most this many stalls are kept per thread; later ones are only counted.
const MAX_PER_THREAD: usize = 10_000;

/// One stretch of the run (seconds from the start of the measured phase) when requests
/// waited at least the stall threshold, and what happened in it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Stall {
    pub start_s: f64,
    pub end_s: f64,
    /// Replies that took at least the threshold.
    pub slow_replies: u64,
    /// The longest of them, ns.
    pub worst_ns: u64,
    /// Requests that timed out.
    pub timeouts: u64,
    /// Failed connection attempts while a connection was down.
    pub connect_failures: u64,
    /// Some connection was down during it.
    pub down: bool,
}

impl Stall {
    fn absorb(&mut self, o: &Stall) {
        self.start_s = self.start_s.min(o.start_s);
        self.end_s = self.end_s.max(o.end_s);
        self.slow_replies += o.slow_replies;
        self.worst_ns = self.worst_ns.max(o.worst_ns);
        self.timeouts += o.timeouts;
        self.connect_failures += o.connect_failures;
        self.down |= o.down;
    }
}

/// One thread's stalls, merged as they are noted.
#[derive(Debug)]
pub(crate) struct Stalls {
    list: Vec<Stall>,
    /// Stretches closer than this (seconds) are one stall.
    gap_s: f64,
    /// Stalls not kept because the list was full.
    pub dropped: u64,
}

impl Stalls {
    pub fn new(gap_s: f64) -> Stalls {
        Stalls {
            list: Vec::new(),
            gap_s,
            dropped: 0,
        }
    }

    /// Notes a stretch; it merges with the latest one when they overlap or nearly touch.
    pub fn note(&mut self, s: Stall) {
        if let Some(last) = self.list.last_mut() {
            if s.start_s <= last.end_s + self.gap_s && s.end_s + self.gap_s >= last.start_s {
                last.absorb(&s);
                return;
            }
        }
        if self.list.len() < MAX_PER_THREAD {
            self.list.push(s);
        } else {
            self.dropped += 1;
        }
    }

    pub fn into_vec(self) -> Vec<Stall> {
        self.list
    }
}

/// Every thread's stalls as one list in time order, those that overlap or are apart by less
/// than `gap_s` merged.
pub fn merge(mut all: Vec<Stall>, gap_s: f64) -> Vec<Stall> {
    all.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
    let mut out: Vec<Stall> = Vec::with_capacity(all.len());
    for s in all {
        match out.last_mut() {
            Some(last) if s.start_s <= last.end_s + gap_s => last.absorb(&s),
            _ => out.push(s),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slow(start: f64, end: f64) -> Stall {
        Stall {
            start_s: start,
            end_s: end,
            slow_replies: 1,
            worst_ns: ((end - start) * 1e9) as u64,
            ..Stall::default()
        }
    }

    #[test]
    fn replies_of_one_stall_make_one_entry() {
        let mut s = Stalls::new(0.1);
        // Requests sent from 6.0 s on all answered at 8.0 s, reported in reply order.
        for i in 0..100 {
            s.note(slow(6.0 + f64::from(i) * 0.01, 8.0));
        }
        let v = s.into_vec();
        assert_eq!(v.len(), 1);
        assert_eq!(
            (v[0].start_s, v[0].end_s, v[0].slow_replies),
            (6.0, 8.0, 100)
        );
        assert_eq!(v[0].worst_ns, 2_000_000_000);
    }

    #[test]
    fn separate_stalls_stay_apart_and_threads_merge() {
        let mut a = Stalls::new(0.1);
        a.note(slow(1.0, 1.2));
        a.note(slow(5.0, 5.5));
        let mut b = Stalls::new(0.1);
        b.note(Stall {
            start_s: 5.4,
            end_s: 7.0,
            down: true,
            connect_failures: 3,
            ..Stall::default()
        });
        let all = merge(a.into_vec().into_iter().chain(b.into_vec()).collect(), 0.1);
        assert_eq!(all.len(), 2);
        assert_eq!((all[0].start_s, all[0].end_s), (1.0, 1.2));
        assert_eq!((all[1].start_s, all[1].end_s), (5.0, 7.0));
        assert!(all[1].down && !all[0].down);
        assert_eq!(all[1].connect_failures, 3);
        assert_eq!(all[1].slow_replies, 1);
    }

    #[test]
    fn stretches_a_reconnect_apart_are_one_stall() {
        // Timeouts until 3.62 s, a reconnect, then replies late until 4.62 s.
        let mut s = Stalls::new(0.1);
        s.note(Stall {
            start_s: 2.61,
            end_s: 3.62,
            timeouts: 4,
            ..Stall::default()
        });
        s.note(slow(3.64, 4.62));
        s.note(slow(4.9, 5.0));
        let v = merge(s.into_vec(), 0.1);
        assert_eq!(v.len(), 2);
        assert_eq!((v[0].start_s, v[0].end_s), (2.61, 4.62));
        assert_eq!((v[0].timeouts, v[0].slow_replies), (4, 1));
    }

    #[test]
    fn the_list_is_bounded() {
        let mut s = Stalls::new(0.1);
        for i in 0..(MAX_PER_THREAD + 5) {
            let t = i as f64;
            s.note(slow(t, t + 0.5));
        }
        assert_eq!(s.dropped, 5);
        assert_eq!(s.into_vec().len(), MAX_PER_THREAD);
    }
}
