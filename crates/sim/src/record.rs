//! Results as they are written down: [`StrategyResult`], [`SimResult`], [`Mrc`] and
//! [`Inspection`] implement [`serde::Serialize`], and so does [`CostColumns`]. This module
//! is the one place that decides the names, the order, the nesting and the derived figures of
//! those records (Python receives them as nested dicts and lists through the bindings'
//! `to_py`, and `simulate.json` and the flat simulation artifacts store them as JSON).
//!
//! ```text
//! StrategyResult (request::simulate) =
//! {
//!   "strategy" (canonical spec), "draws", "band": "min-max" | "p2.5-p97.5",
//!   "percentiles": [{"median", "low", "high", "percentile"}, ...],
//!   "curve": {"percentile": [...], "median": [...], "low": [...], "high": [...]},
//!   "slowed": [{"median", "low", "high", "threshold"}, ...],
//!   "mean_increase": Band, "mean_added_ms": Band,
//!   "hit_ratio", "prefetch_hit_ratio", "round_trips_per_request", "bytes_per_request",
//!   "counts": {"requests", "touches", "lookups", "l1_hits", "prefetch_hits", "gets",
//!              "multigets", "multiget_keys", "bytes"},
//!   "routes": [{"route", "requests", "mean_added_ms", "mean_increase", "total_added_ms"}, ...]
//! }
//! Band = {"median", "low", "high"}
//!
//! CostColumns (request::request_costs; names and order from CostColumns::named), one list
//! per key, one entry per evaluated request:
//! {"request", "added_ms", "increase", "round_trips", "touches", "lookups", "l1_hits",
//!  "prefetch_hits", "gets", "multigets", "multiget_keys", "bytes", "prefetch_walked",
//!  "prefetch_topic_hit" (bools)}
//!
//! SimResult (policy::sweep) =
//! {"policy", "capacity", "unit": "objects" | "bytes", "requests", "misses", "miss_ratio",
//!  "bytes", "miss_bytes", "byte_miss_ratio"}
//!
//! Mrc (mrc::lru_mrc) =
//! {"policy": "lru", "unit", "sample_rate", "exact", "requests", "bytes", "capacities": [...],
//!  "misses": [...], "miss_ratios": [...], "byte_miss_ratios": [...]}
//!
//! Inspection (flat::inspect) =
//! {"requests", "unique_keys", "total_bytes", "working_set_bytes", "working_set_definition",
//!  "one_hit_keys", "zipf_alpha": float | null, "top1pct_share",
//!  "object_sizes": {"min", "p50", "p90", "p99", "max", "mean"}, "ops": {name: count}}
//! ```
//!
//! Counts, sizes, capacities and codes are integers; ratios, shares, times and percentiles
//! floats. The derived figures (ratios, per-request averages, the band kind, `exact`) are
//! computed from the result when it is written down, by the result's own methods. The tests
//! below pin every name, its order and its type.

use serde::{Serialize, Serializer};

use crate::flat::{Inspection, SizeStats};
use crate::mrc::Mrc;
use crate::policy::{SimResult, Unit};
use crate::request::{Band, Counts, RequestCost, RequestTrace, RouteResult, StrategyResult};

impl Serialize for Unit {
    /// By its [`Unit::name`].
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

// -- request-level simulation ----------------------------------------------------------------

impl Serialize for StrategyResult {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        StrategyRecord::of(self).serialize(s)
    }
}

#[derive(Serialize)]
struct StrategyRecord<'a> {
    strategy: String,
    draws: u32,
    band: &'static str,
    percentiles: Vec<PercentileRow<'a>>,
    curve: Curve,
    slowed: Vec<SlowedRow<'a>>,
    mean_increase: &'a Band,
    mean_added_ms: &'a Band,
    hit_ratio: f64,
    prefetch_hit_ratio: f64,
    round_trips_per_request: f64,
    bytes_per_request: f64,
    counts: &'a Counts,
    routes: &'a [RouteResult],
}

