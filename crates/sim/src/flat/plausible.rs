//! Plausibility of oracleGeneral records, so that a file that is not a cache trace (random
//! bytes, another binary format, a misaligned copy) is refused instead of being simulated as
//! a few hundred requests for multi-gigabyte objects.
//!
//! Every 24-byte record parses as *something*, so the reader cannot tell garbage by its shape.
//! It checks what real traces hold instead, record by record as it reads:
//!
//! * **object size** — at most 1 GiB (memcached's largest item; block and web traces stay
//!   far below it). A size of 0 is allowed: real traces hold such records (libCacheSim's
//!   reader skips them by default), and random bytes almost never make one.
//! * **next access** — libCacheSim's `next_access_vtime` is -1 (no next access; `i64::MAX`
//!   is accepted as the same) or the number of a later request: above this record's 0-based
//!   index and at most 2^40 (a trace cut from a longer one may point past its own end, but
//!   not past a trillion requests).
//! * **time** — timestamps (seconds) run forward: a record is implausible when its time is
//!   more than an hour before, or more than a year after, both the last plausible time and
//!   the time of the record just before it. Checking both means one corrupt record costs one
//!   count (the next record is measured from the last good time), and a trace whose clock is
//!   reset once costs one count (the next record is measured from the one before it).
//!
//! The verdict (see [`Checker::finish`]): a file whose first [`HEAD`] records are all
//! implausible, or more than half of whose records are, is refused with a [`TraceError`]
//! naming the first bad record and field. A file with fewer implausible records is read as it
//! is, and the count comes back as [`Doubts`] for the caller to show as a warning.

use std::fmt;

use crate::error::{Location, TraceError};

/// Largest plausible object size: 1 GiB, memcached's hard limit for an item.
pub const MAX_OBJECT_SIZE: u32 = 1 << 30;
/// How far (seconds) a timestamp may step back before the record is implausible: one hour.
pub const MAX_STEP_BACK: u32 = 3600;
/// How far (seconds) a timestamp may jump ahead before the record is implausible: a year.
pub const MAX_JUMP: u32 = 365 * 24 * 3600;
/// Largest plausible `next_access_vtime` (a request number).
pub const MAX_NEXT_ACCESS: i64 = 1 << 40;
/// A file whose first `HEAD` records are all implausible is refused without reading on.
pub const HEAD: u64 = 64;

/// What is wrong with one record, with the values that show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem {
    /// Object size above [`MAX_OBJECT_SIZE`].
    Size(u32),
    /// A next-access field that is neither -1 nor a later request.
    NextAccess(i64),
    /// A time too far before or after `last`, the last plausible time.
    Time { time: u32, last: u32 },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Problem::Size(s) => write!(f, "object size {s} B is not plausible (limit 1 GiB)"),
            Problem::NextAccess(v) => write!(
                f,
                "next access {v} is not plausible (-1 or the number of a later request)"
            ),
            Problem::Time { time, last } if time < last => write!(
                f,
                "time {time} is not plausible: {} s before {last} (limit 1 hour back)",
                last - time
            ),
            Problem::Time { time, last } => write!(
                f,
                "time {time} is not plausible: {} s after {last} (limit 1 year ahead)",
                time - last
            ),
        }
    }
}

/// Implausible records of a file that was read nonetheless (fewer than the refusal needs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Doubts {
    /// The file, as shown in messages.
    pub path: String,
    /// Records in the file.
    pub records: u64,
    /// Records with at least one implausible field.
    pub implausible: u64,
    /// 1-based number of the first implausible record, and what is wrong with it.
    pub first: (u64, Problem),
}

impl fmt::Display for Doubts {
    /// `path: K of N records are implausible and were read as they are (the first: record R:
    /// problem)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} of {} records are implausible and were read as they are (the first: \
             record {}: {})",
            self.path, self.implausible, self.records, self.first.0, self.first.1
        )
    }
}

/// Checks records one by one as a reader goes through a file.
#[derive(Debug, Default)]
pub(crate) struct Checker {
    seen: u64,
    implausible: u64,
    /// Implausible records among the first [`HEAD`].
    head_implausible: u64,
    first: Option<(u64, Problem)>,
    /// The last plausible time, and the time of the record before.
    last_good: u32,
    previous: u32,
}

