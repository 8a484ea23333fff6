//! Tests of the request-level simulator as a whole (`simulate`, `request_costs`, the window
//! and fixed-set helpers).

use super::*;

/// Items 0..4 of 100 bytes; item 0 is a topic with children 1, 2; item 1 has child 3.
fn trace(touches: Vec<Vec<u32>>, instances: Vec<u32>) -> RequestTrace {
    let n = touches.len();
    let mut offsets = vec![0u64];
    for t in &touches {
        offsets.push(offsets.last().unwrap() + t.len() as u64);
    }
    RequestTrace::new(TraceColumns {
        item_sizes: vec![100; 5],
        child_offsets: vec![0, 2, 3, 3, 3, 3],
        child_items: vec![1, 2, 3],
        time: (0..n).map(|i| i as f64).collect(),
        instance: instances,
        route: vec![0; n],
        base_ms: vec![10.0; n],
        touch_offsets: offsets,
        touch_items: touches.concat(),
    })
    .unwrap()
}

/// Every get costs 1 ms, every multi-get 2 ms, whatever u (up to rounding: a draw is
/// `exp(ln q)`; see [`close`]).
fn flat_model() -> LatencyModel {
    LatencyModel::new(
        vec![(1, vec![1000.0, 1000.0])],
        vec![(1, vec![2000.0, 2000.0])],
    )
    .unwrap()
}

/// Equal up to the rounding of `exp(ln q)` in a draw.
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * b.abs()
}

fn costs(t: &RequestTrace, spec: &str, train: f64) -> (Vec<RequestCost>, Counts) {
    request_costs(t, &flat_model(), &Strategy::parse(spec).unwrap(), train, 1).unwrap()
}

/// A get draw at uniform u costs 1001^u µs (two points, read on the log of latency).
fn sequenced(ranks: Vec<f64>, segments: &[usize]) -> LatencyModel {
    LatencyModel::new(vec![(1, vec![1.0, 1001.0])], vec![(1, vec![1.0, 1001.0])])
        .unwrap()
        .with_sequence(RankSequence::new(ranks, segments).unwrap())
}

#[test]
fn with_a_rank_sequence_a_requests_draws_are_consecutive_ranks() {
    // Three gets read three consecutive ranks of a 3-rank segment, wrapping: all of them,
    // wherever the request starts.
    let t = trace(vec![vec![4, 3, 2]; 20], vec![0; 20]);
    let m = sequenced(vec![0.0, 0.5, 0.9], &[3]);
    let want = 1.0 + 1001f64.powf(0.5) + 1001f64.powf(0.9);
    let (c, _) = request_costs(&t, &m, &Strategy::parse("none").unwrap(), 0.0, 1).unwrap();
    for x in &c {
        assert!(close(x.added_us, want), "{} {want}", x.added_us);
    }
    // The multi-get of a prefetch takes its place in the sequence: topic 0 prefetches
    // itself and 1, 2 (one multi-get), then 3 and 4 are gets.
    let t = trace(vec![vec![0, 1, 2, 3, 4]; 20], vec![0; 20]);
    let (c, _) = request_costs(
        &t,
        &m,
        &Strategy::parse("prefetch-children").unwrap(),
        0.0,
        1,
    )
    .unwrap();
    for x in &c {
        assert_eq!(x.round_trips, 3);
        assert!(close(x.added_us, want), "{} {want}", x.added_us);
    }
}

#[test]
fn with_a_rank_sequence_a_slow_stretch_slows_the_whole_request() {
    // Two segments, one fast and one slow: a request of two gets is all fast or all slow,
    // never mixed, and independent draws would mix them.
    let t = trace(vec![vec![4, 3]; 200], vec![0; 200]);
    let m = sequenced(vec![0.0, 0.0, 0.9, 0.9], &[2, 2]);
    let (fast, slow) = (2.0, 2.0 * 1001f64.powf(0.9));
    let (c, _) = request_costs(&t, &m, &Strategy::parse("none").unwrap(), 0.0, 7).unwrap();
    let n_fast = c.iter().filter(|x| close(x.added_us, fast)).count();
    let n_slow = c.iter().filter(|x| close(x.added_us, slow)).count();
    assert_eq!(n_fast + n_slow, 200);
    assert!((60..=140).contains(&n_fast), "{n_fast}");
}

#[test]
fn first_touches_cost_a_get_and_repeats_are_free() {
    let t = trace(vec![vec![4, 3, 4, 3, 2]], vec![0]);
    let (c, n) = costs(&t, "none", 0.0);
    assert!(close(c[0].added_us, 3000.0), "{}", c[0].added_us);
    assert_eq!(c[0].round_trips, 3);
    assert_eq!((n.touches, n.lookups, n.gets, n.bytes), (5, 3, 3, 300));
}

