//! Per-interval recording: each worker thread's [`Recorder`] fills the current interval's
//! counters and histograms and hands finished intervals over a channel to the [`Collector`]
//! (the calling thread), which merges the threads' parts, reports progress, and at the end
//! keeps one small [`Interval`] per interval.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cachelab_metrics::{Latency, Packed};

use crate::fault::{self, Fault, FAULTS};
use crate::samples::{ClientSamples, SAMPLES};
use crate::series::{Interval, GET, MULTIGET};
use crate::shared::Shared;
use crate::spec::{Mode, Stop};
use crate::stalls::{Stall, Stalls};

/// Counters of one interval (or of a total).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counts {
    /// Replies received, by operation.
    ops: [u64; 4],
    /// Keys found by get and multi-get.
    hits: u64,
    /// Keys asked for by get and multi-get and not found.
    misses: u64,
    errors: [u64; FAULTS],
    /// Requests in flight on a connection that failed: sent, never answered.
    lost: u64,
    /// Requests written.
    sent: u64,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        for i in 0..4 {
            self.ops[i] += o.ops[i];
        }
        for i in 0..FAULTS {
            self.errors[i] += o.errors[i];
        }
        self.hits += o.hits;
        self.misses += o.misses;
        self.lost += o.lost;
        self.sent += o.sent;
    }
}

/// One interval's raw data from one thread (or merged).
pub(crate) struct Raw {
    counts: Counts,
    corrected: Latency,
    uncorrected: Latency,
}

impl Raw {
    fn new() -> Raw {
        Raw {
            counts: Counts::default(),
            corrected: cachelab_metrics::latency(),
            uncorrected: cachelab_metrics::latency(),
        }
    }

    fn add(&mut self, o: &Raw) {
        self.counts.add(&o.counts);
        self.corrected.add(&o.corrected).expect("same bounds");
        self.uncorrected.add(&o.uncorrected).expect("same bounds");
    }
}

/// An interval every thread has moved past, its histograms packed: a run keeps every one of
/// them to its end (~0.5 MB each as [`Raw`]; see [`Packed`]).
#[derive(Clone)]
struct Finished {
    counts: Counts,
    corrected: Packed,
    uncorrected: Packed,
}

impl Finished {
    fn of(raw: &Raw) -> Finished {
        Finished {
            counts: raw.counts,
            corrected: Packed::of(&raw.corrected),
            uncorrected: Packed::of(&raw.uncorrected),
        }
    }
}

/// One pool member's side of a run, over the whole sending phase (warm-up included, as the
/// member's `stats` deltas): its parts of requests (a split multi-get is one part per member),
/// their replies and faults, their latency, and its down episodes.
pub(crate) struct MemberTally {
    /// Parts written (or, while it was down, failed at once).
    pub sent: u64,
    pub replies: u64,
    pub hits: u64,
    pub misses: u64,
    pub errors: [u64; FAULTS],
    pub lost: u64,
    /// Each replied part's latency: from its request's intended time in open loop, from its
    /// send in closed loop.
    pub latency: Latency,
    /// Times it was marked down, per connection (merged over connections at the end).
    pub down: Vec<Episode>,
}

impl MemberTally {
    pub fn new() -> MemberTally {
        MemberTally {
            sent: 0,
            replies: 0,
            hits: 0,
            misses: 0,
            errors: [0; FAULTS],
            lost: 0,
            latency: cachelab_metrics::latency(),
            down: Vec::new(),
        }
    }

    pub fn add(&mut self, o: MemberTally) {
        self.sent += o.sent;
        self.replies += o.replies;
        self.hits += o.hits;
        self.misses += o.misses;
        for i in 0..FAULTS {
            self.errors[i] += o.errors[i];
        }
        self.lost += o.lost;
        self.latency.add(&o.latency).expect("same bounds");
        self.down.extend(o.down);
    }
}

