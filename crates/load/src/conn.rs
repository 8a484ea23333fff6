//! One connection task: a logical client with a socket to every member of the pool (one
//! socket for a single server), as an application's connection holds one to each member.
//!
//! Each request's key picks its member ([`Routes`](crate::route::Routes)); the request is
//! encoded straight into that member's write buffer, written as far as the socket takes it,
//! and its reply decoded in place from the member's read buffer, matched in order to that
//! member's requests in flight ([`wire`]); nothing is allocated per request. A multi-get whose
//! keys live on several members is sent as one `get` per member (its parts) and is done when
//! its last part is ([`Groups`]): its latency is the slowest part's, its hits their sum.
//!
//! In closed loop the task keeps `pipeline` requests outstanding (a split multi-get is one
//! request); in open loop it sends each request when its [`Timetable`] says, woken by its
//! thread's [`Pacer`], and never has more than `max_outstanding` in flight. One wait covers
//! every member's socket, the pacer and a timer (a `poll_fn` over their readiness).
//!
//! Each member's socket has its own requests in flight, buffers, reconnects and back-off: a
//! fault on one loses only the requests in flight on it. In a pool, a member that fails
//! `failure_limit` times in a row is marked down until `retry` has passed: meanwhile its
//! requests fail at once as `member_down` (see [`Pool`](crate::spec::Pool)). While no member
//! is connected the task sends nothing, as a single server's connection waits to reconnect.

use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::io;
use std::os::fd::AsFd;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Buf;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::busy;
use crate::fault::Fault;
use crate::group::{finish_group, Groups};
use crate::keys::{self, KeyDist};
use crate::member::{Down, Link, Member, Pending, ALONE, READ_CHUNK};
use crate::pacing::{ns, Pacer, Timetable};
use crate::recorder::Recorder;
use crate::series::{GET, MULTIGET, SET};
use crate::shared::Shared;
use crate::sizes::{self, SizeDist};
use crate::spec::{Mode, Stop};
use crate::stream::Stream;
use crate::wire::{self, parse_reply, Reply};

/// How often an idle connection wakes to check for timeouts, the end, and interval rollover.
const TICK: Duration = Duration::from_millis(20);

/// What the connection tasks of one worker thread share (set up by the thread).
pub(crate) struct Ctx {
    pub shared: Arc<Shared>,
    /// Open loop: the thread's timer.
    pub pacer: Option<Pacer>,
    pub rec: RefCell<Recorder>,
    /// A bitset over the key space of the keys set, when they need deleting at the end.
    pub written: RefCell<Option<Vec<u64>>>,
    /// Open loop: requests due by the end of sending but never sent.
    pub backlog: Cell<u64>,
    /// Open loop: requests skipped because their connection was down.
    pub skipped: Cell<u64>,
    /// Writes that sent requests.
    pub writes: Cell<u64>,
}

/// One logical connection: a socket per member and its requests in flight.
pub(crate) struct Conn {
    ctx: Rc<Ctx>,
    rng: SmallRng,
    keys: Box<dyn KeyDist>,
    sizes: Box<dyn SizeDist>,
    /// Cumulative op shares, normalised to end at 1.
    mix: [f64; 4],
    members: Vec<Member>,
    /// Members whose socket is up.
    up: usize,
    /// Split multi-gets in flight.
    groups: Groups,
    /// Requests outstanding (a split multi-get counts once).
    outstanding: usize,
    /// A multi-get's keys and their members, and the keys per member (reused).
    mkeys: Vec<(u64, u8)>,
    mcount: Vec<u16>,
    /// Requests this connection may still send (counted runs).
    quota: Option<u64>,
    depth: usize,
    /// Closed loop: refill only once this many slots are free.
    batch: usize,
    /// Open loop: when its requests are due.
    timetable: Option<Timetable>,
    /// This connection's place in the thread's [`Pacer`]; its members' sockets are busy
    /// polling slots `slot * members + m`.
    slot: usize,
    pool_off: usize,
    down: Down,
    open: bool,
}

