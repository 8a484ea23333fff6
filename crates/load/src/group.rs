//! The bookkeeping of multi-gets split over a pool: a multi-get whose keys live on several
//! members is sent as one `get` per member (its *parts*), and is done when its last part is.
//!
//! Each split multi-get takes a [`Group`] from a slab that keeps its freed entries on a free
//! list, so the hot path allocates nothing once the slab has grown to the most multi-gets a
//! connection has in flight. A part carries its group's index; when a part's reply (or its
//! loss) comes in, [`Groups::part_done`] folds it in and, for the last part, hands back the
//! whole multi-get's outcome and frees the entry.

use std::time::Instant;

use crate::fault::Fault;
use crate::pacing::ns;
use crate::recorder::Recorder;
use crate::series::MULTIGET;

/// What a finished multi-get amounts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Done {
    /// Every part answered: the keys asked, the keys found (summed over the parts).
    Replied { keys: u32, hits: u32 },
    /// A part failed (an error reply, or its member was down): the first such failure.
    Failed(Fault),
    /// A part was in flight on a connection that failed.
    Lost,
}

/// One split multi-get in flight.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Group {
    /// When it was due (open loop) or sent (closed loop).
    pub intended: Instant,
    /// When its parts were encoded.
    pub sent: Instant,
    keys: u32,
    hits: u32,
    /// Parts still outstanding.
    parts: u32,
    failed: Option<Fault>,
    lost: bool,
}

/// The split multi-gets of one connection.
#[derive(Debug, Default)]
pub(crate) struct Groups {
    slab: Vec<Group>,
    free: Vec<u32>,
}

impl Groups {
    pub fn with_capacity(n: usize) -> Groups {
        Groups {
            slab: Vec::with_capacity(n),
            free: Vec::with_capacity(n),
        }
    }

    /// A new multi-get of `keys` keys in `parts` parts; its index for the parts to carry.
    pub fn open(&mut self, keys: u32, parts: u32, intended: Instant, sent: Instant) -> u32 {
        let g = Group {
            intended,
            sent,
            keys,
            hits: 0,
            parts,
            failed: None,
            lost: false,
        };
        match self.free.pop() {
            Some(i) => {
                self.slab[i as usize] = g;
                i
            }
            None => {
                self.slab.push(g);
                (self.slab.len() - 1) as u32
            }
        }
    }

    /// Part of group `i` is done: it found `hits` keys (`Ok`), failed, or was lost (`None`).
    /// For the group's last part, its outcome and the group (whose entry is freed).
    pub fn part_done(
        &mut self,
        i: u32,
        outcome: Option<Result<u32, Fault>>,
    ) -> Option<(Done, Group)> {
        let g = &mut self.slab[i as usize];
        debug_assert!(g.parts > 0, "a part of a finished group");
        match outcome {
            Some(Ok(hits)) => g.hits += hits,
            Some(Err(f)) => {
                g.failed.get_or_insert(f);
            }
            None => g.lost = true,
        }
        g.parts -= 1;
        if g.parts > 0 {
            return None;
        }
        let g = *g;
        self.free.push(i);
        let done = if g.lost {
            Done::Lost
        } else if let Some(f) = g.failed {
            Done::Failed(f)
        } else {
            Done::Replied {
                keys: g.keys,
                hits: g.hits.min(g.keys),
            }
        };
        Some((done, g))
    }

    /// Groups in flight.
    #[cfg(test)]
    pub fn open_count(&self) -> usize {
        self.slab.len() - self.free.len()
    }
}

/// Records a split multi-get whose last part is in: one reply (latency from its intended
/// time and from its send to now, its slowest part), one error, or one lost request.
pub(crate) fn finish_group(rec: &mut Recorder, now: Instant, done: Done, g: Group) {
    match done {
        Done::Replied { keys, hits } => rec.reply(
            now,
            MULTIGET,
            keys,
            hits,
            ns(now, g.intended),
            ns(now, g.sent),
        ),
        Done::Failed(f) => rec.fault(f),
        Done::Lost => rec.lost(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_is_done_with_its_last_part_and_sums_the_hits() {
        let mut g = Groups::default();
        let t = Instant::now();
        let a = g.open(10, 3, t, t);
        assert_eq!(g.part_done(a, Some(Ok(2))).map(|x| x.0), None);
        assert_eq!(g.part_done(a, Some(Ok(4))).map(|x| x.0), None);
        let (done, group) = g.part_done(a, Some(Ok(3))).expect("last part");
        assert_eq!(done, Done::Replied { keys: 10, hits: 9 });
        assert_eq!(group.sent, t);
        assert_eq!(g.open_count(), 0);
    }

    #[test]
    fn a_failed_or_lost_part_decides_the_outcome() {
        let mut g = Groups::default();
        let t = Instant::now();
        let a = g.open(6, 2, t, t);
        let b = g.open(6, 2, t, t);
        assert!(g.part_done(a, Some(Err(Fault::MemberDown))).is_none());
        assert!(g.part_done(b, None).is_none());
        assert_eq!(g.open_count(), 2);
        assert_eq!(
            g.part_done(a, Some(Ok(3))).unwrap().0,
            Done::Failed(Fault::MemberDown)
        );
        // Lost wins over a failure: the request never finished.
        assert_eq!(
            g.part_done(b, Some(Err(Fault::ServerError))).unwrap().0,
            Done::Lost
        );
    }

    #[test]
    fn freed_entries_are_reused_so_the_slab_stops_growing() {
        let mut g = Groups::with_capacity(4);
        let t = Instant::now();
        for round in 0..1000u32 {
            let ids: Vec<u32> = (0..4).map(|_| g.open(4, 2, t, t)).collect();
            for &i in &ids {
                assert!(g.part_done(i, Some(Ok(1))).is_none());
            }
            for &i in ids.iter().rev() {
                let (done, _) = g.part_done(i, Some(Ok(round % 2))).unwrap();
                assert_eq!(
                    done,
                    Done::Replied {
                        keys: 4,
                        hits: 1 + round % 2
                    }
                );
            }
        }
        assert_eq!(g.slab.len(), 4, "entries are reused");
        assert_eq!(g.open_count(), 0);
    }

    #[test]
    fn hits_never_exceed_the_keys_asked() {
        let mut g = Groups::default();
        let t = Instant::now();
        let a = g.open(2, 1, t, t);
        assert_eq!(
            g.part_done(a, Some(Ok(5))).unwrap().0,
            Done::Replied { keys: 2, hits: 2 }
        );
    }
}
