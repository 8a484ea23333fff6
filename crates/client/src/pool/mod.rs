//! Which server of a pool a key lives on, computed exactly as production clients compute it.
//! Pure functions, no I/O.
//!
//! - [`Kind::Ketama`]: libmemcached's weighted ketama (`MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED`,
//!   what pylibmc's `ketama_weighted` behaviour selects): each server gets
//!   `floor(weight / total * 160 / 4 * servers) * 4` points (computed in single precision, as
//!   libmemcached does), four per MD5 digest of `host:port-i` (`host-i` on port 11211); a key's
//!   hash is the first four bytes of its MD5, little endian, and it belongs to the first point
//!   at or after that hash, wrapping round.
//! - [`Kind::KetamaPlain`]: libmemcached's `MEMCACHED_BEHAVIOR_KETAMA` with its default hash
//!   (pylibmc's plain `ketama` behaviour): the key's hash is one-at-a-time, and each server gets
//!   100 points, one-at-a-time of `host:port-i`. A pool with any weight above 1 makes
//!   libmemcached switch to the weighted continuum above, while the key hash stays
//!   one-at-a-time.
//! - [`Kind::Rendezvous`]: pymemcache's `HashClient` default (`RendezvousHash`): the server
//!   whose `murmur3_32("host:port-key")` is highest, ties to the greater name. pymemcache
//!   hashes the characters of a `str` key (each code point modulo 256), so a non-ASCII key is
//!   hashed that way here too.
//! - [`Kind::Modula`]: libmemcached's default distribution: one-at-a-time(key) % servers.
//! - [`Kind::TwemproxyKetama`] and [`Kind::TwemproxyModula`]: twemproxy (nutcracker) 0.5.0's
//!   `distribution: ketama` and `distribution: modula`, with its `hash:` setting as a
//!   [`KeyHash`] (`md5`, `fnv1a_64` — twemproxy's default — or `one_at_a_time`). Its ketama
//!   continuum is libmemcached's weighted one above (points named `host-i` on port 11211,
//!   `host:port-i` elsewhere) whatever the key hash; its modula gives each server `weight`
//!   consecutive slots, servers taken in twemproxy's order (sorted by name: shorter first,
//!   then bytewise), and a key goes to slot `hash % total weight`.

pub mod hash;

use std::fmt;

use hash::{digest_word, fnv1a_64_twemproxy, md5, murmur3_32, one_at_a_time};

/// memcached's default port: libmemcached names ketama points `host-i` on it, not `host:port-i`.
const DEFAULT_PORT: u16 = 11211;
/// Points per server of weighted ketama, before weighting (`MEMCACHED_POINTS_PER_SERVER_KETAMA`).
const KETAMA_POINTS: f32 = 160.0;
/// Points per server of unweighted ketama (`MEMCACHED_POINTS_PER_SERVER`).
const PLAIN_POINTS: usize = 100;
/// Points taken from one MD5 digest.
const POINTS_PER_DIGEST: usize = 4;

/// One member of a pool: `host:port` with a weight (1 unless given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    pub host: String,
    pub port: u16,
    pub weight: u32,
}

impl Server {
    /// Parses `host:port[:weight]`; an IPv6 host is written in brackets, `[::1]:11211:2`.
    pub fn parse(spec: &str) -> Result<Server, PoolError> {
        let bad = |why: &str| PoolError(format!("server {spec:?}: {why}"));
        let spec_t = spec.trim();
        let (host, rest) = if let Some(inner) = spec_t.strip_prefix('[') {
            let end = inner
                .find(']')
                .ok_or_else(|| bad("an IPv6 host needs its closing ']'"))?;
            let rest = inner[end + 1..]
                .strip_prefix(':')
                .ok_or_else(|| bad("expected host:port[:weight]"))?;
            (&inner[..end], rest)
        } else {
            spec_t
                .split_once(':')
                .ok_or_else(|| bad("expected host:port[:weight]"))?
        };
        if host.is_empty() || host.chars().any(|c| c.is_whitespace() || c == '/') {
            return Err(bad("the host is empty or not a host name"));
        }
        let (port, weight) = match rest.split_once(':') {
            Some((p, w)) => (p, Some(w)),
            None => (rest, None),
        };
        let port: u16 = port
            .parse()
            .ok()
            .filter(|&p| p > 0)
            .ok_or_else(|| bad(&format!("port {port:?} is not a number from 1 to 65535")))?;
        let weight = match weight {
            None => 1,
            Some(w) => w
                .parse::<u32>()
                .ok()
                .filter(|&w| (1..=1_000_000).contains(&w))
                .ok_or_else(|| bad(&format!("weight {w:?} is not a number from 1 to 1000000")))?,
        };
        Ok(Server {
            host: host.to_string(),
            port,
            weight,
        })
    }

