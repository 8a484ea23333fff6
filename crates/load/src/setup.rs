//! Before and after the measured phase: the value pool, prefill, and deleting what was written.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};

use cachelab_client::resp::{self, RespConnection, RespOptions};
use cachelab_client::{Address, Connection, Error};
use cachelab_proto::resp::{Command as RespCommand, RespKey, Value};
use cachelab_proto::{Command, Key, Response, Store};

use crate::route::Routes;
use crate::shared::Progress;
use crate::sizes;
use crate::spec::{Protocol, Spec};

/// A set-up or clean-up request in either protocol, and its reply.
pub(crate) enum Request {
    Memcached(Command),
    Resp(RespCommand),
}

pub(crate) enum Reply {
    Memcached(Response),
    Resp(Value),
}

/// One connection of the set-up or the clean-up: memcached's or RESP's (logged in).
enum Link {
    Memcached(Connection),
    Resp(RespConnection),
}

impl Link {
    async fn open(spec: &Spec, address: &Address) -> Result<Link, Error> {
        match &spec.protocol {
            Protocol::Memcached => Connection::connect(address, spec.options.clone())
                .await
                .map(Link::Memcached),
            Protocol::Resp(login) => {
                let resp = RespOptions {
                    auth: login.auth(),
                    db: login.db,
                    ..RespOptions::default()
                };
                RespConnection::connect(address, spec.options.clone(), &resp)
                    .await
                    .map(Link::Resp)
            }
        }
    }

    fn broken(&self) -> bool {
        match self {
            Link::Memcached(c) => c.broken().is_some(),
            Link::Resp(c) => c.broken().is_some(),
        }
    }

    /// The requests of one protocol (this link's), pipelined.
    async fn pipeline(&mut self, batch: &[Request]) -> Result<Vec<Reply>, Error> {
        match self {
            Link::Memcached(c) => {
                let cmds: Vec<Command> = batch
                    .iter()
                    .filter_map(|r| match r {
                        Request::Memcached(c) => Some(c.clone()),
                        Request::Resp(_) => None,
                    })
                    .collect();
                Ok(c.pipeline(&cmds)
                    .await?
                    .into_iter()
                    .map(Reply::Memcached)
                    .collect())
            }
            Link::Resp(c) => {
                let cmds: Vec<RespCommand> = batch
                    .iter()
                    .filter_map(|r| match r {
                        Request::Resp(c) => Some(c.clone()),
                        Request::Memcached(_) => None,
                    })
                    .collect();
                Ok(c.pipeline(&cmds)
                    .await?
                    .into_iter()
                    .map(Reply::Resp)
                    .collect())
            }
        }
    }
}

/// Requests per pipelined batch in prefill and clean-up.
const BATCH: usize = 256;
/// Over TLS, a batch ends once it holds this many bytes (see [`batches`]).
const TLS_BATCH_BYTES: usize = 8 * 1024;

/// Keys the run may have written.
pub(crate) enum Written {
    None,
    /// A bitset over the key space.
    Some(Vec<u64>),
    /// The whole key space (after prefill).
    All,
}

impl Written {
    pub fn merge(self, other: Written) -> Written {
        match (self, other) {
            (Written::All, _) | (_, Written::All) => Written::All,
            (Written::None, x) | (x, Written::None) => x,
            (Written::Some(mut a), Written::Some(b)) => {
                for (x, y) in a.iter_mut().zip(b) {
                    *x |= y;
                }
                Written::Some(a)
            }
        }
    }

    fn indices(&self, key_space: u64) -> Vec<u64> {
        match self {
            Written::None => Vec::new(),
            Written::All => (0..key_space).collect(),
            Written::Some(bits) => bits
                .iter()
                .enumerate()
                .flat_map(|(w, &b)| {
                    (0..64)
                        .filter(move |i| b & (1 << i) != 0)
                        .map(move |i| w as u64 * 64 + i)
                })
                .collect(),
        }
    }
}

/// Random bytes to cut values from: twice the largest value plus slack.
pub(crate) fn random_pool(max_value: usize, seed: u64) -> Bytes {
    let mut b = BytesMut::zeroed(2 * max_value + 4096);
    SmallRng::seed_from_u64(seed ^ 0x5EED).fill_bytes(&mut b);
    b.freeze()
}

pub(crate) fn key(spec: &Spec, index: u64) -> Key {
    Key::new(format!("{}:{index}", spec.prefix)).expect("prefix validated, index is digits")
}

fn resp_key(spec: &Spec, index: u64) -> RespKey {
    RespKey::new(format!("{}:{index}", spec.prefix)).expect("prefix validated, index is digits")
}

