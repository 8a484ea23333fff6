//! Sending: the open-loop schedule (when requests are due, what was skipped or left), the
//! requests encoded into their members' write buffers (a multi-get split over the pool), and
//! the writes.

use std::io;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rand::Rng;

use super::Conn;
use crate::busy;
use crate::fault::Fault;
use crate::group::{finish_group, Groups};
use crate::member::{Link, Pending, ALONE};
use crate::recorder::Recorder;
use crate::series::{DELETE, GET, MULTIGET, SET};
use crate::shared::Shared;
use crate::spec::Stop;
use crate::stream::Stream;

/// Requests that fail at once (their member marked down) a closed-loop fill may take, per slot
/// of its pipeline (see [`Conn::fill`]).
const FAILED_AT_ONCE: usize = 64;

/// Requests a connection stages ahead for the spin at most (see [`Conn::stage_ahead`]).
const STAGED: usize = 8;

/// The most redirections (`-MOVED`, `-ASK`) one request follows, as redis-cli and the
/// cluster clients bound them.
pub(super) const MAX_HOPS: u8 = 5;

/// A request's `op` for the `ASKING` sent before a request an `-ASK` redirected: its `+OK`
/// is read and counted nowhere.
pub(crate) const ASKING: u8 = u8::MAX;

impl Conn {
    pub(super) fn due(&self, ns: f64) -> Instant {
        self.ctx.shared.t0 + Duration::from_nanos(ns as u64)
    }

    /// Open loop, after a reconnect: requests that fell due more than a timeout ago, while
    /// the connection was down, are skipped (and counted) rather than sent in one burst.
    pub(super) fn skip_missed(&mut self, now: Instant) {
        let timeout = self.ctx.shared.spec.options.request_timeout;
        let Some(t) = self.timetable.as_mut() else {
            return;
        };
        let limit = now
            .saturating_duration_since(self.ctx.shared.t0)
            .saturating_sub(timeout)
            .as_nanos() as f64;
        let skipped = t.skip_before(limit, self.quota, &mut self.rng);
        if let Some(q) = self.quota.as_mut() {
            *q -= skipped;
        }
        self.ctx.skipped.set(self.ctx.skipped.get() + skipped);
    }

    /// Open loop, at the end: requests due before sending stopped that were never sent.
    pub(super) fn note_backlog(&mut self, now: Instant) {
        let sh = &self.ctx.shared;
        let Some(t) = self.timetable.as_ref() else {
            return;
        };
        let end = sh.send_until.map_or(now, |u| u.min(now));
        let end_ns = end.saturating_duration_since(sh.t0).as_nanos() as f64;
        let n = t.due_before(end_ns).min(self.quota.unwrap_or(u64::MAX));
        self.ctx.backlog.set(self.ctx.backlog.get() + n);
    }

    /// Open loop: tells the thread's pacer when this connection next needs waking (never,
    /// while it is full: a reply will wake it). True when it waits for the pacer.
    pub(super) fn want_timer(&mut self, sending: bool) -> bool {
        let (Some(t), Some(p)) = (self.timetable.as_ref(), self.ctx.pacer.as_ref()) else {
            return false;
        };
        // A staged request comes first (the timetable is past it).
        let next = self.staged.front().map_or(t.next_ns() as u64, |s| {
            s.intended
                .saturating_duration_since(self.ctx.shared.t0)
                .as_nanos() as u64
        });
        let due =
            (sending && self.up > 0 && (self.per_member_cap || self.outstanding < self.depth))
                .then_some(next);
        p.want(self.slot, due);
        due.is_some()
    }

