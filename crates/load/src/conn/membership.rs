//! Which member a request goes to: the pool's membership in force (changed during the run by
//! the spec's membership changes), and, with `remap`, the distribution over the members not
//! marked down on this connection.

use std::time::{Duration, Instant};

use cachelab_client::pool::Distribution;

use super::Conn;
use crate::member::Link;
use crate::wire;

/// The distribution over the members of membership `epoch` not in `marked` (a bitset of
/// member indices), and those members (its server indices are positions in `members`).
pub(crate) struct Remap {
    epoch: usize,
    marked: u64,
    map: Option<Distribution>,
    members: Vec<usize>,
    key: Vec<u8>,
}

impl Conn {
    /// The next membership is in force: members that join start connecting; the next change
    /// is due.
    pub(super) fn change_membership(&mut self, now: Instant) {
        let sh = std::sync::Arc::clone(&self.ctx.shared);
        let routes = &sh.routes;
        let epoch = routes.epoch_at(now.saturating_duration_since(sh.t0));
        if epoch == self.epoch {
            return;
        }
        self.epoch = epoch;
        for &m in &routes.epochs[epoch].active {
            let member = &mut self.members[m];
            if matches!(member.link, Link::Idle(at) if at > now + Duration::from_secs(3600)) {
                member.link = Link::Idle(now);
            }
        }
        self.next_change = routes.epochs.get(epoch + 1).map(|e| sh.t0 + e.from);
    }

    /// The member key `k` goes to now.
    #[inline]
    pub(super) fn route(&mut self, k: u64) -> usize {
        let m = self.ctx.shared.routes.member_in(self.epoch, k);
        if !self.members[m].marked || !self.ctx.shared.spec.pool.remap {
            return m;
        }
        self.remapped(k, m)
    }

    /// Key `k`, whose member `m` is marked down, under `remap`: the member the distribution
    /// over the members not marked down picks (`m` itself when every member is marked).
    #[cold]
    fn remapped(&mut self, k: u64, m: usize) -> usize {
        let marked = self
            .members
            .iter()
            .enumerate()
            .filter(|(_, x)| x.marked)
            .fold(0u64, |acc, (i, _)| acc | 1 << i);
        let epoch = self.epoch;
        if self
            .remap
            .as_ref()
            .is_none_or(|r| r.epoch != epoch || r.marked != marked)
        {
            let sh = &self.ctx.shared;
            let members: Vec<usize> = sh.routes.epochs[epoch]
                .active
                .iter()
                .copied()
                .filter(|&i| marked & (1 << i) == 0)
                .collect();
            let map = if members.is_empty() {
                None
            } else {
                sh.spec.pool.distribution_of(&members).ok()
            };
            self.remap = Some(Remap {
                epoch,
                marked,
                map,
                members,
                key: Vec::with_capacity(sh.spec.prefix.len() + 24),
            });
        }
        let prefix = self.ctx.shared.spec.prefix.as_bytes();
        let r = self.remap.as_mut().expect("built above");
        let Some(map) = r.map.as_ref() else {
            return m;
        };
        r.key.clear();
        wire::put_key(&mut r.key, prefix, k);
        r.members[map.server_for(&r.key)]
    }
}
