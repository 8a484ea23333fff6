//! The measuring connection, in the protocol the spec names: memcached's text or meta
//! protocol ([`BlockingConnection`]), or RESP ([`RespClient`], Redis and Valkey). The worker
//! asks it for the profile's few operations — a store, a read, a multi-key read, deletes, the
//! floor — and each is one request (or one pipeline) in the protocol's own commands:
//!
//! | operation | text | meta | resp |
//! |---|---|---|---|
//! | store | `set` | `ms` | `SET` |
//! | read | `get` | `mg … v` | `GET` |
//! | multi-key read | `get k1 … kn` | pipelined `mg` | `MGET k1 … kn` |
//! | delete | `delete` | `md` | `UNLINK` |
//! | floor | `mn` / `version` / get-miss | the same | `PING` (`GET` of a miss through a proxy) |
//!
//! Every command sent is counted by its name ([`Conn::sent`]), so the record can say what
//! the run sent and a reader can hold it against the server's own counters (Redis's
//! `cmdstat_*`).

use std::collections::BTreeMap;

use bytes::Bytes;

use cachelab_client::resp::{set_command, RespClient, RespOptions, SetOptions};
use cachelab_client::{Address, BlockingConnection, Error, Options};
use cachelab_proto::resp::{Command as RespCommand, RespKey, Value};
use cachelab_proto::{Command, Key, MetaFlags, MetaStatus, Response, Store};

use crate::floor::FloorRequest;
use crate::spec::{Protocol, RespLogin};

/// Commands sent, by name (`get`, `ms`, `SET`, `MGET`, `UNLINK`, `PING` …).
pub type Sent = BTreeMap<&'static str, u64>;

/// What a delete found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gone {
    /// The key was there and is gone.
    Deleted,
    /// The key was not there.
    NotFound,
    /// The server answered something else: the key may still be there.
    Failed,
}

impl Gone {
    pub fn is_gone(self) -> bool {
        self != Gone::Failed
    }
}

enum Inner {
    Memcached {
        conn: Box<BlockingConnection>,
        meta: bool,
        value_flag: MetaFlags,
        no_flags: MetaFlags,
    },
    Resp(Box<RespClient>),
}

/// One connection to the server profiled, in the spec's protocol.
pub struct Conn {
    inner: Inner,
    sent: Sent,
}

/// The client's options for a RESP login: `AUTH` and `SELECT` on connecting, RESP2.
pub fn resp_options(login: &RespLogin) -> RespOptions {
    RespOptions {
        auth: login.auth(),
        db: login.db,
        ..RespOptions::default()
    }
}

fn resp_key(key: &Key) -> RespKey {
    RespKey::new(Bytes::copy_from_slice(key.as_bytes())).expect("a memcached key is a RESP key")
}

fn unlink(key: &Key) -> RespCommand {
    RespCommand::new("UNLINK").key(&resp_key(key))
}

fn resp_gone(v: &Value) -> Gone {
    match v {
        Value::Integer(1) => Gone::Deleted,
        Value::Integer(0) => Gone::NotFound,
        _ => Gone::Failed,
    }
}

fn mc_gone(r: &Response) -> Gone {
    match r {
        Response::Deleted
        | Response::Meta {
            status: MetaStatus::Hd,
            ..
        } => Gone::Deleted,
        Response::NotFound
        | Response::Meta {
            status: MetaStatus::Nf,
            ..
        } => Gone::NotFound,
        _ => Gone::Failed,
    }
}

fn mc_stored(r: &Response) -> bool {
    matches!(
        r,
        Response::Stored
            | Response::Meta {
                status: MetaStatus::Hd,
                ..
            }
    )
}

impl Conn {
    pub fn connect(
        address: &Address,
        options: &Options,
        protocol: &Protocol,
    ) -> Result<Conn, Error> {
        let inner = match protocol {
            Protocol::Resp(login) => Inner::Resp(Box::new(RespClient::connect(
                address,
                options.clone(),
                &resp_options(login),
            )?)),
            p => Inner::Memcached {
                conn: Box::new(BlockingConnection::connect(address, options.clone())?),
                meta: *p == Protocol::Meta,
                value_flag: MetaFlags::new("v").expect("valid flag"),
                no_flags: MetaFlags::default(),
            },
        };
        Ok(Conn {
            inner,
            sent: Sent::new(),
        })
    }

