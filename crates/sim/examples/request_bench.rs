//! Throughput of the request-level simulator: item touches per CPU-second per strategy.
//!
//! `cargo run --release -p cachelab-sim --example request_bench [-- REQUESTS [SPEC ...]]`
//!
//! Builds a seeded synthetic trace in memory (default 1 M requests, ~30 touches each): 200 k
//! items with log-uniform sizes from 100 B to 100 KB, 10 k of them topics in an 8-ary topic
//! tree, each topic with ~19 leaf children; half the requests are topic pages (a topic, then
//! some of its children), the rest touch Zipf(0.9)-popular items; 50 instances, 20 routes.
//! Then runs each strategy once (one draw, one thread, train = 0.5) and prints touches per
//! CPU-second, counting every touch of the trace (the training half is simulated too, without
//! latency draws), and a digest of everything the result reports, so that two builds can be
//! checked to give bit-for-bit the same results. `benches/request_sim.py` runs it.

use std::time::Instant;

use cachelab_sim::request::{
    simulate, LatencyModel, RequestTrace, Strategy, StrategyResult, TraceColumns,
};

/// SplitMix64: a small seeded generator, good enough for a synthetic trace.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn below(&mut self, n: usize) -> usize {
        (self.unit() * n as f64) as usize
    }
}

/// Draws ranks 0..n with P(rank k) proportional to 1 / (k + 1)^alpha.
struct Zipf(Vec<f64>);

impl Zipf {
    fn new(n: usize, alpha: f64) -> Zipf {
        let mut cdf = Vec::with_capacity(n);
        let mut total = 0.0;
        for k in 0..n {
            total += 1.0 / ((k + 1) as f64).powf(alpha);
            cdf.push(total);
        }
        cdf.iter_mut().for_each(|c| *c /= total);
        Zipf(cdf)
    }
    fn sample(&self, rng: &mut Rng) -> usize {
        let u = rng.unit();
        self.0.partition_point(|&c| c < u).min(self.0.len() - 1)
    }
}

fn synthetic_trace(requests: usize, seed: u64) -> RequestTrace {
    const ITEMS: usize = 200_000;
    const TOPICS: usize = 10_000;
    let mut rng = Rng(seed);
    let item_sizes: Vec<u64> = (0..ITEMS)
        .map(|_| (100.0 * 1000f64.powf(rng.unit())) as u64)
        .collect();
    // Topic t's children: its sub-topics 8t+1..8t+8 and leaves spread evenly over the rest.
    let leaves_per_topic = (ITEMS - TOPICS) / TOPICS;
    let mut child_offsets = vec![0u32];
    let mut child_items = Vec::new();
    for t in 0..ITEMS {
        if t < TOPICS {
            child_items.extend(
                (8 * t + 1..=8 * t + 8)
                    .filter(|&c| c < TOPICS)
                    .map(|c| c as u32),
            );
            let first = TOPICS + t * leaves_per_topic;
            child_items.extend((first..first + leaves_per_topic).map(|c| c as u32));
        }
        child_offsets.push(child_items.len() as u32);
    }
    // Popularity: a random permutation of the items, ranked by Zipf.
    let mut by_rank: Vec<u32> = (0..ITEMS as u32).collect();
    for i in (1..ITEMS).rev() {
        by_rank.swap(i, rng.below(i + 1));
    }
    let zipf_items = Zipf::new(ITEMS, 0.9);
    let zipf_topics = Zipf::new(TOPICS, 0.9);

    let mut c = TraceColumns {
        item_sizes,
        child_offsets,
        child_items,
        touch_offsets: vec![0],
        ..TraceColumns::default()
    };
    for r in 0..requests {
        c.time.push(r as f64 * 0.01);
        c.instance.push(rng.below(50) as u32);
        c.route.push(rng.below(20) as u32);
        c.base_ms.push(20.0 * 25f64.powf(rng.unit()));
        let n = 10 + rng.below(41);
        let mut k = 0;
        if rng.unit() < 0.5 {
            let t = zipf_topics.sample(&mut rng);
            c.touch_items.push(t as u32);
            let first = TOPICS + t * leaves_per_topic;
            for _ in 0..n / 2 {
                c.touch_items
                    .push((first + rng.below(leaves_per_topic)) as u32);
            }
            k = 1 + n / 2;
        }
        for _ in k..n {
            c.touch_items.push(by_rank[zipf_items.sample(&mut rng)]);
        }
        c.touch_offsets.push(c.touch_items.len() as u64);
    }
    RequestTrace::new(c).expect("a consistent synthetic trace")
}

