//! The latency model: what one memcached get of a value of a given size, or one multi-get of a
//! given number of keys, costs.
//!
//! Each measured size (or key count) has a quantile table `q[0..n]`: the latency (µs) at
//! probability `i / (n - 1)`, non-decreasing, positive, `n >= 2`. A draw takes a uniform `u` in
//! `[0, 1)` and
//!
//! 1. reads each table by interpolating on the log of latency at `u * (n - 1)`: between the
//!    quantiles `q[i]` and `q[i + 1]`, at fraction `f`, `ln q(u) = (1 - f) ln q[i] + f ln q[i + 1]`
//!    (a geometric rather than arithmetic mean of the two; latency tables are spread on a
//!    log scale, and this makes a draw one exponential of a sum of logs);
//! 2. for a size `s` between measured sizes `s0 < s < s1`, blends the two neighbours' values on
//!    a log scale: `t = (ln s - ln s0) / (ln s1 - ln s0)`,
//!    `latency = exp((1 - t) ln q0(u) + t ln q1(u))`, the same `u` for both;
//! 3. beyond the largest measured size `S` (with `R` the next largest) extrapolates linearly
//!    in bytes (keys) by the measured slope at the same quantile:
//!    `latency = q_S(u) + (s - S) * slope(u)`, `slope = (q_S - q_R) / (S - R)` at each of
//!    the table's probabilities, read linearly between them — a multi-get's cost grows by a
//!    per-key term, a get's by a per-byte one. With one measured size there is no slope and a
//!    larger size costs what it does;
//! 4. below the smallest measured size uses the smallest (the defaults measure from 1 byte and
//!    1 key, so nothing lies below). Size 0 counts as 1.
//!
//! **Monotone.** Latency never falls as the size or the key count grows, nor as `u` grows.
//! Measured cells can break the first by noise (App Engine's published 3-key multi-get is
//! slower at p99.9 than its 10-key one; on loopback, gets of 1 and 100 bytes differ by less
//! than their noise). Where they do, the table is replaced at that probability by its
//! least-squares non-decreasing fit over the sizes (pool adjacent violators on the log of
//! latency, equal weights: a pooled run of cells takes the geometric mean of their values).
//! A fit that is already monotone is left alone, so **a measured size's draw at a quantile's
//! own probability is that quantile wherever the measured cells are in order**; the fit keeps
//! each row non-decreasing in `u` (a max-min of means of non-decreasing rows). The slopes are
//! then non-negative, so an extrapolated draw is never below the largest size's, and they are
//! made non-decreasing in `u` the same way (pool adjacent violators over the probabilities),
//! so an extrapolated row is still a quantile function. [`Table::adjusted`] counts the values
//! the fit moved.
//!
//! Rows of one table are put on one grid of probabilities first: the finest one that holds
//! every row's own points (`n - 1` the least common multiple of the rows' `n - 1`), each row
//! read at it by rule 1 — which changes no draw. Tables from a profile share `n` (1,001).
//!
//! At a measured size and a quantile's own probability the draw is that quantile (up to float
//! rounding: it is `exp(ln q)`); it grows with `u`; between two sizes it lies between the
//! neighbours' values and moves monotonically from one to the other.
//!
//! The simulator draws once per memcached operation, so the bracket search and `t` are
//! computed once per item ([`Table::bracket`]), the logs of the quantiles once per table, and a
//! draw is a read of one or two rows of logs and one exponential.

/// The most points a table's common grid may have (see the module's docs).
const MAX_POINTS: usize = 1 << 16;

/// Where a size falls among the measured sizes: the rows to read and the blend weight.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bracket {
    /// The row below (or at) the size; the number of rows when the size lies beyond the
    /// largest measured one (then `t` is the distance past it).
    pub(crate) lo: u32,
    /// Weight of the row above, in [0, 1); 0 means row `lo` alone. Beyond the largest size,
    /// the size less the largest, in bytes (keys). `f32` keeps a bracket at 8 bytes per
    /// catalog item; rounding is monotone, so draws stay monotone in size.
    pub(crate) t: f32,
}

