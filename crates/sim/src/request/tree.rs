//! Walks of the topic tree: what a prefetch at a topic fetches, listed once per topic.

use super::trace::RequestTrace;

/// Breadth-first walks of the topic tree (which may have cycles or shared children).
pub(crate) struct Walker {
    walked: Vec<u32>,
    id: u32,
    frontier: Vec<u32>,
    next: Vec<u32>,
}

impl Walker {
    pub(crate) fn new(n_items: usize) -> Walker {
        Walker {
            walked: vec![0; n_items],
            id: 0,
            frontier: Vec::new(),
            next: Vec::new(),
        }
    }

    /// Appends to `out` the descendants of `topic` down to `depth` (children are depth 1) in
    /// the order a prefetch visits them: level by level, children in catalog order, each
    /// item once, `topic` itself left out.
    pub(crate) fn walk(
        &mut self,
        trace: &RequestTrace,
        topic: u32,
        depth: u32,
        out: &mut Vec<u32>,
    ) {
        self.id = self.id.wrapping_add(1);
        if self.id == 0 {
            self.walked.fill(0);
            self.id = 1;
        }
        let id = self.id;
        self.walked[topic as usize] = id;
        self.frontier.clear();
        self.frontier.push(topic);
        for level in 1..=depth {
            self.next.clear();
            for &p in &self.frontier {
                for &ch in trace.children(p) {
                    if self.walked[ch as usize] == id {
                        continue;
                    }
                    self.walked[ch as usize] = id;
                    out.push(ch);
                    if level < depth {
                        self.next.push(ch);
                    }
                }
            }
            if self.next.is_empty() {
                break;
            }
            std::mem::swap(&mut self.frontier, &mut self.next);
        }
    }
}

/// The descendants (see [`Walker::walk`]) to one depth of the topics some request prefetches.
pub(crate) struct Descendants {
    pub(crate) depth: u32,
    /// By item: its index in `offsets`, or `u32::MAX` when not listed.
    index: Vec<u32>,
    /// Listed topic `k` has `items[offsets[k]..offsets[k + 1]]`.
    offsets: Vec<usize>,
    items: Vec<u32>,
}

impl Descendants {
    /// Lists the descendants of the first topic of each request (the one a prefetch strategy
    /// expands), stopping once the lists reach `budget` entries in all; topics left out are
    /// walked when prefetched.
    pub(crate) fn new(trace: &RequestTrace, depth: u32, budget: usize) -> Descendants {
        let mut d = Descendants {
            depth,
            index: vec![u32::MAX; trace.n_items()],
            offsets: vec![0],
            items: Vec::new(),
        };
        let mut walker = Walker::new(trace.n_items());
        for r in 0..trace.len() {
            let Some(&topic) = trace.touches(r).iter().find(|&&i| trace.is_topic(i)) else {
                continue;
            };
            if d.index[topic as usize] != u32::MAX {
                continue;
            }
            let before = d.items.len();
            walker.walk(trace, topic, depth, &mut d.items);
            if d.items.len() > budget {
                d.items.truncate(before);
                break;
            }
            d.index[topic as usize] = (d.offsets.len() - 1) as u32;
            d.offsets.push(d.items.len());
        }
        d.items.shrink_to_fit();
        d
    }

    /// Topics listed.
    pub(crate) fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Where `topic` is listed, if it is.
    #[inline]
    pub(crate) fn find(&self, topic: u32) -> Option<usize> {
        let k = *self.index.get(topic as usize)?;
        (k != u32::MAX).then_some(k as usize)
    }

    /// The descendants of listed topic `k`.
    #[inline]
    pub(crate) fn list(&self, k: usize) -> &[u32] {
        &self.items[self.offsets[k]..self.offsets[k + 1]]
    }
}
