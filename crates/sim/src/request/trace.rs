//! A request trace held as integer columns: a catalog of items (size, children) and requests
//! (time, instance, route, base latency, the ordered items each touches).
//!
//! Text and Parquet parsing happen in Python; this module only checks that the columns agree
//! with each other and turns instance and route codes into dense indices.

use std::collections::HashMap;

/// An item is a topic when it has children.
#[derive(Debug, Clone)]
pub struct RequestTrace {
    pub(crate) item_sizes: Vec<u64>,
    pub(crate) child_offsets: Vec<u32>,
    pub(crate) child_items: Vec<u32>,
    pub(crate) time: Vec<f64>,
    /// Dense instance index (0..n_instances) per request.
    pub(crate) instance: Vec<u32>,
    pub(crate) n_instances: usize,
    /// The caller's code of each dense instance index.
    pub(crate) instance_codes: Vec<u32>,
    /// Dense route index per request; `route_codes[index]` is the caller's code.
    pub(crate) route: Vec<u32>,
    pub(crate) route_codes: Vec<u32>,
    pub(crate) base_ms: Vec<f64>,
    pub(crate) touch_offsets: Vec<u64>,
    pub(crate) touch_items: Vec<u32>,
}

/// The columns a [`RequestTrace`] is built from.
#[derive(Debug, Clone, Default)]
pub struct TraceColumns {
    /// Value size of each item, bytes.
    pub item_sizes: Vec<u64>,
    /// Children of item `i` are `child_items[child_offsets[i]..child_offsets[i + 1]]`;
    /// `items + 1` entries (an empty vector means no item has children).
    pub child_offsets: Vec<u32>,
    pub child_items: Vec<u32>,
    /// Request time, seconds (any order: the train split sorts by it).
    pub time: Vec<f64>,
    /// App instance code per request (any `u32`; each distinct code has its own L1).
    pub instance: Vec<u32>,
    /// Route code per request (names stay with the caller).
    pub route: Vec<u32>,
    /// Latency of the request without memcached, ms, > 0.
    pub base_ms: Vec<f64>,
    /// Items touched by request `r` are `touch_items[touch_offsets[r]..touch_offsets[r + 1]]`,
    /// in order; `requests + 1` entries.
    pub touch_offsets: Vec<u64>,
    pub touch_items: Vec<u32>,
}

fn check_offsets<T: Copy + Into<u64>>(
    name: &str,
    offsets: &[T],
    rows: usize,
    values: usize,
) -> Result<(), String> {
    if offsets.len() != rows + 1 {
        return Err(format!(
            "{name} has {} entries, expected {} (one more than the number of rows)",
            offsets.len(),
            rows + 1
        ));
    }
    if offsets[0].into() != 0 {
        return Err(format!("{name}[0] must be 0"));
    }
    if let Some(i) = (1..offsets.len()).find(|&i| offsets[i].into() < offsets[i - 1].into()) {
        return Err(format!("{name} decreases at index {i}"));
    }
    let last = offsets[rows].into();
    if last != values as u64 {
        return Err(format!(
            "{name} ends at {last} but there are {values} entries to index"
        ));
    }
    Ok(())
}

fn dense(codes: &[u32]) -> (Vec<u32>, Vec<u32>) {
    let mut index: HashMap<u32, u32> = HashMap::new();
    let mut order = Vec::new();
    let dense = codes
        .iter()
        .map(|&c| {
            *index.entry(c).or_insert_with(|| {
                order.push(c);
                (order.len() - 1) as u32
            })
        })
        .collect();
    (dense, order)
}

impl RequestTrace {
    /// Checks and takes the columns. Errors are one plain sentence naming the column.
    pub fn new(c: TraceColumns) -> Result<RequestTrace, String> {
        RequestTrace::build(c, dense)
    }

    /// [`RequestTrace::new`] for one part of a longer trace: dense instance indices continue
    /// those of the earlier parts (`known`: code -> index, `codes`: index -> code, both
    /// extended), so instances are numbered by first appearance in the whole trace.
    pub(crate) fn part(
        c: TraceColumns,
        known: &mut HashMap<u32, u32>,
        codes: &mut Vec<u32>,
    ) -> Result<RequestTrace, String> {
        RequestTrace::build(c, |instance| {
            let dense = instance
                .iter()
                .map(|&c| {
                    *known.entry(c).or_insert_with(|| {
                        codes.push(c);
                        (codes.len() - 1) as u32
                    })
                })
                .collect();
            (dense, codes.clone())
        })
    }

