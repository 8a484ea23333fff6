//! Property tests of the request-level simulator on random small traces and latency models.

use std::collections::{HashMap, HashSet, VecDeque};

use cachelab_sim::request::{
    draw_seed_of, fixed_set, nearest_rank, request_costs, simulate, Capacity, Counts, LatencyModel,
    RequestCost, RequestTrace, Strategy as CacheStrategy, TraceColumns,
};
use proptest::prelude::*;

/// A random catalog and requests: up to 24 items (some topics, children may form cycles),
/// up to 30 requests over up to 3 instances, each touching up to 12 items.
fn columns() -> impl Strategy<Value = TraceColumns> {
    (1usize..24).prop_flat_map(|items| {
        let sizes = prop::collection::vec(0u64..5000, items);
        let children = prop::collection::vec(
            prop::option::weighted(0.3, prop::collection::vec(0..items as u32, 1..5)),
            items,
        );
        let request = (
            0u32..20,                                      // time, few values: ties
            0u32..3,                                       // instance
            0u32..3,                                       // route
            1u32..1000,                                    // base, tenths of ms
            prop::collection::vec(0..items as u32, 0..12), // touches
        );
        (sizes, children, prop::collection::vec(request, 1..30)).prop_map(
            |(item_sizes, children, requests)| {
                let mut c = TraceColumns {
                    item_sizes,
                    child_offsets: vec![0],
                    touch_offsets: vec![0],
                    ..TraceColumns::default()
                };
                for ch in children {
                    c.child_items.extend(ch.unwrap_or_default());
                    c.child_offsets.push(c.child_items.len() as u32);
                }
                for (time, instance, route, base, touches) in requests {
                    c.time.push(f64::from(time) / 2.0);
                    c.instance.push(instance);
                    c.route.push(route);
                    c.base_ms.push(f64::from(base) / 10.0);
                    c.touch_items.extend(touches);
                    c.touch_offsets.push(c.touch_items.len() as u64);
                }
                c
            },
        )
    })
}

/// Non-decreasing positive quantiles, at least two; `strict` makes them increase.
fn quantiles(strict: bool) -> impl Strategy<Value = Vec<f64>> {
    let lo = if strict { 1.0 } else { 0.0 };
    (1.0f64..5000.0, prop::collection::vec(lo..3000.0, 1..6)).prop_map(|(first, steps)| {
        let mut q = vec![first];
        for s in steps {
            q.push(q.last().unwrap() + s);
        }
        q
    })
}

fn model(strict: bool) -> impl Strategy<Value = LatencyModel> {
    (
        prop::collection::btree_map(1u64..100_000, quantiles(strict), 1..5),
        prop::collection::btree_map(1u32..50, quantiles(strict), 1..4),
    )
        .prop_map(|(get, multi)| {
            LatencyModel::new(get.into_iter().collect(), multi.into_iter().collect()).unwrap()
        })
}

fn train() -> impl Strategy<Value = f64> {
    prop::sample::select(vec![0.0, 0.3, 0.5, 0.8])
}

fn spec(s: &str) -> CacheStrategy {
    CacheStrategy::parse(s).unwrap()
}

/// Requests in the order the simulator defines time: by time, ties by index.
fn time_order(c: &TraceColumns) -> Vec<usize> {
    let mut order: Vec<usize> = (0..c.time.len()).collect();
    order.sort_by(|&a, &b| c.time[a].partial_cmp(&c.time[b]).unwrap().then(a.cmp(&b)));
    order
}

fn touches(c: &TraceColumns, r: usize) -> &[u32] {
    &c.touch_items[c.touch_offsets[r] as usize..c.touch_offsets[r + 1] as usize]
}

fn costs(t: &RequestTrace, m: &LatencyModel, s: &str, train: f64, seed: u64) -> Vec<RequestCost> {
    request_costs(t, m, &spec(s), train, seed).unwrap().0
}

/// A slow, obviously right LRU: the front of the deque is the most recent.
struct NaiveLru {
    capacity: Capacity,
    order: VecDeque<(u32, u64)>,
}

