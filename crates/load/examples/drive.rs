//! Drives the engine without Python, for profiling:
//! `cargo run --release -p cachelab-load --example drive -- ADDRESS CONNS PIPELINE RATE|closed SECONDS`
//! (ADDRESS may be `A,B,...`: a ketama pool of those members)
//! (gets of 100-byte values over 10,000 keys, prefilled when DRIVE_PREFILL is set (and then
//! deleted at the end); one client thread; DRIVE_BUSY_POLL_US=N turns on busy polling,
//! DRIVE_SEND_BATCH=N sends closed-loop requests in batches of N).

use std::time::Duration;

use cachelab_load::{run, DistSpec, Distribution, Member, Mix, Mode, Pool, Progress, Spec, Stop};

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() != 5 {
        eprintln!("usage: drive ADDRESS CONNS PIPELINE RATE|closed SECONDS");
        std::process::exit(2);
    }
    let conns: usize = a[1].parse().expect("connections");
    let pipeline: usize = a[2].parse().expect("pipeline");
    let mode = match a[3].as_str() {
        "closed" => Mode::Closed,
        r => Mode::Open {
            rate: r.parse().expect("rate"),
            arrivals: cachelab_load::Arrivals::Poisson,
        },
    };
    let secs: f64 = a[4].parse().expect("seconds");
    let spec = Spec {
        pool: Pool {
            members: a[0]
                .split(',')
                .map(|m| Member {
                    address: m.parse().expect("address"),
                    weight: 1,
                })
                .collect(),
            distribution: Distribution::Ketama,
            failure_limit: 2,
            retry: Duration::from_secs(2),
            member_timeout: cachelab_load::MEMBER_TIMEOUT,
            remap: false,
            changes: Vec::new(),
            slots: Vec::new(),
        },
        connections: conns,
        threads: 1,
        pipeline,
        max_outstanding: 100,
        mode,
        mix: Mix {
            get: 1.0,
            multiget: 0.0,
            set: 0.0,
            delete: 0.0,
        },
        multiget_keys: 1,
        key_space: 10_000,
        key_dist: DistSpec {
            name: "uniform".into(),
            params: vec![],
        },
        value_size: DistSpec {
            name: "fixed".into(),
            params: vec![100.0],
        },
        prefix: "cachelab-drive".into(),
        ttl: 0,
        stop: Stop::Duration(Duration::from_secs_f64(secs)),
        warmup: Duration::ZERO,
        prefill: std::env::var_os("DRIVE_PREFILL").is_some(),
        interval: Duration::from_secs(1),
        options: Default::default(),
        give_up_after: Duration::from_secs(10),
        stall: Duration::from_millis(100),
        seed: 1,
        server_pid: None,
        busy_poll: Duration::from_micros(
            std::env::var("DRIVE_BUSY_POLL_US").map_or(0, |v| v.parse().expect("µs")),
        ),
        spin: Duration::from_micros(
            std::env::var("DRIVE_SPIN_US").map_or(0, |v| v.parse().expect("µs")),
        ),
        send_batch: std::env::var("DRIVE_SEND_BATCH").map_or(1, |v| v.parse().expect("batch")),
        behind: Vec::new(),
        on_miss_set: false,
        probe_rate: std::env::var("DRIVE_PROBE_RATE")
            .ok()
            .map(|v| v.parse().expect("requests/s")),
        cleanup: true,
        protocol: Default::default(),
    };
    let out = run(&spec, &Progress::new()).expect("run");
    let t = &out.all;
    let replies = t.replies();
    let cpu = out.client_cpu_s.0 + out.client_cpu_s.1;
    let pc = |h: &cachelab_metrics::Latency, q: f64| {
        cachelab_metrics::percentiles(h, &[q])[0] as f64 / 1000.0
    };
    println!(
        "ops/s {:.0} replies {} misses {} errors {} cpu_us/op {:.2} (user {:.2}s sys {:.2}s) p50 corr {:.1} us uncorr {:.1} us p99 corr {:.1} uncorr {:.1} backlog {:?} sleeps/op {:.2} preempted/op {:.3} run-queue wait {:.1} us/op busy polls {} caught {} requests/write {:.2} lateness p50 {:.2} us p99 {:.2} us late(>1ms) {} spins {} spun {:.3}s spin sends {} fallbacks {}",
        t.throughput(),
        replies,
        t.misses,
        t.error_count(),
        cpu * 1e6 / replies.max(1) as f64,
        out.client_cpu_s.0,
        out.client_cpu_s.1,
        pc(&t.corrected, 50.0),
        pc(&t.uncorrected, 50.0),
        pc(&t.corrected, 99.0),
        pc(&t.uncorrected, 99.0),
        out.schedule.map(|s| s.backlog_at_end),
        out.client_sched.sleeps as f64 / replies.max(1) as f64,
        out.client_sched.preempted as f64 / replies.max(1) as f64,
        out.client_sched.wait_s * 1e6 / replies.max(1) as f64,
        out.client_sched.busy_polls,
        out.client_sched.busy_caught,
        t.sent as f64 / out.client_sched.writes.max(1) as f64,
        pc(&out.client_samples.lateness, 50.0),
        pc(&out.client_samples.lateness, 99.0),
        out.client_samples.late,
        out.client_sched.spins,
        out.client_sched.spun_s,
        out.client_sched.spin_sends,
        out.client_sched.spin_fallbacks,
    );
}