    /// The commands sent on this connection so far, by name; counting starts again.
    pub fn take_sent(&mut self) -> Sent {
        std::mem::take(&mut self.sent)
    }

    fn count(&mut self, name: &'static str, n: usize) {
        *self.sent.entry(name).or_default() += n as u64;
    }

    /// The floor's request once: whether the reply was its answer.
    pub fn floor(&mut self, request: &FloorRequest) -> Result<bool, Error> {
        match &mut self.inner {
            Inner::Memcached { conn, .. } => {
                *self.sent.entry(request.name).or_default() += 1;
                let command = request.command().expect("a memcached floor request");
                conn.send(command).map(|r| request.answered(&r))
            }
            Inner::Resp(c) => match request.command() {
                // through a proxy: a GET of the key never written, counted as the GET it is
                Some(Command::Get(keys)) => {
                    *self.sent.entry("GET").or_default() += 1;
                    c.get(&resp_key(&keys[0])).map(|v| v.is_none())
                }
                _ => {
                    *self.sent.entry(request.name).or_default() += 1;
                    c.send(&RespCommand::new("PING"))
                        .map(|v| matches!(v, Value::Simple(s) if &s[..] == b"PONG"))
                }
            },
        }
    }

    /// Stores `value` under `key`: whether it was stored.
    pub fn set(&mut self, key: &Key, value: Bytes) -> Result<bool, Error> {
        let name = match &self.inner {
            Inner::Memcached { meta: true, .. } => "ms",
            Inner::Memcached { .. } => "set",
            Inner::Resp(_) => "SET",
        };
        self.count(name, 1);
        match &mut self.inner {
            Inner::Memcached {
                conn, meta: false, ..
            } => conn.set(key, value, 0, 0),
            Inner::Memcached { conn, no_flags, .. } => conn
                .meta_set(key, value, no_flags)
                .map(|r| r.status == MetaStatus::Hd),
            Inner::Resp(c) => c.set(&resp_key(key), value, SetOptions::default()),
        }
    }

    /// Reads `key`: its value, None on a miss.
    pub fn get(&mut self, key: &Key) -> Result<Option<Bytes>, Error> {
        let name = match &self.inner {
            Inner::Memcached { meta: true, .. } => "mg",
            Inner::Memcached { .. } => "get",
            Inner::Resp(_) => "GET",
        };
        self.count(name, 1);
        match &mut self.inner {
            Inner::Memcached {
                conn, meta: false, ..
            } => conn.get(key).map(|v| v.map(|v| v.data)),
            Inner::Memcached {
                conn, value_flag, ..
            } => conn.meta_get(key, value_flag).map(|r| r.data),
            Inner::Resp(c) => c.get(&resp_key(key)),
        }
    }

    /// A read of a key never written, its reply not looked at (the multi-get rounds'
    /// untimed primer): `get` (a multi-get of one key) for memcached, `GET` for RESP.
    pub fn read_miss(&mut self, key: &Key) -> Result<(), Error> {
        match &mut self.inner {
            Inner::Memcached { conn, .. } => {
                *self.sent.entry("get").or_default() += 1;
                conn.get_multi(std::slice::from_ref(key)).map(drop)
            }
            Inner::Resp(c) => {
                *self.sent.entry("GET").or_default() += 1;
                c.get(&resp_key(key)).map(drop)
            }
        }
    }

