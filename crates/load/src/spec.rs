//! What to run: the workload spec, its modes and distributions, and the checks every spec
//! passes before a run starts (ranges and the hard caps).
//!
//! [`Spec`] is built from Python's `cachelab.load.LoadSpec` in one conversion: it derives
//! `Deserialize`, its fields named as the dataclass's (`serde` attributes say where the Rust
//! name or shape differs), and each numeric field's range is written once, in [`LIMITS`].

use std::time::Duration;

use serde::de::{Deserializer, Error as _};
use serde::{Deserialize, Serialize};

use cachelab_client::pool::{Distribution, Kind, Server};
use cachelab_client::spec::{self as de, Limit};
use cachelab_client::{Address, Options};
use cachelab_proto::Key;

pub use crate::protocol::{Password, Protocol, RespLogin};
use crate::{keys, sizes};

/// Hard caps: a spec beyond them is refused with a message naming the cap.
pub mod caps {
    pub const MAX_CONNECTIONS: usize = 4096;
    pub const MAX_THREADS: usize = 64;
    pub const MAX_PIPELINE: usize = 1024;
    pub const MAX_RATE: f64 = 5_000_000.0;
    pub const MAX_DURATION_S: f64 = 3600.0;
    pub const MAX_WARMUP_S: f64 = 600.0;
    pub const MAX_KEY_SPACE: u64 = 100_000_000;
    pub const MAX_REQUESTS: u64 = 10_000_000_000;
    pub const MAX_MULTIGET_KEYS: usize = 100;
    /// The longest prefix accepted, leaving room in the 250-byte key for `:<index>`.
    pub const MAX_PREFIX: usize = 120;
    /// The longest busy-poll budget, µs: past this a sleep's wake-up no longer dominates.
    pub const MAX_BUSY_POLL_US: u64 = 1000;
    pub const MAX_SPIN_US: u64 = 1000;
    /// The most members of a pool (a logical connection has a socket to each).
    pub const MAX_MEMBERS: usize = 64;
    /// The most consecutive failures before a member is marked down.
    pub const MAX_FAILURE_LIMIT: u32 = 1000;
    /// The highest probe rate, requests/s: a probe measures latency at a low rate; above
    /// this it is load.
    pub const MAX_PROBE_RATE: f64 = 10_000.0;
    /// The longest expiry, seconds: memcached reads a larger one as a Unix time.
    pub const MAX_TTL: u64 = 30 * 24 * 3600;
    /// The longest timeout of any kind, seconds.
    pub const MAX_TIMEOUT_S: f64 = 3600.0;
}

/// The range of each numeric field of a spec, by its name (`_core.LOAD_LIMITS` in Python,
/// which the command line's flags read); [`Spec::validate`] checks them.
pub mod limits {
    use super::caps::*;
    use cachelab_client::spec::Limit;