/// A member marked down: from the first failure of the run of failures that reached the
/// limit to its next reply (or the end of the run), seconds from the start.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Episode {
    pub start_s: f64,
    /// When it was marked down (the limit reached); the earliest over the connections.
    pub marked_s: f64,
    pub end_s: f64,
    /// Failures in it (failed connects, timed-out requests, dropped connections).
    pub failures: u64,
    /// Connections that saw it (episodes of several connections that overlap are one).
    pub connections: u64,
    /// Still down when the run ended.
    pub open: bool,
}

/// A member marked down on one connection: since the first failure of the run of failures
/// that reached the limit, the failures so far, and when it was marked.
#[derive(Clone, Copy)]
pub(crate) struct Spell {
    pub since: Instant,
    pub failures: u64,
    pub marked: Instant,
}

/// Per-connection episodes merged into the member's: overlapping ones become one.
pub(crate) fn merge_episodes(mut all: Vec<Episode>) -> Vec<Episode> {
    all.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
    let mut out: Vec<Episode> = Vec::new();
    for e in all {
        match out.last_mut() {
            Some(last) if e.start_s <= last.end_s => {
                last.end_s = last.end_s.max(e.end_s);
                last.marked_s = last.marked_s.min(e.marked_s);
                last.failures += e.failures;
                last.connections += e.connections;
                last.open |= e.open;
            }
            _ => out.push(e),
        }
    }
    out
}

/// The most episodes a thread keeps per member.
const MAX_EPISODES: usize = 1000;

/// What a worker thread's recorder tells the collector.
pub(crate) enum Msg {
    /// Thread, interval index, that thread's part of the interval.
    Interval(usize, u64, Box<Raw>),
    /// The thread has sent its last interval; its stalls, and how many it could not keep,
    /// its share of each pool member's tally (none for a single server), and its sends' and
    /// replies' samples.
    Done(usize, Vec<Stall>, u64, Vec<MemberTally>, Box<ClientSamples>),
}

/// The channel from the worker threads' recorders to the collector.
pub(crate) fn channel() -> (mpsc::Sender<Msg>, mpsc::Receiver<Msg>) {
    mpsc::channel()
}

/// A worker thread's recorder, shared by its connection tasks.
pub(crate) struct Recorder {
    thread: usize,
    t0: Instant,
    interval: Duration,
    index: u64,
    boundary: Instant,
    cur: Box<Raw>,
    tx: mpsc::Sender<Msg>,
    open: bool,
    /// Replies slower than this (ns) and connections down this long are stalls.
    stall_ns: u64,
    stalls: Stalls,
    /// Per pool member (empty for a single server).
    members: Vec<MemberTally>,
    /// The end of the warm-up: sends and replies after it are sampled.
    warm_end: Instant,
    client: Box<ClientSamples>,
}

impl Recorder {
    pub fn new(thread: usize, shared: &Shared, tx: mpsc::Sender<Msg>) -> Recorder {
        let interval = shared.spec.interval;
        Recorder {
            thread,
            t0: shared.t0,
            interval,
            index: 0,
            boundary: shared.t0 + interval,
            cur: Box::new(Raw::new()),
            tx,
            open: matches!(shared.spec.mode, Mode::Open { .. }),
            stall_ns: shared.spec.stall.as_nanos() as u64,
            stalls: Stalls::new(shared.spec.stall.as_secs_f64()),
            members: if shared.spec.pool.len() > 1 {
                (0..shared.spec.pool.len())
                    .map(|_| MemberTally::new())
                    .collect()
            } else {
                Vec::new()
            },
            warm_end: shared.t0 + shared.spec.warmup,
            client: Box::new(ClientSamples::new(SAMPLES / shared.spec.threads.max(1))),
        }
    }

    /// Hands the current interval over when `now` is past its end.
    #[inline]
    pub fn tick(&mut self, now: Instant) {
        if now >= self.boundary {
            self.rotate(now);
        }
    }

    #[cold]
    fn rotate(&mut self, now: Instant) {
        let full = std::mem::replace(&mut self.cur, Box::new(Raw::new()));
        let _ = self.tx.send(Msg::Interval(self.thread, self.index, full));
        let elapsed = now.saturating_duration_since(self.t0);
        self.index = (elapsed.as_nanos() / self.interval.as_nanos()) as u64;
        self.boundary = self.t0 + self.interval * (self.index as u32 + 1);
    }