#[test]
fn lru_state_persists_per_instance_and_is_warmed_by_training() {
    // Requests 0 and 1 train; 2 (instance 0) and 3 (instance 1) are evaluated.
    let t = trace(
        vec![vec![4], vec![3], vec![4, 3], vec![4, 3]],
        vec![0, 0, 0, 1],
    );
    let (c, n) = costs(&t, "lru:10", 0.5);
    assert_eq!(c.iter().map(|c| c.round_trips).collect::<Vec<_>>(), [0, 2]);
    assert_eq!((n.lookups, n.l1_hits), (4, 2));
}

#[test]
fn fixed_takes_the_items_most_training_requests_touch() {
    // Training: item 3 in two requests (three touches in one of them), items 2 and 4 in one.
    let t = trace(
        vec![vec![3, 3, 3], vec![3, 4], vec![2], vec![2, 3, 4]],
        vec![0; 4],
    );
    let (c, n) = costs(&t, "fixed:1", 0.75);
    assert_eq!(c[0].round_trips, 2, "only item 3 is fixed");
    assert_eq!(n.l1_hits, 1);
    // Ties by index: 2 and 4 are both touched once; 2 comes first.
    let (c, _) = costs(&t, "fixed:2", 0.75);
    assert_eq!(c[0].round_trips, 1);
    let (c, _) = costs(&t, "fixed:150B", 0.75);
    assert_eq!(c[0].round_trips, 2, "one 100-byte item fits");
}

#[test]
fn prefetch_fetches_missing_descendants_in_one_multiget() {
    // Touch 2 (get), then topic 0: multi-get of 0, 1 and (depth 2) 3; then 1 and 3 are free.
    let t = trace(vec![vec![2, 0, 1, 3]], vec![0]);
    let (c, n) = costs(&t, "prefetch:depth=2", 0.0);
    assert!(close(c[0].added_us, 1000.0 + 2000.0), "{}", c[0].added_us);
    assert_eq!((n.gets, n.multigets, n.multiget_keys), (1, 1, 3));
    assert_eq!((n.lookups, n.prefetch_hits), (4, 2));
    // Depth 1: get 2, multi-get 0+1; 1 is a topic too, but a request prefetches once, at
    // its first topic: 3 costs a get.
    let (c, n) = costs(&t, "prefetch-children", 0.0);
    assert_eq!(c[0].round_trips, 3);
    assert_eq!((n.gets, n.multigets, n.multiget_keys), (2, 1, 2));
    assert_eq!(n.prefetch_hits, 1);
}

#[test]
fn prefetch_leaves_out_fixed_descendants_and_items_already_looked_up() {
    // Request 0 trains: item 2 is the fixed set. Request 1: get 3; topic 0 multi-gets
    // itself and 1 (2 is fixed, 3 was fetched before); 1 is then present, 2 an L1 hit,
    // and the second 3 a repeat.
    let t = trace(vec![vec![2], vec![3, 0, 1, 2, 3]], vec![0, 0]);
    let (c, n) = costs(&t, "fixed:1+prefetch:depth=2", 0.5);
    assert_eq!(c[0].round_trips, 2);
    assert_eq!(
        (n.gets, n.multigets, n.multiget_keys, n.bytes),
        (1, 1, 2, 300)
    );
    assert_eq!((n.lookups, n.l1_hits, n.prefetch_hits), (4, 1, 1));
}

#[test]
fn prefetch_skips_items_in_l1_and_sends_nothing_when_all_are_there() {
    // Request 0: topic 0 multi-gets 0, 1, 2 (topic 1 is then just present: one prefetch
    // per request). Request 1 finds 0 and its children in the LRU: no multi-get at all.
    let t = trace(vec![vec![0, 1, 2], vec![0, 1, 2]], vec![0, 0]);
    let (c, n) = costs(&t, "lru:10+prefetch-children", 0.0);
    assert_eq!(c[0].round_trips, 1);
    assert_eq!(c[1].round_trips, 0);
    assert_eq!((n.l1_hits, n.prefetch_hits, n.multiget_keys), (3, 2, 3));
}

#[test]
fn nearest_rank_is_exact_despite_float_noise() {
    let v: Vec<f64> = (1..=1000).map(f64::from).collect();
    assert_eq!(nearest_rank(&v, 99.9), 999.0);
    assert_eq!(nearest_rank(&v, 50.0), 500.0);
    assert_eq!(nearest_rank(&v, 0.0), 1.0);
    assert_eq!(nearest_rank(&v, 100.0), 1000.0);
    assert_eq!(nearest_rank(&v, 0.05), 1.0);
    assert_eq!(nearest_rank(&v, 0.15), 2.0);
}