impl NaiveLru {
    fn touch(&mut self, item: u32) -> bool {
        match self.order.iter().position(|e| e.0 == item) {
            Some(k) => {
                let e = self.order.remove(k).unwrap();
                self.order.push_front(e);
                true
            }
            None => false,
        }
    }

    fn insert(&mut self, item: u32, size: u64) {
        let (w, cap) = match self.capacity {
            Capacity::Items(n) => (1, n),
            Capacity::Bytes(n) => (size, n),
        };
        if w > cap {
            return;
        }
        while self.order.iter().map(|e| e.1).sum::<u64>() + w > cap {
            self.order.pop_back();
        }
        self.order.push_front((item, w));
    }
}

fn children(c: &TraceColumns, i: u32) -> &[u32] {
    &c.child_items[c.child_offsets[i as usize] as usize..c.child_offsets[i as usize + 1] as usize]
}

/// The fixed set, straight from the module docs, in ranking order.
fn naive_fixed(c: &TraceColumns, training: &[usize], capacity: Capacity) -> Vec<u32> {
    let mut count: HashMap<u32, u64> = HashMap::new();
    for &r in training {
        for i in touches(c, r).iter().collect::<HashSet<_>>() {
            *count.entry(*i).or_default() += 1;
        }
    }
    let mut ranked: Vec<u32> = count.keys().copied().collect();
    ranked.sort_by_key(|i| (std::cmp::Reverse(count[i]), *i));
    match capacity {
        Capacity::Items(n) => ranked.into_iter().take(n as usize).collect(),
        Capacity::Bytes(mut left) => ranked
            .into_iter()
            .filter(|&i| {
                let s = c.item_sizes[i as usize];
                let fits = s <= left;
                if fits {
                    left -= s;
                }
                fits
            })
            .collect(),
    }
}

/// What one evaluated request did, by the naive simulator: (request, round trips, its counts,
/// items its prefetch walked, whether the prefetch's topic was in L1).
type NaiveCost = (u32, u32, Counts, u32, bool);