/// Quantile tables by measured size (or key count), sizes ascending.
#[derive(Debug, Clone)]
pub struct Table {
    keys: Vec<u64>,
    ln_keys: Vec<f64>,
    /// Points per row: every row holds the probabilities `j / (points - 1)`.
    points: usize,
    /// Row `r` is `ln_quantiles[r * points..(r + 1) * points]`: the natural log of each
    /// quantile, after the monotone fit (the quantiles themselves are not needed).
    ln_quantiles: Vec<f64>,
    /// Beyond the largest size: µs per byte (key) at each point; empty with one row.
    slope: Vec<f64>,
    /// Values (row and point) the monotone fit moved.
    adjusted: usize,
}

/// The greatest common divisor.
fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// `ln q` read at the grid point `j` of `m` points (rule 1, with exact integer positions so
/// the row's own points are read back exactly).
fn resample(ln_q: &[f64], j: usize, m: usize) -> f64 {
    let (span, n) = ((m - 1) as u128, (ln_q.len() - 1) as u128);
    let num = j as u128 * n;
    let (i, rem) = ((num / span) as usize, num % span);
    if rem == 0 {
        ln_q[i]
    } else {
        lerp(&ln_q[i..i + 2], rem as f64 / span as f64)
    }
}

/// The least-squares non-decreasing fit of `v` with equal weights, in place (pool adjacent
/// violators): a run that falls is replaced by its mean. Values already in order stay as
/// they are, bit for bit.
pub(crate) fn isotonic(v: &mut [f64]) {
    // Blocks of (sum, count, mean); the means are non-decreasing once the loop is done.
    let mut blocks: Vec<(f64, usize, f64)> = Vec::with_capacity(v.len());
    for &x in v.iter() {
        blocks.push((x, 1, x));
        while blocks.len() > 1 && blocks[blocks.len() - 2].2 > blocks[blocks.len() - 1].2 {
            let (s, n, _) = blocks.pop().unwrap();
            let last = blocks.last_mut().unwrap();
            last.0 += s;
            last.1 += n;
            last.2 = last.0 / last.1 as f64;
        }
    }
    let mut at = 0;
    for (_, n, mean) in blocks {
        if n > 1 {
            v[at..at + n].fill(mean);
        }
        at += n;
    }
}

