//! One member's socket of a connection task ([`crate::conn`]): its state (connecting, up,
//! waiting to reconnect), its requests in flight and buffers, and its failures — the back-off
//! between reconnects and, in a pool, being marked down after `failure_limit` failures in a
//! row (see [`Pool`]). Also a connection's time with no member connected ([`Down`]).

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::BytesMut;

use crate::fault::Fault;
use crate::recorder::{Recorder, Spell as Episode};
use crate::shared::Shared;
use crate::spec::Pool;
use crate::stream::Stream;

/// A read buffer's room per read.
pub(crate) const READ_CHUNK: usize = 64 * 1024;
/// A request that is no part of a split multi-get.
pub(crate) const ALONE: u32 = u32::MAX;

/// A request (or a multi-get's part) in flight on one member's socket.
#[derive(Clone, Copy)]
pub(crate) struct Pending {
    pub op: u8,
    pub keys: u16,
    /// Its multi-get's group, or [`ALONE`].
    pub group: u32,
    /// The key index of a single-key request (`u64::MAX` for a multi-get).
    pub key: u64,
    pub intended: Instant,
    pub sent: Instant,
    /// A cluster's redirections (`-MOVED`, `-ASK`) this request has followed.
    pub hops: u8,
}

/// The member's silence that counts against the member timeout at `now`: from the latest of
/// its last reply (or connect) and its oldest waiting request's send; zero with none waiting.
pub(crate) fn silence(m: &Member, now: Instant) -> Duration {
    m.inflight.front().map_or(Duration::ZERO, |p| {
        now.saturating_duration_since(p.sent.max(m.heard))
    })
}

/// A connection's time without a connection to any member: from its start (or the fault
/// that dropped its last member) to its next successful connect, noted as a stall when long
/// enough. While it lasts the connection is counted in [`Shared::conns_down`].
pub(crate) struct Down {
    pub since: Option<Instant>,
    pub failures: u64,
}

impl Down {
    pub fn since(now: Instant, sh: &Shared) -> Down {
        sh.conns_down.fetch_add(1, Ordering::Relaxed);
        Down {
            since: Some(now),
            failures: 0,
        }
    }

    /// Connected again.
    pub fn up(&mut self, rec: &mut Recorder, sh: &Shared) {
        if let Some(since) = self.since.take() {
            sh.conns_down.fetch_sub(1, Ordering::Relaxed);
            rec.down(since, Instant::now(), self.failures);
        }
    }

    /// The run ended; a connection still down stays counted as down.
    pub fn end(&mut self, rec: &mut Recorder) {
        if let Some(since) = self.since.take() {
            rec.down(since, Instant::now(), self.failures);
        }
    }
}

pub(crate) type Connecting = Pin<Box<dyn Future<Output = Result<Stream, cachelab_client::Error>>>>;

/// The state of one member's socket.
pub(crate) enum Link {
    /// Not connected: (re)connect at this time.
    Idle(Instant),
    Connecting(Connecting),
    Up(Stream),
}

/// One member's socket, its requests in flight and its failures.
pub(crate) struct Member {
    pub link: Link,
    pub inflight: VecDeque<Pending>,
    /// Open loop over a pool: requests due while this member had the most requests in flight
    /// a member may have, encoded (into `hbuf`, each with its length) but not yet sent; they
    /// go out, late, as its replies free room — without holding up the other members.
    pub held: VecDeque<(Pending, usize)>,
    pub hbuf: Vec<u8>,
    pub hpos: usize,
    pub wbuf: Vec<u8>,
    pub wpos: usize,
    pub rbuf: BytesMut,
    /// Back-off: the next reconnect waits 10 ms << this (at most 1 s).
    pub backoff: u32,
    /// Failures in a row; a reply resets them.
    pub strikes: u32,
    /// When the current run of failures began.
    pub streak_since: Option<Instant>,
    /// Marked down (pools only): its requests fail at once until it connects again.
    pub marked: bool,
    /// Marked down: since (the first failure of the run that reached the limit), the
    /// failures so far, and when it was marked; ends at its next reply.
    pub episode: Option<Episode>,
    /// Its last reply or connect: with requests waiting, silence since then (or since the
    /// oldest waiting request was sent) longer than the member timeout is a failure.
    pub heard: Instant,
    /// Set by the wait: readable, a connect that finished, a socket error.
    pub readable: bool,
    pub landed: Option<Result<Stream, cachelab_client::Error>>,
    pub error: Option<Fault>,
}

impl Member {
    pub fn new(depth: usize, now: Instant) -> Member {
        Member {
            link: Link::Idle(now),
            inflight: VecDeque::with_capacity(depth),
            held: VecDeque::new(),
            hbuf: Vec::new(),
            hpos: 0,
            wbuf: Vec::with_capacity(16 * 1024),
            wpos: 0,
            rbuf: BytesMut::with_capacity(READ_CHUNK),
            backoff: 0,
            strikes: 0,
            streak_since: None,
            marked: false,
            episode: None,
            heard: now,
            readable: false,
            landed: None,
            error: None,
        }
    }