    /// Hands the last (partial) interval over and tells the collector this thread is done.
    pub fn finish(self) {
        let _ = self
            .tx
            .send(Msg::Interval(self.thread, self.index, self.cur));
        let dropped = self.stalls.dropped;
        let _ = self.tx.send(Msg::Done(
            self.thread,
            self.stalls.into_vec(),
            dropped,
            self.members,
            self.client,
        ));
    }

    /// Pool member `m` was sent `n` parts (or they failed at once).
    #[inline]
    pub fn part_sent(&mut self, m: usize, n: u64) {
        if let Some(t) = self.members.get_mut(m) {
            t.sent += n;
        }
    }

    /// A part answered by member `m`: keys asked (0 for a store or delete), keys found, and
    /// its latency in ns.
    #[inline]
    pub fn part_reply(&mut self, m: usize, keys: u32, hits: u32, latency: u64) {
        if let Some(t) = self.members.get_mut(m) {
            t.replies += 1;
            t.hits += u64::from(hits);
            t.misses += u64::from(keys - hits);
            cachelab_metrics::record(&mut t.latency, latency);
        }
    }

    /// A fault of member `m`'s connection, or a part it answered with an error, or failed at
    /// once while it was down.
    pub fn part_fault(&mut self, m: usize, f: Fault, n: u64) {
        if let Some(t) = self.members.get_mut(m) {
            t.errors[f.index()] += n;
        }
    }

    /// `n` parts in flight on member `m`'s connection when it failed.
    pub fn part_lost(&mut self, m: usize, n: u64) {
        if let Some(t) = self.members.get_mut(m) {
            t.lost += n;
        }
    }

    /// Member `m` was down (marked, on one connection) from `since` to `until`.
    pub fn member_down(&mut self, m: usize, e: Spell, until: Instant, open: bool) {
        let (start_s, end_s) = (self.secs(e.since), self.secs(until));
        let (marked_s, failures) = (self.secs(e.marked), e.failures);
        if let Some(t) = self.members.get_mut(m) {
            if t.down.len() < MAX_EPISODES {
                t.down.push(Episode {
                    start_s,
                    marked_s,
                    end_s,
                    failures,
                    connections: 1,
                    open,
                });
            }
        }
    }

    /// Open loop: a request due at `intended` left at `now` (sampled after the warm-up).
    #[inline]
    pub fn send_at(&mut self, now: Instant, intended: Instant) {
        if now >= self.warm_end {
            let t = now.saturating_duration_since(self.t0).as_nanos() as u64;
            let late = now.saturating_duration_since(intended).as_nanos() as u64;
            self.client.send(t, late);
        }
    }

    #[inline]
    pub fn sent(&mut self, n: u64) {
        self.cur.counts.sent += n;
    }

    /// A reply at `now`: `op`, keys asked and found, and its latencies in ns.
    #[inline]
    pub fn reply(
        &mut self,
        now: Instant,
        op: usize,
        keys: u32,
        hits: u32,
        corrected: u64,
        uncorrected: u64,
    ) {
        let waited = if self.open { corrected } else { uncorrected };
        if waited >= self.stall_ns {
            self.slow(now, waited);
        }
        let c = &mut self.cur.counts;
        c.ops[op] += 1;
        if op == GET || op == MULTIGET {
            c.hits += u64::from(hits);
            c.misses += u64::from(keys - hits);
        }
        cachelab_metrics::record(&mut self.cur.uncorrected, uncorrected);
        if now >= self.warm_end {
            if let Some(b) = self.client.replies.offer() {
                let t = now.saturating_duration_since(self.t0).as_nanos() as u64;
                self.client
                    .replies
                    .keep(b, t.saturating_sub(waited), waited);
            }
        }
        if self.open {
            cachelab_metrics::record(&mut self.cur.corrected, corrected);
        }
    }