/// Deletes key `i`: memcached's `delete`, RESP's `UNLINK` (freed off the server's main
/// thread).
fn delete(spec: &Spec, i: u64) -> Request {
    match spec.protocol {
        Protocol::Memcached => Request::Memcached(Command::Delete(key(spec, i))),
        Protocol::Resp(_) => Request::Resp(RespCommand::new("UNLINK").key(&resp_key(spec, i))),
    }
}

/// The key was deleted, or was not there.
fn gone(r: &Reply) -> bool {
    matches!(
        r,
        Reply::Memcached(Response::Deleted | Response::NotFound)
            | Reply::Resp(Value::Integer(0 | 1))
    )
}

/// The key was there, and is deleted.
fn found(r: &Reply) -> bool {
    matches!(
        r,
        Reply::Memcached(Response::Deleted) | Reply::Resp(Value::Integer(1))
    )
}

/// Runs `work(thread, indices)` on `spec.threads` threads, each with a share of `indices`,
/// and returns the sum of what they return.
fn in_parallel(spec: &Spec, indices: Vec<u64>, work: impl Fn(&[u64]) -> u64 + Sync) -> u64 {
    let threads = spec.threads.min(indices.len().max(1));
    let chunk = indices.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = indices
            .chunks(chunk)
            .map(|part| s.spawn(|| work(part)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("setup thread panicked"))
            .sum()
    })
}

