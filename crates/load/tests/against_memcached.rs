//! Runs against a real memcached on a free loopback port (skipped when none is installed).

mod common;

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cachelab_load::{run, Mix, Mode, Progress, Spec, Stop};
use common::spec;

struct Server {
    child: Child,
    address: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether a memcached answers `version` at `address` (a bare connect is not proof: the
/// port may be another process's, or a socket connected to itself).
fn answers(address: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(address) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    let mut buf = [0u8; 64];
    s.write_all(b"version\r\n").is_ok()
        && s.read(&mut buf)
            .is_ok_and(|n| buf[..n].starts_with(b"VERSION "))
}

/// A private memcached on a free loopback port, answering; a few ports are tried, since a
/// port free a moment ago can be taken (by another test's client socket) before memcached
/// binds it.
fn memcached() -> Option<Server> {
    for _ in 0..3 {
        let port = TcpListener::bind("127.0.0.1:0")
            .ok()?
            .local_addr()
            .ok()?
            .port();
        let mut child = Command::new("memcached")
            .args([
                "-l",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-U",
                "0",
                "-m",
                "64",
                "-t",
                "2",
            ])
            .args(["-u", "root"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let address = format!("127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if matches!(child.try_wait(), Ok(Some(_))) {
                break; // it could not bind: try another port
            }
            if answers(&address) {
                return Some(Server { child, address });
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.wait();
    }
    None
}

fn stat(m: &std::collections::BTreeMap<String, String>, k: &str) -> u64 {
    m[k].parse().unwrap()
}

/// The server holds no item (the run deleted everything it set).
fn assert_no_items(address: &str) {
    let mut c =
        cachelab_client::BlockingConnection::connect(&address.parse().unwrap(), Default::default())
            .unwrap();
    let stats: std::collections::BTreeMap<String, String> =
        c.stats(None).unwrap().into_iter().collect();
    assert_eq!(stat(&stats, "curr_items"), 0);
}

#[test]
fn hits_and_misses_match_the_servers_counters_and_keys_are_deleted() {
    let Some(server) = memcached() else {
        eprintln!("memcached not installed: skipped");
        return;
    };
    let out = counts_match_and_keys_are_deleted(&server, |_| {});
    assert_eq!(
        out.client_sched.busy_polls, 0,
        "busy polling is off by default"
    );
}

#[test]
fn busy_polling_polls_and_keeps_every_count_exact() {
    let Some(server) = memcached() else {
        eprintln!("memcached not installed: skipped");
        return;
    };
    let out =
        counts_match_and_keys_are_deleted(&server, |s| s.busy_poll = Duration::from_micros(300));
    let sched = out.client_sched;
    assert!(sched.busy_polls > 0, "{sched:?}");
    // memcached answers on loopback well within 300 µs most of the time.
    assert!(sched.busy_caught > 0, "{sched:?}");
    assert!(sched.busy_caught <= sched.busy_polls, "{sched:?}");
}

#[test]
fn send_batch_writes_whole_batches_and_keeps_every_count_exact() {
    let Some(server) = memcached() else {
        eprintln!("memcached not installed: skipped");
        return;
    };
    // 20,000 requests over 6 connections: 3,333 or 3,334 each, which leaves last batches
    // of 5 and 6 (fewer than a batch: they must still go out).
    let out = counts_match_and_keys_are_deleted(&server, |s| {
        s.connections = 6;
        s.pipeline = 16;
        s.send_batch = 8;
    });
    let writes = out.client_sched.writes;
    // Every write but each connection's last carries at least 8 requests (a write the
    // kernel takes in two parts would count twice; the slack allows one per connection).
    assert!(writes > 0);
    assert!(
        writes <= out.all.sent / 8 + 2 * 6,
        "{writes} writes for {} requests",
        out.all.sent
    );
}

#[test]
fn send_batch_outside_one_to_the_pipeline_or_in_open_loop_is_refused() {
    let msg = |tweak: &dyn Fn(&mut Spec)| {
        let mut s = spec("127.0.0.1:1");
        tweak(&mut s);
        match s.validate() {
            Err(cachelab_load::SpecError::Invalid(m)) => m,
            other => panic!("{other:?}"),
        }
    };
    let m = msg(&|s: &mut Spec| s.send_batch = 0);
    assert!(
        m.contains("send-batch must be a whole number from 1 to"),
        "{m}"
    );
    let m = msg(&|s: &mut Spec| s.send_batch = 5); // the pipeline is 4
    assert!(m.contains("at most the pipeline depth (4), not 5"), "{m}");
    let m = msg(&|s: &mut Spec| {
        s.send_batch = 2;
        s.mode = Mode::Open {
            rate: 100.0,
            arrivals: cachelab_load::Arrivals::Poisson,
        };
    });
    assert!(m.contains("closed loop only"), "{m}");
    let mut ok = spec("127.0.0.1:1");
    ok.send_batch = 4;
    assert!(ok.validate().is_ok());
}

/// Runs the mixed closed-loop spec, changed by `tweak`, and checks the counts against the
/// server.
fn counts_match_and_keys_are_deleted(
    server: &Server,
    tweak: impl FnOnce(&mut Spec),
) -> cachelab_load::Outcome {
    let mut s = spec(&server.address);
    tweak(&mut s);
    let out = run(&s, &Progress::new()).unwrap();
    assert!(out.aborted.is_none(), "{:?}", out.aborted);
    assert_eq!(out.all.error_count(), 0, "{:?}", out.all.errors);
    assert_eq!(out.all.replies(), 20_000);
    assert_eq!(out.all.sent, 20_000);
    let (b, a) = (&out.server.before, &out.server.after);
    assert_eq!(out.all.hits, stat(a, "get_hits") - stat(b, "get_hits"));
    assert_eq!(
        out.all.misses,
        stat(a, "get_misses") - stat(b, "get_misses")
    );
    assert!(out.all.hits > 0 && out.all.misses > 0);
    assert_eq!(out.leftover_keys, 0);
    // Clean-up removed everything the run set.
    assert_no_items(&server.address);
    out
}

/// Without clean-up (a driver's engines on one key space), the run leaves what it wrote and
/// says it deleted nothing: the driver deletes the key space once every engine is done.
#[test]
fn without_cleanup_the_keys_written_stay() {
    let Some(server) = memcached() else {
        eprintln!("memcached not installed: skipped");
        return;
    };
    let mut s = spec(&server.address);
    s.cleanup = false;
    let out = run(&s, &Progress::new()).unwrap();
    assert_eq!((out.deleted_keys, out.leftover_keys), (0, 0));
    let mut c = cachelab_client::BlockingConnection::connect(
        &server.address.parse().unwrap(),
        Default::default(),
    )
    .unwrap();
    let stats: std::collections::BTreeMap<String, String> =
        c.stats(None).unwrap().into_iter().collect();
    assert!(stat(&stats, "curr_items") > 0);
}

/// Gets only, of a prefilled key space, at 2,000 requests/s (Poisson) for 2 s.
fn open_loop_gets(address: &str) -> Spec {
    let mut s = spec(address);
    s.mix = Mix {
        get: 1.0,
        multiget: 0.0,
        set: 0.0,
        delete: 0.0,
    };
    s.prefill = true;
    s.mode = Mode::Open {
        rate: 2000.0,
        arrivals: cachelab_load::Arrivals::Poisson,
    };
    s.stop = Stop::Duration(Duration::from_secs(2));
    s
}

/// The requests due over the 2 s (sent, or due but never sent: a client that waited for a CPU
/// on a loaded machine falls behind, it does not lose its schedule) are 2,000/s.
fn assert_rate(out: &cachelab_load::Outcome) {
    let backlog = out.schedule.as_ref().map_or(0, |s| s.backlog_at_end);
    let rate = (out.all.sent + backlog) as f64 / 2.0;
    assert!(
        (rate / 2000.0 - 1.0).abs() < 0.15,
        "due {rate}/s (sent {}, backlog {backlog})",
        out.all.sent
    );
}

#[test]
fn open_loop_prefilled_gets_all_hit_at_the_asked_rate() {
    let Some(server) = memcached() else {
        eprintln!("memcached not installed: skipped");
        return;
    };
    let s = open_loop_gets(&server.address);
    let out = run(&s, &Progress::new()).unwrap();
    assert_eq!(out.prefilled_keys, 2000);
    assert_eq!(out.all.misses, 0);
    assert!(out.all.hits > 0);
    assert!(!out.all.corrected.is_empty());
    assert_rate(&out);
    assert_eq!(out.deleted_keys, 2000);
}

#[test]
fn open_loop_with_busy_polling_still_holds_its_rate() {
    let Some(server) = memcached() else {
        eprintln!("memcached not installed: skipped");
        return;
    };
    let mut s = open_loop_gets(&server.address);
    s.busy_poll = Duration::from_micros(200);
    let out = run(&s, &Progress::new()).unwrap();
    assert_eq!(out.all.misses, 0);
    assert_eq!(out.all.error_count(), 0, "{:?}", out.all.errors);
    assert_rate(&out);
    assert!(out.client_sched.busy_polls > 0, "{:?}", out.client_sched);
    assert_eq!(out.deleted_keys, 2000);
}

#[test]
fn open_loop_spinning_to_its_sends_holds_its_rate_and_counts_its_pacing() {
    let Some(server) = memcached() else {
        eprintln!("memcached not installed: skipped");
        return;
    };
    let mut s = open_loop_gets(&server.address);
    s.spin = Duration::from_micros(300);
    let out = run(&s, &Progress::new()).unwrap();
    assert_eq!(out.all.misses, 0);
    assert_eq!(out.all.error_count(), 0, "{:?}", out.all.errors);
    assert_rate(&out);
    let sched = &out.client_sched;
    // It waited awake for its sends (some, at least: a send due while replies were being
    // read needs none), and that time is part of the threads' CPU time.
    assert!(sched.spins > 0 && sched.spun_s > 0.0, "{sched:?}");
    assert!(
        sched.spun_s <= out.client_cpu_s.0 + out.client_cpu_s.1 + 0.05,
        "{sched:?} {:?}",
        out.client_cpu_s
    );
    assert_eq!(sched.busy_polls, 0, "{sched:?}"); // no busy polling asked for
    assert_eq!(out.deleted_keys, 2000);
    // Sent from the spin itself (some at least: a loaded machine may leave others to the
    // task), and never two requests in one write, whoever sent them.
    assert!(sched.spin_sends > 0, "{sched:?}");
    assert!(
        sched.spin_sends + sched.spin_fallbacks <= out.all.sent,
        "{sched:?} {}",
        out.all.sent
    );
    assert!(sched.writes >= out.all.sent, "{sched:?} {}", out.all.sent);
    assert_eq!(out.all.replies(), out.all.sent);
}

#[test]
fn open_loop_spinning_at_a_higher_rate_with_every_kind_of_request_never_batches_them() {
    let Some(server) = memcached() else {
        eprintln!("memcached not installed: skipped");
        return;
    };
    // Sets, deletes and multi-gets are staged too; requests due 1 ms apart on average on each
    // of 4 connections on one thread (ties between connections are common).
    let mut s = open_loop_gets(&server.address);
    s.mix = Mix {
        get: 0.6,
        multiget: 0.1,
        set: 0.2,
        delete: 0.1,
    };
    s.threads = 1;
    s.mode = Mode::Open {
        rate: 4000.0,
        arrivals: cachelab_load::Arrivals::Poisson,
    };
    s.stop = Stop::Duration(Duration::from_secs(1));
    s.spin = Duration::from_micros(300);
    let out = run(&s, &Progress::new()).unwrap();
    assert_eq!(out.all.error_count(), 0, "{:?}", out.all.errors);
    assert_eq!(out.all.replies(), out.all.sent);
    let sched = &out.client_sched;
    assert!(sched.spin_sends > 0, "{sched:?}");
    assert!(sched.writes >= out.all.sent, "{sched:?} {}", out.all.sent);
    // Every send's lateness was measured, and the send times are those of separate writes
    // in the order written: within a block of consecutive sends, each later than the last
    // (requests sent together in one write would share a time).
    assert_eq!(out.client_samples.lateness.len(), out.all.sent);
    let sends = &out.client_samples.sends;
    assert!(sends.t_ns.len() > 1000, "{}", sends.t_ns.len());
    if sched.spin_fallbacks == 0 {
        for i in 1..sends.t_ns.len() {
            if sends.block[i] == sends.block[i - 1] {
                assert!(
                    sends.t_ns[i] > sends.t_ns[i - 1],
                    "send {i} at {} ns, the one before at {} ns",
                    sends.t_ns[i],
                    sends.t_ns[i - 1]
                );
            }
        }
    }
    assert_eq!(out.deleted_keys, 2000);
}

#[test]
fn closed_loop_with_a_spin_asked_for_never_stages() {
    let Some(server) = memcached() else {
        eprintln!("memcached not installed: skipped");
        return;
    };
    let out = counts_match_and_keys_are_deleted(&server, |s| s.spin = Duration::from_micros(300));
    let sched = &out.client_sched;
    assert_eq!(
        (sched.spin_sends, sched.spin_fallbacks),
        (0, 0),
        "{sched:?}"
    );
}

#[test]
fn a_probes_requests_are_counted_by_the_server_and_its_keys_deleted() {
    let Some(server) = memcached() else {
        eprintln!("memcached not installed: skipped");
        return;
    };
    let mut s = spec(&server.address);
    s.probe_rate = Some(500.0);
    let out = run(&s, &Progress::new()).unwrap();
    let p = out.probe.as_ref().expect("a probe");
    assert_eq!(p.rate, 500.0);
    assert!(
        p.all.sent > 0 && p.all.ops[2] > 0,
        "the probe sent gets and sets"
    );
    assert_eq!(p.all.error_count(), 0, "{:?}", p.all.errors);
    // The load connections sent their count; the probe's requests are apart from it.
    assert_eq!(out.all.sent, 20_000);
    let (b, a) = (&out.server.before, &out.server.after);
    let d = |k: &str| stat(a, k) - stat(b, k);
    assert_eq!(out.all.hits + p.all.hits, d("get_hits"));
    assert_eq!(out.all.misses + p.all.misses, d("get_misses"));
    assert_eq!(out.all.ops[2] + p.all.ops[2], d("cmd_set"));
    // The keys the probe set were deleted with the load's.
    assert_eq!(out.leftover_keys, 0);
    assert_no_items(&server.address);
}
