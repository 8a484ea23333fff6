//! One connection task: connects (and reconnects, backing off), then keeps requests flowing.
//!
//! The task encodes requests straight into its write buffer, writes whatever the socket takes,
//! and decodes replies in place from its read buffer, matching them in order to the requests
//! in flight ([`wire`]); nothing is allocated per request. In closed loop it keeps
//! `pipeline` requests outstanding; in open loop it sends each request when its
//! [`Timetable`] says, woken by its thread's [`Pacer`], and never has more than
//! `max_outstanding` in flight.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::io;
use std::os::fd::AsFd;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::busy;
use crate::fault::Fault;
use crate::keys::{self, KeyDist};
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
const READ_CHUNK: usize = 64 * 1024;

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

/// A request in flight.
#[derive(Clone, Copy)]
struct Pending {
    op: u8,
    keys: u16,
    intended: Instant,
    sent: Instant,
}

enum Event {
    Read(io::Result<()>),
    Write(io::Result<()>),
    Timer,
    Tick,
}

/// A connection's time without a connection: from its start (or the fault that dropped it)
/// to its next successful connect, noted as a stall when long enough. While it lasts the
/// connection is counted in [`Shared::conns_down`].
struct Down {
    since: Option<Instant>,
    failures: u64,
}

impl Down {
    fn since(now: Instant, sh: &Shared) -> Down {
        sh.conns_down.fetch_add(1, Ordering::Relaxed);
        Down {
            since: Some(now),
            failures: 0,
        }
    }

    /// Connected again.
    fn up(&mut self, rec: &mut Recorder, sh: &Shared) {
        if let Some(since) = self.since.take() {
            sh.conns_down.fetch_sub(1, Ordering::Relaxed);
            rec.down(since, Instant::now(), self.failures);
        }
    }

    /// The run ended; a connection still down stays counted as down.
    fn end(&mut self, rec: &mut Recorder) {
        if let Some(since) = self.since.take() {
            rec.down(since, Instant::now(), self.failures);
        }
    }
}

