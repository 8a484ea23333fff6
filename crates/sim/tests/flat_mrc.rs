//! The one-pass LRU curve equals LRU simulated at each capacity, on the reference traces.

use std::path::PathBuf;

use cachelab_sim::flat::{FlatTrace, SimTrace};
use cachelab_sim::mrc::{log_capacities, lru_mrc};
use cachelab_sim::policy::{sweep, Unit};

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/traces")
        .join(name)
}

fn check(file: &str, unit: Unit, caps: &[u64]) {
    let trace = FlatTrace::load(data(file), None).unwrap();
    let mrc = lru_mrc(&trace, unit, caps, None);
    let st = SimTrace::new(&trace);
    let jobs: Vec<(String, u64)> = mrc.capacities.iter().map(|&c| ("lru".into(), c)).collect();
    let sims = sweep(&st, &jobs, unit, 2).unwrap();
    for (i, r) in sims.iter().enumerate() {
        assert_eq!(r.counts.requests, mrc.requests);
        assert_eq!(
            (r.counts.misses, r.counts.miss_bytes),
            (mrc.misses[i], mrc.miss_bytes[i]),
            "{file} {} capacity {}",
            unit.name(),
            r.capacity
        );
    }
}

#[test]
fn objects_cloudphysics_at_60_sizes() {
    let mut caps = log_capacities(48_974, 60);
    caps.extend([1, 2, 3, 48, 489, 4897, 100_000]);
    check("cloudPhysicsIO.oracleGeneral.bin", Unit::Objects, &caps);
}

#[test]
fn objects_zipf_at_sizes_up_to_1000() {
    let caps: Vec<u64> = (1..=1000)
        .step_by(23)
        .chain([10, 100, 300, 1000, 1001])
        .collect();
    check("zipf_1.0.txt", Unit::Objects, &caps);
}

#[test]
fn bytes_cloudphysics_fixed_sizes() {
    // Every object has one size in the binary and the largest (64 KiB) fits every capacity
    // here, so the byte curve is exact too.
    let caps = log_capacities(2_029_769_728, 25)
        .into_iter()
        .filter(|&c| c >= 65_536)
        .collect::<Vec<_>>();
    assert!(caps.len() > 10);
    check("cloudPhysicsIO.oracleGeneral.bin", Unit::Bytes, &caps);
}

#[test]
fn shards_is_close_on_cloudphysics() {
    // SHARDS needs many keys to sample from: 48,974 here (zipf_1.0.txt's 1,000 are too few).
    let trace = FlatTrace::load(data("cloudPhysicsIO.oracleGeneral.bin"), None).unwrap();
    let caps = [489, 2000, 4897, 20_000];
    let exact = lru_mrc(&trace, Unit::Objects, &caps, None);
    let sampled = lru_mrc(&trace, Unit::Objects, &caps, Some(0.2));
    assert!(sampled.requests < exact.requests / 2);
    for (e, s) in exact.miss_ratios().iter().zip(sampled.miss_ratios()) {
        assert!((e - s).abs() < 0.03, "exact {e}, SHARDS {s}");
    }
}