/// The seed's App Engine tables as 3-point quantile tables (µs): p0 ~ p5, p50, p100 ~ p99.9.
fn model() -> LatencyModel {
    let get = [
        (1, [1380.0, 2340.0, 34590.0]),
        (1_000, [1410.0, 2710.0, 26970.0]),
        (10_000, [1470.0, 2690.0, 30570.0]),
        (100_000, [2330.0, 3770.0, 41150.0]),
        (1_000_000, [8290.0, 11160.0, 42840.0]),
    ];
    let multi = [
        (1, [2000.0, 3060.0, 92180.0]),
        (10, [2500.0, 3700.0, 70100.0]),
        (100, [6000.0, 8290.0, 108810.0]),
    ];
    LatencyModel::new(
        get.iter().map(|(s, q)| (*s, q.to_vec())).collect(),
        multi.iter().map(|(k, q)| (*k, q.to_vec())).collect(),
    )
    .expect("a valid model")
}

/// A fingerprint of everything a result reports (FNV-1a over the bits of every figure), so
/// that two builds can be checked to give identical results, not just similar tables.
fn digest(r: &StrategyResult) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |x: u64| {
        for b in x.to_le_bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    };
    let c = r.counts;
    for x in [
        c.requests,
        c.touches,
        c.lookups,
        c.l1_hits,
        c.prefetch_hits,
        c.gets,
        c.multigets,
        c.multiget_keys,
        c.bytes,
    ] {
        eat(x);
    }
    let bands = r.percentiles.iter().chain(&r.curve).chain(&r.slowed);
    for b in bands
        .map(|p| &p.1)
        .chain([&r.mean_increase, &r.mean_added_ms])
    {
        eat(b.median.to_bits());
        eat(b.low.to_bits());
        eat(b.high.to_bits());
    }
    for route in &r.routes {
        eat(u64::from(route.route));
        eat(route.requests);
        eat(route.total_added_ms.to_bits());
        eat(route.mean_increase.to_bits());
    }
    h
}

/// CPU time of this process so far, seconds (Linux `/proc/self/stat`, 100 Hz ticks); falls
/// back to `None` elsewhere.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

fn main() {
    let requests: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("REQUESTS must be a whole number"))
        .unwrap_or(1_000_000);
    let built = Instant::now();
    let trace = synthetic_trace(requests, 42);
    let model = model();
    println!(
        "trace: {} requests, {} items, {} touches, {} instances (built in {:.1} s)",
        trace.len(),
        trace.n_items(),
        trace.n_touches(),
        trace.n_instances(),
        built.elapsed().as_secs_f64()
    );
    println!(
        "{:<34} {:>8} {:>8} {:>14} {:>8} {:>8} {:>8} {:>16}",
        "strategy", "cpu s", "wall s", "touches/cpu-s", "hit", "rt/req", "p90", "digest"
    );
    let mut specs: Vec<String> = std::env::args().skip(2).collect();
    if specs.is_empty() {
        specs = [
            "none",
            "lru:1000",
            "lru:64MB",
            "fixed:5000",
            "fixed:5000+lru:1000",
            "prefetch-children",
            "fixed:5000+prefetch:depth=2",
        ]
        .map(String::from)
        .to_vec();
    }
    for spec in &specs {
        let s = Strategy::parse(spec).expect("a valid spec");
        let (c0, w0) = (cpu_seconds(), Instant::now());
        let r = simulate(&trace, &model, &[s], 0.5, 1, 7, 1).expect("simulation runs");
        let wall = w0.elapsed().as_secs_f64();
        let cpu = match (c0, cpu_seconds()) {
            (Some(a), Some(b)) if b > a => b - a,
            _ => wall,
        };
        let r = &r[0];
        println!(
            "{:<34} {:>8.2} {:>8.2} {:>13.1}M {:>8.3} {:>8.2} {:>8.3} {:>16x}",
            spec,
            cpu,
            wall,
            trace.n_touches() as f64 / cpu / 1e6,
            r.hit_ratio(),
            r.round_trips_per_request(),
            r.percentiles[2].1.median,
            digest(r),
        );
    }
}