    pub(super) fn fill(&mut self, now: Instant) {
        let mut n = 0u64;
        // Requests failed at once (their member is down) free their slot at once, and the
        // next request is sent, as an application moves on from a failed get: a fill takes at
        // most `FAILED_AT_ONCE` × `depth` of them, so a pool whose keys all live on a member
        // that is down does not spin (it waits for the next tick), while one with a member
        // down among others keeps its rate (a run of that many keys of the member down in a
        // row is all but impossible). With `depth` alone, a pipeline of 1 waited a tick
        // after each such failure: a member down cut the closed loop's rate some 50-fold.
        let mut budget = self.depth * FAILED_AT_ONCE;
        if self.timetable.is_none() {
            // A batch is never more than the requests left to send, so the last ones go out.
            let batch = self
                .batch
                .min(self.quota.map_or(usize::MAX, |q| q as usize));
            if self.depth.saturating_sub(self.outstanding) < batch && self.outstanding > 0 {
                return;
            }
            while self.outstanding < self.depth && self.quota != Some(0) && budget > 0 {
                if !self.push(now, now) {
                    budget -= 1;
                }
                n += 1;
            }
        } else {
            while (self.per_member_cap || self.outstanding < self.depth) && self.quota != Some(0) {
                let t = self.timetable.as_ref().expect("open loop");
                let due = self.due(t.next_ns());
                if due > now {
                    break;
                }
                // With staging, a send's time is its write's, in the order written (after
                // those the spin recorded); otherwise the wake-up's, for all that are due.
                let now = if self.spin_send { Instant::now() } else { now };
                self.ctx.rec.borrow_mut().send_at(now, due);
                self.push(due, now);
                self.timetable
                    .as_mut()
                    .expect("open loop")
                    .advance(&mut self.rng);
                n += 1;
                if self.spin_send {
                    // Behind (or not yet staging): still one write per request, never a
                    // batch of requests due at different times. An error shows again at the
                    // flush after the fill, which handles it.
                    let _ = self.flush(0);
                }
            }
        }
        if n > 0 {
            self.ctx.rec.borrow_mut().sent(n);
        }
    }

    /// Encodes one request (a multi-get split over its members) and records it as in
    /// flight; false when it failed at once because its member (every part's) is down.
    pub(super) fn push(&mut self, intended: Instant, now: Instant) -> bool {
        let x: f64 = self.rng.random();
        let op = self.mix.iter().position(|&c| x < c).unwrap_or(GET);
        if let Some(q) = self.quota.as_mut() {
            *q -= 1;
        }
        self.outstanding += 1;
        if op == MULTIGET && self.cluster {
            return self.push_slot_multiget(intended, now);
        }
        if op == MULTIGET && self.members.len() > 1 {
            return self.push_split_multiget(intended, now);
        }
        let routed = (op != MULTIGET).then(|| {
            let k = self.keys.next(&mut self.rng);
            (k, self.route(k))
        });
        if let Some((_, m)) = routed {
            if let Some(f) = self.refuses(m) {
                self.fail_at_once(m, f);
                self.outstanding -= 1;
                self.done(1);
                return false;
            }
        }
        let cap = self.per_member_cap.then_some(self.depth);
        let hold = routed.is_some_and(|(_, m)| self.members[m].must_hold(cap));
        let start = routed.map_or(self.members[0].wbuf.len(), |(_, m)| {
            self.members[m].buf(hold).len()
        });
        let (m, k, keys) = self.encode(op, routed, hold);
        let member = &mut self.members[m];
        let w = member.buf(hold);
        let len = w.len() - start;
        let p = Pending {
            op: op as u8,
            keys,
            group: ALONE,
            key: k.unwrap_or(u64::MAX),
            intended,
            sent: now,
            hops: 0,
        };
        member.enqueue(p, hold, len);
        self.ctx.rec.borrow_mut().part_sent(m, 1);
        busy::sent(1);
        true
    }

    /// Encodes a request of `op` for its member (`routed`: its key and member; `None`: a
    /// multi-get, for the first member) into that member's buffer ([`buf(hold)`]); its
    /// member, key (single-key requests) and keys.
    ///
    /// [`buf(hold)`]: crate::member::Member::buf
    fn encode(
        &mut self,
        op: usize,
        routed: Option<(u64, usize)>,
        hold: bool,
    ) -> (usize, Option<u64>, u16) {
        // Borrowed, not cloned: no atomic reference count per request.
        let sh: &Shared = &self.ctx.shared;
        let spec = &sh.spec;
        let prefix = spec.prefix.as_bytes();
        let mut keys = 1u16;
        let (m, k) = match routed {
            None => {
                let n = spec.multiget_keys;
                keys = n as u16;
                let w = &mut self.members[0].wbuf;
                self.wire.put_multiget_start(w, n);
                for _ in 0..n {
                    let k = self.keys.next(&mut self.rng);
                    self.wire.put_multiget_key(w, prefix, k);
                }
                self.wire.put_multiget_end(w);
                (0, None)
            }
            Some((k, m)) => (m, Some(k)),
        };
        if let Some(k) = k {
            match op {
                GET => self.wire.put_get(self.members[m].buf(hold), prefix, k),
                SET => self.encode_set(m, hold, k),
                _ => {
                    debug_assert_eq!(op, DELETE);
                    self.wire.put_delete(self.members[m].buf(hold), prefix, k);
                }
            }
        }
        (m, k, keys)
    }