#[test]
fn bands_are_min_max_below_twenty_draws_and_central_from_there() {
    let mut few = vec![3.0, 1.0, 2.0, 10.0];
    assert_eq!(
        Band::of(&mut few),
        Band {
            median: 2.5,
            low: 1.0,
            high: 10.0
        }
    );
    let mut many: Vec<f64> = (1..=40).map(f64::from).collect();
    assert_eq!(
        Band::of(&mut many),
        Band {
            median: 20.5,
            low: 1.0,
            high: 39.0
        }
    );
}

#[test]
fn curve_runs_from_p50_to_p9999() {
    let g = curve_percentiles();
    assert_eq!(g.len(), CURVE_POINTS);
    assert!((g[0] - 50.0).abs() < 1e-12 && (g[CURVE_POINTS - 1] - 99.99).abs() < 1e-9);
    assert!(g.windows(2).all(|w| w[1] > w[0]));
}

#[test]
fn rejects_bad_arguments() {
    let t = trace(vec![vec![1], vec![2]], vec![0, 0]);
    let m = flat_model();
    let none = [Strategy::default()];
    let fixed = [Strategy::parse("fixed:1").unwrap()];
    let cases: [(&[Strategy], f64, u32, &str); 5] = [
        (&none, 1.0, 1, "train must be"),
        (&none, -0.1, 1, "train must be"),
        (&none, 0.5, 0, "draws"),
        (&fixed, 0.0, 1, "training window"),
        (&[], 0.5, 1, "no strategies"),
    ];
    for (s, train, draws, why) in cases {
        let e = simulate(&t, &m, s, train, draws, 0, 1).unwrap_err();
        assert!(e.to_string().contains(why), "{e}");
    }
    let no_multi = LatencyModel::new(vec![(1, vec![1.0, 2.0])], vec![]).unwrap();
    let e = simulate(
        &t,
        &no_multi,
        &[Strategy::parse("prefetch-children").unwrap()],
        0.5,
        1,
        0,
        1,
    );
    assert!(matches!(e, Err(SimError::Usage(m)) if m.contains("multi-get")));
}

/// Items without children, of the given sizes; every request on instance 0.
fn sized(sizes: Vec<u64>, touches: Vec<Vec<u32>>) -> RequestTrace {
    let n = touches.len();
    let mut offsets = vec![0u64];
    for t in &touches {
        offsets.push(offsets.last().unwrap() + t.len() as u64);
    }
    RequestTrace::new(TraceColumns {
        item_sizes: sizes,
        child_offsets: vec![],
        child_items: vec![],
        time: (0..n).map(|i| i as f64).collect(),
        instance: vec![0; n],
        route: vec![0; n],
        base_ms: vec![10.0; n],
        touch_offsets: offsets,
        touch_items: touches.concat(),
    })
    .unwrap()
}

#[test]
fn the_fixed_set_is_in_ranking_order_and_skips_what_no_longer_fits() {
    // Training (the first 4 of 5 requests): item 3 in three requests, 1 and 4 in two
    // (tie: 1 first), 0 in one (however often), 2 never.
    let t = sized(
        vec![100, 300, 50, 200, 250],
        vec![vec![3, 4, 0, 0], vec![3, 1], vec![4, 1, 3], vec![], vec![2]],
    );
    let fixed = |spec: &str| fixed_set(&t, &Strategy::parse(spec).unwrap(), 0.8).unwrap();
    assert_eq!(fixed("fixed:2"), Some(vec![3, 1]));
    assert_eq!(fixed("fixed:100+prefetch-children"), Some(vec![3, 1, 4, 0]));
    // 200 (3), then 300 (1) fills the 500 exactly; nothing else fits.
    assert_eq!(fixed("fixed:500B"), Some(vec![3, 1]));
    // 200 (3), then 300 (1) is skipped, 250 (4) fits, 100 (0) does not, exactly.
    assert_eq!(fixed("fixed:450B"), Some(vec![3, 4]));
    // An item larger than the whole capacity is skipped; smaller ones after it are taken.
    assert_eq!(fixed("fixed:120B"), Some(vec![0]));
    assert_eq!(fixed("lru:2"), None);
    assert_eq!(fixed("none"), None);
    // It is the set the runs use: every evaluated lookup of a fixed item is an L1 hit, and
    // nothing else is.
    let t2 = sized(
        vec![100, 300, 50, 200, 250],
        vec![
            vec![3, 4, 0, 0],
            vec![3, 1],
            vec![4, 1, 3],
            vec![0, 1, 2, 3, 4],
        ],
    );
    let set = fixed_set(&t2, &Strategy::parse("fixed:450B").unwrap(), 0.75).unwrap();
    assert_eq!(set, Some(vec![3, 4]));
    let (c, n) = costs(&t2, "fixed:450B", 0.75);
    assert_eq!((c[0].l1_hits, c[0].gets, n.l1_hits), (2, 3, 2));
    let e = fixed_set(&t, &Strategy::parse("fixed:2").unwrap(), 0.0).unwrap_err();
    assert!(e.to_string().contains("training window"), "{e}");
}