impl Conn {
    /// Connection `id` of the run, `slot` of its thread's.
    pub fn new(ctx: Rc<Ctx>, id: usize, slot: usize) -> Conn {
        let spec = &ctx.shared.spec;
        let conns = spec.connections;
        let seed = spec.seed ^ (id as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut rng = SmallRng::seed_from_u64(seed);
        let keys = keys::build(
            &spec.key_dist.name,
            &spec.key_dist.params,
            spec.key_space,
            id,
            conns,
        )
        .expect("validated");
        let sizes =
            sizes::build(&spec.value_size.name, &spec.value_size.params).expect("validated");
        let mix = spec.mix.cumulative();
        let quota = spec.quota(id);
        let (depth, timetable) = match spec.mode {
            Mode::Closed => (spec.pipeline, None),
            Mode::Open { rate, arrivals } => (
                spec.max_outstanding,
                Some(Timetable::new(rate, arrivals, conns, &mut rng)),
            ),
        };
        let pool_len = ctx.shared.pool.len();
        let batch = spec.send_batch.max(1);
        let n = spec.pool.len();
        let now = Instant::now();
        let down = Down::since(now, &ctx.shared);
        let open = timetable.is_some();
        Conn {
            pool_off: rng.random_range(0..pool_len.max(1)),
            rng,
            keys,
            sizes,
            mix,
            members: (0..n).map(|_| Member::new(depth, now)).collect(),
            up: 0,
            groups: Groups::with_capacity(if n > 1 { depth } else { 0 }),
            outstanding: 0,
            mkeys: Vec::with_capacity(if n > 1 { spec.multiget_keys } else { 0 }),
            mcount: vec![0; n],
            quota,
            depth,
            batch,
            timetable,
            slot,
            down,
            open,
            ctx,
        }
    }

    fn done_sending(&self, now: Instant) -> bool {
        let sh = &self.ctx.shared;
        sh.stopping() || sh.send_until.is_some_and(|u| now >= u) || self.quota == Some(0)
    }

    fn busy_slot(&self, m: usize) -> usize {
        self.slot * self.members.len() + m
    }

    /// Runs until sending ends and every reply is in (or the run gives up).
    pub async fn run(mut self) {
        let sh = Arc::clone(&self.ctx.shared);
        let timeout = sh.spec.options.request_timeout;
        let mut next_tick = Instant::now() + TICK;
        let mut timer = Box::pin(tokio::time::sleep_until(next_tick.into()));
        loop {
            let now = Instant::now();
            self.ctx.rec.borrow_mut().tick(now);
            let sending = !self.done_sending(now);
            if sending {
                self.start_connects(now);
                if self.up > 0 {
                    self.fill(now);
                }
            } else {
                self.abandon_unconnected(now);
            }
            for m in 0..self.members.len() {
                if self.members[m].wants_write() {
                    if let Err(f) = self.flush(m) {
                        self.fail(m, f, now);
                    }
                }
            }
            self.check_timeouts(now, timeout);
            if !sending && self.members.iter().all(|m| m.inflight.is_empty()) {
                break;
            }
            let timer_on = self.want_timer(sending);
            let mut wake = next_tick;
            if sending {
                for m in &self.members {
                    if let Link::Idle(at) = m.link {
                        wake = wake.min(at);
                    }
                }
            }
            if timer.deadline().into_std() != wake {
                timer.as_mut().reset(wake.into());
            }
            poll_fn(|cx| self.poll_ready(cx, timer.as_mut(), timer_on)).await;
            let now = Instant::now();
            if now >= next_tick {
                next_tick = now + TICK;
            }
            self.handle_events(now);
        }
        let now = Instant::now();
        {
            let mut rec = self.ctx.rec.borrow_mut();
            self.down.end(&mut rec);
            for (m, member) in self.members.iter_mut().enumerate() {
                if let Some((since, failures)) = member.episode.take() {
                    rec.member_down(m, since, now, failures, true);
                }
            }
        }
        for m in 0..self.members.len() {
            if self.members[m].up() {
                busy::unwatch(self.busy_slot(m));
            }
        }
        self.note_backlog(now);
    }

    /// Waits until a socket is readable (or writable, when it has bytes to send), a connect
    /// finishes, the pacer fires this connection (when `timer_on`), or `timer` expires.
    fn poll_ready(
        &mut self,
        cx: &mut Context<'_>,
        timer: Pin<&mut tokio::time::Sleep>,
        timer_on: bool,
    ) -> Poll<()> {
        let mut ready = false;
        for m in &mut self.members {
            let wants_write = m.wants_write();
            match &mut m.link {
                Link::Up(s) => {
                    if let Poll::Ready(r) = s.poll_read_ready(cx) {
                        ready = true;
                        match r {
                            Ok(()) => m.readable = true,
                            Err(e) => m.error = Some(Fault::from_io(&e)),
                        }
                    }
                    if wants_write {
                        if let Poll::Ready(r) = s.poll_write_ready(cx) {
                            ready = true;
                            if let Err(e) = r {
                                m.error = Some(Fault::from_io(&e));
                            }
                        }
                    }
                }
                Link::Connecting(f) => {
                    if let Poll::Ready(r) = f.as_mut().poll(cx) {
                        ready = true;
                        m.landed = Some(r);
                        // Replaced in handle_events; no reconnect before then.
                        m.link = Link::Idle(Instant::now() + Duration::from_secs(3600));
                    }
                }
                Link::Idle(_) => {}
            }
        }
        if timer_on {
            if let Some(p) = self.ctx.pacer.as_ref() {
                ready |= p.poll_fired(self.slot, cx).is_ready();
            }
        }
        ready |= timer.poll(cx).is_ready();
        if ready {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    /// Acts on what the wait found: finished connects, socket errors, replies.
    fn handle_events(&mut self, now: Instant) {
        for m in 0..self.members.len() {
            if let Some(r) = self.members[m].landed.take() {
                match r {
                    Ok(s) => self.connected(m, s, now),
                    Err(e) => {
                        if self.up == 0 {
                            self.down.failures += 1;
                        }
                        self.fail(m, Fault::from_kind(e.kind()), now);
                    }
                }
            }
            if let Some(f) = self.members[m].error.take() {
                self.members[m].readable = false;
                self.fail(m, f, now);
                continue;
            }
            if std::mem::take(&mut self.members[m].readable) {
                if let Err(f) = self.read(m) {
                    self.fail(m, f, now);
                }
            }
        }
    }

    /// Starts connecting every member whose time to (re)connect has come.
    fn start_connects(&mut self, now: Instant) {
        let spec = &self.ctx.shared.spec;
        for (m, member) in self.members.iter_mut().enumerate() {
            if matches!(member.link, Link::Idle(at) if now >= at) {
                let address = spec.pool.members[m].address.clone();
                let options = spec.options.clone();
                member.link = Link::Connecting(Box::pin(async move {
                    Stream::connect(&address, &options).await
                }));
            }
        }
    }

    fn connected(&mut self, m: usize, s: Stream, now: Instant) {
        busy::watch(self.busy_slot(m), s.as_fd());
        let member = &mut self.members[m];
        member.link = Link::Up(s);
        member.marked = false;
        self.up += 1;
        if self.up == 1 {
            self.down
                .up(&mut self.ctx.rec.borrow_mut(), &self.ctx.shared);
            self.skip_missed(now);
        }
    }

    /// Member `m`'s socket failed with `f` (or its connect did, or its queued requests timed
    /// out): the requests on it are lost, and it reconnects after a back-off — or, in a pool,
    /// once it has failed `failure_limit` times in a row, is marked down until `retry`.
    fn fail(&mut self, m: usize, f: Fault, now: Instant) {
        let sh = Arc::clone(&self.ctx.shared);
        if self.members[m].up() {
            busy::unwatch(self.busy_slot(m));
            self.up -= 1;
            if self.up == 0 {
                self.down = Down::since(now, &sh);
            }
        }
        {
            let mut rec = self.ctx.rec.borrow_mut();
            rec.fault(f);
            rec.part_fault(m, f, 1);
        }
        self.lose_inflight(m);
        let pool = &sh.spec.pool;
        self.members[m].strike(f, now, pool);
        if sh.since_success(now) >= sh.spec.give_up_after {
            let whom = if pool.len() > 1 {
                "every member of the pool went away"
            } else {
                "the server went away"
            };
            sh.give_up(format!(
                "{whom}: no request succeeded for {:.1} s, the reconnect budget; last error: {}",
                sh.since_success(now).as_secs_f64(),
                f.as_str()
            ));
        }
    }

    /// The requests in flight (or queued) on member `m` are lost; its buffers are cleared.
    fn lose_inflight(&mut self, m: usize) {
        let n = self.members[m].inflight.len() as u64;
        if n == 0 {
            let member = &mut self.members[m];
            member.wbuf.clear();
            member.wpos = 0;
            member.rbuf.clear();
            return;
        }
        let now = Instant::now();
        let mut rec = self.ctx.rec.borrow_mut();
        rec.part_lost(m, n);
        let member = &mut self.members[m];
        let mut alone = 0;
        for p in member.inflight.drain(..) {
            if p.group == ALONE {
                alone += 1;
            } else if let Some((done, g)) = self.groups.part_done(p.group, None) {
                finish_group(&mut rec, now, done, g);
                self.outstanding -= 1;
            }
        }
        rec.lost(alone);
        self.outstanding -= alone as usize;
        busy::settled(n);
        member.wbuf.clear();
        member.wpos = 0;
        member.rbuf.clear();
    }

    /// Sending is over: requests queued for members that are not connected will never be
    /// sent (they are lost), and no member reconnects.
    fn abandon_unconnected(&mut self, now: Instant) {
        for m in 0..self.members.len() {
            if !self.members[m].up() {
                if !matches!(self.members[m].link, Link::Idle(_)) {
                    self.members[m].link = Link::Idle(now + Duration::from_secs(3600));
                }
                self.lose_inflight(m);
            }
        }
    }

    /// A member whose oldest request has waited longer than the timeout has failed.
    fn check_timeouts(&mut self, now: Instant, timeout: Duration) {
        for m in 0..self.members.len() {
            let Some(p) = self.members[m].inflight.front() else {
                continue;
            };
            if now.saturating_duration_since(p.sent) > timeout {
                let sent = p.sent;
                self.ctx.rec.borrow_mut().timed_out(sent, now);
                if !self.members[m].up() {
                    self.members[m].link = Link::Idle(now);
                }
                self.fail(m, Fault::Timeout, now);
            }
        }
    }

    fn due(&self, ns: f64) -> Instant {
        self.ctx.shared.t0 + Duration::from_nanos(ns as u64)
    }

    /// Open loop, after a reconnect: requests that fell due more than a timeout ago, while
    /// the connection was down, are skipped (and counted) rather than sent in one burst.
    fn skip_missed(&mut self, now: Instant) {
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
    fn note_backlog(&mut self, now: Instant) {
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
    fn want_timer(&mut self, sending: bool) -> bool {
        let (Some(t), Some(p)) = (self.timetable.as_ref(), self.ctx.pacer.as_ref()) else {
            return false;
        };
        let due =
            (sending && self.up > 0 && self.outstanding < self.depth).then_some(t.next_ns() as u64);
        p.want(self.slot, due);
        due.is_some()
    }

    fn fill(&mut self, now: Instant) {
        let mut n = 0u64;
        // Requests failed at once (their member is down) free their slot at once: a fill
        // takes at most `depth` of them, so a pool whose keys all live on a member that is
        // down does not spin.
        let mut budget = self.depth;
        if self.timetable.is_none() {
            // A batch is never more than the requests left to send, so the last ones go out.
            let batch = self
                .batch
                .min(self.quota.map_or(usize::MAX, |q| q as usize));
            if self.depth - self.outstanding < batch && self.outstanding > 0 {
                return;
            }
            while self.outstanding < self.depth && self.quota != Some(0) && budget > 0 {
                if !self.push(now, now) {
                    budget -= 1;
                }
                n += 1;
            }
        } else {
            while self.outstanding < self.depth && self.quota != Some(0) {
                let t = self.timetable.as_ref().expect("open loop");
                let due = self.due(t.next_ns());
                if due > now {
                    break;
                }
                self.ctx.rec.borrow_mut().send_at(now, due);
                self.push(due, now);
                self.timetable
                    .as_mut()
                    .expect("open loop")
                    .advance(&mut self.rng);
                n += 1;
            }
        }
        if n > 0 {
            self.ctx.rec.borrow_mut().sent(n);
        }
    }

    /// Encodes one request (a multi-get split over its members) and records it as in
    /// flight; false when it failed at once because its member (every part's) is down.
    fn push(&mut self, intended: Instant, now: Instant) -> bool {
        let x: f64 = self.rng.random();
        let op = self.mix.iter().position(|&c| x < c).unwrap_or(GET);
        if let Some(q) = self.quota.as_mut() {
            *q -= 1;
        }
        self.outstanding += 1;
        if op == MULTIGET && self.members.len() > 1 {
            return self.push_split_multiget(intended, now);
        }
        // Borrowed, not cloned: no atomic reference count per request.
        let sh: &Shared = &self.ctx.shared;
        let spec = &sh.spec;
        let prefix = spec.prefix.as_bytes();
        let mut keys = 1u16;
        let (m, k) = match op {
            MULTIGET => {
                let n = spec.multiget_keys;
                keys = n as u16;
                let w = &mut self.members[0].wbuf;
                w.extend_from_slice(b"get");
                for _ in 0..n {
                    w.push(b' ');
                    let k = self.keys.next(&mut self.rng);
                    wire::put_key(w, prefix, k);
                }
                (0, None)
            }
            _ => {
                let k = self.keys.next(&mut self.rng);
                (sh.routes.member(k), Some(k))
            }
        };
        let member = &mut self.members[m];
        if member.marked {
            let mut rec = self.ctx.rec.borrow_mut();
            rec.part_sent(m, 1);
            rec.fault(Fault::MemberDown);
            rec.part_fault(m, Fault::MemberDown, 1);
            drop(rec);
            self.outstanding -= 1;
            self.done(1);
            return false;
        }
        if let Some(k) = k {
            let w = &mut member.wbuf;
            match op {
                GET => {
                    w.extend_from_slice(b"get ");
                    wire::put_key(w, prefix, k);
                }
                SET => {
                    let len = self.sizes.next(&mut self.rng);
                    wire::put_set_header(w, prefix, k, spec.ttl, len);
                    let pool = &sh.pool;
                    if self.pool_off + len > pool.len() {
                        self.pool_off = 0;
                    }
                    w.extend_from_slice(&pool[self.pool_off..self.pool_off + len]);
                    self.pool_off += 1 + (len & 0xff);
                    if let Some(bits) = self.ctx.written.borrow_mut().as_mut() {
                        bits[(k / 64) as usize] |= 1 << (k % 64);
                    }
                }
                _ => {
                    // DELETE
                    w.extend_from_slice(b"delete ");
                    wire::put_key(w, prefix, k);
                }
            }
        }
        member.wbuf.extend_from_slice(b"\r\n");
        member.inflight.push_back(Pending {
            op: op as u8,
            keys,
            group: ALONE,
            intended,
            sent: now,
        });
        self.ctx.rec.borrow_mut().part_sent(m, 1);
        busy::sent(1);
        true
    }

    /// A multi-get over a pool: one `get` per member holding some of its keys, grouped.
    fn push_split_multiget(&mut self, intended: Instant, now: Instant) -> bool {
        let sh: &Shared = &self.ctx.shared;
        let n = sh.spec.multiget_keys;
        let prefix = sh.spec.prefix.as_bytes();
        self.mkeys.clear();
        for _ in 0..n {
            let k = self.keys.next(&mut self.rng);
            let m = sh.routes.member(k);
            self.mkeys.push((k, m as u8));
            self.mcount[m] += 1;
        }
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
                rec.part_fault(m, Fault::MemberDown, 1);
                if group == ALONE {
                    rec.fault(Fault::MemberDown);
                    self.outstanding -= 1;
                } else if let Some((done, g)) =
                    self.groups.part_done(group, Some(Err(Fault::MemberDown)))
                {
                    finish_group(&mut rec, now, done, g);
                    self.outstanding -= 1;
                }
                continue;
            }
            let w = &mut member.wbuf;
            w.extend_from_slice(b"get");
            for &(k, km) in &self.mkeys {
                if usize::from(km) == m {
                    w.push(b' ');
                    wire::put_key(w, prefix, k);
                }
            }
            w.extend_from_slice(b"\r\n");
            member.inflight.push_back(Pending {
                op: MULTIGET as u8,
                keys: count,
                group,
                intended,
                sent: now,
            });
            busy::sent(1);
            sent_any = true;
        }
        sent_any
    }

    /// `n` requests finished (answered or failed): progress of a counted run.
    fn done(&self, n: u64) {
        let sh = &self.ctx.shared;
        if matches!(sh.spec.stop, Stop::Requests(_)) {
            sh.progress.done.fetch_add(n, Ordering::Relaxed);
        }
    }

    fn flush(&mut self, m: usize) -> Result<(), Fault> {
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

    fn read(&mut self, m: usize) -> Result<(), Fault> {
        let member = &mut self.members[m];
        let Link::Up(s) = &member.link else {
            return Ok(());
        };
        if member.rbuf.capacity() - member.rbuf.len() < READ_CHUNK / 4 {
            member.rbuf.reserve(READ_CHUNK);
        }
        match s.read_some(&mut member.rbuf) {
            Ok(0) => return Err(Fault::Closed),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) => return Err(Fault::from_io(&e)),
        }
        let now = Instant::now();
        let mut pos = 0;
        let mut parts = 0u64;
        let mut finished = 0u64;
        {
            let mut rec = self.ctx.rec.borrow_mut();
            rec.tick(now);
            while let Some(&p) = member.inflight.front() {
                let is_get = p.op as usize == GET || p.op as usize == MULTIGET;
                match parse_reply(is_get, &member.rbuf[pos..]) {
                    Ok(None) => break,
                    Ok(Some((n, reply))) => {
                        pos += n;
                        member.inflight.pop_front();
                        parts += 1;
                        let keys = if is_get { u32::from(p.keys) } else { 0 };
                        let outcome = match reply {
                            Reply::Done { hits } => {
                                let hits = hits.min(keys);
                                let corrected = ns(now, p.intended);
                                let uncorrected = ns(now, p.sent);
                                let waited = if self.open { corrected } else { uncorrected };
                                rec.part_reply(m, keys, hits, waited);
                                if p.group == ALONE {
                                    rec.reply(
                                        now,
                                        p.op as usize,
                                        u32::from(p.keys),
                                        hits.min(u32::from(p.keys)),
                                        corrected,
                                        uncorrected,
                                    );
                                }
                                Ok(hits)
                            }
                            Reply::Failed(f) => {
                                rec.part_fault(m, f, 1);
                                if p.group == ALONE {
                                    rec.fault(f);
                                }
                                Err(f)
                            }
                        };
                        if p.group == ALONE {
                            finished += 1;
                        } else if let Some((done, g)) =
                            self.groups.part_done(p.group, Some(outcome))
                        {
                            finish_group(&mut rec, now, done, g);
                            finished += 1;
                        }
                    }
                    Err(_) => return Err(Fault::Protocol),
                }
            }
            if parts > 0 {
                if let Some((since, failures)) = member.answered() {
                    rec.member_down(m, since, now, failures, false);
                }
            }
        }
        if member.inflight.is_empty() && pos < member.rbuf.len() {
            return Err(Fault::Protocol); // bytes nobody asked for
        }
        member.rbuf.advance(pos);
        self.outstanding -= finished as usize;
        busy::settled(parts);
        if parts > 0 {
            let sh = &self.ctx.shared;
            let ms = now.saturating_duration_since(sh.t0).as_millis() as u64;
            sh.last_success_ms.fetch_max(ms, Ordering::Relaxed);
            self.done(finished);
        }
        Ok(())
    }
}
