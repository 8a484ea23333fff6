//! A blocking client for a Redis Cluster: one [`RespConnection`] per master, opened when first
//! needed, each with the same timeouts, TLS and handshake; commands routed by hash slot.
//!
//! The slot map is read at connect time from `CLUSTER SHARDS` (Redis 7.0+) or `CLUSTER SLOTS`,
//! and again on a `-MOVED` (and on demand: [`RespCluster::refresh`]). A `-MOVED slot
//! host:port` updates the map and retries there; a `-ASK slot host:port` sends `ASKING` and
//! the command to that node, in one write, and leaves the map alone. Both count towards a
//! bound ([`ClusterOptions::max_redirections`]); past it the command fails with
//! [`Error::Redirections`]. `MGET`, `DEL` and `UNLINK` over many keys are split by slot (a
//! cluster refuses a multi-key command across slots), one command per slot, pipelined per
//! node, all nodes at once; `MGET`'s values come back in the keys' order.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use cachelab_proto::resp::{Command, RespKey, Value};
use tokio::runtime::{Builder, Runtime};
use tokio::task::JoinSet;

use super::slot::key_slot;
use super::slotmap::{Redirect, SlotMap};
use super::{check, set_command, string_or_null, text, with_keys};
use super::{RespConnection, RespOptions, RespUrl, SetOptions};
use crate::{Address, Error, Options};

/// How a [`RespCluster`] connects and how far it follows redirections.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// Each node's handshake (protocol, `AUTH`); a cluster has only database 0.
    pub resp: RespOptions,
    /// The most redirections (`MOVED` and `ASK`) one command follows: 5 by default.
    pub max_redirections: u32,
}

impl Default for ClusterOptions {
    fn default() -> ClusterOptions {
        ClusterOptions {
            resp: RespOptions::default(),
            max_redirections: 5,
        }
    }
}

/// What the client has followed and re-read since it connected.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClusterStats {
    pub moved: u64,
    pub ask: u64,
    /// Slot maps read (the first at connect time).
    pub refreshes: u64,
}

/// A Redis Cluster, through its masters.
pub struct RespCluster {
    rt: Runtime,
    seeds: Vec<Address>,
    options: Options,
    cluster: ClusterOptions,
    map: SlotMap,
    conns: HashMap<Address, RespConnection>,
    /// `CLUSTER SHARDS` was refused (before Redis 7.0): ask `CLUSTER SLOTS` instead.
    no_shards: bool,
    stats: ClusterStats,
}

/// A redirection's text, for [`Error::Redirections`].
fn shown(v: &Value) -> String {
    v.error().map(text).unwrap_or_default()
}

/// The named cluster errors: `-TRYAGAIN`, `-CLUSTERDOWN`; any other error reply is
/// [`Error::Redis`].
fn named(v: Value, from: &Address) -> Result<Value, Error> {
    let Some(e) = v.error() else { return Ok(v) };
    let message = text(e);
    let address = from.to_string();
    if message.starts_with("TRYAGAIN") {
        Err(Error::TryAgain { address, message })
    } else if message.starts_with("CLUSTERDOWN") {
        Err(Error::ClusterDown { address, message })
    } else {
        check(v)
    }
}

/// A command over keys of one slot, and where each key sits in the caller's list.
struct Part {
    slot: u16,
    positions: Vec<usize>,
    cmd: Command,
}

impl RespCluster {
    /// Reads the slot map from the first of `seeds` that answers, with `options`' timeouts
    /// and TLS and `cluster`'s handshake for every node.
    pub fn connect(
        seeds: &[Address],
        options: Options,
        cluster: &ClusterOptions,
    ) -> Result<RespCluster, Error> {
        let rt = Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(Error::Io)?;
        let mut c = RespCluster {
            rt,
            seeds: seeds.to_vec(),
            options,
            cluster: cluster.clone(),
            map: SlotMap::default(),
            conns: HashMap::new(),
            no_shards: false,
            stats: ClusterStats::default(),
        };
        c.refresh()?;
        Ok(c)
    }

