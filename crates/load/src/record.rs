//! The outcome as it is written down: [`Outcome`] implements [`serde::Serialize`], and this is
//! the one place that decides the names, the nesting and the derived figures of that record
//! (Python receives it as nested dicts and lists, and the load artifact stores it as JSON).
//!
//! ```text
//! {
//!   "intervals": [Interval, ...],
//!   "steady": {"start_index", "reached", "reference_throughput", "reference_p50_ns"},
//!   "all": Totals, "measured": Totals, "window": Totals,
//!   "stalls": [{"start_s", "end_s", "slow_replies", "worst_ns", "timeouts",
//!               "connect_failures", "down"}, ...], "stalls_dropped",
//!   "server": Server (a pool's first member; through a proxy, the proxy: version only),
//!   "behind": [Server, ...] (through a proxy, the servers behind it; [] otherwise),
//!   "members": [{"address", "weight", "keys", "sent", "replies", "hits", "misses",
//!                "errors": {fault: count}, "lost", "latency": Hist,
//!                "down": [{"start_s", "end_s", "failures", "connections", "open"}, ...],
//!                "server": Server, "moved", "ask" (a Redis Cluster's masters: the
//!                redirections each sent)}, ...] (a pool's members in order; [] for one
//!                server),
//!   "schedule": {"target_rate", "backlog_at_end", "skipped_disconnected"} | null (closed loop),
//!   "client_cpu_user_s", "client_cpu_system_s", "client_wait_s", "client_sleeps",
//!   "client_preempted", "client_busy_polls", "client_busy_caught", "client_spins",
//!   "client_spun_s" (pacing: spinning to open-loop sends), "client_spin_sends",
//!   "client_spin_fallbacks" (requests the spin wrote itself, and those it left to the
//!   connection task), "client_writes",
//!   "process_cpu_s" (user + system), "prefilled_keys", "prefill_s", "deleted_keys",
//!   "leftover_keys", "cancelled", "aborted": str | null, "elapsed_s",
//!   "send_lateness": Hist | null (closed loop; after the warm-up), "late_sends",
//!   "late_threshold_ns",
//!   "samples": {"block" (samples per block),
//!               "sends": Samples (value_ns: lateness; empty in closed loop),
//!               "replies": Samples (t_ns: the request's (intended) send; value_ns: latency)},
//!   "probe": {"rate", "intervals": [Interval, ...], "all": Totals, "measured": Totals, "cpu_user_s", "cpu_system_s",
//!             "wait_s", "backlog_at_end", "skipped_disconnected", "stalls",
//!             "aborted": str | null, "elapsed_s", "send_lateness": Hist, "late_sends",
//!             "samples": {"block", "sends": Samples, "replies": Samples}} | null
//!            (the latency probe, an open loop: its totals have a corrected histogram)
//! }
//! Samples  = {"offered", "block": [int], "t_ns": [int], "value_ns": [int]} (see `samples`)
//! Interval = {"index", "start_s", "duration_s", "warmup", <tally>}
//! Totals   = {"first_index", "intervals", "duration_s", <tally>}
//! <tally>  = "ops": {"get", "multiget", "set", "delete"}, "replies", "throughput" (replies/s),
//!            "hits", "misses", "errors": {fault: count} (only faults that happened), "lost",
//!            "sent", "corrected": Hist | null (closed loop), "uncorrected": Hist
//! Server   = {"version", "before": {stat: str}, "after": {stat: str}, "pid": int | null,
//!             "schedstat_before" / "schedstat_after":
//!                 {"on_cpu_ns", "wait_ns", "slices", "threads"} | null}
//! Hist     = {"count", "histogram" (V2 compressed, base64), "percentiles":
//!            {"50", "90", "99", "99.9", "max"} (ns), "mean" (ns, 0 when empty), "max" (ns)}
//! ```
//!
//! Counts are integers, times and rates floats. The tests below pin every name and type.

use std::collections::BTreeMap;

use cachelab_metrics::{Hist, Latency};
use serde::{Serialize, Serializer};

