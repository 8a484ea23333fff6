//! Times MurmurHash3 x86_32 as rendezvous routing feeds it (`host:port-key`, one per member
//! and key), side by side in one process: our own (`pool::hash::murmur3_32`), the `murmur3`
//! crate (it reads through `std::io::Read`) and TiKV's `mur3` (slices).
//! `cargo run --release -p cachelab-client --example murmur_bench -- [TEXTS] [ROUNDS]`
//! prints one JSON line per implementation and round: CPU ns per text, and a checksum of the
//! hashes (the same for all three). Used by `benches/hand_vs_library.py`.

use std::hint::black_box;
use std::io::Cursor;

use cachelab_client::pool::hash::murmur3_32;

/// CPU nanoseconds this thread has run (from /proc/thread-self/schedstat): steadier than wall
/// time on a shared machine.
fn cpu_ns() -> u64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
    s.split_whitespace()
        .next()
        .and_then(|f| f.parse().ok())
        .expect("ns")
}

fn ours(t: &[u8]) -> u32 {
    murmur3_32(t, 0)
}

fn murmur3_crate(t: &[u8]) -> u32 {
    murmur3::murmur3_32(&mut Cursor::new(t), 0).expect("a slice reads")
}

fn mur3_crate(t: &[u8]) -> u32 {
    mur3::murmurhash3_x86_32(t, 0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).map_or(1_000_000, |s| s.parse().expect("TEXTS"));
    let rounds: usize = args.get(2).map_or(1, |s| s.parse().expect("ROUNDS"));
    let texts: Vec<Vec<u8>> = (0..n)
        .map(|i| format!("10.0.0.{}:11211-cachelab:3f9a2c71b0de:{}", 1 + i % 3, i / 3).into_bytes())
        .collect();
    type Way = (&'static str, fn(&[u8]) -> u32);
    let ways: [Way; 3] = [
        ("murmur3-ours", ours),
        ("murmur3-crate", murmur3_crate),
        ("mur3-crate", mur3_crate),
    ];
    let check = |f: fn(&[u8]) -> u32| {
        texts
            .iter()
            .fold(0u64, |s, t| s.wrapping_add(u64::from(f(black_box(t)))))
    };
    let want = check(ours);
    for _ in 0..rounds {
        for (name, f) in ways {
            let t = cpu_ns();
            let sum = check(f);
            let ns = (cpu_ns() - t) as f64 / n as f64;
            assert_eq!(sum, want, "{name}");
            println!("{{\"name\": \"{name}\", \"ns_per_item\": {ns:.2}, \"check\": {sum}}}");
        }
    }
}
