//! The latency profile of a memcached server.
//!
//! The experiment of Khan Academy's "Profiling App Engine Memcached", made careful:
//!
//! * **get by value size** — each sample writes a fresh random value under a new key (the set
//!   is timed too, giving **set by size**), times the read and compares the bytes. Mismatches
//!   and misses are counted, never dropped.
//! * **multi-get by key count** — each round writes the values of every key count in one
//!   pipelined batch (untimed), then times one multi-get per key count and verifies each value.
//!
//! A round's keys are deleted in the next round's write batch (and at the end of the run), so
//! the untimed work costs one round trip per round rather than one per sample.
//! * **the floor** — a minimal request/response (`mn`, or `version` on servers without the meta
//!   protocol; through a proxy, a `get` of a key never written) on the measuring connection,
//!   timed right after an untimed one as a get is timed right after its set: how much of any
//!   request is just the round trip.
//!
//! All cells run interleaved, round-robin, so drift over the run affects them alike. Warm-up
//! rounds are run and discarded. With `concurrency` N, N threads each hold their own
//! connection and take an equal share of the samples; their histograms are merged.
//!
//! Every key starts with the caller's per-run prefix. A key whose delete failed is retried at
//! the end; the result says how many could not be removed. An [`Outcome`] serializes (serde)
//! into the record that its module sets out.

mod cell;
mod conn;
mod floor;
mod outcome;
mod progress;
mod spec;
mod worker;

use std::sync::atomic::Ordering;
use std::time::Instant;

use cachelab_client::resp::RespClient;
use cachelab_client::{Address, BlockingConnection, Error, Options};

pub use cachelab_client;
pub use cell::{Cell, Op};
pub use floor::FloorRequest;
pub use outcome::{Outcome, ServerFacts};
pub use progress::Progress;
pub use spec::{
    limits, Password, Protocol, RespLogin, Spec, SpecError, LIMITS, MAX_KEY_COUNT, MAX_PREFIX,
    MAX_SAMPLES, MAX_VALUE_SIZE,
};

/// Reads the server's version and settings; through a proxy (`proxy`), its version alone (a
/// proxy such as twemproxy closes the connection on `stats`, and answers `version` from one
/// server behind it).
pub fn server_facts(
    address: &Address,
    options: &Options,
    proxy: bool,
) -> Result<ServerFacts, Error> {
    let mut c = BlockingConnection::connect(address, options.clone())?;
    let version = c.version()?;
    if proxy {
        return Ok(ServerFacts {
            version,
            ..ServerFacts::default()
        });
    }
    let settings = c.stats(Some("settings")).unwrap_or_default();
    let stats = c.stats(None).unwrap_or_default();
    Ok(ServerFacts {
        version,
        settings,
        stats,
    })
}

/// The cost of opening a connection, `n` times: connect (and shake hands, over TLS) to the
/// first reply of the floor's command, in ns. See [`floor::connection_cost`].
pub fn connection_cost(
    address: &Address,
    options: &Options,
    n: u64,
) -> Result<cachelab_metrics::Latency, Error> {
    let request = floor::probe(address, options, None)?;
    floor::connection_cost(address, options, &request, n)
}

/// A Redis or Valkey's facts: its version (`redis 7.0.15`, `valkey 8.0.1`), the settings a
/// profile reads it by (`CONFIG GET` of `maxmemory`, `maxmemory-policy` and `io-threads`;
/// none where `CONFIG` is renamed away), and `INFO` (its default sections) before the run.
pub fn resp_facts(
    address: &Address,
    options: &Options,
    login: &RespLogin,
) -> Result<ServerFacts, Error> {
    let mut c = RespClient::connect(address, options.clone(), &conn::resp_options(login))?;
    let info = c.info(None)?;
    let stats: Vec<(String, String)> = info
        .sections
        .into_iter()
        .flat_map(|section| section.fields)
        .collect();
    let field = |name: &str| stats.iter().find(|(k, _)| k == name).map(|(_, v)| v);
    let version = ["valkey_version", "redis_version"]
        .iter()
        .find_map(|f| field(f).map(|v| format!("{} {v}", &f[..f.len() - 8])))
        .unwrap_or_default();
    let mut settings = Vec::new();
    for pattern in ["maxmemory", "maxmemory-policy", "io-threads"] {
        settings.extend(c.config_get(pattern).unwrap_or_default());
    }
    Ok(ServerFacts {
        version,
        settings,
        stats,
    })
}