/// Each evaluated request (by request index) and the totals, by the semantics in the module
/// docs, with sets, deques and a plain breadth-first walk.
fn naive_run(c: &TraceColumns, s: &CacheStrategy, train: f64) -> (Vec<NaiveCost>, Counts) {
    let order = time_order(c);
    let n_train = (train * c.time.len() as f64).floor() as usize;
    let fixed: HashSet<u32> = s
        .fixed
        .map(|cap| naive_fixed(c, &order[..n_train], cap))
        .unwrap_or_default()
        .into_iter()
        .collect();
    let mut lrus: HashMap<u32, NaiveLru> = HashMap::new();
    let mut out = Vec::new();
    let mut n = Counts::default();
    for (k, &r) in order.iter().enumerate() {
        let mut lru = s.lru.map(|capacity| {
            lrus.entry(c.instance[r]).or_insert(NaiveLru {
                capacity,
                order: VecDeque::new(),
            })
        });
        let mut m = Counts {
            requests: 1,
            touches: touches(c, r).len() as u64,
            ..Counts::default()
        };
        let (mut touched, mut present) = (HashSet::new(), HashSet::new());
        let mut prefetched = false;
        let (mut n_walked, mut topic_hit) = (0u32, false);
        for &item in touches(c, r) {
            if !touched.insert(item) {
                continue;
            }
            m.lookups += 1;
            let missing = if present.contains(&item) {
                m.prefetch_hits += 1;
                false
            } else if fixed.contains(&item) || lru.as_mut().is_some_and(|l| l.touch(item)) {
                m.l1_hits += 1;
                false
            } else {
                true
            };
            if s.prefetch_depth > 0 && !prefetched && !children(c, item).is_empty() {
                prefetched = true;
                let mut batch = if missing { vec![item] } else { vec![] };
                let mut walked = HashSet::from([item]);
                let mut frontier = vec![item];
                for _ in 0..s.prefetch_depth {
                    let mut next = vec![];
                    for &p in &frontier {
                        for &ch in children(c, p) {
                            if !walked.insert(ch) {
                                continue;
                            }
                            let here = present.contains(&ch)
                                || touched.contains(&ch)
                                || fixed.contains(&ch)
                                || lru.as_mut().is_some_and(|l| l.touch(ch));
                            if !here {
                                batch.push(ch);
                            }
                            next.push(ch);
                        }
                    }
                    frontier = next;
                }
                n_walked = walked.len() as u32;
                topic_hit = !missing;
                if !batch.is_empty() {
                    m.multigets += 1;
                    m.multiget_keys += batch.len() as u64;
                    for &b in &batch {
                        m.bytes += c.item_sizes[b as usize];
                        if b != item {
                            present.insert(b);
                        }
                        if let Some(l) = lru.as_mut() {
                            l.insert(b, c.item_sizes[b as usize]);
                        }
                    }
                }
            } else if missing {
                m.gets += 1;
                m.bytes += c.item_sizes[item as usize];
                if let Some(l) = lru.as_mut() {
                    l.insert(item, c.item_sizes[item as usize]);
                }
            }
        }
        if k >= n_train {
            out.push((
                r as u32,
                (m.gets + m.multigets) as u32,
                m,
                n_walked,
                topic_hit,
            ));
            n.requests += m.requests;
            n.touches += m.touches;
            n.lookups += m.lookups;
            n.l1_hits += m.l1_hits;
            n.prefetch_hits += m.prefetch_hits;
            n.gets += m.gets;
            n.multigets += m.multigets;
            n.multiget_keys += m.multiget_keys;
            n.bytes += m.bytes;
        }
    }
    out.sort_unstable_by_key(|e| e.0);
    (out, n)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// The same draw gives the same latency to the same get, so a cache can only remove cost.
    #[test]
    fn no_cache_costs_at_least_as_much_as_any_l1_strategy(
        c in columns(), m in model(false), train in train(), seed in any::<u64>(),
        cap in 1u64..30, bytes in 1u64..20_000,
    ) {
        let t = RequestTrace::new(c.clone()).unwrap();
        let n_train = (train * c.time.len() as f64).floor() as usize;
        let none = costs(&t, &m, "none", train, seed);
        let mut specs = vec![format!("lru:{cap}"), format!("lru:{bytes}B")];
        if n_train > 0 {
            specs.extend([
                format!("fixed:{cap}"),
                format!("fixed:{bytes}B"),
                format!("fixed:{cap}+lru:{bytes}B"),
            ]);
        }
        for s in &specs {
            let other = costs(&t, &m, s, train, seed);
            prop_assert_eq!(other.len(), none.len());
            for (a, b) in none.iter().zip(&other) {
                prop_assert_eq!(a.request, b.request);
                prop_assert!(b.added_us <= a.added_us, "{}: request {}: {} > {}", s, a.request, b.added_us, a.added_us);
                prop_assert!(b.round_trips <= a.round_trips);
            }
        }
    }

    /// An LRU that never evicts misses exactly the items its instance had not seen before the
    /// evaluation window started or earlier in it: everything touched in training is warm.
    #[test]
    fn unlimited_lru_has_only_compulsory_misses(
        c in columns(), m in model(false), train in train(), by_bytes in any::<bool>(),
        one_instance in any::<bool>(),
    ) {
        let mut c = c;
        if one_instance {
            c.instance.iter_mut().for_each(|i| *i = 0);
        }
        let t = RequestTrace::new(c.clone()).unwrap();
        let capacity = if by_bytes {
            format!("{}B", c.item_sizes.iter().sum::<u64>().max(1))
        } else {
            format!("{}", c.item_sizes.len())
        };
        let (_, counts) = request_costs(&t, &m, &spec(&format!("lru:{capacity}")), train, 0).unwrap();

        let order = time_order(&c);
        let n_train = (train * c.time.len() as f64).floor() as usize;
        let mut seen: HashSet<(u32, u32)> = HashSet::new();
        let mut compulsory = 0u64;
        for (k, &r) in order.iter().enumerate() {
            for &i in touches(&c, r) {
                if seen.insert((c.instance[r], i)) && k >= n_train {
                    compulsory += 1;
                }
            }
        }
        prop_assert_eq!(counts.gets, compulsory);
        prop_assert_eq!(counts.lookups - counts.l1_hits, compulsory);
        prop_assert_eq!(counts.multigets, 0);
    }

    /// Each first touch sends at most one operation with prefetch, and exactly one without a
    /// cache, so prefetching never adds round trips to a request.
    #[test]
    fn prefetch_never_takes_more_round_trips_than_no_cache(
        c in columns(), m in model(false), train in train(), depth in 1u32..4, cap in 1u64..30,
    ) {
        let t = RequestTrace::new(c.clone()).unwrap();
        let n_train = (train * c.time.len() as f64).floor() as usize;
        let none = costs(&t, &m, "none", train, 1);
        let mut specs = vec![format!("prefetch:depth={depth}"), format!("lru:{cap}+prefetch:depth={depth}")];
        if n_train > 0 {
            specs.push(format!("fixed:{cap}+prefetch:depth={depth}"));
        }
        for s in &specs {
            for (a, b) in none.iter().zip(&costs(&t, &m, s, train, 1)) {
                prop_assert!(b.round_trips <= a.round_trips, "{}: request {}", s, a.request);
            }
        }
        // Without a cache, a request sends one get per distinct item it touches.
        for a in &none {
            let distinct: HashSet<u32> = touches(&c, a.request as usize).iter().copied().collect();
            prop_assert_eq!(a.round_trips as usize, distinct.len());
        }
    }

    /// Every strategy's round trips per request and totals equal those of a slow, plain
    /// implementation of the documented semantics (sets, a deque LRU, a breadth-first walk).
    #[test]
    fn agrees_with_a_naive_simulator(
        c in columns(), m in model(false), train in train(),
        fixed in prop::option::of(prop_oneof![(1u64..12).prop_map(Capacity::Items),
                                               (1u64..20_000).prop_map(Capacity::Bytes)]),
        lru in prop::option::of(prop_oneof![(1u64..12).prop_map(Capacity::Items),
                                             (1u64..20_000).prop_map(Capacity::Bytes)]),
        depth in 0u32..4,
    ) {
        let n_train = (train * c.time.len() as f64).floor() as usize;
        let s = CacheStrategy { fixed: fixed.filter(|_| n_train > 0), lru, prefetch_depth: depth };
        let t = RequestTrace::new(c.clone()).unwrap();
        let (got, counts) = request_costs(&t, &m, &s, train, 5).unwrap();
        let (want, want_counts) = naive_run(&c, &s, train);
        let got: Vec<NaiveCost> = got
            .iter()
            .map(|e| {
                let m = Counts {
                    requests: 1,
                    touches: e.touches.into(),
                    lookups: e.lookups.into(),
                    l1_hits: e.l1_hits.into(),
                    prefetch_hits: e.prefetch_hits.into(),
                    gets: e.gets.into(),
                    multigets: e.multigets.into(),
                    multiget_keys: e.multiget_keys.into(),
                    bytes: e.bytes,
                };
                (e.request, e.round_trips, m, e.prefetch_walked, e.prefetch_topic_hit)
            })
            .collect();
        prop_assert_eq!(got, want, "{}", s);
        prop_assert_eq!(counts, want_counts, "{}", s);
    }

    /// The fixed set `fixed_set` reports is the documented one, in ranking order (ties by
    /// index; a byte capacity skips what no longer fits).
    #[test]
    fn the_fixed_set_is_the_documented_one(
        c in columns(), train in prop::sample::select(vec![0.3, 0.5, 0.8]),
        capacity in prop_oneof![(1u64..12).prop_map(Capacity::Items),
                                (1u64..20_000).prop_map(Capacity::Bytes)],
    ) {
        let n_train = (train * c.time.len() as f64).floor() as usize;
        let t = RequestTrace::new(c.clone()).unwrap();
        let s = CacheStrategy { fixed: Some(capacity), ..CacheStrategy::default() };
        let got = fixed_set(&t, &s, train);
        if n_train == 0 {
            prop_assert!(got.is_err());
        } else {
            let want = naive_fixed(&c, &time_order(&c)[..n_train], capacity);
            prop_assert_eq!(got.unwrap(), Some(want));
        }
    }

    /// Same seed, same result, whatever the thread count; another seed, other latencies.
    #[test]
    fn results_depend_on_the_seed_only(
        c in columns(), m in model(true), train in prop::sample::select(vec![0.0, 0.5]),
        seed in any::<u64>(),
    ) {
        let t = RequestTrace::new(c).unwrap();
        let strategies = [spec("none"), spec("lru:3+prefetch-children")];
        let a = simulate(&t, &m, &strategies, train, 3, seed, 1).unwrap();
        let b = simulate(&t, &m, &strategies, train, 3, seed, 3).unwrap();
        prop_assert_eq!(&a, &b);
        let other = simulate(&t, &m, &strategies, train, 3, seed.wrapping_add(1), 2).unwrap();
        if a[0].counts.gets > 0 {
            // Strictly increasing quantile tables: equal sums would need equal uniforms.
            prop_assert_ne!(a[0].mean_added_ms, other[0].mean_added_ms);
        }
        prop_assert_eq!(a[0].counts, other[0].counts);
    }

    /// With one draw, the reported percentiles are those of the per-request increases.
    #[test]
    fn one_draw_reports_the_percentiles_of_its_requests(
        c in columns(), m in model(false), seed in any::<u64>(),
    ) {
        let t = RequestTrace::new(c.clone()).unwrap();
        let r = simulate(&t, &m, &[spec("lru:5")], 0.5, 1, seed, 1).unwrap();
        let each = costs(&t, &m, "lru:5", 0.5, draw_seed_of(seed, 0));
        let mut fracs: Vec<f64> = each
            .iter()
            .map(|e| e.added_us / 1000.0 / c.base_ms[e.request as usize])
            .collect();
        fracs.sort_by(f64::total_cmp);
        for (p, band) in &r[0].percentiles {
            prop_assert_eq!(band.median, nearest_rank(&fracs, *p));
            prop_assert_eq!(band.low, band.high);
        }
        let slowed = fracs.iter().filter(|&&f| f >= 0.25).count() as f64 / fracs.len() as f64;
        prop_assert_eq!(r[0].slowed[1].1.median, slowed);
        prop_assert_eq!(r[0].counts.requests as usize, fracs.len());
    }

    /// Canonical specs parse back to the same strategy.
    #[test]
    fn specs_round_trip(
        fixed in prop::option::of(capacity()), lru in prop::option::of(capacity()),
        depth in 0u32..=64,
    ) {
        let s = CacheStrategy { fixed, lru, prefetch_depth: depth };
        let text = s.to_string();
        prop_assert_eq!(CacheStrategy::parse(&text), Ok(s), "{}", text);
        // Components in any order mean the same.
        let reversed: Vec<&str> = text.split('+').rev().collect();
        prop_assert_eq!(CacheStrategy::parse(&reversed.join(" + ")), Ok(s));
    }

    /// A component given twice, a zero capacity or an unknown name is refused.
    #[test]
    fn bad_specs_are_refused(c in capacity(), name in "[a-z]{1,8}") {
        let one = CacheStrategy { lru: Some(c), ..CacheStrategy::default() }.to_string();
        let twice = format!("{one}+{one}");
        let with_none = format!("{one}+none");
        prop_assert!(CacheStrategy::parse(&twice).is_err());
        prop_assert!(CacheStrategy::parse(&with_none).is_err());
        prop_assert!(CacheStrategy::parse("fixed:0").is_err());
        if !["none", "lru", "fixed", "prefetch"].contains(&name.as_str()) {
            let unknown = format!("{name}:10");
            prop_assert!(CacheStrategy::parse(&unknown).is_err());
        }
    }

    /// At a measured size a draw is that table read at u; between two measured sizes
    /// it lies between the neighbours and moves monotonically with the size.
    #[test]
    fn interpolation_is_exact_at_measured_sizes_and_monotone_between(
        m in model(false), u in 0.0f64..1.0, a in 0.0f64..1.0, b in 0.0f64..1.0,
    ) {
        let table = m.get();
        let sizes = table.keys().to_vec();
        for &s in &sizes {
            let v = m.draw_get(s, u);
            prop_assert!(v.is_finite() && v > 0.0);
        }
        for w in sizes.windows(2) {
            let (s0, s1) = (w[0], w[1]);
            let (q0, q1) = (m.draw_get(s0, u), m.draw_get(s1, u));
            let (lo, hi) = (q0.min(q1), q0.max(q1));
            let (x, y) = (a.min(b), a.max(b));
            let size = |f: f64| s0 + ((s1 - s0) as f64 * f) as u64;
            let (vx, vy) = (m.draw_get(size(x), u), m.draw_get(size(y), u));
            prop_assert!(lo <= vx && vx <= hi && lo <= vy && vy <= hi);
            if q0 <= q1 {
                prop_assert!(vx <= vy, "{} {} at sizes {} {}", vx, vy, size(x), size(y));
            } else {
                prop_assert!(vx >= vy);
            }
        }
        // Below the smallest size, the smallest; beyond the largest, never less than it.
        prop_assert_eq!(m.draw_get(0, u), m.draw_get(sizes[0], u));
        prop_assert!(m.draw_get(u64::MAX, u) >= m.draw_get(*sizes.last().unwrap(), u));
    }

    /// Draws grow with u: the quantile table is read in order.
    #[test]
    fn draws_grow_with_u(m in model(false), size in 0u64..200_000, a in 0.0f64..1.0, b in 0.0f64..1.0) {
        let (x, y) = (a.min(b), a.max(b));
        prop_assert!(m.draw_get(size, x) <= m.draw_get(size, y));
        let k = size % 60;
        prop_assert!(m.draw_multiget(k, x).unwrap() <= m.draw_multiget(k, y).unwrap());
    }
}