impl<'a> StrategyRecord<'a> {
    fn of(r: &'a StrategyResult) -> StrategyRecord<'a> {
        StrategyRecord {
            strategy: r.strategy.to_string(),
            draws: r.draws,
            band: r.band_kind(),
            percentiles: r
                .percentiles
                .iter()
                .map(|(percentile, band)| PercentileRow {
                    band,
                    percentile: *percentile,
                })
                .collect(),
            curve: Curve::of(&r.curve),
            slowed: r
                .slowed
                .iter()
                .map(|(threshold, band)| SlowedRow {
                    band,
                    threshold: *threshold,
                })
                .collect(),
            mean_increase: &r.mean_increase,
            mean_added_ms: &r.mean_added_ms,
            hit_ratio: r.hit_ratio(),
            prefetch_hit_ratio: r.prefetch_hit_ratio(),
            round_trips_per_request: r.round_trips_per_request(),
            bytes_per_request: r.bytes_per_request(),
            counts: &r.counts,
            routes: &r.routes,
        }
    }
}

/// A band at one percentile of the fractional increase.
#[derive(Serialize)]
struct PercentileRow<'a> {
    #[serde(flatten)]
    band: &'a Band,
    percentile: f64,
}

/// A band of the share of requests slowed by at least `threshold`.
#[derive(Serialize)]
struct SlowedRow<'a> {
    #[serde(flatten)]
    band: &'a Band,
    threshold: f64,
}

/// The plotting grid as columns.
#[derive(Serialize)]
struct Curve {
    percentile: Vec<f64>,
    median: Vec<f64>,
    low: Vec<f64>,
    high: Vec<f64>,
}

impl Curve {
    fn of(points: &[(f64, Band)]) -> Curve {
        Curve {
            percentile: points.iter().map(|p| p.0).collect(),
            median: points.iter().map(|p| p.1.median).collect(),
            low: points.iter().map(|p| p.1.low).collect(),
            high: points.iter().map(|p| p.1.high).collect(),
        }
    }
}

/// What each evaluated request of one `request_costs` run cost and did, as columns in request
/// order (see [`RequestCost`] for each figure): `added_ms` is the added memcached time in ms,
/// `increase` that over the request's base latency, the other columns the request's own
/// counts. A view: each value is computed from the costs as it is written, so a
/// million-request run makes no Rust copy of its 14 million values on their way out (building
/// every column first made `request_costs` about 6 % slower, all of it in page faults).
///
/// [`CostColumns::named`] is the one list of the columns' names and order; [`Serialize`]
/// writes it.
#[derive(Clone, Copy)]
pub struct CostColumns<'a> {
    costs: &'a [RequestCost],
    trace: &'a RequestTrace,
}

/// One column of [`CostColumns`]; serializes as a sequence of its values.
#[derive(Clone, Copy)]
pub enum Column<'a> {
    U32(Values<'a, u32>),
    U64(Values<'a, u64>),
    F64(Values<'a, f64>),
    Bool(Values<'a, bool>),
}

/// A column's values, one per request, in request order.
#[derive(Clone, Copy)]
pub struct Values<'a, T> {
    costs: &'a [RequestCost],
    trace: &'a RequestTrace,
    value: fn(&RequestCost, &RequestTrace) -> T,
}

impl<'a, T: 'a> Values<'a, T> {
    /// The values, computed as they are read.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = T> + 'a {
        let (trace, value) = (self.trace, self.value);
        self.costs.iter().map(move |c| value(c, trace))
    }
}

impl<T: Serialize> Serialize for Values<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl Column<'_> {
    /// The values as `f64`, in little-endian bytes (8 a value): what a reader of numbers
    /// takes in one copy (numpy's `frombuffer(…, "<f8")`), instead of one object a value.
    pub fn f64_le_bytes(&self) -> Vec<u8> {
        fn put(out: &mut Vec<u8>, values: impl Iterator<Item = f64>) {
            for v in values {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        let mut out = Vec::new();
        match self {
            Column::U32(v) => put(&mut out, v.iter().map(f64::from)),
            Column::U64(v) => put(&mut out, v.iter().map(|x| x as f64)),
            Column::F64(v) => put(&mut out, v.iter()),
            Column::Bool(v) => put(&mut out, v.iter().map(|x| f64::from(u8::from(x)))),
        }
        out
    }
}

impl Serialize for Column<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Column::U32(v) => v.serialize(s),
            Column::U64(v) => v.serialize(s),
            Column::F64(v) => v.serialize(s),
            Column::Bool(v) => v.serialize(s),
        }
    }
}

impl<'a> CostColumns<'a> {
    /// Number of columns.
    pub const LEN: usize = 14;

