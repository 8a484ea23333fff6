//! What a profile run produced, and the record it is written down as: [`Outcome`] implements
//! [`serde::Serialize`], and this module alone decides the record's names and derived figures
//! (Python receives it as nested dicts and lists, and the profile artifact stores it as JSON).
//!
//! ```text
//! {
//!   "cells": [{"op": "floor" | "get" | "set" | "multiget", "value_size", "keys",
//!              "samples", "histogram" (V2 compressed, base64), "errors": {kind: count},
//!              "mismatches", "misses"}, ...],
//!   "server": {"version", "settings": {name: str}, "stats": {name: str}},
//!   "floor_command": "mn" | "version" | "get-miss" | "PING",
//!   "commands": {name: count}, "transport": "tcp" | "tls" | "unix",
//!   "leftover_keys", "cleaned_up_keys", "cancelled", "aborted": str | null, "elapsed_s"
//! }
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Serialize, Serializer};

use crate::cell::Cell;

/// What the server said about itself.
#[derive(Debug, Clone, Default)]
pub struct ServerFacts {
    pub version: String,
    /// `stats settings`.
    pub settings: Vec<(String, String)>,
    /// `stats` before the run.
    pub stats: Vec<(String, String)>,
}

/// A finished (or stopped) profile run.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub cells: Vec<Cell>,
    pub server: ServerFacts,
    /// How the floor was measured: `"mn"`, `"version"` or, through a proxy, `"get-miss"` (a
    /// get of a key never written).
    pub floor_command: &'static str,
    /// Every command the measurement sent (samples, warm-up, floor, the untimed writes,
    /// reads and deletes, the final clean-up), by name (`get`, `ms`, `SET`, `MGET`,
    /// `UNLINK`, `PING` …): what the server's own counters can be held against. The reads
    /// of the server's facts (`stats`, `INFO`, `CONFIG GET`) are not counted.
    pub commands: BTreeMap<&'static str, u64>,
    /// What the samples and the floor ran over: `"tcp"`, `"tls"` or `"unix"`.
    pub transport: &'static str,
    /// Keys written and not deleted, even after the final clean-up.
    pub leftover_keys: u64,
    /// Keys the final clean-up had to delete (their per-sample delete failed).
    pub cleaned_up_keys: u64,
    /// The run was stopped through [`Progress::cancel`](crate::Progress::cancel).
    pub cancelled: bool,
    /// The run gave up because the server went away; the reason.
    pub aborted: Option<String>,
    pub elapsed: Duration,
}

impl Serialize for Outcome {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        OutcomeRecord {
            cells: self.cells.iter().map(CellRecord).collect(),
            server: ServerRecord {
                version: &self.server.version,
                settings: by_name(&self.server.settings),
                stats: by_name(&self.server.stats),
            },
            floor_command: self.floor_command,
            commands: &self.commands,
            transport: self.transport,
            leftover_keys: self.leftover_keys,
            cleaned_up_keys: self.cleaned_up_keys,
            cancelled: self.cancelled,
            aborted: self.aborted.as_deref(),
            elapsed_s: self.elapsed.as_secs_f64(),
        }
        .serialize(s)
    }
}

#[derive(Serialize)]
struct OutcomeRecord<'a> {
    cells: Vec<CellRecord<'a>>,
    server: ServerRecord<'a>,
    floor_command: &'static str,
    commands: &'a BTreeMap<&'static str, u64>,
    transport: &'static str,
    leftover_keys: u64,
    cleaned_up_keys: u64,
    cancelled: bool,
    aborted: Option<&'a str>,
    elapsed_s: f64,
}

#[derive(Serialize)]
struct ServerRecord<'a> {
    version: &'a str,
    settings: BTreeMap<&'a str, &'a str>,
    stats: BTreeMap<&'a str, &'a str>,
}

/// `stats` pairs by name, in name order (of a repeated name, the last).
fn by_name(pairs: &[(String, String)]) -> BTreeMap<&str, &str> {
    pairs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

/// A cell with its histogram encoded and its errors by kind name.
struct CellRecord<'a>(&'a Cell);

impl Serialize for CellRecord<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let c = self.0;
        let errors = Errors(&c.errors);
        let mut st = s.serialize_struct("Cell", 8)?;
        st.serialize_field("op", c.op.as_str())?;
        st.serialize_field("value_size", &c.value_size)?;
        st.serialize_field("keys", &c.keys)?;
        st.serialize_field("samples", &c.hist.len())?;
        st.serialize_field("histogram", &cachelab_metrics::encode(&c.hist))?;
        st.serialize_field("errors", &errors)?;
        st.serialize_field("mismatches", &c.mismatches)?;
        st.serialize_field("misses", &c.misses)?;
        st.end()
    }
}

/// Error counts as `{kind name: count}`, in the order of the kinds.
struct Errors<'a>(&'a BTreeMap<cachelab_client::ErrorKind, u64>);

impl Serialize for Errors<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, n)| (k.as_str(), n)))
    }
}

#[cfg(test)]
mod tests {
    use cachelab_client::ErrorKind;
    use serde_json::json;

    use super::*;
    use crate::cell::Op;

    #[test]
    fn the_record_has_every_name_and_type_in_order() {
        let mut get = Cell::new(Op::Get, 100, 1);
        cachelab_metrics::record(&mut get.hist, 250);
        get.errors.insert(ErrorKind::Timeout, 2);
        get.errors.insert(ErrorKind::ConnectRefused, 1);
        get.misses = 1;
        let o = Outcome {
            cells: vec![Cell::new(Op::Floor, 0, 0), get],
            server: ServerFacts {
                version: "1.6.21".into(),
                settings: vec![
                    ("num_threads".into(), "4".into()),
                    ("evictions".into(), "on".into()),
                ],
                stats: vec![("pid".into(), "1".into())],
            },
            floor_command: "mn",
            commands: [("mn", 2), ("set", 5)].into_iter().collect(),
            transport: "tcp",
            leftover_keys: 0,
            cleaned_up_keys: 3,
            cancelled: false,
            aborted: None,
            elapsed: Duration::from_millis(1500),
        };
        let text = serde_json::to_string(&o).unwrap();
        let hist = |c: &Cell| cachelab_metrics::encode(&c.hist);
        let expected = json!({
            "cells": [
                {"op": "floor", "value_size": 0, "keys": 0, "samples": 0,
                 "histogram": hist(&o.cells[0]), "errors": {}, "mismatches": 0, "misses": 0},
                {"op": "get", "value_size": 100, "keys": 1, "samples": 1,
                 "histogram": hist(&o.cells[1]),
                 "errors": {"connect_refused": 1, "timeout": 2}, "mismatches": 0, "misses": 1},
            ],
            "server": {"version": "1.6.21", "settings": {"evictions": "on", "num_threads": "4"},
                       "stats": {"pid": "1"}},
            "floor_command": "mn",
            "commands": {"mn": 2, "set": 5},
            "transport": "tcp",
            "leftover_keys": 0,
            "cleaned_up_keys": 3,
            "cancelled": false,
            "aborted": null,
            "elapsed_s": 1.5,
        });
        // The same text: names, order, and integers written as integers, times as floats.
        assert_eq!(text, expected.to_string());
    }
}
