//! The latency model: what one memcached get of a value of a given size, or one multi-get of a
//! given number of keys, costs.
//!
//! Each measured size (or key count) has a quantile table `q[0..n]`: the latency (µs) at
//! probability `i / (n - 1)`, non-decreasing, positive, `n >= 2`. A draw takes a uniform `u` in
//! `[0, 1)` and
//!
//! 1. reads each table by linear interpolation at `u * (n - 1)`;
//! 2. for a size `s` between measured sizes `s0 < s < s1`, blends the two neighbours' values on
//!    a log scale: `t = (ln s - ln s0) / (ln s1 - ln s0)`,
//!    `latency = exp((1 - t) ln q0(u) + t ln q1(u))`, the same `u` for both;
//! 3. outside the measured range uses the nearest measured size (no extrapolation: a 4 MB value
//!    costs what the largest measured size costs). Size 0 counts as 1.
//!
//! At a measured size the draw is that table's value exactly; between two sizes it lies between
//! the neighbours' values and moves monotonically from one to the other.
//!
//! The simulator draws once per memcached operation, so the bracket search and `t` are
//! computed once per item ([`Table::bracket`]) and a draw is a table read plus, between sizes,
//! one logarithm and one exponential.

/// Where a size falls among the measured sizes: the rows to read and the blend weight.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bracket {
    /// The row below (or at) the size.
    pub(crate) lo: u32,
    /// Weight of the row above, in [0, 1); 0 means row `lo` alone. `f32` keeps a bracket at
    /// 8 bytes per catalog item; rounding `t` is monotone, so draws stay monotone in size.
    pub(crate) t: f32,
}

/// Quantile tables by measured size (or key count), sizes ascending.
#[derive(Debug, Clone)]
pub struct Table {
    keys: Vec<u64>,
    ln_keys: Vec<f64>,
    /// Row `r` is `quantiles[offsets[r]..offsets[r + 1]]`.
    offsets: Vec<usize>,
    quantiles: Vec<f64>,
}

impl Table {
    fn new(what: &str, mut rows: Vec<(u64, Vec<f64>)>) -> Result<Table, String> {
        rows.sort_by_key(|r| r.0);
        let mut t = Table {
            keys: Vec::with_capacity(rows.len()),
            ln_keys: Vec::with_capacity(rows.len()),
            offsets: vec![0],
            quantiles: Vec::new(),
        };
        for (key, q) in rows {
            if key == 0 {
                return Err(format!(
                    "{what} table: sizes and key counts start at 1, got 0"
                ));
            }
            if t.keys.last() == Some(&key) {
                return Err(format!("{what} table: {key} appears more than once"));
            }
            if q.len() < 2 {
                return Err(format!(
                    "{what} table for {key}: need at least 2 quantiles (p = 0 and p = 1), got {}",
                    q.len()
                ));
            }
            if let Some(v) = q.iter().find(|v| !(v.is_finite() && **v > 0.0)) {
                return Err(format!(
                    "{what} table for {key}: latencies must be finite and positive, got {v}"
                ));
            }
            if q.windows(2).any(|w| w[1] < w[0]) {
                return Err(format!(
                    "{what} table for {key}: quantiles must be non-decreasing"
                ));
            }
            t.keys.push(key);
            t.ln_keys.push((key as f64).ln());
            t.quantiles.extend_from_slice(&q);
            t.offsets.push(t.quantiles.len());
        }
        Ok(t)
    }

    /// True when nothing was measured.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The measured sizes (or key counts), ascending.
    pub fn keys(&self) -> &[u64] {
        &self.keys
    }

    /// Where `key` falls; clamps to the measured range; 0 counts as 1. The table must not be
    /// empty.
    pub fn bracket(&self, key: u64) -> Bracket {
        let key = key.max(1);
        let last = self.keys.len() - 1;
        match self.keys.binary_search(&key) {
            Ok(i) => Bracket {
                lo: i as u32,
                t: 0.0,
            },
            Err(0) => Bracket { lo: 0, t: 0.0 },
            Err(i) if i > last => Bracket {
                lo: last as u32,
                t: 0.0,
            },
            Err(i) => {
                let (l0, l1) = (self.ln_keys[i - 1], self.ln_keys[i]);
                let t = ((key as f64).ln() - l0) / (l1 - l0);
                // Strictly inside (s0, s1): keep t below 1 so `lo + 1` is the row above.
                let t = (t as f32).clamp(0.0, 1.0 - f32::EPSILON);
                Bracket {
                    lo: (i - 1) as u32,
                    t,
                }
            }
        }
    }

    /// Where `u` falls in a row of `len` quantiles: the lower index and the fraction.
    #[inline(always)]
    fn position(len: usize, u: f64) -> (usize, f64) {
        let span = (len - 1) as f64;
        let pos = u.clamp(0.0, 1.0) * span;
        let i = (pos as usize).min(len - 2);
        (i, pos - i as f64)
    }

    #[inline(always)]
    fn row_at(&self, row: u32, u: f64) -> f64 {
        let q = &self.quantiles[self.offsets[row as usize]..self.offsets[row as usize + 1]];
        let (i, f) = Table::position(q.len(), u);
        q[i] + f * (q[i + 1] - q[i])
    }