    pub const CONNECTIONS: Limit = Limit::int("connections", 1, MAX_CONNECTIONS as u64, "");
    pub const THREADS: Limit = Limit::int("threads", 1, MAX_THREADS as u64, "");
    pub const PIPELINE: Limit = Limit::int("pipeline", 1, MAX_PIPELINE as u64, "");
    pub const MAX_OUTSTANDING: Limit = Limit::int("max_outstanding", 1, MAX_PIPELINE as u64, "");
    /// Also at most `pipeline`.
    pub const SEND_BATCH: Limit = Limit::int("send_batch", 1, MAX_PIPELINE as u64, "");
    pub const RATE: Limit = Limit::above("rate", 0.0, MAX_RATE, "requests/s");
    pub const MULTIGET_KEYS: Limit = Limit::int("multiget_keys", 1, MAX_MULTIGET_KEYS as u64, "");
    pub const KEY_SPACE: Limit = Limit::int("key_space", 1, MAX_KEY_SPACE, "keys");
    pub const TTL: Limit = Limit::int("ttl", 0, MAX_TTL, "seconds");
    pub const DURATION: Limit = Limit::above("duration", 0.0, MAX_DURATION_S, "seconds");
    pub const REQUESTS: Limit = Limit::int("requests", 1, MAX_REQUESTS, "");
    pub const WARMUP: Limit = Limit::real("warmup", 0.0, MAX_WARMUP_S, "seconds");
    pub const INTERVAL: Limit = Limit::real("interval", 0.01, 60.0, "seconds");
    pub const TIMEOUT: Limit = Limit::above("timeout", 0.0, MAX_TIMEOUT_S, "seconds");
    pub const CONNECT_TIMEOUT: Limit =
        Limit::above("connect_timeout", 0.0, MAX_TIMEOUT_S, "seconds");
    pub const GIVE_UP_AFTER: Limit = Limit::above("give_up_after", 0.0, MAX_TIMEOUT_S, "seconds");
    pub const STALL_MS: Limit =
        Limit::above("stall_ms", 0.0, MAX_TIMEOUT_S * 1000.0, "milliseconds");
    pub const BUSY_POLL_US: Limit = Limit::int("busy_poll_us", 0, MAX_BUSY_POLL_US, "µs");
    pub const SPIN_US: Limit = Limit::int("spin_us", 0, MAX_SPIN_US, "µs");
    pub const PROBE_RATE: Limit = Limit::above("probe_rate", 0.0, MAX_PROBE_RATE, "requests/s");
    pub const MEMBER_FAILURE_LIMIT: Limit =
        Limit::int("member_failure_limit", 1, MAX_FAILURE_LIMIT as u64, "");
    pub const MEMBER_RETRY: Limit = Limit::above("member_retry", 0.0, MAX_TIMEOUT_S, "seconds");
    pub const MEMBER_TIMEOUT: Limit = Limit::above("member_timeout", 0.0, MAX_TIMEOUT_S, "seconds");
    /// Any u64: written so that a seed out of it is refused with its range.
    pub const SEED: Limit = Limit::int("seed", 0, u64::MAX, "");
}

/// Every numeric field's range (see [`limits`]).
pub const LIMITS: &[Limit] = &{
    use limits::*;
    [
        CONNECTIONS,
        THREADS,
        PIPELINE,
        MAX_OUTSTANDING,
        SEND_BATCH,
        RATE,
        MULTIGET_KEYS,
        KEY_SPACE,
        TTL,
        DURATION,
        REQUESTS,
        WARMUP,
        INTERVAL,
        TIMEOUT,
        CONNECT_TIMEOUT,
        GIVE_UP_AFTER,
        STALL_MS,
        BUSY_POLL_US,
        SPIN_US,
        PROBE_RATE,
        MEMBER_FAILURE_LIMIT,
        MEMBER_RETRY,
        MEMBER_TIMEOUT,
        SEED,
    ]
};

/// One member of the pool: where it listens, and its weight (ketama only). From Python:
/// `(address, weight)`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "(Address, u32)")]
pub struct Member {
    pub address: Address,
    pub weight: u32,
}

impl From<(Address, u32)> for Member {
    fn from((address, weight): (Address, u32)) -> Member {
        Member { address, weight }
    }
}

