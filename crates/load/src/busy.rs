//! Busy polling (`--busy-poll`): a load thread with replies outstanding polls its sockets for
//! up to a budget before it sleeps; and spinning to a send (`--spin-us`): an open-loop thread
//! whose next send is due within a window waits for it awake, watching the clock.
//!
//! A thread that sleeps in `epoll_wait` and is woken by a reply adds the wake-up to the
//! latency it measures. On bare metal that is a few µs; on a virtual machine whose idle vCPU
//! halts it costs tens of µs (measured on this project's 2-core VM: open loop at 2,000 req/s,
//! p50 125 µs, and 104 µs with the client's core kept from halting). Polling the sockets
//! without blocking until one is readable keeps the thread awake for the replies it expects
//! soon, at the price of the CPU time spent polling — which is counted in the client's CPU
//! like any other.
//!
//! The poll runs in the runtime's `on_thread_park` hook, i.e. only when every task of the
//! thread is waiting. It stops as soon as any of the thread's sockets, or its open-loop
//! timer, is readable, or when the budget is spent, and then the runtime parks as usual (and
//! returns at once when something became ready). It polls only when something is expected
//! within the budget: a reply (any request outstanding), or the open-loop timer's next expiry
//! (so that a request is sent on time instead of after the thread's wake-up, which the
//! corrected latency would count).
//!
//! Spinning goes further for the open loop's sends. The timer's expiry is signalled through
//! an interrupt, the reactor and the pacer task — tens of µs late on a virtual machine, and
//! then every connection whose time came meanwhile sends at once. With a spin window the
//! pacer's timer first expires that long before a send is due; the thread then waits in this
//! hook reading the clock, and at the due time wakes the pacer itself (the runtime runs a task
//! woken here instead of parking). It still polls its sockets while it waits: a reply that
//! arrives is read at once, and the spin resumes after it. The time spent so is *pacing*,
//! counted apart from the client's work ([`Counts::spun_ns`]).

use std::cell::{Cell, RefCell};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::task::Waker;
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State::default());
    static INFLIGHT: Cell<u64> = const { Cell::new(0) };
    static TIMER_DUE: Cell<Option<Instant>> = const { Cell::new(None) };
    static PACER: RefCell<Option<Waker>> = const { RefCell::new(None) };
}

#[derive(Default)]
struct State {
    budget: Duration,
    /// The spin window: a send due within it is waited for awake (zero: never).
    spin: Duration,
    /// Copies (`dup`) of the descriptors to watch: each connection's socket by slot, and the
    /// open-loop timer last.
    fds: Vec<Option<OwnedFd>>,
    counts: Counts,
}

/// What busy polling did on one thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Times the thread polled instead of going straight to sleep.
    pub polls: u64,
    /// Polls that ended because a socket or the timer became ready (the others used up the
    /// budget and the thread slept).
    pub caught: u64,
    /// Spins to a send: times the thread waited awake for a send's due time, and the CPU
    /// time it spent so, ns (pacing, not the client's work; a spin preempted on a busy
    /// machine lasts longer than it costs).
    pub spins: u64,
    pub spun_ns: u64,
}

/// Sets this thread up to poll for up to `budget` before parking, and to spin to a send due
/// within `spin`, watching `slots` connections; `runtime` gets the hook. Both zero: nothing
/// is installed.
pub(crate) fn install(
    runtime: &mut tokio::runtime::Builder,
    budget: Duration,
    spin: Duration,
    slots: usize,
) {
    if budget.is_zero() && spin.is_zero() {
        return;
    }
    STATE.with_borrow_mut(|s| {
        *s = State {
            budget,
            spin,
            fds: (0..=slots).map(|_| None).collect(),
            counts: Counts::default(),
        };
    });
    INFLIGHT.set(0);
    TIMER_DUE.set(None);
    PACER.set(None);
    runtime.on_thread_park(before_park);
}