    #[cold]
    fn slow(&mut self, now: Instant, waited: u64) {
        let end = self.secs(now);
        self.stalls.note(Stall {
            start_s: end - waited as f64 * 1e-9,
            end_s: end,
            slow_replies: 1,
            worst_ns: waited,
            ..Stall::default()
        });
    }

    /// A request sent at `sent` timed out at `now`.
    pub fn timed_out(&mut self, sent: Instant, now: Instant) {
        let s = Stall {
            start_s: self.secs(sent),
            end_s: self.secs(now),
            timeouts: 1,
            ..Stall::default()
        };
        self.stalls.note(s);
    }

    /// A connection was down from `since` to `now`, with `failures` failed connects; noted
    /// when that is at least the stall threshold.
    pub fn down(&mut self, since: Instant, now: Instant, failures: u64) {
        if now.saturating_duration_since(since).as_nanos() as u64 >= self.stall_ns {
            let s = Stall {
                start_s: self.secs(since),
                end_s: self.secs(now),
                connect_failures: failures,
                down: true,
                ..Stall::default()
            };
            self.stalls.note(s);
        }
    }

    fn secs(&self, t: Instant) -> f64 {
        t.saturating_duration_since(self.t0).as_secs_f64()
    }

    pub fn fault(&mut self, f: Fault) {
        self.cur.counts.errors[f.index()] += 1;
    }

    pub fn lost(&mut self, n: u64) {
        self.cur.counts.lost += n;
    }
}

/// The calling thread's side: merges the threads' parts of each interval, and publishes the
/// latest final interval's rate, p99 and the errors so far in the run's progress.
pub(crate) struct Collector {
    pending: BTreeMap<u64, Raw>,
    /// The next interval index each thread may still send (`u64::MAX` once it is done).
    reported: Vec<u64>,
    /// Intervals every thread has moved past.
    done: Vec<(u64, Finished)>,
    next_final: u64,
    errors_so_far: u64,
    stalls: Vec<Stall>,
    stalls_dropped: u64,
    members: Vec<MemberTally>,
    client: ClientSamples,
}

