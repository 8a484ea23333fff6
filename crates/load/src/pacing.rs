//! Open-loop pacing: when each connection's requests are due, and the thread's timer that
//! wakes the connections when they are.
//!
//! Every connection follows its own [`Timetable`] of intended send times (Poisson or evenly
//! spaced arrivals at `rate / connections`). One `timerfd` per thread (a [`Pacer`]) is set,
//! with an absolute expiry, for the earliest intended send time of all the thread's
//! connections; when it fires every connection with a request due is woken, so one wake-up
//! sends all that is due and the timer is set once per wake-up, not once per request and
//! connection. (tokio's own timer has 1 ms resolution; a `timerfd` has microseconds.)

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use rand::rngs::SmallRng;
use rand::Rng;
use tokio::io::unix::AsyncFd;

use crate::busy;
use crate::spec::Arrivals;

/// One connection's open-loop timetable: its intended send times, in ns after the run start.
pub(crate) struct Timetable {
    mean_gap_ns: f64,
    poisson: bool,
    next_ns: f64,
}

impl Timetable {
    /// `rate` requests per second over `connections` connections, each with its own share:
    /// Poisson arrivals, or equal gaps from a random phase.
    pub fn new(rate: f64, arrivals: Arrivals, connections: usize, rng: &mut SmallRng) -> Timetable {
        let mean_gap_ns = 1e9 * connections as f64 / rate;
        let poisson = arrivals == Arrivals::Poisson;
        let first = if poisson {
            -(1.0 - rng.random::<f64>()).ln() * mean_gap_ns
        } else {
            rng.random::<f64>() * mean_gap_ns
        };
        Timetable {
            mean_gap_ns,
            poisson,
            next_ns: first,
        }
    }

    /// When the next request is due, ns after the run start.
    pub fn next_ns(&self) -> f64 {
        self.next_ns
    }

    /// Moves on to the next intended send time.
    pub fn advance(&mut self, rng: &mut SmallRng) {
        self.next_ns += if self.poisson {
            -(1.0 - rng.random::<f64>()).ln() * self.mean_gap_ns
        } else {
            self.mean_gap_ns
        };
    }

    /// Makes `next_ns` the next send time again (staged requests dropped unsent).
    pub fn rewind(&mut self, next_ns: f64) {
        self.next_ns = next_ns;
    }

    /// Passes over the send times before `limit_ns`, at most `most` of them; how many.
    pub fn skip_before(&mut self, limit_ns: f64, most: Option<u64>, rng: &mut SmallRng) -> u64 {
        let mut skipped = 0;
        while self.next_ns < limit_ns && most != Some(skipped) {
            self.advance(rng);
            skipped += 1;
        }
        skipped
    }

    /// About how many send times fall before `end_ns` from the next one on (0 if none).
    pub fn due_before(&self, end_ns: f64) -> u64 {
        if self.next_ns < end_ns {
            ((end_ns - self.next_ns) / self.mean_gap_ns).floor() as u64 + 1
        } else {
            0
        }
    }
}

/// A timerfd that tokio can wait on.
struct Timer(TimerFd);