/// The servers a run drives: one, or a pool whose keys are spread by `distribution`.
///
/// A pool of one is a plain single-server run: every request goes to it, and a connection
/// that fails reconnects with back-off until the reconnect budget is spent. In a pool of two
/// or more, a member that fails `failure_limit` times in a row (failed connects, timed-out
/// requests, dropped connections, or `member_timeout` with requests waiting and no reply; a
/// reply resets the count) is marked down for `retry`: meanwhile the requests for its keys
/// fail at once (`member_down`), unsent and not remapped to another member, as libmemcached
/// does with `server_failure_limit` and `retry_timeout` — or, with `remap`, go to the member
/// the distribution over the members not marked down picks (libmemcached's
/// `remove_failed_servers`, pymemcache's dead-server removal).
///
/// `changes` change the membership during the run (a member added or removed at a time):
/// the members listed are every member the run may use, those whose first change adds them
/// joining only then.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Pool {
    /// In the order given: the distribution depends on it.
    #[serde(rename = "servers")]
    pub members: Vec<Member>,
    pub distribution: Kind,
    #[serde(rename = "member_failure_limit")]
    pub failure_limit: u32,
    #[serde(rename = "member_retry", deserialize_with = "de::seconds")]
    pub retry: Duration,
    /// The member-health deadline: a member with requests waiting that has answered nothing
    /// for this long (since its oldest waiting request was sent, its last reply, or its
    /// connect) has failed, whatever the request timeout.
    #[serde(deserialize_with = "de::seconds")]
    pub member_timeout: Duration,
    /// A member marked down is taken out of the distribution (its keys go to the others)
    /// instead of failing its requests at once (`on_member_down`: `keep` or `remap`).
    #[serde(rename = "on_member_down", deserialize_with = "remap")]
    pub remap: bool,
    /// Membership changes, in any order (applied in time order).
    pub changes: Vec<Change>,
    /// A Redis Cluster: the slot ranges (inclusive) each member, a master, serves (checked
    /// and routed by [`route`](crate::route); `distribution` unused). Empty: no cluster.
    #[serde(default, rename = "cluster_slots")]
    pub slots: Vec<(u16, u16, usize)>,
}

/// A membership change: member `member` (an index into [`Pool::members`]) joins (`add`) or
/// leaves the distribution `at` after the start of sending (the time series' clock). From
/// Python: `(seconds, member, "add" | "remove")`.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(try_from = "(f64, usize, String)")]
pub struct Change {
    pub at: Duration,
    pub member: usize,
    pub add: bool,
}

impl TryFrom<(f64, usize, String)> for Change {
    type Error = String;

    fn try_from((at, member, what): (f64, usize, String)) -> Result<Change, String> {
        let add = match what.as_str() {
            "add" => true,
            "remove" => false,
            other => {
                return Err(format!(
                    "a membership change is add or remove, not {other:?}"
                ))
            }
        };
        match Duration::try_from_secs_f64(at) {
            Ok(at) if !at.is_zero() => Ok(Change { at, member, add }),
            _ => Err(format!(
                "a membership change's time must be above 0 s, not {at}"
            )),
        }
    }
}

/// `on_member_down`: `keep` (false) or `remap` (true).
fn remap<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    match String::deserialize(d)?.as_str() {
        "keep" => Ok(false),
        "remap" => Ok(true),
        other => Err(D::Error::custom(format!(
            "on-member-down {other:?} is not one of: keep, remap"
        ))),
    }
}

/// `on_miss`: `none` (false) or `set` (true).
fn on_miss_set<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    match String::deserialize(d)?.as_str() {
        "none" => Ok(false),
        "set" => Ok(true),
        other => Err(D::Error::custom(format!(
            "on-miss {other:?} is not one of: none, set"
        ))),
    }
}

/// `behind`: addresses, or None for none.
fn behind<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Address>, D::Error> {
    Ok(Option::<Vec<Address>>::deserialize(d)?.unwrap_or_default())
}

/// The default member-health deadline.
pub const MEMBER_TIMEOUT: Duration = Duration::from_millis(300);

/// A pool's member failure settings by default (libmemcached's failure limit and retry, and
/// [`MEMBER_TIMEOUT`]): [`Pool::single`]'s, and `LoadSpec`'s defaults (`_core.LOAD_DEFAULTS`).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Defaults {
    pub member_failure_limit: u32,
    /// Seconds.
    pub member_retry: f64,
    /// Seconds.
    pub member_timeout: f64,
}

pub const DEFAULTS: Defaults = Defaults {
    member_failure_limit: 2,
    member_retry: 2.0,
    member_timeout: MEMBER_TIMEOUT.as_millis() as f64 / 1000.0,
};

