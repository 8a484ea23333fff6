//! Times the capture's per-line path, keyed BLAKE2b pseudonym included: `State::line` over
//! memcached `watch` lines (`item_get`, one key each, keys shaped as `load` makes them).
//! `cargo run --release -p cachelab-capture --example capture_bench -- [LINES] [ROUNDS]`
//! prints one JSON line per round: CPU ns per line, and a checksum of the rows' key bytes
//! (the same for any correct build). Used by `benches/hand_vs_library.py`.

use std::hint::black_box;

use cachelab_capture::{Columns, State};

/// CPU nanoseconds this thread has run (from /proc/thread-self/schedstat): steadier than wall
/// time on a shared machine.
fn cpu_ns() -> u64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
    s.split_whitespace()
        .next()
        .and_then(|f| f.parse().ok())
        .expect("ns")
}

fn pass(lines: &[Vec<u8>], secret: &[u8]) -> (f64, u64) {
    let mut state = State::new(secret, false, 1.0, None);
    let mut out = Columns::new();
    let t = cpu_ns();
    for line in lines {
        state.line(black_box(line), &mut out);
    }
    state.flush(&mut out);
    let ns = (cpu_ns() - t) as f64 / lines.len() as f64;
    let check = out
        .keys
        .iter()
        .fold(0u64, |h, &b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    (ns, check)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).map_or(1_000_000, |s| s.parse().expect("LINES"));
    let rounds: usize = args.get(2).map_or(1, |s| s.parse().expect("ROUNDS"));
    let lines: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            format!(
                "ts={}.{} gid={} type=item_get key=cachelab:3f9a2c71b0de:{} status=found \
                 clsid=1 cfd={} size=100",
                1_795_596_440 + i / 1000,
                (i % 1000) * 1000,
                i + 1,
                (i * 7919) % 200_000,
                24 + i % 8
            )
            .into_bytes()
        })
        .collect();
    let secret: Vec<u8> = (0u8..32).collect();
    let (_, check) = pass(&lines, &secret);
    for _ in 0..rounds {
        let (ns, sum) = pass(&lines, &secret);
        assert_eq!(sum, check);
        println!("{{\"name\": \"capture-blake2b\", \"ns_per_item\": {ns:.2}, \"check\": {sum}}}");
    }
}