impl Collector {
    /// Receives from the recorders of `threads` threads until every one of them is gone.
    pub fn collect(rx: mpsc::Receiver<Msg>, threads: usize, shared: &Shared) -> Collector {
        let mut c = Collector {
            pending: BTreeMap::new(),
            reported: vec![0; threads],
            done: Vec::new(),
            next_final: 0,
            errors_so_far: 0,
            stalls: Vec::new(),
            stalls_dropped: 0,
            members: Vec::new(),
            client: ClientSamples::new(0),
        };
        loop {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(Msg::Interval(t, idx, raw)) => {
                    // The first thread's interval is kept as it came: a fresh one to add it
                    // to would be zeroed (~0.5 MB) and merged on a core the senders may share.
                    match c.pending.entry(idx) {
                        Entry::Vacant(e) => {
                            e.insert(*raw);
                        }
                        Entry::Occupied(mut e) => e.get_mut().add(&raw),
                    }
                    c.reported[t] = c.reported[t].max(idx + 1);
                }
                Ok(Msg::Done(t, stalls, dropped, members, client)) => {
                    c.reported[t] = u64::MAX;
                    c.client.add(*client, t);
                    c.stalls.extend(stalls);
                    c.stalls_dropped += dropped;
                    if c.members.is_empty() {
                        c.members = members;
                    } else {
                        for (mine, theirs) in c.members.iter_mut().zip(members) {
                            mine.add(theirs);
                        }
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
            if matches!(shared.spec.stop, Stop::Duration(_)) {
                let elapsed = Instant::now().saturating_duration_since(shared.t0);
                shared
                    .progress
                    .done
                    .store(elapsed.as_millis() as u64, Ordering::Relaxed);
            }
            c.finalise(shared);
        }
        c
    }

    /// Moves the intervals every thread has moved past to `done`, reporting each.
    fn finalise(&mut self, shared: &Shared) {
        let progress = &shared.progress;
        let safe = self.reported.iter().copied().min().unwrap_or(0);
        while self.next_final < safe && self.pending.keys().next().is_some_and(|&k| k < safe) {
            let (idx, raw) = self.pending.pop_first().expect("non-empty");
            self.errors_so_far += raw.counts.errors.iter().sum::<u64>();
            progress.errors.store(self.errors_so_far, Ordering::Relaxed);
            let d = shared.spec.interval.as_secs_f64();
            progress.last_rate.store(
                (raw.counts.ops.iter().sum::<u64>() as f64 / d) as u64,
                Ordering::Relaxed,
            );
            let h = if raw.corrected.is_empty() {
                &raw.uncorrected
            } else {
                &raw.corrected
            };
            progress.last_p99_ns.store(
                cachelab_metrics::percentiles(h, &[99.0])[0],
                Ordering::Relaxed,
            );
            if progress.keep_histograms.load(Ordering::Relaxed) {
                if let Ok(mut all) = progress.histograms.lock() {
                    all.push((idx, cachelab_metrics::encode(h)));
                }
            }
            self.done.push((idx, Finished::of(&raw)));
            self.next_final = idx + 1;
        }
    }

    /// Every thread's stalls, merged in time order, and how many the threads could not keep.
    pub fn take_stalls(&mut self, gap: Duration) -> (Vec<Stall>, u64) {
        let all = std::mem::take(&mut self.stalls);
        (
            crate::stalls::merge(all, gap.as_secs_f64()),
            self.stalls_dropped,
        )
    }

    /// Every thread's send and reply samples, merged.
    pub fn take_client(&mut self) -> ClientSamples {
        std::mem::replace(&mut self.client, ClientSamples::new(0))
    }

    /// Every pool member's tally over the threads, its episodes merged (none for a single
    /// server).
    pub fn take_members(&mut self) -> Vec<MemberTally> {
        let mut all = std::mem::take(&mut self.members);
        for m in &mut all {
            m.down = merge_episodes(std::mem::take(&mut m.down));
        }
        all
    }

    /// The time series: every interval from the first to the last one reported, an empty one
    /// for any index no thread reported; `elapsed` (first request to last reply) cuts the last.
    pub fn intervals(
        self,
        elapsed: Duration,
        interval: Duration,
        warmup: Duration,
    ) -> Vec<Interval> {
        let mut out = self.done;
        out.extend(self.pending.iter().map(|(&i, raw)| (i, Finished::of(raw))));
        out.sort_by_key(|(i, _)| *i);
        let iv = interval.as_secs_f64();
        let total_s = elapsed.as_secs_f64();
        let warm = warmup.as_secs_f64();
        let last = out.last().map_or(0, |(i, _)| *i);
        let mut by_index: BTreeMap<u64, Finished> = out.into_iter().collect();
        let none = Finished::of(&Raw::new());
        (0..=last)
            .map(|idx| {
                let raw = by_index.remove(&idx).unwrap_or_else(|| none.clone());
                let start = idx as f64 * iv;
                Interval {
                    index: idx,
                    start_s: start,
                    duration_s: (total_s - start).clamp(0.0, iv),
                    warmup: start + 1e-9 < warm,
                    ops: raw.counts.ops,
                    hits: raw.counts.hits,
                    misses: raw.counts.misses,
                    errors: fault::named(&raw.counts.errors),
                    lost: raw.counts.lost,
                    sent: raw.counts.sent,
                    corrected: raw.corrected,
                    uncorrected: raw.uncorrected,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(start_s: f64, end_s: f64, failures: u64) -> Episode {
        Episode {
            start_s,
            marked_s: start_s,
            end_s,
            failures,
            connections: 1,
            open: false,
        }
    }

    #[test]
    fn overlapping_episodes_of_connections_are_one() {
        let merged = merge_episodes(vec![ep(3.0, 4.0, 2), ep(1.0, 2.0, 2), ep(1.5, 2.5, 3)]);
        assert_eq!(
            merged,
            vec![
                Episode {
                    start_s: 1.0,
                    marked_s: 1.0,
                    end_s: 2.5,
                    failures: 5,
                    connections: 2,
                    open: false
                },
                ep(3.0, 4.0, 2)
            ]
        );
    }
}