/// A proxy in front of Redis servers (twemproxy's redis mode): reached with a `PING`, which
/// it answers itself; no version or settings (the servers behind it have them).
pub fn resp_proxy_facts(
    address: &Address,
    options: &Options,
    login: &RespLogin,
) -> Result<ServerFacts, Error> {
    let mut c = RespClient::connect(address, options.clone(), &conn::resp_options(login))?;
    c.ping()?;
    Ok(ServerFacts::default())
}

/// Runs the profile. Blocks until done, cancelled, or the server is gone.
///
/// Fails only when the spec is invalid or the server cannot be reached at the start; once
/// running, every failure is counted in the cells and the run carries on or gives up with
/// partial results and a reason.
pub fn run(spec: &Spec, progress: &Progress) -> Result<Outcome, SpecError> {
    spec.validate()?;
    let started = Instant::now();
    let (server, floor_request) = match &spec.protocol {
        // Through twemproxy in redis mode: no INFO or CONFIG of the proxy (it refuses them;
        // the caller reads the servers behind it), and the floor a GET that crosses it.
        Protocol::Resp(login) if spec.proxy => (
            resp_proxy_facts(&spec.address, &spec.options, login).map_err(SpecError::Server)?,
            FloorRequest::resp_miss(&spec.prefix),
        ),
        Protocol::Resp(login) => (
            resp_facts(&spec.address, &spec.options, login).map_err(SpecError::Server)?,
            FloorRequest::ping(),
        ),
        _ => {
            let miss = spec.proxy.then_some(spec.prefix.as_str());
            (
                server_facts(&spec.address, &spec.options, spec.proxy)
                    .map_err(SpecError::Server)?,
                floor::probe(&spec.address, &spec.options, miss).map_err(SpecError::Server)?,
            )
        }
    };

    let tasks = spec.cells().len() - spec.sizes.len(); // get and set share a sample
    let rounds: u64 = spec.samples + spec.warmup;
    progress
        .total
        .store(rounds * tasks as u64, Ordering::Relaxed);

    let results: Vec<worker::Report> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..spec.concurrency)
            .map(|w| {
                let plan = worker::Plan {
                    id: w,
                    samples: spec.share(spec.samples, w),
                    warmup: spec.share(spec.warmup, w),
                    floor_request: floor_request.clone(),
                };
                s.spawn(move || worker::run(spec, plan, progress))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("profile worker panicked"))
            .collect()
    });

    let mut cells = spec.cells();
    let mut leftovers = Vec::new();
    let mut aborted = None;
    let mut sent = conn::Sent::new();
    for r in results {
        worker::add_sent(&mut sent, r.sent);
        for (total, part) in cells.iter_mut().zip(&r.cells) {
            total.merge(part);
        }
        leftovers.extend(r.leftovers);
        aborted = aborted.or(r.aborted);
    }
    let cleaned_up_keys = leftovers.len() as u64;
    let leftover_keys = worker::delete_all(
        &spec.address,
        &spec.options,
        &spec.protocol,
        &leftovers,
        &mut sent,
    );
    Ok(Outcome {
        cells,
        server,
        floor_command: floor_request.name,
        commands: sent,
        transport: spec.options.transport(&spec.address),
        leftover_keys,
        cleaned_up_keys: cleaned_up_keys - leftover_keys,
        cancelled: progress.cancelled(),
        aborted,
        elapsed: started.elapsed(),
    })
}