impl Table {
    fn new(what: &str, mut rows: Vec<(u64, Vec<f64>)>) -> Result<Table, String> {
        rows.sort_by_key(|r| r.0);
        let mut keys = Vec::with_capacity(rows.len());
        // One grid for all rows: points - 1 is the lcm of the rows' n - 1.
        let mut span = 1usize;
        for (key, q) in &rows {
            let key = *key;
            if key == 0 {
                return Err(format!(
                    "{what} table: sizes and key counts start at 1, got 0"
                ));
            }
            if keys.last() == Some(&key) {
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
            let n = q.len() - 1;
            span = span
                .checked_mul(n / gcd(span, n))
                .filter(|&s| s < MAX_POINTS)
                .ok_or_else(|| {
                    format!(
                        "{what} table: rows of {} quantiles do not share a grid of at most \
                         {MAX_POINTS} points with the others; give every row the same number",
                        q.len()
                    )
                })?;
            keys.push(key);
        }
        let points = span + 1;
        let mut ln_quantiles = Vec::with_capacity(points * rows.len());
        for (_, q) in &rows {
            let ln_q: Vec<f64> = q.iter().map(|v| v.ln()).collect();
            ln_quantiles.extend((0..points).map(|j| resample(&ln_q, j, points)));
        }
        let adjusted = monotone_over_rows(&mut ln_quantiles, points);
        let slope = match keys.len() {
            0 | 1 => Vec::new(),
            n => {
                let (hi, lo) = (
                    &ln_quantiles[(n - 1) * points..],
                    &ln_quantiles[(n - 2) * points..],
                );
                let dk = (keys[n - 1] - keys[n - 2]) as f64;
                let mut s: Vec<f64> = (0..points)
                    .map(|j| ((hi[j].exp() - lo[j].exp()) / dk).max(0.0))
                    .collect();
                isotonic(&mut s);
                s
            }
        };
        Ok(Table {
            ln_keys: keys.iter().map(|&k| (k as f64).ln()).collect(),
            keys,
            points,
            ln_quantiles,
            slope,
            adjusted,
        })
    }

    /// True when nothing was measured.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The measured sizes (or key counts), ascending.
    pub fn keys(&self) -> &[u64] {
        &self.keys
    }

    /// How many values (a row at one of the grid's probabilities) the monotone fit over sizes
    /// moved: 0 when the measured cells were in order at every probability.
    pub fn adjusted(&self) -> usize {
        self.adjusted
    }

    /// Points per row of the table's grid.
    pub fn points(&self) -> usize {
        self.points
    }

    /// Where `key` falls; below the smallest measured size, at the smallest; 0 counts as 1.
    /// The table must not be empty.
    pub fn bracket(&self, key: u64) -> Bracket {
        let key = key.max(1);
        let last = self.keys.len() - 1;
        match self.keys.binary_search(&key) {
            Ok(i) => Bracket {
                lo: i as u32,
                t: 0.0,
            },
            Err(0) => Bracket { lo: 0, t: 0.0 },
            Err(i) if i > last => {
                if self.slope.is_empty() {
                    Bracket {
                        lo: last as u32,
                        t: 0.0,
                    }
                } else {
                    Bracket {
                        lo: self.keys.len() as u32,
                        t: (key - self.keys[last]) as f32,
                    }
                }
            }
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

    /// Where `u` falls in a row of `len` points: the lower index and the fraction.
    #[inline(always)]
    fn position(len: usize, u: f64) -> (usize, f64) {
        let span = (len - 1) as f64;
        let pos = u.clamp(0.0, 1.0) * span;
        let i = (pos as usize).min(len - 2);
        (i, pos - i as f64)
    }

    /// The latency (µs) at uniform `u` for a bracket from [`Table::bracket`].
    #[inline]
    pub fn draw(&self, b: Bracket, u: f64) -> f64 {
        let (i, f) = Table::position(self.points, u);
        let lo = b.lo as usize;
        if lo == self.keys.len() {
            // Beyond the largest size: its value plus the distance times the slope.
            let at = (lo - 1) * self.points + i;
            let x = lerp(&self.ln_quantiles[at..at + 2], f).exp();
            return x + f64::from(b.t) * lerp(&self.slope[i..i + 2], f);
        }
        let at = lo * self.points + i;
        let x = lerp(&self.ln_quantiles[at..at + 2], f);
        if b.t == 0.0 {
            return x.exp();
        }
        let at = at + self.points;
        let y = lerp(&self.ln_quantiles[at..at + 2], f);
        // (1 - t) x + t y; rounding must not step outside the neighbours' values.
        let z = x + f64::from(b.t) * (y - x);
        let (lo, hi) = if x < y { (x, y) } else { (y, x) };
        let z = if z < lo {
            lo
        } else if z > hi {
            hi
        } else {
            z
        };
        z.exp()
    }
}

/// Makes the rows of `ln` (`points` values each) non-decreasing from row to row at every
/// point by [`isotonic`], then each row non-decreasing along its points (a no-op but for
/// float rounding of the pooled means); returns how many values moved.
fn monotone_over_rows(ln: &mut [f64], points: usize) -> usize {
    let rows = ln.len() / points;
    if rows < 2 {
        return 0;
    }
    let mut moved = 0;
    let mut column = vec![0.0; rows];
    for j in 0..points {
        for (r, c) in column.iter_mut().enumerate() {
            *c = ln[r * points + j];
        }
        isotonic(&mut column);
        for (r, &c) in column.iter().enumerate() {
            let v = &mut ln[r * points + j];
            if *v != c {
                moved += 1;
                *v = c;
            }
        }
    }
    for row in ln.chunks_mut(points) {
        for j in 1..points {
            if row[j] < row[j - 1] {
                row[j] = row[j - 1];
            }
        }
    }
    moved
}

/// `l[0]` to `l[1]` (non-decreasing, finite) at fraction `f` in [0, 1]; never past `l[1]`, so
/// reads grow with `u` across quantiles too.
#[inline(always)]
fn lerp(l: &[f64], f: f64) -> f64 {
    let v = l[0] + f * (l[1] - l[0]);
    if v > l[1] {
        l[1]
    } else {
        v
    }
}

/// The ranks of measured samples in the order they were taken: each sample's quantile within
/// its own cell, in [0, 1), cut into segments of back-to-back sampling. With one, a request's
/// draws read consecutive ranks from a random start instead of independent uniforms, so the
/// model keeps how much one call's latency says about the next's (a slow stretch of the
/// machine slows several calls of one request).
#[derive(Debug, Clone)]
pub struct RankSequence {
    ranks: Vec<f64>,
    /// The end (exclusive) of each segment in `ranks`, ascending; the last is `ranks.len()`.
    ends: Vec<usize>,
}

impl RankSequence {
    /// `ranks` in time order, and the length of each segment (they must add up to
    /// `ranks.len()`; a request's draws wrap around within its segment).
    pub fn new(ranks: Vec<f64>, segments: &[usize]) -> Result<RankSequence, String> {
        if ranks.is_empty() {
            return Err("rank sequence: at least one rank is needed".into());
        }
        if let Some(u) = ranks.iter().find(|u| !(0.0..1.0).contains(*u)) {
            return Err(format!("rank sequence: ranks must be in [0, 1), got {u}"));
        }
        if segments.contains(&0) {
            return Err("rank sequence: a segment is empty".into());
        }
        let ends: Vec<usize> = segments
            .iter()
            .scan(0usize, |at, &n| {
                *at += n;
                Some(*at)
            })
            .collect();
        if ends.last() != Some(&ranks.len()) {
            return Err(format!(
                "rank sequence: segments add up to {}, not the {} ranks",
                ends.last().copied().unwrap_or(0),
                ranks.len()
            ));
        }
        Ok(RankSequence { ranks, ends })
    }

    /// The ranks, in time order.
    pub fn ranks(&self) -> &[f64] {
        &self.ranks
    }

    /// Segment lengths.
    pub fn segments(&self) -> Vec<usize> {
        let mut prev = 0;
        self.ends
            .iter()
            .map(|&e| {
                let n = e - prev;
                prev = e;
                n
            })
            .collect()
    }

    /// A reader of consecutive ranks starting at the position picked by the hash `h`
    /// (uniform over all ranks), wrapping around within that position's segment.
    #[inline]
    pub(crate) fn cursor(&self, h: u64) -> RankCursor<'_> {
        let p = ((u128::from(h) * self.ranks.len() as u128) >> 64) as usize;
        let seg = self.ends.partition_point(|&e| e <= p);
        let start = if seg == 0 { 0 } else { self.ends[seg - 1] };
        RankCursor {
            ranks: &self.ranks[start..self.ends[seg]],
            at: p - start,
        }
    }
}

/// Consecutive ranks of one segment of a [`RankSequence`].
pub(crate) struct RankCursor<'a> {
    ranks: &'a [f64],
    at: usize,
}

impl RankCursor<'_> {
    /// The next rank (the first call gives the start's).
    #[inline]
    #[allow(clippy::should_implement_trait)]
    pub(crate) fn next(&mut self) -> f64 {
        let u = self.ranks[self.at];
        self.at += 1;
        if self.at == self.ranks.len() {
            self.at = 0;
        }
        u
    }
}