    /// Open loop with a spin, on a single server: stages the next requests for the spin to
    /// write at their due times (see [`busy`]) — the next one, and those after it due within
    /// the spin window, at most [`STAGED`]; only with nothing else to write on a plain socket.
    /// A staged request is not yet in flight (nor counted as sent): [`Conn::settle_staged`]
    /// takes it there.
    pub(super) fn stage_ahead(&mut self, now: Instant) {
        let member = &self.members[0];
        let Link::Up(s) = &member.link else {
            return;
        };
        if matches!(s, Stream::Tls(_)) || !member.wbuf.is_empty() || s.pending() {
            return;
        }
        let spec = &self.ctx.shared.spec;
        let (window, until) = (spec.spin, self.ctx.shared.send_until);
        while self.staged.len() < STAGED
            && self.outstanding + self.staged.len() < self.depth
            && self.quota.is_none_or(|q| q > self.staged.len() as u64)
        {
            let t = self.timetable.as_ref().expect("open loop");
            let due = self.due(t.next_ns());
            if until.is_some_and(|u| due >= u) || (!self.staged.is_empty() && due > now + window) {
                break;
            }
            let x: f64 = self.rng.random();
            let op = self.mix.iter().position(|&c| x < c).unwrap_or(GET);
            let routed = (op != MULTIGET).then(|| (self.keys.next(&mut self.rng), 0));
            let (_, k, keys) = self.encode(op, routed, false);
            busy::stage(self.slot, due, &self.members[0].wbuf);
            self.members[0].wbuf.clear();
            self.staged.push_back(Pending {
                op: op as u8,
                keys,
                group: ALONE,
                key: k.unwrap_or(u64::MAX),
                intended: due,
                sent: due,
                hops: 0,
            });
            self.timetable
                .as_mut()
                .expect("open loop")
                .advance(&mut self.rng);
        }
    }

    /// Takes the staged requests the spin wrote into flight, each with the time of its write;
    /// with `keep`, first writes those due that the spin has not (this task got there first:
    /// each alone all the same, see [`busy::send_due`]). The task takes the rest over on a
    /// fallback (a write that would block or was partial), or when `keep` is false (sending
    /// ended, the socket failed): those due by `now` (none without `keep`) go to the write
    /// buffer, sent now; the others are dropped, and their send times come again from the
    /// timetable.
    pub(super) fn settle_staged(&mut self, now: Instant, keep: bool) {
        if keep {
            busy::send_due();
        }
        {
            let mut rec = self.ctx.rec.borrow_mut();
            busy::drain_sends(|at, due| rec.send_at(at, due));
        }
        while !self.staged.is_empty() {
            let Some(at) = busy::take_written(self.slot, &mut self.members[0].wbuf) else {
                break;
            };
            let p = self.staged.pop_front().expect("staged");
            self.commit_staged(p, at, true);
        }
        let Some(first) = self.staged.front() else {
            return;
        };
        if keep
            && first.intended > now
            && self.members[0].wbuf.is_empty()
            && !busy::blocked(self.slot)
        {
            return;
        }
        let take = if keep {
            self.staged.iter().take_while(|p| p.intended <= now).count()
        } else {
            0
        };
        busy::unstage(self.slot, take, &mut self.members[0].wbuf);
        let now = Instant::now(); // (after any write of send_due's)
        for _ in 0..take {
            let p = self.staged.pop_front().expect("staged");
            self.commit_staged(p, now, false);
        }
        if let Some(p) = self.staged.front() {
            let ns = p.intended.saturating_duration_since(self.ctx.shared.t0);
            self.timetable
                .as_mut()
                .expect("open loop")
                .rewind(ns.as_nanos() as f64);
        }
        self.staged.clear();
    }