    /// It failed with `f`: one more failure in a row; it reconnects after a back-off or, in
    /// a pool, once it has failed `failure_limit` times in a row, after `retry` (marked down
    /// until then, a down episode open until its next reply).
    pub fn strike(&mut self, f: Fault, now: Instant, pool: &Pool) {
        self.backoff = match f {
            Fault::Timeout
            | Fault::ConnectRefused
            | Fault::ConnectFailed
            | Fault::ConnectTimeout => self.backoff + 1,
            _ => 1,
        };
        self.strikes += 1;
        let streak = *self.streak_since.get_or_insert(now);
        let retry_at = if pool.len() > 1 && self.strikes >= pool.failure_limit {
            self.marked = true;
            match self.episode.as_mut() {
                Some(e) => e.failures += 1,
                None => {
                    self.episode = Some(Episode {
                        since: streak,
                        failures: u64::from(self.strikes),
                        marked: now,
                    })
                }
            }
            now + pool.retry
        } else {
            now + Duration::from_millis(10u64 << self.backoff.min(7)).min(Duration::from_secs(1))
        };
        self.link = Link::Idle(retry_at);
    }

    /// It answered: its failures in a row are over; the down episode it ends, if any.
    pub fn answered(&mut self) -> Option<Episode> {
        self.strikes = 0;
        self.streak_since = None;
        self.backoff = 0;
        self.episode.take()
    }

    /// Whether a new request must wait in `held`: some already do (order is kept), or, with
    /// a per-member cap, `cap` requests are in flight.
    #[inline]
    pub fn must_hold(&self, cap: Option<usize>) -> bool {
        !self.held.is_empty() || cap.is_some_and(|c| self.inflight.len() >= c)
    }

    /// The buffer a request is encoded into: the write buffer, or (`hold`) the held one.
    #[inline]
    pub fn buf(&mut self, hold: bool) -> &mut Vec<u8> {
        if hold {
            &mut self.hbuf
        } else {
            &mut self.wbuf
        }
    }

    /// A request encoded (its last `len` bytes in the buffer [`buf(hold)`](Member::buf)
    /// gave): in flight, or held.
    #[inline]
    pub fn enqueue(&mut self, p: Pending, hold: bool, len: usize) {
        if hold {
            self.held.push_back((p, len));
        } else {
            self.inflight.push_back(p);
        }
    }

    /// Moves held requests into flight (sent `now`) while fewer than `cap` are; how many
    /// moved.
    pub fn release(&mut self, cap: usize, now: Instant) -> u64 {
        let mut n = 0;
        while self.inflight.len() < cap {
            let Some((mut p, len)) = self.held.pop_front() else {
                break;
            };
            p.sent = now;
            self.wbuf
                .extend_from_slice(&self.hbuf[self.hpos..self.hpos + len]);
            self.hpos += len;
            self.inflight.push_back(p);
            n += 1;
        }
        if self.held.is_empty() {
            self.hbuf.clear();
            self.hpos = 0;
        }
        n
    }

    pub fn up(&self) -> bool {
        matches!(self.link, Link::Up(_))
    }

    /// Requests in flight or held.
    pub fn waiting(&self) -> usize {
        self.inflight.len() + self.held.len()
    }

    pub fn wants_write(&self) -> bool {
        match &self.link {
            Link::Up(s) => self.wpos < self.wbuf.len() || s.pending(),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(sent: Instant) -> Pending {
        Pending {
            hops: 0,
            op: 0,
            keys: 1,
            group: ALONE,
            key: 0,
            intended: sent,
            sent,
        }
    }

    #[test]
    fn silence_counts_from_the_latest_of_the_last_reply_and_the_oldest_request() {
        let t0 = Instant::now();
        let mut m = Member::new(4, t0);
        let ms = Duration::from_millis;
        assert_eq!(silence(&m, t0 + ms(500)), Duration::ZERO, "nothing waiting");
        m.inflight.push_back(pending(t0 + ms(10)));
        assert_eq!(silence(&m, t0 + ms(50)), ms(40));
        m.heard = t0 + ms(30); // a reply after that request was sent
        assert_eq!(silence(&m, t0 + ms(50)), ms(20));
    }

    #[test]
    fn held_requests_go_out_in_order_as_room_frees_and_their_bytes_follow() {
        let t0 = Instant::now();
        let mut m = Member::new(2, t0);
        for (i, text) in [&b"get a\r\n"[..], b"get b\r\n", b"get c\r\n"]
            .iter()
            .enumerate()
        {
            let hold = m.must_hold(Some(2));
            assert_eq!(hold, i >= 2, "request {i}");
            m.buf(hold).extend_from_slice(text);
            let mut p = pending(t0);
            p.key = i as u64;
            m.enqueue(p, hold, text.len());
        }
        assert_eq!((m.inflight.len(), m.held.len()), (2, 1));
        assert_eq!(m.wbuf, b"get a\r\nget b\r\n");
        // Order is kept: while one is held, a new request is held too.
        assert!(m.must_hold(Some(10)));
        assert_eq!(m.release(2, t0), 0, "no room yet");
        m.inflight.pop_front();
        let later = t0 + Duration::from_millis(5);
        assert_eq!(m.release(2, later), 1);
        assert_eq!(m.wbuf, b"get a\r\nget b\r\nget c\r\n");
        let last = m.inflight.back().unwrap();
        assert_eq!((last.key, last.sent), (2, later), "sent when released");
        assert!(m.held.is_empty() && m.hbuf.is_empty() && m.hpos == 0);
    }
}