/// One connection and its requests in flight.
pub(crate) struct Conn {
    ctx: Rc<Ctx>,
    rng: SmallRng,
    keys: Box<dyn KeyDist>,
    sizes: Box<dyn SizeDist>,
    /// Cumulative op shares, normalised to end at 1.
    mix: [f64; 4],
    inflight: VecDeque<Pending>,
    wbuf: Vec<u8>,
    wpos: usize,
    rbuf: BytesMut,
    /// Requests this connection may still send (counted runs).
    quota: Option<u64>,
    depth: usize,
    /// Closed loop: refill only once this many slots are free.
    batch: usize,
    /// Open loop: when its requests are due.
    timetable: Option<Timetable>,
    /// This connection's place in the thread's [`Pacer`].
    slot: usize,
    pool_off: usize,
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
        Conn {
            ctx,
            pool_off: rng.random_range(0..pool_len.max(1)),
            rng,
            keys,
            sizes,
            mix,
            inflight: VecDeque::with_capacity(depth),
            wbuf: Vec::with_capacity(16 * 1024),
            wpos: 0,
            rbuf: BytesMut::with_capacity(READ_CHUNK),
            quota,
            depth,
            batch,
            timetable,
            slot,
        }
    }

    fn done_sending(&self, now: Instant) -> bool {
        let sh = &self.ctx.shared;
        sh.stopping() || sh.send_until.is_some_and(|u| now >= u) || self.quota == Some(0)
    }

    /// Runs until sending ends and every reply is in (or the run gives up).
    pub async fn run(mut self) {
        let sh = Arc::clone(&self.ctx.shared);
        let mut failures = 0u32;
        let mut down = Down::since(Instant::now(), &sh);
        loop {
            if self.done_sending(Instant::now()) {
                break;
            }
            let stream = match Stream::connect(&sh.spec.address, &sh.spec.options).await {
                Ok(s) => s,
                Err(e) => {
                    self.ctx.rec.borrow_mut().fault(Fault::from_kind(e.kind()));
                    failures += 1;
                    down.failures += 1;
                    if !self.back_off(failures, &e.to_string()).await {
                        break;
                    }
                    continue;
                }
            };
            down.up(&mut self.ctx.rec.borrow_mut(), &sh);
            self.skip_missed(Instant::now());
            busy::watch(self.slot, stream.as_fd());
            let exchanged = self.exchange(&stream).await;
            busy::unwatch(self.slot);
            match exchanged {
                Ok(()) => break,
                Err(f) => {
                    drop(stream);
                    down = Down::since(Instant::now(), &sh);
                    {
                        let mut rec = self.ctx.rec.borrow_mut();
                        rec.fault(f);
                        rec.lost(self.inflight.len() as u64);
                    }
                    busy::settled(self.inflight.len() as u64);
                    self.inflight.clear();
                    self.wbuf.clear();
                    self.wpos = 0;
                    self.rbuf.clear();
                    failures = if f == Fault::Timeout { failures + 1 } else { 1 };
                    if !self.back_off(failures, f.as_str()).await {
                        break;
                    }
                }
            }
        }
        down.end(&mut self.ctx.rec.borrow_mut());
        self.note_backlog(Instant::now());
    }

    /// Waits before reconnecting; false when the run should end instead.
    async fn back_off(&mut self, failures: u32, why: &str) -> bool {
        let sh = Arc::clone(&self.ctx.shared);
        let now = Instant::now();
        if sh.since_success(now) >= sh.spec.give_up_after {
            sh.give_up(format!(
                "the server went away: no request succeeded for {:.1} s, the reconnect \
                 budget; last error: {why}",
                sh.since_success(now).as_secs_f64()
            ));
            return false;
        }
        let wait = Duration::from_millis(10u64 << failures.min(7)).min(Duration::from_secs(1));
        let until = now + wait;
        while Instant::now() < until {
            if self.done_sending(Instant::now()) {
                return false;
            }
            tokio::time::sleep(TICK.min(until.saturating_duration_since(Instant::now()))).await;
            self.ctx.rec.borrow_mut().tick(Instant::now());
        }
        !self.done_sending(Instant::now())
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

    async fn exchange(&mut self, s: &Stream) -> Result<(), Fault> {
        let timeout = self.ctx.shared.spec.options.request_timeout;
        let mut tick = Box::pin(tokio::time::sleep(TICK));
        loop {
            let now = Instant::now();
            self.ctx.rec.borrow_mut().tick(now);
            let sending = !self.done_sending(now);
            if sending {
                self.fill(now);
            }
            if self.wpos < self.wbuf.len() || s.pending() {
                self.flush(s)?;
            }
            if !sending && self.inflight.is_empty() {
                return Ok(());
            }
            if let Some(p) = self.inflight.front() {
                if now.saturating_duration_since(p.sent) > timeout {
                    self.ctx.rec.borrow_mut().timed_out(p.sent, now);
                    return Err(Fault::Timeout);
                }
            }
            let want_write = self.wpos < self.wbuf.len() || s.pending();
            let timer_on = self.want_timer(sending);
            let pacer = self.ctx.pacer.as_ref();
            let slot = self.slot;
            let ev = tokio::select! {
                biased;
                r = s.readable() => Event::Read(r),
                r = s.writable(), if want_write => Event::Write(r),
                _ = async {
                    if let Some(p) = pacer {
                        p.fired(slot).await;
                    }
                }, if timer_on => Event::Timer,
                _ = &mut tick => Event::Tick,
            };
            match ev {
                Event::Read(r) => {
                    r.map_err(|e| Fault::from_io(&e))?;
                    self.read(s)?;
                }
                Event::Write(r) => {
                    r.map_err(|e| Fault::from_io(&e))?;
                }
                Event::Timer => {}
                Event::Tick => tick.as_mut().reset(tokio::time::Instant::now() + TICK),
            }
        }
    }

    /// Open loop: tells the thread's pacer when this connection next needs waking (never,
    /// while it is full: a reply will wake it). True when it waits for the pacer.
    fn want_timer(&mut self, sending: bool) -> bool {
        let (Some(t), Some(p)) = (self.timetable.as_ref(), self.ctx.pacer.as_ref()) else {
            return false;
        };
        let due = (sending && self.inflight.len() < self.depth).then_some(t.next_ns() as u64);
        p.want(self.slot, due);
        due.is_some()
    }

    fn fill(&mut self, now: Instant) {
        let mut n = 0u64;
        if self.timetable.is_none() {
            // A batch is never more than the requests left to send, so the last ones go out.
            let batch = self
                .batch
                .min(self.quota.map_or(usize::MAX, |q| q as usize));
            if self.depth - self.inflight.len() < batch && !self.inflight.is_empty() {
                return;
            }
            while self.inflight.len() < self.depth && self.quota != Some(0) {
                self.push(now, now);
                n += 1;
            }
        } else {
            while self.inflight.len() < self.depth && self.quota != Some(0) {
                let t = self.timetable.as_ref().expect("open loop");
                let due = self.due(t.next_ns());
                if due > now {
                    break;
                }
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
            busy::sent(n);
        }
    }

    fn put_key(&mut self, index: u64) {
        wire::put_key(
            &mut self.wbuf,
            self.ctx.shared.spec.prefix.as_bytes(),
            index,
        );
    }

    /// Encodes one request and records it as in flight.
    fn push(&mut self, intended: Instant, now: Instant) {
        let x: f64 = self.rng.random();
        let op = self.mix.iter().position(|&c| x < c).unwrap_or(GET);
        let mut keys = 1u16;
        match op {
            GET => {
                self.wbuf.extend_from_slice(b"get ");
                let k = self.keys.next(&mut self.rng);
                self.put_key(k);
            }
            MULTIGET => {
                let n = self.ctx.shared.spec.multiget_keys;
                keys = n as u16;
                self.wbuf.extend_from_slice(b"get");
                for _ in 0..n {
                    self.wbuf.push(b' ');
                    let k = self.keys.next(&mut self.rng);
                    self.put_key(k);
                }
            }
            SET => {
                let k = self.keys.next(&mut self.rng);
                let len = self.sizes.next(&mut self.rng);
                let spec = &self.ctx.shared.spec;
                wire::put_set_header(&mut self.wbuf, spec.prefix.as_bytes(), k, spec.ttl, len);
                let pool = &self.ctx.shared.pool;
                if self.pool_off + len > pool.len() {
                    self.pool_off = 0;
                }
                self.wbuf
                    .extend_from_slice(&pool[self.pool_off..self.pool_off + len]);
                self.pool_off += 1 + (len & 0xff);
                if let Some(bits) = self.ctx.written.borrow_mut().as_mut() {
                    bits[(k / 64) as usize] |= 1 << (k % 64);
                }
            }
            _ => {
                // DELETE
                self.wbuf.extend_from_slice(b"delete ");
                let k = self.keys.next(&mut self.rng);
                self.put_key(k);
            }
        }
        self.wbuf.extend_from_slice(b"\r\n");
        self.inflight.push_back(Pending {
            op: op as u8,
            keys,
            intended,
            sent: now,
        });
        if let Some(q) = self.quota.as_mut() {
            *q -= 1;
        }
    }

    fn flush(&mut self, s: &Stream) -> Result<(), Fault> {
        while self.wpos < self.wbuf.len() {
            match s.try_write(&self.wbuf[self.wpos..]) {
                Ok(n) => {
                    self.wpos += n;
                    self.ctx.writes.set(self.ctx.writes.get() + 1);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(Fault::from_io(&e)),
            }
        }
        if self.wpos == self.wbuf.len() {
            self.wbuf.clear();
            self.wpos = 0;
            // TLS records still inside the session once every request was taken.
            s.send_pending().map_err(|e| Fault::from_io(&e))?;
        }
        Ok(())
    }

    fn read(&mut self, s: &Stream) -> Result<(), Fault> {
        if self.rbuf.capacity() - self.rbuf.len() < READ_CHUNK / 4 {
            self.rbuf.reserve(READ_CHUNK);
        }
        match s.read_some(&mut self.rbuf) {
            Ok(0) => return Err(Fault::Closed),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) => return Err(Fault::from_io(&e)),
        }
        let now = Instant::now();
        let mut pos = 0;
        let mut done = 0u64;
        {
            let mut rec = self.ctx.rec.borrow_mut();
            rec.tick(now);
            while let Some(&p) = self.inflight.front() {
                let is_get = p.op as usize == GET || p.op as usize == MULTIGET;
                match parse_reply(is_get, &self.rbuf[pos..]) {
                    Ok(None) => break,
                    Ok(Some((n, reply))) => {
                        pos += n;
                        self.inflight.pop_front();
                        done += 1;
                        match reply {
                            Reply::Done { hits } => rec.reply(
                                now,
                                p.op as usize,
                                u32::from(p.keys),
                                hits.min(u32::from(p.keys)),
                                ns(now, p.intended),
                                ns(now, p.sent),
                            ),
                            Reply::Failed(f) => rec.fault(f),
                        }
                    }
                    Err(_) => return Err(Fault::Protocol),
                }
            }
        }
        if self.inflight.is_empty() && pos < self.rbuf.len() {
            return Err(Fault::Protocol); // bytes nobody asked for
        }
        self.rbuf.advance(pos);
        busy::settled(done);
        if done > 0 {
            let sh = &self.ctx.shared;
            let ms = now.saturating_duration_since(sh.t0).as_millis() as u64;
            sh.last_success_ms.fetch_max(ms, Ordering::Relaxed);
            if matches!(sh.spec.stop, Stop::Requests(_)) {
                sh.progress.done.fetch_add(done, Ordering::Relaxed);
            }
        }
        Ok(())
    }
}