fn capacity() -> impl proptest::strategy::Strategy<Value = Capacity> {
    prop_oneof![
        (1u64..1_000_000_000).prop_map(Capacity::Items),
        (1u64..1u64 << 40).prop_map(Capacity::Bytes),
        (1u64..1000).prop_map(|n| Capacity::Bytes(n * 1024 * 1024)),
    ]
}

/// Values at measured sizes, read off a table built by hand (third-party-free: the definition
/// of interpolation on the log of latency): a table's own points up to rounding (`exp(ln q)`),
/// and between two quantiles their weighted geometric mean. The cells are in order at every
/// probability, so the model's monotone fit leaves them as they are.
#[test]
fn measured_sizes_read_their_own_table() {
    let m = LatencyModel::new(
        vec![(100, vec![1.0, 3.0, 7.0]), (10_000, vec![2.0, 4.0, 20.0])],
        vec![(1, vec![5.0, 6.0])],
    )
    .unwrap();
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-14 * b;
    assert!(close(m.draw_get(100, 0.0), 1.0));
    assert!(close(m.draw_get(100, 0.5), 3.0));
    assert!(close(m.draw_get(10_000, 0.5), 4.0));
    assert!(close(m.draw_get(100, 0.25), 3.0f64.sqrt()));
    assert!(close(m.draw_get(100, 0.75), 21.0f64.sqrt()));
    assert!(close(m.draw_get(10_000, 0.25), 8.0f64.sqrt()));
    assert!(close(m.draw_get(10_000, 0.75), 80.0f64.sqrt()));
    // Half-way on a log scale (1000 bytes): the geometric mean of the two sizes' values.
    assert!((m.draw_get(1000, 0.75) - (21.0f64 * 80.0).powf(0.25)).abs() < 1e-5);
    assert!(close(m.draw_multiget(7, 0.5).unwrap(), 30.0f64.sqrt()));
}
