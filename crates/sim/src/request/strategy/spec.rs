//! The spec language of strategies (see the parent module's docs): the parser, the canonical
//! form, and sizes as `cachelab.units` reads and writes them.

use std::fmt;
use std::str::FromStr;

/// How much an in-process cache holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Capacity {
    /// At most this many items.
    Items(u64),
    /// At most this many bytes of values.
    Bytes(u64),
}

/// One caching strategy: an optional fixed hot set, an optional per-instance LRU, and an
/// optional prefetch depth. `Strategy::default()` is `none`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Strategy {
    /// The hot set chosen from the training window (`fixed:`).
    pub fixed: Option<Capacity>,
    /// The per-instance LRU (`lru:`).
    pub lru: Option<Capacity>,
    /// Descendant depth fetched by one multi-get on a topic's first touch; 0 = no prefetch.
    pub prefetch_depth: u32,
}

/// Largest accepted prefetch depth (deeper trees are walked to this depth at most).
pub const MAX_PREFETCH_DEPTH: u32 = 64;

const HELP: &str = "a strategy is `none` or components joined with `+`: `lru:N` or `lru:SIZE` \
(per-instance LRU of N items or SIZE bytes), `fixed:N` or `fixed:SIZE` (hot set chosen in the \
training window), `prefetch-children` or `prefetch:depth=D` (D = 1..64); N is a whole number \
of items, SIZE has a unit such as 64MB, 1.5K or 4KiB (K/M/G = 1000^n, Ki/Mi/Gi = 1024^n, \
trailing B optional); e.g. `fixed:5000+prefetch:depth=2`";

impl Strategy {
    /// Parses a spec such as `lru:64MB+prefetch-children`. The error says what is allowed.
    pub fn parse(spec: &str) -> Result<Strategy, String> {
        let bad = |why: String| Err(format!("invalid strategy {spec:?}: {why}; {HELP}"));
        let text = spec.trim();
        if text.is_empty() {
            return bad("empty".into());
        }
        let parts: Vec<&str> = text.split('+').map(str::trim).collect();
        if parts.iter().any(|p| p.is_empty()) {
            return bad("empty component (two `+` in a row, or one at an end)".into());
        }
        if parts.len() == 1 && parts[0].eq_ignore_ascii_case("none") {
            return Ok(Strategy::default());
        }
        let mut s = Strategy::default();
        let mut prefetch_seen = false;
        for part in parts {
            let (name, arg) = match part.split_once(':') {
                Some((n, a)) => (n.trim().to_ascii_lowercase(), Some(a.trim())),
                None => (part.to_ascii_lowercase(), None),
            };
            match (name.as_str(), arg) {
                ("none", _) => return bad("`none` cannot be combined with anything".into()),
                ("lru" | "fixed", None) => return bad(format!("`{name}` needs a capacity")),
                ("lru" | "fixed", Some(a)) => {
                    let cap = match parse_capacity(a) {
                        Ok(c) => c,
                        Err(why) => return bad(format!("`{part}`: {why}")),
                    };
                    let slot = if name == "lru" {
                        &mut s.lru
                    } else {
                        &mut s.fixed
                    };
                    if slot.is_some() {
                        return bad(format!("`{name}` appears more than once"));
                    }
                    *slot = Some(cap);
                }
                ("prefetch-children", None) | ("prefetch", Some(_)) => {
                    if prefetch_seen {
                        return bad("prefetch appears more than once".into());
                    }
                    prefetch_seen = true;
                    s.prefetch_depth = match arg {
                        None => 1,
                        Some(a) => match parse_depth(a) {
                            Ok(d) => d,
                            Err(why) => return bad(format!("`{part}`: {why}")),
                        },
                    };
                }
                ("prefetch", None) => {
                    return bad("`prefetch` needs a depth: `prefetch:depth=D`".into())
                }
                _ => return bad(format!("unknown component `{part}`")),
            }
        }
        Ok(s)
    }

