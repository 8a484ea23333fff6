//! Reading: the replies on a member's socket decoded in place and matched, in order, to its
//! requests in flight; a split multi-get finished with its last part.

use std::io;
use std::sync::atomic::Ordering;
use std::time::Instant;

use bytes::Buf;

use super::Conn;
use crate::busy;
use crate::fault::Fault;
use crate::group::finish_group;
use crate::member::{Link, ALONE, READ_CHUNK};
use crate::pacing::ns;
use crate::series::{GET, MULTIGET, SET};
use crate::spec::Pool;
use crate::wire::Reply;

use super::send::ASKING;

/// The member of `pool` a redirection's `host:port` names (an empty host: `from`'s), if any.
fn member_at(pool: &Pool, at: &[u8], from: usize) -> Option<usize> {
    let at = std::str::from_utf8(at).ok()?;
    let same = |a: &cachelab_client::Address, host_port: &str| match a {
        cachelab_client::Address::Tcp(hp) => hp == host_port,
        cachelab_client::Address::Unix(_) => false,
    };
    if let Some(port) = at.strip_prefix(':') {
        let cachelab_client::Address::Tcp(hp) = &pool.members[from].address else {
            return None;
        };
        let host = hp.rsplit_once(':')?.0;
        let full = format!("{host}:{port}");
        return pool.members.iter().position(|m| same(&m.address, &full));
    }
    pool.members.iter().position(|m| same(&m.address, at))
}

impl Conn {
    pub(super) fn read(&mut self, m: usize) -> Result<(), Fault> {
        let member = &mut self.members[m];
        let Link::Up(s) = &member.link else {
            return Ok(());
        };
        if member.rbuf.capacity() - member.rbuf.len() < READ_CHUNK / 4 {
            member.rbuf.reserve(READ_CHUNK);
        }
        match s.read_some(&mut member.rbuf) {
            Ok(0) => return Err(Fault::Closed),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) => return Err(Fault::from_io(&e)),
        }
        let now = Instant::now();
        let mut pos = 0;
        let mut parts = 0u64;
        let mut finished = 0u64;
        let mut refills = 0u64;
        let on_miss = self.ctx.shared.spec.on_miss_set;
        {
            let mut rec = self.ctx.rec.borrow_mut();
            rec.tick(now);
            while let Some(&p) = member.inflight.front() {
                if p.op == ASKING {
                    // Its +OK (or an error: the request after it says what came of it).
                    match self.wire.parse_reply(SET, &member.rbuf[pos..]) {
                        Ok(None) => break,
                        Ok(Some((n, _))) => {
                            pos += n;
                            member.inflight.pop_front();
                            parts += 1;
                            continue;
                        }
                        Err(_) => return Err(Fault::Protocol),
                    }
                }
                let is_get = p.op as usize == GET || p.op as usize == MULTIGET;
                match self.wire.parse_reply(p.op as usize, &member.rbuf[pos..]) {
                    Ok(None) => break,
                    Ok(Some((n, Reply::Redirect { ask, slot, to }))) => {
                        let at = &member.rbuf[pos + to.0..pos + to.1];
                        let to = member_at(&self.ctx.shared.spec.pool, at, m);
                        let sh = &self.ctx.shared;
                        sh.redirects[m][usize::from(ask)].fetch_add(1, Ordering::Relaxed);
                        if let (false, Some(to)) = (ask, to) {
                            sh.routes.moved(slot, to);
                        }
                        pos += n;
                        member.inflight.pop_front();
                        parts += 1;
                        self.redirected.push((p, m, to, ask));
                    }
                    Ok(Some((n, reply))) => {
                        pos += n;
                        member.inflight.pop_front();
                        parts += 1;
                        let keys = if is_get { u32::from(p.keys) } else { 0 };
                        let outcome = match reply {
                            Reply::Done { hits } => {
                                let hits = hits.min(keys);
                                let corrected = ns(now, p.intended);
                                let uncorrected = ns(now, p.sent);
                                let waited = if self.open { corrected } else { uncorrected };
                                rec.part_reply(m, keys, hits, waited);
                                if on_miss && hits == 0 && p.op as usize == GET {
                                    self.refills.push(p.key);
                                }
                                if p.group == ALONE {
                                    rec.reply(
                                        now,
                                        p.op as usize,
                                        u32::from(p.keys),
                                        hits.min(u32::from(p.keys)),
                                        corrected,
                                        uncorrected,
                                    );
                                }
                                Ok(hits)
                            }
                            Reply::Redirect { .. } => unreachable!("taken above"),
                            Reply::Failed(f) => {
                                rec.part_fault(m, f, 1);
                                if p.group == ALONE {
                                    rec.fault(f);
                                }
                                Err(f)
                            }
                        };
                        if p.group == ALONE {
                            finished += 1;
                            refills += u64::from(p.op as usize == SET && p.keys == 0);
                        } else if let Some((done, g)) =
                            self.groups.part_done(p.group, Some(outcome))
                        {
                            finish_group(&mut rec, now, done, g);
                            finished += 1;
                        }
                    }
                    Err(_) => return Err(Fault::Protocol),
                }
            }
            if parts > 0 {
                member.heard = now;
                if let Some(e) = member.answered() {
                    rec.member_down(m, e, now, false);
                }
            }
        }
        if member.inflight.is_empty() && pos < member.rbuf.len() {
            return Err(Fault::Protocol); // bytes nobody asked for
        }
        member.rbuf.advance(pos);
        for (p, from, to, ask) in std::mem::take(&mut self.redirected) {
            self.follow(p, from, to, ask);
        }
        self.outstanding -= finished as usize;
        busy::settled(parts);
        if parts > 0 {
            let sh = &self.ctx.shared;
            let ms = now.saturating_duration_since(sh.t0).as_millis() as u64;
            sh.last_success_ms.fetch_max(ms, Ordering::Relaxed);
            self.done(finished - refills);
        }
        Ok(())
    }
}
