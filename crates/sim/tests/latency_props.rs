//! Property tests of the latency model: monotone in size, key count and `u` whatever the
//! measured cells, exact at measured cells that are in order, and linear in size beyond the
//! largest by the per-quantile slope of the two largest (the golden values computed here from
//! that definition).

use cachelab_sim::request::LatencyModel;
use proptest::prelude::*;

/// A row of `n` non-decreasing positive latencies.
fn row(n: usize) -> impl Strategy<Value = Vec<f64>> {
    (1.0f64..5000.0, prop::collection::vec(0.0f64..3000.0, n - 1)).prop_map(|(first, steps)| {
        let mut q = vec![first];
        for s in steps {
            q.push(q.last().unwrap() + s);
        }
        q
    })
}

/// 1 to 5 cells at sizes in 1..100,000, rows of 2, 3, 4, 5 or 7 points (mixed), in no
/// particular order from cell to cell: noise can make a larger cell cheaper.
fn any_rows() -> impl Strategy<Value = Vec<(u64, Vec<f64>)>> {
    prop::collection::btree_map(
        1u64..100_000,
        prop::sample::select(vec![2usize, 3, 4, 5, 7]).prop_flat_map(row),
        1..6,
    )
    .prop_map(|m| m.into_iter().collect())
}

/// 2 to 5 cells of `n` points each, every cell at least as slow as the one before it at
/// every probability: the previous row plus non-negative increments that grow along the row
/// (so the per-size slopes grow with the probability too).
fn ordered_rows() -> impl Strategy<Value = Vec<(u64, Vec<f64>)>> {
    (2usize..9).prop_flat_map(|n| {
        (
            prop::collection::btree_set(1u64..100_000, 2..6),
            row(n),
            prop::collection::vec(prop::collection::vec(0.0f64..500.0, n), 4),
        )
            .prop_map(|(keys, first, steps)| {
                let mut rows = vec![first];
                for s in steps.iter().take(keys.len() - 1) {
                    // Increments that grow along the row keep it non-decreasing.
                    let prev = rows.last().unwrap();
                    let inc = s.iter().scan(0.0, |c, x| {
                        *c += x;
                        Some(*c)
                    });
                    rows.push(prev.iter().zip(inc).map(|(a, b)| a + b).collect());
                }
                keys.into_iter().zip(rows).collect()
            })
    })
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * b.abs()
}

proptest! {
    /// Draws never fall as the size, the key count or `u` grows: across measured cells,
    /// between them, below the smallest and far beyond the largest, whatever the order of
    /// the measured cells.
    #[test]
    fn draws_never_fall_with_size_key_count_or_u(
        get in any_rows(), multi in any_rows(),
        mut us in prop::collection::vec(0.0f64..=1.0, 12),
        mut sizes in prop::collection::vec(0u64..2_000_000, 24),
    ) {
        let multi: Vec<(u32, Vec<f64>)> = multi.into_iter().map(|(k, q)| (k as u32, q)).collect();
        let m = LatencyModel::new(get.clone(), multi).unwrap();
        us.sort_by(f64::total_cmp);
        // Every measured size and its neighbours too, and one far beyond.
        sizes.extend(get.iter().flat_map(|(s, _)| [s - 1, *s, s + 1]));
        sizes.push(u64::MAX);
        sizes.sort_unstable();
        for &u in &us {
            for w in sizes.windows(2) {
                let (a, b) = (m.draw_get(w[0], u), m.draw_get(w[1], u));
                prop_assert!(a.is_finite() && a > 0.0);
                prop_assert!(a <= b, "get {} -> {} at u = {}: {} > {}", w[0], w[1], u, a, b);
                let (a, b) = (m.draw_multiget(w[0], u).unwrap(), m.draw_multiget(w[1], u).unwrap());
                prop_assert!(a <= b, "multi-get {} -> {} at u = {}: {} > {}", w[0], w[1], u, a, b);
            }
        }
        for &s in &sizes {
            for w in us.windows(2) {
                prop_assert!(m.draw_get(s, w[0]) <= m.draw_get(s, w[1]), "size {} u {:?}", s, w);
                prop_assert!(m.draw_multiget(s, w[0]).unwrap() <= m.draw_multiget(s, w[1]).unwrap());
            }
        }
    }

    /// Cells in order read back exactly at each of their probabilities, the fit moves
    /// nothing, and beyond the largest size `S` (next largest `R`) a draw at probability
    /// `p_j` is `q_S[j] + d (q_S[j] - q_R[j]) / (S - R)`.
    #[test]
    fn ordered_cells_read_back_and_extrapolate_by_their_slope(
        rows in ordered_rows(), d in 1u64..1_000_000,
    ) {
        let m = LatencyModel::new(rows.clone(), vec![]).unwrap();
        prop_assert_eq!(m.get().adjusted(), 0);
        let n = rows[0].1.len();
        for (size, q) in &rows {
            for (j, want) in q.iter().enumerate() {
                let u = j as f64 / (n - 1) as f64;
                prop_assert!(close(m.draw_get(*size, u), *want), "{} at {}", size, u);
            }
        }
        let ((r, qr), (s, qs)) = (&rows[rows.len() - 2], &rows[rows.len() - 1]);
        for j in 0..n {
            let u = j as f64 / (n - 1) as f64;
            let want = qs[j] + d as f64 * (qs[j] - qr[j]) / (s - r) as f64;
            let got = m.draw_get(s + d, u);
            prop_assert!((got - want).abs() <= 1e-9 * want, "{} vs {}", got, want);
        }
    }

    /// The fit moves values exactly when some probability has its cells out of order.
    #[test]
    fn the_fit_moves_values_only_for_cells_out_of_order(rows in any_rows(), n in 2usize..6) {
        // One row length, so the grid is the rows' own.
        let rows: Vec<(u64, Vec<f64>)> = rows
            .into_iter()
            .map(|(k, q)| (k, (0..n).map(|j| q[0] + j as f64 * (q[q.len() - 1] - q[0]) / 3.0).collect()))
            .collect();
        let m = LatencyModel::new(rows.clone(), vec![]).unwrap();
        let out_of_order = (0..n).any(|j| rows.windows(2).any(|w| w[1].1[j].ln() < w[0].1[j].ln()));
        prop_assert_eq!(m.get().adjusted() > 0, out_of_order);
    }
}