#[test]
fn each_request_reports_its_share_of_the_counts() {
    let t = trace(
        vec![
            vec![2],
            vec![3, 0, 1, 2, 3],
            vec![0, 1, 2],
            vec![4, 4, 0, 3],
        ],
        vec![0, 0, 1, 1],
    );
    for spec in [
        "none",
        "lru:2",
        "fixed:1+prefetch:depth=2",
        "lru:250B+prefetch-children",
        "prefetch:depth=2",
    ] {
        let (c, n) = costs(&t, spec, 0.25);
        let sum = |f: fn(&RequestCost) -> u64| c.iter().map(f).sum::<u64>();
        let per_request = Counts {
            requests: c.len() as u64,
            touches: sum(|x| x.touches.into()),
            lookups: sum(|x| x.lookups.into()),
            l1_hits: sum(|x| x.l1_hits.into()),
            prefetch_hits: sum(|x| x.prefetch_hits.into()),
            gets: sum(|x| x.gets.into()),
            multigets: sum(|x| x.multigets.into()),
            multiget_keys: sum(|x| x.multiget_keys.into()),
            bytes: sum(|x| x.bytes),
        };
        assert_eq!(per_request, n, "{spec}");
        for x in &c {
            assert_eq!(x.round_trips, x.gets + x.multigets, "{spec}");
            let prefetches = spec.contains("prefetch") && x.prefetch_walked > 0;
            assert!(x.multigets == 0 || prefetches, "{spec}");
            assert!(!x.prefetch_topic_hit || prefetches, "{spec}");
        }
    }
}

#[test]
fn a_prefetch_reports_what_it_walked_and_whether_its_topic_was_in_l1() {
    // Topic 0 has children 1, 2; 1 has child 3. Depth 2 walks 0, 1, 2, 3; depth 1 walks 0, 1, 2.
    let t = trace(vec![vec![2, 0, 1, 3], vec![4]], vec![0, 0]);
    let (c, _) = costs(&t, "prefetch:depth=2", 0.0);
    assert_eq!((c[0].prefetch_walked, c[0].prefetch_topic_hit), (4, false));
    assert_eq!(
        (c[1].prefetch_walked, c[1].multigets),
        (0, 0),
        "no topic, no prefetch"
    );
    let (c, _) = costs(&t, "prefetch-children", 0.0);
    assert_eq!(c[0].prefetch_walked, 3);
    // Topic 0 in the fixed set: an L1 hit at the prefetch, the multi-get has 1 and 3.
    let t = trace(vec![vec![0], vec![0, 1, 3]], vec![0, 0]);
    let (c, _) = costs(&t, "fixed:1+prefetch:depth=2", 0.5);
    assert_eq!(
        (
            c[0].prefetch_topic_hit,
            c[0].l1_hits,
            c[0].multiget_keys,
            c[0].prefetch_walked
        ),
        (true, 1, 3, 4)
    );
    // Found in an LRU (the training request's prefetch put 0, 1, 2 there): nothing to send,
    // but the prefetch still walked.
    let (c, _) = costs(
        &trace(vec![vec![0], vec![0, 1]], vec![0, 0]),
        "lru:10+prefetch-children",
        0.5,
    );
    assert_eq!(
        (
            c[0].prefetch_topic_hit,
            c[0].multigets,
            c[0].multiget_keys,
            c[0].prefetch_walked
        ),
        (true, 0, 0, 3)
    );
    assert_eq!(
        descendants(&t, &[0, 0, 0, 4, 1], 2),
        [vec![1, 2, 3], vec![1, 2, 3], vec![1, 2, 3], vec![], vec![3]]
    );
    assert_eq!(descendants(&t, &[0], 1), [[1, 2]]);
    assert_eq!(descendants(&t, &[0], 0), [Vec::<u32>::new()]);
}
