//! Times the key hash of pool routing, per key: `Distribution::server_for` over keys shaped
//! as `load` makes them (`cachelab:<run id>:<index>`), for ketama (MD5 of the key) and
//! rendezvous (one MurmurHash3 per member), on a pool of 3.
//! `cargo run --release -p cachelab-client --example route_bench -- [KEYS] [ROUNDS]`
//! prints one JSON line per distribution and round: CPU ns per key, and a checksum of the
//! servers chosen (the same for any correct build). Used by `benches/hand_vs_library.py`.

use std::hint::black_box;

use cachelab_client::pool::{Distribution, Kind, Server};

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
    let n: usize = args.get(1).map_or(1_000_000, |s| s.parse().expect("KEYS"));
    let rounds: usize = args.get(2).map_or(1, |s| s.parse().expect("ROUNDS"));
    let keys: Vec<Vec<u8>> = (0..n)
        .map(|i| format!("cachelab:3f9a2c71b0de:{i}").into_bytes())
        .collect();
    let servers: Vec<Server> = ["10.0.0.1:11211", "10.0.0.2:11211", "10.0.0.3:11211"]
        .iter()
        .map(|s| Server::parse(s).expect("server"))
        .collect();
    for (name, kind) in [
        ("ketama-md5", Kind::Ketama),
        ("rendezvous-murmur3", Kind::Rendezvous),
    ] {
        let map = Distribution::new(kind, servers.clone()).expect("pool");
        // One untimed pass warms caches and branch predictors.
        let mut check = 0u64;
        for k in &keys {
            check += map.server_for(black_box(k)) as u64;
        }
        for _ in 0..rounds {
            let t = cpu_ns();
            let mut sum = 0u64;
            for k in &keys {
                sum += map.server_for(black_box(k)) as u64;
            }
            let ns = (cpu_ns() - t) as f64 / n as f64;
            assert_eq!(sum, check);
            println!("{{\"name\": \"{name}\", \"ns_per_item\": {ns:.2}, \"check\": {sum}}}");
        }
    }
}