/// Get latency by value size and multi-get latency by key count, in microseconds; optionally
/// the order its samples came in ([`RankSequence`]).
#[derive(Debug, Clone)]
pub struct LatencyModel {
    get: Table,
    multiget: Table,
    sequence: Option<RankSequence>,
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
            sequence: None,
        })
    }

    /// The model whose draws within a request follow `sequence` (see [`RankSequence`]).
    pub fn with_sequence(mut self, sequence: RankSequence) -> LatencyModel {
        self.sequence = Some(sequence);
        self
    }

    /// The rank sequence draws follow, if any.
    pub fn sequence(&self) -> Option<&RankSequence> {
        self.sequence.as_ref()
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

    /// `a` equals `b` up to a few units in the last place.
    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-14 * b.abs()
    }

    #[test]
    fn reads_the_table_on_the_log_of_latency() {
        let m = model();
        // The table's own points (up to rounding: exp(ln q)).
        for (u, q) in [(0.0, 100.0), (0.5, 300.0)] {
            assert!(close(m.draw_get(10, u), q), "{u}");
        }
        assert!(close(m.draw_multiget(1, 0.0).unwrap(), 150.0));
        // Half-way between two quantiles: their geometric mean.
        assert!(close(m.draw_get(10, 0.25), (100.0f64 * 300.0).sqrt()));
        assert!(close(m.draw_get(10, 0.75), (300.0f64 * 500.0).sqrt()));
        assert!(close(
            m.draw_multiget(1, 0.5).unwrap(),
            (150.0f64 * 450.0).sqrt()
        ));
        // A quarter of the way: 100^(3/4) 300^(1/4).
        let want = (0.75 * 100.0f64.ln() + 0.25 * 300.0f64.ln()).exp();
        assert!(close(m.draw_get(10, 0.125), want));
    }

    #[test]
    fn blends_neighbours_on_a_log_scale() {
        let m = model();
        // 100 bytes is half-way between 10 and 1000 on a log scale: the geometric mean.
        let v = m.draw_get(100, 0.5);
        assert!((v - (300.0f64 * 400.0).sqrt()).abs() < 1e-4, "{v}");
        // Both at once: half-way between sizes and between quantiles, the geometric mean of
        // the four corners.
        let v = m.draw_get(100, 0.25);
        let want = (100.0f64 * 300.0 * 200.0 * 400.0).powf(0.25);
        assert!((v - want).abs() < 1e-4, "{v} {want}");
    }

    #[test]
    fn a_flat_stretch_stays_flat() {
        let m = LatencyModel::new(vec![(1, vec![7.0, 7.0, 9.0])], vec![]).unwrap();
        for u in [0.0, 0.1, 0.3, 0.49] {
            assert!(close(m.draw_get(1, u), 7.0), "{u}");
        }
    }

    #[test]
    fn below_the_smallest_size_and_beyond_a_single_one_it_takes_the_measured_one() {
        let m = model();
        assert_eq!(m.draw_get(0, 0.5), m.draw_get(10, 0.5));
        assert_eq!(m.draw_get(1, 0.5), m.draw_get(10, 0.5));
        // One multi-get row: no slope to extrapolate with.
        assert_eq!(m.draw_multiget(50, 0.25), m.draw_multiget(1, 0.25));
    }

    #[test]
    fn beyond_the_largest_size_it_extrapolates_the_per_byte_slope_of_each_quantile() {
        let m = model();
        // Sizes 10 and 1000, 990 bytes apart: per-byte slopes at p = 0, 0.5, 1 are
        // (200 - 100) / 990, (400 - 300) / 990 and (1000 - 500) / 990. At 1990 bytes (990 past
        // the largest) the draw is the largest row's value plus 990 times that slope.
        for (u, want) in [
            (0.0, 200.0 + 100.0),
            (0.5, 400.0 + 100.0),
            (1.0, 1000.0 + 500.0),
        ] {
            assert!(
                close(m.draw_get(1990, u), want),
                "{u}: {}",
                m.draw_get(1990, u)
            );
        }
        // Between two probabilities: the largest row read as usual (geometric mean of 400 and
        // 1000), plus the slope read linearly ((100 + 500) / 2 / 990 per byte).
        let want = (400.0f64 * 1000.0).sqrt() + 990.0 * 300.0 / 990.0;
        assert!(close(m.draw_get(1990, 0.75), want));
        // Linear in bytes: twice as far adds twice as much.
        assert!(close(m.draw_get(2980, 0.5), 400.0 + 200.0));
    }

    #[test]
    fn slopes_that_fall_with_u_are_pooled_so_the_extrapolated_row_still_grows() {
        // Per-byte slopes (30 - 10) / 10 = 2 at p = 0 and (105 - 100) / 10 = 0.5 at p = 1:
        // falling, so both become their mean, 1.25.
        let m = LatencyModel::new(
            vec![(10, vec![10.0, 100.0]), (20, vec![30.0, 105.0])],
            vec![],
        )
        .unwrap();
        assert!(close(m.draw_get(30, 0.0), 30.0 + 10.0 * 1.25));
        assert!(close(m.draw_get(30, 1.0), 105.0 + 10.0 * 1.25));
    }

    #[test]
    fn cells_out_of_order_are_pooled_to_their_geometric_mean() {
        // At p = 0 the 2-key cell (30) is slower than the 4-key one (20): both become
        // sqrt(30 * 20); at p = 1 the cells are in order and stay.
        let m = LatencyModel::new(
            vec![(1, vec![1.0, 1.0])],
            vec![
                (1, vec![10.0, 20.0]),
                (2, vec![30.0, 40.0]),
                (4, vec![20.0, 50.0]),
            ],
        )
        .unwrap();
        let pooled = (30.0f64 * 20.0).sqrt();
        assert!(close(m.draw_multiget(2, 0.0).unwrap(), pooled));
        assert!(close(m.draw_multiget(4, 0.0).unwrap(), pooled));
        assert!(close(m.draw_multiget(1, 0.0).unwrap(), 10.0));
        assert!(close(m.draw_multiget(4, 1.0).unwrap(), 50.0));
        assert_eq!(m.multiget().adjusted(), 2);
        assert_eq!(m.get().adjusted(), 0);
        // The slope beyond: 0 at p = 0 (pooled), (50 - 40) / 2 per key at p = 1.
        assert!(close(m.draw_multiget(6, 0.0).unwrap(), pooled));
        assert!(close(m.draw_multiget(6, 1.0).unwrap(), 60.0));
    }

    #[test]
    fn rows_of_different_lengths_share_a_grid_without_changing_a_draw() {
        // 3 and 4 points: a grid of 7 (6 = lcm(2, 3)) holds both rows' points.
        let m = LatencyModel::new(
            vec![(10, vec![1.0, 4.0, 16.0]), (20, vec![2.0, 5.0, 8.0, 40.0])],
            vec![],
        )
        .unwrap();
        assert_eq!(m.get().points(), 7);
        assert!(close(m.draw_get(10, 0.5), 4.0));
        assert!(close(m.draw_get(10, 0.25), 2.0));
        assert!(close(m.draw_get(20, 1.0 / 3.0), 5.0));
        assert!(close(m.draw_get(20, 1.0 / 6.0), 10.0f64.sqrt()));
        assert_eq!(m.get().adjusted(), 0);
        let e = LatencyModel::new(vec![(1, vec![1.0; 1001]), (2, vec![1.0; 1000])], vec![])
            .unwrap_err();
        assert!(e.contains("same number"), "{e}");
    }

    #[test]
    fn a_cursor_reads_consecutive_ranks_and_wraps_within_its_segment() {
        let seq = RankSequence::new(vec![0.0, 0.1, 0.2, 0.5, 0.6], &[3, 2]).unwrap();
        assert_eq!(seq.segments(), vec![3, 2]);
        // h picks position floor(h * 5 / 2^64): 2^64 * 2/5 lands on position 2, the last of
        // the first segment; 2^64 * 4/5 on position 4, the last of the second.
        let at = |p: u64| ((u128::from(p) << 64) / 5) as u64 + 1;
        let mut c = seq.cursor(at(2));
        assert_eq!(
            [c.next(), c.next(), c.next(), c.next()],
            [0.2, 0.0, 0.1, 0.2]
        );
        let mut c = seq.cursor(at(4));
        assert_eq!([c.next(), c.next(), c.next()], [0.6, 0.5, 0.6]);
        let mut c = seq.cursor(0);
        assert_eq!(c.next(), 0.0);
        let mut c = seq.cursor(u64::MAX);
        assert_eq!(c.next(), 0.6);
    }

    #[test]
    fn rejects_bad_rank_sequences() {
        let cases: [(Vec<f64>, Vec<usize>, &str); 5] = [
            (vec![], vec![], "at least one"),
            (vec![0.5, 1.0], vec![2], "[0, 1)"),
            (vec![0.5, f64::NAN], vec![2], "[0, 1)"),
            (vec![0.5, 0.2], vec![2, 0], "empty"),
            (vec![0.5, 0.2], vec![1], "add up to 1"),
        ];
        for (ranks, segs, why) in cases {
            let e = RankSequence::new(ranks, &segs).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
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