impl AsRawFd for Timer {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

/// Registers the timer with the runtime. `AsyncFd::new` is deprecated because a type could
/// hand it a descriptor it does not own; [`Timer`] owns its `timerfd` for its whole life and
/// always returns that same descriptor, which is the condition `new` needs.
#[allow(deprecated)]
fn register(t: Timer) -> io::Result<AsyncFd<Timer>> {
    AsyncFd::new(t)
}

/// A connection's entry in its thread's [`Pacer`].
struct Slot {
    /// When the connection next needs waking, ns after the run start (`u64::MAX`: never).
    due: u64,
    /// Its due time has come and it has not yet noticed.
    fired: bool,
    waker: Option<Waker>,
}

/// Open loop: one `timerfd` per thread, set (absolute `CLOCK_MONOTONIC`) for the earliest time
/// any of the thread's connections needs waking. Its task wakes every connection whose time
/// has come, lets them send, and only then sets the timer again, once, for the new earliest.
pub(crate) struct Pacer {
    timer: AsyncFd<Timer>,
    t0: Instant,
    /// `CLOCK_MONOTONIC` at `t0`, ns: where the timer's absolute expiries count from.
    mono_t0_ns: u64,
    /// The expiry the timer is set for (ns after `t0`), if it is set.
    armed_for: Cell<Option<u64>>,
    slots: RefCell<Vec<Slot>>,
    /// The earliest due time may have changed: set the timer again.
    dirty: Cell<bool>,
    /// The pacer task, to wake when `dirty` is raised.
    waker: RefCell<Option<Waker>>,
    /// Busy polling or spinning: the timer first expires this long (ns) before a due time,
    /// and the thread stays awake through the rest instead of being woken late from sleep
    /// (0: off; see [`busy`]).
    lead_ns: u64,
    /// Spinning: the thread waits awake through the lead and the spin sends or wakes this
    /// task at the due time itself, so the timer's second setting is a backstop, `lead_ns`
    /// after the due time, not the due time: its interrupt, on a virtual machine, would take
    /// tens of µs from the spin right when it is due to send.
    spin: bool,
}

impl Pacer {
    /// A pacer for `conns` connections; with a `lead` the timer first expires that long
    /// before each due time, and the thread busy-polls (or with `spin`, spins) through the
    /// rest.
    pub fn new(conns: usize, t0: Instant, lead: Duration, spin: bool) -> io::Result<Pacer> {
        let fd = TimerFd::new(
            ClockId::CLOCK_MONOTONIC,
            TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
        )?;
        Ok(Pacer {
            timer: register(Timer(fd))?,
            t0,
            mono_t0_ns: monotonic_at(t0),
            armed_for: Cell::new(None),
            slots: RefCell::new(
                (0..conns)
                    .map(|_| Slot {
                        due: u64::MAX,
                        fired: false,
                        waker: None,
                    })
                    .collect(),
            ),
            dirty: Cell::new(false),
            waker: RefCell::new(None),
            lead_ns: lead.as_nanos() as u64,
            spin,
        })
    }

    /// The timer's descriptor (for busy polling to watch).
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.timer.get_ref().0.as_fd()
    }

    /// Sets when connection `slot` next needs waking (`None`: not at all).
    pub fn want(&self, slot: usize, due: Option<u64>) {
        let due = due.unwrap_or(u64::MAX);
        let mut slots = self.slots.borrow_mut();
        let s = &mut slots[slot];
        if s.due == due && !s.fired {
            return;
        }
        s.due = due;
        s.fired = false;
        if due < self.armed_for.get().unwrap_or(u64::MAX) {
            self.raise();
        }
    }

    fn raise(&self) {
        if !self.dirty.replace(true) {
            if let Some(w) = self.waker.borrow().as_ref() {
                w.wake_by_ref();
            }
        }
    }