/// The width of the plausible steps from one time to the next: [`MAX_STEP_BACK`] back to
/// [`MAX_JUMP`] ahead.
const STEP_RANGE: u64 = MAX_STEP_BACK as u64 + MAX_JUMP as u64;
/// A time no record's time is a plausible successor of ([`Checker::records`]).
const OUT_OF_STEP: i64 = -(1 << 40);

/// Whether `time` is a plausible successor of `before`: at most [`MAX_STEP_BACK`] before it
/// and at most [`MAX_JUMP`] after it (one comparison, as the readers call it per record).
#[inline]
fn step_ok(before: u32, time: u32) -> bool {
    let d = i64::from(time) - i64::from(before) + i64::from(MAX_STEP_BACK);
    (d as u64) <= STEP_RANGE
}

/// Whether `next` is a plausible next-access field for the record of 0-based index `i`: -1 or
/// `i64::MAX` (the two values `next + 1` maps to 0 or 2^63), or a later request number
/// (`i < next <= MAX_NEXT_ACCESS`).
#[inline]
fn next_ok(next: i64, i: u64) -> bool {
    let none = (next as u64).wrapping_add(1) << 1 == 0;
    none | ((next as u64 > i) & (next as u64 <= MAX_NEXT_ACCESS as u64))
}

impl Checker {
    /// Checks a run of records, given each one's `(time, size, next)` fields: the same verdicts
    /// as [`Checker::record`] on each in turn, with less work per plausible record. While the
    /// last plausible time is the time of the record before (always, but after an implausible
    /// record), `record`'s time test is one comparison with that time, kept in a register
    /// with the record count; any record that fails the quick test goes through `record`.
    #[inline]
    pub(crate) fn records(&mut self, fields: impl Iterator<Item = (u32, u32, i64)>) {
        let mut i = self.seen;
        let mut previous = self.in_step();
        for (time, size, next) in fields {
            let d = i64::from(time) - previous + i64::from(MAX_STEP_BACK);
            if (d as u64 <= STEP_RANGE) & (size <= MAX_OBJECT_SIZE) & next_ok(next, i) {
                previous = i64::from(time);
            } else {
                previous = self.record_at(i, previous, time, size, next);
            }
            i += 1;
        }
        self.catch_up(i, previous);
    }

    /// The time the next record is measured from in [`Checker::records`]: the time of the
    /// record before when it is also the last plausible one, else [`OUT_OF_STEP`].
    fn in_step(&self) -> i64 {
        if self.last_good == self.previous {
            i64::from(self.previous)
        } else {
            OUT_OF_STEP
        }
    }

    /// Brings the state up to date after [`Checker::records`] went through plausible records
    /// up to `i`, the last at time `previous` (unless [`OUT_OF_STEP`]: then it is up to date).
    fn catch_up(&mut self, i: u64, previous: i64) {
        self.seen = i;
        if previous != OUT_OF_STEP {
            self.previous = previous as u32;
            self.last_good = previous as u32;
        }
    }

    /// [`Checker::record`] for record `i` from within [`Checker::records`]; returns the time
    /// the next record is measured from.
    #[cold]
    #[inline(never)]
    fn record_at(&mut self, i: u64, previous: i64, time: u32, size: u32, next: i64) -> i64 {
        self.catch_up(i, previous);
        self.record(time, size, next);
        self.in_step()
    }

    /// Checks the next record, given its raw fields. Written to be cheap on plausible
    /// records (no branches but the one that skips the bookkeeping of a bad record).
    #[inline]
    pub(crate) fn record(&mut self, time: u32, size: u32, next: i64) {
        let i = self.seen;
        self.seen += 1;
        let time_ok = (i == 0) | step_ok(self.last_good, time) | step_ok(self.previous, time);
        let size_ok = size <= MAX_OBJECT_SIZE;
        let next_ok = next_ok(next, i);
        let last = self.last_good;
        self.previous = time;
        if time_ok {
            self.last_good = time;
        }
        if size_ok & next_ok & time_ok {
            return;
        }
        self.implausible += 1;
        if i < HEAD {
            self.head_implausible += 1;
        }
        if self.first.is_none() {
            let problem = if !size_ok {
                Problem::Size(size)
            } else if !next_ok {
                Problem::NextAccess(next)
            } else {
                Problem::Time { time, last }
            };
            self.first = Some((i + 1, problem));
        }
    }

