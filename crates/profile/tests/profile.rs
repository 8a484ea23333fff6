//! The profile engine against a real memcached.

#[path = "../../client/tests/support/mod.rs"]
mod support;

use std::time::Duration;

use cachelab_client::{BlockingConnection, Options};
use cachelab_profile::{run, Op, Progress, Protocol, Spec};
use support::Memcached;

fn spec(address: &str, protocol: Protocol, concurrency: usize) -> Spec {
    Spec {
        address: address.parse().unwrap(),
        sizes: vec![1, 1000, 100_000],
        key_counts: vec![1, 5, 20],
        multi_value_size: 1000,
        samples: 50,
        warmup: 5,
        concurrency,
        protocol,
        options: Options::default(),
        seed: 7,
        prefix: "cachelab-test:run1".into(),
        give_up_after: Duration::from_secs(2),
        proxy: false,
    }
}

fn stat(mc: &Memcached, name: &str) -> u64 {
    let mut c =
        BlockingConnection::connect(&mc.address.parse().unwrap(), Options::default()).unwrap();
    let stats = c.stats(None).unwrap();
    stats
        .iter()
        .find(|(k, _)| k == name)
        .unwrap()
        .1
        .parse()
        .unwrap()
}

fn curr_items(mc: &Memcached) -> u64 {
    stat(mc, "curr_items")
}

#[test]
fn every_cell_gets_its_samples_and_nothing_is_left_behind() {
    let mc = Memcached::start();
    for (protocol, concurrency) in [(Protocol::Text, 1), (Protocol::Meta, 3)] {
        let progress = Progress::new();
        let out = run(&spec(&mc.address, protocol, concurrency), &progress).unwrap();
        assert_eq!(out.cells.len(), 1 + 3 + 3 + 3);
        for c in &out.cells {
            assert_eq!(c.hist.len(), 50, "{:?} {} {}", c.op, c.value_size, c.keys);
            assert_eq!(
                (c.error_count(), c.mismatches, c.misses),
                (0, 0, 0),
                "{c:?}"
            );
        }
        assert_eq!(out.cells[0].op, Op::Floor);
        assert_eq!(out.floor_command, "mn");
        assert_eq!((out.leftover_keys, out.cleaned_up_keys), (0, 0));
        assert!(!out.cancelled && out.aborted.is_none());
        assert_eq!(
            progress.done.load(std::sync::atomic::Ordering::Relaxed),
            progress.total.load(std::sync::atomic::Ordering::Relaxed)
        );
        assert!(out.server.version.starts_with("1."));
        assert!(out.server.settings.iter().any(|(k, _)| k == "num_threads"));
        assert_eq!(curr_items(&mc), 0, "every key written was deleted");
    }
}

/// The floor is measured on the measuring connection, not on a socket of its own: a run opens
/// one connection per measuring thread, plus one for the server's facts and one for the probe
/// of the floor's command, however many threads the server has (the floor's own socket, lined
/// up on the same server thread by throwaway connections, cost 1 + threads per measuring
/// thread).
#[test]
fn the_floor_goes_on_the_measuring_connection() {
    let mc = Memcached::start_with(&["-t", "4"]);
    for concurrency in [1, 3] {
        let before = stat(&mc, "total_connections");
        let out = run(
            &spec(&mc.address, Protocol::Text, concurrency),
            &Progress::new(),
        )
        .unwrap();
        assert_eq!(out.cells[0].op, Op::Floor);
        assert_eq!(out.cells[0].hist.len(), 50);
        // `stat` opens a connection of its own to read the count after the run.
        let opened = stat(&mc, "total_connections") - before - 1;
        assert_eq!(opened, 2 + concurrency as u64);
    }
}

#[test]
fn through_a_proxy_the_floor_is_a_get_of_a_key_never_written() {
    let mc = Memcached::start();
    let (misses, gets) = (stat(&mc, "get_misses"), stat(&mc, "cmd_get"));
    let mut s = spec(&mc.address, Protocol::Text, 1);
    s.proxy = true;
    let out = run(&s, &Progress::new()).unwrap();
    assert_eq!(out.floor_command, "get-miss");
    assert!(out.server.version.starts_with("1."));
    assert!(out.server.settings.is_empty() && out.server.stats.is_empty());
    for c in &out.cells {
        assert_eq!(c.hist.len(), 50, "{:?} {} {}", c.op, c.value_size, c.keys);
        assert_eq!((c.error_count(), c.mismatches, c.misses), (0, 0, 0));
    }
    // The probe, every floor sample (warm-up too, each an untimed and a timed get) and every
    // round's untimed primer (a key never written) missed; every other get hit. The keys
    // read: the floor's 2 and 3 sizes' per round, the primer's 1 and 1 + 5 + 20 per round's
    // multi-gets.
    let rounds = 50 + 5;
    assert_eq!(stat(&mc, "get_misses") - misses, 3 * rounds + 1);
    assert_eq!(
        stat(&mc, "cmd_get") - gets,
        1 + rounds * (2 + 3 + 1 + 1 + 5 + 20)
    );
    assert_eq!(curr_items(&mc), 0, "every key written was deleted");
    s.protocol = Protocol::Meta;
    let refused = run(&s, &Progress::new()).unwrap_err().to_string();
    assert!(
        refused.contains("meta protocol through a proxy"),
        "{refused}"
    );
}