impl Pool {
    /// A single server, with the [`DEFAULTS`].
    pub fn single(address: Address) -> Pool {
        Pool {
            members: vec![Member { address, weight: 1 }],
            distribution: Kind::Ketama,
            failure_limit: DEFAULTS.member_failure_limit,
            retry: Duration::from_secs(DEFAULTS.member_retry as u64),
            member_timeout: MEMBER_TIMEOUT,
            remap: false,
            changes: Vec::new(),
            slots: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The key -> member map over every member (a pool of one needs none). Every member
    /// must be `host:port`.
    pub(crate) fn distribution(&self) -> Result<Distribution, String> {
        let all: Vec<usize> = (0..self.len()).collect();
        self.distribution_of(&all)
    }

    /// The key -> member map over the members `active` (indices into `members`, in order):
    /// its server indices are positions in `active`.
    pub(crate) fn distribution_of(&self, active: &[usize]) -> Result<Distribution, String> {
        let servers = active
            .iter()
            .map(|&i| {
                let m = &self.members[i];
                match &m.address {
                    Address::Tcp(hp) => {
                        Server::parse(&format!("{hp}:{}", m.weight)).map_err(|e| e.to_string())
                    }
                    Address::Unix(p) => Err(format!(
                        "pool member unix:{}: the members of a pool are HOST:PORT",
                        p.display()
                    )),
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        Distribution::new(self.distribution, servers).map_err(|e| e.to_string())
    }

    /// The membership over time: `(from, active members)` from the start, then after each
    /// change in time order. An error names a change that adds a member already in, removes
    /// one not in, names no member, or leaves the pool empty.
    pub fn epochs(&self) -> Result<Vec<(Duration, Vec<usize>)>, String> {
        let mut changes = self.changes.clone();
        changes.sort_by_key(|c| c.at);
        let mut active: Vec<bool> = (0..self.len())
            .map(|m| {
                changes
                    .iter()
                    .find(|c| c.member == m)
                    .is_none_or(|c| !c.add)
            })
            .collect();
        let list = |a: &[bool]| (0..a.len()).filter(|&i| a[i]).collect::<Vec<_>>();
        let mut out = vec![(Duration::ZERO, list(&active))];
        for c in &changes {
            let Some(now) = active.get(c.member).copied() else {
                return Err(format!(
                    "a membership change names member {} of {}",
                    c.member,
                    self.len()
                ));
            };
            if now == c.add {
                return Err(format!(
                    "member {} is {} at {:.3} s: it cannot be {}",
                    self.members[c.member].address,
                    if now {
                        "in the pool"
                    } else {
                        "not in the pool"
                    },
                    c.at.as_secs_f64(),
                    if c.add { "added" } else { "removed" }
                ));
            }
            active[c.member] = c.add;
            let l = list(&active);
            if l.is_empty() {
                return Err(format!(
                    "removing {} at {:.3} s leaves the pool empty",
                    self.members[c.member].address,
                    c.at.as_secs_f64()
                ));
            }
            out.push((c.at, l));
        }
        if out[0].1.is_empty() {
            return Err("every member joins later: the pool starts empty".into());
        }
        Ok(out)
    }
}

/// How requests are paced. From Python: `rate` (None: closed loop) and `arrivals`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    /// `pipeline` requests outstanding per connection, always.
    Closed,
    /// A target rate over all connections, in requests per second.
    Open { rate: f64, arrivals: Arrivals },
}

impl<'de> Deserialize<'de> for Mode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Mode, D::Error> {
        #[derive(Deserialize)]
        struct Open {
            rate: Option<f64>,
            arrivals: Arrivals,
        }
        let open = de::flat::<D, Open>(d)?;
        Ok(match open.rate {
            None => Mode::Closed,
            Some(rate) => Mode::Open {
                rate,
                arrivals: open.arrivals,
            },
        })
    }
}

/// Gaps between intended send times in open loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arrivals {
    /// Exponentially distributed gaps (a Poisson process per connection).
    Poisson,
    /// Equal gaps, each connection starting at a random phase.
    Uniform,
}

/// Shares of each operation; they need not add up to 1. From Python: `{op: share}`, an
/// operation left out having none.
#[derive(Debug, Clone, Copy, PartialEq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Mix {
    pub get: f64,
    pub multiget: f64,
    pub set: f64,
    pub delete: f64,
}

impl Mix {
    /// Cumulative shares in the order of [`OPS`](crate::OPS), normalised to end at 1.
    pub(crate) fn cumulative(&self) -> [f64; 4] {
        let total = self.get + self.multiget + self.set + self.delete;
        [
            self.get / total,
            (self.get + self.multiget) / total,
            (self.get + self.multiget + self.set) / total,
            1.0,
        ]
    }
}

/// A distribution by registry name and numeric parameters (see [`keys`] and [`sizes`]).
/// From Python: `(name, params)`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(from = "(String, Vec<f64>)")]
pub struct DistSpec {
    pub name: String,
    pub params: Vec<f64>,
}

impl From<(String, Vec<f64>)> for DistSpec {
    fn from((name, params): (String, Vec<f64>)) -> DistSpec {
        DistSpec { name, params }
    }
}

/// When the run ends. From Python: `duration` (seconds) or `requests`, the other None.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stop {
    /// Measure for this long after the warm-up.
    Duration(Duration),
    /// Send this many requests in all (warm-up included).
    Requests(u64),
}