    /// Connects through a `redis://` or `rediss://` URL naming one node: its TLS and
    /// credentials for every node (a cluster has no database but 0).
    pub fn connect_url(
        url: &RespUrl,
        options: Options,
        cluster: &ClusterOptions,
    ) -> Result<RespCluster, Error> {
        let options = url.options(options).map_err(|reason| Error::Tls {
            address: url.address.to_string(),
            reason,
        })?;
        let mut cluster = cluster.clone();
        cluster.resp.auth = url.auth.clone().or(cluster.resp.auth);
        cluster.resp.db = url.db.or(cluster.resp.db);
        RespCluster::connect(std::slice::from_ref(&url.address), options, &cluster)
    }

    /// Sends `cmd` to the master at `node` (`INFO`, `CONFIG GET`, `DBSIZE` on each of
    /// [`SlotMap::nodes`]), no redirection followed; an error reply is an error.
    pub fn call_node(&mut self, node: &Address, cmd: &Command) -> Result<Value, Error> {
        check(self.exchange(node, cmd, false)?)
    }

    /// The slot map as last read (and corrected by `MOVED`).
    pub fn slot_map(&self) -> &SlotMap {
        &self.map
    }

    pub fn stats(&self) -> ClusterStats {
        self.stats
    }

    /// The master the map says serves `key`.
    pub fn node_for(&self, key: &[u8]) -> Option<&Address> {
        self.map.owner(key_slot(key))
    }

    /// Reads the slot map again: from the masters it knows, then the seeds, the first that
    /// gives one. When none does, the last node's error: a connection's, or
    /// [`Error::NotCluster`] for a node that answered but is no cluster node.
    pub fn refresh(&mut self) -> Result<(), Error> {
        self.refresh_from(None)
    }

    fn refresh_from(&mut self, first: Option<&Address>) -> Result<(), Error> {
        let mut order: Vec<Address> = first.into_iter().cloned().collect();
        for a in self
            .map
            .nodes()
            .iter()
            .map(|n| &n.address)
            .chain(&self.seeds)
        {
            if !order.contains(a) {
                order.push(a.clone());
            }
        }
        let mut last = None;
        for a in order {
            match self.read_map(&a) {
                Ok(map) => {
                    self.map = map;
                    self.stats.refreshes += 1;
                    return Ok(());
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            let none = "no cluster node to connect to: give at least one seed address";
            Error::Io(std::io::Error::new(std::io::ErrorKind::InvalidInput, none))
        }))
    }

    fn read_map(&mut self, at: &Address) -> Result<SlotMap, Error> {
        let tls = self.options.tls.is_some();
        let not_cluster = |reply: String| Error::NotCluster {
            address: at.to_string(),
            reply,
        };
        if !self.no_shards {
            let v = self.exchange(at, &Command::new("CLUSTER").arg("SHARDS"), false)?;
            match v.error().map(text) {
                None => return SlotMap::from_shards(&v, at, tls).map_err(not_cluster),
                // Before Redis 7.0.
                Some(e) if e.contains("nknown subcommand") => self.no_shards = true,
                Some(e) => return Err(not_cluster(e)),
            }
        }
        let v = self.exchange(at, &Command::new("CLUSTER").arg("SLOTS"), false)?;
        match v.error().map(text) {
            None => SlotMap::from_slots(&v, at).map_err(not_cluster),
            Some(e) => Err(not_cluster(e)),
        }
    }

    /// The connection to `at`, taken out of the pool (opened if there is none, or only a
    /// broken one); give it back with [`RespCluster::give_back`].
    async fn take(
        conns: &mut HashMap<Address, RespConnection>,
        at: &Address,
        options: &Options,
        resp: &RespOptions,
    ) -> Result<RespConnection, Error> {
        match conns.remove(at) {
            Some(c) if c.broken().is_none() => Ok(c),
            _ => RespConnection::connect(at, options.clone(), resp).await,
        }
    }

    fn give_back(&mut self, c: RespConnection) {
        if c.broken().is_none() {
            self.conns.insert(c.address().clone(), c);
        }
    }

    /// Sends `cmd` to `at` (after `ASKING`, in the same write, when `asking`); its reply,
    /// an error reply as a value.
    fn exchange(&mut self, at: &Address, cmd: &Command, asking: bool) -> Result<Value, Error> {
        let (options, resp) = (&self.options, &self.cluster.resp);
        let conns = &mut self.conns;
        let (conn, result) = self.rt.block_on(async {
            let mut c = match Self::take(conns, at, options, resp).await {
                Ok(c) => c,
                Err(e) => return (None, Err(e)),
            };
            let r = if asking {
                let cmds = [Command::new("ASKING"), cmd.clone()];
                c.pipeline(&cmds).await.and_then(|mut r| {
                    let reply = r.pop().expect("two replies");
                    check(r.pop().expect("two replies")).map(|_| reply)
                })
            } else {
                c.send(cmd).await
            };
            (Some(c), r)
        });
        if let Some(c) = conn {
            self.give_back(c);
        }
        result
    }

