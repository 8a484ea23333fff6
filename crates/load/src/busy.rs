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
//!
//! Waking the pacer at the due time is not enough: from there to the connection's `write`
//! the runtime takes tens of µs (the park, the reactor, the local set, the pacer task, the
//! connection task). So a connection of a single server (plain TCP or Unix socket) with
//! nothing else to write *stages* its next requests: encodes each ahead into its slot here
//! ([`stage`]), with its due time. The spin writes each staged request itself, with one
//! `write(2)` on the connection's socket the moment it is due, and notes when ([`take_written`]);
//! the connection task, when it next runs, takes the request into flight with that send time
//! before it reads any reply. A write that would block or is partial stops the spin's sends
//! on that connection and leaves the rest to the task ([`unstage`]), as does a due time the
//! task reaches first; both are counted ([`Counts::spin_fallbacks`]).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::task::Waker;
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{send, MsgFlags};

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
    /// Requests staged for the spin to send, by connection slot (see [`stage`]).
    stages: Vec<Stage>,
    /// Each staged request written, in the order written: when, and its due time (for the
    /// recorder, in that order: see [`drain_sends`]).
    sends: Vec<(Instant, Instant)>,
    counts: Counts,
}

/// One connection's staged requests: their bytes back to back, each entry's due time and
/// length, in order.
#[derive(Default)]
struct Stage {
    buf: Vec<u8>,
    entries: VecDeque<Entry>,
    /// Entries written so far (they lead `entries`) and their bytes.
    written: usize,
    written_bytes: usize,
    /// A write would block, was partial or failed: the task takes over.
    blocked: bool,
}

struct Entry {
    due: Instant,
    len: usize,
    /// When the spin wrote it, and how many of its bytes.
    sent: Option<(Instant, usize)>,
}