    /// True for `none`.
    pub fn is_none(&self) -> bool {
        *self == Strategy::default()
    }
}

impl FromStr for Strategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Strategy::parse(s)
    }
}

impl fmt::Display for Capacity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Capacity::Items(n) => write!(f, "{n}"),
            Capacity::Bytes(n) => f.write_str(&format_size(n)),
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(c) = self.fixed {
            parts.push(format!("fixed:{c}"));
        }
        if let Some(c) = self.lru {
            parts.push(format!("lru:{c}"));
        }
        match self.prefetch_depth {
            0 => {}
            1 => parts.push("prefetch-children".into()),
            d => parts.push(format!("prefetch:depth={d}")),
        }
        if parts.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&parts.join("+"))
        }
    }
}

fn parse_depth(arg: &str) -> Result<u32, String> {
    let value = arg
        .split_once('=')
        .filter(|(k, _)| k.trim().eq_ignore_ascii_case("depth"))
        .map(|(_, v)| v.trim())
        .ok_or_else(|| format!("expected `depth=D`, got `{arg}`"))?;
    match value.parse::<u32>() {
        Ok(d)
            if (1..=MAX_PREFETCH_DEPTH).contains(&d)
                && value.bytes().all(|b| b.is_ascii_digit()) =>
        {
            Ok(d)
        }
        _ => Err(format!(
            "depth must be a whole number from 1 to {MAX_PREFETCH_DEPTH}, got `{value}`"
        )),
    }
}

/// A plain whole number is an item count; anything with a unit is a byte size. Zero is refused.
fn parse_capacity(arg: &str) -> Result<Capacity, String> {
    if !arg.is_empty() && arg.bytes().all(|b| b.is_ascii_digit()) {
        return match arg.parse::<u64>() {
            Ok(0) => Err("capacity must be at least 1 item".into()),
            Ok(n) => Ok(Capacity::Items(n)),
            Err(_) => Err(format!("item count `{arg}` is too large")),
        };
    }
    let bytes = parse_size(arg)?;
    if bytes == 0 {
        return Err("capacity must be at least 1 byte".into());
    }
    Ok(Capacity::Bytes(bytes))
}