    /// A staged request sent at `at` (`by_spin`: by the spin's own write, whose lateness
    /// [`busy::drain_sends`] recorded): in flight.
    fn commit_staged(&mut self, mut p: Pending, at: Instant, by_spin: bool) {
        if let Some(q) = self.quota.as_mut() {
            *q -= 1;
        }
        self.outstanding += 1;
        p.sent = at;
        self.members[0].inflight.push_back(p);
        let mut rec = self.ctx.rec.borrow_mut();
        rec.part_sent(0, 1);
        rec.sent(1);
        busy::sent(1);
        if by_spin {
            self.ctx.writes.set(self.ctx.writes.get() + 1);
        } else {
            rec.send_at(at, p.intended);
        }
    }

    /// Why member `m` takes no request now: it is marked down.
    #[inline]
    fn refuses(&self, m: usize) -> Option<Fault> {
        self.members[m].marked.then_some(Fault::MemberDown)
    }

    /// A request for member `m` failed at once with `f` (see [`Conn::refuses`]): counted as
    /// sent to it, and failed.
    fn fail_at_once(&self, m: usize, f: Fault) {
        let mut rec = self.ctx.rec.borrow_mut();
        rec.part_sent(m, 1);
        rec.fault(f);
        rec.part_fault(m, f, 1);
    }

    /// Encodes a whole set of key `k` into member `m`'s buffer
    /// ([`buf(hold)`](crate::member::Member::buf)): a value of the next size, cut from the
    /// value pool. The key is noted as written (to delete at the end).
    #[inline]
    fn encode_set(&mut self, m: usize, hold: bool, k: u64) {
        let sh: &Shared = &self.ctx.shared;
        let len = self.sizes.next(&mut self.rng);
        let w = self.members[m].buf(hold);
        self.wire
            .put_set_header(w, sh.spec.prefix.as_bytes(), k, sh.spec.ttl, len);
        if self.pool_off + len > sh.pool.len() {
            self.pool_off = 0;
        }
        w.extend_from_slice(&sh.pool[self.pool_off..self.pool_off + len]);
        self.wire.put_set_end(w, sh.spec.ttl);
        self.pool_off += 1 + (len & 0xff);
        if let Some(bits) = self.ctx.written.borrow_mut().as_mut() {
            bits[(k / 64) as usize] |= 1 << (k % 64);
        }
    }

    /// Read-through: sets the keys whose gets missed (each on the member it goes to now), as
    /// an application fills its cache on a miss. Each is one more request in flight.
    pub(super) fn refill(&mut self, now: Instant) {
        let keys = std::mem::take(&mut self.refills);
        for &k in &keys {
            let m = self.route(k);
            if let Some(f) = self.refuses(m) {
                self.fail_at_once(m, f);
                continue;
            }
            let cap = self.per_member_cap.then_some(self.depth);
            let hold = self.members[m].must_hold(cap);
            let start = self.members[m].buf(hold).len();
            self.encode_set(m, hold, k);
            let bytes = self.members[m].buf(hold).len() - start;
            // (keys 0: a refill, not one of the workload's requests.)
            let p = Pending {
                op: SET as u8,
                keys: 0,
                group: ALONE,
                key: k,
                intended: now,
                sent: now,
                hops: 0,
            };
            self.members[m].enqueue(p, hold, bytes);
            self.outstanding += 1;
            let mut rec = self.ctx.rec.borrow_mut();
            rec.part_sent(m, 1);
            rec.sent(1);
            busy::sent(1);
        }
        self.refills = keys;
        self.refills.clear();
    }

