//! Times the phases of a streamed flat LRU simulation of an oracleGeneral file:
//! `cargo run --release -p cachelab-sim --example flat_bench -- FILE CAPACITY [POLICY]`.
//! Prints CPU-free wall times per phase (run on a quiet machine).

use std::io::Read;
use std::time::Instant;

use cachelab_sim::flat::Numberer;
use cachelab_sim::policy::{simulate_file, Unit};

/// CPU seconds this thread has run (from /proc/thread-self/schedstat).
fn cpu() -> f64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
    s.split_whitespace()
        .next()
        .expect("field")
        .parse::<f64>()
        .expect("ns")
        / 1e9
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = std::path::PathBuf::from(&args[1]);
    let cap: u64 = args[2].parse().expect("capacity");
    let policy = args.get(3).map_or("lru", String::as_str);
    let phase = args.get(4).map_or("all", String::as_str);

    if phase == "all" || phase == "read" {
        let t = Instant::now();
        let c = cpu();
        let mut f = std::fs::File::open(&path).expect("open");
        let mut buf = vec![0u8; 24 << 14];
        let mut sum = 0u64;
        loop {
            let k = f.read(&mut buf).expect("read");
            if k == 0 {
                break;
            }
            sum = sum.wrapping_add(u64::from(buf[k - 1]));
        }
        eprintln!(
            "read only:        {:.3} s wall {:.3} CPU-s ({sum})",
            t.elapsed().as_secs_f64(),
            cpu() - c
        );
    }
    if phase == "all" || phase == "number" {
        let t = Instant::now();
        let c = cpu();
        let mut f = std::fs::File::open(&path).expect("open");
        let n = f.metadata().expect("meta").len() as usize / 24;
        let mut num = Numberer::new(n);
        let mut buf = vec![0u8; 24 << 14];
        let mut sum = 0u64;
        let mut left = n * 24;
        while left > 0 {
            let k = left.min(buf.len());
            f.read_exact(&mut buf[..k]).expect("read");
            for r in buf[..k].chunks_exact(24) {
                let id = u64::from_le_bytes(r[4..12].try_into().expect("8"));
                sum = sum.wrapping_add(u64::from(num.number(id)));
            }
            left -= k;
        }
        eprintln!(
            "read+number:      {:.3} s wall {:.3} CPU-s ({sum}, {} objects)",
            t.elapsed().as_secs_f64(),
            cpu() - c,
            num.count()
        );
    }
    if phase == "mem" {
        let st = cachelab_sim::flat::SimTrace::load(&path, None).expect("load");
        for _ in 0..3 {
            let t = Instant::now();
            let c = cpu();
            let r = cachelab_sim::policy::simulate(&st, policy, cap, Unit::Objects).expect("sim");
            eprintln!(
                "in-memory sim:    {:.3} s wall {:.3} CPU-s  requests {} miss ratio {:.4}",
                t.elapsed().as_secs_f64(),
                cpu() - c,
                r.counts.requests,
                r.miss_ratio()
            );
        }
    }
    if phase == "all" || phase == "sim" {
        let t = Instant::now();
        let c = cpu();
        let r = simulate_file(&path, None, policy, cap, Unit::Objects)
            .expect("sim")
            .expect("streams");
        eprintln!(
            "simulate_file:    {:.3} s wall {:.3} CPU-s  requests {} miss ratio {:.4}",
            t.elapsed().as_secs_f64(),
            cpu() - c,
            r.counts.requests,
            r.miss_ratio()
        );
    }
}