/// Bytes named by a size such as `64MB`, `1.5K`, `4KiB`, `100b` (see the module docs).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let digits_end = t
        .bytes()
        .position(|b| !(b.is_ascii_digit() || b == b'.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(digits_end);
    let unit = unit.trim().to_ascii_lowercase();
    let unit = unit.strip_suffix('b').unwrap_or(&unit);
    let multiplier: u128 = match unit {
        "" => 1,
        "k" => 1000,
        "m" => 1000u128.pow(2),
        "g" => 1000u128.pow(3),
        "ki" => 1024,
        "mi" => 1024u128.pow(2),
        "gi" => 1024u128.pow(3),
        _ => return Err(format!("`{text}` is not a size")),
    };
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (int.is_empty() && frac.is_empty()) || !all_digits(int) || !all_digits(frac) {
        return Err(format!("`{text}` is not a size"));
    }
    if int.len() + frac.len() > 30 {
        return Err(format!("size `{text}` is too large"));
    }
    // Exact decimal arithmetic: value = digits / 10^len(frac) * multiplier.
    let digits: u128 = format!("{int}{frac}")
        .parse()
        .map_err(|_| format!("`{text}` is not a size"))?;
    let scale = 10u128.pow(frac.len() as u32);
    let scaled = digits
        .checked_mul(multiplier)
        .ok_or_else(|| format!("size `{text}` is too large"))?;
    if scaled % scale != 0 {
        return Err(format!("size `{text}` is not a whole number of bytes"));
    }
    u64::try_from(scaled / scale).map_err(|_| format!("size `{text}` is too large"))
}

/// The label `cachelab.units.format_size` gives: exact multiples use the largest unit (SI
/// before IEC), anything else is plain bytes with a `B`, so it always reads as bytes.
pub fn format_size(n: u64) -> String {
    const LABELS: [(u64, &str); 6] = [
        (1_000_000_000, "GB"),
        (1 << 30, "GiB"),
        (1_000_000, "MB"),
        (1 << 20, "MiB"),
        (1000, "KB"),
        (1 << 10, "KiB"),
    ];
    if n > 0 {
        for (unit, suffix) in LABELS {
            // `%` rather than `is_multiple_of`: the workspace supports Rust 1.80.
            #[allow(clippy::manual_is_multiple_of)]
            if n % unit == 0 {
                return format!("{}{suffix}", n / unit);
            }
        }
    }
    format!("{n}B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_the_python_rules() {
        let cases = [
            ("64MB", 64_000_000),
            ("64m", 64_000_000),
            ("1.5K", 1500),
            ("4KiB", 4096),
            ("4kib", 4096),
            ("1GiB", 1 << 30),
            ("100B", 100),
            ("100", 100),
            (".5K", 500),
        ];
        for (text, bytes) in cases {
            assert_eq!(parse_size(text), Ok(bytes), "{text}");
        }
        for bad in ["", "K", "1.2345K", "1TB", "-1K", "1..2K", "1KK", "1e3"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn canonical_form() {
        let cases = [
            ("none", "none"),
            (" NONE ", "none"),
            ("lru:1000", "lru:1000"),
            ("lru:64MB", "lru:64MB"),
            ("lru:65536KiB", "lru:64MiB"),
            ("LRU:64m", "lru:64MB"),
            (
                "prefetch-children+fixed:5000",
                "fixed:5000+prefetch-children",
            ),
            ("prefetch:depth=1", "prefetch-children"),
            (
                "fixed:5000 + prefetch:depth=2",
                "fixed:5000+prefetch:depth=2",
            ),
            ("lru:64MB+fixed:5000", "fixed:5000+lru:64MB"),
            ("fixed:1500B", "fixed:1500B"),
        ];
        for (spec, canonical) in cases {
            let s = Strategy::parse(spec).unwrap();
            assert_eq!(s.to_string(), canonical, "{spec}");
            assert_eq!(Strategy::parse(canonical), Ok(s));
        }
    }

    #[test]
    fn items_and_bytes_are_told_apart() {
        let s = Strategy::parse("lru:1000+fixed:1000B").unwrap();
        assert_eq!(s.lru, Some(Capacity::Items(1000)));
        assert_eq!(s.fixed, Some(Capacity::Bytes(1000)));
    }

    #[test]
    fn bad_specs_say_why() {
        let cases = [
            ("", "empty"),
            ("lru", "needs a capacity"),
            ("lru:", "not a size"),
            ("lru:0", "at least 1 item"),
            ("lru:0MB", "at least 1 byte"),
            ("lru:1000+lru:10", "more than once"),
            ("prefetch-children+prefetch:depth=2", "more than once"),
            ("none+lru:10", "cannot be combined"),
            ("prefetch", "needs a depth"),
            ("prefetch:depth=0", "depth must be"),
            ("prefetch:depth=65", "depth must be"),
            ("prefetch:level=2", "expected `depth=D`"),
            ("prefetch:depth=+2", "depth must be"),
            ("lfu:100", "unknown component"),
            ("lru:10++fixed:5", "empty component"),
            ("lru:1.5", "not a whole number of bytes"),
            ("lru:10 items", "not a size"),
            ("prefetch-children:3", "unknown component"),
        ];
        for (spec, why) in cases {
            let e = Strategy::parse(spec).unwrap_err();
            assert!(e.contains(why), "{spec:?}: {e}");
            assert!(
                e.contains("prefetch:depth=D"),
                "{spec:?}: the message lists what is allowed"
            );
        }
    }
}
