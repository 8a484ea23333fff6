//! `prefetch-children` / `prefetch:depth=D`: at the first touch of a topic in a request (the
//! page's own topic), one multi-get for the topic, if missing, and its descendants to depth D
//! that neither the fixed set nor the instance's cache holds and the request has not looked up
//! yet. They go into the cache and are marked present: the request's later lookups of them are
//! prefetch hits. A request prefetches once. `prefetch-children` is depth 1.

use super::super::trace::RequestTrace;
use super::super::tree::{Descendants, Walker};
use super::{Cache, Fetch, ItemState, Marks, Prefetch};

/// A prefetch to a depth, during one part of a trace.
pub(crate) struct Depth<'r> {
    depth: u32,
    trace: &'r RequestTrace,
    /// The descendants to `depth` the plan lists (topics not listed are walked).
    listed: Option<&'r Descendants>,
    walker: &'r mut Walker,
    /// For a cache that holds nothing, by listed topic: the number and bytes of its listed
    /// descendants not in the fixed set, summed on the topic's first prefetch (`u32::MAX`
    /// keys: not yet).
    unfixed: Vec<(u32, u64)>,
    scratch: Vec<u32>,
    batch: Vec<u32>,
    /// Items the request looked up before its prefetch (for a cache that holds nothing).
    firsts: Vec<u32>,
    /// The request has prefetched.
    prefetched: bool,
    walked: u32,
    topic_hit: bool,
}

impl<'r> Depth<'r> {
    /// `holds`: whether the instances' cache can hold anything.
    pub(crate) fn new(
        depth: u32,
        trace: &'r RequestTrace,
        listed: Option<&'r Descendants>,
        walker: &'r mut Walker,
        holds: bool,
    ) -> Depth<'r> {
        let unfixed = match (holds, listed) {
            (false, Some(d)) => vec![(u32::MAX, 0); d.len()],
            _ => Vec::new(),
        };
        Depth {
            depth,
            trace,
            listed,
            walker,
            unfixed,
            scratch: Vec::new(),
            batch: Vec::new(),
            firsts: Vec::new(),
            prefetched: false,
            walked: 0,
            topic_hit: false,
        }
    }
}

/// The number and bytes of the descendants in `list` that are not in the fixed set.
fn unfixed_totals(items: &[ItemState], trace: &RequestTrace, list: &[u32]) -> (u32, u64) {
    let (mut keys, mut bytes) = (0u32, 0u64);
    for &ch in list {
        let s = items[ch as usize];
        if !s.is_fixed() {
            keys += 1;
            bytes += s.size(trace, ch);
        }
    }
    (keys, bytes)
}

impl Depth<'_> {
    /// The request's prefetch at topic `item` (see [`Prefetch::at`]).
    #[inline]
    fn fetch<C: Cache>(
        &mut self,
        cache: &mut C,
        items: &mut [ItemState],
        marks: Marks,
        item: u32,
        st: ItemState,
        missing: bool,
    ) -> Fetch {
        self.prefetched = true;
        self.topic_hit = !missing;
        let trace = self.trace;
        let Marks { present, touched } = marks;
        let (mut keys, mut fetched) = (0u64, 0u64);
        if missing {
            keys += 1;
            fetched += st.size(trace, item);
        }
        if !C::HOLDS {
            // A cache that holds nothing: the prefetch does not read the state of the
            // descendants it fetches. It takes the number and bytes of those not in the fixed
            // set (summed once per topic and part), less those this request already looked
            // up, and marks them all present without looking (a lookup checks the fixed set
            // first).
            let found = self.listed.and_then(|d| d.find(item));
            let (list, (n, b)) = match (self.listed, found) {
                (Some(d), Some(t)) => {
                    let list = d.list(t);
                    if self.unfixed[t].0 == u32::MAX {
                        self.unfixed[t] = unfixed_totals(items, trace, list);
                    }
                    (list, self.unfixed[t])
                }
                _ => {
                    self.scratch.clear();
                    self.walker.walk(trace, item, self.depth, &mut self.scratch);
                    (
                        &self.scratch[..],
                        unfixed_totals(items, trace, &self.scratch),
                    )
                }
            };
            self.walked = 1 + list.len() as u32;
            // Nothing is evicted, so a descendant is fetched unless it is fixed or this
            // request looked it up before (the topic itself is not among its descendants).
            // Mark them all present; of the items looked up before, those now marked are in
            // the list: not fetched again, and marked touched back.
            for &ch in list {
                items[ch as usize].mark = present;
            }
            let (mut n, mut b) = (u64::from(n), b);
            for &x in &self.firsts {
                let sx = &mut items[x as usize];
                if sx.mark == present {
                    sx.mark = touched;
                    if !sx.is_fixed() {
                        n -= 1;
                        b -= sx.size(trace, x);
                    }
                }
            }
            keys += n;
            fetched += b;
        } else {
            // Every descendant is looked up in the cache (refreshing hits) before any fill can
            // evict one; only the fetched ones are marked present.
            let list = match self.listed.and_then(|d| d.find(item)) {
                Some(t) => self.listed.map_or(&[][..], |d| d.list(t)),
                None => {
                    self.scratch.clear();
                    self.walker.walk(trace, item, self.depth, &mut self.scratch);
                    &self.scratch[..]
                }
            };
            self.walked = 1 + list.len() as u32;
            self.batch.clear();
            if missing {
                self.batch.push(item);
            }
            for &ch in list {
                let sc = items[ch as usize];
                if (sc.mark | 1) == touched || sc.is_fixed() {
                    continue;
                }
                if !cache.lookup(ch, sc.node) {
                    self.batch.push(ch);
                }
            }
            keys = self.batch.len() as u64;
            for (x, &b) in self.batch.iter().enumerate() {
                let sb = &mut items[b as usize];
                let size = sb.size(trace, b);
                // The topic (first, when missing) is counted above.
                if x > 0 || !missing {
                    fetched += size;
                    sb.mark = present;
                }
                sb.node = cache.fill(b, size);
            }
        }
        Fetch {
            keys,
            bytes: fetched,
        }
    }
}

impl Prefetch for Depth<'_> {
    #[inline]
    fn start(&mut self) {
        self.prefetched = false;
        self.walked = 0;
        self.topic_hit = false;
        self.firsts.clear();
    }

    // Called at every first touch: its checks are always inlined in the walk (the prefetch
    // itself runs once a request).
    #[inline(always)]
    fn at<C: Cache>(
        &mut self,
        cache: &mut C,
        items: &mut [ItemState],
        marks: Marks,
        item: u32,
        st: ItemState,
        missing: bool,
    ) -> Option<Fetch> {
        if self.prefetched {
            return None;
        }
        if !st.is_topic() {
            if !C::HOLDS {
                self.firsts.push(item);
            }
            return None;
        }
        Some(self.fetch(cache, items, marks, item, st, missing))
    }

    #[inline]
    fn ahead<C: Cache>(&self, items: &[ItemState], next: &[u32]) {
        // With a cache that holds, the prefetch at the next request's first topic reads the
        // state of each listed descendant: start loading them in one burst.
        let Some(d) = self.listed.filter(|_| C::HOLDS) else {
            return;
        };
        let topic = next.iter().find(|&&a| items[a as usize].is_topic());
        if let Some(list) = topic.and_then(|&t| d.find(t)).map(|t| d.list(t)) {
            let mut keep = 0;
            for &ch in list {
                keep ^= items[ch as usize].mark;
            }
            std::hint::black_box(keep);
        }
    }

    #[inline]
    fn record(&self) -> (u32, bool) {
        (self.walked, self.topic_hit)
    }
}
