//! Golden miss ratios from libCacheSim's `cachesim` (commit aa0fc40), as listed in
//! tests/data/traces/README.md — third-party numbers, never our own output. SIEVE's are not in
//! the published table; they were printed by `cachesim` built from that same commit
//! (`cachesim cloudPhysicsIO.oracleGeneral.bin oracleGeneral sieve 0.001,0.01,0.1
//! [--ignore-obj-size 1]`).
//!
//! libCacheSim prints ratios with `%.4lf` (rounded to nearest). Every policy here follows its
//! variant's semantics, so all must print the same four decimals (the brief asked for LRU and
//! FIFO exactly and LFU, ARC and S3-FIFO within 0.005; they are exact, so the test holds them
//! to it).
//!
//! Byte capacities: cachesim turns a fractional size `f` into `(uint64_t)(wss * f)` where
//! `wss` is the sum of each object's first size (2,029,769,728 bytes here); it then prints the
//! size in whole MiB rounded down ("1 MiB", "19 MiB", "193 MiB").

use std::path::PathBuf;

use cachelab_sim::flat::{inspect, FlatTrace, Format, SimTrace};
use cachelab_sim::policy::{sweep, Unit};

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/traces")
        .join(name)
}

const CP_CSV: &str = "cloudPhysicsIO.csv";
const CP_BIN: &str = "cloudPhysicsIO.oracleGeneral.bin";
const ZIPF: &str = "zipf_1.0.txt";
const CP_WSS: u64 = 2_029_769_728;
const CP_OBJECTS: u64 = 48_974;

struct Case {
    file: &'static str,
    unit: Unit,
    /// Fraction of the working set, as given to cachesim.
    fraction: f64,
    policy: &'static str,
    miss_ratio: &'static str,
    /// Byte miss ratio, when published.
    byte_miss_ratio: Option<&'static str>,
}

fn capacity(unit: Unit, fraction: f64) -> u64 {
    let wss = match unit {
        Unit::Objects => CP_OBJECTS,
        Unit::Bytes => CP_WSS,
    };
    (wss as f64 * fraction) as u64
}

fn cases() -> Vec<Case> {
    let mut v = Vec::new();
    // cloudPhysicsIO, capacity in objects (0.1 %, 1 %, 10 % of 48,974 = 48, 489, 4897).
    let objects: [(f64, [&str; 6]); 3] = [
        (
            0.001,
            ["0.9030", "0.9121", "0.9073", "0.8770", "0.8765", "0.8809"],
        ),
        (
            0.01,
            ["0.8380", "0.8476", "0.8498", "0.8275", "0.8304", "0.8292"],
        ),
        (
            0.1,
            ["0.8049", "0.8054", "0.7907", "0.7728", "0.7525", "0.7907"],
        ),
    ];
    let policies = ["lru", "fifo", "lfu", "arc", "s3fifo", "sieve"];
    for file in [CP_CSV, CP_BIN] {
        for (fraction, expected) in objects {
            for (policy, mr) in policies.iter().zip(expected) {
                v.push(Case {
                    file,
                    unit: Unit::Objects,
                    fraction,
                    policy,
                    miss_ratio: mr,
                    byte_miss_ratio: None,
                });
            }
        }
    }
    // cloudPhysicsIO.oracleGeneral.bin only, capacity in bytes: (miss ratio, byte miss
    // ratio). The CSV has the raw, changing sizes; the binary (made by libCacheSim's
    // traceConv) gives every request of an object that object's first size, and the published
    // byte results are for the binary.
    let bytes: [(f64, [(&str, &str); 6]); 3] = [
        (
            0.001,
            [
                ("0.8512", "0.9837"),
                ("0.8621", "0.9849"),
                ("0.8394", "0.9824"),
                ("0.8369", "0.9822"),
                ("0.8367", "0.9820"),
                ("0.8398", "0.9820"),
            ],
        ),
        (
            0.01,
            [
                ("0.8339", "0.9800"),
                ("0.8368", "0.9804"),
                ("0.8231", "0.9776"),
                ("0.8222", "0.9769"),
                ("0.8229", "0.9766"),
                ("0.8231", "0.9776"),
            ],
        ),
        (
            0.1,
            [
                ("0.8097", "0.9518"),
                ("0.8075", "0.9509"),
                ("0.7903", "0.9296"),
                ("0.7688", "0.9026"),
                ("0.7356", "0.8619"),
                ("0.7903", "0.9296"),
            ],
        ),
    ];
    {
        let file = CP_BIN;
        for (fraction, expected) in bytes {
            for (policy, (mr, bmr)) in policies.iter().zip(expected) {
                v.push(Case {
                    file,
                    unit: Unit::Bytes,
                    fraction,
                    policy,
                    miss_ratio: mr,
                    byte_miss_ratio: Some(bmr),
                });
            }
        }
    }
    v
}

