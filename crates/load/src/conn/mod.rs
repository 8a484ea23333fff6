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
//! thread's [`Pacer`], and never has more than `max_outstanding` in flight — per member socket
//! in a pool, where a request due for a member at its cap is held for that member (sent late
//! as room frees) while the others' go out on time. One wait covers every member's socket,
//! the pacer and a timer (a `poll_fn` over their readiness).
//!
//! Each member's socket has its own requests in flight, buffers, reconnects and back-off: a
//! fault on one loses only the requests in flight on it. In a pool, a member silent past the
//! member timeout with requests waiting has failed; one that fails `failure_limit` times in a
//! row is marked down until `retry` has passed: meanwhile its requests fail at once as
//! `member_down`, or with `remap` go to the distribution over the others
//! ([`membership`], see [`Pool`](crate::spec::Pool)), which also follows the run's membership
//! changes. Read-through (`on_miss_set`) sets each key a get missed. While no member is
//! connected the task sends nothing, as a single server's connection waits to reconnect.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::os::fd::AsFd;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::busy;
use crate::fault::Fault;
use crate::group::{finish_group, Groups};
use crate::keys::{self, KeyDist};
use crate::member::{silence, Down, Link, Member, Pending, ALONE};
use crate::pacing::{Pacer, Timetable};
use crate::recorder::Recorder;
use crate::shared::Shared;
use crate::sizes::{self, SizeDist};
use crate::spec::{Mode, Protocol};
use crate::stream::Stream;
use crate::wire::Wire;

mod membership;
mod reply;
mod send;