    /// One multi-key read of `keys`: the `(key, value)` of each found.
    pub fn multi_get(&mut self, keys: &[Key]) -> Result<Vec<(Bytes, Bytes)>, Error> {
        let (name, n) = match &self.inner {
            Inner::Memcached { meta: true, .. } => ("mg", keys.len()),
            Inner::Memcached { .. } => ("get", 1),
            Inner::Resp(_) => ("MGET", 1),
        };
        self.count(name, n);
        match &mut self.inner {
            Inner::Memcached {
                conn, meta: false, ..
            } => Ok(conn
                .get_multi(keys)?
                .into_iter()
                .map(|v| (v.key, v.data))
                .collect()),
            Inner::Memcached {
                conn, value_flag, ..
            } => {
                let reads: Vec<Command> = keys
                    .iter()
                    .map(|key| Command::MetaGet {
                        key: key.clone(),
                        flags: value_flag.clone(),
                    })
                    .collect();
                Ok(conn
                    .pipeline(&reads)?
                    .into_iter()
                    .zip(keys)
                    .filter_map(|(r, key)| match r {
                        Response::Meta { data: Some(d), .. } => {
                            Some((Bytes::copy_from_slice(key.as_bytes()), d))
                        }
                        _ => None,
                    })
                    .collect())
            }
            Inner::Resp(c) => {
                let rkeys: Vec<RespKey> = keys.iter().map(resp_key).collect();
                Ok(c.mget(&rkeys)?
                    .into_iter()
                    .zip(keys)
                    .filter_map(|(v, key)| v.map(|d| (Bytes::copy_from_slice(key.as_bytes()), d)))
                    .collect())
            }
        }
    }

    /// One pipeline: deletes `deleted`, then stores each of `written`. Returns what each
    /// delete found, and the first store that failed (its reply), if any.
    pub fn batch(
        &mut self,
        deleted: &[Key],
        written: &[(Key, Bytes)],
    ) -> Result<(Vec<Gone>, Option<String>), Error> {
        let (del, set) = match &self.inner {
            Inner::Memcached { meta: true, .. } => ("md", "ms"),
            Inner::Memcached { .. } => ("delete", "set"),
            Inner::Resp(_) => ("UNLINK", "SET"),
        };
        self.count(del, deleted.len());
        self.count(set, written.len());
        match &mut self.inner {
            Inner::Memcached {
                conn,
                meta,
                no_flags,
                ..
            } => {
                let mut cmds: Vec<Command> = deleted
                    .iter()
                    .map(|k| mc_delete(k, *meta, no_flags))
                    .collect();
                cmds.extend(written.iter().map(|(key, data)| match meta {
                    false => Command::Set(Store {
                        key: key.clone(),
                        flags: 0,
                        exptime: 0,
                        data: data.clone(),
                    }),
                    true => Command::MetaSet {
                        key: key.clone(),
                        data: data.clone(),
                        flags: no_flags.clone(),
                    },
                }));
                let replies = conn.pipeline(&cmds)?;
                let (gone, stored) = replies.split_at(deleted.len());
                let bad = stored.iter().find(|r| !mc_stored(r));
                Ok((
                    gone.iter().map(mc_gone).collect(),
                    bad.map(|r| format!("{r:?}")),
                ))
            }
            Inner::Resp(c) => {
                let mut cmds: Vec<RespCommand> = deleted.iter().map(unlink).collect();
                cmds.extend(written.iter().map(|(key, data)| {
                    set_command(&resp_key(key), data.clone(), SetOptions::default())
                }));
                let replies = c.pipeline(&cmds)?;
                let (gone, stored) = replies.split_at(deleted.len());
                let bad = stored
                    .iter()
                    .find(|v| !matches!(v, Value::Simple(s) if &s[..] == b"OK"));
                Ok((
                    gone.iter().map(resp_gone).collect(),
                    bad.map(|v| format!("{v:?}")),
                ))
            }
        }
    }

    /// Deletes `keys` in one pipeline: what each delete found.
    pub fn delete(&mut self, keys: &[Key]) -> Result<Vec<Gone>, Error> {
        Ok(self.batch(keys, &[])?.0)
    }
}

fn mc_delete(key: &Key, meta: bool, no_flags: &MetaFlags) -> Command {
    match meta {
        false => Command::Delete(key.clone()),
        true => Command::MetaDelete {
            key: key.clone(),
            flags: no_flags.clone(),
        },
    }
}