    /// Ready once connection `slot`'s due time has come; otherwise `cx` is woken then.
    pub fn poll_fired(&self, slot: usize, cx: &mut Context<'_>) -> Poll<()> {
        let mut slots = self.slots.borrow_mut();
        let s = &mut slots[slot];
        if s.fired {
            s.fired = false;
            return Poll::Ready(());
        }
        if !s.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            s.waker = Some(cx.waker().clone());
        }
        Poll::Pending
    }

    /// Resolves once connection `slot`'s due time has come.
    #[cfg(test)]
    pub async fn fired(&self, slot: usize) {
        poll_fn(|cx| self.poll_fired(slot, cx)).await
    }

    /// Sets the timer for the earliest due time (a no-op when it is already set for it).
    fn arm(&self) {
        let min = self
            .slots
            .borrow()
            .iter()
            .filter(|s| !s.fired)
            .map(|s| s.due)
            .min()
            .unwrap_or(u64::MAX);
        if min == u64::MAX || self.armed_for.get() == Some(min) {
            // Nothing to wait for: a stale expiry only makes the task look and re-arm.
            return;
        }
        // With a lead, expire early unless that time has passed (then this is the second
        // setting: exact, and the thread polls until it expires; or spinning, a backstop).
        let early = min.saturating_sub(self.lead_ns);
        let expiry = if early > ns(Instant::now(), self.t0) {
            early
        } else if self.spin {
            min.saturating_add(self.lead_ns)
        } else {
            min
        };
        let at = Duration::from_nanos(self.mono_t0_ns + expiry).max(Duration::from_nanos(1));
        let set = self.timer.get_ref().0.set(
            Expiration::OneShot(TimeSpec::from_duration(at)),
            TimerSetTimeFlags::TFD_TIMER_ABSTIME,
        );
        // If setting fails the connections still wake on replies and on their tick.
        self.armed_for.set(set.is_ok().then_some(min));
        if set.is_ok() {
            busy::timer_due(self.t0 + Duration::from_nanos(min));
        }
    }

    /// The pacer task: runs until aborted when the thread's connections are done.
    pub async fn run(&self) {
        loop {
            if self.dirty.replace(false) {
                self.arm();
            }
            let expired = poll_fn(|cx| {
                if self.dirty.get() {
                    return Poll::Ready(false);
                }
                // A spin (busy) woke this task at the due time, ahead of the timer's signal.
                if self
                    .armed_for
                    .get()
                    .is_some_and(|due| ns(Instant::now(), self.t0) >= due)
                {
                    return Poll::Ready(true);
                }
                {
                    let mut w = self.waker.borrow_mut();
                    if !w.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                        *w = Some(cx.waker().clone());
                    }
                }
                busy::pacer_waker(cx.waker());
                match self.timer.poll_read_ready(cx) {
                    // No read of the timerfd: setting it again resets its expiry count and
                    // every expiry raises a new event, so clearing tokio's readiness is enough.
                    Poll::Ready(Ok(mut g)) => {
                        g.clear_ready();
                        Poll::Ready(true)
                    }
                    Poll::Ready(Err(_)) => Poll::Ready(false),
                    Poll::Pending => Poll::Pending,
                }
            })
            .await;
            if !expired {
                continue;
            }
            self.armed_for.set(None);
            let now = ns(Instant::now(), self.t0);
            for s in self.slots.borrow_mut().iter_mut() {
                if !s.fired && s.due <= now {
                    s.fired = true;
                    s.due = u64::MAX;
                    if let Some(w) = s.waker.take() {
                        w.wake();
                    }
                }
            }
            // Set the timer again only after the woken connections have sent and said when
            // they next need waking: wake this task behind them, in the thread's run queue.
            self.dirty.set(true);
            let mut yielded = false;
            poll_fn(|cx| {
                if yielded {
                    Poll::Ready(())
                } else {
                    yielded = true;
                    cx.waker().wake_by_ref();
                    Poll::Pending
                }
            })
            .await;
        }
    }
}
/// `CLOCK_MONOTONIC` in ns at `then` (a past instant), from one reading of both clocks.
fn monotonic_at(then: Instant) -> u64 {
    let mono = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| Duration::from(t).as_nanos() as u64)
        .unwrap_or(0);
    mono.saturating_sub(ns(Instant::now(), then))
}