use membership::Remap;

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
    /// A Redis Cluster: keys go by hash slot, a multi-get is split by slot ([`Conn::follow`]
    /// takes the redirections); a multi-get's slots and keys (reused).
    cluster: bool,
    skeys: Vec<(u16, u64)>,
    /// Redirections read, to follow once the read is done: the request, the member that sent
    /// it, the member named (None: not one of the pool's), whether an `-ASK`.
    redirected: Vec<(Pending, usize, Option<usize>, bool)>,
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
    /// The pool's membership in force (an index into the routes' epochs), and when the next
    /// one starts.
    epoch: usize,
    next_change: Option<Instant>,
    /// With `remap`: the distribution over the members not marked down, for the membership
    /// and the marked members it was built for.
    remap: Option<Remap>,
    /// Read-through: keys whose get missed, to set.
    refills: Vec<u64>,
    /// Open loop over a pool: the cap of requests in flight is per member: a request due for
    /// a member at its cap is held for it (sent, late, as its replies free room) while the
    /// other members' requests go out on time — a member that stops answering holds up only
    /// its own requests, not the connection's.
    per_member_cap: bool,
    /// The protocol spoken.
    wire: Wire,
    /// Open loop with a spin on a single server: requests are staged for the spin to send
    /// ([`busy`]); those staged, in order, not yet in flight.
    spin_send: bool,
    staged: VecDeque<Pending>,
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
        let routes = &ctx.shared.routes;
        let start = &routes.epochs[0].active;
        let members = (0..n)
            .map(|m| {
                let mut member = Member::new(depth, now);
                if !start.contains(&m) {
                    // Joins later: not connected until then.
                    member.link = Link::Idle(now + Duration::from_secs(1 << 30));
                }
                member
            })
            .collect();
        let next_change = routes.epochs.get(1).map(|e| ctx.shared.t0 + e.from);
        Conn {
            pool_off: rng.random_range(0..pool_len.max(1)),
            rng,
            keys,
            sizes,
            mix,
            members,
            up: 0,
            groups: Groups::with_capacity(if n > 1 { depth } else { 0 }),
            outstanding: 0,
            mkeys: Vec::with_capacity(if n > 1 { spec.multiget_keys } else { 0 }),
            mcount: vec![0; n],
            cluster: spec.pool.is_cluster(),
            skeys: Vec::with_capacity(if spec.pool.is_cluster() {
                spec.multiget_keys
            } else {
                0
            }),
            redirected: Vec::new(),
            quota,
            depth,
            batch,
            timetable,
            slot,
            down,
            open,
            epoch: 0,
            next_change,
            remap: None,
            refills: Vec::new(),
            per_member_cap: open && n > 1,
            wire: match spec.protocol {
                Protocol::Memcached => Wire::Memcached,
                Protocol::Resp(_) => Wire::Resp,
            },
            spin_send: open && n == 1 && !spec.spin.is_zero() && !spec.on_miss_set,
            staged: VecDeque::new(),
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
            if self.next_change.is_some_and(|c| now >= c) {
                self.change_membership(now);
            }
            let sending = !self.done_sending(now);
            if self.spin_send {
                self.settle_staged(now, sending);
            }
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
            if (0..self.members.len()).any(|m| self.late(m, now, timeout)) {
                // A reply already in the socket is not a timeout: read what came in first.
                // This thread may not have run for a while (a loaded machine preempts it,
                // also between reading a socket and this check); one turn of the reactor
                // sees every byte that arrived by `now`.
                tokio::task::yield_now().await;
                poll_fn(|cx| {
                    let _ = self.poll_ready(cx, timer.as_mut(), false);
                    Poll::Ready(())
                })
                .await;
                self.handle_events(Instant::now());
            }
            self.check_timeouts(now, timeout);
            if !sending && self.members.iter().all(|m| m.waiting() == 0) {
                break;
            }
            if self.spin_send && sending && self.up == 1 {
                self.stage_ahead(Instant::now());
            }
            let timer_on = self.want_timer(sending);
            let mut wake = next_tick;
            if sending {
                for m in &self.members {
                    if let Link::Idle(at) = m.link {
                        wake = wake.min(at);
                    }
                }
                if let Some(c) = self.next_change {
                    wake = wake.min(c);
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
                if let Some(e) = member.episode.take() {
                    rec.member_down(m, e, now, true);
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
        // The spin may have sent staged requests meanwhile: in flight before any reply.
        if self.spin_send {
            self.settle_staged(now, true);
        }
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
                } else if self.per_member_cap && !self.members[m].held.is_empty() {
                    self.members[m].release(self.depth, now);
                }
            }
        }
        if !self.refills.is_empty() {
            if self.done_sending(now) {
                self.refills.clear();
            } else {
                self.refill(now);
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
                let login = match &spec.protocol {
                    Protocol::Resp(login) => Some(login.handshake()),
                    Protocol::Memcached => None,
                };
                member.link = Link::Connecting(Box::pin(async move {
                    let s = Stream::connect(&address, &options).await?;
                    if let Some((commands, replies)) = login.filter(|(_, n)| *n > 0) {
                        s.login(&commands, replies, &address, &options).await?;
                    }
                    Ok(s)
                }));
            }
        }
    }

    fn connected(&mut self, m: usize, s: Stream, now: Instant) {
        busy::watch(self.busy_slot(m), s.as_fd());
        let member = &mut self.members[m];
        member.link = Link::Up(s);
        member.marked = false;
        member.heard = now;
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
        if self.spin_send {
            // Those the spin sent are lost with the others; the rest are not sent.
            self.settle_staged(now, false);
        }
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
        let n = self.members[m].waiting() as u64;
        if n == 0 {
            let member = &mut self.members[m];
            member.wbuf.clear();
            member.wpos = 0;
            member.rbuf.clear();
            return;
        }
        let now = Instant::now();
        let mut rec = self.ctx.rec.borrow_mut();
        let member = &mut self.members[m];
        // (an ASKING before a redirected request is no request of the run's)
        let asking = member
            .inflight
            .iter()
            .chain(member.held.iter().map(|(p, _)| p))
            .filter(|p| p.op == send::ASKING)
            .count() as u64;
        rec.part_lost(m, n - asking);
        let mut alone = 0;
        // Held requests (never sent) are lost with those in flight: the client's queue for
        // a connection that failed.
        let held = member.held.drain(..).map(|(p, _)| p);
        for p in member.inflight.drain(..).chain(held) {
            if p.op == send::ASKING {
                continue;
            } else if p.group == ALONE {
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
        member.hbuf.clear();
        member.hpos = 0;
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

    /// Whether member `m`'s oldest request has waited longer than the timeout at `now`, or
    /// the pool member has been silent longer than the member timeout with requests waiting.
    fn late(&self, m: usize, now: Instant, timeout: Duration) -> bool {
        let Some(p) = self.members[m].inflight.front() else {
            return false;
        };
        let pool = &self.ctx.shared.spec.pool;
        (pool.len() > 1 && silence(&self.members[m], now) > pool.member_timeout)
            || now.saturating_duration_since(p.sent) > timeout
    }

    /// A member whose oldest request has waited longer than the timeout has failed; so has
    /// a pool member with requests waiting that has been silent longer than the member
    /// timeout (the member-health deadline).
    fn check_timeouts(&mut self, now: Instant, timeout: Duration) {
        for m in 0..self.members.len() {
            if self.late(m, now, timeout) {
                let sent = self.members[m]
                    .inflight
                    .front()
                    .expect("late: waiting")
                    .sent;
                self.ctx.rec.borrow_mut().timed_out(sent, now);
                if !self.members[m].up() {
                    self.members[m].link = Link::Idle(now);
                }
                self.fail(m, Fault::Timeout, now);
            }
        }
    }
}
