//! The engine over RESP against a real redis-server (the OS package's, on a free loopback
//! port; see crates/client/tests/support/redis.rs): the login each connection sends (an ACL
//! user and its password, a database), every count against the server's own, an error reply
//! counted as a failed request on a connection that stays in use.

mod common;
#[path = "../../client/tests/support/mod.rs"]
mod support;

use std::time::Duration;

use cachelab_client::resp::{Info, RespClient, RespOptions};
use cachelab_load::{run, Mode, Progress, Protocol, RespLogin, Spec, Stop};
use support::redis::Redis;

fn spec(address: &str, login: RespLogin) -> Spec {
    Spec {
        connections: 3,
        key_space: 1000,
        prefix: "cachelab-test:resp".into(),
        ttl: 300,
        stop: Stop::Requests(10_000),
        prefill: true,
        seed: 7,
        protocol: Protocol::Resp(login),
        ..common::spec(address)
    }
}

/// The server's arguments: the default user off, and an ACL user allowed `commands` (with
/// `INFO`, `SELECT`, `DBSIZE` and `PING`) on the run's keys only.
fn acl(commands: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = ["--user", "default", "off", "--user", "bench", "on"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend([">s3cret", "~cachelab-test:*"].map(String::from));
    for c in commands.iter().chain(&["info", "select", "dbsize", "ping"]) {
        args.push(format!("+{c}"));
    }
    args
}

fn start(commands: &[&str]) -> Redis {
    let args = acl(commands);
    Redis::start_with(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

const ALL: [&str; 5] = ["get", "mget", "set", "del", "unlink"];

fn login(db: Option<u32>) -> RespLogin {
    serde_json::from_value(serde_json::json!({"user": "bench", "password": "s3cret", "db": db}))
        .unwrap()
}

fn calls(info: &Info, command: &str) -> u64 {
    info.get(&format!("cmdstat_{command}"))
        .and_then(|v| v.split(',').next()?.strip_prefix("calls=")?.parse().ok())
        .unwrap_or(0)
}

fn admin(r: &Redis, db: u32) -> RespClient {
    let opts = RespOptions {
        auth: login(None).auth(),
        db: Some(db),
        ..RespOptions::default()
    };
    RespClient::connect(&r.address.parse().unwrap(), Default::default(), &opts).unwrap()
}

fn dbsize(c: &mut RespClient) -> i64 {
    match c
        .call(&cachelab_proto::resp::Command::new("DBSIZE"))
        .unwrap()
    {
        cachelab_proto::resp::Value::Integer(n) => n,
        v => panic!("DBSIZE answered {v:?}"),
    }
}

#[test]
fn every_count_is_the_servers_and_the_keys_go_to_the_database_asked() {
    let r = start(&ALL);
    let mut c = admin(&r, 3);
    let before = c.info(Some("commandstats")).unwrap();
    let mut s = spec(&r.address, login(Some(3)));
    s.cleanup = false; // (left for this test to find in database 3, then deleted here)
    let out = run(&s, &Progress::new()).expect("run");
    let after = c.info(Some("commandstats")).unwrap();
    assert!(out.all.errors.is_empty(), "{:?}", out.all.errors);
    assert_eq!(out.all.replies(), 10_000);
    let d = |cmd| calls(&after, cmd) - calls(&before, cmd);
    let [get, multiget, set, delete] = out.all.ops;
    assert_eq!(d("get"), get);
    assert_eq!(d("mget"), multiget);
    assert_eq!(d("set"), set + out.prefilled_keys);
    assert_eq!(d("del"), delete);
    // Every key in database 3 (SELECT on every connection), none in 0.
    let left = dbsize(&mut c);
    assert!(left > 0 && left <= 1000, "{left}");
    assert_eq!(dbsize(&mut admin(&r, 0)), 0);
    // The server's view: INFO's counters, with memcached's names for its identity.
    let v = &out.server;
    assert!(v.version.starts_with("redis "), "{}", v.version);
    assert_eq!(v.after.get("pid"), v.after.get("process_id"));
    let hits: u64 = v.after["keyspace_hits"].parse::<u64>().unwrap()
        - v.before["keyspace_hits"].parse::<u64>().unwrap();
    assert_eq!(hits, out.all.hits);
    // Clean up what this test kept.
    let keys: Vec<_> = (0..1000)
        .map(|i| cachelab_proto::resp::RespKey::new(format!("cachelab-test:resp:{i}")).unwrap())
        .collect();
    assert_eq!(c.unlink(&keys).unwrap(), left as u64);
}

/// Open loop with a spin: the requests staged and written by the spin itself (every kind, in
/// RESP) are the server's count exactly, and a counted run sends no more than asked.
#[test]
fn spun_sends_in_resp_are_the_servers_count_and_keep_to_the_quota() {
    let r = start(&ALL);
    let mut c = admin(&r, 0);
    let before = c.info(Some("commandstats")).unwrap();
    let mut s = spec(&r.address, login(None));
    s.threads = 1;
    s.mode = Mode::Open {
        rate: 4000.0,
        arrivals: cachelab_load::Arrivals::Poisson,
    };
    s.stop = Stop::Requests(3000);
    s.spin = Duration::from_micros(300);
    let out = run(&s, &Progress::new()).expect("run");
    let after = c.info(Some("commandstats")).unwrap();
    assert!(out.all.errors.is_empty(), "{:?}", out.all.errors);
    assert_eq!((out.all.sent, out.all.replies()), (3000, 3000));
    let d = |cmd| calls(&after, cmd) - calls(&before, cmd);
    let [get, multiget, set, delete] = out.all.ops;
    assert_eq!(d("get"), get);
    assert_eq!(d("mget"), multiget);
    assert_eq!(d("set"), set + out.prefilled_keys);
    assert_eq!(d("del"), delete);
    let sched = &out.client_sched;
    assert!(sched.spin_sends > 0, "{sched:?}");
    assert!(sched.writes >= out.all.sent, "{sched:?}");
    assert_eq!((out.leftover_keys, dbsize(&mut c)), (0, 0));
}

#[test]
fn an_error_reply_is_a_failed_request_on_a_connection_kept() {
    // The user may not DEL: each delete is answered -NOPERM, counted as a server error; the
    // other requests go on, on the same connections.
    let r = start(&["get", "mget", "set", "unlink"]);
    let s = spec(&r.address, login(None));
    let out = run(&s, &Progress::new()).expect("run");
    let failed = out.all.errors.get("server_error").copied().unwrap_or(0);
    assert!(failed > 0, "{:?}", out.all.errors);
    assert_eq!(out.all.errors.len(), 1, "{:?}", out.all.errors);
    assert_eq!(out.all.replies() + failed, 10_000);
    assert_eq!((out.leftover_keys, dbsize(&mut admin(&r, 0))), (0, 0));
}

#[test]
fn a_wrong_password_is_refused_before_anything_is_written() {
    let r = start(&ALL);
    let bad: RespLogin =
        serde_json::from_value(serde_json::json!({"user": "bench", "password": "nope"})).unwrap();
    let Err(e) = run(&spec(&r.address, bad), &Progress::new()) else {
        panic!("a wrong password was not refused");
    };
    let text = e.to_string();
    assert!(text.contains("WRONGPASS"), "{text}");
    assert!(!text.contains("nope"), "{text}");
    assert_eq!(dbsize(&mut admin(&r, 0)), 0);
}
