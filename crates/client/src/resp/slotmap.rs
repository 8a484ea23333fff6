//! A Redis Cluster's slot map: which master serves each of the 16,384 hash slots, read from
//! `CLUSTER SHARDS` (Redis 7.0 and later) or `CLUSTER SLOTS` (any cluster), and the
//! redirections (`-MOVED`, `-ASK`) that correct it.

use cachelab_proto::resp::Value;

use super::slot::SLOTS;
use crate::Address;

/// One master, as the cluster announces it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNode {
    /// Where clients reach it: the endpoint the cluster announces (its IP, or hostname when
    /// `cluster-preferred-endpoint-type` says so) and its port (`tls-port` over TLS).
    pub address: Address,
    /// The node's id (40 hex characters); empty for a node known only from a redirection.
    pub id: String,
    /// The slot ranges it serves, inclusive.
    pub slots: Vec<(u16, u16)>,
    /// Its replicas' addresses: recorded, never read from.
    pub replicas: Vec<Address>,
}

const NONE: u16 = u16::MAX;

/// The owner of each slot.
#[derive(Debug, Clone)]
pub struct SlotMap {
    nodes: Vec<ClusterNode>,
    /// For each slot, an index into `nodes` (`NONE`: no owner known).
    owner: Vec<u16>,
}

impl Default for SlotMap {
    fn default() -> SlotMap {
        SlotMap {
            nodes: Vec::new(),
            owner: vec![NONE; SLOTS as usize],
        }
    }
}

/// A redirection: `-MOVED slot host:port` (the slot now lives there) or `-ASK slot host:port`
/// (this one request goes there, after `ASKING`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redirect {
    Moved { slot: u16, to: Address },
    Ask { slot: u16, to: Address },
}

impl Redirect {
    /// The redirection an error reply from `from` holds, if it holds one. An empty host
    /// (`MOVED 1 :7000`) is `from`'s host, as the cluster spec says; an unknown one (`?`) is
    /// no redirection this client can follow.
    pub fn parse(error: &[u8], from: &Address) -> Option<Redirect> {
        let text = std::str::from_utf8(error).ok()?;
        let mut words = text.split(' ');
        let (kind, slot, to) = (words.next()?, words.next()?, words.next()?);
        let slot: u16 = slot.parse().ok().filter(|&s| s < SLOTS)?;
        let (host, port) = to.rsplit_once(':')?;
        let host = if host.is_empty() {
            host_of(from)?
        } else {
            host.to_string()
        };
        let to = endpoint(&host, port.parse().ok()?)?;
        match kind {
            "MOVED" => Some(Redirect::Moved { slot, to }),
            "ASK" => Some(Redirect::Ask { slot, to }),
            _ => None,
        }
    }

    pub fn slot(&self) -> u16 {
        match self {
            Redirect::Moved { slot, .. } | Redirect::Ask { slot, .. } => *slot,
        }
    }

    pub fn to(&self) -> &Address {
        match self {
            Redirect::Moved { to, .. } | Redirect::Ask { to, .. } => to,
        }
    }
}

/// The host part of a TCP address (`[::1]:7000` gives `::1`).
fn host_of(a: &Address) -> Option<String> {
    match a {
        Address::Tcp(hp) => {
            let (h, _) = hp.rsplit_once(':')?;
            Some(h.trim_start_matches('[').trim_end_matches(']').to_string())
        }
        Address::Unix(_) => None,
    }
}

/// `host:port` as an [`Address`], an IPv6 host in brackets; `?` (an endpoint the cluster does
/// not know) or port 0 is none.
fn endpoint(host: &str, port: i64) -> Option<Address> {
    if host.is_empty() || host == "?" || !(1..=65535).contains(&port) {
        return None;
    }
    let hp = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    hp.parse().ok()
}

/// Why a reply is not a slot map.
fn bad(what: &str, v: &Value) -> String {
    let mut shown = format!("{v:?}");
    if shown.len() > 120 {
        let mut cut = 120;
        while !shown.is_char_boundary(cut) {
            cut -= 1;
        }
        shown.truncate(cut);
        shown.push('…');
    }
    format!("{what}: {shown}")
}

/// The fields of a RESP3 map or a RESP2 flat array of name, value pairs.
fn fields(v: &Value) -> Option<Vec<(&[u8], &Value)>> {
    match v.plain() {
        Value::Map(pairs) => pairs
            .iter()
            .map(|(k, v)| Some((&k.as_bytes()?[..], v)))
            .collect(),
        Value::Array(flat) if flat.len() % 2 == 0 => flat
            .chunks(2)
            .map(|p| Some((&p[0].as_bytes()?[..], &p[1])))
            .collect(),
        _ => None,
    }
}