use crate::outcome::{MemberOutcome, Outcome, ProbeOutcome, Schedule};
use crate::recorder::Episode;
use crate::samples::ClientSamples;
use crate::samples::{Reservoir, BLOCK, LATE_NS};
use crate::series::{Interval, Totals, OPS};
use crate::server::ServerView;
use crate::stalls::Stall;
use crate::steady::Steady;

impl Serialize for Outcome {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        OutcomeRecord::of(self).serialize(s)
    }
}

#[derive(Serialize)]
struct OutcomeRecord<'a> {
    intervals: Vec<IntervalRecord<'a>>,
    steady: &'a Steady,
    all: TotalsRecord<'a>,
    measured: TotalsRecord<'a>,
    window: TotalsRecord<'a>,
    stalls: &'a [Stall],
    stalls_dropped: u64,
    server: &'a ServerView,
    behind: &'a [ServerView],
    members: Vec<MemberRecord<'a>>,
    schedule: Option<&'a Schedule>,
    client_cpu_user_s: f64,
    client_cpu_system_s: f64,
    client_wait_s: f64,
    client_sleeps: u64,
    client_preempted: u64,
    client_busy_polls: u64,
    client_busy_caught: u64,
    client_spins: u64,
    client_spun_s: f64,
    client_spin_sends: u64,
    client_spin_fallbacks: u64,
    client_writes: u64,
    process_cpu_s: f64,
    prefilled_keys: u64,
    prefill_s: f64,
    deleted_keys: u64,
    leftover_keys: u64,
    cancelled: bool,
    aborted: Option<&'a str>,
    elapsed_s: f64,
    send_lateness: Option<HistSummary>,
    late_sends: u64,
    late_threshold_ns: u64,
    samples: SamplesRecord<'a>,
    probe: Option<ProbeRecord<'a>>,
}

#[derive(Serialize)]
struct ProbeRecord<'a> {
    rate: f64,
    intervals: Vec<IntervalRecord<'a>>,
    all: TotalsRecord<'a>,
    measured: TotalsRecord<'a>,
    cpu_user_s: f64,
    cpu_system_s: f64,
    wait_s: f64,
    backlog_at_end: u64,
    skipped_disconnected: u64,
    stalls: usize,
    aborted: Option<&'a str>,
    elapsed_s: f64,
    send_lateness: HistSummary,
    late_sends: u64,
    samples: SamplesRecord<'a>,
}

impl<'a> ProbeRecord<'a> {
    fn of(p: &'a ProbeOutcome) -> ProbeRecord<'a> {
        ProbeRecord {
            rate: p.rate,
            intervals: p
                .intervals
                .iter()
                .map(|i| IntervalRecord::of(i, true))
                .collect(),
            all: TotalsRecord::of(&p.all, true),
            measured: TotalsRecord::of(&p.measured, true),
            cpu_user_s: p.cpu_s.0,
            cpu_system_s: p.cpu_s.1,
            wait_s: p.wait_s,
            backlog_at_end: p.backlog_at_end,
            skipped_disconnected: p.skipped_disconnected,
            stalls: p.stalls,
            aborted: p.aborted.as_deref(),
            elapsed_s: p.elapsed.as_secs_f64(),
            send_lateness: HistSummary::of(&p.client_samples.lateness),
            late_sends: p.client_samples.late,
            samples: SamplesRecord::of(&p.client_samples),
        }
    }
}

#[derive(Serialize)]
struct SamplesRecord<'a> {
    block: usize,
    sends: ReservoirRecord<'a>,
    replies: ReservoirRecord<'a>,
}

#[derive(Serialize)]
struct ReservoirRecord<'a> {
    offered: u64,
    block: &'a [u64],
    t_ns: &'a [u64],
    value_ns: &'a [u64],
}