    /// A multi-get over a pool: one `get` per member holding some of its keys, grouped.
    pub(super) fn push_split_multiget(&mut self, intended: Instant, now: Instant) -> bool {
        let n = self.ctx.shared.spec.multiget_keys;
        self.mkeys.clear();
        for _ in 0..n {
            let k = self.keys.next(&mut self.rng);
            let m = self.route(k);
            self.mkeys.push((k, m as u8));
            self.mcount[m] += 1;
        }
        let cap = self.per_member_cap.then_some(self.depth);
        let sh: &Shared = &self.ctx.shared;
        let prefix = sh.spec.prefix.as_bytes();
        let parts = self.mcount.iter().filter(|&&c| c > 0).count() as u32;
        let group = if parts > 1 {
            self.groups.open(n as u32, parts, intended, now)
        } else {
            ALONE
        };
        let mut sent_any = false;
        let mut rec = self.ctx.rec.borrow_mut();
        for m in 0..self.members.len() {
            let count = std::mem::take(&mut self.mcount[m]);
            if count == 0 {
                continue;
            }
            rec.part_sent(m, 1);
            let member = &mut self.members[m];
            if member.marked {
                self.outstanding -= member_down(&mut rec, &mut self.groups, m, group, now);
                continue;
            }
            let hold = member.must_hold(cap);
            let w = member.buf(hold);
            let start = w.len();
            self.wire.put_multiget_start(w, usize::from(count));
            for &(k, km) in &self.mkeys {
                if usize::from(km) == m {
                    self.wire.put_multiget_key(w, prefix, k);
                }
            }
            self.wire.put_multiget_end(w);
            let len = w.len() - start;
            let p = Pending {
                op: MULTIGET as u8,
                keys: count,
                group,
                key: u64::MAX,
                intended,
                sent: now,
                hops: 0,
            };
            member.enqueue(p, hold, len);
            busy::sent(1);
            sent_any = true;
        }
        sent_any
    }

    /// A multi-get over a Redis Cluster: one `MGET` per hash slot among its keys (a cluster
    /// refuses one across slots: `-CROSSSLOT`), each to the slot's master, grouped.
    pub(super) fn push_slot_multiget(&mut self, intended: Instant, now: Instant) -> bool {
        let n = self.ctx.shared.spec.multiget_keys;
        self.skeys.clear();
        for _ in 0..n {
            let k = self.keys.next(&mut self.rng);
            let slot = self.ctx.shared.routes.slot(k).expect("a cluster");
            self.skeys.push((slot, k));
        }
        self.skeys.sort_unstable();
        let parts = 1 + self.skeys.windows(2).filter(|w| w[0].0 != w[1].0).count();
        let group = if parts > 1 {
            self.groups.open(n as u32, parts as u32, intended, now)
        } else {
            ALONE
        };
        let cap = self.per_member_cap.then_some(self.depth);
        let mut sent_any = false;
        let mut at = 0;
        while at < self.skeys.len() {
            let slot = self.skeys[at].0;
            let end = at + self.skeys[at..].iter().take_while(|s| s.0 == slot).count();
            let first = self.skeys[at].1;
            let m = self.route(first);
            let sh: &Shared = &self.ctx.shared;
            let prefix = sh.spec.prefix.as_bytes();
            let mut rec = self.ctx.rec.borrow_mut();
            rec.part_sent(m, 1);
            let member = &mut self.members[m];
            if member.marked {
                self.outstanding -= member_down(&mut rec, &mut self.groups, m, group, now);
                at = end;
                continue;
            }
            let hold = member.must_hold(cap);
            let w = member.buf(hold);
            let start = w.len();
            self.wire.put_multiget_start(w, end - at);
            for &(_, k) in &self.skeys[at..end] {
                self.wire.put_multiget_key(w, prefix, k);
            }
            self.wire.put_multiget_end(w);
            let len = w.len() - start;
            let p = Pending {
                op: MULTIGET as u8,
                keys: (end - at) as u16,
                group,
                // (its first key: a part of one key can follow a redirection)
                key: first,
                intended,
                sent: now,
                hops: 0,
            };
            member.enqueue(p, hold, len);
            busy::sent(1);
            sent_any = true;
            at = end;
        }
        sent_any
    }