fn field<'a>(fields: &[(&[u8], &'a Value)], name: &str) -> Option<&'a Value> {
    fields
        .iter()
        .find(|(k, _)| *k == name.as_bytes())
        .map(|(_, v)| *v)
}

fn items(v: &Value) -> Option<&[Value]> {
    match v.plain() {
        Value::Array(a) | Value::Set(a) => Some(a),
        _ => None,
    }
}

fn int(v: &Value) -> Option<i64> {
    match v.plain() {
        Value::Integer(n) => Some(*n),
        v => std::str::from_utf8(v.as_bytes()?).ok()?.parse().ok(),
    }
}

fn string(v: &Value) -> Option<String> {
    v.plain()
        .as_bytes()
        .map(|b| String::from_utf8_lossy(b).into_owned())
}

fn slot_range(start: i64, end: i64) -> Option<(u16, u16)> {
    let ok = |s: i64| (0..SLOTS as i64).contains(&s);
    (ok(start) && ok(end) && start <= end).then_some((start as u16, end as u16))
}

impl SlotMap {
    /// The map `CLUSTER SHARDS` gives (Redis 7.0+), asked of `asked`: each shard's slot
    /// ranges and its master; `tls` takes each node's `tls-port` rather than its `port`.
    pub fn from_shards(reply: &Value, asked: &Address, tls: bool) -> Result<SlotMap, String> {
        let shards = items(reply).ok_or_else(|| bad("CLUSTER SHARDS is not an array", reply))?;
        let mut map = SlotMap::default();
        for shard in shards {
            let f = fields(shard).ok_or_else(|| bad("a shard is not a map", shard))?;
            let flat = field(&f, "slots")
                .and_then(items)
                .ok_or_else(|| bad("a shard has no slots", shard))?;
            let mut slots = Vec::new();
            for pair in flat.chunks(2) {
                let range = match pair {
                    [a, b] => int(a).zip(int(b)).and_then(|(a, b)| slot_range(a, b)),
                    _ => None,
                };
                slots.push(range.ok_or_else(|| bad("a shard's slots are not ranges", shard))?);
            }
            let nodes = field(&f, "nodes")
                .and_then(items)
                .ok_or_else(|| bad("a shard has no nodes", shard))?;
            let (mut master, mut replicas) = (None, Vec::new());
            for node in nodes {
                let nf = fields(node).ok_or_else(|| bad("a node is not a map", node))?;
                let get = |k| field(&nf, k);
                let port = if tls { get("tls-port") } else { get("port") }.and_then(int);
                let host = get("endpoint")
                    .and_then(string)
                    .filter(|h| !h.is_empty())
                    .or_else(|| host_of(asked));
                let Some(address) = host.zip(port).and_then(|(h, p)| endpoint(&h, p)) else {
                    continue; // an endpoint the cluster does not know: unreachable
                };
                let failed = get("health").and_then(string).as_deref() == Some("fail");
                match get("role").and_then(string).as_deref() {
                    Some("master") if !failed => {
                        let id = get("id").and_then(string).unwrap_or_default();
                        master = Some((address, id));
                    }
                    _ => replicas.push(address),
                }
            }
            if let (Some((address, id)), false) = (master, slots.is_empty()) {
                map.add(ClusterNode {
                    address,
                    id,
                    slots,
                    replicas,
                });
            }
        }
        Ok(map)
    }

    /// The map `CLUSTER SLOTS` gives (any cluster), asked of `asked`: each range, its master
    /// first, then its replicas. An empty host is `asked`'s host.
    pub fn from_slots(reply: &Value, asked: &Address) -> Result<SlotMap, String> {
        let ranges = items(reply).ok_or_else(|| bad("CLUSTER SLOTS is not an array", reply))?;
        let mut map = SlotMap::default();
        for r in ranges {
            let parts = items(r).filter(|p| p.len() >= 3);
            let parsed = parts.and_then(|p| {
                let range = slot_range(int(&p[0])?, int(&p[1])?)?;
                let node = |v: &Value| {
                    let n = items(v).filter(|n| n.len() >= 2)?;
                    let host = string(&n[0])
                        .filter(|h| !h.is_empty())
                        .or_else(|| host_of(asked))?;
                    let id = n.get(2).and_then(string).unwrap_or_default();
                    Some((endpoint(&host, int(&n[1])?), id))
                };
                let (master, id) = node(&p[2])?;
                let replicas = p[3..].iter().filter_map(|v| node(v)?.0).collect();
                Some((range, master, id, replicas))
            });
            let (range, master, id, replicas) =
                parsed.ok_or_else(|| bad("a CLUSTER SLOTS range is not one", r))?;
            if let Some(address) = master {
                map.add(ClusterNode {
                    address,
                    id,
                    slots: vec![range],
                    replicas,
                });
            }
        }
        Ok(map)
    }