impl<'a> SamplesRecord<'a> {
    fn of(c: &'a ClientSamples) -> SamplesRecord<'a> {
        SamplesRecord {
            block: BLOCK,
            sends: ReservoirRecord::of(&c.sends),
            replies: ReservoirRecord::of(&c.replies),
        }
    }
}

impl<'a> ReservoirRecord<'a> {
    fn of(r: &'a Reservoir) -> ReservoirRecord<'a> {
        ReservoirRecord {
            offered: r.offered(),
            block: &r.block,
            t_ns: &r.t_ns,
            value_ns: &r.value,
        }
    }
}

impl<'a> OutcomeRecord<'a> {
    fn of(o: &'a Outcome) -> OutcomeRecord<'a> {
        // Only an open loop has a schedule, and only an open loop a corrected histogram.
        let open = o.schedule.is_some();
        OutcomeRecord {
            intervals: o
                .intervals
                .iter()
                .map(|i| IntervalRecord::of(i, open))
                .collect(),
            steady: &o.steady,
            all: TotalsRecord::of(&o.all, open),
            measured: TotalsRecord::of(&o.measured, open),
            window: TotalsRecord::of(&o.window, open),
            stalls: &o.stalls,
            stalls_dropped: o.stalls_dropped,
            server: &o.server,
            behind: &o.behind,
            members: o.members.iter().map(MemberRecord::of).collect(),
            schedule: o.schedule.as_ref(),
            client_cpu_user_s: o.client_cpu_s.0,
            client_cpu_system_s: o.client_cpu_s.1,
            client_wait_s: o.client_sched.wait_s,
            client_sleeps: o.client_sched.sleeps,
            client_preempted: o.client_sched.preempted,
            client_busy_polls: o.client_sched.busy_polls,
            client_busy_caught: o.client_sched.busy_caught,
            client_spins: o.client_sched.spins,
            client_spun_s: o.client_sched.spun_s,
            client_spin_sends: o.client_sched.spin_sends,
            client_spin_fallbacks: o.client_sched.spin_fallbacks,
            client_writes: o.client_sched.writes,
            process_cpu_s: o.process_cpu_s.0 + o.process_cpu_s.1,
            prefilled_keys: o.prefilled_keys,
            prefill_s: o.prefill_s,
            deleted_keys: o.deleted_keys,
            leftover_keys: o.leftover_keys,
            cancelled: o.cancelled,
            aborted: o.aborted.as_deref(),
            elapsed_s: o.elapsed.as_secs_f64(),
            send_lateness: open.then(|| HistSummary::of(&o.client_samples.lateness)),
            late_sends: o.client_samples.late,
            late_threshold_ns: LATE_NS,
            samples: SamplesRecord::of(&o.client_samples),
            probe: o.probe.as_ref().map(ProbeRecord::of),
        }
    }
}

#[derive(Serialize)]
struct MemberRecord<'a> {
    address: &'a str,
    weight: u32,
    keys: u64,
    sent: u64,
    replies: u64,
    hits: u64,
    misses: u64,
    errors: &'a BTreeMap<&'static str, u64>,
    lost: u64,
    latency: HistSummary,
    down: &'a [Episode],
    server: &'a ServerView,
    /// A cluster's master: the `-MOVED` and `-ASK` it sent (absent in a pool).
    #[serde(skip_serializing_if = "Option::is_none")]
    moved: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ask: Option<u64>,
}

impl<'a> MemberRecord<'a> {
    fn of(m: &'a MemberOutcome) -> MemberRecord<'a> {
        MemberRecord {
            address: &m.address,
            weight: m.weight,
            keys: m.keys,
            sent: m.sent,
            replies: m.replies,
            hits: m.hits,
            misses: m.misses,
            errors: &m.errors,
            lost: m.lost,
            latency: HistSummary::of(&m.latency),
            down: &m.down,
            server: &m.server,
            moved: m.redirects.map(|r| r.0),
            ask: m.redirects.map(|r| r.1),
        }
    }
}

/// The [`Tally`] of an interval or a total: both carry the same counters.
macro_rules! tally {
    ($x:expr, $open:expr) => {
        Tally {
            ops: ByOp(&$x.ops),
            replies: $x.replies(),
            throughput: $x.throughput(),
            hits: $x.hits,
            misses: $x.misses,
            errors: &$x.errors,
            lost: $x.lost,
            sent: $x.sent,
            corrected: $open.then(|| HistSummary::of(&$x.corrected.histogram())),
            uncorrected: HistSummary::of(&$x.uncorrected.histogram()),
        }
    };
}

#[derive(Serialize)]
struct IntervalRecord<'a> {
    index: u64,
    start_s: f64,
    duration_s: f64,
    warmup: bool,
    #[serde(flatten)]
    tally: Tally<'a>,
}

impl<'a> IntervalRecord<'a> {
    fn of(i: &'a Interval, open: bool) -> IntervalRecord<'a> {
        IntervalRecord {
            index: i.index,
            start_s: i.start_s,
            duration_s: i.duration_s,
            warmup: i.warmup,
            tally: tally!(i, open),
        }
    }
}

#[derive(Serialize)]
struct TotalsRecord<'a> {
    first_index: u64,
    intervals: usize,
    duration_s: f64,
    #[serde(flatten)]
    tally: Tally<'a>,
}

impl<'a> TotalsRecord<'a> {
    fn of(t: &'a Totals, open: bool) -> TotalsRecord<'a> {
        TotalsRecord {
            first_index: t.first_index,
            intervals: t.intervals,
            duration_s: t.duration_s,
            tally: tally!(t, open),
        }
    }
}

/// What an interval and a total both count.
#[derive(Serialize)]
struct Tally<'a> {
    ops: ByOp<'a>,
    replies: u64,
    throughput: f64,
    hits: u64,
    misses: u64,
    errors: &'a BTreeMap<&'static str, u64>,
    lost: u64,
    sent: u64,
    corrected: Option<HistSummary>,
    uncorrected: HistSummary,
}

/// A per-op array as `{op name: value}`, in the order of [`OPS`].
struct ByOp<'a>(&'a [u64; 4]);

impl Serialize for ByOp<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(OPS.iter().zip(self.0))
    }
}