/// Sends `cmd(i)` for each key index `i` of `part` in pipelined batches on one connection to
/// `address` (reconnecting once per failed batch), counts the replies `ok` accepts, and calls
/// `missed(i)` for each other key (its reply not accepted, or none).
fn batches(
    spec: &Spec,
    address: &Address,
    part: &[u64],
    mut cmd: impl FnMut(u64) -> Request,
    ok: fn(&Reply) -> bool,
    missed: &dyn Fn(u64),
    stop: &dyn Fn() -> bool,
) -> u64 {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    // memcached 1.6's TLS stops reading a pipeline whose tail sits decrypted in its TLS
    // library's buffer (it waits for the socket, which has nothing more): over TLS a batch is
    // kept within what one read of the server takes.
    let byte_cap = if spec.options.tls.is_some() {
        TLS_BATCH_BYTES
    } else {
        usize::MAX
    };
    rt.block_on(async {
        let mut conn: Option<Link> = None;
        let mut good = 0u64;
        // A server that has gone away is given the run's reconnect budget, not one timeout
        // per batch: set-up and clean-up stop once no batch has succeeded for that long.
        let mut last_ok = std::time::Instant::now();
        let mut batch = Vec::with_capacity(BATCH);
        // The keys of `part` before this one are sent (or given up).
        let mut at = 0;
        while at < part.len() {
            if stop() {
                break;
            }
            batch.clear();
            let mut bytes = 0;
            while batch.len() < BATCH && bytes < byte_cap && at + batch.len() < part.len() {
                let c = cmd(part[at + batch.len()]);
                bytes += approx_len(&c);
                batch.push(c);
            }
            let keys = &part[at..at + batch.len()];
            at += batch.len();
            // A batch is tried again (a server restarted a moment ago comes back) until it
            // goes through or the budget is spent.
            let mut done = false;
            for attempt in 0.. {
                if attempt >= 2 && (last_ok.elapsed() >= spec.give_up_after || stop()) {
                    break;
                }
                if conn.as_ref().is_none_or(Link::broken) {
                    conn = Link::open(spec, address).await.ok();
                }
                if let Some(c) = conn.as_mut() {
                    if let Ok(replies) = c.pipeline(&batch).await {
                        for (&i, r) in keys.iter().zip(&replies) {
                            if ok(r) {
                                good += 1;
                            } else {
                                missed(i);
                            }
                        }
                        done = true;
                        break;
                    }
                }
                // Not connected, or the batch failed: a pause before the next try (a server
                // that accepts and then hangs up, such as a TLS-only listener, is not
                // reconnected in a tight loop for the whole budget).
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            if done {
                last_ok = std::time::Instant::now();
            } else {
                keys.iter().for_each(|&i| missed(i));
                if last_ok.elapsed() >= spec.give_up_after {
                    break;
                }
            }
        }
        part[at..].iter().for_each(|&i| missed(i));
        good
    })
}

/// A command's bytes on the wire, near enough to size a batch.
fn approx_len(c: &Request) -> usize {
    match c {
        Request::Memcached(Command::Set(s)) => s.key.len() + s.data.len() + 32,
        Request::Resp(c) => c.args().iter().map(|a| a.len() + 16).sum(),
        _ => 64,
    }
}

/// Runs `work(member, indices)` for each member of the pool with the indices of `indices`
/// whose keys it holds (`holders(i)`: the members that hold key `i`, a bitset), and returns
/// the sum of what they return.
fn by_member(
    spec: &Spec,
    indices: Vec<u64>,
    holders: impl Fn(u64) -> u64,
    work: impl Fn(&Address, &[u64]) -> u64 + Sync,
) -> u64 {
    if spec.pool.len() == 1 {
        return in_parallel(spec, indices, |part| {
            work(&spec.pool.members[0].address, part)
        });
    }
    spec.pool
        .members
        .iter()
        .enumerate()
        .map(|(m, member)| {
            let mine: Vec<u64> = indices
                .iter()
                .copied()
                .filter(|&i| holders(i) & (1 << m) != 0)
                .collect();
            if mine.is_empty() {
                return 0;
            }
            in_parallel(spec, mine, |part| work(&member.address, part))
        })
        .sum()
}

/// Sets every key of the key space, each on the member that holds it; returns how many were
/// stored.
pub(crate) fn prefill(spec: &Spec, routes: &Routes, pool: &Bytes, progress: &Arc<Progress>) -> u64 {
    let indices: Vec<u64> = (0..spec.key_space).collect();
    let stop = || progress.cancelled();
    let at_start = |i| 1 << routes.member(i);
    by_member(spec, indices, at_start, |address, part| {
        let mut sizes =
            sizes::build(&spec.value_size.name, &spec.value_size.params).expect("validated");
        let mut rng = SmallRng::seed_from_u64(spec.seed ^ part.first().copied().unwrap_or(0));
        let set = |i| {
            let len = sizes.next(&mut rng);
            let at = (rng.next_u64() % (pool.len() - len + 1) as u64) as usize;
            let data = pool.slice(at..at + len);
            match spec.protocol {
                Protocol::Memcached => Request::Memcached(Command::Set(Store {
                    key: key(spec, i),
                    flags: 0,
                    exptime: spec.ttl,
                    data,
                })),
                Protocol::Resp(_) => {
                    let expire = (spec.ttl > 0).then(|| resp::Expire::Seconds(spec.ttl.into()));
                    let opts = resp::SetOptions { expire, nx: false };
                    Request::Resp(resp::set_command(&resp_key(spec, i), data, opts))
                }
            }
        };
        let stored = |r: &Reply| match r {
            Reply::Memcached(r) => matches!(r, Response::Stored),
            Reply::Resp(Value::Simple(ok)) => ok.as_ref() == b"OK",
            Reply::Resp(_) => false,
        };
        batches(spec, address, part, set, stored, &|_| {}, &stop)
    })
}

/// A Redis Cluster's slot map read again (from its masters, the first that answers) into
/// `routes`: the slots that moved during the run, to a master of the pool, are deleted from
/// there. Nothing changes when none answers (the clean-up then counts what it could not
/// delete).
pub(crate) fn refresh_slots(spec: &Spec, routes: &Routes) {
    let Protocol::Resp(login) = &spec.protocol else {
        return;
    };
    let seeds: Vec<Address> = spec
        .pool
        .members
        .iter()
        .map(|m| m.address.clone())
        .collect();
    let cluster = resp::ClusterOptions {
        resp: RespOptions {
            auth: login.auth(),
            ..RespOptions::default()
        },
        ..resp::ClusterOptions::default()
    };
    let Ok(c) = resp::RespCluster::connect(&seeds, spec.options.clone(), &cluster) else {
        return;
    };
    for slot in 0..resp::slot::SLOTS {
        if let Some(m) = c
            .slot_map()
            .owner(slot)
            .and_then(|a| seeds.iter().position(|s| s == a))
        {
            routes.moved(slot, m);
        }
    }
}

/// Sweeps again after requests were lost (see [`cleanup`]): at most this many, the first
/// after this pause, each next one after twice the pause before it.
const RESWEEPS: u32 = 3;
const RESWEEP_PAUSE: std::time::Duration = std::time::Duration::from_millis(50);

/// Deletes every key the run may have written, from each member that may hold it (see
/// [`Routes::holders`]): (deleted or already gone, left behind). A key counts as deleted when
/// every member that may hold it answered deleted or not found.
///
/// When requests were lost (`lost`: a connection dropped with requests on it), a set sent on
/// it may still be run by memcached after this delete, which goes on another connection: the
/// key space is then swept again after a pause, until a sweep finds none of its keys there.
pub(crate) fn cleanup(spec: &Spec, routes: &Routes, written: &Written, lost: bool) -> (u64, u64) {
    let indices = written.indices(spec.key_space);
    let total = indices.len() as u64;
    let sweep = |indices: Vec<u64>, ok: fn(&Reply) -> bool, missed: &(dyn Fn(u64) + Sync)| {
        let never = || false;
        by_member(
            spec,
            indices,
            |i| routes.holders(i),
            |address, part| {
                let delete = |i| delete(spec, i);
                batches(spec, address, part, delete, ok, missed, &never)
            },
        )
    };
    // The keys some member did not answer deleted or not found for, and how many.
    let left: Vec<AtomicU64> = (0..spec.key_space.div_ceil(64))
        .map(|_| AtomicU64::new(0))
        .collect();
    let left_n = AtomicU64::new(0);
    let missed = |i: u64| {
        let bit = 1 << (i % 64);
        if left[(i / 64) as usize].fetch_or(bit, Ordering::Relaxed) & bit == 0 {
            left_n.fetch_add(1, Ordering::Relaxed);
        }
    };
    sweep(indices.clone(), gone, &missed);
    let done = total - left_n.load(Ordering::Relaxed);
    // (Not when the first sweep could not delete everything: the server is not answering,
    // and each sweep would wait out the clean-up budget again.)
    if lost && done == total {
        for n in 0..RESWEEPS {
            std::thread::sleep(RESWEEP_PAUSE * (1 << n));
            // The keys found there again (and deleted now).
            if sweep(indices.clone(), found, &|_| {}) == 0 {
                break;
            }
        }
    }
    (done, total - done)
}

#[cfg(test)]
#[path = "../../client/tests/support/mod.rs"]
mod support;

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use cachelab_client::{BlockingConnection, Options};

    /// A server that accepts and hangs up at once (a TLS-only listener, say) is tried again
    /// after a pause, not reconnected in a tight loop for the whole budget.
    #[test]
    fn a_server_that_hangs_up_at_once_is_tried_again_after_a_pause() {
        use std::sync::atomic::AtomicBool;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let at = listener.local_addr().unwrap();
        let (accepts, over) = (
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let server = {
            let (accepts, over) = (Arc::clone(&accepts), Arc::clone(&over));
            std::thread::spawn(move || {
                for s in listener.incoming() {
                    if over.load(Ordering::Relaxed) {
                        break;
                    }
                    accepts.fetch_add(1, Ordering::Relaxed);
                    drop(s);
                }
            })
        };
        let mut spec = crate::steady::tests::spec();
        let address: Address = at.to_string().parse().unwrap();
        spec.pool = crate::spec::Pool::single(address.clone());
        spec.give_up_after = Duration::from_secs(1);
        let delete = |i| delete(&spec, i);
        let missed = AtomicU64::new(0);
        let miss = |_| {
            missed.fetch_add(1, Ordering::Relaxed);
        };
        let good = batches(&spec, &address, &[0, 1, 2], delete, gone, &miss, &|| false);
        over.store(true, Ordering::Relaxed);
        let _ = std::net::TcpStream::connect(at);
        server.join().unwrap();
        assert_eq!((good, missed.load(Ordering::Relaxed)), (0, 3));
        // One try per 50 ms over the 1 s budget: some 20 connections (thousands without the
        // pause).
        let n = accepts.load(Ordering::Relaxed);
        assert!((2..=40).contains(&n), "{n} connections");
    }

    /// A set still on its way when the clean-up starts (sent on a connection that dropped,
    /// run by memcached later) lands after the first sweep: after lost requests the clean-up
    /// sweeps again and deletes it.
    #[test]
    fn after_lost_requests_a_late_write_is_swept_again() {
        let mc = support::Memcached::start();
        let address: cachelab_client::Address = mc.address.parse().unwrap();
        let mut spec = crate::steady::tests::spec();
        spec.pool = crate::spec::Pool::single(address.clone());
        spec.prefix = "cachelab-test:late".into();
        let routes = Routes::build(&spec).unwrap();
        let late = |spec: &Spec| {
            // (With `lost` false, or RESWEEPS 0, the five keys stay: the test fails.)
            let (address, keys) = (
                address.clone(),
                (0..5).map(|i| key(spec, i)).collect::<Vec<_>>(),
            );
            std::thread::spawn(move || {
                let mut c = BlockingConnection::connect(&address, Options::default()).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(15));
                for k in &keys {
                    assert!(c.set(k, Bytes::from_static(b"late"), 0, 0).unwrap());
                }
            })
        };
        let present = |spec: &Spec| {
            let mut c = BlockingConnection::connect(&address, Options::default()).unwrap();
            let keys: Vec<_> = (0..spec.key_space).map(|i| key(spec, i)).collect();
            c.get_multi(&keys).unwrap().len()
        };
        let writer = late(&spec);
        let (done, left) = cleanup(&spec, &routes, &Written::All, true);
        writer.join().unwrap();
        assert_eq!((done, left), (spec.key_space, 0));
        assert_eq!(present(&spec), 0);
    }
}