    /// Sends `cmd`, whose keys are all in `slot`, to the slot's master and follows its
    /// redirections; `first` is a reply already received from `at` for it. An error reply
    /// is an error (named for `TRYAGAIN` and `CLUSTERDOWN`).
    fn route(
        &mut self,
        cmd: &Command,
        slot: u16,
        first: Option<(Address, Value)>,
    ) -> Result<Value, Error> {
        let (mut at, mut reply) = match first {
            Some((at, v)) => (at, Some(v)),
            None => (self.owner(slot)?, None),
        };
        let (mut asking, mut refreshed, mut count) = (false, false, 0);
        loop {
            let v = match reply.take() {
                Some(v) => v,
                None => self.exchange(&at, cmd, asking)?,
            };
            let Some(redirect) = v.error().and_then(|e| Redirect::parse(e, &at)) else {
                return named(v, &at);
            };
            count += 1;
            if count > self.cluster.max_redirections {
                return Err(Error::Redirections {
                    command: cmd.name().to_string(),
                    slot,
                    count: count - 1,
                    last: shown(&v),
                });
            }
            asking = matches!(redirect, Redirect::Ask { .. });
            if asking {
                self.stats.ask += 1;
            } else {
                self.stats.moved += 1;
                let to = redirect.to();
                // The map is stale: read it anew, at most once per command and not when an
                // earlier MOVED taught it this one (the parts of an MGET sent together), first
                // from the node the slot moved to; keep what this MOVED says whatever it read.
                // A map that can't be read is no failure: the MOVED itself is enough to go on.
                if !refreshed && self.map.owner(redirect.slot()) != Some(to) {
                    refreshed = true;
                    let _ = self.refresh_from(Some(to));
                }
                self.map.set_owner(redirect.slot(), to);
            }
            at = redirect.to().clone();
        }
    }

    fn owner(&self, slot: u16) -> Result<Address, Error> {
        self.map
            .owner(slot)
            .cloned()
            .ok_or(Error::NoSlotOwner { slot })
    }

    /// Any command whose keys are all in `key`'s slot, sent to its master; an error reply
    /// is an error.
    pub fn call(&mut self, key: &RespKey, cmd: &Command) -> Result<Value, Error> {
        self.route(cmd, key_slot(key.as_bytes()), None)
    }

    /// `GET`: `None` on a miss.
    pub fn get(&mut self, key: &RespKey) -> Result<Option<Bytes>, Error> {
        let v = self.call(key, &Command::new("GET").key(key))?;
        string_or_null("GET", plain(v))
    }

    /// `SET` with its options: true when stored, false when `NX` found the key.
    pub fn set(&mut self, key: &RespKey, data: Bytes, opts: SetOptions) -> Result<bool, Error> {
        match plain(self.call(key, &set_command(key, data, opts))?) {
            Value::Simple(s) if &s[..] == b"OK" => Ok(true),
            v if v.is_null() => Ok(false),
            v => Err(Error::unexpected_reply("SET", &v)),
        }
    }

    /// `MGET` over keys of any slots: one `MGET` per slot, pipelined per node; one entry per
    /// key, in order, `None` for a miss.
    pub fn mget(&mut self, keys: &[RespKey]) -> Result<Vec<Option<Bytes>>, Error> {
        let mut out = vec![None; keys.len()];
        for (part, v) in self.fan_out("MGET", keys)? {
            match plain(v) {
                Value::Array(items) if items.len() == part.positions.len() => {
                    for (&i, v) in part.positions.iter().zip(items) {
                        out[i] = string_or_null("MGET", plain(v))?;
                    }
                }
                v => return Err(Error::unexpected_reply("MGET", &v)),
            }
        }
        Ok(out)
    }

    /// `DEL` over keys of any slots: how many existed.
    pub fn del(&mut self, keys: &[RespKey]) -> Result<u64, Error> {
        self.count("DEL", keys)
    }