#[test]
fn a_server_that_dies_mid_run_ends_the_run_with_counts_not_a_hang() {
    let mut mc = Memcached::start();
    let mut s = spec(&mc.address, Protocol::Text, 1);
    s.samples = 1_000_000;
    let progress = Progress::new();
    let started = std::time::Instant::now();
    let out = std::thread::scope(|scope| {
        let h = scope.spawn(|| run(&s, &progress));
        while progress.done.load(std::sync::atomic::Ordering::Relaxed) < 200 {
            std::thread::yield_now();
        }
        mc.kill();
        h.join().unwrap().unwrap()
    });
    assert!(
        out.aborted.as_deref().unwrap_or("").contains("gave up"),
        "{:?}",
        out.aborted
    );
    let errors: u64 = out.cells.iter().map(|c| c.error_count()).sum();
    assert!(errors > 0);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn cancel_stops_early_and_keeps_partial_results() {
    let mc = Memcached::start();
    let mut s = spec(&mc.address, Protocol::Text, 2);
    s.samples = 1_000_000;
    let progress = Progress::new();
    let out = std::thread::scope(|scope| {
        let h = scope.spawn(|| run(&s, &progress));
        while progress.done.load(std::sync::atomic::Ordering::Relaxed) < 500 {
            std::thread::yield_now();
        }
        progress.cancel();
        h.join().unwrap().unwrap()
    });
    assert!(out.cancelled);
    assert!(!out.cells[1].hist.is_empty());
    assert_eq!(curr_items(&mc), 0);
}

#[test]
fn bad_specs_are_refused_before_anything_is_sent() {
    let mc = Memcached::start();
    let mut s = spec(&mc.address, Protocol::Text, 1);
    s.prefix = "has space".into();
    assert!(run(&s, &Progress::new())
        .unwrap_err()
        .to_string()
        .contains("prefix"));
    let mut s = spec(&mc.address, Protocol::Text, 1);
    s.key_counts = vec![0];
    assert!(run(&s, &Progress::new()).is_err());
}

/// Each command's `calls` in the server's `INFO commandstats`.
fn calls(c: &mut cachelab_client::resp::RespClient, command: &str) -> u64 {
    let info = c.info(Some("commandstats")).unwrap();
    info.get(&format!("cmdstat_{command}"))
        .and_then(|v| {
            cachelab_client::resp::subfields(v)
                .into_iter()
                .find(|(k, _)| *k == "calls")
                .map(|(_, n)| n.parse().unwrap())
        })
        .unwrap_or(0)
}

#[test]
fn over_resp_every_cell_is_measured_and_the_server_counts_each_command_sent() {
    use cachelab_client::resp::{Auth, RespClient, RespOptions};
    use cachelab_profile::{Password, RespLogin};

    let redis = support::redis::Redis::start_with(&["--requirepass", "pw-profile"]);
    let login = RespLogin {
        user: None,
        password: Some(Password::from("pw-profile".to_string())),
        db: Some(3),
    };
    let address = redis.address.parse().unwrap();
    let resp = RespOptions {
        auth: Some(Auth::password("pw-profile")),
        db: Some(3),
        ..RespOptions::default()
    };
    let mut c = RespClient::connect(&address, Options::default(), &resp).unwrap();
    let names = ["get", "set", "mget", "unlink", "ping"];
    let before: Vec<u64> = names.iter().map(|n| calls(&mut c, n)).collect();
    let s = spec(&redis.address, Protocol::Resp(login), 2);
    let out = run(&s, &Progress::new()).unwrap();
    assert_eq!(out.floor_command, "PING");
    assert!(
        out.server.version.starts_with("redis "),
        "{}",
        out.server.version
    );
    for cell in &out.cells {
        assert_eq!(cell.hist.len(), 50, "{:?} {}", cell.op, cell.value_size);
        assert_eq!(
            (cell.error_count(), cell.mismatches, cell.misses),
            (0, 0, 0)
        );
    }
    assert_eq!(out.leftover_keys, 0);
    for (name, b) in names.iter().zip(before) {
        let sent = out.commands.get(name.to_uppercase().as_str()).copied();
        assert_eq!(Some(calls(&mut c, name) - b), sent, "{name}");
    }
    // 55 rounds (5 warm-up), two workers: a timed and an untimed PING each round.
    assert_eq!(out.commands["PING"], 2 * 55);
    let dbsize = c
        .call(&cachelab_proto::resp::Command::new("DBSIZE"))
        .unwrap();
    assert_eq!(dbsize, cachelab_proto::resp::Value::Integer(0));
}