impl<'de> Deserialize<'de> for Stop {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Stop, D::Error> {
        #[derive(Deserialize)]
        struct Either {
            duration: Option<f64>,
            requests: Option<u64>,
        }
        match de::flat::<D, Either>(d)? {
            Either {
                duration: Some(s),
                requests: None,
            } => Duration::try_from_secs_f64(s)
                .map(Stop::Duration)
                // (named as a field of a flattened part: the bindings refuse it with its range)
                .map_err(|_| D::Error::custom(format!("duration: invalid value {s}"))),
            Either {
                duration: None,
                requests: Some(n),
            } => Ok(Stop::Requests(n)),
            _ => Err(D::Error::custom(
                "give a duration or a request count, not both",
            )),
        }
    }
}

/// A workload. Its fields are `cachelab.load.LoadSpec`'s, as `to_core` resolves them.
#[derive(Debug, Clone, Deserialize)]
pub struct Spec {
    /// The server, or the pool of servers, to drive.
    #[serde(flatten, deserialize_with = "de::flat")]
    pub pool: Pool,
    pub connections: usize,
    /// Client threads; connections are dealt out to them round-robin.
    pub threads: usize,
    /// Closed loop: requests outstanding per connection.
    pub pipeline: usize,
    /// Open loop: the most requests in flight on one connection.
    pub max_outstanding: usize,
    #[serde(flatten)]
    pub mode: Mode,
    pub mix: Mix,
    /// Keys per multi-get.
    pub multiget_keys: usize,
    pub key_space: u64,
    pub key_dist: DistSpec,
    pub value_size: DistSpec,
    /// The per-run key prefix; every key is `<prefix>:<index>`.
    pub prefix: String,
    /// Expiry of every value set, in seconds (0: none).
    pub ttl: u32,
    #[serde(flatten)]
    pub stop: Stop,
    /// Time at the start whose intervals are marked warm-up and left out of the totals.
    #[serde(deserialize_with = "de::seconds")]
    pub warmup: Duration,
    /// Set every key of the key space before the run.
    pub prefill: bool,
    /// Length of one time-series interval.
    #[serde(deserialize_with = "de::seconds")]
    pub interval: Duration,
    #[serde(flatten, deserialize_with = "de::flat")]
    pub options: Options,
    /// Stop when no request has succeeded for this long.
    #[serde(deserialize_with = "de::seconds")]
    pub give_up_after: Duration,
    /// A reply that took this long, or a connection down this long, is a stall
    /// (see [`stalls`](crate::stalls)).
    #[serde(rename = "stall_ms", deserialize_with = "de::millis")]
    pub stall: Duration,
    pub seed: u64,
    /// The server's process id, when known to be on this machine (for schedstat).
    pub server_pid: Option<u32>,
    /// Busy polling: with replies outstanding, a client thread polls its sockets for up to
    /// this long before it sleeps (zero: never; see [`busy`](crate::busy)).
    #[serde(rename = "busy_poll_us", deserialize_with = "de::micros")]
    pub busy_poll: Duration,
    /// Open loop: a client thread whose next send is due within this long waits for it
    /// awake, reading the clock, and sends it on time (zero: it sleeps until its timer
    /// signals; see [`busy`](crate::busy)). The time spent so is counted as pacing.
    #[serde(rename = "spin_us", deserialize_with = "de::micros")]
    pub spin: Duration,
    /// Closed loop: a connection sends new requests only once at least this many of its
    /// `pipeline` slots are free (1: after every reply), so each write carries that many.
    /// Fewer, larger writes cost client and server less per request; the requests
    /// outstanding then vary between `pipeline - send_batch + 1` and `pipeline`.
    pub send_batch: usize,
    /// For a run through a proxy (the pool is the proxy, one address): the memcached servers
    /// behind it, whose `stats` are read instead of the proxy's (a proxy such as twemproxy
    /// does not answer `stats`). Empty otherwise.
    #[serde(default, deserialize_with = "behind")]
    pub behind: Vec<Address>,
    /// Read-through (cache-aside): a single-key get that misses is followed by a set of its
    /// key, as an application fills its cache from the database on a miss (`on_miss`:
    /// `none` or `set`).
    #[serde(rename = "on_miss", deserialize_with = "on_miss_set")]
    pub on_miss_set: bool,
    /// Latency probe: one more connection, on its own thread, that sends the same mix at
    /// this low open-loop Poisson rate (requests/s) beside the load connections, its
    /// latencies kept apart (see [`Spec::probe`]). None: no probe.
    pub probe_rate: Option<f64>,
    /// Delete what the run wrote once it ends (the default). False when a driver runs many
    /// engines on one key space (Ray agents): an engine that ends first would delete keys
    /// the others still read, so the driver deletes the key space once all are done.
    #[serde(default = "yes")]
    pub cleanup: bool,
    /// memcached's text protocol, or RESP (Redis, Valkey) with its login.
    #[serde(default)]
    pub protocol: Protocol,
}