    /// `host:port` as clients name the server (no brackets, as pymemcache and libmemcached
    /// build the strings they hash).
    pub fn name(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

impl fmt::Display for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        write!(f, "{host}:{}", self.port)?;
        if self.weight != 1 {
            write!(f, ":{}", self.weight)?;
        }
        Ok(())
    }
}

/// A pool or server spec that cannot be used, with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolError(pub String);

impl fmt::Display for PoolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PoolError {}

/// A twemproxy pool's key hash (its `hash:` setting), of the twelve it offers those cachelab
/// computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyHash {
    /// `md5`: the first four digest bytes, little endian (libmemcached's ketama key hash).
    Md5,
    /// `fnv1a_64`, twemproxy's default: see [`hash::fnv1a_64_twemproxy`].
    Fnv1a64,
    /// `one_at_a_time`, with bytes read as signed `char` (as libmemcached's).
    OneAtATime,
}

impl KeyHash {
    fn of(self, key: &[u8]) -> u32 {
        match self {
            KeyHash::Md5 => digest_word(&md5(key), 0),
            KeyHash::Fnv1a64 => fnv1a_64_twemproxy(key),
            KeyHash::OneAtATime => one_at_a_time(key),
        }
    }
}

/// How keys are spread over the servers (by its name in [`Kind::NAMES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(try_from = "String")]
pub enum Kind {
    Ketama,
    KetamaPlain,
    Rendezvous,
    Modula,
    /// twemproxy's `distribution: ketama` with this `hash:`.
    TwemproxyKetama(KeyHash),
    /// twemproxy's `distribution: modula` with this `hash:`.
    TwemproxyModula(KeyHash),
}

impl Kind {
    /// Every kind, in the order of [`Kind::NAMES`].
    pub const ALL: [Kind; 10] = [
        Kind::Ketama,
        Kind::KetamaPlain,
        Kind::Rendezvous,
        Kind::Modula,
        Kind::TwemproxyKetama(KeyHash::Md5),
        Kind::TwemproxyKetama(KeyHash::Fnv1a64),
        Kind::TwemproxyKetama(KeyHash::OneAtATime),
        Kind::TwemproxyModula(KeyHash::Md5),
        Kind::TwemproxyModula(KeyHash::Fnv1a64),
        Kind::TwemproxyModula(KeyHash::OneAtATime),
    ];
    pub const NAMES: [&'static str; 10] = [
        "ketama",
        "ketama-plain",
        "rendezvous",
        "modula",
        "twemproxy-ketama-md5",
        "twemproxy-ketama-fnv1a_64",
        "twemproxy-ketama-one_at_a_time",
        "twemproxy-modula-md5",
        "twemproxy-modula-fnv1a_64",
        "twemproxy-modula-one_at_a_time",
    ];

    pub fn parse(name: &str) -> Result<Kind, PoolError> {
        Kind::ALL
            .into_iter()
            .find(|k| k.name() == name)
            .ok_or_else(|| {
                PoolError(format!(
                    "unknown distribution {name:?}: expected one of {}",
                    Kind::NAMES.join(", ")
                ))
            })
    }

    pub fn name(self) -> &'static str {
        let at = Kind::ALL.iter().position(|&k| k == self).unwrap_or(0);
        Kind::NAMES[at]
    }

    /// Whether the kind honours weights (the others refuse them).
    fn weighted(self) -> bool {
        !matches!(self, Kind::Rendezvous | Kind::Modula)
    }
}

impl TryFrom<String> for Kind {
    type Error = String;

    fn try_from(name: String) -> Result<Kind, String> {
        Kind::parse(&name).map_err(|e| e.0)
    }
}

/// A pool's key -> server map.
#[derive(Debug, Clone)]
pub struct Distribution {
    kind: Kind,
    servers: Vec<Server>,
    /// Ketama's continuum: (point, server index), sorted.
    continuum: Vec<(u32, usize)>,
    /// Rendezvous: each server's `host:port`.
    names: Vec<String>,
    /// twemproxy's modula: (end of the server's slots, server index), in twemproxy's order.
    slots: Vec<(u64, usize)>,
}