    /// A Redis Cluster's `-MOVED` or `-ASK` for request `p`, from member `from`: sent again
    /// to member `to` (after `ASKING` for an `-ASK`), with its first send and intended times
    /// (its latency counts from them). `None` (the node named is not one of the masters read
    /// before the run), too many redirections, or a multi-key part (its keys are not kept)
    /// fail the request as `redirect_unfollowed`.
    pub(super) fn follow(&mut self, mut p: Pending, from: usize, to: Option<usize>, ask: bool) {
        let now = Instant::now();
        let single = p.key != u64::MAX && (p.op as usize != MULTIGET || p.keys == 1);
        let to = match to {
            Some(to) if single && p.hops < MAX_HOPS => to,
            _ => {
                let f = Fault::Redirected;
                let mut rec = self.ctx.rec.borrow_mut();
                rec.part_fault(from, f, 1);
                if p.group == ALONE {
                    rec.fault(f);
                    self.outstanding -= 1;
                    drop(rec);
                    self.done(1);
                } else if let Some((done, g)) = self.groups.part_done(p.group, Some(Err(f))) {
                    finish_group(&mut rec, now, done, g);
                    self.outstanding -= 1;
                    drop(rec);
                    self.done(1);
                }
                return;
            }
        };
        p.hops += 1;
        let cap = self.per_member_cap.then_some(self.depth);
        let hold = self.members[to].must_hold(cap);
        if ask {
            let w = self.members[to].buf(hold);
            w.extend_from_slice(b"*1\r\n$6\r\nASKING\r\n");
            let asking = Pending {
                op: ASKING,
                keys: 0,
                group: ALONE,
                key: u64::MAX,
                ..p
            };
            self.members[to].enqueue(asking, hold, 16);
            busy::sent(1);
        }
        let start = self.members[to].buf(hold).len();
        let sh: &Shared = &self.ctx.shared;
        let prefix = sh.spec.prefix.as_bytes();
        match p.op as usize {
            GET => self.wire.put_get(self.members[to].buf(hold), prefix, p.key),
            SET => self.encode_set(to, hold, p.key),
            MULTIGET => {
                let w = self.members[to].buf(hold);
                self.wire.put_multiget_start(w, 1);
                self.wire.put_multiget_key(w, prefix, p.key);
                self.wire.put_multiget_end(w);
            }
            _ => self
                .wire
                .put_delete(self.members[to].buf(hold), prefix, p.key),
        }
        let len = self.members[to].buf(hold).len() - start;
        self.members[to].enqueue(p, hold, len);
        self.ctx.rec.borrow_mut().part_sent(to, 1);
        busy::sent(1);
    }

    /// `n` requests finished (answered or failed): progress of a counted run.
    pub(super) fn done(&self, n: u64) {
        let sh = &self.ctx.shared;
        if matches!(sh.spec.stop, Stop::Requests(_)) {
            sh.progress.done.fetch_add(n, Ordering::Relaxed);
        }
    }

    pub(super) fn flush(&mut self, m: usize) -> Result<(), Fault> {
        let member = &mut self.members[m];
        let Link::Up(s) = &member.link else {
            return Ok(());
        };
        while member.wpos < member.wbuf.len() {
            match s.try_write(&member.wbuf[member.wpos..]) {
                Ok(n) => {
                    member.wpos += n;
                    self.ctx.writes.set(self.ctx.writes.get() + 1);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(Fault::from_io(&e)),
            }
        }
        if member.wpos == member.wbuf.len() {
            member.wbuf.clear();
            member.wpos = 0;
            // TLS records still inside the session once every request was taken.
            s.send_pending().map_err(|e| Fault::from_io(&e))?;
        }
        Ok(())
    }
}

/// A part for member `m`, marked down: failed at once, never sent (`member_down`), and its
/// request (or, its group's last part, the multi-get) settled. The requests no longer
/// outstanding: 1 or 0.
fn member_down(
    rec: &mut Recorder,
    groups: &mut Groups,
    m: usize,
    group: u32,
    now: Instant,
) -> usize {
    let f = Fault::MemberDown;
    rec.part_fault(m, f, 1);
    if group == ALONE {
        rec.fault(f);
        return 1;
    }
    match groups.part_done(group, Some(Err(f))) {
        Some((done, g)) => {
            finish_group(rec, now, done, g);
            1
        }
        None => 0,
    }
}
