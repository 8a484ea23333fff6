//! `trace inspect`: counts, working set, popularity skew and object sizes of a flat trace.

use super::{FlatTrace, SimTrace};

/// Sizes of the distinct objects (each at the size of its first request).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SizeStats {
    pub min: u32,
    pub p50: u32,
    pub p90: u32,
    pub p99: u32,
    pub max: u32,
    pub mean: f64,
}

/// What [`inspect`] finds.
#[derive(Debug, Clone, PartialEq)]
pub struct Inspection {
    /// Requests in the file (every op).
    pub requests: u64,
    /// Distinct keys.
    pub unique_keys: u64,
    /// Sum of the sizes of all requests.
    pub total_bytes: u64,
    /// Working set: the sum over distinct keys of the size of each key's **first** request
    /// (libCacheSim's definition, the base of its fractional cache sizes).
    pub working_set_bytes: u64,
    /// Keys requested exactly once.
    pub one_hit_keys: u64,
    /// Zipf α fitted to the rank-frequency curve: least squares of log(frequency) on
    /// log(rank) at log-spaced ranks (about 20 per decade, so the long tail does not outvote
    /// the head); `None` with fewer than 3 distinct frequencies' worth of ranks.
    pub zipf_alpha: Option<f64>,
    /// Share of requests that go to the most popular 1 % of keys (at least one key).
    pub top1pct_share: f64,
    /// Object sizes (first request of each key).
    pub object_sizes: SizeStats,
    /// Request count per op name, when the trace has ops.
    pub ops: Vec<(String, u64)>,
}

/// Inspects a trace. Panics on an empty trace (loading never returns one).
pub fn inspect(trace: &FlatTrace) -> Inspection {
    assert!(!trace.is_empty(), "inspect needs a non-empty trace");
    let st = SimTrace::new(trace);
    let n = st.n_objects;
    let mut counts = vec![0u32; n];
    let mut first_size = vec![0u32; n];
    let mut seen = vec![false; n];
    let mut total_bytes = 0u64;
    for (i, &s) in st.slots.iter().enumerate() {
        let s = s as usize;
        counts[s] = counts[s].saturating_add(1);
        if !seen[s] {
            seen[s] = true;
            first_size[s] = trace.sizes[i];
        }
        total_bytes += u64::from(trace.sizes[i]);
    }
    let working_set_bytes = first_size.iter().map(|&s| u64::from(s)).sum();
    let one_hit_keys = counts.iter().filter(|&&c| c == 1).count() as u64;

    counts.sort_unstable_by(|a, b| b.cmp(a));
    let top = n.div_ceil(100).max(1);
    let top_requests: u64 = counts[..top].iter().map(|&c| u64::from(c)).sum();
    let top1pct_share = top_requests as f64 / trace.len() as f64;

    first_size.sort_unstable();
    let pick = |q: f64| first_size[((n - 1) as f64 * q).round() as usize];
    let object_sizes = SizeStats {
        min: first_size[0],
        p50: pick(0.5),
        p90: pick(0.9),
        p99: pick(0.99),
        max: first_size[n - 1],
        mean: working_set_bytes as f64 / n as f64,
    };
    let ops = match &trace.ops {
        Some(o) => {
            let mut c = vec![0u64; o.names.len()];
            for &code in &o.codes {
                c[code as usize] += 1;
            }
            o.names.iter().cloned().zip(c).collect()
        }
        None => Vec::new(),
    };
    Inspection {
        requests: trace.len() as u64,
        unique_keys: n as u64,
        total_bytes,
        working_set_bytes,
        one_hit_keys,
        zipf_alpha: zipf_alpha(&counts),
        top1pct_share,
        object_sizes,
        ops,
    }
}

/// Fits `log f = c - α log r` at log-spaced ranks of a descending frequency list.
pub(crate) fn zipf_alpha(desc_counts: &[u32]) -> Option<f64> {
    let mut pts: Vec<(f64, f64)> = Vec::new();
    let mut r = 1.0f64;
    let mut last = 0usize;
    while (r as usize) <= desc_counts.len() {
        let rank = r as usize;
        if rank != last {
            pts.push(((rank as f64).ln(), f64::from(desc_counts[rank - 1]).ln()));
            last = rank;
        }
        r *= 10f64.powf(1.0 / 20.0);
    }
    if pts.len() < 3 {
        return None;
    }
    let m = pts.len() as f64;
    let (sx, sy) = pts.iter().fold((0.0, 0.0), |(a, b), p| (a + p.0, b + p.1));
    let (mx, my) = (sx / m, sy / m);
    let (sxy, sxx) = pts.iter().fold((0.0, 0.0), |(a, b), p| {
        (a + (p.0 - mx) * (p.1 - my), b + (p.0 - mx) * (p.0 - mx))
    });
    Some(-sxy / sxx)
}

#[cfg(test)]
mod tests {
    use super::zipf_alpha;

    #[test]
    fn exact_power_law_recovers_alpha() {
        let counts: Vec<u32> = (1..=10_000u32)
            .map(|r| (1e9 / f64::from(r).powf(0.8)) as u32)
            .collect();
        let a = zipf_alpha(&counts).unwrap();
        assert!((a - 0.8).abs() < 1e-3, "{a}");
    }

    #[test]
    fn too_few_ranks_give_none() {
        assert_eq!(zipf_alpha(&[5, 3]), None);
    }
}
