//! Invariants of the simulator on random traces.

use cachelab_sim::flat::{FlatTrace, SimTrace};
use cachelab_sim::mrc::lru_mrc;
use cachelab_sim::policy::{names, simulate, Unit};
use proptest::prelude::*;

fn trace_strategy() -> impl Strategy<Value = FlatTrace> {
    // Few keys so that there are many reuses; sizes 1..=64 (no zero sizes: those are skipped).
    (prop::collection::vec(0u64..40, 1..400), 0u32..64).prop_map(|(keys, salt)| {
        let mut t = FlatTrace::default();
        for (i, k) in keys.into_iter().enumerate() {
            // An object keeps one size (1..=64), as in the oracle traces.
            t.push(i as u32, k, 1 + ((k as u32 * 7) ^ salt) % 64);
        }
        t
    })
}

fn unique(t: &FlatTrace) -> u64 {
    let mut ids = t.ids.clone();
    ids.sort_unstable();
    ids.dedup();
    ids.len() as u64
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn unlimited_cache_has_only_compulsory_misses(t in trace_strategy()) {
        let st = SimTrace::new(&t);
        // Room for everything, with S3-FIFO's small queue (10 %) holding the largest object.
        let total: u64 = t.sizes.iter().map(|&s| u64::from(s)).sum();
        let objects = 20 * st.n_objects as u64 + 10;
        for policy in names() {
            for (unit, cap) in [(Unit::Objects, objects), (Unit::Bytes, 20 * total + 10)] {
                let r = simulate(&st, policy, cap, unit).unwrap();
                prop_assert_eq!(r.counts.misses, unique(&t), "{} {}", policy, unit.name());
            }
        }
    }

    #[test]
    fn zero_capacity_misses_everything(t in trace_strategy()) {
        let st = SimTrace::new(&t);
        for policy in names() {
            let r = simulate(&st, policy, 0, Unit::Objects).unwrap();
            prop_assert_eq!(r.counts.misses, t.len() as u64, "{}", policy);
        }
    }

    #[test]
    fn lru_misses_never_increase_with_capacity(t in trace_strategy()) {
        let st = SimTrace::new(&t);
        for unit in [Unit::Objects, Unit::Bytes] {
            // In bytes LRU is a stack algorithm only once every object fits (an object larger
            // than the cache is not admitted, which can keep another one cached), so from 64 up.
            let mut last = u64::MAX;
            let caps = if unit == Unit::Objects { 0..=42 } else { 64..=900 };
            for cap in caps {
                let m = simulate(&st, "lru", cap, unit).unwrap().counts.misses;
                prop_assert!(m <= last, "{} at {}: {} > {}", unit.name(), cap, m, last);
                last = m;
            }
        }
    }

    #[test]
    fn belady_is_a_lower_bound_in_objects(t in trace_strategy(), cap in 1u64..30) {
        let st = SimTrace::new(&t);
        let opt = simulate(&st, "belady", cap, Unit::Objects).unwrap().counts.misses;
        for policy in names() {
            let m = simulate(&st, policy, cap, Unit::Objects).unwrap().counts.misses;
            prop_assert!(opt <= m, "belady {} > {} {}", opt, policy, m);
        }
    }

    #[test]
    fn exact_mrc_equals_lru_runs(t in trace_strategy()) {
        let st = SimTrace::new(&t);
        let caps: Vec<u64> = (0..45).collect();
        let mrc = lru_mrc(&t, Unit::Objects, &caps, None);
        for (i, &c) in mrc.capacities.iter().enumerate() {
            let r = simulate(&st, "lru", c, Unit::Objects).unwrap();
            prop_assert_eq!(r.counts.misses, mrc.misses[i], "capacity {}", c);
        }
        // Bytes: every object keeps one size, and capacities >= 64 hold any object.
        let caps: Vec<u64> = (64..2000).step_by(37).collect();
        let mrc = lru_mrc(&t, Unit::Bytes, &caps, None);
        for (i, &c) in mrc.capacities.iter().enumerate() {
            let r = simulate(&st, "lru", c, Unit::Bytes).unwrap();
            prop_assert_eq!(r.counts.misses, mrc.misses[i], "bytes capacity {}", c);
        }
    }

    #[test]
    fn hits_plus_misses_is_requests_and_bytes_add_up(t in trace_strategy(), cap in 0u64..500) {
        let st = SimTrace::new(&t);
        let total: u64 = t.sizes.iter().map(|&s| u64::from(s)).sum();
        for policy in names() {
            let r = simulate(&st, policy, cap, Unit::Bytes).unwrap();
            prop_assert_eq!(r.counts.requests, t.len() as u64);
            prop_assert_eq!(r.counts.bytes, total);
            prop_assert!(r.counts.misses >= unique(&t).min(r.counts.requests).min(1));
            prop_assert!(r.counts.miss_bytes <= total);
        }
    }
}

#[test]
fn zero_sizes_and_deletes_are_skipped() {
    let dir = std::env::temp_dir().join(format!("cachelab-skip-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("t.csv");
    std::fs::write(
        &p,
        "key,size,op\n1,5,get\n1,0,get\n1,5,delete\n1,5,get\n2,5,set\n",
    )
    .unwrap();
    let t = FlatTrace::load(&p, None).unwrap();
    let st = SimTrace::new(&t);
    let r = simulate(&st, "lru", 100, Unit::Bytes).unwrap();
    assert_eq!((r.counts.requests, r.counts.misses), (3, 2));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn unknown_policy_is_an_error_naming_the_known_ones() {
    let mut t = FlatTrace::default();
    t.push(0, 1, 1);
    let e = simulate(&SimTrace::new(&t), "clock", 1, Unit::Objects).unwrap_err();
    assert!(e.to_string().contains("lru"), "{e}");
}

#[test]
fn streaming_a_file_gives_the_same_counts_as_loading_it() {
    use cachelab_sim::policy::{lookup, simulate_file};
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/traces/cloudPhysicsIO.oracleGeneral.bin");
    let t = FlatTrace::load(&path, None).unwrap();
    let st = SimTrace::new(&t);
    for policy in names() {
        for (unit, cap) in [(Unit::Objects, 4897), (Unit::Bytes, 20_297_697)] {
            let streamed = simulate_file(&path, None, policy, cap, unit).unwrap();
            if !lookup(policy).unwrap().streams {
                assert!(streamed.is_none(), "{policy}");
                continue;
            }
            let loaded = simulate(&st, policy, cap, unit).unwrap();
            assert_eq!(streamed.unwrap(), loaded, "{policy} {}", unit.name());
        }
    }
    // Other formats are not streamed.
    let txt = path.with_file_name("zipf_1.0.txt");
    assert!(simulate_file(&txt, None, "lru", 10, Unit::Objects)
        .unwrap()
        .is_none());
}
