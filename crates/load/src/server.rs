//! The server's side of a run: `stats` before and after, and — when the server is a process on
//! this machine — its scheduler counters from `/proc/<pid>/task/*/schedstat`.
//!
//! schedstat has three numbers per thread: nanoseconds on a CPU, nanoseconds runnable but
//! waiting for a CPU (the run-queue wait), and the number of time slices. Summed over the
//! server's threads and differenced over the run, the wait divided by the wall time is the
//! measure Pinterest used to show what real-time scheduling bought them.

use std::collections::BTreeMap;
use std::path::Path;

use cachelab_client::resp::{RespClient, RespOptions};
use cachelab_client::{Address, BlockingConnection, Error};
use serde::Serialize;

use crate::spec::{Protocol, Spec};

/// Scheduler counters summed over a process's threads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SchedStat {
    pub on_cpu_ns: u64,
    pub wait_ns: u64,
    pub slices: u64,
    pub threads: u64,
}

/// The server's `stats` before and after the measured phase, and its scheduler counters.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ServerView {
    pub version: String,
    pub before: BTreeMap<String, String>,
    pub after: BTreeMap<String, String>,
    /// The process whose schedstat was read, when the server is on this machine.
    pub pid: Option<u32>,
    pub schedstat_before: Option<SchedStat>,
    pub schedstat_after: Option<SchedStat>,
}

/// Reads `/proc/<pid>/task/*/schedstat`; `None` if the process or the file is not there.
pub fn schedstat(pid: u32) -> Option<SchedStat> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut s = SchedStat::default();
    for task in dir.flatten() {
        let Ok(text) = std::fs::read_to_string(task.path().join("schedstat")) else {
            continue;
        };
        let n: Vec<u64> = text
            .split_whitespace()
            .filter_map(|t| t.parse().ok())
            .collect();
        if let [cpu, wait, slices, ..] = n[..] {
            s.on_cpu_ns += cpu;
            s.wait_ns += wait;
            s.slices += slices;
            s.threads += 1;
        }
    }
    (s.threads > 0).then_some(s)
}

/// True when `address` can only be a server on this machine.
fn is_local(address: &Address) -> bool {
    match address {
        Address::Unix(_) => true,
        Address::Tcp(hp) => {
            let host = hp.rsplit_once(':').map_or(hp.as_str(), |(h, _)| h);
            matches!(host, "localhost" | "[::1]" | "::1") || host.starts_with("127.")
        }
    }
}

/// The pid whose schedstat to read: the one given, or the `pid` the server reports when the
/// server is local and that process is a memcached visible here.
fn local_pid(
    address: &Address,
    given: Option<u32>,
    stats: &BTreeMap<String, String>,
) -> Option<u32> {
    if given.is_some() {
        return given;
    }
    if !is_local(address) {
        return None;
    }
    let pid: u32 = stats.get("pid")?.parse().ok()?;
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    let server = matches!(comm.trim(), "memcached" | "redis-server" | "valkey-server");
    (server && Path::new(&format!("/proc/{pid}/task")).exists()).then_some(pid)
}

/// memcached's `stats`, or a RESP server's `INFO` (its default sections) as one map of
/// fields, with memcached's names for the process's identity added — `pid`
/// (`process_id`), `uptime` (`uptime_in_seconds`) and `time` (`server_time_usec`, in
/// seconds) — so that a restart is told the same way.
fn stats(address: &Address, spec: &Spec) -> Result<(String, BTreeMap<String, String>), Error> {
    let login = match &spec.protocol {
        Protocol::Memcached => {
            let mut c = BlockingConnection::connect(address, spec.options.clone())?;
            let version = c.version()?;
            let s = c.stats(None)?.into_iter().collect();
            return Ok((version, s));
        }
        Protocol::Resp(login) => login,
    };
    let resp = RespOptions {
        auth: login.auth(),
        db: login.db,
        ..RespOptions::default()
    };
    let mut c = RespClient::connect(address, spec.options.clone(), &resp)?;
    let info = c.info(None)?;
    let mut s: BTreeMap<String, String> = info
        .sections
        .into_iter()
        .flat_map(|section| section.fields)
        .collect();
    for (alias, field) in [("pid", "process_id"), ("uptime", "uptime_in_seconds")] {
        if let Some(v) = s.get(field).cloned() {
            s.insert(alias.into(), v);
        }
    }
    if let Some(us) = s
        .get("server_time_usec")
        .and_then(|v| v.parse::<u64>().ok())
    {
        s.insert("time".into(), (us / 1_000_000).to_string());
    }
    let version = ["valkey_version", "redis_version"]
        .iter()
        .find_map(|f| s.get(*f).map(|v| format!("{} {v}", &f[..f.len() - 8])))
        .unwrap_or_default();
    Ok((version, s))
}