/// The pacer task's waker: a spin wakes it at a send's due time.
pub(crate) fn pacer_waker(waker: &Waker) {
    PACER.with_borrow_mut(|p| {
        if !p.as_ref().is_some_and(|w| w.will_wake(waker)) {
            *p = Some(waker.clone());
        }
    });
}

/// Watches `fd` for slot `slot` (a connection's socket; `slots` is the timer), replacing
/// what the slot watched before. A no-op when busy polling is off.
pub(crate) fn watch(slot: usize, fd: BorrowedFd<'_>) {
    STATE.with_borrow_mut(|s| {
        if let Some(entry) = s.fds.get_mut(slot) {
            *entry = fd.try_clone_to_owned().ok();
        }
    });
}

/// Stops watching slot `slot`.
pub(crate) fn unwatch(slot: usize) {
    STATE.with_borrow_mut(|s| {
        if let Some(entry) = s.fds.get_mut(slot) {
            *entry = None;
        }
    });
}

/// `n` more requests are in flight on this thread.
pub(crate) fn sent(n: u64) {
    INFLIGHT.set(INFLIGHT.get() + n);
}

/// `n` requests of this thread were answered or lost.
pub(crate) fn settled(n: u64) {
    INFLIGHT.set(INFLIGHT.get().saturating_sub(n));
}

/// The open-loop timer is set for a send due at `at` (it may expire earlier: a lead).
pub(crate) fn timer_due(at: Instant) {
    TIMER_DUE.set(Some(at));
}

/// What this thread's busy polling did so far.
pub(crate) fn counts() -> Counts {
    STATE.with_borrow(|s| s.counts)
}

fn before_park() {
    STATE.with_borrow_mut(|s| {
        let now = Instant::now();
        if let Some(due) = TIMER_DUE
            .get()
            .filter(|&d| !s.spin.is_zero() && d <= now + s.spin)
        {
            spin_to(s, due);
            return;
        }
        if s.budget.is_zero() {
            return;
        }
        let timer_soon = TIMER_DUE
            .get()
            .is_some_and(|due| due > now && due - now <= s.budget);
        if INFLIGHT.get() == 0 && !timer_soon {
            return;
        }
        let mut set = watched(&s.fds);
        if set.is_empty() {
            return;
        }
        s.counts.polls += 1;
        let deadline = now + s.budget;
        loop {
            if matches!(poll(&mut set, PollTimeout::ZERO), Ok(n) if n > 0) {
                s.counts.caught += 1;
                return;
            }
            if Instant::now() >= deadline {
                return;
            }
            std::hint::spin_loop();
        }
    });
}

/// Waits awake for a send due at `due`: reads the clock until then and wakes the pacer, or
/// returns early when a socket became readable (the runtime reads it; the next park spins
/// again).
fn spin_to(s: &mut State, due: Instant) {
    s.counts.spins += 1;
    let start = thread_cpu_ns();
    let mut set = watched(&s.fds);
    loop {
        if Instant::now() >= due {
            TIMER_DUE.set(None);
            PACER.with_borrow(|p| {
                if let Some(w) = p {
                    w.wake_by_ref();
                }
            });
            break;
        }
        if !set.is_empty() && matches!(poll(&mut set, PollTimeout::ZERO), Ok(n) if n > 0) {
            break;
        }
        std::hint::spin_loop();
    }
    s.counts.spun_ns += thread_cpu_ns().saturating_sub(start);
}

/// The descriptors watched (the connections' sockets and the timer), to poll for reading.
fn watched(fds: &[Option<OwnedFd>]) -> Vec<PollFd<'_>> {
    fds.iter()
        .flatten()
        .map(|fd| PollFd::new(fd.as_fd(), PollFlags::POLLIN))
        .collect()
}

/// This thread's CPU time, ns (0 if it cannot be read).
fn thread_cpu_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map_or(0, |t| Duration::from(t).as_nanos() as u64)
}