    /// `UNLINK` over keys of any slots: how many existed.
    pub fn unlink(&mut self, keys: &[RespKey]) -> Result<u64, Error> {
        self.count("UNLINK", keys)
    }

    fn count(&mut self, name: &'static str, keys: &[RespKey]) -> Result<u64, Error> {
        let mut total = 0;
        for (_, v) in self.fan_out(name, keys)? {
            match plain(v) {
                Value::Integer(n) if n >= 0 => total += n as u64,
                v => return Err(Error::unexpected_reply(name, &v)),
            }
        }
        Ok(total)
    }

    /// `name key…` split by slot, pipelined per node, all nodes at once; then each part whose
    /// reply was a redirection routed on its own. Each part with its (non-error) reply.
    fn fan_out(
        &mut self,
        name: &'static str,
        keys: &[RespKey],
    ) -> Result<Vec<(Part, Value)>, Error> {
        let mut by_slot: BTreeMap<u16, Vec<usize>> = BTreeMap::new();
        for (i, k) in keys.iter().enumerate() {
            by_slot.entry(key_slot(k.as_bytes())).or_default().push(i);
        }
        let mut by_node: BTreeMap<String, (Address, Vec<Part>)> = BTreeMap::new();
        for (slot, positions) in by_slot {
            let at = self.owner(slot)?;
            let chosen: Vec<RespKey> = positions.iter().map(|&i| keys[i].clone()).collect();
            let part = Part {
                slot,
                positions,
                cmd: with_keys(name, &chosen),
            };
            by_node
                .entry(at.to_string())
                .or_insert_with(|| (at, Vec::new()))
                .1
                .push(part);
        }
        let (options, resp) = (self.options.clone(), self.cluster.resp.clone());
        let conns = &mut self.conns;
        let done = self.rt.block_on(async {
            let mut set = JoinSet::new();
            for (at, parts) in by_node.into_values() {
                let taken = Self::take(conns, &at, &options, &resp).await;
                set.spawn(async move {
                    let cmds: Vec<Command> = parts.iter().map(|p| p.cmd.clone()).collect();
                    match taken {
                        Ok(mut c) => {
                            let r = c.pipeline(&cmds).await;
                            (at, parts, Some(c), r)
                        }
                        Err(e) => (at, parts, None, Err(e)),
                    }
                });
            }
            set.join_all().await
        });
        let mut failed = None;
        let mut answered = Vec::new();
        for (at, parts, conn, r) in done {
            if let Some(c) = conn {
                self.give_back(c);
            }
            match r {
                Ok(replies) => answered.push((at, parts, replies)),
                Err(e) => failed = failed.or(Some(e)),
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        let mut out = Vec::new();
        for (at, parts, replies) in answered {
            for (part, v) in parts.into_iter().zip(replies) {
                let v = match v.error() {
                    None => v,
                    Some(_) => self.route(&part.cmd, part.slot, Some((at.clone(), v)))?,
                };
                out.push((part, v));
            }
        }
        Ok(out)
    }
}

/// A reply without its RESP3 attributes.
fn plain(mut v: Value) -> Value {
    while let Value::Attributed { value, .. } = v {
        v = *value;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(s: &str) -> Value {
        Value::Error(Bytes::from(s.to_string()))
    }

    #[test]
    fn tryagain_and_clusterdown_are_named_other_errors_stay_the_server_s() {
        let at: Address = "127.0.0.21:7000".parse().unwrap();
        let e = named(error("CLUSTERDOWN Hash slot not served"), &at).unwrap_err();
        assert!(matches!(e, Error::ClusterDown { .. }), "{e}");
        assert_eq!(
            e.to_string(),
            "127.0.0.21:7000 answered 'CLUSTERDOWN Hash slot not served': the cluster cannot \
             serve (a slot without a master, or a lost majority)"
        );
        let e = named(
            error("TRYAGAIN Multiple keys request during rehashing"),
            &at,
        );
        assert!(matches!(e, Err(Error::TryAgain { .. })));
        let e = named(
            error("CROSSSLOT Keys in request don't hash to the same slot"),
            &at,
        );
        assert!(matches!(e, Err(Error::Redis(m)) if m.starts_with("CROSSSLOT")));
        assert_eq!(named(Value::Integer(1), &at).unwrap(), Value::Integer(1));
    }
}