    fn build(
        c: TraceColumns,
        dense_instances: impl FnOnce(&[u32]) -> (Vec<u32>, Vec<u32>),
    ) -> Result<RequestTrace, String> {
        let items = c.item_sizes.len();
        if items > u32::MAX as usize {
            return Err(format!("{items} items is more than the 2^32 - 1 supported"));
        }
        let mut child_offsets = c.child_offsets;
        if child_offsets.is_empty() && c.child_items.is_empty() {
            child_offsets = vec![0; items + 1];
        }
        check_offsets("child_offsets", &child_offsets, items, c.child_items.len())?;
        if let Some((i, &x)) = c
            .child_items
            .iter()
            .enumerate()
            .find(|(_, &x)| x as usize >= items)
        {
            return Err(format!(
                "child_items[{i}] = {x} is not an item index (there are {items} items)"
            ));
        }
        let n = c.time.len();
        if n >= u32::MAX as usize {
            return Err(format!("{n} requests is more than the 2^32 - 2 supported"));
        }
        for (name, len) in [
            ("instance", c.instance.len()),
            ("route", c.route.len()),
            ("base_ms", c.base_ms.len()),
        ] {
            if len != n {
                return Err(format!("{name} has {len} entries but time has {n}"));
            }
        }
        if let Some(i) = c.time.iter().position(|t| !t.is_finite()) {
            return Err(format!("time[{i}] = {} is not a finite number", c.time[i]));
        }
        if let Some(i) = c.base_ms.iter().position(|b| !(b.is_finite() && *b > 0.0)) {
            return Err(format!(
                "base_ms[{i}] = {} must be a positive number of milliseconds",
                c.base_ms[i]
            ));
        }
        check_offsets("touch_offsets", &c.touch_offsets, n, c.touch_items.len())?;
        if let Some((i, &x)) = c
            .touch_items
            .iter()
            .enumerate()
            .find(|(_, &x)| x as usize >= items)
        {
            return Err(format!(
                "touch_items[{i}] = {x} is not an item index (there are {items} items)"
            ));
        }
        let (instance, instance_codes) = dense_instances(&c.instance);
        let (route, route_codes) = dense(&c.route);
        Ok(RequestTrace {
            item_sizes: c.item_sizes,
            child_offsets,
            child_items: c.child_items,
            time: c.time,
            instance,
            n_instances: instance_codes.len(),
            instance_codes,
            route,
            route_codes,
            base_ms: c.base_ms,
            touch_offsets: c.touch_offsets,
            touch_items: c.touch_items,
        })
    }

    /// Number of requests.
    pub fn len(&self) -> usize {
        self.time.len()
    }

    /// True without requests.
    pub fn is_empty(&self) -> bool {
        self.time.is_empty()
    }

    /// Number of catalog items.
    pub fn n_items(&self) -> usize {
        self.item_sizes.len()
    }

    /// Number of item touches over all requests.
    pub fn n_touches(&self) -> usize {
        self.touch_items.len()
    }

    /// Number of distinct app instances.
    pub fn n_instances(&self) -> usize {
        self.n_instances
    }

    /// The items request `r` touches, in order.
    #[inline]
    pub fn touches(&self, r: usize) -> &[u32] {
        &self.touch_items[self.touch_offsets[r] as usize..self.touch_offsets[r + 1] as usize]
    }

    /// The children of item `i`.
    #[inline]
    pub fn children(&self, i: u32) -> &[u32] {
        let i = i as usize;
        &self.child_items[self.child_offsets[i] as usize..self.child_offsets[i + 1] as usize]
    }

    /// True when item `i` has children.
    #[inline]
    pub fn is_topic(&self, i: u32) -> bool {
        let i = i as usize;
        self.child_offsets[i + 1] > self.child_offsets[i]
    }

    /// Latency of request `r` without memcached, ms.
    pub fn base_ms(&self, r: usize) -> f64 {
        self.base_ms[r]
    }

    /// Value size of item `i`, bytes.
    #[inline]
    pub fn size(&self, i: u32) -> u64 {
        self.item_sizes[i as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn columns() -> TraceColumns {
        TraceColumns {
            item_sizes: vec![10, 20, 30],
            child_offsets: vec![0, 2, 2, 2],
            child_items: vec![1, 2],
            time: vec![0.0, 1.0],
            instance: vec![7, 9],
            route: vec![3, 3],
            base_ms: vec![10.0, 20.0],
            touch_offsets: vec![0, 2, 3],
            touch_items: vec![0, 1, 2],
        }
    }

    #[test]
    fn builds_and_indexes() {
        let t = RequestTrace::new(columns()).unwrap();
        assert_eq!(
            (t.len(), t.n_items(), t.n_touches(), t.n_instances()),
            (2, 3, 3, 2)
        );
        assert_eq!(t.touches(0), &[0, 1]);
        assert_eq!(t.children(0), &[1, 2]);
        assert!(t.is_topic(0) && !t.is_topic(1));
        assert_eq!(t.route_codes, vec![3]);
    }

    #[test]
    fn empty_children_columns_mean_no_topics() {
        let mut c = columns();
        c.child_offsets.clear();
        c.child_items.clear();
        let t = RequestTrace::new(c).unwrap();
        assert!(!t.is_topic(0));
    }

    #[test]
    fn rejects_inconsistent_columns() {
        type Edit = fn(&mut TraceColumns);
        let cases: [(Edit, &str); 9] = [
            (|c| c.route.push(1), "route has 3 entries"),
            (|c| c.touch_items[1] = 3, "touch_items[1] = 3"),
            (|c| c.child_items[0] = 5, "child_items[0] = 5"),
            (
                |c| c.touch_offsets = vec![0, 3],
                "touch_offsets has 2 entries",
            ),
            (|c| c.touch_offsets = vec![0, 3, 2], "decreases at index 2"),
            (
                |c| c.touch_offsets = vec![1, 2, 3],
                "touch_offsets[0] must be 0",
            ),
            (|c| c.child_offsets = vec![0, 2, 2, 1], "decreases"),
            (|c| c.base_ms[0] = 0.0, "base_ms[0]"),
            (|c| c.time[1] = f64::NAN, "time[1]"),
        ];
        for (edit, why) in cases {
            let mut c = columns();
            edit(&mut c);
            let e = RequestTrace::new(c).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
    }
}