    /// The columns of `costs`, which `trace` (for each request's base latency) produced.
    pub fn new(costs: &'a [RequestCost], trace: &'a RequestTrace) -> CostColumns<'a> {
        CostColumns { costs, trace }
    }

    /// Requests (the length of every column).
    pub fn len(&self) -> usize {
        self.costs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.costs.is_empty()
    }

    fn values<T>(&self, value: fn(&RequestCost, &RequestTrace) -> T) -> Values<'a, T> {
        Values {
            costs: self.costs,
            trace: self.trace,
            value,
        }
    }

    /// The columns by their record names, in the record's order.
    pub fn named(&self) -> [(&'static str, Column<'a>); CostColumns::LEN] {
        use Column::{Bool, F64, U32, U64};
        [
            ("request", U32(self.values(|c, _| c.request))),
            ("added_ms", F64(self.values(|c, _| c.added_us / 1000.0))),
            (
                "increase",
                F64(self.values(|c, t| c.added_us / 1000.0 / t.base_ms(c.request as usize))),
            ),
            ("round_trips", U32(self.values(|c, _| c.round_trips))),
            ("touches", U32(self.values(|c, _| c.touches))),
            ("lookups", U32(self.values(|c, _| c.lookups))),
            ("l1_hits", U32(self.values(|c, _| c.l1_hits))),
            ("prefetch_hits", U32(self.values(|c, _| c.prefetch_hits))),
            ("gets", U32(self.values(|c, _| c.gets))),
            ("multigets", U32(self.values(|c, _| c.multigets))),
            ("multiget_keys", U32(self.values(|c, _| c.multiget_keys))),
            ("bytes", U64(self.values(|c, _| c.bytes))),
            (
                "prefetch_walked",
                U32(self.values(|c, _| c.prefetch_walked)),
            ),
            (
                "prefetch_topic_hit",
                Bool(self.values(|c, _| c.prefetch_topic_hit)),
            ),
        ]
    }
}

impl Serialize for CostColumns<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("CostColumns", CostColumns::LEN)?;
        for (name, column) in self.named() {
            st.serialize_field(name, &column)?;
        }
        st.end()
    }
}

// -- flat traces -----------------------------------------------------------------------------

impl Serialize for SimResult {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        SimRecord {
            policy: &self.policy,
            capacity: self.capacity,
            unit: self.unit,
            requests: self.counts.requests,
            misses: self.counts.misses,
            miss_ratio: self.miss_ratio(),
            bytes: self.counts.bytes,
            miss_bytes: self.counts.miss_bytes,
            byte_miss_ratio: self.byte_miss_ratio(),
        }
        .serialize(s)
    }
}

#[derive(Serialize)]
struct SimRecord<'a> {
    policy: &'a str,
    capacity: u64,
    unit: Unit,
    requests: u64,
    misses: u64,
    miss_ratio: f64,
    bytes: u64,
    miss_bytes: u64,
    byte_miss_ratio: f64,
}

impl Serialize for Mrc {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        MrcRecord {
            policy: "lru",
            unit: self.unit,
            sample_rate: self.sample_rate,
            exact: self.sample_rate >= 1.0,
            requests: self.requests,
            bytes: self.bytes,
            capacities: &self.capacities,
            misses: &self.misses,
            miss_ratios: self.miss_ratios(),
            byte_miss_ratios: self.byte_miss_ratios(),
        }
        .serialize(s)
    }
}

#[derive(Serialize)]
struct MrcRecord<'a> {
    /// Curves come from stack distances, which only LRU has.
    policy: &'static str,
    unit: Unit,
    sample_rate: f64,
    /// Not sampled (SHARDS off).
    exact: bool,
    requests: u64,
    bytes: u64,
    capacities: &'a [u64],
    misses: &'a [u64],
    miss_ratios: Vec<f64>,
    byte_miss_ratios: Vec<f64>,
}

impl Serialize for Inspection {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        InspectionRecord {
            requests: self.requests,
            unique_keys: self.unique_keys,
            total_bytes: self.total_bytes,
            working_set_bytes: self.working_set_bytes,
            working_set_definition: "sum of each key's first size",
            one_hit_keys: self.one_hit_keys,
            zipf_alpha: self.zipf_alpha,
            top1pct_share: self.top1pct_share,
            object_sizes: &self.object_sizes,
            ops: ByName(&self.ops),
        }
        .serialize(s)
    }
}