fn yes() -> bool {
    true
}

/// The probe connection's seed is the run's, changed by this (its keys differ from every
/// load connection's).
const PROBE_SEED: u64 = 0x9e37_79b9_7f4a_7c15;

/// Why a run could not start: an invalid spec, or a server that could not be reached.
pub use cachelab_client::StartError as SpecError;

impl Spec {
    /// Checks every field against its range and the hard caps.
    pub fn validate(&self) -> Result<(), SpecError> {
        use caps::*;
        use limits::*;
        let bad = |m: String| Err(SpecError::Invalid(m));
        if self.prefix.is_empty() || self.prefix.len() > MAX_PREFIX {
            return bad(format!("key prefix must be 1 to {MAX_PREFIX} bytes"));
        }
        if let Err(e) = Key::new(&self.prefix) {
            return bad(format!("key prefix {:?}: {e}", self.prefix));
        }
        if !self.behind.is_empty() && self.pool.len() != 1 {
            return bad(
                "a run through a proxy sends to the proxy alone; the servers behind \
                        it are read for their stats"
                    .to_string(),
            );
        }
        if matches!(&self.protocol, Protocol::Resp(l) if l.db.is_some()) && !self.behind.is_empty()
        {
            return bad(
                "a RESP run through a proxy cannot choose a database: twemproxy closes the \
                 connection on SELECT (set redis_db in its pool's configuration instead)"
                    .to_string(),
            );
        }
        if self.behind.len() > MAX_MEMBERS {
            return bad(format!(
                "a proxy has at most {MAX_MEMBERS} servers behind it here (hard cap), not {}",
                self.behind.len()
            ));
        }
        if !(1..=MAX_MEMBERS).contains(&self.pool.len()) {
            return bad(format!(
                "a pool has 1 to {MAX_MEMBERS} members (hard cap), not {}",
                self.pool.len()
            ));
        }
        MEMBER_FAILURE_LIMIT
            .check_int(self.pool.failure_limit.into())
            .and_then(|()| MEMBER_RETRY.check_duration(self.pool.retry, 1.0))
            .and_then(|()| MEMBER_TIMEOUT.check_duration(self.pool.member_timeout, 1.0))
            .map_err(SpecError::Invalid)?;
        if self.pool.len() > 1 && !self.pool.is_cluster() {
            self.pool.distribution().map_err(SpecError::Invalid)?;
            // (Each membership is a non-empty subset of the members, whose distribution is
            // built above: its own cannot fail.)
            self.pool.epochs().map_err(SpecError::Invalid)?;
            if let Some(c) = self
                .pool
                .changes
                .iter()
                .find(|c| c.at.as_secs_f64() > MAX_DURATION_S + MAX_WARMUP_S)
            {
                return bad(format!(
                    "a membership change at {:.0} s is past the longest run",
                    c.at.as_secs_f64()
                ));
            }
        } else if !self.pool.changes.is_empty() {
            return bad("membership changes are for a pool: name at least two members".into());
        }
        if self.on_miss_set && self.mix.multiget > 0.0 {
            return bad(
                "on-miss set refills single-key gets; a multi-get's missing keys are not \
                 known: take multiget out of the mix"
                    .into(),
            );
        }
        let whole = |l: Limit, v: usize| l.check_int(v as u64);
        whole(CONNECTIONS, self.connections)
            .and_then(|()| whole(THREADS, self.threads))
            .map_err(SpecError::Invalid)?;
        if self.threads > self.connections {
            return bad(format!(
                "{} threads for {} connections: each thread needs at least one connection",
                self.threads, self.connections
            ));
        }
        whole(PIPELINE, self.pipeline)
            .and_then(|()| whole(MAX_OUTSTANDING, self.max_outstanding))
            .and_then(|()| whole(SEND_BATCH, self.send_batch))
            .map_err(SpecError::Invalid)?;
        if let Mode::Open { rate, .. } = self.mode {
            if self.send_batch > 1 {
                return bad(
                    "send-batch is for the closed loop only: an open loop sends each request \
                     at its scheduled time"
                        .into(),
                );
            }
            RATE.check(rate).map_err(SpecError::Invalid)?;
        }
        if self.send_batch > self.pipeline {
            return bad(format!(
                "send-batch must be at most the pipeline depth ({}), not {}",
                self.pipeline, self.send_batch
            ));
        }
        let m = self.mix;
        let shares = [m.get, m.multiget, m.set, m.delete];
        if shares.iter().any(|s| !(s.is_finite() && *s >= 0.0)) || shares.iter().sum::<f64>() <= 0.0
        {
            return bad("op mix: shares must be 0 or more and not all 0".into());
        }
        whole(MULTIGET_KEYS, self.multiget_keys)
            .and_then(|()| KEY_SPACE.check_int(self.key_space))
            .map_err(SpecError::Invalid)?;
        keys::build(
            &self.key_dist.name,
            &self.key_dist.params,
            self.key_space,
            0,
            1,
        )
        .map_err(SpecError::Invalid)?;
        sizes::build(&self.value_size.name, &self.value_size.params).map_err(SpecError::Invalid)?;
        match self.stop {
            Stop::Duration(d) => DURATION.check_duration(d, 1.0),
            Stop::Requests(n) => REQUESTS.check_int(n),
        }
        .and_then(|()| BUSY_POLL_US.check_int(self.busy_poll.as_micros() as u64))
        .and_then(|()| SPIN_US.check_int(self.spin.as_micros() as u64))
        .and_then(|()| WARMUP.check_duration(self.warmup, 1.0))
        .and_then(|()| INTERVAL.check_duration(self.interval, 1.0))
        .and_then(|()| TIMEOUT.check_duration(self.options.request_timeout, 1.0))
        .and_then(|()| CONNECT_TIMEOUT.check_duration(self.options.connect_timeout, 1.0))
        .and_then(|()| GIVE_UP_AFTER.check_duration(self.give_up_after, 1.0))
        .and_then(|()| STALL_MS.check_duration(self.stall, 1e3))
        .and_then(|()| self.probe_rate.map_or(Ok(()), |r| PROBE_RATE.check(r)))
        .and_then(|()| TTL.check_int(self.ttl.into()))
        .map_err(SpecError::Invalid)
    }

