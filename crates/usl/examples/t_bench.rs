//! Times Student's t: `dist::t_quantile` (what every USL fit and `compare` interval asks for)
//! and `dist::t_cdf`, over degrees of freedom 1 … 200.
//! `cargo run --release -p cachelab-usl --example t_bench -- [CALLS] [ROUNDS]` prints one JSON
//! line per function and round: CPU ns per call, and a checksum of the results rounded to
//! 1e-6 (the same for any correct build). Used by `benches/hand_vs_library.py`.

use std::hint::black_box;

use cachelab_usl::dist::{t_cdf, t_quantile};

/// CPU nanoseconds this thread has run (from /proc/thread-self/schedstat): steadier than wall
/// time on a shared machine.
fn cpu_ns() -> u64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
    s.split_whitespace()
        .next()
        .and_then(|f| f.parse().ok())
        .expect("ns")
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).map_or(20_000, |s| s.parse().expect("CALLS"));
    let rounds: usize = args.get(2).map_or(1, |s| s.parse().expect("ROUNDS"));
    let df = |i: usize| 1.0 + (i % 200) as f64;
    type Way = (&'static str, fn(usize, f64) -> f64);
    let ways: [Way; 2] = [
        ("t-quantile", |i, df| {
            t_quantile([0.9, 0.95, 0.975, 0.995][i % 4], df)
        }),
        ("t-cdf", |i, df| t_cdf(0.25 * (i % 17) as f64 - 2.0, df)),
    ];
    for (name, f) in ways {
        let run = || {
            (0..n).fold(0i64, |s, i| {
                s.wrapping_add((f(black_box(i), df(i)) * 1e6).round() as i64)
            })
        };
        let want = run();
        for _ in 0..rounds {
            let t = cpu_ns();
            let sum = run();
            let ns = (cpu_ns() - t) as f64 / n as f64;
            assert_eq!(sum, want);
            println!("{{\"name\": \"{name}\", \"ns_per_item\": {ns:.2}, \"check\": {sum}}}");
        }
    }
}
