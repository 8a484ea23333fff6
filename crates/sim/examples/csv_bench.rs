//! Times the flat CSV reader on a big trace held in memory: `FlatTrace::parse` of
//! `time,key,size,op` rows (string keys like `load`'s, hashed to ids, and integer sizes).
//! `cargo run --release -p cachelab-sim --example csv_bench -- [ROWS] [ROUNDS]`
//! prints one JSON line per round: CPU ns per row, and a checksum of the parsed columns (the
//! same for any correct build). Used by `benches/hand_vs_library.py`.

use std::hint::black_box;

use cachelab_sim::flat::{FlatTrace, Format};

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
    let n: usize = args.get(1).map_or(5_000_000, |s| s.parse().expect("ROWS"));
    let rounds: usize = args.get(2).map_or(1, |s| s.parse().expect("ROUNDS"));
    let mut data = String::with_capacity(n * 48);
    data.push_str("time,key,size,op\n");
    for i in 0..n {
        let op = if i % 10 == 0 { "set" } else { "get" };
        let key = (i * 7919) % 400_000;
        data.push_str(&format!(
            "{},cachelab:3f9a2c71b0de:{key},{},{op}\n",
            1_795_596_440 + i / 1000,
            64 + (key % 4000)
        ));
    }
    let data = data.into_bytes();
    let mut check = None;
    for round in 0..=rounds {
        let t = cpu_ns();
        let trace = FlatTrace::parse(black_box(&data), Format::Csv, "bench.csv").expect("parse");
        let ns = (cpu_ns() - t) as f64 / n as f64;
        let sum = (0..trace.len()).fold(0u64, |h, i| {
            h.wrapping_mul(31)
                .wrapping_add(trace.ids[i] ^ u64::from(trace.sizes[i]) ^ u64::from(trace.times[i]))
        });
        assert_eq!(*check.get_or_insert(sum), sum);
        // Round 0 warms the allocator and the caches; it is not printed.
        if round > 0 {
            println!("{{\"name\": \"flat-csv\", \"ns_per_item\": {ns:.2}, \"check\": {sum}, \"mb\": {:.1}}}", data.len() as f64 / 1e6);
        }
    }
}