    /// A counted run: the requests connection `id` sends, its share of the count.
    pub(crate) fn quota(&self, id: usize) -> Option<u64> {
        match self.stop {
            Stop::Requests(n) => {
                let c = self.connections as u64;
                Some(n / c + u64::from((id as u64) < n % c))
            }
            Stop::Duration(_) => None,
        }
    }

    /// The probe's own workload (when there is a probe): one connection on one thread, open
    /// loop with Poisson arrivals at `probe_rate`, the same mix, keys (prefix, key space,
    /// distribution), values and timeouts, its own seed, no prefill. A timed run's probe
    /// stops with it; a counted run's is stopped when the load connections finish (or at the
    /// longest duration, should they take longer).
    pub(crate) fn probe(&self) -> Option<Spec> {
        let rate = self.probe_rate?;
        Some(Spec {
            connections: 1,
            threads: 1,
            pipeline: 1,
            send_batch: 1,
            mode: Mode::Open {
                rate,
                arrivals: Arrivals::Poisson,
            },
            stop: match self.stop {
                Stop::Duration(d) => Stop::Duration(d),
                Stop::Requests(_) => Stop::Duration(Duration::from_secs_f64(caps::MAX_DURATION_S)),
            },
            prefill: false,
            seed: self.seed ^ PROBE_SEED,
            probe_rate: None,
            ..self.clone()
        })
    }