/// The servers whose `stats` a run reads: the pool's members, or the servers behind a proxy.
fn watched(spec: &Spec) -> Vec<&Address> {
    if spec.behind.is_empty() {
        spec.pool.members.iter().map(|m| &m.address).collect()
    } else {
        spec.behind.iter().collect()
    }
}

/// A proxy's side of a run through it: it answers, and has no `stats` of its own. Over
/// memcached's protocol its `version` (which a proxy passes on to a server behind it); over
/// RESP a `PING` (twemproxy's redis mode answers neither `INFO` nor `HELLO`), and no version.
pub(crate) fn proxy_view(spec: &Spec) -> Result<ServerView, Error> {
    let address = &spec.pool.members[0].address;
    let version = match &spec.protocol {
        Protocol::Memcached => {
            BlockingConnection::connect(address, spec.options.clone())?.version()?
        }
        Protocol::Resp(login) => {
            let resp = RespOptions {
                auth: login.auth(),
                ..RespOptions::default()
            };
            RespClient::connect(address, spec.options.clone(), &resp)?.ping()?;
            String::new()
        }
    };
    Ok(ServerView {
        version,
        ..ServerView::default()
    })
}

/// Checks every server whose `stats` the run reads answers before anything is written (see
/// [`watched`]): a view each, in order. The server's pid, when given, is a single server's.
pub(crate) fn snapshot_start(spec: &Spec) -> Result<Vec<ServerView>, Error> {
    let targets = watched(spec);
    let given = if targets.len() == 1 && spec.behind.is_empty() {
        spec.server_pid
    } else {
        None
    };
    targets
        .into_iter()
        .map(|address| {
            let (version, before) = stats(address, spec)?;
            let pid = local_pid(address, given, &before);
            Ok(ServerView {
                version,
                before,
                pid,
                ..ServerView::default()
            })
        })
        .collect()
}

/// Just before the measured phase (after prefill).
pub(crate) fn snapshot_before(spec: &Spec, views: &mut [ServerView]) {
    for (address, view) in watched(spec).into_iter().zip(views) {
        if let Ok((_, s)) = stats(address, spec) {
            view.before = s;
        }
        view.schedstat_before = view.pid.and_then(schedstat);
    }
}

/// Just after the measured phase (before clean-up). Leaves `after` empty for a member that
/// is gone.
pub(crate) fn snapshot_after(spec: &Spec, views: &mut [ServerView]) {
    for view in views.iter_mut() {
        view.schedstat_after = view.pid.and_then(schedstat);
    }
    for (address, view) in watched(spec).into_iter().zip(views) {
        if let Ok((_, s)) = stats(address, spec) {
            view.after = s;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locality_by_address() {
        assert!(is_local(&"127.0.0.1:11211".parse().unwrap()));
        assert!(is_local(&"localhost:11211".parse().unwrap()));
        assert!(is_local(&"[::1]:11211".parse().unwrap()));
        assert!(is_local(&"unix:/tmp/mc.sock".parse().unwrap()));
        assert!(!is_local(&"10.0.0.5:11211".parse().unwrap()));
        assert!(!is_local(&"cache.example.com:11211".parse().unwrap()));
    }

    #[test]
    fn own_schedstat_is_readable() {
        // This test process exists, so its counters can be read (on Linux with schedstats).
        if Path::new("/proc/self/schedstat").exists() {
            let s = schedstat(std::process::id()).expect("own schedstat");
            assert!(s.threads >= 1 && s.on_cpu_ns > 0);
        }
    }
}