impl Distribution {
    /// The map for `servers`, in the order given (clients do not sort them by default).
    /// Weights other than 1 are refused by `rendezvous` and `modula`, which ignore them.
    pub fn new(kind: Kind, servers: Vec<Server>) -> Result<Distribution, PoolError> {
        if servers.is_empty() {
            return Err(PoolError("a pool needs at least one server".into()));
        }
        for (i, s) in servers.iter().enumerate() {
            if servers[..i]
                .iter()
                .any(|o| o.host == s.host && o.port == s.port)
            {
                return Err(PoolError(format!("server {} is listed twice", s.name())));
            }
            if s.weight != 1 && !kind.weighted() {
                return Err(PoolError(format!(
                    "server {s}: {} ignores weights (only ketama and the twemproxy kinds \
                     honour them)",
                    kind.name()
                )));
            }
        }
        let continuum = match kind {
            Kind::Ketama => ketama_continuum(&servers),
            // libmemcached turns weighting on as soon as one server weighs more than 1.
            Kind::KetamaPlain if servers.iter().any(|s| s.weight > 1) => ketama_continuum(&servers),
            Kind::KetamaPlain => plain_continuum(&servers),
            Kind::TwemproxyKetama(_) => ketama_continuum(&servers),
            Kind::Rendezvous | Kind::Modula | Kind::TwemproxyModula(_) => Vec::new(),
        };
        let slots = match kind {
            Kind::TwemproxyModula(_) => twemproxy_slots(&servers),
            _ => Vec::new(),
        };
        let names = servers.iter().map(Server::name).collect();
        Ok(Distribution {
            kind,
            servers,
            continuum,
            names,
            slots,
        })
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    pub fn servers(&self) -> &[Server] {
        &self.servers
    }

    /// Ketama's points per server (empty for the other kinds).
    pub fn points(&self) -> Vec<usize> {
        let mut n = vec![
            0;
            if self.continuum.is_empty() {
                0
            } else {
                self.servers.len()
            }
        ];
        for &(_, i) in &self.continuum {
            n[i] += 1;
        }
        n
    }

    /// The index in [`Distribution::servers`] of the server that holds `key`.
    pub fn server_for(&self, key: &[u8]) -> usize {
        if self.servers.len() == 1 {
            return 0;
        }
        match self.kind {
            Kind::Ketama | Kind::KetamaPlain => {
                let h = if self.kind == Kind::Ketama {
                    digest_word(&md5(key), 0)
                } else {
                    one_at_a_time(key)
                };
                self.on_continuum(h)
            }
            Kind::TwemproxyKetama(hash) => self.on_continuum(hash.of(key)),
            Kind::TwemproxyModula(hash) => {
                let total = self.slots.last().map_or(1, |&(end, _)| end);
                let slot = u64::from(hash.of(key)) % total;
                self.slots[self.slots.partition_point(|&(end, _)| end <= slot)].1
            }
            Kind::Modula => (one_at_a_time(key) as usize) % self.servers.len(),
            Kind::Rendezvous => {
                let mut best: Option<(u32, usize)> = None;
                let mut text = Vec::with_capacity(64);
                for (i, name) in self.names.iter().enumerate() {
                    text.clear();
                    text.extend_from_slice(name.as_bytes());
                    text.push(b'-');
                    text.extend_from_slice(key);
                    let score = murmur3_32(&pymemcache_text(&text), 0);
                    let wins = match best {
                        None => true,
                        Some((s, j)) => score > s || (score == s && *name > self.names[j]),
                    };
                    if wins {
                        best = Some((score, i));
                    }
                }
                best.map_or(0, |(_, i)| i)
            }
        }
    }
}

impl Distribution {
    /// The server of the first continuum point at or after `h`, wrapping round.
    fn on_continuum(&self, h: u32) -> usize {
        let at = self.continuum.partition_point(|&(point, _)| point < h);
        self.continuum.get(at).unwrap_or(&self.continuum[0]).1
    }
}

/// twemproxy's name for a server without an alias: `host` on port 11211, else `host:port`.
fn twemproxy_name(s: &Server) -> String {
    if s.port == DEFAULT_PORT {
        s.host.clone()
    } else {
        s.name()
    }
}

/// twemproxy's modula slots: `weight` consecutive slots a server, servers in the order
/// twemproxy keeps them once it has checked its configuration for duplicates (by name,
/// shorter names first, then bytewise).
fn twemproxy_slots(servers: &[Server]) -> Vec<(u64, usize)> {
    let mut order: Vec<(String, usize)> = servers
        .iter()
        .enumerate()
        .map(|(i, s)| (twemproxy_name(s), i))
        .collect();
    order.sort_by(|(a, _), (b, _)| a.len().cmp(&b.len()).then_with(|| a.cmp(b)));
    let mut end = 0u64;
    order
        .into_iter()
        .map(|(_, i)| {
            end += u64::from(servers[i].weight.max(1));
            (end, i)
        })
        .collect()
}

/// The bytes pymemcache's `murmur3_32` reads from a `str`: one per character, its code point
/// modulo 256 (the same as the UTF-8 bytes for ASCII; text that is not UTF-8 as it is).
fn pymemcache_text(text: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    match std::str::from_utf8(text) {
        Ok(s) if !s.is_ascii() => s.chars().map(|c| (u32::from(c) & 0xff) as u8).collect(),
        _ => std::borrow::Cow::Borrowed(text),
    }
}

/// The name libmemcached hashes for point `i` of server `s`.
fn point_name(s: &Server, i: usize) -> String {
    if s.port == DEFAULT_PORT {
        format!("{}-{i}", s.host)
    } else {
        format!("{}:{}-{i}", s.host, s.port)
    }
}

/// libmemcached's unweighted ketama continuum with its default hash: 100 points a server.
fn plain_continuum(servers: &[Server]) -> Vec<(u32, usize)> {
    let mut points: Vec<(u32, usize)> = servers
        .iter()
        .enumerate()
        .flat_map(|(index, s)| {
            (0..PLAIN_POINTS).map(move |i| (one_at_a_time(point_name(s, i).as_bytes()), index))
        })
        .collect();
    points.sort_unstable();
    points
}

/// libmemcached's weighted ketama continuum, sorted by point then server index.
fn ketama_continuum(servers: &[Server]) -> Vec<(u32, usize)> {
    let total: u64 = servers.iter().map(|s| u64::from(s.weight.max(1))).sum();
    let live = servers.len() as f32;
    let mut points = Vec::new();
    for (index, s) in servers.iter().enumerate() {
        // Single precision throughout, in libmemcached's order of operations.
        let pct = s.weight.max(1) as f32 / total as f32;
        let per_server = ((pct * KETAMA_POINTS / 4.0 * live + 1e-10_f32).floor() as usize) * 4;
        for i in 0..per_server / POINTS_PER_DIGEST {
            let digest = md5(point_name(s, i).as_bytes());
            for n in 0..POINTS_PER_DIGEST {
                points.push((digest_word(&digest, n), index));
            }
        }
    }
    points.sort_unstable();
    points
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(kind: Kind, specs: &[&str]) -> Distribution {
        let servers = specs.iter().map(|s| Server::parse(s).unwrap()).collect();
        Distribution::new(kind, servers).unwrap()
    }

    #[test]
    fn server_specs_parse_with_and_without_weight() {
        let s = Server::parse("10.0.0.1:11211").unwrap();
        assert_eq!((s.host.as_str(), s.port, s.weight), ("10.0.0.1", 11211, 1));
        let s = Server::parse("cache-a:11212:3").unwrap();
        assert_eq!((s.host.as_str(), s.port, s.weight), ("cache-a", 11212, 3));
        let s = Server::parse("[::1]:11213:2").unwrap();
        assert_eq!((s.host.as_str(), s.port, s.weight), ("::1", 11213, 2));
        assert_eq!(s.to_string(), "[::1]:11213:2");
        for bad in [
            "host", ":11211", "h:0", "h:70000", "h:1:0", "h:1:x", "[::1", "h:1:2:3",
        ] {
            let e = Server::parse(bad).unwrap_err();
            assert!(e.0.contains(bad), "{e}");
        }
    }

    #[test]
    fn pools_refuse_duplicates_and_weights_that_would_be_ignored() {
        let twice = vec![
            Server::parse("a:1").unwrap(),
            Server::parse("a:1:2").unwrap(),
        ];
        assert!(Distribution::new(Kind::Ketama, twice).is_err());
        let weighted = vec![
            Server::parse("a:1:2").unwrap(),
            Server::parse("b:1").unwrap(),
        ];
        assert!(Distribution::new(Kind::Modula, weighted.clone()).is_err());
        assert!(Distribution::new(Kind::Rendezvous, weighted.clone()).is_err());
        assert!(Distribution::new(Kind::Ketama, weighted).is_ok());
        assert!(Distribution::new(Kind::Ketama, vec![]).is_err());
    }

    #[test]
    fn ketama_gives_160_points_a_server_scaled_by_weight() {
        let d = pool(Kind::Ketama, &["a:1", "b:1", "c:1"]);
        assert_eq!(d.points(), vec![160, 160, 160]);
        // 1/4 of 2 servers' 320 points = 80; 3/4 = 240.
        let d = pool(Kind::Ketama, &["a:1:1", "b:1:3"]);
        assert_eq!(d.points(), vec![80, 240]);
        // 1/3 of 480 = 160 exactly; the epsilon keeps floor from rounding it down to 156.
        let d = pool(Kind::Ketama, &["a:1:1", "b:1:1", "c:1:1"]);
        assert_eq!(d.points().iter().sum::<usize>(), 480);
        // Unweighted: 100 each, until a weight above 1 switches to the weighted continuum.
        let d = pool(Kind::KetamaPlain, &["a:1", "b:1"]);
        assert_eq!(d.points(), vec![100, 100]);
        let d = pool(Kind::KetamaPlain, &["a:1:1", "b:1:3"]);
        assert_eq!(d.points(), vec![80, 240]);
    }

    #[test]
    fn every_kind_spreads_keys_over_every_server() {
        for kind in Kind::ALL {
            let d = pool(kind, &["a:11211", "b:11211", "c:11212", "d:11213"]);
            let mut seen = [0usize; 4];
            for i in 0..4000 {
                seen[d.server_for(format!("key:{i}").as_bytes())] += 1;
            }
            for n in seen {
                assert!((600..1400).contains(&n), "{kind:?}: {seen:?}");
            }
        }
    }

    #[test]
    fn one_server_takes_every_key() {
        for kind in Kind::ALL {
            let d = pool(kind, &["a:1"]);
            assert_eq!(d.server_for(b"anything"), 0);
        }
    }

    #[test]
    fn ketama_moves_few_keys_when_a_server_joins() {
        let three = pool(Kind::Ketama, &["a:1", "b:1", "c:1"]);
        let four = pool(Kind::Ketama, &["a:1", "b:1", "c:1", "d:1"]);
        let moved = (0..4000)
            .filter(|i| {
                let k = format!("k{i}");
                let (before, after) = (
                    three.server_for(k.as_bytes()),
                    four.server_for(k.as_bytes()),
                );
                after != 3 && after != before
            })
            .count();
        assert!(moved < 100, "{moved} keys moved between old servers");
    }

    #[test]
    fn every_name_parses_back_to_its_kind() {
        assert_eq!(Kind::ALL.len(), Kind::NAMES.len());
        for (kind, name) in Kind::ALL.into_iter().zip(Kind::NAMES) {
            assert_eq!(kind.name(), name);
            assert_eq!(Kind::parse(name), Ok(kind));
        }
        assert!(Kind::parse("twemproxy-ketama-crc32").is_err());
    }

    #[test]
    fn twemproxy_ketama_md5_is_libmemcached_weighted_ketama() {
        let specs = ["10.0.0.1:11211:3", "10.0.0.2:11211", "10.0.0.3:22122:2"];
        let ours = pool(Kind::Ketama, &specs);
        let twem = pool(Kind::TwemproxyKetama(KeyHash::Md5), &specs);
        assert_eq!(ours.points(), twem.points());
        for i in 0..2000 {
            let k = format!("key:{i}");
            assert_eq!(ours.server_for(k.as_bytes()), twem.server_for(k.as_bytes()));
        }
        // The same continuum with twemproxy's default key hash places keys elsewhere.
        let fnv = pool(Kind::TwemproxyKetama(KeyHash::Fnv1a64), &specs);
        assert_eq!(fnv.points(), ours.points());
        let moved = (0..2000)
            .filter(|i| {
                let k = format!("key:{i}");
                fnv.server_for(k.as_bytes()) != ours.server_for(k.as_bytes())
            })
            .count();
        assert!(moved > 500, "{moved}");
    }

    #[test]
    fn twemproxy_modula_takes_servers_sorted_by_name_with_weight_slots() {
        // twemproxy's order: "b" (port 11211, named by its host alone), then "a:2", "c:1".
        let given = ["c:1", "a:2", "b:11211"];
        let sorted = ["b:11211", "a:2", "c:1"];
        let twem = pool(Kind::TwemproxyModula(KeyHash::OneAtATime), &given);
        let libm = pool(Kind::Modula, &sorted);
        let at = |name: &str| given.iter().position(|g| *g == name).unwrap();
        for i in 0..2000 {
            let k = format!("k{i}");
            let want = at(sorted[libm.server_for(k.as_bytes())]);
            assert_eq!(twem.server_for(k.as_bytes()), want, "{k}");
        }
        // Weight 3 of 4 slots: about three keys in four.
        let w = pool(Kind::TwemproxyModula(KeyHash::Md5), &["a:1:3", "b:1"]);
        let first = (0..4000)
            .filter(|i| w.server_for(format!("k{i}").as_bytes()) == 0)
            .count();
        assert!((2800..3200).contains(&first), "{first}");
    }
}