    /// Wall-clock limit of the sending phase, when there is one.
    pub(crate) fn send_limit(&self) -> Option<Duration> {
        match self.stop {
            Stop::Duration(d) => Some(self.warmup + d),
            Stop::Requests(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_is_one_poisson_connection_on_the_runs_keys() {
        let mut spec = crate::steady::tests::spec();
        assert!(spec.probe().is_none());
        spec.probe_rate = Some(250.0);
        spec.stop = Stop::Requests(1000);
        let p = spec.probe().expect("a probe");
        assert_eq!((p.connections, p.threads, p.probe_rate), (1, 1, None));
        assert_eq!(
            p.mode,
            Mode::Open {
                rate: 250.0,
                arrivals: Arrivals::Poisson
            }
        );
        assert_eq!(
            (&p.prefix, p.key_space, &p.key_dist, p.mix),
            (&spec.prefix, spec.key_space, &spec.key_dist, spec.mix)
        );
        assert!(!p.prefill && p.seed != spec.seed);
        // A counted run's probe is timed (it is stopped when the load is done).
        assert!(matches!(p.stop, Stop::Duration(_)));
        assert!(p.validate().is_ok());
    }

    #[test]
    fn probe_rates_out_of_range_are_refused() {
        let mut spec = crate::steady::tests::spec();
        for bad in [
            0.0,
            -1.0,
            f64::NAN,
            f64::INFINITY,
            caps::MAX_PROBE_RATE * 2.0,
        ] {
            spec.probe_rate = Some(bad);
            let e = spec.validate().expect_err("refused").to_string();
            assert!(
                e.contains("probe-rate must be a number of requests/s above 0 and at most"),
                "{e}"
            );
        }
        spec.probe_rate = Some(caps::MAX_PROBE_RATE);
        assert!(spec.validate().is_ok());
    }
}