    /// Adds a master's ranges (merged with a node of the same address).
    fn add(&mut self, node: ClusterNode) {
        let i = match self.nodes.iter().position(|n| n.address == node.address) {
            Some(i) => {
                let n = &mut self.nodes[i];
                n.slots.extend(node.slots.iter().copied());
                n.replicas.extend(node.replicas);
                if n.id.is_empty() {
                    n.id = node.id;
                }
                i
            }
            None => {
                self.nodes.push(node.clone());
                self.nodes.len() - 1
            }
        };
        for &(a, b) in &node.slots {
            for s in a..=b {
                self.owner[s as usize] = i as u16;
            }
        }
    }

    /// The master that serves `slot`, if the map knows one.
    pub fn owner(&self, slot: u16) -> Option<&Address> {
        match self.owner.get(slot as usize) {
            Some(&i) if i != NONE => Some(&self.nodes[i as usize].address),
            _ => None,
        }
    }

    /// Records that `slot` is served by `to` (what a `-MOVED` says), adding `to` as a node if
    /// the map did not know it. The node's `slots` ranges are left as read.
    pub fn set_owner(&mut self, slot: u16, to: &Address) {
        let i = match self.nodes.iter().position(|n| &n.address == to) {
            Some(i) => i,
            None => {
                self.nodes.push(ClusterNode {
                    address: to.clone(),
                    id: String::new(),
                    slots: Vec::new(),
                    replicas: Vec::new(),
                });
                self.nodes.len() - 1
            }
        };
        self.owner[slot as usize] = i as u16;
    }

    /// The masters, in the order the cluster listed them.
    pub fn nodes(&self) -> &[ClusterNode] {
        &self.nodes
    }

    /// How many slots have a known owner (16,384 when the cluster is whole).
    pub fn covered(&self) -> usize {
        self.owner.iter().filter(|&&i| i != NONE).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn bulk(s: &str) -> Value {
        Value::Bulk(Bytes::from(s.to_string()))
    }

    fn a(s: &str) -> Address {
        s.parse().unwrap()
    }

    #[test]
    fn redirections_parse_with_the_spec_s_empty_host() {
        let from = a("127.0.0.21:7000");
        assert_eq!(
            Redirect::parse(b"MOVED 3999 127.0.0.22:7001", &from),
            Some(Redirect::Moved {
                slot: 3999,
                to: a("127.0.0.22:7001")
            })
        );
        assert_eq!(
            Redirect::parse(b"ASK 12 :7002", &from),
            Some(Redirect::Ask {
                slot: 12,
                to: a("127.0.0.21:7002")
            })
        );
        assert_eq!(
            Redirect::parse(b"MOVED 1 ::1:7003", &from).map(|r| r.to().clone()),
            Some(a("[::1]:7003"))
        );
        for not in [
            &b"MOVED 16384 h:1"[..],
            b"MOVED 1 ?:7000",
            b"ERR MOVED",
            b"TRYAGAIN Multiple keys request during rehashing of slot",
            b"MOVED 1 h:0",
        ] {
            assert_eq!(Redirect::parse(not, &from), None, "{not:?}");
        }
    }

    #[test]
    fn cluster_slots_with_an_empty_host_and_replicas() {
        let node = |h: &str, p: i64| Value::Array(vec![bulk(h), Value::Integer(p), bulk("id")]);
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Integer(0),
                Value::Integer(99),
                node("", 7000),
                node("10.0.0.9", 7100),
            ]),
            Value::Array(vec![
                Value::Integer(100),
                Value::Integer(16383),
                node("10.0.0.2", 7001),
            ]),
        ]);
        let map = SlotMap::from_slots(&reply, &a("10.0.0.1:7000")).unwrap();
        assert_eq!(map.owner(0), Some(&a("10.0.0.1:7000")));
        assert_eq!(map.owner(99), Some(&a("10.0.0.1:7000")));
        assert_eq!(map.owner(100), Some(&a("10.0.0.2:7001")));
        assert_eq!(map.covered(), 16384);
        assert_eq!(map.nodes()[0].replicas, vec![a("10.0.0.9:7100")]);
        let bad = Value::Array(vec![Value::Array(vec![
            Value::Integer(5),
            Value::Integer(70000),
            node("h", 1),
        ])]);
        let e = SlotMap::from_slots(&bad, &a("h:1")).unwrap_err();
        assert!(e.starts_with("a CLUSTER SLOTS range is not one: "), "{e}");
    }

    #[test]
    fn a_moved_slot_changes_owner_and_may_add_a_node() {
        let mut map = SlotMap::default();
        assert_eq!(map.owner(7), None);
        map.set_owner(7, &a("h:2"));
        assert_eq!(map.owner(7), Some(&a("h:2")));
        assert_eq!(map.covered(), 1);
        assert_eq!(map.nodes().len(), 1);
    }
}