#[derive(Serialize)]
struct InspectionRecord<'a> {
    requests: u64,
    unique_keys: u64,
    total_bytes: u64,
    working_set_bytes: u64,
    working_set_definition: &'static str,
    one_hit_keys: u64,
    zipf_alpha: Option<f64>,
    top1pct_share: f64,
    object_sizes: &'a SizeStats,
    ops: ByName<'a>,
}

/// `(name, count)` pairs as a map, in their order.
struct ByName<'a>(&'a [(String, u64)]);

impl Serialize for ByName<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::policy;
    use crate::request::{Strategy, TraceColumns, CENTRAL_BAND_DRAWS};
    use cachelab_metrics::json_shape;

    fn band(x: f64) -> Band {
        Band {
            median: x,
            low: x - 0.5,
            high: x + 0.5,
        }
    }

    fn strategy_result(draws: u32) -> StrategyResult {
        StrategyResult {
            strategy: Strategy::parse("fixed:10+prefetch-children").unwrap(),
            draws,
            percentiles: vec![(50.0, band(1.0)), (99.0, band(2.0))],
            curve: vec![(50.0, band(1.0)), (99.99, band(3.0))],
            slowed: vec![(0.1, band(0.25))],
            mean_increase: band(1.5),
            mean_added_ms: band(4.0),
            counts: Counts {
                requests: 4,
                touches: 12,
                lookups: 10,
                l1_hits: 5,
                prefetch_hits: 2,
                gets: 3,
                multigets: 1,
                multiget_keys: 4,
                bytes: 800,
            },
            routes: vec![RouteResult {
                route: 2,
                requests: 4,
                mean_added_ms: 4.0,
                mean_increase: 1.5,
                total_added_ms: 16.0,
            }],
        }
    }

    const BAND: &str = "median:float,low:float,high:float";

    #[test]
    fn a_strategy_result_has_every_name_and_type_in_order() {
        let v = serde_json::to_value(strategy_result(5)).unwrap();
        let expected = format!(
            "{{strategy:str,draws:int,band:str,\
             percentiles:[{{{BAND},percentile:float}}],\
             curve:{{percentile:[float],median:[float],low:[float],high:[float]}},\
             slowed:[{{{BAND},threshold:float}}],\
             mean_increase:{{{BAND}}},mean_added_ms:{{{BAND}}},\
             hit_ratio:float,prefetch_hit_ratio:float,round_trips_per_request:float,\
             bytes_per_request:float,\
             counts:{{requests:int,touches:int,lookups:int,l1_hits:int,prefetch_hits:int,\
             gets:int,multigets:int,multiget_keys:int,bytes:int}},\
             routes:[{{route:int,requests:int,mean_added_ms:float,mean_increase:float,\
             total_added_ms:float}}]}}"
        );
        assert_eq!(json_shape(&v), expected);
    }

    #[test]
    fn a_strategy_result_carries_the_derived_figures() {
        let v = serde_json::to_value(strategy_result(5)).unwrap();
        assert_eq!(v["strategy"], "fixed:10+prefetch-children");
        assert_eq!(v["band"], "min-max");
        assert_eq!(v["hit_ratio"], 0.5);
        assert_eq!(v["prefetch_hit_ratio"], 0.2);
        assert_eq!(v["round_trips_per_request"], 1.0);
        assert_eq!(v["bytes_per_request"], 200.0);
        assert_eq!(
            v["percentiles"][1],
            json!({"median": 2.0, "low": 1.5, "high": 2.5, "percentile": 99.0})
        );
        assert_eq!(
            v["curve"],
            json!({"percentile": [50.0, 99.99], "median": [1.0, 3.0], "low": [0.5, 2.5],
                   "high": [1.5, 3.5]})
        );
        let central = serde_json::to_value(strategy_result(CENTRAL_BAND_DRAWS)).unwrap();
        assert_eq!(central["band"], "p2.5-p97.5");
    }

    #[test]
    fn cost_columns_have_every_name_and_type_in_order() {
        let trace = RequestTrace::new(TraceColumns {
            item_sizes: vec![100],
            child_offsets: vec![],
            child_items: vec![],
            time: vec![0.0, 1.0],
            instance: vec![0, 0],
            route: vec![0, 0],
            base_ms: vec![10.0, 4.0],
            touch_offsets: vec![0, 1, 2],
            touch_items: vec![0, 0],
        })
        .unwrap();
        let cost = RequestCost {
            request: 1,
            added_us: 2000.0,
            round_trips: 1,
            touches: 1,
            lookups: 1,
            l1_hits: 0,
            prefetch_hits: 0,
            gets: 1,
            multigets: 0,
            multiget_keys: 0,
            bytes: 100,
            prefetch_walked: 0,
            prefetch_topic_hit: false,
        };
        let v = serde_json::to_value(CostColumns::new(&[cost], &trace)).unwrap();
        assert_eq!(
            json_shape(&v),
            "{request:[int],added_ms:[float],increase:[float],round_trips:[int],\
             touches:[int],lookups:[int],l1_hits:[int],prefetch_hits:[int],gets:[int],\
             multigets:[int],multiget_keys:[int],bytes:[int],prefetch_walked:[int],\
             prefetch_topic_hit:[bool]}"
        );
        assert_eq!(v["added_ms"], json!([2.0]));
        assert_eq!(v["increase"], json!([0.5]));
        assert_eq!(v["request"], json!([1]));
        let empty = serde_json::to_value(CostColumns::new(&[], &trace)).unwrap();
        assert_eq!(empty["request"], json!([]));
    }

    #[test]
    fn a_flat_result_has_every_name_and_type_in_order() {
        let r = SimResult {
            policy: "lru".into(),
            capacity: 10,
            unit: Unit::Bytes,
            counts: policy::Counts {
                requests: 4,
                misses: 1,
                bytes: 40,
                miss_bytes: 20,
            },
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(
            json_shape(&v),
            "{policy:str,capacity:int,unit:str,requests:int,misses:int,miss_ratio:float,\
             bytes:int,miss_bytes:int,byte_miss_ratio:float}"
        );
        assert_eq!(v["unit"], "bytes");
        assert_eq!(v["miss_ratio"], 0.25);
        assert_eq!(v["byte_miss_ratio"], 0.5);
        assert_eq!(serde_json::to_value(Unit::Objects).unwrap(), "objects");
    }

    #[test]
    fn a_curve_has_every_name_and_type_in_order() {
        let m = Mrc {
            unit: Unit::Objects,
            sample_rate: 0.1,
            requests: 10,
            bytes: 100,
            capacities: vec![1, 2],
            misses: vec![5, 4],
            miss_bytes: vec![50, 25],
        };
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(
            json_shape(&v),
            "{policy:str,unit:str,sample_rate:float,exact:bool,requests:int,bytes:int,\
             capacities:[int],misses:[int],miss_ratios:[float],byte_miss_ratios:[float]}"
        );
        assert_eq!(v["policy"], "lru");
        assert_eq!(v["exact"], false);
        assert_eq!(v["miss_ratios"], json!([0.5, 0.4]));
        assert_eq!(v["byte_miss_ratios"], json!([0.5, 0.25]));
    }

    #[test]
    fn an_inspection_has_every_name_and_type_in_order() {
        let mut i = Inspection {
            requests: 3,
            unique_keys: 2,
            total_bytes: 30,
            working_set_bytes: 20,
            one_hit_keys: 1,
            zipf_alpha: Some(1.0),
            top1pct_share: 0.5,
            object_sizes: SizeStats {
                min: 10,
                p50: 10,
                p90: 10,
                p99: 10,
                max: 10,
                mean: 10.0,
            },
            ops: vec![("set".into(), 1), ("get".into(), 2)],
        };
        let v = serde_json::to_value(&i).unwrap();
        assert_eq!(
            json_shape(&v),
            "{requests:int,unique_keys:int,total_bytes:int,working_set_bytes:int,\
             working_set_definition:str,one_hit_keys:int,zipf_alpha:float,\
             top1pct_share:float,\
             object_sizes:{min:int,p50:int,p90:int,p99:int,max:int,mean:float},\
             ops:{set:int,get:int}}"
        );
        assert_eq!(v["working_set_definition"], "sum of each key's first size");
        i.zipf_alpha = None;
        i.ops.clear();
        let v = serde_json::to_value(&i).unwrap();
        assert_eq!(v["zipf_alpha"], Value::Null);
        assert_eq!(v["ops"], json!({}));
    }
}