    /// Refuses once the first [`HEAD`] records are seen if all of them are implausible, so a
    /// reader stops early on a large file that is not a trace; call it after each piece.
    pub(crate) fn head(&self, path: &str) -> Result<(), TraceError> {
        if self.head_implausible == HEAD {
            return Err(self.refusal(path, format!("all of the first {HEAD} records are")));
        }
        Ok(())
    }

    /// The verdict once every record is checked: refused when more than half are implausible
    /// (or the first [`HEAD`] all are); otherwise the doubts, if any record was implausible.
    pub(crate) fn finish(self, path: &str) -> Result<Option<Doubts>, TraceError> {
        self.head(path)?;
        if self.implausible * 2 > self.seen {
            let why = format!("{} of {} records are", self.implausible, self.seen);
            return Err(self.refusal(path, why));
        }
        Ok(self.first.map(|first| Doubts {
            path: path.to_string(),
            records: self.seen,
            implausible: self.implausible,
            first,
        }))
    }

    fn refusal(&self, path: &str, how_many: String) -> TraceError {
        let (record, problem) = self
            .first
            .expect("a refused file has an implausible record");
        TraceError::new(
            path,
            Location::File,
            format!(
                "record {record}: {problem}; {how_many} implausible: is this an oracleGeneral \
                 trace?"
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(c: &Checker) -> (u64, u64, u64, Option<(u64, Problem)>, u32, u32) {
        (
            c.seen,
            c.implausible,
            c.head_implausible,
            c.first,
            c.last_good,
            c.previous,
        )
    }

    /// Runs of records checked with `records` leave the checker exactly as `record` one by one
    /// does, whatever mix of plausible and implausible fields (clock resets, bad sizes, bad
    /// next-access fields, the edge values of each limit) and wherever the runs are cut.
    #[test]
    fn records_agree_with_record_one_by_one() {
        let (mut bad, mut good) = (0, 0);
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next_rand = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..200 {
            let n = 1 + (next_rand() % 300) as usize;
            let mut time: u32 = 1_000_000_000;
            let fields: Vec<(u32, u32, i64)> = (0..n)
                .map(|i| {
                    let r = next_rand();
                    time = match r % 16 {
                        0 => time.wrapping_sub(MAX_STEP_BACK + (r >> 8) as u32 % 3),
                        1 => time.wrapping_add(MAX_JUMP + (r >> 8) as u32 % 3 - 1),
                        2 => (r >> 8) as u32,
                        _ => time.wrapping_add((r >> 8) as u32 % 100),
                    };
                    let size = match (r >> 4) % 32 {
                        0 => MAX_OBJECT_SIZE + 1,
                        1 => MAX_OBJECT_SIZE,
                        _ => (r >> 12) as u32 % 5000,
                    };
                    let i = i as i64;
                    let next = match (r >> 20) % 16 {
                        0 => i,
                        1 => i + 1,
                        2 => i64::MAX,
                        3 => MAX_NEXT_ACCESS + 1,
                        4 => MAX_NEXT_ACCESS,
                        5 => -2,
                        6 | 7 => -1,
                        _ => i + 1 + (r >> 32) as i64 % 1000,
                    };
                    (time, size, next)
                })
                .collect();
            let mut one = Checker::default();
            for &(t, s, nx) in &fields {
                one.record(t, s, nx);
            }
            let mut runs = Checker::default();
            let mut rest = &fields[..];
            while !rest.is_empty() {
                let k = 1
                    + (next_rand() as usize) % rest.len().min(if round % 2 == 0 { 7 } else { 100 });
                runs.records(rest[..k].iter().copied());
                rest = &rest[k..];
            }
            assert_eq!(state(&runs), state(&one), "round {round}");
            bad += one.implausible;
            good += one.seen - one.implausible;
        }
        assert!(
            bad > 1000 && good > bad,
            "{bad} implausible, {good} plausible"
        );
    }
}