/// libCacheSim's `%.4lf` of `got` is `want`.
fn prints_as(got: f64, want: &str) -> bool {
    format!("{got:.4}") == want
}

#[test]
fn cloudphysics_matches_libcachesim() {
    let all = cases();
    let mut failures = Vec::new();
    for file in [CP_CSV, CP_BIN] {
        let trace = FlatTrace::load(data(file), None).unwrap();
        let st = SimTrace::new(&trace);
        for unit in [Unit::Objects, Unit::Bytes] {
            let mine: Vec<&Case> = all
                .iter()
                .filter(|c| c.file == file && c.unit == unit)
                .collect();
            let jobs: Vec<(String, u64)> = mine
                .iter()
                .map(|c| (c.policy.to_string(), capacity(unit, c.fraction)))
                .collect();
            let results = sweep(&st, &jobs, unit, 2).unwrap();
            for (c, r) in mine.iter().zip(&results) {
                assert_eq!(r.counts.requests, 113_872);
                let ok = prints_as(r.miss_ratio(), c.miss_ratio)
                    && c.byte_miss_ratio
                        .is_none_or(|b| prints_as(r.byte_miss_ratio(), b));
                if !ok {
                    failures.push(format!(
                        "{file} {} {} cap {}: got {:.4} ({:.4}), libCacheSim {} ({})",
                        c.policy,
                        unit.name(),
                        r.capacity,
                        r.miss_ratio(),
                        r.byte_miss_ratio(),
                        c.miss_ratio,
                        c.byte_miss_ratio.unwrap_or("-"),
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn zipf_matches_libcachesim() {
    let trace = FlatTrace::load(data(ZIPF), None).unwrap();
    let st = SimTrace::new(&trace);
    assert_eq!(st.n_objects, 1000);
    let table = [
        (10, "lru", "0.7894"),
        (10, "fifo", "0.8177"),
        (100, "lru", "0.4247"),
        (100, "fifo", "0.4802"),
        (300, "lru", "0.2298"),
        (300, "fifo", "0.2756"),
    ];
    let jobs: Vec<(String, u64)> = table.iter().map(|(c, p, _)| (p.to_string(), *c)).collect();
    let results = sweep(&st, &jobs, Unit::Objects, 2).unwrap();
    for ((cap, policy, want), r) in table.iter().zip(&results) {
        assert_eq!(
            format!("{:.4}", r.miss_ratio()),
            *want,
            "{policy} at {cap} objects"
        );
    }
}

#[test]
fn csv_and_oracle_copies_are_the_same_trace() {
    let csv = FlatTrace::load(data(CP_CSV), None).unwrap();
    let bin = FlatTrace::load(data(CP_BIN), Some(Format::Oracle)).unwrap();
    assert!(csv.ids == bin.ids, "same keys in the same order");
    assert!(csv.times == bin.times, "same times");
    // The binary carries each object's first size on every request.
    let mut first = std::collections::HashMap::new();
    for (id, size) in csv.ids.iter().zip(&csv.sizes) {
        first.entry(*id).or_insert(*size);
    }
    let expected: Vec<u32> = csv.ids.iter().map(|id| first[id]).collect();
    assert!(bin.sizes == expected, "binary sizes are first sizes");
    assert!(csv.sizes != bin.sizes, "the CSV keeps size changes");
}

#[test]
fn inspect_reports_the_published_working_set() {
    let t = FlatTrace::load(data(CP_BIN), None).unwrap();
    let i = inspect(&t);
    assert_eq!(i.requests, 113_872);
    assert_eq!(i.unique_keys, CP_OBJECTS);
    assert_eq!(i.working_set_bytes, CP_WSS);
    let z = inspect(&FlatTrace::load(data(ZIPF), None).unwrap());
    let alpha = z.zipf_alpha.unwrap();
    assert!(
        (alpha - 1.0).abs() < 0.1,
        "fitted alpha {alpha} for a Zipf 1.0 trace"
    );
}