/// Nanoseconds from `then` to `now` (0 if `now` is earlier).
pub(crate) fn ns(now: Instant, then: Instant) -> u64 {
    now.saturating_duration_since(then).as_nanos() as u64
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use super::*;

    /// Runs `f` with a pacer of `slots` connections whose task is running; with a `lead`
    /// its timer first expires that long before each due time (busy polling).
    fn with_pacer<F, Fut>(slots: usize, lead: Duration, f: F)
    where
        F: FnOnce(Rc<Pacer>) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async {
            let p = Rc::new(Pacer::new(slots, Instant::now(), lead, false).unwrap());
            let task = {
                let p = Rc::clone(&p);
                tokio::task::spawn_local(async move { p.run().await })
            };
            tokio::time::timeout(Duration::from_secs(10), f(Rc::clone(&p)))
                .await
                .expect("the pacer woke the connections");
            task.abort();
        });
    }

    #[test]
    fn pacer_wakes_each_connection_at_its_time_never_before() {
        wakes_each_connection_at_its_time_never_before(Duration::ZERO);
    }

    #[test]
    fn pacer_with_a_lead_still_wakes_no_connection_before_its_time() {
        // The early expiry (4 ms before each due time) must wake nobody.
        wakes_each_connection_at_its_time_never_before(Duration::from_millis(4));
    }

    fn wakes_each_connection_at_its_time_never_before(lead: Duration) {
        with_pacer(3, lead, |p| async move {
            let ms = |n: u64| n * 1_000_000;
            p.want(0, Some(ms(30)));
            p.want(1, Some(ms(10)));
            p.want(2, None);
            p.fired(1).await;
            let now = ns(Instant::now(), p.t0);
            assert!(now >= ms(10), "woken early");
            if now < ms(30) {
                assert!(!p.slots.borrow()[0].fired, "slot 0 woken before its time");
            }
            // An earlier time asked for after the timer was set still comes first (unless a
            // loaded machine held the thread past both: then both fire at once).
            p.want(1, Some(ms(20)));
            p.fired(1).await;
            let now = ns(Instant::now(), p.t0);
            assert!(now >= ms(20), "woken early");
            if now < ms(30) {
                assert!(!p.slots.borrow()[0].fired, "slot 0 woken before its time");
            }
            p.fired(0).await;
            assert!(ns(Instant::now(), p.t0) >= ms(30), "woken early");
            assert!(
                !p.slots.borrow()[2].fired,
                "a connection that asked for nothing"
            );
        });
    }

    #[test]
    fn a_spinning_thread_wakes_no_connection_before_its_time_and_counts_its_spins() {
        let mut builder = tokio::runtime::Builder::new_current_thread();
        busy::install(
            builder.enable_all(),
            Duration::ZERO,
            Duration::from_millis(2),
            0,
        );
        let rt = builder.build().unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async {
            let p = Rc::new(Pacer::new(2, Instant::now(), Duration::from_millis(2), true).unwrap());
            let task = {
                let p = Rc::clone(&p);
                tokio::task::spawn_local(async move { p.run().await })
            };
            let ms = |n: u64| n * 1_000_000;
            for (slot, due) in [(0, ms(10)), (1, ms(15)), (0, ms(25))] {
                p.want(slot, Some(due));
                tokio::time::timeout(Duration::from_secs(10), p.fired(slot))
                    .await
                    .expect("woken");
                assert!(ns(Instant::now(), p.t0) >= due, "woken early");
            }
            task.abort();
        });
        let c = busy::counts();
        // Each send due within the window was waited for awake (a loaded machine may wake the
        // thread too late for some: at least one).
        assert!(c.spins >= 1 && c.spun_ns > 0, "{c:?}");
    }

    #[test]
    fn a_uniform_timetable_keeps_equal_gaps_and_counts_what_it_skips() {
        use rand::SeedableRng;
        let mut rng = SmallRng::seed_from_u64(1);
        // 1000 requests/s over 2 connections: one every 2 ms on each, from a random phase.
        let mut t = Timetable::new(1000.0, Arrivals::Uniform, 2, &mut rng);
        let first = t.next_ns();
        assert!((0.0..2e6).contains(&first));
        t.advance(&mut rng);
        assert_eq!(t.next_ns(), first + 2e6);
        assert_eq!(t.due_before(t.next_ns()), 0);
        assert_eq!(t.due_before(t.next_ns() + 5e6), 3);
        assert_eq!(t.skip_before(t.next_ns() + 5e6, Some(2), &mut rng), 2);
        assert_eq!(t.skip_before(t.next_ns() + 1.0, None, &mut rng), 1);
        assert!((t.next_ns() - (first + 8e6)).abs() < 1e-3);
    }

    #[test]
    fn pacer_wakes_every_connection_that_is_due_at_once() {
        with_pacer(4, Duration::ZERO, |p| async move {
            for slot in 0..4 {
                p.want(slot, Some(5_000_000));
            }
            for slot in 0..4 {
                p.fired(slot).await;
            }
        });
    }
}