    /// The latency (µs) at uniform `u` for a bracket from [`Table::bracket`].
    #[inline]
    pub fn draw(&self, b: Bracket, u: f64) -> f64 {
        let at = self.offsets[b.lo as usize];
        let len = self.offsets[b.lo as usize + 1] - at;
        let (i, f) = Table::position(len, u);
        let q = &self.quantiles[at + i..at + i + 2];
        let q0 = q[0] + f * (q[1] - q[0]);
        if b.t == 0.0 {
            return q0;
        }
        let q1 = self.row_at(b.lo + 1, u);
        if q0 == q1 {
            return q0;
        }
        // exp((1 - t) ln q0 + t ln q1), with one logarithm instead of two.
        let v = q0 * (f64::from(b.t) * (q1 / q0).ln()).exp();
        // Rounding must not step outside the neighbours' values.
        v.clamp(q0.min(q1), q0.max(q1))
    }
}

/// Get latency by value size and multi-get latency by key count, in microseconds.
#[derive(Debug, Clone)]
pub struct LatencyModel {
    get: Table,
    multiget: Table,
}

impl LatencyModel {
    /// Builds the model from `(value size in bytes, quantiles in µs)` rows for get and
    /// `(key count, quantiles in µs)` rows for multi-get, in any order. The get table must not
    /// be empty; an empty multi-get table is allowed, but then no prefetch strategy can run.
    pub fn new(
        get: Vec<(u64, Vec<f64>)>,
        multiget: Vec<(u32, Vec<f64>)>,
    ) -> Result<LatencyModel, String> {
        if get.is_empty() {
            return Err("get table: at least one value size is needed".into());
        }
        let multiget = multiget
            .into_iter()
            .map(|(k, q)| (u64::from(k), q))
            .collect();
        Ok(LatencyModel {
            get: Table::new("get", get)?,
            multiget: Table::new("multi-get", multiget)?,
        })
    }

    /// The get table (by value size).
    pub fn get(&self) -> &Table {
        &self.get
    }

    /// The multi-get table (by key count).
    pub fn multiget(&self) -> &Table {
        &self.multiget
    }

    /// The latency (µs) of one get of a `size`-byte value at uniform `u`.
    pub fn draw_get(&self, size: u64, u: f64) -> f64 {
        self.get.draw(self.get.bracket(size), u)
    }

    /// The latency (µs) of one multi-get of `count` keys at uniform `u`; `None` without a
    /// multi-get table.
    pub fn draw_multiget(&self, count: u64, u: f64) -> Option<f64> {
        (!self.multiget.is_empty()).then(|| self.multiget.draw(self.multiget.bracket(count), u))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> LatencyModel {
        LatencyModel::new(
            vec![
                (1000, vec![200.0, 400.0, 1000.0]),
                (10, vec![100.0, 300.0, 500.0]),
            ],
            vec![(1, vec![150.0, 450.0])],
        )
        .unwrap()
    }

    #[test]
    fn reads_the_table_linearly_in_probability() {
        let m = model();
        assert_eq!(m.draw_get(10, 0.0), 100.0);
        assert_eq!(m.draw_get(10, 0.25), 200.0);
        assert_eq!(m.draw_get(10, 0.5), 300.0);
        assert_eq!(m.draw_get(10, 0.75), 400.0);
        assert_eq!(m.draw_multiget(1, 0.5), Some(300.0));
    }

    #[test]
    fn blends_neighbours_on_a_log_scale() {
        let m = model();
        // 100 bytes is half-way between 10 and 1000 on a log scale: the geometric mean.
        let v = m.draw_get(100, 0.5);
        assert!((v - (300.0f64 * 400.0).sqrt()).abs() < 1e-4, "{v}");
    }

    #[test]
    fn clamps_outside_the_measured_range() {
        let m = model();
        assert_eq!(m.draw_get(0, 0.5), m.draw_get(10, 0.5));
        assert_eq!(m.draw_get(1, 0.5), m.draw_get(10, 0.5));
        assert_eq!(m.draw_get(1 << 40, 0.5), m.draw_get(1000, 0.5));
        assert_eq!(m.draw_multiget(50, 0.25), m.draw_multiget(1, 0.25));
    }

    #[test]
    fn rejects_bad_tables() {
        let q = || vec![1.0, 2.0];
        type Rows = Vec<(u64, Vec<f64>)>;
        let cases: [(Rows, &str); 6] = [
            (vec![], "at least one"),
            (vec![(0, q())], "start at 1"),
            (vec![(5, q()), (5, q())], "more than once"),
            (vec![(5, vec![1.0])], "at least 2"),
            (vec![(5, vec![2.0, 1.0])], "non-decreasing"),
            (vec![(5, vec![0.0, 1.0])], "finite and positive"),
        ];
        for (rows, why) in cases {
            let e = LatencyModel::new(rows, vec![]).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
        let e = LatencyModel::new(vec![(1, q())], vec![(2, vec![f64::NAN, 1.0])]).unwrap_err();
        assert!(e.contains("multi-get"), "{e}");
    }
}