impl Stage {
    /// The due time of the next entry to write, if the spin may write it.
    fn next_due(&self) -> Option<Instant> {
        if self.blocked {
            return None;
        }
        self.entries.get(self.written).map(|e| e.due)
    }
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
    /// Staged requests the spin wrote at their due time, one write each.
    pub spin_sends: u64,
    /// Staged requests the connection task sent instead (a write that would block or was
    /// partial, or the task reached the due time first).
    pub spin_fallbacks: u64,
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
            stages: Vec::new(),
            sends: Vec::new(),
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
        if !s.spin.is_zero() && next_target(s).is_some_and(|d| d <= now + s.spin) {
            spin(s);
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

/// After a write the spin goes on to a next send due within this; one due later is left to
/// a next park, so that the connections that sent stage their next requests meanwhile.
const HANDOFF: Duration = Duration::from_micros(20);

/// The earliest of the staged requests' due times and the pacer's.
fn next_target(s: &State) -> Option<Instant> {
    let staged = s.stages.iter().filter_map(Stage::next_due).min();
    match (staged, TIMER_DUE.get()) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Waits awake for the sends due within the window: writes each staged request the moment it
/// is due and wakes the pacer at its due time; returns early when a socket became readable
/// (the runtime reads it; the next park spins again), and after a write when nothing else is
/// due soon. The pacer is woken after any write, so the connections take their sent requests
/// into flight.
fn spin(s: &mut State) {
    s.counts.spins += 1;
    let start = thread_cpu_ns();
    let sockets = s.fds.len().saturating_sub(1);
    let (mut wrote, mut woke) = (false, false);
    loop {
        let now = Instant::now();
        let Some(target) = next_target(s).filter(|&d| d <= now + s.spin) else {
            break;
        };
        if now >= target {
            if TIMER_DUE.get().is_some_and(|d| d <= now) {
                TIMER_DUE.set(None);
                wake_pacer();
                woke = true;
            }
            wrote |= write_due(s, now);
            continue;
        }
        if (wrote || woke) && target > now + HANDOFF {
            break;
        }
        // The sockets only: the timer's own expiry (at the due time) must not end the spin.
        let mut set = watched(&s.fds[..sockets]);
        if !set.is_empty() && matches!(poll(&mut set, PollTimeout::ZERO), Ok(n) if n > 0) {
            break;
        }
        std::hint::spin_loop();
    }
    if wrote {
        wake_pacer();
    }
    s.counts.spun_ns += thread_cpu_ns().saturating_sub(start);
}

fn wake_pacer() {
    PACER.with_borrow(|p| {
        if let Some(w) = p {
            w.wake_by_ref();
        }
    });
}

/// Writes every staged request due by `now`, each alone; whether any was written.
fn write_due(s: &mut State, now: Instant) -> bool {
    let mut wrote = false;
    for slot in 0..s.stages.len() {
        while s.stages[slot].next_due().is_some_and(|d| d <= now) {
            write_next(s, slot);
            wrote = true;
        }
    }
    wrote
}

/// A task reached a due time before the spin: it writes the staged requests due (every
/// connection's, each alone, as the spin does) and wakes the pacer for their connections.
pub(crate) fn send_due() {
    let wrote = STATE.with_borrow_mut(|s| write_due(s, Instant::now()));
    if wrote {
        wake_pacer();
    }
}

/// Writes connection `slot`'s next staged request, alone, on its socket (one `send`); the
/// time is taken right before the write. A write that would block, is partial or fails blocks the stage.
fn write_next(s: &mut State, slot: usize) {
    let stage = &mut s.stages[slot];
    let Some(fd) = s.fds.get(slot).and_then(Option::as_ref) else {
        stage.blocked = true;
        return;
    };
    let e = &mut stage.entries[stage.written];
    let bytes = &stage.buf[stage.written_bytes..stage.written_bytes + e.len];
    let at = Instant::now();
    // `send` rather than `write`: a peer gone raises an error here, never SIGPIPE.
    match send(fd.as_raw_fd(), bytes, MsgFlags::MSG_NOSIGNAL) {
        Ok(n) => {
            e.sent = Some((at, n));
            s.sends.push((at, e.due));
            stage.written += 1;
            stage.written_bytes += e.len;
            if n < e.len {
                stage.blocked = true;
            } else {
                s.counts.spin_sends += 1;
            }
        }
        Err(_) => stage.blocked = true,
    }
}

/// Hands every staged request written so far, in the order written, to `f` (its write's
/// time and its due time): the gaps between sends are those of the writes, whichever
/// connection takes its request into flight first.
pub(crate) fn drain_sends(mut f: impl FnMut(Instant, Instant)) {
    STATE.with_borrow_mut(|s| {
        for &(at, due) in &s.sends {
            f(at, due);
        }
        s.sends.clear();
    });
}

/// Stages a request of connection `slot` (its bytes, whole) for the spin to write at `due`,
/// on the socket watched for that slot (see [`watch`]).
pub(crate) fn stage(slot: usize, due: Instant, bytes: &[u8]) {
    STATE.with_borrow_mut(|s| {
        if s.stages.len() <= slot {
            s.stages.resize_with(slot + 1, Stage::default);
        }
        let st = &mut s.stages[slot];
        st.buf.extend_from_slice(bytes);
        st.entries.push_back(Entry {
            due,
            len: bytes.len(),
            sent: None,
        });
    });
}

/// Connection `slot`'s oldest staged request if the spin wrote it (whole or in part): when,
/// and its bytes not written (appended to `rest`: a partial write's remainder); `None` if
/// the spin has not written it.
pub(crate) fn take_written(slot: usize, rest: &mut Vec<u8>) -> Option<Instant> {
    STATE.with_borrow_mut(|s| {
        let st = s.stages.get_mut(slot)?;
        if st.written == 0 {
            return None;
        }
        let e = st.entries.pop_front()?;
        let (at, n) = e.sent.expect("written");
        rest.extend_from_slice(&st.buf[n..e.len]);
        st.buf.drain(..e.len);
        st.written -= 1;
        st.written_bytes -= e.len;
        Some(at)
    })
}

/// Whether the spin stopped sending for connection `slot` (see [`Stage::blocked`]).
pub(crate) fn blocked(slot: usize) -> bool {
    STATE.with_borrow(|s| s.stages.get(slot).is_some_and(|st| st.blocked))
}

/// The task takes over connection `slot`'s staged requests (none written by the spin may be
/// left: see [`take_written`]): the bytes of the first `take` are appended to `out`, the rest
/// dropped; the taken ones are counted as fallbacks.
pub(crate) fn unstage(slot: usize, take: usize, out: &mut Vec<u8>) {
    STATE.with_borrow_mut(|s| {
        let Some(st) = s.stages.get_mut(slot) else {
            return;
        };
        debug_assert_eq!(st.written, 0);
        let bytes: usize = st.entries.iter().take(take).map(|e| e.len).sum();
        out.extend_from_slice(&st.buf[..bytes]);
        s.counts.spin_fallbacks += take.min(st.entries.len()) as u64;
        *st = Stage::default();
    });
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

#[cfg(test)]
mod tests {
    use std::future::poll_fn;
    use std::os::unix::net::UnixDatagram;
    use std::task::Poll;

    use super::*;

    /// Runs this thread's runtime, spinning within `spin`, until `until`, as the pacer task
    /// waits: woken by the spin.
    fn run_until(spin: Duration, until: Instant) {
        let mut b = tokio::runtime::Builder::new_current_thread();
        install(b.enable_all(), Duration::ZERO, spin, 1);
        let rt = b.build().unwrap();
        rt.block_on(poll_fn(|cx| {
            pacer_waker(cx.waker());
            if Instant::now() >= until {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        }));
    }

    /// A socket pair whose every write arrives as its own datagram.
    fn pair() -> (UnixDatagram, UnixDatagram) {
        let (ours, theirs) = UnixDatagram::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        theirs.set_nonblocking(true).unwrap();
        (ours, theirs)
    }

    fn datagrams(r: &UnixDatagram) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = [0u8; 256];
        while let Ok(n) = r.recv(&mut buf) {
            out.push(buf[..n].to_vec());
        }
        out
    }

    fn request(i: usize) -> Vec<u8> {
        format!("get k:{i}\r\n").into_bytes()
    }

    #[test]
    fn the_spin_writes_each_staged_request_alone_at_its_due_time() {
        let (ours, theirs) = pair();
        let t0 = Instant::now();
        // Two due 10 µs apart: still two writes.
        let dues = [3_000, 6_000, 6_010].map(|us| t0 + Duration::from_micros(us));
        let mut b = tokio::runtime::Builder::new_current_thread();
        install(&mut b, Duration::ZERO, Duration::from_millis(100), 1);
        watch(0, ours.as_fd());
        for (i, &due) in dues.iter().enumerate() {
            stage(0, due, &request(i));
        }
        STATE.with_borrow_mut(|s| {
            let end = t0 + Duration::from_millis(20);
            while Instant::now() < end {
                if next_target(s).is_some() {
                    spin(s);
                }
            }
        });
        assert_eq!(datagrams(&theirs), (0..3).map(request).collect::<Vec<_>>());
        let mut rest = Vec::new();
        for due in dues {
            let at = take_written(0, &mut rest).expect("written");
            assert!(at >= due, "written before its due time");
        }
        assert!(rest.is_empty());
        assert_eq!(take_written(0, &mut rest), None);
        let c = counts();
        assert_eq!((c.spin_sends, c.spin_fallbacks), (3, 0), "{c:?}");
        assert!(c.spins >= 1 && c.spun_ns > 0, "{c:?}");
    }

    #[test]
    fn a_parked_runtime_spins_to_its_staged_requests_and_wakes_the_pacer() {
        let (ours, theirs) = pair();
        let t0 = Instant::now();
        let mut b = tokio::runtime::Builder::new_current_thread();
        install(
            b.enable_all(),
            Duration::ZERO,
            Duration::from_millis(100),
            1,
        );
        let rt = b.build().unwrap();
        watch(0, ours.as_fd());
        for i in 0..3 {
            stage(0, t0 + Duration::from_millis(2 + 2 * i as u64), &request(i));
        }
        let mut polls = 0;
        let written = poll_fn(|cx| {
            polls += 1;
            pacer_waker(cx.waker());
            if STATE.with_borrow(|s| s.stages[0].written == 3) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        });
        rt.block_on(async { tokio::time::timeout(Duration::from_secs(10), written).await })
            .expect("the spin wrote them and woke the pacer");
        assert_eq!(datagrams(&theirs), (0..3).map(request).collect::<Vec<_>>());
        // Only the spin's wake-ups brought the runtime back (no timer, no socket).
        assert!(polls >= 2, "{polls}");
        assert_eq!(counts().spin_sends, 3);
    }

    #[test]
    fn a_task_that_reaches_the_due_time_first_still_writes_each_alone() {
        let (ours, theirs) = pair();
        run_until(Duration::from_millis(1), Instant::now());
        watch(0, ours.as_fd());
        let past = Instant::now();
        stage(0, past, &request(0));
        stage(0, past, &request(1));
        stage(0, past + Duration::from_secs(60), &request(2));
        send_due();
        assert_eq!(datagrams(&theirs), vec![request(0), request(1)]);
        let mut rest = Vec::new();
        assert!(take_written(0, &mut rest).is_some());
        assert!(take_written(0, &mut rest).is_some());
        assert_eq!(take_written(0, &mut rest), None, "not due yet");
        assert_eq!(counts().spin_sends, 2);
    }

    #[test]
    fn a_write_that_would_block_leaves_the_requests_to_the_task_and_is_counted() {
        let (ours, theirs) = pair();
        // The peer reads nothing: fill its queue until a write would block.
        let mut filled = 0;
        while ours.send(b"x").is_ok() {
            filled += 1;
            assert!(filled < 1_000_000, "the socket never filled");
        }
        run_until(Duration::from_millis(1), Instant::now());
        watch(0, ours.as_fd());
        let past = Instant::now();
        stage(0, past, &request(0));
        stage(0, past + Duration::from_secs(60), &request(1));
        send_due();
        assert!(blocked(0));
        let mut rest = Vec::new();
        assert_eq!(take_written(0, &mut rest), None);
        let mut out = Vec::new();
        unstage(0, 1, &mut out);
        assert_eq!(
            out,
            request(0),
            "the due one handed back, the other dropped"
        );
        let c = counts();
        assert_eq!((c.spin_sends, c.spin_fallbacks), (0, 1), "{c:?}");
        // The stage is empty again: nothing left for the spin.
        assert!(STATE.with_borrow(|s| next_target(s).is_none()));
        drop(theirs);
    }
}
