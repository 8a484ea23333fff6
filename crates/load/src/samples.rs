//! What the validity checks need beyond the intervals, in bounded memory: how late each
//! open-loop request left (its intended send time to its actual send: the client's own
//! queueing), and evenly spaced blocks of consecutive send times and of consecutive latencies.
//!
//! A [`Reservoir`] keeps *blocks* of [`BLOCK`] consecutive samples, so that gaps between sends
//! and lag-k pairs of latencies are those of neighbours in the run, not of samples far apart.
//! It keeps every block until it is full, then every other block, every fourth, and so on:
//! the blocks it holds are always evenly spread over the run so far, and it never holds more
//! than its capacity. Deciding whether a sample is kept is a shift and a mask.

use cachelab_metrics::Latency;

/// Consecutive samples in a block (a power of two).
pub const BLOCK: usize = 1024;
const BLOCK_SHIFT: u32 = BLOCK.trailing_zeros();

/// Samples kept per kind over the whole run (divided among the client threads).
pub const SAMPLES: usize = 32 * BLOCK;

/// A send that left this much after its intended time (ns) or more is counted as late.
pub const LATE_NS: u64 = 1_000_000;

/// Evenly spread blocks of consecutive samples, each a time (ns after the run start) and a
/// value.
#[derive(Debug, Clone, Default)]
pub struct Reservoir {
    cap: usize,
    /// Blocks whose index is a multiple of this are kept (a power of two).
    stride: u64,
    /// Samples offered so far.
    seq: u64,
    /// Each kept sample's block (the thread's index in the high 16 bits once merged).
    pub block: Vec<u64>,
    pub t_ns: Vec<u64>,
    pub value: Vec<u64>,
}

impl Reservoir {
    /// A reservoir of at most `cap` samples (rounded up to whole blocks, at least two).
    pub fn new(cap: usize) -> Reservoir {
        Reservoir {
            cap: cap.div_ceil(BLOCK).max(2) * BLOCK,
            stride: 1,
            ..Reservoir::default()
        }
    }

    /// Counts one sample; its block index when it is to be kept (then [`Reservoir::keep`]).
    #[inline]
    pub fn offer(&mut self) -> Option<u64> {
        let b = self.seq >> BLOCK_SHIFT;
        self.seq += 1;
        (b & (self.stride - 1) == 0).then_some(b)
    }

    /// Keeps a sample of block `b` (from [`Reservoir::offer`]); when full, thins first.
    pub fn keep(&mut self, b: u64, t_ns: u64, value: u64) {
        if self.block.len() >= self.cap {
            self.stride *= 2;
            let stride = self.stride;
            let mut w = 0;
            for r in 0..self.block.len() {
                if self.block[r].is_multiple_of(stride) {
                    self.block[w] = self.block[r];
                    self.t_ns[w] = self.t_ns[r];
                    self.value[w] = self.value[r];
                    w += 1;
                }
            }
            self.block.truncate(w);
            self.t_ns.truncate(w);
            self.value.truncate(w);
            if !b.is_multiple_of(stride) {
                return;
            }
        }
        self.block.push(b);
        self.t_ns.push(t_ns);
        self.value.push(value);
    }

    /// Another thread's samples, their blocks tagged with `thread` so they stay apart.
    pub fn append(&mut self, mut o: Reservoir, thread: usize) {
        self.block
            .extend(o.block.iter().map(|&b| ((thread as u64) << 48) | b));
        self.t_ns.append(&mut o.t_ns);
        self.value.append(&mut o.value);
        self.seq += o.seq;
    }

    /// Samples offered in all.
    pub fn offered(&self) -> u64 {
        self.seq
    }
}

/// A thread's (or the run's) record of its sends and replies after the warm-up.
#[derive(Debug, Clone)]
pub struct ClientSamples {
    /// Open loop: each send's lateness (actual minus intended send time), ns.
    pub lateness: Latency,
    /// Sends at least [`LATE_NS`] late.
    pub late: u64,
    /// Open loop: send times (ns after the run start); value: the lateness.
    pub sends: Reservoir,
    /// Replies, in the order they came: the request's send time (intended in open loop)
    /// and its latency (corrected in open loop).
    pub replies: Reservoir,
}

impl ClientSamples {
    pub fn new(cap: usize) -> ClientSamples {
        ClientSamples {
            lateness: cachelab_metrics::latency(),
            late: 0,
            sends: Reservoir::new(cap),
            replies: Reservoir::new(cap),
        }
    }

    /// A send at `t_ns` (after the run start), `late_ns` after its intended time.
    #[inline]
    pub fn send(&mut self, t_ns: u64, late_ns: u64) {
        cachelab_metrics::record(&mut self.lateness, late_ns);
        if late_ns >= LATE_NS {
            self.late += 1;
        }
        if let Some(b) = self.sends.offer() {
            self.sends.keep(b, t_ns, late_ns);
        }
    }

    /// Merges thread `thread`'s record into this one.
    pub fn add(&mut self, o: ClientSamples, thread: usize) {
        self.lateness.add(&o.lateness).expect("same bounds");
        self.late += o.late;
        self.sends.append(o.sends, thread);
        self.replies.append(o.replies, thread);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reservoir_stays_bounded_and_keeps_whole_blocks_spread_over_the_run() {
        let mut r = Reservoir::new(4 * BLOCK);
        let n = 37 * BLOCK as u64 + 5;
        for i in 0..n {
            if let Some(b) = r.offer() {
                r.keep(b, i, i * 2);
            }
        }
        assert!(r.block.len() <= 4 * BLOCK);
        // 37 blocks seen: stride 16 keeps blocks 0, 16 and 32, each whole.
        let mut blocks: Vec<u64> = r.block.clone();
        blocks.dedup();
        assert_eq!(blocks, vec![0, 16, 32]);
        assert_eq!(r.block.len(), 3 * BLOCK);
        for (i, (&b, &t)) in r.block.iter().zip(&r.t_ns).enumerate() {
            assert_eq!(t >> BLOCK_SHIFT, b, "sample {i} is of its block");
        }
        // Consecutive within a block, and the values travel with their times.
        assert!(r.t_ns.windows(2).all(|w| w[1] > w[0]));
        assert!(r.t_ns.iter().zip(&r.value).all(|(&t, &v)| v == 2 * t));
        assert_eq!(r.offered(), n);
    }

    #[test]
    fn merged_threads_keep_their_blocks_apart() {
        let mut a = Reservoir::new(2 * BLOCK);
        let mut b = Reservoir::new(2 * BLOCK);
        for i in 0..10 {
            for r in [&mut a, &mut b] {
                if let Some(k) = r.offer() {
                    r.keep(k, i, i);
                }
            }
        }
        let mut all = Reservoir::new(0);
        all.append(a, 0);
        all.append(b, 3);
        assert_eq!(all.block.len(), 20);
        assert_eq!(all.block[10], 3 << 48);
        assert_eq!(all.offered(), 20);
    }

    #[test]
    fn late_sends_are_counted_from_the_threshold() {
        let mut c = ClientSamples::new(BLOCK);
        c.send(10, LATE_NS - 1);
        c.send(20, LATE_NS);
        c.send(30, 5);
        assert_eq!(c.late, 1);
        assert_eq!(c.lateness.len(), 3);
        assert_eq!(c.sends.t_ns, vec![10, 20, 30]);
    }
}