/// A latency histogram as a record carries it: the whole histogram, encoded, and the figures
/// a reader looks at first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistSummary {
    pub count: u64,
    /// V2 compressed, base64 ([`cachelab_metrics::encode`]).
    pub histogram: String,
    pub percentiles: Percentiles,
    /// Mean, ns; 0 for an empty histogram.
    pub mean: f64,
    /// The largest value, ns.
    pub max: u64,
}

/// Nearest-rank percentiles, ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Percentiles {
    #[serde(rename = "50")]
    pub p50: u64,
    #[serde(rename = "90")]
    pub p90: u64,
    #[serde(rename = "99")]
    pub p99: u64,
    #[serde(rename = "99.9")]
    pub p99_9: u64,
    /// The 100th percentile.
    pub max: u64,
}

impl HistSummary {
    pub fn of(h: &Latency) -> HistSummary {
        let [p50, p90, p99, p99_9, max] =
            cachelab_metrics::percentiles(h, &[50.0, 90.0, 99.0, 99.9, 100.0])[..]
        else {
            unreachable!("five percentiles asked, five given")
        };
        HistSummary {
            count: h.len(),
            histogram: cachelab_metrics::encode(h),
            percentiles: Percentiles {
                p50,
                p90,
                p99,
                p99_9,
                max,
            },
            mean: if h.is_empty() { 0.0 } else { h.mean() },
            max: h.max(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::outcome::ClientSched;
    use crate::server::SchedStat;
    use cachelab_metrics::{json_shape, Packed};

    fn outcome(open: bool) -> Outcome {
        let h = cachelab_metrics::from_values([100, 200, 300, 400]);
        let interval = Interval {
            index: 0,
            start_s: 0.0,
            duration_s: 1.0,
            warmup: false,
            ops: [3, 0, 1, 0],
            hits: 2,
            misses: 1,
            errors: [("timeout", 1)].into(),
            lost: 0,
            sent: 5,
            corrected: Packed::of(&if open {
                h.clone()
            } else {
                cachelab_metrics::latency()
            }),
            uncorrected: Packed::of(&h),
        };
        let intervals = vec![interval];
        Outcome {
            all: Totals::over(&intervals, 0),
            measured: Totals::over(&intervals, 0),
            window: Totals::over(&intervals, 0),
            stalls: vec![Stall {
                start_s: 0.5,
                end_s: 0.7,
                slow_replies: 1,
                worst_ns: 200_000_000,
                ..Stall::default()
            }],
            stalls_dropped: 0,
            intervals,
            steady: Steady {
                start_index: 0,
                reached: true,
                reference_throughput: 4.0,
                reference_p50_ns: 2000,
            },
            server: ServerView {
                version: "1.6".into(),
                before: [("curr_items".to_string(), "0".to_string())].into(),
                after: [("curr_items".to_string(), "1".to_string())].into(),
                pid: Some(7),
                schedstat_before: Some(SchedStat::default()),
                schedstat_after: None,
            },
            behind: Vec::new(),
            members: vec![MemberOutcome {
                address: "127.0.0.2:11211".into(),
                weight: 2,
                keys: 10,
                sent: 4,
                replies: 3,
                hits: 2,
                misses: 1,
                errors: [("member_down", 1)].into(),
                lost: 0,
                latency: cachelab_metrics::from_values([100, 300]),
                down: vec![Episode {
                    start_s: 0.2,
                    marked_s: 0.3,
                    end_s: 0.6,
                    failures: 2,
                    connections: 1,
                    open: false,
                }],
                server: ServerView::default(),
                redirects: None,
            }],
            schedule: open.then_some(Schedule {
                target_rate: 4.0,
                backlog_at_end: 0,
                skipped_disconnected: 0,
            }),
            client_cpu_s: (0.25, 0.5),
            client_sched: ClientSched::default(),
            process_cpu_s: (1.0, 0.5),
            prefilled_keys: 0,
            prefill_s: 0.0,
            deleted_keys: 1,
            leftover_keys: 0,
            cancelled: false,
            aborted: Some("gave up".into()),
            elapsed: Duration::from_secs(1),
            client_samples: {
                let mut c = crate::samples::ClientSamples::new(BLOCK);
                c.send(5, 7);
                c
            },
            probe: open.then(|| ProbeOutcome {
                rate: 2.0,
                intervals: Vec::new(),
                all: Totals::over(&[], 0),
                measured: Totals::over(&[], 0),
                cpu_s: (0.125, 0.0625),
                wait_s: 0.0,
                backlog_at_end: 0,
                skipped_disconnected: 0,
                stalls: 0,
                aborted: None,
                elapsed: Duration::from_secs(1),
                client_samples: crate::samples::ClientSamples::new(BLOCK),
            }),
        }
    }

    const HIST: &str = r#"{count:int,histogram:str,percentiles:{50:int,90:int,99:int,99.9:int,max:int},mean:float,max:int}"#;

    fn expected(open: bool) -> String {
        let corrected = if open { HIST } else { "null" };
        let lateness = corrected;
        let tally = format!(
            "ops:{{get:int,multiget:int,set:int,delete:int}},replies:int,throughput:float,\
             hits:int,misses:int,errors:{{timeout:int}},lost:int,sent:int,\
             corrected:{corrected},uncorrected:{HIST}"
        );
        let empty_tally = format!(
            "ops:{{get:int,multiget:int,set:int,delete:int}},replies:int,throughput:float,\
             hits:int,misses:int,errors:{{}},lost:int,sent:int,\
             corrected:{HIST},uncorrected:{HIST}"
        );
        let probe = if open {
            format!(
                "{{rate:float,intervals:[],all:{{first_index:int,intervals:int,duration_s:float,{empty_tally}}},\
                 measured:{{first_index:int,intervals:int,duration_s:float,{empty_tally}}},\
                 cpu_user_s:float,cpu_system_s:float,wait_s:float,backlog_at_end:int,\
                 skipped_disconnected:int,stalls:int,aborted:null,elapsed_s:float,\
                 send_lateness:{HIST},late_sends:int,\
                 samples:{{block:int,\
                 sends:{{offered:int,block:[],t_ns:[],value_ns:[]}},\
                 replies:{{offered:int,block:[],t_ns:[],value_ns:[]}}}}}}"
            )
        } else {
            "null".to_string()
        };
        let schedule = if open {
            "{target_rate:float,backlog_at_end:int,skipped_disconnected:int}"
        } else {
            "null"
        };
        format!(
            "{{intervals:[{{index:int,start_s:float,duration_s:float,warmup:bool,{tally}}}],\
             steady:{{start_index:int,reached:bool,reference_throughput:float,reference_p50_ns:int}},\
             all:{{first_index:int,intervals:int,duration_s:float,{tally}}},\
             measured:{{first_index:int,intervals:int,duration_s:float,{tally}}},\
             window:{{first_index:int,intervals:int,duration_s:float,{tally}}},\
             stalls:[{{start_s:float,end_s:float,slow_replies:int,worst_ns:int,timeouts:int,\
             connect_failures:int,down:bool}}],stalls_dropped:int,\
             server:{{version:str,before:{{curr_items:str}},after:{{curr_items:str}},pid:int,\
             schedstat_before:{{on_cpu_ns:int,wait_ns:int,slices:int,threads:int}},\
             schedstat_after:null}},behind:[],\
             members:[{{address:str,weight:int,keys:int,sent:int,replies:int,hits:int,misses:int,\
             errors:{{member_down:int}},lost:int,latency:{HIST},\
             down:[{{start_s:float,marked_s:float,end_s:float,failures:int,connections:int,open:bool}}],\
             server:{{version:str,before:{{}},after:{{}},pid:null,schedstat_before:null,\
             schedstat_after:null}}}}],\
             schedule:{schedule},\
             client_cpu_user_s:float,client_cpu_system_s:float,client_wait_s:float,\
             client_sleeps:int,client_preempted:int,client_busy_polls:int,client_busy_caught:int,\
             client_spins:int,client_spun_s:float,client_spin_sends:int,\
             client_spin_fallbacks:int,client_writes:int,process_cpu_s:float,prefilled_keys:int,prefill_s:float,\
             deleted_keys:int,leftover_keys:int,cancelled:bool,aborted:str,elapsed_s:float,\
             send_lateness:{lateness},late_sends:int,late_threshold_ns:int,\
             samples:{{block:int,\
             sends:{{offered:int,block:[int],t_ns:[int],value_ns:[int]}},\
             replies:{{offered:int,block:[],t_ns:[],value_ns:[]}}}},probe:{probe}}}"
        )
    }

    #[test]
    fn the_record_has_every_name_and_type_in_order() {
        for open in [true, false] {
            let v = serde_json::to_value(outcome(open)).unwrap();
            assert_eq!(json_shape(&v), expected(open), "open loop: {open}");
        }
    }

    #[test]
    fn the_record_carries_the_derived_figures() {
        let v = serde_json::to_value(outcome(true)).unwrap();
        let i = &v["intervals"][0];
        assert_eq!(
            i["ops"],
            serde_json::json!({"get": 3, "multiget": 0, "set": 1, "delete": 0})
        );
        assert_eq!(i["replies"], 4);
        assert_eq!(i["throughput"], 4.0);
        let h = &i["uncorrected"];
        assert_eq!(h["count"], 4);
        assert_eq!(
            h["percentiles"],
            serde_json::json!({"50": 200, "90": 400, "99": 400, "99.9": 400, "max": 400})
        );
        assert_eq!(h["mean"], 250.0);
        assert_eq!(h["max"], 400);
        let back = cachelab_metrics::decode(h["histogram"].as_str().unwrap()).unwrap();
        assert_eq!(back.len(), 4);
        assert_eq!(v["process_cpu_s"], 1.5);
        assert_eq!(v["client_cpu_system_s"], 0.5);
        assert_eq!(v["elapsed_s"], 1.0);
        assert_eq!(v["aborted"], "gave up");
        assert_eq!(v["send_lateness"]["max"], 7);
        assert_eq!(v["samples"]["sends"]["t_ns"], serde_json::json!([5]));
        assert_eq!(v["samples"]["sends"]["value_ns"], serde_json::json!([7]));
        assert_eq!(v["probe"]["rate"], 2.0);
        assert_eq!(v["probe"]["cpu_system_s"], 0.0625);
        // An empty histogram has a mean of 0, not NaN.
        let empty = HistSummary::of(&cachelab_metrics::latency());
        assert_eq!((empty.count, empty.mean, empty.max), (0, 0.0, 0));
    }
}
